"""The ``dpframe`` command (typer). Release jobs grow here; see ``dpframe --help``."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Differentially private releases with polars.",
    no_args_is_help=True,
    add_completion=False,
)
ledger_app = typer.Typer(
    help="Inspect, verify, export and migrate privacy ledgers.", no_args_is_help=True
)
app.add_typer(ledger_app, name="ledger")
provenance_app = typer.Typer(
    help="Show a released Parquet file's provenance, or copy it into a rewritten copy.",
    no_args_is_help=True,
)
app.add_typer(provenance_app, name="provenance")


class _StepLines(logging.Handler):
    """A job's step lines on the stderr of the moment (``dpframe [3/11] drawing x: 0.4 s``)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"dpframe {self.format(record)}\n")
        sys.stderr.flush()


def _log_steps() -> None:
    """Off a terminal, a job logs one line per step (dpframe.jobs.progress): show them."""
    logger = logging.getLogger("dpframe.jobs")
    logger.setLevel(logging.INFO)
    if not any(isinstance(h, _StepLines) for h in logger.handlers):
        logger.addHandler(_StepLines())


def _version(show: bool) -> None:
    if show:
        from dpframe.version import __version__

        typer.echo(f"dpframe {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print dpframe's version and exit.",
            callback=_version,
            is_eager=True,
            metavar="",
        ),
    ] = False,
) -> None:
    """Differentially private releases with polars."""
    from dpframe.core.advice import entry

    # errors advise options and spec fields, not Python arguments (until the command ends)
    ctx.with_resource(entry("cli"))


def _cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _print_frame(
    title: str, frame, columns: list[str] | None = None, full: Path | str | None = None
) -> None:
    """Print a table that fits the terminal (``$COLUMNS``, else its width, else 120).

    Long headers wrap onto several lines rather than being cut; columns that do not fit
    are left out and a line says how many, and where the whole table is (``full``).
    """
    import shutil

    from rich.console import Console
    from rich.table import Table

    frame = frame.select(columns) if columns else frame
    width = max(shutil.get_terminal_size((120, 24)).columns, 40)
    cells = [[_cell(v) for v in row] for row in frame.iter_rows()]
    shown, used = [], 1
    for j, name in enumerate(frame.columns):
        values = max((len(r[j]) for r in cells), default=0)
        need = max(values, min(len(name), 12), 1)
        if shown and used + need + 3 > width:
            break
        shown.append((j, name, need))
        used += need + 3
    table = Table(title=title, show_lines=False)
    for _, name, need in shown:
        table.add_column(name, overflow="fold", min_width=need)
    for row in cells:
        table.add_row(*[row[j] for j, _, _ in shown])
    Console(width=width).print(table)
    if len(shown) < frame.width:
        rest = frame.columns[len(shown) :]
        left = ", ".join(rest[:5]) + (f" and {len(rest) - 5} more" if len(rest) > 6 else "")
        left = ", ".join(rest) if len(rest) <= 6 else left
        where = f"; the whole table is in {full}" if full else ""
        typer.echo(
            f"({len(shown)} of {frame.width} columns shown, not shown: {left}{where}; "
            "a wider terminal or COLUMNS=200 shows more)"
        )


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Output folder (replaced if it exists).")] = Path(
        "out/demo"
    ),
    rows: Annotated[int, typer.Option(help="Respondents in the synthetic survey.")] = 200_000,
) -> None:
    """Run the end-to-end demo: plan, release, check and risk on data dpframe ships.

    Example: dpframe demo --out out/demo
    """
    from dpframe.core.constraints import check_int
    from dpframe.demo import run_demo
    from dpframe.errors import InvalidParameterError

    try:
        check_int("--rows", rows, 100, "the demo's survey needs some respondents in every group")
        _log_steps()
        result = run_demo(out, n=rows, progress=True)
    except InvalidParameterError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    _print_plan(result.plan)
    for c in result.checks:
        typer.echo(f"check {c.release}: {c.n_expectations} expectations passed")
    by_region = result.released["by_region"]
    _print_frame(
        "Released: counts, mean incomes, satisfaction-trust covariance by region x age band",
        by_region.head(6),
        full=result.outputs["by_region"],
    )
    if by_region.height > 6:
        typer.echo(
            f"(6 of {by_region.height} rows shown; all {by_region.height} in "
            f"{result.outputs['by_region']})"
        )
    for note in result.noise_notes:  # from release.accuracy(): released values only
        typer.echo(note)
    _print_frame("Released: share of each age band", result.released["age_shares"])
    _print_frame("Released: covariance matrix of the scores", result.released["scores_cov"])
    _print_frame("Estimated from the PRAM'd microdata alone: region shares", result.region_estimate)
    _print_frame(
        "DR-HA of the Bankruptcy subset (assessment of confidential data, no budget spent)",
        result.risk.drop("assessment"),
    )
    _print_ledger(result.ledger)
    files = ", ".join(f"released/{p.name}" for p in result.outputs.values())
    typer.echo(
        f"outputs in {result.folder}/: {files} (each with .suite.json and .validation.json), "
        f"released/{result.report.name} (the report: open it in a browser, offline), "
        f"{result.ledger.name}, {result.spec.name}"
        + (f", {result.risk_plot.name}" if result.risk_plot else "")
        + f" (confidential input: {result.survey.name})"
    )


