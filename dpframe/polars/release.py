"""The release object every frame-level release shares: declare, summarize, collect once.

A grouped release, a covariance matrix, a proportion vector, a DP prior and a PRAM'd
microdata release are each a :class:`Release` over a frame (polars or Spark: the engine
is chosen by the frame's type, :func:`dpframe.engines.engine_for`):

* built from public parameters only -- nothing is read, charged or drawn;
* :meth:`Release.summarize` -- every charged statistic's mechanism, epsilon, scale and
  95% error, from the plans alone (no data, no budget, no noise);
* :meth:`Release.prepare` -- the engine computes the exact inputs and the release checks
  them: bad data raises here, and nothing is spent;
* :meth:`Release.collect` -- the executor charges everything at once and draws
  (:func:`dpframe.core.executor.execute`); the result is kept, and collecting again
  returns the very same result, never fresh noise.

Examples
--------
>>> import polars as pl, dpframe
>>> people = pl.DataFrame({"region": ["N", "S", "S"]})
>>> with dpframe.Accountant(epsilon=1.0) as acct:
...     rel = dpframe.group_by(people, "region", margins=pl.DataFrame({"region": ["N", "S"]})
...                            ).agg(dpframe.agg.count(epsilon=0.5))
...     first = rel.collect()
...     again = rel.collect()
>>> first.equals(again), acct.spent.epsilon
(True, 0.5)
"""

from __future__ import annotations

import contextlib
import copy
import html
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any, ClassVar, Generic, Protocol, TypeVar, cast

import polars as pl
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from dpframe.core.accountant import Accountant, LedgerEntry, current_accountant
from dpframe.core.budget import exact_sum
from dpframe.core.constraints import check, spec_field
from dpframe.core.executor import SUMMARY_FIELDS, Execution, MechanismPlan, Once, Step, execute
from dpframe.core.neighbours import OTHER, require_substitute, short_reason
from dpframe.core.randomness import RandomSource, as_source
from dpframe.core.units import BOUNDS, RECORD, PrivacyUnit, as_unit, missing_bounds
from dpframe.engines import Engine, engine_for
from dpframe.errors import DPFrameError, InvalidParameterError
from dpframe.polars.expectations import Suite

__all__ = [
    "SUMMARY_SCHEMA",
    "Release",
    "SpecContext",
    "SpecEntry",
    "SpecModel",
    "Summary",
    "as_summary",
    "bounded_unit",
    "resolve_accountant",
    "spec_categories",
    "summary_frame",
]

#: The columns of ``summarize()`` (one row per charged statistic).
SUMMARY_SCHEMA = {
    "statistic": pl.String,
    "mechanism": pl.String,
    "epsilon": pl.Float64,
    "error95": pl.Float64,
    "scale": pl.Float64,
    "sensitivity": pl.Float64,
    "delta": pl.Float64,
    "rho": pl.Float64,
    "note": pl.String,
    "release": pl.String,
    "unit": pl.String,
    "neighbours": pl.String,
    "error95_other": pl.Float64,
    "other": pl.String,
}
assert tuple(SUMMARY_SCHEMA)[: len(SUMMARY_FIELDS)] == SUMMARY_FIELDS


class Summary(pl.DataFrame):
    """``summarize()``'s table: a polars DataFrame whose printed form shows every column
    (polars' default width would hide ``sensitivity`` and ``scale``) and every row."""

    def _shown(self, show: Any) -> str:
        with pl.Config(tbl_cols=-1, tbl_rows=-1, tbl_width_chars=10_000, fmt_str_lengths=200):
            return str(show(pl.DataFrame(self)))

    def __repr__(self) -> str:
        return self._shown(repr)

    def __str__(self) -> str:
        return self._shown(str)


def as_summary(frame: pl.DataFrame) -> Summary:
    """``frame`` (a summary's rows) as a :class:`Summary`."""
    return cast(Summary, Summary._from_pydf(frame._df))


