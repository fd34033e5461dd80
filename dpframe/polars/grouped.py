"""Grouped releases: exact aggregates by the engine, then noise in one vectorised pass.

``dpframe.group_by(frame, keys, margins=public_keys).agg(dpframe.agg.count(...), ...)``
(or ``lf.dp.group_by(...)``) builds a :class:`GroupedRelease`. ``frame`` is a polars
LazyFrame / DataFrame, or a Spark DataFrame (the engine follows the frame). Nothing runs
until :meth:`GroupedRelease.collect`, which

1. computes the exact, clipped aggregates with the engine (polars: lazy, streaming), and
   checks the data (nulls, NaN, infinities, keys missing from the margins) -- nothing is
   charged if this fails (:mod:`dpframe.engines.driver`);
2. joins them onto the public key frame, so groups empty in the data are released too
   (their exact aggregates are 0) and no group vanishes;
3. charges the accountant once for all statistics, atomically, before any noise, and
   draws (:func:`dpframe.core.executor.execute`).

The result is kept: collecting again returns the identical frame, never fresh noise.
The maths of each statistic is :mod:`dpframe.mechanisms.statistics` (``dpframe.agg``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import polars as pl

from dpframe.core.advice import advise
from dpframe.core.constraints import (
    INT64_MAX,
    check,
    check_key_names,
)
from dpframe.core.executor import MechanismPlan
from dpframe.core.missing import check_nulls
from dpframe.core.units import PrivacyUnit
from dpframe.engines.bounding import check_unit
from dpframe.engines.driver import (
    check_fill,
    check_key_dtype,
    check_margins,
    check_sources,
    finish_grouped,
    fit_margins,
    textual_key,
)
from dpframe.errors import InvalidParameterError, MissingMarginsError
from dpframe.mechanisms.statistics import Drawn, Statistic, StatisticPlan, plan_statistic
from dpframe.polars.release import Release, Summary, as_summary, bounded_unit, resolve_accountant

__all__ = ["GroupBy", "GroupedRelease", "group_by"]


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
    largest = int(cast(int, col.max())) if col.len() else 0
    if largest > INT64_MAX:
        raise InvalidParameterError(
            f"sizes column {sizes!r} holds a size above 2**63 - 1 ({largest}); a public "
            "group size must be a 64-bit integer: correct the margins' sizes"
        )
    return col.cast(pl.Int64).to_numpy()


def _unit(unit: Any, max_rows: Any, max_groups: Any, accountant: Any) -> PrivacyUnit | None:
    """The release's privacy unit: as given, or the accountant's, with the bounds given
    here or stated to the accountant (required: :func:`dpframe.core.units.missing_bounds`;
    ``None``: decided by the release, from its accountant)."""
    unstated = unit is None and max_rows is None and max_groups is None
    if unstated and (accountant is None or accountant.unit.is_record):
        return None
    return bounded_unit(unit, {"max_rows": max_rows, "max_groups": max_groups}, accountant)


class GroupBy:
    """A grouping over public keys, waiting for :meth:`agg` (see :func:`group_by`).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
    >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     grouping = people.dp.group_by("region", margins=regions)  # a GroupBy
    ...     release = grouping.agg(dpframe.agg.count(epsilon=0.5))
    >>> type(grouping).__name__, type(release).__name__
    ('GroupBy', 'GroupedRelease')
    """

    def __init__(
        self,
        frame: Any,
        keys: str | Sequence[str],
        *,
        margins: pl.DataFrame | None,
        sizes: str | None = None,
        unknown_keys: str = "error",
        accountant: Any = None,
        seed: Any = None,
        neighbours: str | None = None,
        unit: Any = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        nonnegative: bool = True,
        nulls: str | Mapping[str, float | str] = "refuse",
    ) -> None:
        self.frame = frame
        self.nonnegative = check("nonnegative", nonnegative)
        self.unit = _unit(unit, max_rows, max_groups, resolve_accountant(accountant))
        self.neighbours = neighbours
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, Sequence) or not keys:
            raise InvalidParameterError(
                f"keys must be a column name or a list of them, got {keys!r}"
            )
        self.keys = check_key_names(keys)
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
        self.sizes_column = sizes
        self.missing = check_nulls(nulls, public_sizes=self.sizes is not None)
        margins = margins.select(self.keys)
        if margins.height == 0:
            raise InvalidParameterError("margins has no rows: there is no group to release")
        check_margins(margins, self.keys)  # no null, NaN or infinite key
        if margins.is_duplicated().any():
            raise InvalidParameterError(
                "margins has duplicate key rows; pass each group once (margins.unique())"
            )
        self.margins = margins
        self.unknown_keys = check("unknown_keys", unknown_keys)
        self.accountant = accountant
        self.seed = seed

    def agg(self, *statistics: Statistic | list[Statistic]) -> GroupedRelease:
        """Declare the noisy statistics (from ``dpframe.agg``); nothing runs yet.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["North", "South"], "income": [3e4, 5e4]})
        >>> with dpframe.Accountant(epsilon=1.0) as acct:
        ...     release = people.dp.group_by("region", margins=people.select("region")).agg(
        ...         dpframe.agg.count(epsilon=0.5),
        ...         dpframe.agg.mean("income", lower=0, upper=2e5, epsilon=0.5),
        ...     )
        >>> release.epsilon, acct.spent.epsilon  # declared, nothing spent yet
        (1.0, 0.0)
        """
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
                f"output columns {clash} repeat or clash with keys; "
                + advise(
                    python="pass name= to the statistic",
                    spec="give the statistic its own name = ... in the spec",
                )
            )
        return GroupedRelease(self, stats)

    def __repr__(self) -> str:
        return f"GroupBy(keys={self.keys}, groups={self.margins.height})"

    def _repr_html_(self) -> str:
        """A notebook's view: the grouping and its public margins (nothing is read)."""
        import html

        return f"<p><code>{html.escape(repr(self))}</code></p>{self.margins._repr_html_()}"