EXIT_OVERSPEND = 1
EXIT_INVALID = 2
EXIT_CHECK_FAILED = 3
EXIT_FAILED = 4


def _load(spec_path: Path):
    from dpframe.errors import DPFrameError
    from dpframe.jobs import load_spec

    try:
        return load_spec(spec_path)
    except DPFrameError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None


def _print_plan(the_plan) -> None:
    _print_frame(
        "Plan (no budget spent, no noise drawn)",
        the_plan.rows,
        [  # what a narrow terminal must show first
            "release",
            "statistic",
            "mechanism",
            "epsilon",
            "delta",
            "scale",
            "error95",
            "error95_other",
            "sensitivity",
            "kind",
        ],
    )
    for line in the_plan.assumptions():
        typer.echo(line)
    typer.echo(the_plan.summary())


@app.command()
def plan(
    spec: Annotated[Path, typer.Argument(help="The release spec (TOML).")],
) -> None:
    """Show every release of a spec with its mechanism, epsilon, scale and 95% error.

    Spends nothing and draws no noise. Exit code 1 if the plan overspends the ledger,
    2 if the spec is invalid.

    Example: dpframe plan release.toml
    """
    from dpframe.errors import DPFrameError
    from dpframe.jobs import plan as make_plan

    loaded = _load(spec)
    the_plan = None
    try:
        the_plan = make_plan(loaded)
    except DPFrameError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    _print_plan(the_plan)
    if not the_plan.fits:
        raise typer.Exit(EXIT_OVERSPEND)


@app.command()
def release(
    spec: Annotated[Path, typer.Argument(help="The release spec (TOML).")],
    data_docs: Annotated[
        bool,
        typer.Option(
            help="Also write Great Expectations Data Docs (styled only online: they load "
            "CDN assets; report.html is the offline report).",
            metavar="",  # a flag takes no value: no <bool> placeholder in --help
        ),
    ] = False,
    progress: Annotated[
        bool,
        typer.Option(
            help="Show progress: a bar on a terminal, one line per step otherwise.", metavar=""
        ),
    ] = True,
    engine: Annotated[
        str, typer.Option(help="polars (default) or spark (dpframe[spark], Java 17+).")
    ] = "polars",
) -> None:
    """Charge the ledger, sanitize, write Parquet with provenance, check, publish.

    Exit codes: 0 published; 1 the plan overspends (nothing spent or written); 2 invalid
    spec or data (found before anything is charged); 3 an expectation failed (nothing
    published; staged outputs kept under .failed-<run>/ in the output folder); 4 any
    other failure (nothing published); 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM
    (what was not drawn given back; the message says what was spent and published).

    Example: dpframe release release.toml
    """
    from dpframe.core.interrupts import handling
    from dpframe.errors import ReleaseInterrupted

    with handling():  # SIGINT and SIGTERM alike, from here until the outcome is said
        try:
            result = _release(spec, data_docs, progress, engine)
        except ReleaseInterrupted as exc:
            said = str(exc)
            if exc.charged is None:  # before the job began
                said += ", before the job began: nothing spent, nothing published"
            typer.echo(f"error: {said}", err=True)
            raise typer.Exit(exc.exit_code) from None
    for c in result.checks:
        typer.echo(f"check {c.release}: {c.n_expectations} expectations passed")
    typer.echo(
        f"published {len(result.outputs)} release(s) to {result.folder}/ "
        f"(epsilon {result.epsilon:g}): " + ", ".join(p.name for p in result.outputs.values())
    )
    typer.echo(f"report: {result.report} (one page, opens offline)")


