"""PRAM on polars (and Spark) frames: ``.dp.pram``, microdata releases, DP priors, estimation.

Each record's category is kept with probability ``q_k`` and otherwise moved to one of
the other ``S - 1`` categories, uniformly (Ayed, Battiston & Camerlenghi, eq. 8). This
module is ``dpframe.pram``:

* :func:`apply` -- the expression behind ``pl.col(c).dp.pram(epsilon, ...)``: a
  row-wise release, run by :func:`dpframe.collect` / :func:`dpframe.sink_parquet`
  (see :mod:`dpframe.polars.runner` for how it is charged);
* :func:`release` -- a :class:`MicrodataRelease` of whole columns of a polars or Spark
  frame, written once (what release specs use);
* :func:`dp_prior` -- a DP histogram of a column, to use as a public prior;
* :func:`estimate` / :func:`estimate_grouped` -- unbiased frequencies from a released
  column (or counts), with covariance and a simplex-projected version;
* the kernels, re-exported: :func:`design`, :func:`krr`, :func:`sampler`, ...
  (:mod:`dpframe.mechanisms.pram`; ``docs/pram-design.md`` has the maths).

Every PRAM release is charged the epsilon of the matrix it actually samples, derived
again from the sampler's integers (:mod:`dpframe.mechanisms.pram.plan`).

Examples
--------
>>> import numpy as np
>>> from dpframe import pram
>>> d = pram.design([0.5, 0.3, 0.2], epsilon=1.0)
>>> d.matrix.shape, bool(d.epsilon_actual <= 1.0)
((3, 3), True)
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any, ClassVar, Literal, cast

import numpy as np
import polars as pl
from pydantic import BeforeValidator, Field, field_validator

from dpframe.core.accountant import Accountant, Charge, LedgerEntry
from dpframe.core.budget import exact_sum
from dpframe.core.constraints import check, check_categories, refuse_pattern_name, spec_field
from dpframe.core.executor import MechanismPlan, Step
from dpframe.core.randomness import RandomSource, as_source
from dpframe.core.units import PrivacyUnit, check_person_rows
from dpframe.engines.driver import VALUE, VALUE_ROWS, check_categories_fit, declared_counts
from dpframe.engines.polars import Codebook, encode
from dpframe.errors import (
    InvalidParameterError,
    PublishFailedError,
    ReleaseNotArmedError,
    ReleaseReuseError,
)
from dpframe.mechanisms.allocation import ErrorCurve, pram_curve
from dpframe.mechanisms.pram import (
    CyclicDesign,
    GlobalDesign,
    PramDesign,
    PramEstimate,
    PramSampler,
    check_estimable,
    check_matrix,
    cyclic_design,
    design,
    dominance_cost,
    global_design,
    krr,
    mutual_information,
    randomize,
    sampler,
    vertex_families,
)
from dpframe.mechanisms.pram import estimate as _estimate_counts
from dpframe.mechanisms.pram.plan import (
    ArmedPram,
    DPPriorPramPlan,
    PramPlan,
    design_from_record,
    plan_dp_prior,
    plan_pram,
)
from dpframe.mechanisms.proportions import project_to_simplex
from dpframe.polars.expectations import (
    Suite,
    declared,
    for_gx,
    input_rows,
    start,
    values_like,
)
from dpframe.polars.io import METADATA_KEY, guard_release_output, provenance_json
from dpframe.polars.release import (
    PositiveEps,
    Release,
    SpecContext,
    SpecEntry,
    SpecModel,
    bounded_unit,
    resolve_accountant,
    spec_categories,
)
from dpframe.polars.runner import Run, RunnerRelease

__all__ = [
    "CyclicDesign",
    "GlobalDesign",
    "MicrodataRelease",
    "PramDesign",
    "PramEstimate",
    "PramExpression",
    "PramSampler",
    "apply",
    "check_estimable",
    "check_matrix",
    "cyclic_design",
    "design",
    "design_from_dict",
    "dominance_cost",
    "dp_prior",
    "estimate",
    "estimate_grouped",
    "global_design",
    "krr",
    "mutual_information",
    "project_simplex",
    "randomize",
    "release",
    "sampler",
    "vertex_families",
]

#: the Euclidean projection onto the simplex (one definition, in the proportions kernel)
project_simplex = project_to_simplex
#: rebuild a design from its ledger / provenance record (its epsilon derived again)
design_from_dict = design_from_record

_EXPRESSIONS: weakref.WeakSet[PramExpression] = weakref.WeakSet()


def _categories_of(
    dtype: pl.DataType, name: str, declared: tuple[Any, ...] | None
) -> tuple[Any, ...]:
    """The categories of column ``name``: declared (checked against an Enum), or the Enum's."""
    if isinstance(dtype, pl.Enum):
        own = tuple(dtype.categories.to_list())
        if declared is not None and set(own) != set(declared):
            raise InvalidParameterError(
                f"column {name!r} is an Enum with categories {list(own)[:8]}, which differ "
                f"from categories={list(declared)[:8]}; pass the same set, or omit "
                "categories= to use the Enum's"
            )
        return declared or own
    if declared is None:
        raise InvalidParameterError(
            f"column {name!r} has dtype {dtype}: pass categories=[...] (every possible "
            "value, in a fixed order). dpframe never takes them from the data, because "
            "which values occur is itself private. An Enum column carries its own."
        )
    return declared