def other_relation(
    neighbours: str, plans_under: Callable[[str], list[MechanismPlan]], rows: int
) -> tuple[list[float | None], list[str]]:
    """Each summary row's 95% error under the other neighbour relation, from the release's
    own plans made under it (the same sensitivity code), and what the ``other`` column
    says: the relation, or why the release cannot be made under it (``n/a (...)``)."""
    other = OTHER[neighbours]
    try:
        under = [row for p in plans_under(other) for row in p.summary()]
    except DPFrameError as exc:  # never a reason to refuse the release itself
        reason = short_reason(str(exc)) or f"not plannable: {exc}"
        return [None] * rows, [f"{other}: n/a ({reason})"] * rows
    if len(under) != rows:  # a plan whose rows differ by relation: nothing to compare
        return [None] * rows, [f"{other}: n/a"] * rows
    errors = [row.get("error95") for row in under]
    return errors, [
        f"{other}: error95 {row['error95']:.4g}"
        if row.get("error95") is not None
        else f"{other}: scale {row['scale']:.4g}"
        if row.get("scale") is not None
        else f"{other}: error known at evaluation"
        for row in under
    ]


def summary_frame(
    release: str,
    plans: list[MechanismPlan],
    *,
    unit: PrivacyUnit = RECORD,
    neighbours: str | None = None,
    plans_under: Callable[[str], list[MechanismPlan]] | None = None,
) -> Summary:
    """The summary rows of ``plans`` as a :class:`Summary` (:data:`SUMMARY_SCHEMA`): with
    the release's unit and relation, and each statistic's error under the other relation
    (from ``plans_under``, the release's plans under a given relation)."""
    rows = [{"release": release, **row} for p in plans for row in p.summary()]
    errors: list[float | None] = [None] * len(rows)
    others: list[str | None] = [None] * len(rows)
    if neighbours is not None and plans_under is not None:
        errors, said = other_relation(neighbours, plans_under, len(rows))
        others = list(said)
    for row, e, o in zip(rows, errors, others, strict=True):
        row.update(unit=unit.describe(), neighbours=neighbours, error95_other=e, other=o)
    return as_summary(pl.DataFrame(rows, schema=SUMMARY_SCHEMA))


def resolve_accountant(accountant: Any) -> Accountant | None:
    """``accountant``, or the innermost ``with accountant:`` block's (checked)."""
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"accountant must be a dpframe.Accountant, got {type(accountant).__name__}"
        )
    return accountant or current_accountant()


def bounded_unit(
    unit: Any,
    given: dict[str, Any],
    accountant: Accountant | None,
    needs: tuple[str, ...] = BOUNDS,
) -> PrivacyUnit:
    """A release's unit from its ``unit=`` and bounds (``given``), a bound not given taken
    from what its accountant states when both protect the same person column; the bounds
    in ``needs`` must then be known (:func:`dpframe.core.units.as_unit`: no silent
    default)."""
    if isinstance(unit, PrivacyUnit):
        return as_unit(unit, **{k: v for k, v in given.items() if v is not None}, needs=needs)
    person = None if accountant is None or accountant.unit.is_record else accountant.unit.person
    if unit is None and person is not None:
        unit = person
    if person is not None and unit == person:
        stated = accountant.stated_bounds if accountant is not None else {}
        given = {k: stated.get(k) if v is None else v for k, v in given.items()}
    return as_unit(unit, **given, needs=needs)


def resolve_unit(unit: Any, accountant: Accountant | None, person_level: bool) -> PrivacyUnit:
    """The privacy unit of a release: ``unit`` (a :class:`PrivacyUnit`, or ``unit=`` with
    its bounds, see :func:`dpframe.core.units.as_unit`), else the accountant's with the
    bounds it states (a person-level release needs them), else one row per person."""
    if unit is not None:  # resolved by the release kind, with the bounds it needs
        return as_unit(unit, needs=())
    if accountant is not None and not accountant.unit.is_record:
        if not person_level:  # refused by the release, whatever its bounds
            return accountant.unit
        return bounded_unit(None, {"max_rows": None, "max_groups": None}, accountant)
    return RECORD


#: what a release's collect() returns (a DataFrame, a list of armed PRAM runs, a prior)
ResultT = TypeVar("ResultT")