def _release(spec: Path, data_docs: bool, progress: bool, engine: str) -> Any:
    """The ``release`` command's job: its result, or an exit code said on stderr."""
    from dpframe.core.constraints import ENGINES
    from dpframe.errors import BudgetExceededError, DPFrameError
    from dpframe.jobs import CheckFailedError
    from dpframe.jobs import plan as make_plan
    from dpframe.jobs import run as run_job

    if engine not in ENGINES:
        typer.echo(f"error: --engine must be polars or spark, got {engine!r}", err=True)
        raise typer.Exit(EXIT_INVALID)
    loaded = _load(spec)
    the_plan = None
    try:
        the_plan = make_plan(loaded, engine=engine)  # planned once: shown, then run
        _print_plan(the_plan)
        if not the_plan.fits:
            typer.echo(
                "error: the plan overspends the ledger. Nothing was charged; nothing spent: "
                "this job charged no budget",
                err=True,
            )
            raise typer.Exit(EXIT_OVERSPEND)
        if progress:
            _log_steps()
        result = run_job(loaded, plan=the_plan, progress=progress, data_docs=data_docs)
    except CheckFailedError as exc:
        typer.echo(f"error: {exc} (epsilon spent: {_spent_by_run(exc):g})", err=True)
        raise typer.Exit(EXIT_CHECK_FAILED) from None
    except typer.Exit:
        raise
    except Exception as exc:
        # exit codes 1 and 2 promise that nothing was spent: only when the ledger agrees
        spent = _spent_by_run(exc)
        if spent > 0:  # a failure after a charge: what was drawn stays spent
            typer.echo(
                f"error: the release failed after spending epsilon {spent:g} "
                f"({type(exc).__name__}: {exc}); nothing was published",
                err=True,
            )
            raise typer.Exit(EXIT_FAILED) from None
        typer.echo(f"error: {exc}", err=True)
        typer.echo("nothing spent: this job charged no budget", err=True)
        if isinstance(exc, BudgetExceededError):
            raise typer.Exit(EXIT_OVERSPEND) from None
        if isinstance(exc, DPFrameError):
            raise typer.Exit(EXIT_INVALID) from None
        typer.echo(
            f"error: the release failed ({type(exc).__name__}); nothing was published", err=True
        )
        raise typer.Exit(EXIT_FAILED) from None
    return result


def _spent_by_run(exc: BaseException) -> float:
    """Epsilon this job charged before it failed (recorded on the error by the job).

    Only this job's own entries: another job charging the same ledger meanwhile is not
    this job's spend.
    """
    from dpframe.core.budget import exact_sum

    return float(exact_sum(e.epsilon for e in getattr(exc, "charged", ())))


