"""Independent reference computations for the PRAM design (tests only).

Nothing here is shared with ``dpframe.mechanisms.pram``: the mutual information is
the textbook double sum, privacy is checked on the full matrix column by column, and
the vertices of the feasible polytope are found by brute force.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np


def pram_matrix(q: np.ndarray) -> np.ndarray:
    s = q.size
    m = np.repeat(((1.0 - q) / (s - 1))[:, None], s, axis=1)
    np.fill_diagonal(m, q)
    return m


def mutual_information(p: np.ndarray, m: np.ndarray) -> float:
    """sum_x sum_z p_x M_xz log(M_xz / m_z), the definition."""
    out = p @ m
    total = 0.0
    for x in range(p.size):
        for z in range(p.size):
            joint = p[x] * m[x, z]
            if joint > 0:
                total += joint * math.log(m[x, z] / out[z])
    return total


def matrix_epsilon(m: np.ndarray) -> float:
    """max over columns of log(max_i M_ij / min_i M_ij)."""
    hi, lo = m.max(axis=0), m.min(axis=0)
    used = hi > 0  # a column of zeros is never released
    if (lo[used] <= 0).any():
        return math.inf
    return float(np.max(np.log(hi[used] / lo[used]), initial=0.0))


def feasible(q: np.ndarray, epsilon: float, lower: float = 0.0, tol: float = 1e-9) -> bool:
    if (q < lower - tol).any() or (q > 1 + tol).any():
        return False
    return matrix_epsilon(pram_matrix(np.clip(q, 0.0, 1.0))) <= epsilon + tol


def _constraints(s: int, epsilon: float, lower: float):
    """All linear constraints ``c . q <= d`` of eq. (10) plus the box, unreduced."""
    a = math.exp(epsilon)
    rows, rhs = [], []
    for k, j in itertools.permutations(range(s), 2):
        # q_k <= a r_j,  r_k <= a q_j,  r_k <= a r_j  (r = (1 - q) / (S - 1))
        c = np.zeros(s)
        c[k] += s - 1
        c[j] += a
        rows.append(c)
        rhs.append(a)
        c = np.zeros(s)
        c[k] -= 1
        c[j] -= a * (s - 1)
        rows.append(c)
        rhs.append(-1.0)
        if s >= 3:
            c = np.zeros(s)
            c[k] -= 1
            c[j] += a
            rows.append(c)
            rhs.append(a - 1)
    for k in range(s):
        c = np.zeros(s)
        c[k] = -1
        rows.append(c)
        rhs.append(-lower)
        c = np.zeros(s)
        c[k] = 1
        rows.append(c)
        rhs.append(1.0)
    return np.array(rows), np.array(rhs)


def _snap(x: np.ndarray) -> np.ndarray:
    """Vertex values that are exactly 0 or 1 (S = 2: q = (1, 0)) come back from a float
    solve up to ~1e-17 off (it depends on the LAPACK build); snap them, or a zero column
    of the matrix reads as an infinite ratio. No other vertex value is within 1e-12 of
    0 or 1 for epsilon <= 12."""
    x = np.where(np.abs(x) < 1e-12, 0.0, x)
    return np.where(np.abs(x - 1.0) < 1e-12, 1.0, x)


def vertices_bruteforce(s: int, epsilon: float, lower: float = 0.0) -> np.ndarray:
    """Every vertex, by solving every S-subset of the constraints (small S only)."""
    c, d = _constraints(s, epsilon, lower)
    found = []
    for idx in itertools.combinations(range(len(d)), s):
        sub = c[list(idx)]
        if abs(np.linalg.det(sub)) < 1e-12:
            continue
        q = _snap(np.linalg.solve(sub, d[list(idx)]))
        if (c @ q <= d + 1e-9).all():
            found.append(q)
    return _unique_rows(np.array(found))


def _unique_rows(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` without near-duplicates (the values themselves are not rounded)."""
    _, first = np.unique(np.round(x, 10), axis=0, return_index=True)
    return x[np.sort(first)]


