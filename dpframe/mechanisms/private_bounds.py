"""Private bounds: a first pass that finds a column's bounds with DP (``lower="auto"``).

A sum, mean, variance or covariance needs public bounds to clip its values. When the
user does not know them, ``lower="auto"`` / ``upper="auto"`` asks for a **first pass**,
planned and charged like any release, that finds them privately; the statistic is then
planned with the bounds it found (:meth:`dpframe.polars.release.Release.draw`). Never a
bound read from raw data: the exact minimum and maximum reach nothing.

The pass (:class:`BoundsPlan`) is ApproxBounds-style (as Google's differential-privacy
library): the column, **pooled over every group**, is histogrammed on a symmetric
log-scale grid -- bin edges 0 and ``+-2**k`` for every ``k`` of
:data:`~dpframe.core.constraints.AUTO_BOUNDS_EXPONENTS` (the kernel's
:func:`~dpframe.mechanisms.quantile.grid_from_edges`: exact powers of two, so every
engine bins a value by comparisons alone; values beyond the outer edges fall in the
outer bins) --, each bin count gets exact integer Laplace noise
(:func:`~dpframe.mechanisms.laplace.calibrate_laplace`, l1 sensitivity ``rows * sides``
of :func:`~dpframe.mechanisms.quantile.quantile_sides`: a person's rows in the pooled
column, twice under substitute neighbours), and the bounds are the outer edges of the
lowest and highest bins whose noisy count exceeds the threshold ``t = b ln(B / beta)``
(``b`` the noise scale, ``B`` the bins, ``beta`` =
:data:`~dpframe.core.constraints.AUTO_BOUNDS_BETA`: an empty bin passes it with
probability at most ``beta / B``, so no empty bin does with probability ``1 - beta``).
If no bin passes, the bin of the largest noisy count gives both bounds. Everything after
the noise is post-processing: the pass is epsilon-DP whatever the values.

Why this rule rather than a DP quantile at, say, 0.5 % and 99.5 % (the recursive
quantiles of :mod:`dpframe.mechanisms.quantile`): both bounds come from one histogram
(the pass's epsilon is not split between them), and an extreme quantile on a log grid
fails on small data -- every candidate above the largest value has the same score, and
the dozens of them outweigh the right one unless ``(1 - q) n epsilon`` is large. The
threshold rule degrades gracefully instead: it clips the bins too thin to tell from noise
(fewer than about ``t`` rows), and a released edge is within a factor 2 of the values
it bounds. An outlier moves one bin count by at most ``rows``: its value never reaches a
bound, and changing it changes the law of the bounds by at most epsilon.

The pass's epsilon is a share of the statistic's (``bounds_epsilon=``, default
:data:`~dpframe.core.constraints.AUTO_BOUNDS_SHARE` of it): the statistic's ``epsilon``
stays its total.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.private_bounds import plan_bounds, bounds_grid
>>> plan = plan_bounds("x", "x_mean", (None, None), epsilon=0.5, neighbours="substitute")
>>> hist = np.zeros((1, bounds_grid().bins), dtype=np.int64)
>>> hist[0, 60] = 1000  # every value in one bin
>>> plan.draw(hist, np.random.default_rng(0)) == [tuple(bounds_grid().edges[60:62])]
True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.constraints import (
    AUTO,
    AUTO_BOUNDS_BETA,
    AUTO_BOUNDS_EXPONENTS,
)
from dpframe.core.executor import MechanismPlan, summary_row
from dpframe.core.units import RECORD, PrivacyUnit
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.laplace import LaplaceCalibration, calibrate_laplace
from dpframe.mechanisms.quantile import Grid, grid_from_edges, quantile_sides

__all__ = [
    "BoundsPlan",
    "FoundPlan",
    "PendingPlan",
    "bounds_grid",
    "histogram",
    "plan_bounds",
]

#: The mechanism's name in the ledger and the summary.
MECHANISM = "bounds_histogram"


def bounds_grid(exponents: tuple[int, int] = AUTO_BOUNDS_EXPONENTS) -> Grid:
    """The bin edges of a bounds pass: 0 and ``+-2**k`` for ``k`` in ``exponents``.

    Examples
    --------
    >>> g = bounds_grid((0, 2))
    >>> g.edges.tolist()
    [-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0]
    """
    lo, hi = exponents
    powers = [2.0**k for k in range(lo, hi + 1)]
    return grid_from_edges([-p for p in reversed(powers)] + [0.0] + powers)


@dataclass(frozen=True)
class BoundsPlan:
    """The first pass of one column (a :class:`~dpframe.core.executor.MechanismPlan`).

    ``check`` and ``draw`` take the column's histogram on :attr:`grid` pooled over every
    group, an int64 array of shape ``(1, bins)``; ``draw`` returns ``[(lower, upper)]``:
    the outer edges of the bins whose noisy counts pass :attr:`threshold` (a side given
    as a number is kept), widened to the next edge if they meet.
    """

    column: str
    statistic: str
    #: the given bounds: a number, or None where the pass finds it
    given: tuple[float | None, float | None]
    epsilon: float
    grid: Grid
    noise: LaplaceCalibration
    rows: int
    sides: int
    unit: PrivacyUnit = RECORD
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def threshold(self) -> float:
        """The noisy count a bin must exceed to count as holding data."""
        return self.noise.scale * math.log(self.grid.bins / AUTO_BOUNDS_BETA)

    @property
    def charges(self) -> tuple[Charge, ...]:
        return (
            Charge(
                epsilon=self.epsilon,
                unit=self.unit.person,
                mechanism=MECHANISM,
                columns=(f"{self.statistic}:bounds:{self.column}",),
                scale=self.noise.scale,
                composition="sequential",
                details={
                    **self.details,
                    **self.noise.details(),
                    "pass": "bounds",
                    "statistic_name": self.statistic,
                    "source_column": self.column,
                    "edges": f"0 and +-2**k, k in {list(AUTO_BOUNDS_EXPONENTS)}",
                    "bins": self.grid.bins,
                    "pooled": True,
                    "rows": self.rows,
                    "sides": self.sides,
                    "threshold": self.threshold,
                    "sensitivity": float(self.rows * self.sides),
                    **self.unit.bounds(),
                },
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        sides = [s for s, g in zip(("lower", "upper"), self.given, strict=True) if g is None]
        return [
            summary_row(
                f"{self.statistic}:bounds",
                MECHANISM,
                self.epsilon,
                sensitivity=float(self.rows * self.sides),
                scale=self.noise.scale,
                error95=self.noise.error(0.95),
                note=(
                    f"first pass: finds the {' and '.join(sides)} bound of {self.column} "
                    f"privately (noisy counts of the column over all groups on bins 0, "
                    f"+-2**k; the outer bins above {self.threshold:,.0f} rows)"
                ),
            )
        ]

    def check(self, exact: np.ndarray) -> None:
        hist = np.asarray(exact)
        if hist.shape != (1, self.grid.bins) or hist.dtype != np.int64 or (hist < 0).any():
            raise InvalidDataError(
                f"{self.statistic}: the bounds pass needs one row of {self.grid.bins} "
                "non-negative int64 bin counts (nothing was charged)"
            )

    def draw(self, exact: np.ndarray, rng: np.random.Generator) -> list[tuple[float, float]]:
        noisy = self.noise.release(np.asarray(exact[0], dtype=np.float64), rng)
        return [self.bounds_of(noisy)]

    def bounds_of(self, noisy: np.ndarray) -> tuple[float, float]:
        """The bounds the noisy bin counts give (post-processing, no data)."""
        edges = self.grid.edges
        passed = np.flatnonzero(noisy > self.threshold)
        first, last = (passed[0], passed[-1]) if passed.size else (np.argmax(noisy),) * 2
        lo = float(edges[first]) if self.given[0] is None else float(self.given[0])
        hi = float(edges[last + 1]) if self.given[1] is None else float(self.given[1])
        if not lo < hi:  # a given side beyond the found one: the next edge past it
            if self.given[1] is None:
                above = edges[edges > lo]
                hi = float(above[0]) if above.size else lo + max(1.0, abs(lo))
            else:
                below = edges[edges < hi]
                lo = float(below[-1]) if below.size else hi - max(1.0, abs(hi))
        return lo, hi


def plan_bounds(
    column: str,
    statistic: str,
    given: tuple[float | None, float | None],
    *,
    epsilon: float,
    neighbours: str,
    unit: PrivacyUnit = RECORD,
    details: dict[str, Any] | None = None,
) -> BoundsPlan:
    """The first pass finding ``column``'s bounds where ``given`` has ``None``.

    Examples
    --------
    >>> p = plan_bounds("x", "s", (0.0, None), epsilon=0.2, neighbours="add_remove")
    >>> p.charges[0].epsilon, p.charges[0].details["sensitivity"]
    (0.2, 1.0)
    """
    if given[0] is not None and given[1] is not None:
        raise InvalidParameterError(f"{statistic}: no bound of {column!r} is {AUTO!r}")
    rows, sides = quantile_sides(unit, neighbours, pooled=True)
    noise = calibrate_laplace(epsilon, float(rows * sides), 1.0, values_on_grid=True)
    grid = bounds_grid()
    return BoundsPlan(
        column, statistic, given, epsilon, grid, noise, rows, sides, unit, dict(details or {})
    )


@dataclass(frozen=True)
class PendingPlan:
    """A statistic whose bounds a first pass finds: what it will cost (its charges, from
    its plan made with stand-in bounds), shown before anything is spent; its scale and
    error are not known until the bounds are. Never drawn: the release plans the
    statistic again with the bounds found."""

    inner: MechanismPlan
    note: str

    @property
    def charges(self) -> tuple[Charge, ...]:
        out = []
        for c in self.inner.charges:
            details = {**c.details, "lower": AUTO, "upper": AUTO, "sensitivity": None}
            out.append(dataclasses.replace(c, scale=None, details=details))
        return tuple(out)

    def summary(self) -> list[dict[str, Any]]:
        rows = []
        for row in self.inner.summary():
            note = f"{row['note']}; {self.note}" if row.get("note") else self.note
            rows.append({**row, "scale": None, "sensitivity": None, "error95": None, "note": note})
        return rows

    def check(self, exact: Any) -> None:
        raise InvalidParameterError(
            "internal error: a statistic is checked before its bounds pass was drawn"
        )

    def draw(self, exact: Any, rng: np.random.Generator) -> Any:
        raise InvalidParameterError(
            "internal error: a statistic is drawn before its bounds pass was drawn"
        )


def pending(inner: MechanismPlan, columns: Sequence[str]) -> PendingPlan:
    """``inner`` (planned with stand-in bounds) as a plan whose bounds are pending."""
    return PendingPlan(
        inner,
        f"bounds of {', '.join(columns)} found by the first pass: scale and error depend on them",
    )


@dataclass(frozen=True)
class FoundPlan:
    """A release's plan made with the bounds its first passes found: ``inner``, whose
    ledger entries also record ``found`` (by column) and whose summary says them."""

    inner: MechanismPlan
    found: dict[str, tuple[float, float]]

    @property
    def charges(self) -> tuple[Charge, ...]:
        found = {c: list(b) for c, b in self.found.items()}
        return tuple(
            dataclasses.replace(c, details={**c.details, "bounds": AUTO, "bounds_found": found})
            for c in self.inner.charges
        )

    def summary(self) -> list[dict[str, Any]]:
        said = "; ".join(
            f"bounds of {c} found by the first pass: [{lo:g}, {hi:g}]"
            for c, (lo, hi) in self.found.items()
        )
        return [
            {**row, "note": f"{row['note']}; {said}" if row.get("note") else said}
            for row in self.inner.summary()
        ]

    def check(self, exact: Any) -> None:
        self.inner.check(exact)

    def draw(self, exact: Any, rng: np.random.Generator) -> Any:
        return self.inner.draw(exact, rng)


def histogram(total: int, above: Sequence[int]) -> np.ndarray:
    """The pass's histogram, shape ``(1, bins)``, from the records (``total``) and the
    records at or above each inner edge (``above``): the kernel's binning rule (a value
    past an outer edge falls in the outer bin).

    Examples
    --------
    >>> histogram(5, [4, 1]).tolist()
    [[1, 3, 1]]
    """
    cumulative = np.array([total, *above, 0], dtype=np.int64)
    return (cumulative[:-1] - cumulative[1:]).reshape(1, -1)
