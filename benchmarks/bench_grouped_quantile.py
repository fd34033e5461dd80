"""A grouped median and quartiles against polars' own quantiles, same run (issue 34).

1e7 rows in 1e4 groups (``--quick``: 1e5 rows in 1e2 groups): the time of a dpframe
grouped release of ``dpframe.agg.median`` and ``dpframe.agg.quantile`` (quartiles) --
``collect()``, from the records to the released table: the engine's histogram on the
grid (1000 bins), the driver's dense (groups, bins) counts, the charge, the exact
ApproximateQuantiles draw on the secure source -- against polars'
``group_by().agg(pl.col(x).median(), pl.col(x).quantile(q) ...)`` on the same frame. Both
run alternately so they see the same machine load; the best of ``--repeats`` runs
(default 3) is printed with the ratio dpframe/polars (the issue's target: at most 3).

Timings on a shared machine are noisy: read the ratio, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    python benchmarks/bench_grouped_quantile.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

import dpframe

QUARTILES = [0.25, 0.5, 0.75]
LOWER, UPPER = 0.0, 200_000.0


def seconds(work: Callable[[], object]) -> float:
    """Wall time of one call."""
    t = time.perf_counter()
    work()
    return time.perf_counter() - t


def native(frame: pl.DataFrame) -> pl.DataFrame:
    """polars' own median and quartiles per group (exact, no privacy)."""
    x = pl.col("income")
    return (
        frame.lazy()
        .group_by("g")
        .agg(x.median().alias("median"), *[x.quantile(q).alias(f"q{q}") for q in QUARTILES])
        .collect()
    )


def released(frame: pl.DataFrame, margins: pl.DataFrame) -> pl.DataFrame:
    """dpframe's grouped median and quartiles, collected (charged once, secure noise)."""
    with dpframe.Accountant(epsilon=2.0):
        return (
            dpframe.group_by(frame, "g", margins=margins)
            .agg(
                dpframe.agg.median("income", lower=LOWER, upper=UPPER, epsilon=1.0),
                dpframe.agg.quantile("income", QUARTILES, lower=LOWER, upper=UPPER, epsilon=1.0),
            )
            .collect()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 rows, 1e2 groups")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per timing (best kept)")
    args = parser.parse_args()
    rows, groups = (100_000, 100) if args.quick else (10_000_000, 10_000)
    print(
        f"bench_grouped_quantile: polars {pl.__version__}, numpy {np.__version__}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, {rows} rows, "
        f"{groups} groups, median + quartiles, best of {args.repeats}"
    )
    rng = np.random.default_rng(0)
    frame = pl.DataFrame(
        {
            "g": rng.integers(0, groups, rows, dtype=np.int64),
            "income": rng.lognormal(10.5, 0.6, rows),
        }
    )
    margins = pl.DataFrame({"g": np.arange(groups, dtype=np.int64)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        released(frame.head(1000), margins)  # warm up (imports)
    ours = theirs = float("inf")
    for _ in range(args.repeats):  # alternately: both see the same load; best kept
        ours = min(ours, seconds(lambda: released(frame, margins)))
        theirs = min(theirs, seconds(lambda: native(frame)))
    print(f"{'case':<40}{'dpframe s':>11}{'polars s':>10}{'ratio':>8}")
    print(f"{'median + quartiles by group':<40}{ours:>11.3f}{theirs:>10.3f}{ours / theirs:>8.2f}")


if __name__ == "__main__":
    main()
