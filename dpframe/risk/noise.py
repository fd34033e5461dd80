"""Count noise for DR-HA: the mechanisms whose disclosure risk is assessed.

DR-HA (Liu & Zhao) asks what a homogeneity attack can still learn from a frequency
table after its counts were sanitized as ``n~ = n + e``. A sanitized count is read as
*present* when it rounds to at least one record, ``n + e >= 0.5``. Everything the
measures need from a mechanism is the noise CDF ``F`` (a count ``c`` is absent with
probability ``F(0.5 - c)``), and its scale as a function of the privacy parameters:

=====================  =============================================  ==================
mechanism              scale                                          guarantee
=====================  =============================================  ==================
``"laplace"``          ``b = Δ1 / ε``                                 ε-DP
``"gaussian"``         ``σ = Δ2 sqrt(2 ln(1.25/δ)) / ε``, ``ε < 1``   (ε, δ)-DP (eq. 3)
``"gaussian_pdp"``     ``σ = Δ2 (sqrt(z² + 2ε) − z) / (2ε)``,         (ε, δ)-pDP (eq. 4)
                       ``z = Φ⁻¹(δ/2)``
``"analytic_gaussian"`` the smallest σ with                            (ε, δ)-DP, any ε
                       ``Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ``
                       (Balle & Wang 2018, Thm. 8)
``"discrete_gaussian"`` ``σ = Δ2 / sqrt(2ρ)``: integer noise              ρ-zCDP (no δ)
                       ``N_Z(0, σ²)``, the law dpframe releases counts
                       with (``dpframe.agg.count(mechanism="gaussian")``)
=====================  =============================================  ==================

The discrete Gaussian's privacy parameter is ``ρ`` (zCDP), not ``ε``: the functions of
this package take it as ``rho=`` (a number or a grid) where the others take ``epsilon=``
(:func:`privacy_grid`). Its ``σ`` is the one the release uses, to the bit
(:func:`dpframe.mechanisms.gaussian.calibrate_gaussian` on the unit grid), and its risk
uses the exact discrete law: a count ``c`` is present when ``c + Z >= 1``.

``Δ`` is the table's sensitivity: the paper uses 1 (``sensitivity=1``); for a table of
counts of records, one record changes the l1 norm by 2 and the l2 norm by ``√2`` under
substitute neighbours, by 1 under add/remove (:func:`table_sensitivity`).

This is an *assessment* module: it reads the confidential table and releases nothing,
so the samplers here (for Monte-Carlo checks) are ordinary float samplers -- except for
the discrete Gaussian, whose Monte Carlo draws the exact integer law the release draws
(:func:`dpframe.mechanisms.gaussian.sample_discrete_gaussian`, from a seedable generator).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import RISK_MECHANISMS as MECHANISMS
from dpframe.core.constraints import RISK_ZCDP as ZCDP
from dpframe.core.constraints import check, check_number_array
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.gaussian import (
    calibrate_gaussian,
    discrete_gaussian_cdf,
    sample_discrete_gaussian,
)

__all__ = [
    "MECHANISMS",
    "absent_probability",
    "noise_scale",
    "privacy_grid",
    "sample_noise",
    "table_sensitivity",
]


def table_sensitivity(mechanism: str, neighbours: str) -> float:
    """Sensitivity of a frequency table (l1 for Laplace, l2 for the Gaussians).

    One record changed (``"substitute"``) moves one count down and one up: l1 = 2,
    l2 = √2. One record added or removed (``"add_remove"``): 1 either way.

    Examples
    --------
    >>> table_sensitivity("laplace", "substitute"), table_sensitivity("gaussian", "add_remove")
    (2.0, 1.0)
    """
    check("risk_mechanism", mechanism, name="mechanism")
    check("neighbours", neighbours)
    if neighbours == "add_remove":
        return 1.0
    return 2.0 if mechanism == "laplace" else math.sqrt(2.0)


def _numbers(value: Any, name: str) -> np.ndarray:
    return check_number_array(name, value)


def _epsilons(epsilon: npt.ArrayLike) -> np.ndarray:
    eps = _numbers(epsilon, "epsilon")
    if eps.size == 0 or not np.isfinite(eps).all() or (eps <= 0).any():
        raise InvalidParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


def epsilon_grid(epsilon: npt.ArrayLike) -> np.ndarray:
    """``epsilon`` as a 1-d grid (a copy), or a clear error: finite, > 0, at most 1-d."""
    eps = _epsilons(epsilon)
    if eps.ndim > 1:
        raise InvalidParameterError(
            f"epsilon must be a number or a 1-d grid of numbers, got shape {eps.shape}"
        )
    return np.atleast_1d(eps).copy()


def privacy_grid(mechanism: str, epsilon: Any = None, rho: Any = None) -> np.ndarray:
    """The privacy-parameter grid of ``mechanism``: ``rho`` for the discrete Gaussian
    (ρ-zCDP), ``epsilon`` for the others; a clear error when the wrong one is given.

    Examples
    --------
    >>> privacy_grid("discrete_gaussian", rho=[0.1, 1.0]).tolist()
    [0.1, 1.0]
    """
    check("risk_mechanism", mechanism, name="mechanism")
    if mechanism in ZCDP:
        if epsilon is not None:
            raise InvalidParameterError(
                f"the {mechanism} mechanism is calibrated by rho (zCDP), not epsilon: pass "
                f"rho= (a number or a grid) instead of epsilon={epsilon!r}"
            )
        if rho is None:
            raise InvalidParameterError(f"the {mechanism} mechanism needs rho= (zCDP, > 0)")
        return _grid_of(rho, "rho")
    if rho is not None:
        raise InvalidParameterError(
            f"rho= is the privacy parameter of mechanism='discrete_gaussian' (zCDP); the "
            f"{mechanism} mechanism takes epsilon=, got rho={rho!r}"
        )
    if epsilon is None:
        raise InvalidParameterError(f"the {mechanism} mechanism needs epsilon= (> 0)")
    return epsilon_grid(epsilon)


def _grid_of(value: Any, name: str) -> np.ndarray:
    arr = _numbers(value, name)
    if arr.size == 0 or not np.isfinite(arr).all() or (arr <= 0).any():
        raise InvalidParameterError(f"{name} must be finite and > 0, got {value!r}")
    if arr.ndim > 1:
        raise InvalidParameterError(
            f"{name} must be a number or a 1-d grid of numbers, got shape {arr.shape}"
        )
    return np.atleast_1d(arr).copy()


def _delta(mechanism: str, delta: Any) -> float:
    if mechanism in ZCDP:
        if delta is not None:
            raise InvalidParameterError(
                f"the {mechanism} mechanism is rho-zCDP and needs no delta: pass "
                f"delta=None, got {delta!r}"
            )
        return 0.0
    if mechanism == "laplace":
        if delta not in (None, 0, 0.0):
            raise InvalidParameterError(
                f"the Laplace mechanism is pure epsilon-DP: pass delta=None, got {delta!r}"
            )
        return 0.0
    if delta is None or isinstance(delta, bool) or not isinstance(delta, int | float):
        raise InvalidParameterError(
            f"the {mechanism} mechanism needs delta in (0, 1), got {delta!r}"
        )
    d = float(delta)
    if not 0.0 < d < 1.0:
        raise InvalidParameterError(f"delta must be in (0, 1), got {delta!r}")
    return d


def _sensitivity(sensitivity: Any) -> float:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int | float):
        raise InvalidParameterError(f"sensitivity must be a number > 0, got {sensitivity!r}")
    s = float(sensitivity)
    if not (math.isfinite(s) and s > 0):
        raise InvalidParameterError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    return s


def noise_scale(
    mechanism: str,
    epsilon: npt.ArrayLike,
    delta: float | None = None,
    sensitivity: float = 1.0,
) -> np.ndarray:
    """The noise scale (Laplace ``b`` or Gaussian ``σ``) for each epsilon.

    Parameters
    ----------
    mechanism : {"laplace", "gaussian", "gaussian_pdp", "analytic_gaussian"}
    epsilon : float or array_like
        Privacy parameter(s), > 0. ``"gaussian"`` (the classic calibration of eq. 3) is
        only (ε, δ)-DP for ε < 1: larger values raise, naming the alternatives.
    delta : float, optional
        Required in (0, 1) for the Gaussians; must be ``None`` for Laplace.
    sensitivity : float, default 1.0
        l1 (Laplace) or l2 (Gaussians) sensitivity of the table; the paper uses 1.

    Returns
    -------
    numpy.ndarray
        Same shape as ``epsilon``.

    Examples
    --------
    >>> float(noise_scale("laplace", 0.5))
    2.0
    >>> round(float(noise_scale("gaussian", 0.5, delta=1e-5)), 4)
    9.6896
    """
    check("risk_mechanism", mechanism, name="mechanism")
    eps = _epsilons(epsilon)
    d = _delta(mechanism, delta)
    sens = _sensitivity(sensitivity)
    if mechanism == "laplace":
        return sens / eps
    if mechanism == "gaussian":
        if (eps >= 1).any():
            raise InvalidParameterError(
                "the classic Gaussian mechanism's calibration sigma = sqrt(2 ln(1.25/delta)) "
                f"/ epsilon is only (epsilon, delta)-DP for epsilon < 1, got max epsilon = "
                f"{eps.max():g}; use mechanism='gaussian_pdp' (probabilistic DP, any epsilon, "
                "as in the paper) or 'analytic_gaussian' (exact (epsilon, delta)-DP, any epsilon)"
            )
        return sens * math.sqrt(2.0 * math.log(1.25 / d)) / eps
    if mechanism in ZCDP:
        return _discrete_sigma(eps, sens)
    if mechanism == "gaussian_pdp":
        from scipy.special import ndtri

        z = float(ndtri(d / 2.0))
        return sens * (np.sqrt(z * z + 2.0 * eps) - z) / (2.0 * eps)
    return sens * _analytic_sigma_unit(eps, d)


def _discrete_sigma(rho: np.ndarray, sensitivity: float) -> np.ndarray:
    """``σ = Δ2 / sqrt(2ρ)`` as the count release calibrates it (``σ²`` rounded up to
    ~40 bits on the unit grid); beyond the sampler's range, the formula itself."""
    out = np.empty(rho.shape)
    for i, r in np.ndenumerate(rho):
        try:
            cal = calibrate_gaussian(
                sensitivity, rho=float(r), granularity=1.0, values_on_grid=True
            )
            out[i] = cal.sigma_units
        except InvalidParameterError:
            out[i] = sensitivity / math.sqrt(2.0 * float(r))
    return out


