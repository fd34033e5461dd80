"""``run`` and ``check``: run a spec's releases, validate them, publish them.

One job loop for every release kind (:mod:`dpframe.jobs.kinds`) and both engines
(``engine="polars"`` or ``"spark"``), in the order of the one path
(``docs/architecture.md``):

1. **plan** -- the plan it is given (``run(spec, plan=...)``, as ``dpframe release``
   does), else the spec planned once (:func:`dpframe.jobs.planning.plan`: the spec
   resolved into a :class:`~dpframe.jobs.planning.Job`, each release built once, the
   input's rows counted at most once); refuse (spending and writing nothing) a plan of
   another spec or already run, an input whose files changed since it was planned, a
   spec that would overspend the ledger, and ask whether the checks can run at all;
2. **check** -- open the ledger (refused, charging nothing, unless it holds everything the
   runs published in the output folder were charged: their manifests' anchors and
   entries; never created where runs were published) and a staging folder, and prepare
   every release of the plan:
   the engine computes the exact inputs and each release checks them (a size the plan
   counted is checked against the data). Bad data in *any* release is found here, before
   anything is charged;
3. **reserve** -- the whole spec's cost, in one ledger transaction
   (:meth:`Accountant.reserve`): refused, spending nothing, if it does not fit beside
   what other running jobs hold;
4. **charge, draw and record**, release by release -- the executor
   (:func:`dpframe.core.executor.execute`) turns the release's part of the reservation
   into ledger entries, then draws its noise; released tables are written to the staging
   folder with their ledger entries and the resolved spec in the Parquet metadata,
   PRAM'd microdata randomized and written by the engine. If the job fails, what it had
   not yet drawn is given back;
5. **check the output** -- every release's suite, declared by its kind from its spec entry
   and the facts its file records (as a later ``dpframe check`` builds it), validated with
   Great Expectations (:mod:`dpframe.jobs.checks`) in the checker process the job started
   when it started, which imported Great Expectations meanwhile
   (:mod:`dpframe.jobs.checker`; in the job's own process if it cannot start);
6. **report** -- ``report.html`` (:mod:`dpframe.jobs.report`): the run, each release's
   plan rows and checks, and a DR-HA curve when ``risk=`` is given; one self-contained
   page that opens offline. It is written into the staging folder, so it is published
   with the run (and kept under ``.failed-<run>/`` if a check failed);
7. **publish** -- the whole run at once (:mod:`dpframe.jobs.publish`): the staging folder
   becomes ``.runs/<run>/`` with a ``manifest.json``, and the output folder's ``current``
   link is switched to it atomically; every top-level name links through ``current``. If
   an expectation fails, nothing is published: the staged files stay under
   ``.failed-<run>/`` and :class:`CheckFailedError` is raised. If anything else fails, the
   staging folder is removed. Budget charged for noise already drawn stays spent; the
   rest of the reservation is given back. Each run first repairs what killed runs left
   (:func:`~dpframe.jobs.publish.repair`).

SIGINT (Ctrl-C) and SIGTERM are handled alike for the whole job (in the main thread;
:mod:`dpframe.core.interrupts`): the job stops, gives back what its reservation had not
drawn (what was drawn stays spent), removes its staging folder and raises
:class:`~dpframe.errors.ReleaseInterrupted`, whose message says what the job spent (per
release, in all, and what the ledger has left) and what it published. A ledger write or
the publish itself (steps 1 to 5 of :mod:`dpframe.jobs.publish`) is never cut: an
interrupt arriving inside takes effect when it is done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.accountant import RESERVATION_KEY, Accountant, LedgerEntry, ledger_exists
from dpframe.core.advice import spec_entry
from dpframe.core.budget import exact_sum
from dpframe.core.interrupts import deferred, handling, ledger_line
from dpframe.core.outputs import Read
from dpframe.engines import engine_for
from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    InvalidDataError,
    InvalidParameterError,
    LedgerIntegrityError,
    ReleaseInterrupted,
)
from dpframe.jobs.checker import start_checker, validate
from dpframe.jobs.checks import ensure_checks_available, save_check
from dpframe.jobs.kinds import release_class
from dpframe.jobs.planning import Job, JobPlan, margins_for, plan
from dpframe.jobs.progress import JobProgress
from dpframe.jobs.publish import (
    OWNER,
    check_output_folder,
    current_run,
    ledger_problems,
    new_staging,
    publish,
    published_run,
    published_runs,
    record_entry,
    refresh_copy,
    repair,
    run_folder,
    unchecked_tables,
)
from dpframe.jobs.report import (
    REPORT,
    REPORT_DATA,
    RunInfo,
    check_risk,
    now,
    read_report_data,
    redacted_ledger,
    write_report,
)
from dpframe.jobs.spec import Spec, SpecError, parse_spec
from dpframe.polars.expectations import Suite
from dpframe.polars.io import frame_reads, read_provenance, write_parquet

__all__ = ["CheckFailedError", "JobResult", "check", "check_folder", "run"]


class CheckFailedError(DPFrameError):
    """A released table failed its expectation suite; nothing was published."""


@dataclass
class JobResult:
    """What a run produced."""

    plan: JobPlan
    outputs: dict[str, Path] = field(default_factory=dict)
    entries: list[LedgerEntry] = field(default_factory=list)
    checks: list[Any] = field(default_factory=list)
    folder: Path | None = None
    #: the run's id: published as ``folder/.runs/<run>``, named by ``folder/current``
    run: str | None = None
    #: each release object, drawn (for post-processing, e.g. a grouped release's
    #: ``accuracy()``)
    releases: dict[str, Any] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        return float(exact_sum(e.epsilon for e in self.entries))

    @property
    def delta(self) -> float:
        return float(exact_sum(e.delta for e in self.entries))

    @property
    def report(self) -> Path | None:
        """The run's ``report.html`` (through the output folder's top-level link)."""
        return None if self.folder is None else self.folder / REPORT


@dataclass
class _Spending:
    """What a running job has reserved, drawn and published: what it says if it stops."""

    accountant: Accountant | None = None
    #: the id of the job's reservation, once held
    reservation: str | None = None
    #: each drawn release's ledger entries, in the order drawn
    drawn: dict[str, tuple[LedgerEntry, ...]] = field(default_factory=dict)
    #: the release being drawn (its entries may be in the ledger before they are here)
    drawing: str | None = None
    out: Path | None = None
    run: str | None = None
    #: the engine running the job (told to stop its work if the job is interrupted)
    engine: Any = None

    def charged(self) -> tuple[LedgerEntry, ...]:
        """The job's ledger entries: read from the ledger (every entry drawn from the
        job's reservation, even one whose write was cut from its caller), else those the
        job was given back."""
        known = tuple(e for entries in self.drawn.values() for e in entries)
        if self.accountant is None or self.reservation is None:
            return known
        try:
            return tuple(
                e
                for e in self.accountant.ledger
                if e.details.get(RESERVATION_KEY) == self.reservation
            )
        except Exception:  # the ledger cannot be read now: what the job knows
            return known

    def current(self) -> str | None:
        """The run ``out/current`` names now (None: none, or it cannot be read)."""
        if self.out is None:
            return None
        try:
            return current_run(self.out)
        except Exception:
            return None

    def still_held(self) -> bool:
        """Whether the job's reservation is still open (its give-back failed)."""
        if self.accountant is None or self.reservation is None:
            return False
        try:
            return any(r.id == self.reservation for r in self.accountant.reservations)
        except Exception:  # cannot be read: not claimed given back
            return True

    def interrupted(self, exc: BaseException) -> ReleaseInterrupted:
        """The error that says what the job spent and published when ``exc`` stopped it."""
        signum = exc.signum if isinstance(exc, ReleaseInterrupted) else signal.SIGINT
        name = ReleaseInterrupted(signum=signum).signal_name
        charged = self.charged()
        current = self.current()
        published = self.run if self.run is not None and current == self.run else None
        if self.still_held():  # the interrupt came as the block ended, before its give-back
            with contextlib.suppress(Exception):  # (later signals are ignored now)
                self.accountant.cancel(self.reservation, force=True)  # type: ignore[union-attr]
        if self.still_held():
            back = (
                f"its reservation {self.reservation} could not be given back: `dpframe ledger "
                "cancel` gives it back (or the next job on this host, once this one has ended)"
            )
        else:
            back = "what it had reserved and not drawn was given back"
        if not charged:
            spent = "nothing spent: this job charged no budget" + (
                f" ({back})" if self.reservation else ""
            )
        else:
            ids = {e.id: n for n, entries in self.drawn.items() for e in entries}
            per: dict[str, list[LedgerEntry]] = {}
            for e in charged:
                per.setdefault(ids.get(e.id, self.drawing or "?"), []).append(e)
            each = ", ".join(
                f"{n} {float(exact_sum(e.epsilon for e in es)):g}" for n, es in per.items()
            )
            delta = float(exact_sum(e.delta for e in charged))
            spent = (
                f"this job spent epsilon {float(exact_sum(e.epsilon for e in charged)):g}"
                + (f" and delta {delta:g}" if delta else "")
                + f" ({each}), which stays spent"
                + (f"; {back}" if self.reservation else "")
            )
        if published is not None:
            shown = f"its run {published} was published in {self.out} before the interrupt"
        elif self.out is None:
            shown = "nothing was published"
        else:
            shows = f"run {current}" if current else "no run"
            shown = f"nothing was published ({self.out} shows {shows})"
        message = f"the release job was interrupted by {name}: {spent}; {shown}."
        if self.accountant is not None:
            message += " " + ledger_line(self.accountant)
        return ReleaseInterrupted(message, signum=signum, charged=charged, published=published)


