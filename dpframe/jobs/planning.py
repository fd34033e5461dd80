"""``plan``: every release of a spec with its mechanism, epsilon, scale and 95% error.

A spec is resolved once into a :class:`Job` (absolute paths, the input and its engine,
the ledger, the margins, the budget, the seed, the input's row count counted at most
once) and planned once: the :class:`JobPlan` holds the release objects
(:mod:`dpframe.jobs.kinds`), built once, which ``run`` then prepares and draws. Nothing
is spent, nothing is written and no noise is drawn: a release's summary comes from the
kernels' plans alone (:mod:`dpframe.core.executor`). It reads only public things: the
margins, the input's schema, and its row count where a release needs the dataset size
(public under substitute neighbours).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant, ledger_exists
from dpframe.core.advice import spec_entry
from dpframe.core.budget import exact, exact_sum, shown
from dpframe.core.neighbours import MEANING, OTHER
from dpframe.core.postgres import redact
from dpframe.core.randomness import RandomSource, derived_source
from dpframe.engines import Engine, input_engine
from dpframe.engines.driver import fit_margins, textual_key
from dpframe.errors import BudgetExceededError, DPFrameError, InvalidParameterError
from dpframe.jobs import targets
from dpframe.jobs.kinds import release_class
from dpframe.jobs.spec import Spec, SpecError
from dpframe.mechanisms.allocation import Allocation
from dpframe.polars.io import frame_reads
from dpframe.polars.release import Release

__all__ = [
    "Context",
    "Job",
    "JobPlan",
    "RowCount",
    "build",
    "build_releases",
    "margins_for",
    "plan",
    "resolve",
]

#: The columns of a plan's table.
PLAN_SCHEMA = {
    "release": pl.String,
    "kind": pl.String,
    "statistic": pl.String,
    "mechanism": pl.String,
    "epsilon": pl.Float64,
    "delta": pl.Float64,
    "rho": pl.Float64,
    "sensitivity": pl.Float64,
    "scale": pl.Float64,
    "error95": pl.Float64,
    "note": pl.String,
    "unit": pl.String,
    "neighbours": pl.String,
    "error95_other": pl.Float64,
    "other": pl.String,
}


@dataclass(frozen=True, eq=False)
class JobPlan:
    """The plan of a spec: one row per charged statistic, and the budget before and after.

    It holds the spec resolved once (``job``) and the release objects built once
    (``releases``, read-only): ``dpframe.jobs.run(spec, plan=the_plan)`` runs exactly
    these. ``rows`` is what the plan shows; what a run charges is derived from what it
    draws (:func:`dpframe.core.executor.execute`), never from ``rows`` or ``epsilon``.
    """

    #: the plan's table, kept: :attr:`rows` gives a copy
    table: InitVar[pl.DataFrame]
    budget_epsilon: float
    budget_delta: float
    spent_before: float
    epsilon: float
    delta: float
    ledger: Path | str
    input_rows: int | None
    #: the spec resolved once (input, output, ledger, margins, budget, seed, engine)
    job: Job
    #: each release object, built once (what ``run(spec, plan=...)`` prepares and draws)
    releases: Mapping[str, Release[Any]]
    #: on a zCDP budget: the budget's rho and what the plan costs in rho (``spent_before``
    #: is then in rho too); ``None`` on an (epsilon, delta) budget
    budget_rho: float | None = None
    rho: float | None = None
    #: the neighbour relation every release is calibrated for (the spec's)
    neighbours: str = "substitute"
    #: on a tight-composition budget (``accounting="pld"``): what the ledger, running
    #: jobs and this plan compose to (epsilon at the budget's delta), and whether that
    #: fits; ``None`` otherwise (amounts add)
    composed_after: float | None = None
    composed_fits: bool | None = None
    #: the budgets found for the statistics with an ``error95`` target
    #: (:mod:`dpframe.jobs.targets`); ``None`` for a spec without targets
    allocation: Allocation | None = None

    def __post_init__(self, table: pl.DataFrame) -> None:
        object.__setattr__(self, "_rows", table.clone())

    @property
    def rows(self) -> pl.DataFrame:
        """One row per charged statistic (a copy: changing it changes nothing planned)."""
        rows: pl.DataFrame = self._rows  # type: ignore[attr-defined]
        return rows.clone()

    @property
    def _amount(self) -> float:
        return self.epsilon if self.budget_rho is None else float(self.rho or 0.0)

    @property
    def _budget(self) -> float:
        return self.budget_epsilon if self.budget_rho is None else self.budget_rho

    @property
    def spent_after(self) -> float:
        if self.composed_after is not None:
            return self.composed_after
        return float(exact(self.spent_before) + exact(self._amount))

    @property
    def remaining_after(self) -> float:
        return float(exact(self._budget) - exact(self.spent_after))

    @property
    def fits(self) -> bool:
        """Whether the releases fit in what the ledger has left."""
        if self.composed_fits is not None:
            return self.composed_fits
        total = exact(self.spent_before) + exact(self._amount)
        if self.budget_rho is not None:
            return total <= exact(self.budget_rho)
        return total <= exact(self.budget_epsilon) and self.delta <= self.budget_delta

    def assumptions(self) -> list[str]:
        """What the releases assume, in words: the neighbour relation (and where the
        other relation's errors are), and each release's privacy unit with its bounds
        and why it has no error under the other relation, if it has none."""
        other = OTHER[self.neighbours]
        lines = [
            f"neighbours: {self.neighbours} ({MEANING[self.neighbours]})",
            f"error95_other: each statistic's 95% error under {other} ({MEANING[other]})",
        ]
        seen: dict[str, tuple[str, str]] = {}
        for row in self.rows.iter_rows(named=True):
            seen.setdefault(row["release"], (row["unit"] or "", row["other"] or ""))
        for name, (unit, said) in seen.items():
            na = f"; under {said}" if said.startswith(f"{other}: n/a") else ""
            lines.append(f"release {name!r}: unit {unit}{na}")
        return lines + self.accuracy_lines()

    def accuracy_rows(self) -> dict[str, Any] | None:
        """The allocation as the run's report shows it: ``summary`` (the first of
        :meth:`accuracy_lines`) and ``rows`` (:meth:`Allocation.rows`); ``None`` for a
        spec without targets."""
        if self.allocation is None:
            return None
        return {"summary": self.accuracy_lines()[0], "rows": self.allocation.rows()}

    def accuracy_lines(self) -> list[str]:
        """The statistics with an error95 target: each target, the budget found and the
        error95 it gives (none for a spec without targets)."""
        a = self.allocation
        if a is None:
            return []
        how = "the least total" if a.budget is None else f"a total of {a.budget:g}, split"
        cur = "rho" if a.accounting == "zcdp" else "epsilon"
        bound = (
            " (an upper bound: the ledger composes them tightly)" if a.accounting == "pld" else ""
        )
        lines = [
            f"accuracy: {how} meeting the error95 targets: {cur} {a.total:.6g} in all{bound}, "
            f"worst error/target {a.ratio:.4g}"
        ]
        for row in a.rows():
            said = f" (assuming {row['assumption']})" if row["assumption"] else ""
            asked = (
                f"share {row['share']:g} of the total"
                if row["target"] is None
                else f"target error95 {row['target']:.6g}"
            )
            lines.append(
                f"  {row['statistic']}: {asked}, {row['currency']} "
                f"{row['budget']:g} found, error95 {row['error95']:.6g}{said}"
            )
        return lines

    def summary(self) -> str:
        verdict = "fits" if self.fits else "OVERSPENDS: nothing will be released"
        if self.budget_rho is not None:
            what = (
                f"zCDP budget rho={self.budget_rho:g} (epsilon={self.budget_epsilon:g} at "
                f"delta={self.budget_delta:g})"
            )
        elif self.composed_after is not None:
            return (
                f"budget epsilon={self.budget_epsilon:g}, delta={self.budget_delta:g} by tight "
                f"composition (ledger {self.ledger}): the ledger composes to epsilon="
                f"{self.spent_before:.4g} before, this plan's releases (epsilon "
                f"{self._amount:g}, delta {self.delta:g} in sum) bring it to "
                f"{self.spent_after:.4g} -- {verdict}"
            )
        else:
            what = f"budget epsilon={self.budget_epsilon:g}"
        return (
            f"{what} (ledger {self.ledger}): spent {self.spent_before:g} before, this plan "
            f"spends {self._amount:g}, {self.spent_after:g} after, "
            f"{shown(self.remaining_after, self._budget)} "
            f"left -- {verdict}"
        )


class RowCount:
    """The input's row count: counted at most once, then shared by every release that
    takes it as a public size, the PRAM files' ``input_rows`` and the progress bar.

    Counted lazily (a spec none of whose releases needs it never counts), and checked
    again by each release on the data it prepares: a release whose ``n`` came from here
    refuses, before any charge, data that no longer has that many rows
    (:func:`dpframe.polars.frame.check_public_size`; PRAM in :func:`dpframe.jobs.job.run`).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._rows: int | None = None
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            if self._rows is None:
                self._rows = int(self._engine.rows())
            return self._rows

    @property
    def counted(self) -> int | None:
        """The count, if it was taken (``None``: nothing needed it yet)."""
        return self._rows


