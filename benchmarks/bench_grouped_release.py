"""Cost of a dpframe grouped release against the plain polars aggregation it wraps.

For 1e7 rows (``--quick``: 1e6) in a Parquet file scanned lazily (so the streaming
engine really streams), and for 1e4 and 1e5 groups, this script times

* plain:   ``lf.group_by("g").agg(pl.len(), pl.col("x").clip(0, 10).sum())``
* release: ``dpframe.group_by(lf, "g", margins=...).agg(dpframe.agg.count(...),
  dpframe.agg.sum("x", lower=0, upper=10, ...))``

the plain query collected with ``engine="streaming"``, the release with ``.collect()``
(always streaming), run alternately (best of N), plus the time of drawing the noise
alone (the two statistics' plans, ``plan_statistic(...).draw``, i.e. ``release_laplace``
on each statistic's vector). Each repeat builds a new release with a fresh accountant: a
release collects once.

Peak memory (``ru_maxrss``) is measured in a fresh subprocess per path and run, so the
paths cannot contaminate each other; the table shows the peak and the part above the
subprocess's peak before the query (interpreter + imports + margins; the release's
figure includes its lazy import of ``randomgen``).

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing or a memory figure.

Run from the repository root::

    .venv/bin/python benchmarks/bench_grouped_release.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

import dpframe
from dpframe.core.randomness import secure_generator
from dpframe.mechanisms.statistics import plan_statistic

EPSILON = 0.5  # per statistic
LOWER, UPPER = 0, 10


def write_data(path: Path, rows: int, groups: int) -> None:
    """``rows`` records: an Int64 key ``g`` uniform over ``groups``, ``x`` in [-2, 12)."""
    rng = np.random.default_rng(12345)
    pl.DataFrame(
        {
            "g": rng.integers(0, groups, rows, dtype=np.int64),
            "x": rng.uniform(-2.0, 12.0, rows),
        }
    ).write_parquet(path)


def margins_for(groups: int) -> pl.DataFrame:
    return pl.DataFrame({"g": np.arange(groups, dtype=np.int64)})


def run_plain(path: Path, margins: pl.DataFrame) -> pl.DataFrame:
    lf = pl.scan_parquet(path)
    return (
        lf.group_by("g")
        .agg(pl.len(), pl.col("x").clip(LOWER, UPPER).sum())
        .collect(engine="streaming")
    )


def run_release(path: Path, margins: pl.DataFrame) -> pl.DataFrame:
    lf = pl.scan_parquet(path)
    acct = dpframe.Accountant(epsilon=1e6)
    release = dpframe.group_by(lf, "g", margins=margins, accountant=acct).agg(
        dpframe.agg.count(epsilon=EPSILON),
        dpframe.agg.sum("x", lower=LOWER, upper=UPPER, epsilon=EPSILON),
    )
    return release.collect()  # always streaming


PATHS: dict[str, Callable[[Path, pl.DataFrame], pl.DataFrame]] = {
    "plain": run_plain,
    "release": run_release,
}


def ratio(a: float, b: float) -> str:
    """``a / b`` formatted, or "n/a" when ``b`` is too small to divide by."""
    return f"{a / b:.2f}" if b >= 1.0 else "n/a"


def maxrss_mib() -> float:
    """This process's peak resident set size so far, in MiB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes vs KiB


def child(path_name: str, data: Path, groups: int) -> None:
    """Subprocess entry: run one path once, print peak RSS before and after (MiB)."""
    margins = margins_for(groups)
    before = maxrss_mib()
    out = PATHS[path_name](data, margins)
    after = maxrss_mib()
    print(f"{before:.1f} {after:.1f} {out.height}")


# Linux carries a process's peak RSS over into a child it spawns (ru_maxrss survives
# fork/vfork + exec), so a child started from this (large) process would report at least
# our own peak. A tiny launcher process in between gives the child a clean floor.
_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def measure_memory(path_name: str, data: Path, groups: int, runs: int) -> tuple[float, float]:
    """Lowest peak RSS over ``runs`` fresh subprocesses: (peak, peak above the pre-query peak)."""
    best_peak = best_delta = float("inf")
    for _ in range(runs):
        cmd = [sys.executable, "-c", _LAUNCHER, sys.executable, __file__, "--child", path_name]
        res = subprocess.run(
            [*cmd, "--data", str(data), "--groups", str(groups)],
            capture_output=True,
            text=True,
            check=True,
        )
        before, after, _ = res.stdout.split()
        best_peak = min(best_peak, float(after))
        best_delta = min(best_delta, float(after) - float(before))
    return best_peak, best_delta


