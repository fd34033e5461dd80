"""Compiled kernels of person-level bounding: each person's kept rows in a few linear passes.

The polars engine's fast path for a person-level grouped release
(:func:`dpframe.engines.bounding.bounded_grouped_parts`) executes the rule of
:mod:`dpframe.engines.bounding_rule` (the same kept rows as the polars-only path and
Spark for the same key) on its integer codes: ``pc``, a person code per row (spanning
fewer than ``2**PERSON_BITS`` integers), and ``gc``, a group code per row (spanning fewer
than ``2**GROUP_BITS``). Nothing here sorts the records or shuffles them:

1. **Pair priorities** (in the partition, parallel): every row gets a 64-bit priority,
   the same for every row of a ``(person, group)`` pair: the rule's 32 random bits (the
   top bits of SipHash-1-3 of the pair's codes under the release's key; this module's
   compiled copy, :func:`pair_hash`, is held bit-equal to the rule's reference by the
   tests), then the person's place in its bucket, then the group code. Within a person
   the priorities order the pairs as the rule does: by the random bits, then the group
   code (two pairs of a person never tie: the cap below is exact, always).
2. **Partition by person** (a counting scatter by ``pc >> shift``, in runs of the input
   pieces): each bucket holds every record of at most ``2**shift`` persons, so the
   per-person state of a bucket fits in the CPU's L2 cache. A record is its priority and
   its values: 8 bytes and 8 a value, in arrays numpy backs with huge pages.
3. **Choose and sum** (parallel over buckets): in one pass over a bucket, each person
   keeps the ``max_groups`` pairs of smallest priority (an insertion into ``max_groups``
   sorted slots per person), with each kept pair's number of rows and sums; then each
   kept pair with at most ``max_rows`` rows is added to its group. A kept pair with more
   rows is **oversized**: a second pass over that bucket (only then) marks its records
   :data:`OVERSIZED`, the marks are put back on their rows by replaying the scatter over
   the runs that hold one, and the caller keeps the rows the rule's
   :func:`~dpframe.engines.bounding_rule.kept_positions` chooses.

Why this bounds sensitivities: see :mod:`dpframe.engines.bounding_rule`.

numba compiles the kernels on first use (a few seconds, cached on disk afterwards);
``import dpframe`` does not import this module (the polars engine imports it on the
first person-level release).

Examples
--------
>>> import numpy as np
>>> from dpframe.engines.bounding_kernel import KEPT, bounded_sums
>>> pid = np.array([0, 0, 0, 1], dtype=np.int64)
>>> gid = np.array([0, 1, 2, 0], dtype=np.int64)
>>> kept, sums, group_row, marks = bounded_sums(
...     pid, gid, np.ones((1, 4)), (1, 2), 1, 1, mark_kept=True
... )
>>> int((marks[:3] == KEPT).sum()), int(marks[3]), int(kept.sum()), float(sums.sum())
(1, 1, 2, 2.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np
from numba.typed import List

from dpframe.engines.bounding_rule import GROUP_BITS, PERSON_BITS

__all__ = [
    "DROPPED",
    "GROUP_BITS",
    "KEPT",
    "OVERSIZED",
    "PERSON_BITS",
    "bounded_sums",
    "pair_hash",
    "value_range",
]

#: A row's mark: not kept (its pair is not among the person's kept groups).
DROPPED = 0
#: A row's mark: kept (its pair is kept and has at most ``max_rows`` rows).
KEPT = 1
#: A row's mark: its pair is kept but has more than ``max_rows`` rows.
OVERSIZED = 2
#: Random bits of a priority (the same whatever the data: see the module docstring).
_RANDOM_BITS = 32
# Group codes must span fewer than ``2**GROUP_BITS`` integers (a priority holds the
# random bits, the person's place in its bucket, at least 64 a bucket, and the code);
# person codes fewer than ``2**PERSON_BITS`` (the buckets' counts stay small). The rule's
# codes (:func:`dpframe.engines.bounding_rule.codes`) are ranked to fit.
#: Bytes of per-person state a bucket may use (it stays in the CPU's L2 cache).
_STATE_BYTES = 1 << 19

_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


@nb.njit(inline="always")
def _rotl(x, b):
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@nb.njit(inline="always")
def _sipround(v0, v1, v2, v3):
    v0 += v1
    v1 = _rotl(v1, 13)
    v1 ^= v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, 21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, 17)
    v1 ^= v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@nb.njit(inline="always")
def _sip13(k0, k1, m0, m1, nwords):
    # SipHash-1-3 of the message of ``nwords`` (1 or 2) little-endian 64-bit words m0, m1:
    # the kernel's copy of :func:`dpframe.engines.bounding_rule.pair_hash`'s function
    v0 = k0 ^ np.uint64(0x736F6D6570736575)
    v1 = k1 ^ np.uint64(0x646F72616E646F6D)
    v2 = k0 ^ np.uint64(0x6C7967656E657261)
    v3 = k1 ^ np.uint64(0x7465646279746573)
    v3 ^= m0
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= m0
    if nwords == 2:
        v3 ^= m1
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m1
    last = np.uint64(8 * nwords) << np.uint64(56)
    v3 ^= last
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= last
    v2 ^= np.uint64(0xFF)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@nb.njit(inline="always")
def _pair_hash(k0, k1, p, g):
    # SipHash-1-3 of the pair's codes: 8 bytes (p, then g, as 32-bit words) when both
    # fit in 32 bits, else 16 (two 64-bit words); the length is hashed, so the two
    # encodings never meet and each pair has its own message
    if p >= 0 and g >= 0 and p < 4294967296 and g < 4294967296:
        return _sip13(k0, k1, np.uint64(p) | (np.uint64(g) << np.uint64(32)), np.uint64(0), 1)
    return _sip13(k0, k1, np.uint64(p), np.uint64(g), 2)


@nb.njit(cache=True)
def _pair_hash_many(k0, k1, p, g):
    out = np.empty(p.size, dtype=np.uint64)
    for i in range(p.size):
        out[i] = _pair_hash(k0, k1, p[i], g[i])
    return out


@nb.njit(cache=True, parallel=True)
def _value_range(pieces):
    n = len(pieces)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    for c in nb.prange(n):
        x = pieces[np.int64(c)]
        a = lo[c]
        b = hi[c]
        for i in range(x.size):
            a = min(a, x[i])
            b = max(b, x[i])
        lo[c] = a
        hi[c] = b
    return lo.min(), hi.max()


@nb.njit(cache=True, parallel=True)
def _partition(pids, gids, vals, ranges, m, p0, p1, g0, g1, k0, k1, shift, gbits, qk, vp):
    # ``ranges`` cuts the pieces into runs of consecutive pieces, one histogram a run:
    # the records of a bucket are the rows of run 0, then of run 1, ... each in file order
    nruns = ranges.size - 1
    nbuckets = ((p1 - p0) >> shift) + 1
    hist = np.zeros((nruns, nbuckets), dtype=np.int64)
    bad = np.zeros(nruns, dtype=np.int64)
    for u in nb.prange(nruns):
        for c in range(ranges[u], ranges[u + 1]):
            pid = pids[np.int64(c)]
            for i in range(pid.size):
                p = pid[i]
                if p < p0 or p > p1:
                    bad[u] += 1
                else:
                    hist[u, (p - p0) >> shift] += 1
    off = np.zeros(nbuckets + 1, dtype=np.int64)
    pos = np.empty((nruns, nbuckets), dtype=np.int64)
    group_row = np.full(g1 - g0 + 1, -1, dtype=np.int64)
    if bad.sum():
        return bad.sum(), off, pos, group_row
    at = 0
    for b in range(nbuckets):
        off[b] = at
        for u in range(nruns):
            pos[u, b] = at
            at += hist[u, b]
    off[nbuckets] = at
    starts = pos.copy()
    low = (np.int64(1) << shift) - 1
    top = np.uint64(64 - _RANDOM_BITS)  # the rule's priority: the hash's top 32 bits
    ug = np.uint64(gbits)
    row0 = np.zeros(nruns + 1, dtype=np.int64)
    for u in range(nruns):
        row0[u + 1] = row0[u]
        for c in range(ranges[u], ranges[u + 1]):
            row0[u + 1] += pids[np.int64(c)].size
    for u in nb.prange(nruns):
        row = row0[u]
        longest = 0
        for c in range(ranges[u], ranges[u + 1]):
            longest = max(longest, pids[np.int64(c)].size)
        at = np.empty(longest, dtype=np.int64)
        for c in range(ranges[u], ranges[u + 1]):
            pid = pids[np.int64(c)]
            gid = gids[np.int64(c)]
            for i in range(pid.size):
                p = pid[i]
                g = gid[i] - g0
                b = (p - p0) >> shift
                t = pos[u, b]
                pos[u, b] = t + 1
                at[i] = t
                if g < 0 or g > g1 - g0:
                    bad[u] += 1
                    qk[t] = 0
                    continue
                if group_row[g] < 0:  # any row of the group (its keys' values)
                    group_row[g] = row + i
                # the priority: the rule's 32 random bits (the top of SipHash of the
                # codes), the person's place in its bucket, the group code (the rule's
                # tie-break: two pairs of a person never tie)
                h = _pair_hash(k0, k1, p, gid[i])
                qk[t] = ((h >> top) << top) | (np.uint64((p - p0) & low) << ug) | np.uint64(g)
            for v in range(m):
                val = vals[np.int64(c) * m + v]
                for i in range(pid.size):
                    vp[v, at[i]] = val[i]
            row += pid.size
    return bad.sum(), off, starts, group_row


@nb.njit(cache=True, parallel=True)
def _choose(qk, off, shift, gbits, k, r, values, ngroups, nthreads, tmarks, mark_kept):
    nbuckets = off.size - 1
    per = np.int64(1) << shift
    low = np.uint64(per - 1)
    ug = np.uint64(gbits)
    gmask = (np.uint64(1) << ug) - np.uint64(1)
    m = values.shape[0]
    w = 2 + m  # a slot: priority, rows, m sums (their float64 bits)
    sums = np.zeros((nthreads, ngroups, m), dtype=np.float64)
    kept = np.zeros((nthreads, ngroups), dtype=np.int64)
    nmarked = np.zeros(nthreads, dtype=np.int64)
    for c in nb.prange(nthreads):
        st = np.zeros(per * k * w, dtype=np.uint64)
        for s in range(per * k):
            st[s * w] = _MAX
        fst = st.view(np.float64)
        for b in range(c, nbuckets, nthreads):
            lo = off[b]
            hi = off[b + 1]
            if lo == hi:
                continue
            # one pass: each person's k smallest priorities, with the rows and sums of
            # each. A pair enters the slots at its first row or never (the largest kept
            # priority only decreases), so a pair still in the slots has all its rows.
            for t in range(lo, hi):
                h = qk[t]
                o = np.int64((h >> ug) & low) * k
                if h > st[(o + k - 1) * w]:
                    continue
                j = 0
                while st[(o + j) * w] < h:
                    j += 1
                s = (o + j) * w
                if st[s] == h:
                    st[s + 1] += 1
                    for v in range(m):
                        fst[s + 2 + v] += values[v, t]
                    continue
                for i in range((o + k) * w - 1, s + w - 1, -1):
                    st[i] = st[i - w]
                st[s] = h
                st[s + 1] = 1
                for v in range(m):
                    fst[s + 2 + v] = values[v, t]
            # the persons of this bucket: all of its state, or the persons of its records
            dense = hi - lo >= per
            nq = per if dense else hi - lo
            over = False
            for q in range(nq):
                o = (q if dense else np.int64((qk[lo + q] >> ug) & low)) * k
                for s in range(o * w, (o + k) * w, w):
                    if st[s] != _MAX and st[s + 1] > r:
                        over = True
            if over or mark_kept:  # mark the records of oversized (and of kept) pairs
                for t in range(lo, hi):
                    h = qk[t]
                    o = np.int64((h >> ug) & low) * k
                    if h > st[(o + k - 1) * w]:
                        continue
                    j = 0
                    while st[(o + j) * w] < h:
                        j += 1
                    s = (o + j) * w
                    if st[s] != h:
                        continue
                    if st[s + 1] > r:
                        tmarks[t] = OVERSIZED
                        nmarked[c] += 1
                    elif mark_kept:
                        tmarks[t] = KEPT
                        nmarked[c] += 1
            # the kept pairs' rows and sums into their groups; the state reset (a person
            # met again in this loop finds nothing)
            for q in range(nq):
                o = (q if dense else np.int64((qk[lo + q] >> ug) & low)) * k
                for s in range(o * w, (o + k) * w, w):
                    if st[s] == _MAX:
                        break
                    if st[s + 1] <= r:
                        g = np.int64(st[s] & gmask)
                        kept[c, g] += st[s + 1]
                        for v in range(m):
                            sums[c, g, v] += fst[s + 2 + v]
                    st[s] = _MAX
    out_sums = np.zeros((ngroups, m), dtype=np.float64)
    out_kept = np.zeros(ngroups, dtype=np.int64)
    for g in range(ngroups):
        for c in range(nthreads):
            out_kept[g] += kept[c, g]
            for v in range(m):
                out_sums[g, v] += sums[c, g, v]
    return out_kept, out_sums, nmarked.sum()


@nb.njit(cache=True, parallel=True)
def _unpartition(pids, ranges, p0, shift, starts, marked, tmarks, need, marks):
    # replays the partition's scatter over the runs that hold a marked record, so that
    # each mark lands on its row; ``marked``: the marked positions, ascending
    nruns = ranges.size - 1
    row0 = np.zeros(nruns + 1, dtype=np.int64)
    for u in range(nruns):
        row0[u + 1] = row0[u]
        for c in range(ranges[u], ranges[u + 1]):
            row0[u + 1] += pids[np.int64(c)].size
    nbuckets = starts.shape[1]
    none = np.iinfo(np.int64).max
    for u in nb.prange(nruns):
        if not need[u]:
            continue
        pos = starts[u].copy()
        # each bucket's next marked position (a small array, not a lookup a row)
        at = np.searchsorted(marked, pos)
        nxt = np.empty(nbuckets, dtype=np.int64)
        for b in range(nbuckets):
            nxt[b] = marked[at[b]] if at[b] < marked.size else none
        row = row0[u]
        for c in range(ranges[u], ranges[u + 1]):
            pid = pids[np.int64(c)]
            for i in range(pid.size):
                b = (pid[i] - p0) >> shift
                t = pos[b]
                pos[b] = t + 1
                if t == nxt[b]:
                    marks[row + i] = tmarks[t]
                    at[b] += 1
                    nxt[b] = marked[at[b]] if at[b] < marked.size else none
            row += pid.size


def pair_hash(key: tuple[int, int], person: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The kernel's compiled SipHash-1-3 of each pair of codes under the 128-bit key
    ``(k0, k1)``, exposed to be held bit-equal to the rule's reference,
    :func:`dpframe.engines.bounding_rule.pair_hash` (the same messages).

    Examples
    --------
    >>> import numpy as np
    >>> h = pair_hash((0, 0), np.zeros(2, np.int64), np.array([0, 1], np.int64))
    >>> h.dtype.name, bool(h[0] != h[1])
    ('uint64', True)
    """
    k0, k1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in key)
    person = np.ascontiguousarray(person, dtype=np.int64)
    group = np.ascontiguousarray(group, dtype=np.int64)
    return _pair_hash_many(k0, k1, person, group)


