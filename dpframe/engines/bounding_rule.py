"""The contribution-bounding rule, once: which rows each person keeps.

Every engine executes this rule -- the compiled kernel (:mod:`dpframe.engines.bounding_kernel`),
the polars-only path (:mod:`dpframe.engines.bounding`) and Spark
(:mod:`dpframe.engines.spark`) -- so that the same records under the same key keep the same
rows on each (``tests/engines/test_bounding_parity.py``). Each person keeps at most
``max_groups`` groups and at most ``max_rows`` rows in each kept group:

1. **Codes** (:func:`codes`). Each row gets a person code and a group code, integers
   fixed by the values alone, in the values' own order: an integer, boolean or temporal
   value is its own (physical) integer, a string its rank among the strings present
   (lexically), an enum its declared index, a float or decimal its rank among the values
   present; several keys (or a key with nulls) combine in mixed radix in the keys'
   lexicographic order (ranks of the code tuples if that would pass 62 bits). Codes
   spanning ``max(2**20, 4 * rows)`` integers or more (or ``2**PERSON_BITS`` /
   ``2**GROUP_BITS``) become their dense ranks, in the same order.
2. **The key** (:func:`rule_key`): 128 bits, the first draw of the release's bounding
   generator (:meth:`dpframe.core.randomness.RandomSource.generator`: secure by default).
3. **Pairs** (:func:`pair_priority`, :func:`kept_pairs`). A ``(person, group)`` pair's
   priority is the top 32 bits of SipHash-1-3 (:func:`pair_hash`, the keyed
   pseudo-random function CPython and Rust hash with) of its two codes under the key;
   a person's pairs are ordered by ``(priority, group code)`` -- the group code breaks a
   tie of the 32 random bits (probability ``2**-32`` a comparison) in an order fixed
   before the data is seen -- and the first ``max_groups`` are kept.
4. **Rows** (:func:`row_key`, :func:`row_priority`, :func:`kept_positions`). A row of
   a kept pair with more than ``max_rows`` rows is kept iff its priority is among the
   pair's ``max_rows`` smallest. A row's priority: the top 32 bits of SipHash-1-3
   (:func:`row_hash`) of ``(person code, group code, position)`` under a **second**
   128-bit key, drawn from the same generator right after the pair key, then its
   position (the row's place among its pair's rows in the input's order), which breaks a
   tie of the 32 random bits (probability ``2**-32`` a comparison) and makes a pair's
   priorities distinct.

Why the sensitivities hold: a person's kept groups are a function of their own rows and
their own pairs' priorities, never of the file order, and in each kept group they keep
``min(rows, max_rows)`` rows. With integer persons and one integer key (codes that are
the values) the priorities are a function of the pair and the key alone; where a code is
a rank, distinct pairs still get distinct codes (never a hash that could merge two
persons), so under a secret key every other pair's priority is an independent uniform
draw. *Which* rows of an oversized pair are kept is a function of the pair's codes, its
number of rows and the second key only: under a secret key the ``max_rows`` smallest of
``n`` distinct pseudo-random priorities are a uniformly random ``max_rows``-subset of the
positions (exactly, but for a tie of the 32 random bits, broken by position), and a
subset of positions drawn independently of the rows is a uniform subset of the rows
whatever their order. Nothing in step 4 depends on another person's rows (no global
permutation, no count of the oversized rows elsewhere): the kept rows of one person are
a function of that person's rows, the codes and the keys, so an engine may bound the
persons in any partition of them (:mod:`dpframe.engines.bounding` does, out of core)
and get the same rows.

Examples
--------
>>> import numpy as np
>>> key = (1, 2)
>>> pc = np.array([7, 7, 7, 9], dtype=np.int64)
>>> gc = np.array([0, 1, 2, 0], dtype=np.int64)
>>> keep = kept_pairs(pc, gc, key, 2)
>>> int(keep[:3].sum()), bool(keep[3])
(2, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from dpframe.engines.driver import WIDE_INTEGERS

__all__ = [
    "GROUP_BITS",
    "PERSON_BITS",
    "RuleKeys",
    "codes",
    "encodable",
    "group_codes",
    "keep_smallest",
    "kept_pairs",
    "kept_positions",
    "pair_hash",
    "pair_priority",
    "person_codes",
    "row_hash",
    "row_key",
    "row_priority",
    "rule_key",
]

#: Group codes span fewer than ``2**GROUP_BITS`` integers after the rule's dense ranks
#: (the compiled kernel packs a code into a priority's low bits).
GROUP_BITS = 26
#: Person codes span fewer than ``2**PERSON_BITS`` integers after the dense ranks.
PERSON_BITS = 28
#: Above this many picks per segment, a segmented sort beats k rounds of minima.
_ROUNDS = 8
_U64 = 0xFFFFFFFFFFFFFFFF
_LOW = 1 << 32
#: Codes hashed at a time by the numpy reference (its temporaries stay in the cache).
_BLOCK = 1 << 14


# ---------------------------------------------------------------------------- the key


def rule_key(generator: np.random.Generator) -> tuple[int, int]:
    """The 128-bit SipHash key of a release's bounding: the generator's first draw.

    Examples
    --------
    >>> k = rule_key(np.random.default_rng(0))
    >>> len(k), all(0 <= w < 2**64 for w in k)
    (2, True)
    """
    words = generator.integers(0, 2**64, size=2, dtype=np.uint64)
    return int(words[0]), int(words[1])


def row_key(generator: np.random.Generator) -> tuple[int, int]:
    """The 128-bit SipHash key of the rule's row priorities (step 4): the generator's
    draw right after :func:`rule_key` (every engine draws both, in this order, whether
    or not a pair is oversized).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> pair, row = rule_key(rng), row_key(rng)
    >>> pair != row
    True
    """
    return rule_key(generator)


class RuleKeys:
    """A release's two rule keys (:func:`rule_key`, then :func:`row_key`), drawn from
    its bounding generator when a path of the engine first needs them: a path tried
    first and given up (records not clustered by person, say) leaves the same keys to
    the path that runs next, so the keys are the generator's first two draws whichever
    path bounds.

    Examples
    --------
    >>> keys = RuleKeys(np.random.default_rng(0))
    >>> keys.draw() == keys.draw(), keys.draw() == RuleKeys(np.random.default_rng(0)).draw()
    (True, True)
    """

    def __init__(self, generator: np.random.Generator) -> None:
        self._generator = generator
        self._keys: tuple[tuple[int, int], tuple[int, int]] | None = None

    def draw(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The pair key and the row key (drawn on the first call only)."""
        if self._keys is None:
            pair = rule_key(self._generator)
            self._keys = (pair, row_key(self._generator))
        return self._keys


