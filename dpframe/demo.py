"""The demo job: a small end-to-end release on the shipped synthetic survey.

Run it with ``dpframe demo`` (or ``make demo``). It writes the confidential survey to
Parquet, opens a persistent ledger, shows the plan (cost and expected error) without
spending, then releases, all from the Parquet file:

* counts and mean incomes by region x age band, over public margins (streaming; the
  region "Islands" has no respondent and is released all the same);
* the national mean scores, kept inside [0, 10] by the truncated Laplace mechanism;
* the share of each age band, summing to 1;
* PRAM'd microdata: every respondent's region and age band post-randomized
  (``.dp.pram``, streamed from Parquet to Parquet), and the region shares estimated
  back from that file alone (its provenance carries the PRAM designs);

writes the released tables to Parquet with their ledger entries in the metadata, and
leaves the ledger file next to them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl

import dpframe
from dpframe.datasets import AGE_BANDS, CENSUS_REGION_SHARES, REGIONS, synthetic_survey

__all__ = ["DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    """Where the demo wrote its outputs, and what it spent."""

    folder: Path
    survey: Path
    ledger: Path
    grouped: Path
    means: Path
    shares: Path
    microdata: Path
    plan: pl.DataFrame
    grouped_release: pl.DataFrame
    means_release: pl.DataFrame
    shares_release: pl.DataFrame
    region_estimate: pl.DataFrame
    accountant: dpframe.Accountant


def run_demo(out: str | Path = "out/demo", n: int = 200_000) -> DemoResult:
    """Run the demo release into ``out`` (replaced if it exists) and return its outputs.

    Examples
    --------
    >>> import tempfile
    >>> result = run_demo(tempfile.mkdtemp() + "/demo", n=5_000)
    >>> round(result.accountant.spent.epsilon, 6)
    1.9
    """
    folder = Path(out)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)

    survey_path = folder / "survey.parquet"  # the confidential input
    survey = synthetic_survey(n)
    survey.write_parquet(survey_path)
    n_public = survey.height  # the survey's size is published with it: public

    acct = dpframe.Accountant.open(folder / "ledger.json", epsilon=2.0)
    margins = pl.DataFrame({"region": pl.Series(REGIONS, dtype=pl.Enum(REGIONS))}).join(
        pl.DataFrame({"age_band": pl.Series(AGE_BANDS, dtype=pl.Enum(AGE_BANDS))}), how="cross"
    )

    with acct:
        grouped = dpframe.group_by(
            pl.scan_parquet(survey_path), ["region", "age_band"], margins=margins
        ).agg(
            dpframe.agg.count(epsilon=0.3),
            dpframe.agg.mean("income", lower=0, upper=200_000, epsilon=0.3),
        )
        plan = grouped.summarize()
        grouped_out = grouped.collect(engine="streaming")

        exact_means = pl.scan_parquet(survey_path).select(
            pl.col("satisfaction").clip(0, 10).mean(), pl.col("trust").clip(0, 10).mean()
        )
        scores = exact_means.unpivot(variable_name="score", value_name="mean")
        means_expr = pl.col("mean").dp.truncated_laplace(
            0.2,  # epsilon
            0.0,  # the scores' bounds: a released mean stays inside them
            10.0,
            dpframe.sensitivity.mean(0, 10, n_public),  # n is public
            composition="sequential",  # both means describe the same respondents
        )
        means_out = scores.with_columns(means_expr).collect()
        shares = dpframe.proportions(
            pl.scan_parquet(survey_path), "age_band", epsilon=0.1, n=n_public
        )

        # microdata: only post-randomized columns leave; region's matrix is optimised for
        # the public census shares, age band's is k-ary randomized response
        microdata_path = dpframe.sink_parquet(
            pl.scan_parquet(survey_path).select(
                pl.col("region").dp.pram(0.5, prior=CENSUS_REGION_SHARES),
                pl.col("age_band").dp.pram(0.5),
            ),
            folder / "microdata.parquet",
        )
    provenance = dpframe.read_provenance(microdata_path)
    estimate = dpframe.pram.estimate(
        pl.read_parquet(microdata_path)["region"], provenance.pram_designs["region"]
    )
    region_estimate = pl.DataFrame(
        {
            "region": list(REGIONS),
            "estimated_share": estimate.p_simplex,
            "unbiased": estimate.p_hat,
            "standard_error": estimate.standard_errors,
        }
    )

    grouped_path = dpframe.write_parquet(grouped_out, folder / "grouped.parquet", ledger=grouped)
    means_path = dpframe.write_parquet(means_out, folder / "means.parquet", ledger=acct.ledger[2:3])
    shares_path = dpframe.write_parquet(shares.frame, folder / "shares.parquet", ledger=shares)
    return DemoResult(
        folder=folder,
        survey=survey_path,
        ledger=folder / "ledger.json",
        grouped=grouped_path,
        means=means_path,
        shares=shares_path,
        microdata=microdata_path,
        plan=plan,
        grouped_release=grouped_out,
        means_release=means_out,
        shares_release=shares.frame,
        region_estimate=region_estimate,
        accountant=acct,
    )
