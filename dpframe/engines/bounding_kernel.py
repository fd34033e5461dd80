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
   rows is **oversized**: a second pass over that bucket (only then) numbers its records
   in the rule's order (the bucket's oversized pairs by ``(person, group)``, each pair's
   records in file order, which the partition keeps).
4. **The rows of oversized pairs** (parallel over buckets): the rule's priority of
   each of those rows (:func:`~dpframe.engines.bounding_rule.row_priority`: SipHash of
   its person, group and position under the row key; this module's copy,
   :func:`row_hash`, held bit-equal to the reference by the tests), computed as the
   pair's rows are read, and each pair's ``max_rows`` smallest summed into its group.
   A pair's choice depends only on its codes and rows: the persons may be bounded in
   any partition of them. Nothing is sorted or gathered in numpy, and the pieces reach
   the compiled code as a table of addresses (no numba typed ``List``, which compiles in
   every process).

Why this bounds sensitivities: see :mod:`dpframe.engines.bounding_rule`.

numba compiles the kernels on first use (about 20 s, once: every kernel a release calls
is cached on disk, ``cache=True``, and a release calls all of them, so a later process
loads them); ``import dpframe`` does not import this module (the polars engine imports it
on the first person-level release).

Examples
--------
>>> import numpy as np
>>> from dpframe.engines.bounding_kernel import KEPT, bounded_sums
>>> pid = np.array([0, 0, 0, 1], dtype=np.int64)
>>> gid = np.array([0, 1, 2, 0], dtype=np.int64)
>>> kept, sums, pairs, group_row, marks = bounded_sums(
...     pid, gid, np.ones((1, 4)), (1, 2), 1, 1, row_key=(3, 4),
...     mark_kept=True,
... )
>>> int((marks[:3] == KEPT).sum()), int(marks[3]), int(kept.sum()), float(sums.sum())
(1, 1, 2, 2.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np
from numba import types
from numba.extending import intrinsic

from dpframe.engines.bounding_rule import GROUP_BITS, PERSON_BITS

__all__ = [
    "DROPPED",
    "GROUP_BITS",
    "KEPT",
    "PERSON_BITS",
    "StreamedRecords",
    "bounded_sums",
    "pair_hash",
    "row_hash",
    "value_range",
]

#: A row's mark: not kept (its pair is not among the person's kept groups).
DROPPED = 0
#: A row's mark: kept.
KEPT = 1
#: A record's mark inside the kernel: its pair is kept but has more than ``max_rows`` rows.
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
#: A slot's rows: the pair is counted already (the top bits of a count never set).
_SEEN = np.uint64(1 << 62)
_ROWS = np.uint64((1 << 62) - 1)
#: A slot's next index: no record of the pair numbered yet.
_FRESH = np.uint64(1 << 63)
#: An oversized record's priority, once numbered: its index among its bucket's oversized
#: rows (the top bits), whether it is its pair's first row (one bit), the person's place
#: in its bucket (``shift`` bits) and its group code (``gbits`` bits; ``shift + gbits``
#: is at most 32, so a bucket may hold up to ``2**_BUCKET_BITS`` records).
_BUCKET_BITS = 31
#: Up to this ``max_rows``, a pair's rows are chosen by insertion into ``max_rows`` slots;
#: above it, by a sort of the pair's priorities (never quadratic).
_INSERTION = 16


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
def _sip13(k0, k1, m0, m1, m2, nwords):
    # SipHash-1-3 of the message of ``nwords`` (1, 2 or 3) little-endian 64-bit words
    # m0, m1, m2: the kernel's copy of :func:`dpframe.engines.bounding_rule.pair_hash`'s
    # and :func:`~dpframe.engines.bounding_rule.row_hash`'s function
    v0 = k0 ^ np.uint64(0x736F6D6570736575)
    v1 = k1 ^ np.uint64(0x646F72616E646F6D)
    v2 = k0 ^ np.uint64(0x6C7967656E657261)
    v3 = k1 ^ np.uint64(0x7465646279746573)
    v3 ^= m0
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= m0
    if nwords >= 2:
        v3 ^= m1
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m1
    if nwords == 3:
        v3 ^= m2
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m2
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
        m = np.uint64(p) | (np.uint64(g) << np.uint64(32))
        return _sip13(k0, k1, m, np.uint64(0), np.uint64(0), 1)
    return _sip13(k0, k1, np.uint64(p), np.uint64(g), np.uint64(0), 2)


@nb.njit(inline="always")
def _row_hash(k0, k1, p, g, pos):
    # SipHash-1-3 of the row's (person code, group code, position): 24 bytes, three
    # 64-bit words (the kernel's copy of :func:`dpframe.engines.bounding_rule.row_hash`)
    return _sip13(k0, k1, np.uint64(p), np.uint64(g), np.uint64(pos), 3)


@nb.njit(inline="always")
def _row_priority(k0, k1, p, g, pos):
    # the rule's row priority: the hash's top 32 bits, then the position
    h = _row_hash(k0, k1, p, g, pos)
    return ((h >> np.uint64(32)) << np.uint64(32)) | np.uint64(pos)


@nb.njit(cache=True)
def _row_hash_many(k0, k1, p, g, pos):
    out = np.empty(p.size, dtype=np.uint64)
    for i in range(p.size):
        out[i] = _row_hash(k0, k1, p[i], g[i], pos[i])
    return out


@nb.njit(cache=True)
def _pair_hash_many(k0, k1, p, g):
    out = np.empty(p.size, dtype=np.uint64)
    for i in range(p.size):
        out[i] = _pair_hash(k0, k1, p[i], g[i])
    return out


@intrinsic
def _int64_at(typingctx, address):
    # the int64 array at a memory address (of an array the caller holds alive)
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))

    return types.CPointer(types.int64)(types.uint64), codegen


