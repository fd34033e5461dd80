"""Plan by accuracy: the least budget that meets each statistic's 95 % error, and the best
split of a fixed budget (pure functions, data-free, no polars).

``error95`` is, throughout dpframe, the 95 % quantile of ``|released - exact|`` that a
plan prints (``dpframe plan``, ``summarize()``): the smallest ``h`` with ``P(|noise| <=
h) >= 0.95`` for the mechanism's own noise law, on its own grid -- the discrete Laplace
and discrete Gaussian noise in grid steps times the step, the bounded (truncated/BIT)
noise's exact quantile, a quantile's data-free rank bound. A statistic that is not an
integer is also rounded to its grid before the noise (at most half a step, ``g <=
sensitivity / 1024``, :mod:`dpframe.core.grid`); counts are on their grid of 1 and have no
rounding.

An :class:`ErrorCurve` is one statistic's ``error95`` as a function of its budget (an
``epsilon``, or a ``rho`` for discrete Gaussian noise), computed by the same calibration
the release draws with (so the error found is the error drawn). The error never grows
with the budget; :meth:`ErrorCurve.least` inverts it by bisection: the least budget, to a
relative :data:`TOLERANCE`, then rounded *up* to :data:`DIGITS` significant digits (a
decimal the ledger records as written), whose error meets the target.

:func:`allocate` solves a whole set of statistics:

* ``budget="least"``: each statistic's least budget, composed under the ledger's
  ``accounting`` -- ``"basic"``: the epsilons add up; ``"zcdp"``: the rhos add up (a pure
  epsilon-DP statistic costs ``epsilon**2 / 2``); ``"pld"``: each statistic's least
  epsilon meets its target, and their sum is an upper bound of what the ledger's tight
  composition charges (the per-statistic minima are exact; the composed total is lower);
* ``budget=B`` (a number): the targets are weights; the split of ``B`` that minimises the
  worst ratio ``error_i / target_i``. For a ratio ``t`` each statistic needs its least
  budget meeting ``t * target_i``; what they need together never grows with ``t``, so the
  least ``t`` whose need fits in ``B`` is found by bisection on ``t``, to a relative
  :data:`RATIO_TOLERANCE`.

Where an error depends on the data (a quantile's value error, PRAM's estimated shares) the
curve states its assumption (:attr:`ErrorCurve.assumption`).

Examples
--------
>>> from dpframe.mechanisms.allocation import allocate, laplace_curve
>>> counts = laplace_curve("count", 1.0, counts=True)
>>> sums = laplace_curve("income_total", 150000.0)
>>> a = allocate([counts, sums], {"count": 50, "income_total": 2e6})
>>> a.budgets["count"], a.errors["count"] <= 50
(0.0593128, True)
>>> round(a.total, 4)
0.284
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from dpframe.core.constraints import (
    LEAST,
    PRIVACY_MIN,
    QUANTILE_STATISTICS,
    check,
    check_positive,
)
from dpframe.errors import BudgetExceededError, DPFrameError, InvalidParameterError

if TYPE_CHECKING:
    from dpframe.core.units import PrivacyUnit
    from dpframe.mechanisms.statistics import Statistic

__all__ = [
    "DIGITS",
    "LEVEL",
    "RATIO_TOLERANCE",
    "TOLERANCE",
    "Allocation",
    "ErrorCurve",
    "allocate",
    "even_split",
    "gaussian_curve",
    "laplace_curve",
    "meet_targets",
    "pram_curve",
    "quantile_curve",
    "ratio_error95",
    "relative_scale",
    "round_up",
    "statistic_curve",
]

#: Relative precision of a least budget's bisection (before it is rounded up).
TOLERANCE = 1e-12
#: Significant digits of a budget found: rounded *up* to them (at most ``1e-5`` relative).
DIGITS = 6
#: Relative precision of the worst error/target ratio of a fixed budget's split.
RATIO_TOLERANCE = 1e-6
#: The 95 % level every curve is computed at.
LEVEL = 0.95


def round_up(x: float, digits: int = DIGITS, *, down: bool = False) -> float:
    """The smallest decimal of ``digits`` significant digits that is ``>= x`` (the largest
    ``<= x`` with ``down=True``).

    Examples
    --------
    >>> round_up(0.123456789), round_up(0.1), round_up(0.123456789, down=True)
    (0.123457, 0.1, 0.123456)
    """
    d = Decimal(repr(float(x)))  # the shortest decimal that reads back as x
    exponent = d.adjusted() - digits + 1
    way = ROUND_FLOOR if down else ROUND_CEILING
    y = float(d.quantize(Decimal(1).scaleb(exponent), rounding=way))
    if down:
        return y if y <= x else math.nextafter(y, -math.inf)
    return y if y >= x else math.nextafter(y, math.inf)


@dataclass(frozen=True)
class ErrorCurve:
    """One statistic's 95 % error as a function of its budget.

    Attributes
    ----------
    name : str
        The statistic (as the plan names it).
    currency : {"epsilon", "rho"}
        What its budget is: an epsilon (pure DP) or a rho (zCDP, discrete Gaussian).
    error : callable
        ``budget -> error95``, never increasing in the budget; ``inf`` where the mechanism
        refuses the budget (too small for its grid).
    units : str
        What the error is in (``"value"``: the statistic's units; ``"rows"``; ``"share"``).
    assumption : str
        What the error assumes about the data, if anything (shown in the plan).
    highest : float
        Where the search for the largest budget the mechanism takes starts
        (:attr:`largest`).

    Examples
    --------
    >>> c = ErrorCurve("x", "epsilon", lambda e: 3.0 / e)
    >>> c.least(1.0)
    3.0
    """

    name: str
    currency: str
    error: Callable[[float], float]
    units: str = "value"
    assumption: str = ""
    highest: float = 1e6

    def __call__(self, budget: float) -> float:
        try:
            e = float(self.error(budget))
        except DPFrameError:  # a budget the mechanism cannot take (too small or too large)
            return math.inf
        return e if not math.isnan(e) else math.inf

    @cached_property
    def largest(self) -> float:
        """The largest budget the mechanism takes (at most :attr:`highest`; to a relative
        :data:`TOLERANCE`): above it the calibration refuses the budget (e.g. a count's
        Laplace epsilon is at most 2 on its integer grid)."""
        top = self.highest
        if math.isfinite(self(top)):
            return top
        low = top
        while not math.isfinite(self(low)):
            low /= 2.0
            if low < PRIVACY_MIN:
                raise InvalidParameterError(
                    f"statistic {self.name!r}: its mechanism takes no budget at all"
                )
        high = 2.0 * low
        while high / low - 1.0 > TOLERANCE:
            mid = math.sqrt(low * high)
            if math.isfinite(self(mid)):
                low = mid
            else:
                high = mid
        return round_up(low, down=True)

    def least(self, target: float) -> float | None:
        """The least budget whose error is at most ``target`` (``None``: none is).

        Bisection on the budget (in log scale, to a relative :data:`TOLERANCE`), then the
        bound rounded up to :data:`DIGITS` significant digits and checked again.

        Examples
        --------
        >>> laplace_curve("count", 1.0, counts=True).least(50.0)
        0.0593128
        """
        top = self.largest
        if self(top) > target:
            return None
        hi = min(1.0, top)
        while self(hi) > target:
            hi = min(hi * 2.0, top)
        lo = hi / 2.0
        while lo > PRIVACY_MIN and self(lo) <= target:
            hi, lo = lo, lo / 2.0
        if lo <= PRIVACY_MIN:
            return round_up(hi)
        while hi / lo - 1.0 > TOLERANCE:
            mid = math.sqrt(lo * hi)
            if self(mid) <= target:
                hi = mid
            else:
                lo = mid
        b = round_up(hi, down=True)  # a round decimal when it meets the target too
        if self(b) > target:
            b = round_up(hi)
        while self(b) > target:  # pragma: no cover - the error never grows with the budget
            b = round_up(math.nextafter(b, math.inf))
        return b


def laplace_curve(
    name: str, sensitivity: float, *, counts: bool = False, granularity: float | None = None
) -> ErrorCurve:
    """The grid Laplace mechanism's error (:func:`dpframe.mechanisms.laplace.calibrate_laplace`):
    a count's integer noise (``counts=True``: a grid of 1), or a sum's on its default grid.

    Examples
    --------
    >>> round(laplace_curve("s", 1.0)(1.0), 4)  # ~ ln 20, on the grid of 1/1024
    2.999
    """
    from dpframe.mechanisms.laplace import calibrate_laplace

    g = 1.0 if counts else granularity
    sens = check_positive("sensitivity", sensitivity)

    def error(eps: float) -> float:
        return calibrate_laplace(eps, sens, g, values_on_grid=counts).error(LEVEL)

    return ErrorCurve(name, "epsilon", error)


def gaussian_curve(
    name: str, sensitivity: float, *, counts: bool = False, changed: int = 1
) -> ErrorCurve:
    """The discrete Gaussian mechanism's error at its zCDP ``rho``
    (:func:`dpframe.mechanisms.gaussian.calibrate_gaussian`; ``sensitivity`` in l2).

    Examples
    --------
    >>> gaussian_curve("count", 1.0, counts=True)(0.5)  # sigma = 1: |Z| <= 2 w.p. >= 0.95
    2.0
    """
    from dpframe.mechanisms.gaussian import calibrate_gaussian

    sens = check_positive("sensitivity", sensitivity)

    def error(rho: float) -> float:
        cal = calibrate_gaussian(
            sens,
            rho=rho,
            granularity=1.0 if counts else None,
            changed=changed,
            values_on_grid=counts,
        )
        return cal.error(LEVEL)

    return ErrorCurve(name, "rho", error)


def quantile_curve(
    name: str,
    q: float | Sequence[float],
    lower: float,
    upper: float,
    *,
    bins: int | None = None,
    rows: int = 1,
    sides: int = 1,
    group_size: int | None = None,
) -> ErrorCurve:
    """A quantile's error: its data-free rank bound
    (:meth:`dpframe.mechanisms.quantile.QuantilePlan.rank_error`), in rows; with
    ``group_size`` in the value's units under a stated assumption.

    The assumption (``group_size=n``): the group's ``n`` values are spread evenly over
    ``[lower, upper]``, so ``r`` rows are ``r (upper - lower) / n`` in value, plus one grid
    step (the release is a grid edge). A group with its values more concentrated near the
    quantile has a smaller value error; one more spread out, a larger one.

    Examples
    --------
    >>> c = quantile_curve("median", 0.5, 0, 1, bins=99)
    >>> round(c(1.0), 3), c.units
    (7.601, 'rows')
    """
    from dpframe.mechanisms.quantile import plan_quantiles, uniform_grid

    grid = uniform_grid(float(lower), float(upper), bins=bins)
    step = (float(upper) - float(lower)) / grid.bins

    def rank(eps: float) -> float:
        return plan_quantiles(q, grid, eps, rows=rows, sides=sides).rank_error(LEVEL)

    if group_size is None:
        return ErrorCurve(name, "epsilon", rank, units="rows")
    n = check("proportions_n", group_size, name="group_size")
    width = float(upper) - float(lower)

    def value(eps: float) -> float:
        return min(rank(eps) * width / n + step, width)

    assumption = f"{n} values spread evenly over [{lower:g}, {upper:g}]"
    return ErrorCurve(name, "epsilon", value, assumption=assumption)


def pram_curve(
    name: str, matrix_at: Callable[[float], np.ndarray], records: int, *, highest: float = 50.0
) -> ErrorCurve:
    """PRAM's estimation error: the 95 % error of an estimated share from ``records``
    released records, ``1.96 c / sqrt(n)`` with ``c`` the worst standard error over every
    category mix (:func:`dpframe.mechanisms.accuracy.pram_share_error`; the normal
    approximation) of the design ``matrix_at(epsilon)``.

    Examples
    --------
    >>> import numpy as np
    >>> def krr(eps):
    ...     e = np.exp(eps)
    ...     return np.array([[e, 1.0], [1.0, e]]) / (e + 1)
    >>> round(pram_curve("region", krr, 10000)(1.0), 4)  # 1.96 * 0.9595 / 100
    0.0188
    """
    from dpframe.mechanisms.accuracy import pram_share_error

    n = check("proportions_n", records, name="records")

    def error(eps: float) -> float:
        c = pram_share_error(matrix_at(eps))
        return math.inf if c is None else 1.96 * c / math.sqrt(n)

    return ErrorCurve(
        name,
        "epsilon",
        error,
        units="share",
        assumption=f"{n} records (normal approximation)",
        highest=highest,
    )


def statistic_curve(
    stat: Statistic,
    neighbours: str,
    unit: PrivacyUnit | None = None,
    *,
    group_size: int | None = None,
) -> ErrorCurve:
    """A grouped statistic's error95 as its own plan states it
    (:func:`dpframe.mechanisms.statistics.plan_statistic` at each budget: the very
    calibration the release draws with, so the error found is the plan's and the draw's).

    A count, distinct count or sum (Laplace: an epsilon; discrete Gaussian: a rho), or a
    quantile (its rank error in rows; in the value's units with ``group_size``, as
    :func:`quantile_curve` assumes). A ratio or moment (mean, proportion, var, cov) has an
    error that depends on the group's private size, and a bound found by a first pass
    (``"auto"``) is not known before it runs: both are refused, by name.

    Examples
    --------
    >>> import dpframe
    >>> c = statistic_curve(dpframe.agg.count(epsilon=1.0), "substitute")
    >>> c.least(50.0)  # substitution: a count moves by 2
    0.118626
    """
    from dpframe.core.units import RECORD
    from dpframe.mechanisms.statistics import plan_statistic, quantile_grid

    person = RECORD if unit is None else unit
    gaussian = stat.mechanism == "gaussian"
    if stat.auto:
        raise InvalidParameterError(
            f"error95 of {stat.name!r}: its bounds are found by a first pass ('auto'), so "
            "its error is not known before the run; give lower and upper, or its epsilon"
        )

    def at(budget: float) -> Statistic:
        if gaussian:
            options = {k: v for k, v in stat.options.items() if k != "sigma"}
            return replace(stat, options={**options, "rho": budget})
        return replace(stat, epsilon=budget)

    def error(budget: float) -> float:
        e = plan_statistic(at(budget), neighbours, unit=person).error95
        return math.inf if e is None else float(e)

    probe = plan_statistic(at(1.0), neighbours, unit=person)
    currency = "rho" if gaussian else "epsilon"
    if probe.error95 is None:
        parts = probe.details.get("parts") or {}
        if group_size is None or set(parts) != {"sum", "n"}:
            raise InvalidParameterError(
                f"error95 of {stat.name!r}: a {stat.kind}'s error depends on the group's "
                "size, which is private (a ratio of noisy sums); give group_size (the error "
                "at a group of that many rows) for a mean or proportion, its epsilon, or "
                "targets for its parts (a sum and a count)"
            )
        n = check("proportions_n", group_size, name="group_size")
        lo, hi = (0.0, 1.0) if stat.kind == "proportion" else (stat.lower, stat.upper)
        worst = max(abs(float(lo or 0.0)), abs(float(hi or 0.0)))

        def ratio(budget: float) -> float:
            found = plan_statistic(at(budget), neighbours, unit=person).details["parts"]
            return ratio_error95(_steps(found["sum"]), _steps(found["n"]), n, worst)

        return ErrorCurve(
            stat.name,
            currency,
            ratio,
            assumption=f"a group of {n} rows, its mean anywhere in [{lo:g}, {hi:g}]",
        )
    if stat.kind not in QUANTILE_STATISTICS:
        return ErrorCurve(stat.name, currency, error)
    if group_size is None:
        return ErrorCurve(stat.name, currency, error, units="rows")
    n = check("proportions_n", group_size, name="group_size")
    lower, upper = float(stat.lower or 0.0), float(stat.upper or 0.0)
    width = upper - lower
    step = width / quantile_grid(stat).bins

    def value(budget: float) -> float:
        return min(error(budget) * width / n + step, width)

    return ErrorCurve(
        stat.name,
        currency,
        value,
        assumption=f"{n} values spread evenly over [{lower:g}, {upper:g}]",
    )


def relative_scale(stat: Statistic, group_size: int) -> tuple[float, str]:
    """What a relative target of ``stat`` is a fraction of, at a group of ``group_size``
    rows: the largest value such a group can give (a count: ``n``; a sum: ``n`` times its
    largest ``|bound|``; a mean: its largest ``|bound|``; a proportion: 1; a quantile: its
    bounds' width), and the words that say so.

    Examples
    --------
    >>> import dpframe
    >>> relative_scale(dpframe.agg.count(epsilon=1.0), 1000)
    (1000.0, 'a group of 1000 rows')
    """
    n = check("proportions_n", group_size, name="group_size")
    lo, hi = float(stat.lower or 0.0), float(stat.upper or 0.0)
    big = max(abs(lo), abs(hi))
    if stat.kind == "count" or stat.kind == "count_distinct":
        return float(n), f"a group of {n} rows"
    if stat.kind == "sum":
        return n * big, f"{n} rows at most {big:g} each"
    if stat.kind == "mean":
        return big, f"the largest |mean| in [{lo:g}, {hi:g}]"
    if stat.kind == "proportion":
        return 1.0, "a proportion's largest value, 1"
    if stat.kind in QUANTILE_STATISTICS:
        return hi - lo, f"the width of [{lo:g}, {hi:g}]"
    raise InvalidParameterError(
        f"relative error95 of {stat.name!r}: a {stat.kind} has no relative target; give "
        "its error95 in its units"
    )


def _steps(part: Mapping[str, object]) -> tuple[float, float]:
    """A noisy part's grid step and its discrete Laplace scale in steps, from its plan's
    details (:meth:`dpframe.mechanisms.laplace.LaplaceCalibration.details`)."""
    g = float(part["granularity"])  # type: ignore[arg-type]
    units = round(float(part["sensitivity"]) / g)  # type: ignore[arg-type]
    return g, units / float(part["privacy_loss"])  # type: ignore[arg-type]


def _laplace_cdf(k: np.ndarray, t: float) -> np.ndarray:
    """``P(Z <= k)`` of the discrete Laplace law of scale ``t`` (``P(Z=k) ~ e^(-|k|/t)``)."""
    q = math.exp(-1.0 / t)
    k = np.asarray(k, dtype=float)
    with np.errstate(over="ignore"):
        low = np.power(q, -np.minimum(k, 0.0)) / (1.0 + q)
        high = 1.0 - np.power(q, np.maximum(k, -1.0) + 1.0) / (1.0 + q)
    return np.where(k < 0, low, high)


def ratio_error95(
    sums: tuple[float, float], counts: tuple[float, float], n: int, mean: float
) -> float:
    """The 95 % error of a ratio ``(S + E_s) / max(n + E_c, 1)`` of a group of ``n`` rows
    whose exact mean is ``mean`` (``S = n mean``): ``E_s`` discrete Laplace noise on the
    sum's grid, ``E_c`` on the count's, each given as ``(grid step, scale in steps)``.

    Exact for the noise laws (a sum over the count's noise of the sum's noise CDF), then
    the half-width found by bisection to a relative ``1e-9``. Before clipping, ``|E_s -
    mean E_c|`` is stochastically largest where ``|mean|`` is; clipping the ratio to its
    bounds (as the release does) only moves it towards the exact mean. So the error at
    the largest ``|mean|`` of the bounds, unclipped, holds for every mean within them,
    and is approached by a mean a few errors inside that bound (where clipping is rare).

    Examples
    --------
    >>> round(ratio_error95((1.0, 10.0), (1.0, 1e-9), 100, 0.0), 3)  # sum noise only: 30/100
    0.3
    """
    gs, ts = sums
    gc, tc = counts
    qc = math.exp(-1.0 / tc)
    reach = math.ceil(tc * 40.0) + 1  # the count's noise beyond this: < e^-40
    c = np.arange(-reach, reach + 1, dtype=float)
    pc = (1.0 - qc) / (1.0 + qc) * np.power(qc, np.abs(c))
    d = np.maximum(n + gc * c, 1.0)
    shift = mean * gc * c

    def covered(h: float) -> float:
        hi = np.floor((shift + h * d) / gs + 1e-9)
        lo = np.ceil((shift - h * d) / gs - 1e-9)
        inside = _laplace_cdf(hi, ts) - _laplace_cdf(lo - 1.0, ts)
        return float(np.sum(pc * np.where(hi >= lo, inside, 0.0)))

    top = 1.0
    while covered(top) < LEVEL:
        top *= 2.0
    low = 0.0
    while top - low > 1e-9 * top:
        mid = (low + top) / 2.0
        if covered(mid) >= LEVEL:
            top = mid
        else:
            low = mid
    return top


@dataclass(frozen=True)
class Allocation:
    """The budgets found for a set of statistics, and the errors they give.

    Attributes
    ----------
    budgets, errors, targets : mapping
        Per statistic: its budget (in its curve's currency), the error95 that budget
        gives, its target.
    currencies : mapping
        Per statistic: ``"epsilon"`` or ``"rho"``.
    total : float
        What they cost together under ``accounting`` (a sum of epsilons; of rhos under
        ``"zcdp"``; under ``"pld"`` the sum, an upper bound of the tight composition).
    accounting : str
    budget : float or None
        The fixed total asked for (``None``: ``"least"``).
    ratio : float
        The worst ``error / target`` (at most 1 for ``"least"``).

    Examples
    --------
    >>> a = allocate([laplace_curve("c", 1.0, counts=True)], {"c": 10.0})
    >>> a.ratio <= 1, a.currencies["c"]
    (True, 'epsilon')
    """

    budgets: Mapping[str, float]
    errors: Mapping[str, float]
    targets: Mapping[str, float]
    currencies: Mapping[str, str]
    total: float
    accounting: str
    budget: float | None = None
    ratio: float = 0.0
    assumptions: Mapping[str, str] = field(default_factory=dict)
    shares: Mapping[str, float] = field(default_factory=dict)

    def rows(self) -> list[dict[str, object]]:
        """One row per statistic: name, target (``None`` for a share), share (``None``
        for a target), currency, budget, error95, ratio.

        Examples
        --------
        >>> allocate([laplace_curve("c", 1.0, counts=True)], {"c": 10.0}).rows()[0]["budget"]
        0.284349
        """
        return [
            {
                "statistic": k,
                "target": self.targets.get(k),
                "share": self.shares.get(k),
                "currency": self.currencies[k],
                "budget": self.budgets[k],
                "error95": self.errors[k],
                "ratio": self.errors[k] / self.targets[k] if k in self.targets else None,
                "assumption": self.assumptions.get(k, ""),
            }
            for k in self.budgets
        ]


def _accounting(accounting: object) -> str:
    """The ledger's accounting (:data:`dpframe.core.constraints.ACCOUNTINGS`), ``None``
    and ``"pure"`` as ``"basic"`` (the epsilons add up)."""
    a = check("accounting", accounting)
    return "basic" if a in (None, "pure") else str(a)


def meet_targets(
    statistics: Sequence[Statistic],
    targets: Mapping[str, float],
    *,
    neighbours: str = "substitute",
    unit: PrivacyUnit | None = None,
    budget: float | str = LEAST,
    accounting: str | None = None,
    group_size: int | None = None,
    shares: Mapping[str, float] | None = None,
) -> tuple[list[Statistic], Allocation]:
    """Plan by accuracy in Python: the statistics with the budgets their targets need.

    Each statistic named in ``targets`` gets the budget :func:`allocate` finds for it
    (:func:`statistic_curve`: the error its own plan states); the others are returned as
    they are. Pass the result to ``dpframe.group_by(...).agg(*statistics)``; its
    ``summarize()`` then shows the errors found.

    Parameters
    ----------
    statistics : sequence of Statistic
        ``dpframe.agg`` statistics (the budget given to a targeted one is replaced).
    targets : mapping
        error95 by statistic name.
    neighbours, unit
        The release's neighbour relation and privacy unit (as its accountant and
        ``group_by`` take them).
    budget, accounting, group_size, shares
        As :func:`allocate` and :func:`statistic_curve` take them (``shares``: by
        statistic name, a share of ``budget`` in place of a target).

    Returns
    -------
    (list of Statistic, Allocation)

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> stats, found = meet_targets(
    ...     [dpframe.agg.count(epsilon=1.0), dpframe.agg.sum("x", lower=0, upper=10, epsilon=1.0)],
    ...     {"count": 20, "x_sum": 100},
    ... )
    >>> [s.epsilon for s in stats], round(found.total, 4)
    ([0.292007, 0.599569], 0.8916)
    >>> frame = pl.DataFrame({"g": ["a", "b"], "x": [1.0, 2.0]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = dpframe.group_by(frame, "g", margins=pl.DataFrame({"g": ["a", "b"]}))
    ...     release.agg(*stats).summarize()["error95"].to_list()
    [20.0, 100.0]
    """
    names = [s.name for s in statistics]
    shares = dict(shares or {})
    unknown = sorted((set(targets) | set(shares)) - set(names))
    if unknown:
        raise InvalidParameterError(
            f"targets: {unknown} name no statistic (the statistics are {names})"
        )
    chosen = [s for s in statistics if s.name in targets or s.name in shares]
    curves = [statistic_curve(s, neighbours, unit, group_size=group_size) for s in chosen]
    found = allocate(curves, targets, budget=budget, accounting=accounting, shares=shares)
    out = []
    for s in statistics:
        if s.name not in found.budgets:
            out.append(s)
        elif s.mechanism == "gaussian":
            options = {k: v for k, v in s.options.items() if k != "sigma"}
            out.append(replace(s, options={**options, "rho": found.budgets[s.name]}))
        else:
            out.append(replace(s, epsilon=found.budgets[s.name]))
    return out, found


def _cost(curve: ErrorCurve, budget: float, accounting: str) -> float:
    """What ``budget`` of ``curve`` costs on a ledger of ``accounting``."""
    if accounting == "zcdp" and curve.currency == "epsilon":
        return budget * budget / 2.0
    return budget


def _check_targets(
    curves: Sequence[ErrorCurve],
    targets: Mapping[str, object],
    shares: Mapping[str, object] | None = None,
) -> dict[str, float]:
    names = [c.name for c in curves]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"statistics: names must be distinct, got {names}")
    shares = shares or {}
    both = sorted(set(targets) & set(shares))
    if both:
        raise InvalidParameterError(f"targets: {both} have an error95 and a share; give one")
    missing = [n for n in names if n not in targets and n not in shares]
    extra = [n for n in [*targets, *shares] if n not in names]
    if missing or extra:
        raise InvalidParameterError(
            f"targets: give one error95 (or share) per statistic; missing {missing}, "
            f"unknown {extra}"
        )
    return {n: check("error95", targets[n], name=f"error95 of {n!r}") for n in targets}


def _check_shares(
    shares: Mapping[str, object], budget: float | str, targeted: bool
) -> dict[str, float]:
    """The shares, checked: each in (0, 1), in all below 1 (at most 1 with no error95
    target and a fixed total), and only with a total to take them from."""
    found = {n: check("allocation_share", v, name=f"share of {n!r}") for n, v in shares.items()}
    if not found:
        return found
    if budget == LEAST and not targeted:
        raise InvalidParameterError(
            "share: a share is of the release-wide budget, and 'least' with no error95 "
            "target has none; give accuracy.budget a number, or error95 targets"
        )
    total = math.fsum(found.values())
    if total > 1.0 + 1e-12 or (targeted and total >= 1.0):
        raise InvalidParameterError(
            f"share: the shares add up to {total:g}; they must leave room for the "
            "error95 targets (below 1 in all); lower them"
        )
    return found


def _from_cost(curve: ErrorCurve, cost: float, accounting: str) -> float:
    """The budget of ``curve`` that costs ``cost`` (rounded down to :data:`DIGITS`)."""
    b = math.sqrt(2.0 * cost) if accounting == "zcdp" and curve.currency == "epsilon" else cost
    return round_up(b, down=True)


def _check_currencies(curves: Sequence[ErrorCurve], accounting: str) -> None:
    if accounting != "zcdp":
        gaussian = [c.name for c in curves if c.currency == "rho"]
        if gaussian:
            raise InvalidParameterError(
                f"accounting: {gaussian} are charged rho (discrete Gaussian noise), which "
                f"an {accounting!r} ledger does not add up; use accounting='zcdp' (a rho "
                "budget) or Laplace noise"
            )


def allocate(
    curves: Sequence[ErrorCurve],
    targets: Mapping[str, float],
    *,
    budget: float | str = LEAST,
    accounting: str | None = None,
    remaining: float | None = None,
    shares: Mapping[str, float] | None = None,
) -> Allocation:
    """The budgets that meet every target (``budget="least"``), or the split of a fixed
    ``budget`` that minimises the worst ``error / target``.

    Parameters
    ----------
    curves : sequence of ErrorCurve
        One per statistic (distinct names).
    targets : mapping
        Each statistic's error95 (> 0, in its curve's units); weights when ``budget`` is
        a number.
    budget : "least" or float
        ``"least"``: the least total; a number: the total to split (in the ledger's
        currency: epsilon, or rho under ``"zcdp"``).
    accounting : {None, "pure", "zcdp", "pld"}
        How the ledger composes, as :class:`dpframe.Accountant` takes it (``None`` and
        ``"pure"``: the epsilons add up; see the module docstring).
    remaining : float, optional
        What the ledger has left: a ``"least"`` allocation above it is refused, naming the
        statistics it cannot meet and the best error95 each gets at ``remaining``.
    shares : mapping, optional
        Statistics given a share of the release-wide budget instead of a target (each in
        (0, 1), fixed before the targets are allocated): of ``budget`` when it is a
        number (the targets split the rest); with ``"least"``, of the total ``T`` whose
        rest, ``T (1 - sum of shares)``, is the least meeting the targets.

    Returns
    -------
    Allocation

    Raises
    ------
    BudgetExceededError
        The targets cost more than ``remaining`` (nothing is charged).
    InvalidParameterError
        A target no budget meets (named, with the least error its mechanism reaches), a
        bad target, or a rho curve on a ledger that adds epsilons.

    Examples
    --------
    >>> curves = [laplace_curve("a", 1.0, counts=True), laplace_curve("b", 1.0, counts=True)]
    >>> a = allocate(curves, {"a": 10, "b": 20}, budget=0.5)
    >>> round(a.total, 6) <= 0.5, round(a.ratio, 3)
    (True, 0.9)
    """
    accounting = _accounting(accounting)
    goal = _check_targets(curves, targets, shares)
    _check_currencies(curves, accounting)
    if remaining is not None:
        remaining = check_positive("remaining", remaining)
    budget = check("allocation_budget", budget, name="budget")
    fixed = _check_shares(shares or {}, budget, bool(goal))
    aimed = [c for c in curves if c.name in goal]
    kept = 1.0 - math.fsum(fixed.values())
    if budget == LEAST:
        found = _least_all(aimed, goal)
        result = _result(aimed, goal, found, accounting, None)
        if remaining is not None and result.total / kept > remaining * (1 + 1e-12):
            if fixed:
                raise _refusal(aimed, goal, accounting, remaining * kept, result.total)
            raise _refusal(aimed, goal, accounting, remaining, result.total)
        return _with_shares(curves, result, fixed, result.total / kept, accounting)
    total = float(budget)
    if not aimed:
        result = _result([], {}, {}, accounting, total)
    else:
        result = _split(aimed, goal, accounting, total * kept)
        result = replace(result, budget=total)
    return _with_shares(curves, result, fixed, total, accounting)


def _with_shares(
    curves: Sequence[ErrorCurve],
    result: Allocation,
    fixed: Mapping[str, float],
    total: float,
    accounting: str,
) -> Allocation:
    """``result`` with each share's statistic given its share of ``total``."""
    if not fixed:
        return result
    budgets, errors, currencies = dict(result.budgets), dict(result.errors), dict(result.currencies)
    assumptions = dict(result.assumptions)
    for c in curves:
        if c.name not in fixed:
            continue
        b = _from_cost(c, fixed[c.name] * total, accounting)
        e = c(b)
        if not math.isfinite(e):
            raise InvalidParameterError(
                f"share of {c.name!r}: {fixed[c.name]:g} of {total:g} is {c.currency} {b:g}, "
                "which its mechanism refuses (too small); give a larger share or budget"
            )
        budgets[c.name], errors[c.name], currencies[c.name] = b, e, c.currency
        if c.assumption:
            assumptions[c.name] = c.assumption
    order = [c.name for c in curves]
    return replace(
        result,
        budgets={n: budgets[n] for n in order},
        errors={n: errors[n] for n in order},
        currencies={n: currencies[n] for n in order},
        total=math.fsum(_cost(c, budgets[c.name], accounting) for c in curves),
        assumptions=assumptions,
        shares=dict(fixed),
    )


def _least_all(curves: Sequence[ErrorCurve], goal: Mapping[str, float]) -> dict[str, float]:
    found = {}
    for c in curves:
        b = c.least(goal[c.name])
        if b is None:
            best = c(c.largest)
            raise InvalidParameterError(
                f"error95 of {c.name!r}: {goal[c.name]:g} cannot be met at any budget (the "
                f"least error95 its mechanism reaches is {best:.4g}, at {c.currency} "
                f"{c.largest:g}); ask for at least that"
            )
        found[c.name] = b
    return found


def _result(
    curves: Sequence[ErrorCurve],
    goal: Mapping[str, float],
    found: Mapping[str, float],
    accounting: str,
    budget: float | None,
) -> Allocation:
    errors = {c.name: c(found[c.name]) for c in curves}
    ratios = [errors[n] / goal[n] for n in errors]
    return Allocation(
        budgets=dict(found),
        errors=errors,
        targets=dict(goal),
        currencies={c.name: c.currency for c in curves},
        total=math.fsum(_cost(c, found[c.name], accounting) for c in curves),
        accounting=accounting,
        budget=budget,
        ratio=max(ratios, default=0.0),
        assumptions={c.name: c.assumption for c in curves if c.assumption},
    )


def _need(
    curves: Sequence[ErrorCurve], goal: Mapping[str, float], t: float, accounting: str
) -> tuple[float, dict[str, float]]:
    """What meeting ``t * target`` for every statistic costs (``inf``: not possible)."""
    found = {}
    for c in curves:
        b = c.least(t * goal[c.name])
        if b is None:
            return math.inf, {}
        found[c.name] = b
    return math.fsum(_cost(c, found[c.name], accounting) for c in curves), found


def _split(
    curves: Sequence[ErrorCurve], goal: Mapping[str, float], accounting: str, total: float
) -> Allocation:
    """Bisection on the worst ratio ``t``: the least ``t`` whose need fits in ``total``."""
    hi = 1.0
    need, found = _need(curves, goal, hi, accounting)
    while need > total:
        hi *= 2.0
        if hi > 1e12:
            raise InvalidParameterError(
                f"budget: {total:g} is too small for these statistics' mechanisms (each "
                "refuses a budget this small); give a larger budget"
            )
        need, found = _need(curves, goal, hi, accounting)
    lo = hi / 2.0
    while True:  # bring lo below the optimum
        need_lo, found_lo = _need(curves, goal, lo, accounting)
        if need_lo > total:
            break
        hi, found = lo, found_lo
        lo /= 2.0
        if lo < 1e-12:
            break
    while hi / lo - 1.0 > RATIO_TOLERANCE:
        mid = math.sqrt(lo * hi)
        need_mid, found_mid = _need(curves, goal, mid, accounting)
        if need_mid <= total:
            hi, found = mid, found_mid
        else:
            lo = mid
    return _result(curves, goal, found, accounting, total)


def _refusal(
    curves: Sequence[ErrorCurve],
    goal: Mapping[str, float],
    accounting: str,
    remaining: float,
    needed: float,
) -> BudgetExceededError:
    """The refusal of a ``"least"`` allocation above ``remaining``: the statistics the
    remaining budget cannot meet, with the best error95 each gets there (the split of
    ``remaining`` that minimises the worst ratio)."""
    what = "rho" if accounting == "zcdp" else "epsilon"
    try:
        best = _split(curves, goal, accounting, remaining)
        short = [
            f"{n!r}: error95 {best.errors[n]:.4g} (target {goal[n]:g})"
            for n in best.errors
            if best.errors[n] > goal[n]
        ]
        can = "; at the remaining budget the best split gives " + ", ".join(short)
    except InvalidParameterError:
        can = "; the remaining budget is too small for any of these statistics"
    return BudgetExceededError(
        f"the error95 targets need {what} {needed:.6g} in all, but {remaining:g} is left for "
        f"them{can}. Nothing was charged: relax those targets or give a larger budget.",
        requested_epsilon=needed,
    )


def even_split(
    curves: Sequence[ErrorCurve],
    targets: Mapping[str, float],
    total: float,
    *,
    accounting: str | None = None,
) -> Allocation:
    """``total`` split evenly (each statistic ``total / k`` in the ledger's currency): the
    baseline the optimiser is compared with (``benchmarks/bench_allocation.py``).

    Examples
    --------
    >>> curves = [laplace_curve("a", 1.0, counts=True), laplace_curve("b", 1.0, counts=True)]
    >>> even_split(curves, {"a": 10, "b": 20}, 0.5).budgets
    {'a': 0.25, 'b': 0.25}
    """
    accounting = _accounting(accounting)
    goal = _check_targets(curves, targets)
    _check_currencies(curves, accounting)
    share = check("epsilon", total, name="total") / len(curves)
    found = {
        c.name: math.sqrt(2.0 * share)
        if accounting == "zcdp" and c.currency == "epsilon"
        else share
        for c in curves
    }
    return _result(curves, goal, found, accounting, total)
