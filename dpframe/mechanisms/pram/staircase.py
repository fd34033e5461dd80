"""The globally MI-optimal ``ε``-DP PRAM channel: staircase patterns and a linear program.

:func:`~dpframe.mechanisms.pram.optimum.design` is optimal *within the paper's family*
(keep ``k`` with ``q_k``, else move uniformly). Over *all* ``ε``-DP channels ``Q[x, y] =
P(output y | input x)`` (rows sum to 1; ``Q[x, y] <= e^ε Q[x', y]`` for all ``x, x', y``)
the mutual information can be much larger (Kairouz, Oh & Viswanath, "Extremal mechanisms
for local differential privacy", JMLR 2016). This module finds that optimum
(``docs/pram-design.md``, section 11, has the derivation):

* A column ``c`` of an ``ε``-DP channel lies in the cone ``{c >= 0 : max c <= e^ε min c}``,
  whose extreme rays are the *staircase patterns* ``s_T = 1 + (e^ε - 1) 1_T`` (``T`` a set
  of categories). The MI is ``sum_y U(c_y)`` with ``U(c) = sum_x p_x c_x log(c_x / p.c)``
  convex and positively homogeneous, and for a pattern ``U(theta s_T) = theta g(p(T))``
  with ``g(t) = t phi(b) - phi(b t)``, ``b = e^ε - 1``, ``phi(v) = (1 + v) log(1 + v) - v``.
* The optimum is the linear program ``max sum_T theta_T g(p(T))`` subject to ``sum_T
  theta_T s_T = 1`` (one equation per category), ``theta >= 0``. Every dual vector ``y``
  with ``y . s_T >= g(p(T))`` for all ``T`` bounds the MI of *every* ``ε``-DP channel by
  ``sum(y)`` (the certificate :attr:`GlobalDesign.upper_bound`).
* Up to :data:`ENUMERATE_MAX` categories the LP is solved over all ``2^S - 2`` patterns
  (HiGHS) and the certificate is checked on every pattern; beyond, by column generation
  with a heuristic pricing and an exact branch and bound on the pricing problem, whose
  relaxation gives a rigorous bound when the node budget runs out.

Output labels (:func:`output_labels`), and whether a channel can be inverted for estimating
frequencies (:func:`check_estimable`), are here too. Sampling a :class:`GlobalDesign` with
exact (integer) probabilities is not: see ``docs/pram-design.md``, section 11.7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import STAIRCASE_METHODS as METHODS
from dpframe.core.constraints import check
from dpframe.core.frozen import frozen_array
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.optimum import SINGULAR_RTOL, _check_design_epsilon, _check_p

__all__ = [
    "ENUMERATE_MAX",
    "MAX_CONDITION",
    "METHODS",
    "GlobalDesign",
    "check_estimable",
    "global_design",
    "output_labels",
    "pattern_mi",
]

#: Largest ``S`` solved over all ``2^S - 2`` patterns by ``method="auto"`` (measured,
#: ``benchmarks/bench_pram_global.py``: S = 14 takes 0.2-0.6 s, S = 16 1.7-2.5 s, where
#: column generation takes 0.1-1.1 s).
ENUMERATE_MAX = 14
#: Largest ``S`` accepted by ``method="enumerate"`` (2^18 patterns: seconds, 100 MB).
_ENUMERATE_HARD_MAX = 18
#: :func:`check_estimable` refuses a channel whose condition number exceeds this
#: (``1 / SINGULAR_RTOL``: the singularity threshold of the paper's family).
MAX_CONDITION = 1.0 / SINGULAR_RTOL
_U = np.finfo(np.float64).eps
_LP_TOL = 1e-10  # HiGHS feasibility tolerances (the objective is scaled to max 1)
_MAX_ROUNDS = 500  # column-generation rounds
_MAX_NODES = 20_000  # branch-and-bound nodes per exact pricing
_LABEL_RTOL = 1e-12  # assignments whose weight is within this (relative) are ties


# ---------------------------------------------------------------------------
# The value of a pattern
# ---------------------------------------------------------------------------

# coefficients of phi(v) / v^2 = sum_{k>=2} (-1)^k v^(k-2) / (k (k - 1)), k = 2..17
_PHI_SERIES = tuple((-1) ** k / (k * (k - 1)) for k in range(2, 18))


def _phi(v: npt.ArrayLike) -> np.ndarray:
    """``phi(v) = (1 + v) log1p(v) - v >= 0`` for ``v >= 0``, accurate for small ``v``."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = (1.0 + v) * np.log1p(v) - v
    small = np.abs(v) < 0.05  # series to v^17: truncation < 0.05^16 / 272, relative
    if np.any(small):
        vs = v[small] if v.ndim else v
        poly = np.full(np.shape(vs), _PHI_SERIES[-1])
        for c in _PHI_SERIES[-2::-1]:
            poly = poly * vs + c
        if v.ndim:
            out[small] = vs * vs * poly
        else:
            out = vs * vs * poly
    return np.asarray(out)