@intrinsic
def _float64_at(typingctx, address):
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.float64)))

    return types.CPointer(types.float64)(types.uint64), codegen


@nb.njit(inline="always")
def _ints(addresses, sizes, c):
    # piece ``c`` of a table of int64 pieces (their addresses and sizes): no copy
    return nb.carray(_int64_at(addresses[c]), sizes[c])


@nb.njit(inline="always")
def _floats(addresses, sizes, c):
    return nb.carray(_float64_at(addresses[c]), sizes[c])


@nb.njit(cache=True, parallel=True)
def _value_range(addresses, sizes):
    n = sizes.size
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    for c in nb.prange(n):
        x = _ints(addresses, sizes, c)
        a = lo[c]
        b = hi[c]
        for i in range(x.size):
            a = min(a, x[i])
            b = max(b, x[i])
        lo[c] = a
        hi[c] = b
    return lo.min(), hi.max()


@nb.njit(inline="always")
def _run_counts(paddr, sizes, ranges, p0, p1, shift, hist, bad, u):
    # run ``u``'s records by bucket (``hist[u]``); a person outside [p0, p1]: ``bad[u]``
    for c in range(ranges[u], ranges[u + 1]):
        pid = _ints(paddr, sizes, c)
        for i in range(pid.size):
            p = pid[i]
            if p < p0 or p > p1:
                bad[u] += 1
            else:
                hist[u, (p - p0) >> shift] += 1


@nb.njit(inline="always")
def _scatter_piece(addrs, sizes, c, m, spec, keys, qk, vp, pos, at, group_row, row):
    # piece ``c``'s records to their buckets' next places (``pos``, one run's cursors):
    # each record's priority -- the rule's 32 random bits (the top of SipHash of the
    # codes), the person's place in its bucket, the group code (the rule's tie-break:
    # two pairs of a person never tie) -- and its values; returns the records whose
    # group lies outside [g0, g1]; ``spec``: p0, g0, g1, shift, gbits; ``keys``: k0, k1
    # (arrays: numba's parallel analysis mistakes a tuple of integers for a shape)
    paddr = addrs[0]
    gaddr = addrs[1]
    vaddr = addrs[2]
    p0 = spec[0]
    g0 = spec[1]
    g1 = spec[2]
    shift = spec[3]
    gbits = spec[4]
    k0 = keys[0]
    k1 = keys[1]
    low = (np.int64(1) << shift) - 1
    top = np.uint64(64 - _RANDOM_BITS)  # the rule's priority: the hash's top 32 bits
    ug = np.uint64(gbits)
    bad = 0
    pid = _ints(paddr, sizes, c)
    gid = _ints(gaddr, sizes, c)
    for i in range(pid.size):
        p = pid[i]
        g = gid[i] - g0
        b = (p - p0) >> shift
        t = pos[b]
        pos[b] = t + 1
        at[i] = t
        if g < 0 or g > g1 - g0:
            bad += 1
            qk[t] = 0
            continue
        if group_row[g] < 0:  # any row of the group (its keys' values)
            group_row[g] = row + i
        h = _pair_hash(k0, k1, p, gid[i])
        qk[t] = ((h >> top) << top) | (np.uint64((p - p0) & low) << ug) | np.uint64(g)
    for v in range(m):
        val = _floats(vaddr, sizes, c * m + v)
        for i in range(pid.size):
            vp[v, at[i]] = val[i]
    return bad


@nb.njit(inline="always")
def _first_rows(sizes, ranges):
    # each run's first row
    nruns = ranges.size - 1
    row0 = np.zeros(nruns + 1, dtype=np.int64)
    for u in range(nruns):
        row0[u + 1] = row0[u]
        for c in range(ranges[u], ranges[u + 1]):
            row0[u + 1] += sizes[c]
    return row0


