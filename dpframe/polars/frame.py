"""Whole-frame releases: a covariance matrix and a proportion vector (Liu 2019, Section 4).

Thin adapters of the kernels :mod:`dpframe.mechanisms.covariance` and
:mod:`dpframe.mechanisms.proportions`: the engine computes the exact statistic (values
clipped to the public bounds; counts per *declared* category), the release checks that
the declared public size ``n`` is the frame's row count, and the executor charges the
whole release once, before any noise (:class:`~dpframe.polars.release.Release`).

Both need the dataset size to be public (the paper's setting), so both refuse an
accountant with ``neighbours="add_remove"``, under which the size is private
(:mod:`dpframe.core.neighbours`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any, ClassVar, Literal

import polars as pl
from pydantic import (
    BeforeValidator,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from dpframe.core.accountant import LedgerEntry
from dpframe.core.advice import advise
from dpframe.core.budget import exact
from dpframe.core.constraints import (
    AUTO,
    AUTO_BOUNDS_EXPONENTS,
    check,
    check_auto_bounds,
    check_bounds_epsilon,
    check_categories,
    refuse_pattern_name,
    spec_field,
)
from dpframe.core.executor import MechanismPlan
from dpframe.core.neighbours import require_substitute
from dpframe.core.sensitivity import variance_bound
from dpframe.core.values import refuse_bad_values
from dpframe.engines.driver import (
    BAD_PREFIX,
    ROWS,
    check_categories_fit,
    check_sources,
    declared_counts,
)
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.allocation import ErrorCurve
from dpframe.mechanisms.covariance import CovarianceResult, bound_pairs, plan_covariance_matrix
from dpframe.mechanisms.private_bounds import (
    FoundPlan,
    bounds_grid,
    histogram,
    pending,
    plan_bounds,
)
from dpframe.mechanisms.proportions import ProportionsResult, plan_proportions
from dpframe.mechanisms.statistics import bounds_parts, split_bounds_epsilon
from dpframe.polars.expectations import (
    PROPORTIONS_TOLERANCE,
    RTOL,
    Suite,
    declared,
    expect_finite_between,
    expect_types,
    for_gx,
    input_rows,
    start,
    values_like,
)
from dpframe.polars.release import (
    BoundOrAuto,
    Method,
    OptionalEps,
    PositiveEps,
    Release,
    SpecContext,
    SpecEntry,
    spec_categories,
)

__all__ = [
    "CovarianceMatrixRelease",
    "ProportionsRelease",
    "check_public_size",
    "covariance_matrix",
    "covariance_suite",
    "proportions",
    "proportions_suite",
]


#: The column of a covariance matrix that names each row's variable.
COVARIANCE_LABEL = "column"
#: The column of a proportions release that holds each category's proportion.
PROPORTION = "proportion"


def refuse_output_name(columns: Sequence[str], own: str, what: str) -> None:
    """Refuse, before anything is read or charged, an input column named as the column
    ``own`` a release adds to its output beside the columns' own (it would be overwritten
    in the released table).

    Examples
    --------
    >>> refuse_output_name(["vote"], PROPORTION, "proportions")  # nothing to refuse
    >>> refuse_output_name(["proportion"], PROPORTION, "proportions")
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: proportions: column 'proportion' has the name of...
    """
    if own in columns:
        rename = advise(
            python=f"rename it first, e.g. frame.rename({{{own!r}: '{own}_'}})",
            spec="rename the column in the input file and in the spec",
        )
        raise InvalidParameterError(
            f"{what}: column {own!r} has the name of the column the release adds to its "
            f"table; {rename}"
        )


def check_public_size(n: int, rows: int) -> None:
    """The declared public size must be the data's (the sensitivities assume it)."""
    if n != rows:
        raise InvalidDataError(
            f"n={n} is declared public, but the frame has {rows} rows; the sensitivities "
            "assume the declared size, so pass the true public size (nothing was charged)"
        )