def _suite(r: Any, facts: dict[str, Any], table: Any) -> Suite:
    """The suite of spec entry ``r``'s released ``table``: its kind's own, from the entry
    (as its file's provenance records it) and the facts its file records."""
    return release_class(r).suite(r.model_dump(), facts, table)


def _stage(
    spec: Spec,
    r: Any,
    rel: Any,
    finished: Any,
    entries: tuple[LedgerEntry, ...],
    staging: Path,
    eng: Any,
    ctx: Any,
) -> tuple[Any, Any, dict[str, Any]]:
    """Write one drawn release into ``staging`` with the facts it declares; its table and
    the facts its check reads (as a later check of the published file reads them)."""
    path = staging / f"{r.name}.parquet"
    facts = rel.facts()
    if release_class(r).rowwise:
        target = eng.output_target(path)
        rel.write_armed(finished, target, spec=spec.to_dict(), facts=facts)
        table = eng.written_frame(path)
        facts = {**facts, "value_counts": eng.written_counts(path, rel.columns)}
    else:
        table = finished
        write_parquet(
            table,
            path,
            ledger=list(entries),
            spec=spec.to_dict(),
            neighbours=spec.privacy.neighbours,
            facts=facts or None,
        )
    return r, table, type(rel).read_facts(facts, entries)