@nb.njit(inline="always")
def _longest(sizes, ranges, u):
    longest = 0
    for c in range(ranges[u], ranges[u + 1]):
        longest = max(longest, sizes[c])
    return longest


@nb.njit(cache=True, parallel=True)
def _partition(paddr, gaddr, vaddr, sizes, ranges, m, p1, spec, keys, qk, vp):
    # ``ranges`` cuts the pieces into runs of consecutive pieces, one histogram a run:
    # the records of a bucket are the rows of run 0, then of run 1, ... each in file order.
    # ``spec`` (p0, g0, g1, shift, gbits) and ``keys`` (k0, k1) come built by the caller:
    # numba's rewrite of a constant ``np.array([...])`` in a parallel function once named
    # two of its variables alike at random (CI: "key already in dictionary: $np_g_var.1")
    p0, g0, g1, shift = spec[0], spec[1], spec[2], spec[3]
    nruns = ranges.size - 1
    nbuckets = ((p1 - p0) >> shift) + 1
    hist = np.zeros((nruns, nbuckets), dtype=np.int64)
    bad = np.zeros(nruns, dtype=np.int64)
    for u in nb.prange(nruns):
        _run_counts(paddr, sizes, ranges, p0, p1, shift, hist, bad, u)
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
    row0 = _first_rows(sizes, ranges)
    addrs = (paddr, gaddr, vaddr)
    for u in nb.prange(nruns):
        row = row0[u]
        at = np.empty(_longest(sizes, ranges, u), dtype=np.int64)
        for c in range(ranges[u], ranges[u + 1]):
            bad[u] += _scatter_piece(
                addrs, sizes, c, m, spec, keys, qk, vp, pos[u], at, group_row, row
            )
            row += sizes[c]
    return bad.sum(), off, starts, group_row


@nb.njit(cache=True, parallel=True)
def _bucket_counts(paddr, sizes, ranges, p0, p1, shift):
    # the records of each bucket (and how many persons lie outside [p0, p1])
    nruns = ranges.size - 1
    hist = np.zeros((nruns, ((p1 - p0) >> shift) + 1), dtype=np.int64)
    bad = np.zeros(nruns, dtype=np.int64)
    for u in nb.prange(nruns):
        _run_counts(paddr, sizes, ranges, p0, p1, shift, hist, bad, u)
    return bad.sum(), hist.sum(axis=0)


@nb.njit(cache=True)
def _scatter(addrs, sizes, ranges, m, p1, spec, keys, qk, vp, cursor, end, group_row, row):
    # a batch of records (``addrs``: the persons', groups' and values' tables; ``row``:
    # its first row) to their buckets' next places (``cursor``, advanced), none past a
    # bucket's ``end``: returns the records out of range, or -1 (a bucket overflows:
    # nothing written). One thread: it runs beside the streaming engine's threads, which
    # read the next batch meanwhile (a parallel region per batch waits on them: 2-3x)
    p0 = spec[0]
    shift = spec[3]
    nruns = ranges.size - 1
    nbuckets = cursor.size
    hist = np.zeros((nruns, nbuckets), dtype=np.int64)
    bad = np.zeros(nruns, dtype=np.int64)
    for u in nb.prange(nruns):
        _run_counts(addrs[0], sizes, ranges, p0, p1, shift, hist, bad, u)
    if bad.sum():
        return bad.sum()
    pos = np.empty((nruns, nbuckets), dtype=np.int64)
    for b in range(nbuckets):
        at = cursor[b]
        for u in range(nruns):
            pos[u, b] = at
            at += hist[u, b]
        if at > end[b]:
            return -1
    for b in range(nbuckets):
        for u in range(nruns):
            cursor[b] += hist[u, b]
    row0 = _first_rows(sizes, ranges) + row
    for u in nb.prange(nruns):
        at = np.empty(_longest(sizes, ranges, u), dtype=np.int64)
        first = row0[u]
        for c in range(ranges[u], ranges[u + 1]):
            bad[u] += _scatter_piece(
                addrs, sizes, c, m, spec, keys, qk, vp, pos[u], at, group_row, first
            )
            first += sizes[c]
    return bad.sum()


@nb.njit(inline="always")
def _slot(st, o, k, w, h):
    # the slot of priority ``h`` among a person's k sorted slots from ``o``; -1: none
    if h > st[(o + k - 1) * w]:
        return -1
    j = 0
    while st[(o + j) * w] < h:
        j += 1
    s = (o + j) * w
    return s if st[s] == h else -1


