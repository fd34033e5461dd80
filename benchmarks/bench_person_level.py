"""Cost of person-level contribution bounding against the plain polars aggregation.

For 1e7 rows, 1e6 people and 1e4 groups (``--quick``: 1e6 rows, 1e5 people, 1e3
groups) in a Parquet file scanned lazily, this script times, alternately (best of N):

* plain:   ``lf.group_by("g").agg(pl.len(), pl.col("x").clip(0, 10).sum())`` -- the
  baseline, what a record-level grouped release aggregates;
* pairs:   ``lf.group_by("pid", "g").agg(pl.len(), pl.col("x").clip(0, 10).sum())`` --
  for context: the one hash aggregation any exact person-level bounding needs;
* fast:    ``PolarsEngine(lf).bounded_grouped_parts(unit, ["g"], parts, ["x"])`` -- the
  bounding plus the exact per-group parts a person-level release of a count and a
  clipped sum needs, by the compiled kernel (``dpframe.engines.bounding_kernel``: one
  streaming read of the person, the keys and the clipped values; SipHash priorities
  keyed from the secure source; a counting partition of the records by person; then one
  pass per cache-sized bucket keeping each person's smallest priorities with their rows
  and sums -- no sort, no shuffle); what a person-level grouped release runs;
* polars:  the same parts by polars alone (``bounded_grouped_parts(..., kernel=False)``:
  the pairs aggregated, then the same rule's choice by segmented minima) -- the path for keys
  without integer codes (floats);
* generic: ``PolarsEngine(lf).bounded(unit, ["g"]).grouped_parts(["g"], parts, ["x"])``
  -- the bounded rows, lazily, under the ordinary aggregation;

with ``unit = PrivacyUnit("pid", max_rows=2, max_groups=3)`` (``--max-rows``,
``--max-groups``). The noise, the accountant and the release's joins onto the margins
are not included (they cost the same as a record-level release's, see
``bench_grouped_release.py``).

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    .venv/bin/python benchmarks/bench_person_level.py [--quick]
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


def write_data(path: Path, rows: int, people: int, groups: int) -> None:
    """``rows`` records: Int64 ``pid`` uniform over ``people``, Int64 ``g`` uniform over
    ``groups``, ``x`` uniform in [-2, 12)."""
    rng = np.random.default_rng(12345)
    pl.DataFrame(
        {
            "pid": rng.integers(0, people, rows, dtype=np.int64),
            "g": rng.integers(0, groups, rows, dtype=np.int64),
            "x": rng.uniform(-2.0, 12.0, rows),
        }
    ).write_parquet(path)


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
    parser.add_argument("--quick", action="store_true", help="1e6 rows instead of 1e7")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (best kept)")
    parser.add_argument("--max-rows", type=int, default=2)
    parser.add_argument("--max-groups", type=int, default=3)
    args = parser.parse_args()
    rows, people, groups = (
        (1_000_000, 100_000, 1_000) if args.quick else (10_000_000, 1_000_000, 10_000)
    )
    unit = PrivacyUnit("pid", max_rows=args.max_rows, max_groups=args.max_groups)
    print(
        f"bench_person_level: numpy {np.__version__}, polars {pl.__version__}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, "
        f"POLARS_MAX_THREADS={pl.thread_pool_size()}, rows={rows:.0e}, people={people:.0e}, "
        f"groups={groups:.0e}, max_rows={unit.max_rows}, max_groups={unit.max_groups}, "
        f"best of {args.repeats}"
    )
    fns = paths(unit)
    with tempfile.TemporaryDirectory(prefix="dpframe-bench-") as tmp:
        data = Path(tmp) / "data.parquet"
        t = time.perf_counter()
        write_data(data, rows, people, groups)
        print(
            f"  wrote {data.name}: {data.stat().st_size / 1e6:.0f} MB in "
            f"{time.perf_counter() - t:.1f} s",
            flush=True,
        )
        for fn in fns.values():  # warm up
            fn(data)
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(args.repeats):  # alternate: every path sees the same load
            for name, fn in fns.items():
                t = time.perf_counter()
                fn(data)
                best[name] = min(best[name], time.perf_counter() - t)
        kept = fns["fast"](data)["__rows"].sum()
    print()
    print(f"kept rows (one run): {kept} of {rows}")
    print("time (s, best of repeats); ratio to plain")
    print("  path        seconds  /plain")
    for name, secs in best.items():
        print(f"  {name:<10} {secs:>8.3f}  {secs / best['plain']:>6.2f}")


if __name__ == "__main__":
    main()