class PramExpression(RunnerRelease):
    """The callable polars runs for ``.dp.pram`` (built by :func:`apply`).

    Per call (one streaming morsel, or the whole column with ``prior="dp"``): in the
    runner's dry pass it checks the data and registers its plan; in the real pass it
    randomizes under the charge the runner made, with a freshly keyed generator.
    Outside a runner it refuses.
    """

    per_record = True

    def __init__(
        self,
        *,
        epsilon: float | None,
        categories: tuple[Any, ...] | None,
        prior: Any,
        matrix: Any,
        diagonal: str,
        prior_share: float,
        accountant: Accountant | None,
        random: RandomSource,
        column: str | None,
        estimable: bool | float = True,
        design: str = "auto",
    ) -> None:
        if accountant is not None and not accountant.unit.is_record:
            person = accountant.unit.person
            raise InvalidParameterError(
                f"unit: this accountant protects people identified by {person!r}, and a "
                ".dp.pram expression cannot see whose row it randomizes; release the "
                f"columns with dpframe.pram.release(frame, columns, unit={person!r}, "
                "max_rows=...), which charges each person for all of their rows. Nothing "
                "was charged."
            )
        self.id = uuid.uuid4().hex
        self.column = column
        self.categories = categories
        self.epsilon = epsilon
        self.prior = prior
        self.matrix = matrix
        self.diagonal = diagonal
        self.estimable = estimable
        self.design = design
        self.prior_share = prior_share
        self.accountant = accountant
        self.random = random
        self._plans: dict[tuple[Any, ...], PramPlan | DPPriorPramPlan] = {}
        #: per (dtype, declared categories): the column's categories, checked to fit the
        #: dtype, and their codebook (so a morsel neither checks nor builds them again)
        self._codings: dict[tuple[pl.DataType, Any], tuple[tuple[Any, ...], Codebook]] = {}
        self._lock = threading.Lock()
        known = categories
        if known is None and isinstance(prior, Mapping):
            known = check_categories(list(prior))
            self.categories = known  # a dict prior names the categories
        if known is not None:  # validate everything now, before any query runs
            self.plan_for(known)
        else:  # the categories come from the column's Enum: check what can be checked
            if matrix is not None:
                size = _matrix_size(matrix)
            elif isinstance(prior, str | Mapping) or not hasattr(prior, "__len__"):
                size = 2
            else:
                size = max(len(prior), 2)
            plan_pram(
                column or "value",
                [f"c{i}" for i in range(size)],
                epsilon,
                prior=prior,
                matrix=matrix,
                diagonal=diagonal,
                prior_share=prior_share,
                neighbours=self.neighbours,
                estimable=estimable,
                design=design,
            )
        _EXPRESSIONS.add(self)

    @property
    def neighbours(self) -> str:
        return self.accountant.neighbours if self.accountant is not None else "substitute"

    def planned_charges(self) -> list[Charge]:
        """What a run charges, from its plan when the categories are known (a matrix's
        own epsilon included), else from the matrix, else the epsilon asked."""
        if self._plans:
            return list(next(iter(self._plans.values())).charges)
        name = (self.column or "value",)
        if self.matrix is not None:
            return [Charge(float(sampler(self.matrix).epsilon_actual), 0.0, "pram", name)]
        return [Charge(float(self.epsilon), 0.0, "pram", name)] if self.epsilon else []

    @property
    def row_wise(self) -> bool:
        """False only for ``prior="dp"``, which needs the whole column at once."""
        return not (isinstance(self.prior, str) and self.prior == "dp")

    def plan_for(self, cats: tuple[Any, ...]) -> PramPlan | DPPriorPramPlan:
        """The plan for the column's categories (built once per set of categories)."""
        with self._lock:
            if cats not in self._plans:
                self._plans[cats] = plan_pram(
                    self.column or "value",
                    cats,
                    self.epsilon,
                    prior=self.prior,
                    matrix=self.matrix,
                    diagonal=self.diagonal,
                    prior_share=self.prior_share,
                    neighbours=self.neighbours,
                    details={"seeded": self.random.seeded},
                    estimable=self.estimable,
                    design=self.design,
                )
            return self._plans[cats]

    def summary(self) -> list[dict[str, Any]]:
        """What one run of this release costs (categories from an Enum: known at run time)."""
        if self._plans:
            return next(iter(self._plans.values())).summary()
        return [
            {
                "statistic": self.column,
                "mechanism": "pram",
                "epsilon": self.epsilon,
                "delta": 0.0,
                "sensitivity": None,
                "scale": None,
                "error95": None,
                "note": "categories from the column's Enum",
            }
        ]

    def charged(self, entries: tuple[LedgerEntry, ...], armed: ArmedPram, run: Any) -> None:
        """The runner charged this release: record its design for the provenance."""
        run.records[armed.column] = armed.record
        run.designs[armed.column] = armed.design

    def evaluate(self, s: pl.Series, run: Run | None) -> pl.Series:
        """Randomize one morsel inside ``run``; refuse outside a run."""
        name = self.column or s.name
        if run is None:
            raise ReleaseNotArmedError(
                f".dp.pram on column {name!r} is a row-wise release: it only runs inside a "
                "dpframe runner, which charges it once per run. Use dpframe.collect(lf) or "
                "lf.dpf.collect(), dpframe.sink_parquet(lf, path) or lf.dpf.sink_parquet(path), "
                "or df.dpf.with_columns(...) for an eager DataFrame -- not a plain collect() "
                "or DataFrame.with_columns(). Nothing was charged or drawn."
            )
        cats, book = self._coding(s.dtype, name)
        codes = book.encode(s, name)  # nulls and unknown values refuse here
        if run.dry:
            plan = self.plan_for(cats)
            counts = None if self.row_wise else np.bincount(codes, minlength=len(cats))
            key = None if self.row_wise else len(codes)
            run.register(self, Step(plan, counts, self.random), key, len(codes))

            def make(n: int) -> pl.Series:  # data-free: the first category, n times
                return book.decode(np.zeros(n, dtype=np.int64), s)

            return run.stand_in(self, len(codes), make).alias(s.name)
        armed: ArmedPram = run.armed_output(self, len(codes))
        return book.decode(armed.randomize(codes, self.random.generator()), s)

    def _coding(self, dtype: pl.DataType, name: str) -> tuple[tuple[Any, ...], Codebook]:
        """The categories of a column of ``dtype`` (declared or its Enum's), checked to fit
        the dtype, and their :class:`~dpframe.engines.polars.Codebook`: checked and built
        on the first morsel of that dtype, then reused."""
        key = (dtype, self.categories)
        found = self._codings.get(key)
        if found is None:
            cats = _categories_of(dtype, name, self.categories)
            check_categories_fit(dtype, cats, name)
            found = (cats, Codebook(cats))
            with self._lock:
                found = self._codings.setdefault(key, found)
        return found