@nb.njit(cache=True, parallel=True)
def _choose(qk, off, shift, gbits, k, r, values, ngroups, nthreads, tmarks, mark_kept):
    nbuckets = off.size - 1
    per = np.int64(1) << shift
    low = np.uint64(per - 1)
    ug = np.uint64(gbits)
    gmask = (np.uint64(1) << ug) - np.uint64(1)
    pairbits = (np.uint64(1) << np.uint64(shift + gbits)) - np.uint64(1)
    ufirst = np.uint64(shift + gbits)  # an oversized record: its index, first, place, group
    uix = np.uint64(shift + gbits + 1)
    m = values.shape[0]
    w = 3 + m  # a slot: priority, rows, next index (oversized), m sums (float64 bits)
    sums = np.zeros((nthreads, ngroups, m), dtype=np.float64)
    kept = np.zeros((nthreads, ngroups), dtype=np.int64)
    pairs = np.zeros((nthreads, ngroups), dtype=np.int64)
    over = np.zeros(nbuckets, dtype=np.int64)
    for c in nb.prange(nthreads):
        st = np.zeros(per * k * w, dtype=np.uint64)
        for s in range(per * k):
            st[s * w] = _MAX
        fst = st.view(np.float64)
        okey = np.empty(per * k, dtype=np.uint64)
        oslot = np.empty(per * k, dtype=np.int64)
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
                        fst[s + 3 + v] += values[v, t]
                    continue
                for i in range((o + k) * w - 1, s + w - 1, -1):
                    st[i] = st[i - w]
                st[s] = h
                st[s + 1] = 1
                for v in range(m):
                    fst[s + 3 + v] = values[v, t]
            # the kept pairs into their groups: a pair within max_rows with its rows and
            # sums; an oversized one with max_rows rows, its sums left to _sample
            dense = hi - lo >= per
            nq = per if dense else hi - lo
            no = 0
            for q in range(nq):
                o = (q if dense else np.int64((qk[lo + q] >> ug) & low)) * k
                for s in range(o * w, (o + k) * w, w):
                    if st[s] == _MAX or st[s + 1] & _SEEN:
                        break
                    rows = st[s + 1]
                    st[s + 1] = rows | _SEEN  # a person met again in this loop: skipped
                    g = np.int64(st[s] & gmask)
                    pairs[c, g] += 1
                    if rows <= r:
                        kept[c, g] += rows
                        for v in range(m):
                            sums[c, g, v] += fst[s + 3 + v]
                    else:
                        kept[c, g] += r
                        okey[no] = st[s] & pairbits  # (person, group): the rule's order
                        oslot[no] = s
                        no += 1
            # the oversized pairs' rows, numbered in (person, group) order, then each
            # pair's rows in file order (a bucket holds them in file order)
            n_over = 0
            for j in np.argsort(okey[:no]):
                s = oslot[j]
                st[s + 2] = np.uint64(n_over) | _FRESH
                n_over += np.int64(st[s + 1] & _ROWS)
            over[b] = n_over
            if no or mark_kept:
                for t in range(lo, hi):
                    h = qk[t]
                    s = _slot(st, np.int64((h >> ug) & low) * k, k, w, h)
                    if s < 0:
                        continue
                    if st[s + 1] & _ROWS > r:
                        i = st[s + 2]
                        first = np.uint64(0)
                        if i & _FRESH:
                            i ^= _FRESH
                            first = np.uint64(1)
                        st[s + 2] = i + np.uint64(1)
                        qk[t] = (i << uix) | (first << ufirst) | (h & pairbits)
                        tmarks[t] = OVERSIZED
                    elif mark_kept:
                        tmarks[t] = KEPT
            # the state reset (the persons of the bucket: all of its state, or the
            # persons of its records, an oversized record's by its slot)
            for q in range(nq):
                if dense:
                    o = q * k
                elif tmarks[lo + q] == OVERSIZED:
                    continue
                else:
                    o = np.int64((qk[lo + q] >> ug) & low) * k
                for s in range(o * w, (o + k) * w, w):
                    st[s] = _MAX
            for j in range(no):
                o = oslot[j] // w // k * k
                for s in range(o * w, (o + k) * w, w):
                    st[s] = _MAX
    out_sums = np.zeros((ngroups, m), dtype=np.float64)
    out_kept = np.zeros(ngroups, dtype=np.int64)
    out_pairs = np.zeros(ngroups, dtype=np.int64)
    for g in range(ngroups):
        for c in range(nthreads):
            out_kept[g] += kept[c, g]
            out_pairs[g] += pairs[c, g]
            for v in range(m):
                out_sums[g, v] += sums[c, g, v]
    return out_kept, out_sums, out_pairs, over