def value_range(pieces: Sequence[np.ndarray]) -> tuple[int, int]:
    """The least and greatest value of int64 pieces (in parallel); ``(0, 0)`` if empty.

    Examples
    --------
    >>> import numpy as np
    >>> value_range([np.array([3, -2], np.int64), np.array([9], np.int64)])
    (-2, 9)
    """
    pieces = [np.ascontiguousarray(x, dtype=np.int64) for x in pieces]
    pieces = [x for x in pieces if x.size]
    if not pieces:
        return 0, 0
    lo, hi = _value_range(List(pieces))
    return int(lo), int(hi)


def _range(pieces: list[np.ndarray], given: tuple[int, int] | None) -> tuple[int, int]:
    if given is not None:
        return int(given[0]), int(given[1])
    return value_range(pieces)


class _Columns:
    """``m`` 1-D columns seen as an (m, rows) array, for slicing without a copy."""

    ndim = 2

    def __init__(self, columns: list[np.ndarray], rows: int) -> None:
        self.columns = columns
        self.shape = (len(columns), rows)

    def __getitem__(self, index: tuple[int, slice]) -> np.ndarray:
        j, rows = index
        return self.columns[j][rows]


#: Rows of a piece of the input; longer ones are cut (views), so the threads share work.
_PIECE = 1 << 19


