"""Compiled kernels of person-level bounding: each person's kept rows in a few linear passes.

The polars engine's fast path for a person-level grouped release
(:func:`dpframe.engines.bounding.bounded_grouped_parts`) runs on integer codes: ``pc``, a
person code per row (``0 <= pc < 2**36``), and ``gc``, a group code per row
(``0 <= gc < 2**GROUP_BITS``). Nothing here sorts the records or shuffles them:

1. **Pair priorities** (in the partition, parallel): every row gets
   ``q = (SipHash-1-3_key(pc, gc) with its low 32 bits replaced by gc)``. SipHash is a
   keyed pseudo-random function (the one CPython and Rust hash with); the 128-bit key is
   drawn from the release's secure source, so the priorities of a person's distinct
   ``(person, group)`` pairs are, to anyone without the key, independent uniform draws --
   and every row of a pair gets the same priority. The low bits make two different pairs
   of a person never tie (the cap below is exact, always). The random high bits are
   always 32 (whatever the number of groups), and a tie of them (probability ``2**-32``
   a comparison) is broken by the group code, whose order the caller fixes before
   seeing the data (:func:`dpframe.engines.bounding._codes`: the values' own order), so
   the tie-break never depends on other persons' data either.
2. **Partition by person** (a counting scatter by ``pc >> shift``): each bucket holds
   every row of at most ``2**shift`` persons, so the per-person state of a bucket fits in
   the CPU's L2 cache.
3. **Choose and sum** (parallel over buckets): in one pass over a bucket, each person
   keeps the ``max_groups`` pairs of smallest priority (an insertion into ``max_groups``
   sorted slots per person), with each kept pair's number of rows and sums; then each
   kept pair with at most ``max_rows`` rows is added to its group. A kept pair with more
   rows is **oversized**: a second pass over that bucket (only then) marks its rows
   :data:`OVERSIZED`, and the caller adds a uniform ``max_rows``-subset of them, drawn by
   :func:`dpframe.engines.bounding.segment_sample` from the secure source.

A person's kept rows depend on their own rows and the key only (never on the file order
or on other persons), which is what makes the bounded release's sensitivity hold; the
randomness only makes the choice uniform, so that what bounding drops is dropped evenly.

numba compiles the kernels on first use (a few seconds, cached on disk afterwards);
``import dpframe`` does not import this module (the polars engine imports it on the
first person-level release).

Examples
--------
>>> import numpy as np
>>> from dpframe.engines.bounding_kernel import KEPT, bounded_sums
>>> pid = np.array([0, 0, 0, 1], dtype=np.int64)
>>> gid = np.array([0, 1, 2, 0], dtype=np.int64)
>>> kept, sums, first, marks = bounded_sums(
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

__all__ = [
    "DROPPED",
    "GROUP_BITS",
    "KEPT",
    "OVERSIZED",
    "PERSON_BITS",
    "bounded_sums",
    "siphash13",
]

#: A row's mark: not kept (its pair is not among the person's kept groups).
DROPPED = 0
#: A row's mark: kept (its pair is kept and has at most ``max_rows`` rows).
KEPT = 1
#: A row's mark: its pair is kept but has more than ``max_rows`` rows.
OVERSIZED = 2
#: Group codes must be below ``2**GROUP_BITS`` (the other 32 bits of a priority are random).
GROUP_BITS = 32
#: Person codes must be below ``2**PERSON_BITS`` (the buckets' count array stays small).
PERSON_BITS = 36
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
def _sip13(k0, k1, m0, m1):
    # SipHash-1-3 of the 16-byte message m0 || m1 (little-endian words)
    v0 = k0 ^ np.uint64(0x736F6D6570736575)
    v1 = k1 ^ np.uint64(0x646F72616E646F6D)
    v2 = k0 ^ np.uint64(0x6C7967656E657261)
    v3 = k1 ^ np.uint64(0x7465646279746573)
    v3 ^= m0
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= m0
    v3 ^= m1
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= m1
    last = np.uint64(16) << np.uint64(56)
    v3 ^= last
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= last
    v2 ^= np.uint64(0xFF)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@nb.njit(cache=True)
def _siphash13_many(k0, k1, m0, m1):
    out = np.empty(m0.size, dtype=np.uint64)
    for i in range(m0.size):
        out[i] = _sip13(k0, k1, m0[i], m1[i])
    return out


@nb.njit(cache=True, parallel=True)
def _partition(pids, gids, vals, starts, m, p0, p1, g0, g1, k0, k1, shift):
    nchunks = len(pids)
    n = starts[nchunks]
    nbuckets = ((p1 - p0) >> shift) + 1
    hist = np.zeros((nchunks, nbuckets), dtype=np.int64)
    bad = np.zeros(nchunks, dtype=np.int64)
    for c in nb.prange(nchunks):
        pid = pids[np.int64(c)]
        gid = gids[np.int64(c)]
        for i in range(pid.size):
            p = pid[i]
            g = gid[i]
            if p < p0 or p > p1 or g < g0 or g > g1:
                bad[c] += 1
            else:
                hist[c, (p - p0) >> shift] += 1
    nbad = bad.sum()
    if nbad:
        empty = np.zeros((m, 0), dtype=np.float64)
        return nbad, np.zeros(1, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64), empty
    off = np.zeros(nbuckets + 1, dtype=np.int64)
    pos = np.empty((nchunks, nbuckets), dtype=np.int64)
    at = 0
    for b in range(nbuckets):
        off[b] = at
        for c in range(nchunks):
            pos[c, b] = at
            at += hist[c, b]
    off[nbuckets] = at
    qp = np.empty(n, dtype=np.uint64)
    rows = np.empty(n, dtype=np.int64)  # (row << shift) | the person's index in its bucket
    vp = np.empty((m, n), dtype=np.float64)
    low = (np.int64(1) << shift) - 1
    glow = np.uint64(0xFFFFFFFF)
    for c in nb.prange(nchunks):
        pid = pids[np.int64(c)]
        gid = gids[np.int64(c)]
        first = starts[c]
        at = np.empty(pid.size, dtype=np.int64)
        for i in range(pid.size):
            p = pid[i] - p0
            b = p >> shift
            t = pos[c, b]
            g = np.uint64(gid[i] - g0)
            qp[t] = (_sip13(k0, k1, np.uint64(p), g) & ~glow) | g
            rows[t] = (np.int64(first + i) << shift) | (p & low)
            at[i] = t
            pos[c, b] = t + 1
        for v in range(m):
            val = vals[np.int64(c) * m + v]
            for i in range(pid.size):
                vp[v, at[i]] = val[i]
    return 0, off, qp, rows, vp


@nb.njit(cache=True, parallel=True)
def _choose(qp, rows, off, shift, k, r, values, ngroups, nthreads, marks, mark_kept):
    nbuckets = off.size - 1
    per = np.int64(1) << shift
    low = per - 1
    glow = np.uint64(0xFFFFFFFF)
    m = values.shape[0]
    sums = np.zeros((nthreads, ngroups, m), dtype=np.float64)
    kept = np.zeros((nthreads, ngroups), dtype=np.int64)
    first = np.full((nthreads, ngroups), np.iinfo(np.int64).max, dtype=np.int64)
    for c in nb.prange(nthreads):
        # each person's state: k slots of (priority, rows, first row, m sums)
        slots = np.full(per * k, _MAX, dtype=np.uint64)
        cnt = np.zeros(per * k, dtype=np.int64)
        frow = np.zeros(per * k, dtype=np.int64)
        acc = np.zeros(per * k * m, dtype=np.float64)
        for b in range(c, nbuckets, nthreads):
            lo = off[b]
            hi = off[b + 1]
            if lo == hi:
                continue
            # one pass: each person's k smallest priorities, with the rows and sums of
            # each. A pair enters the slots at its first row or never (slots[k - 1] only
            # decreases), so a pair still in the slots at the end has all its rows.
            for t in range(lo, hi):
                h = qp[t]
                o = (rows[t] & low) * k
                if h > slots[o + k - 1]:
                    continue
                j = 0
                while slots[o + j] < h:
                    j += 1
                s = o + j
                if slots[s] == h:
                    cnt[s] += 1
                    for v in range(m):
                        acc[s * m + v] += values[v, t]
                    continue
                for i in range(o + k - 1, s, -1):
                    slots[i] = slots[i - 1]
                    cnt[i] = cnt[i - 1]
                    frow[i] = frow[i - 1]
                    for v in range(m):
                        acc[i * m + v] = acc[(i - 1) * m + v]
                slots[s] = h
                cnt[s] = 1
                frow[s] = rows[t] >> shift
                for v in range(m):
                    acc[s * m + v] = values[v, t]
            # the persons of this bucket: all of its state, or the persons of its rows
            dense = hi - lo >= per
            nq = per if dense else hi - lo
            over = False
            for q in range(nq):
                o = (q if dense else rows[lo + q] & low) * k
                for j in range(k):
                    if slots[o + j] != _MAX and cnt[o + j] > r:
                        over = True
            if over or mark_kept:  # mark the rows of oversized (and of kept) pairs
                for t in range(lo, hi):
                    h = qp[t]
                    o = (rows[t] & low) * k
                    if h > slots[o + k - 1]:
                        continue
                    j = 0
                    while slots[o + j] < h:
                        j += 1
                    if slots[o + j] != h:
                        continue
                    if cnt[o + j] > r:
                        marks[rows[t] >> shift] = OVERSIZED
                    elif mark_kept:
                        marks[rows[t] >> shift] = KEPT
            # the kept pairs' rows and sums into their groups; the state reset
            for q in range(nq):
                o = (q if dense else rows[lo + q] & low) * k
                for s in range(o, o + k):
                    if slots[s] == _MAX:
                        break
                    if cnt[s] <= r:
                        g = np.int64(slots[s] & glow)
                        kept[c, g] += cnt[s]
                        if frow[s] < first[c, g]:
                            first[c, g] = frow[s]
                        for v in range(m):
                            sums[c, g, v] += acc[s * m + v]
                    slots[s] = _MAX
    out_sums = np.zeros((ngroups, m), dtype=np.float64)
    out_kept = np.zeros(ngroups, dtype=np.int64)
    out_first = np.full(ngroups, -1, dtype=np.int64)
    for g in range(ngroups):
        f = np.iinfo(np.int64).max
        for c in range(nthreads):
            out_kept[g] += kept[c, g]
            f = min(f, first[c, g])
            for v in range(m):
                out_sums[g, v] += sums[c, g, v]
        if out_kept[g]:
            out_first[g] = f
    return out_kept, out_sums, out_first


def siphash13(key: tuple[int, int], m0: np.ndarray, m1: np.ndarray) -> np.ndarray:
    """SipHash-1-3 of each 16-byte message ``m0[i] || m1[i]`` (64-bit little-endian words)
    under the 128-bit key ``(k0, k1)``: the pseudo-random function of the pair priorities
    (exposed to be checked against a reference implementation).

    Examples
    --------
    >>> import numpy as np
    >>> h = siphash13((0, 0), np.zeros(2, np.uint64), np.array([0, 1], np.uint64))
    >>> h.dtype.name, bool(h[0] != h[1])
    ('uint64', True)
    """
    k0, k1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in key)
    m0 = np.ascontiguousarray(m0, dtype=np.uint64)
    m1 = np.ascontiguousarray(m1, dtype=np.uint64)
    return _siphash13_many(k0, k1, m0, m1)


def _range(pieces: list[np.ndarray], given: tuple[int, int] | None) -> tuple[int, int]:
    if given is not None:
        return int(given[0]), int(given[1])
    pieces = [x for x in pieces if x.size]
    if not pieces:
        return 0, 0
    return min(int(x.min()) for x in pieces), max(int(x.max()) for x in pieces)


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
        chunks of a polars column, read without a copy).
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
    kept, sums, first, marks : numpy.ndarray
        Indexed by ``gid - group_range[0]``: the number of kept rows, the sums of the
        values (shape (groups, m)) and the first kept row (-1: none) -- over the pairs
        with at most ``max_rows`` rows; and each row's mark: :data:`OVERSIZED` (a kept
        pair with more rows, **not** summed: draw its rows and add them), :data:`KEPT`
        (only with ``mark_kept``) or :data:`DROPPED` (the rest).

    Examples
    --------
    >>> import numpy as np
    >>> pid = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    >>> gid = np.array([0, 1, 2, 0, 0, 0], dtype=np.int64)
    >>> kept, sums, first, marks = bounded_sums(pid, gid, np.ones((0, 6)), (1, 2), 1, 2)
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
    k = int(max_groups)
    per_person = k * (24 + 8 * m)  # bytes of state: k slots of (priority, rows, row, sums)
    shift = max(0, (_STATE_BYTES // per_person).bit_length() - 1)
    shift = min(shift, max(1, (p1 - p0).bit_length()))
    k0, k1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in key)
    starts = np.concatenate(([0], np.cumsum([len(x) for x in pids]))).astype(np.int64)
    nbad, off, qp, rows, vp = _partition(
        List(pids),
        List(gids),
        List(vals or [np.zeros(0)]),
        starts,
        m,
        p0,
        p1,
        g0,
        g1,
        k0,
        k1,
        shift,
    )
    if nbad:
        raise ValueError("a person or group value lies outside the given range")
    threads = max(1, min(nb.get_num_threads(), off.size - 1))
    kept, sums, first = _choose(
        qp, rows, off, shift, k, int(max_rows), vp, ngroups, threads, marks, bool(mark_kept)
    )
    return kept, sums, first, marks
