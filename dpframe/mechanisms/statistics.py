"""Grouped statistics: what each needs exactly, and how it is noised (numpy only).

Declared as ``dpframe.agg.count(...)``, ``dpframe.agg.mean(...)`` ... (this module is
``dpframe.agg``) and released with ``dpframe.group_by(frame, keys, margins=...).agg(...)``.
The statistics of one release compose sequentially (their epsilons add up); each is
released over disjoint groups (parallel composition across groups).

Each statistic says which exact per-group aggregates it needs (:meth:`Statistic.parts`:
counts, sums of clipped values, of their squares or products, means, variances), in
engine-independent terms; an engine (polars or Spark) computes them; then
:func:`plan_statistic` gives the kernel plan that checks them and draws the noise.

Group sizes are private unless the margins declare them (``group_by(..., sizes="n")``):

* **private sizes** (default): a mean is released as a noisy sum over a noisy count
  (epsilon split evenly between them; the ratio is clipped to the bounds), a variance
  from noisy sums of ``x``, ``x**2`` and a noisy count (epsilon split in three);
* **public sizes**: a mean, proportion or variance is released directly with the
  bounded mechanism (truncated or BIT, :mod:`dpframe.mechanisms.bounded`), with the
  sensitivity of each group's own size and the output bounds of Liu (2019), Table 1.
  A group whose public size is 0 (or 1, for a variance) is released as null.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.statistics import count, plan_statistic
>>> stat = count(epsilon=0.5)
>>> [p.name for p in stat.parts(public_sizes=False)]
['count:n']
>>> plan = plan_statistic(stat, "substitute")
>>> plan.charges[0].epsilon, plan.charges[0].columns
(0.5, ('count',))
>>> out = plan.draw({"count:n": np.array([3.0, 0.0])}, np.random.default_rng(0))
>>> sorted(out)
['count']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpframe.core import sensitivity as sens
from dpframe.core.accountant import Charge
from dpframe.core.advice import advise
from dpframe.core.budget import split_epsilon
from dpframe.core.constraints import (
    AUTO,
    AUTO_BOUNDS_EXPONENTS,
    AUTO_BOUNDS_SHARE,
    QUANTILE_STATISTICS,
    RESERVED_PREFIX,
    check,
    check_auto_bounds,
    check_bounds_epsilon,
    check_epsilon,
)
from dpframe.core.constraints import STATISTICS as KINDS
from dpframe.core.executor import summary_row
from dpframe.core.neighbours import require_substitute
from dpframe.core.units import (
    RECORD,
    PrivacyUnit,
    count_sensitivity,
    distinct_sensitivity,
    sum_sensitivity,
)
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.accuracy import (
    check_level,
    level_label,
    moment_error,
    moment_threshold,
    ratio_error,
    ratio_threshold,
)
from dpframe.mechanisms.bounded import calibrate_bounded
from dpframe.mechanisms.laplace import calibrate_laplace

__all__ = [
    "KINDS",
    "QUARTILES",
    "Drawn",
    "Operand",
    "Part",
    "Statistic",
    "StatisticPlan",
    "count",
    "count_distinct",
    "cov",
    "mean",
    "median",
    "plan_statistic",
    "proportion",
    "quantile",
    "quantile_columns",
    "sum",
    "var",
]

#: The statistics a grouped release offers.
#: The exact per-group aggregates an engine computes (see :class:`Part`).
OPS = ("count", "sum", "mean", "var", "cov", "distinct", "hist")


@dataclass(frozen=True)
class Operand:
    """A record-level value: ``column`` cast to float and clipped to its public bounds.

    ``lower = upper = None`` for a proportion's Boolean column (0/1, nothing to clip).
    """

    column: str
    lower: float | None = None
    upper: float | None = None


@dataclass(frozen=True)
class Part:
    """One exact per-group aggregate a statistic needs, in engine-independent terms.

    ``op`` is ``"count"`` (records in the group), ``"sum"`` (of ``x``, or of ``x * y``),
    ``"at_least"`` (records whose ``x.column`` is ``>= x.lower``, unclipped: a private
    bounds pass's histogram, :meth:`Statistic.bounds_parts`), ``"mean"`` or ``"var"``
    (sample variance, divisor ``n - 1``) of ``x``, ``"cov"`` (sample covariance of ``x``
    and ``y``), ``"distinct"`` (the distinct persons of the rows each person keeps: the
    release's privacy unit says whose, so it has no operand; only a person-level release
    has it), or ``"hist"``: the number of records in each of the ``2B + 1`` cells of
    ``grid`` (a :class:`dpframe.mechanisms.quantile.Grid`;
    :meth:`~dpframe.mechanisms.quantile.Grid.cell_index`: at an edge, or strictly
    between two), an int64 vector per group. A group absent from the data gets ``fill``
    (0 for counts, sums, distinct persons, records at or above an edge and every cell of
    a histogram; null -- ``None`` -- for means, variances and covariances).
    """

    name: str
    op: str
    x: Operand | None = None
    y: Operand | None = None
    #: the candidates' grid of a ``"hist"`` part (else None)
    grid: Any = field(default=None, compare=False)

    @property
    def fill(self) -> float | None:
        return 0.0 if self.op in ("count", "sum", "distinct", "hist", "at_least") else None


def split_bounds_epsilon(
    epsilon: float, bounds_epsilon: float | None, columns: int
) -> tuple[list[float], float]:
    """The bounds passes' epsilons (one per column) and the release's own, out of
    ``epsilon`` (``bounds_epsilon``: the passes' total; None: the default share).

    Examples
    --------
    >>> from dpframe.mechanisms.statistics import split_bounds_epsilon
    >>> split_bounds_epsilon(1.0, None, 2)
    ([0.1, 0.1], 0.8)
    """
    whole = epsilon * AUTO_BOUNDS_SHARE if bounds_epsilon is None else bounds_epsilon
    first, rest = split_epsilon(epsilon, [whole, epsilon - whole])
    return split_epsilon(first, [1.0] * columns), rest


def bounds_parts(prefix: str, column: str, edges: Sequence[float]) -> list[Part]:
    """The exact aggregates of one column's pass: the records at or above each inner
    edge (``edges[1:-1]``), named ``<prefix>:<k>``."""
    return [
        Part(f"{prefix}:{k}", "at_least", Operand(column, float(e)))
        for k, e in enumerate(edges[1:-1], start=1)
    ]


def is_nonnegative(kind: str, lower: float | None) -> bool:
    """Whether a statistic of ``kind`` is never negative: a count, or a sum of values whose
    lower bound is >= 0 (its release is then clamped at 0, and its suite expects >= 0)."""
    bounded_below = isinstance(lower, int | float) and lower >= 0  # "auto": not known
    return kind in ("count", "count_distinct") or (kind == "sum" and bounded_below)


@dataclass(frozen=True)
class Statistic:
    """One noisy per-group statistic (build it with the functions of this module)."""

    kind: str
    name: str
    epsilon: float
    column: str | None = None
    lower: float | None = None
    upper: float | None = None
    method: str = "truncated"
    calibration: str = "exact"
    options: dict[str, Any] = field(default_factory=dict)
    #: the noise of a count or sum: ``"laplace"`` (epsilon) or ``"gaussian"`` (rho or
    #: sigma in ``options``; zCDP)
    mechanism: str = "laplace"
    #: the bounds found by a first pass (``"auto"``), by argument name (``lower``,
    #: ``upper``, ``lower_y``, ``upper_y``); their values are None until found
    auto: tuple[str, ...] = ()
    #: the first pass's epsilon, part of ``epsilon`` (None: the default share)
    bounds_epsilon: float | None = None

    @property
    def nonnegative(self) -> bool:
        """Whether the exact statistic is never negative (a count, a sum of values whose
        lower bound is >= 0): clamping its release at 0 is then post-processing that only
        moves it closer to the truth."""
        return is_nonnegative(self.kind, self.lower)

    # -- private bounds (``"auto"``: found by a first pass) ------------------------------

    def auto_columns(self) -> list[tuple[str, tuple[float | None, float | None]]]:
        """Each source column with a bound found privately, and its given bounds (None:
        found by the pass)."""
        out = []
        if {"lower", "upper", "lower_x", "upper_x"} & set(self.auto):
            out.append((str(self.column), (self.lower, self.upper)))
        if "lower_y" in self.auto or "upper_y" in self.auto:
            o = self.options
            out.append((str(o["y"]), (o["lower_y"], o["upper_y"])))
        return out

    def epsilon_split(self) -> tuple[list[float], float]:
        """The bounds passes' epsilons (one a column) and the statistic's own: together
        at most :attr:`epsilon` exactly (:func:`dpframe.core.budget.split_epsilon`)."""
        columns = len(self.auto_columns())
        if not columns:
            return [], self.epsilon
        return split_bounds_epsilon(self.epsilon, self.bounds_epsilon, columns)

    def stand_in(self) -> Statistic:
        """The statistic with stand-in bounds (the candidates' widest) for its plan
        before the pass: what it charges, never what it draws."""
        return self.with_bounds({c: (None, None) for c, _ in self.auto_columns()})

    def with_bounds(self, found: Mapping[str, tuple[float | None, float | None]]) -> Statistic:
        """The statistic released with the bounds ``found`` (by column; None: the
        candidates' widest) and its own share of epsilon."""
        widest = 2.0 ** AUTO_BOUNDS_EXPONENTS[1]

        def pick(given: float | None, got: float | None, side: int) -> float:
            if given is not None:
                return given
            return float(got) if got is not None else side * widest

        def pair(given: tuple[float | None, float | None], column: str) -> tuple[float, float]:
            got = found.get(column, (None, None))
            lo, hi = pick(given[0], got[0], -1), pick(given[1], got[1], 1)
            return (lo, hi) if lo < hi else (lo, lo + max(1.0, abs(lo)))

        lo, hi = pair((self.lower, self.upper), str(self.column))
        options = dict(self.options)
        if self.kind == "cov":
            o = self.options
            options["lower_y"], options["upper_y"] = pair((o["lower_y"], o["upper_y"]), o["y"])
        options["bounds_found"] = {c: list(pair(g, c)) for c, g in self.auto_columns()}
        return replace(
            self,
            lower=lo,
            upper=hi,
            options=options,
            epsilon=self.epsilon_split()[1],
            auto=(),
            bounds_epsilon=None,
        )

    def bounds_parts(self, edges: Sequence[float]) -> list[Part]:
        """The exact aggregates of its bounds passes (one per auto column,
        :func:`bounds_parts`)."""
        return [
            p for c, _ in self.auto_columns() for p in bounds_parts(self.bounds_prefix(c), c, edges)
        ]

    def bounds_prefix(self, column: str) -> str:
        """The name its bounds pass of ``column`` gives its exact aggregates."""
        return f"{self.name}:bounds:{column}"

    def part(self, what: str) -> str:
        """Name of one exact aggregate of this statistic, e.g. ``"age_mean:sum"``."""
        return f"{self.name}:{what}"

    def _x(self) -> Operand:
        if self.kind == "proportion":
            return Operand(self.column)
        return Operand(self.column, self.lower, self.upper)

    def _y(self) -> Operand:
        o = self.options
        return Operand(o["y"], o["lower_y"], o["upper_y"])

    def sources(self) -> list[tuple[str, str]]:
        """The source columns and the dtype each needs (``"numeric"`` or ``"boolean"``)."""
        if self.column is None or self.kind == "count_distinct":
            return []  # a distinct count reads the unit's person column, not a source
        need = "boolean" if self.kind == "proportion" else "numeric"
        cols = [self.column, self.options["y"]] if self.kind == "cov" else [self.column]
        return [(c, need) for c in cols]

    def columns(self) -> list[str]:
        """The source columns."""
        return [c for c, _ in self.sources()]

    def outputs(self) -> list[str]:
        """The released columns: one, four for a covariance (two variances, cov, corr),
        one per probability for a quantile (:func:`quantile_columns`)."""
        if self.kind in QUANTILE_STATISTICS:
            return list(self.options["columns"])
        if self.kind != "cov":
            return [self.name]
        x, y = self.columns()
        n = self.name
        return [f"{n}_var_{x}", f"{n}_var_{y}", f"{n}_cov", f"{n}_corr"]

    def parts(self, public_sizes: bool) -> list[Part]:
        """The exact aggregates this statistic needs (an engine computes them)."""
        if self.kind in QUANTILE_STATISTICS:  # a histogram on the candidates' grid
            return [Part(self.part("hist"), "hist", self._x(), grid=quantile_grid(self))]
        n = Part(self.part("n"), "count")
        if self.kind == "count":
            return [n]
        if self.kind == "count_distinct":
            return [Part(self.part("persons"), "distinct")]
        x = self._x()
        if self.kind == "sum":
            return [Part(self.part("sum"), "sum", x)]
        if self.kind == "cov":
            y = self._y()
            if public_sizes:
                return [
                    Part(self.part("var_x"), "var", x),
                    Part(self.part("var_y"), "var", y),
                    Part(self.part("cov"), "cov", x, y),
                ]
            return [
                Part(self.part("sx"), "sum", x),
                Part(self.part("sy"), "sum", y),
                Part(self.part("sxx"), "sum", x, x),
                Part(self.part("syy"), "sum", y, y),
                Part(self.part("sxy"), "sum", x, y),
                n,
            ]
        if public_sizes:
            if self.kind == "var":
                return [Part(self.part("var"), "var", x)]
            return [Part(self.part("mean"), "mean", x)]
        parts = [Part(self.part("sum"), "sum", x), n]
        if self.kind == "var":
            parts.append(Part(self.part("sumsq"), "sum", x, x))
        return parts


# -- the plan ---------------------------------------------------------------------------


class Drawn(dict):  # type: ignore[type-arg]  # dict[str, np.ndarray]
    """What one statistic's plan draws: its released columns (this dict, column name ->
    one value per group), and in :attr:`noisy` the noisy parts a ratio or moment was
    computed from (its noisy sums and noisy count: drawn and charged with the statistic,
    not columns of the released table). :meth:`StatisticPlan.accuracy` reads both; nothing
    else of the draw is kept.
    """

    def __init__(
        self, released: Mapping[str, np.ndarray], noisy: Mapping[str, np.ndarray] | None = None
    ) -> None:
        super().__init__(released)
        self.noisy: dict[str, np.ndarray] = dict(noisy or {})


#: What a plan's accuracy gives for one statistic: the half-width of each released column,
#: the "uninformative" flag (or None), and the noisy count it rests on (or None).
Accuracy = tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None]


@dataclass(frozen=True)
class StatisticPlan:
    """How one statistic is released: its cost and noise, known before any data.

    ``check`` and ``draw`` take the exact parts (:meth:`Statistic.parts`) as a mapping
    from part name to an array with one value per group (the margins' rows, in order);
    ``draw`` returns one array per released column (a :class:`Drawn`), and
    :meth:`accuracy` the per-group half-widths of a draw, from the draw alone.
    """

    statistic: Statistic
    mechanism: str
    epsilon: float  # charged (0 for a zCDP-only release, which charges ``rho``)
    sensitivity: float  # the largest over the groups
    scale: float  # the largest over the groups
    error95: float | None  # the largest over the groups; None for ratios
    details: dict[str, Any]
    _check: Callable[[Mapping[str, np.ndarray]], None]
    _draw: Callable[[Mapping[str, np.ndarray], np.random.Generator], dict[str, np.ndarray]]
    unit: PrivacyUnit = RECORD
    rho: float | None = None  # charged, for a zCDP-only (Gaussian) release
    #: the half-widths of a draw at a level, from the draw and the calibration alone
    _accuracy: Callable[[Drawn, float], Accuracy] | None = None
    #: added to the summary's note (how the error depends on the data, if it does)
    note: str = ""
    #: a ratio or moment: the noisy count at or below which it is uninformative at 95%
    uninformative_count: float | None = None

    @property
    def charges(self) -> tuple[Charge, ...]:
        s = self.statistic
        return (
            Charge(
                epsilon=self.epsilon,
                rho=self.rho,
                unit=self.unit.person,
                mechanism=self.mechanism,
                columns=tuple(s.outputs()),
                scale=self.scale,
                composition="parallel",
                details={
                    **self.details,
                    "statistic": s.kind,
                    "source_column": s.column,
                    "lower": s.lower,
                    "upper": s.upper,
                    "sensitivity": self.sensitivity,
                    **self.unit.bounds(),
                },
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        s = self.statistic
        return [
            summary_row(
                s.name,
                self.mechanism,
                self.epsilon,
                sensitivity=self.sensitivity,
                scale=self.scale,
                error95=self.error95,
                note=(f"{s.kind} of {s.column}" if s.column else s.kind)
                + (f"; {self.note}" if self.note else ""),
                rho=self.rho,
            )
        ]

    def check(self, exact: Mapping[str, np.ndarray]) -> None:
        """Refuse exact aggregates that cannot be released (nothing is charged)."""
        self._check(exact)

    def draw(self, exact: Mapping[str, np.ndarray], rng: np.random.Generator) -> Drawn:
        """The released columns, one array per output (null, as NaN, for empty groups)."""
        out = self._draw(exact, rng)
        return out if isinstance(out, Drawn) else Drawn(out)

    def accuracy(self, drawn: Drawn, level: float = 0.95) -> dict[str, np.ndarray]:
        """Per group, how far each released column may be from the exact statistic.

        Post-processing: computed from ``drawn`` (what :meth:`draw` returned: the released
        columns and the noisy parts they came from) and the calibration -- never from
        exact aggregates, which this method is not given. Returns, with one value per
        group:

        * ``"<column>_error95"`` (at ``level=0.95``; ``_error90`` at 0.9, ...) for each
          released column: the half-width ``h`` of an interval ``value +- h`` that holds
          the exact statistic with probability ``level`` (exact for counts and sums, worst
          case over the truth for the bounded mechanism with public sizes, approximate --
          :mod:`dpframe.mechanisms.accuracy` -- for ratios and moments); null where the
          value is null;
        * ``"<name>_uninformative"`` for a mean, proportion, variance or covariance: True
          where the release says nothing the public bounds do not (a ratio whose noisy
          count is at most :attr:`uninformative_count`; a bounded release whose ``h``
          spans its whole range; a null value);
        * ``"<name>_noisy_n"`` for a ratio or moment: the noisy count it divided by.

        Examples
        --------
        >>> import numpy as np
        >>> from dpframe.mechanisms.statistics import mean, plan_statistic
        >>> plan = plan_statistic(mean("x", lower=0, upper=1, epsilon=1.0), "substitute")
        >>> exact = {"x_mean:sum": np.array([400.0, 0.0]), "x_mean:n": np.array([1000.0, 0.0])}
        >>> acc = plan.accuracy(plan.draw(exact, np.random.default_rng(0)))
        >>> sorted(acc)
        ['x_mean_error95', 'x_mean_noisy_n', 'x_mean_uninformative']
        >>> acc["x_mean_uninformative"].tolist()
        [False, True]
        """
        if self._accuracy is None:  # pragma: no cover - every plan of this module has one
            raise InvalidParameterError(f"statistic {self.statistic.name!r}: no accuracy")
        level = check_level(level)
        if not isinstance(drawn, Drawn):
            raise InvalidParameterError(
                "accuracy takes what draw() returned (a Drawn: the released columns and "
                f"the noisy parts they came from), got {type(drawn).__name__}"
            )
        errors, flags, noisy_n = self._accuracy(drawn, level)
        name, label = self.statistic.name, level_label(level)
        out = {f"{column}_{label}": h for column, h in errors.items()}
        if flags is not None:
            out[f"{name}_uninformative"] = np.asarray(flags, dtype=bool)
        if noisy_n is not None:
            out[f"{name}_noisy_n"] = noisy_n
        return out


def plan_statistic(
    stat: Statistic,
    neighbours: str,
    sizes: np.ndarray | None = None,
    details: Mapping[str, Any] | None = None,
    unit: PrivacyUnit = RECORD,
) -> StatisticPlan:
    """The plan of ``stat`` under ``neighbours``; ``sizes`` are public group sizes, if any.

    ``details`` are added to the ledger entry (e.g. the keys and number of groups).
    Public sizes need substitute neighbours (:mod:`dpframe.core.neighbours`). Under a
    person ``unit`` every sensitivity scales by its bounds (:mod:`dpframe.core.units`),
    and public sizes are refused: the bounding drops rows, so the groups released are
    not the ones whose sizes are public.

    Examples
    --------
    >>> import dpframe
    >>> plan = dpframe.agg.plan_statistic(dpframe.agg.count(epsilon=0.5), "add_remove")
    >>> plan.mechanism, plan.scale, plan.charges[0].epsilon
    ('laplace', 2.0, 0.5)
    """
    if not isinstance(stat, Statistic):
        raise InvalidParameterError(
            f"statistics must be dpframe.agg statistics, got {type(stat).__name__}: use "
            "dpframe.agg.count(...), dpframe.agg.sum(...), ..."
        )
    if not isinstance(unit, PrivacyUnit):
        raise InvalidParameterError(f"unit must be a PrivacyUnit, got {type(unit).__name__}")
    if sizes is not None:
        require_substitute(neighbours, "public sizes", argument="sizes")
        if not unit.is_record:
            raise InvalidParameterError(
                f"sizes: public group sizes cannot hold under a person unit ({unit.describe()}): "
                "bounding each person's contributions drops rows, so the released groups are "
                "not the ones whose sizes are public; drop sizes= (sizes are then private)"
            )
        sizes = np.asarray(sizes, dtype=np.int64)
    if stat.kind == "count_distinct":
        check_distinct_unit(stat, unit)
    if stat.kind in QUANTILE_STATISTICS:  # public sizes change nothing: a selection
        plan = _plan_quantile(stat, neighbours, unit)
    elif stat.mechanism == "gaussian":
        plan = _plan_gaussian_part(stat, neighbours, unit)
    elif stat.kind in ("count", "sum", "count_distinct"):
        plan = _plan_laplace_part(stat, neighbours, unit)
    elif stat.kind == "cov":
        if sizes is None:
            plan = _plan_cov_private(stat, neighbours, unit)
        else:
            plan = _plan_cov_public(stat, sizes)
    elif sizes is None:
        plan = _plan_private_sizes(stat, neighbours, unit)
    else:
        plan = _plan_public_sizes(stat, sizes)
    plan = StatisticPlan(
        **{**plan.__dict__, "details": {**plan.details, **(details or {})}, "unit": unit}
    )
    return plan


def _laplace(epsilon: float, sensitivity: float, counts: bool = False) -> Any:
    if counts:  # counts are integers: a grid of 1, no rounding, integer noise
        return calibrate_laplace(epsilon, sensitivity, 1.0, values_on_grid=True)
    return calibrate_laplace(epsilon, sensitivity)


def _square_bounds(lo: float, hi: float) -> tuple[float, float]:
    return (0.0 if lo < 0 < hi else min(lo * lo, hi * hi)), max(lo * lo, hi * hi)


def _product_bounds(lx: float, ux: float, ly: float, uy: float) -> tuple[float, float]:
    corners = (lx * ly, lx * uy, ux * ly, ux * uy)
    return min(corners), max(corners)


def _check_parts(cals: Mapping[str, Any], stat: Statistic) -> Callable:
    def check(exact: Mapping[str, np.ndarray]) -> None:
        for p, cal in cals.items():
            cal.check(exact[stat.part(p)])

    return check


def check_distinct_unit(stat: Statistic, unit: PrivacyUnit) -> None:
    """Refuse a distinct count (``dpframe.agg.count_distinct``) that has no persons to
    count: under the record unit (one row is one person, so it would be the count of
    rows), or of a ``column`` other than the unit's person column (the distinct values
    of another column are another statistic, not offered). Nothing is spent.

    Examples
    --------
    >>> from dpframe.core.units import PrivacyUnit
    >>> stat = count_distinct(epsilon=1.0)
    >>> check_distinct_unit(stat, PrivacyUnit("pid", max_rows=2, max_groups=1))
    >>> check_distinct_unit(stat, PrivacyUnit())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: unit: 'persons' (count_distinct) counts ...
    """
    if unit.is_record:
        fix = advise(
            python="pass unit='<person column>' with max_rows=... and max_groups=... to "
            "group_by (or to the accountant)",
            spec="set unit = '<person column>' with max_rows and max_groups on the release "
            "or under [privacy]",
        )
        raise InvalidParameterError(
            f"unit: {stat.name!r} (count_distinct) counts distinct persons, but this "
            "release's unit is the record (one row is one person: the count of distinct "
            f"persons would be the count of rows); {fix}, or release a count. Nothing was "
            "spent."
        )
    if stat.column is not None and stat.column != unit.person:
        raise InvalidParameterError(
            f"column: count_distinct counts the persons of the release's unit "
            f"({unit.person!r}), not the distinct values of {stat.column!r} (a statistic "
            f"this release does not offer); leave column out or give {unit.person!r}. "
            "Nothing was spent."
        )


def _part_noise(
    stat: Statistic, neighbours: str, unit: PrivacyUnit, norm: str
) -> tuple[float, str, bool]:
    """A count's, distinct count's or sum's sensitivity in ``norm``, the name of the part
    its noise is added to, and whether it is an integer (noise on a grid of 1)."""
    if stat.kind == "count":
        return count_sensitivity(unit, neighbours, norm), "n", True
    if stat.kind == "count_distinct":
        return distinct_sensitivity(unit, neighbours, norm), "persons", True
    return sum_sensitivity(stat.lower, stat.upper, unit, neighbours, norm), "sum", False


def _plan_laplace_part(stat: Statistic, neighbours: str, unit: PrivacyUnit) -> StatisticPlan:
    delta, part, is_count = _part_noise(stat, neighbours, unit, "l1")
    cal = _laplace(stat.epsilon, delta, counts=is_count)
    return StatisticPlan(
        statistic=stat,
        mechanism="laplace",
        epsilon=stat.epsilon,
        sensitivity=delta,
        scale=cal.scale,
        error95=cal.error(0.95),
        details=cal.details(),
        _check=_check_parts({part: cal}, stat),
        _draw=lambda exact, rng: {stat.name: cal.release(exact[stat.part(part)], rng)},
        _accuracy=lambda drawn, level: _constant_error(stat, drawn, cal.error(level)),
    )


def _plan_gaussian_part(stat: Statistic, neighbours: str, unit: PrivacyUnit) -> StatisticPlan:
    """A count, distinct count or sum with discrete Gaussian noise, calibrated to its l2 sensitivity
    (rho-zCDP, :mod:`dpframe.mechanisms.gaussian`)."""
    from dpframe.core.units import changed_groups
    from dpframe.mechanisms.gaussian import calibrate_gaussian

    delta, part, is_count = _part_noise(stat, neighbours, unit, "l2")
    cal = calibrate_gaussian(
        delta,
        rho=stat.options.get("rho"),
        sigma=stat.options.get("sigma"),
        granularity=1.0 if is_count else None,
        changed=changed_groups(unit, neighbours),
        values_on_grid=is_count,
    )
    return StatisticPlan(
        statistic=stat,
        mechanism="gaussian",
        epsilon=0.0,
        sensitivity=delta,
        scale=cal.scale,
        error95=cal.error(0.95),
        details={**cal.details(), "norm": "l2"},
        _check=_check_parts({part: cal}, stat),
        _draw=lambda exact, rng: {stat.name: cal.release(exact[stat.part(part)], rng)},
        rho=cal.rho,
        _accuracy=lambda drawn, level: _constant_error(stat, drawn, cal.error(level)),
    )


def _constant_error(stat: Statistic, drawn: Drawn, error: float) -> Accuracy:
    """A count or sum: noise added to the statistic itself, the same law in every group
    (its exact quantile; clamping at 0 only moves a value towards the truth)."""
    return {stat.name: np.full(np.shape(drawn[stat.name]), error)}, None, None


def _moment_variance(s1: np.ndarray, s2: np.ndarray, n: np.ndarray, r: float) -> np.ndarray:
    """Variance from noisy sums of x and x**2 and a noisy count, clipped to Table 1's bounds."""
    n = np.maximum(n, 2.0)
    var = (s2 - s1**2 / n) / (n - 1)
    return np.clip(var, 0.0, sens.variance_bounds(0.0, r, n))


def _plan_private_sizes(stat: Statistic, neighbours: str, unit: PrivacyUnit) -> StatisticPlan:
    """Mean, proportion or variance from noisy sums and a noisy count (post-processing)."""
    lo, hi = (0.0, 1.0) if stat.kind == "proportion" else (stat.lower, stat.upper)
    parts = ["sum", "n"] + (["sumsq"] if stat.kind == "var" else [])
    share = min(split_epsilon(stat.epsilon, [1.0] * len(parts)))
    cals = {
        "sum": _laplace(share, sum_sensitivity(lo, hi, unit, neighbours)),
        "n": _laplace(share, count_sensitivity(unit, neighbours), counts=True),
    }
    if stat.kind == "var":
        cals["sumsq"] = _laplace(share, sum_sensitivity(*_square_bounds(lo, hi), unit, neighbours))

    def draw(exact: Mapping[str, np.ndarray], rng: np.random.Generator) -> Drawn:
        noisy = {p: cal.release(exact[stat.part(p)], rng) for p, cal in cals.items()}
        if stat.kind != "var":
            n = np.maximum(noisy["n"], 1.0)
            return Drawn({stat.name: np.clip(noisy["sum"] / n, lo, hi)}, noisy)
        var = _moment_variance(noisy["sum"], noisy["sumsq"], noisy["n"], hi - lo)
        return Drawn({stat.name: var}, noisy)

    b = {p: c.scale for p, c in cals.items()}
    if stat.kind == "var":
        threshold = _variance_threshold(lo, hi, b["sumsq"], b["sum"], b["n"], 0.95)
    else:
        threshold = ratio_threshold(b["sum"], b["n"], lo, hi, 0.95)

    def accuracy(drawn: Drawn, level: float) -> Accuracy:
        n = drawn.noisy["n"]
        if stat.kind == "var":
            h = _variance_error(
                drawn[stat.name], drawn.noisy["sum"], n, lo, hi, b["sumsq"], b["sum"], b["n"], level
            )
            limit = _variance_threshold(lo, hi, b["sumsq"], b["sum"], b["n"], level)
            return {stat.name: h}, (n < 2) | (n <= limit), n
        h = ratio_error(n, drawn[stat.name], b["sum"], b["n"], lo, hi, level)
        return {stat.name: h}, n <= ratio_threshold(b["sum"], b["n"], lo, hi, level), n

    return StatisticPlan(
        statistic=stat,
        mechanism="laplace_ratio" if stat.kind != "var" else "laplace_moments",
        epsilon=stat.epsilon,
        sensitivity=max(c.sensitivity for c in cals.values()),
        scale=max(c.scale for c in cals.values()),
        error95=None,  # a ratio's error depends on the group's size
        details={
            "sizes": "private",
            "parts": {p: {**c.details(), "epsilon": share} for p, c in cals.items()},
        },
        _check=_check_parts(cals, stat),
        _draw=draw,
        _accuracy=accuracy,
        note=_SIZE_NOTE.format(math.floor(threshold)),
        uninformative_count=threshold,
    )


#: The summary's note on a ratio or moment with private sizes.
_SIZE_NOTE = (
    "error depends on the group's size; see release.accuracy() after release "
    "(uninformative where its noisy count is <= {:,})"
)


def _variance_error(
    var: np.ndarray,
    noisy_sum: np.ndarray,
    noisy_n: np.ndarray,
    lo: float,
    hi: float,
    b_sumsq: float,
    b_sum: float,
    b_n: float,
    level: float,
) -> np.ndarray:
    """Half-width of a variance from noisy sums of x, x**2 and a noisy count (delta
    method, :func:`dpframe.mechanisms.accuracy.moment_error`), from released values."""
    n2 = np.maximum(noisy_n, 2.0)
    m = np.clip(noisy_sum / n2, lo, hi)
    coefficients = np.stack([np.ones_like(m), 2 * m, m * m - var], axis=-1)
    cap = sens.variance_bounds(0.0, hi - lo, n2)
    return moment_error(noisy_n, coefficients, [b_sumsq, b_sum, b_n], cap, level)


def _variance_threshold(
    lo: float, hi: float, b_sumsq: float, b_sum: float, b_n: float, level: float
) -> float:
    """The noisy count at or below which a variance is uninformative: the coefficients
    of :func:`_variance_error` at their largest (``|m| <= c``, ``|m^2 - V| <= max(c^2,
    R^2 / 2)``), the range ``n R^2 / (4 (n - 1))``."""
    c, r = max(abs(lo), abs(hi)), hi - lo
    worst = [1.0, 2 * c, max(c * c, r * r / 2)]
    return moment_threshold(worst, [b_sumsq, b_sum, b_n], r * r / 4, level)


def _plan_public_sizes(stat: Statistic, sizes: np.ndarray) -> StatisticPlan:
    """Bounded mechanism per group, with the sensitivity of the group's public size."""
    lo, hi = (0.0, 1.0) if stat.kind == "proportion" else (stat.lower, stat.upper)
    minimum = 2 if stat.kind == "var" else 1
    cals: dict[int, Any] = {}
    for n in (int(v) for v in np.unique(sizes)):
        if n < minimum:
            continue
        if stat.kind == "var":
            delta = sens.variance(lo, hi, n, "substitute")
            bounds = (0.0, sens.variance_bound(lo, hi, n))
        else:
            delta = sens.mean(lo, hi, n, "substitute")
            bounds = (lo, hi)
        cals[n] = calibrate_bounded(
            stat.epsilon, delta, *bounds, method=stat.method, calibration=stat.calibration
        )
    if not cals:
        raise InvalidParameterError(
            f"statistic {stat.name!r}: every group's public size is below {minimum}; "
            "there is nothing to release"
        )
    part = stat.part("var" if stat.kind == "var" else "mean")

    def check(exact: Mapping[str, np.ndarray]) -> None:
        values = exact[part]
        for n, cal in cals.items():
            cal.check(values[sizes == n])

    def draw(exact: Mapping[str, np.ndarray], rng: np.random.Generator) -> dict:
        values = exact[part]
        out = np.full(values.shape, np.nan)
        for n, cal in cals.items():
            rows = sizes == n
            out[rows] = cal.release(values[rows], rng)
        return {stat.name: out}

    def accuracy(drawn: Drawn, level: float) -> Accuracy:
        h, flags = _bounded_errors(cals, sizes, level)
        return {stat.name: h}, flags, None

    return StatisticPlan(
        statistic=stat,
        mechanism="truncated_laplace" if stat.method == "truncated" else "bit_laplace",
        epsilon=max(c.epsilon_charged for c in cals.values()),
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
        _check=check,
        _draw=draw,
        _accuracy=accuracy,
    )


def _bounded_errors(
    cals: Mapping[int, Any], sizes: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the bounded mechanism's half-width at the group's public size (worst
    case over the exact value) and whether it spans the whole range (or nothing was
    released: a size too small, null)."""
    h = np.full(sizes.shape, np.nan)
    flags = np.ones(sizes.shape, dtype=bool)
    for n, cal in cals.items():
        rows = sizes == n
        h[rows] = error = cal.error(level)
        flags[rows] = error >= (cal.grid_upper - cal.grid_lower) * cal.granularity
    return h, flags


def _covariance_outputs(
    stat: Statistic, var_x: np.ndarray, var_y: np.ndarray, cov: np.ndarray
) -> dict[str, np.ndarray]:
    """The four released columns, post-processed so that they agree: the covariance within
    Cauchy--Schwarz, ``|cov| <= sqrt(var_x var_y)``, and the correlation ``cov / sqrt(var_x
    var_y)`` (so in [-1, 1]), undefined (NaN) where a variance is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        bound = np.sqrt(np.clip(var_x, 0.0, None) * np.clip(var_y, 0.0, None))
        cov = np.clip(cov, -bound, bound)
        corr = np.clip(cov / np.sqrt(var_x * var_y), -1.0, 1.0)
    corr = np.where(var_x * var_y > 0, corr, np.nan)
    return dict(zip(stat.outputs(), (var_x, var_y, cov, corr), strict=True))


def _plan_cov_private(stat: Statistic, neighbours: str, unit: PrivacyUnit) -> StatisticPlan:
    """Covariance from noisy sums and a noisy count (epsilon split in six)."""
    o = stat.options
    lx, ux, ly, uy = stat.lower, stat.upper, o["lower_y"], o["upper_y"]
    share = min(split_epsilon(stat.epsilon, [1.0] * 6))
    bounds = {
        "sx": (lx, ux),
        "sy": (ly, uy),
        "sxx": _square_bounds(lx, ux),
        "syy": _square_bounds(ly, uy),
        "sxy": _product_bounds(lx, ux, ly, uy),
    }
    cals = {p: _laplace(share, sum_sensitivity(*b, unit, neighbours)) for p, b in bounds.items()}
    cals["n"] = _laplace(share, count_sensitivity(unit, neighbours), counts=True)

    def draw(exact: Mapping[str, np.ndarray], rng: np.random.Generator) -> Drawn:
        v = {p: cal.release(exact[stat.part(p)], rng) for p, cal in cals.items()}
        var_x = _moment_variance(v["sx"], v["sxx"], v["n"], ux - lx)
        var_y = _moment_variance(v["sy"], v["syy"], v["n"], uy - ly)
        n = np.maximum(v["n"], 2.0)
        limit = np.sqrt(var_x * var_y)
        cov = np.clip((v["sxy"] - v["sx"] * v["sy"] / n) / (n - 1), -limit, limit)
        return Drawn(_covariance_outputs(stat, var_x, var_y, cov), v)

    b = {p: c.scale for p, c in cals.items()}

    def errors(drawn: Drawn, level: float) -> tuple[np.ndarray, ...]:
        v, (ox, oy, oc, _) = drawn.noisy, stat.outputs()
        n = v["n"]
        n2 = np.maximum(n, 2.0)
        hx = _variance_error(drawn[ox], v["sx"], n, lx, ux, b["sxx"], b["sx"], b["n"], level)
        hy = _variance_error(drawn[oy], v["sy"], n, ly, uy, b["syy"], b["sy"], b["n"], level)
        mx, my = np.clip(v["sx"] / n2, lx, ux), np.clip(v["sy"] / n2, ly, uy)
        c = drawn[oc]
        coefficients = np.stack([np.ones_like(c), my, mx, mx * my - c], axis=-1)
        bounds = np.sqrt(
            sens.variance_bounds(0.0, ux - lx, n2) * sens.variance_bounds(0.0, uy - ly, n2)
        )
        scales = [b["sxy"], b["sx"], b["sy"], b["n"]]
        hc = moment_error(n, coefficients, scales, 2 * bounds, level)
        # the clip into +-sqrt(var_x var_y) (released variances) moves a value towards
        # the truth unless the truth lies beyond it: at most as far as the variances'
        # intervals allow
        limit = np.sqrt(drawn[ox] * drawn[oy])
        reach = np.minimum(np.sqrt((drawn[ox] + hx) * (drawn[oy] + hy)), bounds)
        binding = (np.abs(c) >= limit) & (n >= 2)
        hc = np.where(binding, np.maximum(hc, reach - limit), hc)
        return hx, hy, np.minimum(hc, 2 * bounds)

    def rho_error(drawn: Drawn, level: float) -> np.ndarray:
        """The correlation ``C / s``, ``s = sqrt(V_x V_y)``, by the delta method: its
        error is ``dC / s - (rho / 2) (dV_x / V_x + dV_y / V_y)``, each ``d`` the linear
        combination of the six noises of :func:`_variance_error` and the covariance's."""
        v, (ox, oy, oc, orho) = drawn.noisy, stat.outputs()
        n2 = np.maximum(v["n"], 2.0)
        mx, my = np.clip(v["sx"] / n2, lx, ux), np.clip(v["sy"] / n2, ly, uy)
        vx, vy, c, rho = drawn[ox], drawn[oy], drawn[oc], drawn[orho]
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.sqrt(vx * vy)
            coefficients = np.stack(
                [
                    1 / sd,  # sxy
                    -rho / (2 * vx),  # sxx
                    -rho / (2 * vy),  # syy
                    -my / sd + rho * mx / vx,  # sx
                    -mx / sd + rho * my / vy,  # sy
                    (mx * my - c) / sd - rho / 2 * ((mx * mx - vx) / vx + (my * my - vy) / vy),  # n
                ],
                axis=-1,
            )
        coefficients = np.nan_to_num(coefficients, nan=0.0, posinf=0.0, neginf=0.0)
        scales = [b["sxy"], b["sxx"], b["syy"], b["sx"], b["sy"], b["n"]]
        h = moment_error(v["n"], coefficients, scales, 2.0, level)
        return np.where(np.isnan(rho), np.nan, h)

    threshold = _cov_threshold(stat, b, 0.95)

    def accuracy(drawn: Drawn, level: float) -> Accuracy:
        return (
            _cov_accuracy(stat, drawn, errors, level, rho_error),
            (drawn.noisy["n"] < 2) | (drawn.noisy["n"] <= _cov_threshold(stat, b, level)),
            drawn.noisy["n"],
        )

    return StatisticPlan(
        statistic=stat,
        mechanism="laplace_moments",
        epsilon=stat.epsilon,
        sensitivity=max(c.sensitivity for c in cals.values()),
        scale=max(c.scale for c in cals.values()),
        error95=None,
        details={
            "sizes": "private",
            "parts": {p: {**c.details(), "epsilon": share} for p, c in cals.items()},
        },
        _check=_check_parts(cals, stat),
        _draw=draw,
        _accuracy=accuracy,
        note=_SIZE_NOTE.format(math.floor(threshold)),
        uninformative_count=threshold,
    )


def _cov_threshold(stat: Statistic, b: Mapping[str, float], level: float) -> float:
    """The noisy count at or below which a covariance release is uninformative: that of
    either variance, or of the covariance (its coefficients at their largest, its range
    ``n R_x R_y / (2 (n - 1))``)."""
    o = stat.options
    lx, ux, ly, uy = stat.lower, stat.upper, o["lower_y"], o["upper_y"]
    cx, cy = max(abs(lx), abs(ux)), max(abs(ly), abs(uy))
    rx, ry = ux - lx, uy - ly
    worst = [1.0, cy, cx, cx * cy + rx * ry / 2]
    return max(
        _variance_threshold(lx, ux, b["sxx"], b["sx"], b["n"], level),
        _variance_threshold(ly, uy, b["syy"], b["sy"], b["n"], level),
        moment_threshold(worst, [b["sxy"], b["sx"], b["sy"], b["n"]], rx * ry / 2, level),
    )


def _cov_accuracy(
    stat: Statistic,
    drawn: Drawn,
    errors: Callable[[Drawn, float], tuple[np.ndarray, ...]],
    level: float,
    rho_error: Callable[[Drawn, float], np.ndarray],
) -> dict[str, np.ndarray]:
    """The four columns' half-widths: the variances and covariance by ``errors``, the
    correlation by ``rho_error``."""
    ox, oy, oc, orho = stat.outputs()
    hx, hy, hc = errors(drawn, level)
    return {ox: hx, oy: hy, oc: hc, orho: rho_error(drawn, level)}


def _plan_cov_public(stat: Statistic, sizes: np.ndarray) -> StatisticPlan:
    """Liu (2019), Simulation study 1, per group: variances, then the covariance inside
    ``[-sqrt(S*xx S*yy), sqrt(S*xx S*yy)]`` from the *sanitized* variances. Epsilon split
    in three; every part by the bounded mechanism with the group's public size."""
    o = stat.options
    lx, ux, ly, uy = stat.lower, stat.upper, o["lower_y"], o["upper_y"]
    share = min(split_epsilon(stat.epsilon, [1.0] * 3))
    kw = {"method": stat.method, "calibration": stat.calibration}
    var_cals: dict[int, tuple[Any, Any]] = {}
    for n in (int(v) for v in np.unique(sizes)):
        if n >= 2:
            var_cals[n] = (
                calibrate_bounded(
                    share, sens.variance(lx, ux, n), 0.0, sens.variance_bound(lx, ux, n), **kw
                ),
                calibrate_bounded(
                    share, sens.variance(ly, uy, n), 0.0, sens.variance_bound(ly, uy, n), **kw
                ),
            )
    if not var_cals:
        raise InvalidParameterError(
            f"statistic {stat.name!r}: every group's public size is below 2; nothing to release"
        )
    parts = [stat.part(p) for p in ("var_x", "var_y", "cov")]

    def check(exact: Mapping[str, np.ndarray]) -> None:
        for n, (cx, cy) in var_cals.items():
            rows = sizes == n
            cx.check(exact[parts[0]][rows])
            cy.check(exact[parts[1]][rows])
        if not np.isfinite(exact[parts[2]][sizes >= 2]).all():
            raise InvalidDataError(f"statistic {stat.name!r}: a covariance is not finite")

    def draw(exact: Mapping[str, np.ndarray], rng: np.random.Generator) -> dict:
        vx, vy, c = (exact[p] for p in parts)
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

    def errors(drawn: Drawn, level: float) -> tuple[np.ndarray, ...]:
        ox, oy, _, _ = stat.outputs()
        hx, _ = _bounded_errors({n: cx for n, (cx, _) in var_cals.items()}, sizes, level)
        hy, _ = _bounded_errors({n: cy for n, (_, cy) in var_cals.items()}, sizes, level)
        oc = stat.outputs()[2]
        hc = np.full(sizes.shape, np.nan)
        for i in np.flatnonzero(sizes >= 2):
            n = int(sizes[i])
            vx, vy = drawn[ox][i], drawn[oy][i]
            limit = math.sqrt(vx * vy)
            # the exact covariance is first clipped into +-limit (released variances):
            # it can lie beyond, as far as the variances' own intervals allow -- unless
            # the released value is too far inside for the clip to have moved it
            bound = math.sqrt(sens.variance_bound(lx, ux, n) * sens.variance_bound(ly, uy, n))
            beyond = max(0.0, min(math.sqrt((vx + hx[i]) * (vy + hy[i])), bound) - limit)
            if limit == 0.0:  # released as 0
                hc[i] = beyond
                continue
            cal = calibrate_bounded(share, sens.covariance(lx, ux, ly, uy, n), -limit, limit, **kw)
            noise = cal.error(level)
            clipped = abs(drawn[oc][i]) + noise >= limit
            hc[i] = min(noise + (beyond if clipped else 0.0), 2 * bound)
        return hx, hy, hc

    def rho_error(drawn: Drawn, level: float) -> np.ndarray:
        """The correlation ``C / s`` to first order, its three independent errors'
        half-widths added in quadrature: ``(h_C / s)^2 + (rho h_x / (2 V_x))^2 + (rho h_y
        / (2 V_y))^2`` (exact for normal errors; the worst-case half-widths of the
        bounded mechanism make it conservative)."""
        ox, oy, _, orho = stat.outputs()
        hx, hy, hc = errors(drawn, level)
        vx, vy, rho = drawn[ox], drawn[oy], drawn[orho]
        with np.errstate(divide="ignore", invalid="ignore"):
            h = np.sqrt(
                (hc / np.sqrt(vx * vy)) ** 2
                + (rho * hx / (2 * vx)) ** 2
                + (rho * hy / (2 * vy)) ** 2
            )
        return np.where(np.isnan(rho), np.nan, np.minimum(h, 2.0))

    def accuracy(drawn: Drawn, level: float) -> Accuracy:
        fx = _bounded_errors({n: cx for n, (cx, _) in var_cals.items()}, sizes, level)[1]
        fy = _bounded_errors({n: cy for n, (_, cy) in var_cals.items()}, sizes, level)[1]
        return _cov_accuracy(stat, drawn, errors, level, rho_error), fx | fy, None

    # exact calibration (paper + truncated is refused by cov()): each part costs its share
    return StatisticPlan(
        statistic=stat,
        mechanism="truncated_laplace" if stat.method == "truncated" else "bit_laplace",
        epsilon=stat.epsilon,
        sensitivity=max(cx.sensitivity for cx, _ in var_cals.values()),
        scale=max(max(cx.scale, cy.scale) for cx, cy in var_cals.values()),
        # data-free: the variances' (worst over the exact values and the groups' sizes)
        error95=max(max(cx.error(0.95), cy.error(0.95)) for cx, cy in var_cals.values()),
        details={
            "sizes": "public",
            "method": stat.method,
            "calibration": stat.calibration,
            "split": "variance x, variance y, covariance: epsilon / 3 each",
        },
        _check=check,
        _draw=draw,
        _accuracy=accuracy,
        note=(
            "error95 is the variances'; the covariance's and correlation's depend on "
            "the released variances (their bounds): see release.accuracy() after release"
        ),
    )


# -- constructors (the public ``dpframe.agg`` functions) ----------------------------------


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(f"name must be a non-empty string, got {name!r}")
    if name.startswith(RESERVED_PREFIX):  # its parts would read as dpframe's own columns
        raise InvalidParameterError(
            f"name {name!r} starts with {RESERVED_PREFIX!r}, as the names of dpframe's own "
            "columns do (a bad-value count, the rows kept); give the statistic another name"
        )
    return name


def _name_of(name: Any, default: str) -> str:
    """A statistic's name: ``name`` if given (:func:`_check_name`), else ``default``, made
    of its columns' names (a column named as dpframe's own is refused as a column, before
    any read: :func:`dpframe.engines.driver.check_sources`)."""
    return default if name is None else _check_name(name)


def check_statistic_names(statistics: Sequence[Statistic]) -> None:
    """Refuse statistics of one release that share a name, before anything is read or
    charged.

    A statistic's name names everything the release makes of it: its exact aggregates
    (``<name>:<part>``, e.g. a quantile's histogram ``<name>:hist``), its bounds pass
    and its accuracy columns (``<name>_noisy_n``), not only its released columns. Two
    statistics of one name would share them: the second quantile of a column would be
    read off the first one's histogram. Distinct names give distinct exact aggregates:
    each is ``<name>:<part>``, and no part's own name holds a ``:``.

    Examples
    --------
    >>> a = quantile("x", [0.25], lower=0, upper=1, epsilon=1.0)
    >>> b = quantile("x", [0.75], lower=0, upper=9, epsilon=1.0)
    >>> check_statistic_names([a, b])
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: statistics are named ['x_quantile'] more than once...
    """
    names = [s.name for s in statistics]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidParameterError(
            f"statistics are named {repeated} more than once: a statistic's name names its "
            "exact aggregates and accuracy columns too, so each needs its own; "
            + advise(
                python="pass name= to each (two quantiles of a column: one "
                "quantile(column, [q1, q2]), or name= on each)",
                spec="give each statistic its own name = ... (two quantiles of a column: "
                "one statistic with q = [q1, q2])",
            )
        )


def _check_column(column: Any, what: str = "column") -> str:
    if not isinstance(column, str) or not column:
        raise InvalidParameterError(f"{what} must be a column name, got {column!r}")
    return column


def _with_auto(
    stat: Statistic, given: Mapping[str, float | None], bounds_epsilon: Any
) -> Statistic:
    """``stat`` with its ``"auto"`` bounds (``given``: None where the argument was
    ``"auto"``) found by a first pass, checked; unchanged if none is ``"auto"``."""
    auto = tuple(n for n, v in given.items() if v is None)
    if not auto:
        if bounds_epsilon is not None:
            raise InvalidParameterError(
                f"bounds_epsilon: {stat.name!r} has no bound set to {AUTO!r}; drop "
                f"bounds_epsilon, or set a bound to {AUTO!r} (found by a first pass)"
            )
        return stat
    if stat.mechanism == "gaussian":
        raise InvalidParameterError(
            f"{', '.join(auto)}: {AUTO!r} bounds are not offered with mechanism='gaussian' "
            "yet (the bounds pass is charged epsilon); give the bounds, or use "
            "mechanism='laplace'"
        )
    if stat.calibration == "paper" and stat.method == "truncated":
        raise InvalidParameterError(
            f"{', '.join(auto)}: {AUTO!r} bounds cannot hold with calibration='paper', "
            "whose charge depends on the bounds (not known until the first pass is "
            "drawn); use calibration='exact' (the default), or give the bounds"
        )
    share = check_bounds_epsilon(bounds_epsilon, stat.epsilon)
    return replace(stat, auto=auto, bounds_epsilon=share)


def _bounded(
    kind: str,
    column: Any,
    lower: Any,
    upper: Any,
    epsilon: Any,
    method: Any,
    calibration: Any,
    name: Any,
    bounds_epsilon: Any = None,
) -> Statistic:
    """A mean, proportion or variance statistic, its arguments checked."""
    column = _check_column(column)
    lo, hi = check_auto_bounds(lower, upper)
    stat = Statistic(
        kind,
        _name_of(name, f"{column}_{kind}"),
        check_epsilon(epsilon),
        column,
        lo,
        hi,
        check("method", method),
        check("calibration", calibration),
    )
    return _with_auto(stat, {"lower": lo, "upper": hi}, bounds_epsilon)


def _noise(mechanism: Any, epsilon: Any, rho: Any, sigma: Any) -> tuple[str, float, dict[str, Any]]:
    """The checked noise of a count or sum: (mechanism, epsilon, options)."""
    mechanism = check("mechanism", mechanism)
    if mechanism == "laplace":
        if rho is not None or sigma is not None:
            fix = advise(
                python="pass mechanism='gaussian' (on a zCDP budget), or epsilon=...",
                spec="set mechanism = 'gaussian' (on a zCDP budget), or epsilon = ...",
            )
            raise InvalidParameterError(
                f"rho, sigma: these set Gaussian noise; {fix} for Laplace noise"
            )
        if epsilon is None:
            raise InvalidParameterError("epsilon: Laplace noise needs epsilon=... (> 0)")
        return mechanism, check_epsilon(epsilon), {}
    if epsilon is not None:
        fix = advise(python="pass rho=... (or sigma=...", spec="set rho = ... (or sigma = ...")
        raise InvalidParameterError(
            f"epsilon: Gaussian noise is charged rho (zCDP), not epsilon; {fix}, the noise's "
            "standard deviation) instead"
        )
    if (rho is None) == (sigma is None):
        raise InvalidParameterError(
            "rho, sigma: Gaussian noise needs exactly one of rho=... (its zCDP cost) or "
            "sigma=... (its standard deviation)"
        )
    if rho is not None:
        return mechanism, 0.0, {"rho": check("rho", rho)}
    return mechanism, 0.0, {"sigma": check("sigma", sigma)}


def count(
    *,
    epsilon: float | None = None,
    name: str = "count",
    mechanism: str = "laplace",
    rho: float | None = None,
    sigma: float | None = None,
) -> Statistic:
    """The number of records per group, released with integer Laplace noise (``epsilon``),
    or discrete Gaussian noise (``mechanism="gaussian"`` with ``rho`` or ``sigma``).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.count(epsilon=0.5).name
    'count'
    >>> dpframe.agg.count(mechanism="gaussian", rho=0.01).options
    {'rho': 0.01}
    """
    mech, eps, options = _noise(mechanism, epsilon, rho, sigma)
    return Statistic("count", _check_name(name), eps, options=options, mechanism=mech)


def count_distinct(
    *,
    column: str | None = None,
    epsilon: float | None = None,
    name: str = "persons",
    mechanism: str = "laplace",
    rho: float | None = None,
    sigma: float | None = None,
) -> Statistic:
    """The number of distinct persons per group ("patients per ward", not visits), with
    integer Laplace noise (``epsilon``) or discrete Gaussian noise
    (``mechanism="gaussian"`` with ``rho`` or ``sigma``), as :func:`count`.

    The persons are those of the release's privacy unit (``group_by(..., unit="pid",
    max_rows=..., max_groups=...)``), counted over the rows each person keeps: a person
    counts once in each of at most ``max_groups`` groups, however many rows they have
    there, so the noise scales with ``max_groups`` only (l1 ``max_groups``, twice that
    under substitution: :func:`dpframe.core.units.distinct_sensitivity`). Refused under
    the record unit (one row is one person). Released as an integer column named
    ``"persons"`` by default, clamped at 0 (``nonnegative``) and, where the same release
    holds :func:`count` (the persons' kept rows), at most that count in every group
    (post-processing: a person keeps at least one row in each group they count in).

    Parameters
    ----------
    column : str, optional
        The unit's person column, if you want to name it (anything else is refused: the
        distinct values of another column are not offered).
    epsilon, mechanism, rho, sigma
        The noise, as :func:`count`.
    name : str, default "persons"
        The released column.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> visits = pl.DataFrame({"patient": [1, 1, 1, 2, 3], "ward": ["A", "A", "B", "A", "B"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     out = dpframe.group_by(
    ...         visits, "ward", margins=pl.DataFrame({"ward": ["A", "B"]}),
    ...         unit="patient", max_rows=3, max_groups=2,
    ...     ).agg(dpframe.agg.count_distinct(epsilon=1.0)).collect()
    >>> out.columns, out["persons"].dtype
    (['ward', 'persons'], Int64)
    """
    if column is not None:
        column = _check_column(column)
    mech, eps, options = _noise(mechanism, epsilon, rho, sigma)
    return Statistic(
        "count_distinct", _check_name(name), eps, column, options=options, mechanism=mech
    )


def sum(
    column: str,
    *,
    lower: float | str,
    upper: float | str,
    epsilon: float | None = None,
    name: str | None = None,
    mechanism: str = "laplace",
    rho: float | None = None,
    sigma: float | None = None,
    bounds_epsilon: float | None = None,
) -> Statistic:
    """The per-group sum of ``column`` after clipping each value to ``[lower, upper]``,
    with Laplace noise (``epsilon``) or discrete Gaussian noise (``mechanism="gaussian"``
    with ``rho`` or ``sigma``).

    ``lower`` and ``upper`` may be ``"auto"``: a first pass, charged ``bounds_epsilon``
    out of ``epsilon`` (default :data:`~dpframe.core.constraints.AUTO_BOUNDS_SHARE` of
    it), finds them privately (:mod:`dpframe.mechanisms.private_bounds`).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.sum("income", lower=0, upper=100_000, epsilon=0.5).name
    'income_sum'
    >>> dpframe.agg.sum("income", lower=0, upper="auto", epsilon=0.5).auto
    ('upper',)
    """
    column = _check_column(column)
    lo, hi = check_auto_bounds(lower, upper)
    mech, eps, options = _noise(mechanism, epsilon, rho, sigma)
    stat = Statistic(
        "sum",
        _name_of(name, f"{column}_sum"),
        eps,
        column,
        lo,
        hi,
        options=options,
        mechanism=mech,
    )
    return _with_auto(stat, {"lower": lo, "upper": hi}, bounds_epsilon)


def mean(
    column: str,
    *,
    lower: float | str,
    upper: float | str,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
    bounds_epsilon: float | None = None,
) -> Statistic:
    """The per-group mean of ``column`` (values clipped to ``[lower, upper]``).

    With public group sizes it is released by the bounded mechanism (``method``,
    ``calibration`` as in :func:`dpframe.truncated_laplace`); otherwise as a noisy sum
    over a noisy count, clipped to the bounds.

    ``lower`` and ``upper`` may be ``"auto"``: a first pass, charged ``bounds_epsilon``
    out of ``epsilon`` (default :data:`~dpframe.core.constraints.AUTO_BOUNDS_SHARE` of
    it), finds them privately (:mod:`dpframe.mechanisms.private_bounds`).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.mean("age", lower=18, upper=90, epsilon=0.5).name
    'age_mean'
    """
    return _bounded(
        "mean", column, lower, upper, epsilon, method, calibration, name, bounds_epsilon
    )


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
    lower: float | str,
    upper: float | str,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
    bounds_epsilon: float | None = None,
) -> Statistic:
    """The per-group sample variance (divisor n - 1) of ``column`` clipped to the bounds.

    Released inside ``[0, n (upper - lower)**2 / (4 (n - 1))]`` (Liu 2019, Table 1).

    ``lower`` and ``upper`` may be ``"auto"``: a first pass, charged ``bounds_epsilon``
    out of ``epsilon`` (default :data:`~dpframe.core.constraints.AUTO_BOUNDS_SHARE` of
    it), finds them privately (:mod:`dpframe.mechanisms.private_bounds`).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.var("score", lower=0, upper=10, epsilon=0.5).name
    'score_var'
    """
    return _bounded("var", column, lower, upper, epsilon, method, calibration, name, bounds_epsilon)


def cov(
    x: str,
    y: str,
    *,
    lower_x: float | str,
    upper_x: float | str,
    lower_y: float | str,
    upper_y: float | str,
    epsilon: float,
    method: str = "truncated",
    calibration: str = "exact",
    name: str | None = None,
    bounds_epsilon: float | None = None,
) -> Statistic:
    """Per-group variances of ``x`` and ``y``, their covariance and correlation.

    Releases four columns, ``{name}_var_{x}``, ``{name}_var_{y}``, ``{name}_cov`` and
    ``{name}_corr`` (``name`` defaults to ``"{x}_{y}"``). With public group sizes the
    variances are released first, then the covariance inside
    ``[-sqrt(S*xx S*yy), sqrt(S*xx S*yy)]`` of the *sanitized* variances (Liu 2019,
    Table 1), epsilon split in three; the correlation is post-processing. With private
    sizes, from six noisy sums (epsilon split in six). Any bound may be ``"auto"``
    (found privately by a first pass, charged ``bounds_epsilon`` out of ``epsilon``; see
    :func:`mean`).

    Examples
    --------
    >>> import dpframe
    >>> s = dpframe.agg.cov("x", "y", lower_x=-3, upper_x=3, lower_y=-4.5, upper_y=4.5,
    ...                     epsilon=1.0)
    >>> s.outputs()
    ['x_y_var_x', 'x_y_var_y', 'x_y_cov', 'x_y_corr']
    """
    x, y = _check_column(x, "x"), _check_column(y, "y")
    if x == y:
        raise InvalidParameterError(f"x and y must be different columns, got {x!r} twice")
    lx, ux = check_auto_bounds(lower_x, upper_x, ("lower_x", "upper_x"))
    ly, uy = check_auto_bounds(lower_y, upper_y, ("lower_y", "upper_y"))
    stat = Statistic(
        "cov",
        _name_of(name, f"{x}_{y}"),
        check_epsilon(epsilon),
        x,
        lx,
        ux,
        check("method", method),
        check("calibration", calibration),
        options={"y": y, "lower_y": ly, "upper_y": uy},
    )
    if stat.calibration == "paper" and stat.method == "truncated":
        raise InvalidParameterError(
            "calibration='paper' is not offered for cov: the covariance's bounds come from "
            "the sanitized variances, so its true loss could not be charged beforehand; "
            "use calibration='exact' (or method='bit')"
        )
    given = {"lower_x": lx, "upper_x": ux, "lower_y": ly, "upper_y": uy}
    return _with_auto(stat, given, bounds_epsilon)


# -- quantiles: selection among the grid's candidates (dpframe.mechanisms.quantile) -------

#: The probabilities of :func:`quantile` by default: the quartiles.
QUARTILES = (0.25, 0.5, 0.75)


def quantile_columns(
    column: str, q: tuple[float, ...], name: str | None, *, median: bool = False
) -> list[str]:
    """The released columns of a quantile statistic: one per probability.

    ``<column>_q25`` for 0.25, ``<column>_q2_5`` for 0.025 (the percentage, its decimal
    point written ``_``), ``<column>_median`` for a median; with ``name``: ``name`` for
    one probability, else ``<name>_q25``, ...

    Examples
    --------
    >>> quantile_columns("age", (0.025, 0.5, 0.75), None)
    ['age_q2_5', 'age_q50', 'age_q75']
    >>> quantile_columns("age", (0.5,), None, median=True), quantile_columns("age", (0.5,), "mid")
    (['age_median'], ['mid'])
    """
    from decimal import Decimal

    if name is not None and len(q) == 1:
        return [name]
    if median and name is None:
        return [f"{column}_median"]
    stem = column if name is None else name
    percents = [format((Decimal(repr(p)) * 100).normalize(), "f") for p in q]
    return [f"{stem}_q{p.replace('.', '_')}" for p in percents]


def quantile_grid(stat: Statistic) -> Any:
    """The candidates of a quantile statistic: the uniform grid of its bounds and
    resolution (:func:`dpframe.mechanisms.quantile.uniform_grid`)."""
    from dpframe.mechanisms.quantile import uniform_grid

    return uniform_grid(
        float(stat.lower), float(stat.upper), resolution=stat.options.get("resolution")
    )


def _plan_quantile(stat: Statistic, neighbours: str, unit: PrivacyUnit) -> StatisticPlan:
    """Quantiles by the recursive ApproximateQuantiles with an exact exponential
    mechanism over split candidates at each level (:mod:`dpframe.mechanisms.quantile`):
    ``epsilon`` covers every probability of the statistic, every group (disjoint) and,
    under a person unit, ``max_groups`` groups of ``max_rows`` rows a person."""
    from dpframe.mechanisms.quantile import plan_quantiles, quantile_sides

    rows, sides = quantile_sides(unit, neighbours)
    grid = quantile_grid(stat)
    kernel = plan_quantiles(stat.options["q"], grid, stat.epsilon, rows=rows, sides=sides)
    part, columns = stat.part("hist"), stat.outputs()

    def draw(exact: Mapping[str, np.ndarray], rng: np.random.Generator) -> Drawn:
        released = kernel.draw(np.asarray(exact[part]), rng)
        return Drawn({c: released[:, j] for j, c in enumerate(columns)})

    def accuracy(drawn: Drawn, level: float) -> Accuracy:
        h = kernel.rank_error(level)  # data-free: the same in every group
        return {c: np.full(np.shape(drawn[c]), h) for c in columns}, None, None

    error = kernel.rank_error(0.95)
    scale = 2.0 * rows / kernel.epsilon_level
    return StatisticPlan(
        statistic=stat,
        mechanism="exponential",
        epsilon=stat.epsilon,
        sensitivity=float(rows),
        scale=scale,
        error95=error,
        details={
            "q": list(kernel.q),
            "bins": grid.bins,
            "resolution": stat.options.get("resolution"),
            "method": "ApproximateQuantiles",
            "levels": kernel.levels,
            "epsilon_level": kernel.epsilon_level,
            "rows": rows,
            "sides": sides,
        },
        _check=lambda exact: kernel.check(np.asarray(exact[part])),
        _draw=draw,
        _accuracy=accuracy,
        note=(
            f"error95 is a rank error: <= {error:.0f} rows of the group "
            f"(ApproximateQuantiles, {kernel.levels} levels; a value is a grid edge, "
            f"{grid.bins} bins)"
        ),
    )


def _quantile(
    kind: str,
    column: Any,
    q: Any,
    bounds: tuple[Any, Any],
    epsilon: Any,
    grid: Any,
    name: Any,
    bounds_epsilon: Any = None,
) -> Statistic:
    """A quantile or median statistic, its arguments checked (``grid``: the resolution;
    the grid itself too). A bound may be ``"auto"``: found by a first pass, the
    candidates are then :data:`~dpframe.mechanisms.quantile.DEFAULT_BINS` equal bins
    of the found bounds (a ``resolution``, an absolute step, is refused with it)."""
    column = _check_column(column)
    lo, hi = check_auto_bounds(*bounds)
    auto = lo is None or hi is None
    if auto and grid is not None:
        raise InvalidParameterError(
            f"resolution: not offered with 'auto' bounds (the step of the candidates "
            f"cannot be checked before the first pass finds the bounds; the {kind} takes "
            "1000 equal bins of the bounds found); drop resolution, or give lower and "
            "upper as numbers"
        )
    resolution = grid
    qs = check("q", q)
    named = None if name is None else _check_name(name)
    stat = Statistic(
        kind,
        named or f"{column}_{kind}",
        check_epsilon(epsilon),
        column,
        lo,
        hi,
        options={
            "q": qs,
            "resolution": None if resolution is None else check("resolution", resolution),
            "columns": tuple(quantile_columns(column, qs, named, median=kind == "median")),
            "named": named is not None,
        },
    )
    if not auto:
        quantile_grid(stat)  # refuses a resolution the bounds cannot hold
    return _with_auto(stat, {"lower": lo, "upper": hi}, bounds_epsilon)


def quantile(
    column: str,
    q: float | Sequence[float] = QUARTILES,
    *,
    lower: float | str,
    upper: float | str,
    epsilon: float,
    resolution: float | None = None,
    name: str | None = None,
    bounds_epsilon: float | None = None,
) -> Statistic:
    """Per-group quantiles of ``column`` (values clipped to ``[lower, upper]``), all the
    probabilities ``q`` for one ``epsilon``.

    The candidates are the edges of a grid on ``[lower, upper]`` (step ``resolution``,
    default 1000 bins); the quantiles are chosen by the recursive ApproximateQuantiles of
    Kaplan, Schnapp & Stemmer (ICML 2022) with an exact exponential mechanism at each
    of its ``ceil(log2(len(q) + 1))`` levels, splitting inside tied rows
    (:mod:`dpframe.mechanisms.quantile`). Each released value is a grid edge in
    ``[lower, upper]``, non-decreasing in ``q``; every group is released, an empty one
    too. One column per probability: ``<column>_q25``, ``<column>_q50``, ...
    (``<column>_q2_5`` for 0.025); with ``name=``, ``<name>`` for one probability, else
    ``<name>_q25``, ...

    ``lower`` and ``upper`` may be ``"auto"``: a first pass, charged ``bounds_epsilon``
    out of ``epsilon`` (default a fixed share), finds them privately before the
    quantiles are drawn; the candidates are then 1000 equal bins of the bounds found
    (``resolution``, an absolute step, is refused with ``"auto"``).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.quantile("income", lower=0, upper="auto", epsilon=1.0).auto
    ('upper',)
    >>> dpframe.agg.quantile("income", lower=0, upper=1e5, epsilon=1.0).outputs()
    ['income_q25', 'income_q50', 'income_q75']
    >>> dpframe.agg.quantile("age", [0.1, 0.9], lower=0, upper=100, epsilon=1.0,
    ...                      resolution=1.0).outputs()
    ['age_q10', 'age_q90']
    """
    bounds = (lower, upper)
    return _quantile("quantile", column, q, bounds, epsilon, resolution, name, bounds_epsilon)


def median(
    column: str,
    *,
    lower: float | str,
    upper: float | str,
    epsilon: float,
    resolution: float | None = None,
    name: str | None = None,
    bounds_epsilon: float | None = None,
) -> Statistic:
    """The per-group median of ``column``: :func:`quantile` with ``q=0.5``, released as
    ``<column>_median`` (or ``name``). Either bound may be ``"auto"``, as for
    :func:`quantile`.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.median("age", lower=0, upper=100, epsilon=0.5).outputs()
    ['age_median']
    """
    bounds = (lower, upper)
    return _quantile("median", column, 0.5, bounds, epsilon, resolution, name, bounds_epsilon)
