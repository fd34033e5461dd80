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
  clipped sum needs, by the compiled kernel (``dpframe.engines.bounding_kernel``: at
  1e7 rows under the default memory setting, a streaming read of the person and key
  codes -- their ranges and the records of each bucket of persons -- then one of the
  records in batches, each placed in its bucket by SipHash priority keyed from the
  secure source as it arrives; one pass per cache-sized bucket keeping each person's
  smallest priorities with their rows and sums; the rows of the pairs over
  ``max_rows`` chosen in the same compiled code -- no sort, no shuffle); what a
  person-level grouped release runs;

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

With ``--large ROWS`` (e.g. ``--large 5e7``; ``--quick`` adds two small ones, 2e5 rows
at a 1 MiB setting, so that the mode keeps running in the suite) it measures out of core
instead: ``ROWS`` rows, ``ROWS / 10`` people, 1e4 groups, in random order (or sorted by
person, ``--order sorted``), each path in a fresh process (``plain``; ``fast``, the kernel
under the default memory setting -- in random order partitioned by person and spilled
when the records pass it, sorted bounded in one read, window by window,
``dpframe.engines.bounding_clustered``; ``memory``, the kernel with every record in
memory, with ``--in-memory``), printing each path's wall time and peak RSS
(``ru_maxrss`` of its process, imports included) and the ratios to ``plain`` from the
same run.

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    .venv/bin/python benchmarks/bench_person_level.py [--quick] [--shape clustered] [--all]
    .venv/bin/python benchmarks/bench_person_level.py --large 5e7 [--in-memory] [--order sorted]
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


def write_large(
    path: Path, rows: int, people: int, groups: int, shape: str, order: str = "random"
) -> None:
    """:func:`write_data` in random order, or sorted by person, written in slices of 1e7
    rows (the generator's memory stays flat; sorted: each slice holds its own persons,
    in order)."""
    step = 10**7
    slices = -(-rows // step)
    with tempfile.TemporaryDirectory(prefix="dpframe-bench-parts-") as tmp:
        files = []
        for j, lo in enumerate(range(0, rows, step)):
            part = Path(tmp) / f"{j:04d}.parquet"
            rng = np.random.default_rng(12345 + j)
            n = min(step, rows - lo)
            if order == "sorted":  # persons j / slices of the way up, sorted
                per = max(people // slices, 1)
                pid = np.sort(rng.integers(j * per, (j + 1) * per, n, dtype=np.int64))
            else:
                pid = rng.integers(0, people, n, dtype=np.int64)
            if shape == "uniform":
                g = rng.integers(0, groups, n, dtype=np.int64)
            else:
                g = (pid * 7919 + np.minimum(rng.geometric(0.5, n) - 1, 5)) % groups
            pl.DataFrame({"pid": pid, "g": g, "x": rng.uniform(-2.0, 12.0, n)}).write_parquet(part)
            files.append(part)
        pl.scan_parquet(files).sink_parquet(path)


def run_one(name: str, data: Path, unit: PrivacyUnit) -> None:
    """One path, in this process: print its seconds and peak RSS (MiB) as one line."""
    if name == "memory":  # every record in memory, whatever the setting
        os.environ["DPFRAME_BOUNDING_MEMORY"] = str(2**50)
    fns = paths(unit)
    fn = fns["fast" if name == "memory" else name]
    # the kernels loaded (or compiled) first, the spill's and the oversized pairs' too
    warm = data.with_name("warm.parquet")
    if not warm.exists():
        write_data(warm, 20_000, 2_000, 100, "random", "clustered")
    setting = os.environ.get("DPFRAME_BOUNDING_MEMORY")
    for memory in (str(2**16), str(2**50)):
        os.environ["DPFRAME_BOUNDING_MEMORY"] = memory
        fn(warm)
    os.environ.pop("DPFRAME_BOUNDING_MEMORY")
    if setting is not None:
        os.environ["DPFRAME_BOUNDING_MEMORY"] = setting
    t = time.perf_counter()
    out = fn(data)
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{secs:.6f} {rss:.1f} {out.height}", flush=True)


def large(args: argparse.Namespace, rows: int, unit: PrivacyUnit) -> None:
    """The out-of-core measure: each path in a fresh process, time and peak RSS."""
    people, groups = max(rows // 10, 1), 10**4
    names = ["plain", "fast"] + (["memory"] if args.in_memory else [])
    print(
        f"bench_person_level --large: rows={rows:.0e}, people={people:.0e}, "
        f"groups={groups:.0e}, order={args.order}, shape={args.shape}, "
        f"max_rows={unit.max_rows}, "
        f"max_groups={unit.max_groups}, DPFRAME_BOUNDING_MEMORY="
        f"{os.environ.get('DPFRAME_BOUNDING_MEMORY', 'default')}, best of {args.repeats}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="dpframe-bench-") as tmp:
        data = Path(tmp) / "large.parquet"
        write_large(data, rows, people, groups, args.shape, args.order)
        best = {n: (float("inf"), 0.0) for n in names}
        for _ in range(args.repeats):  # alternate: every path sees the same load
            for name in names:
                cmd = [
                    sys.executable,
                    __file__,
                    "--one",
                    name,
                    "--data",
                    str(data),
                    "--max-rows",
                    str(unit.max_rows),
                    "--max-groups",
                    str(unit.max_groups),
                ]
                res = subprocess.run(cmd, capture_output=True, text=True, check=True)
                secs, rss, _ = res.stdout.split()[-3:]
                best[name] = (min(best[name][0], float(secs)), max(best[name][1], float(rss)))
    print("  path     seconds  /plain   peak RSS (MiB)  /plain")
    for name in names:
        secs, rss = best[name]
        print(
            f"  {name:<8} {secs:>7.2f}  {secs / best['plain'][0]:>6.2f}  {rss:>14.0f}  "
            f"{rss / best['plain'][1]:>6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 rows instead of 1e7")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (best kept)")
    parser.add_argument("--max-rows", type=int, default=5)
    parser.add_argument("--max-groups", type=int, default=3)
    parser.add_argument("--shape", choices=["uniform", "clustered"], default="uniform")
    parser.add_argument("--all", action="store_true", help="also the polars-only paths")
    parser.add_argument("--large", type=float, help="out of core: this many rows, e.g. 5e7")
    parser.add_argument("--in-memory", action="store_true", help="--large: also all in memory")
    parser.add_argument(
        "--order",
        choices=["random", "sorted"],
        default="random",
        help="--large: the person ids' order (sorted: bounded in one read, not spilled)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process: one path
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        unit = PrivacyUnit("pid", max_rows=args.max_rows, max_groups=args.max_groups)
        run_one(args.one, Path(args.data), unit)
        return
    if args.large:
        unit = PrivacyUnit("pid", max_rows=args.max_rows, max_groups=args.max_groups)
        large(args, int(args.large), unit)
        return
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
    if args.quick:  # the out-of-core mode too, small: spilled, then sorted (one read)
        os.environ["DPFRAME_BOUNDING_MEMORY"] = str(2**20)
        args.repeats, args.in_memory = 1, True
        for args.order in ("random", "sorted"):
            print()
            large(args, 200_000, unit)


if __name__ == "__main__":
    main()