def _matrix_size(matrix: Any) -> int:
    if isinstance(matrix, PramDesign | PramSampler):
        return sampler(matrix).n_categories
    return int(np.asarray(matrix).shape[0])


def apply(
    expr: pl.Expr | str,
    epsilon: float | None = None,
    *,
    categories: Sequence[Any] | None = None,
    prior: str | Mapping[Any, float] | Sequence[float] | np.ndarray = "uniform",
    matrix: Any = None,
    diagonal: str = "optimal",
    prior_share: float = 0.1,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
    estimable: bool | float = True,
    design: str = "auto",
) -> pl.Expr:
    """Post-randomize a categorical column under ``epsilon``-DP (``.dp.pram``).

    Parameters
    ----------
    expr : polars.Expr or str
        The categorical column: Enum, Categorical, String or integer.
    epsilon : float
        Privacy cost (> 0), charged once per run (see :mod:`dpframe.polars.runner`).
        Optional with ``matrix=``: then the matrix's own epsilon is charged.
    categories : list of str or int, optional
        Every possible value, in a fixed order. Required unless the column is an Enum
        (whose categories are used) or ``prior`` is a dict (whose keys are). Never taken
        from the data: the set of values present is itself private.
    prior : "uniform", "dp", dict or array, default "uniform"
        The category distribution ``p`` the matrix is optimised for. ``"uniform"``
        uses nothing about the data: symmetric k-ary randomized response (k-RR), or
        with ``design="auto"`` (from 6 categories at epsilon = 0.1, 11 at 1, 26 at 2)
        the cyclic design, whose estimated shares vary less than k-RR's at every ``p``
        (``docs/pram-design.md``, sections 12.4-12.5).
        A dict ``{category: weight}`` or an array aligned with ``categories`` is a
        *public* prior (e.g. last census). ``"dp"`` spends ``prior_share * epsilon`` on
        a DP histogram of the column and optimises for it with the rest; it needs the
        whole column in memory (for large data use :func:`dp_prior` and pass the result).
    matrix : array_like (S, S) or PramDesign, optional
        Use this row-stochastic matrix instead (row = true, column = released); its
        epsilon is derived from the matrix actually sampled and charged.
    diagonal : {"optimal", "dominant"}, default "optimal"
        ``"dominant"`` forces ``q_k >= 1/S``: every record is at least as likely to keep
        its value as to take any particular other one (costs mutual information).
    prior_share : float, default 0.1
        Share of ``epsilon`` spent on the DP histogram when ``prior="dp"``.
    accountant : Accountant, optional
        Default: the innermost ``with accountant:`` block at build time. Must use
        ``neighbours="substitute"``.
    seed : int or RandomSource, optional
        Reproducible randomization for tests -- **unsafe for publication**.
    estimable : bool or float, default True
        Keep the design's matrix invertible, so that category shares can be estimated
        from the released column: no two categories kept with probability (nearly)
        ``1/S`` (``True``: a margin of 5% of k-RR's distance from ``1/S``; a number in
        ``(0, 1]``: that margin; ``False``: the plain optimum, which may not be). See
        :func:`dpframe.pram.design` and ``docs/pram-design.md``.
    design : {"auto", "paper", "global", "variance"}, default "auto"
        ``"auto"``: when the release is for estimation (``estimable`` not False, and
        ``diagonal="optimal"``), the design with the least variance of the estimated
        shares at the prior among k-RR, the paper's estimable design and the cyclic design
        (:func:`dpframe.pram.cyclic_design`; the record's ``selection`` lists every
        candidate's risk); otherwise the paper's design (k-RR for a uniform prior).
        ``"paper"``: the MI optimum within the paper's family (keep a record's category
        with probability ``q_k``, else move it uniformly); estimable by default.
        ``"global"``: the MI optimum over *every* epsilon-DP matrix (a staircase linear
        program, certified by its dual), often far more informative at small epsilon
        but usually releasing fewer labels than categories, so shares cannot be
        estimated from it: it needs ``estimable=False`` unless its matrix is invertible.
        See ``docs/pram-design.md``, section 11. ``"variance"``: the least variance of
        the estimated shares found at the prior (a local optimum over every epsilon-DP
        matrix, up to 12 categories, not with ``prior="dp"``; section 12).

    Returns
    -------
    polars.Expr
        The released column, same dtype and name.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> lf = pl.LazyFrame({"tenure": ["own", "rent", "rent", "other"]})
    >>> with dpframe.Accountant(epsilon=2.0) as acct:
    ...     q = lf.with_columns(
    ...         pl.col("tenure").dp.pram(1.0, categories=["own", "rent", "other"])
    ...     )
    ...     out = dpframe.collect(q)
    >>> set(out["tenure"]) <= {"own", "rent", "other"}, acct.spent.epsilon
    (True, 1.0)
    """
    if isinstance(expr, str):
        expr = pl.col(expr)
    if not isinstance(expr, pl.Expr):
        raise InvalidParameterError(
            f"expr must be a polars expression or a column name, got {type(expr).__name__}"
        )
    try:
        column = expr.meta.output_name()
    except pl.exceptions.ComputeError:
        column = None
    release = PramExpression(
        epsilon=epsilon,
        categories=check_categories(categories),
        prior=prior,
        matrix=matrix,
        diagonal=diagonal,
        prior_share=prior_share,
        accountant=resolve_accountant(accountant),
        random=as_source(seed),
        column=column,
        estimable=estimable,
        design=design,
    )
    # A seeded release is reproducible only if its draws meet the rows in one order: the
    # streaming engine calls a row-wise function once per morsel, in whatever order its
    # threads take them, so a seeded run takes the whole column in one call (its memory is
    # the column's; an unseeded, publishable run streams).
    streams = release.row_wise and not release.random.seeded
    out = expr.map_batches(release, return_dtype=pl.dtype_of(expr), is_elementwise=streams)
    return out.alias(column) if column else out