@nb.njit(cache=True, parallel=True)
def _sample(
    qk, off, first, k0, k1, p0, g0, shift, gbits, r, values, ngroups, nthreads, tmarks, mark_kept
):
    # the oversized pairs' kept rows: the rule's priority of each (the row hash of its
    # person, group and position under the row key ``(k0, k1)``), each pair's r
    # smallest, their values summed into the pair's group; ``first``: each bucket's
    # first oversized row (a bucket's count of them is the difference)
    nbuckets = off.size - 1
    m = values.shape[0]
    ug = np.uint64(gbits)
    gmask = (np.uint64(1) << ug) - np.uint64(1)
    low = (np.uint64(1) << np.uint64(shift)) - np.uint64(1)
    ufirst = np.uint64(shift + gbits)
    uix = np.uint64(shift + gbits + 1)
    most = 0
    for b in range(nbuckets):
        most = max(most, first[b + 1] - first[b])
    sums = np.zeros((nthreads, ngroups, m), dtype=np.float64)
    for c in nb.prange(nthreads):
        record = np.empty(most, dtype=np.int64)  # each index's record
        few = min(r, _INSERTION)
        best = np.empty(few, dtype=np.uint64)  # the r smallest priorities so far
        at = np.empty(few, dtype=np.int64)  # their indices
        for b in range(c, nbuckets, nthreads):
            n = first[b + 1] - first[b]
            if n == 0:
                continue
            for t in range(off[b], off[b + 1]):
                if tmarks[t] == OVERSIZED:
                    record[np.int64(qk[t] >> uix)] = t
                    if mark_kept:
                        tmarks[t] = DROPPED
            i = 0
            while i < n:
                q = qk[record[i]]
                g = np.int64(q & gmask)
                p = p0 + (np.int64(b) << shift) + np.int64((q >> ug) & low)
                e = i + 1
                while e < n and not (qk[record[e]] >> ufirst) & np.uint64(1):
                    e += 1
                if r > _INSERTION:  # a sort of the pair's priorities (O(rows log rows))
                    prio = np.empty(e - i, dtype=np.uint64)
                    for j in range(i, e):
                        prio[j - i] = _row_priority(k0, k1, p, g + g0, j - i)
                    at = np.argsort(prio)[:r] + i
                else:  # an insertion into r sorted slots
                    nbest = 0
                    for j in range(i, e):
                        x = _row_priority(k0, k1, p, g + g0, j - i)
                        if nbest == r and x >= best[r - 1]:
                            continue
                        u = min(nbest, r - 1)
                        while u > 0 and best[u - 1] > x:
                            best[u] = best[u - 1]
                            at[u] = at[u - 1]
                            u -= 1
                        best[u] = x
                        at[u] = j
                        nbest = min(nbest + 1, r)
                for u in range(r):
                    t = record[at[u]]
                    for v in range(m):
                        sums[c, g, v] += values[v, t]
                    if mark_kept:
                        tmarks[t] = KEPT
                i = e
    out = np.zeros((ngroups, m), dtype=np.float64)
    for g in range(ngroups):
        for c in range(nthreads):
            for v in range(m):
                out[g, v] += sums[c, g, v]
    return out


@nb.njit(cache=True, parallel=True)
def _unpartition(paddr, sizes, ranges, p0, shift, starts, marked, tmarks, need, marks):
    # replays the partition's scatter over the runs that hold a marked record, so that
    # each mark lands on its row; ``marked``: the marked positions, ascending
    nruns = ranges.size - 1
    row0 = _first_rows(sizes, ranges)
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
            pid = _ints(paddr, sizes, c)
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


def row_hash(
    key: tuple[int, int], person: np.ndarray, group: np.ndarray, position: np.ndarray
) -> np.ndarray:
    """The kernel's compiled SipHash-1-3 of each row's ``(person, group, position)``
    under the 128-bit row key, exposed to be held bit-equal to the rule's reference,
    :func:`dpframe.engines.bounding_rule.row_hash` (the same 24-byte messages).

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros(2, np.int64)
    >>> h = row_hash((0, 0), z, z, np.array([0, 1], np.int64))
    >>> h.dtype.name, bool(h[0] != h[1])
    ('uint64', True)
    """
    k0, k1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in key)
    p, g, pos = (np.ascontiguousarray(x, dtype=np.int64) for x in (person, group, position))
    return _row_hash_many(k0, k1, p, g, pos)


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
    lo, hi = _value_range(_addresses(pieces), _sizes(pieces))
    return int(lo), int(hi)


def _addresses(pieces: Sequence[np.ndarray]) -> np.ndarray:
    """The pieces' memory addresses, for the compiled code to read them without a copy
    (a numba typed ``List`` costs a compile in every process): the caller keeps the
    pieces alive while the compiled code runs."""
    for x in pieces:
        if not x.flags.c_contiguous or x.dtype not in (np.int64, np.float64):
            raise ValueError("each piece must be a contiguous int64 or float64 array")
    return np.array([x.ctypes.data for x in pieces], dtype=np.uint64)


