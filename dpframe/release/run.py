"""``release`` and ``check``: run a spec's releases, validate them, publish them.

Nothing is published unless every check passes; publishing replaces each file atomically.

``release(spec)``:

1. plans the spec and refuses (spending nothing) if it would overspend the ledger;
2. opens the persistent ledger and runs every release, each charged before its noise
   (grouped statistics streamed from the input, PRAM'd microdata streamed Parquet to
   Parquet), writing each released table to a *staging* folder inside the output folder,
   with its ledger entries and the resolved spec in the Parquet metadata;
3. builds the Great Expectations suite of every release *from the spec* and validates the
   released tables (:mod:`dpframe.release.checks`);
4. publishes: moves the staged files (tables, suites, validation results) into the output
   folder. If an expectation fails, nothing is published: the staged files stay under
   ``.failed-<run>/`` for inspection and :class:`CheckFailedError` is raised. If anything
   else fails, the staging folder is removed. Either way, budget charged for releases that
   had already drawn noise stays spent (their noise exists); nothing else is charged.

Post-processing applied before the checks (it costs no privacy): released counts, and
sums of values with a lower bound >= 0, are clamped at 0 (``nonnegative = true``, the
default); a grouped covariance is clamped into ``±sqrt(var_x var_y)`` of its released
variances.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant, LedgerEntry
from dpframe.errors import BudgetExceededError, DPFrameError
from dpframe.release.plan import Plan, input_rows, plan
from dpframe.release.spec import (
    CovarianceSpec,
    GroupedSpec,
    PramSpec,
    ProportionsSpec,
    Spec,
)

__all__ = [
    "CheckFailedError",
    "Job",
    "ReleaseResult",
    "check",
    "check_job",
    "preflight",
    "publish_job",
    "release",
    "start_job",
]


class CheckFailedError(DPFrameError):
    """A released table failed its expectation suite; nothing was published."""


@dataclass
class ReleaseResult:
    """What a release run produced."""

    plan: Plan
    outputs: dict[str, Path] = field(default_factory=dict)
    entries: list[LedgerEntry] = field(default_factory=list)
    checks: list[Any] = field(default_factory=list)
    folder: Path | None = None

    @property
    def epsilon(self) -> float:
        return float(sum(e.epsilon for e in self.entries))


# ---------------------------------------------------------------------------
# one release each
# ---------------------------------------------------------------------------


def margins_for(spec: Spec, r: GroupedSpec, lf: pl.LazyFrame) -> pl.DataFrame:
    """The public key frame of ``r``, its key columns cast to the input's dtypes."""
    from dpframe.release.spec import SpecError

    margins = spec.margins_frame(r.margins)
    schema = lf.collect_schema()
    casts = []
    for key in r.by:
        if key not in margins.columns:
            raise SpecError(f"release {r.name!r}: margins {r.margins!r} has no column {key!r}")
        if key not in schema:
            raise SpecError(f"release {r.name!r}: the input has no column {key!r}")
        if margins.schema[key] != schema[key]:
            casts.append(pl.col(key).cast(schema[key], strict=False))
    if not casts:
        return margins
    cast = margins.with_columns(casts)
    for key in r.by:
        bad = margins.filter(cast[key].is_null() & margins[key].is_not_null())[key]
        if bad.len():
            raise SpecError(
                f"release {r.name!r}: margins {r.margins!r} key {key!r} has values that do not "
                f"fit the input's dtype {schema[key]}: {bad.unique().to_list()[:5]}"
            )
    return cast


def _postprocess_grouped(r: GroupedSpec, frame: pl.DataFrame) -> pl.DataFrame:
    from dpframe.release.build import statistic

    exprs = []
    for s in r.statistics:
        stat = statistic(s)
        sign_known = s.stat == "count" or (s.stat == "sum" and (s.lower or 0) >= 0)
        if r.nonnegative and sign_known:
            exprs.append(pl.col(stat.name).clip(lower_bound=0.0))
        elif s.stat == "cov":
            vx, vy, cv, _ = stat.outputs()
            bound = (pl.col(vx).clip(lower_bound=0.0) * pl.col(vy).clip(lower_bound=0.0)).sqrt()
            exprs.append(pl.col(cv).clip(-bound, bound))
    return frame.with_columns(exprs) if exprs else frame


