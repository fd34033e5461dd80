"""The MI-optimal ε-DP PRAM design within the paper's family (Ayed, Battiston & Camerlenghi).

The mechanism (Ayed, Battiston & Camerlenghi, eq. 8): a record whose category is ``k``
keeps it with probability ``q_k`` and otherwise moves to one of the other ``S - 1``
categories, chosen uniformly. Its matrix ``M`` (row ``i`` = true category, column ``j``
= released one) has ``M_kk = q_k`` and ``M_kj = r_k = (1 - q_k) / (S - 1)``. Records
are randomized independently, so under substitute neighbours the release is
``ε``-DP iff every column satisfies ``max_i M_ij <= e^ε min_i M_ij`` (paper eq. 10).
PRAM protects values, not presence: it is not defined for add/remove neighbours.

Design (:func:`design`). ``q`` maximises the mutual information ``I(X; Z)`` for
``X ~ p`` subject to ``ε``-DP. ``I`` is convex in ``q`` and the constraints are
linear, so an optimum sits at a vertex of the feasible polytope. Sorting ``q``
shows that only four constraints matter (the top two values, the bottom two, and
max against min), hence every vertex takes at most three distinct values, and
the vertices fall into a handful of *families*: a tuple of values with a range of
multiplicities (:func:`vertex_families`; ``docs/pram-design.md`` has the proof and
the corrected Proposition 3.2). Within a family, which category gets which value is
an assignment problem that is *not* solved by sorting ``p`` (the paper's tables and a
threshold rule both fail). It is solved exactly by branch and bound with the bound
``I(q) <= sum_x p_x KL(M_x || n)``, valid for every positive vector ``n`` because
entropy is concave (tight at ``n`` = the output law); it is linear in the assignment,
so each bound is a sort. Families with a single odd value are enumerated outright.
The result is exact up to a relative ``1e-12`` in the MI.

Estimability (``estimable=True``, the default). The plain optimum can keep two or more
categories at ``q = 1/S``; their rows are then equal and the matrix singular (``det M =
e_{S-1}(S q - 1) / (S (S-1)^(S-1))``). :func:`design` keeps a margin from such designs
(``docs/pram-design.md``, section 10) and :attr:`PramDesign.estimable` says whether a design
can be estimated from.

Sampling is :mod:`~dpframe.mechanisms.pram.sampling`; estimation
:mod:`~dpframe.mechanisms.pram.estimation`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import check, check_epsilon
from dpframe.core.frozen import frozen_array
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.sampling import PramSampler, _pram_matrix, _round_pram, check_matrix

__all__ = [
    "ESTIMABLE_MARGIN",
    "SINGULAR_RTOL",
    "PramDesign",
    "design",
    "dominance_cost",
    "estimability_cost",
    "krr",
    "mutual_information",
    "vertex_families",
]

#: Largest epsilon accepted by :func:`design` (see docs/pram-design.md, "Limits").
MAX_EPSILON = 12.0
#: Smallest epsilon accepted by :func:`design` (the MI is then at most (e^ε - 1)^2 ~ 1e-18 nats).
MIN_EPSILON = 1e-9
#: Relative tolerance of the optimiser (MI values closer than this are ties).
MI_RTOL = 1e-12
#: The margin ``eta`` of ``design(..., estimable=True)``: at most one category may keep
#: ``q_k`` within ``eta (v_alpha - 1/S)`` of ``1/S`` (docs/pram-design.md, section 10).
ESTIMABLE_MARGIN = 0.05
#: An estimable design also keeps ``|sum_k 1/(S q_k - 1)| >= CANCELLATION sum_k |1/(S q_k
#: - 1)|``: categories above and below ``1/S`` cancel at most halfway (section 10).
CANCELLATION = 0.5
_MAX_NODES = 200_000
_REPS = 16  # representative multiplicity vectors per node
_PER_ROW_MAX = 64  # per-vector bounds only at nodes with at most this many vectors


# ---------------------------------------------------------------------------
# Accurate information measures
# ---------------------------------------------------------------------------


def _mh(x: npt.ArrayLike, m: npt.ArrayLike) -> np.ndarray:
    """``m h(x / m) = x log(x / m) - x + m`` (>= 0), accurate when ``x ~ m``; 0 at ``m = 0``.

    With ``d = (x - m) / m`` (``x - m`` is exact when ``x`` and ``m`` are within a factor
    2): ``m ((1 + d) log1p(d) - d)``, and for ``|d| < 0.01`` the series
    ``m d^2 sum_{k>=2} (-d)^{k-2} / (k (k - 1))`` (to ``d^9``), which avoids cancellation.
    (``m_z = 0`` only when every row with ``p_x > 0`` has ``M_xz = 0``.)
    """
    x, m = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(m, dtype=np.float64))
    pos = m > 0
    if not pos.all():
        out = np.zeros(x.shape)
        out[pos] = _mh(x[pos], m[pos])
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (x - m) / m
        out = np.where(x > 0, (1.0 + d) * np.log1p(d) - d, 1.0)
    small = np.abs(d) < 1e-2
    if small.any():
        ds = d[small]
        poly = np.full(ds.shape, _SERIES[-1])
        for c in _SERIES[-2::-1]:
            poly = poly * ds + c
        out[small] = ds * ds * poly
    return m * out


# coefficients of sum_{k>=2} (-1)^k d^(k-2) / (k (k - 1)), k = 2..9
_SERIES = tuple((-1) ** k / (k * (k - 1)) for k in range(2, 10))


def _pram_mi(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``I(X; Z)`` of PRAM designs ``q`` (shape ``(..., S)``) for ``X ~ p``, in nats.

    Written as ``sum_x p_x KL(M_x || m)`` with ``KL = sum_z m_z h(M_xz / m_z)`` (every
    term non-negative). Row ``x`` needs ``sum_{z != x} m_z h(r_x / m_z)``: it is taken
    from exclusive prefix and suffix sums over ``z`` (one pair per distinct ``r``), never
    as a total minus the own term, which would cancel when the own term dominates (a
    prior concentrated on one category). Cost ``O(S * distinct(q))`` per design.
    """
    q = np.asarray(q, dtype=np.float64)
    s = p.shape[-1]
    q2 = np.atleast_2d(q)
    r2 = (1.0 - q2) / (s - 1)
    m2 = p * (q2 - r2) + (p * r2).sum(-1, keepdims=True)
    out = np.empty(q2.shape[0])
    zero = np.zeros(1)
    for i in range(q2.shape[0]):
        levels, inverse = np.unique(r2[i], return_inverse=True)
        others = np.empty(s)
        for j, rv in enumerate(levels):
            terms = _mh(rv, m2[i])
            before = np.concatenate([zero, np.cumsum(terms[:-1])])  # sum over z < x
            after = np.concatenate([np.cumsum(terms[::-1])[::-1][1:], zero])  # z > x
            rows = inverse == j
            others[rows] = before[rows] + after[rows]
        row = _mh(q2[i], m2[i]) + others
        out[i] = (p * row).sum()
    return out.reshape(q.shape[:-1]) if q.ndim > 1 else out[0]


def mutual_information(p: npt.ArrayLike, channel: npt.ArrayLike) -> float:
    """Mutual information ``I(X; Z)`` in nats for ``X ~ p`` and a PRAM channel.

    Parameters
    ----------
    p : array_like, shape (S,)
        Distribution of the true category.
    channel : array_like, shape (S,) or (S, S)
        Either the keep probabilities ``q`` of a PRAM design (eq. 8) or a full
        row-stochastic matrix (row = true category, column = released).

    Returns
    -------
    float

    Examples
    --------
    >>> round(mutual_information([0.5, 0.5], [1.0, 1.0]), 6)  # identity: H(X) = log 2
    0.693147
    >>> abs(mutual_information([0.2, 0.3, 0.5], [1 / 3] * 3)) < 1e-15  # q = 1/S: uniform rows
    True
    """
    pv = _check_p(p)
    c = np.asarray(channel, dtype=np.float64)
    if c.ndim == 1:
        if c.shape != pv.shape or not np.isfinite(c).all() or (c < 0).any() or (c > 1).any():
            raise InvalidParameterError(
                f"channel: a vector of keep probabilities q must have shape {pv.shape} with "
                f"entries in [0, 1], got shape {c.shape}; or pass the S x S matrix"
            )
        return float(_pram_mi(pv, c))
    check_matrix(c)
    if c.shape[0] != pv.size:
        raise InvalidParameterError(f"matrix is {c.shape[0]}x{c.shape[0]} but p has {pv.size}")
    m = pv @ c
    return float(pv @ _mh(c, m[None, :]).sum(axis=1))