def _sizes(pieces: Sequence[np.ndarray]) -> np.ndarray:
    return np.array([x.size for x in pieces], dtype=np.int64)


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
#: The least rows of a piece of a batch (:meth:`StreamedRecords.add`).
_SMALL_PIECE = 1 << 14


def _pieces(
    pid: np.ndarray | Sequence[np.ndarray],
    gid: np.ndarray | Sequence[np.ndarray],
    values: np.ndarray | Sequence[np.ndarray],
    piece: int = _PIECE,
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
        for lo in range(0, max(p.size, 1), piece):
            hi = lo + piece
            out[0].append(p[lo:hi])
            out[1].append(g[lo:hi])
            out[2].extend(v[j, lo:hi] for j in range(m))
    return (*out, m or 0)


_OUTSIDE = "a person or group value lies outside the given range"


def _layout(
    person_range: tuple[int, int], group_range: tuple[int, int], max_groups: int, m: int
) -> tuple[int, int, int]:
    """The kept groups a person ``k`` (``max_groups`` capped at the number of groups: the
    same choice, and the state's size stays bounded), the bucket shift (a bucket's
    per-person state fits in the cache) and the group bits of a priority."""
    (p0, p1), (g0, g1) = person_range, group_range
    if p1 - p0 >= 2**PERSON_BITS:
        raise ValueError(f"the persons span more than 2**{PERSON_BITS} integers")
    if g1 - g0 >= 2**GROUP_BITS:
        raise ValueError(f"the groups span more than 2**{GROUP_BITS} integers")
    k = min(int(max_groups), g1 - g0 + 1)
    gbits = max(1, (g1 - g0).bit_length())
    shift = max(0, (_STATE_BYTES // (8 * k * (3 + m))).bit_length() - 1)  # state in cache
    shift = min(shift, max(1, (p1 - p0).bit_length()), 64 - _RANDOM_BITS - gbits)
    return k, shift, gbits


def _check_buckets(off: np.ndarray) -> None:
    if off.size > 1 and int(np.diff(off).max()) >= 1 << _BUCKET_BITS:
        raise ValueError(f"a bucket holds 2**{_BUCKET_BITS} records or more: bound them in parts")


def _bound(
    qk: np.ndarray,
    vp: np.ndarray,
    off: np.ndarray,
    layout: tuple[int, int, int, int],
    bounds: tuple[int, int, int],
    row_key: tuple[int, int],
    tmarks: np.ndarray,
    mark_kept: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps 3 and 4 on the partitioned records (``qk``, ``vp``, the buckets' offsets
    ``off``; ``layout``: the least person and group codes, the bucket shift, the group
    bits; ``bounds``: ``k``, ``r`` and the number of groups): the kept rows, sums and
    pairs by group."""
    p0, g0, shift, gbits = layout
    k, r, ngroups = bounds
    threads = max(1, min(nb.get_num_threads(), off.size - 1))
    kept, sums, pairs, over = _choose(
        qk, off, shift, gbits, k, r, vp, ngroups, threads, tmarks, bool(mark_kept)
    )
    # the pairs over max_rows: the rule's row priorities of their rows (each pair's rows
    # in file order: their positions), each pair's r smallest kept
    # (called even without such a pair, so that a release always loads every kernel and
    # a later process compiles none of them)
    first = np.concatenate(([0], np.cumsum(over))).astype(np.int64)
    r0, r1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in row_key)
    sums += _sample(
        qk,
        off,
        first,
        r0,
        r1,
        p0,
        g0,
        shift,
        gbits,
        r,
        vp,
        ngroups,
        threads,
        tmarks,
        bool(mark_kept),
    )
    return kept, sums, pairs


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
    row_key: tuple[int, int],
    mark_kept: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
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
    row_key : tuple of two ints
        The rule's second key (:func:`~dpframe.engines.bounding_rule.row_key`, drawn
        right after ``key``): the rows kept of the pairs over ``max_rows`` (the rule's
        :func:`~dpframe.engines.bounding_rule.row_priority`).
    mark_kept : bool, default False
        Also mark each row kept or not (extra passes, for tests).

    Returns
    -------
    kept, sums, pairs, group_row, marks
        Indexed by ``gid - group_range[0]``: the number of kept rows, the sums of their
        values (shape (groups, m)), the number of kept ``(person, group)`` pairs (the
        group's distinct persons), and a row of each group (to read its keys' values
        from; -1: no row); then, with ``mark_kept``, each row's mark, :data:`KEPT` or
        :data:`DROPPED` (else None).

    Examples
    --------
    >>> import numpy as np
    >>> pid = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    >>> gid = np.array([0, 1, 2, 0, 0, 0], dtype=np.int64)
    >>> kept, sums, pairs, _, marks = bounded_sums(
    ...     pid, gid, np.ones((1, 6)), (1, 2), 1, 2, row_key=(3, 4), mark_kept=True
    ... )
    >>> int(kept.sum()), float(sums.sum()), int(pairs.sum()), int(marks[3:].sum())
    (3, 3.0, 2, 2)
    """
    pids, gids, vals, m = _pieces(pid, gid, values)
    n = sum(len(x) for x in pids)
    p0, p1 = _range(pids, person_range)
    g0, g1 = _range(gids, group_range)
    ngroups = g1 - g0 + 1
    _layout((p0, p1), (g0, g1), max_groups, m)  # the spans checked
    if n == 0:
        zeros = np.zeros(ngroups, np.int64)
        empty = np.zeros(0, np.uint8) if mark_kept else None
        return zeros, np.zeros((ngroups, m)), zeros.copy(), np.full(ngroups, -1, np.int64), empty
    k, shift, gbits = _layout((p0, p1), (g0, g1), max_groups, m)
    r = min(int(max_rows), n)
    k0, k1 = (np.uint64(int(v) & 0xFFFFFFFFFFFFFFFF) for v in key)
    sizes = _sizes(pids)
    ranges = _runs(list(sizes), 4 * nb.get_num_threads())
    paddr = _addresses(pids)
    # the records, by bucket: allocated here, not in the compiled code, so that numpy
    # backs them with huge pages (a sixth of the kernel's time otherwise goes to
    # faulting the pages in and unmapping them)
    qk = np.empty(n, dtype=np.uint64)
    vp = np.empty((m, n), dtype=np.float64)
    nbad, off, starts, group_row = _partition(
        paddr,
        _addresses(gids),
        _addresses(vals) if vals else np.zeros(0, np.uint64),
        sizes,
        ranges,
        m,
        p1,
        np.array([p0, g0, g1, shift, gbits], dtype=np.int64),
        np.array([k0, k1], dtype=np.uint64),
        qk,
        vp,
    )
    if nbad:
        raise ValueError(_OUTSIDE)
    _check_buckets(off)
    tmarks = np.zeros(n, dtype=np.uint8)  # each record's mark, in partition order
    layout = (p0, g0, shift, gbits)
    kept, sums, pairs = _bound(qk, vp, off, layout, (k, r, ngroups), row_key, tmarks, mark_kept)
    del qk, vp
    if not mark_kept:
        return kept, sums, pairs, group_row, None
    marks = np.zeros(n, dtype=np.uint8)
    marked = np.flatnonzero(tmarks)
    if marked.size:
        need = _marked_runs(marked, off, starts)
        _unpartition(paddr, sizes, ranges, p0, shift, starts, marked, tmarks, need, marks)
    return kept, sums, pairs, group_row, marks


class StreamedRecords:
    """The records of a bounding, partitioned by person as they arrive in batches.

    What :func:`bounded_sums` does, for records read in batches (a streaming read): the
    persons are counted by bucket first (``persons``: every record's person, in any
    pieces), then each batch of records is placed in its buckets as it arrives
    (:meth:`add`, in the input's order: a pair's rows keep their order), and
    :meth:`bound` chooses and sums. Only the kernel's own copy of the records is held
    (a priority and the values: ``8 + 8 * m`` bytes a record), never the batches. The
    same rows are kept as by :func:`bounded_sums` for the same keys.

    Parameters
    ----------
    persons : sequence of numpy.ndarray of int64
        Every record's person (the counts by bucket; freed by the caller after).
    m : int
        The number of value columns.
    bounds : tuple of two ints
        The unit's ``(max_groups, max_rows)``.
    person_range, group_range : tuple of two ints
        The least and greatest person and group codes (a record outside raises
        ``ValueError`` in :meth:`add`).
    key, row_key : tuple of two ints
        The rule's two keys (:func:`bounded_sums`).

    Examples
    --------
    >>> import numpy as np
    >>> pid = np.array([0, 0, 0, 1], dtype=np.int64)
    >>> records = StreamedRecords([pid], 1, (1, 1), (0, 1), (0, 2), (1, 2), (3, 4))
    >>> records.add([pid[:2]], [np.array([0, 1])], [[np.ones(2)]])
    >>> records.add([pid[2:]], [np.array([2, 0])], [[np.ones(2)]])
    >>> kept, sums, pairs, group_row = records.bound()
    >>> int(kept.sum()), float(sums.sum()), int(pairs.sum()), group_row.tolist()
    (2, 2.0, 2, [0, 1, 2])
    """

    def __init__(
        self,
        persons: Sequence[np.ndarray],
        m: int,
        bounds: tuple[int, int],
        person_range: tuple[int, int],
        group_range: tuple[int, int],
        key: tuple[int, int],
        row_key: tuple[int, int],
    ) -> None:
        pids = [np.ascontiguousarray(x, dtype=np.int64) for x in persons if len(x)]
        self.m = int(m)
        self.p0, self.p1 = (int(v) for v in person_range)
        self.g0, self.g1 = (int(v) for v in group_range)
        self.k, self.shift, self.gbits = _layout(person_range, group_range, bounds[0], m)
        self.max_rows = int(bounds[1])
        self.keys = np.array([int(v) & 0xFFFFFFFFFFFFFFFF for v in key], dtype=np.uint64)
        self.row_key = row_key
        nbuckets = ((self.p1 - self.p0) >> self.shift) + 1
        hist = np.zeros(nbuckets, dtype=np.int64)
        if pids:
            sizes = _sizes(pids)
            ranges = _runs(list(sizes), 4 * nb.get_num_threads())
            args = (_addresses(pids), sizes, ranges, self.p0, self.p1, self.shift)
            nbad, hist = _bucket_counts(*args)
            if nbad:
                raise ValueError(_OUTSIDE)
        self.off = np.concatenate(([0], np.cumsum(hist))).astype(np.int64)
        _check_buckets(self.off)
        n = int(self.off[-1])
        # allocated here, not in the compiled code: numpy backs them with huge pages
        self.qk = np.empty(n, dtype=np.uint64)
        self.vp = np.empty((self.m, n), dtype=np.float64)
        self.cursor = self.off[:-1].copy()
        self.group_row = np.full(self.g1 - self.g0 + 1, -1, dtype=np.int64)
        self.rows = 0

    def add(
        self,
        pid: Sequence[np.ndarray],
        gid: Sequence[np.ndarray],
        values: Sequence[np.ndarray] | Sequence[Sequence[np.ndarray]],
    ) -> None:
        """Place a batch of records (pieces as in :func:`bounded_sums`) in their buckets;
        ``ValueError`` if a code lies outside the ranges or the batches hold more
        records of a bucket than were counted (nothing of the batch placed)."""
        rows = sum(len(x) for x in ([pid] if isinstance(pid, np.ndarray) else pid))
        piece = max(_SMALL_PIECE, -(-rows // (4 * nb.get_num_threads())))  # work for each thread
        pids, gids, vals, m = _pieces(pid, gid, values, min(piece, _PIECE))
        if m != self.m:
            raise ValueError(f"a batch has {m} value columns, not {self.m}")
        self._place(pids, gids, vals)

    def _place(
        self, pids: list[np.ndarray], gids: list[np.ndarray], vals: list[np.ndarray]
    ) -> None:
        pids = [x for x in pids if x.size]
        if not pids:
            return
        gids = [x for x in gids if x.size]
        vals = [x for x in vals if x.size]
        sizes = _sizes(pids)
        ranges = _runs(list(sizes), 4 * nb.get_num_threads())
        addrs = (
            _addresses(pids),
            _addresses(gids),
            _addresses(vals) if vals else np.zeros(0, np.uint64),
        )
        spec = np.array([self.p0, self.g0, self.g1, self.shift, self.gbits], dtype=np.int64)
        args = (
            addrs,
            sizes,
            ranges,
            self.m,
            self.p1,
            spec,
            self.keys,
            self.qk,
            self.vp,
            self.cursor,
        )
        nbad = _scatter(*args, self.off[1:], self.group_row, self.rows)
        if nbad < 0:
            raise ValueError("the batches hold more records than were counted")
        if nbad:
            raise ValueError(_OUTSIDE)
        self.rows += int(sizes.sum())

    def bound(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Choose and sum (once every record was added): ``kept``, ``sums``, ``pairs``
        and ``group_row`` (a row of each group, counting the rows in the order they
        were added) of :func:`bounded_sums`; ``ValueError`` if fewer records were added
        than counted. The records are freed."""
        if not np.array_equal(self.cursor, self.off[1:]):
            raise ValueError("the batches hold fewer records than were counted")
        n = int(self.off[-1])
        ngroups = self.g1 - self.g0 + 1
        if n == 0:
            zeros = np.zeros(ngroups, np.int64)
            return zeros, np.zeros((ngroups, self.m)), zeros.copy(), self.group_row
        qk, vp = self.qk, self.vp
        self.qk = self.vp = np.empty(0)
        layout = (self.p0, self.g0, self.shift, self.gbits)
        bounds = (self.k, min(self.max_rows, n), ngroups)
        tmarks = np.zeros(n, dtype=np.uint8)
        found = _bound(qk, vp, self.off, layout, bounds, self.row_key, tmarks, False)
        return (*found, self.group_row)


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
