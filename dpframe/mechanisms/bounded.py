"""Laplace noise for statistics with public bounds: truncated and BIT, on a grid.

A statistic ``s`` with public bounds ``[lower, upper]`` (either may be infinite) is
released so that the output stays inside the bounds (Liu 2019):

* ``method="truncated"``: the Laplace draw is *conditioned* on the bounds;
* ``method="bit"`` (boundary-inflated truncation): the Laplace draw is *clamped* to the
  bounds, leaving point masses there.

Like :mod:`dpframe.mechanisms.laplace`, everything happens on a grid of step ``g`` (a
power of two) with exact integer noise, so no floating-point leak is possible: the
statistic is clipped to its bounds and rounded to a grid index ``m`` kept within
``[a, b] = [ceil(lower/g), floor(upper/g)]``; the noise ``Z`` has
``P(Z = z) ∝ exp(-gamma |z|)``, ``gamma`` a dyadic rational; truncation draws ``m + Z``
conditioned on ``[a, b]`` exactly (:func:`~dpframe.mechanisms.discrete.
sample_truncated_discrete_laplace`), BIT clamps ``m + Z`` to ``[a, b]``.

Privacy. BIT is post-processing of the grid Laplace mechanism: exactly
``D * gamma``-DP, where ``D = floor(Δ/g) + 1`` grid steps bound how far neighbouring
statistics can be after rounding. Truncation is *not* ``D * gamma``-DP: conditioning
divides by ``N(m) = sum_{y=a..b} exp(-gamma |y - m|)``, which depends on the data
(Holohan et al. 2018). Its exact worst-case loss on the grid is (see
:func:`grid_truncated_privacy_loss`)::

    eps(gamma) = d gamma + log N(a + d) - log N(a),   d = min(D, b - a)

attained by ``m = a``, ``m' = a + d`` and the output ``y = a`` (``log N`` is concave in
``m`` and ``gamma d + log N(a + d)`` is non-decreasing in ``d``; the tests check it by
exhaustive search). ``calibration="exact"`` picks the largest ``gamma`` with
``eps(gamma) <= epsilon``; ``calibration="paper"`` uses the paper's scale
``lambda = Δ / epsilon`` and charges ``eps(gamma)``, which exceeds ``epsilon``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from dpframe.core.budget import charge_for
from dpframe.core.constraints import (
    check,
    check_epsilon,
    check_open_bounds,
    check_positive,
)
from dpframe.core.grid import check_granularity, default_granularity
from dpframe.core.randomness import secure_generator
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.discrete import (
    _discrete_laplace,
    _truncated_discrete_laplace,
    _two_sided_inverse,
    _validate_rng,
    blocks,
    discrete_laplace_quantile_abs,
    sample_discrete_laplace,
)

__all__ = [
    "BoundedCalibration",
    "calibrate_bounded",
    "component_loss",
    "grid_truncated_privacy_loss",
    "sample_bit_laplace",
    "sample_truncated_laplace",
    "solve_gamma",
    "truncated_laplace_privacy_loss",
    "truncated_laplace_scale",
]

_GAMMA_BITS = 30  # gamma = den / 2**30, so the sampler's num = 2**30 <= 2**31
_MARGIN = 1e-12  # relative margin kept below epsilon against float rounding


#: Grid indices of bounds and values stay below this in absolute value, so that every
#: difference of two (``lower - m``) fits in int64 with room (a release never wraps).
_MAX_INDEX = 2.0**61


def _grid_bounds(lo: float, hi: float, g: float) -> tuple[float, float]:
    """``(ceil(lo / g), floor(hi / g))`` (infinite bounds stay infinite), refused when a
    finite bound is ``2**61`` grid steps or more from 0."""
    for name, x in (("lower", lo), ("upper", hi)):
        if math.isfinite(x) and not abs(x / g) < _MAX_INDEX:  # inf after overflow too
            raise InvalidParameterError(
                f"{name}={x!r} is 2**61 or more steps of the grid (granularity {g!r}) from "
                "0; pass a coarser granularity or a smaller bound"
            )
    a = math.ceil(lo / g) if math.isfinite(lo) else -math.inf
    b = math.floor(hi / g) if math.isfinite(hi) else math.inf
    return a, b


def _granularity(reference: float, lower: float, upper: float) -> float:
    """The default grid step for the smaller of ``reference`` and ``upper - lower``."""
    if upper - lower < reference:
        return default_granularity(upper - lower, "upper - lower")
    return default_granularity(reference)


def _dyadic_floor(x: float) -> Fraction:
    """Largest ``k / 2**30 <= x``, capped at 2 (the sampler's limit; less only adds noise)."""
    den = min(math.floor(x * 2**_GAMMA_BITS), 2**31)
    if den < 1:
        raise InvalidParameterError(
            f"epsilon is too small for the grid (the noise exponent is {x!r} per grid step); "
            "pass a larger epsilon or a coarser granularity"
        )
    return Fraction(den, 2**_GAMMA_BITS)


def grid_truncated_privacy_loss(gamma: float, d_units: int, width: float) -> float:
    """Exact worst-case privacy loss of the truncated grid mechanism.

    Parameters
    ----------
    gamma : float
        Noise exponent per grid step: ``P(Z = z) ∝ exp(-gamma |z|)``.
    d_units : int
        Sensitivity in grid steps (after rounding).
    width : float
        ``b - a``, the number of grid steps between the bounds (``inf`` if one-sided).

    Returns
    -------
    float
        ``d gamma + log N(a + d) - log N(a)`` with ``d = min(d_units, width)``.

    Examples
    --------
    >>> loss = grid_truncated_privacy_loss(0.01, 100, float("inf"))  # one-sided bound
    >>> bool(1.0 < loss < 1.0 + math.log(2))  # d * gamma = 1, plus the normalising term
    True
    """
    d = min(float(d_units), width)
    if math.isinf(width):
        # N(m) ∝ 1 + beta - beta^(m - a + 1): ratio N(a + d) / N(a) = 1 + beta (1 - beta^d)
        ratio_log = math.log1p(math.exp(-gamma) * -math.expm1(-gamma * d))
    else:
        # N(m) ∝ 1 + beta - beta^(m-a+1) - beta^(b-m+1); all terms kept positive
        num = -math.expm1(-gamma * (d + 1)) + math.exp(-gamma) * -math.expm1(-gamma * (width - d))
        den = -math.expm1(-gamma * (width + 1))
        ratio_log = math.log(num) - math.log(den)
    return d * gamma + ratio_log


def truncated_laplace_privacy_loss(
    scale: float, sensitivity: float, lower: float | None, upper: float | None
) -> float:
    """Exact worst-case epsilon of the *continuous* truncated Laplace mechanism.

    With ``C(s) = P(lower <= s + Laplace(scale) <= upper)``, the loss is
    ``Δ'/scale + log C(lower + Δ') - log C(lower)``, ``Δ' = min(Δ, upper - lower)``
    (Holohan et al. 2018). It exceeds ``Δ/scale`` whenever a bound is finite.

    Examples
    --------
    >>> eps = truncated_laplace_privacy_loss(0.1, 0.1, 0.0, 1.0)  # the paper's scale, eps=1
    >>> round(eps, 3)
    1.49
    """
    lam = check_positive("scale", scale)
    sens = check_positive("sensitivity", sensitivity)
    lo, hi = check_open_bounds(lower, upper)
    d = min(sens, hi - lo)

    def log_mass(s: float) -> float:  # log C(s), s inside the bounds
        out = -0.5 * math.exp(-(s - lo) / lam) if math.isfinite(lo) else 0.0
        if math.isfinite(hi):
            out -= 0.5 * math.exp(-(hi - s) / lam)
        return math.log1p(out)

    if math.isinf(lo) and math.isinf(hi):
        return sens / lam
    if math.isinf(lo):  # mirror: the worst case sits at the finite bound
        lo, hi = -hi, math.inf
    return d / lam + log_mass(lo + d) - log_mass(lo)


@dataclass(frozen=True)
class BoundedCalibration:
    """Everything a bounded release needs, derived without drawing noise."""

    method: str
    calibration: str
    epsilon: float
    sensitivity: float
    lower: float
    upper: float
    granularity: float
    sensitivity_units: int
    gamma: Fraction
    privacy_loss: float
    values_on_grid: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scale(self) -> float:
        """Laplace scale in real units, ``g / gamma``."""
        return float(self.granularity / self.gamma)

    @property
    def grid_lower(self) -> float:
        return math.ceil(self.lower / self.granularity) if math.isfinite(self.lower) else -math.inf

    @property
    def grid_upper(self) -> float:
        return math.floor(self.upper / self.granularity) if math.isfinite(self.upper) else math.inf

    @property
    def epsilon_charged(self) -> float:
        """What the accountant is charged: ``epsilon``, or the true loss if it is larger.

        The true loss is rounded *up* to 9 decimals.
        """
        return charge_for(self.privacy_loss, self.epsilon)

    def error(self, level: float = 0.95) -> float:
        """Worst case over ``s`` of the ``level`` half-width of ``|s* - s|`` (real units).

        BIT: clamping only moves a draw towards ``s``, so the untruncated quantile bounds
        it. Truncated: worst with ``s`` on a bound, where ``|s* - s|`` is a geometric law
        truncated to the bounds' width.
        """
        g = self.granularity
        t = float(1 / self.gamma)
        untruncated = discrete_laplace_quantile_abs(level, t)
        if self.method == "bit":
            return float(untruncated * g)
        width = self.grid_upper - self.grid_lower
        if math.isinf(width):
            k = math.ceil(math.log1p(-level) / -float(self.gamma)) - 1
        else:
            mass = -math.expm1(-float(self.gamma) * (width + 1))
            k = math.ceil(math.log1p(-level * mass) / -float(self.gamma)) - 1
            k = min(k, int(width))
        return float(max(k, 0) * g)

    def details(self) -> dict[str, Any]:
        """Facts for the ledger."""
        return {
            "method": self.method,
            "calibration": self.calibration,
            "sensitivity": self.sensitivity,
            "lower": self.lower if math.isfinite(self.lower) else None,
            "upper": self.upper if math.isfinite(self.upper) else None,
            "granularity": self.granularity,
            "privacy_loss": self.privacy_loss,
            **self.extra,
        }

    # -- release ----------------------------------------------------------------------

    def check(self, values: np.ndarray) -> np.ndarray:
        """Validate ``values``; return them clipped to the bounds as grid indices.

        The grid step is a power of two, so ``x / g`` is exact; the size check and the
        final clip are skipped when the bounds already imply them (finite bounds below
        ``2**61`` steps; bounds on the grid).
        """
        x = self._validated(values)
        return self._grid_indices(x.copy())

    def _validated(self, values: np.ndarray) -> np.ndarray:
        """``values`` as floats, refused unless finite and small enough for the grid."""
        x = np.asarray(values, dtype=np.float64)
        if not np.isfinite(x).all():
            raise InvalidDataError("values must be finite (no NaN or infinity) to be released")
        g = self.granularity
        bounded = max(abs(self.lower), abs(self.upper)) / g < 2.0**61  # False if infinite
        if not bounded:
            big = float(np.abs(np.clip(x, self.lower, self.upper)).max(initial=0.0))
            if big / g >= 2.0**61:
                raise InvalidDataError(
                    f"values up to {big:g} are too large for granularity "
                    f"{self.granularity!r}; pass a coarser granularity"
                )
        return x

    def _grid_indices(self, x: np.ndarray) -> np.ndarray:
        """Validated values (a float array, overwritten) as clipped grid indices."""
        np.clip(x, self.lower, self.upper, out=x)
        g = self.granularity
        np.divide(x, g, out=x)
        np.rint(x, out=x)
        if self.lower / g != self.grid_lower or self.upper / g != self.grid_upper:
            np.clip(x, self.grid_lower, self.grid_upper, out=x)  # bounds off the grid
        return x.astype(np.int64)

    def release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Draw the mechanism for each value (clipped to the bounds first).

        Every value is validated before anything is drawn; then the values are released
        in blocks (:data:`~dpframe.mechanisms.discrete.BLOCK`) whose temporaries stay in
        the CPU's cache.
        """
        x = self._validated(values)
        flat = x.ravel()
        out = np.empty(flat.shape[0], dtype=np.float64)
        num, den = self.gamma.denominator, self.gamma.numerator  # scale = 1 / gamma
        lo, hi = self.grid_lower, self.grid_upper
        for part in blocks(flat.shape[0]):
            m = self._grid_indices(flat[part].copy())
            if self.method == "bit":  # the samplers' unchecked cores: inputs validated
                y = _discrete_laplace(num, den, m.shape[0], rng)
                y += m
                y = _clamp(y, lo, hi)
            else:  # lo - m <= 0 <= hi - m (m is clipped): the inverse CDF around 0
                y = _two_sided_inverse(lo - m, hi - m, num, den, rng)
                y += m
            np.multiply(y, self.granularity, out=out[part])
        return out.reshape(x.shape)


def calibrate_bounded(
    epsilon: float,
    sensitivity: float,
    lower: float | None,
    upper: float | None,
    *,
    method: str = "truncated",
    calibration: str = "exact",
    granularity: float | None = None,
) -> BoundedCalibration:
    """Calibrate a bounded (truncated or BIT) grid-Laplace release.

    Parameters
    ----------
    epsilon : float
        Privacy parameter (> 0).
    sensitivity : float
        l1 sensitivity of the statistic (> 0).
    lower, upper : float or None
        Public bounds of the statistic; ``None`` or an infinity for a one-sided bound.
    method : {"truncated", "bit"}
    calibration : {"exact", "paper"}
        ``"exact"``: the scale making the mechanism exactly ``epsilon``-DP. ``"paper"``:
        the paper's ``Δ / epsilon`` (for truncation, the true loss is then larger and is
        what the accountant is charged). BIT is ``epsilon``-DP at ``Δ / epsilon`` either way.
    granularity : float, optional
        Grid step, a power of two; default ``min(Δ, upper - lower) / 1024`` rounded
        down to a power of two.

    Examples
    --------
    >>> exact = calibrate_bounded(1.0, 0.1, 0.0, 1.0)
    >>> paper = calibrate_bounded(1.0, 0.1, 0.0, 1.0, calibration="paper")
    >>> exact.privacy_loss <= 1.0 < paper.privacy_loss
    True
    """
    eps = check_epsilon(epsilon)
    sens = check_positive("sensitivity", sensitivity)
    lo, hi = check_open_bounds(lower, upper)
    check("method", method)
    check("calibration", calibration)
    g = _granularity(sens, lo, hi) if granularity is None else check_granularity(granularity)
    units = math.floor(sens / g) + 1
    a, b = _grid_bounds(lo, hi, g)
    width = b - a
    if width < 1:
        raise InvalidParameterError(
            f"granularity={g!r} leaves fewer than two grid points in [{lo}, {hi}]; use a finer one"
        )
    gamma, loss = _gamma_and_loss(method, calibration, eps, units, width)
    # the fields in their order: method, calibration, epsilon, sensitivity, lower, upper,
    # granularity, sensitivity_units
    return BoundedCalibration(
        method, calibration, eps, sens, lo, hi, g, units, gamma=gamma, privacy_loss=loss
    )


def _gamma_and_loss(
    method: str, calibration: str, eps: float, units: int, width: float
) -> tuple[Fraction, float]:
    """The grid noise parameter ``gamma`` (scale ``g / gamma``) and the privacy loss it gives."""
    plain = _dyadic_floor(eps / units)  # the paper's lambda = Δ/eps, on the grid
    if method == "bit":
        return plain, units * float(plain)
    if calibration == "paper":
        gamma = plain
    else:
        gamma = solve_gamma("truncated", eps, float(units), float(width))
    return gamma, grid_truncated_privacy_loss(float(gamma), units, width)


def component_loss(method: str, gamma: float, d: float, width: float) -> float:
    """Worst-case loss of one statistic whose grid index moves by ``d`` steps.

    ``d * gamma`` for BIT (post-processing of the Laplace mechanism); the exact truncated
    loss :func:`grid_truncated_privacy_loss` otherwise.
    """
    if method == "bit":
        return gamma * d
    return grid_truncated_privacy_loss(gamma, d, width)


@lru_cache(maxsize=4096)
def solve_gamma(method: str, target: float, d: float, width: float) -> Fraction:
    """The largest dyadic ``gamma`` (<= 2) whose loss is <= ``target`` (bisection).

    A relative margin of 1e-12 keeps the float evaluation of the loss, whose rounding
    error is far smaller, on the safe side.
    """
    goal = target * (1.0 - _MARGIN)
    if method == "bit":
        return _dyadic_floor(goal / d)
    lo, hi = 0.0, min(2.0, goal / min(d, width))  # loss >= gamma * min(d, width)
    if component_loss(method, hi, d, width) <= goal:
        lo = hi
    else:
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if component_loss(method, mid, d, width) <= goal:
                lo = mid
            else:
                hi = mid
            if hi - lo <= lo * 2.0**-40:
                break
    gamma = _dyadic_floor(lo)
    while component_loss(method, float(gamma), d, width) > goal:
        gamma = Fraction(gamma.numerator - max(1, gamma.numerator >> 20), gamma.denominator)
        if gamma <= 0:
            raise InvalidParameterError("cannot calibrate: epsilon is too small for this grid")
    return gamma


def truncated_laplace_scale(
    epsilon: float,
    sensitivity: float,
    lower: float | None,
    upper: float | None,
    calibration: str = "exact",
) -> float:
    """The Laplace scale λ of a truncated release (grid mechanism, default granularity).

    Examples
    --------
    >>> truncated_laplace_scale(1.0, 0.1, 0.0, 1.0) > 0.1  # exact needs more noise than Δ/ε
    True
    """
    return calibrate_bounded(
        epsilon, sensitivity, lower, upper, method="truncated", calibration=calibration
    ).scale


def _sampling_grid(
    loc: Any,
    scale: float,
    lower: float | None,
    upper: float | None,
    size: int | tuple[int, ...] | None,
    granularity: float | None,
) -> tuple[float, Fraction, float, float, np.ndarray]:
    """Grid step, noise exponent, grid bounds and the locations' grid indices."""
    lo, hi = check_open_bounds(lower, upper)
    lam = check_positive("scale", scale)
    if granularity is None:
        g = _granularity(lam, lo, hi)
    else:
        g = check_positive("granularity", granularity)
    if g / lam < 2.0**-_GAMMA_BITS:
        raise InvalidParameterError("scale is too large for the grid; pass a coarser granularity")
    gamma = _dyadic_floor(g / lam)
    a, b = _grid_bounds(lo, hi, g)
    if a > b:
        raise InvalidParameterError(
            f"granularity={g!r} leaves no grid point in [{lower}, {upper}]; use a finer one"
        )
    try:
        m = np.rint(np.asarray(loc, dtype=np.float64) / g)
        if size is not None:
            m = np.broadcast_to(m, size)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"loc must be a number or an array of numbers that fits size={size!r}: {exc}"
        ) from None
    if not np.isfinite(m).all():
        raise InvalidParameterError("loc must be finite (no NaN or infinity)")
    if m.size and np.abs(m).max() >= _MAX_INDEX:
        raise InvalidParameterError(
            "loc is 2**61 or more grid steps from 0; pass a coarser granularity"
        )
    return g, gamma, a, b, m