def _drawn_plan(the_plan: JobPlan, releases: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The plan's rows for the report, each statistic a first pass parametrised (e.g.
    bounds found privately) with its scale, error and note as drawn."""
    rows = the_plan.rows.to_dicts()
    drawn = {
        (name, row["statistic"]): row for name, rel in releases.items() for row in rel.drawn_rows()
    }
    shown = ("sensitivity", "scale", "error95", "note")
    for row in rows:
        now = drawn.get((row["release"], row["statistic"]))
        if now is not None:
            row.update({k: now[k] for k in shown if k in now})
    return rows


def _open_ledger(job: Job) -> Accountant:
    """The job's ledger, checked to hold everything the runs published in ``out`` were
    charged (:func:`~dpframe.jobs.publish.ledger_problems`), before anything is reserved.

    Raises
    ------
    LedgerIntegrityError
        If ``out`` holds published runs and the ledger does not exist (it is not created
        afresh), or the ledger is not the one they were charged to, or lacks any of their
        entries (deleted, swapped, truncated, or put back from an older copy).
    """
    spec, out, target = job.spec, job.output, job.ledger
    runs = published_runs(out)
    where = redacted_ledger(target)
    if runs and not ledger_exists(target):
        raise LedgerIntegrityError(
            f"ledger {where} does not exist, but {out} holds {len(runs)} published run(s) "
            f"charged to a ledger (run {runs[-1].run}, published "
            f"{runs[-1].manifest.get('published', '?')}): it was deleted or moved, and a new "
            "ledger is not created where runs were published (it would forget what they "
            "spent). Put the ledger back (or restore it from a backup holding every entry the "
            "runs record); to start a new budget, publish into a new output.folder. Nothing "
            "was charged."
        )
    acct: Accountant = spec.privacy.open_ledger(target)
    problems = ledger_problems(runs, acct)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise LedgerIntegrityError(
            f"ledger {where} does not hold what was published in {out}:\n{lines}\n"
            "Nothing was charged. Restore the ledger from a backup that holds every entry "
            f"(`dpframe ledger verify LEDGER --against {out}` lists what is missing); to "
            "start a new budget, publish into a new output.folder."
        )
    return acct


def _check_outputs(job: Job, run_id: str, data_docs: bool) -> None:
    """The output guard for a run (:func:`~dpframe.jobs.publish.check_output_folder`):
    nothing it writes may replace what it reads (the input, as scanned and as the spec
    names it, glob or folder; the margins files), its ledger, or a name dpframe did not
    create."""
    spec, out = job.spec, job.output
    reads = frame_reads(job.frame, "the input")
    if spec.frame is None and spec.input.path is not None:
        reads.append(Read(os.fspath(spec.resolve(spec.input.path)), "input.path"))
    for name, m in spec.margins.items():
        if m.path is not None:
            reads.append(Read(os.fspath(spec.resolve(m.path)), f"margins.{name}.path"))
    ledger = job.ledger
    names = [p.name for paths in spec.outputs().values() for p in paths]
    names += [REPORT, REPORT_DATA, *(["data_docs"] if data_docs else [])]
    check_output_folder(
        out,
        names,
        run=run_id,
        reads=reads,
        ledgers=[ledger] if isinstance(ledger, Path) else [],
    )


@spec_entry
def run(
    spec: Spec,
    *,
    plan: JobPlan | None = None,
    engine: str | None = None,
    spark: Any = None,
    progress: bool = True,
    data_docs: bool = False,
    risk: pl.DataFrame | None = None,
    risk_title: str | None = None,
) -> JobResult:
    """Run every release of ``spec``: check, charge (once), sanitize, write, check, publish.

    Parameters
    ----------
    spec : Spec
    plan : JobPlan, optional
        The plan to run: ``dpframe.jobs.plan(spec)``, made from this very spec (its
        releases are then not planned or built again; the ``dpframe release`` command
        shows the plan, then runs it). Default: ``run`` plans the spec itself, once.
        A plan runs once, on the engine it was made for.
    engine : {"polars", "spark"}, optional
        Where the records are read: ``"spark"`` reads ``input.path`` with Spark (or takes
        the spec's Spark DataFrame); the release itself runs on the driver either way.
        Default: the engine of the spec's frame, else ``"polars"``. With ``plan=``, give
        the engine to :func:`~dpframe.jobs.plan` instead.
    spark : pyspark.sql.SparkSession, optional
        Default :func:`dpframe.engines.spark.local_session`.
    progress, data_docs : bool
        A progress bar; Great Expectations Data Docs of the checks (their pages load
        styles and scripts from public CDNs; ``report.html`` is the offline report).
    risk : polars.DataFrame, optional
        A DR-HA table on an epsilon grid (``dpframe.risk.drha``), drawn in the run's
        ``report.html`` as an assessment (it spends no budget); ``risk_title`` heads it.

    Raises
    ------
    BudgetExceededError
        If the plan overspends the ledger (nothing is spent or written).
    InvalidDataError, SpecError
        Bad data or spec, found before anything is charged; the input no longer has the
        rows the plan counted; a ``plan`` of another spec, already run, or given with
        ``engine=``/``spark=``.
    CheckFailedError
        If a released table fails its expectations (nothing is published; the staged
        outputs stay under ``<output>/.failed-<run>/``).
    ReleaseInterrupted
        On SIGINT (Ctrl-C) or SIGTERM, handled alike while the job runs (in the main
        thread), or a ``KeyboardInterrupt``: every reservation not drawn was given back,
        what was drawn stays spent, nothing half-published; the message says what the
        job spent (per release, in all, what the ledger has left) and what it published.
    """
    spending = _Spending()
    with handling():
        try:
            check_risk(risk)  # before anything is spent
            the_plan = _plan_to_run(spec, plan, engine, spark)
            return _run(the_plan, spending, progress, data_docs, risk, risk_title)
        except KeyboardInterrupt as exc:
            if spending.engine is not None:
                spending.engine.cancel_work()  # Spark: its running jobs stop writing
            raise spending.interrupted(exc) from exc


def _plan_to_run(spec: Spec, given: JobPlan | None, engine: str | None, spark: Any) -> JobPlan:
    """The plan ``run`` runs: ``given`` (refused unless it is this spec's, unrun), else
    the spec planned now."""
    if given is None:
        return plan(spec, engine=engine, spark=spark)
    if not isinstance(given, JobPlan):
        raise InvalidParameterError(
            f"plan must be a dpframe.jobs.JobPlan (from dpframe.jobs.plan), got "
            f"{type(given).__name__}"
        )
    if given.job.spec is not spec:  # its ledger, output and releases are another spec's
        raise SpecError(
            "plan was made from another spec: run a plan with the spec it was made from "
            "(dpframe.jobs.run(spec, plan=dpframe.jobs.plan(spec))); nothing was charged"
        )
    if given.job.spec_changed():  # its lists changed in place: not what was planned
        raise SpecError(
            "plan: the spec changed since it was planned (a release, a statistic or a "
            "setting edited in place): plan the spec again; nothing was charged"
        )
    if engine is not None or spark is not None:
        raise SpecError(
            "plan= runs on the engine it was planned for: give engine= and spark= to "
            "dpframe.jobs.plan instead; nothing was charged"
        )
    drawn = [name for name, rel in given.releases.items() if rel.materialised or rel.ledger]
    if drawn:
        raise SpecError(
            f"plan: its release(s) {drawn} were drawn already (a plan runs once; a new "
            "run is new releases): plan the spec again; nothing was charged"
        )
    return given


def _same_input(job: Job) -> None:
    """Refuse, before any charge, an input whose files changed since the job was planned:
    what was planned from them (the row count, the schema) would not be the data's."""
    changed = job.changed_input()
    if changed is not None:
        raise InvalidDataError(
            f"the input changed since the job was planned ({changed} was rewritten, added "
            "or removed): plan and run again on data that does not change meanwhile "
            "(nothing was charged)"
        )


def _same_rows(job: Job, releases: Mapping[str, Any]) -> None:
    """Refuse, before any charge, a row-wise release that counted another number of input
    rows than the job's count it records (the input changed since it was counted)."""
    for r in job.spec.release:
        if not release_class(r).rowwise:
            continue
        seen, counted = releases[r.name].input_rows, job.rows()
        if seen != counted:
            raise InvalidDataError(
                f"release {r.name!r}: the input has {seen} rows, but had {counted} when the "
                "job counted them (it changed meanwhile); plan and run again on data that "
                "does not change (nothing was charged)"
            )


def _run(
    the_plan: JobPlan,
    spending: _Spending,
    progress: bool,
    data_docs: bool,
    risk: pl.DataFrame | None,
    risk_title: str | None,
) -> JobResult:
    """:func:`run` of ``the_plan``, telling ``spending`` what it reserves, draws and
    publishes."""
    job = the_plan.job
    spec, releases, ctx = job.spec, the_plan.releases, job.context()
    _same_input(job)
    if not the_plan.fits:
        raise BudgetExceededError(
            f"the spec overspends its budget: {the_plan.summary()}. Nothing was charged "
            "and nothing was written."
        )
    ensure_checks_available()  # GE itself (240 MB) is imported only when the checks run:
    start_checker()  # by the checker process, meanwhile (dpframe.jobs.checker)
    out = job.output
    run_id = uuid.uuid4().hex[:12]
    _check_outputs(job, run_id, data_docs)  # before anything is written
    out.mkdir(parents=True, exist_ok=True)
    repair(out)  # what killed jobs left; refuses an out/current that is not ours
    spending.out, spending.run = out, run_id
    staging = out / f".staging-{run_id}"
    result = JobResult(the_plan, folder=out, run=run_id)
    try:
        with deferred():  # made whole (and removed below) even if interrupted
            staging = new_staging(out, run_id)
        acct = spending.accountant = _open_ledger(job)
        eng = spending.engine = job.engine
        names = [r.name for r in spec.release]
        rowwise = {r.name for r in spec.release if release_class(r).rowwise}
        # per release: read and check, draw, write, check; then reserve, report, publish
        bar = JobProgress(progress, total=4 * len(names) + 3)
        with bar:
            steps = []
            for r in spec.release:  # 2. every data problem, before any charge
                with bar.step(f"reading and checking {r.name}"):
                    steps.append(releases[r.name].prepare())
            _same_input(job)  # as the releases read it
            _same_rows(job, releases)
            # 3. the whole plan reserved at once (refused, spending nothing, if it does not
            # fit beside other jobs); each release then draws from it, and whatever was not
            # drawn when the job ends -- by success or failure -- is given back
            # (what every release charges: its first passes' too, drawn after they are)
            charges = [c for r in spec.release for p in releases[r.name].plans() for c in p.charges]
            staged = []
            with contextlib.ExitStack() as held:
                with bar.step("reserving the plan's budget"):
                    reservation = acct.reserve(charges, note=f"job {run_id}")
                    spending.reservation = held.enter_context(reservation).id
                for r, group in zip(spec.release, steps, strict=True):
                    with bar.step(f"drawing {r.name}"):
                        spending.drawing = r.name
                        rel = releases[r.name]
                        execution = rel.draw(group, acct, note=f"job {run_id}")
                        spending.drawn[r.name] = execution.entries
                        spending.drawing = None
                    entries = execution.entries
                    result.entries.extend(entries)
                    finished = rel.finish(execution.outputs, entries)
                    result.releases[r.name] = rel
                    rows = ctx.rows() if r.name in rowwise and eng.streams_rows else None
                    with bar.step(f"writing {r.name}", rows=rows):
                        staged.append(_stage(spec, r, rel, finished, entries, staging, eng, ctx))
                    result.outputs[r.name] = out / f"{r.name}.parquet"
            # 5. the checks
            result.checks = []
            for r, table, facts in staged:
                with bar.step(f"checking {r.name} against its expectations"):
                    res = validate(_suite(r, facts, table))
                    save_check(res, staging, data_docs=data_docs)
                result.checks.append(res)
            # 6. the report, staged with the run (kept with the staged files if a check failed)
            info = RunInfo(
                run=run_id,
                time=now(),
                spec=str(spec.base) if spec.base is not None else "(given in Python)",
                output=str(out),
                ledger=acct.location,
                epsilon=result.epsilon,
                delta=result.delta,
                plan=_drawn_plan(the_plan, releases),
                risk_title=risk_title,
                accuracy=the_plan.accuracy_rows(),
            )
            with bar.step("writing the report"):
                write_report(staging, info, result.checks, risk)
            failed = [c for c in result.checks if not c.success]
            if failed:
                kept = out / f".failed-{run_id}"
                os.replace(staging, kept)
                (kept / OWNER).unlink(missing_ok=True)
                report = "\n".join(c.report() for c in failed)
                raise CheckFailedError(
                    f"{len(failed)} release(s) failed their expectations; nothing was published "
                    f"(staged outputs kept in {kept}):\n{report}"
                )
            # 7. the whole run at once (dpframe.jobs.publish)
            files = {r.name: f"{r.name}.parquet" for r in spec.release}
            with bar.step("publishing the run"):
                publish(
                    staging,
                    out,
                    run=run_id,
                    releases=files,
                    entries=result.entries,
                    anchor=acct.anchor(),
                )
    except BaseException as exc:  # nothing published; a failed check moved staging aside
        shutil.rmtree(staging, ignore_errors=True)
        exc.charged = spending.charged()  # type: ignore[attr-defined]  # this job's spend
        raise
    return result


#: the facts a published file may record for its checks (every kind's ``facts()``)
FILE_FACTS = ("input_rows", "margins", "sizes")


def _check_file(
    r: Any,
    path: Path,
    given: dict[str, Any],
    input_engine: Any,
    ledger: Mapping[str, LedgerEntry] | None = None,
) -> Any:
    """Check one published file of release ``r`` with what its provenance recorded (and
    the public ``given`` facts, which take precedence): never its input, unless the file
    records no input row count its kind needs (a file of an older dpframe). With
    ``ledger`` (the spec's ledger's entries by id), each entry the file records must be
    the ledger's own: the categories a check reads from them are then the release's."""
    try:
        prov = read_provenance(path)
        recorded, entries = prov.facts, prov.entries
    except InvalidParameterError:  # no provenance: checked against the spec alone
        recorded, entries = {}, ()
    if ledger is not None:
        for e in entries:
            held = ledger.get(e.id)
            if held is None or held.to_dict() != e.to_dict():
                raise LedgerIntegrityError(
                    f"release {r.name!r}: {path} records ledger entry {e.id!r}, which the "
                    "ledger does not hold as recorded: the file's provenance was edited; "
                    "nothing was checked"
                )
    cls = release_class(r)
    # a file records only the facts a release declares (its facts(): margins, sizes, the
    # input's rows); what a caller or an engine gives a check (keep, value_counts) is
    # never read from a file: a doctored one would pass a column it never randomized
    recorded = {k: v for k, v in recorded.items() if k in FILE_FACTS}
    # the facts recorded and what its ledger entries record (their details are
    # hash-verified), not today's input or the file's own dtypes
    facts = cls.read_facts({**recorded, **given}, entries)
    if "input_rows" in cls.required_facts and facts.get("input_rows") is None:
        facts["input_rows"] = input_engine().rows()
    if cls.rowwise:
        table: Any = pl.scan_parquet(path / "*.parquet" if path.is_dir() else path)
    else:
        table = pl.read_parquet(path)
    return validate(_suite(r, facts, table))


@spec_entry
def check_folder(folder: str | os.PathLike[str], *, data_docs: bool = False) -> list[Any]:
    """Validate a published output folder on its own: no spec file, no input.

    Every release of the current run is checked against the suite of the spec its own
    provenance records, with the public facts it recorded (the margins of a grouped
    table, the input's row count, the categories in its verified ledger entries).
    """
    out = Path(folder).absolute()
    run_dir = run_folder(out)
    published = published_run(run_dir)
    _refuse_unchecked(out, run_dir)
    results = []
    spec = None
    for name, file in sorted(published.releases.items()):
        path = run_dir / file
        prov = read_provenance(path)
        if prov.spec is None:
            raise DPFrameError(f"release {name!r}: {path} records no spec; check it with its spec")
        spec = parse_spec(prov.spec, source=f"the provenance of {path}")
        r = next((x for x in spec.release if x.name == name), None)
        if r is None:
            raise DPFrameError(f"release {name!r}: the spec in {path}'s provenance lacks it")
        if "margins" in release_class(r).required_facts and not isinstance(
            prov.facts.get("margins"), dict
        ):
            raise DPFrameError(
                f"release {name!r}: {path} records no margins (published by an older "
                "dpframe); check it with its spec: dpframe check release.toml"
            )

        def no_input(name: str = name) -> Any:
            raise DPFrameError(f"release {name!r}: its file records no input row count")

        results.append(_check_file(r, path, {}, no_input))
    if not run_dir.is_dir():
        raise DPFrameError(
            f"the run checked ({run_dir}) was removed by newer publishes meanwhile; check again"
        )
    for res in results:
        save_check(res, run_dir, data_docs=data_docs)
    if spec is not None and read_report_data(run_dir) is not None:
        _rewrite_report(spec, out, run_dir, results)
    refresh_copy(out, run_dir)  # a dereferenced copy: its top-level copies read the same
    return results


def _refuse_unchecked(out: Path, folder: Path) -> None:
    """Refuse to check a run (or a copy of it) holding a table the check would not read
    (:func:`~dpframe.jobs.publish.unchecked_tables`): it would pass unread."""
    problems = unchecked_tables(out, folder)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise DPFrameError(
            f"{out} holds tables that are not its published run's releases, so checking the "
            f"run would not vouch for them:\n{lines}\nNothing was checked; copy the output "
            "folder again from where it was published."
        )


@spec_entry
def check(spec: Spec, *, data_docs: bool = False) -> list[Any]:
    """Validate the published outputs of ``spec`` again (the ``dpframe check`` command).

    Resolves the output folder's ``current`` run once (so every file checked is of one
    run, whatever is published meanwhile), reads each release's Parquet file from it,
    rebuilds its suite from the spec, validates, and saves the suite and the result into
    that run's folder (the top-level names link to them). The run's ``report.html`` is
    rendered again with the new results (from the facts its ``report.json`` kept: the
    plan rows and the risk curve of the run, not of the spec as it is now).
    """
    out = spec.resolve(spec.output.folder).absolute()
    folder = run_folder(out)  # resolved once
    _refuse_unchecked(out, folder)
    ledger = _ledger_entries(spec)
    results = []
    for r in spec.release:
        path = folder / f"{r.name}.parquet"
        if not path.exists():
            raise DPFrameError(
                f"release {r.name!r}: {out / path.name} does not exist (run release first)"
            )
        given = _spec_facts(spec, r, path)
        input_engine = lambda: engine_for(spec.lazy_input())  # noqa: E731
        results.append(_check_file(r, path, given, input_engine, ledger))
    if not folder.is_dir():
        raise DPFrameError(
            f"the run checked ({folder}) was removed by newer publishes meanwhile; run check again"
        )
    for res in results:
        save_check(res, folder, data_docs=data_docs)
    _rewrite_report(spec, out, folder, results)
    refresh_copy(out, folder)  # a dereferenced copy: its top-level copies read the same
    if folder != out:
        if data_docs:
            record_entry(out, folder, "data_docs")
        for name in (REPORT_DATA, REPORT):
            record_entry(out, folder, name)
    return results


def _ledger_entries(spec: Spec) -> dict[str, LedgerEntry]:
    """The entries of the spec's ledger by id: what its published files' provenance is
    checked against (a file's entries are plain hashes anyone can recompute)."""
    target = spec.ledger_target()
    if not ledger_exists(target):
        raise LedgerIntegrityError(
            f"ledger {redacted_ledger(target)} does not exist: the published files' ledger "
            "entries (the categories their checks read) cannot be checked against it. Put "
            "the ledger back; nothing was checked."
        )
    return {e.id: e for e in spec.privacy.open_ledger(target).ledger}


def _spec_facts(spec: Spec, r: Any, path: Path) -> dict[str, Any]:
    """The public facts the spec itself gives release ``r``'s checks: the margins it
    names (its keys cast to the dtypes they were released in) and their sizes column."""
    named = getattr(r, "margins", None)
    if named is None or getattr(r, "private_keys", None) is not None:
        return {}  # keys selected privately: those its file records (its released keys)
    margins = margins_for(spec, r, pl.read_parquet_schema(path))
    return {"margins": margins, "sizes": spec.margins[named].sizes}


def _rewrite_report(spec: Spec, out: Path, folder: Path, results: list[Any]) -> None:
    """The run's report again, with the new check results."""
    info = read_report_data(folder)
    if info is None:  # a run published before reports: its facts from the manifest
        try:
            manifest = published_run(folder).manifest
        except DPFrameError:  # an older dpframe's layout: no manifest
            manifest = {}
        ledger = manifest.get("ledger") or {}
        info = RunInfo(
            run=str(manifest.get("run", folder.name)),
            time=str(manifest.get("published", "unknown")),
            spec=str(spec.base) if spec.base is not None else "(given in Python)",
            output=str(out),
            ledger=redacted_ledger(spec.ledger_target()),
            epsilon=ledger.get("epsilon"),
            delta=ledger.get("delta"),
            plan=plan(spec).rows.to_dicts(),
        )
    write_report(folder, dataclasses.replace(info, checked=now()), results)