@dataclass(frozen=True, eq=False)
class Job:
    """A spec resolved once: what its run reads, writes and charges, as plain values.

    Made by :func:`resolve` (and by :func:`plan`, which keeps it in its
    :class:`JobPlan`); nothing in it is read again from the spec's files.
    """

    #: the spec as given (its releases, and its JSON form for the provenance)
    spec: Spec
    #: the engine that reads the input, and its frame (polars LazyFrame or Spark)
    engine: Engine
    frame: Any
    #: the input's (public) schema, as polars reads it
    schema: pl.Schema
    #: the output folder, absolute
    output: Path
    #: the ledger: an absolute path or a PostgreSQL URL
    ledger: Path | str
    #: each margins table a release uses, read once
    margins: Mapping[str, pl.DataFrame]
    #: the budget, relation and unit, as :meth:`dpframe.Accountant.open` takes them
    terms: Mapping[str, Any]
    seed: int | None
    #: the input's row count, counted at most once
    rows: RowCount
    #: each file the input reads, with its size and modification time when resolved
    #: (``None``: they cannot be listed; the run's output guard then refuses)
    files: tuple[tuple[str, int, int], ...] | None
    #: the spec as it was resolved (its JSON form): a spec changed in place since (its
    #: lists are mutable) is refused by ``run(spec, plan=...)``
    resolved: str = ""

    def spec_changed(self) -> bool:
        """Whether the spec differs from what it was when the job was resolved."""
        return spec_json(self.spec) != self.resolved

    def changed_input(self) -> str | None:
        """The first input file that is not as it was when the job was resolved (a lazy
        input read after it was rewritten), or ``None``."""
        if self.files is None:
            return None
        now = input_files(self.frame)
        if now == self.files:
            return None
        before = dict((p, (size, mtime)) for p, size, mtime in self.files)
        after = dict((p, (size, mtime)) for p, size, mtime in now or ())
        changed = [p for p in sorted(before.keys() | after.keys()) if before.get(p) != after.get(p)]
        return changed[0] if changed else "the input's files"

    def context(self, accountant: Any = None) -> Context:
        """What building the spec's releases reads (:mod:`dpframe.jobs.kinds`)."""
        return Context(
            spec=self.spec,
            frame=self.frame,
            schema=self.schema,
            rows=self.rows,
            tables=self.margins,
            accountant=accountant,
            seed=self.seed,
        )


