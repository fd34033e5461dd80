"""Bounded noise on statistics that share one budget: the calibration of a component group.

Used by the covariance-matrix and proportion-vector releases (Liu 2019, Section 4).
A *component group* is a set of statistics (the components of a vector, or one scalar)
drawn with the bounded grid mechanism (:mod:`dpframe.mechanisms.bounded`) at one noise
exponent, of which one record changes at most ``k``.

Privacy accounting. The noise is the grid mechanism of
:mod:`dpframe.mechanisms.bounded` (step ``g``, noise ``P(Z = z) ∝ exp(-gamma |z|)``).
For one component whose grid index can move by ``d`` steps, the worst-case loss is
``f(d) = d gamma`` (BIT) or ``f(d) = grid_truncated_privacy_loss(gamma, d, width)``
(truncation): both are concave and non-decreasing in ``d`` with ``f(0) = 0``. When one
record changes at most ``k`` components of a vector, each by at most ``D`` steps, and
all of them together by at most ``T = floor(l1 / g) + k`` steps (``l1`` the vector's
l1 sensitivity; rounding to the grid adds at most one step per changed component),
the components' losses add up and, by Jensen's inequality,

    loss <= sum_j f(d_j) <= k f(min(D, T / k)).

``calibration="exact"`` picks the largest ``gamma`` with ``k f(min(D, T/k)) <= epsilon``.
When ``T / k >= D`` (substitution: two components change) this is the rule "each
component at ``epsilon / k`` with its own sensitivity"; when ``T / k < D`` (add/remove:
all ``K`` proportions change, by ``2/n`` in total) it is tighter. Truncation's ``f`` is
not linear in ``d``, which is why the sum runs over components and not over the l1 norm
alone. ``calibration="paper"`` uses the paper's scale ``lambda = l1 / epsilon`` on the
grid (the BIT calibration) and, for truncation, charges the bound above, which exceeds
``epsilon``. See ``docs/releases.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.budget import charge_for, exact_sum
from dpframe.core.executor import summary_row
from dpframe.core.frozen import frozen_array
from dpframe.core.grid import check_granularity, default_granularity
from dpframe.core.randomness import secure_generator
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.bounded import BoundedCalibration, component_loss, solve_gamma

__all__ = [
    "ComponentGroup",
    "StatisticCharge",
    "as_generator",
    "check_array",
    "check_symmetric",
    "check_weights",
    "choose_granularity",
    "frozen",
    "ledger_charges",
    "plan_components",
    "summary_rows",
    "total",
]


@dataclass(frozen=True)
class StatisticCharge:
    """The privacy facts of one sanitized statistic (one ledger entry).

    A statistic may be a vector (the proportions, or one level of a universal
    histogram): ``components`` entries, each with sensitivity
    ``component_sensitivity``, of which one record changes at most ``max_changed``,
    by ``sensitivity`` (l1) in total.

    Attributes
    ----------
    name : str
        What was released, e.g. ``"S[0,1]"``, ``"p"``, ``"level 2"``.
    epsilon : float
        Budget allotted to this statistic.
    epsilon_charged : float
        What the ledger must be charged: ``epsilon``, or the true worst-case loss
        (rounded up to 9 decimals) when it is larger (truncation with
        ``calibration="paper"``).
    privacy_loss : float
        The computed worst-case loss bound (``<= epsilon_charged``).
    sensitivity, component_sensitivity : float
        l1 sensitivity of the whole statistic and of each component.
    components, max_changed : int
        Number of components, and how many one record can change.
    scheme : str
        ``"single"`` (a scalar), ``"per-component"`` (each changed component is
        ``epsilon / max_changed``-DP at its own sensitivity) or ``"joint"`` (the
        concave bound ``k f(T/k)`` of the module docstring).
    scale : float or None
        The Laplace scale, ``None`` if it depends on bounds known only after earlier
        statistics are released (then see the release's ``scales``).
    lower, upper : float
        The widest public bounds of a component.
    granularity : float
        Grid step of the release.
    note : str
        How the loss is bounded, in words.
    """

    name: str
    epsilon: float
    epsilon_charged: float
    privacy_loss: float
    sensitivity: float
    component_sensitivity: float
    components: int
    max_changed: int
    scheme: str
    scale: float | None
    lower: float
    upper: float
    granularity: float
    method: str
    calibration: str
    note: str = ""

    def to_charge(self) -> Charge:
        """This statistic as an :class:`~dpframe.core.accountant.Charge` (sequential)."""
        return Charge(
            epsilon=self.epsilon_charged,
            mechanism=f"{self.method}_laplace",
            columns=(self.name,),
            scale=self.scale,
            composition="sequential",
            note=self.note,
            details={
                "calibration": self.calibration,
                "epsilon_allotted": self.epsilon,
                "privacy_loss": self.privacy_loss,
                "sensitivity": self.sensitivity,
                "component_sensitivity": self.component_sensitivity,
                "components": self.components,
                "max_changed": self.max_changed,
                "scheme": self.scheme,
                "lower": self.lower,
                "upper": self.upper,
                "granularity": self.granularity,
            },
        )


def ledger_charges(charges: Sequence[StatisticCharge]) -> list[Charge]:
    return [c.to_charge() for c in charges]


def summary_rows(
    charges: Sequence[StatisticCharge], groups: Sequence[ComponentGroup]
) -> list[dict[str, Any]]:
    """One summary row per statistic: its charge, and the 95 % error of its group's noise
    at the group's widest public bounds (none where the group has no noise scale)."""
    rows = []
    for f, group in zip(charges, groups, strict=True):
        widest = group.calibrate(group.lower, group.upper)
        rows.append(
            summary_row(
                f.name,
                f.to_charge().mechanism,
                f.epsilon_charged,
                sensitivity=f.sensitivity,
                scale=f.scale,
                error95=None if widest is None or f.scale is None else widest.error(0.95),
                note=f.note,
            )
        )
    return rows


def total(values: Sequence[float]) -> float:
    """Exact decimal sum (as the accountant adds), returned as a float."""
    return float(exact_sum(values))


def frozen(a: np.ndarray) -> np.ndarray:
    a = frozen_array(a, dtype=np.float64)
    return a


# ------------------------------------------------------------------------ validation


def as_generator(rng: Any) -> np.random.Generator:
    if rng is None:
        return secure_generator()
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng must be a numpy.random.Generator or None (secure), got {type(rng).__name__}; "
            "pass e.g. dpframe.RandomSource(seed).generator() for a reproducible run"
        )
    return rng


