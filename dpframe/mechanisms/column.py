"""A column of statistics released in one charge: how its rows compose, per-row calibration.

``.dp.laplace`` and ``.dp.truncated_laplace`` release a column of exact statistics. The
caller states how its rows compose (``docs/privacy.md``, "Composition inside a column"):

* ``"parallel"`` -- one statistic per *disjoint* group of records. One record changes one
  row, or two under substitute neighbours unless group membership is public (it may
  leave one group and join another; :func:`dpframe.core.neighbours.groups_changed`);
* ``"sequential"`` -- all rows describe the same records: one record changes every row.

Each row gets ``epsilon / rows_touched``, so the losses of the rows one record can
change add up to at most ``epsilon``; a bounded mechanism whose true loss is larger
(``calibration="paper"``) is charged that loss (:func:`dpframe.core.budget.charge_for`).
Per-row parameters (bounds, sensitivities from public sizes) give one calibration per
distinct combination.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.column import plan_column
>>> plan = plan_column(mechanism="laplace", epsilon=1.0, composition="parallel",
...                    public_groups=False, neighbours="substitute", n_rows=3,
...                    column="mean_age", sensitivity=0.1)
>>> plan.charges[0].epsilon, plan.rows_touched
(1.0, 2)
>>> plan.draw(np.array([41.2, 38.9, 45.0]), np.random.default_rng(0)).shape
(3,)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.budget import charge_for
from dpframe.core.constraints import COLUMN_MECHANISMS as MECHANISMS
from dpframe.core.constraints import (
    check,
    check_epsilon,
    check_int,
    check_positive,
    check_privacy_amount,
)
from dpframe.core.executor import summary_row
from dpframe.core.neighbours import groups_changed
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.bounded import calibrate_bounded
from dpframe.mechanisms.laplace import calibrate_laplace

__all__ = ["MECHANISMS", "ColumnPlan", "GaussianColumnPlan", "plan_column", "plan_gaussian_column"]

#: ``"laplace"`` (unbounded), or a bounded mechanism: ``"truncated"`` or ``"bit"``.
_NAMES = {"laplace": "laplace", "truncated": "truncated_laplace", "bit": "bit_laplace"}


@dataclass(frozen=True)
class ColumnPlan:
    """The release of one column of statistics (the kernel plan)."""

    column: str
    mechanism: str
    epsilon: float  # asked for
    composition: str
    rows_touched: int
    public_groups: bool
    calibrations: tuple[tuple[Any, np.ndarray], ...]  # (calibration, its rows)
    per_row_parameters: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def privacy_loss(self) -> float:
        """The worst row's loss times the rows one record can change."""
        return max(c.privacy_loss for c, _ in self.calibrations) * self.rows_touched

    @property
    def epsilon_charged(self) -> float:
        return charge_for(self.privacy_loss, self.epsilon)

    @property
    def scale(self) -> float:
        return max(c.scale for c, _ in self.calibrations)

    @property
    def charges(self) -> tuple[Charge, ...]:
        cals = [c for c, _ in self.calibrations]
        n_rows = int(sum(len(r) for _, r in self.calibrations))
        return (
            Charge(
                epsilon=self.epsilon_charged,
                mechanism=self.mechanism,
                columns=(self.column,),
                scale=self.scale,
                composition=self.composition,
                details={
                    **cals[0].details(),
                    "privacy_loss": max(c.privacy_loss for c in cals),
                    "scale_min": min(c.scale for c in cals),
                    "per_row_parameters": list(self.per_row_parameters),
                    "rows": n_rows,
                    "rows_touched": self.rows_touched,
                    "epsilon_requested": self.epsilon,
                    "public_groups": self.public_groups,
                    **self.details,
                },
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        cals = [c for c, _ in self.calibrations]
        return [
            summary_row(
                self.column,
                self.mechanism,
                self.epsilon_charged,
                sensitivity=max(c.sensitivity for c in cals),
                scale=self.scale,
                error95=max(c.error(0.95) for c in cals),
                note=f"{self.composition}, {self.rows_touched} row(s) per record",
            )
        ]

    def check(self, exact: Any) -> None:
        """Refuse values that cannot be released (NaN, infinities, too large for the grid)."""
        values = np.asarray(exact, dtype=np.float64)
        n_rows = sum(len(r) for _, r in self.calibrations)
        if values.shape != (n_rows,):
            raise InvalidDataError(f"column {self.column!r}: expected {n_rows} values")
        for cal, rows in self.calibrations:
            cal.check(values[rows])

    def draw(self, exact: Any, rng: np.random.Generator) -> np.ndarray:
        values = np.asarray(exact, dtype=np.float64)
        noisy = np.empty(values.size)
        for cal, rows in self.calibrations:
            noisy[rows] = cal.release(values[rows], rng)
        return noisy


def _calibrate(
    mechanism: str,
    epsilon_row: float,
    sensitivity: float,
    lower: float | None,
    upper: float | None,
    calibration: str,
    granularity: float | None,
) -> Any:
    if mechanism == "laplace":
        return calibrate_laplace(epsilon_row, sensitivity, granularity)
    return calibrate_bounded(
        epsilon_row,
        sensitivity,
        lower,
        upper,
        method=mechanism,
        calibration=calibration,
        granularity=granularity,
    )


def plan_column(
    *,
    mechanism: str,
    epsilon: float,
    composition: str,
    public_groups: bool,
    neighbours: str,
    n_rows: int,
    column: str,
    sensitivity: float | None = None,
    lower: float | None = None,
    upper: float | None = None,
    calibration: str = "exact",
    granularity: float | None = None,
    row_params: Mapping[str, np.ndarray] | None = None,
) -> ColumnPlan:
    """Plan the release of a column of ``n_rows`` statistics (no values read).

    ``row_params`` maps ``"sensitivity"``, ``"lower"`` or ``"upper"`` to one *public*
    value per row; the others are the fixed arguments.
    """
    check("column_mechanism", mechanism, name="mechanism")
    eps = check_epsilon(epsilon)
    check("composition", composition)
    check("neighbours", neighbours)
    check("calibration", calibration)
    if not isinstance(public_groups, bool):
        raise InvalidParameterError(f"public_groups must be True or False, got {public_groups!r}")
    n_rows = check_int("n_rows", n_rows, 1, "a column to release has at least one row")
    touched = n_rows if composition == "sequential" else groups_changed(neighbours, public_groups)
    eps_row = eps / touched
    params = dict(row_params or {})
    unknown = sorted(set(params) - {"sensitivity", "lower", "upper"})
    if unknown:
        raise InvalidParameterError(f"row_params: unknown per-row parameters {unknown}")
    fixed = {"sensitivity": sensitivity, "lower": lower, "upper": upper}
    if "sensitivity" not in params:
        fixed["sensitivity"] = check_positive("sensitivity", sensitivity)
    if not params:
        cal = _calibrate(
            mechanism, eps_row, fixed["sensitivity"], lower, upper, calibration, granularity
        )
        cals = ((cal, np.arange(n_rows)),)
    else:
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
        for k, a in arrays.items():
            if a.shape != (n_rows,) or np.isnan(a).any():
                raise InvalidDataError(
                    f"per-row parameter {k!r} must hold one known value per row (no null or NaN)"
                )
        table = np.stack(list(arrays.values()), axis=1)
        unique, inverse = np.unique(table, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        out = []
        for i, row in enumerate(unique):
            p = {**fixed, **dict(zip(arrays, map(float, row), strict=True))}
            cal = _calibrate(
                mechanism,
                eps_row,
                p["sensitivity"],
                p["lower"],
                p["upper"],
                calibration,
                granularity,
            )
            out.append((cal, np.flatnonzero(inverse == i)))
        cals = tuple(out)
    return ColumnPlan(
        column=column,
        mechanism=_NAMES[mechanism],
        epsilon=eps,
        composition=composition,
        rows_touched=touched,
        public_groups=public_groups,
        calibrations=cals,
        per_row_parameters=tuple(params),
    )


@dataclass(frozen=True)
class GaussianColumnPlan:
    """A column of statistics released with discrete Gaussian noise (rho-zCDP).

    One record changes ``rows_touched`` rows by at most ``sensitivity`` each, so the
    column's l2 sensitivity is ``sensitivity * sqrt(rows_touched)``; every row gets the
    noise that sensitivity and ``rho`` call for (:func:`calibrate_gaussian`).
    """

    column: str
    composition: str
    rows_touched: int
    public_groups: bool
    sensitivity: float  # of one row to one record
    n_rows: int
    calibration: Any  # GaussianCalibration
    mechanism: str = "gaussian"
    epsilon: float = 0.0

    @property
    def rho(self) -> float:
        return float(self.calibration.rho)

    @property
    def scale(self) -> float:
        return self.calibration.scale

    @property
    def l2_sensitivity(self) -> float:
        return self.sensitivity * float(np.sqrt(self.rows_touched))

    @property
    def charges(self) -> tuple[Charge, ...]:
        return (
            Charge(
                epsilon=0.0,
                rho=self.rho,
                mechanism="gaussian",
                columns=(self.column,),
                scale=self.scale,
                composition=self.composition,
                details={
                    **self.calibration.details(),
                    "norm": "l2",
                    "sensitivity_row": self.sensitivity,
                    "rows": self.n_rows,
                    "rows_touched": self.rows_touched,
                    "public_groups": self.public_groups,
                },
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        return [
            summary_row(
                self.column,
                "gaussian",
                0.0,
                sensitivity=self.l2_sensitivity,
                scale=self.scale,
                error95=self.calibration.error(0.95),
                note=f"{self.composition}, {self.rows_touched} row(s) per record, l2",
                rho=self.rho,
            )
        ]

    def check(self, exact: Any) -> None:
        """Refuse values that cannot be released (NaN, infinities, too large for the grid)."""
        values = np.asarray(exact, dtype=np.float64)
        if values.shape != (self.n_rows,):
            raise InvalidDataError(f"column {self.column!r}: expected {self.n_rows} values")
        self.calibration.check(values)

    def draw(self, exact: Any, rng: np.random.Generator) -> np.ndarray:
        return self.calibration.release(np.asarray(exact, dtype=np.float64), rng)


def plan_gaussian_column(
    *,
    composition: str,
    public_groups: bool,
    neighbours: str,
    n_rows: int,
    column: str,
    sensitivity: float,
    rho: float | None = None,
    sigma: float | None = None,
    granularity: float | None = None,
) -> GaussianColumnPlan:
    """Plan a discrete-Gaussian release of a column of ``n_rows`` statistics.

    Examples
    --------
    >>> plan = plan_gaussian_column(composition="parallel", public_groups=True,
    ...     neighbours="substitute", n_rows=3, column="x", sensitivity=1.0, rho=0.5)
    >>> plan.rows_touched, plan.charges[0].rho <= 0.5
    (1, True)
    """
    from dpframe.mechanisms.gaussian import calibrate_gaussian

    check("composition", composition)
    check("neighbours", neighbours)
    if not isinstance(public_groups, bool):
        raise InvalidParameterError(f"public_groups must be True or False, got {public_groups!r}")
    n_rows = check_int("n_rows", n_rows, 1, "a column to release has at least one row")
    delta = check_positive("sensitivity", sensitivity)
    touched = n_rows if composition == "sequential" else groups_changed(neighbours, public_groups)
    if (rho is None) == (sigma is None):
        raise InvalidParameterError(
            "rho, sigma: Gaussian noise needs exactly one of rho=... (its zCDP cost) or "
            "sigma=... (its standard deviation)"
        )
    cal = calibrate_gaussian(
        delta * float(np.sqrt(touched)),
        rho=None if rho is None else check_privacy_amount("rho", rho),
        sigma=None if sigma is None else check_positive("sigma", sigma),
        granularity=granularity,
        changed=touched,
    )
    return GaussianColumnPlan(
        column=column,
        composition=composition,
        rows_touched=touched,
        public_groups=public_groups,
        sensitivity=delta,
        n_rows=n_rows,
        calibration=cal,
    )