# --------------------------------------------------------------------------- the hash


def _rotl(x: np.ndarray, b: int) -> np.ndarray:
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


def _sipround(
    v0: np.ndarray, v1: np.ndarray, v2: np.ndarray, v3: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    v0 = v0 + v1
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = v2 + v3
    v3 = _rotl(v3, 16) ^ v2
    v0 = v0 + v3
    v3 = _rotl(v3, 21) ^ v0
    v2 = v2 + v1
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def _siphash13(key: tuple[int, int], words: Sequence[np.ndarray]) -> np.ndarray:
    """SipHash-1-3 of messages of ``8 * len(words)`` bytes (little-endian 64-bit words)."""
    k0, k1 = (np.uint64(int(w) & _U64) for w in key)
    n = words[0].shape
    v0 = np.full(n, k0 ^ np.uint64(0x736F6D6570736575))
    v1 = np.full(n, k1 ^ np.uint64(0x646F72616E646F6D))
    v2 = np.full(n, k0 ^ np.uint64(0x6C7967656E657261))
    v3 = np.full(n, k1 ^ np.uint64(0x7465646279746573))
    for m in words:
        v3 = v3 ^ m
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 = v0 ^ m
    last = np.uint64(8 * len(words)) << np.uint64(56)
    v3 = v3 ^ last
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 = v0 ^ last
    v2 = v2 ^ np.uint64(0xFF)
    for _ in range(3):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def pair_hash(key: tuple[int, int], person: np.ndarray, group: np.ndarray) -> np.ndarray:
    """SipHash-1-3 of each ``(person, group)`` pair of codes under the 128-bit ``key``:
    the reference of the rule's pseudo-random function (numpy; the compiled kernel's own
    copy is held bit-equal to it by the tests). The message is 8 bytes -- the person's
    code, then the group's, as 32-bit little-endian words -- when both lie in
    ``[0, 2**32)``, else 16 bytes (two 64-bit words, two's complement); the length is
    hashed, so the two encodings never meet.

    Examples
    --------
    >>> h = pair_hash((0, 0), np.zeros(2, np.int64), np.array([0, 1], np.int64))
    >>> h.dtype.name, bool(h[0] != h[1])
    ('uint64', True)
    """
    p = np.ascontiguousarray(person, dtype=np.int64)
    g = np.ascontiguousarray(group, dtype=np.int64)
    out = np.empty(p.shape, dtype=np.uint64)
    for lo in range(0, p.size, _BLOCK):  # blocks that stay in the CPU cache
        pb, gb = p[lo : lo + _BLOCK], g[lo : lo + _BLOCK]
        short = (pb >= 0) & (pb < 2**32) & (gb >= 0) & (gb < 2**32)
        pu, gu = pb.view(np.uint64), gb.view(np.uint64)
        block = out[lo : lo + _BLOCK]
        if short.all():
            block[:] = _siphash13(key, [pu | (gu << np.uint64(32))])
            continue
        block[short] = _siphash13(key, [pu[short] | (gu[short] << np.uint64(32))])
        block[~short] = _siphash13(key, [pu[~short], gu[~short]])
    return out


def pair_priority(key: tuple[int, int], person: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The priority of each ``(person, group)`` pair: the top 32 bits of its
    :func:`pair_hash` (uint32). Ties go to the smaller group code.

    Examples
    --------
    >>> pair_priority((1, 2), np.array([5], np.int64), np.array([3], np.int64)).dtype.name
    'uint32'
    """
    return (pair_hash(key, person, group) >> np.uint64(32)).astype(np.uint32)


# ----------------------------------------------------------------- the k smallest


def keep_smallest(lens: np.ndarray, k: int, priority: np.ndarray) -> np.ndarray:
    """The ``k`` smallest ``priority`` of each contiguous segment (all of a shorter one).

    ``lens`` are the segments' lengths (each at least 1), ``priority`` one non-negative
    integer an item (below ``2**64 - 1``), distinct within a segment; returns a boolean
    mask over ``lens.sum()`` items: ``k`` rounds of segmented minima (sort-free), or one
    segmented sort for large ``k``.

    Examples
    --------
    >>> keep_smallest(np.array([3, 1]), 2, np.array([5, 1, 3, 9])).tolist()
    [False, True, True, True]
    """
    lens = np.asarray(lens, dtype=np.int64)
    keep = np.ones(int(lens.sum()), dtype=bool)
    big = lens > k
    if not big.any():
        return keep
    seg = np.repeat(np.arange(lens.size), lens)
    idx = np.flatnonzero(big[seg])  # items of segments that need a choice
    blens = lens[big]
    v = np.asarray(priority).astype(np.uint64)[idx]
    starts = np.concatenate(([0], np.cumsum(blens)[:-1]))
    chosen = np.zeros(idx.size, dtype=bool)
    if k <= _ROUNDS:
        w = v.copy()
        for _ in range(k):
            hit = w == np.repeat(np.minimum.reduceat(w, starts), blens)
            chosen |= hit
            w[hit] = np.uint64(_U64)  # above every priority
    else:
        bseg = np.repeat(np.arange(blens.size), blens)
        order = np.lexsort((v, bseg))
        rank = np.arange(idx.size) - np.repeat(starts, blens)
        chosen[order[rank < k]] = True
    keep[idx] = chosen
    return keep


def kept_pairs(
    person: np.ndarray, group: np.ndarray, key: tuple[int, int], max_groups: int
) -> np.ndarray:
    """Which ``(person, group)`` pairs (distinct, one an item) are kept: each person's
    ``max_groups`` smallest ``(pair_priority, group code)``. Returns a boolean mask.

    Examples
    --------
    >>> int(kept_pairs(np.array([1, 1]), np.array([0, 1]), (3, 4), 1).sum())
    1
    """
    person = np.asarray(person, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    keep = np.ones(person.size, dtype=bool)
    if person.size == 0:
        return keep
    order = np.argsort(person)  # persons contiguous (the order within: irrelevant)
    ps = person[order]
    lens = np.diff(np.flatnonzero(np.concatenate(([True], ps[1:] != ps[:-1], [True]))))
    if int(lens.max()) <= max_groups:
        return keep
    g = group[order]
    low = g - int(g.min())
    if int(low.max()) >= 2**32:
        raise ValueError("the group codes span more than 2**32 integers")
    prio = pair_priority(key, ps, g).astype(np.uint64) << np.uint64(32)
    keep[order] = keep_smallest(lens, max_groups, prio | low.astype(np.uint64))
    return keep


def row_hash(
    key: tuple[int, int], person: np.ndarray, group: np.ndarray, position: np.ndarray
) -> np.ndarray:
    """SipHash-1-3 of each row's ``(person code, group code, position)`` under the
    128-bit ``key`` (:func:`row_key`): the message is always 24 bytes, the three as
    64-bit little-endian words (two's complement). The reference of the rule's row
    function; the compiled kernel's copy is held bit-equal to it by the tests.

    Examples
    --------
    >>> z = np.zeros(2, np.int64)
    >>> h = row_hash((0, 0), z, z, np.array([0, 1], np.int64))
    >>> h.dtype.name, bool(h[0] != h[1])
    ('uint64', True)
    """
    words = [np.ascontiguousarray(x, dtype=np.int64) for x in (person, group, position)]
    out = np.empty(words[0].shape, dtype=np.uint64)
    for lo in range(0, out.size, _BLOCK):  # blocks that stay in the CPU cache
        block = [w[lo : lo + _BLOCK].view(np.uint64) for w in words]
        out[lo : lo + _BLOCK] = _siphash13(key, block)
    return out


def row_priority(
    key: tuple[int, int], person: np.ndarray, group: np.ndarray, position: np.ndarray
) -> np.ndarray:
    """The rule's priority of each row of an oversized pair (uint64): the top 32 bits of
    its :func:`row_hash`, then its ``position`` (in ``[0, 2**32 - 1)``) in the low 32
    bits -- a tie of the random bits goes to the smaller position, and a pair's rows
    never tie.

    Examples
    --------
    >>> z = np.zeros(3, np.int64)
    >>> prio = row_priority((1, 2), z, z, np.arange(3))
    >>> (prio & np.uint64(0xFFFFFFFF)).tolist()
    [0, 1, 2]
    """
    position = np.asarray(position, dtype=np.int64)
    if position.size and not (int(position.min()) >= 0 and int(position.max()) < _LOW - 1):
        raise ValueError("a position must lie in [0, 2**32 - 1): bound fewer rows a pair")
    high = (row_hash(key, person, group, position) >> np.uint64(32)) << np.uint64(32)
    return high | position.astype(np.uint64)


def kept_positions(
    person: np.ndarray,
    group: np.ndarray,
    lens: np.ndarray,
    max_rows: int,
    key: tuple[int, int],
) -> np.ndarray:
    """The rows kept of oversized pairs: ``person``, ``group`` and ``lens`` are the kept
    pairs' codes and numbers of rows (each more than ``max_rows``; any order of the
    pairs), ``key`` the :func:`row_key`; returns a mask over their rows, pair after
    pair, each pair's rows in position order: the ``max_rows`` smallest
    :func:`row_priority` of each pair.

    Examples
    --------
    >>> mask = kept_positions(np.array([0, 1]), np.array([0, 0]), np.array([3, 4]), 2, (1, 2))
    >>> int(mask[:3].sum()), int(mask[3:].sum())
    (2, 2)
    """
    lens = np.asarray(lens, dtype=np.int64)
    if lens.size == 0:
        return np.zeros(0, dtype=bool)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(starts, lens)
    pc = np.repeat(np.asarray(person, dtype=np.int64), lens)
    gc = np.repeat(np.asarray(group, dtype=np.int64), lens)
    return keep_smallest(lens, max_rows, row_priority(key, pc, gc, pos))


# ------------------------------------------------------------------------- the codes


def encodable(dtype: pl.DataType) -> bool:
    """Whether a column's values are their own integer codes (its physical integers, or
    a string's rank): the compiled kernel takes these; floats and decimals are ranked.

    Examples
    --------
    >>> encodable(pl.Int32()), encodable(pl.String()), encodable(pl.Float64())
    (True, True, False)
    """
    return (
        dtype.is_integer()
        or dtype.is_temporal()
        or isinstance(dtype, pl.Boolean | pl.String | pl.Categorical | pl.Enum)
    )


def _column_codes(column: pl.Series) -> pl.Series:
    """A column's integer codes as Int64 (null stays null): equal values, equal codes, in
    an order of the values fixed before the data is seen -- the values' own order
    (strings and categoricals lexically), an enum's declared order."""
    dtype = column.dtype
    if isinstance(dtype, pl.String | pl.Categorical):
        cats = column.cast(pl.Categorical) if isinstance(dtype, pl.String) else column
        seen = cats.drop_nulls().unique()
        rank = seen.cast(pl.String).rank("ordinal").cast(pl.Int64) - 1
        return cats.to_physical().replace_strict(
            seen.to_physical(), rank, default=None, return_dtype=pl.Int64
        )
    if isinstance(dtype, pl.Enum) or dtype.is_temporal():
        column = column.to_physical()
    if isinstance(dtype, pl.UInt64):
        return column.reinterpret(signed=True)  # the same 64 bits: still one code a value
    if dtype in WIDE_INTEGERS or not encodable(dtype):  # the values' rank, in their order
        return (column.rank("dense") - 1).cast(pl.Int64)
    return column.cast(pl.Int64)


def _group_codes(codes: list[pl.Series], rows: int) -> pl.Series:
    """One code a group: a key's own codes (one key without nulls), else the keys' codes
    in mixed radix (a null its own code), in the keys' lexicographic order; the dense
    ranks of the code tuples where that would not fit in 62 bits."""
    if not codes:
        return pl.repeat(0, rows, dtype=pl.Int64, eager=True).alias("g")
    if len(codes) == 1 and not codes[0].null_count():
        return codes[0].alias("g")
    widths: list[tuple[int, int]] = []
    for c in codes:  # Int64 codes: their least and greatest are ints (None if all null)
        lo = int(c.min() or 0)  # type: ignore[arg-type]
        hi = int(c.max()) if c.null_count() < c.len() else lo - 1  # type: ignore[arg-type]
        widths.append((lo, hi - lo + 1 + (1 if c.null_count() else 0)))
    if math.prod(max(w, 1) for _, w in widths) >= 1 << 62:  # would overflow
        frame = pl.DataFrame([c.alias(f"k{j}") for j, c in enumerate(codes)])
        ranks = frame.select(pl.struct(pl.all()).rank("dense", descending=False))
        return (ranks.to_series().cast(pl.Int64) - 1).alias("g")
    gid = pl.repeat(0, rows, dtype=pl.Int64, eager=True)
    for c, (lo, width) in zip(codes, widths, strict=True):
        gid = gid * width + (c - lo).fill_null(width - 1)
    return gid.alias("g")


def _dense(codes: pl.Series, limit: int) -> pl.Series:
    """Codes spanning ``limit`` integers or more as their dense ranks (same order)."""
    if codes.len() == 0 or int(codes.max()) - int(codes.min()) < limit:  # type: ignore[arg-type]
        return codes
    return (codes.rank("dense") - 1).cast(pl.Int64)


def person_codes(column: pl.Series, rows: int) -> pl.Series:
    """The rule's person code of each value of ``column`` (the records' person column,
    or its distinct values: a code depends only on which values are present), ``rows``
    the number of records (it sets the span above which codes are ranked).

    Examples
    --------
    >>> person_codes(pl.Series(["b", "a", "b"]), 3).to_list()
    [1, 0, 1]
    """
    limit = max(1 << 20, 4 * rows)
    return _dense(_column_codes(column), min(limit, 1 << PERSON_BITS)).alias("p")


def group_codes(frame: pl.DataFrame, keys: Sequence[str], rows: int) -> pl.Series:
    """The rule's group code of each row of ``frame`` (the records' keys, or their
    distinct tuples: a code depends only on which tuples are present), ``rows`` the
    number of records.

    Examples
    --------
    >>> group_codes(pl.DataFrame({"g": [10, 20, 10]}), ["g"], 3).to_list()
    [10, 20, 10]
    """
    limit = max(1 << 20, 4 * rows)
    gc = _group_codes([_column_codes(frame[c]) for c in keys], frame.height)
    return _dense(gc, min(limit, 1 << GROUP_BITS)).alias("g")


def codes(
    frame: pl.DataFrame, person: str, keys: Sequence[str], rows: int
) -> tuple[pl.Series, pl.Series]:
    """The person and group codes of each row of ``frame`` (the records, or their
    distinct ``(person, keys)`` pairs: the codes depend only on which values are present)
    and ``rows``, the number of records (it sets the span above which codes are ranked):
    :func:`person_codes` and :func:`group_codes`.

    Examples
    --------
    >>> df = pl.DataFrame({"p": ["b", "a", "b"], "g": [10, 20, 10]})
    >>> pc, gc = codes(df, "p", ["g"], 3)
    >>> pc.to_list(), gc.to_list()
    ([1, 0, 1], [10, 20, 10])
    """
    return person_codes(frame[person], rows), group_codes(frame, keys, rows)