def _g(t: npt.ArrayLike, b: float) -> np.ndarray:
    """``g(t) = t phi(b) - phi(b t)``: the MI per unit weight of a pattern with ``p(T) = t``."""
    t = np.asarray(t, dtype=np.float64)
    return np.maximum(t * _phi(b) - _phi(b * t), 0.0)


def _phi1(v: float) -> float:
    """Scalar :func:`_phi` (the branch and bound calls it at every node)."""
    if abs(v) >= 0.05:
        return (1.0 + v) * math.log1p(v) - v
    poly = _PHI_SERIES[-1]
    for c in _PHI_SERIES[-2::-1]:
        poly = poly * v + c
    return v * v * poly


def _g1(t: float, b: float, phib: float) -> float:
    """Scalar :func:`_g` (``phib = phi(b)``)."""
    return max(t * phib - _phi1(b * t), 0.0)


def _g_prime(t: npt.ArrayLike, b: float) -> np.ndarray:
    """``g'(t) = phi(b) - b log1p(b t)`` (decreasing: ``g`` is concave)."""
    return _phi(b) - b * np.log1p(b * np.asarray(t, dtype=np.float64))


def pattern_mi(p: npt.ArrayLike, epsilon: float, in_set: npt.ArrayLike) -> np.ndarray:
    """``mu(s) = sum_x p_x s_x log(s_x / p.s)`` of staircase patterns ``s = 1 + (e^ε - 1) 1_T``.

    A column ``theta s`` of a channel contributes ``theta mu(s)`` to ``I(X; Z)``.
    ``mu`` depends on ``T`` only through ``t = p(T)``: ``mu = t phi(b) - phi(b t)`` with
    ``b = e^ε - 1`` and ``phi(v) = (1 + v) log(1 + v) - v`` (the linear terms cancel
    exactly, so the form is accurate at any ``ε``).

    Parameters
    ----------
    p : array_like, shape (S,)
        Prior.
    epsilon : float
    in_set : array_like of bool, shape (..., S)
        ``True`` where the pattern is ``e^ε``.

    Examples
    --------
    >>> p = np.array([0.5, 0.5])
    >>> a = math.e
    >>> direct = 0.5 * a * math.log(a / ((1 + a) / 2)) + 0.5 * math.log(1 / ((1 + a) / 2))
    >>> bool(abs(pattern_mi(p, 1.0, [True, False]) - direct) < 1e-15)
    True
    """
    pv = _check_p(p)
    b = math.expm1(_check_design_epsilon(epsilon))
    mask = np.asarray(in_set, dtype=bool)
    if mask.shape[-1] != pv.size:
        raise InvalidParameterError(
            f"in_set must have {pv.size} entries per pattern (one per category), got "
            f"shape {mask.shape}"
        )
    return _g(mask @ pv, b)


# ---------------------------------------------------------------------------
# The master LP
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Master:
    theta: np.ndarray  # weights of the given patterns (zeros off the support)
    y: np.ndarray  # dual: y . s_T >= g(p(T)) on the restricted set (up to HiGHS tolerance)
    value: float  # sum theta_T g(p(T))


