"""Priors for the shrinkage and marginal DR-HA measures: Dirichlet EB and cell-size models.

Liu & Zhao's shrinkage measures (Definitions 8 and 10) integrate the unknown level
probabilities ``p_i`` of a cell over a Dirichlet(α) prior; the marginal measures
(Definitions 9 and 10, eqs. 16-17) integrate the cell size ``n_i`` over a count model
``f(n_i; β)``. This module estimates both from the confidential table. Like every
DR-HA quantity, the estimates are an *assessment* for the data owner: they read the
confidential table and spend no privacy budget.

Dirichlet hyperparameters (:func:`dirichlet_eb`)
------------------------------------------------
A row of the table (a non-empty quasi-identifier cell) holds counts ``n_i1..n_iK`` of
the K levels of Y. Under the paper's model the rows are independent
Dirichlet-multinomial(``n_i``, α) draws given their sizes. Write ``α. = Σ α_k`` (the
*precision*) and ``m_k = α_k / α.`` (the *means*).

* ``method="mle"`` (default) maximises the Dirichlet-multinomial marginal likelihood
  with a trust-region Newton method on ``log α`` (analytic gradient via digamma and
  Hessian via trigamma). A cell of one record contributes ``log m_k`` only: it informs
  the means, not the precision. The observed Fisher information gives ``cov``.
* ``method="moments"`` matches moments consistently: the means are the record shares
  ``n_.k / n`` and the precision comes from the ANOVA (Fleiss / Weir-Hill type)
  estimator of the intra-class correlation ``ρ = 1 / (1 + α.)`` for unequal cell sizes,
  pooled over the K levels::

      MSW = Σ_ik (n_ik - n_ik²/n_i) / (n - N)         E = (1 - ρ) Σ_k p_k(1 - p_k)
      MSB = (Σ_ik n_ik²/n_i - n Σ_k p̂_k²) / (N - 1)   E = (1 + (n0 - 1) ρ) Σ_k p_k(1 - p_k)
      n0  = (n - Σ_i n_i² / n) / (N - 1)
      ρ̂   = (MSB - MSW) / (MSB + (n0 - 1) MSW),   α̂. = (1 - ρ̂) / ρ̂

  Both mean squares are exactly unbiased under the model, so ρ̂ is consistent as
  N grows with bounded cell sizes.

The likelihood's supremum can lie on the boundary of the parameter space, and then
no finite, positive α maximises it. dpframe returns the boundary honestly -- a clamped
value, ``boundary`` set, the reason in ``note`` and a :class:`BoundaryEstimateWarning`:

* ``boundary="homogeneous"``: every cell with two or more records holds one level only
  (``bankcount.csv``; the paper's 5,974-row reading of Adult). The likelihood then
  increases as ``α. → 0`` -- a prior under which every cell is homogeneous. The
  precision is clamped at ``min_precision`` (default 1e-6). At this boundary each cell
  takes one level, drawn with probabilities ``m``, so the ML means are the *shares of
  cells* in each level, not the shares of records (``method="moments"`` keeps the
  record shares). A shrinkage measure at this boundary equals the all-homogeneous one:
  ``Σ_k Γ(α.)Γ(α_k + n)/(Γ(α. + n)Γ(α_k)) → 1``.
* ``boundary="multinomial"``: the data are not over-dispersed (the score for ``1/α.``
  at the multinomial limit is ``<= 0``, or the moment estimate ``ρ̂ <= 0``), the
  sup is at ``α. → ∞`` (every cell shares the same ``p``); the precision is clamped
  at ``max_precision`` (default 1e8).
* A level of Y that no record holds (it stays in the table because noise can put a
  record there) has ML ``α_k = 0``; it gets ``α_k = 1e-9 α.`` and is listed in
  ``absent_levels``.

A table whose cells all hold one record says nothing about the precision (every
precision gives the same likelihood) and is refused, as are rows of zero records.

Departure from the paper's supplement S2
----------------------------------------
The paper's S2 moment estimator is not used (it is kept as the private
``_paper_s2_moments`` only so the tests can show how it fails):

* its K = 2 form sets the empirical variance of ``n_1 = Σ_i n_i1`` to ``n p̂(1 - p̂)``,
  the binomial variance, which is exactly the ``α → ∞`` limit of the model variance;
  the solution's denominator ``s² - n p̂(1 - p̂)`` is then identically zero;
* its K >= 2 form uses a ``θ̂_k`` that is never defined (reading it as ``p̂_k``, the
  only reading consistent with the derivation, is what is implemented here) and puts
  ``Σ̂_kk``, the across-cell sample variance of ``n_ik``, where the derivation needs
  ``Var(n_.k)``. ``Σ̂_kk`` mixes in the spread of the cell sizes and is of a different
  order, so the solution is not consistent;
* on the paper's own tables it gives negative α̂ for every level (FF subset:
  (-1.51, -2.58, -1.15); Bankruptcy: (-1.74, -2.21); Adult by 6 QIDs: (-39.5, -13.2)).

A consistent repair of S2's idea replaces ``Σ̂_kk`` by ``Σ_i (n_ik - n_i p̂_k)²``; the
ANOVA estimator above is the same idea with ``1/n_i`` weights and exact small-sample
corrections.

Cell-size models (:func:`fit_size_model`)
-----------------------------------------
The table's cells are non-empty by construction, so a cell size is a draw from a count
distribution *conditioned on n >= 1*. dpframe fits the zero-truncated Poisson
(``λ/(1 - e^-λ) = mean``) or the zero-truncated negative binomial (2-parameter ML) by
default. The paper's footnote 6 reports the plain Poisson ML estimate, the sample mean
(4.6 Adult as 5,974 rows, 2.43 Bankruptcy, 3.21 FF subset); ``truncated=False``
reproduces it. Either way the returned pmf lives on ``1..n_max`` and is renormalised,
so with ``truncated=False`` and the Poisson it *is* a zero-truncated Poisson, only with
the (biased) untruncated estimate of λ plugged in. (The paper's eqs. 17 and 21 sum the
*untruncated* pmf over ``n_i >= 1``, a total mass of ``1 - e^-λ``: 0.91 at λ = 2.43,
so ρ^ms is understated by ``e^-λ`` relative; a renormalised pmf avoids that.)

Examples
--------
>>> import numpy as np
>>> counts = np.array([[3, 1], [0, 4], [2, 2], [5, 0], [1, 0], [2, 3]])
>>> fit = dirichlet_eb(counts)
>>> fit.alpha.round(3).tolist(), fit.boundary
([1.246, 0.922], None)
>>> round(fit_size_model([1, 1, 2, 3, 1, 5]).params["lambda"], 4)  # zero-truncated Poisson
1.8132
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

from dpframe.core.constraints import check
from dpframe.errors import InvalidDataError, InvalidParameterError

__all__ = [
    "BoundaryEstimateWarning",
    "DirichletFit",
    "SizeModel",
    "dirichlet_eb",
    "dirichlet_multinomial_loglik",
    "fit_size_model",
]

_ABSENT_MEAN = 1e-9  # mean given to a level of Y that no record holds


class BoundaryEstimateWarning(UserWarning):
    """An estimate lies on the boundary of its parameter space (no finite ML/MoM value).

    The fit is still returned, clamped and flagged (``boundary`` / ``note``).
    """


# ---------------------------------------------------------------------------------------
# validation


def _as_count_table(counts: Any) -> np.ndarray:
    """``counts`` as an (N, K) int64 array of non-negative integers, rows non-empty."""
    try:
        arr = np.asarray(counts)
    except (TypeError, ValueError):
        raise InvalidDataError(
            "counts must be an (N, K) array of non-negative integers (rows = non-empty "
            f"quasi-identifier cells, columns = levels of Y), got {type(counts).__name__}"
        ) from None
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise InvalidDataError(
            f"counts must hold integer counts, got dtype {arr.dtype}; convert it to int64"
        )
    if arr.ndim != 2:
        raise InvalidDataError(
            f"counts must be 2-D (N cells x K levels of Y), got shape {arr.shape}; "
            "pivot the frequency table to one row per quasi-identifier cell"
        )
    n_cells, k = arr.shape
    if k < 2:
        raise InvalidDataError(
            f"counts must have K >= 2 columns (levels of the sensitive attribute), got K = {k}; "
            "a Dirichlet prior needs at least two levels"
        )
    if n_cells < 1:
        raise InvalidDataError("counts has no rows: pass at least one non-empty cell")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all():
            raise InvalidDataError("counts contains NaN or infinity; counts must be integers")
        if (arr != np.round(arr)).any():
            raise InvalidDataError(
                "counts must be whole numbers, got non-integer values (e.g. "
                f"{arr[arr != np.round(arr)][0]!r}); pass the exact (unsanitized) counts"
            )
    if (arr < 0).any():
        raise InvalidDataError(
            f"counts must be >= 0, got {int(arr.min())}; pass the exact (unsanitized) counts"
        )
    out = arr.astype(np.int64)
    empty = np.flatnonzero(out.sum(axis=1) == 0)
    if empty.size:
        raise InvalidDataError(
            f"counts has {empty.size} empty row(s) (e.g. row {int(empty[0])}): rows must be "
            "non-empty quasi-identifier cells; drop the rows whose counts sum to 0"
        )
    return out


def _as_sizes(sizes: Any) -> np.ndarray:
    """``sizes`` as a 1-D int64 array of integers >= 1."""
    try:
        arr = np.asarray(sizes)
    except (TypeError, ValueError):
        raise InvalidDataError(
            f"sizes must be a 1-D array of cell sizes (integers >= 1), got {type(sizes).__name__}"
        ) from None
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise InvalidDataError(f"sizes must hold integers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidDataError(
            f"sizes must be a non-empty 1-D array of cell sizes, got shape {arr.shape}; "
            "pass counts.sum(axis=1)"
        )
    if np.issubdtype(arr.dtype, np.floating) and (
        not np.isfinite(arr).all() or (arr != np.round(arr)).any()
    ):
        raise InvalidDataError("sizes must be whole numbers (cell sizes), got non-integers")
    if (arr < 1).any():
        raise InvalidDataError(
            f"sizes must be >= 1 (the cells of the table are non-empty), got {int(arr.min())}; "
            "drop the empty cells"
        )
    return arr.astype(np.int64)


def _check_bound(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}")
    x = float(value)
    if not (math.isfinite(x) and lo < x < hi):
        raise InvalidParameterError(f"{name} must be in ({lo:g}, {hi:g}), got {value!r}")
    return x


# ---------------------------------------------------------------------------------------
# Dirichlet-multinomial


@dataclass(frozen=True, eq=False)
class DirichletFit:
    """An empirical-Bayes Dirichlet(α) prior for the level probabilities of a cell.

    Attributes
    ----------
    alpha : numpy.ndarray
        (K,) hyperparameters, all > 0 (clamped on a boundary, see ``boundary``).
    precision : float
        ``α. = alpha.sum()``.
    means : numpy.ndarray
        ``alpha / precision``.
    method : str
        ``"mle"`` or ``"moments"``.
    converged : bool
        The estimate was located to tolerance (on a boundary: the boundary was
        established analytically, which is exact).
    loglik : float
        Dirichlet-multinomial log-likelihood of the table at ``alpha``, multinomial
        coefficients included.
    n_cells : int
        Number of rows (non-empty cells) N.
    note : str
        How the estimate was obtained and any boundary or fallback, in words.
    boundary : str or None
        ``None`` (interior estimate), ``"homogeneous"`` (``α. → 0``, clamped at
        ``min_precision``) or ``"multinomial"`` (``α. → ∞``, clamped at
        ``max_precision``).
    cov : numpy.ndarray or None
        (K, K) asymptotic covariance of ``alpha`` from the observed Fisher information
        (``method="mle"``, interior estimates only).
    absent_levels : tuple of int
        Columns with no record; their ``alpha`` is ``1e-9 * precision``.
    """

    alpha: np.ndarray
    precision: float
    means: np.ndarray
    method: str
    converged: bool
    loglik: float
    n_cells: int
    note: str
    boundary: str | None = None
    cov: np.ndarray | None = None
    absent_levels: tuple[int, ...] = field(default=())

    @property
    def se(self) -> np.ndarray | None:
        """Standard errors of ``alpha`` (``sqrt(diag(cov))``), or None."""
        return None if self.cov is None else np.sqrt(np.diag(self.cov))


def dirichlet_multinomial_loglik(counts: npt.ArrayLike, alpha: npt.ArrayLike) -> float:
    """Dirichlet-multinomial log-likelihood of a table of counts, given the row sizes.

    ``Σ_i [log n_i! - Σ_k log n_ik! + log Γ(α.) - log Γ(n_i + α.)
    + Σ_k (log Γ(n_ik + α_k) - log Γ(α_k))]``.

    Parameters
    ----------
    counts : array_like
        (N, K) non-negative integer counts, no empty row.
    alpha : array_like
        (K,) positive hyperparameters.

    Returns
    -------
    float

    Examples
    --------
    >>> round(dirichlet_multinomial_loglik([[1, 1]], [1.0, 1.0]), 6)  # 2 * 1/2 * 1/3
    -1.098612
    """
    c = _as_count_table(counts)
    a = np.asarray(alpha, dtype=np.float64)
    if a.shape != (c.shape[1],) or not np.isfinite(a).all() or (a <= 0).any():
        raise InvalidParameterError(
            f"alpha must be {c.shape[1]} finite values > 0 (one per column of counts), "
            f"got {alpha!r}"
        )
    rows, w = np.unique(c, axis=0, return_counts=True)
    return float(_dm_loglik(rows, w.astype(np.float64), a))


def _dm_loglik(rows: np.ndarray, w: np.ndarray, alpha: np.ndarray) -> float:
    n = rows.sum(axis=1)
    a = alpha.sum()
    per = (
        special.gammaln(n + 1.0)
        - special.gammaln(rows + 1.0).sum(axis=1)
        + special.gammaln(a)
        - special.gammaln(n + a)
        + (special.gammaln(rows + alpha) - special.gammaln(alpha)).sum(axis=1)
    )
    return float(w @ per)


def _dm_grad_hess(rows: np.ndarray, w: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, ...]:
    """Gradient and Hessian of the DM log-likelihood with respect to ``alpha``."""
    n = rows.sum(axis=1)
    a = alpha.sum()
    common_g = w @ (special.digamma(a) - special.digamma(n + a))
    g = common_g + w @ (special.digamma(rows + alpha) - special.digamma(alpha))
    common_h = w @ (special.polygamma(1, a) - special.polygamma(1, n + a))
    h = np.full((alpha.size, alpha.size), common_h)
    h[np.diag_indices(alpha.size)] += w @ (
        special.polygamma(1, rows + alpha) - special.polygamma(1, alpha)
    )
    return g, h


def _dm_mle(
    rows: np.ndarray, w: np.ndarray, start: np.ndarray
) -> tuple[np.ndarray, bool, str, np.ndarray]:
    """Maximise the DM log-likelihood over ``θ = log α`` by trust-region Newton."""
    scale = 1.0 / w.sum()  # per-cell objective, so the tolerance does not grow with N

    def fun(t: np.ndarray) -> float:
        return -scale * _dm_loglik(rows, w, np.exp(t))

    def jac(t: np.ndarray) -> np.ndarray:
        al = np.exp(t)
        g, _ = _dm_grad_hess(rows, w, al)
        return -scale * al * g

    def hess(t: np.ndarray) -> np.ndarray:
        al = np.exp(t)
        g, h = _dm_grad_hess(rows, w, al)
        return -scale * (al[:, None] * h * al[None, :] + np.diag(al * g))

    res = optimize.minimize(
        fun,
        np.log(start),
        jac=jac,
        hess=hess,
        method="trust-exact",
        options={"gtol": 1e-10, "maxiter": 500},
    )
    alpha = np.exp(res.x)
    g, h = _dm_grad_hess(rows, w, alpha)
    ok = bool(np.max(np.abs(alpha * g)) * scale < 1e-6)
    return alpha, ok, f"{res.nit} trust-region Newton steps", h


def _moments_precision(c: np.ndarray) -> tuple[float, np.ndarray]:
    """ANOVA estimate of ρ = 1/(1 + α.) pooled over levels, and the record shares."""
    ni = c.sum(axis=1).astype(np.float64)
    n, big_n = ni.sum(), ni.size
    p = c.sum(axis=0) / n
    sq = (c.astype(np.float64) ** 2 / ni[:, None]).sum()
    msw = (n - sq) / (n - big_n)
    msb = (sq - n * (p**2).sum()) / (big_n - 1)
    n0 = (n - (ni**2).sum() / n) / (big_n - 1)
    if msw <= 0.0:
        return 1.0, p
    return float((msb - msw) / (msb + (n0 - 1.0) * msw)), p


def _overdispersion_score(c: np.ndarray, m: np.ndarray) -> float:
    """d loglik / d(1/α.) at the multinomial limit (α. → ∞, means ``m``)."""
    c = c.astype(np.float64)
    ni = c.sum(axis=1)
    return float(((c * (c - 1.0)) / (2.0 * m)).sum() - (ni * (ni - 1.0) / 2.0).sum())


def dirichlet_eb(
    counts: npt.ArrayLike,
    *,
    method: str = "mle",
    min_precision: float = 1e-6,
    max_precision: float = 1e8,
) -> DirichletFit:
    """Empirical-Bayes Dirichlet hyperparameters from a cells x levels frequency table.

    Rows are modelled as independent Dirichlet-multinomial(``n_i``, α) draws. See the
    module docstring for the estimators, the boundary cases and why the paper's
    supplement S2 is not used.

    Parameters
    ----------
    counts : array_like
        (N, K) non-negative integer counts: rows = non-empty quasi-identifier cells,
        columns = the K >= 2 levels of the sensitive attribute.
    method : {"mle", "moments"}, default "mle"
        Dirichlet-multinomial maximum likelihood, or the consistent ANOVA moment match.
    min_precision, max_precision : float, default 1e-6 and 1e8
        Where ``α.`` is clamped when the estimate lies on the boundary ``α. → 0``
        (all multi-record cells homogeneous) or ``α. → ∞`` (no over-dispersion).

    Returns
    -------
    DirichletFit

    Raises
    ------
    InvalidDataError
        Negative, non-integer or non-finite counts, an empty row, K < 2, every cell of
        size 1 (precision not identified), one level holding every record, or
        ``method="moments"`` with a single cell.
    InvalidParameterError
        Unknown ``method`` or bad clamps.

    Warns
    -----
    BoundaryEstimateWarning
        The estimate lies on a boundary, or a level holds no record.

    Examples
    --------
    >>> import numpy as np
    >>> counts = np.array([[3, 1], [0, 4], [2, 2], [5, 0], [1, 0], [2, 3]])
    >>> mle = dirichlet_eb(counts)
    >>> round(mle.precision, 3), mle.means.round(3).tolist(), mle.converged
    (2.168, [0.575, 0.425], True)
    >>> round(dirichlet_eb(counts, method="moments").precision, 3)
    1.768
    """
    check("prior_fit", method, name="method")
    lo = _check_bound("min_precision", min_precision, 0.0, math.inf)
    hi = _check_bound("max_precision", max_precision, lo, math.inf)
    c_all = _as_count_table(counts)
    n_cells, k_all = c_all.shape
    present = c_all.sum(axis=0) > 0
    absent = tuple(int(j) for j in np.flatnonzero(~present))
    if present.sum() < 2:
        raise InvalidDataError(
            f"every record in counts holds the same level of Y (column {int(np.argmax(present))}); "
            "the Dirichlet hyperparameters cannot be estimated from this table: give alpha "
            "by prior knowledge instead"
        )
    c = c_all[:, present]
    ni = c.sum(axis=1)
    if (ni == 1).all():
        raise InvalidDataError(
            "every cell in counts holds one record: the Dirichlet precision is not identified "
            "(the likelihood is the same for every alpha with the same means); give alpha "
            "by prior knowledge instead"
        )
    if method == "moments" and n_cells < 2:
        raise InvalidDataError(
            "method='moments' needs at least two cells (rows of counts); use method='mle'"
        )
    notes: list[str] = []
    warn: list[str] = []  # the notes that also become a warning
    boundary: str | None = None
    cov_present: np.ndarray | None = None
    converged = True
    homogeneous_table = bool(((c > 0).sum(axis=1) == 1).all())
    record_shares = c.sum(axis=0) / ni.sum()

    if method == "moments":
        rho, means = _moments_precision(c)
        if rho >= 1.0:
            boundary, precision = "homogeneous", lo
            notes.append(
                "ANOVA moment estimate rho = 1: every cell of two or more records is "
                f"homogeneous, so alpha. -> 0; clamped at min_precision = {lo:g}; "
                "means = record shares"
            )
        elif rho <= 0.0:
            boundary, precision = "multinomial", hi
            notes.append(
                f"ANOVA moment estimate rho = {rho:.4g} <= 0: the table is not over-dispersed "
                "relative to a common multinomial (no finite alpha); clamped at "
                f"max_precision = {hi:g}"
            )
        else:
            precision = (1.0 - rho) / rho
            notes.append(
                f"ANOVA (Weir-Hill type) moment match: rho = {rho:.6g}, means = record shares"
            )
            if precision > hi or precision < lo:
                boundary = "multinomial" if precision > hi else "homogeneous"
                precision = min(max(precision, lo), hi)
                notes.append(f"precision {(1.0 - rho) / rho:.4g} clamped to [{lo:g}, {hi:g}]")
        if boundary is not None:
            warn.append(notes[-1])
        alpha_p = means * precision
    else:
        rows, w = np.unique(c, axis=0, return_counts=True)
        wf = w.astype(np.float64)
        if homogeneous_table:
            means = c.astype(bool).sum(axis=0) / n_cells  # shares of cells, not records
            boundary, alpha_p = "homogeneous", means * lo
            notes.append(
                "every cell of two or more records is homogeneous: the likelihood increases "
                f"as alpha. -> 0 (sup not attained); precision clamped at min_precision = {lo:g}; "
                "means = shares of cells in each level (their ML value at the boundary)"
            )
            warn.append(notes[-1])
        elif _overdispersion_score(c, record_shares) <= 0.0:
            boundary, alpha_p = "multinomial", record_shares * hi
            notes.append(
                "the score for 1/alpha. at the multinomial limit is <= 0: the table is not "
                "over-dispersed, the likelihood increases as alpha. -> infinity; precision "
                f"clamped at max_precision = {hi:g}, means = record shares"
            )
            warn.append(notes[-1])
        else:
            rho, _ = _moments_precision(c) if n_cells > 1 else (0.5, None)
            start_prec = (1.0 - rho) / rho if 0.0 < rho < 1.0 else 1.0
            start = record_shares * min(max(start_prec, 1e-3), 1e3)
            alpha_p, converged, how, h = _dm_mle(rows, wf, start)
            notes.append(f"Dirichlet-multinomial ML ({how})")
            prec = alpha_p.sum()
            if prec > hi or prec < lo:
                boundary = "multinomial" if prec > hi else "homogeneous"
                alpha_p = alpha_p / prec * min(max(prec, lo), hi)
                notes.append(f"precision {prec:.4g} clamped to [{lo:g}, {hi:g}]")
                warn.append(notes[-1])
            else:
                try:
                    cov_present = np.linalg.inv(-h)
                except np.linalg.LinAlgError:
                    cov_present = None
                if cov_present is not None and not (np.linalg.eigvalsh(cov_present) > 0).all():
                    cov_present = None
            if not converged:
                notes.append("the optimiser did not reach its gradient tolerance")
                warnings.warn(
                    f"dirichlet_eb: {notes[-1]}; the estimate may be inaccurate",
                    RuntimeWarning,
                    stacklevel=2,
                )

    alpha = np.empty(k_all)
    prec_p = float(alpha_p.sum())
    alpha[present] = alpha_p
    cov: np.ndarray | None = None
    if absent:
        alpha[~present] = _ABSENT_MEAN * prec_p
        notes.append(
            f"level(s) {list(absent)} hold no record: ML alpha_k = 0, set to "
            f"{_ABSENT_MEAN:g} * precision"
        )
        warn.append(notes[-1])
    if cov_present is not None:
        cov = np.zeros((k_all, k_all))
        cov[np.ix_(present, present)] = cov_present
    if warn:
        warnings.warn(
            f"dirichlet_eb({method!r}): " + "; ".join(warn),
            BoundaryEstimateWarning,
            stacklevel=2,
        )
    rows_all, w_all = np.unique(c_all, axis=0, return_counts=True)
    precision = float(alpha.sum())
    return DirichletFit(
        alpha=alpha,
        precision=precision,
        means=alpha / precision,
        method=method,
        converged=converged,
        loglik=_dm_loglik(rows_all, w_all.astype(np.float64), alpha),
        n_cells=n_cells,
        note="; ".join(notes),
        boundary=boundary,
        cov=cov,
        absent_levels=absent,
    )


def _paper_s2_moments(counts: npt.ArrayLike) -> dict[str, Any]:
    """The paper's supplement S2 moment estimator, *as printed* (do not use).

    Kept only so the tests can show that it fails. With ``p̂_k = n_.k / n``,
    ``S2 = Σ n_i²`` and ``Σ̂_kk`` the across-cell sample variance (divisor N - 1)
    of ``n_ik``:

    * K = 2 form (level 1), with ``s² = n p̂(1 - p̂)`` as printed::

          α̂_1 = (p̂²(1 - p̂) S2 - p̂ s²) / (s² - n p̂(1 - p̂))    # denominator == 0

    * K >= 2 form, reading the undefined ``θ̂_k`` as ``p̂_k``::

          α̂_k = (p̂_k²(1 - p̂_k) S2 - p̂_k Σ̂_kk) / (Σ̂_kk - p̂_k(1 - p̂_k) n)

    Returns
    -------
    dict
        ``k2_alpha`` (2,) from the K = 2 form applied to level 1 vs the rest (non-finite:
        division by zero), ``k2_denominator`` (exactly 0.0), ``alpha`` (K,) from the
        K >= 2 form, ``p_hat``, ``sigma_kk``.
    """
    c = _as_count_table(counts).astype(np.float64)
    ni = c.sum(axis=1)
    n, s2 = ni.sum(), (ni**2).sum()
    p = c.sum(axis=0) / n
    sig = c.var(axis=0, ddof=1) if c.shape[0] > 1 else np.full(c.shape[1], np.nan)
    p1 = p[0]
    s_sq = n * p1 * (1.0 - p1)
    den = s_sq - n * p1 * (1.0 - p1)
    with np.errstate(divide="ignore", invalid="ignore"):
        k2 = np.array(
            [
                (p1**2 * (1 - p1) * s2 - p1 * s_sq) / den,
                (p1 * (1 - p1) ** 2 * s2 - (1 - p1) * s_sq) / den,
            ]
        )
        gen = (p**2 * (1 - p) * s2 - p * sig) / (sig - p * (1 - p) * n)
    return {"k2_alpha": k2, "k2_denominator": den, "alpha": gen, "p_hat": p, "sigma_kk": sig}


# ---------------------------------------------------------------------------------------
# cell sizes


@dataclass(frozen=True, eq=False)
class SizeModel:
    """A fitted distribution of the cell size ``n_i >= 1`` (the paper's ``f(n_i; β)``).

    Attributes
    ----------
    family : str
        ``"poisson"`` or ``"negbin"`` (after any fallback; ``note`` says so).
    params : dict
        Poisson: ``{"lambda": λ}``; negative binomial: ``{"r": r, "p": p}`` with
        ``P(n) ∝ C(n + r - 1, n) p^r (1 - p)^n`` (scipy's ``nbinom``; the paper's
        ``NegBin(r, λ)`` with ``λ = p``).
    loglik : float
        Log-likelihood of the sizes under the returned pmf (on ``n >= 1``).
    aic : float
        ``2 * len(params) - 2 * loglik``.
    support : numpy.ndarray
        ``1, 2, ..., n_max`` (int64), ``n_max`` the first size beyond which the model's
        mass on ``n >= 1`` is below ``tail``.
    pmf : numpy.ndarray
        Probabilities over ``support``, renormalised to sum to 1.
    mean : float
        Mean of ``pmf``.
    truncated : bool
        Whether the parameters were fitted as a zero-truncated model.
    n_cells : int
        Number of sizes fitted.
    note : str
        Fit, fallback and boundary notes.
    cov : numpy.ndarray or None
        Asymptotic covariance of the parameters, in the order of ``params``.
    tail_mass : float
        Model mass on ``n >= 1`` beyond ``n_max`` (dropped by the renormalisation).
    """

    family: str
    params: dict[str, float]
    loglik: float
    aic: float
    support: np.ndarray
    pmf: np.ndarray
    mean: float
    truncated: bool
    n_cells: int
    note: str
    cov: np.ndarray | None = None
    tail_mass: float = 0.0

    @property
    def se(self) -> dict[str, float]:
        """Standard errors of ``params`` (NaN where unavailable)."""
        if self.cov is None:
            return {k: math.nan for k in self.params}
        return {k: float(math.sqrt(v)) for k, v in zip(self.params, np.diag(self.cov), strict=True)}

    def pmf_at(self, n: npt.ArrayLike) -> np.ndarray | float:
        """The renormalised pmf at size(s) ``n``; 0 outside ``support``.

        Examples
        --------
        >>> m = fit_size_model([1, 2, 2, 3])
        >>> bool(abs(m.pmf_at(2) - m.pmf[1]) < 1e-15), m.pmf_at([0, 10**9]).tolist()
        (True, [0.0, 0.0])
        """
        arr = np.asarray(n)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
            raise InvalidParameterError(f"n must be integer size(s), got {n!r}")
        if np.issubdtype(arr.dtype, np.floating) and (
            not np.isfinite(arr).all() or (arr != np.round(arr)).any()
        ):
            raise InvalidParameterError(f"n must be integer size(s), got {n!r}")
        idx = arr.astype(np.int64)
        inside = (idx >= 1) & (idx <= self.support[-1])
        out = np.where(inside, self.pmf[np.clip(idx, 1, self.support[-1]) - 1], 0.0)
        return float(out) if out.ndim == 0 else out


def _ztp_lambda(mean: float) -> float:
    """Solve ``λ / (1 - e^-λ) = mean`` (mean > 1)."""

    def g(lam: float) -> float:
        return lam / -math.expm1(-lam) - mean

    return float(optimize.brentq(g, 1e-12, mean, xtol=1e-14, rtol=4 * np.finfo(float).eps))


def _poisson_loglik(x: np.ndarray, lam: float) -> float:
    """Zero-truncated Poisson log-likelihood."""
    return float(
        (x * math.log(lam)).sum()
        - x.size * lam
        - special.gammaln(x + 1.0).sum()
        - x.size * math.log(-math.expm1(-lam))
    )


def _nb_loglik_grad(theta: np.ndarray, x: np.ndarray, truncated: bool) -> tuple[float, np.ndarray]:
    """NB log-likelihood and gradient in ``θ = (log r, log μ)``, μ the untruncated mean."""
    r, mu = np.exp(theta)
    lp = math.log(r) - math.log(r + mu)  # log p
    l1p = math.log(mu) - math.log(r + mu)  # log(1 - p)
    ll = (
        special.gammaln(x + r).sum()
        - x.size * special.gammaln(r)
        - special.gammaln(x + 1.0).sum()
        + x.size * r * lp
        + x.sum() * l1p
    )
    dr = (
        special.digamma(x + r).sum()
        - x.size * special.digamma(r)
        + x.size * (lp + mu / (r + mu))
        - x.sum() / (r + mu)
    )
    dmu = x.sum() / mu - (x.size * r + x.sum()) / (r + mu)
    if truncated:
        q = math.exp(r * lp)  # P(n = 0) = p^r
        log1mq = math.log(-math.expm1(r * lp))
        ll -= x.size * log1mq
        ratio = q / -math.expm1(r * lp)
        dr += x.size * ratio * (lp + mu / (r + mu))
        dmu -= x.size * ratio * r / (r + mu)
    return float(ll), np.array([r * dr, mu * dmu])


def _support(dist: Any, truncated_mass: float, tail: float, max_support: int) -> tuple[int, float]:
    """n_max such that the mass on n >= 1 beyond it is < tail (relative to truncated_mass)."""
    q = tail * truncated_mass
    k = int(min(max(dist.isf(q), 1.0), max_support))
    while k < max_support and dist.sf(k) >= q:
        k += 1
    while k > 1 and dist.sf(k - 1) < q:
        k -= 1
    return k, float(dist.sf(k) / truncated_mass)


def fit_size_model(
    sizes: npt.ArrayLike,
    family: str = "poisson",
    *,
    tail: float = 1e-12,
    truncated: bool = True,
    max_support: int = 1_000_000,
) -> SizeModel:
    """Fit the distribution of the (non-empty) cell sizes by maximum likelihood.

    Parameters
    ----------
    sizes : array_like
        Cell sizes ``n_i >= 1`` (``counts.sum(axis=1)``).
    family : {"poisson", "negbin"}, default "poisson"
        Poisson(λ) or negative binomial(r, p).
    tail : float, default 1e-12
        The support is cut where the model's remaining mass (on n >= 1) drops below it.
    truncated : bool, default True
        Fit the zero-truncated model (right: the cells are non-empty by construction).
        ``False`` fits the plain model as if the sizes were untruncated draws -- the
        paper's footnote 6, whose Poisson estimate is the sample mean; the returned pmf
        still starts at 1 and is renormalised (so it is the zero-truncated pmf at the
        plain estimate).
    max_support : int, default 1,000,000
        Cap on ``n_max`` for very heavy-tailed fits (``tail_mass`` records what is cut).

    Returns
    -------
    SizeModel

    Raises
    ------
    InvalidDataError
        Sizes that are not integers >= 1, or empty.
    InvalidParameterError
        Unknown family, bad ``tail`` or ``max_support``.

    Warns
    -----
    BoundaryEstimateWarning
        ``"negbin"`` on sizes that are not over-dispersed (falls back to the Poisson,
        the ``r → ∞`` limit), a negative-binomial ``r`` at its lower clamp, all sizes 1
        (``λ → 0``), or a support cut at ``max_support``.

    Examples
    --------
    >>> sizes = [1, 1, 2, 3, 1, 5, 2, 8, 1, 1]
    >>> ztp = fit_size_model(sizes)
    >>> round(ztp.params["lambda"], 4), round(ztp.mean, 6)  # ML: the pmf's mean = sample mean
    (2.2316, 2.5)
    >>> fit_size_model(sizes, truncated=False).params  # the paper's plain sample mean
    {'lambda': 2.5}
    >>> nb = fit_size_model(sizes, "negbin")
    >>> sorted(nb.params), float(nb.pmf.sum().round(12))
    (['p', 'r'], 1.0)
    """
    check("size_model", family, name="family")
    tail = _check_bound("tail", tail, 0.0, 1.0)
    if not isinstance(truncated, bool):
        raise InvalidParameterError(f"truncated must be True or False, got {truncated!r}")
    if isinstance(max_support, bool) or not isinstance(max_support, int) or max_support < 1:
        raise InvalidParameterError(f"max_support must be an integer >= 1, got {max_support!r}")
    x = _as_sizes(sizes)
    xf = x.astype(np.float64)
    big_n = x.size
    xbar = float(xf.mean())
    notes: list[str] = []
    warn: list[str] = []
    fam = family

    if fam == "negbin":
        var = float(xf.var(ddof=0))
        nb = _fit_negbin(xf, truncated, xbar, var)
        if nb is None:
            fam = "poisson"
            msg = (
                "negbin requested but the sizes are not over-dispersed relative to the "
                f"{'zero-truncated ' if truncated else ''}Poisson (the ML r -> infinity); "
                "fell back to its Poisson limit"
            )
            notes.append(msg)
            warn.append(msg)
        else:
            r, mu, cov_theta, how, at_floor = nb
            p = r / (r + mu)
            params = {"r": r, "p": p}
            notes.append(how)
            if at_floor:
                msg = (
                    f"negbin r reached its lower clamp {r:.3g} (the ML r -> 0: the "
                    "zero-truncated NB tends to the logarithmic-series distribution)"
                )
                notes.append(msg)
                warn.append(msg)
            jac = np.array([[r, 0.0], [r * mu / (r + mu) ** 2, -r * mu / (r + mu) ** 2]])
            cov = None if cov_theta is None else jac @ cov_theta @ jac.T
            dist = stats.nbinom(r, p)
            trunc_mass = -math.expm1(r * math.log(p))  # P(n >= 1) = 1 - p^r

    if fam == "poisson":
        if truncated:
            if xbar == 1.0:
                lam = 0.0
                msg = (
                    "every size is 1: the zero-truncated Poisson ML lambda -> 0 (a point mass at 1)"
                )
                notes.append(msg)
                warn.append(msg)
            else:
                lam = _ztp_lambda(xbar)
                notes.append("zero-truncated Poisson ML (lambda / (1 - exp(-lambda)) = mean)")
        else:
            lam = xbar
            notes.append(
                "plain Poisson ML on the sizes (the sample mean, as the paper's footnote 6); "
                "pmf renormalised on n >= 1"
            )
        params = {"lambda": lam}
        if lam == 0.0:
            cov = None
        elif truncated:
            mu_t = lam / -math.expm1(-lam)
            cov = np.array([[lam**2 / (big_n * mu_t * (1.0 + lam - mu_t))]])
        else:
            cov = np.array([[lam / big_n]])

    if fam == "poisson" and params["lambda"] == 0.0:
        support = np.array([1], dtype=np.int64)
        pmf = np.array([1.0])
        tail_mass = 0.0
        loglik = 0.0
    else:
        if fam == "poisson":
            lam = params["lambda"]
            dist = stats.poisson(lam)
            trunc_mass = -math.expm1(-lam)
        n_max, tail_mass = _support(dist, trunc_mass, tail, max_support)
        if tail_mass >= tail:
            msg = (
                f"support cut at max_support = {max_support}: mass {tail_mass:.3g} beyond it "
                "dropped before renormalising"
            )
            notes.append(msg)
            warn.append(msg)
        support = np.arange(1, n_max + 1, dtype=np.int64)
        logp = dist.logpmf(support)
        pmf = np.exp(logp - logp.max())
        pmf /= pmf.sum()
        if fam == "poisson":
            loglik = _poisson_loglik(xf, lam)
        else:
            loglik = float(dist.logpmf(xf).sum() - big_n * math.log(trunc_mass))
        # the loglik is that of the model on n >= 1 before the support is cut (the two
        # differ by less than N * tail)
    if warn:
        warnings.warn(
            f"fit_size_model({family!r}): " + "; ".join(warn),
            BoundaryEstimateWarning,
            stacklevel=2,
        )
    return SizeModel(
        family=fam,
        params={k: float(v) for k, v in params.items()},
        loglik=float(loglik),
        aic=float(2 * len(params) - 2 * loglik),
        support=support,
        pmf=pmf,
        mean=float(support @ pmf),
        truncated=truncated,
        n_cells=big_n,
        note="; ".join(notes),
        cov=cov,
        tail_mass=float(tail_mass),
    )


_R_MIN, _R_MAX = 1e-8, 1e8


def _fit_negbin(
    x: np.ndarray, truncated: bool, xbar: float, var: float
) -> tuple[float, float, np.ndarray | None, str, bool] | None:
    """(r, μ, cov of (log r, log μ), note, r at lower clamp), or None if r -> ∞."""
    if truncated:
        if xbar == 1.0:
            return None
        lam = _ztp_lambda(xbar)
        mu_t = lam / -math.expm1(-lam)
        pois_var = mu_t * (1.0 + lam - mu_t)  # variance of the fitted ZTP
        mu0 = lam
    else:
        pois_var = xbar
        mu0 = xbar
    if var <= pois_var:  # not over-dispersed relative to the Poisson fit
        return None
    r0 = min(max(mu0**2 / max(var - pois_var, 1e-12), 1e-3), 1e3)
    scale = 1.0 / x.size

    def fun(t: np.ndarray) -> tuple[float, np.ndarray]:
        ll, g = _nb_loglik_grad(t, x, truncated)
        return -scale * ll, -scale * g

    bounds = [(math.log(_R_MIN), math.log(_R_MAX)), (math.log(1e-12), math.log(1e12))]
    res = optimize.minimize(
        fun,
        np.array([math.log(r0), math.log(mu0)]),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000},
    )
    r, mu = np.exp(res.x)
    if r >= 0.999 * _R_MAX:
        return None
    at_floor = r <= 1.001 * _R_MIN
    cov = None
    if not at_floor:
        cov = _numeric_cov(res.x, x, truncated)
    how = (
        f"{'zero-truncated ' if truncated else ''}negative binomial ML (L-BFGS-B, {res.nit} steps)"
    )
    if not res.success:
        how += f"; optimiser: {res.message}"
    return float(r), float(mu), cov, how, at_floor


def _numeric_cov(theta: np.ndarray, x: np.ndarray, truncated: bool) -> np.ndarray | None:
    """Inverse observed information in θ = (log r, log μ), by differencing the gradient."""
    h = np.empty((2, 2))
    for j in range(2):
        step = 1e-5 * max(1.0, abs(theta[j]))
        e = np.zeros(2)
        e[j] = step
        h[:, j] = (
            _nb_loglik_grad(theta + e, x, truncated)[1]
            - _nb_loglik_grad(theta - e, x, truncated)[1]
        ) / (2 * step)
    h = 0.5 * (h + h.T)
    try:
        cov = np.linalg.inv(-h)
    except np.linalg.LinAlgError:
        return None
    return cov if (np.linalg.eigvalsh(cov) > 0).all() else None
