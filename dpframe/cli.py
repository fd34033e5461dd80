"""The ``dpframe`` command (typer). Release jobs grow here; see ``dpframe --help``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Differentially private releases with polars.",
    no_args_is_help=True,
    add_completion=False,
)
ledger_app = typer.Typer(help="Inspect privacy ledgers.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


def _print_frame(title: str, frame, columns: list[str] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    frame = frame.select(columns) if columns else frame
    table = Table(title=title, show_lines=False)
    for c in frame.columns:
        table.add_column(c)
    for row in frame.iter_rows():
        table.add_row(*[f"{v:.6g}" if isinstance(v, float) else str(v) for v in row])
    Console(width=120).print(table)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Output folder (replaced if it exists).")] = Path(
        "out/demo"
    ),
    rows: Annotated[int, typer.Option(help="Respondents in the synthetic survey.")] = 200_000,
) -> None:
    """Run the end-to-end demo release on the shipped synthetic survey.

    Example: dpframe demo --out out/demo
    """
    from dpframe.demo import run_demo

    result = run_demo(out, n=rows)
    _print_frame(
        "Plan (no budget spent, no noise drawn)",
        result.plan,
        ["statistic", "mechanism", "epsilon", "sensitivity", "scale", "error95", "groups"],
    )
    _print_frame("Released: counts and mean incomes by region x age band", result.grouped_release)
    _print_frame("Released: national mean scores (truncated to [0, 10])", result.means_release)
    _print_frame("Released: share of each age band", result.shares_release)
    _print_frame("Estimated from the PRAM'd microdata alone: region shares", result.region_estimate)
    _print_ledger(result.ledger)
    typer.echo(
        f"outputs in {result.folder}/: {result.grouped.name}, {result.means.name}, "
        f"{result.shares.name}, {result.microdata.name}, {result.ledger.name} "
        f"(confidential input: {result.survey.name})"
    )


def _print_ledger(path: Path) -> None:
    import dpframe

    acct = dpframe.Accountant.open(path)
    spent, left = acct.spent, acct.remaining
    _print_frame(
        f"Ledger {path}: spent epsilon={spent.epsilon:g} of {acct.epsilon:g}, "
        f"remaining {left.epsilon:g}",
        _ledger_view(acct.ledger_frame()),
        ["time", "mechanism", "columns", "epsilon", "delta", "scale", "composition"],
    )


def _ledger_view(frame):
    import polars as pl

    return frame.with_columns(
        pl.col("columns").list.join(","), pl.col("time").dt.strftime("%Y-%m-%d %H:%M:%S")
    )


@ledger_app.command("show")
def ledger_show(
    path: Annotated[Path, typer.Argument(help="A ledger JSON file or a released Parquet file.")],
) -> None:
    """Print a ledger: from a ledger file, or the provenance of a released Parquet file.

    Example: dpframe ledger show out/demo/ledger.json
    """
    import dpframe

    if not path.exists():
        typer.echo(f"error: {path} does not exist", err=True)
        raise typer.Exit(2)
    if path.suffix == ".parquet":
        prov = dpframe.read_provenance(path)
        _print_frame(
            f"Provenance of {path} (epsilon {prov.epsilon:g})",
            _ledger_view(prov.ledger_frame()),
            ["time", "mechanism", "columns", "epsilon", "delta", "scale", "composition"],
        )
    else:
        _print_ledger(path)


if __name__ == "__main__":  # pragma: no cover
    app()