def check_covariance_arguments(
    columns: Any, bounds: Any
) -> tuple[list[str], list[tuple[float | None, float | None]]]:
    """:func:`covariance_matrix`'s ``columns`` (two or more distinct names) and ``bounds``
    (one ``(lower, upper)`` pair per column, each a finite number or ``"auto"`` -- None in
    the result --, ``lower < upper``; ``bounds="auto"``: every one found privately),
    checked; the release spec's covariance entry is checked by this too."""
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise InvalidParameterError(
            f"columns must be a list of two or more column names, got {columns!r}"
        )
    names = list(columns)
    if len(names) < 2 or len(set(names)) != len(names):
        raise InvalidParameterError(f"columns must be two or more distinct names, got {names}")
    if not all(isinstance(c, str) for c in names):
        raise InvalidParameterError(f"columns must be column names, got {names}")
    refuse_output_name(names, COVARIANCE_LABEL, "a covariance matrix")
    if bounds == AUTO:
        bounds = [(AUTO, AUTO)] * len(names)
    if isinstance(bounds, str) or not isinstance(bounds, Sequence):
        raise InvalidParameterError(
            f"bounds must be one (lower, upper) pair per column, or {AUTO!r}, got {bounds!r}"
        )
    if len(bounds) != len(names):
        raise InvalidParameterError(
            f"bounds must give one (lower, upper) pair per column: {len(names)} "
            f"columns, {len(bounds)} pairs"
        )
    if not any(v == AUTO for pair in bounds if isinstance(pair, Sequence) for v in pair):
        return names, list(bound_pairs(bounds, len(names)))
    given = []
    for j, pair in enumerate(bounds):
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidParameterError(f"bounds[{j}] must be a pair (lower, upper), got {pair!r}")
        given.append(
            check_auto_bounds(pair[0], pair[1], (f"bounds[{j}] lower", f"bounds[{j}] upper"))
        )
    return names, given


class ProportionsSpec(SpecEntry):
    kind: Literal["proportions"]
    column: str
    epsilon: PositiveEps
    categories: list[Any] | None = None
    n: Annotated[int | None, BeforeValidator(spec_field("proportions_n", optional=True))] = Field(
        None, description="public size; default: the input's rows"
    )
    strategy: Annotated[str, BeforeValidator(spec_field("strategy"))] = "rescale"
    method: Method = "truncated"
    tolerance: Annotated[float, Field(gt=0, lt=0.5)] = 1e-9

    def check_in(self, spec: Any) -> None:
        self.require_substitute(spec, "dataset size")

    def epsilon_total(self) -> Fraction:
        return exact(self.epsilon)


class CovarianceSpec(SpecEntry):
    kind: Literal["covariance"]
    columns: list[str] = Field(min_length=2)
    bounds: list[tuple[BoundOrAuto, BoundOrAuto]] | Literal["auto"]
    epsilon: PositiveEps
    bounds_epsilon: OptionalEps = Field(
        None,
        description="the epsilon of the first pass that finds 'auto' bounds, out of epsilon "
        "(default: a fixed share of it)",
    )
    n: Annotated[int | None, BeforeValidator(spec_field("covariance_n", optional=True))] = None
    method: Method = "truncated"
    repair: Annotated[str | None, BeforeValidator(spec_field("repair"))] = None

    @model_validator(mode="after")
    def _bounds(self) -> CovarianceSpec:
        # the columns' and bounds' rules of dpframe.covariance_matrix, in its words
        given = check_covariance_arguments(self.columns, self.bounds)[1]
        if self.bounds_epsilon is not None and all(None not in g for g in given):
            raise ValueError(f"bounds_epsilon: no bound is {AUTO!r}; drop bounds_epsilon")
        check_bounds_epsilon(self.bounds_epsilon, self.epsilon)
        return self

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """As written: ``bounds_epsilon`` only where given."""
        data: dict[str, Any] = handler(self)
        if data.get("bounds_epsilon") is None:
            data.pop("bounds_epsilon", None)
        return data

    def check_in(self, spec: Any) -> None:
        self.require_substitute(spec, "dataset size")

    def epsilon_total(self) -> Fraction:
        return exact(self.epsilon)


