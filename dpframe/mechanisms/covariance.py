"""Covariance matrices under bounded Laplace noise (Liu 2019, Simulation study 1).

:func:`plan_covariance_matrix` (no data) -> :meth:`CovarianceMatrixPlan.check` ->
:meth:`CovarianceMatrixPlan.draw`: a ``p x p`` sample covariance matrix, variances
first, then each covariance inside the interval implied by the *sanitized* variances;
an optional repair to a positive semi-definite matrix (:func:`nearest_correlation`,
Higham 2002; or :func:`clip_correlation`). :func:`release_covariance_matrix` runs the
three steps without an accountant, for research. Charging is the executor's
(:mod:`dpframe.core.executor`); the polars adapter is ``dpframe.covariance_matrix``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from dpframe.core import sensitivity as sens
from dpframe.core.accountant import Charge
from dpframe.core.budget import split_epsilon
from dpframe.core.constraints import (
    check,
    check_epsilon,
    check_int,
)
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.components import (
    ComponentGroup,
    StatisticCharge,
    as_generator,
    check_symmetric,
    check_weights,
    frozen,
    ledger_charges,
    plan_components,
    summary_rows,
    total,
)

__all__ = [
    "CLIP_FLOOR",
    "CovarianceMatrixPlan",
    "CovarianceResult",
    "clip_correlation",
    "nearest_correlation",
    "plan_covariance_matrix",
    "release_covariance_matrix",
]

#: Eigenvalue floor of ``repair="clip"`` (relative to a unit diagonal).
CLIP_FLOOR = 1e-8


@dataclass(frozen=True)
class CovarianceResult:
    """A sanitized covariance matrix and its privacy facts.

    Attributes
    ----------
    values : ndarray, shape (p, p)
        The released matrix (repaired if ``repair`` was given).
    sanitized : ndarray, shape (p, p)
        The element-wise sanitized matrix ``S*`` before any repair.
    epsilon, epsilon_charged : float
        Budget asked for, and the total to charge (sum of ``charges``).
    charges : tuple of StatisticCharge
        One per statistic: the ``p`` variances, then the covariances ``S[j,k]``,
        ``j < k``, row by row.
    epsilons, scales, sensitivities, lower, upper : ndarray, shape (p, p)
        Per statistic: budget allotted, Laplace scale actually used (``nan`` where a
        covariance was released without noise), l1 sensitivity, and the bounds used
        (for a covariance, ``-+sqrt(S*_jj S*_kk)``).
    degenerate : tuple of (int, int)
        Covariances released as 0 without noise because their interval was
        degenerate (a sanitized variance of 0, or an interval narrower than the grid).
    repaired : bool
        True if the repair changed the matrix.
    """

    values: np.ndarray
    sanitized: np.ndarray
    n: int
    epsilon: float
    epsilon_charged: float
    charges: tuple[StatisticCharge, ...]
    epsilons: np.ndarray
    scales: np.ndarray
    sensitivities: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    method: str
    calibration: str
    neighbours: str
    repair: str | None
    degenerate: tuple[tuple[int, int], ...]
    repaired: bool
    notes: tuple[str, ...] = ()

    @property
    def correlation(self) -> np.ndarray:
        """The correlation matrix implied by ``values`` (0 off the diagonal of a zero variance)."""
        return _correlation(self.values)

    def ledger_charges(self) -> list[Charge]:
        """The charges to record, one per statistic."""
        return ledger_charges(self.charges)


# ------------------------------------------------------------- correlation matrices


def _psd_part(a: np.ndarray) -> np.ndarray:
    """Projection onto the positive semi-definite cone (Frobenius norm)."""
    w, v = np.linalg.eigh(0.5 * (a + a.T))
    x = (v * np.maximum(w, 0.0)) @ v.T
    return 0.5 * (x + x.T)


def _unit_diagonal(x: np.ndarray) -> np.ndarray:
    """``D^-1/2 X D^-1/2``: keeps a PSD matrix PSD and makes its diagonal exactly 1."""
    d = np.sqrt(np.clip(np.diag(x), 0.0, None))
    d = np.where(d > 0, d, 1.0)
    out = x / np.outer(d, d)
    out = 0.5 * (out + out.T)
    np.fill_diagonal(out, 1.0)
    return out


def nearest_correlation(a: Any, *, tol: float = 1e-10, max_iter: int = 10_000) -> np.ndarray:
    """Nearest correlation matrix in the Frobenius norm (Higham 2002).

    Alternating projections onto the positive semi-definite cone and onto the
    matrices with unit diagonal, with Dykstra's correction on the first (unit weights).

    Parameters
    ----------
    a : array_like, shape (p, p)
        Symmetric matrix (typically a correlation matrix that is not PSD).
    tol : float
        Stop when the iterates move by less than ``tol`` (relative, Frobenius).
    max_iter : int
        Iteration cap; the result is a valid correlation matrix either way.

    Returns
    -------
    ndarray
        Symmetric, positive semi-definite, with unit diagonal: the last PSD iterate
        rescaled to unit diagonal (a change of the order of ``tol``).

    Examples
    --------
    >>> a = np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]])
    >>> bool(np.linalg.eigvalsh(a).min() < 0)
    True
    >>> c = nearest_correlation(a)
    >>> bool(np.linalg.eigvalsh(c).min() > -1e-12), np.allclose(np.diag(c), 1)
    (True, True)
    """
    y = check_symmetric("a", a)
    tol = float(tol)
    if not tol > 0:
        raise InvalidParameterError(f"tol must be > 0, got {tol!r}")
    max_iter = check_int("max_iter", max_iter, 1, "at least one projection")
    correction = np.zeros_like(y)
    x = y
    for _ in range(max_iter):
        r = y - correction
        x_new = _psd_part(r)
        correction = x_new - r
        y_new = x_new.copy()
        np.fill_diagonal(y_new, 1.0)
        norm_y = max(np.linalg.norm(y_new), 1e-300)
        done = (
            np.linalg.norm(x_new - x) <= tol * max(np.linalg.norm(x_new), 1e-300)
            and np.linalg.norm(y_new - y) <= tol * norm_y
            and np.linalg.norm(y_new - x_new) <= tol * norm_y
        )
        x, y = x_new, y_new
        if done:
            break
    return _unit_diagonal(x)


def clip_correlation(a: Any, floor: float = CLIP_FLOOR) -> np.ndarray:
    """Eigenvalue clipping at ``floor``, then rescaling to unit diagonal.

    Cheaper than :func:`nearest_correlation` and positive definite, but not the
    nearest correlation matrix.

    Examples
    --------
    >>> a = np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]])
    >>> c = clip_correlation(a)
    >>> bool(np.linalg.eigvalsh(c).min() > 0), np.allclose(np.diag(c), 1)
    (True, True)
    """
    x = check_symmetric("a", a)
    fl = float(floor)
    if not fl > 0 or not math.isfinite(fl):
        raise InvalidParameterError(f"floor must be a finite number > 0, got {floor!r}")
    w, v = np.linalg.eigh(x)
    return _unit_diagonal((v * np.maximum(w, fl)) @ v.T)


def _correlation(s: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.clip(np.diag(s), 0.0, None))
    pos = d > 0
    c = np.zeros_like(s)
    c[np.ix_(pos, pos)] = s[np.ix_(pos, pos)] / np.outer(d[pos], d[pos])
    c = np.clip(c, -1.0, 1.0)
    np.fill_diagonal(c, 1.0)
    return c


# --------------------------------------------------------------- covariance matrix


def bound_pairs(bounds: Any, p: int) -> list[tuple[float, float]]:
    """``bounds`` as ``p`` finite pairs ``(lower, upper)`` with ``lower < upper``."""
    try:
        items = list(bounds)
    except TypeError:
        raise InvalidParameterError(
            f"bounds must be a sequence of p = {p} pairs (lower, upper), got {bounds!r}"
        ) from None
    if len(items) != p:
        raise InvalidParameterError(
            f"bounds must hold one (lower, upper) pair per column of cov (p = {p}), "
            f"got {len(items)}"
        )
    out = []
    for j, pair in enumerate(items):
        try:
            lo, hi = pair
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"bounds[{j}] must be a pair (lower, upper), got {pair!r}"
            ) from None
        for what, v in (("lower", lo), ("upper", hi)):
            if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(float(v)):
                raise InvalidParameterError(
                    f"bounds[{j}] {what} must be a finite number, got {v!r}"
                )
        if not float(lo) < float(hi):
            raise InvalidParameterError(
                f"bounds[{j}] must satisfy lower < upper, got ({float(lo)!r}, "
                f"{float(hi)!r}); pass the public bounds of column j in increasing order"
            )
        out.append((float(lo), float(hi)))
    return out


def _weights_matrix(split: Any, p: int) -> np.ndarray:
    m = p + p * (p - 1) // 2
    if split is None:
        return np.ones((p, p))
    a = np.asarray(split, dtype=np.float64)
    if a.ndim == 1 and a.shape == (m,):
        w = np.zeros((p, p))
        w[np.diag_indices(p)] = a[:p]
        iu = np.triu_indices(p, 1)
        w[iu] = a[p:]
        w = w + np.triu(w, 1).T
    elif a.shape == (p, p):
        w = check_symmetric("split", a)
    else:
        raise InvalidParameterError(
            f"split must be a symmetric ({p}, {p}) matrix of weights or a vector of the "
            f"{m} weights (variances, then S[j,k] for j < k row by row); got shape {a.shape}"
        )
    return check_weights("split", w)


def plan_covariance_matrix(
    p: int,
    n: int,
    bounds: Sequence[tuple[float, float]],
    epsilon: float,
    *,
    method: str = "truncated",
    calibration: str = "exact",
    neighbours: str = "substitute",
    repair: str | None = None,
    split: Any = None,
) -> CovarianceMatrixPlan:
    """Plan the release of a ``p x p`` covariance matrix (no data read; see
    :func:`release_covariance_matrix` for the parameters).

    Examples
    --------
    >>> plan = plan_covariance_matrix(2, 500, [(-3, 3), (-4.5, 4.5)], 1.0)
    >>> [c.columns[0] for c in plan.charges]
    ['S[0,0]', 'S[1,1]', 'S[0,1]']
    """
    eps = check_epsilon(epsilon)
    check("method", method)
    check("calibration", calibration)
    check("neighbours", neighbours)
    check("repair", repair)
    p = check_int("p", p, 1, "a covariance matrix of at least one column")
    bnds = bound_pairs(bounds, p)
    n = check_int("n", n, 2, "the sample covariance (divisor n - 1) needs two records")
    weights = _weights_matrix(split, p)
    pairs = [(j, j) for j in range(p)] + [(j, k) for j in range(p) for k in range(j + 1, p)]
    shares = split_epsilon(eps, [weights[j, k] for j, k in pairs])
    vmax = [sens.variance_bound(lo, hi, n) for lo, hi in bnds]
    groups: dict[tuple[int, int], ComponentGroup] = {}
    for (j, k), e in zip(pairs, shares, strict=True):
        if j == k:
            lo_j, hi_j = bnds[j]
            delta = sens.variance(lo_j, hi_j, n, neighbours)
            lo, hi = 0.0, vmax[j]
        else:
            delta = sens.covariance(*bnds[j], *bnds[k], n, neighbours)
            hi = math.sqrt(vmax[j] * vmax[k])
            lo = -hi
        groups[j, k] = plan_components(method, calibration, e, delta, delta, 1, 1, lo, hi)
    facts = tuple(
        groups[j, k].charge(
            f"S[{j},{k}]",
            "variance: bounds [0, n R^2 / (4 (n - 1))]"
            if j == k
            else "covariance: bounds -+sqrt(S*_jj S*_kk) from the sanitized variances"
            + ("" if groups[j, k].fixed_gamma else "; scale calibrated to those bounds"),
            bounds_fixed=j == k,
        )
        for j, k in pairs
    )
    return CovarianceMatrixPlan(
        p,
        n,
        tuple(bnds),
        eps,
        method,
        calibration,
        neighbours,
        repair,
        tuple(pairs),
        tuple(vmax),
        groups,
        facts,
    )


@dataclass(frozen=True)
class CovarianceMatrixPlan:
    """How a covariance matrix is released, fixed before any data (the kernel plan).

    ``charges`` has one entry per statistic (the ``p`` variances, then ``S[j,k]``,
    ``j < k``); ``check(cov)`` refuses a matrix that is not finite, square and symmetric;
    ``draw(cov, rng)`` gives the :class:`CovarianceResult`.
    """

    p: int
    n: int
    bounds: tuple[tuple[float, float], ...]
    epsilon: float
    method: str
    calibration: str
    neighbours: str
    repair: str | None
    pairs: tuple[tuple[int, int], ...]
    vmax: tuple[float, ...]
    groups: dict[tuple[int, int], ComponentGroup]
    facts: tuple[StatisticCharge, ...]

    @property
    def charges(self) -> tuple[Charge, ...]:
        return tuple(ledger_charges(self.facts))

    @property
    def epsilon_charged(self) -> float:
        return total([c.epsilon_charged for c in self.facts])

    def summary(self) -> list[dict[str, Any]]:
        return summary_rows(self.facts, [self.groups[j, k] for j, k in self.pairs])

    def check(self, cov: Any) -> None:
        """Refuse an exact matrix that is not ``p x p``, finite and symmetric."""
        try:
            s = check_symmetric("cov", cov)
        except InvalidParameterError as exc:
            raise InvalidDataError(f"the exact covariance matrix: {exc}") from None
        if s.shape != (self.p, self.p):
            raise InvalidDataError(f"the exact covariance matrix must be {self.p} x {self.p}")

    def draw(self, cov: Any, rng: np.random.Generator) -> CovarianceResult:
        s = check_symmetric("cov", cov)
        p, groups, vmax = self.p, self.groups, self.vmax
        out = np.zeros((p, p))
        eps_m, scale_m, sens_m, lo_m, hi_m = (np.zeros((p, p)) for _ in range(5))
        for j in range(p):
            cal = groups[j, j].calibrate(0.0, vmax[j])
            assert cal is not None  # the widest bounds hold >= 2 grid points (checked in plan)
            out[j, j] = cal.release(np.array([s[j, j]]), rng)[0]
            eps_m[j, j], scale_m[j, j] = groups[j, j].epsilon, cal.scale
            sens_m[j, j] = cal.sensitivity
            lo_m[j, j], hi_m[j, j] = 0.0, vmax[j]
        degenerate = []
        notes = []
        for j, k in self.pairs[p:]:
            group = groups[j, k]
            c = math.sqrt(out[j, j] * out[k, k])
            cal = group.calibrate(-c, c)
            if cal is None:
                value, scale = 0.0, math.nan
                degenerate.append((j, k))
                why = (
                    "a sanitized variance is 0"
                    if c == 0
                    else f"the interval [-{c:.3g}, {c:.3g}] holds a single grid point"
                )
                notes.append(
                    f"S[{j},{k}]: {why}; released 0 without noise (its epsilon "
                    f"{group.epsilon:g} is charged all the same)"
                )
            else:
                value, scale = cal.release(np.array([s[j, k]]), rng)[0], cal.scale
            out[j, k] = out[k, j] = value
            for arr, v in (
                (eps_m, group.epsilon),
                (scale_m, scale),
                (sens_m, group.component_sensitivity),
                (lo_m, -c),
                (hi_m, c),
            ):
                arr[j, k] = arr[k, j] = v

        values, repaired = out, False
        if self.repair is not None and p > 1:
            corr = _correlation(out)
            fixed = nearest_correlation(corr) if self.repair == "higham" else clip_correlation(corr)
            sd = np.sqrt(np.diag(out))
            values = fixed * np.outer(sd, sd)
            np.fill_diagonal(values, np.diag(out))
            scale = 1e-12 * max(1.0, sd.max() ** 2)
            repaired = not np.allclose(values, out, rtol=0.0, atol=scale)
            if not repaired:
                values = out
        return CovarianceResult(
            values=frozen(values),
            sanitized=frozen(out),
            n=self.n,
            epsilon=self.epsilon,
            epsilon_charged=self.epsilon_charged,
            charges=self.facts,
            epsilons=frozen(eps_m),
            scales=frozen(scale_m),
            sensitivities=frozen(sens_m),
            lower=frozen(lo_m),
            upper=frozen(hi_m),
            method=self.method,
            calibration=self.calibration,
            neighbours=self.neighbours,
            repair=self.repair,
            degenerate=tuple(degenerate),
            repaired=repaired,
            notes=tuple(notes),
        )


def release_covariance_matrix(
    cov: Any,
    n: int,
    bounds: Sequence[tuple[float, float]],
    epsilon: float,
    *,
    rng: np.random.Generator | None = None,
    **options: Any,
) -> CovarianceResult:
    """Release a sample covariance matrix with bounded Laplace noise (Simulation study 1).

    Each variance ``S_jj`` is released in ``[0, n R_j**2 / (4 (n - 1))]`` with
    sensitivity :func:`dpframe.core.sensitivity.variance` (``R_j**2 / n``); then each
    covariance ``S_jk`` in ``[-sqrt(S*_jj S*_kk), +sqrt(S*_jj S*_kk)]``, bounds computed
    from the *sanitized* variances (post-processing: public), with sensitivity
    :func:`dpframe.core.sensitivity.covariance` (``R_j R_k / n``). The ``p + p (p - 1) / 2``
    statistics are of the same records, so their budgets add (sequential composition):
    ``epsilon`` is split equally, or in proportion to ``split``.

    Parameters
    ----------
    cov : array_like, shape (p, p)
        Symmetric sample covariance matrix (divisor ``n - 1``) of data whose column
        ``j`` lies in ``bounds[j]``. Entries outside their bounds are clipped.
    n : int
        Number of records (public, ``>= 2``).
    bounds : sequence of (float, float)
        Public bounds ``(lower_j, upper_j)`` of each column.
    epsilon : float
        Total budget.
    rng : numpy.random.Generator, optional
        Default: a secure generator (:func:`dpframe.secure_generator`).
    **options
        The plan's keyword arguments (:func:`plan_covariance_matrix`, declared there):

    method : {"truncated", "bit"}, default "truncated"
    calibration : {"exact", "paper"}, default "exact"
        ``"exact"``: each statistic is exactly ``epsilon_jk``-DP. ``"paper"``: the
        paper's ``lambda = Delta / epsilon_jk``; truncation is then charged its true
        (larger) loss, at the widest possible bounds.
    neighbours : {"substitute", "add_remove"}, default "substitute"
        Neighbour relation (the sensitivities are the same under both).
    repair : {None, "higham", "clip"}, default None
        Make the released matrix positive semi-definite: the correlation matrix
        implied by ``S*`` is replaced by its nearest correlation matrix
        (:func:`nearest_correlation`) or eigenvalue-clipped
        (:func:`clip_correlation`), then rescaled by the sanitized standard
        deviations. Post-processing: free; the diagonal is kept.
    split : array_like, optional
        Positive weights: a symmetric ``(p, p)`` matrix, or a vector of the variances'
        weights followed by those of ``S[j,k]``, ``j < k``, row by row.

    Returns
    -------
    CovarianceResult

    Notes
    -----
    A covariance whose interval is degenerate (a sanitized variance of 0, or an
    interval holding a single grid point) is released as 0 without noise and listed
    in ``degenerate``; its budget is still charged, because whether it happens is
    known only after the variances are drawn.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> r = release_covariance_matrix([[1.0, 0.5], [0.5, 2.0]], 500, [(-3, 3), (-4.5, 4.5)],
    ...                               1.0, rng=rng)
    >>> r.epsilon_charged <= 1.0, len(r.charges)
    (True, 3)
    >>> bool(abs(r.values[0, 1]) <= np.sqrt(r.values[0, 0] * r.values[1, 1]))
    True
    """
    s = check_symmetric("cov", cov)  # a research call: bad input is a bad parameter
    plan = plan_covariance_matrix(s.shape[0], n, bounds, epsilon, **options)
    plan.check(s)
    return plan.draw(s, as_generator(rng))
