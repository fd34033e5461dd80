"""The ``ε``-DP PRAM matrix for estimating frequencies: least estimator variance at a prior.

When a release will be used to *estimate* the category distribution, the criterion is not
the mutual information but the variance of the unbiased estimate ``p_hat = (M^T)^{-1}
pi_hat`` (:mod:`~dpframe.mechanisms.pram.estimation`). From ``n`` records drawn from
``p`` its covariance is ``M^{-T} (diag(pi) - pi pi^T) M^{-1} / n`` with ``pi = M^T p``,
and since ``M^{-T} pi = p`` its trace times ``n`` is

    ``R(M) = sum_j pi_j ||(M^{-1})_{j,:}||^2 - ||p||^2``

(:func:`estimation_risk`). :func:`variance_design` minimises ``R`` over ``S x S``
row-stochastic ``ε``-DP matrices (``M_ij <= e^ε M_kj``: a convex polytope). ``R`` is not
convex and is infinite on singular matrices, so the result is a *local* optimum (the
best of several deterministic starts), not a certified global one; it is never worse than
k-RR, the cyclic design or the paper's estimable design (``docs/pram-design.md``, section 12).
:func:`variance_sampler` rounds it to exact integers without exceeding ``ε``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.frozen import frozen_array
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.cyclic import CYCLIC_MAX_CATEGORIES, cyclic_design
from dpframe.mechanisms.pram.optimum import _check_design_epsilon, _check_p, design, krr
from dpframe.mechanisms.pram.sampling import PramSampler, _alias_sampler
from dpframe.mechanisms.pram.staircase import ENUMERATE_MAX, global_design

__all__ = ["VarianceDesign", "estimation_risk", "variance_design", "variance_sampler"]

_DP_RTOL = 1e-12  # the returned float matrix: max_i M_ij <= e^eps min_i M_ij (1 + 1e-12)
_IMPROVE_RTOL = 1e-9  # an optimised start replaces k-RR / the paper's only below this
_GLOBAL_MIX = 0.1  # weight of k-RR mixed into a singular global MI optimum (a start)


def _risk_matrix(p: np.ndarray, m: np.ndarray) -> float:
    """``R(M)`` without argument checks (``inf`` if ``M`` is singular)."""
    try:
        b = np.linalg.inv(m)
    except np.linalg.LinAlgError:
        return math.inf
    if not np.isfinite(b).all() or np.linalg.cond(m) > 1e12:
        return math.inf
    pi = m.T @ p
    return float(pi @ np.einsum("ji,ji->j", b, b) - p @ p)


def _risk_and_grad(p: np.ndarray, m: np.ndarray) -> tuple[float, np.ndarray]:
    """``R(M)`` and its gradient: ``-2 B^T D B B^T + p r^T`` (``B = M^{-1}``, ``D =
    diag(M^T p)``, ``r_j = ||B_{j,:}||^2``)."""
    b = np.linalg.inv(m)
    pi = m.T @ p
    r = np.einsum("ji,ji->j", b, b)
    val = float(pi @ r - p @ p)
    grad = -2.0 * (b.T * pi) @ b @ b.T + np.outer(p, r)
    return val, grad


def estimation_risk(p: npt.ArrayLike, matrix: npt.ArrayLike) -> float:
    """``n`` times the trace of the covariance of the unbiased frequency estimate.

    For ``n`` records drawn from ``p`` and released through ``matrix``, ``p_hat =
    (M^T)^{-1} pi_hat`` has covariance ``M^{-T} (diag(pi) - pi pi^T) M^{-1} / n``, ``pi
    = M^T p``; this returns ``n`` times its trace, i.e. ``n E||p_hat - p||^2``.

    Parameters
    ----------
    p : array_like, shape (S,)
        The prior (a distribution).
    matrix : array_like, shape (S, S)
        Row = true category, column = released one (rows summing to 1).

    Returns
    -------
    float
        ``inf`` if ``matrix`` is singular (condition number above ``1e12``).

    Raises
    ------
    InvalidParameterError
        Naming ``p`` or ``matrix`` if either is malformed or their sizes differ.

    Examples
    --------
    >>> p = np.array([0.5, 0.5])
    >>> m = np.array([[0.75, 0.25], [0.25, 0.75]])
    >>> estimation_risk(p, m)  # 2 (pi(1 - pi)) / (2 q - 1)^2 = 2 * 0.25 / 0.25
    2.0
    >>> estimation_risk(p, np.full((2, 2), 0.5))
    inf
    """
    pv = _check_p(p)
    m = _check_square(matrix, pv.size)
    return _risk_matrix(pv, m)


def _check_square(matrix: Any, s: int) -> np.ndarray:
    try:
        m = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"matrix must be a numeric S x S array: {exc}") from None
    if m.shape != (s, s):
        raise InvalidParameterError(
            f"matrix must be S x S with S = {s} (the size of p), got shape {m.shape}"
        )
    if not np.isfinite(m).all() or (m < 0).any():
        raise InvalidParameterError("matrix entries must be finite and >= 0")
    if (np.abs(m.sum(axis=1) - 1.0) > 1e-9).any():
        raise InvalidParameterError("matrix rows must sum to 1")
    return m


@dataclass(frozen=True, eq=False)
class VarianceDesign:
    """An ``ε``-DP PRAM matrix chosen for estimating frequencies (see
    :func:`variance_design`).

    Attributes
    ----------
    p : ndarray, shape (S,)
        The prior the risk is computed at (public, or a DP estimate).
    epsilon : float
    matrix : ndarray, shape (S, S)
        Row-stochastic; ``max_i M_ij <= e^ε min_i M_ij`` on its floats to a relative
        ``1e-12`` (sample it with :func:`variance_sampler`, which keeps ``ε`` exactly).
    risk : float
        :func:`estimation_risk` of ``matrix`` at ``p``.
    krr_risk, paper_risk : float
        The same for k-RR (:func:`~dpframe.mechanisms.pram.optimum.krr`) and for the
        paper's estimable MI-optimal design (``design(p, epsilon)``), both as sampled.
    condition_number : float
        2-norm condition number of ``matrix``.
    method : str
        Which start the result came from, e.g. ``"slsqp from krr"``, ``"slsqp from
        random-2"``, or ``"krr"`` / ``"paper"`` / ``"cyclic"`` when no optimised start beat them.
    """

    p: np.ndarray
    epsilon: float
    matrix: np.ndarray
    risk: float
    krr_risk: float
    paper_risk: float
    condition_number: float
    method: str

    @property
    def n_categories(self) -> int:
        return int(self.p.size)

    @property
    def gain_over_krr(self) -> float:
        """``krr_risk / risk`` (>= 1)."""
        return self.krr_risk / self.risk

    @property
    def gain_over_paper(self) -> float:
        """``paper_risk / risk`` (>= 1)."""
        return self.paper_risk / self.risk


def _repair(m: np.ndarray, a: float) -> np.ndarray:
    """Row-normalise ``m`` (entries > 0) and mix it with the uniform matrix, ``(1 - t) m +
    t / S``, until every column's float ratio is at most ``a (1 + 1e-12)``.

    Mixing keeps row sums and moves every column ratio towards 1; ``t`` starts at the
    exact value that makes the worst column's ratio ``a`` and doubles if rounding needs it.
    """
    s = m.shape[0]
    m = np.clip(m, 0.0, None)
    m = m / m.sum(axis=1, keepdims=True)
    hi, lo = m.max(axis=0), m.min(axis=0)
    excess = np.maximum(hi - a * lo, 0.0)
    if not (excess > 0).any() and _dp_ok(m, a):
        return m
    t = float(np.max(excess / (excess + (a - 1.0) / s)))
    t = min(1.0, max(t * (1.0 + 1e-9), 2.0**-50))
    while True:
        out = (1.0 - t) * m + t / s
        out = out / out.sum(axis=1, keepdims=True)
        if _dp_ok(out, a) or t >= 1.0:
            return out
        t = min(1.0, 2.0 * t)


def _dp_ok(m: np.ndarray, a: float) -> bool:
    return bool((m.max(axis=0) <= a * m.min(axis=0) * (1.0 + _DP_RTOL)).all())


def _krr_matrix(s: int, a: float) -> np.ndarray:
    m = np.full((s, s), 1.0 / (a + s - 1.0))
    np.fill_diagonal(m, a / (a + s - 1.0))
    return m


def _starts(
    p: np.ndarray,
    eps: float,
    a: float,
    paper: np.ndarray,
    cyclic: np.ndarray | None,
    n_random: int,
    seed: int,
) -> list[tuple[str, np.ndarray]]:
    s = p.size
    out = [("krr", _krr_matrix(s, a)), ("paper", paper)]
    if cyclic is not None:
        out.append(("cyclic", cyclic))
    if s <= ENUMERATE_MAX:
        try:
            g = global_design(p, eps).matrix
        except (RuntimeError, ValueError):  # the LP failed (e.g. epsilon near 1e-9): no start
            g = None
        if g is not None:
            if not math.isfinite(_risk_matrix(p, g)):
                g = (1.0 - _GLOBAL_MIX) * g + _GLOBAL_MIX * _krr_matrix(s, a)
            out.append(("global", _repair(g, a)))
    rng = np.random.default_rng(seed)
    for k in range(n_random):
        x = 1.0 + (a - 1.0) * rng.random((s, s))
        out.append((f"random-{k}", _repair(x, a)))
    return out


def _local(p: np.ndarray, a: float, m0: np.ndarray, maxiter: int) -> np.ndarray:
    """SLSQP on ``(vec M, l)``: ``l_j <= M_ij <= a l_j``, rows sum to 1, ``M >= 0``."""
    s = p.size
    n = s * s
    f0 = _risk_matrix(p, m0)
    if not math.isfinite(f0):
        return m0
    eye = np.eye(n)
    col = np.kron(np.ones((s, 1)), np.eye(s))  # (S^2, S): entry (i, j) -> column j
    ineq = np.vstack([np.hstack([eye, -col]), np.hstack([-eye, a * col])])  # >= 0
    eq = np.hstack([np.kron(np.eye(s), np.ones((1, s))), np.zeros((s, s))])

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        m = x[:n].reshape(s, s)
        try:
            val, g = _risk_and_grad(p, m)
        except np.linalg.LinAlgError:
            return 1e30, np.zeros_like(x)
        if not math.isfinite(val) or val <= 0:
            return 1e30, np.zeros_like(x)
        return val / f0, np.concatenate([g.ravel() / f0, np.zeros(s)])

    # imported here: half a second, and only design="variance" needs it (design="auto"
    # imports this module for estimation_risk at every plan)
    from scipy import optimize

    x0 = np.concatenate([m0.ravel(), m0.min(axis=0)])
    res = optimize.minimize(
        fun,
        x0,
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * n + [(0.0, 1.0)] * s,
        constraints=[
            {"type": "ineq", "fun": lambda x: ineq @ x, "jac": lambda x: ineq},
            {"type": "eq", "fun": lambda x: eq @ x - 1.0, "jac": lambda x: eq},
        ],
        options={"maxiter": maxiter, "ftol": 1e-13},
    )
    return _repair(res.x[:n].reshape(s, s), a)


def variance_design(
    p: npt.ArrayLike,
    epsilon: float,
    *,
    n_random: int = 3,
    seed: int = 0,
    maxiter: int = 500,
) -> VarianceDesign:
    """The ``ε``-DP ``S x S`` PRAM matrix with the least frequency-estimation risk found.

    Minimises :func:`estimation_risk` (``n`` times the trace of the covariance of the
    unbiased estimate at the prior ``p``) over row-stochastic matrices with ``M_ij <= e^ε
    M_kj`` for all ``i, k, j``, by SLSQP (analytic gradient; the DP constraints as
    ``l_j <= M_ij <= e^ε l_j``) from deterministic starts: k-RR, the paper's estimable
    design ``design(p, epsilon)``, the cyclic design, the global MI optimum (``S <= 14``;
    mixed 10% toward k-RR if singular; skipped if the LP fails) and ``n_random`` seeded
    random ``ε``-DP matrices. The best result is
    kept. The risk is infinite on singular matrices, so the result is invertible.

    This is a **local** optimum (the best of the starts), not a certified global one.
    It is never worse than k-RR, the paper's design or the cyclic design
    (:mod:`~dpframe.mechanisms.pram.cyclic`, also a start): if no optimised start beats
    them, the best of the three is returned (``method`` says which).

    Parameters
    ----------
    p : array_like, shape (S,)
        The prior (public, uniform, or a DP estimate: the matrix depends on it).
    epsilon : float
        ``1e-9 <= epsilon <= 12``.
    n_random : int, default 3
        Number of seeded random starts.
    seed : int, default 0
        Seed of the random starts (the result is deterministic given it).
    maxiter : int, default 500
        SLSQP iterations per start.

    Returns
    -------
    VarianceDesign

    Raises
    ------
    InvalidParameterError
        Naming ``p``, ``epsilon``, ``n_random``, ``seed`` or ``maxiter``.

    Examples
    --------
    >>> d = variance_design([0.5, 0.3, 0.2], 1.0)
    >>> d.risk <= min(d.krr_risk, d.paper_risk)
    True
    >>> bool(np.allclose(d.matrix.sum(axis=1), 1.0))
    True
    """
    pv = _check_p(p)
    eps = _check_design_epsilon(epsilon)
    for name, value, low in (("n_random", n_random, 0), ("seed", seed, 0), ("maxiter", maxiter, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise InvalidParameterError(f"{name} must be an int >= {low}, got {value!r}")
    s = pv.size
    a = math.exp(eps)
    krr_m = krr(s, eps).matrix
    paper_m = design(pv, eps).matrix
    cyc = cyclic_design(s, eps) if s <= CYCLIC_MAX_CATEGORIES else None
    cyclic_m = cyc.matrix if cyc is not None and cyc.block > 1 else None  # block 1: k-RR
    krr_r, paper_r = _risk_matrix(pv, krr_m), _risk_matrix(pv, paper_m)
    best_r, best_m, how = (krr_r, krr_m, "krr") if krr_r <= paper_r else (paper_r, paper_m, "paper")
    if cyclic_m is not None and _risk_matrix(pv, cyclic_m) < best_r:
        best_r, best_m, how = _risk_matrix(pv, cyclic_m), cyclic_m, "cyclic"
    for name, m0 in _starts(pv, eps, a, paper_m, cyclic_m, int(n_random), int(seed)):
        m = _local(pv, a, m0, int(maxiter))
        r = _risk_matrix(pv, m)
        if r < best_r * (1.0 - _IMPROVE_RTOL):  # credit the optimiser with real gains only
            best_r, best_m, how = r, m, f"slsqp from {name}"
    pv, best_m = frozen_array(pv), frozen_array(best_m)
    return VarianceDesign(
        p=pv,
        epsilon=eps,
        matrix=best_m,
        risk=best_r,
        krr_risk=krr_r,
        paper_risk=paper_r,
        condition_number=float(np.linalg.cond(best_m)),
        method=how,
    )


def variance_sampler(design: VarianceDesign) -> PramSampler:
    """The exact integer (alias) sampler of a :class:`VarianceDesign`, keeping ``ε``.

    The float matrix is mixed toward the uniform matrix, ``(1 - t) M + t / S`` (which
    moves every column ratio towards 1 and keeps rows stochastic), with ``t`` doubling
    from ``2**-50``, and rounded to integers until the sampler's certified
    ``epsilon_actual`` (derived from its own integers) is at most ``design.epsilon``.

    Examples
    --------
    >>> d = variance_design([0.6, 0.4], 0.5)
    >>> variance_sampler(d).epsilon_actual <= 0.5
    True
    """
    if not isinstance(design, VarianceDesign):
        raise InvalidParameterError(
            f"design must be a VarianceDesign (from variance_design), got {type(design)!r}"
        )
    m = np.asarray(design.matrix, dtype=np.float64)
    s = m.shape[0]
    t = 0.0
    while True:
        mt = (1.0 - t) * m + t / s
        out = _alias_sampler(mt)
        if out.epsilon_actual <= design.epsilon:
            return out
        t = 2.0**-50 if t == 0 else 2.0 * t
        if t > 1.0:  # pragma: no cover - only for epsilon within the float error of 0
            raise RuntimeError("could not round the variance design to an epsilon-DP sampler")