def _solve_master(
    gvals: np.ndarray, masks: np.ndarray, b: float, lp_method: str = "highs"
) -> _Master:
    """HiGHS on ``max g . theta`` s.t. ``sum_T theta_T (1 + b 1_T) = 1``, ``theta >= 0``.

    The objective is scaled to a maximum of 1 (the MI is about ``ε^2``: unscaled, HiGHS's
    absolute tolerances would swamp it at small ``ε``). The basic solution is then
    re-solved by least squares on its support, so the row sums are exact to rounding.
    ``lp_method="highs-ipm"`` (interior point, then crossover to a basic solution) is 4-5x
    faster than the simplex on the full enumeration (S = 16: 1.6 s against 4-8 s).
    """
    from scipy.optimize import linprog  # scipy stays out of `import dpframe`

    s = masks.shape[1]
    scale = float(gvals.max()) if gvals.size and gvals.max() > 0 else 1.0
    a_eq = 1.0 + b * masks.T.astype(np.float64)
    res = linprog(
        -gvals / scale,
        A_eq=a_eq,
        b_eq=np.ones(s),
        bounds=(0, None),
        method=lp_method,
        options={
            "primal_feasibility_tolerance": _LP_TOL,
            "dual_feasibility_tolerance": _LP_TOL,
        },
    )
    if res.status != 0 and lp_method != "highs":
        # the interior point can stop with an unknown status on a degenerate LP (seen at
        # S = 14): the simplex is slower but settles it
        return _solve_master(gvals, masks, b, "highs")
    if res.status != 0:  # pragma: no cover - k-RR is always feasible and the LP bounded
        raise RuntimeError(f"HiGHS failed on the staircase LP: {res.message}")
    theta = np.asarray(res.x, dtype=np.float64)
    support = np.flatnonzero(theta > 1e-14 * max(theta.max(), 1e-300))
    sol, *_ = np.linalg.lstsq(a_eq[:, support], np.ones(s), rcond=None)
    if (sol >= 0).all():
        theta = np.zeros_like(theta)
        theta[support] = sol
    y = -np.asarray(res.eqlin.marginals, dtype=np.float64) * scale
    return _Master(theta=theta, y=y, value=float(gvals @ theta))


def _rounding_allowance(y: np.ndarray, b: float, s: int) -> float:
    """A bound on the float error of evaluating ``sum(y) + max_T (g - y . s_T)``.

    Each term is a sum of at most ``2 S + 4`` products of numbers of size at most
    ``(1 + b) |y|_1`` and ``phi(b)``; ``gamma_n = n u / (1 - n u)`` bounds such a sum's
    relative error. ``8 (S + 4) u`` covers it with room for ``phi``'s own few ulps.
    """
    return 8.0 * (s + 4) * _U * ((1.0 + b) * float(np.abs(y).sum()) + float(_phi(b)) + 1e-300)


# ---------------------------------------------------------------------------
# Pricing: max over T of g(p(T)) - y . s_T
# ---------------------------------------------------------------------------


