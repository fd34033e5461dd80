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

import math
import threading
import uuid
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe.agg import Statistic
from dpframe.core.accountant import Accountant, Charge, LedgerEntry, current_accountant
from dpframe.core.randomness import RandomSource, as_source
from dpframe.errors import (
    InvalidDataError,
    InvalidParameterError,
    MissingMarginsError,
    NoAccountantError,
)

if TYPE_CHECKING:
    pass

__all__ = ["GroupBy", "GroupedRelease", "Statistic", "group_by"]


class GroupBy:
    """A grouping over public keys, waiting for :meth:`agg` (see :func:`group_by`)."""

    def __init__(
        self,
        frame: pl.LazyFrame | pl.DataFrame,
        keys: str | Sequence[str],
        *,
        margins: pl.DataFrame | None,
        sizes: str | None = None,
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
        self.sizes = _public_sizes(margins, sizes, self.keys)
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
        acct = self.accountant
        if self.sizes is not None and acct is not None and acct.neighbours == "add_remove":
            raise InvalidParameterError(
                "sizes: group sizes cannot be public under neighbours='add_remove' (a "
                "neighbouring dataset has one record more or less); drop sizes= or use "
                "an accountant with neighbours='substitute'"
            )

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
        names = [out for s in stats for out in s.outputs()]
        clash = sorted({n for n in names if names.count(n) > 1 or n in self.keys})
        if clash:
            raise InvalidParameterError(
                f"output columns {clash} repeat or clash with keys; pass name="
            )
        return GroupedRelease(self, stats)


def _public_sizes(margins: pl.DataFrame, sizes: str | None, keys: list[str]) -> Any:
    """The public group sizes named by ``sizes`` in the margins, as an int64 array."""
    if sizes is None:
        return None
    if not isinstance(sizes, str) or sizes not in margins.columns:
        raise InvalidParameterError(
            f"sizes must name a column of margins holding each group's public size; "
            f"{sizes!r} is not one of {margins.columns}"
        )
    if sizes in keys:
        raise InvalidParameterError(f"sizes={sizes!r} is a key column; name the size column")
    col = margins[sizes]
    if not col.dtype.is_integer() or col.null_count() or (col < 0).any():
        raise InvalidParameterError(
            f"sizes column {sizes!r} must hold non-negative integers with no nulls"
        )
    return col.cast(pl.Int64).to_numpy()


class GroupedRelease:
    """A grouped release: summarize it for free, collect it once (charged once)."""

    def __init__(self, grouping: GroupBy, statistics: list[Statistic]) -> None:
        self.id = uuid.uuid4().hex
        self.grouping = grouping
        self.statistics = statistics
        self.ledger: tuple[LedgerEntry, ...] = ()
        self._result: pl.DataFrame | None = None
        self._exact: pl.DataFrame | None = None
        self._lock = threading.Lock()
        self.plans = [s.plan(self.neighbours, grouping.sizes) for s in statistics]

    @property
    def neighbours(self) -> str:
        acct = self.grouping.accountant
        return acct.neighbours if acct is not None else "substitute"

    def summarize(self) -> pl.DataFrame:
        """Every statistic's mechanism, epsilon, sensitivity, noise scale and 95% error.

        Computed from the spec alone: no data is read, no budget spent, no noise drawn.
        For per-group sizes the sensitivity, scale and error are the largest over the
        groups; ``error95`` is null for ratios of noisy sums and counts.
        """
        rows = [
            {
                "statistic": p.statistic.name,
                "kind": p.statistic.kind,
                "column": p.statistic.column,
                "mechanism": p.mechanism,
                "composition": "parallel",
                "epsilon": p.epsilon,
                "sensitivity": p.sensitivity,
                "scale": p.scale,
                "error95": None if math.isnan(p.error95) else p.error95,
                "groups": self.grouping.margins.height,
            }
            for p in self.plans
        ]
        return pl.DataFrame(rows, schema_overrides={"column": pl.String, "error95": pl.Float64})

    @property
    def epsilon(self) -> float:
        """Total epsilon charged by the release (its statistics compose sequentially)."""
        return float(sum(Fraction(repr(p.epsilon)) for p in self.plans))

    def exact_aggregates(self, engine: str = "auto") -> pl.DataFrame:
        """The exact aggregates joined onto the margins (confidential: for checks, not release).

        One column per part of each statistic, named ``"<statistic>:<part>"`` (``n``,
        ``sum``, ``sumsq``, ``mean``, ``var``).
        """
        g = self.grouping
        schema = g.frame.collect_schema()
        missing = [c for c in g.keys if c not in schema]
        if missing:
            raise InvalidParameterError(f"keys {missing} are not columns of the frame")
        for k in g.keys:
            if schema[k] != g.margins.schema[k]:
                raise InvalidParameterError(
                    f"key {k!r} has dtype {schema[k]} in the frame but {g.margins.schema[k]} in "
                    f"margins; cast margins with pl.col({k!r}).cast(...)"
                )
        public = g.sizes is not None
        exprs: dict[str, pl.Expr] = {}
        for s in self.statistics:
            s.check_schema(schema)
            for e in (*s.exact_exprs(public), *s.bad_values(schema)):
                exprs.setdefault(e.meta.output_name(), e)
        agg = g.frame.group_by(g.keys).agg(pl.len().alias("__rows"), *exprs.values())
        agg = agg.collect(engine=engine)
        return self.finish_aggregates(agg)

    def finish_aggregates(self, agg: pl.DataFrame) -> pl.DataFrame:
        """The engine-independent half of :meth:`exact_aggregates`.

        ``agg`` holds one row per group present in the data: the keys, ``__rows``, one
        column per exact part (``"<statistic>:<part>"``) and ``__bad__<column>`` counts --
        computed by polars here, or by another engine (see :mod:`dpframe.engines`). This
        refuses bad values and unknown keys, joins the public margins (groups absent from
        the data get exact zeros) and checks public sizes.
        """
        g = self.grouping
        for col in (c for c in agg.columns if c.startswith("__bad__")):
            nbad = agg[col].sum()
            if nbad:
                raise InvalidDataError(
                    f"column {col.removeprefix('__bad__')!r} has {nbad} null, NaN or infinite "
                    "value(s); fill or drop them before the release (nothing was charged)"
                )
        unknown = agg.join(g.margins, on=g.keys, how="anti", nulls_equal=True)
        if unknown.height and g.unknown_keys == "error":
            raise InvalidDataError(
                f"{unknown['__rows'].sum()} record(s) in {unknown.height} group(s) have keys "
                "that are not in margins; add those groups to margins or pass "
                "unknown_keys='drop' (nothing was charged)"
            )
        parts = [c for c in agg.columns if ":" in c]  # "<statistic>:<part>"
        joined = g.margins.join(
            agg.select([*g.keys, "__rows", *parts]), on=g.keys, how="left", nulls_equal=True
        )
        if g.sizes is not None:  # public sizes: the data must match them
            rows = joined["__rows"].fill_null(0).to_numpy()
            wrong = (rows != g.sizes).sum()
            if wrong:
                raise InvalidDataError(
                    f"{wrong} group(s) have a size in the data different from the public size "
                    "declared in margins; the sensitivities assume the declared sizes, so fix "
                    "the margins or drop sizes= (nothing was charged)"
                )
        fill = [c for c in parts if not c.endswith((":mean", ":var"))]  # sums, counts: 0
        return joined.drop("__rows").with_columns(pl.col(fill).fill_null(0.0))

    def prepare_from(self, agg: pl.DataFrame) -> pl.DataFrame:
        """Prepare from per-group aggregates computed by another engine (charging nothing).

        ``agg`` has the layout :meth:`finish_aggregates` takes; :meth:`collect` then
        charges and draws exactly as with polars' own aggregates.
        """
        with self._lock:
            exact = self.finish_aggregates(agg)
            for p in self.plans:  # refuse bad values before anything is charged
                p.check(exact)
            self._exact = exact
            return exact

    def prepare(self, engine: str = "auto") -> pl.DataFrame:
        """Compute and check the exact aggregates now, charging nothing (cached for collect).

        A job that runs several releases calls this on all of them first, so that bad data
        in any of them is found before the first one is charged.
        """
        if self._exact is None:
            exact = self.exact_aggregates(engine)
            for p in self.plans:  # refuse bad values before anything is charged
                p.check(exact)
            self._exact = exact
        return self._exact

    def collect(self, engine: str = "auto") -> pl.DataFrame:
        """Run the release: exact aggregates, one atomic charge, then noise. Cached.

        Parameters
        ----------
        engine : str, default "auto"
            The polars engine for the exact aggregation (``"streaming"`` for large data).

        Returns
        -------
        polars.DataFrame
            The margins' keys and one released Float64 column per statistic (null for a
            group whose public size is too small for the statistic).
        """
        with self._lock:
            if self._result is not None:
                return self._result
            acct = self.grouping.accountant
            if acct is None:
                raise NoAccountantError(
                    "this grouped release was built with no accountant: build it inside "
                    "`with accountant:` or pass accountant=... to group_by"
                )
            exact = self.prepare(engine)
            charges = [
                Charge(
                    epsilon=p.epsilon,
                    mechanism=p.mechanism,
                    columns=tuple(p.statistic.outputs()),
                    scale=p.scale,
                    composition="parallel",
                    details={
                        **p.details,
                        "statistic": p.statistic.kind,
                        "source_column": p.statistic.column,
                        "lower": p.statistic.lower,
                        "upper": p.statistic.upper,
                        "keys": self.grouping.keys,
                        "groups": exact.height,
                        "sensitivity": p.sensitivity,
                        "seeded": self.grouping.random.seeded,
                    },
                )
                for p in self.plans
            ]
            self.ledger = acct.spend_all(charges, note=f"grouped release {self.id[:8]}")
            rng = self.grouping.random.generator()
            released = [
                pl.Series(name, values, dtype=pl.Float64)
                for p in self.plans
                for name, values in p.release(exact, rng).items()
            ]
            self._result = exact.select(self.grouping.keys).with_columns(released)
            self._result = self._result.with_columns(pl.col(pl.Float64).fill_nan(None))
            return self._result


def group_by(
    frame: pl.LazyFrame | pl.DataFrame,
    keys: str | Sequence[str],
    *,
    margins: pl.DataFrame | None,
    sizes: str | None = None,
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
    sizes : str, optional
        A column of ``margins`` holding each group's *public* size. Then means,
        proportions and variances are released directly by the bounded mechanism with
        the sensitivity of each group's size; the data's sizes must match (else the
        release refuses). Without it, sizes are private (see :mod:`dpframe.agg`).
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
        frame,
        keys,
        margins=margins,
        sizes=sizes,
        unknown_keys=unknown_keys,
        accountant=accountant,
        seed=seed,
    )