class CovarianceMatrixRelease(Release[pl.DataFrame]):
    """The release of a covariance matrix (see :func:`covariance_matrix`).

    ``collect()`` returns a frame with a ``column`` key and one Float64 column per
    variable; the kernel's :class:`~dpframe.mechanisms.covariance.CovarianceResult`
    (values before and after repair, scales, degenerate pairs) is then ``result``.

    Examples
    --------
    >>> import numpy as np, polars as pl, dpframe
    >>> rng = np.random.default_rng(0)
    >>> df = pl.DataFrame({"x": rng.uniform(0, 1, 200), "y": rng.uniform(0, 2, 200)})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = dpframe.covariance_matrix(
    ...         df, ["x", "y"], [(0, 1), (0, 2)], epsilon=1.0, n=200
    ...     )
    ...     table = release.collect()
    >>> table["column"].to_list(), release.collect() is table  # collected once
    (['x', 'y'], True)
    """

    kind = "covariance matrix"
    spec_model = CovarianceSpec

    def __init__(
        self,
        frame: Any,
        columns: Sequence[str],
        bounds: Sequence[tuple[float | str, float | str]] | str,
        *,
        epsilon: float,
        n: int,
        method: str,
        calibration: str,
        repair: str | None,
        accountant: Any,
        seed: Any,
        neighbours: str | None = None,
        bounds_epsilon: float | None = None,
    ) -> None:
        super().__init__(frame, accountant, seed, neighbours)
        require_substitute(self.neighbours, "dataset size", argument="n")
        self.columns, self.given = check_covariance_arguments(columns, bounds)
        self.bounds: list[Any] = [
            (AUTO if lo is None else lo, AUTO if hi is None else hi) for lo, hi in self.given
        ]
        self.n = check("covariance_n", n, name="n")
        self.epsilon_given = check("epsilon", epsilon)
        self.auto = [c for c, g in zip(self.columns, self.given, strict=True) if None in g]
        self.bounds_epsilon = None
        passes: list[float] = []
        own = self.epsilon_given
        if self.auto:
            if calibration == "paper":
                raise InvalidParameterError(
                    f"bounds: {AUTO!r} bounds cannot hold with calibration='paper', whose "
                    "charge depends on the bounds (not known until the first pass is "
                    "drawn); use calibration='exact' (the default), or give the bounds"
                )
            self.bounds_epsilon = check_bounds_epsilon(bounds_epsilon, self.epsilon_given)
            passes, own = split_bounds_epsilon(
                self.epsilon_given, self.bounds_epsilon, len(self.auto)
            )
        elif bounds_epsilon is not None:
            raise InvalidParameterError(
                f"bounds_epsilon: no bound is {AUTO!r}; drop bounds_epsilon, or set a bound "
                f"to {AUTO!r} (found by a first pass)"
            )
        self._own = own
        self._method, self._calibration, self._repair = method, calibration, repair
        self._found: dict[str, tuple[float, float]] | None = None
        self._passes = [
            plan_bounds(c, "covariance", g, epsilon=e, neighbours=self.neighbours)
            for (c, g), e in zip(
                [(c, g) for c, g in zip(self.columns, self.given, strict=True) if None in g],
                passes,
                strict=True,
            )
        ]
        inner = self._plan_with({})
        self.plan: MechanismPlan = pending(inner, self.auto) if self.auto else inner
        self.result: CovarianceResult | None = None

    def _plan_with(self, found: Mapping[str, tuple[float, float]]) -> Any:
        """The covariance plan with the bounds ``found`` (None: stand-ins, the widest)."""
        widest = 2.0 ** AUTO_BOUNDS_EXPONENTS[1]
        bounds = []
        for c, (lo, hi) in zip(self.columns, self.given, strict=True):
            got = found.get(c, (-widest, widest))
            pair = (got[0] if lo is None else lo, got[1] if hi is None else hi)
            bounds.append(
                pair if pair[0] < pair[1] else (pair[0], pair[0] + max(1.0, abs(pair[0])))
            )
        return plan_covariance_matrix(
            len(self.columns),
            self.n,
            bounds,
            self._own,
            method=self._method,
            calibration=self._calibration,
            neighbours=self.neighbours,
            repair=self._repair,
        )

    def _plans_of(self) -> list[MechanismPlan]:
        return [self.plan]

    # -- private bounds: the first passes (bounds "auto") ----------------------------------

    def _first_plans(self, neighbours: str | None = None) -> list[MechanismPlan]:
        if self._found is not None:
            return []
        if neighbours is None or neighbours == self.neighbours:
            return list(self._passes)
        return [
            plan_bounds(p.column, p.statistic, p.given, epsilon=p.epsilon, neighbours=neighbours)
            for p in self._passes
        ]

    def _first_inputs(self) -> list[Any]:
        """Each pass's histogram of its column on the bounds grid, every row read; bad
        values and a size other than the public ``n`` refused before any charge."""
        self.check_schema()
        edges = bounds_grid().edges
        parts = [
            q for c in self.auto for q in bounds_parts(f"covariance:bounds:{c}", c, edges.tolist())
        ]
        exact = self.engine.grouped_parts([], parts, self.columns)
        refuse_bad_values(
            {
                c.removeprefix(BAD_PREFIX): int(exact[c].sum())
                for c in exact.columns
                if c.startswith(BAD_PREFIX)
            }
        )
        total = int(exact[ROWS].sum()) if exact.height else 0
        check_public_size(self.n, total)
        inner = range(1, edges.size - 1)
        return [
            histogram(total, [int(exact[f"covariance:bounds:{c}:{k}"].sum()) for k in inner])
            for c in self.auto
        ]

    def _use_first(self, outputs: tuple[Any, ...]) -> None:
        found = {p.column: out[0] for p, out in zip(self._passes, outputs, strict=True)}
        self._found = found
        self.plan = FoundPlan(self._plan_with(found), found)

    @property
    def bounds_found(self) -> dict[str, tuple[float, float]]:
        """The bounds its first passes found, by column (empty before they are drawn, or
        when no bound is ``"auto"``).

        Examples
        --------
        >>> import numpy as np, polars as pl, dpframe
        >>> df = pl.DataFrame({"x": np.arange(100.0), "y": np.arange(100.0) % 7})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     release = dpframe.covariance_matrix(df, ["x", "y"], "auto", epsilon=1.0, n=100)
        ...     release.bounds_found
        {}
        """
        return dict(self._found or {})

    def check_schema(self) -> None:
        check_sources(
            self.engine.schema(), [(c, "numeric") for c in self.columns], "a covariance matrix"
        )

    def _exact_inputs(self) -> list[Any]:
        self.check_schema()
        inputs = self.engine.covariance_inputs(self.columns, _inner(self.plan).bounds)
        refuse_bad_values(inputs.bad)
        check_public_size(self.n, inputs.rows)
        return [inputs.cov]

    def output_types(self) -> dict[str, str]:
        """The released columns and their dtypes: the variable's name, then one per variable."""
        return covariance_output_types(self.columns)

    #: where a spec's error95 target may stand: on the release (its epsilon)
    accuracy_parts: ClassVar[tuple[str, ...]] = ("release",)

    @classmethod
    def error_curve(cls, entry: Any, index: int, context: SpecContext) -> ErrorCurve:
        """A spec entry's error95 as a function of its epsilon: the largest error95 the
        plan states (each variance ``S[i,i]``, in its column's units squared), at the
        entry's ``n`` or the input's public row count.

        Examples
        --------
        >>> from types import SimpleNamespace as NS
        >>> entry = NS(bounds=[(0, 1), (0, 2)], n=1000, method="truncated", repair=None)
        >>> curve = CovarianceMatrixRelease.error_curve(entry, 0, NS(neighbours="substitute"))
        >>> round(curve(1.0), 4)
        0.0664
        """
        if entry.bounds == AUTO or any(AUTO in tuple(b) for b in entry.bounds):
            raise InvalidParameterError(
                "error95 of a covariance matrix: its bounds are found by a first pass "
                "('auto'), so its error is not known before the run; give the bounds"
            )
        n = entry.n if entry.n is not None else context.rows()
        bounds = [(float(b[0]), float(b[1])) for b in entry.bounds]

        def error(eps: float) -> float:
            plan = plan_covariance_matrix(
                len(bounds),
                n,
                bounds,
                eps,
                method=entry.method,
                neighbours=context.neighbours,
                repair=entry.repair,
            )
            return float(max(r["error95"] for r in plan.summary() if r["error95"] is not None))

        said = f"n = {n}" + (", the input's rows" if entry.n is None else "")
        said += "; the largest error95 of its variances S[i,i]"
        return ErrorCurve("covariance", "epsilon", error, assumption=said)

    @classmethod
    def from_spec(cls, entry: Any, context: SpecContext) -> Release[Any]:
        """``dpframe.covariance_matrix(...)`` of a spec's ``kind = "covariance"`` entry."""
        return cls(
            context.frame,
            entry.columns,
            entry.bounds if entry.bounds == AUTO else [tuple(b) for b in entry.bounds],
            epsilon=entry.epsilon,
            n=entry.n if entry.n is not None else context.rows(),
            method=entry.method,
            calibration="exact",
            repair=entry.repair,
            accountant=context.accountant,
            seed=context.source(entry),
            neighbours=context.neighbours,
            bounds_epsilon=entry.bounds_epsilon,
        )

    def to_spec(self, name: str | None = None) -> dict[str, Any]:
        """Its arguments as a spec entry: ``kind = "covariance"``, columns, bounds, ``n``."""
        return {
            "name": self.spec_name(name),
            "kind": "covariance",
            "columns": list(self.columns),
            "bounds": [list(b) for b in self.bounds],
            "epsilon": self.epsilon_given,
            "n": self.n,
            **({"bounds_epsilon": self.bounds_epsilon} if self.bounds_epsilon else {}),
        }

    def facts(self) -> dict[str, Any]:
        """The public size (the input's rows) its file records: the variances' bound."""
        return {"input_rows": self.n}

    @classmethod
    def read_facts(cls, facts: Mapping[str, Any], entries: Sequence[LedgerEntry]) -> dict[str, Any]:
        """Its file's facts, and the bounds its first passes found, as its verified
        ledger entries record them."""
        for e in entries:
            if e.details.get("bounds") == AUTO and e.details.get("bounds_found"):
                return {**facts, "bounds_found": dict(e.details["bounds_found"])}
        return dict(facts)

    @classmethod
    def suite(cls, arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
        return covariance_suite(arguments, facts, table)

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        self.result = outputs[0]
        values = self.result.values
        return pl.DataFrame({COVARIANCE_LABEL: self.columns}).with_columns(
            [pl.Series(c, values[:, j], dtype=pl.Float64) for j, c in enumerate(self.columns)]
        )


def covariance_matrix(
    frame: Any,
    columns: Sequence[str],
    bounds: Sequence[tuple[float | str, float | str]] | str,
    *,
    epsilon: float,
    n: int,
    method: str = "truncated",
    calibration: str = "exact",
    repair: str | None = None,
    accountant: Any = None,
    seed: Any = None,
    bounds_epsilon: float | None = None,
) -> CovarianceMatrixRelease:
    """Declare the release of the covariance matrix of ``columns`` (Simulation study 1).

    Variances first, inside ``[0, n (hi - lo)**2 / (4 (n - 1))]``; then covariances
    inside ``±sqrt(S*jj S*kk)`` of the sanitized variances; epsilon split equally; an
    optional repair to the nearest positive semi-definite matrix (``repair="higham"``
    or ``"clip"``). See :mod:`dpframe.mechanisms.covariance`. Nothing runs until
    ``collect()``; ``summarize()`` shows the cost first.

    A bound may be ``"auto"`` (``bounds="auto"``: all of them): a first pass per column,
    charged ``bounds_epsilon`` out of ``epsilon`` in all (default
    :data:`~dpframe.core.constraints.AUTO_BOUNDS_SHARE` of it), finds it privately
    (:mod:`dpframe.mechanisms.private_bounds`); ``release.bounds_found`` then holds them.

    Examples
    --------
    >>> import numpy as np, polars as pl, dpframe
    >>> rng = np.random.default_rng(0)
    >>> df = pl.DataFrame({"x": rng.uniform(-3, 3, 500), "y": rng.uniform(-4, 4, 500)})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     rel = dpframe.covariance_matrix(df, ["x", "y"], [(-3, 3), (-4, 4)], epsilon=1.0,
    ...                                     n=500)
    ...     table = rel.collect()
    >>> table.columns, round(acct.spent.epsilon, 12)  # three shares of 1.0, each 0.333...
    (['column', 'x', 'y'], 1.0)
    """
    return CovarianceMatrixRelease(
        frame,
        columns,
        bounds,
        epsilon=epsilon,
        n=n,
        method=method,
        calibration=calibration,
        repair=repair,
        accountant=accountant,
        seed=seed,
        bounds_epsilon=bounds_epsilon,
    )


def _inner(plan: Any) -> Any:
    """A covariance plan, unwrapped from the bounds found (:class:`FoundPlan`)."""
    return plan.inner if isinstance(plan, FoundPlan) else plan


def declared_categories(schema: pl.Schema, column: str, categories: Any, what: str) -> list[Any]:
    """The categories of ``column``: declared, or its Enum's -- never the data's."""
    refuse_pattern_name(column, what)
    if column not in schema:
        raise InvalidParameterError(f"column {column!r} is not in the frame")
    dtype = schema[column]
    if categories is None:
        if not isinstance(dtype, pl.Enum):
            raise InvalidParameterError(
                f"categories: column {column!r} has dtype {dtype}, which does not declare its "
                f"categories; pass categories=[...] (the public list) or cast to pl.Enum. The "
                f"categories present in the data are private, so {what} never takes them "
                "from it"
            )
        return list(dtype.categories)
    cats = list(check_categories(categories) or ())
    check_categories_fit(dtype, cats, column)  # the one rule PRAM follows too
    return cats


class ProportionsRelease(Release[pl.DataFrame]):
    """The release of a proportion vector (see :func:`proportions`).

    ``collect()`` returns a frame with the categories (in declared order) and
    ``proportion``; the kernel's
    :class:`~dpframe.mechanisms.proportions.ProportionsResult` is then ``result``.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"vote": ["a", "b", "b", "c"] * 25})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = dpframe.proportions(
    ...         df, "vote", categories=["a", "b", "c"], epsilon=1.0, n=100
    ...     )
    ...     table = release.collect()
    >>> table.columns, round(table["proportion"].sum(), 9)
    (['vote', 'proportion'], 1.0)
    """

    kind = "proportions"
    spec_model = ProportionsSpec

    def __init__(
        self,
        frame: Any,
        column: str,
        *,
        epsilon: float,
        n: int,
        categories: Sequence[Any] | None,
        strategy: str,
        method: str,
        calibration: str,
        accountant: Any,
        seed: Any,
        neighbours: str | None = None,
        dtype: pl.DataType | None = None,
    ) -> None:
        super().__init__(frame, accountant, seed, neighbours)
        require_substitute(self.neighbours, "dataset size", argument="n")
        #: the dtype of the released category column (a job passes its file's Enum)
        self.dtype = dtype if dtype is not None else self.engine.schema().get(column)
        if not isinstance(column, str):
            raise InvalidParameterError(f"column must be a column name, got {column!r}")
        refuse_output_name([column], PROPORTION, "proportions")
        self.column = column
        self.categories = declared_categories(
            self.engine.schema(), column, categories, "proportions"
        )
        self.n = check("proportions_n", n, name="n")
        self.plan = plan_proportions(
            len(self.categories),
            self.n,
            epsilon,
            strategy=strategy,
            method=method,
            calibration=calibration,
            neighbours=self.neighbours,
        )
        self.result: ProportionsResult | None = None

    def _plans_of(self) -> list[MechanismPlan]:
        return [self.plan]

    def output_types(self) -> dict[str, str]:
        """The released columns and their dtypes (the category column's is the input's if
        an Enum or an integer)."""
        return {self.column: str(self._categories().dtype), PROPORTION: "Float64"}

    #: where a spec's error95 target may stand: on the release (its epsilon)
    accuracy_parts: ClassVar[tuple[str, ...]] = ("release",)

    @classmethod
    def error_curve(cls, entry: Any, index: int, context: SpecContext) -> ErrorCurve:
        """A spec entry's error95 as a function of its epsilon: the largest error95 of its
        proportions the plan states, at the entry's ``n`` or the input's public row count.

        Examples
        --------
        >>> from types import SimpleNamespace as NS
        >>> entry = NS(n=500, categories=["a", "b", "c", "d"], strategy="rescale",
        ...            method="truncated", name="p", column="c")
        >>> round(ProportionsRelease.error_curve(entry, 0, NS(neighbours="substitute"))(1.0), 4)
        0.0213
        """
        n = entry.n if entry.n is not None else context.rows()
        k = len(spec_categories(entry, entry.column, entry.categories, context))

        def error(eps: float) -> float:
            plan = plan_proportions(
                k,
                n,
                eps,
                strategy=entry.strategy,
                method=entry.method,
                neighbours=context.neighbours,
            )
            return float(max(r["error95"] for r in plan.summary() if r["error95"] is not None))

        said = f"n = {n}" + (", the input's rows" if entry.n is None else "")
        return ErrorCurve("proportions", "epsilon", error, units="share", assumption=said)

    @classmethod
    def from_spec(cls, entry: Any, context: SpecContext) -> Release[Any]:
        """``dpframe.proportions(...)`` of a spec's ``kind = "proportions"`` entry."""
        return cls(
            context.frame,
            entry.column,
            epsilon=entry.epsilon,
            n=entry.n if entry.n is not None else context.rows(),
            categories=spec_categories(entry, entry.column, entry.categories, context),
            strategy=entry.strategy,
            method=entry.method,
            calibration="exact",
            accountant=context.accountant,
            seed=context.source(entry),
            neighbours=context.neighbours,
            dtype=context.schema.get(entry.column),
        )

    def to_spec(self, name: str | None = None) -> dict[str, Any]:
        """Its arguments as a spec entry: ``kind = "proportions"``, column, categories."""
        return {
            "name": self.spec_name(name),
            "kind": "proportions",
            "column": self.column,
            "categories": list(self.categories),
            "epsilon": sum(c.epsilon for c in self.plan.charges),
            "n": self.n,
            "tolerance": PROPORTIONS_TOLERANCE,
        }

    @classmethod
    def suite(cls, arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
        return proportions_suite(arguments, facts, table)

    def _exact_inputs(self) -> list[Any]:
        counts = self.engine.category_counts([self.column])[self.column]
        exact = declared_counts(counts, self.column, self.categories)
        check_public_size(self.n, int(exact.sum()))
        return [exact / self.n]

    def _categories(self) -> pl.Series:
        """The released category column: in the input's dtype if an Enum or an integer."""
        dtype = self.dtype
        cats = pl.Series(self.column, self.categories)
        if dtype is not None and (isinstance(dtype, pl.Enum) or dtype.is_integer()):
            cats = cats.cast(dtype)
        return cats

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        self.result = outputs[0]
        return pl.DataFrame([self._categories()]).with_columns(
            pl.Series(PROPORTION, self.result.values, dtype=pl.Float64)
        )


def proportions(
    frame: Any,
    column: str,
    *,
    epsilon: float,
    n: int,
    categories: Sequence[Any] | None = None,
    strategy: str = "rescale",
    method: str = "truncated",
    calibration: str = "exact",
    accountant: Any = None,
    seed: Any = None,
) -> ProportionsRelease:
    """Declare the release of the share of each category of ``column`` (in [0, 1], sum 1).

    Categories come from an Enum dtype or ``categories=`` -- never from the data.
    ``strategy`` is ``"rescale"``, ``"all_but_one"`` or ``"universal_histogram"`` (Liu
    2019, Simulation study 2; see :mod:`dpframe.mechanisms.proportions`). Nothing runs
    until ``collect()``.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"vote": ["a", "b", "b", "c"] * 50})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     table = dpframe.proportions(df, "vote", categories=["a", "b", "c", "d"],
    ...                                 epsilon=1.0, n=200).collect()
    >>> round(table["proportion"].sum(), 9)
    1.0
    """
    return ProportionsRelease(
        frame,
        column,
        epsilon=epsilon,
        n=n,
        categories=categories,
        strategy=strategy,
        method=method,
        calibration=calibration,
        accountant=accountant,
        seed=seed,
    )


# -- the suites (plain data: dpframe.polars.expectations) -------------------------------


def proportions_suite(arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
    """The suite of a proportions release's table, from its spec entry alone: exactly the
    declared categories (given, else of the column's Enum dtype), once each, proportions in
    ``[0, 1]`` summing to 1 within the entry's ``tolerance``."""
    suite, lazy = start(arguments, table)
    frame = lazy.collect() if isinstance(lazy, pl.LazyFrame) else lazy
    col = arguments["column"]
    tolerance = arguments.get("tolerance", PROPORTIONS_TOLERANCE)
    dtype = frame.schema.get(col)
    cats = declared(
        arguments.get("categories"),
        dtype,
        f"release {suite.release!r}",
        "give categories=[...] in the spec or release an Enum column",
    )
    suite.add_table("main", for_gx(frame), [col])
    where = {"where": [col], "where_label": "category"}
    suite.expect(
        "expect_table_columns_to_match_set",
        "main",
        column_set=[col, PROPORTION],
        exact_match=True,
    )
    suite.expect(
        "expect_table_row_count_to_equal",
        "main",
        value=len(cats),
        meta={"expected": "one row per declared category"},
    )
    suite.expect("expect_column_values_to_not_be_null", "main", column=col, meta=where)
    suite.expect(
        "expect_column_distinct_values_to_equal_set",
        "main",
        column=col,
        value_set=values_like(cats, dtype),
        meta={"expected": f"the declared categories {cats}"},
    )
    suite.expect("expect_column_values_to_be_unique", "main", column=col, meta=where)
    suite.expect("expect_column_values_to_not_be_null", "main", column=PROPORTION, meta=where)
    suite.expect(
        "expect_column_values_to_be_between",
        "main",
        column=PROPORTION,
        min_value=0.0,
        max_value=1.0,
        meta={**where, "rule": "outside [0, 1]"},
    )
    suite.expect(
        "expect_column_sum_to_be_between",
        "main",
        column=PROPORTION,
        min_value=1.0 - tolerance,
        max_value=1.0 + tolerance,
        meta={"expected": f"1 within {tolerance:g}"},
    )
    return suite


def covariance_output_types(columns: Sequence[str]) -> dict[str, str]:
    """A covariance matrix's columns and dtypes: the variable's name, one Float64 each."""
    return {COVARIANCE_LABEL: "String", **{c: "Float64" for c in columns}}


def _cells(frame: pl.DataFrame, cols: list[str]) -> dict[tuple[str, str], float | None]:
    """The matrix by name (rows located by the "column" column, not by position)."""
    cell: dict[tuple[str, str], float | None] = {}
    if COVARIANCE_LABEL in frame.columns:
        names = frame[COVARIANCE_LABEL].cast(pl.String).to_list()
        for i in cols:
            r = names.index(i) if i in names else None
            for j in cols:
                if r is not None and j in frame.columns:
                    v = frame[j][r]
                    cell[i, j] = None if v is None else float(v)
    return cell


def _expect_pairs(suite: Suite, cols: list[str], cell: dict[tuple[str, str], float | None]) -> None:
    """Every covariance within Cauchy--Schwarz, and the matrix symmetric."""
    rows = []
    for a, i in enumerate(cols):
        for j in cols[a + 1 :]:
            cij, cji = cell.get((i, j)), cell.get((j, i))
            vi, vj = cell.get((i, i)), cell.get((j, j))
            bound = None if vi is None or vj is None else math.sqrt(max(vi, 0.0) * max(vj, 0.0))
            cs = asym = None
            if cij is not None and cji is not None:
                big = max(abs(cij), abs(cji))
                asym = abs(cij - cji) - RTOL * big
                if bound is not None:
                    cs = big - bound * (1 + RTOL)
            larger = cij if cji is None or (cij is not None and abs(cij) >= abs(cji)) else cji
            rows.append(
                {
                    "pair": f"cov({i}, {j})",
                    "cov": larger,
                    "bound_of": f"sqrt(cov({i}, {i}) cov({j}, {j}))",
                    "cov_ij": cij,
                    "cov_ji": cji,
                    "bound": bound,
                    "cs_excess": cs,
                    "asym_excess": asym,
                }
            )
    pairs = pl.DataFrame(
        rows,
        schema={
            "pair": pl.String,
            "cov": pl.Float64,
            "bound_of": pl.String,
            "cov_ij": pl.Float64,
            "cov_ji": pl.Float64,
            "bound": pl.Float64,
            "cs_excess": pl.Float64,
            "asym_excess": pl.Float64,
        },
    )
    suite.add_table("pairs", pairs, ["pair", "cov", "bound_of", "cov_ij", "cov_ji", "bound"])
    suite.expect(
        "expect_column_values_to_be_between",
        "pairs",
        column="cs_excess",
        max_value=0.0,
        meta={
            "subject": "covariances",
            "noun": "pairs",
            "rule": "beyond Cauchy-Schwarz |cov_ij| <= sqrt(cov_ii cov_jj)",
            "example": "|{pair}| = |{cov}| > {bound_of} = {bound}",
        },
    )
    suite.expect(
        "expect_column_values_to_be_between",
        "pairs",
        column="asym_excess",
        max_value=0.0,
        meta={
            "subject": "covariances",
            "noun": "pairs",
            "rule": f"not symmetric (relative tolerance {RTOL:g})",
            "example": "{pair}: {cov_ij} vs {cov_ji}",
        },
    )


def _covariance_found(arguments: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """The spec entry with each ``"auto"`` bound the one its first pass found (recorded
    in its verified ledger entries), else the widest the pass can find."""
    found = facts.get("bounds_found") or {}
    widest = 2.0 ** AUTO_BOUNDS_EXPONENTS[1]
    cols = list(arguments["columns"])
    written = arguments["bounds"]
    pairs = [(AUTO, AUTO)] * len(cols) if written == AUTO else written
    bounds = []
    for c, (lo, hi) in zip(cols, pairs, strict=True):
        got = found.get(c, (-widest, widest))
        bounds.append([got[0] if lo == AUTO else lo, got[1] if hi == AUTO else hi])
    return {**arguments, "bounds": bounds}


def covariance_suite(arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
    """The suite of a covariance matrix's table: from its spec entry (columns, bounds,
    ``n``) and the facts its file records (``input_rows``, the public size when the entry
    gives no ``n``).

    One row per variable, exactly the variables' columns (Float64), every cell finite and
    not null, variances ``>= 0`` and at most ``n R**2 / (4 (n - 1))`` (``R**2 / 2`` when
    the size is unknown), every covariance within Cauchy--Schwarz and the matrix symmetric
    (both within a relative tolerance of :data:`RTOL`).
    """
    arguments = _covariance_found(arguments, facts)
    suite, lazy = start(arguments, table)
    frame = lazy.collect() if isinstance(lazy, pl.LazyFrame) else lazy
    cols = list(arguments["columns"])
    suite.add_table("main", for_gx(frame), [COVARIANCE_LABEL])
    where = {"where": [COVARIANCE_LABEL], "where_label": "row"}
    suite.expect(
        "expect_table_columns_to_match_set",
        "main",
        column_set=[COVARIANCE_LABEL, *cols],
        exact_match=True,
    )
    suite.expect(
        "expect_table_row_count_to_equal",
        "main",
        value=len(cols),
        meta={"expected": "one row per variable"},
    )
    suite.expect("expect_column_values_to_not_be_null", "main", column=COVARIANCE_LABEL, meta=where)
    suite.expect(
        "expect_column_distinct_values_to_equal_set",
        "main",
        column=COVARIANCE_LABEL,
        value_set=cols,
        meta={"expected": f"the variables {cols}"},
    )
    suite.expect("expect_column_values_to_be_unique", "main", column=COVARIANCE_LABEL, meta=where)
    for c in cols:
        suite.expect("expect_column_values_to_not_be_null", "main", column=c, meta=where)

    cell = _cells(frame, cols)
    for c in cols:  # every cell finite
        expect_finite_between(suite, "main", c, None, None, where)
    expect_types(suite, frame, covariance_output_types(cols), "types")
    n = arguments.get("n")
    if n is None:
        n = input_rows(facts)
    size = n if n is not None and n >= 2 else 2  # with n unknown: the largest over n >= 2
    diag = pl.DataFrame(
        {
            "variable": cols,
            "var": [cell.get((c, c)) for c in cols],
            "upper": [variance_bound(lo, hi, size) for lo, hi in arguments["bounds"]],
        },
        schema={"variable": pl.String, "var": pl.Float64, "upper": pl.Float64},
    ).with_columns((pl.col("var") - pl.col("upper") * (1 + RTOL)).alias("over"))
    suite.add_table("diagonal", diag, ["variable", "var", "upper"])
    vwhere = {"where": ["variable"], "where_label": "variable"}
    suite.expect(
        "expect_column_values_to_be_between",
        "diagonal",
        column="var",
        min_value=0.0,
        meta={**vwhere, "subject": "diagonal (variances)", "rule": "below 0"},
    )
    bound_rule = (
        f"above n R^2 / (4 (n - 1)) with n = {n} (R = upper - lower)"
        if n is not None and n >= 2
        else "above R^2 / 2, the largest sample variance of values in their bounds"
    )
    suite.expect(
        "expect_column_values_to_be_between",
        "diagonal",
        column="over",
        max_value=0.0,
        meta={
            **vwhere,
            "subject": "diagonal (variances)",
            "rule": bound_rule,
            "example": "{var} > {upper}",
        },
    )

    _expect_pairs(suite, cols, cell)
    return suite