# ---------------------------------------------------------------------------
# The feasible polytope: vertex families
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Family:
    """Vertices with these ``values`` (decreasing) at each multiplicity in ``counts``."""

    values: tuple[float, ...]
    counts: tuple[tuple[int, ...], ...]
    equations: tuple[str, ...]


def _k_rr(s: int, a: float) -> tuple[float, float]:
    """``(v_alpha, v_-alpha)``: symmetric k-RR and its mirror, ``e^{±α}/(e^{±α}+S-1)``."""
    return a / (a + s - 1), 1.0 / (1.0 + a * (s - 1))


def _feasible_sorted(
    t1: float, t2: float, b2: float, b1: float, s: int, a: float, lo: float, lo2: float = 0.0
):
    """Sorted-form DP constraints of eq. (10) on ``t1 >= t2 >= ... >= b2 >= b1``, with
    the lower bounds ``b1 >= lo`` and ``b2 >= lo2`` (the second smallest, estimability)."""
    tol = 1e-11
    ok = (s - 1) * t1 + a * t2 <= a * (1 + tol) and a * t1 + (s - 1) * t2 <= a * (1 + tol)
    ok = ok and a * (s - 1) * b1 + b2 >= 1 - tol
    if s >= 3:
        ok = ok and a * t1 - b1 <= (a - 1) + a * tol
    # q >= 1/S is checked to a *relative* 1e-13: at tiny epsilon v_-alpha sits only
    # about epsilon (S - 1) / S**2 below 1/S, inside any absolute tolerance
    low_ok = b1 >= lo * (1 - 1e-13) if lo > 0 else b1 >= -tol
    low_ok = low_ok and (b2 >= lo2 * (1 - 1e-13) if lo2 > 0 else True)
    return ok and low_ok and t1 <= 1 + tol


def vertex_families(
    n_categories: int, epsilon: float, *, diagonal: str = "optimal", estimable: Any = False
) -> list[tuple[tuple[float, ...], tuple[tuple[int, ...], ...], tuple[str, ...]]]:
    """All vertices of the ``ε``-DP polytope of PRAM designs, up to permutation.

    Sorted, a feasible ``q`` only meets four constraints of eq. (10): A, the two
    largest values (``(S-1) t1 + e^ε t2 <= e^ε`` and its mirror); B, the two smallest
    (``e^ε (S-1) t_S + t_{S-1} >= 1``); C, largest against smallest (``e^ε t1 - t_S <=
    e^ε - 1``, only for ``S >= 3``); and with ``diagonal="dominant"`` the bound
    ``q >= 1/S``. So a vertex has at most three distinct values, each pinned by a
    subset of these equations; which subset applies depends on whether the largest and
    smallest values are repeated, whether there is a middle value, and (for the two
    largest) on whether ``e^ε`` is above or below ``S - 1``.

    Parameters
    ----------
    n_categories : int
        ``S >= 2``.
    epsilon : float
        Privacy parameter.
    diagonal : {"optimal", "dominant"}
    estimable : bool or float, default False
        ``False``: the vertices of the polytope. Otherwise (as in :func:`design`) the
        candidates the estimable search uses instead: the families with the extra
        equations of the margin (``LB2``: the second smallest value at ``1/S + delta``;
        ``BAND+``/``BAND-``: a value at ``1/S +- delta``), each with only the
        multiplicity vectors that keep the margin (``docs/pram-design.md``, section 10).

    Returns
    -------
    list of (values, counts, equations)
        ``values`` decreasing; ``counts`` every multiplicity vector of the family;
        ``equations`` the tight constraints that pin the values.

    Examples
    --------
    >>> fams = vertex_families(10, 1.0)
    >>> sorted(len(c) for _, c, _ in fams)  # k-RR, its mirror, 2 singletons, h = 2..8
    [1, 1, 1, 1, 7]
    """
    s = _check_s(n_categories)
    eps = _check_design_epsilon(epsilon)
    check("diagonal", diagonal)
    eta = _margin(estimable)
    fams = _families(s, math.exp(eps), diagonal, eta)
    return [(f.values, f.counts, f.equations) for f in fams]


def _families(s: int, a: float, diagonal: str, eta: float = 0.0) -> list[_Family]:
    """The vertex families searched by :func:`design` (see :func:`vertex_families`).

    ``eta > 0`` (estimable designs, ``docs/pram-design.md`` section 10): with ``delta =
    eta (v_alpha - 1/S)``, at most one category may keep ``q`` within ``delta`` of
    ``1/S``. A dominant design gets the sorted bound "second smallest ``q >= 1/S +
    delta``", whose vertices are found like the others (``lo2``). An optimal-diagonal
    design also gets, for each value, the equations "value ``= 1/S +- delta``" (the
    edges of the band), and every candidate's multiplicity vectors are filtered by
    :func:`_estimable_counts`.
    """
    lo = 1.0 / s if diagonal == "dominant" else 0.0
    if eta <= 0:
        return _vertex_families(s, a, lo, lo)
    va, _ = _k_rr(s, a)
    delta = eta * (va - 1.0 / s)
    if diagonal == "dominant":
        fams = _vertex_families(s, a, lo, 1.0 / s + delta)
    else:
        fams = _vertex_families(s, a, lo, lo, band=(1.0 / s - delta, 1.0 / s + delta))
    out = []
    for f in fams:
        counts = _estimable_counts(f.values, f.counts, s, delta)
        if counts:
            out.append(_Family(f.values, counts, f.equations))
    return out


def _vertex_families(
    s: int, a: float, lo: float, lo2: float, band: tuple[float, float] | None = None
) -> list[_Family]:
    """Vertex families of the polytope with ``q >= lo`` and second smallest ``>= lo2``.

    ``band=(lower, upper)`` adds, for every value, the equations ``value = lower`` and
    ``value = upper`` (candidates for estimable optimal-diagonal designs).
    """
    lo2 = max(lo2, lo)
    va, vma = _k_rr(s, a)
    out: dict[tuple[Any, ...], _Family] = {}
    # one level: A tight (k-RR), B tight (its mirror), q = 1/S (dominant), q = lo2
    edges = ((band[0], "BAND-"), (band[1], "BAND+")) if band else ()
    for v, name in ((va, "A"), (vma, "B"), (lo, "LB"), (lo2, "LB2"), *edges):
        if v > 0 and _feasible_sorted(v, v, v, v, s, a, lo, lo2):
            out.setdefault(("1", round(v, 13)), _Family((v,), ((s,),), (name,)))
    # two or three levels: X (largest) once or repeated, optional middle Y, Z (smallest)
    for cx, cy, cz in itertools.product((1, 2), (0, 1), (1, 2)):
        if cx + cy + cz > s:
            continue
        names = ("X", "Y", "Z") if cy else ("X", "Z")
        d = len(names)
        col = {nm: i for i, nm in enumerate(names)}
        eqs: list[tuple[str, np.ndarray, float]] = []

        def add(label: str, coef: dict[str, float], rhs: float, eqs=eqs, col=col, d=d):
            row = np.zeros(d)
            for nm, c in coef.items():
                row[col[nm]] += c
            eqs.append((label, row, rhs))

        second = "X" if cx == 2 else ("Y" if cy else "Z")
        second_min = "Z" if cz == 2 else ("Y" if cy else "X")
        if cx == 2:
            add("A", {"X": s - 1 + a}, a)
        else:
            add("A1", {"X": s - 1, second: a}, a)
            add("A2", {"X": a, second: s - 1}, a)
        if cz == 2:
            add("B", {"Z": a * (s - 1) + 1}, 1.0)
        else:
            add("B", {"Z": a * (s - 1), second_min: 1}, 1.0)
        if s >= 3:
            add("C", {"X": a, "Z": -1}, a - 1)
        if lo > 0:
            for nm in names:
                add(f"LB({nm})", {nm: 1}, lo)
        if lo2 > lo:  # the second smallest value (Z itself when Z is repeated)
            add(f"LB2({second_min})", {second_min: 1}, lo2)
        if band:
            for nm in names:
                add(f"BAND-({nm})", {nm: 1}, band[0])
                add(f"BAND+({nm})", {nm: 1}, band[1])
        for subset in itertools.combinations(eqs, d):
            mat = np.array([e[1] for e in subset])
            if abs(np.linalg.det(mat)) < 1e-12 * np.prod(np.linalg.norm(mat, axis=1)):
                continue  # singular (Hadamard-relative test)
            vals = np.linalg.solve(mat, np.array([e[2] for e in subset]))
            # a vertex value of exactly 0 or 1 (S = 2: q = (1, 0)) comes back from the
            # solver as ~1e-17 off; snap it, or a zero column reads as an infinite ratio.
            # Every other vertex value is >= 1 / (1 + e^12 (S - 1)), far above 1e-12.
            vals = np.where(np.abs(vals) < 1e-12, 0.0, vals)
            vals = np.where(np.abs(vals - 1.0) < 1e-12, 1.0, vals)
            if not all(vals[i] - vals[i + 1] > 1e-11 * abs(vals[i]) for i in range(d - 1)):
                continue
            x, z = vals[0], vals[-1]
            t2 = vals[col[second]]
            b2 = vals[col[second_min]]
            if not _feasible_sorted(x, t2, b2, z, s, a, lo, lo2):
                continue
            if band and cy and cx == 2 and cz == 2:
                # Y pinned by a band edge alone (both X and Z repeated): not searched.
                # O(S^2) multiplicity vectors, none used once; the exhaustive oracle
                # never found one better (docs/pram-design.md, section 10)
                continue
            counts = _type_counts(s, cx, cy, cz)
            if not counts:
                continue
            key = (cx, cy, cz, *np.round(vals, 13))
            out.setdefault(
                key, _Family(tuple(float(v) for v in vals), counts, tuple(e[0] for e in subset))
            )
    return list(out.values())