@app.command()
def check(
    spec: Annotated[
        Path,
        typer.Argument(
            help="The release spec (TOML), or a published output folder (checked on its "
            "own: each file's provenance records its spec and public facts)."
        ),
    ],
    data_docs: Annotated[
        bool,
        typer.Option(
            help="Also write Great Expectations Data Docs (styled only online: they load "
            "CDN assets; report.html is the offline report).",
            metavar="",  # a flag takes no value: no <bool> placeholder in --help
        ),
    ] = False,
) -> None:
    """Validate published outputs against the expectation suite built from the spec.

    Rewrites the current run's report.html with the new results. Exit code 3 if an
    expectation fails, 2 if outputs are missing or the spec is invalid.

    Example: dpframe check release.toml, or dpframe check released/
    """
    from dpframe.errors import DPFrameError
    from dpframe.jobs import check as run_check
    from dpframe.jobs import check_folder

    if spec.is_dir():
        try:
            results = check_folder(spec, data_docs=data_docs)
        except DPFrameError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_INVALID) from None
        out = spec
    else:
        loaded = _load(spec)
        try:
            results = run_check(loaded, data_docs=data_docs)
        except DPFrameError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_INVALID) from None
        out = loaded.resolve(loaded.output.folder)
    failed = [r for r in results if not r.success]
    for r in results:
        typer.echo(r.report())
    typer.echo(f"report: {out / 'report.html'} (rewritten with these results)")
    if failed:
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command()
def risk(
    data: Annotated[
        str,
        typer.Argument(
            help="A CSV or Parquet file, or a shipped table: bankruptcy, bankruptcy_ff, adult."
        ),
    ],
    qids: Annotated[
        str | None, typer.Option(help="Quasi-identifier columns, comma-separated.")
    ] = None,
    sensitive: Annotated[str | None, typer.Option(help="The sensitive attribute Y.")] = None,
    levels: Annotated[
        str | None, typer.Option(help="Every level of Y, comma-separated (K; not from the data).")
    ] = None,
    count: Annotated[str | None, typer.Option(help="Column of record counts (a table).")] = None,
    mechanism: Annotated[
        list[str] | None,
        typer.Option(help="laplace, gaussian, gaussian_pdp, analytic_gaussian (repeatable)."),
    ] = None,
    measure: Annotated[
        list[str] | None,
        typer.Option(help="local, expected, shrinkage, marginal, marginal_shrinkage (repeatable)."),
    ] = None,
    delta: Annotated[float, typer.Option(help="delta for the Gaussian mechanisms.")] = 1e-5,
    eps_min: Annotated[float, typer.Option(help="Smallest epsilon of the grid.")] = 1e-3,
    eps_max: Annotated[float, typer.Option(help="Largest epsilon of the grid.")] = 100.0,
    points: Annotated[int, typer.Option(help="Grid points (log-spaced).")] = 101,
    show: Annotated[int, typer.Option(help="Epsilon values to print (log-spaced subset).")] = 6,
    plot: Annotated[Path | None, typer.Option(help="Write the S-curves here (PNG).")] = None,
    csv: Annotated[Path | None, typer.Option(help="Write the full table here (CSV).")] = None,
) -> None:
    """Disclosure risk from homogeneity attack (DR-HA) of a frequency table, for an epsilon grid.

    An assessment of CONFIDENTIAL data for the data owner: it spends no budget and its
    output is not for publication. The table's sensitivity is 1, as in the paper (Python's
    dpframe.risk.drha takes neighbours= for the sensitivity under a neighbour relation).

    Examples: dpframe risk bankruptcy_ff --plot risk.png;
    dpframe risk survey.parquet --qids age,sex --sensitive diagnosis --levels a,b,c
    """
    import numpy as np
    import polars as pl

    from dpframe.core.constraints import check_int, check_positive
    from dpframe.core.files import check_output_path
    from dpframe.datasets import DRHA_TABLES, drha_table
    from dpframe.errors import DPFrameError, InvalidParameterError
    from dpframe.risk.frame import ASSESSMENT, drha

    try:  # the options first: nothing is computed for a run that cannot finish
        lo, hi = check_positive("--eps-min", eps_min), check_positive("--eps-max", eps_max)
        if not lo < hi:
            raise InvalidParameterError(f"--eps-min ({lo:g}) must be < --eps-max ({hi:g})")
        check_int("--points", points, 2, "a grid has two ends")
        check_int("--show", show, 1)
        for name, target in (("--csv", csv), ("--plot", plot)):
            if target is not None:
                check_output_path(target, name)
        if data in DRHA_TABLES:
            given = [
                o
                for o, v in (
                    ("--qids", qids),
                    ("--sensitive", sensitive),
                    ("--levels", levels),
                    ("--count", count),
                )
                if v
            ]
            if given:
                typer.echo(
                    f"error: {', '.join(given)} apply to a file; the shipped table {data!r} "
                    "declares its own quasi-identifiers, sensitive attribute and levels",
                    err=True,
                )
                raise typer.Exit(2)
            t = drha_table(data)
            frame, q, y, lv, cnt = t.frame, list(t.qids), t.sensitive, list(t.levels), t.count
        else:
            path = Path(data)
            if not path.exists():
                typer.echo(
                    f"error: {data} is neither a file nor one of {sorted(DRHA_TABLES)}", err=True
                )
                raise typer.Exit(2)
            try:
                frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise InvalidParameterError(
                    f"{data} cannot be read as a table ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200]})"
                ) from None
            if not qids or not sensitive:
                typer.echo("error: --qids and --sensitive are required for a file", err=True)
                raise typer.Exit(2)
            q, y, cnt = qids.split(","), sensitive, count
            lv = levels.split(",") if levels else None
        mechs = mechanism or ["laplace", "gaussian_pdp"]
        grid = np.logspace(np.log10(eps_min), np.log10(eps_max), points)
        tables = []
        for mech in mechs:
            eps = grid[grid < 1] if mech == "gaussian" else grid
            tables.append(
                drha(
                    frame,
                    q,
                    y,
                    epsilon=eps,
                    delta=delta,
                    mechanism=mech,
                    measure=measure or ["local", "expected"],
                    levels=lv,
                    count=cnt,
                )
            )
        table = pl.concat(tables)
    except DPFrameError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    shown = grid[np.unique(np.linspace(0, grid.size - 1, show).round().astype(int))]
    view = table.filter(pl.col("epsilon").is_in(shown.tolist())).drop("assessment")
    _print_frame(f"DR-HA of {data} ({ASSESSMENT})", view)
    if csv:
        table.write_csv(csv)
        typer.echo(f"table written to {csv}")
    if plot:
        from dpframe.risk.plot import plot_risk

        plot_risk(table, plot, title=f"DR-HA of {data}")
        typer.echo(f"plot written to {plot}")


