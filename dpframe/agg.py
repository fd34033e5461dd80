"""Statistics of a grouped release: what each computes exactly, and how it is noised.

Used as ``dpframe.group_by(frame, keys, margins=...).agg(agg.count(...), agg.mean(...))``.
The statistics of one release compose sequentially (their epsilons add up); each is
released over disjoint groups (parallel composition across groups).

Group sizes are private unless the margins declare them (``group_by(..., sizes="n")``):

* **private sizes** (default): a mean is released as a noisy sum over a noisy count
  (epsilon split evenly between them; the ratio is clipped to the bounds), a variance
  from noisy sums of ``x``, ``x**2`` and a noisy count (epsilon split in three);
* **public sizes**: a mean, proportion or variance is released directly with the
  bounded mechanism (truncated or BIT, :mod:`dpframe.mechanisms.bounded`), with the
  sensitivity of each group's own size and the output bounds of Liu (2019), Table 1.
  A group whose public size is 0 (or 1, for a variance) is released as null.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe.core import sensitivity as sens
from dpframe.core.constraints import CALIBRATIONS, METHODS, check_choice, check_epsilon, check_real
from dpframe.errors import InvalidDataError, InvalidParameterError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Plan", "Statistic", "count", "cov", "mean", "proportion", "sum", "var"]


@dataclass
class Plan:
    """How one statistic will be released: its cost and noise, known before any data."""

    statistic: Statistic
    mechanism: str
    epsilon: float  # charged
    sensitivity: float  # the largest over the groups
    scale: float  # the largest over the groups
    error95: float  # the largest over the groups
    details: dict[str, Any]
    check: Callable[[pl.DataFrame], None]
    release: Callable[[pl.DataFrame, np.random.Generator], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Statistic:
    """One noisy per-group statistic (build it with the functions of this module)."""

    kind: str  # count, sum, mean, proportion, var
    name: str
    epsilon: float
    column: str | None = None
    lower: float | None = None
    upper: float | None = None
    method: str = "truncated"
    calibration: str = "exact"
    options: dict[str, Any] = field(default_factory=dict)

    def part(self, what: str) -> str:
        """Column name of one exact aggregate of this statistic, e.g. ``"age_mean:sum"``."""
        return f"{self.name}:{what}"

    def value(self) -> pl.Expr:
        """The record-level value, cast and clipped to the bounds."""
        x = pl.col(self.column).cast(pl.Float64)
        return x if self.kind == "proportion" else x.clip(self.lower, self.upper)

    def value_y(self) -> pl.Expr:
        """The second column of a covariance, cast and clipped to its bounds."""
        o = self.options
        return pl.col(o["y"]).cast(pl.Float64).clip(o["lower_y"], o["upper_y"])

    def columns(self) -> list[str]:
        """The source columns."""
        if self.column is None:
            return []
        return [self.column, self.options["y"]] if self.kind == "cov" else [self.column]

    def outputs(self) -> list[str]:
        """The released columns: one, or four for a covariance (two variances, cov, corr)."""
        if self.kind != "cov":
            return [self.name]
        x, y = self.columns()
        n = self.name
        return [f"{n}_var_{x}", f"{n}_var_{y}", f"{n}_cov", f"{n}_corr"]

    def exact_exprs(self, public_sizes: bool) -> list[pl.Expr]:
        """The exact aggregates the statistic needs (computed by polars)."""
        n = pl.len().cast(pl.Float64).alias(self.part("n"))
        if self.kind == "count":
            return [n]
        x = self.value()
        if self.kind == "sum":
            return [x.sum().alias(self.part("sum"))]
        if self.kind == "cov":
            y = self.value_y()
            if public_sizes:
                return [
                    x.var(ddof=1).alias(self.part("var_x")),
                    y.var(ddof=1).alias(self.part("var_y")),
                    pl.cov(x, y, ddof=1).alias(self.part("cov")),
                ]
            return [
                x.sum().alias(self.part("sx")),
                y.sum().alias(self.part("sy")),
                (x * x).sum().alias(self.part("sxx")),
                (y * y).sum().alias(self.part("syy")),
                (x * y).sum().alias(self.part("sxy")),
                n,
            ]
        if public_sizes:
            if self.kind == "var":
                return [x.var(ddof=1).alias(self.part("var"))]
            return [x.mean().alias(self.part("mean"))]
        parts = [x.sum().alias(self.part("sum")), n]
        if self.kind == "var":
            parts.append((x * x).sum().alias(self.part("sumsq")))
        return parts

    def check_schema(self, schema: pl.Schema) -> None:
        """Refuse missing or mistyped source columns (before anything runs)."""
        for column in self.columns():
            if column not in schema:
                raise InvalidParameterError(
                    f"column {column!r} of statistic {self.name!r} is not in the frame"
                )
            dtype = schema[column]
            if self.kind == "proportion":
                if dtype != pl.Boolean:
                    raise InvalidDataError(
                        f"column {column!r} has dtype {dtype}; a proportion needs a Boolean "
                        f"column (e.g. pl.col({column!r}) == value)"
                    )
            elif not dtype.is_numeric():
                raise InvalidDataError(
                    f"column {column!r} has dtype {dtype}; a {self.kind} needs a numeric "
                    f"column (cast it with pl.col({column!r}).cast(pl.Float64))"
                )

    def bad_values(self, schema: pl.Schema) -> list[pl.Expr]:
        """Counts of null / NaN / infinite values in each source column."""
        out = []
        for column in self.columns():
            col = pl.col(column)
            bad = col.is_null()
            if schema[column].is_float():
                bad = bad | col.is_nan() | col.is_infinite()
            out.append(bad.sum().alias(f"__bad__{column}"))
        return out

    def plan(self, neighbours: str, sizes: np.ndarray | None) -> Plan:
        """Cost and noise of this statistic; ``sizes`` are the public group sizes if any."""
        if self.kind in ("count", "sum"):
            return _plan_laplace_part(self, neighbours)
        if self.kind == "cov":
            return (
                _plan_cov_private(self, neighbours)
                if sizes is None
                else _plan_cov_public(self, sizes)
            )
        if sizes is None:
            return _plan_private_sizes(self, neighbours)
        return _plan_public_sizes(self, sizes)


# -- plans ------------------------------------------------------------------------------


def _laplace(epsilon: float, sensitivity: float, counts: bool = False) -> Any:
    from dpframe.mechanisms.laplace import calibrate_laplace

    if counts:  # counts are integers: a grid of 1, no rounding, integer noise
        return calibrate_laplace(epsilon, sensitivity, 1.0, values_on_grid=True)
    return calibrate_laplace(epsilon, sensitivity)


def _sum_sensitivity(stat: Statistic, neighbours: str, squared: bool = False) -> float:
    lo, hi = stat.lower, stat.upper
    if squared:
        lo, hi = (0.0 if lo < 0 < hi else min(lo * lo, hi * hi)), max(lo * lo, hi * hi)
    return sens.grouped_sum(lo, hi, neighbours)


def _plan_laplace_part(stat: Statistic, neighbours: str) -> Plan:
    is_count = stat.kind == "count"
    delta = sens.histogram_counts(neighbours) if is_count else _sum_sensitivity(stat, neighbours)
    cal = _laplace(stat.epsilon, delta, counts=is_count)
    column = stat.part("n" if is_count else "sum")
    return Plan(
        statistic=stat,
        mechanism="laplace",
        epsilon=stat.epsilon,
        sensitivity=delta,
        scale=cal.scale,
        error95=cal.error(0.95),
        details=cal.details(),
        check=lambda exact: cal.check(exact[column].to_numpy()),
        release=lambda exact, rng: {stat.name: cal.release(exact[column].to_numpy(), rng)},
    )


def _plan_private_sizes(stat: Statistic, neighbours: str) -> Plan:
    """Mean, proportion or variance from noisy sums and a noisy count (post-processing)."""
    import numpy as np

    lo, hi = (0.0, 1.0) if stat.kind == "proportion" else (stat.lower, stat.upper)
    parts = ["sum", "n"] + (["sumsq"] if stat.kind == "var" else [])
    share = stat.epsilon / len(parts)
    cals = {
        "sum": _laplace(share, sens.grouped_sum(lo, hi, neighbours)),
        "n": _laplace(share, sens.histogram_counts(neighbours), counts=True),
    }
    if stat.kind == "var":
        cals["sumsq"] = _laplace(share, _sum_sensitivity(stat, neighbours, squared=True))

    def check(exact: pl.DataFrame) -> None:
        for p, cal in cals.items():
            cal.check(exact[stat.part(p)].to_numpy())

    def release(exact: pl.DataFrame, rng: np.random.Generator) -> np.ndarray:
        noisy = {p: cal.release(exact[stat.part(p)].to_numpy(), rng) for p, cal in cals.items()}
        if stat.kind != "var":
            n = np.maximum(noisy["n"], 1.0)
            return {stat.name: np.clip(noisy["sum"] / n, lo, hi)}
        return {stat.name: _moment_variance(noisy["sum"], noisy["sumsq"], noisy["n"], hi - lo)}

    name = "laplace_ratio" if stat.kind != "var" else "laplace_moments"
    return Plan(
        statistic=stat,
        mechanism=name,
        epsilon=stat.epsilon,
        sensitivity=max(c.sensitivity for c in cals.values()),
        scale=max(c.scale for c in cals.values()),
        error95=math.nan,  # a ratio's error depends on the group's size
        details={
            "sizes": "private",
            "parts": {p: {**c.details(), "epsilon": share} for p, c in cals.items()},
        },
        check=check,
        release=release,
    )


def _plan_public_sizes(stat: Statistic, sizes: np.ndarray) -> Plan:
    """Bounded mechanism per group, with the sensitivity of the group's public size."""
    import numpy as np

    from dpframe.mechanisms.bounded import calibrate_bounded

    lo, hi = (0.0, 1.0) if stat.kind == "proportion" else (stat.lower, stat.upper)
    r = hi - lo
    minimum = 2 if stat.kind == "var" else 1
    cals: dict[int, Any] = {}
    for n in np.unique(sizes):
        n = int(n)
        if n < minimum:
            continue
        if stat.kind == "var":
            delta = sens.variance(lo, hi, n, "substitute")
            bounds = (0.0, n * r * r / (4 * (n - 1)))
        else:
            delta = sens.mean(lo, hi, n, "substitute")
            bounds = (lo, hi)
        cals[n] = calibrate_bounded(
            stat.epsilon,
            delta,
            *bounds,
            method=stat.method,
            calibration=stat.calibration,
        )
    if not cals:
        raise InvalidParameterError(
            f"statistic {stat.name!r}: every group's public size is below {minimum}; "
            "there is nothing to release"
        )
    column = stat.part("var" if stat.kind == "var" else "mean")

    def check(exact: pl.DataFrame) -> None:
        values = exact[column].to_numpy()
        for n, cal in cals.items():
            cal.check(values[sizes == n])

    def release(exact: pl.DataFrame, rng: np.random.Generator) -> np.ndarray:
        values = exact[column].to_numpy()
        out = np.full(values.shape, np.nan)
        for n, cal in cals.items():
            rows = sizes == n
            out[rows] = cal.release(values[rows], rng)
        return {stat.name: out}

    charged = max(c.epsilon_charged for c in cals.values())
    mech = "truncated_laplace" if stat.method == "truncated" else "bit_laplace"
    return Plan(
        statistic=stat,
        mechanism=mech,
        epsilon=charged,
        sensitivity=max(c.sensitivity for c in cals.values()),
        scale=max(c.scale for c in cals.values()),
        error95=max(c.error(0.95) for c in cals.values()),
        details={
            "sizes": "public",
            "method": stat.method,
            "calibration": stat.calibration,
            "epsilon_requested": stat.epsilon,
            "privacy_loss": max(c.privacy_loss for c in cals.values()),
            "scale_min": min(c.scale for c in cals.values()),
            "distinct_sizes": len(cals),
        },
        check=check,
        release=release,
    )