class GroupedRelease(Release[pl.DataFrame]):
    """A grouped release: summarize it for free, collect it once (charged once).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
    >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     release = people.dp.group_by("region", margins=regions).agg(
    ...         dpframe.agg.count(epsilon=0.5)
    ...     )
    ...     plan = release.summarize()  # mechanism, scale, 95% error: nothing spent
    ...     table = release.collect()  # charged once, then noised
    >>> plan["mechanism"].to_list(), table.columns, acct.spent.epsilon
    (['laplace'], ['region', 'count'], 0.5)
    """

    kind = "grouped release"
    person_level = True

    def __init__(self, grouping: GroupBy, statistics: list[Statistic]) -> None:
        super().__init__(
            grouping.frame,
            grouping.accountant,
            grouping.seed,
            grouping.neighbours,
            grouping.unit,
        )
        self.grouping = grouping
        self.statistics = statistics
        if self.unit.person in grouping.keys:
            raise InvalidParameterError(
                f"unit: the person column {self.unit.person!r} is a group key; a person "
                "identifier is never released -- group by public keys only"
            )
        self._plans = self._make_plans(self.neighbours)
        self._keys_frame: pl.DataFrame | None = None
        self._drawn: tuple[Drawn, ...] | None = None

    def _make_plans(self, neighbours: str) -> list[StatisticPlan]:
        grouping = self.grouping
        return [
            plan_statistic(
                s,
                neighbours,
                grouping.sizes,
                details={
                    "keys": list(grouping.keys),
                    "groups": grouping.margins.height,
                    "seeded": self.random.seeded,
                },
                unit=self.unit,
            )
            for s in self.statistics
        ]

    def _plans_of(self) -> list[MechanismPlan]:
        return list(self._plans)

    def _plans_under(self, neighbours: str) -> list[MechanismPlan]:
        """The statistics planned under ``neighbours`` (public sizes: substitute only)."""
        if neighbours == self.neighbours:
            return self._plans_of()
        return list(self._make_plans(neighbours))

    def summarize(self) -> Summary:
        """As :meth:`Release.summarize`; the ``note`` also says what ``nulls=`` does.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["North", "South"], "income": [3e4, None]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     release = people.dp.group_by(
        ...         "region", margins=people.select("region"), nulls={"income": 0.0}
        ...     ).agg(dpframe.agg.sum("income", lower=0, upper=2e5, epsilon=0.5))
        >>> release.summarize()["statistic"].to_list()
        ['income_sum']
        """
        frame = super().summarize()
        said = self.grouping.missing.note
        if said is None:
            return frame
        note = pl.col("note")
        return as_summary(
            frame.with_columns(
                pl.when(note.is_null() | (note == ""))
                .then(pl.lit(said))
                .otherwise(note + pl.lit("; " + said))
                .alias("note")
            )
        )

    def accuracy(self, level: float = 0.95) -> pl.DataFrame:
        """How far each released value may be from the exact one, per group.

        Post-processing of the release: computed from the released values, the noisy
        parts they were computed from (a ratio's noisy sum and noisy count, drawn and
        charged with it) and public parameters (bounds, noise scales, public sizes) --
        never from the data or the exact aggregates, which this method cannot reach. It
        spends nothing, and its output may be published with the table.

        Parameters
        ----------
        level : float, default 0.95
            The probability each interval ``value +- half-width`` holds the exact value.

        Returns
        -------
        polars.DataFrame
            The key columns, then for each statistic:

            * ``<column>_error95`` (``_error90`` at ``level=0.9``, ...) for each released
              column: the half-width. A count or sum: the exact quantile of its noise
              (the same in every group). With public sizes: the bounded mechanism's
              worst case over the exact value at the group's size. A mean or proportion
              with private sizes, released as ``clip(S~ / max(N~, 1))``: for ``N~ >= 1``
              its error is exactly ``(Z_S - mu Z_N) / N~``, so the half-width is the
              quantile of ``|Z_S - mu Z_N|`` (two Laplace noises, in closed form) over
              the released ``N~``, with the released mean for ``mu``. A variance or
              covariance, and its correlation: the same by the delta method (and, for a
              covariance, what the clip into ``+-sqrt(var_x var_y)`` may have cut off).
              Capped at the width of the statistic's range, which no error exceeds. Null
              where the value is null;
            * ``<name>_uninformative`` (Boolean) for a mean, proportion, variance or
              covariance: True where the value says nothing the public bounds do not.
              With private sizes: the noisy count ``N~`` is at most the statistic's
              threshold (``summarize()`` states it), ``q* / (upper - lower)`` for a
              mean, where ``q*`` is the quantile of ``|Z_S - c Z_N|`` at the least
              favourable mean ``c`` in the bounds: at such counts the half-width can
              reach the whole range ``[lower, upper]``, and a group with ``N~ <= 0`` --
              an empty group, typically -- is released as a bound or pure noise. Above
              the threshold the half-width is below the range. With public sizes: the
              half-width spans the whole range, or the value is null;
            * ``<name>_noisy_n`` (Int64) for a ratio or moment with private sizes: the
              noisy count ``N~`` it divided by (drawn and charged with the statistic; not
              the ``count`` statistic's column, which has its own noise).

        Raises
        ------
        InvalidParameterError
            Before the release is collected (there is nothing to describe yet).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["N"] * 400, "age": [40.0] * 400})
        >>> regions = pl.DataFrame({"region": ["N", "E"]})  # nobody in E
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     release = dpframe.group_by(people, "region", margins=regions).agg(
        ...         dpframe.agg.mean("age", lower=18, upper=90, epsilon=1.0))
        ...     out = release.collect()
        >>> acc = release.accuracy()
        >>> acc.columns
        ['region', 'age_mean_error95', 'age_mean_uninformative', 'age_mean_noisy_n']
        >>> north = acc.row(0, named=True)  # 400 records: a few years, informative
        >>> north["age_mean_error95"] < 5, north["age_mean_uninformative"]
        (True, False)
        """
        drawn = self._drawn
        if drawn is None or self._keys_frame is None:
            raise InvalidParameterError(
                "accuracy() describes a released table: collect() the release first (it "
                "is computed from the released values, never from the data)"
            )
        columns: dict[str, Any] = {}
        for plan, out in zip(self._plans, drawn, strict=True):
            columns.update(plan.accuracy(out, level))
        series = []
        for name, values in columns.items():
            if name.endswith("_uninformative"):
                series.append(pl.Series(name, values, dtype=pl.Boolean))
            elif name.endswith("_noisy_n"):
                series.append(pl.Series(name, np.rint(values), dtype=pl.Float64).cast(pl.Int64))
            else:
                series.append(pl.Series(name, values, dtype=pl.Float64).fill_nan(None))
        return self._keys_frame.with_columns(series)

    @property
    def outputs(self) -> list[str]:
        """The released columns after the keys."""
        return [o for s in self.statistics for o in s.outputs()]

    def exact_aggregates(self) -> pl.DataFrame:
        """The exact parts joined onto the margins (confidential: for tests and checks).

        One column per part of each statistic, named ``"<statistic>:<part>"``.
        """
        g = self.grouping
        self.check_schema()
        sources = [src for s in self.statistics for src in s.sources()]
        parts = [p for s in self.statistics for p in s.parts(g.sizes is not None)]
        # every column read: the keys and the statistics' columns; the nulls= policy runs
        # record by record, then a null, NaN or infinity left in any of them (counted by
        # the engine over all rows, not only the rows a person keeps) is refused, and so
        # is a missing person identifier (never dropped or filled)
        read = list(dict.fromkeys([*g.keys, *(c for c, _ in sources)]))
        policy = [c for c in read if c != self.unit.person]  # an id is never dropped
        engine = self.engine.without_missing(g.missing, policy)
        if self.unit.is_record:
            agg = engine.grouped_parts(g.keys, parts, read)
        else:  # each person's rows bounded (chosen at random) as they are aggregated
            agg = engine.bounded_grouped_parts(self.unit, g.keys, parts, read, self.random)
        return finish_grouped(
            agg, g.margins, g.keys, parts, unknown_keys=g.unknown_keys, sizes=g.sizes
        )

    def check_schema(self) -> None:
        schema = self.engine.schema()
        missing = [k for k in self.grouping.keys if k not in schema]
        if missing:
            raise InvalidParameterError(
                f"keys {missing} are not columns of the frame (its columns: "
                f"{sorted(schema.names())[:20]})"
            )
        for k in self.grouping.keys:  # a string key never matches a numeric margin
            data, public = schema[k], self.grouping.margins.schema[k]
            check_key_dtype(data, k, "key")
            if textual_key(data) != textual_key(public):
                raise InvalidParameterError(
                    f"key {k!r} has dtype {data} in the data but {public} in the margins: "
                    "list the margins' keys with the data's type"
                )
        # every margin value fits the data key's dtype exactly (the rule the spec follows)
        fit_margins(self.grouping.margins, schema, self.grouping.keys)
        sources = [src for s in self.statistics for src in s.sources()]
        check_sources(schema, sources, "this grouped release")
        read = [*self.grouping.keys, *(c for c, _ in sources)]
        check_fill(schema, self.grouping.missing, read, self.unit.person)
        if not self.unit.is_record:
            check_unit(schema, self.unit, self.grouping.keys)

    def _exact_inputs(self) -> list[Any]:
        exact = self.exact_aggregates()
        self._keys_frame = exact.select(self.grouping.keys)
        arrays = {
            c: exact[c].cast(pl.Float64).fill_null(np.nan).to_numpy()
            for c in exact.columns
            if c not in self.grouping.keys
        }
        return [arrays] * len(self._plans)

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        self._drawn = tuple(outputs)  # for accuracy(): released values and noisy parts
        released = [
            pl.Series(name, values, dtype=pl.Float64)
            for out in outputs
            for name, values in out.items()
        ]
        keys = self._keys_frame
        if keys is None:  # _exact_inputs ran before any draw
            raise RuntimeError("internal error: a grouped release drawn before its inputs")
        frame = keys.with_columns(released)
        frame = frame.with_columns(pl.col(pl.Float64).fill_nan(None))
        if self.grouping.nonnegative:  # post-processing: closer to the truth, never farther
            clamp = [s.name for s in self.statistics if s.nonnegative]
            frame = frame.with_columns(pl.col(clamp).clip(lower_bound=0.0))
        counts = [s.name for s in self.statistics if s.kind == "count"]  # integer noise
        return frame.with_columns(pl.col(counts).round().cast(pl.Int64))