class _Pricing:
    """The pricing problem ``max_T g(p(T)) - sum(y) - b y(T)`` for one dual vector ``y``.

    Categories with ``p_x = 0`` do not change ``g``: they are in the best ``T`` iff
    ``y_x < 0``. The others are merged into *groups* of equal ``p`` and ``y`` within a
    relative ``1e-12`` (the bound uses the group's smallest ``y``, which can only raise
    the value of every ``T``, so it stays an upper bound; a uniform prior has a few large
    groups, and without them the search would branch over ``S!``-fold symmetric ties).
    Sorted by ``rho = y / p``, the groups give the relaxation over fractional ``z`` in
    closed form: ``g`` is concave, so the best fractional ``z`` takes groups in increasing
    ``rho`` while ``g'(p(T)) >= b rho`` and one of them in part (a fractional knapsack
    with a concave profit). Its value bounds the integer maximum from above; branching on
    how many members of the fractional group are taken solves the integer problem.
    """

    def __init__(self, p: np.ndarray, y: np.ndarray, b: float) -> None:
        self.p, self.y, self.b = p, y, b
        self.ysum = float(y.sum())
        zero = p <= 0
        self.base = np.flatnonzero(zero & (y < 0))  # always in T
        pos = np.flatnonzero(~zero)
        order = pos[np.lexsort((pos, y[pos], p[pos]))]  # by p, then y, then index
        tol = 1e-12 * max(float(np.abs(y).max()), 1e-300)
        groups: list[list[int]] = []
        for x in order:
            g = groups[-1] if groups else None
            if g and p[g[0]] == p[x] and y[x] - y[g[0]] <= tol:
                g.append(int(x))
            else:
                groups.append([int(x)])
        gp = np.array([p[g[0]] for g in groups])
        gy = np.array([y[g[0]] for g in groups])  # the group's smallest y
        rho = gy / gp
        rank = np.lexsort((np.array([g[0] for g in groups]), rho))
        self.groups = [np.array(groups[i]) for i in rank]
        self.gp, self.gy, self.grho = gp[rank], b * gy[rank], b * rho[rank]
        self.gm = np.array([len(groups[i]) for i in rank], dtype=np.float64)
        self.base_gain = -b * float(y[self.base].sum())  # >= 0
        self.phib = _phi1(b)

    def value(self, masks: np.ndarray) -> np.ndarray:
        """Reduced costs ``g(p(T)) - y . s_T`` of the given patterns (rows of ``masks``)."""
        masks = np.atleast_2d(masks)
        return _g(masks @ self.p, self.b) - self.ysum - self.b * (masks @ self.y)

    def heuristic(self, keep: int = 4) -> np.ndarray:
        """The best threshold sets in ``y / p`` order, each improved by single flips."""
        pos = np.flatnonzero(self.p > 0)
        order = pos[np.lexsort((pos, self.y[pos] / self.p[pos]))]
        n = order.size
        prefix = np.zeros((n + 1, self.p.size), dtype=bool)
        prefix[:, self.base] = True
        for k in range(n):
            prefix[k + 1 :, order[k]] = True
        vals = self.value(prefix)
        out = []
        idx = np.arange(self.p.size)
        for k in np.argsort(-vals, kind="stable")[:keep]:
            m = prefix[k].copy()
            v = float(vals[k])
            for _ in range(self.p.size):  # steepest ascent by single flips
                flips = np.repeat(m[None, :], self.p.size, axis=0)
                flips[idx, idx] = ~flips[idx, idx]
                fv = self.value(flips)
                j = int(np.argmax(fv))
                if fv[j] <= v:
                    break
                m, v = flips[j], float(fv[j])
            out.append(m)
        return np.array(out)

    def _relax(self, p_in: float, y_in: float, free: np.ndarray, cap: np.ndarray):
        """Max of the relaxation: the fixed part, plus fractions of the ``free`` groups
        (``cap`` members each).

        Returns ``(value, position in free of the fractional group or -1, members taken
        fractionally)``; ``value`` excludes ``-sum(y)`` and ``base_gain``.
        """
        fp = self.gp[free] * cap
        fr = self.grho[free]
        cum = p_in + np.cumsum(fp)
        full = _g_prime(cum, self.b) >= fr  # a prefix: lhs decreases, rhs increases
        k = int(np.argmin(full)) if not full.all() else free.size
        start = p_in + (float(fp[:k].sum()) if k else 0.0)
        yk = y_in + (float((self.gy[free[:k]] * cap[:k]).sum()) if k else 0.0)
        if k == free.size:
            return _g1(start, self.b, self.phib) - yk, -1, 0.0
        # g'(start + t) = b rho_k  <=>  t = expm1((phi(b) - b rho_k) / b) / b - start
        target = math.expm1((self.phib - float(fr[k])) / self.b) / self.b
        t = min(max(target - start, 0.0), float(fp[k]))
        val = _g1(start + t, self.b, self.phib) - yk - t * float(fr[k])
        return val, k, t / float(self.gp[free[k]])

    def exact(
        self, incumbent: float, max_nodes: int = _MAX_NODES, keep: int = 8
    ) -> tuple[np.ndarray, float]:
        """Branch and bound: ``(masks that improved on the incumbent, best first; upper
        bound on the max)``.

        The upper bound is the best value found when the search completes; otherwise the
        largest relaxation bound of the nodes left open (still rigorous). It is for the
        grouped (lowered) ``y``, so it bounds the true maximum from above.
        """
        offset = self.base_gain - self.ysum
        best_val = incumbent - offset
        found: list[tuple[float, dict[int, int]]] = []
        n = len(self.groups)
        stack = [(0.0, 0.0, np.arange(n), self.gm.copy(), {})]
        nodes = 0
        open_bound = -math.inf
        while stack:
            p_in, y_in, free, cap, chosen = stack.pop()
            nodes += 1
            bound, k, frac = self._relax(p_in, y_in, free, cap)
            if bound <= best_val:
                continue
            if nodes > max_nodes:
                open_bound = max(open_bound, bound)
                continue
            kk = k if k >= 0 else free.size
            pre_p = p_in + float((self.gp[free[:kk]] * cap[:kk]).sum())
            pre_y = y_in + float((self.gy[free[:kk]] * cap[:kk]).sum())
            pre = dict(chosen)
            for i, c in zip(free[:kk], cap[:kk], strict=True):
                pre[int(i)] = int(c)
            if k < 0:
                v = _g1(pre_p, self.b, self.phib) - pre_y
                if v > best_val:
                    best_val = v
                    found.append((v, pre))
                continue
            grp = int(free[k])
            lo = math.floor(frac)
            for c in {lo, min(lo + 1, int(cap[k]))}:  # round the fractional group
                v = _g1(pre_p + c * self.gp[grp], self.b, self.phib) - pre_y - c * self.gy[grp]
                if v > best_val:
                    best_val = v
                    found.append((v, {**pre, grp: c}))
            rest, rcap = np.delete(free, k), np.delete(cap, k)
            for c in range(int(cap[k]) + 1):  # how many of the group's members
                stack.append(
                    (
                        p_in + c * self.gp[grp],
                        y_in + c * self.gy[grp],
                        rest,
                        rcap,
                        {**chosen, grp: c},
                    )
                )
        masks = np.zeros((min(len(found), keep), self.p.size), dtype=bool)
        masks[:, self.base] = True
        for row, (_, counts) in enumerate(found[::-1][:keep]):
            for i, c in counts.items():
                masks[row, self.groups[i][:c]] = True
        return masks, max(best_val, open_bound) + offset


