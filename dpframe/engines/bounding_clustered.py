"""Person-level bounding of records clustered by person: one read, nothing spilled.

When each person's records lie near one another in the input (a household survey written
household by household, or region by region; a file sorted by person), the rule of
:mod:`dpframe.engines.bounding_rule` can be executed as the records stream past, a
window of them at a time: no partition of the records by person, no spill, memory in one
window and the person bitset, not in the rows. :func:`clustered_parts` tries it:

1. **A probe**: the first batch of the person column. If a person's consecutive rows in
   it lie more than :data:`WINDOW` rows apart, the input is not clustered: None, nothing
   drawn, nothing else read (the caller bounds by partition instead).
2. **One read of the records** in the streaming engine's batches, in the input's order.
   The rule's codes must be the values themselves (a person column and at most one key
   whose codes are their values, :func:`~dpframe.engines.bounding_spill.streamable`):
   the person bitset and the per-group sums cover the codes met so far, grown as a batch
   meets new ones (:class:`_Extent`), and the path gives up where a span reaches the
   rule's ranking threshold (the codes would be ranks) -- nothing about the codes is
   read before the records. Each window -- the rows carried from the last window, then
   the next batch -- is grouped by person in the compiled :func:`_bound_window` (an
   open-addressing table, a counting sort that keeps each person's rows in the input's
   order); a person whose last row lies more than :data:`WINDOW` rows before the
   window's end is *closed* and bounded by the rule (the pair priorities computed only
   for a person with more groups than ``max_groups``, the row priorities only for a
   kept pair with more than ``max_rows`` rows: a person whose rows are all kept needs no
   hash); the others' rows are carried to the next window, and the last window closes
   everyone.

**Why a person is never bounded twice.** As a person is closed, the compiled code marks
them in the bitset, and gives up (None: the caller bounds by partition, from the start,
with the same keys) the moment a closed person is met again: every person counted was
counted once, with all their records of this read, so each keeps at most ``max_groups``
groups and ``max_rows`` rows in each, exactly as the rule says (which rows, too: the same
as every other path for the same keys). The check is made on the same read as the sums:
no earlier pass vouches for a later one. A missing person or key gives the path up too
(the partition path refuses a missing person, counting them all); a different number of
records than counted raises :class:`~dpframe.errors.InvalidDataError` (the input
changed between two reads).

A person with more rows than the memory setting allows gives up too. Sums are added
person by person: equal to the other paths' up to the order of float additions; counts
bit for bit.

Examples
--------
>>> import numpy as np
>>> import polars as pl
>>> from dpframe.engines.bounding_rule import RuleKeys
>>> lf = pl.LazyFrame({"p": [1, 1, 1, 2], "g": [0, 0, 1, 0], "x": [1.0, 2.0, 3.0, 4.0]})
>>> out = clustered_parts(lf, "p", ["g"], [pl.col("x")], [], 4, (1, 5),
...                       RuleKeys(np.random.default_rng(0)), 2**20)
>>> int(out.kept.sum()), int(out.persons.sum())
(3, 2)
>>> far = pl.LazyFrame({"p": [1] + [2] * WINDOW + [1], "g": 0, "x": 1.0})
>>> clustered_parts(far, "p", ["g"], [pl.col("x")], [], WINDOW + 2, (1, 5),
...                 RuleKeys(np.random.default_rng(0)), 2**20) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba as nb
import numpy as np
import polars as pl

from dpframe.engines.bounding_kernel import _pair_hash, _row_priority
from dpframe.engines.bounding_rule import (
    GROUP_BITS,
    PERSON_BITS,
    RuleKeys,
    group_codes,
    person_codes,
)
from dpframe.errors import InvalidDataError

__all__ = ["WINDOW", "Clustered", "clustered_parts", "load_kernels"]

#: A person's consecutive rows must lie at most this many rows apart (the rows of the
#: persons met in a window's last ``WINDOW`` rows are carried to the next window).
WINDOW = 1 << 15
#: Rows of a batch of the streaming read.
_BATCH = 1 << 18
#: What :func:`_bound_window` returns when it meets a person bounded already.
_NOT_CLUSTERED = -1
#: What it returns when a code lies outside the ranges found before the read.
_OUTSIDE = -2
#: What a kernel returns when a lookup probed more than :data:`_PROBES` slots.
_CROWDED = -3
#: The most slots of the person table a lookup probes before the table's hash changes.
_PROBES = 64
#: Up to this many rows, a person's rows are ordered by group by insertion (else a merge
#: sort); up to this ``max_groups`` or ``max_rows``, the smallest priorities are chosen by
#: insertion into sorted slots (else a sort).
_SMALL = 16
#: The codes the bitset's and the sums' ends must lie in (the kernel's int64 spec).
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Clustered:
    """What :func:`clustered_parts` returns: by group code (from ``first``), the kept
    rows, the sums of each value column (groups, values) and the kept persons; each
    flag's count over all records.

    Examples
    --------
    >>> c = Clustered(0, np.zeros(1, np.int64), np.zeros((1, 0)), np.zeros(1, np.int64), [])
    >>> c.kept.size
    1
    """

    first: int
    kept: np.ndarray
    sums: np.ndarray
    persons: np.ndarray
    flags: list[int]


@nb.njit(inline="always")
def _smallest(prio, n, k, at, best):
    # the indices of the k smallest of prio[:n] (distinct), ascending, into at[:k]
    # (``best``: scratch of k)
    if k > _SMALL:
        order = np.argsort(prio[:n])
        for u in range(k):
            at[u] = order[u]
        return
    nbest = 0
    for j in range(n):
        x = prio[j]
        if nbest == k and x >= best[k - 1]:
            continue
        u = min(nbest, k - 1)
        while u > 0 and best[u - 1] > x:
            best[u] = best[u - 1]
            at[u] = at[u - 1]
            u -= 1
        best[u] = x
        at[u] = j
        nbest = min(nbest + 1, k)


@nb.njit(inline="always")
def _person_index(table, gen, shift, ids, nq, x):
    # the index of person x among the window's persons (ids[:nq], in order of first
    # appearance), found in the open-addressing table (slots stamped ``gen``) or added
    # as index nq; returns the index (-1: more than _PROBES slots probed) and whether it
    # was added. ``shift`` 0: the slot is the code folded onto its low bits (nearby
    # codes in nearby slots: a window of clustered persons stays in the cache), else a
    # multiplicative hash's top bits
    mask = np.uint64(table.shape[0] - 1)
    u = np.uint64(x)
    if shift == 0:
        h = (u ^ (u >> np.uint64(20)) ^ (u >> np.uint64(40))) & mask
    else:
        h = ((u * np.uint64(0x9E3779B97F4A7C15)) >> shift) & mask
    for _ in range(_PROBES):
        slot = np.int64(h)
        if table[slot, 0] != gen:
            table[slot, 0] = gen
            table[slot, 1] = nq
            ids[nq] = x
            return nq, True
        q = table[slot, 1]
        if ids[q] == x:
            return q, False
        h = (h + np.uint64(1)) & mask
    return -1, False


@nb.njit(cache=True)
def _within(p, window, table, meta):
    # 1 if every person's consecutive rows in p lie at most ``window`` rows apart, else
    # 0 (_CROWDED: try again with the other hash; ``table``, ``meta``: as for
    # _bound_window)
    meta[0] += 1
    gen = meta[0]
    shift = np.uint64(meta[1] if meta[2] else 0)
    n = p.size
    ids = np.empty(n, dtype=np.int64)
    last = np.empty(n, dtype=np.int64)
    nq = 0
    for i in range(n):
        q, added = _person_index(table, gen, shift, ids, nq, p[i])
        if q < 0:
            return _CROWDED
        if added:
            nq += 1
        elif i - last[q] > window:
            return 0
        last[q] = i
    return 1


@nb.njit(cache=True)
def _group_rows(p, table, gen, shift, work):
    # the window's persons: each row's person index (``who``, by first appearance:
    # ``ids``), their counts of rows and last rows, in the scratch ``work`` (see
    # _Scratch); returns the number of persons, -1 if the table crowded
    who, ids, count, last = work[0], work[1], work[2], work[3]
    nq = 0
    q = 0
    for i in range(p.size):
        x = p[i]
        if i == 0 or x != p[i - 1]:  # a new run of rows: look its person up
            q, added = _person_index(table, gen, shift, ids, nq, x)
            if q < 0:
                return -1
            if added:
                count[q] = 0
                nq += 1
        who[i] = q
        count[q] += 1
        last[q] = i
    return nq


@nb.njit(cache=True)
def _bound_persons(p, g, vals, args, work):
    # the window's closed persons bounded by the rule into ``acc`` (kept rows, sums,
    # persons by group code - g0), its open persons marked (``work[6]``); ``work``: the
    # scratch filled by _group_rows for ``nq`` persons; ``args``: close_from, spec,
    # keys, seen (as for _bound_window), acc, nq. Returns 0, _NOT_CLUSTERED or _OUTSIDE
    close_from, spec, keys, seen, acc, nq = args
    who, ids, count, last, first, order = work[0], work[1], work[2], work[3], work[4], work[5]
    open_ = work[6]
    kept, sums, persons = acc
    p0 = spec[0]
    p1 = spec[1]
    g0 = spec[2]
    g1 = spec[3]
    k = spec[4]
    r = spec[5]
    first[0] = 0  # the rows by person, each person's in input order (a counting sort)
    for j in range(nq):
        first[j + 1] = first[j] + count[j]
    for i in range(p.size):
        j = who[i]
        order[first[j + 1] - count[j]] = i
        count[j] -= 1
    longest = 1
    for j in range(nq):
        count[j] = first[j + 1] - first[j]
        longest = max(longest, count[j])
    room = max(longest, k, r) + 1
    rows = np.empty(room, dtype=np.int64)  # a person's rows by group (stable)
    prio = np.empty(room, dtype=np.uint64)
    at = np.empty(room, dtype=np.int64)
    firsts = np.empty(room + 1, dtype=np.int64)  # each pair's first place in rows
    chosen = np.empty(room, dtype=np.int64)  # the kept pairs
    best = np.empty(room, dtype=np.uint64)
    status = 0
    for j in range(nq):
        open_[j] = last[j] >= close_from
        if open_[j]:
            continue
        pp = ids[j]
        if pp < p0 or pp > p1:
            status = _OUTSIDE
            break
        d = pp - p0
        word = d >> 6
        bit = np.uint64(1) << np.uint64(d & 63)
        if seen[word] & bit:
            status = _NOT_CLUSTERED
            break
        seen[word] |= bit
        c = count[j]
        a = first[j]
        gc = g[order[a]]
        one = True
        for t in range(a + 1, a + c):
            if g[order[t]] != gc:
                one = False
                break
        if one and c <= r and g0 <= gc <= g1:  # the common case: one pair, every row kept
            gi = gc - g0
            persons[gi] += 1
            kept[gi] += c
            for v in range(vals.shape[0]):
                total = 0.0
                for t in range(a, a + c):
                    total += vals[v, order[t]]
                sums[gi, v] += total
            continue
        for t in range(c):
            rows[t] = order[a + t]
        # the person's pairs: their rows by group code, each pair's in input order
        if not one and c <= _SMALL:  # an insertion sort, stable
            for t in range(1, c):
                i = rows[t]
                u = t
                while u > 0 and g[rows[u - 1]] > g[i]:
                    rows[u] = rows[u - 1]
                    u -= 1
                rows[u] = i
        elif not one:  # a merge sort, stable
            mine = rows[:c].copy()
            by = np.argsort(g[mine], kind="mergesort")
            for t in range(c):
                rows[t] = mine[by[t]]
        npairs = 0
        for t in range(c):
            x = g[rows[t]]
            if x < g0 or x > g1:
                status = _OUTSIDE
                break
            if t == 0 or x != g[rows[t - 1]]:
                firsts[npairs] = t
                npairs += 1
        if status != 0:
            break
        firsts[npairs] = c
        nkept = min(npairs, k)
        if npairs <= k:
            for u in range(npairs):
                chosen[u] = u
        else:  # the rule's k pairs: smallest (32 random bits, group code)
            for u in range(npairs):
                gc = g[rows[firsts[u]]]
                h = _pair_hash(keys[0], keys[1], pp, gc)
                prio[u] = ((h >> np.uint64(32)) << np.uint64(32)) | np.uint64(gc - g0)
            _smallest(prio, npairs, k, chosen, best)
        for u in range(nkept):  # each kept pair's rows: all, or the rule's r
            lo = firsts[chosen[u]]
            size = firsts[chosen[u] + 1] - lo
            gc = g[rows[lo]]
            gi = gc - g0
            persons[gi] += 1
            if size <= r:
                kept[gi] += size
                for v in range(vals.shape[0]):
                    total = 0.0
                    for t in range(lo, lo + size):
                        total += vals[v, rows[t]]
                    sums[gi, v] += total
                continue
            for t in range(size):
                prio[t] = _row_priority(keys[2], keys[3], pp, gc, t)
            _smallest(prio, size, r, at, best)
            kept[gi] += r
            for v in range(vals.shape[0]):
                total = 0.0
                for t in range(r):
                    total += vals[v, rows[lo + at[t]]]
                sums[gi, v] += total
    return status


@nb.njit(cache=True)
def _bound_window(p, g, vals, close_from, spec, keys, seen, acc, scratch):
    # the persons of a window of records (p, g and the values ``vals`` (m, rows), in the
    # input's order) whose last row lies before ``close_from`` bounded by the rule into
    # ``acc`` (kept rows, sums, persons, by group code - g0); ``spec``: p0, p1, g0, g1,
    # max_groups, max_rows; ``keys``: the pair key then the row key (four uint64
    # words); ``seen``: a bitset of the persons bounded so far; ``scratch``: see
    # _Scratch. Returns a status (0; _NOT_CLUSTERED when a person was bounded already,
    # _OUTSIDE when a code lies outside the ranges, _CROWDED when the table crowded,
    # before anything was bounded) and the rows of the persons left open (ascending)
    table, work, meta = scratch
    meta[0] += 1
    shift = np.uint64(meta[1] if meta[2] else 0)
    nq = _group_rows(p, table, meta[0], shift, work)
    if nq < 0:
        return _CROWDED, np.empty(0, dtype=np.int64)
    status = _bound_persons(p, g, vals, (close_from, spec, keys, seen, acc, nq), work)
    who, open_ = work[0], work[6]
    nopen = 0
    for i in range(p.size):
        nopen += open_[who[i]]
    rest = np.empty(nopen, dtype=np.int64)
    at = 0
    for i in range(p.size):
        if open_[who[i]]:
            rest[at] = i
            at += 1
    return status, rest


class _Scratch:
    """What the compiled code of a window reuses from one window to the next (nothing
    allocated a window: fresh pages cost more than the work): the open-addressing
    table of persons (a slot: stamp, index; a power of two at least twice the rows,
    never cleared: its slots are stamped with a generation) and the arrays of a row or
    a person (the rows' person indices, the persons' codes, counts of rows, last rows,
    first places, the rows by person, whether open)."""

    def __init__(self) -> None:
        self.table = np.zeros((0, 2), dtype=np.int64)
        self.work = np.zeros((7, 0), dtype=np.int64)
        # the generation, 64 - log2 of the tables' size, whether the code hash crowded
        self.meta = np.zeros(3, dtype=np.int64)

    def fit(self, rows: int) -> None:
        """Room for a window of ``rows`` rows."""
        if self.table.shape[0] < 2 * rows:
            bits = max(10, int(2 * rows - 1).bit_length())
            self.table = np.zeros((1 << bits, 2), dtype=np.int64)
            self.meta[1] = 64 - bits
        if self.work.shape[1] < rows + 1:
            cap = rows + rows // 4 + 1
            self.work = np.zeros((7, cap), dtype=np.int64)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.table, self.work, self.meta


@nb.njit(cache=True)
def _extent(a):
    # the least and greatest value of a non-empty int64 array, in one pass
    lo = a[0]
    hi = a[0]
    for x in a:
        lo = min(lo, x)
        hi = max(hi, x)
    return lo, hi


class _Extent:
    """The person bitset and the per-group sums, over the codes met so far: grown (with
    room to spare) as a batch meets lower or higher codes, so nothing about the codes is
    read before the records. Gives up (:meth:`cover` is False) where a span reaches the
    rule's ranking threshold -- the codes would be ranks, not the values -- or the
    bitset and the sums would pass the memory setting."""

    def __init__(self, values: int, rows: int, memory: int) -> None:
        limit = max(1 << 20, 4 * rows)
        self.limits = (min(limit, 1 << PERSON_BITS), min(limit, 1 << GROUP_BITS))
        self.values = values
        self.memory = memory
        self.persons: tuple[int, int] | None = None  # the least and greatest code met
        self.groups: tuple[int, int] | None = None
        self.first = 0  # the bitset's first code (a multiple of 64)
        self.seen = np.zeros(0, dtype=np.uint64)
        self.g0 = 0  # the sums' first group code
        self.acc = (np.zeros(0, np.int64), np.zeros((0, values)), np.zeros(0, np.int64))

    def spec(self, bounds: tuple[int, int]) -> np.ndarray:
        """The kernel's ``spec``: the codes the bitset and the sums cover, the bounds."""
        last = self.first + 64 * self.seen.size - 1
        g1 = self.g0 + self.acc[0].size - 1
        return np.array([self.first, last, self.g0, g1, *bounds], dtype=np.int64)

    def cover(self, p: np.ndarray, g: np.ndarray) -> bool:
        """Room for the codes of ``p`` and ``g`` (non-empty); False: give up."""
        plo, phi = (int(v) for v in _extent(p))
        glo, ghi = (int(v) for v in _extent(g))
        if self.persons is not None:
            plo, phi = min(plo, self.persons[0]), max(phi, self.persons[1])
            glo, ghi = min(glo, self.groups[0]), max(ghi, self.groups[1])
        if phi - plo >= self.limits[0] or ghi - glo >= self.limits[1]:
            return False
        self.persons, self.groups = (plo, phi), (glo, ghi)
        last = self.first + 64 * self.seen.size - 1
        if not self.seen.size or plo < self.first or phi > last:
            spare = (phi - plo) // 2 + 64
            first = (plo - spare) & ~63
            words = ((phi + spare - first) >> 6) + 1
            if first < _INT64[0] or first + 64 * words - 1 > _INT64[1]:
                return False  # codes at the edge of int64: the partition path bounds them
            seen = np.zeros(words, dtype=np.uint64)
            at = (self.first - first) >> 6
            seen[at : at + self.seen.size] = self.seen
            self.first, self.seen = first, seen
        g1 = self.g0 + self.acc[0].size - 1
        if not self.acc[0].size or glo < self.g0 or ghi > g1:
            spare = (ghi - glo) // 2 + 1
            g0 = glo - spare
            n = ghi + spare - g0 + 1
            if g0 < _INT64[0] or g0 + n - 1 > _INT64[1]:
                return False
            at = self.g0 - g0
            grown = []
            for a in self.acc:
                b = np.zeros((n, *a.shape[1:]), dtype=a.dtype)
                b[at : at + a.shape[0]] = a
                grown.append(b)
            self.g0, self.acc = g0, (grown[0], grown[1], grown[2])
        used = 8 * self.seen.size + self.acc[0].size * (16 + 8 * self.values)
        return used <= self.memory