def pending_expressions(accountant: Accountant | None = None) -> list[PramExpression]:
    """The ``.dp.pram`` expressions built (for ``accountant``, if given): each run charges."""
    return [e for e in list(_EXPRESSIONS) if accountant is None or e.accountant is accountant]


# ---------------------------------------------------------------------------
# Whole columns of a frame (polars or Spark), written once
# ---------------------------------------------------------------------------


def column_specs(columns: Any) -> list[dict[str, Any]]:
    """:func:`release`'s ``columns``: entries with a ``column`` name and known settings,
    each column once (the release spec's PRAM columns are checked by this too)."""
    if isinstance(columns, (Mapping, str)) or not isinstance(columns, Sequence):
        raise InvalidParameterError(
            "columns must be a list of {'column': ..., 'epsilon': ..., 'categories': ...} "
            f"entries, got {type(columns).__name__}"
        )
    out = []
    for c in columns:
        if not isinstance(c, Mapping) or "column" not in c:
            raise InvalidParameterError(f"each column entry needs a 'column' name, got {c!r}")
        known = {"column", "epsilon", "categories", "prior", "diagonal", "estimable", "design"}
        unknown = sorted(set(c) - known)
        if unknown:
            raise InvalidParameterError(f"column {c['column']!r}: unknown settings {unknown}")
        out.append(dict(c))
    names = [c["column"] for c in out]
    if len(set(names)) != len(names) or not names:
        raise InvalidParameterError(f"columns must name each column once, got {names}")
    return out


def _prior(value: Any) -> Any:
    """PRAM's ``prior``: a name checked as :func:`dpframe.pram.release` checks it (its
    option set, ``PRIOR_KINDS``), or a distribution (checked by the release)."""
    return check("prior", value) if isinstance(value, str) else value


class PramColumnSpec(SpecModel):
    column: str
    epsilon: PositiveEps
    categories: list[Any] | None = None
    prior: Annotated[str | dict[str, float] | list[float], BeforeValidator(_prior)] = Field(
        "uniform",
        description="'uniform', 'dp' (a DP estimate, spending part of the column's "
        "epsilon), or a public distribution: as dpframe.pram.release takes it",
    )
    diagonal: Annotated[str, BeforeValidator(spec_field("diagonal"))] = "optimal"
    design: Annotated[str, BeforeValidator(spec_field("design"))] = Field(
        "auto",
        description="'auto': for estimation (estimable not false), the least estimator "
        "variance among k-RR, the paper's design and (up to 10 categories) the variance "
        "search; otherwise the paper's design. 'paper': the MI optimum within the paper's "
        "family; 'global': over every epsilon-DP matrix (needs estimable = false unless it "
        "is invertible); 'variance': the least estimator variance found (up to 12 "
        "categories)",
    )
    estimable: Annotated[bool | float, BeforeValidator(spec_field("estimable"))] = Field(
        True,
        description="keep the matrix invertible so shares can be estimated (True: a 5% "
        "margin from 1/S; a number in (0, 1]: that margin; false: the plain optimum)",
    )


class PramSpec(SpecEntry):
    kind: Literal["pram"]
    columns: list[PramColumnSpec] = Field(min_length=1)
    unit: str | None = Field(
        None,
        min_length=1,
        description="this release's person column, on a record ledger: every row is "
        "randomized, each at epsilon / max_rows, and a person with more than max_rows rows "
        "is refused; default: the spec's [privacy] unit",
    )
    max_rows: Annotated[int | None, BeforeValidator(spec_field("max_rows", optional=True))] = None
    public: list[str] = Field(
        default_factory=list,
        description="other columns of the input published beside the randomized ones, as "
        "they are (dpframe.pram.release(keep=...)): public by your choice",
    )

    @field_validator("columns")
    @classmethod
    def _distinct(cls, v: list[PramColumnSpec]) -> list[PramColumnSpec]:
        column_specs([c.model_dump() for c in v])  # dpframe.pram.release's rule
        return v

    def check_in(self, spec: Any) -> None:
        self.check_person(spec, ("max_rows",))
        self.require_substitute(spec, "pram")

    def epsilon_total(self) -> Fraction:
        return exact_sum(c.epsilon for c in self.columns)