def check_array(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be an array of numbers: {exc}") from None
    if a.ndim != ndim:
        shape = "a vector" if ndim == 1 else "a square matrix"
        raise InvalidParameterError(f"{name} must be {shape}, got an array of shape {a.shape}")
    if not np.isfinite(a).all():
        raise InvalidParameterError(f"{name} must be finite (no NaN or infinity)")
    return a


def check_symmetric(name: str, value: Any) -> np.ndarray:
    a = check_array(name, value, 2)
    if a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise InvalidParameterError(f"{name} must be a non-empty square matrix, got {a.shape}")
    scale = max(1.0, float(np.abs(a).max()))
    if np.abs(a - a.T).max() > 1e-12 * scale:
        raise InvalidParameterError(f"{name} must be symmetric; pass (a + a.T) / 2")
    return 0.5 * (a + a.T)


def check_weights(name: str, w: np.ndarray) -> np.ndarray:
    if not np.isfinite(w).all() or (w <= 0).any():
        raise InvalidParameterError(
            f"{name} must hold finite weights > 0 (every statistic needs some budget)"
        )
    return w


# ----------------------------------------------------------------------- calibration


def _grid_width(lower: float, upper: float, g: float) -> int:
    return math.floor(upper / g) - math.ceil(lower / g)


def choose_granularity(delta: float, lower: float, upper: float, eps: float, k: int) -> float:
    """``min(delta, upper - lower) / 1024`` as a power of two, coarser if epsilon is tiny."""
    g = default_granularity(min(delta, upper - lower))
    while eps / (k * (math.floor(delta / g) + 1)) < 2.0**-16 and (upper - lower) / g >= 64:
        g *= 2.0
    return g


@dataclass(frozen=True)
class ComponentGroup:
    """Calibration of a group of components sharing a budget (see the module docstring)."""

    method: str
    calibration: str
    epsilon: float  # budget of the group
    component_sensitivity: float
    l1: float
    components: int
    k: int  # components one record can change
    lower: float  # widest public bounds of a component
    upper: float
    granularity: float

    @property
    def d_units(self) -> int:
        return math.floor(self.component_sensitivity / self.granularity) + 1

    @property
    def t_units(self) -> int:
        return math.floor(self.l1 / self.granularity) + self.k

    @property
    def d_star(self) -> float:
        return float(min(self.d_units, self.t_units / self.k))

    @property
    def per_component(self) -> bool:
        return self.d_star >= self.d_units

    @property
    def width_max(self) -> int:
        return _grid_width(self.lower, self.upper, self.granularity)

    @property
    def fixed_gamma(self) -> bool:
        """True if the scale does not depend on the (post-processed) bounds."""
        return self.method == "bit" or self.calibration == "paper" or not self.per_component

    def gamma(self, width: int) -> Fraction:
        target = self.epsilon / self.k
        if self.method == "bit" or self.calibration == "paper":
            # the paper's lambda = l1 / epsilon on the grid (= BIT's exact calibration)
            return solve_gamma("bit", target, self.d_star, math.inf)
        if self.per_component:  # each changed component eps/k-DP for its own width
            return solve_gamma("truncated", target, self.d_star, float(width))
        # joint bound: one gamma for the widest interval (the loss grows with the width)
        return solve_gamma("truncated", target, self.d_star, float(self.width_max))

    @property
    def privacy_loss(self) -> float:
        """Worst case over the possible bounds (the widest): ``k f(d*)``."""
        w = self.width_max
        return self.k * component_loss(self.method, float(self.gamma(w)), self.d_star, w)

    @property
    def epsilon_charged(self) -> float:
        return charge_for(self.privacy_loss, self.epsilon)

    @property
    def scheme(self) -> str:
        if self.components == 1:
            return "single"
        return "per-component" if self.per_component else "joint"

    def calibrate(self, lower: float, upper: float) -> BoundedCalibration | None:
        """The grid mechanism for one component with bounds inside the widest ones.

        ``None`` if ``[lower, upper]`` holds fewer than two grid points (degenerate).
        """
        g = self.granularity
        width = _grid_width(lower, upper, g)
        if width < 1:
            return None
        gamma = self.gamma(width)
        return BoundedCalibration(
            method=self.method,
            calibration=self.calibration,
            epsilon=self.epsilon / self.k,
            sensitivity=self.component_sensitivity,
            lower=float(lower),
            upper=float(upper),
            granularity=g,
            sensitivity_units=self.d_units,
            gamma=gamma,
            privacy_loss=component_loss(self.method, float(gamma), self.d_units, width),
            extra={"scheme": self.scheme, "max_changed": self.k},
        )

    def charge(self, name: str, note: str, bounds_fixed: bool = True) -> StatisticCharge:
        """The ledger facts; the scale is known up front unless it follows later bounds."""
        known = bounds_fixed or self.fixed_gamma
        return StatisticCharge(
            name=name,
            epsilon=self.epsilon,
            epsilon_charged=self.epsilon_charged,
            privacy_loss=self.privacy_loss,
            sensitivity=self.l1,
            component_sensitivity=self.component_sensitivity,
            components=self.components,
            max_changed=self.k,
            scheme=self.scheme,
            scale=float(self.granularity / self.gamma(self.width_max)) if known else None,
            lower=self.lower,
            upper=self.upper,
            granularity=self.granularity,
            method=self.method,
            calibration=self.calibration,
            note=note,
        )


def plan_components(
    method: str,
    calibration: str,
    epsilon: float,
    component_sensitivity: float,
    l1: float,
    components: int,
    k: int,
    lower: float,
    upper: float,
    granularity: float | None = None,
) -> ComponentGroup:
    g = (
        choose_granularity(component_sensitivity, lower, upper, epsilon, k)
        if granularity is None
        else check_granularity(granularity)
    )
    plan = ComponentGroup(
        method, calibration, epsilon, component_sensitivity, l1, components, k, lower, upper, g
    )
    if plan.width_max < 1:
        raise InvalidParameterError(
            f"granularity={g!r} leaves fewer than two grid points in [{lower}, {upper}]; "
            "pass a finer granularity"
        )
    plan.gamma(plan.width_max)  # raises now, before any noise, if epsilon is too small
    return plan