def _sigma2(sigma: float) -> tuple[int, int]:
    """A rational ``σ²`` (numerator, denominator) for the exact sampler."""
    from fractions import Fraction

    f = Fraction(float(sigma) ** 2).limit_denominator(1 << 40)
    return max(f.numerator, 1), f.denominator


def _analytic_sigma_unit(eps: np.ndarray, delta: float) -> np.ndarray:
    """Smallest σ (for Δ = 1) meeting Balle & Wang's exact condition, by bisection.

    ``δ(σ) = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ)`` decreases in σ; the product with
    ``e^ε`` is taken in logs (``log_ndtr``) so large ε does not overflow.
    """
    from scipy.special import log_ndtr, ndtr

    flat = eps.ravel()

    def excess(sigma: np.ndarray) -> np.ndarray:
        a = 1.0 / (2.0 * sigma)
        b = flat * sigma
        return ndtr(a - b) - np.exp(flat + log_ndtr(-a - b)) - delta

    lo = np.full(flat.shape, 1e-12)
    hi = np.ones(flat.shape)
    while (bad := excess(hi) > 0).any():  # grow until delta(hi) <= delta
        hi[bad] *= 2.0
    for _ in range(200):
        mid = np.sqrt(lo * hi)
        over = excess(mid) > 0
        lo = np.where(over, mid, lo)
        hi = np.where(over, hi, mid)
        if np.all(hi / lo < 1 + 1e-14):
            break
    return hi.reshape(eps.shape)


