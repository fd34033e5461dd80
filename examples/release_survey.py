"""Publish counts and income sums by region from a Parquet file, with a shared ledger.

Run: .venv/bin/python examples/release_survey.py [output-folder] [--quick]
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
    ledger = folder / "ledger.db"
    ledger.unlink(missing_ok=True)
    acct = dpframe.Accountant.open(ledger, epsilon=1.0)

    with acct:
        release = (
            pl.scan_parquet(source)
            .dp.group_by("region", margins=regions)
            .agg(
                dpframe.agg.count(epsilon=0.4),
                dpframe.agg.sum("income", lower=0, upper=250_000, epsilon=0.4),
            )
        )
        print("plan (nothing spent yet):")
        print(release.summarize().select("statistic", "epsilon", "scale", "error95"))
        table = release.collect()  # streamed, charged once, then noised

    # post-processing is free: a mean from the two noisy statistics
    table = table.with_columns(
        (pl.col("income_sum") / pl.col("count").clip(lower_bound=1)).alias("mean_income")
    )
    out = dpframe.write_parquet(table, folder / "income_by_region.parquet", ledger=release)
    print(table)
    print(f"wrote {out}; spent {acct.spent.epsilon} of {acct.epsilon}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path(tempfile.mkdtemp()))
    parser.add_argument("--quick", action="store_true", help="10,000 respondents")
    args = parser.parse_args()
    main(args.out, rows=10_000 if args.quick else 100_000)