def group_by(
    frame: Any,
    keys: str | Sequence[str],
    *,
    margins: pl.DataFrame | None,
    sizes: str | None = None,
    unknown_keys: str = "error",
    accountant: Any = None,
    seed: Any = None,
    unit: Any = None,
    max_rows: int | None = None,
    max_groups: int | None = None,
    nonnegative: bool = True,
    nulls: str | Mapping[str, float | str] = "refuse",
) -> GroupBy:
    """Group ``frame`` by public ``keys`` for a noisy aggregate release.

    Parameters
    ----------
    frame : polars.LazyFrame, polars.DataFrame or pyspark.sql.DataFrame
        The confidential records (the engine follows the frame's type).
    keys : str or list of str
        Grouping columns.
    margins : polars.DataFrame
        The public frame of every group's keys, one row per group. Groups absent from
        the data are released (from an exact 0); without margins the release refuses.
    sizes : str, optional
        A column of ``margins`` holding each group's *public* size. Then means,
        proportions and variances are released directly by the bounded mechanism with
        the sensitivity of each group's size; the data's sizes must match (else the
        release refuses). Needs substitute neighbours. Without it, sizes are private
        (see ``dpframe.agg``).
    unknown_keys : {"error", "drop"}, default "error"
        What to do with records whose keys are not in ``margins``.
    accountant : Accountant, optional
        Default: the innermost ``with accountant:`` block.
    seed : int or RandomSource, optional
        Reproducible noise for tests -- **unsafe for publication**.
    unit, max_rows, max_groups : optional
        The privacy unit (``docs/privacy-units.md``): the column identifying a person,
        with the rows each person keeps per group and the groups each person keeps
        (chosen at random with the secure source before aggregation). Default: the
        accountant's unit (with these bounds, if given), else one row per person.
    nonnegative : bool, default True
        Clamp released counts, and sums of values whose lower bound is >= 0, at 0 (their
        exact values never are negative, so this only moves a release closer to the
        truth; it adds a small upward bias where the true value is near 0). ``False``
        keeps the unbiased noisy values. The release spec's ``nonnegative`` is the same.
    nulls : "refuse", "drop" or dict, default "refuse"
        Records with a missing value (null, or NaN) in a key or a statistic's column:
        ``"refuse"`` them, naming every such column, before anything is charged;
        ``"drop"`` them before aggregating (the number of records kept is then data: it
        is released with noise, and ``sizes=`` is refused); or fill them, ``{"income":
        0, "region": "unknown"}`` (a public rule, applied record by record; other
        columns refuse). Infinities are refused always. See ``docs/grouped.md``.

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
        unit=unit,
        max_rows=max_rows,
        max_groups=max_groups,
        nonnegative=nonnegative,
        nulls=nulls,
    )