def _moment_variance(s1: np.ndarray, s2: np.ndarray, n: np.ndarray, r: float) -> np.ndarray:
    """Variance from noisy sums of x and x**2 and a noisy count, clipped to Table 1's bounds."""
    import numpy as np

    n = np.maximum(n, 2.0)
    var = (s2 - s1**2 / n) / (n - 1)
    return np.clip(var, 0.0, n * r * r / (4 * (n - 1)))


def _product_bounds(lx: float, ux: float, ly: float, uy: float) -> tuple[float, float]:
    corners = (lx * ly, lx * uy, ux * ly, ux * uy)
    return min(corners), max(corners)


def _square_bounds(lo: float, hi: float) -> tuple[float, float]:
    return (0.0 if lo < 0 < hi else min(lo * lo, hi * hi)), max(lo * lo, hi * hi)


def _covariance_outputs(
    stat: Statistic, var_x: np.ndarray, var_y: np.ndarray, cov: np.ndarray
) -> dict[str, np.ndarray]:
    """The four released columns; the correlation is post-processing, clipped to [-1, 1]."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.clip(cov / np.sqrt(var_x * var_y), -1.0, 1.0)
    corr = np.where(var_x * var_y > 0, corr, np.nan)
    return dict(zip(stat.outputs(), (var_x, var_y, cov, corr), strict=True))


def _plan_cov_private(stat: Statistic, neighbours: str) -> Plan:
    """Covariance from noisy sums and a noisy count (epsilon split in six)."""
    import numpy as np

    o = stat.options
    lx, ux, ly, uy = stat.lower, stat.upper, o["lower_y"], o["upper_y"]
    share = stat.epsilon / 6
    bounds = {
        "sx": (lx, ux),
        "sy": (ly, uy),
        "sxx": _square_bounds(lx, ux),
        "syy": _square_bounds(ly, uy),
        "sxy": _product_bounds(lx, ux, ly, uy),
    }
    cals = {p: _laplace(share, sens.grouped_sum(*b, neighbours)) for p, b in bounds.items()}
    cals["n"] = _laplace(share, sens.histogram_counts(neighbours), counts=True)

    def check(exact: pl.DataFrame) -> None:
        for p, cal in cals.items():
            cal.check(exact[stat.part(p)].to_numpy())

    def release(exact: pl.DataFrame, rng: np.random.Generator) -> dict[str, np.ndarray]:
        v = {p: cal.release(exact[stat.part(p)].to_numpy(), rng) for p, cal in cals.items()}
        var_x = _moment_variance(v["sx"], v["sxx"], v["n"], ux - lx)
        var_y = _moment_variance(v["sy"], v["syy"], v["n"], uy - ly)
        n = np.maximum(v["n"], 2.0)
        limit = np.sqrt(var_x * var_y)
        cov = np.clip((v["sxy"] - v["sx"] * v["sy"] / n) / (n - 1), -limit, limit)
        return _covariance_outputs(stat, var_x, var_y, cov)

    return Plan(
        statistic=stat,
        mechanism="laplace_moments",
        epsilon=stat.epsilon,
        sensitivity=max(c.sensitivity for c in cals.values()),
        scale=max(c.scale for c in cals.values()),
        error95=math.nan,
        details={
            "sizes": "private",
            "parts": {p: {**c.details(), "epsilon": share} for p, c in cals.items()},
        },
        check=check,
        release=release,
    )


def _plan_cov_public(stat: Statistic, sizes: np.ndarray) -> Plan:
    """Liu (2019), Simulation study 1, per group: variances, then the covariance inside
    ``[-sqrt(S*xx S*yy), sqrt(S*xx S*yy)]`` from the *sanitized* variances. Epsilon split
    in three; every part by the bounded mechanism with the group's public size."""
    import numpy as np

    from dpframe.mechanisms.bounded import calibrate_bounded

    o = stat.options
    lx, ux, ly, uy = stat.lower, stat.upper, o["lower_y"], o["upper_y"]
    share = stat.epsilon / 3
    kw = {"method": stat.method, "calibration": stat.calibration}
    var_cals: dict[int, tuple[Any, Any]] = {}
    for n in (int(v) for v in np.unique(sizes)):
        if n >= 2:
            var_cals[n] = (
                calibrate_bounded(
                    share, sens.variance(lx, ux, n), 0.0, n * (ux - lx) ** 2 / (4 * (n - 1)), **kw
                ),
                calibrate_bounded(
                    share, sens.variance(ly, uy, n), 0.0, n * (uy - ly) ** 2 / (4 * (n - 1)), **kw
                ),
            )
    if not var_cals:
        raise InvalidParameterError(
            f"statistic {stat.name!r}: every group's public size is below 2; nothing to release"
        )
    columns = [stat.part(p) for p in ("var_x", "var_y", "cov")]

    def check(exact: pl.DataFrame) -> None:
        for n, (cx, cy) in var_cals.items():
            rows = sizes == n
            cx.check(exact[columns[0]].to_numpy()[rows])
            cy.check(exact[columns[1]].to_numpy()[rows])
        if not np.isfinite(exact[columns[2]].to_numpy()[sizes >= 2]).all():
            raise InvalidDataError(f"statistic {stat.name!r}: a covariance is not finite")

    def release(exact: pl.DataFrame, rng: np.random.Generator) -> dict[str, np.ndarray]:
        vx, vy, c = (exact[col].to_numpy() for col in columns)
        out = [np.full(vx.shape, np.nan) for _ in range(3)]
        for n, (cx, cy) in var_cals.items():
            rows = sizes == n
            out[0][rows] = cx.release(vx[rows], rng)
            out[1][rows] = cy.release(vy[rows], rng)
        for i in np.flatnonzero(sizes >= 2):
            limit = math.sqrt(out[0][i] * out[1][i])
            if limit == 0.0:  # a sanitized variance of 0: the covariance must be 0
                out[2][i] = 0.0
                continue
            cal = calibrate_bounded(
                share, sens.covariance(lx, ux, ly, uy, int(sizes[i])), -limit, limit, **kw
            )
            out[2][i] = cal.release(np.array([c[i]]), rng)[0]
        return _covariance_outputs(stat, *out)

    # exact calibration (paper + truncated is refused by cov()): each part costs its share
    return Plan(
        statistic=stat,
        mechanism="truncated_laplace" if stat.method == "truncated" else "bit_laplace",
        epsilon=stat.epsilon,
        sensitivity=max(cx.sensitivity for cx, _ in var_cals.values()),
        scale=max(max(cx.scale, cy.scale) for cx, cy in var_cals.values()),
        error95=math.nan,
        details={
            "sizes": "public",
            "method": stat.method,
            "calibration": stat.calibration,
            "split": "variance x, variance y, covariance: epsilon / 3 each",
        },
        check=check,
        release=release,
    )


