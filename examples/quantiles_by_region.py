"""Median income and income deciles by region, and the median age of all respondents.

Run: .venv/bin/python examples/quantiles_by_region.py [output-folder] [--quick]

Each region's incomes are counted on a 1000-bin grid between the public bounds; the
median and the deciles are then chosen from those counts (ApproximateQuantiles, an exact
exponential mechanism at each level), every region released, for the epsilon each statistic states.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import polars as pl

import dpframe
from dpframe.datasets import REGIONS, synthetic_survey

INCOME = {"lower": 0, "upper": 250_000}


def release_quantiles(survey: pl.LazyFrame) -> None:
    """Plan, release and check the quantiles of ``survey`` (spending 1.0 in all)."""
    regions = pl.DataFrame({"region": pl.Series(REGIONS, dtype=pl.Enum(REGIONS))})
    with dpframe.Accountant(epsilon=1.0) as acct:
        release = survey.dp.group_by("region", margins=regions).agg(
            dpframe.agg.median("income", **INCOME, epsilon=0.4),
            dpframe.agg.quantile("income", [0.1, 0.9], **INCOME, epsilon=0.4, name="income"),
        )
        print("plan (nothing spent yet; error95 is a rank error, in rows of a region):")
        print(release.summarize().select("statistic", "epsilon", "error95", "note"))
        print(release.collect())  # one histogram per region, charged once, then chosen
        print(release.accuracy())
        assert dpframe.check(release).success  # in bounds, no null, q10 <= q90
        ages = survey.dp.median("age", lower=18, upper=90, epsilon=0.2)
        print(ages.collect())  # one row: the median age of every respondent
        print(f"spent {acct.spent.epsilon} of {acct.epsilon}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--quick"]
    out = Path(args[0]) if args else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    synthetic_survey(10_000 if "--quick" in sys.argv else 100_000).write_parquet(
        out / "survey.parquet"
    )
    release_quantiles(pl.scan_parquet(out / "survey.parquet"))
