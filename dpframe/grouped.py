"""Grouped releases: exact aggregates in polars, then noise in one vectorised pass.

``dpframe.group_by(frame, keys, margins=public_keys).agg(dpframe.agg.count(...), ...)``
(or ``lf.dp.group_by(...)``) builds a :class:`GroupedRelease`. Nothing runs until
:meth:`GroupedRelease.collect`, which

1. computes the exact, clipped aggregates with native polars (lazy, streaming-capable),
   and checks the data (nulls, NaN, infinities, keys missing from the margins) --
   nothing is charged if this fails;
2. joins them onto the public key frame, so groups empty in the data are released
   too (their exact aggregates are 0) and no group vanishes;
3. charges the accountant once for all statistics, atomically, before any noise;
4. adds grid-Laplace noise to each statistic's column in one vectorised call.

The result is cached: collecting again returns the identical frame, never fresh noise.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import polars as pl

from dpframe import sensitivity as sens
from dpframe.accountant import Accountant, Charge, LedgerEntry, current_accountant
from dpframe.errors import (
    InvalidDataError,
    InvalidParameterError,
    MissingMarginsError,
    NoAccountantError,
)
from dpframe.random import RandomSource, as_source

if TYPE_CHECKING:  # the kernels (and numpy) are imported on first use
    from dpframe.mechanisms.laplace import LaplaceCalibration

__all__ = ["GroupBy", "GroupedRelease", "Statistic", "group_by"]


@dataclass(frozen=True)
class Statistic:
    """One noisy per-group statistic of a grouped release (see :mod:`dpframe.agg`)."""

    kind: str  # "count" or "sum"
    name: str
    epsilon: float
    column: str | None = None
    lower: float | None = None
    upper: float | None = None

    def sensitivity(self, neighbours: str) -> float:
        """l1 sensitivity of the vector of this statistic over the groups."""
        if self.kind == "count":
            return sens.histogram_counts(neighbours)
        return sens.grouped_sum(self.lower, self.upper, neighbours)  # type: ignore[arg-type]

    def calibration(self, neighbours: str) -> LaplaceCalibration:
        """Counts use a grid of 1 (integer noise); sums the default grid."""
        from dpframe.mechanisms.laplace import calibrate_laplace

        if self.kind == "count":
            return calibrate_laplace(
                self.epsilon, self.sensitivity(neighbours), 1.0, values_on_grid=True
            )
        return calibrate_laplace(self.epsilon, self.sensitivity(neighbours))

    def exact_expr(self) -> pl.Expr:
        """The exact aggregate, as a polars expression (values clipped to the bounds)."""
        if self.kind == "count":
            return pl.len().cast(pl.Float64).alias(self.name)
        return (
            pl.col(self.column).cast(pl.Float64).clip(self.lower, self.upper).sum().alias(self.name)
        )


class GroupBy:
    """A grouping over public keys, waiting for :meth:`agg` (see :func:`group_by`)."""

    def __init__(
        self,
        frame: pl.LazyFrame | pl.DataFrame,
        keys: str | Sequence[str],
        *,
        margins: pl.DataFrame | None,
        unknown_keys: str = "error",
        accountant: Accountant | None = None,
        seed: int | RandomSource | None = None,
    ) -> None:
        if isinstance(frame, pl.DataFrame):
            frame = frame.lazy()
        if not isinstance(frame, pl.LazyFrame):
            raise InvalidParameterError(
                f"frame must be a polars DataFrame or LazyFrame, got {type(frame).__name__}"
            )
        self.keys = [keys] if isinstance(keys, str) else list(keys)
        if not self.keys or not all(isinstance(k, str) for k in self.keys):
            raise InvalidParameterError(f"keys must be column names, got {keys!r}")
        if margins is None:
            raise MissingMarginsError(
                "margins: a grouped release needs the public frame of all group keys "
                "(e.g. margins=pl.DataFrame({'region': [...]})); taking the keys from the data "
                "would let empty groups vanish and the set of groups itself leak"
            )
        if isinstance(margins, pl.LazyFrame):
            margins = margins.collect()
        if not isinstance(margins, pl.DataFrame):
            raise InvalidParameterError(
                f"margins must be a polars DataFrame of public keys, got {type(margins).__name__}"
            )
        missing = [k for k in self.keys if k not in margins.columns]
        if missing:
            raise InvalidParameterError(f"margins lacks key column(s) {missing}; add them")
        margins = margins.select(self.keys)
        if margins.height == 0:
            raise InvalidParameterError("margins has no rows: there is no group to release")
        if margins.null_count().sum_horizontal().item():
            raise InvalidParameterError("margins has null keys; list every group explicitly")
        if margins.is_duplicated().any():
            raise InvalidParameterError(
                "margins has duplicate key rows; pass each group once (margins.unique())"
            )
        if unknown_keys not in ("error", "drop"):
            raise InvalidParameterError(
                f"unknown_keys must be 'error' or 'drop', got {unknown_keys!r}"
            )
        self.frame = frame
        self.margins = margins
        self.unknown_keys = unknown_keys
        self.accountant = accountant or current_accountant()
        self.random = as_source(seed)

    def agg(self, *statistics: Statistic) -> GroupedRelease:
        """Declare the noisy statistics (from :mod:`dpframe.agg`); nothing runs yet."""
        stats = [s for group in statistics for s in (group if isinstance(group, list) else [group])]
        if not stats:
            raise InvalidParameterError(
                "agg() needs at least one statistic, e.g. dpframe.agg.count(...)"
            )
        for s in stats:
            if not isinstance(s, Statistic):
                raise InvalidParameterError(
                    f"agg() takes dpframe.agg statistics, got {type(s).__name__}: use "
                    "dpframe.agg.count(...) or dpframe.agg.sum(...)"
                )
        names = [s.name for s in stats]
        clash = sorted({n for n in names if names.count(n) > 1 or n in self.keys})
        if clash:
            raise InvalidParameterError(
                f"statistic names {clash} repeat or clash with keys; pass name="
            )
        return GroupedRelease(self, stats)


class GroupedRelease:
    """A grouped release: summarize it for free, collect it once (charged once)."""

    def __init__(self, grouping: GroupBy, statistics: list[Statistic]) -> None:
        self.id = uuid.uuid4().hex
        self.grouping = grouping
        self.statistics = statistics
        self.ledger: tuple[LedgerEntry, ...] = ()
        self._result: pl.DataFrame | None = None
        self._lock = threading.Lock()

    @property
    def neighbours(self) -> str:
        acct = self.grouping.accountant
        return acct.neighbours if acct is not None else "substitute"

    def summarize(self) -> pl.DataFrame:
        """Every statistic's mechanism, epsilon, sensitivity, noise scale and 95% error.

        Computed from the spec alone: no data is read, no budget spent, no noise drawn.
        """
        rows = []
        for s in self.statistics:
            cal = s.calibration(self.neighbours)
            rows.append(
                {
                    "statistic": s.name,
                    "kind": s.kind,
                    "column": s.column,
                    "mechanism": "laplace",
                    "composition": "parallel",
                    "epsilon": s.epsilon,
                    "sensitivity": s.sensitivity(self.neighbours),
                    "scale": cal.scale,
                    "error95": cal.error(0.95),
                    "groups": self.grouping.margins.height,
                }
            )
        return pl.DataFrame(rows)

    @property
    def epsilon(self) -> float:
        """Total epsilon of the release (its statistics compose sequentially)."""
        return float(sum(Fraction(repr(s.epsilon)) for s in self.statistics))

    def exact_aggregates(self, engine: str = "auto") -> pl.DataFrame:
        """The exact aggregates joined onto the margins (confidential: for checks, not release)."""
        g = self.grouping
        schema = g.frame.collect_schema()
        missing = [c for c in g.keys if c not in schema]
        if missing:
            raise InvalidParameterError(f"keys {missing} are not columns of the frame")
        exprs: list[pl.Expr] = []
        checks: list[pl.Expr] = []
        for s in self.statistics:
            exprs.append(s.exact_expr())
            if s.kind == "sum":
                if s.column not in schema:
                    raise InvalidParameterError(
                        f"column {s.column!r} of {s.name!r} is not in the frame"
                    )
                dtype = schema[s.column]
                if not dtype.is_numeric():
                    raise InvalidDataError(
                        f"column {s.column!r} has dtype {dtype}; a sum needs a numeric column "
                        f"(cast it with pl.col({s.column!r}).cast(pl.Float64))"
                    )
                bad = pl.col(s.column).is_null()
                if dtype.is_float():
                    bad = bad | pl.col(s.column).is_nan() | pl.col(s.column).is_infinite()
                checks.append(bad.sum().alias(f"__bad_{s.column}"))
        for k in g.keys:
            if schema[k] != g.margins.schema[k]:
                raise InvalidParameterError(
                    f"key {k!r} has dtype {schema[k]} in the frame but {g.margins.schema[k]} in "
                    f"margins; cast margins with pl.col({k!r}).cast(...)"
                )
        agg = g.frame.group_by(g.keys).agg([pl.len().alias("__rows"), *exprs, *checks])
        agg = agg.collect(engine=engine)
        for c in checks:
            col = c.meta.output_name()
            nbad = agg[col].sum()
            if nbad:
                raise InvalidDataError(
                    f"column {col.removeprefix('__bad_')!r} has {nbad} null, NaN or infinite "
                    "value(s); fill or drop them before the release (nothing was charged)"
                )
        unknown = agg.join(g.margins, on=g.keys, how="anti", nulls_equal=True)
        if unknown.height and g.unknown_keys == "error":
            raise InvalidDataError(
                f"{unknown['__rows'].sum()} record(s) in {unknown.height} group(s) have keys "
                "that are not in margins; add those groups to margins or pass "
                "unknown_keys='drop' (nothing was charged)"
            )
        names = [s.name for s in self.statistics]
        joined = g.margins.join(
            agg.select([*g.keys, *names]), on=g.keys, how="left", nulls_equal=True
        )
        return joined.with_columns(pl.col(names).fill_null(0.0))

    def collect(self, engine: str = "auto") -> pl.DataFrame:
        """Run the release: exact aggregates, one atomic charge, then noise. Cached.

        Parameters
        ----------
        engine : str, default "auto"
            The polars engine for the exact aggregation (``"streaming"`` for large data).

        Returns
        -------
        polars.DataFrame
            The margins' keys and one released Float64 column per statistic.
        """
        from dpframe.mechanisms.laplace import check_values, release_laplace

        with self._lock:
            if self._result is not None:
                return self._result
            acct = self.grouping.accountant
            if acct is None:
                raise NoAccountantError(
                    "this grouped release was built with no accountant: build it inside "
                    "`with accountant:` or pass accountant=... to group_by"
                )
            exact = self.exact_aggregates(engine)
            cals = {s.name: s.calibration(acct.neighbours) for s in self.statistics}
            for s in self.statistics:  # refuse bad values before anything is charged
                check_values(exact[s.name].to_numpy(), cals[s.name])
            charges = [
                Charge(
                    epsilon=s.epsilon,
                    mechanism="laplace",
                    columns=(s.name,),
                    scale=cals[s.name].scale,
                    composition="parallel",
                    details={
                        "statistic": s.kind,
                        "source_column": s.column,
                        "lower": s.lower,
                        "upper": s.upper,
                        "keys": self.grouping.keys,
                        "groups": exact.height,
                        "sensitivity": s.sensitivity(acct.neighbours),
                        "granularity": cals[s.name].granularity,
                        "epsilon_used": float(cals[s.name].epsilon_used),
                        "seeded": self.grouping.random.seeded,
                    },
                )
                for s in self.statistics
            ]
            self.ledger = acct.spend_all(charges, note=f"grouped release {self.id[:8]}")
            rng = self.grouping.random.generator()
            noisy = {
                s.name: release_laplace(exact[s.name].to_numpy(), cals[s.name], rng)
                for s in self.statistics
            }
            self._result = exact.select(self.grouping.keys).with_columns(
                [pl.Series(name, values, dtype=pl.Float64) for name, values in noisy.items()]
            )
            return self._result


def group_by(
    frame: pl.LazyFrame | pl.DataFrame,
    keys: str | Sequence[str],
    *,
    margins: pl.DataFrame | None,
    unknown_keys: str = "error",
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> GroupBy:
    """Group ``frame`` by public ``keys`` for a noisy aggregate release.

    Parameters
    ----------
    frame : polars.LazyFrame or polars.DataFrame
        The confidential records.
    keys : str or list of str
        Grouping columns.
    margins : polars.DataFrame
        The public frame of every group's keys, one row per group. Groups absent from
        the data are released (from an exact 0); without margins the release refuses.
    unknown_keys : {"error", "drop"}, default "error"
        What to do with records whose keys are not in ``margins``.
    accountant : Accountant, optional
        Default: the innermost ``with accountant:`` block.
    seed : int or RandomSource, optional
        Reproducible noise for tests -- **unsafe for publication**.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["N", "N", "S"], "income": [10.0, 20.0, 30.0]})
    >>> regions = pl.DataFrame({"region": ["N", "S", "E"]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     release = dpframe.group_by(people, "region", margins=regions).agg(
    ...         dpframe.agg.count(epsilon=0.5),
    ...         dpframe.agg.sum("income", lower=0, upper=50, epsilon=0.5),
    ...     )
    ...     out = release.collect()
    >>> out.columns, out.height, acct.spent.epsilon
    (['region', 'count', 'income_sum'], 3, 1.0)
    """
    return GroupBy(
        frame, keys, margins=margins, unknown_keys=unknown_keys, accountant=accountant, seed=seed
    )