# ---------------------------------------------------------------------------
# The design
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GlobalDesign:
    """The MI-optimal ``ε``-DP channel over all ``S x K`` row-stochastic matrices.

    Attributes
    ----------
    p : ndarray, shape (S,)
        The prior (public, or a DP estimate: the channel depends on it).
    epsilon : float
    patterns : ndarray of bool, shape (K, S)
        Output ``j``'s column is ``weights[j] * (1 + (e^ε - 1) patterns[j])``.
    weights : ndarray, shape (K,)
    channel : ndarray, shape (S, K)
        ``Q[x, j] = P(output j | input x)`` (floats; rows sum to 1 to rounding).
    mutual_information : float
        ``I(X; Z)`` of ``channel`` in nats, ``sum_j weights[j] mu(patterns[j])``.
    upper_bound : float
        A certified upper bound on the MI of *every* ``ε``-DP channel for ``p``.
    gap : float
        ``upper_bound - mutual_information`` (>= 0).
    method : str
        ``"enumerate"`` or ``"column-generation"``.
    labels : ndarray of int, shape (K,)
        The category each output is released as (:func:`output_labels`).
    unused : tuple of int
        Categories no output is labelled with: they never appear in a release.
    """

    p: np.ndarray
    epsilon: float
    patterns: np.ndarray
    weights: np.ndarray
    channel: np.ndarray
    mutual_information: float
    upper_bound: float
    gap: float
    method: str
    labels: np.ndarray
    unused: tuple[int, ...]

    @property
    def n_categories(self) -> int:
        return int(self.p.size)

    @property
    def n_outputs(self) -> int:
        """``K``: how many distinct outputs the channel uses (``<= S``)."""
        return int(self.weights.size)

    @property
    def matrix(self) -> np.ndarray:
        """The ``S x S`` matrix with output ``j`` in column ``labels[j]`` (zero columns for
        :attr:`unused` categories)."""
        m = np.zeros((self.n_categories, self.n_categories))
        m[:, self.labels] = self.channel
        return m

    @property
    def float_epsilon(self) -> float:
        """``max_j log(max_x Q[x, j] / min_x Q[x, j])`` of the float channel (not a
        certificate for a sampler: that needs the sampler's integers)."""
        c = self.channel
        return float(np.max(np.log(c.max(axis=0) / c.min(axis=0))))


def _check_method(method: Any) -> str:
    return str(check("staircase_method", method, name="method"))