class MicrodataRelease(Release[list[ArmedPram]]):
    """PRAM of whole columns of a frame, written once (see :func:`release`)."""

    kind = "PRAM microdata"
    spec_model = PramSpec
    rowwise = True
    required_facts = ("input_rows",)
    substitute_only = "pram"
    #: under a person unit: every row randomized, charged for max_rows rows a person
    person_level = True

    def __init__(
        self,
        frame: Any,
        columns: Any,
        *,
        keep: Sequence[str] = (),
        accountant: Any = None,
        seed: Any = None,
        neighbours: str | None = None,
        unit: Any = None,
        max_rows: int | None = None,
    ) -> None:
        super().__init__(
            frame, accountant, seed, neighbours, unit=_rows_unit(unit, max_rows, accountant)
        )
        schema = self.engine.schema()
        specs = column_specs(columns)
        if isinstance(keep, str):  # one name, not its letters
            keep = [keep]
        if not isinstance(keep, Sequence) or not all(isinstance(c, str) for c in keep):
            raise InvalidParameterError(f"keep must be a list of column names, got {keep!r}")
        self.keep = list(keep)
        twice = sorted({c for c in self.keep if self.keep.count(c) > 1})
        randomized = sorted({s["column"] for s in specs} & set(self.keep))
        if twice or randomized:
            raise InvalidParameterError(
                f"keep (a spec's public) names {twice or randomized} "
                + ("more than once" if twice else "which this release randomizes")
                + "; list each other column to publish as it is once, and not a randomized one"
            )
        for c in [*(s["column"] for s in specs), *self.keep]:
            refuse_pattern_name(c, "columns")
        missing = [c for c in [*(s["column"] for s in specs), *self.keep] if c not in schema]
        if missing:
            raise InvalidParameterError(
                f"columns {missing} are not in the data (its columns: {sorted(schema.names())})"
            )
        self._plans: list[PramPlan | DPPriorPramPlan] = []
        for s in specs:
            name = s["column"]
            if s.get("prior") == "dp" and not self.engine.offers_dp_prior:
                raise InvalidParameterError(
                    f"column {name!r}: prior='dp' is not offered on Spark; release a DP prior "
                    "first with dpframe.pram.dp_prior(sdf, ...) and pass it as prior="
                )
            cats = _categories_of(schema[name], name, check_categories(s.get("categories")))
            check_categories_fit(schema[name], cats, name)
            self._plans.append(
                plan_pram(
                    name,
                    cats,
                    s.get("epsilon"),
                    prior=s.get("prior", "uniform"),
                    diagonal=s.get("diagonal", "optimal"),
                    neighbours=self.neighbours,
                    details={"seeded": self.random.seeded},
                    unit=self.unit,
                    estimable=s.get("estimable", True),
                    design=s.get("design", "auto"),
                )
            )
        self.records: dict[str, Any] = {}
        self.input_rows: int | None = None

    def _plans_of(self) -> list[MechanismPlan]:
        return list(self._plans)

    @property
    def columns(self) -> list[str]:
        return [p.column for p in self._plans]

    def output_types(self) -> dict[str, str]:
        """The released columns and their dtypes: each randomized column and each kept one
        in its input dtype (from the public schema)."""
        schema = self.engine.schema()
        return {c: str(schema[c]) for c in [*self.columns, *self.keep]}

    #: where a spec's error95 target may stand: on each column (its epsilon)
    accuracy_parts: ClassVar[tuple[str, ...]] = ("columns",)

    @classmethod
    def error_curve(cls, entry: Any, index: int, context: SpecContext) -> ErrorCurve:
        """Column ``index`` of a spec entry: the 95 % error of a share estimated from its
        release (:func:`dpframe.mechanisms.allocation.pram_curve`) as a function of its
        epsilon, at the input's public row count -- the matrix its plan samples from.
        """
        c = entry.columns[index]
        if c.prior == "dp":
            raise InvalidParameterError(
                f"error95 of column {c.column!r}: prior='dp' chooses its matrix from a DP "
                "estimate drawn at run time, so its error is not known before; give a "
                "public prior or its epsilon"
            )
        built = cast(MicrodataRelease, cls.from_spec(entry, context))
        cats = built._plans[index].categories

        def matrix_at(eps: float) -> np.ndarray:
            plan = plan_pram(
                c.column,
                cats,
                eps,
                prior=c.prior,
                diagonal=c.diagonal,
                neighbours=built.neighbours,
                unit=built.unit,
                estimable=c.estimable,
                design=c.design,
            )
            return np.asarray(plan.sampler.matrix)  # type: ignore[union-attr]

        return pram_curve(c.column, matrix_at, context.rows())

    @classmethod
    def from_spec(cls, entry: Any, context: SpecContext) -> Release[Any]:
        """``dpframe.pram.release(...)`` of a spec's ``kind = "pram"`` entry."""
        columns = []
        for c in entry.columns:
            if c.column not in context.schema:
                raise context.error(
                    f"release {entry.name!r}: column {c.column!r} is not in the input"
                )
            spec = c.model_dump()
            spec["categories"] = spec_categories(entry, c.column, c.categories, context)
            columns.append(spec)
        unit = context.unit(entry)  # PRAM has no groups: only the person and max_rows
        return cls(
            context.frame,
            columns,
            keep=entry.public,
            accountant=context.accountant,
            seed=context.source(entry),
            neighbours=context.neighbours,
            unit=unit.get("unit"),
            max_rows=unit.get("max_rows"),
        )

    def to_spec(self, name: str | None = None) -> dict[str, Any]:
        """Its arguments as a spec entry: ``kind = "pram"``, its columns and categories, and
        the columns it carries through unchanged (``public``)."""
        columns = [
            {"column": p.column, "epsilon": p.charges[0].epsilon, "categories": list(p.categories)}
            for p in self._plans
        ]
        return {
            "name": self.spec_name(name),
            "kind": "pram",
            "columns": columns,
            "public": self.keep,
            **self.unit_entry(groups=False),
        }

    def facts(self) -> dict[str, Any]:
        """The input's rows (every record is kept), which its file records for its checks."""
        return {"input_rows": self.input_rows}

    @classmethod
    def read_facts(cls, facts: Mapping[str, Any], entries: Sequence[LedgerEntry]) -> dict[str, Any]:
        """The recorded facts and each column's categories as its verified ledger entries
        record them (not the file's own dtypes)."""
        categories = {
            e.columns[0]: e.details["design"]["categories"]
            for e in entries
            if e.mechanism == "pram"
            and len(e.columns) == 1
            and isinstance(e.details.get("design"), dict)
            and isinstance(e.details["design"].get("categories"), list)
        }
        return {**facts, "categories": categories}

    @classmethod
    def suite(cls, arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
        return pram_suite(arguments, facts, table)

    def _exact_inputs(self) -> list[Any]:
        person = None if self.unit.is_record else cast(str, self.unit.person)
        if person is not None:  # no person may have more rows than are charged for
            largest = self.engine.largest_person_rows(person)
            check_person_rows(largest, self.unit, "PRAM")
        # a DP prior's histogram is a release of its own, charged for max_rows records a
        # person: it counts each person's first max_rows records of its own read, so the
        # bound holds whatever that read returns (the check above saw another read; the
        # written pass is checked again after the charge)
        priors = any(isinstance(p, DPPriorPramPlan) for p in self._plans)
        cap = (person, self.unit.max_rows) if person is not None and priors else None
        counts = self.engine.category_counts(self.columns, per_person=cap)
        exact = [declared_counts(counts[p.column], p.column, p.categories) for p in self._plans]
        #: the input's rows (every record is kept): public, recorded for the file's checks
        self.input_rows = int(exact[0].sum())
        return exact

    def _finish(self, outputs: tuple[Any, ...]) -> list[ArmedPram]:
        self.records = {a.column: a.record for a in outputs}
        return list(outputs)

    def write(self, path: str | os.PathLike[str], *, spec: dict[str, Any] | None = None) -> Any:
        """Charge (once), randomize and write the released columns, with provenance.

        polars: one Parquet file, written atomically; Spark: a new folder of parts with
        the provenance in ``_dpframe.json``. Writing again refuses: the randomized
        records are not kept, and a second randomization would be a new release.
        """
        if self.materialised:
            raise_reuse(self)
        target = self.engine.check_output(path)  # before the charge
        guard_release_output(self.engine.frame, target, accountants=[self.accountant])
        armed = self.collect()
        facts = {"input_rows": self.input_rows}
        return self.write_armed(armed, target, spec=spec, facts=facts)

    def write_armed(
        self,
        armed: list[ArmedPram],
        path: Any,
        *,
        spec: dict[str, Any] | None,
        facts: dict[str, Any] | None = None,
    ) -> Any:
        """Write columns charged elsewhere (by a job that charged all its releases at once)."""
        designs = {a.column: a.record for a in armed}
        metadata = {
            METADATA_KEY: provenance_json(
                self.ledger, self.neighbours, spec, designs=designs, facts=facts
            )
        }
        try:
            return self.engine.write_rowwise(
                armed, self.keep, path, metadata, source=self.random, unit=self.unit
            )
        except Exception as exc:  # after the charge: say what was spent
            spent = sum(e.epsilon for e in self.ledger) if self.ledger else None
            raise PublishFailedError(
                f"{self.kind} {self.id[:8]}: writing {path!s} failed after the charge "
                f"({type(exc).__name__}: {exc}). "
                + (f"epsilon {spent:g} is spent; " if spent is not None else "")
                + "nothing was published."
            ) from exc


def _rows_unit(unit: Any, max_rows: Any, accountant: Any) -> PrivacyUnit:
    """A row-wise release's unit: as given, else the accountant's, with ``max_rows`` given
    here or stated to the accountant (required under a person unit); only ``max_rows``
    matters (PRAM has no groups)."""
    acct = resolve_accountant(accountant)
    if unit is None and max_rows is not None and (acct is None or acct.unit.is_record):
        raise InvalidParameterError(
            "max_rows: give the person column too (unit='<column>'), or open the accountant with it"
        )
    return bounded_unit(unit, {"max_rows": max_rows}, acct, needs=("max_rows",))


def raise_reuse(release: Release[Any]) -> None:
    raise ReleaseReuseError(
        f"{release.kind} {release.id[:8]} has already been written; a second randomization "
        "of the same records would be a new release: build a new one (and pay for it)"
    )


def release(
    frame: Any,
    columns: Sequence[Mapping[str, Any]],
    *,
    keep: Sequence[str] = (),
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
    unit: str | PrivacyUnit | None = None,
    max_rows: int | None = None,
) -> MicrodataRelease:
    """Declare PRAM of whole columns of a polars or Spark frame (write it with ``.write``).

    Parameters
    ----------
    frame : polars.LazyFrame, polars.DataFrame or pyspark.sql.DataFrame
    columns : list of dict
        Each ``{"column", "epsilon", "categories" (unless an Enum), "prior" (optional),
        "diagonal", "estimable", "design" (optional, as for ``.dp.pram``)}``.
    keep : list of str
        Other columns to carry through unchanged: they are published as they are.
    accountant, seed
        As for ``.dp.pram``.
    unit, max_rows : optional
        A person unit (``docs/privacy-units.md``): the column identifying a person and the
        most rows one person may have (default: the accountant's). Every row is still
        randomized, each at ``epsilon / max_rows``, so a column's ``epsilon`` is what one
        person's rows cost together; a person with more than ``max_rows`` rows is refused
        before anything is charged. How many rows a person has is not protected (the
        file keeps one row per input row).

    Examples
    --------
    >>> import polars as pl, dpframe, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "micro.parquet")
    >>> df = pl.DataFrame({"c": ["a", "b", "a"]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     rel = dpframe.pram.release(df, [{"column": "c", "epsilon": 1.0,
    ...                                      "categories": ["a", "b"]}])
    ...     _ = rel.write(out)
    >>> pl.read_parquet(out).height, acct.spent.epsilon
    (3, 1.0)
    """
    return MicrodataRelease(
        frame, columns, keep=keep, accountant=accountant, seed=seed, unit=unit, max_rows=max_rows
    )


# ---------------------------------------------------------------------------
# A DP prior
# ---------------------------------------------------------------------------


class DPPriorRelease(Release[dict[Any, float]]):
    """A DP histogram of a column, normalised into a prior (see :func:`dp_prior`)."""

    kind = "DP prior"
    substitute_only = "pram"

    def __init__(
        self,
        frame: Any,
        column: str,
        epsilon: float,
        *,
        categories: Any,
        accountant: Any,
        seed: Any,
    ) -> None:
        super().__init__(frame, accountant, seed)
        schema = self.engine.schema()
        if column not in schema:
            raise InvalidParameterError(f"column {column!r} is not in the frame")
        cats = _categories_of(schema[column], column, check_categories(categories))
        check_categories_fit(schema[column], cats, column)
        self.column = column
        self.plan = plan_dp_prior(column, cats, epsilon, neighbours=self.neighbours)

    def _plans_of(self) -> list[MechanismPlan]:
        return [self.plan]

    def _exact_inputs(self) -> list[Any]:
        counts = self.engine.category_counts([self.column])[self.column]
        return [declared_counts(counts, self.column, self.plan.categories)]

    def _finish(self, outputs: tuple[Any, ...]) -> dict[Any, float]:
        return {c: float(v) for c, v in zip(self.plan.categories, outputs[0], strict=True)}


def dp_prior(
    frame: Any,
    column: str,
    epsilon: float,
    *,
    categories: Sequence[Any] | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> dict[Any, float]:
    """A DP estimate of a column's category distribution, to use as a public prior.

    Counts each declared category with the engine (polars streaming, or Spark), charges
    ``epsilon`` (discrete Laplace, l1 sensitivity 2 under substitute neighbours), clips
    at 0 and normalises. Calling it is collecting it: it is charged when called. The
    result may be published and passed as ``prior=`` to ``.dp.pram``; the total cost is
    this ``epsilon`` plus PRAM's.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"c": ["a"] * 70 + ["b"] * 30})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     p = dpframe.pram.dp_prior(df, "c", 0.2, categories=["a", "b", "z"])
    >>> sorted(p), round(sum(p.values()), 9), acct.spent.epsilon
    (['a', 'b', 'z'], 1.0, 0.2)
    """
    rel = DPPriorRelease(
        frame, column, epsilon, categories=categories, accountant=accountant, seed=seed
    )
    return rel.collect()


# ---------------------------------------------------------------------------
# Estimation (post-processing: free)
# ---------------------------------------------------------------------------


def _as_design(design_like: Any) -> Any:
    if isinstance(design_like, PramDesign):
        return design_like
    if isinstance(design_like, Mapping) and "q" in design_like:
        return design_from_record(design_like)
    if isinstance(design_like, Mapping) and "matrix" in design_like:  # matrix= or global
        matrix = np.asarray(design_like["matrix"], dtype=np.float64)
        if design_like.get("design") == "global":
            try:
                check_estimable(matrix)
            except InvalidParameterError as exc:
                never = list(design_like.get("never_released") or [])
                which = f", which never releases categories {never[:5]}" if never else ""
                raise InvalidParameterError(
                    f"this column was released with design='global'{which}: {exc}"
                ) from None
        return matrix
    if (
        isinstance(design_like, str | bytes | Mapping)
        or np.asarray(design_like, dtype=object).ndim != 2
    ):
        raise InvalidParameterError(
            "design must be the PramDesign, the 'design' record of the release's ledger "
            "entry or provenance (a dict with 'q' or 'matrix'), or its S x S matrix; got "
            f"{type(design_like).__name__}"
        )
    return design_like  # a matrix; validated by the kernel


def estimate(
    released: pl.Series | Sequence[int] | np.ndarray,
    design: PramDesign | Mapping[str, Any] | np.ndarray,
    *,
    categories: Sequence[Any] | None = None,
) -> PramEstimate:
    """Estimate the true category distribution from a PRAM release.

    Parameters
    ----------
    released : polars.Series or array_like
        The released column (a Series of values; ``categories`` or an Enum dtype gives
        their order), or released counts per category (length ``S`` numpy/list).
    design : PramDesign, dict or array_like (S, S)
        The design that was sampled: a :class:`PramDesign`, the ``"design"`` dict of the
        ledger entry / provenance, or the matrix.
    categories : list, optional
        Category order of a released Series (default: its Enum categories, or the
        design dict's ``"categories"``).

    Returns
    -------
    PramEstimate
        ``p_hat`` = ``(M^T)^{-1} m_hat`` (unbiased), its estimated ``covariance``,
        ``p_simplex`` (projected onto the simplex), ``counts``, ``n``.

    Examples
    --------
    >>> import numpy as np
    >>> d = design([0.6, 0.3, 0.1], 2.0)
    >>> expected = np.rint(10_000 * d.matrix.T @ [0.6, 0.3, 0.1])  # released counts
    >>> est = estimate(expected, d)
    >>> est.p_hat.round(2).tolist(), bool(abs(est.p_simplex.sum() - 1) < 1e-12)
    ([0.6, 0.3, 0.1], True)
    """
    if isinstance(released, pl.Series):
        cats = categories
        if cats is None and isinstance(design, Mapping):
            cats = design.get("categories")
        cats_t = _categories_of(released.dtype, released.name, check_categories(cats))
        codes = encode(released, released.name, cats_t)
        counts = np.bincount(codes, minlength=len(cats_t))
        return _estimate_counts(counts, _as_design(design), kind="counts")
    return _estimate_counts(np.asarray(released), _as_design(design), kind="counts")


def estimate_grouped(
    frame: pl.DataFrame | pl.LazyFrame,
    column: str,
    by: str | Sequence[str],
    design: PramDesign | Mapping[str, Any] | np.ndarray,
    *,
    categories: Sequence[Any] | None = None,
) -> pl.DataFrame:
    """Per-group frequency estimates of a PRAM'd column (a cross-tabulation).

    For each group of ``by`` (columns that were *not* randomized), the released counts
    of ``column`` give ``p_hat = (M^T)^{-1} m_hat`` within the group, with standard
    errors and the simplex projection. Groups are those present in the released frame.

    Returns
    -------
    polars.DataFrame
        Columns ``by..., category, n, count, p_hat, se, p_simplex``.

    Examples
    --------
    >>> import polars as pl
    >>> d = krr(2, 2.0)
    >>> rel = pl.DataFrame({"g": ["x"] * 4 + ["y"] * 4, "c": list("aababbba")})
    >>> estimate_grouped(rel, "c", "g", d, categories=["a", "b"]).columns
    ['g', 'category', 'n', 'count', 'p_hat', 'se', 'p_simplex']
    """
    if isinstance(by, str):
        by = [by]
    if not isinstance(by, Sequence) or not by or not all(isinstance(k, str) for k in by):
        raise InvalidParameterError(
            f"by must be a column name or a list of them (the columns not randomized), got {by!r}"
        )
    keys = list(by)
    df = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    if not isinstance(df, pl.DataFrame):
        raise InvalidParameterError(f"frame must be a polars frame, got {type(frame).__name__}")
    missing = [c for c in [column, *keys] if c not in df.columns]
    if missing:
        raise InvalidParameterError(f"columns {missing} are not in the frame")
    cats = categories
    if cats is None and isinstance(design, Mapping):
        cats = design.get("categories")
    dtype = df.schema[column]
    if cats is None and isinstance(dtype, pl.Enum):
        cats = dtype.categories.to_list()
    if cats is None:
        raise InvalidParameterError("pass categories= (the order the design uses)")
    rows = []
    for key, part in df.group_by(keys, maintain_order=True):
        est = estimate(part[column], design, categories=cats)
        se = est.standard_errors
        for i, c in enumerate(cats):
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "category": c,
                    "n": est.n,
                    "count": int(est.counts[i]),
                    "p_hat": float(est.p_hat[i]),
                    "se": float(se[i]),
                    "p_simplex": float(est.p_simplex[i]),
                }
            )
    return pl.DataFrame(rows)