def _pieces(
    pid: np.ndarray | Sequence[np.ndarray],
    gid: np.ndarray | Sequence[np.ndarray],
    values: np.ndarray | Sequence[np.ndarray],
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], int]:
    """The input as aligned pieces (views where possible): int64 persons and groups, the
    float64 values of each piece's ``m`` columns one after the other, and ``m``. Values
    may be given as a 2-D array (m, rows) a piece, or as a list of ``m`` 1-D arrays."""
    single = isinstance(pid, np.ndarray)
    pids = [pid] if single else list(pid)
    gids = [gid] if isinstance(gid, np.ndarray) else list(gid)
    vals = [values] if isinstance(values, np.ndarray) else list(values)
    if not (len(pids) == len(gids) == len(vals)):
        raise ValueError("pid, gid and values must come in the same number of pieces")
    out: tuple[list, list, list] = ([], [], [])
    m = None
    for p, g, v in zip(pids, gids, vals, strict=True):
        p = np.ascontiguousarray(p, dtype=np.int64)
        g = np.ascontiguousarray(g, dtype=np.int64)
        v = (
            np.ascontiguousarray(v, dtype=np.float64)
            if isinstance(v, np.ndarray)
            else [np.ascontiguousarray(x, dtype=np.float64) for x in v]
        )
        if isinstance(v, list):  # m columns of this piece, without a copy
            if any(x.shape != p.shape for x in v):
                raise ValueError(f"each value column of a piece must have {p.size} rows")
            v = _Columns(v, p.size)
        if v.ndim != 2 or v.shape[1] != p.size or g.size != p.size:
            raise ValueError(
                f"a piece of {p.size} persons has {g.size} groups and values of shape "
                f"{v.shape}; values must have shape (m, {p.size})"
            )
        if m is not None and v.shape[0] != m:
            raise ValueError("every piece must have the same number of value columns")
        m = v.shape[0]
        for lo in range(0, max(p.size, 1), _PIECE):
            hi = lo + _PIECE
            out[0].append(p[lo:hi])
            out[1].append(g[lo:hi])
            out[2].extend(v[j, lo:hi] for j in range(m))
    return (*out, m or 0)


