"""Independent reference computations for the PRAM design (tests only).

Nothing here is shared with ``dpframe.mechanisms.pram``: the mutual information is
the textbook double sum, privacy is checked on the full matrix column by column, and
the vertices of the feasible polytope are found by brute force.
"""

from __future__ import annotations

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


def vertices_bruteforce(s: int, epsilon: float, lower: float = 0.0) -> np.ndarray:
    """Every vertex, by solving every S-subset of the constraints (small S only)."""
    c, d = _constraints(s, epsilon, lower)
    found = []
    for idx in itertools.combinations(range(len(d)), s):
        sub = c[list(idx)]
        if abs(np.linalg.det(sub)) < 1e-12:
            continue
        q = np.linalg.solve(sub, d[list(idx)])
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
                vals = np.linalg.solve(mat, np.array([e[1] for e in sub]))
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