# -- constructors -----------------------------------------------------------------------


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(f"name must be a non-empty string, got {name!r}")
    return name


def _check_column(column: Any) -> str:
    if not isinstance(column, str):
        raise InvalidParameterError(f"column must be a column name, got {column!r}")
    return column


def _check_bounds(lower: Any, upper: Any) -> tuple[float, float]:
    lo, hi = check_real("lower", lower), check_real("upper", upper)
    if not lo < hi:
        raise InvalidParameterError(f"lower must be < upper, got lower={lo!r}, upper={hi!r}")
    return lo, hi


def _bounded(
    kind: str,
    column: Any,
    lower: Any,
    upper: Any,
    epsilon: Any,
    method: Any,
    calibration: Any,
    name: Any,
) -> Statistic:
    """A mean, proportion or variance statistic, its arguments checked."""
    column = _check_column(column)
    lo, hi = _check_bounds(lower, upper)
    return Statistic(
        kind,
        _check_name(name or f"{column}_{kind}"),
        check_epsilon(epsilon),
        column,
        lo,
        hi,
        check_choice("method", method, METHODS),
        check_choice("calibration", calibration, CALIBRATIONS),
    )


def count(*, epsilon: float, name: str = "count") -> Statistic:
    """The number of records per group, released with integer Laplace noise.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.count(epsilon=0.5).name
    'count'
    """
    return Statistic("count", _check_name(name), check_epsilon(epsilon))


