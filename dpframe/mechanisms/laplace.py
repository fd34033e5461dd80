"""The Laplace mechanism on a grid, with exact discrete noise (no floating-point leak).

Textbook Laplace sampling in floating point leaks the input through the low bits of
its output (Mironov 2012, "On significance of the least significant bits for
differential privacy"). dpframe therefore releases on a grid:

1. choose a granularity ``g``, a power of two (by default the largest one with
   ``g <= sensitivity / 1024``; :mod:`dpframe.core.grid`);
2. round each statistic to the grid, ``m = round(s / g)`` (exact: division by a power of
   two);
3. add integer noise ``Z`` with ``P(Z = z) ∝ exp(-eps' |z| / D)`` drawn by an exact
   integer sampler (:mod:`dpframe.mechanisms.discrete`), where ``D = floor(sensitivity/g)
   + 1`` is the sensitivity in grid units *after* rounding (rounding can move two
   neighbouring statistics apart by up to one more grid step);
4. release ``g * (m + Z)``.

The release is a function of the integer ``m + Z`` only, so every output is a grid
point whatever the input, and the mechanism is exactly ``eps'``-DP, where ``eps'`` is
``epsilon`` rounded *down* to a multiple of ``2**-k`` (so that the sampler works with
integers). ``eps' <= epsilon``: the accountant charges ``epsilon``, never less than the
true loss. The cost of the grid: the effective sensitivity is ``g * D``, at most
``sensitivity * (1 + 1/1024)``, and outputs are multiples of ``g``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.budget import charge_for
from dpframe.core.constraints import (
    check,
    check_epsilon,
    check_positive,
)
from dpframe.core.executor import summary_row
from dpframe.core.grid import check_granularity, default_granularity, grid_indices
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.discrete import (
    discrete_laplace_quantile_abs,
    sample_discrete_laplace,
)

__all__ = [
    "LaplaceCalibration",
    "LaplacePlan",
    "calibrate_laplace",
    "check_values",
    "plan_laplace",
    "release_laplace",
]

#: Largest integer the sampler takes for the numerator and denominator of its scale.
_MAX_INT = 2**31


@dataclass(frozen=True)
class LaplaceCalibration:
    """The parameters of one grid-Laplace release (all derived, nothing drawn).

    Attributes
    ----------
    epsilon : float
        The epsilon charged.
    epsilon_used : fractions.Fraction
        The dyadic epsilon the noise is calibrated to (``<= epsilon``).
    sensitivity : float
        The l1 sensitivity asked for (real units).
    granularity : float
        Grid step ``g`` (a power of two).
    sensitivity_units : int
        ``D = floor(sensitivity / g) + 1``, the sensitivity in grid steps after rounding.
    scale : float
        The noise scale in real units, ``g * D / epsilon_used``.
    """

    epsilon: float
    epsilon_used: Fraction
    sensitivity: float
    granularity: float
    sensitivity_units: int
    values_on_grid: bool = False

    @property
    def scale(self) -> float:
        """Noise scale in real units (the Laplace ``b`` the grid noise matches)."""
        return float(self.granularity * self.sensitivity_units / self.epsilon_used)

    @property
    def noise_scale_fraction(self) -> Fraction:
        """Scale of the integer noise, in grid steps, as an exact fraction ``D / eps'``."""
        return Fraction(self.sensitivity_units) / self.epsilon_used

    def error(self, level: float = 0.95) -> float:
        """Half-width ``h`` with ``P(|noise| <= h) >= level`` (real units, exact)."""
        k = discrete_laplace_quantile_abs(level, float(self.noise_scale_fraction))
        return float(k * self.granularity)

    @property
    def privacy_loss(self) -> float:
        """The mechanism's exact epsilon: ``epsilon_used`` (<= ``epsilon``)."""
        return float(self.epsilon_used)

    def details(self) -> dict[str, object]:
        """Facts for the ledger."""
        return {
            "sensitivity": self.sensitivity,
            "granularity": self.granularity,
            "privacy_loss": self.privacy_loss,
        }

    def check(self, values: np.ndarray) -> np.ndarray:
        """See :func:`check_values`."""
        return check_values(values, self)

    def release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """See :func:`release_laplace`."""
        return release_laplace(values, self, rng)