def bounded_sums(
    pid: np.ndarray | Sequence[np.ndarray],
    gid: np.ndarray | Sequence[np.ndarray],
    values: np.ndarray | Sequence[np.ndarray],
    key: tuple[int, int],
    max_groups: int,
    max_rows: int,
    person_range: tuple[int, int] | None = None,
    group_range: tuple[int, int] | None = None,
    *,
    mark_kept: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bound each person's rows and sum the kept ones per group.

    Parameters
    ----------
    pid : numpy.ndarray of int64, or a sequence of them
        The person of each row, as an integer; a sequence is the rows in pieces (the
        chunks of a polars column, read without a copy). The codes are hashed as they
        are (see :func:`pair_hash`).
    gid : numpy.ndarray of int64, or a sequence of them
        The group of each row, as an integer (all equal: one group), in the same pieces.
    values : numpy.ndarray of float64, shape (m, n), or a sequence of them
        ``m`` value columns to sum (``m`` may be 0), one row each, in the same pieces; a
        piece may also be a list of ``m`` 1-D arrays (read without a copy).
    key : tuple of two ints
        The 128-bit SipHash key (two 64-bit words), fresh from the secure source.
    max_groups, max_rows : int
        The unit's bounds.
    person_range, group_range : tuple of two ints, optional
        The least and greatest ``pid`` (``gid``), if known (else computed); a value
        outside raises ``ValueError``. ``pid`` may span fewer than ``2**PERSON_BITS``
        integers, ``gid`` fewer than ``2**GROUP_BITS``.
    mark_kept : bool, default False
        Also mark the kept rows (an extra pass, for tests); by default only the rows of
        oversized pairs are marked (the sums are taken per pair as the rows are read).

    Returns
    -------
    kept, sums, group_row, marks : numpy.ndarray
        Indexed by ``gid - group_range[0]``: the number of kept rows and the sums of the
        values (shape (groups, m)) over the kept pairs with at most ``max_rows`` rows, and
        a row of each group (to read its keys' values from; -1: no row); and each row's
        mark: :data:`OVERSIZED` (a kept
        pair with more rows, **not** summed: draw its rows and add them), :data:`KEPT`
        (only with ``mark_kept``) or :data:`DROPPED` (the rest).

    Examples
    --------
    >>> import numpy as np
    >>> pid = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    >>> gid = np.array([0, 1, 2, 0, 0, 0], dtype=np.int64)
    >>> kept, sums, _, marks = bounded_sums(pid, gid, np.ones((0, 6)), (1, 2), 1, 2)
    >>> int(kept.sum()), marks[3:].tolist()  # person 1: one pair of 3 rows, oversized
    (1, [2, 2, 2])
    """
    pids, gids, vals, m = _pieces(pid, gid, values)
    n = sum(len(x) for x in pids)
    p0, p1 = _range(pids, person_range)
    g0, g1 = _range(gids, group_range)
    if p1 - p0 >= 2**PERSON_BITS:
        raise ValueError(f"the persons span more than 2**{PERSON_BITS} integers")
    if g1 - g0 >= 2**GROUP_BITS:
        raise ValueError(f"the groups span more than 2**{GROUP_BITS} integers")
    ngroups = g1 - g0 + 1
    marks = np.zeros(n, dtype=np.uint8)
    if n == 0:
        return (
            np.zeros(ngroups, np.int64),
            np.zeros((ngroups, m)),
            np.full(ngroups, -1, np.int64),
            marks,
        )
    # a person holds at most ngroups groups and n rows: the same choice with the bounds
    # capped there, and the state's size (and the compiled code's int64) stays bounded
    k = min(int(max_groups), ngroups)
    r = min(int(max_rows), n)
    gbits = max(1, (g1 - g0).bit_length())
    shift = max(0, (_STATE_BYTES // (8 * k * (2 + m))).bit_length() - 1)  # state in cache
    shift = min(shift, max(1, (p1 - p0).bit_length()), 64 - _RANDOM_BITS - gbits)
    k0, k1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in key)
    threads = nb.get_num_threads()
    ranges = _runs([len(x) for x in pids], 4 * threads)
    pieces = List(pids)
    # the records, by bucket: allocated here, not in the compiled code, so that numpy
    # backs them with huge pages (a sixth of the kernel's time otherwise goes to
    # faulting the pages in and unmapping them)
    qk = np.empty(n, dtype=np.uint64)
    vp = np.empty((m, n), dtype=np.float64)
    nbad, off, starts, group_row = _partition(
        pieces,
        List(gids),
        List(vals or [np.zeros(0)]),
        ranges,
        m,
        p0,
        p1,
        g0,
        g1,
        k0,
        k1,
        shift,
        gbits,
        qk,
        vp,
    )
    if nbad:
        raise ValueError("a person or group value lies outside the given range")
    tmarks = np.zeros(n, dtype=np.uint8)  # each record's mark, in partition order
    threads = max(1, min(threads, off.size - 1))
    kept, sums, nmarked = _choose(
        qk, off, shift, gbits, k, r, vp, ngroups, threads, tmarks, bool(mark_kept)
    )
    del qk, vp
    if nmarked:
        marked = np.flatnonzero(tmarks)
        need = _marked_runs(marked, off, starts)
        _unpartition(pieces, ranges, p0, shift, starts, marked, tmarks, need, marks)
    return kept, sums, group_row, marks


def _runs(sizes: list[int], most: int) -> np.ndarray:
    """Cut pieces of the given sizes into at most ``most`` runs of consecutive pieces of
    about equal rows: the runs' first pieces, then the number of pieces."""
    cum = np.cumsum(sizes)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, most) / most, side="right")
    return np.unique(np.concatenate(([0], cuts, [len(sizes)]))).astype(np.int64)


@nb.njit(cache=True)
def _marked_runs(marked, off, starts):
    # the runs that hold each marked record (``marked`` ascending)
    nruns = starts.shape[0]
    need = np.zeros(nruns, dtype=np.bool_)
    b = 0
    for t in marked:
        while off[b + 1] <= t:
            b += 1
        u = nruns - 1
        while starts[u, b] > t:
            u -= 1
        need[u] = True
    return need