def _clamp(y: np.ndarray, a: float, b: float) -> np.ndarray:
    """Clamp grid indices to ``[a, b]`` (either may be infinite)."""
    return np.clip(y, a if math.isfinite(a) else None, b if math.isfinite(b) else None)


def sample_truncated_laplace(
    loc: Any,
    scale: float,
    lower: float | None,
    upper: float | None,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
    *,
    granularity: float | None = None,
) -> np.ndarray:
    """Draw Laplace(loc, scale) conditioned on ``[lower, upper]``, on a grid, exactly.

    ``loc`` may lie anywhere (even far outside the bounds): every draw takes the same
    path, with no rejection, so the work does not depend on it (but for the rare exact
    fallback, :func:`~dpframe.mechanisms.discrete.fallback_bound`). Outputs are
    multiples of the granularity (default ``min(scale, upper - lower) / 1024`` rounded
    down to a power of two) inside the bounds; ``scale`` is rounded up to the nearest
    value the exact sampler takes.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = sample_truncated_laplace(5.0, 1.0, 0.0, 1.0, size=1000, rng=rng)
    >>> bool(x.min() >= 0 and x.max() <= 1)
    True
    """
    g, gamma, a, b, m = _sampling_grid(loc, scale, lower, upper, size, granularity)
    rng = secure_generator() if rng is None else _validate_rng(rng)
    flat = m.ravel()
    out = np.empty(flat.shape[0], dtype=np.float64)
    for part in blocks(flat.shape[0]):  # the sampler's unchecked core, block by block
        index = flat[part]
        z = _truncated_discrete_laplace(
            a - index, b - index, gamma.denominator, gamma.numerator, rng
        )
        np.add(index, z, out=out[part])
    out *= g
    return out.reshape(m.shape)


def sample_bit_laplace(
    loc: Any,
    scale: float,
    lower: float | None,
    upper: float | None,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
    *,
    granularity: float | None = None,
) -> np.ndarray:
    """Draw Laplace(loc, scale) clamped to ``[lower, upper]`` (BIT), on a grid, exactly.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = sample_bit_laplace(0.0, 1.0, 0.0, 1.0, size=1000, rng=rng)
    >>> bool((x == 0).mean() > 0.4)  # a point mass of 1/2 at the lower bound
    True
    """
    g, gamma, a, b, m = _sampling_grid(loc, scale, lower, upper, size, granularity)
    z = sample_discrete_laplace(gamma.denominator, gamma.numerator, size=m.shape, rng=rng)
    return _clamp(m + z, a, b) * g