def _clustered_head(frame: pl.LazyFrame, person: pl.Expr, scratch: _Scratch) -> bool:
    """Whether the first batch of the person column holds each person's consecutive rows
    at most :data:`WINDOW` rows apart."""
    for batch in frame.select(person.alias("p")).collect_batches(
        chunk_size=_BATCH, engine="streaming"
    ):
        p = np.ascontiguousarray(batch.get_column("p").drop_nulls().to_numpy(), dtype=np.int64)
        scratch.fit(p.size)
        found = _within(p, WINDOW, scratch.table, scratch.meta)
        if found == _CROWDED:  # the multiplicative hash from now on
            scratch.meta[2] = 1
            found = _within(p, WINDOW, scratch.table, scratch.meta)
        return found == 1
    return True


def _changed(what: str) -> InvalidDataError:
    return InvalidDataError(
        f"the records changed between two reads of them ({what}): person-level bounding "
        "reads its input several times; bound a stable input (e.g. a file that is not "
        "being written)"
    )


def clustered_parts(
    frame: pl.LazyFrame,
    person: str,
    keys: list[str],
    values: Sequence[pl.Expr],
    flags: Sequence[pl.Expr],
    rows: int,
    bounds: tuple[int, int],
    rule_keys: RuleKeys,
    memory: int,
) -> Clustered | None:
    """The records bounded window by window in one streaming read, if each person's
    records lie near one another (see the module docstring); None (the caller bounds by
    partition) if they do not, if a code is not the value itself, or if the bitset, the
    sums or a person's rows would pass ``memory``.

    Parameters
    ----------
    frame : polars.LazyFrame
        The records (read for a probe, the codes' ranges and once in batches).
    person : str
        The person column (codes that are its values).
    keys : list of str
        At most one group key (codes that are its values).
    values : sequence of polars.Expr
        Each summed column's values (cast to Float64).
    flags : sequence of polars.Expr
        Each bad-value flag (a Boolean a row), counted over all records.
    rows : int
        The number of records.
    bounds : tuple of two ints
        The unit's ``(max_groups, max_rows)``.
    rule_keys : RuleKeys
        The release's rule keys (drawn only once the read starts).
    memory : int
        The bytes the bitset of persons, the per-group sums and the rows carried from a
        window to the next may use.

    Returns
    -------
    Clustered or None

    Examples
    --------
    >>> lf = pl.LazyFrame({"p": [3, 3, 5], "g": [1, 2, 1], "x": [1.0, 2.0, 3.0]})
    >>> out = clustered_parts(lf, "p", ["g"], [pl.col("x")], [], 3, (2, 1),
    ...                       RuleKeys(np.random.default_rng(0)), 2**20)
    >>> out.first, out.kept.tolist(), out.sums[:, 0].tolist()
    (1, [2, 1], [4.0, 2.0])
    """
    if len(keys) > 1:
        return None
    pe = pl.col(person).to_physical().cast(pl.Int64)
    ge = pl.col(keys[0]).to_physical().cast(pl.Int64) if keys else pl.lit(0, dtype=pl.Int64)
    scratch = _Scratch()
    if not _clustered_head(frame, pe, scratch):
        return None
    m = len(values)
    extent = _Extent(m, rows, memory)
    # the rows a window may carry: those of its last WINDOW rows' persons, and as many
    # more as the memory setting holds (a person whose rows never lie WINDOW apart)
    longest = 2 * WINDOW + memory // (64 + 8 * m)
    key, rows_key = rule_keys.draw()
    hkeys = np.array([w & 0xFFFFFFFFFFFFFFFF for w in (*key, *rows_key)], dtype=np.uint64)
    totals = [0] * len(flags)
    vnames = [f"v{j}" for j in range(m)]
    batches = frame.select(
        pe.alias("p"),
        ge.alias("g"),
        *[e.cast(pl.Float64).alias(n) for e, n in zip(values, vnames, strict=True)],
        *[e.alias(f"b{j}") for j, e in enumerate(flags)],
    )

    def bound(cols: list[np.ndarray], close_from: int) -> np.ndarray | None:
        """The window's closed persons bounded; the rows left open (None: give up)."""
        scratch.fit(cols[0].size)
        n = cols[0].size  # the values as (m, rows): one column a view, more stacked
        vals = cols[2][None, :] if m == 1 else np.stack(cols[2:]) if m else np.empty((0, n))
        spec = extent.spec(bounds)
        args = (cols[0], cols[1], vals, close_from, spec, hkeys, extent.seen, extent.acc)
        status, rest = _bound_window(*args, scratch.arrays())
        if status == _CROWDED and not scratch.meta[2]:  # nothing bounded: try the other hash
            scratch.meta[2] = 1
            status, rest = _bound_window(*args, scratch.arrays())
        if status == _CROWDED:  # crowded by both hashes: give up, nothing bounded twice
            return None
        if status == _OUTSIDE:
            raise _changed("a code outside the ranges covered")
        return rest if status == 0 else None  # 0: bounded; else not clustered

    carried: list[np.ndarray] = []  # the open persons' rows: persons, groups, each value
    read = 0
    for batch in batches.collect_batches(chunk_size=_BATCH, engine="streaming"):
        if batch.height == 0:
            continue
        if batch["p"].null_count() or batch["g"].null_count():
            return None  # a missing id (the partition path refuses it) or key
        read += batch.height
        for j in range(len(flags)):
            totals[j] += int(batch[f"b{j}"].sum() or 0)
        cols = [
            np.ascontiguousarray(batch.get_column(c).to_numpy(), dtype=np.int64 if i < 2 else None)
            for i, c in enumerate(["p", "g", *vnames])
        ]
        if not extent.cover(cols[0], cols[1]):
            return None
        if carried:
            cols = [np.concatenate((a, b)) for a, b in zip(carried, cols, strict=True)]
        rest = bound(cols, cols[0].size - WINDOW)
        if rest is None or rest.size > longest:
            return None
        carried = [c[rest] for c in cols] if rest.size else []
    if carried and bound(carried, carried[0].size) is None:
        return None
    if read != rows:
        raise _changed(f"{read} records read, {rows} counted")
    if extent.persons is None or extent.groups is None:
        return None  # no records
    (p0, p1), (g0, g1) = extent.persons, extent.groups
    same = person_codes(pl.Series([p0, p1]), rows).to_list() == [p0, p1]
    if keys:  # the rule's codes are the values (the spans stayed under the thresholds)
        ends = group_codes(pl.DataFrame({"g": [g0, g1]}), ["g"], rows).to_list()
        same = same and ends == [g0, g1]
    if not same:
        return None
    lo, hi = g0 - extent.g0, g1 - extent.g0 + 1
    kept, sums, persons = (a[lo:hi] for a in extent.acc)
    return Clustered(g0, kept, sums, persons, totals)


def load_kernels() -> None:
    """Run this module's compiled kernels once on a few rows: compiled on the first call
    in an environment (cached on disk), loaded from the cache in every later process.

    Examples
    --------
    >>> load_kernels()
    """
    p = np.array([3, 3, 4], dtype=np.int64)
    _extent(p)
    scratch = _Scratch()
    scratch.fit(p.size)
    _within(p, WINDOW, scratch.table, scratch.meta)
    spec = np.array([3, 4, 0, 1, 1, 1], dtype=np.int64)
    acc = (np.zeros(2, np.int64), np.zeros((2, 1)), np.zeros(2, np.int64))
    seen = np.zeros(1, dtype=np.uint64)
    keys = np.arange(4, dtype=np.uint64)
    vals = np.ones((1, p.size))
    _bound_window(p, np.zeros(3, np.int64), vals, 3, spec, keys, seen, acc, scratch.arrays())