def _ledger_target(text: str) -> str | Path:
    """A ledger named on the command line: a ``postgresql://`` URL, or a file."""
    from dpframe.core.postgres import is_postgres_url

    return text if is_postgres_url(text) else Path(text)


def _print_ledger(target: str | Path) -> None:
    import polars as pl

    import dpframe
    from dpframe.core.budget import shown

    acct = dpframe.Accountant.open(target)
    spent, left = acct.spent, acct.remaining
    tight = ""
    if acct.accounting == "pld":
        rhos = [e.details["rho"] for e in acct.ledger if "rho" in e.details]
        zcdp = f" and rho {sum(rhos):g} of {len(rhos)} zCDP release(s)" if rhos else ""
        tight = (
            f" (tight composition: the entries compose to epsilon={spent.epsilon:.4g} at "
            f"delta={acct.delta:g}; their epsilons sum to "
            f"{sum(e.epsilon for e in acct.ledger):g}{zcdp})"
        )
    _print_frame(
        f"Ledger {acct.location}: spent epsilon={spent.epsilon:g} of {acct.epsilon:g}, "
        f"remaining {shown(left.epsilon, acct.epsilon)}{tight}",
        _ledger_view(dpframe.ledger_frame(acct)),
        LEDGER_COLUMNS,
    )
    held = acct.reservations
    if held:
        rows = [
            {
                "id": r.id,
                "created": r.created,
                "owner": f"{r.owner.get('host')}:{r.owner.get('pid')}",
                "note": r.note,
                "epsilon": r.epsilon,
                "delta": r.delta,
            }
            for r in held
        ]
        _print_frame(
            f"Open reservations (holding epsilon={acct.reserved.epsilon:g} not yet drawn; "
            "`dpframe ledger cancel ID` gives back one whose job is gone)",
            pl.DataFrame(rows),
            ["id", "created", "owner", "note", "epsilon", "delta"],
        )