def sorted_vertex_values(s: int, epsilon: float, lower: float = 0.0) -> list[np.ndarray]:
    """Sorted vertices (q_1 >= ... >= q_S), by blocks of equal values.

    In the cone q_1 >= ... >= q_S, the constraints of eq. (10) reduce to the two largest
    values, the two smallest, the largest against the smallest, and the box. A vertex
    with blocks of equal values b_1 > ... > b_d has d of these tight. Enumerate every
    composition of S into d <= 7 blocks and every d-subset of the 7 constraints.
    """
    a = math.exp(epsilon)
    out = []
    for d in range(1, min(s, 7) + 1):
        for cuts in itertools.combinations(range(1, s), d - 1):
            sizes = np.diff((0, *cuts, s))
            block = np.repeat(np.arange(d), sizes)  # position -> block
            b1, b2, bs1, bs = block[0], block[1], block[s - 2], block[s - 1]
            eqs = []

            def row(coef, d=d):
                r = np.zeros(d)
                for j, v in coef:
                    r[j] += v
                return r

            eqs.append((row([(b1, s - 1), (b2, a)]), a))
            eqs.append((row([(b2, s - 1), (b1, a)]), a))
            eqs.append((row([(bs, -a * (s - 1)), (bs1, -1)]), -1.0))
            eqs.append((row([(bs1, -a * (s - 1)), (bs, -1)]), -1.0))
            if s >= 3:
                eqs.append((row([(b1, a), (bs, -1)]), a - 1))
            eqs.append((row([(bs, -1)]), -lower))
            eqs.append((row([(b1, 1)]), 1.0))
            for sub in itertools.combinations(eqs, d):
                mat = np.array([e[0] for e in sub])
                if abs(np.linalg.det(mat)) < 1e-12:
                    continue
                vals = _snap(np.linalg.solve(mat, np.array([e[1] for e in sub])))
                if d > 1 and not (np.diff(vals) < -1e-12).all():
                    continue
                q = vals[block]
                if feasible(q, epsilon, lower):
                    out.append(q)
    return list(_unique_rows(np.array(out)))


def _distinct_permutations(values: np.ndarray):
    uniq, counts = np.unique(values, return_counts=True)
    s = values.size

    def rec(pos_left, counts_left):
        if not pos_left:
            yield {}
            return
        for j in range(uniq.size):
            if counts_left[j]:
                continue_counts = counts_left.copy()
                continue_counts[j] -= 1
                for rest in rec(pos_left[1:], continue_counts):
                    rest = dict(rest)
                    rest[pos_left[0]] = uniq[j]
                    yield rest

    for assign in rec(list(range(s)), counts.copy()):
        yield np.array([assign[i] for i in range(s)])


def best_design(p: np.ndarray, epsilon: float, lower: float = 0.0) -> tuple[float, np.ndarray]:
    """(max MI, argmax q) over every assignment of every vertex to the categories."""
    best_f, best_q = -1.0, None
    for vals in sorted_vertex_values(p.size, epsilon, lower):
        for q in _distinct_permutations(vals):
            f = mutual_information(p, pram_matrix(q))
            if f > best_f:
                best_f, best_q = f, q
    return best_f, best_q


# ---------------------------------------------------------------------------
# Faster forms of the same computations (checked against the ones above)
# ---------------------------------------------------------------------------


def sorted_vertex_values_pruned(s: int, epsilon: float, lower: float = 0.0) -> list[np.ndarray]:
    """:func:`sorted_vertex_values` restricted to the compositions that can be vertices.

    In sorted form the constraints only involve the values at positions 1, 2, S-1 and
    S. A block of equal values containing none of these positions appears in no
    constraint, so its column is zero in every system and no vertex has it: only
    compositions whose every block holds one of the four end positions are solved
    (hence at most four blocks). Same systems and feasibility test (on the full matrix),
    solved in batches.
    """
    a = math.exp(epsilon)
    ends = (0, 1, s - 2, s - 1)
    candidates = []
    for d in range(1, min(s, 4) + 1):
        subsets = np.array(list(itertools.combinations(range(7 if s >= 3 else 6), d)))
        for cuts in itertools.combinations(range(1, s), d - 1):
            bounds = (0, *cuts, s)
            if not all(any(lo <= e < hi for e in ends) for lo, hi in itertools.pairwise(bounds)):
                continue
            block = np.repeat(np.arange(d), np.diff(bounds))
            b1, b2, bs1, bs = block[0], block[1], block[s - 2], block[s - 1]
            rows = [
                ([(b1, s - 1), (b2, a)], a),
                ([(b2, s - 1), (b1, a)], a),
                ([(bs, -a * (s - 1)), (bs1, -1)], -1.0),
                ([(bs1, -a * (s - 1)), (bs, -1)], -1.0),
                ([(bs, -1)], -lower),
                ([(b1, 1)], 1.0),
            ]
            if s >= 3:
                rows.append(([(b1, a), (bs, -1)], a - 1))
            eq = np.zeros((len(rows), d))
            rhs = np.array([r[1] for r in rows])
            for i, (coef, _) in enumerate(rows):
                for j, v in coef:
                    eq[i, j] += v
            mats = eq[subsets]
            ok = np.abs(np.linalg.det(mats)) >= 1e-12
            if not ok.any():
                continue
            vals = _snap(np.linalg.solve(mats[ok], rhs[subsets[ok]][..., None])[..., 0])
            if d > 1:
                vals = vals[(np.diff(vals, axis=1) < -1e-12).all(axis=1)]
            candidates.extend(vals[:, block])
    if not candidates:
        return []
    uniq = _unique_rows(np.array(candidates))
    return [q for q in uniq if feasible(q, epsilon, lower)]