def _grouped_release(spec: Spec, r: GroupedSpec, lf: pl.LazyFrame, acct: Accountant, seed: Any):
    import dpframe
    from dpframe.release.build import statistic

    margins = margins_for(spec, r, lf)
    return dpframe.group_by(
        lf, r.by, margins=margins, sizes=spec.margins[r.margins].sizes, accountant=acct, seed=seed
    ).agg(*[statistic(s) for s in r.statistics])


def _run_grouped(release: Any, r: GroupedSpec):
    frame = _postprocess_grouped(r, release.collect(engine="streaming"))
    return frame, list(release.ledger)


def _run_frame_release(
    spec: Spec,
    r: ProportionsSpec | CovarianceSpec,
    lf: pl.LazyFrame,
    acct: Accountant,
    seed: Any,
    n: int,
):
    import dpframe

    size = r.n if r.n is not None else n
    if isinstance(r, ProportionsSpec):
        rel = dpframe.proportions(
            lf,
            r.column,
            epsilon=r.epsilon,
            n=size,
            categories=r.categories,
            strategy=r.strategy,
            method=r.method,
            accountant=acct,
            seed=seed,
        )
    else:
        rel = dpframe.covariance_matrix(
            lf,
            r.columns,
            [tuple(b) for b in r.bounds],
            epsilon=r.epsilon,
            n=size,
            method=r.method,
            repair=r.repair,
            accountant=acct,
            seed=seed,
        )
    return rel.frame, list(rel.ledger)


def _pram_exprs(r: PramSpec, acct: Accountant, seed: Any = None) -> list[pl.Expr]:
    """The ``.dp.pram`` expressions of a PRAM release, one per column."""
    import dpframe  # noqa: F401  (registers .dp)

    return [
        pl.col(c.column).dp.pram(
            c.epsilon,
            categories=c.categories,
            prior=c.prior,
            diagonal=c.diagonal,
            accountant=acct,
            seed=seed,
        )
        for c in r.columns
    ]


def _run_pram(
    spec: Spec, r: PramSpec, lf: pl.LazyFrame, acct: Accountant, seed: Any, path: Path
) -> list[LedgerEntry]:
    import dpframe
    from dpframe.rowwise import _thread_last_run

    # the runner's preflight already made the dry pass over this data
    exprs = _pram_exprs(r, acct, seed)
    dpframe.sink_parquet(lf.select(exprs), path, spec=spec.to_dict(), validate=False)
    return list(_thread_last_run().entries)


def release_seed(seed: int | None, r: Any) -> Any:
    """The random source of one release of a seeded spec (``None``: secure, the default).

    Each release gets a source of its own, derived from the spec's seed and the release's
    name, so what one release draws does not depend on the others: a seeded spec gives
    the same noise for a release whichever engine runs it, even where the engines draw
    differently for another release (Spark's PRAM always draws from executor entropy).
    """
    if seed is None:
        return None
    import hashlib

    from dpframe.core.randomness import RandomSource

    digest = hashlib.sha256(f"dpframe-release/{seed}/{r.name}".encode()).digest()
    return RandomSource(int.from_bytes(digest[:8], "big"))


# ---------------------------------------------------------------------------
# preflight
# ---------------------------------------------------------------------------