# -- the suite of PRAM'd microdata (plain data: dpframe.polars.expectations) ------------


def pram_suite(arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
    """The suite of PRAM'd microdata: from its spec entry (columns, categories, ``public``)
    and the facts its file records (``input_rows``; ``categories``, from its verified
    ledger entries), with no input data.

    Exactly the declared columns (a column PRAM did not randomize must not be published);
    every PRAM'd column takes only its declared categories (``categories=``, or the
    categories its release recorded, or of its Enum dtype, or the keys of a public prior),
    holds no null, and has as many rows as the input (``input_rows``). Each column's
    values are checked in a table of their own, ``values.<column>``: each value
    (``value``) and its records (``rows``), names of their own whatever the column's.
    ``facts`` may also hold ``value_counts``, those tables computed by the engine
    (:meth:`~dpframe.engines.protocol.Engine.written_counts`), so the microdata itself is
    not read on the driver (``table`` then gives only the dtypes), and ``keep``, columns
    the release carried through unchanged.
    """
    suite, frame = start(arguments, table)
    rows = input_rows(facts)
    counted: Mapping[str, pl.DataFrame] = facts.get("value_counts") or {}
    recorded: Mapping[str, Any] = facts.get("categories") or {}
    lf = frame.lazy()
    schema = lf.collect_schema()
    columns = [dict(c) for c in arguments["columns"]]
    allowed = [c["column"] for c in columns]
    allowed += [*(arguments.get("public") or ()), *(facts.get("keep") or ())]
    # exactly the declared columns (and those the release was told to keep as they are):
    # a column PRAM did not randomize must not leave
    suite.add_table(
        "columns", pl.DataFrame({"column": list(schema)}, schema={"column": pl.String}), ["column"]
    )
    suite.expect(
        "expect_column_values_to_be_in_set",
        "columns",
        column="column",
        value_set=allowed,
        meta={
            "subject": "columns",
            "noun": "columns",
            "rule": f"not among the declared PRAM columns {allowed} (published without "
            "randomization)",
            "where": [],
        },
    )
    for c in columns:
        col = c["column"]
        cats = c.get("categories")
        if cats is None:
            cats = recorded.get(col)
        if cats is None and isinstance(c.get("prior"), Mapping):
            cats = list(c["prior"])
        cats = declared(
            cats,
            schema.get(col),
            f"release {suite.release!r}, column {col!r}",
            "give categories=[...] in the spec or release an Enum column",
        )
        table = f"values.{col}"
        if col in counted:  # counted by the engine
            values = counted[col].select(VALUE, VALUE_ROWS).sort(VALUE, nulls_last=True)
        elif col in schema:
            one = lf.select(pl.col(col).alias(VALUE))
            counts = one.group_by(VALUE).agg(pl.len().alias(VALUE_ROWS))
            values = counts.sort(VALUE, nulls_last=True).collect()
        else:
            values = pl.DataFrame(schema={VALUE_ROWS: pl.UInt32})
        suite.add_table(table, for_gx(values), [VALUE, VALUE_ROWS])
        suite.expect("expect_column_to_exist", table, column=VALUE, meta={"subject": col})
        suite.expect(
            "expect_column_values_to_be_in_set",
            table,
            column=VALUE,
            value_set=values_like(cats, schema.get(col)),
            meta={
                "subject": col,
                "noun": "distinct values",
                "rule": f"outside the declared categories {cats}",
                "example": "{value} in {rows} row(s)",
                "where": [],
            },
        )
        suite.expect(
            "expect_column_values_to_not_be_null",
            table,
            column=VALUE,
            meta={"subject": col, "noun": "distinct values", "example": "in {rows} row(s)"},
        )
        if rows is not None:
            suite.expect(
                "expect_column_sum_to_be_between",
                table,
                column=VALUE_ROWS,
                min_value=rows,
                max_value=rows,
                meta={
                    "subject": col,
                    "what": "row count",
                    "expected": f"{rows} (the input's rows)",
                },
            )
    return suite