def calibrate_laplace(
    epsilon: float,
    sensitivity: float,
    granularity: float | None = None,
    *,
    values_on_grid: bool = False,
) -> LaplaceCalibration:
    """Derive the grid and the integer noise scale of an ``epsilon``-DP Laplace release.

    Parameters
    ----------
    epsilon : float
        Privacy parameter (> 0).
    sensitivity : float
        l1 sensitivity of the released value(s) under the neighbour relation (> 0).
    granularity : float, optional
        Grid step, a power of two; default :func:`default_granularity`.
    values_on_grid : bool, default False
        ``True`` if the statistics are already multiples of ``granularity`` (counts on a
        grid of 1): no rounding happens, so ``D = ceil(sensitivity / g)`` instead of
        ``floor(sensitivity / g) + 1``. :func:`check_values` then refuses off-grid values.

    Examples
    --------
    >>> cal = calibrate_laplace(1.0, 1.0)
    >>> cal.sensitivity_units, round(cal.scale, 6)
    (1025, 1.000977)
    """
    eps = check_epsilon(epsilon)
    sens = check_positive("sensitivity", sensitivity)
    g = default_granularity(sens) if granularity is None else check_granularity(granularity)
    units = math.ceil(sens / g) if values_on_grid else math.floor(sens / g) + 1
    if units > _MAX_INT // 4:
        raise InvalidParameterError(
            f"granularity={g!r} is too fine for sensitivity={sens!r} ({units} grid steps); "
            f"use a granularity of at least {default_granularity(sens) / 2**10!r}"
        )
    # eps' = floor(eps * 2**k) / 2**k with the largest k keeping D * 2**k <= 2**31.
    k = 31 - units.bit_length()
    if eps > _MAX_INT / 2**k:  # checked first: eps * 2**k may overflow a float
        raise InvalidParameterError(
            f"epsilon={eps!r} is too large (at most {2**31 / 2**k:g} at this sensitivity "
            "and granularity); pass a smaller epsilon"
        )
    numerator = math.floor(eps * 2**k)
    if numerator < 1:
        raise InvalidParameterError(
            f"epsilon={eps!r} is too small for sensitivity={sens!r} at granularity {g!r}; "
            "use a coarser granularity"
        )
    if numerator > _MAX_INT:
        raise InvalidParameterError(
            f"epsilon={eps!r} is too large (at most {2**31 / 2**k:g} at this sensitivity "
            "and granularity); pass a smaller epsilon"
        )
    return LaplaceCalibration(
        epsilon=eps,
        epsilon_used=Fraction(numerator, 2**k),
        sensitivity=sens,
        granularity=g,
        sensitivity_units=units,
        values_on_grid=values_on_grid,
    )


def check_values(values: np.ndarray, calibration: LaplaceCalibration) -> np.ndarray:
    """Validate ``values`` for a release and return them as grid indices (int64).

    Call before charging: it raises :class:`InvalidDataError` on NaN, infinities, values
    too large for the grid, or off-grid values when ``values_on_grid`` was promised.
    """
    return grid_indices(values, calibration.granularity, calibration.values_on_grid)


def release_laplace(
    values: np.ndarray, calibration: LaplaceCalibration, rng: np.random.Generator
) -> np.ndarray:
    """Add exact grid-Laplace noise to finite ``values`` (one independent draw per value).

    Parameters
    ----------
    values : numpy.ndarray
        The exact statistics (finite floats).
    calibration : LaplaceCalibration
        From :func:`calibrate_laplace`.
    rng : numpy.random.Generator
        The random source (see :mod:`dpframe.core.randomness`).

    Returns
    -------
    numpy.ndarray
        float64 values on the grid ``calibration.granularity``.

    Examples
    --------
    >>> from dpframe.core.randomness import secure_generator
    >>> cal = calibrate_laplace(1.0, 1.0)
    >>> release_laplace(np.array([10.0, 20.0]), cal, secure_generator()).shape
    (2,)
    """
    grid = check_values(values, calibration)
    scale = calibration.noise_scale_fraction
    noise = sample_discrete_laplace(scale.numerator, scale.denominator, size=grid.shape, rng=rng)
    return (grid + noise).astype(np.float64) * calibration.granularity


@dataclass(frozen=True)
class LaplacePlan:
    """Grid-Laplace noise on a vector of statistics that share one calibration.

    The kernel plan of :mod:`dpframe.core.executor` for the simplest release: every value
    gets independent noise of the same scale, and the release costs one charge of
    ``calibration.epsilon`` (``composition`` says how its values compose: ``"parallel"``
    for one statistic per disjoint group).
    """

    calibration: LaplaceCalibration
    column: str
    composition: str = "parallel"
    mechanism: str = "laplace"
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        """What the release is charged (its loss never exceeds the epsilon asked for)."""
        cal = self.calibration
        return charge_for(cal.epsilon_used, cal.epsilon)

    @property
    def charges(self) -> tuple[Charge, ...]:
        cal = self.calibration
        return (
            Charge(
                epsilon=self.epsilon,
                mechanism=self.mechanism,
                columns=(self.column,),
                scale=cal.scale,
                composition=self.composition,
                note=self.note,
                details={**cal.details(), **self.details},
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        cal = self.calibration
        return [
            summary_row(
                self.column,
                self.mechanism,
                self.epsilon,
                sensitivity=cal.sensitivity,
                scale=cal.scale,
                error95=cal.error(0.95),
                note=self.note,
            )
        ]

    def check(self, exact: Any) -> None:
        """Refuse values that cannot be released (NaN, infinities, off the grid)."""
        check_values(np.asarray(exact, dtype=np.float64), self.calibration)

    def draw(self, exact: Any, rng: np.random.Generator) -> np.ndarray:
        """The noisy values (float64 on the grid), one independent draw each."""
        return release_laplace(np.asarray(exact, dtype=np.float64), self.calibration, rng)


def plan_laplace(
    epsilon: float,
    sensitivity: float,
    *,
    column: str,
    granularity: float | None = None,
    values_on_grid: bool = False,
    composition: str = "parallel",
    mechanism: str = "laplace",
    note: str = "",
    details: dict[str, Any] | None = None,
) -> LaplacePlan:
    """Plan a grid-Laplace release of a vector of statistics (no data read).

    Examples
    --------
    >>> plan = plan_laplace(1.0, 2.0, column="count", granularity=1.0, values_on_grid=True)
    >>> plan.charges[0].epsilon, plan.summary()[0]["scale"]
    (1.0, 2.0)
    """
    cal = calibrate_laplace(epsilon, sensitivity, granularity, values_on_grid=values_on_grid)
    check("composition", composition)
    return LaplacePlan(cal, column, composition, mechanism, note, dict(details or {}))