def _estimable_counts(
    values: tuple[float, ...], counts: tuple[tuple[int, ...], ...], s: int, delta: float
) -> tuple[tuple[int, ...], ...]:
    """The multiplicity vectors whose design keeps the estimability margin ``delta``.

    With ``x_k = S q_k - 1``, ``det M = e_{S-1}(x) / (S (S-1)^(S-1))``, which is
    ``prod(x) sum(1/x) / (S (S-1)^(S-1))`` when no ``x_k`` is 0 (``docs/pram-design.md``,
    section 10). Kept: at most one category within ``delta`` of ``1/S`` (two there make
    two rows nearly uniform, hence nearly equal), and no more than :data:`CANCELLATION`
    in ``sum_k 1/x_k`` (over ``x_k != 0``), the Sherman-Morrison denominator of the
    inverse: ``|sum 1/x| >= CANCELLATION sum |1/x|`` (always true when every ``q_k >=
    1/S``). Both depend on the multiset of values only.
    """
    vals = np.asarray(values, dtype=np.float64)
    cv = np.asarray(counts, dtype=np.float64)  # (K, d)
    near = np.abs(vals - 1.0 / s) < delta * (1 - 1e-9)
    x = s * vals - 1.0
    zero = x == 0  # a row exactly uniform: sum 1/x is dominated by it (ratio -> 1)
    inv = cv / np.where(zero, 1.0, x)
    inv[:, zero] = 0.0
    cancels = np.abs(inv.sum(axis=1)) < CANCELLATION * np.abs(inv).sum(axis=1)
    ok = (cv[:, near].sum(axis=1) <= 1) & ((cv[:, zero].sum(axis=1) > 0) | ~cancels)
    return tuple(c for c, k in zip(counts, ok, strict=True) if k)


def _keeps_margin(q: np.ndarray, a: float, eta: float) -> bool:
    """Whether the design ``q`` keeps the estimability margin ``eta`` (the rule of
    :func:`_estimable_counts`, applied to each category as a value of its own)."""
    s = q.size
    va, _ = _k_rr(s, a)
    delta = eta * (va - 1.0 / s)
    return bool(_estimable_counts(tuple(q.tolist()), ((1,) * s,), s, delta))


def _type_counts(s: int, cx: int, cy: int, cz: int) -> tuple[tuple[int, ...], ...]:
    """Multiplicity vectors of a type: 1 = exactly once, 2 = at least twice, cy 1 = >= 1."""
    if cy and cx == 2 and cz == 2:  # never a vertex: the middle value is not pinned
        raise RuntimeError("internal error: a PRAM vertex type with two free multiplicities")
    if not cy:
        nxs = range(1, 2) if cx == 1 else range(2, s - cz + 1 if cz == 1 else s - 1)
        return tuple((nx, s - nx) for nx in nxs if (s - nx == 1) == (cz == 1) and s - nx >= 1)
    if cx == 1 and cz == 1:
        return ((1, s - 2, 1),) if s >= 3 else ()
    if cx == 1:  # (1, ny >= 1, nz >= 2)
        return tuple((1, ny, s - 1 - ny) for ny in range(1, s - 2))
    return tuple((nx, s - 1 - nx, 1) for nx in range(2, s - 1))  # (nx >= 2, ny >= 1, 1)


# ---------------------------------------------------------------------------
# Assigning categories to a family's values: branch and bound
# ---------------------------------------------------------------------------

_NEG = -1e30  # weight of a forbidden (item, level) pair


def _mi_assign(ps: np.ndarray, vals: np.ndarray, lev: np.ndarray) -> np.ndarray:
    """MI of assignments ``lev`` (``(K, S)`` indices into ``vals``) for sorted ``ps``."""
    s = ps.size
    r = (1.0 - vals) / (s - 1)
    rr = r[lev]
    m = ps * (vals[lev] - rr) + (ps * rr).sum(-1, keepdims=True)
    total = np.stack([_mh(rv, m).sum(-1) for rv in r], axis=-1)  # (K, d)
    row = _mh(vals[lev], m) - _mh(rr, m) + np.take_along_axis(total, lev, axis=-1)
    return (ps * row).sum(-1)


def _output_law(ps: np.ndarray, vals: np.ndarray, lev: np.ndarray) -> np.ndarray:
    """``m = M^T p`` for assignments ``lev`` (``(..., S)``)."""
    s = ps.size
    q = vals[lev]
    r = (1.0 - q) / (s - 1)
    return ps * (q - r) + (ps * r).sum(-1, keepdims=True)