class SpecModel(BaseModel):
    """A part of a release spec: every field named, none coerced, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# a spec entry's fields, each checked by its parameter's constraint of
# dpframe.core.constraints, as the Python functions check it (no string taken as a number)
PositiveEps = Annotated[float, BeforeValidator(spec_field("epsilon"))]
OptionalEps = Annotated[float | None, BeforeValidator(spec_field("epsilon", optional=True))]
Finite = Annotated[float, BeforeValidator(spec_field("bound"))]
Method = Annotated[str, BeforeValidator(spec_field("method"))]
#: a bound, or "auto" (found privately by a first pass)
BoundOrAuto = Annotated[float | str, BeforeValidator(spec_field("bound_or_auto"))]


class SpecEntry(SpecModel):
    """A release spec's entry of one kind (``[[release]] kind = "..."``): its name and the
    keyword arguments of the kind's public function, checked by the function's own rules.

    A kind declares its entry beside its release class (``Release.spec_model``, with a
    ``kind: Literal["..."]`` field); :mod:`dpframe.jobs.spec` builds the spec's entries
    from the registry of kinds (:data:`dpframe.jobs.kinds.KINDS`).
    """

    # a file name on every file system: <name>.validation.json stays under 255 bytes
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", max_length=128)]

    def epsilon_total(self) -> Fraction:
        """The epsilon the entry charges, exactly."""
        raise NotImplementedError

    def check_in(self, spec: Any) -> None:
        """Refuse (``ValueError``, naming the release) what this entry cannot be within
        the whole ``spec`` (its margins, privacy unit, neighbour relation): checked when
        the spec is validated, before anything runs."""

    def check_person(self, spec: Any, stated: tuple[str, ...]) -> None:
        """The person unit's rules for an entry with its own ``unit`` and the bounds
        ``stated``: each bound given (here or under ``[privacy]``), and no other person
        than the ledger's."""
        own = getattr(self, "unit", None)
        person = own or spec.privacy.unit
        if person != "record":
            given = {
                b: getattr(spec.privacy, b) if getattr(self, b) is None else getattr(self, b)
                for b in stated
            }
            problem = missing_bounds(person, given, stated)
            if problem is not None:
                raise ValueError(f"release {self.name!r}: {problem}")
        if own is not None:
            if spec.privacy.unit not in ("record", own):
                raise ValueError(
                    f"release {self.name!r}: unit {own!r} differs from the ledger's person "
                    f"column {spec.privacy.unit!r}; leave it out to take the spec's"
                )
            if own == "record" and spec.privacy.unit != "record":
                raise ValueError(f"release {self.name!r}: this ledger protects people")

    def require_substitute(self, spec: Any, needs: str) -> None:
        """The rule of :mod:`dpframe.core.neighbours` for a kind that needs substitute
        neighbours (``needs``: a key of its ``REASONS``), checked before anything runs."""
        require_substitute(spec.privacy.neighbours, needs, argument=f"release {self.name!r}")


class SpecContext(Protocol):
    """What a job gives a release kind's :meth:`Release.from_spec`: its input and the
    job's public facts (declared here so that ``polars/`` never imports ``jobs/``; the
    job's :class:`dpframe.jobs.planning.Context` is one)."""

    @property
    def frame(self) -> Any:
        """The input (a polars or a Spark frame), never read by ``from_spec``."""
        ...

    @property
    def schema(self) -> pl.Schema:
        """The input's schema."""
        ...

    @property
    def accountant(self) -> Any:
        """The job's accountant (its ledger), charged by the release when it runs."""
        ...

    @property
    def neighbours(self) -> str:
        """The spec's neighbour relation."""
        ...

    @property
    def error(self) -> type[InvalidParameterError]:
        """The error a spec entry's mistake raises (the spec's own error class)."""
        ...

    def rows(self) -> int:
        """The input's row count (public under substitute neighbours), counted once."""
        ...

    def source(self, entry: Any) -> RandomSource:
        """Release ``entry``'s random source (secure, or derived from a seeded spec)."""
        ...

    def unit(self, entry: Any) -> dict[str, Any]:
        """Release ``entry``'s privacy unit as the release objects take it."""
        ...

    def margins(self, entry: Any) -> pl.DataFrame:
        """The public key frame of margins ``entry.margins`` fitted to ``entry.by``."""
        ...

    def margins_sizes(self, entry: Any) -> str | None:
        """The public sizes column of margins ``entry.margins``, if any."""
        ...