def sum(
    column: str, *, lower: float, upper: float, epsilon: float, name: str | None = None
) -> Statistic:
    """The per-group sum of ``column`` after clipping each value to ``[lower, upper]``.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.sum("income", lower=0, upper=100_000, epsilon=0.5).name
    'income_sum'
    """
    column = _check_column(column)
    lo, hi = _check_bounds(lower, upper)
    name = _check_name(name or f"{column}_sum")
    return Statistic("sum", name, check_epsilon(epsilon), column, lo, hi)


def mean(
    column: str,
    *,
    lower: float,
    upper: float,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
) -> Statistic:
    """The per-group mean of ``column`` (values clipped to ``[lower, upper]``).

    With public group sizes it is released by the bounded mechanism (``method``,
    ``calibration`` as in :func:`dpframe.truncated_laplace`); otherwise as a noisy sum
    over a noisy count, clipped to the bounds.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.mean("age", lower=18, upper=90, epsilon=0.5).name
    'age_mean'
    """
    return _bounded("mean", column, lower, upper, epsilon, method, calibration, name)


def proportion(
    column: str,
    *,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
) -> Statistic:
    """The per-group share of records where the Boolean ``column`` is true, in [0, 1].

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.proportion("employed", epsilon=0.5).name
    'employed_proportion'
    """
    return _bounded("proportion", column, 0.0, 1.0, epsilon, method, calibration, name)