#: the columns ``ledger show`` and ``provenance show`` print first
LEDGER_COLUMNS = [  # the columns (long) last: a narrow terminal still shows the epsilons
    "time",
    "name",
    "unit",
    "mechanism",
    "epsilon",
    "delta",
    "scale",
    "composition",
    "columns",
]


def _ledger_view(frame):
    """Entries for printing: with each release's name (``unknown`` where an entry of an
    older version, or an unnamed Python release, has none) and privacy unit."""
    import json

    import polars as pl

    from dpframe.core.accountant import NAME_KEY
    from dpframe.core.units import recorded_unit

    details = [json.loads(d) for d in frame["details"]]
    return frame.with_columns(
        pl.col("columns").list.join(","),
        pl.col("time").dt.strftime("%Y-%m-%d %H:%M:%S"),
        name=pl.Series([str(d.get(NAME_KEY) or "unknown") for d in details], dtype=pl.String),
        unit=pl.Series([recorded_unit(d) for d in details], dtype=pl.String),
    )


@ledger_app.command("show")
def ledger_show(
    ledger: Annotated[
        str,
        typer.Argument(help="A ledger file, a postgresql:// URL, or a released Parquet file."),
    ],
) -> None:
    """Print a ledger (its entries and open reservations), or the provenance of a released
    Parquet file.

    Example: dpframe ledger show out/demo/ledger.db
    """
    from dpframe.errors import DPFrameError

    path = _ledger_target(ledger)
    try:
        if not isinstance(path, Path):
            _print_ledger(path)
            return
        if not str(ledger) or not path.exists():
            typer.echo(f"error: ledger {ledger!r} does not exist", err=True)
            raise typer.Exit(2)
        if path.is_dir():
            typer.echo(f"error: {path} is a folder; give a ledger or a Parquet file", err=True)
            raise typer.Exit(2)
        if path.suffix == ".parquet":
            _print_provenance(path)
        else:
            _print_ledger(path)
    except DPFrameError as exc:  # cannot be read: said plainly, no traceback
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _print_provenance(path: Path) -> None:
    import dpframe

    prov = dpframe.read_provenance(path)
    _print_frame(
        f"Provenance of {path} (epsilon {prov.epsilon:g})",
        _ledger_view(prov.ledger_frame()),
        LEDGER_COLUMNS,
    )