@dataclass(frozen=True)
class Context:
    """What building a spec's releases needs: the data, its public facts, the budget
    (made from a resolved job: :meth:`dpframe.jobs.planning.Job.context`); what a release
    class's ``from_spec`` is given (:class:`dpframe.polars.release.SpecContext`)."""

    spec: Spec
    frame: Any
    schema: pl.Schema
    #: the input's row count (public under substitute neighbours), counted at most once
    #: and shared by every release of the job
    rows: Callable[[], int]
    #: each margins table a release uses, as read once (else read from the spec)
    tables: Mapping[str, pl.DataFrame] = field(default_factory=lambda: MappingProxyType({}))
    accountant: Any = None
    seed: int | None = None
    #: the error a spec entry's mistake raises
    error: type[InvalidParameterError] = SpecError

    @property
    def neighbours(self) -> str:
        """The spec's neighbour relation."""
        return self.spec.privacy.neighbours

    def margins(self, r: Any) -> pl.DataFrame:
        """The public key frame of margins ``r.margins``, fitted to ``r.by`` and the
        input's dtypes (:func:`margins_for`)."""
        return margins_for(self.spec, r, self.schema, self.tables.get(r.margins))

    def margins_sizes(self, r: Any) -> str | None:
        """The public sizes column of margins ``r.margins``, if any."""
        return self.spec.margins[r.margins].sizes

    def source(self, r: Any) -> RandomSource:
        """Release ``r``'s random source: secure, or derived from a seeded spec's seed."""
        return derived_source(self.seed, r.name)

    def unit(self, r: Any = None) -> dict[str, Any]:
        """Release ``r``'s privacy unit (its own, else the spec's), as the release objects
        take it (empty: one row is one person)."""
        p = self.spec.privacy
        own = getattr(r, "unit", None)
        person = own or p.unit
        if person == "record":
            return {}
        rows = getattr(r, "max_rows", None)
        groups = getattr(r, "max_groups", None)
        return {
            "unit": person,
            "max_rows": p.max_rows if rows is None else rows,
            "max_groups": p.max_groups if groups is None else groups,
        }


