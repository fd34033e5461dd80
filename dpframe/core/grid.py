"""The output grid: every released value is a multiple of a power of two.

Textbook floating-point Laplace sampling leaks the input through the low bits of its
output (Mironov 2012). dpframe rounds each statistic to a grid of step ``g`` -- a power of
two, so the rounding ``round(s / g)`` is exact -- and adds integer noise, so every output
is ``g`` times an integer whatever the input (``docs/privacy.md``, "Floating point").

The rules, each defined once here:

* ``g`` is a power of two (:func:`check_granularity`);
* by default ``g`` is the largest power of two ``<= reference / GRID_STEPS``, where the
  reference is the sensitivity (or the bounds' width, if smaller): the grid costs at
  most ``1/1024`` of the noise scale (:func:`default_granularity`);
* ``g <= MAX_GRANULARITY``, so that no output ``g * (m + Z)``, ``|m + Z| < 2**63``, can
  overflow to infinity (a sensitivity of ``1e308`` is refused, not released as ``inf``);
* a statistic is released as its grid index ``m = round(s / g)``: finite, ``|m| < 2**62``,
  and exactly on the grid where the caller promised it (:func:`grid_indices`, shared by
  the Laplace and Gaussian mechanisms).

Examples
--------
>>> from dpframe.core.grid import default_granularity, pow2_floor
>>> default_granularity(1.0), pow2_floor(3.0)
(0.0009765625, 2.0)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import check_positive
from dpframe.errors import InvalidDataError, InvalidParameterError

__all__ = [
    "GRID_STEPS",
    "MAX_GRANULARITY",
    "check_granularity",
    "default_granularity",
    "grid_indices",
    "is_power_of_two",
    "pow2_floor",
]

#: Grid steps per unit of the reference (sensitivity or width): the grid costs <= 1/1024.
GRID_STEPS = 1024
#: Largest grid step: ``2**960 * 2**63`` is still a finite float.
MAX_GRANULARITY = 2.0**960


def pow2_floor(x: float) -> float:
    """The largest power of two ``<= x`` (exact, for any finite ``x > 0``)."""
    _, exponent = math.frexp(x)  # x = m * 2**exponent with m in [0.5, 1)
    return math.ldexp(1.0, exponent - 1)


def is_power_of_two(x: float) -> bool:
    """True if ``x`` is exactly ``2**k`` for an integer ``k``."""
    return x > 0 and math.isfinite(x) and math.frexp(x)[0] == 0.5


def check_granularity(granularity: Any, name: str = "granularity") -> float:
    """A grid step: a power of two no larger than :data:`MAX_GRANULARITY`."""
    g = check_positive(name, granularity)
    if not is_power_of_two(g):
        raise InvalidParameterError(
            f"{name} must be a power of two (e.g. 2**-10 = {2**-10}), got {g!r}: rounding "
            "to a power-of-two grid is exact in floating point"
        )
    if g > MAX_GRANULARITY:
        raise InvalidParameterError(
            f"{name}={g!r} is too coarse: outputs on it could overflow to infinity; "
            f"it must be <= 2**960 (rescale the statistic)"
        )
    return g


def default_granularity(reference: float, name: str = "sensitivity") -> float:
    """The largest power of two ``<= reference / GRID_STEPS``, checked as a grid step.

    ``reference`` is the sensitivity, or the width of the bounds where that is smaller;
    ``name`` says which, for the message when it is too large for any grid.
    """
    ref = check_positive(name, reference)
    g = pow2_floor(ref / GRID_STEPS)
    if g > MAX_GRANULARITY:
        raise InvalidParameterError(
            f"{name}={ref!r} is too large for the output grid (outputs could overflow to "
            "infinity); rescale the statistic (e.g. to thousands) and its bounds"
        )
    if g == 0.0 or not math.isfinite(g):
        raise InvalidParameterError(f"{name}={ref!r} is too small for a float grid")
    return g


def grid_indices(values: npt.ArrayLike, granularity: float, on_grid: bool) -> np.ndarray:
    """The grid indices ``round(values / granularity)`` of statistics to release (int64).

    Call before charging: raises :class:`~dpframe.errors.InvalidDataError` on NaN,
    infinities, values too large for the grid (``|index| >= 2**62``), or values off the
    grid when ``on_grid`` (``values_on_grid=True``) was promised.

    Examples
    --------
    >>> grid_indices([1.0, 1.26], 0.5, on_grid=False)
    array([2, 3])
    """
    x = np.asarray(values, dtype=np.float64)
    if not np.isfinite(x).all():
        raise InvalidDataError("values must be finite (no NaN or infinity) to be released")
    scaled = x / granularity
    grid = np.rint(scaled)
    if np.abs(grid).max(initial=0.0) >= 2.0**62:
        raise InvalidDataError(
            f"values up to {np.abs(x).max():g} are too large for granularity {granularity!r}; "
            "pass a coarser granularity"
        )
    if on_grid and not np.array_equal(grid, scaled):
        raise InvalidDataError(
            f"values are not multiples of granularity {granularity!r}, but values_on_grid=True"
        )
    return grid.astype(np.int64)