def _all_masks(s: int) -> np.ndarray:
    """Every proper non-empty subset of ``range(s)`` as a bool row (``2^s - 2`` rows)."""
    codes = np.arange(1, (1 << s) - 1, dtype=np.int64)
    return ((codes[:, None] >> np.arange(s)) & 1).astype(bool)


def _enumerate(p: np.ndarray, b: float) -> tuple[np.ndarray, _Master, float]:
    masks = _all_masks(p.size)
    gvals = _g(masks @ p, b)
    master = _solve_master(gvals, masks, b, "highs-ipm")
    # the certificate on every pattern (the empty and full sets have g = 0)
    red = gvals - master.y.sum() - b * (masks @ master.y)
    r = max(float(red.max()), -float(master.y.sum()), -float(((1 + b) * master.y).sum()))
    ub = float(master.y.sum()) + max(r, 0.0) + _rounding_allowance(master.y, b, p.size)
    return masks, master, ub


def _initial_masks(p: np.ndarray) -> np.ndarray:
    """Singletons (k-RR: always feasible) and the threshold sets of ``p`` sorted."""
    s = p.size
    single = np.eye(s, dtype=bool)
    order = np.argsort(-p, kind="stable")
    thresh = np.zeros((s - 1, s), dtype=bool)
    for k in range(1, s):
        thresh[k - 1, order[:k]] = True
    return np.unique(np.vstack([single, thresh, ~thresh]), axis=0)


def _column_generation(p: np.ndarray, b: float) -> tuple[np.ndarray, _Master, float]:
    masks = _initial_masks(p)
    s = p.size
    ub = math.inf
    for _ in range(_MAX_ROUNDS):
        gvals = _g(masks @ p, b)
        master = _solve_master(gvals, masks, b)
        pricing = _Pricing(p, master.y, b)
        tol = 1e-12 * max(master.value, 1e-300)
        cand = pricing.heuristic()
        cval = pricing.value(cand)
        new = cand[cval > tol]
        if new.size == 0:
            found, r_ub = pricing.exact(float(cval.max()))
            ub = float(master.y.sum()) + max(r_ub, 0.0) + _rounding_allowance(master.y, b, s)
            new = found[pricing.value(found) > tol] if found.size else found
            if new.size == 0:
                break
        known = {m.tobytes() for m in masks}
        new = np.array([m for m in new if m.tobytes() not in known], dtype=bool)
        if new.size == 0:  # the LP already holds the priced columns: its duals are loose
            break
        masks = np.vstack([masks, new])
    if not math.isfinite(ub):  # left before any exact pricing: price the last duals exactly
        # (any duals give a valid bound after the shift by max(r, 0); loose ones a loose one)
        _, r_ub = pricing.exact(float(pricing.value(pricing.heuristic()).max()))
        ub = float(master.y.sum()) + max(r_ub, 0.0) + _rounding_allowance(master.y, b, s)
    return masks, master, ub


