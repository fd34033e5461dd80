"""PRAM over a large Parquet file, streamed: time and peak memory against plain polars.

A Parquet file of ``--rows`` records (default 5e7; ``--quick``: 2e6) with a String column
``c`` of S categories (default 10; ``--categories``) and an Int64 column ``k``
(S = 1000 codes) is written in row groups with pyarrow (the generator never holds the
whole file). Then, each in a fresh subprocess started through a tiny launcher (so peak
RSS is the path's own: Linux carries a process's peak RSS into the children it spawns,
and the launcher keeps this process's -- the data generator's -- out of the figures), it
runs

* ``copy``: ``pl.scan_parquet(src).select("c", "k").sink_parquet(dst)`` -- the floor
  of reading and writing the same data with polars' streaming engine;
* ``pram``: ``dpframe.sink_parquet(scan.select(pl.col("c").dp.pram(...),
  pl.col("k").dp.pram(...)), dst)``, whose dry validation pass (one read more than the
  copy) is the privacy check and cannot be skipped (there is no ``validate=`` any more);

and prints the wall time, the ratio to ``copy``, and the peak RSS (``ru_maxrss`` of the
child). The issue's memory goal: 5e7 rows under 0.5 GB peak. Timings on a shared
2-core machine are noisy: read ratios; nothing here asserts anything.

Run from the repository root::

    .venv/bin/python benchmarks/bench_pram_stream.py [--quick] [--rows N] [--categories S]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = r"""
import resource, sys, time, warnings
import polars as pl
import dpframe

mode, src, dst, s = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cats = [f"cat{i:04d}" for i in range(s)]
lf = pl.scan_parquet(src)
t = time.perf_counter()
if mode == "copy":
    lf.select("c", "k").sink_parquet(dst)
else:
    acct = dpframe.Accountant(epsilon=10.0)
    q = lf.select(
        pl.col("c").dp.pram(1.0, categories=cats, accountant=acct),
        pl.col("k").dp.pram(1.0, categories=list(range(1000)), accountant=acct),
    )
    dpframe.sink_parquet(q, dst)  # its dry pass (the privacy check) always runs
    assert len(acct.ledger) == 2, acct.ledger
elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB on Linux
print(f"{elapsed:.3f} {peak:.1f}")
"""


def write_data(path: Path, rows: int, s: int, chunk: int = 2_000_000) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2026)
    cats = np.array([f"cat{i:04d}" for i in range(s)])
    p = rng.dirichlet(np.ones(s))
    schema = pa.schema([("c", pa.string()), ("k", pa.int64())])
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        done = 0
        while done < rows:
            n = min(chunk, rows - done)
            c = cats[rng.choice(s, size=n, p=p)]
            k = rng.integers(0, 1000, size=n)
            w.write_table(pa.table({"c": c, "k": k}, schema=schema), row_group_size=250_000)
            done += n


# Linux carries a process's peak RSS over into a child it spawns (ru_maxrss survives
# fork/vfork + exec), so a child started from this process (which generated the data)
# would report at least our own peak. A tiny launcher in between gives it a clean floor.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def run(mode: str, src: Path, dst: Path, s: int) -> tuple[float, float]:
    dst.unlink(missing_ok=True)  # dpframe never writes over a file it did not write
    child = [sys.executable, "-W", "ignore", "-c", CHILD, mode, str(src), str(dst), str(s)]
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *child],
        capture_output=True,
        text=True,
        check=True,
    )
    t, peak = out.stdout.split()
    return float(t), float(peak)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--categories", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    rows = args.rows or (2_000_000 if args.quick else 50_000_000)
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs; rows={rows:,}")
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "src.parquet", Path(tmp) / "dst.parquet"
        t = time.perf_counter()
        write_data(src, rows, args.categories)
        print(
            f"wrote {src.stat().st_size / 2**20:.0f} MiB in {time.perf_counter() - t:.1f} s "
            f"(c: S={args.categories} strings, k: S=1000 ints)"
        )
        results: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.repeats):
            for mode in ("copy", "pram"):
                results.setdefault(mode, []).append(run(mode, src, dst, args.categories))
        base = min(t for t, _ in results["copy"])
        print(f"{'path':<18}{'best time (s)':>14}{'x copy':>9}{'peak RSS (MiB)':>16}")
        for mode, rs in results.items():
            best = min(t for t, _ in rs)
            peak = max(p for _, p in rs)
            print(f"{mode:<18}{best:>14.2f}{best / base:>9.2f}{peak:>16.0f}")


if __name__ == "__main__":
    main()