def arrangements(values: np.ndarray) -> np.ndarray:
    """Every distinct arrangement of the multiset ``values``, one per row."""
    uniq, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    s = int(counts.sum())
    rows: list[np.ndarray] = []

    def rec(free: tuple[int, ...], level: int, q: np.ndarray) -> None:
        if level == uniq.size - 1:
            q = q.copy()
            q[list(free)] = uniq[level]
            rows.append(q)
            return
        for pos in itertools.combinations(free, counts[level]):
            nxt = q.copy()
            nxt[list(pos)] = uniq[level]
            rec(tuple(i for i in free if i not in pos), level + 1, nxt)

    rec(tuple(range(s)), 0, np.empty(s))
    return np.array(rows)


def mutual_information_many(p: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """:func:`mutual_information` of ``pram_matrix(q)`` for every row ``q`` of ``qs``."""
    qs = np.atleast_2d(qs)
    s = p.size
    out = np.empty(qs.shape[0])
    for start in range(0, qs.shape[0], 4096):
        q = qs[start : start + 4096]
        m = np.repeat(((1.0 - q) / (s - 1))[:, :, None], s, axis=2)  # (K, x, z)
        idx = np.arange(s)
        m[:, idx, idx] = q
        marg = np.einsum("x,kxz->kz", p, m)
        joint = p[None, :, None] * m
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(joint > 0, joint * np.log(m / marg[:, None, :]), 0.0)
        out[start : start + q.shape[0]] = terms.sum(axis=(1, 2))
    return out


@functools.cache
def arrangement_table(s: int, epsilon: float, lower: float = 0.0) -> np.ndarray:
    """Every arrangement of every vertex (rows), cached: the exhaustive search space."""
    return np.concatenate(
        [arrangements(v) for v in sorted_vertex_values_pruned(s, epsilon, lower)], axis=0
    )


def best_of(p: np.ndarray, qs: np.ndarray) -> tuple[float, np.ndarray]:
    """(max MI, argmax q) over the rows of ``qs``, exact to about 1e-13 relative.

    The dense sum screens (its error is below 1e-13 absolute: at most S^2 <= 144 terms
    of size <= 2 log S, plus ~S ulp from sum(p)); every row within 1e-11 absolute
    or 1e-9 relative of its maximum is then evaluated by the accurate form.
    """
    f = mutual_information_many(p, qs)
    top = f.max()
    cand = np.flatnonzero(f >= top - max(1e-11, 1e-9 * abs(top)))
    fa = mutual_information_accurate(p, qs[cand])
    i = int(np.argmax(fa))
    return float(fa[i]), qs[cand[i]]


def best_arrangement(p: np.ndarray, values: np.ndarray) -> tuple[float, np.ndarray]:
    """(max MI, argmax q) over the arrangements of one multiset of keep probabilities."""
    return best_of(p, arrangements(values))


def best_design_fast(p: np.ndarray, epsilon: float, lower: float = 0.0) -> tuple[float, np.ndarray]:
    """:func:`best_design`, vectorised, with the accurate MI deciding near-ties."""
    return best_of(p, arrangement_table(p.size, float(epsilon), float(lower)))


def _h(delta: np.ndarray) -> np.ndarray:
    """``delta - log1p(delta)`` (>= 0), with its Taylor series where ``|delta|`` is small."""
    out = np.empty_like(delta)
    small = np.abs(delta) < 1e-2
    d = delta[small]
    # sum_{k>=2} (-1)^k d^k / k; |d| < 1e-2 so terms to k = 10 leave < 1e-20 relative
    series = np.zeros_like(d)
    for k in range(10, 1, -1):
        series = series * d + (-1) ** k / k
    out[small] = series * d * d
    big = ~small
    out[big] = delta[big] - np.log1p(delta[big])
    return out


def mutual_information_accurate(p: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """I(X; Z) of ``pram_matrix(q)`` for each row of ``qs``, accurate when it is tiny.

    The textbook sum loses everything when ``M_x ~ m`` (its terms are of order
    ``p_x M_xz`` and it returns their near-cancellation; a rounding of ``sum(p)``
    alone shifts it by ~1e-16). Here ``KL(M_x || m) = sum_z M_xz h(d_xz)`` with
    ``h(d) = d - log1p(d)`` and ``d_xz = m_z / M_xz - 1`` formed from differences of
    matrix entries, ``M_xz d_xz = sum_x' p_x' (M_x'z - M_xz)`` (``sum_z M_xz d_xz = 0``
    makes the identity exact), then ``I = sum_x p_x KL(M_x || m) / sum(p)``.
    ``O(S^3)`` per design.
    """
    qs = np.atleast_2d(np.asarray(qs, dtype=np.float64))
    s = p.size
    out = np.empty(qs.shape[0])
    step = max(1, 2_000_000 // s**3)
    idx = np.arange(s)
    for start in range(0, qs.shape[0], step):
        q = qs[start : start + step]
        m = np.repeat(((1.0 - q) / (s - 1))[:, :, None], s, axis=2)  # (K, x, z)
        m[:, idx, idx] = q
        # diff[k, x', x, z] = M[x', z] - M[x, z]
        diff = m[:, :, None, :] - m[:, None, :, :]
        dev = np.einsum("a,kaxz->kxz", p, diff)  # M_xz d_xz
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = np.where(m > 0, dev / m, 0.0)
        terms = np.where(m > 0, m * _h(delta), 0.0)
        out[start : start + q.shape[0]] = (terms.sum(axis=2) @ p) / p.sum()
    return out


def vertices_bruteforce_batched(s: int, epsilon: float, lower: float = 0.0) -> np.ndarray:
    """:func:`vertices_bruteforce` with the S-subsets solved in one batch (S <= 4 here)."""
    c, d = _constraints(s, epsilon, lower)
    idx = _subsets(len(d), s)
    sub = c[idx]
    ok = np.abs(np.linalg.det(sub)) >= 1e-12
    q = _snap(np.linalg.solve(sub[ok], d[idx[ok]][..., None])[..., 0])
    return _unique_rows(q[(q @ c.T <= d + 1e-9).all(axis=1)])


@functools.cache
def _subsets(n: int, k: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(n), k)))


# ---------------------------------------------------------------------------
# Estimable designs (docs/pram-design.md, section 10)
# ---------------------------------------------------------------------------


def pram_determinant(q: np.ndarray) -> float:
    """det of the PRAM matrix, by LU (numpy), for comparison with the closed form."""
    return float(np.linalg.det(pram_matrix(np.asarray(q, dtype=np.float64))))


def is_estimable(q: np.ndarray, delta: float, cancellation: float = 0.5) -> bool:
    """The estimable designs of docs/pram-design.md, section 10, from the definition
    (nothing shared with the kernel): at most one ``|q_k - 1/S| < delta``, and, unless
    some ``q_k = 1/S`` exactly, ``|sum 1/x| >= cancellation * sum |1/x|`` (``x = S q -
    1``)."""
    q = np.asarray(q, dtype=np.float64)
    s = q.size
    if (np.abs(q - 1.0 / s) < delta * (1 - 1e-9)).sum() >= 2:
        return False
    x = s * q - 1.0
    if (x == 0).any():
        return True
    inv = 1.0 / x
    return bool(abs(inv.sum()) >= cancellation * np.abs(inv).sum() * (1 - 1e-9))


def estimable_vertex_values(s: int, epsilon: float, lower: float, delta: float) -> list[np.ndarray]:
    """Sorted vertices of the estimable designs' pieces, by blocks of equal values.

    The estimable set (band part) is a union of polytopes: the ``t`` largest values at
    least ``1/S + delta``, then optionally one free value, the rest at most ``1/S -
    delta``. In sorted form a piece adds at most two linear constraints (at positions
    ``t`` and ``t + f + 1``) to the seven of :func:`sorted_vertex_values`; every
    composition into blocks and every subset of the equations is solved, and the
    solutions that are feasible (full matrix), in the piece and estimable
    (:func:`is_estimable`, which also tests the cancellation) are kept.
    """
    a = math.exp(epsilon)
    hi_band, lo_band = 1.0 / s + delta, 1.0 / s - delta
    out = []
    for t in range(s + 1):
        for f in (0, 1):
            if t + f > s:
                continue
            below = t + f  # 0-based index of the first value held below the band
            used = {0, 1, s - 2, s - 1} | ({t - 1} if t >= 1 else set())
            used |= {below} if below < s else set()
            for d in range(1, min(s, 6) + 1):
                for cuts in itertools.combinations(range(1, s), d - 1):
                    bounds = (0, *cuts, s)
                    if not all(
                        any(lo <= e < hi for e in used) for lo, hi in itertools.pairwise(bounds)
                    ):
                        continue
                    block = np.repeat(np.arange(d), np.diff(bounds))
                    b1, b2, bs1, bs = block[0], block[1], block[s - 2], block[s - 1]
                    rows = [
                        ([(b1, s - 1), (b2, a)], a),
                        ([(b2, s - 1), (b1, a)], a),
                        ([(bs, -a * (s - 1)), (bs1, -1)], -1.0),
                        ([(bs1, -a * (s - 1)), (bs, -1)], -1.0),
                        ([(bs, -1)], -lower),
                        ([(b1, 1)], 1.0),
                    ]
                    if s >= 3:
                        rows.append(([(b1, a), (bs, -1)], a - 1))
                    if t >= 1:
                        rows.append(([(block[t - 1], -1)], -hi_band))
                    if below < s:
                        rows.append(([(block[below], 1)], lo_band))
                    eq = np.zeros((len(rows), d))
                    rhs = np.array([r[1] for r in rows])
                    for i, (coef, _) in enumerate(rows):
                        for j, v in coef:
                            eq[i, j] += v
                    for sub in itertools.combinations(range(len(rows)), d):
                        mat = eq[list(sub)]
                        if abs(np.linalg.det(mat)) < 1e-12:
                            continue
                        vals = _snap(np.linalg.solve(mat, rhs[list(sub)]))
                        if d > 1 and not (np.diff(vals) < -1e-12).all():
                            continue
                        q = vals[block]
                        if t >= 1 and q[t - 1] < hi_band - 1e-12:
                            continue
                        if below < s and q[below] > lo_band + 1e-12:
                            continue
                        if feasible(q, epsilon, lower) and is_estimable(q, delta):
                            out.append(q)
    return list(_unique_rows(np.array(out))) if out else []


@functools.cache
def estimable_arrangement_table(s: int, epsilon: float, lower: float, delta: float) -> np.ndarray:
    """Every arrangement of every estimable vertex: the exhaustive search space."""
    verts = estimable_vertex_values(s, epsilon, lower, delta)
    return np.concatenate([arrangements(v) for v in verts], axis=0)


def estimable_vertices_bruteforce(s: int, epsilon: float, lower: float, delta: float) -> np.ndarray:
    """Every vertex of every piece of the estimable set, unsorted (small S only).

    A piece gives each category a sign: at least ``1/S + delta``, at most ``1/S - delta``,
    or (one category at most) free. Its vertices solve every S-subset of the constraints
    of eq. (10), the box and the piece's bounds; those that are estimable are kept.
    """
    c0, d0 = _constraints(s, epsilon, lower)
    found = []
    for signs in itertools.product((1, -1, 0), repeat=s):
        if signs.count(0) > 1:
            continue
        rows, rhs = [c0], [d0]
        for k, sign in enumerate(signs):
            if sign:
                row = np.zeros(s)
                row[k] = -sign  # -q_k <= -(1/S + delta)  or  q_k <= 1/S - delta
                rows.append(row[None, :])
                rhs.append(np.array([-sign / s - delta]))
        c, d = np.concatenate(rows), np.concatenate(rhs)
        idx = _subsets(len(d), s)
        sub = c[idx]
        ok = np.abs(np.linalg.det(sub)) >= 1e-12
        q = _snap(np.linalg.solve(sub[ok], d[idx[ok]][..., None])[..., 0])
        q = q[(q @ c.T <= d + 1e-9).all(axis=1)]
        found.extend(v for v in q if feasible(v, epsilon, lower) and is_estimable(v, delta))
    return _unique_rows(np.array(found)) if found else np.empty((0, s))
