"""The demo job: a release spec run end to end on data dpframe ships.

Run it with ``dpframe demo`` (or ``make demo``). In ``out`` it writes the confidential
synthetic survey to Parquet and the release spec (``release.toml``, a copy of
``dpframe/data/demo_release.toml``), then:

1. **plan** -- every release with its mechanism, ε, scale and 95% error, nothing spent;
2. **release** -- charges the ledger (``ledger.db``), sanitizes (grouped counts, mean
   and median incomes and the satisfaction-trust covariance by region x age band over
   public margins; respondents, income totals and distinct households by region; PRAM'd
   microdata of region and age band, streamed Parquet to Parquet; the age-band shares;
   the covariance matrix of the two scores), writes each table to ``released/`` with its
   ledger entries and the spec in the Parquet metadata;
3. **check** -- validates every released table against a Great Expectations suite built
   from the spec (suites and results are saved next to the tables); nothing is
   published unless every expectation holds;
4. **risk** -- the DR-HA of a frequency table (the DR-HA paper's Bankruptcy subset,
   shipped) for an ε grid, with its S-curves (an assessment: no budget spent);
5. **report** -- ``released/report.html``, one self-contained page (it opens offline):
   the run, every release's plan and checks, and the DR-HA curves of step 4.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.constraints import check_int
from dpframe.errors import InvalidParameterError

__all__ = ["DemoResult", "noise_notes", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    """Where the demo wrote its outputs, and what it did."""

    folder: Path
    survey: Path
    spec: Path
    ledger: Path
    outputs: dict[str, Path]
    plan: Any
    checks: list[Any]
    released: dict[str, pl.DataFrame]
    region_estimate: pl.DataFrame
    risk: pl.DataFrame
    risk_plot: Path | None
    epsilon_spent: float
    report: Path
    #: per group of ``by_region``, each released value's 95% half-width and whether it
    #: is uninformative (``GroupedRelease.accuracy()``: post-processing, nothing spent)
    by_region_accuracy: pl.DataFrame
    #: one sentence per statistic of ``by_region`` that some groups' noise swamps
    noise_notes: list[str]


def run_demo(out: str | Path = "out/demo", n: int = 200_000, progress: bool = False) -> DemoResult:
    """Run the demo into ``out`` (replaced if it exists) and return what it produced.

    Examples
    --------
    >>> import tempfile
    >>> result = run_demo(tempfile.mkdtemp() + "/demo", n=5_000)
    >>> round(result.epsilon_spent, 6), sorted(result.outputs)
    (2.7, ['age_shares', 'by_age', 'by_region', 'households', 'microdata', 'scores_cov'])
    """
    import numpy as np

    import dpframe
    from dpframe.datasets import drha_table, synthetic_survey
    from dpframe.jobs import load_spec, run
    from dpframe.risk import drha

    check_int("n", n, 100, "the demo's survey needs some respondents in every group")
    folder = Path(out)
    marker = folder / ".dpframe-demo"  # the demo replaces only a folder it made itself
    if folder.exists() and not folder.is_dir():
        raise InvalidParameterError(f"out: {folder} is a file; give a folder for the demo")
    if folder.exists():
        if not marker.exists() and any(folder.iterdir()):
            raise InvalidParameterError(
                f"out: {folder} exists and is not a previous demo's folder; the demo replaces "
                "its output folder, so give a new or empty folder"
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    marker.touch()
    survey_path = folder / "survey.parquet"  # the confidential input
    synthetic_survey(n).write_parquet(survey_path)
    spec_path = folder / "release.toml"
    template = resources.files("dpframe").joinpath("data", "demo_release.toml")
    spec_path.write_text(template.read_text())

    # the DR-HA grid (an assessment of a shipped table: no budget) goes into the report
    t = drha_table("bankruptcy_ff")
    grid = drha(
        t.frame,
        t.qids,
        t.sensitive,
        count=t.count,
        epsilon=np.logspace(-3, 2, 51),
        mechanism=["laplace", "gaussian_pdp"],
        delta=1e-3,
        measure=["local", "expected"],
    )
    spec = load_spec(spec_path)
    result = run(
        spec,
        progress=progress,
        risk=grid,
        risk_title="DR-HA of the Bankruptcy subset (a shipped table, not the survey)",
    )
    released = {
        name: pl.read_parquet(p) for name, p in result.outputs.items() if name != "microdata"
    }
    by_region = result.releases["by_region"]
    by_region_accuracy = by_region.accuracy()  # from released values only: nothing spent
    microdata = result.outputs["microdata"]
    design = dpframe.read_provenance(microdata).pram_designs["region"]
    est = dpframe.pram.estimate(pl.read_parquet(microdata)["region"], design)
    region_estimate = pl.DataFrame(
        {
            "region": design["categories"],
            "estimated_share": est.p_simplex,
            "unbiased": est.p_hat,
            "standard_error": est.standard_errors,
        }
    )

    risk = drha(
        t.frame,
        t.qids,
        t.sensitive,
        count=t.count,
        epsilon=[0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0],
        mechanism=["laplace"],
        measure=["local"],
    )
    risk_plot: Path | None = folder / "risk.png"
    try:
        from dpframe.risk.plot import plot_risk

        plot_risk(grid, risk_plot, title="DR-HA of the Bankruptcy subset (assessment)")
    except dpframe.InvalidParameterError:  # matplotlib missing: the plot is optional
        risk_plot = None
    return DemoResult(
        folder=folder,
        survey=survey_path,
        spec=spec_path,
        ledger=spec.ledger_target(),
        outputs=result.outputs,
        plan=result.plan,
        checks=result.checks,
        released=released,
        region_estimate=region_estimate,
        risk=risk,
        risk_plot=risk_plot,
        epsilon_spent=result.epsilon,
        report=result.report,
        by_region_accuracy=by_region_accuracy,
        noise_notes=noise_notes(by_region, by_region_accuracy),
    )


def noise_notes(release: Any, accuracy: pl.DataFrame) -> list[str]:
    """One sentence per statistic of a grouped release whose value is uninformative in
    some groups (its ``_uninformative`` flag in ``accuracy``, from
    ``release.accuracy()``), naming the groups.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["N"] * 500, "age": [40.0] * 500})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     rel = dpframe.group_by(people, "region", seed=3,
    ...                            margins=pl.DataFrame({"region": ["N", "E"]})).agg(
    ...         dpframe.agg.mean("age", lower=18, upper=90, epsilon=1.0))
    ...     _ = rel.collect()
    >>> print(noise_notes(rel, rel.accuracy())[0])  # doctest: +NORMALIZE_WHITESPACE
    1 of 2 groups (E) have a noisy count <= 20 for age_mean: its mean is uninformative,
    the 95% error can span the whole range [18, 90] (pure noise where the noisy count is <= 0)
    """
    keys = release.grouping.keys
    notes = []
    for stat, plan in zip(release.statistics, release.plans(), strict=True):
        if stat.auto:  # its bounds as its first pass found them ("auto")
            stat = stat.with_bounds(release.bounds_found.get(stat.name, {}))
        flag = f"{stat.name}_uninformative"
        if flag not in accuracy.columns or not accuracy[flag].any():
            continue
        rows = accuracy.filter(pl.col(flag))
        shown = [" ".join(str(v) for v in row) for row in rows.select(keys).head(5).iter_rows()]
        groups = ", ".join(shown) + (", ..." if rows.height > 5 else "")
        if stat.kind == "cov":
            what = "its variances, covariance and correlation are"
        else:
            what = f"its {stat.kind} is"
        span = f" [{stat.lower:g}, {stat.upper:g}]" if stat.kind in ("mean", "proportion") else ""
        threshold = getattr(plan, "uninformative_count", None)
        if threshold is None:  # public sizes: the bounded mechanism's error, or a null
            notes.append(
                f"{rows.height} of {accuracy.height} groups ({groups}) for {stat.name}: "
                f"{what} null or uninformative, the 95% error spans the whole range{span}"
            )
            continue
        notes.append(
            f"{rows.height} of {accuracy.height} groups ({groups}) have a noisy count <= "
            f"{math.floor(threshold):,} for {stat.name}: {what} uninformative, the 95% error "
            f"can span the whole range{span} (pure noise where the noisy count is <= 0)"
        )
    return notes
