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

import copy
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from fractions import Fraction
from typing import Annotated, Any, Literal, cast

import numpy as np
import polars as pl
import polars.selectors as cs
from pydantic import (
    BeforeValidator,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from dpframe.core.accountant import LedgerEntry
from dpframe.core.advice import advise
from dpframe.core.budget import exact_sum
from dpframe.core.constraints import (
    AUTO,
    INT64_MAX,
    QUANTILE_STATISTICS,
    check,
    check_key_names,
    spec_field,
)
from dpframe.core.executor import MechanismPlan
from dpframe.core.missing import as_written as nulls_as_written
from dpframe.core.missing import check_nulls
from dpframe.core.units import BOUNDS, PrivacyUnit
from dpframe.engines.bounding import check_unit
from dpframe.engines.driver import (
    check_fill,
    check_key_dtype,
    check_margins,
    check_sources,
    dense_histogram,
    finish_grouped,
    fit_margins,
    indexed_margins,
    refuse_bad_parts,
    textual_key,
    with_bad_totals,
    with_person,
)
from dpframe.errors import InvalidParameterError, MissingMarginsError
from dpframe.mechanisms import statistics as agg
from dpframe.mechanisms.private_bounds import (
    BoundsPlan,
    bounds_grid,
    histogram,
    pending,
    plan_bounds,
)
from dpframe.mechanisms.quantile import quantile_sides
from dpframe.mechanisms.statistics import (
    Drawn,
    Part,
    Statistic,
    StatisticPlan,
    check_statistic_names,
    is_nonnegative,
    plan_statistic,
)
from dpframe.polars.expectations import (
    RTOL,
    Suite,
    expect_finite_between,
    expect_types,
    for_gx,
    start,
    table_column,
    values_like,
    variance_cap,
)
from dpframe.polars.private_keys import (
    KeySelection,
    KeysPlan,
    as_selection,
    in_key_order,
    require_delta,
    select_keys,
)
from dpframe.polars.release import (
    BoundOrAuto,
    Method,
    OptionalEps,
    PositiveEps,
    Release,
    SpecContext,
    SpecEntry,
    SpecModel,
    Summary,
    as_summary,
    bounded_unit,
    resolve_accountant,
)

__all__ = [
    "GroupBy",
    "GroupedRelease",
    "GroupedSpec",
    "StatisticSpec",
    "WholeFrameRelease",
    "group_by",
    "grouped_columns",
    "grouped_suite",
    "median",
    "quantile",
    "statistic",
]


class StatisticSpec(SpecModel):
    stat: Annotated[str, BeforeValidator(spec_field("stat"))]
    epsilon: OptionalEps = None
    mechanism: Annotated[str, BeforeValidator(spec_field("mechanism"))] = Field(
        "laplace", description="a count's or sum's noise: 'laplace' (epsilon) or 'gaussian'"
    )
    rho: Annotated[float | None, BeforeValidator(spec_field("rho", optional=True))] = None
    sigma: Annotated[float | None, BeforeValidator(spec_field("sigma", optional=True))] = None
    column: str | None = None
    x: str | None = None
    y: str | None = None
    lower: BoundOrAuto | None = None
    upper: BoundOrAuto | None = None
    lower_y: BoundOrAuto | None = None
    upper_y: BoundOrAuto | None = None
    method: Method = "truncated"
    name: str | None = None
    # (q and resolution are left out of a stored spec when unset: as before quantiles)
    q: Annotated[float | list[float] | None, BeforeValidator(spec_field("q", optional=True))] = (
        Field(
            None,
            description="a quantile's probabilities, e.g. [0.25, 0.5, 0.75]",
            exclude_if=lambda v: v is None,
        )
    )
    resolution: Annotated[
        float | None, BeforeValidator(spec_field("resolution", optional=True))
    ] = Field(
        None,
        description="a quantile's or median's grid step (default: 1000 bins)",
        exclude_if=lambda v: v is None,
    )
    bounds_epsilon: Annotated[
        float | None, BeforeValidator(spec_field("epsilon", optional=True))
    ] = Field(
        None,
        description="the epsilon of the first pass that finds an 'auto' bound, out of the "
        "statistic's epsilon (default: a fixed share of it)",
    )

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """As written: ``bounds_epsilon`` only where given (a spec without "auto" bounds
        reads, and is recorded, as before)."""
        data: dict[str, Any] = handler(self)
        if data.get("bounds_epsilon") is None:
            data.pop("bounds_epsilon", None)
        return data

    @model_validator(mode="after")
    def _fields(self) -> StatisticSpec:
        s = self.stat
        _quantile_fields(self)
        if s not in ("count", "sum", "count_distinct"):  # (fields dpframe.agg.<stat> lacks)
            if self.mechanism == "gaussian":
                raise ValueError(f"mechanism = 'gaussian' is for counts and sums, not {s}")
            extra = [f for f in ("rho", "sigma") if getattr(self, f) is not None]
            if extra:
                raise ValueError(
                    f"a {s} takes no {', '.join(extra)} (Gaussian noise is for counts and sums)"
                )
        if s == "count_distinct":
            _distinct_fields(self)
        elif s == "count":
            fields = ("column", "lower", "upper", "bounds_epsilon")
            extra = [f for f in fields if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"a count takes no {', '.join(extra)}")
        elif s == "cov":
            missing = [
                f
                for f in ("x", "y", "lower", "upper", "lower_y", "upper_y")
                if getattr(self, f) is None
            ]
            if missing:
                raise ValueError(f"cov needs {', '.join(missing)} (x, y and both pairs of bounds)")
        elif s == "proportion":
            if self.column is None:
                raise ValueError("proportion needs column= (a 0/1 column)")
        else:
            missing = [f for f in ("column", "lower", "upper") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"{s} needs {', '.join(missing)}")
        statistic(self)  # the noise and bounds rules of dpframe.agg.<stat>, in its words
        return self

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.stat == "proportion":
            return (0.0, 1.0)
        if not isinstance(self.lower, float) or not isinstance(self.upper, float):
            return None  # not given, or "auto": found by a first pass
        return (self.lower, self.upper)


def _distinct_fields(entry: StatisticSpec) -> None:
    """A count_distinct entry takes the fields of ``dpframe.agg.count_distinct`` only."""
    fields = ("x", "y", "lower", "upper", "lower_y", "upper_y")
    extra = [f for f in fields if getattr(entry, f) is not None]
    if extra:
        raise ValueError(
            f"a count_distinct takes no {', '.join(extra)} (it counts the unit's persons; "
            "column, if given, is the unit's person column)"
        )


def _quantile_fields(entry: StatisticSpec) -> None:
    """The fields only a quantile (``q``, ``resolution``) or a median (``resolution``)
    takes, refused on the other statistics."""
    s = entry.stat
    takes = {"quantile": ("q", "resolution"), "median": ("resolution",)}.get(s, ())
    extra = [f for f in ("q", "resolution") if f not in takes and getattr(entry, f) is not None]
    if extra:
        raise ValueError(f"a {s} takes no {', '.join(extra)} (they are a quantile's)")


class KeysSpec(SpecModel):
    """A grouped entry's ``private_keys = { epsilon = ..., delta = ... }``: its groups
    selected privately (:func:`dpframe.select_keys`, checked by its own rules)."""

    epsilon: PositiveEps
    delta: Annotated[float, BeforeValidator(spec_field("delta"))]
    method: str = "magic"

    @model_validator(mode="after")
    def _checked(self) -> KeysSpec:
        try:
            select_keys(epsilon=self.epsilon, delta=self.delta, method=self.method)
        except InvalidParameterError as exc:
            raise ValueError(f"private_keys: {exc}") from None
        return self


class GroupedSpec(SpecEntry):
    kind: Literal["grouped"]
    by: list[str] = Field(min_length=1)
    margins: str | None = None
    private_keys: KeysSpec | None = Field(
        None,
        description="select the groups of the data privately (an (epsilon, delta) first "
        "pass): without margins, the groups released; with margins, the extra groups",
    )
    unknown_keys: Annotated[str, BeforeValidator(spec_field("unknown_keys"))] = Field(
        "error",
        description="records whose keys are not in the margins: 'error' (refused, before "
        "anything is charged) or 'drop' (left out, as group_by(unknown_keys='drop'))",
    )
    statistics: list[StatisticSpec] = Field(min_length=1)
    unit: str | None = Field(
        None,
        min_length=1,
        description="this release's person column, on a record ledger (a person-level "
        "release also protects every row); default: the spec's [privacy] unit",
    )
    max_rows: Annotated[int | None, BeforeValidator(spec_field("max_rows", optional=True))] = None
    max_groups: Annotated[int | None, BeforeValidator(spec_field("max_groups", optional=True))] = (
        None
    )
    nonnegative: Annotated[bool, BeforeValidator(spec_field("nonnegative"))] = Field(
        True,
        description="clamp released counts (and sums of non-negative values) at 0: "
        "post-processing, so the table passes 'counts >= 0'",
    )
    nulls: Annotated[str | dict[str, float | str], BeforeValidator(nulls_as_written)] = Field(
        "refuse",
        description="records with a null or NaN in a key or a statistic's column: "
        "'refuse', 'drop' (refused with public sizes), or {column = fill value}",
    )

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """As written: ``private_keys`` only where given (a spec with public margins only
        reads, and is recorded, as before)."""
        data: dict[str, Any] = handler(self)
        if data.get("private_keys") is None:
            data.pop("private_keys", None)
        return data

    @field_validator("statistics")
    @classmethod
    def _distinct_names(cls, v: list[StatisticSpec]) -> list[StatisticSpec]:
        try:
            check_statistic_names([statistic(s) for s in v])
        except InvalidParameterError as exc:
            raise ValueError(str(exc)) from None
        return v

    @field_validator("by")
    @classmethod
    def _distinct_keys(cls, v: list[str]) -> list[str]:
        try:
            return check_key_names(v, "by")
        except InvalidParameterError as exc:  # the error's place already says "by"
            raise ValueError(str(exc).removeprefix("by: ")) from None

    def check_in(self, spec: Any) -> None:
        if self.private_keys is not None and spec.privacy.budget.delta <= 0:
            raise ValueError(
                f"release {self.name!r}: private_keys costs delta={self.private_keys.delta:g} "
                "and the budget has none; set privacy.budget.delta = ... (an (epsilon, "
                "delta) budget)"
            )
        if self.margins is None:
            if self.private_keys is None:
                raise ValueError(
                    f'release {self.name!r}: give margins = "..." (the public groups) or '
                    "private_keys = { epsilon = ..., delta = ... } (groups selected privately)"
                )
            self.check_person(spec, BOUNDS)
            return
        if self.margins not in spec.margins:
            raise ValueError(
                f"release {self.name!r}: margins {self.margins!r} is not defined under [margins]"
            )
        sizes = spec.margins[self.margins].sizes
        if sizes is not None and self.private_keys is not None:
            raise ValueError(
                f"release {self.name!r}: a key selected privately has no public size; "
                f"drop private_keys or margins.{self.margins}.sizes"
            )
        if sizes is None:
            default = StatisticSpec.model_fields["method"].default
            chosen = [  # (the default, as a stored resolved spec spells it, is no choice)
                s.name or s.column or s.x
                for s in self.statistics
                if "method" in s.model_fields_set and s.method != default
            ]
            if chosen:
                raise ValueError(
                    f"release {self.name!r}: method= ({chosen}) applies only with public "
                    f"group sizes (margins.{self.margins}.sizes); without them means, "
                    "proportions and variances are ratios of noisy sums and counts"
                )
        self.check_person(spec, BOUNDS)
        if sizes is not None:
            try:  # the rule of dpframe.core.missing: dropping records changes the sizes
                check_nulls(self.nulls, public_sizes=True)
            except InvalidParameterError as exc:
                raise ValueError(f"release {self.name!r}: {exc}") from None
            self.require_substitute(spec, "public sizes")

    def epsilon_total(self) -> Fraction:
        keys = [] if self.private_keys is None else [self.private_keys.epsilon]
        return exact_sum([*keys, *(s.epsilon for s in self.statistics if s.epsilon is not None)])


#: the pooled row count a bounds pass's histogram starts from (a part of its own)
_POOLED_N = "__bounds__:n"
#: the selection's part: the distinct persons of each key
_PERSONS = "__keys__:persons"


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
        margins: pl.DataFrame | None = None,
        private_keys: KeySelection | None = None,
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
        self.private_keys = as_selection(private_keys)
        self.margins: pl.DataFrame | None = None
        self.sizes: Any = None
        self.sizes_column = sizes
        self.unknown_keys = check("unknown_keys", unknown_keys)
        self.accountant = accountant
        self.seed = seed
        if margins is None and self.private_keys is None:
            raise MissingMarginsError(
                "margins: a grouped release needs the public frame of all group keys "
                "(e.g. margins=pl.DataFrame({'region': [...]})) or a private selection of "
                "them (private_keys=dpframe.select_keys(epsilon=..., delta=...)); taking the "
                "keys from the data would let empty groups vanish and the set of groups "
                "itself leak"
            )
        if self.private_keys is not None and sizes is not None:
            raise InvalidParameterError(
                "sizes: a key selected privately has no public size; drop sizes= or private_keys="
            )
        if margins is None:
            self.missing = check_nulls(nulls, public_sizes=False)
            return
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
        check_statistic_names(stats)
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
        groups = "private" if self.margins is None else self.margins.height
        selected = "" if self.private_keys is None else ", private_keys=selected"
        return f"GroupBy(keys={self.keys}, groups={groups}{selected})"

    def _repr_html_(self) -> str:
        """A notebook's view: the grouping and its public margins (nothing is read)."""
        import html

        shown = "" if self.margins is None else self.margins._repr_html_()
        return f"<p><code>{html.escape(repr(self))}</code></p>{shown}"


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
    spec_model = GroupedSpec
    person_level = True
    required_facts = ("margins",)

    def __init__(self, grouping: GroupBy, statistics: list[Statistic]) -> None:
        super().__init__(
            grouping.frame,
            grouping.accountant,
            grouping.seed,
            grouping.neighbours,
            grouping.unit,
        )
        self.grouping = grouping
        # its own copies, out of the caller's reach: what it plans, reads and draws is
        # what it charges for, whatever is done to what was passed or handed out
        self._statistics = tuple(copy.deepcopy(statistics))
        if self.unit.person in grouping.keys:
            raise InvalidParameterError(
                f"unit: the person column {self.unit.person!r} is a group key; a person "
                "identifier is never released -- group by public keys only"
            )
        #: the bounds found by the first passes, by statistic and column (None: not yet)
        self._found: dict[str, dict[str, tuple[float, float]]] | None = None
        #: the keys the private selection released (None: none, or not drawn yet), and
        #: the candidates it draws over (data: kept from prepare() to the draw only)
        self._selected: pl.DataFrame | None = None
        self._candidates: pl.DataFrame | None = None
        #: the statistics' exact parts of every key present, from the selection's read
        #: (data: kept from prepare() to the statistics' exact inputs only)
        self._first_read: tuple[pl.DataFrame, list[Part]] | None = None
        self._keys_plan = self._plan_keys(self.neighbours)
        if self._keys_plan is not None and any(s.auto for s in self._statistics):
            raise InvalidParameterError(
                'private_keys: a bound found privately ("auto") with keys selected '
                "privately is not offered yet; give the statistics' bounds"
            )
        self._bounds_plans = self._plan_bounds(self.neighbours)
        self._plans = self._make_plans(self.neighbours)
        self._keys_frame: pl.DataFrame | None = None
        self._drawn: tuple[Drawn, ...] | None = None

    @property
    def statistics(self) -> list[Statistic]:
        """Its statistics, as copies: changing them changes nothing of the release.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["N", "S"]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     release = dpframe.group_by(people, "region", margins=people).agg(
        ...         dpframe.agg.count(epsilon=0.5))
        >>> [s.name for s in release.statistics]
        ['count']
        """
        return copy.deepcopy(list(self._statistics))

    def _make_plans(self, neighbours: str) -> list[MechanismPlan]:
        grouping = self.grouping
        plans: list[MechanismPlan] = []
        for s in self.statistics:
            details: dict[str, Any] = {
                "keys": list(grouping.keys),
                "groups": self._groups(),
                "seeded": self.random.seeded,
            }
            if self._selected is not None:  # a DP output: how many, never which
                details["keys_selected"] = self._selected.height
            if not s.auto:
                plans.append(plan_statistic(s, neighbours, grouping.sizes, details, self.unit))
                continue
            # bounds found privately: planned with them once found, a stand-in until then
            passes = s.epsilon_split()[0]
            details |= {
                "bounds": "auto",
                "statistic_name": s.name,
                "epsilon_total": s.epsilon,
                "bounds_epsilon": float(exact_sum(passes)),
            }
            if self._found is None:
                stand_in = plan_statistic(
                    s.stand_in(), neighbours, grouping.sizes, details, self.unit
                )
                plans.append(pending(stand_in, [c for c, _ in s.auto_columns()]))
            else:
                found = s.with_bounds(self._found[s.name])
                details["bounds_found"] = found.options["bounds_found"]
                made = plan_statistic(found, neighbours, grouping.sizes, details, self.unit)
                said = "; ".join(
                    f"bounds of {c} found by the first pass: [{lo:g}, {hi:g}]"
                    for c, (lo, hi) in found.options["bounds_found"].items()
                )
                plans.append(replace(made, note=f"{made.note}; {said}" if made.note else said))
        return plans

    def _plans_of(self) -> list[MechanismPlan]:
        return list(self._plans)

    # -- private bounds: the first passes (lower="auto" / upper="auto") ------------------

    def _plan_bounds(self, neighbours: str) -> list[BoundsPlan]:
        """One first pass per column of a statistic with an ``"auto"`` bound."""
        details = {"keys": list(self.grouping.keys), "seeded": self.random.seeded}
        return [
            plan_bounds(
                column,
                s.name,
                given,
                epsilon=eps,
                neighbours=neighbours,
                unit=self.unit,
                details=details,
            )
            for s in self.statistics
            for (column, given), eps in zip(s.auto_columns(), s.epsilon_split()[0], strict=True)
        ]

    # -- private keys: the selection's first pass (private_keys=) ------------------------

    def _plan_keys(self, neighbours: str) -> KeysPlan | None:
        """The selection's plan: a person changes the persons of at most ``max_groups``
        keys by one (twice as many under substitute neighbours: a removal and an
        addition), the kernel's ``max_groups``."""
        selection = self.grouping.private_keys
        if selection is None:
            return None
        sides = quantile_sides(self.unit, neighbours)[1]
        details = {"seeded": self.random.seeded, "neighbours": neighbours}
        return KeysPlan(selection.plan(sides), tuple(self.grouping.keys), self.unit, details)

    def _keys_pending(self) -> bool:
        return self._keys_plan is not None and self._selected is None

    def _groups(self) -> int | None:
        """The number of groups released (None: selected privately, not drawn yet)."""
        if self._keys_pending():
            return None
        public = self.grouping.margins
        return (0 if public is None else public.height) + (
            0 if self._selected is None else self._selected.height
        )

    def _keyframe(self) -> pl.DataFrame:
        """The keys released: the public margins, then the keys selected privately
        (in the data's dtypes, sorted) -- what the statistics are computed over."""
        g = self.grouping
        if g.private_keys is None and g.margins is not None:
            return g.margins
        if self._selected is None:
            raise InvalidParameterError(
                "the keys are selected privately and the selection is not drawn yet "
                "(collect() the release)"
            )
        if g.margins is None:
            return self._selected
        public = fit_margins(g.margins, self.engine.schema(), g.keys)
        return pl.concat([public, self._selected])

    def _key_counts(self) -> np.ndarray:
        """The selection's input: the distinct persons of each candidate key (a key of
        the data not in the margins), each person's rows bounded as the release's."""
        g = self.grouping
        persons = Part(_PERSONS, "count" if self.unit.is_record else "distinct")
        # the statistics' parts in the same read, where none is a histogram (whose cells
        # are counted per released key): the statistics are then the selection's records'
        # (one evaluation of the input for both, and one read fewer)
        stats = [p for s in self.statistics for p in s.parts(False)]
        shared = [] if any(p.op == "hist" for p in stats) else stats
        self._first_read = None  # this read, never an earlier one
        agg, parts, _, _ = self._data_parts([persons, *shared])
        refuse_bad_parts(agg, g.keys)
        if shared:
            self._first_read = (agg, parts)
        candidates = agg.select(*g.keys, _PERSONS)
        if g.margins is not None:
            public = fit_margins(g.margins, self.engine.schema(), g.keys)
            candidates = candidates.join(public, on=g.keys, how="anti", nulls_equal=True)
        candidates = in_key_order(candidates, g.keys)
        self._candidates = candidates.select(g.keys)
        return candidates[_PERSONS].fill_null(0).cast(pl.Int64).to_numpy()

    def draw(self, steps: list[Any], accountant: Any, *, note: str) -> Any:
        """As :meth:`Release.draw`; a release selecting its keys needs a delta budget
        (refused before anything is charged)."""
        if self._keys_pending() and self._keys_plan is not None:
            require_delta(accountant, self._keys_plan.kernel.delta)
        return super().draw(steps, accountant, note=note)

    def _first_plans(self, neighbours: str | None = None) -> list[MechanismPlan]:
        if self._keys_pending():
            same = neighbours is None or neighbours == self.neighbours
            plan = self._keys_plan if same else self._plan_keys(neighbours or self.neighbours)
            return [] if plan is None else [plan]
        if self._found is not None:
            return []
        if neighbours is None or neighbours == self.neighbours:
            return list(self._bounds_plans)
        return list(self._plan_bounds(neighbours))

    def _first_inputs(self) -> list[Any]:
        if self._keys_pending():
            return [self._key_counts()]
        return self._bounds_inputs()

    def _bounds_inputs(self) -> list[Any]:
        """Each pass's histogram of its column on the candidates, pooled over the
        margins' groups, from the rows the release reads (a person's kept rows)."""
        edges = bounds_grid().edges
        parts = [Part(_POOLED_N, "count")]
        parts += [p for s in self.statistics for p in s.bounds_parts(edges.tolist())]
        exact, _ = self._aggregate(parts)
        total = int(exact[_POOLED_N].fill_null(0).sum())
        hists = []
        for s, plan in zip(self._auto_statistics(), self._bounds_plans, strict=True):
            prefix = s.bounds_prefix(plan.column)
            inner = range(1, edges.size - 1)
            above = [int(exact[f"{prefix}:{k}"].fill_null(0).sum()) for k in inner]
            hists.append(histogram(total, above))
        return hists

    def _auto_statistics(self) -> list[Statistic]:
        """The statistic of each first pass, in the passes' order."""
        return [s for s in self.statistics for _ in s.auto_columns()]

    def _use_first(self, outputs: tuple[Any, ...]) -> None:
        if self._keys_pending():
            if self._candidates is None:
                raise RuntimeError("internal error: keys selected before their counts")
            self._selected = self._candidates.filter(pl.Series(outputs[0], dtype=pl.Boolean))
            self._candidates = None  # the keys not selected are not kept
            self._plans = self._make_plans(self.neighbours)
            return
        found: dict[str, dict[str, tuple[float, float]]] = {}
        for plan, out in zip(self._bounds_plans, outputs, strict=True):
            lo, hi = out[0]
            found.setdefault(plan.statistic, {})[plan.column] = (float(lo), float(hi))
        self._found = found
        self._plans = self._make_plans(self.neighbours)

    @property
    def bounds_found(self) -> dict[str, dict[str, tuple[float, float]]]:
        """The bounds its first passes found, by statistic name and column (empty before
        they are drawn, or when no bound is ``"auto"``): public, drawn with DP.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["N"] * 50, "x": [3.0] * 50})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     margins = people.select("region").unique()
        ...     release = dpframe.group_by(people, "region", margins=margins).agg(
        ...         dpframe.agg.sum("x", lower=0, upper="auto", epsilon=1.0))
        ...     release.bounds_found
        {}
        """
        return {k: dict(v) for k, v in (self._found or {}).items()}

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
              where the value is null. A quantile or median: a *rank* error, in rows of
              the group -- a data-free bound on the rows between ``q n`` and the
              value's ranks (rows strictly inside one bin, and a split's ties, aside),
              the same in every group;
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

            A count of distinct persons released beside ``k`` counts is clamped to at
            most each of them. Its half-widths are then taken at level ``1 - (1 -
            level) / (k + 1)`` (a union bound keeps ``level``): its own where no count
            clamped it, and the largest of its own and the counts' where one did (the
            clamp moves it away from the truth only to a count below its own exact
            value, so by at most that count's error).

        Raises
        ------
        InvalidParameterError
            Before the release is collected (there is nothing to describe yet), or if a
            column it would add has a key column's name (``<key>_error95``).

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
        plans = [cast(StatisticPlan, plan) for plan in self._plans]
        for plan, out in zip(plans, drawn, strict=True):
            columns.update(plan.accuracy(out, level))
        columns.update(_clamped_distinct_errors(plans, drawn, level))
        clash = sorted(set(columns) & set(self._keys_frame.columns))
        if clash:  # a key would be overwritten
            raise InvalidParameterError(
                f"accuracy(): its columns {clash} have the names of key columns; "
                + advise(
                    python="pass name= to the statistic (or rename the key column)",
                    spec="give the statistic its own name = ... (or rename the key column)",
                )
                + " (the release itself is unchanged)"
            )
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

    def output_types(self) -> dict[str, str]:
        """The released statistic columns (after the keys) and their dtypes."""
        return grouped_output_types(self.to_spec())

    @classmethod
    def from_spec(cls, entry: Any, context: SpecContext) -> Release[Any]:
        """``dpframe.group_by(...).agg(...)`` of a spec's ``kind = "grouped"`` entry."""
        keys = entry.private_keys
        public = entry.margins is not None
        return GroupBy(
            context.frame,
            entry.by,
            margins=context.margins(entry) if public else None,
            sizes=context.margins_sizes(entry) if public else None,
            private_keys=None if keys is None else select_keys(**keys.model_dump()),
            unknown_keys=entry.unknown_keys,
            accountant=context.accountant,
            seed=context.source(entry),
            neighbours=context.neighbours,
            nonnegative=entry.nonnegative,
            nulls=entry.nulls,
            **context.unit(entry),
        ).agg(*[statistic(s) for s in entry.statistics])

    def to_spec(self, name: str | None = None) -> dict[str, Any]:
        """Its arguments as a spec entry: ``kind = "grouped"``, its keys and statistics."""
        g = self.grouping
        return {
            "name": self.spec_name(name),
            "kind": "grouped",
            "by": list(g.keys),
            "margins": "margins",
            "statistics": [_statistic_entry(s) for s in self.statistics],
            "nonnegative": g.nonnegative,
            "unknown_keys": g.unknown_keys,
            **self.unit_entry(),
            **({} if g.private_keys is None else {"private_keys": asdict(g.private_keys)}),
        }

    def facts(self) -> dict[str, Any]:
        """The public keys (and their public sizes) its file records for its checks."""
        g = self.grouping
        public = self._keyframe()  # with the keys selected privately: a DP output
        if g.sizes is not None:
            public = public.with_columns(pl.Series(g.sizes_column, g.sizes))
        public = public.with_columns(cs.temporal().cast(pl.String))
        return {"margins": public.to_dict(as_series=False), "sizes": g.sizes_column}

    @classmethod
    def read_facts(cls, facts: Mapping[str, Any], entries: Sequence[LedgerEntry]) -> dict[str, Any]:
        """Its file's facts, and the bounds its first passes found (``"auto"``), as its
        verified ledger entries record them."""
        found: dict[str, dict[str, list[float]]] = {}
        for e in entries:
            named = e.details.get("statistic_name")
            if e.details.get("bounds") == "auto" and isinstance(named, str):
                found[named] = dict(e.details.get("bounds_found") or {})
        return {**facts, "bounds_found": found} if found else dict(facts)

    @classmethod
    def suite(cls, arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
        return grouped_suite(arguments, facts, table)

    def exact_aggregates(self) -> pl.DataFrame:
        """The exact parts joined onto the margins (confidential: for tests and checks).

        One column per part of each statistic, named ``"<statistic>:<part>"`` (a
        histogram: an int64 Array column).
        """
        exact, hists = self._exact_parts()
        return exact.with_columns(pl.Series(name, counts) for name, counts in hists.items())

    def _exact_parts(self) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
        """The exact parts: a frame with one row per margin (in the margins' order) and
        the histograms beside it, each an int64 array (groups, cells) in the same order."""
        if self._first_plans():
            raise InvalidParameterError(
                "exact_aggregates: a first pass (an 'auto' bound, or the private key "
                "selection) is not drawn yet: the exact aggregates need what it finds "
                "(collect() the release)"
            )
        sizes = self.grouping.sizes is not None
        found = self._found or {}
        stats = [s.with_bounds(found[s.name]) if s.auto else s for s in self.statistics]
        return self._aggregate([p for s in stats for p in s.parts(sizes)])

    def _aggregate(self, parts: list[Part]) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
        """The exact ``parts`` joined onto the margins, every column the release reads
        checked (its nulls= policy, bad values, identifiers, keys, public sizes), and the
        histograms of its ``"hist"`` parts beside them."""
        g = self.grouping
        agg, parts, hists, rows = self._data_parts(parts)
        margins = self._keyframe()
        # the records of a key not selected are dropped: refusing them would tell it
        unknown = "drop" if g.private_keys is not None else g.unknown_keys
        exact = finish_grouped(agg, margins, g.keys, parts, unknown_keys=unknown, sizes=g.sizes)
        return exact, ({} if not hists else _histograms(exact, rows, hists, g, margins))

    def _data_parts(
        self, parts: list[Part]
    ) -> tuple[pl.DataFrame, list[Part], list[Part], dict[str, pl.DataFrame]]:
        """One row per key of the data with the exact ``parts`` that are not histograms
        (after the nulls= policy and the bounding of each person's rows), those parts, the
        ``"hist"`` parts, and the histograms' rows over the same records (by the engine's
        :meth:`grouped_parts_and_histograms`: one read of the records where it can; one
        part per column and grid, :func:`_histograms`)."""
        g = self.grouping
        first, self._first_read = self._first_read, None  # taken once
        if first is not None and all(p in first[1] for p in parts):
            return first[0], parts, [], {}
        self.check_schema()
        sources = [src for s in self.statistics for src in s.sources()]
        # every column read: the keys and the statistics' columns; the nulls= policy runs
        # record by record, then a null, NaN or infinity left in any of them (counted by
        # the engine over all rows, not only the rows a person keeps) is refused, and so
        # is a missing person identifier (never dropped or filled)
        read = list(dict.fromkeys([*g.keys, *(c for c, _ in sources)]))
        policy = [c for c in read if c != self.unit.person]  # an id is never dropped
        engine = self.engine.without_missing(g.missing, policy)
        hists = [p for p in parts if p.op == "hist"]
        parts = [p for p in parts if p.op != "hist"]
        if not hists:
            rows: dict[str, pl.DataFrame] = {}
            if self.unit.is_record:
                agg = engine.grouped_parts(g.keys, parts, read)
            else:  # each person's rows bounded (chosen at random) as aggregated
                agg = engine.bounded_grouped_parts(self.unit, g.keys, parts, read, self.random)
            return agg, parts, hists, rows
        margins = indexed_margins(self._keyframe(), engine.schema(), g.keys)
        counted = list({(p.x, p.grid): p for p in hists}.values())
        if self.unit.is_record:
            agg, rows = engine.grouped_parts_and_histograms(g.keys, parts, read, counted, margins)
        else:  # one choice of each person's rows, for the histograms and the other parts
            kept = engine.bounded(self.unit, g.keys, self.random)
            every = engine.grouped_parts(g.keys, [], read)  # bad values of all rows
            mine = with_person(parts, self.unit.person)  # a distinct count reads the ids
            agg, rows = kept.grouped_parts_and_histograms(g.keys, mine, [], counted, margins)
            agg = with_bad_totals(agg, every)
        return agg, parts, hists, rows

    def check_schema(self) -> None:
        schema = self.engine.schema()
        missing = [k for k in self.grouping.keys if k not in schema]
        if missing:
            raise InvalidParameterError(
                f"keys {missing} are not columns of the frame (its columns: "
                f"{sorted(schema.names())[:20]})"
            )
        margins = self.grouping.margins
        for k in self.grouping.keys:  # a string key never matches a numeric margin
            data = schema[k]
            check_key_dtype(data, k, "key")
            public = data if margins is None else margins.schema[k]
            if textual_key(data) != textual_key(public):
                raise InvalidParameterError(
                    f"key {k!r} has dtype {data} in the data but {public} in the margins: "
                    "list the margins' keys with the data's type"
                )
        if margins is not None:  # every margin value fits the data key's dtype exactly
            fit_margins(margins, schema, self.grouping.keys)
        sources = [src for s in self.statistics for src in s.sources()]
        check_sources(schema, sources, "this grouped release")
        read = [*self.grouping.keys, *(c for c, _ in sources)]
        check_fill(schema, self.grouping.missing, read, self.unit.person)
        if not self.unit.is_record:
            check_unit(schema, self.unit, self.grouping.keys)

    def _exact_inputs(self) -> list[Any]:
        exact, hists = self._exact_parts()
        self._keys_frame = exact.select(self.grouping.keys)
        arrays: dict[str, Any] = {
            c: exact[c].cast(pl.Float64).fill_null(np.nan).to_numpy()
            for c in exact.columns
            if c not in self.grouping.keys
        }
        arrays.update(hists)  # a histogram: int64 (groups, cells), never through a frame
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
        frame = _distinct_at_most_rows(frame, self.statistics)
        counts = [s.name for s in self.statistics if s.kind in _INTEGERS]  # integer noise
        return frame.with_columns(pl.col(counts).round().cast(pl.Int64))


#: The statistics released as integers (integer noise on integer counts).
_INTEGERS = ("count", "count_distinct")


def _distinct_at_most_rows(frame: pl.DataFrame, statistics: list[Statistic]) -> pl.DataFrame:
    """Each released distinct count (``dpframe.agg.count_distinct``) at most every released
    count of the same release in its group: post-processing of the two noisy releases
    (a person counted in a group keeps at least one row there, so the exact distinct
    count never exceeds the exact count; the counts are clamped at 0 first, so a clamped
    distinct count stays >= 0)."""
    counts = [s.name for s in statistics if s.kind == "count"]
    distinct = [s.name for s in statistics if s.kind == "count_distinct"]
    if not counts or not distinct:
        return frame
    cap = pl.min_horizontal(counts)
    return frame.with_columns(pl.min_horizontal(pl.col(d), cap).alias(d) for d in distinct)


def _clamped_distinct_errors(
    plans: Sequence[StatisticPlan], drawn: Sequence[Drawn], level: float
) -> dict[str, np.ndarray]:
    """The half-widths of distinct counts clamped to the release's counts
    (:func:`_distinct_at_most_rows`): ``|min(D, C_1..C_k) - d| <= max(|D - d|, |C_j -
    c_j|)`` (the exact ``d <= c_j``), so with each noise within its half-width at level
    ``1 - (1 - level) / (k + 1)`` (all of them: probability at least ``level``) the
    released value is within its own half-width where no count clamped it (the noisy
    ``D`` at most every noisy ``C_j``, known from the draws), and within the largest of
    them where one did."""
    from dpframe.mechanisms.accuracy import level_label

    pairs = list(zip(plans, drawn, strict=True))
    counts = [(p, d) for p, d in pairs if p.statistic.kind == "count"]
    if not counts:
        return {}
    each = 1.0 - (1.0 - level) / (len(counts) + 1)

    def half_width(plan: StatisticPlan, out: Drawn) -> np.ndarray:
        return plan.accuracy(out, each)[f"{plan.statistic.name}_{level_label(each)}"]

    out = {}
    for plan, d in pairs:
        if plan.statistic.kind == "count_distinct":
            own = half_width(plan, d)
            h, least = own, None
            for count, c in counts:
                h = np.maximum(h, half_width(count, c))
                noisy = c[count.statistic.name]
                least = noisy if least is None else np.minimum(least, noisy)
            clamped = d[plan.statistic.name] > least
            out[f"{plan.statistic.name}_{level_label(level)}"] = np.where(clamped, h, own)
    return out


def _histograms(
    exact: pl.DataFrame,
    rows: dict[str, pl.DataFrame],
    hists: list[Any],
    g: GroupBy,
    keyframe: pl.DataFrame,
) -> dict[str, np.ndarray]:
    """One int64 array (groups, cells) per ``"hist"`` part, its rows in the order of
    ``exact``'s groups: each group's cell counts, counted by the engine over the records
    whose keys are in the margins (``rows``, by the name of the first part of each
    column and grid), put in shape by the driver (absent groups all 0). Statistics of
    one column on one grid (a median and quartiles) share one array."""
    distinct = {(p.x, p.grid): p for p in hists}
    counts = {
        same: dense_histogram(rows[p.name], keyframe.height, p.grid.cells)
        for same, p in distinct.items()
    }
    order = exact.select(g.keys)
    if not order.equals(keyframe.select(g.keys)):  # exact's rows in another order
        position = keyframe.select(g.keys).with_row_index("__position")
        index = order.join(
            position, on=g.keys, how="left", nulls_equal=True, maintain_order="left"
        )["__position"].to_numpy()
        counts = {same: c[index] for same, c in counts.items()}
    return {p.name: counts[(p.x, p.grid)] for p in hists}


def _statistic_entry(s: Statistic) -> dict[str, Any]:
    """A statistic as a grouped spec entry's ``statistics`` item."""
    if s.kind in QUANTILE_STATISTICS:
        return _quantile_entry(s)
    entry: dict[str, Any] = {"stat": s.kind, "epsilon": s.epsilon, "column": s.column}
    if s.kind == "count_distinct":
        noise = {"mechanism": s.mechanism, **s.options}
        eps = {} if s.mechanism == "gaussian" else {"epsilon": s.epsilon}
        return {"stat": s.kind, **eps, "column": s.column, "name": s.name, **noise}
    if s.kind == "cov":
        o = s.options
        entry = {"stat": "cov", "epsilon": s.epsilon, "x": s.column, "y": o["y"]}
        entry |= {"lower_y": _bound_entry(o["lower_y"]), "upper_y": _bound_entry(o["upper_y"])}
    if s.auto and s.bounds_epsilon is not None:
        entry["bounds_epsilon"] = s.bounds_epsilon
    bounds: dict[str, Any] = {"lower": _bound_entry(s.lower), "upper": _bound_entry(s.upper)}
    if s.kind == "count" or s.kind == "proportion":
        bounds = {"lower": s.lower, "upper": s.upper}
    return {**entry, **bounds, "method": s.method, "name": s.name}


def _bound_entry(value: float | None) -> float | str:
    """A bound as a spec entry writes it: the number, or ``"auto"`` (found privately)."""
    return AUTO if value is None else value


def _quantile_entry(s: Statistic) -> dict[str, Any]:
    """A quantile or median as a spec entry's ``statistics`` item (``name`` only if one
    was given: the columns' names follow from it)."""
    o = s.options
    entry: dict[str, Any] = {"stat": s.kind, "epsilon": s.epsilon, "column": s.column}
    if s.kind == "quantile":
        entry["q"] = list(o["q"])
    entry |= {"lower": _bound_entry(s.lower), "upper": _bound_entry(s.upper)}
    entry["resolution"] = o["resolution"]
    if s.auto and s.bounds_epsilon is not None:
        entry["bounds_epsilon"] = s.bounds_epsilon
    return {**entry, "name": s.name if o["named"] else None}


def group_by(
    frame: Any,
    keys: str | Sequence[str],
    *,
    margins: pl.DataFrame | None = None,
    private_keys: KeySelection | None = None,
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
    margins : polars.DataFrame, optional
        The public frame of every group's keys, one row per group. Groups absent from
        the data are released (from an exact 0); without margins (and without
        ``private_keys``) the release refuses.
    private_keys : dpframe.select_keys(...), optional
        Select the groups of the data privately (:func:`dpframe.select_keys`, a charged
        first pass with a delta): without ``margins`` the groups released are the keys
        it selects; with ``margins``, every margin key and the extra keys it selects.
        Records of keys not selected are dropped. See ``docs/grouped.md``.
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
        private_keys=private_keys,
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


# -- the suite of a grouped release (plain data: dpframe.polars.expectations) -------------


def grouped_columns(arguments: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(column, role, statistic) of every column a grouped release declares, keys aside."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for s in arguments["statistics"]:
        stat, name, x, y = s["stat"], s.get("name"), s.get("x"), s.get("y")
        if stat == "count":
            out.append((name or "count", "count", s))
        elif stat == "count_distinct":
            out.append((name or "persons", "count_distinct", s))
        elif stat in QUANTILE_STATISTICS:
            q = check("q", (s.get("q") or agg.QUARTILES) if stat == "quantile" else 0.5)
            columns = agg.quantile_columns(s.get("column"), q, name, median=stat == "median")
            out += [(c, stat, s) for c in columns]
        elif stat == "cov":
            n = name or f"{x}_{y}"
            out += [
                (f"{n}_var_{x}", "cov_var", s),
                (f"{n}_var_{y}", "cov_var", s),
                (f"{n}_cov", "cov", s),
                (f"{n}_corr", "corr", s),
            ]
        else:
            out.append((name or f"{s.get('column')}_{stat}", stat, s))
    names = [c for c, _, _ in out]
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        raise InvalidParameterError(
            f"release {arguments['name']!r}: statistics {dup} would be released under the "
            "same column name; give them distinct name= values"
        )
    return out


def grouped_output_types(arguments: Mapping[str, Any]) -> dict[str, str]:
    """The dtype of every statistic column a grouped release declares: a count (of rows
    or of distinct persons) an Int64, every other statistic a Float64."""
    return {
        c: "Int64" if role in _INTEGERS else "Float64" for c, role, _ in grouped_columns(arguments)
    }


# A statistic of a group with public size below this is released as null (dpframe.agg).
_MIN_SIZE = {"mean": 1, "proportion": 1, "var": 2, "cov_var": 2, "cov": 2}


def _recorded_keys(margins: pl.DataFrame, schema: pl.Schema, keys: list[str]) -> pl.DataFrame:
    """Recorded margins with their keys in the released table's dtypes (a date or time is
    recorded as text, :meth:`GroupedRelease.facts`; a value that does not fit is null)."""
    casts = []
    for k in keys:
        if k not in schema or k not in margins.columns:
            continue
        target = schema[k]
        if target.is_temporal() and margins.schema[k] == pl.String:
            casts.append(pl.col(k).str.strptime(target, strict=False))  # type: ignore[arg-type]
        else:
            casts.append(pl.col(k).cast(target, strict=False))
    return margins.with_columns(casts)


def _public_margins(
    arguments: Mapping[str, Any], facts: Mapping[str, Any], schema: pl.Schema
) -> tuple[pl.DataFrame, str | None]:
    """The public key frame (and the name of its sizes column) a grouped suite reads."""
    name = arguments["name"]
    margins = facts.get("margins")
    sizes = facts.get("sizes")
    if margins is None:
        raise MissingMarginsError(
            f"release {name!r} (grouped): pass margins= (the public key frame "
            f"{arguments.get('margins')!r}) to check its keys and row count"
        )
    if isinstance(margins, Mapping):  # as a published file records them
        margins = _recorded_keys(pl.DataFrame(dict(margins)), schema, arguments["by"])
    if not isinstance(margins, pl.DataFrame):
        raise InvalidParameterError(
            f"margins must be a polars DataFrame, got {type(margins).__name__}"
        )
    keys = list(arguments["by"])
    absent = [k for k in keys if k not in margins.columns]
    if absent:
        raise InvalidParameterError(
            f"margins= has no key column(s) {absent} of release {name!r} (by={keys})"
        )
    if sizes is not None and sizes not in margins.columns:
        raise InvalidParameterError(f"sizes={sizes!r} is not a column of margins=")
    return margins, sizes


def _bounds(
    arguments: Mapping[str, Any], col: str, role: str, s: Mapping[str, Any]
) -> tuple[float | None, float | None]:
    """The bounds a released statistic column lies in (either may be open)."""
    if role in ("count", "sum", "count_distinct"):
        clamped = arguments.get("nonnegative", True) and is_nonnegative(s["stat"], s.get("lower"))
        return (0.0 if clamped else None), None
    if role in ("mean", *QUANTILE_STATISTICS):
        return s.get("lower"), s.get("upper")
    if role == "proportion":
        return 0.0, 1.0
    if role == "var":
        return 0.0, variance_cap(s.get("lower"), s.get("upper"))
    if role == "cov_var":
        y = s.get("y")
        if y is not None and col.endswith(f"_var_{y}") and y != s.get("x"):
            return 0.0, variance_cap(s.get("lower_y"), s.get("upper_y"))
        return 0.0, variance_cap(s.get("lower"), s.get("upper"))
    return None, None


def _expect_per_statistic(
    suite: Suite,
    table: tuple[str, pl.DataFrame, list[str]],
    target: tuple[str, list[str], str],
    rule: str,
    example: str,
    *,
    exact: bool = False,
) -> None:
    """A derived table of one row per group and statistic (``table``: its name, frame and
    the columns shown beside the keys and ``"__statistic"``), whose ``target`` column (with
    the keys and the noun of a message) must be at most 0 (exactly 0 if ``exact``).

    A derived table's own columns are named ``__...``, as no key may be
    (:func:`~dpframe.core.constraints.check_key_name`): whatever its keys are named, they
    sit beside them without a clash."""
    name, frame, shown = table
    column, keys, noun = target
    suite.add_table(name, for_gx(frame), [*keys, "__statistic", *shown])
    bounds = {"min_value": 0.0, "max_value": 0.0} if exact else {"max_value": 0.0}
    meta = {"subject_from": "__statistic", "noun": noun, "rule": rule, "example": example}
    suite.expect(
        "expect_column_values_to_be_between",
        name,
        column=column,
        **bounds,
        meta={**meta, "where": keys},
    )


def _expect_integers(
    suite: Suite, frame: pl.DataFrame, keys: list[str], outputs: list[tuple[str, str, Any]]
) -> None:
    """Counts are integers (integer noise on integer counts)."""
    schema = frame.schema
    counts = [c for c, role, _ in outputs if role in _INTEGERS and c in schema]
    if counts and all(k in schema for k in keys):
        parts = [
            frame.select(
                *[pl.col(k).cast(pl.String) for k in keys],
                pl.lit(c).alias("__statistic"),
                pl.col(c).cast(pl.Float64, strict=False).alias("__value"),
            )
            for c in counts
        ]
        ints = pl.concat(parts).with_columns(
            pl.when(pl.col("__value").is_finite())
            .then((pl.col("__value") - pl.col("__value").round()).abs())
            .otherwise(0.0)
            .alias("__fraction")
        )
        _expect_per_statistic(
            suite,
            ("integers", ints, ["__value"]),
            ("__fraction", keys, "values"),
            "not an integer (a count is released with integer noise)",
            "{__value}",
            exact=True,
        )


def _expect_distinct_within_counts(
    suite: Suite, frame: pl.DataFrame, keys: list[str], outputs: list[tuple[str, str, Any]]
) -> None:
    """A distinct count is at most every count of the same release (the release clamps
    it there: :func:`_distinct_at_most_rows`)."""
    schema = frame.schema
    counts = [c for c, role, _ in outputs if role == "count" and c in schema]
    distinct = [c for c, role, _ in outputs if role == "count_distinct" and c in schema]
    if not counts or not distinct or not all(k in schema for k in keys):
        return
    f64 = pl.Float64
    parts = [
        frame.select(
            *[pl.col(k).cast(pl.String) for k in keys],
            pl.lit(d).alias("__statistic"),
            pl.col(d).cast(f64, strict=False).alias("__persons"),
            pl.col(c).cast(f64, strict=False).alias("__rows"),
            pl.lit(c).alias("__of"),
            (pl.col(d).cast(f64, strict=False) - pl.col(c).cast(f64, strict=False))
            .fill_null(0.0)
            .alias("__excess"),
        )
        for d in distinct
        for c in counts
    ]
    _expect_per_statistic(
        suite,
        ("distinct_persons", pl.concat(parts), ["__persons", "__rows", "__of"]),
        ("__excess", keys, "groups"),
        "above the released count of rows (a person counted in a group keeps a row there)",
        "{__persons} persons > {__of} {__rows}",
    )


def _expect_correlations(
    suite: Suite, frame: pl.DataFrame, keys: list[str], outputs: list[tuple[str, str, Any]]
) -> None:
    """A correlation is its released covariance over the released standard deviations,
    clipped to [-1, 1], and undefined (null) exactly where a released variance is 0."""
    schema = frame.schema
    corrs = [(c, s) for c, role, s in outputs if role == "corr"]
    if corrs and all(k in schema for k in keys):
        parts = []
        for col, s in corrs:
            n = col.removesuffix("_corr")
            vx, vy, cv = f"{n}_var_{s['x']}", f"{n}_var_{s['y']}", f"{n}_cov"
            f64 = pl.Float64
            var_x = table_column(frame, vx).cast(f64, strict=False)
            var_y = table_column(frame, vy).cast(f64, strict=False)
            cov = table_column(frame, cv).cast(f64, strict=False)
            corr = table_column(frame, col).cast(f64, strict=False)
            defined = (var_x * var_y) > 0
            expected = pl.when(defined).then((cov / (var_x * var_y).sqrt()).clip(-1.0, 1.0))
            present = corr.is_not_null() & ~corr.is_nan()
            parts.append(
                frame.select(
                    *[pl.col(k).cast(pl.String) for k in keys],
                    pl.lit(col).alias("__statistic"),
                    corr.alias("__corr"),
                    expected.alias("__expected"),
                    pl.lit(f"{cv} / sqrt({vx} * {vy})").alias("__of"),
                    pl.when(defined & present)
                    .then((corr - expected).abs() - RTOL * (1 + expected.abs()))
                    .when(defined != present)
                    .then(1.0)
                    .otherwise(0.0)
                    .alias("__off"),
                )
            )
        _expect_per_statistic(
            suite,
            ("correlations", pl.concat(parts), ["__corr", "__expected", "__of"]),
            ("__off", keys, "groups"),
            "inconsistent with the released cov and variances (a correlation is "
            "cov / sqrt(var_x var_y) clipped to [-1, 1], and NaN/null exactly where a "
            "variance is 0)",
            "corr {__corr}, expected {__expected} = {__of}",
        )


def _expect_cauchy_schwarz(
    suite: Suite, frame: pl.DataFrame, keys: list[str], outputs: list[tuple[str, str, Any]]
) -> None:
    """Cauchy-Schwarz for every covariance."""
    covs = [(c, s) for c, role, s in outputs if role == "cov"]
    if covs:
        parts = []
        for col, s in covs:
            n = col.removesuffix("_cov")
            vx, vy = f"{n}_var_{s['x']}", f"{n}_var_{s['y']}"
            bound = (
                table_column(frame, vx).cast(pl.Float64).clip(lower_bound=0)
                * table_column(frame, vy).cast(pl.Float64).clip(lower_bound=0)
            ).sqrt()
            parts.append(
                frame.select(
                    *[table_column(frame, k, pl.String) for k in keys],
                    pl.lit(col).alias("__statistic"),
                    table_column(frame, col).cast(pl.Float64).alias("__cov"),
                    bound.alias("__bound"),
                    pl.lit(f"sqrt({vx} * {vy})").alias("__bound_of"),
                )
            )
        pairs = pl.concat(parts, how="vertical_relaxed").with_columns(
            (pl.col("__cov").abs() - pl.col("__bound") * (1 + RTOL)).alias("__excess")
        )
        _expect_per_statistic(
            suite,
            ("pairs", pairs, ["__cov", "__bound", "__bound_of"]),
            ("__excess", keys, "groups"),
            "beyond Cauchy-Schwarz |cov| <= sqrt(var_x var_y)",
            "|{__cov}| > {__bound_of} = {__bound}",
        )


def _expect_monotone_quantiles(
    suite: Suite, frame: pl.DataFrame, keys: list[str], outputs: list[tuple[str, str, Any]]
) -> None:
    """A quantile statistic's columns are non-decreasing in ``q`` in every group (each
    released value at most the next one's)."""
    schema = frame.schema
    pairs: list[tuple[str, str]] = []
    for stat in {id(s): s for _, role, s in outputs if role in QUANTILE_STATISTICS}.values():
        columns = [c for c, _, s in outputs if s is stat]
        pairs += list(itertools.pairwise(columns))
    if not pairs or not all(k in schema for k in keys):
        return
    parts = [
        frame.select(
            *[table_column(frame, k, pl.String) for k in keys],
            pl.lit(a).alias("__statistic"),
            table_column(frame, a).cast(pl.Float64, strict=False).alias("__value"),
            pl.lit(b).alias("__next"),
            table_column(frame, b).cast(pl.Float64, strict=False).alias("__next_value"),
        )
        for a, b in pairs
    ]
    ordered = pl.concat(parts, how="vertical_relaxed").with_columns(
        (pl.col("__value") - pl.col("__next_value")).alias("__excess")
    )
    _expect_per_statistic(
        suite,
        ("quantiles", ordered, ["__value", "__next", "__next_value"]),
        ("__excess", keys, "groups"),
        "above the next quantile (quantiles are non-decreasing in q)",
        "{__value} > {__next} = {__next_value}",
    )


def _expect_sizes(
    suite: Suite,
    frame: pl.DataFrame,
    keys: list[str],
    public: pl.DataFrame,
    margins: pl.DataFrame,
    sizes: str,
    nullable: dict[str, int],
) -> None:
    """With public sizes, a null only where the group is too small to have a value."""
    schema = frame.schema
    have_keys = all(k in schema for k in keys)
    sized = (
        frame.join(
            public.join(
                margins.select(*keys, sizes).with_columns(
                    pl.col(k).cast(schema[k], strict=False) for k in keys if k in schema
                ),
                on=keys,
                how="left",
                nulls_equal=True,
            ).select(*keys, pl.col(sizes).alias("__size")),
            on=keys,
            how="left",
            nulls_equal=True,
        )
        if have_keys
        else None
    )
    parts = []
    for col, need in nullable.items():
        if sized is None or col not in sized.columns:
            continue
        c = pl.col(col)
        missing = c.is_null() | (c.is_nan() if sized.schema[col].is_float() else False)
        parts.append(
            sized.filter(missing).select(
                *keys,
                pl.lit(col).alias("__statistic"),
                pl.col("__size").cast(pl.Float64).alias("__size"),
                (pl.col("__size").cast(pl.Float64) - (need - 1)).alias("__size_over"),
            )
        )
    empty = pl.DataFrame(
        schema={
            **{k: schema.get(k, pl.String) for k in keys},
            "__statistic": pl.String,
            "__size": pl.Float64,
            "__size_over": pl.Float64,
        }
    )
    nulls = pl.concat([empty, *parts], how="vertical_relaxed")
    suite.add_table("nulls", for_gx(nulls), [*keys, "__statistic", "__size"])
    suite.expect(
        "expect_column_values_to_be_between",
        "nulls",
        column="__size_over",
        max_value=0.0,
        meta={
            "subject_from": "__statistic",
            "noun": "null values",
            "rule": "are in groups that should have a value (a null is allowed only "
            "where the public size is 0, or at most 1 for a variance or covariance)",
            "example": "size {__size}",
            "where": keys,
        },
    )


def _expect_statistics(
    suite: Suite,
    arguments: Mapping[str, Any],
    outputs: list[tuple[str, str, Any]],
    sizes: str | None,
    where: dict[str, Any],
) -> dict[str, int]:
    """Every statistic finite, in its bounds and not null (a correlation in [-1, 1] and
    undefined where a variance is 0); returns, with public sizes, the columns a null is
    allowed in and the smallest size a group needs to have a value there."""
    nullable: dict[str, int] = {}
    for col, role, s in outputs:
        if role == "corr":
            # a correlation is undefined (null/NaN) where a released variance is 0
            pass
        elif sizes is not None and role in _MIN_SIZE:
            nullable[col] = _MIN_SIZE[role]  # checked against the public sizes below
        else:
            suite.expect("expect_column_values_to_not_be_null", "main", column=col, meta=where)
        lo, hi = _bounds(arguments, col, role, s)
        if role == "corr":
            suite.expect(
                "expect_column_values_to_be_between",
                "main",
                column=col,
                min_value=-1.0 - RTOL,
                max_value=1.0 + RTOL,
                meta={**where, "rule": "outside [-1, 1]"},
            )
        else:
            expect_finite_between(suite, "main", col, lo, hi, where)
    return nullable


def _expect_each_key_once(
    suite: Suite, frame: pl.DataFrame, keys: list[str], public: pl.DataFrame
) -> None:
    """Every public key released exactly once."""
    have_keys = all(k in frame.schema for k in keys)
    if have_keys:
        counts = frame.group_by(keys).agg(pl.len().alias("__rows"))
        key_table = public.join(counts, on=keys, how="left", nulls_equal=True).with_columns(
            pl.col("__rows").fill_null(0)
        )
    else:
        key_table = public.with_columns(pl.lit(None, dtype=pl.UInt32).alias("__rows"))
    suite.add_table("keys", for_gx(key_table), keys)
    suite.expect(
        "expect_column_values_to_be_between",
        "keys",
        column="__rows",
        min_value=1,
        max_value=1,
        meta={
            "subject": "keys",
            "noun": "public keys",
            "rule": "not released exactly once",
            "example": "{__rows} rows",
            "where": keys,
        },
    )


def grouped_suite(arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
    """The suite of a grouped release's table: from its spec entry (keys and statistics)
    and the public facts its file records (``margins``, ``sizes``), with no input data.

    The key columns take only the public margins' values, every margin key appears exactly
    once, the row count is the margins' height, the columns are exactly the keys and the
    statistics, each count an Int64 and every other statistic a Float64; every statistic
    is finite and lies in its bounds (a mean in ``[lower, upper]``, a proportion in
    ``[0, 1]``, a variance in ``[0, R**2 / 2]`` -- the largest sample variance of values in
    bounds of width ``R`` --, a count ``>= 0`` and a sum of non-negative values ``>= 0``
    when ``nonnegative``, a correlation in ``[-1, 1]``); a count is an integer, and so is a
    count of distinct persons (``>= 0`` when ``nonnegative``), which is at most every
    count of rows of the same release in each group; a
    covariance obeys Cauchy--Schwarz, ``|cov| <= sqrt(var_x var_y)``; a correlation is
    when ``nonnegative``, a correlation in ``[-1, 1]``); a count is an integer; a
    covariance obeys Cauchy--Schwarz, ``|cov| <= sqrt(var_x var_y)``; a quantile lies in
    ``[lower, upper]``, never null, its columns non-decreasing in ``q``; a correlation is
    ``cov / sqrt(var_x var_y)`` clipped to ``[-1, 1]``, and null exactly where a released
    variance is 0; no nulls -- except in a correlation column (a correlation is undefined
    where a released variance is 0, so it may be null or NaN) and, when the margins carry
    public group sizes (``sizes``), in a statistic of a group too small to have one (size
    0; size 0 or 1 for a variance or covariance), which the release leaves null.
    """
    arguments = _with_found_bounds(arguments, facts)
    suite, lazy = start(arguments, table)
    frame = lazy.collect() if isinstance(lazy, pl.LazyFrame) else lazy
    schema = frame.schema
    margins, sizes = _public_margins(arguments, facts, schema)
    keys = list(arguments["by"])
    outputs = grouped_columns(arguments)
    public = margins.select(keys).unique(maintain_order=True)
    public = public.with_columns(
        pl.col(k).cast(schema[k], strict=False) for k in keys if k in schema
    )

    suite.add_table("main", for_gx(frame), keys)
    where = {"where": keys}
    suite.expect(
        "expect_table_columns_to_match_set",
        "main",
        column_set=keys + [c for c, _, _ in outputs],
        exact_match=True,
    )
    suite.expect(
        "expect_table_row_count_to_equal",
        "main",
        value=public.height,
        meta={"expected": "one row per public key of the margins"},
    )
    for k in keys:
        suite.expect("expect_column_values_to_not_be_null", "main", column=k, meta=where)
        suite.expect(
            "expect_column_values_to_be_in_set",
            "main",
            column=k,
            value_set=values_like(margins[k].unique(maintain_order=True).to_list(), schema.get(k)),
            meta={**where, "rule": "not among the margins' keys"},
        )

    nullable = _expect_statistics(suite, arguments, outputs, sizes, {"where": keys})
    types = grouped_output_types(arguments)
    expect_types(suite, frame, types, "types")

    _expect_integers(suite, frame, keys, outputs)
    _expect_distinct_within_counts(suite, frame, keys, outputs)
    _expect_correlations(suite, frame, keys, outputs)
    _expect_each_key_once(suite, frame, keys, public)

    _expect_cauchy_schwarz(suite, frame, keys, outputs)
    _expect_monotone_quantiles(suite, frame, keys, outputs)
    if sizes is not None:
        _expect_sizes(suite, frame, keys, public, margins, sizes, nullable)
    return suite


def _with_found_bounds(arguments: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """The spec entry with each ``"auto"`` bound replaced by the bound its first pass
    found (``facts["bounds_found"]``, read from the release's verified ledger entries),
    or left open (None) where none is recorded."""
    found = facts.get("bounds_found") or {}
    stats = []
    for s in arguments.get("statistics", []):
        s = dict(s)
        # (a quantile's entry names it only if a name was given: its default otherwise)
        got = found.get(s.get("name") or f"{s.get('column')}_{s.get('stat')}", {})
        for side, column in (("lower", "column"), ("upper", "column")):
            if s.get(side) == AUTO:
                pair = got.get(s.get(column) or s.get("x") or "")
                s[side] = None if pair is None else pair[0 if side == "lower" else 1]
        for side in ("lower_y", "upper_y"):
            if s.get(side) == AUTO:
                pair = got.get(s.get("y") or "")
                s[side] = None if pair is None else pair[0 if side == "lower_y" else 1]
        stats.append(s)
    return {**arguments, "statistics": stats}


def statistic(s: Any) -> Statistic:
    """The ``dpframe.agg`` statistic a spec's statistic entry describes."""
    name = {"name": s.name} if s.name is not None else {}
    noise = {"epsilon": s.epsilon, "mechanism": s.mechanism, "rho": s.rho, "sigma": s.sigma}
    if s.stat == "count":
        return agg.count(**noise, **name)
    if s.stat == "count_distinct":
        return agg.count_distinct(column=s.column, **noise, **name)
    if s.bounds_epsilon is not None:  # (a count takes none; the others check it)
        name["bounds_epsilon"] = s.bounds_epsilon
    if s.stat == "sum":
        return agg.sum(s.column, lower=s.lower, upper=s.upper, **noise, **name)
    if s.stat == "mean":
        return agg.mean(
            s.column, lower=s.lower, upper=s.upper, epsilon=s.epsilon, method=s.method, **name
        )
    if s.stat == "proportion":
        if "bounds_epsilon" in name:
            raise InvalidParameterError("bounds_epsilon: a proportion has no bounds to find")
        return agg.proportion(s.column, epsilon=s.epsilon, method=s.method, **name)
    if s.stat in QUANTILE_STATISTICS:
        return _quantile_statistic(s, name)
    if s.stat == "var":
        return agg.var(
            s.column, lower=s.lower, upper=s.upper, epsilon=s.epsilon, method=s.method, **name
        )
    return agg.cov(
        s.x,
        s.y,
        lower_x=s.lower,
        upper_x=s.upper,
        lower_y=s.lower_y,
        upper_y=s.upper_y,
        epsilon=s.epsilon,
        method=s.method,
        **name,
    )


def _quantile_statistic(s: Any, name: dict[str, Any]) -> Statistic:
    """The ``dpframe.agg.quantile`` or ``median`` a spec's statistic entry describes."""
    bounds = {"lower": s.lower, "upper": s.upper, "epsilon": s.epsilon}
    if s.stat == "median":
        return agg.median(s.column, **bounds, resolution=s.resolution, **name)
    q = agg.QUARTILES if s.q is None else s.q
    return agg.quantile(s.column, q, **bounds, resolution=s.resolution, **name)


# -- quantiles of a whole frame: a grouped release of one public group ----------------


class WholeFrameRelease(GroupedRelease):
    """A grouped release of one group, every record (:func:`quantile`, :func:`median`):
    its table and :meth:`accuracy` are one row, without the group's key.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"age": [float(a) for a in range(20, 80)]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = dpframe.median(people, "age", lower=0, upper=100, epsilon=1.0)
    >>> type(release).__name__, release.outputs
    ('WholeFrameRelease', ['age_median'])
    """

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        return super()._finish(outputs).drop(self.grouping.keys)

    def accuracy(self, level: float = 0.95) -> pl.DataFrame:
        """As :meth:`GroupedRelease.accuracy`, one row (no key column).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"age": [float(a) for a in range(20, 80)]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     release = dpframe.median(people, "age", lower=0, upper=100, epsilon=1.0)
        ...     _ = release.collect()
        >>> release.accuracy().columns
        ['age_median_error95']
        """
        return super().accuracy(level).drop(self.grouping.keys)


def _whole_frame(
    frame: Any,
    stat: Statistic,
    accountant: Any,
    seed: Any,
    unit: Any,
    max_rows: int | None,
    nulls: str | Mapping[str, float | str],
) -> WholeFrameRelease:
    """``stat`` over every record of ``frame``: one public group (a constant key the
    frame does not have), each person keeping at most ``max_rows`` rows."""
    from dpframe.engines import engine_for

    engine = engine_for(frame)
    names = {n.lower() for n in engine.schema().names()}  # Spark matches names without case
    key = next(k for k in (f"all{'_' * i}" for i in range(len(names) + 1)) if k not in names)
    max_groups = 1 if unit is not None or max_rows is not None else None  # one group
    grouping = GroupBy(
        engine.with_constant(key).frame,
        key,
        margins=pl.DataFrame({key: [True]}),
        accountant=accountant,
        seed=seed,
        unit=unit,
        max_rows=max_rows,
        max_groups=max_groups,
        nulls=nulls,
    )
    return WholeFrameRelease(grouping, [stat])


def quantile(
    frame: Any,
    column: str,
    *,
    lower: float | str,
    upper: float | str,
    epsilon: float,
    q: float | Sequence[float] = agg.QUARTILES,
    resolution: float | None = None,
    bounds_epsilon: float | None = None,
    accountant: Any = None,
    seed: Any = None,
    unit: Any = None,
    max_rows: int | None = None,
    nulls: str | Mapping[str, float | str] = "refuse",
) -> WholeFrameRelease:
    """Quantiles of ``column`` over the whole frame, all of ``q`` for one ``epsilon``.

    :func:`dpframe.agg.quantile` released over one group holding every record (the
    grouped machinery: the same checks, engines, charge, suite): ``collect()`` gives a
    one-row table, one Float64 column per probability (``<column>_q25``, ...), each a
    grid edge in ``[lower, upper]``, non-decreasing in ``q``. ``unit`` / ``max_rows``:
    each person keeps at most ``max_rows`` rows (``docs/privacy-units.md``); ``nulls``
    as in :func:`dpframe.group_by`. ``lower`` / ``upper`` may be ``"auto"`` (found by a
    charged first pass, ``bounds_epsilon`` out of ``epsilon``: :func:`dpframe.agg.quantile`).

    Examples
    --------
    >>> import numpy as np, polars as pl, dpframe
    >>> df = pl.DataFrame({"income": np.random.default_rng(0).uniform(0, 100, 2000)})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     table = dpframe.quantile(df, "income", lower=0, upper=100, epsilon=1.0).collect()
    >>> table.columns, table.height, acct.spent.epsilon
    (['income_q25', 'income_q50', 'income_q75'], 1, 1.0)
    >>> bool(20 < table["income_q50"].item() < 80)
    True
    """
    stat = agg.quantile(
        column,
        q,
        lower=lower,
        upper=upper,
        epsilon=epsilon,
        resolution=resolution,
        bounds_epsilon=bounds_epsilon,
    )
    return _whole_frame(frame, stat, accountant, seed, unit, max_rows, nulls)


def median(
    frame: Any,
    column: str,
    *,
    lower: float | str,
    upper: float | str,
    epsilon: float,
    resolution: float | None = None,
    bounds_epsilon: float | None = None,
    accountant: Any = None,
    seed: Any = None,
    unit: Any = None,
    max_rows: int | None = None,
    nulls: str | Mapping[str, float | str] = "refuse",
) -> WholeFrameRelease:
    """The median of ``column`` over the whole frame: :func:`quantile` with ``q=0.5``,
    released as ``<column>_median``.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"age": [float(a % 60 + 20) for a in range(3000)]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     table = dpframe.median(df, "age", lower=0, upper=100, epsilon=1.0).collect()
    >>> table.columns, bool(40 < table["age_median"].item() < 60)
    (['age_median'], True)
    """
    stat = agg.median(
        column,
        lower=lower,
        upper=upper,
        epsilon=epsilon,
        resolution=resolution,
        bounds_epsilon=bounds_epsilon,
    )
    return _whole_frame(frame, stat, accountant, seed, unit, max_rows, nulls)