def absent_probability(mechanism: str, count: npt.ArrayLike, scale: npt.ArrayLike) -> np.ndarray:
    """``P(count + e < 0.5) = F(0.5 - count)``: the count is released as zero.

    ``count`` and ``scale`` broadcast (e.g. counts ``(M, 1)`` against scales ``(1, E)``).

    Examples
    --------
    >>> p = absent_probability("laplace", [0, 1], 1.0)  # 1 - e^-0.5 / 2, e^-0.5 / 2
    >>> p.round(6).tolist()
    [0.696735, 0.303265]
    """
    check("risk_mechanism", mechanism, name="mechanism")
    x = 0.5 - np.asarray(count, dtype=np.float64)
    s = np.asarray(scale, dtype=np.float64)
    if mechanism in ZCDP:
        # integer noise Z: absent <=> c + Z < 0.5 <=> Z <= floor(0.5 - c) (the cdf floors)
        bx, bs = np.broadcast_arrays(x, s)
        out = np.empty(bx.shape)
        for sigma in np.unique(bs):
            at = bs == sigma
            out[at] = discrete_gaussian_cdf(bx[at], float(sigma))
        return out
    if mechanism == "laplace":
        z = x / s
        return np.where(
            z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(z, 0.0))
        )
    from scipy.special import ndtr

    return ndtr(x / s)


def sample_noise(
    mechanism: str, scale: npt.ArrayLike, size: tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """Float noise of the given scale (for Monte-Carlo assessment only, never a release).

    The discrete Gaussian's noise is integer and cannot be scaled: ``scale`` must then
    be the one σ of the draw, and the draws are exact ``N_Z(0, σ²)`` (as float64).
    """
    check("risk_mechanism", mechanism, name="mechanism")
    s = np.asarray(scale, dtype=np.float64)
    if mechanism in ZCDP:
        if s.size != 1:
            raise InvalidParameterError("discrete Gaussian noise is drawn for one sigma at a time")
        num, den = _sigma2(float(s.reshape(-1)[0]))
        return sample_discrete_gaussian(num, den, size=size, rng=rng).astype(np.float64)
    if mechanism == "laplace":
        return rng.laplace(0.0, 1.0, size=size) * s
    return rng.standard_normal(size=size) * s