def global_design(p: npt.ArrayLike, epsilon: float, *, method: str = "auto") -> GlobalDesign:
    """The ``ε``-DP channel that maximises ``I(X; Z)`` for ``X ~ p`` over all channels.

    Parameters
    ----------
    p : array_like, shape (S,)
        Prior over the ``S >= 2`` categories (public, uniform, or a DP estimate).
    epsilon : float
        ``1e-9 <= epsilon <= 12``.
    method : {"auto", "enumerate", "column-generation"}
        ``"enumerate"``: the LP over all ``2^S - 2`` patterns (``S <= 20``);
        ``"column-generation"``: patterns added by pricing; ``"auto"``: enumerate up
        to :data:`ENUMERATE_MAX` categories.

    Returns
    -------
    GlobalDesign
        One optimal vertex of the LP (the optimum is often not unique), with a
        certified :attr:`~GlobalDesign.upper_bound` on the MI of any ``ε``-DP channel.

    Raises
    ------
    InvalidParameterError
        For a bad ``p``, ``epsilon`` or ``method``, or ``method="enumerate"`` with
        ``S > 18``.

    Examples
    --------
    >>> d = global_design(np.full(4, 0.25), 0.1)  # uniform prior, small epsilon
    >>> d.patterns.astype(int).tolist()  # a binary mechanism: two halves, e^eps on each
    [[1, 0, 1, 0], [0, 1, 0, 1]]
    >>> round(d.mutual_information, 7), d.gap < 1e-12
    (0.0012484, True)
    >>> d.labels.tolist(), d.unused  # two categories are never released
    ([0, 1], (2, 3))
    """
    pv = _check_p(p)
    eps = _check_design_epsilon(epsilon)
    method = _check_method(method)
    s = pv.size
    b = math.expm1(eps)
    if method == "auto":
        method = "enumerate" if s <= ENUMERATE_MAX else "column-generation"
    if method == "enumerate":
        if s > _ENUMERATE_HARD_MAX:
            raise InvalidParameterError(
                f"method='enumerate' needs 2^S patterns; S = {s} is above "
                f"{_ENUMERATE_HARD_MAX}: use method='column-generation' (or 'auto')"
            )
        masks, master, ub = _enumerate(pv, b)
    else:
        masks, master, ub = _column_generation(pv, b)
    used = np.flatnonzero(master.theta > 0)
    # deterministic column order: by the pattern read as a binary number
    codes = masks[used].astype(np.int64) @ (np.int64(1) << np.arange(s, dtype=np.int64))
    used = used[np.argsort(codes, kind="stable")]
    patterns = masks[used]
    weights = master.theta[used]
    channel = weights[None, :] * np.where(patterns.T, 1.0 + b, 1.0)
    gvals = _g(patterns @ pv, b)
    mi = float(gvals @ weights)
    _verify(channel, eps, ub, mi)
    labels, unused = output_labels(pv, channel)
    pv, patterns, weights, channel, labels = (
        frozen_array(a) for a in (pv, patterns, weights, channel, labels)
    )
    return GlobalDesign(
        p=pv,
        epsilon=eps,
        patterns=patterns,
        weights=weights,
        channel=channel,
        mutual_information=mi,
        upper_bound=ub,
        gap=float(max(ub - mi, 0.0)),
        method=method,
        labels=labels,
        unused=unused,
    )


def _verify(channel: np.ndarray, eps: float, ub: float, mi: float) -> None:
    """The channel is a channel and ``ε``-DP on its floats; the certificate holds."""
    rows = channel.sum(axis=1)
    ratio = np.log(channel.max(axis=0) / channel.min(axis=0))
    row_error = float(np.abs(rows - 1.0).max())  # the MI's own error scales with it
    # a column is weight * {1, 1 + b}: its float ratio is e^eps within 2 ulps of 1 + b
    if (
        not np.isfinite(channel).all()
        or (channel <= 0).any()
        or np.abs(rows - 1.0).max() > 1e-9
        or ratio.max() > eps + 4 * _U * (1 + eps)
        or ub < mi * (1 - 1e-12 - 10 * row_error)
    ):  # pragma: no cover - a solver failure, never seen
        raise RuntimeError(
            "the staircase LP returned an invalid channel: row sums off by "
            f"{np.abs(rows - 1.0).max():.3g}, log ratio {ratio.max()!r} against epsilon "
            f"{eps!r}, bound {ub!r} against MI {mi!r}"
        )


# ---------------------------------------------------------------------------
# Labels and invertibility
# ---------------------------------------------------------------------------