def margins_for(
    spec: Spec, r: Any, schema: pl.Schema, read: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The public key frame of ``r``, its key columns in the input's dtypes: every value
    must fit exactly (:func:`dpframe.engines.driver.fit_margins`, the Python API's rule).
    ``read``: its margins table as the job read it (default: read from the spec now)."""
    margins = spec.margins_frame(r.margins) if read is None else read
    for key in r.by:
        if key not in margins.columns:
            raise SpecError(f"release {r.name!r}: margins {r.margins!r} has no column {key!r}")
        if key not in schema:
            raise SpecError(f"release {r.name!r}: the input has no column {key!r}")
        if textual_key(margins.schema[key]) != textual_key(schema[key]):
            raise SpecError(
                f"release {r.name!r}: margins {r.margins!r} key {key!r} has dtype "
                f"{margins.schema[key]} but the input's is {schema[key]}: list the keys with "
                "the input's type (e.g. strings for a String column)"
            )
    try:
        return fit_margins(margins, schema, r.by, f"release {r.name!r}: margins {r.margins!r}")
    except InvalidParameterError as exc:
        raise SpecError(str(exc)) from None


def build(ctx: Context, r: Any) -> Release[Any]:
    """The release object of spec entry ``r`` (nothing read but the schema and row count)."""
    try:
        release = release_class(r).from_spec(r, ctx)
        release.name = r.name  # recorded in its ledger entries
        return release
    except SpecError:
        raise
    except DPFrameError as exc:  # name the release in the message
        raise type(exc)(f"release {r.name!r}: {exc}") from None


def input_files(frame: Any) -> tuple[tuple[str, int, int], ...] | None:
    """Each file ``frame`` reads (:func:`dpframe.polars.io.frame_reads`) with its size and
    modification time in nanoseconds (``-1`` if it cannot be read); ``None`` if the files
    cannot be listed."""
    try:
        reads = frame_reads(frame, "the input")
    except InvalidParameterError:
        return None
    files = []
    for path in sorted({r.path for r in reads}):
        try:
            st = os.stat(path)
            files.append((path, st.st_size, st.st_mtime_ns))
        except OSError:
            files.append((path, -1, -1))
    return tuple(files)


def resolve(spec: Spec, *, frame: Any = None, engine: str | None = None, spark: Any = None) -> Job:
    """The spec resolved once into a :class:`Job` (its input scanned, not read).

    ``frame`` stands in for the spec's input; ``engine`` (``"polars"`` or ``"spark"``)
    names the engine that reads it (default: the frame's, else polars).
    """
    given = frame if frame is not None else spec.frame
    path = None if spec.input.path is None else Path(spec.resolve(spec.input.path) or "").absolute()
    try:
        eng = input_engine(engine, frame=given, path=path, scan=spec.lazy_input, spark=spark)
    except SpecError:
        raise
    except InvalidParameterError as exc:
        raise SpecError(str(exc)) from None
    ledger = spec.ledger_target()
    used = sorted({m for r in spec.release if isinstance(m := getattr(r, "margins", None), str)})
    return Job(
        spec=spec,
        engine=eng,
        frame=eng.frame,
        schema=file_schema(spec, eng),
        output=Path(spec.resolve(spec.output.folder) or "").absolute(),
        ledger=ledger,
        margins=MappingProxyType({name: spec.margins_frame(name) for name in used}),
        terms=MappingProxyType(spec.privacy.ledger_terms()),
        seed=spec.privacy.seed,
        rows=RowCount(eng),
        files=input_files(eng.frame),
        resolved=spec_json(spec),
    )


def spec_json(spec: Spec) -> str:
    """The spec's JSON form, canonical (what a plan is held to)."""
    return json.dumps(spec.to_dict(), sort_keys=True, default=str)


def ledger_state(job: Job) -> tuple[float, Path | str, Accountant | None]:
    """What the job's ledger has spent or holds for running jobs (0 if it does not exist
    yet: nothing is created), and the ledger (``None`` then)."""
    path = job.ledger
    shown = redact(path) if isinstance(path, str) else path  # never a password in a message
    if not ledger_exists(path):  # plan writes nothing: a missing ledger has spent nothing
        return 0.0, shown, None
    acct = job.spec.privacy.open_ledger(path)
    return _used(acct), shown, acct


def _used(acct: Accountant) -> float:
    if acct.accounting == "pld":
        return acct.composed().epsilon
    if acct.rho is not None:
        return float(exact(acct.spent.rho) + exact(acct.reserved.rho))
    return float(exact(acct.spent.epsilon) + exact(acct.reserved.epsilon))


def file_schema(spec: Spec, engine: Engine) -> pl.Schema:
    """The input's schema as polars reads it (the file's Enum dtypes declare categories)."""
    if spec.frame is None and spec.input.path is not None:
        return spec.lazy_input().collect_schema()
    return engine.schema()


def build_releases(job: Job) -> dict[str, Release[Any]]:
    """Every release object of the job (nothing read but public facts), built once."""
    ctx = job.context()
    return {r.name: build(ctx, r) for r in job.spec.release}


@spec_entry
def plan(spec: Spec, *, frame: Any = None, engine: str | None = None, spark: Any = None) -> JobPlan:
    """Resolve a spec into the releases it will make, without spending or drawing noise.

    The plan holds the release objects it built: ``run(spec, plan=the_plan)`` runs them
    (nothing is planned or built again).

    Parameters
    ----------
    spec : Spec
    frame : polars.LazyFrame or pyspark.sql.DataFrame, optional
        Stands in for the spec's input (default: its frame, or its file scanned by
        polars); only its schema and, where a release needs the dataset size, its row
        count are read.
    engine : {"polars", "spark"}, optional
        The engine that reads the input (default: the frame's, else polars).
    spark : pyspark.sql.SparkSession, optional
        For ``engine="spark"``; default :func:`dpframe.engines.spark.local_session`.

    Returns
    -------
    JobPlan
        ``rows`` (release, kind, statistic, mechanism, epsilon, delta, sensitivity, scale,
        error95, note; unit, the privacy unit a release assumes with its bounds;
        neighbours; error95_other and other, the error under the other relation or why
        there is none), the budget and the ledger's spend before and after; ``fits`` is
        False if the releases would overspend.
    """
    job = resolve(spec, frame=frame, engine=engine, spark=spark)
    spent, ledger, existing = ledger_state(job)
    releases = build_releases(job)
    table = []
    charges = []
    for r in spec.release:
        rel = releases[r.name]
        try:  # the schema is public: a missing column or a wrong dtype fails the plan
            rel.check_schema()
        except DPFrameError as exc:
            raise SpecError(f"release {r.name!r}: {exc}") from None
        for row in rel.summarize().iter_rows(named=True):
            table.append({**row, "release": r.name, "kind": r.kind})
        charges += [c for p in rel.plans() for c in p.charges]
    # the spec's budget terms, in memory, price the plan (and refuse a charge it cannot pay)
    terms = Accountant(**job.terms)
    cost = terms.cost(charges) if charges else None
    pricing = existing if existing is not None else terms  # the ledger's own accounting
    allocation = _allocation(spec, table, spent, terms, cost, charges, job.context())
    composed_after = composed_fits = None
    if pricing.accounting == "pld":
        composed_after = pricing.composed(charges).epsilon
        try:
            pricing.check(charges)
            composed_fits = True
        except BudgetExceededError:
            composed_fits = False
    return JobPlan(
        table=pl.DataFrame(table, schema=PLAN_SCHEMA),
        budget_epsilon=terms.epsilon,
        budget_delta=spec.privacy.budget.delta,
        spent_before=spent,
        epsilon=float(exact_sum(c.epsilon for c in charges)),
        delta=float(exact_sum(c.delta for c in charges)),
        ledger=ledger,
        input_rows=job.rows.counted,
        job=job,
        releases=MappingProxyType(releases),
        budget_rho=terms.rho,
        rho=None if cost is None else cost.rho,
        neighbours=spec.privacy.neighbours,
        composed_after=composed_after,
        composed_fits=composed_fits,
        allocation=allocation,
    )


def _allocation(
    spec: Spec,
    table: list[dict[str, Any]],
    spent: float,
    terms: Accountant,
    cost: Any,
    charges: list[Any],
    context: Context,
) -> Allocation | None:
    """The allocation of a spec with error95 targets (``None`` without), refused before
    any charge when the ledger's remaining budget cannot meet them; each target's error95
    is checked equal to the plan's own row (the error found is the error printed)."""
    wanted = targets.recorded(spec)
    if not wanted or spec.accuracy is None:
        return None
    if terms.rho is not None:
        amount, budget = float(cost.rho if cost is not None else 0.0), float(terms.rho)
    else:
        amount = float(exact_sum(c.epsilon for c in charges))
        budget = float(terms.epsilon or 0.0)
    others = amount - targets.spent_on_targets(spec, wanted)
    try:
        a = targets.check_room(spec, wanted, budget - spent - others, context)
        # the budgets are the ones the targets give (on this input, at its row count)
        targets.check_budgets(spec, wanted, a)
    except InvalidParameterError as exc:
        raise SpecError(str(exc)) from None
    printed = {targets.target_key(row["release"], row["statistic"]): row for row in table}
    for key, error in a.errors.items():
        row = printed.get(key)
        if row is not None and not a.assumptions.get(key) and row["error95"] != error:
            raise SpecError(  # pragma: no cover - the curve plans the statistic itself
                f"{key}: the plan's error95 {row['error95']!r} is not the allocation's "
                f"{error!r}; please report this"
            )
    return a