def spec_categories(entry: Any, column: str, categories: Any, context: SpecContext) -> list[Any]:
    """A spec entry's categories of ``column``, else those its input's Enum dtype
    declares: never taken from the data."""
    if categories is not None:
        return list(categories)
    dtype = context.schema.get(column)
    if isinstance(dtype, pl.Enum):
        return dtype.categories.to_list()
    raise context.error(
        f"release {entry.name!r}: give the categories of {column!r} in the spec (or make it "
        "an Enum): they are never taken from the data"
    )


class Release(Generic[ResultT]):
    """Base of the frame-level release objects (see the module docstring).

    A subclass gives :meth:`plans` (from parameters), :meth:`_exact_inputs` (the engine's
    exact inputs, one per plan, checked) and :meth:`_finish` (the released result from
    the drawn outputs).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
    >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = people.dp.group_by("region", margins=regions).agg(
    ...         dpframe.agg.count(epsilon=0.5)
    ...     )
    >>> isinstance(release, dpframe.Release)
    True
    """

    #: what the release is, in messages and the ledger's note
    kind = "release"
    #: its name (a spec's release name, set by the job), recorded in its ledger entries
    name: str | None = None
    #: whether the release bounds each person's contributions under a person unit
    person_level = False
    #: why the kind needs substitute neighbours (a key of core.neighbours.REASONS), if it
    #: does; a kind made under both relations overrides ``_plans_under``
    substitute_only = "dataset size"
    #: whether its output is microdata the engine writes (never kept in memory)
    rowwise = False
    #: the facts its suite cannot do without (asked of the input, or of the file it wrote,
    #: when its file does not record them)
    required_facts: tuple[str, ...] = ()
    #: its release spec entry (``kind = "..."`` and the public function's arguments;
    #: None: no spec entry), read by ``from_spec``
    spec_model: ClassVar[type[SpecEntry] | None] = None

    def __init__(
        self,
        frame: Any,
        accountant: Any,
        seed: Any,
        neighbours: str | None = None,
        unit: Any = None,
    ) -> None:
        self.id = uuid.uuid4().hex
        self.engine: Engine = engine_for(frame)
        self._accountant = resolve_accountant(accountant)
        if neighbours is not None:  # a release planned before its accountant is opened
            check("neighbours", neighbours)
            if self.accountant is not None and self.accountant.neighbours != neighbours:
                raise InvalidParameterError(
                    f"neighbours={neighbours!r} differs from the accountant's "
                    f"{self.accountant.neighbours!r}"
                )
        self._neighbours = neighbours
        self.unit: PrivacyUnit = resolve_unit(unit, self.accountant, self.person_level)
        if not self.unit.is_record and not self.person_level:
            raise InvalidParameterError(
                f"unit: a {self.kind} under a person unit ({self.unit.describe()}) is not "
                "offered yet: it needs a public number of records, which bounding makes "
                "private; release grouped counts and sums (or PRAM microdata) with unit=... "
                "instead, or use a record ledger"
            )
        self.random: RandomSource = as_source(seed)
        self._once = Once()
        self._steps: list[Step] | None = None
        self._parametrised = False  # planned with what its first passes drew
        #: the first passes drawn, by relation: still part of what the release cost
        self._passes_drawn: dict[str, list[MechanismPlan]] = {}
        self._lock = threading.Lock()
        self.ledger: tuple[LedgerEntry, ...] = ()

    @property
    def accountant(self) -> Accountant | None:
        """The accountant the release charges: fixed when it is built, as its plans were
        made for that accountant's neighbour relation and unit (``release.accountant =
        ...`` is refused: a plan made for add-remove neighbours, charged on a substitute
        ledger, would be recorded at half its loss)."""
        return self._accountant

    @accountant.setter
    def accountant(self, value: Any) -> None:
        raise InvalidParameterError(
            "a release's accountant is fixed when it is built (its plans were made for that "
            "accountant's neighbour relation and unit): build the release again with "
            "accountant=..."
        )

    @property
    def neighbours(self) -> str:
        """The accountant's neighbour relation (without one: as planned, or substitute).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0, neighbours="add_remove")
        >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
        >>> regions = pl.DataFrame({"region": ["North", "South"]})
        >>> grouping = dpframe.group_by(people, "region", margins=regions, accountant=acct)
        >>> grouping.agg(dpframe.agg.count(epsilon=0.5)).neighbours
        'add_remove'
        """
        if self.accountant is not None:
            return self.accountant.neighbours
        return self._neighbours or "substitute"

    # -- what a subclass gives ------------------------------------------------------------

    def plans(self) -> list[MechanismPlan]:
        """The release's plans, as copies: changing them changes nothing of the release
        (what it charges and draws is its own). Its first passes while still to draw."""
        return copy.deepcopy([*self._first_plans(), *self._plans_of()])

    def _plans_of(self) -> list[MechanismPlan]:
        raise NotImplementedError

    # -- first passes: drawn first, their outputs parametrise the release's plans --------

    def _first_plans(self, neighbours: str | None = None) -> list[MechanismPlan]:
        """The plans of the release's first passes still to draw (none by default):
        charged and drawn before the release, whose plans (:meth:`_plans_of`) their
        outputs then parametrise (:meth:`_use_first`), e.g. bounds found privately.
        ``neighbours``: as if made under that relation (the summary's comparison)."""
        return []

    def _first_inputs(self) -> list[Any]:
        """The exact inputs of :meth:`_first_plans` (one per plan), from the engine."""
        return []

    def _use_first(self, outputs: tuple[Any, ...]) -> None:
        """Plan the release with its first passes' drawn ``outputs``; after this,
        :meth:`_first_plans` is empty and :meth:`_plans_of` the plans to draw."""
        raise NotImplementedError

    def _all_plans(self, neighbours: str | None = None) -> list[MechanismPlan]:
        """The first passes' plans, then the release's: everything it charges."""
        if neighbours is None or neighbours == self.neighbours:
            drawn = self._passes_drawn.get(self.neighbours, [])
            return [*drawn, *self._first_plans(), *self._plans_of()]
        drawn = self._passes_drawn.get(neighbours, [])
        return [*drawn, *self._first_plans(neighbours), *self._plans_under(neighbours)]

    def _exact_inputs(self) -> list[Any]:
        raise NotImplementedError

    def check_schema(self) -> None:
        """Refuse, from the frame's schema alone (public: no row is read), columns the
        release needs that are missing or of a dtype it cannot use. A plan calls it; so
        does the release before it reads the data."""

    def _finish(self, outputs: tuple[Any, ...]) -> ResultT:
        raise NotImplementedError

    # -- the declaration: its spec entry, its file's facts, its suite -----------------------

    @classmethod
    def from_spec(cls, entry: Any, context: SpecContext) -> Release[Any]:
        """The release a spec's entry of this kind describes (its validated arguments),
        over the job's input and public facts (``context``): nothing is read but the
        schema and, for a kind that needs it, the row count."""
        raise InvalidParameterError(f"a {cls.kind} has no release spec entry")

    def to_spec(self, name: str | None = None) -> dict[str, Any]:
        """The release's arguments as a release spec's entry (``name``, ``kind`` and the
        public function's arguments): what its suite is built from, here and when its
        published file is checked again from its provenance."""
        raise InvalidParameterError(
            f"a {self.kind} has no release spec entry, so no suite to check it against"
        )

    def unit_entry(self, *, groups: bool = True) -> dict[str, Any]:
        """Its privacy unit as a spec entry states it: nothing for a record unit, else the
        person column and its bounds (``max_groups`` only for a release with groups)."""
        u = self.unit
        if u.is_record:
            return {}
        entry = {"unit": u.person, "max_rows": u.max_rows}
        return {**entry, "max_groups": u.max_groups} if groups else entry

    def spec_name(self, name: str | None = None) -> str:
        """The name its spec entry and suite use: ``name``, its own, or its kind and id."""
        return name or self.name or f"{self.kind.replace(' ', '_')}_{self.id[:8]}"

    def facts(self) -> dict[str, Any]:
        """The public facts its published file records for its checks (margins, sizes,
        the input's rows): its suite reads them with its spec entry, never the input."""
        return {}

    @classmethod
    def read_facts(cls, facts: Mapping[str, Any], entries: Sequence[LedgerEntry]) -> dict[str, Any]:
        """The facts a published file of this kind holds for its suite: those its
        provenance records (:meth:`facts`), and what its verified ledger entries record."""
        return dict(facts)

    @classmethod
    def suite(cls, arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
        """The suite of the kind's released ``table`` from its spec entry and facts."""
        raise InvalidParameterError(f"a {cls.kind} has no expectation suite")

    def expectations(self, table: Any, facts: Mapping[str, Any] | None = None) -> Suite:
        """Its suite (plain data, :mod:`dpframe.polars.expectations`) for its released
        ``table``: from :meth:`to_spec` and :meth:`facts` (or the ``facts`` given)."""
        given = self.facts() if facts is None else facts
        return type(self).suite(self.to_spec(), given, table)

    # -- the one path ---------------------------------------------------------------------

    def summarize(self) -> Summary:
        """Every charged statistic: mechanism, epsilon, sensitivity, scale, 95% error.

        Computed from the declaration alone: no data is read, no budget spent, no noise
        drawn. ``unit`` is the privacy unit the release assumes (a person column with its
        bounds), ``neighbours`` the relation it is calibrated for, ``error95_other`` each
        statistic's 95% error under the other relation (null where the release cannot be
        made under it; ``other`` says why).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
        >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> release = people.dp.group_by("region", margins=regions, accountant=acct).agg(
        ...     dpframe.agg.count(epsilon=0.5)
        ... )
        >>> release.summarize().select("statistic", "mechanism", "epsilon").row(0)
        ('count', 'laplace', 0.5)
        >>> release.summarize().select("neighbours", "error95", "error95_other").row(0)
        ('substitute', 12.0, 6.0)
        >>> acct.spent.epsilon  # nothing spent
        0.0
        """
        return summary_frame(
            self.id[:8],
            self._all_plans(),
            unit=self.unit,
            neighbours=self.neighbours,
            plans_under=self._all_plans,
        )

    def _plans_under(self, neighbours: str) -> list[MechanismPlan]:
        """The release's plans as if made under ``neighbours`` (never charged or drawn:
        for the summary's comparison). By default a kind exists under one relation: the
        other raises the kind's refusal (:func:`dpframe.core.neighbours.require_substitute`)."""
        if neighbours == self.neighbours:
            return self._plans_of()
        require_substitute(neighbours, self.substitute_only, argument="neighbours")
        raise NotImplementedError(f"{self.kind}: plans under {neighbours!r}")

    @property
    def epsilon(self) -> float:
        """Total epsilon the release charges (its statistics compose sequentially).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> votes = pl.DataFrame({"vote": ["a", "b", "b", "c"] * 50})
        >>> release = dpframe.proportions(votes, "vote", categories=["a", "b", "c"],
        ...                               epsilon=0.8, n=200)
        >>> release.epsilon  # declared: nothing read, nothing spent
        0.8
        """
        return float(exact_sum(c.epsilon for p in self._all_plans() for c in p.charges))

    def prepare(self) -> list[Step]:
        """Compute and check the exact inputs now, charging nothing (kept for collect).

        A job that runs several releases prepares all of them first, so that bad data in
        any of them is found before the first charge, then charges them together. A
        release with first passes (:meth:`_first_plans`) prepares those: its own exact
        inputs depend on what they draw (:meth:`draw`).
        """
        with self._lock:
            if self._steps is None:
                plans = self._first_plans() or self._plans_of()
                inputs = self._first_inputs() if self._first_plans() else self._exact_inputs()
                steps = [
                    Step(p, x, self.random, self.name) for p, x in zip(plans, inputs, strict=True)
                ]
                for s in steps:  # refuse bad values before anything is charged
                    s.plan.check(s.exact)
                self._steps = steps
            return self._steps

    def draw(self, steps: list[Step], accountant: Any, *, note: str) -> Execution:
        """Charge and draw the prepared ``steps``; if they were first passes, plan the
        release with what they drew, prepare it (its exact inputs, checked) and charge
        and draw it too. Each pass is charged before it draws (a failure after a charge
        leaves its entries in the ledger); the entries of all of them come back, with
        the release's own outputs."""
        if accountant is not None and accountant.neighbours != self.neighbours:
            raise InvalidParameterError(
                f"{self.kind}: planned for {self.neighbours!r} neighbours, asked to be "
                f"charged on a ledger of {accountant.neighbours!r} neighbours; build it "
                "with that ledger's accountant (nothing was charged)"
            )
        passes = {self.neighbours: self._first_plans()}
        if passes[self.neighbours]:  # kept: after they are drawn they still count
            with contextlib.suppress(DPFrameError):  # not plannable: no comparison
                passes[OTHER[self.neighbours]] = self._first_plans(OTHER[self.neighbours])
        run = execute(steps, accountant, note=note)
        if not self._first_plans():
            return run
        with self._lock:
            self._passes_drawn = passes
            self._use_first(run.outputs)
            self._steps = None
            self._parametrised = True
        last = execute(self.prepare(), accountant, note=note)
        counts = (run.counts[0] + sum(run.counts[1:]) + last.counts[0], *last.counts[1:])
        return Execution(last.outputs, run.entries + last.entries, counts)

    def drawn_rows(self) -> list[dict[str, Any]]:
        """The summary rows of the plans its first passes parametrised, as drawn (their
        scale and error, and what the passes found, in the note): for the run's report.
        Empty for a release without first passes, or before they are drawn."""
        if not self._parametrised:
            return []
        return [row for p in self._plans_of() for row in p.summary()]

    def finish(self, outputs: tuple[Any, ...], entries: tuple[LedgerEntry, ...]) -> ResultT:
        """The released result from drawn outputs (used by a job that charged it)."""
        self.ledger = tuple(entries)
        result = self._once.get(
            None, lambda: self._finish(outputs), what=f"{self.kind} {self.id[:8]}"
        )
        self._steps = None  # the exact inputs are not kept past the release
        return result

    def collect(self) -> ResultT:
        """Run the release: one atomic charge, then noise. Collected again: the same result.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
        >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> release = people.dp.group_by("region", margins=regions, accountant=acct).agg(
        ...     dpframe.agg.count(epsilon=0.5)
        ... )
        >>> table = release.collect()
        >>> release.collect() is table, acct.spent.epsilon  # charged once
        (True, 0.5)
        """

        def make() -> ResultT:
            steps = self.prepare()
            run = self.draw(steps, self.accountant, note=f"{self.kind} {self.id[:8]}")
            self.ledger = run.entries
            result = self._finish(run.outputs)
            self._steps = None  # the exact inputs are not kept past the release
            return result

        return self._once.get(None, make, what=f"{self.kind} {self.id[:8]}")

    @property
    def materialised(self) -> bool:
        """True once the release has been charged and its noise drawn.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
        >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> release = people.dp.group_by("region", margins=regions, accountant=acct).agg(
        ...     dpframe.agg.count(epsilon=0.5)
        ... )
        >>> release.materialised
        False
        >>> _ = release.collect()
        >>> release.materialised
        True
        """
        return self._once.done

    def _repr_html_(self) -> str:
        """A notebook's view: the release and its plan (nothing spent, nothing drawn)."""
        return f"<p><code>{html.escape(repr(self))}</code></p>{self.summarize()._repr_html_()}"

    def __repr__(self) -> str:
        state = "collected" if self.materialised else "not collected"
        return (
            f"{type(self).__name__}(id={self.id[:8]}, epsilon={self.epsilon:g}, "
            f"engine={self.engine.name}, {state})"
        )