def preflight(
    spec: Spec,
    lf: pl.LazyFrame | None = None,
    accountant: Accountant | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Check every release's data before any is charged.

    Each release validates its own data just before its charge; run one after the other,
    a bad value in a later release would surface after the earlier ones had spent their
    budget. So the runner first does, for every release, the work that can fail on the
    data: the grouped releases compute and check their exact aggregates (kept, so the
    release itself does not read the input again), PRAM makes its dry pass, and the
    proportions and covariance releases check their inputs against a throwaway
    accountant (what that draws is discarded unseen). Nothing is charged to
    ``accountant``. ``seed`` is the spec's (unsafe) seed, if any: see :func:`release_seed`.

    Returns
    -------
    dict
        The prepared grouped releases, by name (bound to ``accountant``).
    """
    import dpframe  # noqa: F401  (registers .dp)
    from dpframe.rowwise import _validate

    lf = spec.lazy_input() if lf is None else lf
    scratch = Accountant(epsilon=1e12, neighbours=spec.privacy.neighbours)
    prepared: dict[str, Any] = {}
    n = None
    for r in spec.release:
        if isinstance(r, GroupedSpec):
            rel = _grouped_release(spec, r, lf, accountant or scratch, release_seed(seed, r))
            rel.prepare(engine="streaming")
            prepared[r.name] = rel
        elif isinstance(r, PramSpec):
            _validate(lf.select(_pram_exprs(r, scratch)))
        else:
            n = input_rows(spec, lf) if n is None else n
            _run_frame_release(spec, r, lf, scratch, None, n)
    return prepared


# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------


def _progress(enabled: bool):
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.progress import Progress

    return Progress(transient=True)


@dataclass
class Job:
    """One release run's shared state: the plan, folders, ledger and random source.

    Both engines use it (:func:`release`, :func:`dpframe.engines.spark_release.release_spark`):
    :func:`start_job` refuses an overspending plan before anything is written,
    :meth:`write` stages a released table with its provenance, :func:`check_job` checks
    (keeping the outputs aside on a failure) and :func:`publish_job` publishes.
    """

    spec: Spec
    plan: Plan
    out: Path
    staging: Path
    run_id: str
    accountant: Accountant
    seed: int | None
    result: ReleaseResult
    staged: list[tuple[Any, Any, dict[str, Any]]] = field(default_factory=list)

    def path(self, r: Any) -> Path:
        return self.staging / f"{r.name}.parquet"

    def seed_for(self, r: Any) -> Any:
        """The random source of release ``r``: secure unless the spec is seeded."""
        return release_seed(self.seed, r)

    def write(self, r: Any, frame: pl.DataFrame, entries: list[LedgerEntry], **check: Any) -> None:
        """Stage a released table (Parquet with its ledger entries and the spec)."""
        from dpframe.io import write_parquet

        write_parquet(
            frame,
            self.path(r),
            ledger=entries,
            spec=self.spec.to_dict(),
            neighbours=self.spec.privacy.neighbours,
        )
        self.record(r, frame, entries, **check)

    def record(self, r: Any, table: Any, entries: list[LedgerEntry], **check: Any) -> None:
        """Note a staged output, what it charged, and what its check needs."""
        self.staged.append((r, table, check))
        self.result.entries.extend(entries)
        self.result.outputs[r.name] = self.out / self.path(r).name


def start_job(spec: Spec, lf: pl.LazyFrame | None = None, rows: int | None = None) -> Job:
    """Plan (refusing an overspend, nothing written), open the ledger and the staging folder.

    ``lf`` and ``rows`` stand in for the spec's input in the plan (see :func:`plan`).
    The checks run after the charges, so whether they can run is asked first
    (:func:`~dpframe.release.checks.ensure_checks_available`; Great Expectations itself,
    240 MB, is imported only when the checks run, after the streaming passes).
    """
    from dpframe.release.checks import ensure_checks_available

    the_plan = plan(spec, lf=lf, rows=rows)
    if not the_plan.fits:
        raise BudgetExceededError(
            f"the spec overspends its budget: {the_plan.summary()}. Nothing was charged "
            "and nothing was written."
        )
    ensure_checks_available()
    out = spec.resolve(spec.output.folder).absolute()
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    staging = out / f".staging-{run_id}"
    staging.mkdir()
    acct = Accountant.open(
        spec.resolve(spec.privacy.ledger),
        epsilon=spec.privacy.budget.epsilon,
        delta=spec.privacy.budget.delta,
        neighbours=spec.privacy.neighbours,
    )
    return Job(
        spec,
        the_plan,
        out,
        staging,
        run_id,
        acct,
        spec.privacy.seed,
        ReleaseResult(the_plan, folder=out),
    )


def check_job(job: Job, data_docs: bool) -> None:
    """Check every staged output; on a failure keep them aside (``.failed-<run>``) and raise."""
    job.result.checks = _check_staged(job.staged, job.staging, data_docs)
    failed = [c for c in job.result.checks if not c.success]
    if failed:
        kept = job.out / f".failed-{job.run_id}"
        os.replace(job.staging, kept)
        report = "\n".join(c.report() for c in failed)
        raise CheckFailedError(
            f"{len(failed)} release(s) failed their expectations; nothing was published "
            f"(staged outputs kept in {kept}):\n{report}"
        )


def publish_job(job: Job) -> ReleaseResult:
    """Move the checked outputs into the output folder (see :func:`_publish`)."""
    _publish(job.staging, job.out)
    return job.result


def release(spec: Spec, *, progress: bool = True, data_docs: bool = False) -> ReleaseResult:
    """Run every release of ``spec``: charge, sanitize, write, check, publish.

    Raises
    ------
    BudgetExceededError
        If the plan overspends the ledger (nothing is spent or written).
    CheckFailedError
        If a released table fails its expectations (nothing is published; the staged
        outputs stay under ``<output>/.failed-<run>/``).
    """
    lf = spec.lazy_input()  # a Spark DataFrame input is refused here, naming release_spark
    job = start_job(spec)
    try:
        prepared = preflight(spec, lf, job.accountant, job.seed)  # data problems: no charge
        n = job.plan.input_rows
        with _progress(progress) as bar:
            task = bar.add_task("releasing", total=len(spec.release)) if bar else None
            for r in spec.release:
                if bar:
                    bar.update(task, description=f"releasing {r.name}")
                if isinstance(r, GroupedSpec):
                    frame, entries = _run_grouped(prepared[r.name], r)
                    job.write(
                        r,
                        frame,
                        entries,
                        margins=margins_for(spec, r, lf),  # with its public sizes column
                        sizes=spec.margins[r.margins].sizes,
                    )
                elif isinstance(r, PramSpec):
                    n = input_rows(spec, lf) if n is None else n
                    entries = _run_pram(spec, r, lf, job.accountant, job.seed_for(r), job.path(r))
                    job.record(r, pl.scan_parquet(job.path(r)), entries, input_rows=n)
                else:
                    n = input_rows(spec, lf) if n is None else n
                    job.write(
                        r, *_run_frame_release(spec, r, lf, job.accountant, job.seed_for(r), n)
                    )
                if bar:
                    bar.advance(task)
        check_job(job, data_docs)
    except BaseException:  # nothing published; a failed check already moved staging aside
        shutil.rmtree(job.staging, ignore_errors=True)
        raise
    return publish_job(job)


def _publish(staging: Path, out: Path) -> None:
    """Move every staged entry into ``out``, replacing what a previous run published.

    Files are replaced atomically one by one (``os.replace``); a folder (Data Docs) is
    swapped in after the old one is moved aside. If a move fails, the staging folder is
    left in place and the error says which outputs are already new.
    """
    moved: list[str] = []
    try:
        for f in sorted(staging.iterdir()):
            target = out / f.name
            if f.is_dir() and target.exists():
                old = out / f".old-{f.name}-{uuid.uuid4().hex[:8]}"
                os.replace(target, old)
                os.replace(f, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(f, target)
            moved.append(f.name)
        staging.rmdir()
    except OSError as exc:
        raise DPFrameError(
            f"publishing into {out} failed ({exc}); already published from this run: "
            f"{moved or 'nothing'}; the rest is still in {staging}"
        ) from exc


def _check_staged(
    staged: list[tuple[Any, Any, dict[str, Any]]], folder: Path, data_docs: bool
) -> list[Any]:
    """Validate every staged table (PRAM'd microdata checked streaming, from its file)."""
    from dpframe.release.checks import check_release, save_check

    results = []
    for r, frame, extra in staged:
        res = check_release(r, frame, **extra)
        save_check(res, folder, data_docs=data_docs)
        results.append(res)
    return results


def check(spec: Spec, *, data_docs: bool = False) -> list[Any]:
    """Validate the published outputs of ``spec`` again (the ``dpframe check`` command).

    Reads each release's Parquet file from the output folder, rebuilds its suite from the
    spec, validates, and saves the suite and the result next to the file.
    """
    from dpframe.release.checks import check_release, save_check

    out = spec.resolve(spec.output.folder).absolute()
    lf = spec.lazy_input()
    results = []
    n = None
    for r in spec.release:
        path = out / f"{r.name}.parquet"
        if not path.exists():
            raise DPFrameError(f"release {r.name!r}: {path} does not exist (run release first)")
        if isinstance(r, PramSpec):
            n = input_rows(spec, lf) if n is None else n
            res = check_release(r, pl.scan_parquet(path), input_rows=n)
        elif isinstance(r, GroupedSpec):
            res = check_release(
                r,
                pl.read_parquet(path),
                margins=margins_for(spec, r, lf),
                sizes=spec.margins[r.margins].sizes,
            )
        else:
            res = check_release(r, pl.read_parquet(path))
        save_check(res, out, data_docs=data_docs)
        results.append(res)
    return results