@ledger_app.command("verify")
def ledger_verify(
    ledger: Annotated[str, typer.Argument(help="The ledger file, or a postgresql:// URL.")],
    against: Annotated[
        list[Path] | None,
        typer.Option(
            help="Output folders (every run kept in them), run folders, or released Parquet "
            "files or folders of them: every ledger entry they record must be in the "
            "ledger, with the same hash, and each run's record of the ledger (creation id, "
            "entry count, head hash) must be a state of this ledger."
        ),
    ] = None,
) -> None:
    """Verify a ledger's hash chain (and that it still holds what released files record).

    Every missing or altered entry is named, one line each. Exit code 0: verified; 1: the
    ledger (or what was released from it) fails verification; 2: the ledger cannot be
    read.

    Example: dpframe ledger verify out/demo/ledger.db --against out/demo/released
    """
    import dpframe
    from dpframe.errors import DPFrameError, LedgerIntegrityError

    try:
        acct = dpframe.Accountant.open(_ledger_target(ledger))
        entries = {e.id: e for e in acct.ledger}
        problems, files, runs = _against(acct, entries, against or [])
    except LedgerIntegrityError as exc:
        typer.echo(f"FAILED: {exc}", err=True)
        raise typer.Exit(1) from None
    except (DPFrameError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if problems:
        typer.echo(
            f"FAILED: ledger {acct.location} lacks what was released from it ({len(problems)} "
            "problem(s)): it was deleted, swapped, truncated, rewritten or restored from an "
            "older copy",
            err=True,
        )
        for p in problems:
            typer.echo(f"  - {p}", err=True)
        raise typer.Exit(1)
    spent = acct.spent
    head = acct.ledger[-1].hash[:16] if acct.ledger else "(empty)"
    typer.echo(
        f"verified: {acct.location}, {len(entries)} entries, spent epsilon={spent.epsilon:g} of "
        f"{acct.epsilon:g}, head {head}"
        + (f"; {files} released file(s) of {runs} run(s) agree" if against else "")
    )


def _against(acct: Any, entries: dict[str, Any], paths: list[Path]) -> tuple[list[str], int, int]:
    """What the ledger lacks of what ``paths`` record (one line each), the number of
    released files and of published runs read.

    An output folder is read whole: every run kept under ``.runs/`` (the current one, its
    previous one, any other), each run's manifest (its ledger anchor and entries) and
    each released table's provenance.
    """
    from dpframe.errors import InvalidParameterError, LedgerIntegrityError
    from dpframe.jobs import published_run
    from dpframe.jobs.publish import (
        CURRENT,
        MANIFEST,
        RUNS,
        ledger_problems,
        published_runs,
    )
    from dpframe.polars.io import read_provenance

    problems: list[str] = []
    files: list[Path] = []
    runs = []
    for p in paths:
        if p.is_dir() and ((p / RUNS).is_dir() or (p / CURRENT).is_symlink()):
            found = published_runs(p)
            if not found:
                raise InvalidParameterError(f"against: {p} holds no published run")
            runs += found
        elif p.is_dir() and (p / MANIFEST).is_file():  # one run's folder
            runs.append(published_run(p))
        elif p.is_dir() and not (p / "_dpframe.json").exists():
            files += sorted(p.rglob("*.parquet"))  # an older dpframe's output folder
        else:
            files.append(p)
    problems += ledger_problems(runs, acct)
    for run in runs:
        files += [run.path(name) for name in sorted(run.releases)]
    for f in files:
        try:
            recorded = read_provenance(f).entries
        except LedgerIntegrityError as exc:
            problems.append(str(exc))
            continue
        for e in recorded:
            kept = entries.get(e.id)
            if kept is None or (e.hash and kept.hash != e.hash):
                problems.append(
                    f"{f} records ledger entry {e.id!r} ({e.mechanism}, epsilon "
                    f"{e.epsilon:g}), which the ledger "
                    f"{'lacks' if kept is None else 'holds altered'}"
                )
    return problems, len(files), len(runs)


def _paths(path: Path | None) -> list[Path]:
    return [] if path is None else [path]


@ledger_app.command("export")
def ledger_export(
    ledger: Annotated[str, typer.Argument(help="The ledger file, or a postgresql:// URL.")],
    output: Annotated[Path, typer.Option(help="Where to write (.json or .parquet).")],
) -> None:
    """Export a verified ledger: JSON (header, entries and hashes) or Parquet (one row an
    entry). Exit code 0, or 2 if the ledger cannot be read or the output written."""
    import dpframe
    from dpframe.core.files import atomic_write_text
    from dpframe.core.outputs import guard_output
    from dpframe.errors import DPFrameError

    try:
        acct = dpframe.Accountant.open(_ledger_target(ledger))
        # never onto a ledger (this one, its -wal/-shm/-journal, any SQLite database)
        guard_output(output, argument="--output", ledgers=_paths(acct.path), replace=False)
        if output.suffix == ".json":
            atomic_write_text(output, acct.to_json() + "\n")
        elif output.suffix == ".parquet":
            dpframe.ledger_frame(acct).write_parquet(output)
        else:
            raise DPFrameError(f"output: give a .json or .parquet file, got {output}")
    except (DPFrameError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2 if not isinstance(exc, dpframe.LedgerIntegrityError) else 1) from None
    typer.echo(f"exported {len(acct.ledger)} entries of {acct.location} to {output}")


@ledger_app.command("cancel")
def ledger_cancel(
    ledger: Annotated[str, typer.Argument(help="The ledger file, or a postgresql:// URL.")],
    reservation: Annotated[str, typer.Argument(help="The reservation's id (ledger show).")],
    force: Annotated[
        bool,
        typer.Option(help="Cancel a reservation of another host's job (ended?).", metavar=""),
    ] = False,
) -> None:
    """Give back a reservation whose job is gone (killed, or its host lost).

    A job killed on this host has its reservation given back by the next job; one of
    another host is left to the operator, who knows whether that job still runs. What the
    job drew stays spent; a job still drawing from a cancelled reservation is refused.
    Exit code 0: given back; 2: refused or not found.
    """
    import dpframe
    from dpframe.errors import DPFrameError

    try:
        r = dpframe.Accountant.open(_ledger_target(ledger)).cancel(reservation, force=force)
    except DPFrameError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"gave back reservation {r.id} ({r.note or 'no note'}) of epsilon {r.epsilon:g}")