def output_labels(p: npt.ArrayLike, channel: npt.ArrayLike) -> tuple[np.ndarray, tuple[int, ...]]:
    """Which category each output column is released as, and which never appear.

    Output ``j`` gets a distinct category ``labels[j]`` so as to maximise the expected
    share of records released as their own category, ``sum_j p[labels[j]] Q[labels[j],
    j]`` (a rectangular assignment problem, ``K <= S``). Ties are broken
    deterministically: among assignments whose total is within a relative ``1e-12`` of
    the optimum, the lexicographically smallest label vector (output 0 first, then 1,
    ...) wins -- found by fixing each output's label in turn to the smallest category
    that still allows an optimal completion.

    Parameters
    ----------
    p : array_like, shape (S,)
    channel : array_like, shape (S, K)
        ``K <= S`` output columns.

    Returns
    -------
    labels : ndarray of int, shape (K,)
    unused : tuple of int
        Categories with no output (they never appear in a release).

    Examples
    --------
    >>> q = np.array([[0.7, 0.3], [0.3, 0.7], [0.3, 0.7]])
    >>> labels, unused = output_labels([0.5, 0.25, 0.25], q)  # 1 and 2 tie for output 1
    >>> labels.tolist(), unused
    ([0, 1], (2,))
    """
    from scipy.optimize import linear_sum_assignment  # scipy stays out of `import dpframe`

    pv = _check_p(p)
    q = np.asarray(channel, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] != pv.size or q.shape[1] > pv.size or q.shape[1] < 1:
        raise InvalidParameterError(
            f"channel must be S x K with S = {pv.size} rows and 1 <= K <= S columns, got "
            f"shape {q.shape}"
        )
    w = (pv[:, None] * q).T  # w[j, k]: output j labelled k keeps p_k Q[k, j]
    k_out, s = w.shape
    rows, cols = linear_sum_assignment(w, maximize=True)
    labels = np.empty(k_out, dtype=np.int64)
    labels[rows] = cols
    best = float(w[rows, cols].sum())
    tol = _LABEL_RTOL * max(abs(best), 1e-300)
    fixed_val = 0.0
    for j in range(k_out):
        for k in range(int(labels[j])):  # only smaller labels improve the order
            if k in labels[:j]:
                continue
            rest_rows = np.arange(j + 1, k_out)
            rest_cols = np.setdiff1d(np.arange(s), np.append(labels[:j], k))
            sub = w[np.ix_(rest_rows, rest_cols)]
            if rest_rows.size:
                r, c = linear_sum_assignment(sub, maximize=True)
                total = fixed_val + w[j, k] + float(sub[r, c].sum())
            else:
                total = fixed_val + w[j, k]
            if total >= best - tol:
                labels[j] = k
                if rest_rows.size:
                    labels[rest_rows[r]] = rest_cols[c]
                break
        fixed_val += w[j, labels[j]]
    unused = tuple(int(k) for k in np.setdiff1d(np.arange(s), labels))
    return labels, unused


def check_estimable(matrix: npt.ArrayLike, *, max_condition: float = MAX_CONDITION) -> float:
    """The 2-norm condition number of a channel that can be inverted for estimation.

    Frequencies are estimated from a release by solving ``M^T p = pi``; that needs an
    ``S x S`` matrix of full rank ``S`` (``S`` outputs, linearly independent columns), and
    a moderate condition number (it bounds how much the estimate's relative error can
    exceed the released frequencies').

    Parameters
    ----------
    matrix : array_like, shape (S, K)
        Row = true category; a column of zeros is an output that never occurs.
    max_condition : float, default MAX_CONDITION (1e9)

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        Naming why: fewer than ``S`` outputs used, rank deficient, or too ill-conditioned.

    Examples
    --------
    >>> round(check_estimable([[0.75, 0.25], [0.25, 0.75]]), 6)
    2.0
    >>> check_estimable([[0.7, 0.3], [0.3, 0.7], [0.3, 0.7]])
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: the channel cannot be inverted for estimation: it ...
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 2 or not np.isfinite(m).all():
        raise InvalidParameterError(
            f"matrix must be a finite S x K array with S >= 2 rows, got shape {m.shape}"
        )
    s = m.shape[0]
    used = int((np.abs(m).max(axis=0) > 0).sum())
    head = "the channel cannot be inverted for estimation: "
    fix = (
        "; to estimate frequencies, release with a design that keeps S outputs and full "
        "rank (the paper family's design(..., estimable=True)), not the MI optimum"
    )
    if used < s:
        raise InvalidParameterError(
            f"{head}it uses only {used} of S = {s} outputs, so at most {used} combinations "
            f"of the {s} frequencies are identifiable{fix}"
        )
    sv = np.linalg.svd(m, compute_uv=False)
    rank = int((sv > sv[0] * s * _U).sum())
    if rank < s:
        raise InvalidParameterError(f"{head}its rank is {rank} < S = {s}{fix}")
    cond = float(sv[0] / sv[-1])
    if not cond <= max_condition:
        raise InvalidParameterError(
            f"{head}its condition number {cond:.3g} exceeds max_condition = "
            f"{max_condition:.3g} (estimates would be numerically meaningless){fix}"
        )
    return cond