def _bound_weights(ps: np.ndarray, vals: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``W[k, x, l] = p_x KL(row of value l at x || n_k)``, shape ``(K, S, d)``.

    For every assignment, ``sum_x W[k, x, l_x] >= I`` (concavity of entropy: ``H(m) <=
    -sum_z m_z log n_z - 1 + sum_z n_z`` for any ``n > 0``), with equality at
    ``n = m``.
    """
    s = ps.size
    r = (1.0 - vals) / (s - 1)
    w = np.empty((*n.shape, vals.size))
    for j in range(vals.size):
        mr = _mh(r[j], n)
        w[..., j] = ps * (_mh(vals[j], n) - mr + mr.sum(-1, keepdims=True))
    return w


def _r_range(ps: np.ndarray, vals: np.ndarray, fixed: np.ndarray, left: np.ndarray):
    """Range ``[lo, hi]`` of ``R = sum_x p_x r(q_x)`` over the completions of each row.

    The free items are the suffix of ``ps`` (sorted decreasing); by rearrangement the
    largest ``R`` puts the largest ``r`` (smallest value) on the largest ``p``.
    """
    s, d = ps.size, vals.size
    k = fixed.size
    r = (1.0 - vals) / (s - 1)
    base = float((ps[:k] * r[fixed]).sum())
    cs = np.concatenate([[0.0], np.cumsum(ps[k:])])

    def fill(levels) -> np.ndarray:
        pos = np.zeros(left.shape[0], dtype=np.int64)
        tot = np.zeros(left.shape[0])
        for j in levels:
            nxt = pos + left[:, j]
            tot += r[j] * (cs[nxt] - cs[pos])
            pos = nxt
        return tot

    # widened by a relative 1e-12: R of a completion is summed in another order
    return (base + fill(range(d))) * (1 - 1e-12), (base + fill(range(d - 1, -1, -1))) * (1 + 1e-12)


def _penalty(ps, vals, n, lo, hi) -> np.ndarray:
    """``P[k, x, l] = min over R in [lo_k, hi_k] of n_x h(m_x / n_x)``, ``m_x = p_x d_l + R``.

    ``I = sum_x p_x KL(M_x || n) - KL(m || n)`` for any ``n > 0`` (exact), and the
    second term is ``sum_x n_x h(m_x / n_x)`` with ``m_x`` fixed by x's own level and
    ``R``. So for assignments whose ``R`` lies in the interval, ``W - P`` bounds ``I``
    item by item: :func:`_bound_weights` minus the part of ``KL(m || n)`` that no
    ``R`` in the interval can avoid (large when a big category changes level).
    """
    s = ps.size
    r = (1.0 - vals) / (s - 1)
    out = np.empty((*n.shape, vals.size))
    lo = np.asarray(lo)[..., None]
    hi = np.asarray(hi)[..., None]
    for j in range(vals.size):
        own = ps * (vals[j] - r[j])
        out[..., j] = _mh(own + np.clip(n - own, lo, hi), n)
    return out


def _lap_rows(w: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise ``max sum_x w[k, x, l_x]`` with ``counts[k, l]`` items at level ``l``.

    ``w`` is ``(K, F, d)``, ``counts`` ``(K, d)`` (rows sum to ``F``). Two active levels:
    a sort. Three: one level must occur once (``X`` of a family, or ``Z``), the other
    two are a sort plus the best item for the single one, in or out of the sorted top.
    Returns ``(values (K,), levels (K, F))``.
    """
    k_rows, f, d = w.shape
    val = np.empty(k_rows)
    lev = np.empty((k_rows, f), dtype=np.int64)
    if f == 0:
        return np.zeros(k_rows), lev
    act = counts > 0
    pattern = act @ (1 << np.arange(d))
    for pat in np.unique(pattern):
        rows = np.flatnonzero(pattern == pat)
        levels = [j for j in range(d) if pat >> j & 1]
        wr, cr = w[rows], counts[rows]
        if len(levels) == 1:
            val[rows] = wr[:, :, levels[0]].sum(1)
            lev[rows] = levels[0]
        elif len(levels) == 2:
            val[rows], lev[rows] = _lap_two(wr, cr, *levels)
        else:
            once = cr == 1
            if not once.any(axis=1).all():
                raise RuntimeError("internal error: three levels, none used once")
            single_of = once.argmax(axis=1)
            for single in np.unique(single_of):
                sub = np.flatnonzero(single_of == single)
                y, z = (j for j in range(d) if j != single)
                val[rows[sub]], lev[rows[sub]] = _lap_three(wr[sub], cr[sub], single, y, z)
    return val, lev


def _lap_two(w, counts, j0, j1):
    diff = w[:, :, j0] - w[:, :, j1]
    o = np.argsort(-diff, axis=1, kind="stable")
    csum = np.concatenate(
        [np.zeros((w.shape[0], 1)), np.cumsum(np.take_along_axis(diff, o, 1), 1)], 1
    )
    c0 = counts[:, j0]
    val = w[:, :, j1].sum(1) + csum[np.arange(w.shape[0]), c0]
    rank = np.empty_like(o)
    np.put_along_axis(rank, o, np.arange(o.shape[1])[None, :], axis=1)
    return val, np.where(rank < c0[:, None], j0, j1)


def _lap_three(w, counts, single, y, z):
    k_rows, f, _ = w.shape
    rows = np.arange(k_rows)
    a = w[:, :, single] - w[:, :, z]
    b = w[:, :, y] - w[:, :, z]
    o = np.argsort(-b, axis=1, kind="stable")
    bs = np.take_along_axis(b, o, 1)
    ao = np.take_along_axis(a, o, 1)
    pref = np.concatenate([np.zeros((k_rows, 1)), np.cumsum(bs, 1)], 1)
    m = counts[:, y]
    pos = np.arange(f)[None, :]
    # singleton outside the top m (o[m:]) and the top m at y
    out1 = np.where(pos >= m[:, None], ao, -np.inf)
    i1 = out1.argmax(1)
    v1 = out1[rows, i1] + pref[rows, m]
    # singleton inside the top m + 1, the other m of them at y
    in2 = np.where(pos < np.minimum(m + 1, f)[:, None], ao - bs, -np.inf)
    i2 = in2.argmax(1)
    v2 = np.where(m + 1 <= f, in2[rows, i2] + pref[rows, np.minimum(m + 1, f)], -np.inf)
    wide = v2 > v1
    sorted_lev = np.where(pos < (m + wide)[:, None], y, z)
    sorted_lev[rows, np.where(wide, i2, i1)] = single
    lev = np.empty_like(sorted_lev)
    np.put_along_axis(lev, o, sorted_lev, axis=1)
    return w[:, :, z].sum(1) + np.maximum(v1, v2), lev


class _Best:
    """The incumbent: highest MI; ties (within ``MI_RTOL``) go to the larger retention."""

    def __init__(self) -> None:
        self.f = -np.inf
        self.retention = -np.inf
        self.q: np.ndarray = np.empty(0)
        self.vals: tuple[float, ...] = ()
        self.counts: tuple[int, ...] = ()
        self.nodes = 0

    def tol(self) -> float:
        return MI_RTOL * max(abs(self.f), 1e-300)

    def threshold(self) -> float:
        """A bound at or below this cannot hold a strictly better design."""
        return self.f + self.tol()

    def offer(self, f: float, q: np.ndarray, ps: np.ndarray, vals, counts) -> None:
        better = f > self.threshold()
        tie = not better and f >= self.f - self.tol()
        if not (better or tie):
            return
        ret = float(ps @ q)
        if better or ret > self.retention:
            self.f = f if better else max(f, self.f)
            self.retention, self.q = ret, np.array(q, dtype=np.float64)
            self.vals, self.counts = tuple(float(v) for v in vals), tuple(int(c) for c in counts)

    def offer_rows(self, f: np.ndarray, ps, vals, lev, counts) -> None:
        top = f.max()
        for k in np.flatnonzero(f >= top - MI_RTOL * max(abs(top), 1e-300)):
            self.offer(float(f[k]), vals[lev[k]], ps, vals, counts[k])


def _lap_shared(w: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`_lap_rows` values when all rows share one weight matrix ``w`` (``(F, d)``).

    One sort serves every multiplicity vector: ``O(F log F + K)``.
    """
    f, d = w.shape
    k_rows = counts.shape[0]
    val = np.empty(k_rows)
    if f == 0:
        return np.zeros(k_rows)
    act = counts > 0
    pattern = act @ (1 << np.arange(d))
    for pat in np.unique(pattern):
        rows = np.flatnonzero(pattern == pat)
        levels = [j for j in range(d) if pat >> j & 1]
        cr = counts[rows]
        if len(levels) == 1:
            val[rows] = w[:, levels[0]].sum()
            continue
        if len(levels) == 2:
            j0, j1 = levels
            diff = np.sort(w[:, j0] - w[:, j1])[::-1]
            csum = np.concatenate([[0.0], np.cumsum(diff)])
            val[rows] = w[:, j1].sum() + csum[cr[:, j0]]
            continue
        once = cr == 1
        single_of = once.argmax(axis=1)
        for single in np.unique(single_of):
            sub = np.flatnonzero(single_of == single)
            y, z = (j for j in range(d) if j != single)
            a = w[:, single] - w[:, z]
            b = w[:, y] - w[:, z]
            o = np.argsort(-b, kind="stable")
            bs, ao = b[o], a[o]
            pref = np.concatenate([[0.0], np.cumsum(bs)])
            pre = np.concatenate([[-np.inf], np.maximum.accumulate(ao - bs)])  # pos < t
            suf = np.concatenate([np.maximum.accumulate(ao[::-1])[::-1], [-np.inf]])  # >= t
            m = cr[sub, y]
            v1 = suf[m] + pref[m]
            m1 = np.minimum(m + 1, f)
            v2 = np.where(m + 1 <= f, pre[m1] + pref[m1], -np.inf)
            val[rows[sub]] = w[:, z].sum() + np.maximum(v1, v2)
    return val


def _search_family(ps: np.ndarray, vals: np.ndarray, counts: np.ndarray, best: _Best) -> None:
    """Exact best assignment for every multiplicity vector (rows of ``counts``) of a family.

    Branch and bound, all multiplicity vectors of the family side by side. A node fixes
    the levels of the ``k`` largest categories (``p`` sorted decreasing). Its bound for
    each multiplicity vector is the assignment problem of :func:`_bound_weights` over the
    rest: first at the incumbent's output law (one sort serves all vectors), then, for
    vectors that survive, at each vector's own ``n`` -- the output law of its best
    completion, refined (every round is a valid bound; the smallest is kept). A vector
    dies when its bound cannot beat the incumbent. Children fix the next category at
    each level. Equal ``p`` values are interchangeable, so within a run of equal ``p``
    the levels are non-decreasing (enforced in the bound by forbidding lower levels).
    """
    s, d = ps.size, vals.size
    run_start = np.concatenate([[True], ps[1:] != ps[:-1]])
    run_end = np.concatenate([np.flatnonzero(run_start)[1:], [s]])[np.cumsum(run_start) - 1]
    shared = _SharedBound(ps, vals, best)
    tail_mass = np.concatenate([np.cumsum(ps[::-1])[::-1], [0.0]])  # sum of ps[k:]
    negligible = _change_bound(tail_mass, s)
    stack: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = [
        (np.empty(0, dtype=np.int64), np.arange(counts.shape[0]), None)
    ]
    chunk = max(1, 2_000_000 // (s * d))
    while stack:
        fixed, rows, n = stack.pop()
        k = fixed.size
        best.nodes += 1
        if best.nodes > _MAX_NODES:
            raise RuntimeError("PRAM design: the exact search exceeded its node budget")
        lowest = int(fixed[-1]) if k and not run_start[k] else 0
        forbid = (k, int(run_end[k]) if k < s else s, lowest)
        left = counts[rows] - np.bincount(fixed, minlength=d)[None, :]
        if k < s and run_end[k] == s:  # the rest is one run of equal p: one completion
            _finish_run(ps, vals, fixed, left, lowest, best)
            continue
        if k < s and negligible[k] <= best.tol() / 4:  # the rest cannot matter
            lev = np.concatenate([np.broadcast_to(fixed, (rows.size, k)), _canonical(left)], axis=1)
            best.offer_rows(_mi_assign(ps, vals, lev), ps, vals, lev, counts[rows])
            continue
        keep = shared.bound(fixed, left, forbid) > best.threshold()
        rows, left = rows[keep], left[keep]
        n = np.tile(shared.n, (rows.size, 1)) if n is None else n[keep]
        if rows.size > _REPS:  # bounds at a few vectors' own n, shared by all vectors
            keep = _rep_bounds(ps, vals, fixed, left, n, forbid, best) > best.threshold()
            rows, left, n = rows[keep], left[keep], n[keep]
        parts = []
        if rows.size > _PER_ROW_MAX and k < s:  # many vectors: branch on the cheap bounds
            parts.append((rows, n, left))
        else:
            for c0 in range(0, rows.size, chunk):
                sl = slice(c0, c0 + chunk)
                ub, n_out = _node_rounds(ps, vals, fixed, left[sl], n[sl], forbid, best)
                alive = ub > best.threshold()
                parts.append((rows[sl][alive], n_out[alive], left[sl][alive]))
        if k == s or not parts:
            continue
        alive_rows = np.concatenate([p[0] for p in parts])
        if not alive_rows.size:
            continue
        n_alive = np.concatenate([p[1] for p in parts])
        left_alive = np.concatenate([p[2] for p in parts])
        for j in range(d - 1, lowest - 1, -1):  # level 0 popped first
            ok = left_alive[:, j] > 0
            if ok.any():
                stack.append((np.append(fixed, j), alive_rows[ok], n_alive[ok]))


def _canonical(left: np.ndarray) -> np.ndarray:
    """Levels in non-decreasing order filling each row's counts (any completion will do
    where this is used)."""
    d = left.shape[1]
    out = np.empty((left.shape[0], int(left[0].sum())), dtype=np.int64)
    for i, row in enumerate(left):
        out[i] = np.repeat(np.arange(d), np.maximum(row, 0))
    return out


def _finish_run(ps, vals, fixed, left, lowest, best) -> None:
    """Offer the canonical completion of each row when items ``k:`` share one ``p``.

    Items of equal ``p`` are interchangeable, so the completion is fixed by the counts
    (levels non-decreasing from ``lowest``); its MI is computed over groups of equal
    ``(p, level)``, ``O(k + d)`` per row.
    """
    s, d = ps.size, vals.size
    k = fixed.size
    ok = (left[:, :lowest] == 0).all(axis=1) if lowest else np.ones(left.shape[0], bool)
    left = left[ok]
    if not left.size:
        return
    r = (1.0 - vals) / (s - 1)
    pr = ps[k]
    # groups: the k fixed items (weight 1) and the run's d level groups (weight left)
    g_p = np.concatenate([ps[:k], np.full(d, pr)])
    g_lev = np.concatenate([fixed, np.arange(d)])
    wts = np.concatenate([np.ones((left.shape[0], k)), left.astype(np.float64)], axis=1)
    q_g, r_g = vals[g_lev], r[g_lev]
    big_r = (wts * g_p * r_g).sum(1, keepdims=True)
    m = g_p * (q_g - r_g) + big_r  # (K, G)
    total = np.stack([(wts * _mh(rv, m)).sum(1) for rv in r], axis=1)  # (K, d)
    row = _mh(q_g, m) - _mh(r_g, m) + total[:, g_lev]
    f = (wts * g_p * row).sum(1)
    i = int(np.argmax(f))
    lev = np.concatenate([fixed, np.repeat(np.arange(d), left[i])])
    best.offer(float(f[i]), vals[lev], ps, vals, np.bincount(lev, minlength=d))


class _SharedBound:
    """The bound at the incumbent's output law, shared by all multiplicity vectors."""

    def __init__(self, ps: np.ndarray, vals: np.ndarray, best: _Best) -> None:
        self.ps, self.vals, self.best = ps, vals, best
        self.f_seen: float | None = None
        self.n = np.empty(0)
        self.w = np.empty((0, 0))

    def bound(self, fixed: np.ndarray, left: np.ndarray, forbid) -> np.ndarray:
        if self.f_seen != self.best.f:  # the incumbent moved: new n, new weights
            self.f_seen = self.best.f
            self.n = _output_law(self.ps, self.best.q, np.arange(self.ps.size))
            self.w = _bound_weights(self.ps, self.vals, self.n[None])[0]
        k, end, lowest = forbid
        lo, hi = _r_range(self.ps, self.vals, fixed, left)
        w = self.w - _penalty(self.ps, self.vals, self.n, lo.min(), hi.max())
        if lowest:
            w[k:end, :lowest] = _NEG
        fixed_part = w[np.arange(k), fixed].sum()
        return fixed_part + _lap_shared(w[k:], left)


def _rep_bounds(ps, vals, fixed, left, n, forbid, best, rounds: int = 2) -> np.ndarray:
    """Bounds for all vectors from the weights of ``_REPS`` representative vectors.

    The vectors are split into ``_REPS`` bands of similar ``R`` range; the weights of
    :func:`_bound_weights` minus :func:`_penalty` computed at one member's own (refined)
    ``n`` over its band's ``R`` range bound every vector of the band, one sort per band.
    """
    k, end, lowest = forbid
    lo, hi = _r_range(ps, vals, fixed, left)
    bands = np.array_split(np.argsort(lo + hi, kind="stable"), _REPS)
    bands = [b for b in bands if b.size]
    idx = np.array([b[b.size // 2] for b in bands])
    b_lo = np.array([lo[b].min() for b in bands])
    b_hi = np.array([hi[b].max() for b in bands])
    n_rep = n[idx].copy()
    ub = np.full(left.shape[0], np.inf)
    for _ in range(rounds):
        w0 = _bound_weights(ps, vals, n_rep)
        w = w0 - _penalty(ps, vals, n_rep, b_lo, b_hi)
        if lowest:
            w[:, k:end, :lowest] = _NEG
        fixed_part = w[:, np.arange(k), fixed].sum(1) if k else np.zeros(idx.size)
        for j, band in enumerate(bands):
            ub[band] = np.minimum(ub[band], fixed_part[j] + _lap_shared(w[j, k:], left[band]))
        w = w0 - _penalty(ps, vals, n_rep, lo[idx], hi[idx])
        if lowest:
            w[:, k:end, :lowest] = _NEG
        val, lev_free = _lap_rows(w[:, k:, :], left[idx])
        lev = np.concatenate([np.broadcast_to(fixed, (idx.size, k)), lev_free], axis=1)
        feasible = np.flatnonzero(val > _NEG / 2)
        if feasible.size:
            f = _mi_assign(ps, vals, lev[feasible])
            used = (lev[feasible][:, :, None] == np.arange(vals.size)).sum(1)
            best.offer_rows(f, ps, vals, lev[feasible], used)
        n_rep = _output_law(ps, vals, lev)
    return ub


def _node_rounds(ps, vals, fixed, left, n, forbid, best, rounds: int = 3):
    """Per-vector bounds at each vector's own ``n`` (refined ``rounds`` times)."""
    d = vals.size
    k, end, lowest = forbid
    ub = np.full(left.shape[0], np.inf)
    live = np.arange(left.shape[0])
    n = n.copy()
    lo, hi = _r_range(ps, vals, fixed, left)
    for _ in range(rounds):
        if not live.size:
            break
        w = _bound_weights(ps, vals, n[live]) - _penalty(ps, vals, n[live], lo[live], hi[live])
        if lowest:
            w[:, k:end, :lowest] = _NEG
        fixed_part = w[:, np.arange(k), fixed].sum(1) if k else np.zeros(live.size)
        val, lev_free = _lap_rows(w[:, k:, :], left[live])
        ub[live] = np.minimum(ub[live], fixed_part + val)
        lev = np.concatenate([np.broadcast_to(fixed, (live.size, k)), lev_free], axis=1)
        feasible = np.flatnonzero(val > _NEG / 2)
        if feasible.size:  # offer the most promising completion
            top = feasible[np.argmax(ub[live][feasible])]
            f = _mi_assign(ps, vals, lev[top][None])
            used = np.bincount(lev[top], minlength=d)[None, :]
            best.offer_rows(f, ps, vals, lev[top][None], used)
        n[live] = _output_law(ps, vals, lev)
        live = live[ub[live] > best.threshold()]
    return ub, n


def _change_bound(mass: np.ndarray | float, s: int) -> np.ndarray:
    """Largest change of ``I`` when categories of total mass ``mass`` change their rows.

    ``H(Z|X)`` moves by at most ``mass * log S``; the output law moves by at most
    ``mass`` in total variation, so ``H(Z)`` moves by at most ``mass log(S - 1) +
    h2(mass)`` (Fannes-Audenaert).
    """
    t = np.minimum(np.asarray(mass, dtype=np.float64), 1.0 - 1.0 / s)  # bound increases
    with np.errstate(divide="ignore", invalid="ignore"):
        h2 = np.where(t > 0, -t * np.log(t) - (1 - t) * np.log1p(-t), 0.0)
    return t * (math.log(s) + math.log(max(s - 1, 1))) + h2


def _search_singleton(ps: np.ndarray, vals: np.ndarray, counts: tuple[int, ...], best) -> None:
    """Exact best member of a two-level family with one value used once (``S`` members).

    Member ``i`` puts the odd value on category ``i``; its ``R = r_base + p_i (r_odd -
    r_base)`` is monotone in ``p_i``, so consecutive categories (in ``p`` order) form
    groups with a narrow ``R`` range. A group's bound is the penalised bound of
    :func:`_penalty` at the incumbent's output law over that range; groups that survive
    are split eightfold, and groups of at most 16 members are evaluated exactly. Equal
    ``p`` give equal members: only the first of each run is a candidate.
    """
    s = ps.size
    single = counts.index(1)
    base = 1 - single
    r = (1.0 - vals) / (s - 1)
    cand = np.flatnonzero(np.concatenate([[True], ps[1:] != ps[:-1]]))
    r_of = r[base] + ps[cand] * (r[single] - r[base])
    groups = [np.arange(cand.size)]
    f_seen, w = None, None
    while groups:
        if f_seen != best.f:
            f_seen = best.f
            n = _output_law(ps, best.q, np.arange(s))
            w = _bound_weights(ps, vals, n[None])[0]
        nxt = []
        for g in groups:
            if g.size > 1 and _change_bound(2 * ps[cand[g]].max(), s) <= best.tol() / 4:
                g = g[:1]  # members differ by less than the tolerance: one stands for all
            if g.size <= 16:
                lev = np.full((g.size, s), base, dtype=np.int64)
                lev[np.arange(g.size), cand[g]] = single
                used = np.tile(np.array(counts), (g.size, 1))
                best.offer_rows(_mi_assign(ps, vals, lev), ps, vals, lev, used)
                continue
            lo, hi = r_of[g].min() * (1 - 1e-12), r_of[g].max() * (1 + 1e-12)
            u = w - _penalty(ps, vals, n, lo, hi)
            items = cand[g]
            ub = u[:, base].sum() + (u[items, single] - u[items, base]).max()
            if ub > best.threshold():
                nxt.extend(part for part in np.array_split(g, 8) if part.size)
        groups = nxt


def _optimise(p: np.ndarray, a: float, diagonal: str, eta: float = 0.0) -> _Best:
    """The MI-optimal vertex (exact to ``MI_RTOL``); ``best.q`` in the order of ``p``."""
    s = p.size
    order = np.argsort(-p, kind="stable")
    ps = p[order]
    best = _Best()
    fams = sorted(_families(s, a, diagonal, eta), key=lambda f: len(f.values))
    for fam in fams:  # the one-level designs first: k-RR is the incumbent to beat
        vals = np.array(fam.values)
        counts = np.array(fam.counts, dtype=np.int64)
        if len(fam.values) == 1:
            lev = np.zeros((1, s), dtype=np.int64)
            best.offer_rows(_mi_assign(ps, vals, lev), ps, vals, lev, counts)
        elif len(fam.values) == 2 and counts.shape[0] == 1 and 1 in counts[0]:
            _search_singleton(ps, vals, tuple(int(c) for c in counts[0]), best)
        else:
            _search_family(ps, vals, counts, best)
    q = np.empty(s)
    q[order] = best.q
    best.q = q
    return best


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def _margin(estimable: Any) -> float:
    """``eta`` of an ``estimable=`` argument: True -> ESTIMABLE_MARGIN, False -> 0."""
    value = check("estimable", estimable)
    if value is True:
        return ESTIMABLE_MARGIN
    return 0.0 if value is False else float(value)


def _check_s(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise InvalidParameterError(f"the number of categories S must be an int >= 2, got {n!r}")
    return int(n)


def _check_pram_epsilon(epsilon: Any) -> float:
    eps = check_epsilon(epsilon)
    if eps < MIN_EPSILON:
        raise InvalidParameterError(
            f"epsilon must be >= {MIN_EPSILON} for PRAM (the grid's certified rounding "
            f"needs some slack), got {eps!r}"
        )
    return eps


def _check_design_epsilon(epsilon: Any) -> float:
    eps = _check_pram_epsilon(epsilon)
    if eps > MAX_EPSILON:
        raise InvalidParameterError(
            f"epsilon must be <= {MAX_EPSILON} for an MI-optimal design from a non-uniform "
            "prior (beyond it the exact search can take minutes, and the release is close "
            f"to the raw column anyway); got {eps!r}. Use k-RR, which has no limit (krr(), "
            "or prior='uniform' in .dp.pram), or give a matrix (sampler(matrix), matrix=)"
        )
    return eps


def _check_p(p: Any) -> np.ndarray:
    try:
        arr = np.asarray(p)
        ok = arr.dtype.kind in "fiu" and arr.ndim == 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InvalidParameterError(
            f"p must be a 1-d array of category probabilities, got {p!r:.80}"
        )
    arr = arr.astype(np.float64)
    if arr.size < 2:
        raise InvalidParameterError(f"p must have at least S = 2 categories, got {arr.size}")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise InvalidParameterError("p must be finite and non-negative (a distribution)")
    total = arr.sum()
    if abs(total - 1.0) > 1e-9:
        raise InvalidParameterError(f"p must sum to 1 (a distribution), got sum {total!r}")
    return arr / total


#: Relative tolerance of the singularity test of a PRAM matrix (:func:`_unidentified`).
SINGULAR_RTOL = 1e-9


def _unidentified(q: np.ndarray) -> str | None:
    """Why ``p`` cannot be estimated from a release of the PRAM design ``q`` (``None``: it can).

    With ``x_k = S q_k - 1``, ``det M = e_{S-1}(x) / (S (S-1)^(S-1))``
    (``docs/pram-design.md``, section 10), so ``M`` is singular iff two or more ``x_k``
    are 0 (rows at ``q = 1/S`` are uniform, hence equal), or none is and
    ``sum_k 1/x_k = 0``. One ``x_k = 0`` alone is harmless. Both are tested to a relative
    ``SINGULAR_RTOL``: a nearly singular matrix gives estimates that are numerically
    meaningless, so it is refused like a singular one.
    """
    s = q.size
    x = s * np.asarray(q, dtype=np.float64) - 1.0
    tiny = np.abs(x) <= SINGULAR_RTOL * max(np.abs(x).max(), 1e-300)
    if tiny.sum() >= 2:
        cats = np.flatnonzero(tiny).tolist()
        shown = f"{cats[:10]}" + (f" and {len(cats) - 10} more" if len(cats) > 10 else "")
        return (
            f"the design keeps categories {shown} at q = 1/S: their rows of the matrix are "
            "uniform, hence equal, so their frequencies cannot be told apart and only their "
            "total is identifiable (to estimate it, merge them: add up their released counts "
            "and their columns of design.matrix, keep one of their rows, and pass the merged "
            "counts and matrix to estimate)"
        )
    if not tiny.any():
        inv = 1.0 / x
        if abs(inv.sum()) <= SINGULAR_RTOL * np.abs(inv).sum():
            return (
                "the design's matrix is singular: sum_k 1/(S q_k - 1) = 0 (the categories "
                "above and below q = 1/S cancel), so its rows are linearly dependent"
            )
    return None


def _not_estimable_error(why: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"p cannot be estimated from this release: {why}. For the next release, use a "
        "design made with estimable=True (the default of dpframe.pram.design and "
        ".dp.pram) and check design.estimable before releasing"
    )


class _PramInverse:
    """``M^T = D + 1 r^T`` (``D = diag(q - r)``) and its Sherman-Morrison inverse."""

    def __init__(self, q: np.ndarray) -> None:
        s = q.size
        why = _unidentified(q)
        if why is not None:
            raise _not_estimable_error(why)
        self.r = (1.0 - q) / (s - 1)
        self.d = q - self.r
        tiny = np.abs(self.d) <= SINGULAR_RTOL * max(np.abs(self.d).max(), 1e-300)
        self.singular = int(np.flatnonzero(tiny)[0]) if tiny.any() else -1

    def forward(self, p: np.ndarray) -> np.ndarray:
        return self.d * p + self.r @ p

    def solve(self, m: np.ndarray) -> np.ndarray:
        """``p`` with ``M^T p = m`` (``m`` may have trailing batch axes)."""
        if self.singular < 0:
            u = 1.0 / self.d
            w = self.r / self.d
            sm = (w @ m) / (1.0 + w.sum())  # s = r^T p
            return u[:, None] * (m - sm) if m.ndim > 1 else u * (m - sm)
        return np.linalg.solve(_pram_matrix(self.d + self.r).T, m)

    def dense(self) -> np.ndarray:
        s = self.d.size
        return np.linalg.inv(np.diag(self.d) + np.outer(np.ones(s), self.r))

    def sandwich(self, pi: np.ndarray) -> np.ndarray:
        """``A (diag(pi) - pi pi^T) A^T`` for ``A = (M^T)^{-1}`` in ``O(S^2)``."""
        if self.singular >= 0:
            a = self.dense()
            return (a * pi) @ a.T - np.outer(a @ pi, a @ pi)
        u = 1.0 / self.d
        w = self.r / self.d
        beta = 1.0 / (1.0 + w.sum())
        y = pi * w * u
        out = np.diag(pi * u * u)
        out -= beta * (np.outer(y, u) + np.outer(u, y))
        out += beta * beta * float(pi @ (w * w)) * np.outer(u, u)
        ap = self.solve(pi)
        return out - np.outer(ap, ap)


# ---------------------------------------------------------------------------
# The design
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PramDesign:
    """An MI-optimal ``ε``-DP PRAM design (see :func:`design`).

    Attributes
    ----------
    p : ndarray
        The prior used to choose ``q`` (public, or a DP estimate: the choice leaks ``p``).
    epsilon : float
        Requested privacy level.
    q : ndarray
        Keep probabilities actually sampled: the vertex rounded to ``1 - c_k / 2**bits``
        (a property, derived from ``move_numerators``).
    mutual_information : float
        ``I(X; Z)`` in nats of the sampled (rounded) matrix for ``X ~ p``.
    epsilon_actual : float
        Certified upper bound on the exact ``ε`` of the sampled matrix (a property,
        derived from ``move_numerators``, never stored); ``<= epsilon`` for a design
        made by :func:`design` or :func:`krr`.
    diagonal : str
        ``"optimal"`` or ``"dominant"`` (``q_k >= 1/S``).
    vertex_q : ndarray
        The optimal vertex before rounding.
    levels, level_counts : tuple
        Its distinct values (decreasing) and how many categories take each.
    bits : int
        Grid exponent ``b``.
    move_numerators : ndarray of int64
        ``c_k``: a record in ``k`` moves with probability ``c_k / 2**bits``.
    estimable_margin : float
        The margin ``eta`` the search imposed for an estimable design (``0``: none,
        ``estimable=False``); see :func:`design`. Whether the design *is* estimable is
        :attr:`estimable`.
    """

    p: np.ndarray
    epsilon: float
    mutual_information: float
    diagonal: str
    vertex_q: np.ndarray
    levels: tuple[float, ...]
    level_counts: tuple[int, ...]
    bits: int
    move_numerators: np.ndarray
    estimable_margin: float = 0.0

    def __post_init__(self) -> None:
        # the sampler checks the integers and derives the epsilon they give
        object.__setattr__(
            self,
            "_sampler",
            PramSampler(
                "pram", int(np.size(self.move_numerators)), self.bits, self.move_numerators
            ),
        )

    @property
    def n_categories(self) -> int:
        return self.sampler.n_categories

    @property
    def q(self) -> np.ndarray:
        """Keep probabilities actually sampled, ``1 - c_k / 2**bits`` (from the integers)."""
        c = self.sampler.table
        q = frozen_array(1.0 - c.astype(np.float64) / float(1 << self.bits))
        return q

    @property
    def epsilon_actual(self) -> float:
        """Certified epsilon of the sampled matrix, derived from ``move_numerators``."""
        return self.sampler.epsilon_actual

    @property
    def matrix(self) -> np.ndarray:
        """The ``S x S`` matrix (materialised on access: ``S^2`` floats)."""
        return _pram_matrix(self.q)

    @property
    def retention(self) -> float:
        """Expected share of records released unchanged, ``sum_k p_k q_k``."""
        return float(self.p @ self.q)

    @property
    def high(self) -> np.ndarray:
        """Categories whose record is more likely kept than sent to any given other."""
        return self.vertex_q > 1.0 / self.n_categories

    @property
    def sampler(self) -> PramSampler:
        """The exact sampler of ``move_numerators`` (what a release draws from)."""
        return self._sampler  # type: ignore[attr-defined]

    @property
    def estimable(self) -> bool:
        """Whether the category distribution can be estimated from a release of this
        design: its (sampled) matrix is invertible, not singular to a relative 1e-9.

        False when two or more categories keep ``q = 1/S`` (their rows are uniform,
        hence equal: only their total is identifiable), or when ``sum_k 1/(S q_k - 1)
        = 0``. :func:`~dpframe.mechanisms.pram.estimate` refuses such a design. O(S).
        """
        return _unidentified(self.q) is None

    @property
    def condition_number(self) -> float:
        """The 2-norm condition number of the sampled matrix (``inf`` if singular).

        It bounds how much the estimate's relative error can exceed the released
        frequencies'. Computed on access (an SVD, O(S^3)).
        """
        return float(np.linalg.cond(self.matrix))

    def paper_counts(self) -> dict[str, int]:
        """How many ``q_k`` equal v_α, v_-α, v_min, v_max (the paper's Tables 1-4)."""
        s, a = self.n_categories, math.exp(self.epsilon)
        va, vma = _k_rr(s, a)
        named = {"v_alpha": va, "v_-alpha": vma, "v_min": 1 / (a * (s - 1 + a))}
        named["v_max"] = a / (s - 1 + 1 / a)
        return {
            k: int(np.isclose(self.vertex_q, v, rtol=1e-9, atol=0).sum()) for k, v in named.items()
        }

    def covariance(self, n: int, p: npt.ArrayLike | None = None) -> np.ndarray:
        """Covariance of :func:`estimate`'s ``p_hat`` from ``n`` records drawn from ``p``.

        ``A (diag(pi) - pi pi^T) A^T / n`` with ``A = (M^T)^{-1}`` and ``pi = M^T p``;
        ``p`` defaults to the design's prior.
        """
        pv = self.p if p is None else _check_p(p)
        if pv.size != self.n_categories:
            raise InvalidParameterError(f"p must have {self.n_categories} categories")
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise InvalidParameterError(f"n must be a positive int, got {n!r}")
        pi = _PramInverse(self.q).forward(pv)
        return _PramInverse(self.q).sandwich(pi) / n


def design(
    p: npt.ArrayLike, epsilon: float, *, diagonal: str = "optimal", estimable: Any = True
) -> PramDesign:
    """The ``ε``-DP PRAM design (eq. 8) maximising ``I(X; Z)`` for ``X ~ p``.

    Parameters
    ----------
    p : array_like, shape (S,)
        Prior over the ``S >= 2`` categories. It must not be read from the column being
        released without paying for it: use a public prior, a uniform one (then the
        design is symmetric k-ary randomized response), or a DP estimate.
    epsilon : float
        Privacy parameter, ``1e-9 <= epsilon <= 12``.
    diagonal : {"optimal", "dominant"}
        ``"dominant"`` adds ``q_k >= 1/S`` (each record is at least as likely to keep
        its category as to move to any particular other one).
    estimable : bool or float, default True
        ``True``: the design must let the category distribution be estimated from the
        release. The plain MI optimum can keep two or more categories at ``q = 1/S``
        (with either diagonal): their rows are uniform, the matrix is singular and only
        their total can be estimated. With a margin ``eta`` (``True``:
        :data:`ESTIMABLE_MARGIN`, 0.05; or a number in ``(0, 1]``) and ``delta = eta
        (v_alpha - 1/S)`` (``eta`` times k-RR's distance from uniform), at most one
        category may have ``|q_k - 1/S| < delta``, and ``|sum_k 1/(S q_k - 1)| >=
        CANCELLATION sum_k |1/(S q_k - 1)|`` (always true for a dominant design). The
        dominant design is then the exact optimum ("second smallest ``q >= 1/S +
        delta``"); the optimal-diagonal search and what the margin costs (about 2% of
        the MI where it binds) are in ``docs/pram-design.md``, section 10. ``eta = 1``
        on a dominant design gives k-RR. ``False``: the plain MI optimum (then check
        :attr:`PramDesign.estimable`).

    Returns
    -------
    PramDesign

    Examples
    --------
    >>> d = design(np.full(5, 0.2), 1.0)  # uniform prior: k-RR
    >>> bool(d.vertex_q[0] == math.e / (math.e + 4)) and d.level_counts
    (5,)
    >>> d.epsilon_actual <= 1.0
    True
    >>> p = [0.9, 0.05, 0.05]
    >>> design(p, 1.0, estimable=False).vertex_q.round(4)  # two rows uniform: singular
    array([0.7547, 0.3333, 0.3333])
    >>> d = design(p, 1.0)  # estimable=True: both kept 5% of k-RR's distance from 1/S
    >>> d.vertex_q.round(4), d.estimable
    (array([0.7458, 0.3455, 0.3455]), True)
    """
    pv = _check_p(p)
    eps = _check_design_epsilon(epsilon)
    check("diagonal", diagonal)
    eta = _margin(estimable)
    best = _optimise(pv, math.exp(eps), diagonal)
    if eta > 0 and not _keeps_margin(np.asarray(best.q), math.exp(eps), eta):
        # the plain optimum is the estimable one whenever it keeps the margin (the
        # estimable designs are a subset); else search the estimable families
        best = _optimise(pv, math.exp(eps), diagonal, eta)
    vertex = np.asarray(best.q)
    c, b, _ = _round_pram(vertex, eps, at_least_uniform=diagonal == "dominant")
    q = 1.0 - c.astype(np.float64) / float(1 << b)
    if eta > 0 and _unidentified(q) is not None:
        # the grid moved values within 2**-b of 1/S onto it: only when the margin
        # eta (v_alpha - 1/S) is below the grid's step (at epsilon = 1e-9, S > ~15,000)
        raise InvalidParameterError(
            f"no estimable design on dpframe's sampling grid for S = {pv.size} at epsilon "
            f"= {eps!r}: the margin {eta} (v_alpha - 1/S) is below the grid's step 2**-{b}; "
            "raise epsilon or estimable= (the margin), or pass estimable=False"
        )
    mi = float(_pram_mi(pv, q))
    pv, q, vertex, c = (frozen_array(a) for a in (pv, q, vertex, c))
    return PramDesign(
        p=pv,
        epsilon=eps,
        mutual_information=mi,
        diagonal=diagonal,
        vertex_q=vertex,
        levels=best.vals,
        level_counts=best.counts,
        bits=b,
        move_numerators=c,
        estimable_margin=eta,
    )


def krr(n_categories: int, epsilon: float) -> PramDesign:
    """Symmetric k-ary randomized response: ``q_k = e^ε / (e^ε + S - 1)`` for every k.

    The design for a uniform prior (it is MI-optimal there; see docs/pram-design.md),
    built directly, without the search, for any ``epsilon >= MIN_EPSILON`` (1e-9; no
    upper limit). Its ``p`` is uniform.

    Examples
    --------
    >>> d = krr(4, math.log(3))
    >>> round(float(d.q[0]), 12), d.epsilon_actual <= math.log(3)
    (0.5, True)
    """
    s = _check_s(n_categories)
    eps = _check_pram_epsilon(epsilon)
    a = math.exp(min(eps, 700.0))
    vertex = np.full(s, a / (a + s - 1))
    c, b, _ = _round_pram(vertex, eps)
    q = 1.0 - c.astype(np.float64) / float(1 << b)
    pv = np.full(s, 1.0 / s)
    mi = float(_pram_mi(pv, q))
    pv, q, vertex, c = (frozen_array(a) for a in (pv, q, vertex, c))
    return PramDesign(
        p=pv,
        epsilon=eps,
        mutual_information=mi,
        diagonal="optimal",
        vertex_q=vertex,
        levels=(float(vertex[0]),),
        level_counts=(s,),
        bits=b,
        move_numerators=c,
    )


def dominance_cost(d: PramDesign) -> dict[str, float]:
    """Mutual information of a design next to the unconstrained optimum for its prior.

    For a ``diagonal="dominant"`` design this is what ``q >= 1/S`` costs. The optimum
    it is compared with has the same ``estimable`` margin as ``d`` (see
    :func:`estimability_cost` for what the margin costs).

    Examples
    --------
    >>> p = np.array([0.6871, 0.2992, 0.0001, 0.0136, 0.0]); p /= p.sum()
    >>> cost = dominance_cost(design(p, 0.5, diagonal="dominant"))
    >>> round(cost["unconstrained"], 5), round(cost["this"], 5), round(cost["share_lost"], 3)
    (0.01382, 0.01251, 0.094)
    """
    if d.epsilon <= MAX_EPSILON:
        free = design(d.p, d.epsilon, estimable=d.estimable_margin or False)
    else:
        free = krr(d.n_categories, d.epsilon)
    this, best = float(d.mutual_information), float(free.mutual_information)
    return {"this": this, "unconstrained": best, "share_lost": 1 - this / best if best else 0.0}


def estimability_cost(d: PramDesign) -> dict[str, float]:
    """Mutual information of a design next to the plain MI optimum (``estimable=False``)
    for the same prior, epsilon and diagonal: what the estimability margin costs.

    ``"estimable"`` says whether that plain optimum is estimable itself (1.0 or 0.0).

    Examples
    --------
    >>> cost = estimability_cost(design([0.9, 0.05, 0.05], 1.0))
    >>> round(cost["this"], 5), round(cost["plain"], 5), round(cost["share_lost"], 4)
    (0.03408, 0.0348, 0.0207)
    >>> cost["estimable"]  # the plain optimum keeps two categories at q = 1/S
    0.0
    """
    if d.epsilon > MAX_EPSILON:  # only krr() makes these: k-RR, which needs no margin
        return {
            "this": d.mutual_information,
            "plain": d.mutual_information,
            "share_lost": 0.0,
            "estimable": 1.0,
        }
    plain = design(d.p, d.epsilon, diagonal=d.diagonal, estimable=False)
    this, best = float(d.mutual_information), float(plain.mutual_information)
    return {
        "this": this,
        "plain": best,
        "share_lost": 1 - this / best if best else 0.0,
        "estimable": float(plain.estimable),
    }