@ledger_app.command("migrate")
def ledger_migrate(
    path: Annotated[Path, typer.Argument(help="A JSON ledger of an older dpframe.")],
    to: Annotated[
        Path | None, typer.Option(help="The new SQLite ledger (default: same name, .db).")
    ] = None,
) -> None:
    """Convert a JSON ledger into a SQLite ledger (budget and entries kept, verified).

    The JSON file is left as it is (it stays read-only); point the spec at the new file.
    """
    from dpframe.core.legacy import migrate_json
    from dpframe.errors import DPFrameError

    try:
        store = migrate_json(path, to)
    except (DPFrameError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"migrated {len(store.read().entries)} entries of {path} to {store.path}; set "
        f'ledger = "{store.path.name}" in the spec'
    )


@provenance_app.command("show")
def provenance_show(
    file: Annotated[
        str, typer.Argument(help="A released Parquet file (or a Spark output folder).")
    ],
) -> None:
    """Print the ledger entries a released file's provenance records.

    The same table as `dpframe ledger show FILE.parquet`. Exit code 0, or 2 if the file
    has no provenance or cannot be read.

    Example: dpframe provenance show released/by_region.parquet
    """
    from dpframe.errors import DPFrameError

    try:
        if not file:
            raise DPFrameError("FILE: give the path of a released Parquet file, got ''")
        _print_provenance(Path(file))
    except DPFrameError as exc:  # cannot be read: said plainly, no traceback
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None


@provenance_app.command("copy")
def provenance_copy(
    src: Annotated[str, typer.Argument(help="The Parquet file dpframe released.")],
    dst: Annotated[
        str, typer.Argument(help="The copy another tool (pyarrow, DuckDB, pandas) rewrote.")
    ],
    overwrite: Annotated[
        bool,
        typer.Option(help="Replace another dpframe provenance DST carries.", metavar=""),
    ] = False,
) -> None:
    """Copy SRC's provenance into DST, a copy of SRC another tool rewrote.

    Tools that rewrite Parquet (pyarrow, DuckDB COPY, pandas) drop the metadata holding
    the provenance. DST must hold SRC's released columns (all or some, nothing else) with
    the same values, row for row; its data is kept byte for byte, its footer rewritten
    atomically. Spends nothing.

    Exit code 0: copied (or DST already carried it); 1: SRC's provenance fails
    verification; 2: refused (nothing written).

    Example: dpframe provenance copy released/by_region.parquet warehouse/by_region.parquet
    """
    import dpframe
    from dpframe.errors import DPFrameError, LedgerIntegrityError

    try:
        before = _identity(dst)
        dpframe.copy_provenance(src, dst, overwrite=overwrite)
        prov = dpframe.read_provenance(dst)
    except LedgerIntegrityError as exc:
        typer.echo(f"FAILED: {exc}", err=True)
        raise typer.Exit(1) from None
    except (DPFrameError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    if before == _identity(dst):  # the same file, untouched: it carried this provenance
        typer.echo(f"{dst} already carries the provenance of {src}; nothing written")
    else:
        typer.echo(
            f"copied the provenance of {src} ({len(prov.entries)} ledger entries, epsilon "
            f"{prov.epsilon:g}) into {dst}; nothing spent"
        )


def _identity(path: str) -> tuple[int, int] | None:
    """The file's inode and modification time (a rewrite changes both), None if absent."""
    import os

    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return status.st_ino, status.st_mtime_ns


if __name__ == "__main__":  # pragma: no cover
    app()
