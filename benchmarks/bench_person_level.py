"""Cost of person-level contribution bounding against the plain polars aggregation.

For 1e7 rows, 1e6 people and 1e4 groups (``--quick``: 1e5 rows, 1e4 people, 1e3
groups) in a Parquet file scanned lazily, with the person ids in three orders -- sorted,
random, and repeated across chunks (ten chunks, each holding rows of every person, sorted
by person within the chunk) -- this script times, alternately (best of N), for each order:

* plain:   ``lf.group_by("g").agg(pl.len(), pl.col("x").clip(0, 10).sum())`` -- the
  baseline, what a record-level grouped release aggregates;
* pairs:   ``lf.group_by("pid", "g").agg(pl.len(), pl.col("x").clip(0, 10).sum())`` --
  for context: the one hash aggregation any exact person-level bounding needs;
* fast:    ``PolarsEngine(lf).bounded_grouped_parts(unit, ["g"], parts, ["x"])`` -- the
  bounding plus the exact per-group parts a person-level release of a count and a
  clipped sum needs, by the compiled kernel (``dpframe.engines.bounding_kernel``: one
  streaming read of the person, the keys and the clipped values; SipHash priorities
  keyed from the secure source; a counting partition of the records by person; one
  pass per cache-sized bucket keeping each person's smallest priorities with their rows
  and sums; the rows of the pairs over ``max_rows`` chosen in the same compiled code --
  no sort, no shuffle); what a person-level grouped release runs;

and, with ``--all``, for the random order only:

* polars:  the same parts by polars alone (``bounded_grouped_parts(..., kernel=False)``:
  the pairs aggregated, then the same rule's choice by segmented minima) -- the path for keys
  without integer codes (floats);
* generic: ``PolarsEngine(lf).bounded(unit, ["g"]).grouped_parts(["g"], parts, ["x"])``
  -- the bounded rows, lazily, under the ordinary aggregation;

with ``unit = PrivacyUnit("pid", max_rows=5, max_groups=3)`` (``--max-rows``,
``--max-groups``). ``--shape uniform`` (the default) draws each row's group uniformly
(a person's ten rows fall in ten groups: ``max_groups`` binds); ``--shape clustered``
draws a person's groups near a home group (half the rows in it, a quarter in the next,
...), so that many pairs hold more than ``max_rows`` rows and both bounds bind. The
noise, the accountant and the release's joins onto the margins are not included (they
cost the same as a record-level release's, see ``bench_grouped_release.py``).

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    .venv/bin/python benchmarks/bench_person_level.py [--quick] [--shape clustered] [--all]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from dpframe.core.units import PrivacyUnit
from dpframe.engines.bounding import bounded_grouped_parts
from dpframe.engines.polars import PolarsEngine, bad_rows, part_values
from dpframe.mechanisms.statistics import count
from dpframe.mechanisms.statistics import sum as stat_sum

LOWER, UPPER = 0, 10
PARTS = [
    *count(epsilon=0.5).parts(False),
    *stat_sum("x", lower=LOWER, upper=UPPER, epsilon=0.5).parts(False),
]


ORDERS = ("sorted", "random", "chunks")


def write_data(path: Path, rows: int, people: int, groups: int, order: str, shape: str) -> None:
    """``rows`` records: Int64 ``pid`` uniform over ``people``, Int64 ``g`` uniform over
    ``groups`` (``shape="uniform"``) or near the person's home group (``"clustered"``),
    ``x`` uniform in [-2, 12); the rows sorted by person, in random order, or in ten
    chunks each sorted by person (``order``)."""
    rng = np.random.default_rng(12345)
    pid = rng.integers(0, people, rows, dtype=np.int64)
    if shape == "uniform":
        g = rng.integers(0, groups, rows, dtype=np.int64)
    else:  # offset 0 with probability 1/2, 1 with 1/4, ...
        g = (pid * 7919 + np.minimum(rng.geometric(0.5, rows) - 1, 5)) % groups
    frame = pl.DataFrame({"pid": pid, "g": g, "x": rng.uniform(-2.0, 12.0, rows)})
    if order == "sorted":
        frame = frame.sort("pid")
    elif order == "chunks":
        chunk = pl.Series(rng.integers(0, 10, rows))
        frame = frame.with_columns(chunk.alias("c")).sort("c", "pid").drop("c")
    frame.write_parquet(path)


def paths(unit: PrivacyUnit) -> dict[str, Callable[[Path], pl.DataFrame]]:
    x = pl.col("x").clip(LOWER, UPPER)

    def plain(p: Path) -> pl.DataFrame:
        q = pl.scan_parquet(p).group_by("g").agg(pl.len(), x.sum())
        return q.collect(engine="streaming")

    def pairs(p: Path) -> pl.DataFrame:
        q = pl.scan_parquet(p).group_by("pid", "g").agg(pl.len(), x.sum())
        return q.collect(engine="streaming")

    def fast(p: Path) -> pl.DataFrame:
        return PolarsEngine(pl.scan_parquet(p)).bounded_grouped_parts(unit, ["g"], PARTS, ["x"])

    def polars_only(p: Path) -> pl.DataFrame:
        eng = PolarsEngine(pl.scan_parquet(p))
        values = {q.name: part_values(q) for q in PARTS if q.op == "sum"}
        counts = [q.name for q in PARTS if q.op == "count"]
        bads = {"__bad__x": bad_rows("x", pl.Float64)}
        return bounded_grouped_parts(eng.frame, unit, ["g"], values, counts, bads, kernel=False)

    def generic(p: Path) -> pl.DataFrame:
        eng = PolarsEngine(pl.scan_parquet(p)).bounded(unit, ["g"])
        return eng.grouped_parts(["g"], PARTS, ["x"])

    return {
        "plain": plain,
        "pairs": pairs,
        "fast": fast,
        "polars": polars_only,
        "generic": generic,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 rows instead of 1e7")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (best kept)")
    parser.add_argument("--max-rows", type=int, default=5)
    parser.add_argument("--max-groups", type=int, default=3)
    parser.add_argument("--shape", choices=["uniform", "clustered"], default="uniform")
    parser.add_argument("--all", action="store_true", help="also the polars-only paths")
    args = parser.parse_args()
    rows, people, groups = (100_000, 10_000, 1_000) if args.quick else (10**7, 10**6, 10**4)
    unit = PrivacyUnit("pid", max_rows=args.max_rows, max_groups=args.max_groups)
    print(
        f"bench_person_level: numpy {np.__version__}, polars {pl.__version__}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, "
        f"POLARS_MAX_THREADS={pl.thread_pool_size()}, rows={rows:.0e}, people={people:.0e}, "
        f"groups={groups:.0e}, max_rows={unit.max_rows}, max_groups={unit.max_groups}, "
        f"shape={args.shape}, best of {args.repeats}"
    )
    fns = paths(unit)
    results: list[tuple[str, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="dpframe-bench-") as tmp:
        for order in ORDERS:
            data = Path(tmp) / f"{order}.parquet"
            write_data(data, rows, people, groups, order, args.shape)
            names = ["plain", "pairs", "fast"]
            if args.all and order == "random":
                names += ["polars", "generic"]
            for name in names:  # warm up
                fns[name](data)
            best = dict.fromkeys(names, float("inf"))
            for _ in range(args.repeats):  # alternate: every path sees the same load
                for name in names:
                    t = time.perf_counter()
                    fns[name](data)
                    best[name] = min(best[name], time.perf_counter() - t)
            kept = int(fns["fast"](data)["__rows"].sum())
            print(f"  {order}: kept rows (one run) {kept} of {rows}", flush=True)
            results += [(order, n, best[n], best[n] / best["plain"]) for n in names]
    print()
    print("time (s, best of repeats); ratio to plain in the same order")
    print("  order    path        seconds  /plain")
    for order, name, secs, ratio in results:
        print(f"  {order:<8} {name:<10} {secs:>8.3f}  {ratio:>6.2f}")


if __name__ == "__main__":
    main()