def var(
    column: str,
    *,
    lower: float,
    upper: float,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
) -> Statistic:
    """The per-group sample variance (divisor n - 1) of ``column`` clipped to the bounds.

    Released inside ``[0, n (upper - lower)**2 / (4 (n - 1))]`` (Liu 2019, Table 1).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.var("score", lower=0, upper=10, epsilon=0.5).name
    'score_var'
    """
    return _bounded("var", column, lower, upper, epsilon, method, calibration, name)


def cov(
    x: str,
    y: str,
    *,
    lower_x: float,
    upper_x: float,
    lower_y: float,
    upper_y: float,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
) -> Statistic:
    """Per-group variances of ``x`` and ``y``, their covariance and correlation.

    Releases four columns, ``{name}_var_{x}``, ``{name}_var_{y}``, ``{name}_cov`` and
    ``{name}_corr`` (``name`` defaults to ``"{x}_{y}"``). With public group sizes the
    variances are released first, then the covariance inside
    ``[-sqrt(S*xx S*yy), sqrt(S*xx S*yy)]`` of the *sanitized* variances (Liu 2019,
    Table 1), epsilon split in three; the correlation is post-processing. With private
    sizes, from six noisy sums (epsilon split in six).

    Examples
    --------
    >>> import dpframe
    >>> s = dpframe.agg.cov("x", "y", lower_x=-3, upper_x=3, lower_y=-4.5, upper_y=4.5,
    ...                     epsilon=1.0)
    >>> s.outputs()
    ['x_y_var_x', 'x_y_var_y', 'x_y_cov', 'x_y_corr']
    """
    x, y = _check_column(x), _check_column(y)
    if x == y:
        raise InvalidParameterError(f"x and y must be different columns, got {x!r} twice")
    lx, ux = _check_bounds(lower_x, upper_x)
    ly, uy = _check_bounds(lower_y, upper_y)
    stat = Statistic(
        "cov",
        _check_name(name or f"{x}_{y}"),
        check_epsilon(epsilon),
        x,
        lx,
        ux,
        check_choice("method", method, METHODS),
        check_choice("calibration", calibration, CALIBRATIONS),
        options={"y": y, "lower_y": ly, "upper_y": uy},
    )
    if stat.calibration == "paper" and stat.method == "truncated":
        raise InvalidParameterError(
            "calibration='paper' is not offered for cov: the covariance's bounds come from "
            "the sanitized variances, so its true loss could not be charged beforehand; "
            "use calibration='exact' (or method='bit')"
        )
    return stat
