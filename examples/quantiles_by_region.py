"""Publish the median income and income deciles by region, and the median age of all.

Run: .venv/bin/python examples/quantiles_by_region.py [output-folder] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import polars as pl

import dpframe
from dpframe.datasets import REGIONS, synthetic_survey


def main(folder: Path, rows: int = 100_000) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "survey.parquet"
    synthetic_survey(rows).write_parquet(source)  # the confidential input

    regions = pl.DataFrame({"region": pl.Series(REGIONS, dtype=pl.Enum(REGIONS))})
    acct = dpframe.Accountant(epsilon=1.0)
    with acct:
        release = (
            pl.scan_parquet(source)
            .dp.group_by("region", margins=regions)
            .agg(
                dpframe.agg.median("income", lower=0, upper=250_000, epsilon=0.4),
                dpframe.agg.quantile(
                    "income", [0.1, 0.9], lower=0, upper=250_000, epsilon=0.4, name="income"
                ),
            )
        )
        print("plan (nothing spent yet; error95 is a rank error, in rows of a region):")
        print(release.summarize().select("statistic", "epsilon", "error95", "note"))
        table = release.collect()  # one histogram per region, charged once, then chosen
        print(table)
        print(release.accuracy())
        assert dpframe.check(release).success  # in bounds, no null, q10 <= median <= q90

        ages = dpframe.median(pl.scan_parquet(source), "age", lower=18, upper=90, epsilon=0.2)
        print(ages.collect())  # one row: the median age of every respondent
    print(f"spent {acct.spent.epsilon} of {acct.epsilon}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path(tempfile.mkdtemp()))
    parser.add_argument("--quick", action="store_true", help="10,000 respondents")
    args = parser.parse_args()
    main(args.out, rows=10_000 if args.quick else 100_000)