def time_noise(groups: int, rows: int, repeats: int) -> float:
    """Best time of drawing the release's noise alone: both statistics, ``groups`` values."""
    neighbours = dpframe.Accountant(epsilon=1.0).neighbours
    count = dpframe.agg.count(epsilon=EPSILON)
    total = dpframe.agg.sum("x", lower=LOWER, upper=UPPER, epsilon=EPSILON)
    counts = np.full(groups, float(rows // groups))
    sums = counts * 5.0
    p_count, p_sum = plan_statistic(count, neighbours), plan_statistic(total, neighbours)
    exact = {count.part("n"): counts, total.part("sum"): sums}
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        rng = secure_generator()
        p_count.draw(exact, rng)  # release_laplace on the counts
        p_sum.draw(exact, rng)  # release_laplace on the sums
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e6 rows instead of 1e7")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (best kept)")
    parser.add_argument("--mem-runs", type=int, default=2, help="subprocesses per memory figure")
    parser.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.groups)
        return

    rows = 1_000_000 if args.quick else 10_000_000
    print(
        f"bench_grouped_release: numpy {np.__version__}, polars {pl.__version__}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, "
        f"POLARS_MAX_THREADS={pl.thread_pool_size()}, rows={rows:.0e}, "
        f"best of {args.repeats}, memory: min of {args.mem_runs} subprocess(es)"
    )
    timing_rows: list[str] = []
    memory_rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dpframe-bench-") as tmp:
        for groups in (10_000, 100_000):
            data = Path(tmp) / f"data_{groups}.parquet"
            t = time.perf_counter()
            write_data(data, rows, groups)
            written = time.perf_counter() - t
            size_mb = data.stat().st_size / 1e6
            print(f"  wrote {data.name}: {size_mb:.0f} MB in {written:.1f} s", flush=True)
            margins = margins_for(groups)

            plain, release = PATHS["plain"], PATHS["release"]
            # warm up, and sanity: the release has every margin group, even empty ones
            if plain(data, margins).height > groups or release(data, margins).height != groups:
                raise RuntimeError("unexpected number of groups in the output")
            best = {"plain": float("inf"), "release": float("inf")}
            for _ in range(args.repeats):  # alternate: both see the same load
                for name, fn in PATHS.items():
                    t = time.perf_counter()
                    fn(data, margins)
                    best[name] = min(best[name], time.perf_counter() - t)
            noise = time_noise(groups, rows, args.repeats)
            timing_rows.append(
                f"{groups:>8}  {best['plain']:>8.3f}  {best['release']:>9.3f}  "
                f"{best['release'] / best['plain']:>14.2f}  {noise * 1e3:>9.2f}  "
                f"{noise / best['release']:>14.1%}"
            )

            peak_p, delta_p = measure_memory("plain", data, groups, args.mem_runs)
            peak_r, delta_r = measure_memory("release", data, groups, args.mem_runs)
            memory_rows.append(
                f"{groups:>8}  {peak_p:>10.0f}  {peak_r:>12.0f}  {peak_r / peak_p:>14.2f}  "
                f"{delta_p:>11.0f}  {delta_r:>13.0f}  {ratio(delta_r, delta_p):>15}"
            )

    print()
    print("time (s, best of repeats; noise = release_laplace on both statistics, ms)")
    print("  groups   plain s  release s  release/plain   noise ms  noise/release")
    for line in timing_rows:
        print(line)
    print()
    print("peak memory (MiB, ru_maxrss of a fresh subprocess; 'query' = above pre-query peak)")
    print(
        "  groups  plain peak  release peak  release/plain  plain query  release query  "
        "ratio (query)"
    )
    for line in memory_rows:
        print(line)


if __name__ == "__main__":
    main()
