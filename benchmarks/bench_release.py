"""The release of the example spec over a large Parquet file: time and peak memory.

The issue's goal (issue 36): ``dpframe release`` of the example spec
(``dpframe/data/demo_release.toml``: grouped releases -- counts, mean and median incomes and
a covariance by region x age band, counts by privately selected ages, a person-level
(household) release --, PRAM'd microdata of two columns, the age-band shares, a 2 x 2
covariance matrix) over 5e7 and 1e8 rows within 1 GB peak RSS, flat in the rows, and within
2.5x the I/O floor.

The synthetic survey (``dpframe.datasets.synthetic_survey``, which materialises its rows)
is generated in chunks of 1e6 rows, one seed per chunk, and appended to one Parquet file
with pyarrow's ``ParquetWriter`` (one row group per chunk, or ``--row-group-size``; the
Enum dtypes survive). The
demo spec is copied next to it. Then, each in a fresh subprocess started through a tiny
launcher (Linux carries a process's peak RSS into the children it spawns, so the launcher
keeps the generator's memory out of the figures), it measures wall time and peak RSS
(``ru_maxrss`` of the launcher's children):

* ``baseline``: plain polars, streaming, doing comparable work without privacy: the
  grouped aggregation of the grouped release (count, clipped income sum, the five sums
  of the covariance), the sink of the two microdata columns to Parquet, the age-band
  counts and the 2 x 2 covariance: four passes over the input (the release reads it once
  per release to compute and check that release's exact inputs -- the PRAM's are the
  category counts of its columns -- before the one charge, then once more for the PRAM
  sink, and counts the PRAM'd output for its check);
* ``I/O floor``: reading the input once (every column, a streaming ``min`` of each) and
  writing an output as large as the release's (the two microdata columns, sunk to Parquet);
* ``read``: reading the input once (every column, a streaming ``min`` of each): what each
  release is compared with (its ``prepare`` and ``charge + draw`` steps, below);
* ``plan``: ``dpframe plan spec.toml`` (reads the schema and row count only);
* ``import GE``: ``import dpframe, great_expectations`` -- the floor the check step adds;
* ``release``: ``dpframe release spec.toml --no-progress`` (fresh ledger each run; Great
  Expectations is imported by the checker process the job starts, meanwhile: the peak is
  the highest of the job's and the checker's, each process's own);
* ``release, GE in job``: the same command with the checks in the job's own process (no
  checker process: Great Expectations imported when the first check runs, as before);
* ``release, no checks``: the same job through ``dpframe.jobs.run`` with the check step
  (the checker process, ``validate``, ``save_check`` and the count of the PRAM'd output
  that feeds the check) replaced by no-ops in that subprocess (Great Expectations never
  imported): the release's own peak.

and prints the ratios to the baseline and to the I/O floor, and each path's CPU (user +
system core-seconds of every process and thread under it, the checker included) with the
cores it kept busy: no schedule runs a path in less than its CPU over the machine's
cores, the bound it prints for the release. Then (unless ``--no-steps``)
``dpframe release`` runs once more (``--steps-runs`` times) in a subprocess that wraps
every step of the job (``dpframe.jobs.job``; in that subprocess only, the library is not
changed) to attribute the peak: for each step, the RSS when it starts and ends, the
highest RSS sampled during it (every 5 ms), ``ru_maxrss`` when it ends and the CPU of the
job's process during it (every thread); and the checker
process's own peak.

The machine is shared and noisy: read the ratios; nothing here asserts anything.

Run from the repository root::

    .venv/bin/python benchmarks/bench_release.py [--quick] [--rows N] [--repeats N] [--no-steps]

``--repeats`` (default 2) runs every path that many times, alternately; the best time and
the lowest and highest peak are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MIB = 1e9 / 2**20  # 1 GB
GOAL_FLOOR = 2.5  # x the I/O floor

LAUNCHER = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
elapsed = time.perf_counter() - t
used = resource.getrusage(resource.RUSAGE_CHILDREN)
peak = used.ru_maxrss / 1024  # KiB -> MiB
cpu = used.ru_utime + used.ru_stime  # every thread of every process under it (reaped)
print(json.dumps({"rc": p.returncode, "time": elapsed, "peak": peak, "cpu": cpu,
                  "stdout": p.stdout, "stderr": p.stderr[-3000:]}))
"""

BASELINE = r"""
import sys
import polars as pl

src, dst = sys.argv[1], sys.argv[2]
lf = pl.scan_parquet(src)
s = pl.col("satisfaction").clip(0, 10)
t = pl.col("trust").clip(0, 10)
lf.group_by("region", "age_band").agg(
    pl.len(),
    pl.col("income").clip(0, 200_000).sum(),
    s.sum().alias("s"), t.sum().alias("t"), (s * s).sum().alias("ss"),
    (t * t).sum().alias("tt"), (s * t).sum().alias("st"),
).collect(engine="streaming")
lf.select("region", "age_band").sink_parquet(dst)
lf.group_by("age_band").agg(pl.len()).collect(engine="streaming")
lf.select(pl.cov(s, t).alias("st"), s.var().alias("ss"), t.var().alias("tt")).collect(
    engine="streaming"
)
"""

IN_JOB = r"""
import sys
import dpframe.jobs.job as job
from dpframe.cli import app

job.start_checker = lambda: False  # this subprocess only: the checks run in the job's process
app(["release", sys.argv[1], "--no-progress"], standalone_mode=False)
"""

READ = r"""
import sys
import polars as pl

pl.scan_parquet(sys.argv[1]).select(pl.all().min()).collect(engine="streaming")
"""

IO_FLOOR = r"""
import sys
import polars as pl

src, dst = sys.argv[1], sys.argv[2]
lf = pl.scan_parquet(src)
lf.select(pl.all().min()).collect(engine="streaming")
lf.select("region", "age_band").sink_parquet(dst)
"""

NO_CHECKS = r"""
import sys
import dpframe.jobs.job as job
from dpframe.engines.polars import PolarsEngine
from dpframe.jobs import load_spec, run
from dpframe.jobs.checks import CheckResult

# this subprocess only: the check step is a no-op (Great Expectations is never imported,
# no checker started), and so is the count of the PRAM'd output, which only feeds its check
job.start_checker = lambda: False
job.validate = lambda suite: CheckResult(suite.release, True, [], {}, {}, 0)
job.save_check = lambda result, folder, data_docs=False: []
PolarsEngine.written_counts = lambda self, path, columns: {}
result = run(load_spec(sys.argv[1]), progress=False)
print(f"published {len(result.outputs)} releases, epsilon {result.epsilon:g}")
"""

IMPORT_GE = "import dpframe, polars, great_expectations"

STEPS = r"""
import json, resource, sys, threading, time
from pathlib import Path

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

def maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

steps, stack = [], []
sampled = [0.0]
stop = threading.Event()

def sampler():
    while not stop.is_set():
        r = rss()
        if r > sampled[0]:
            sampled[0] = r
        time.sleep(0.005)

def wrap(module, name, label, once=None):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        if once is not None and once in sys.modules:  # record the first (real) import only
            return real(*args, **kwargs)
        what = label(args, kwargs) if callable(label) else label
        outer = sampled[0]
        sampled[0] = start = rss()
        t = time.perf_counter()
        c = time.process_time()
        stack.append(what)
        try:
            return real(*args, **kwargs)
        finally:
            end = rss()
            stack.pop()
            steps.append({"step": what, "depth": len(stack), "t0": t, "start": start, "end": end,
                          "sampled": max(sampled[0], end), "maxrss": maxrss(),
                          "time": time.perf_counter() - t, "cpu": time.process_time() - c})
            sampled[0] = max(outer, sampled[0])
    setattr(module, name, wrapper)

base = {"step": "interpreter + polars + dpframe + cli", "start": rss(), "maxrss": maxrss()}
import dpframe, dpframe.jobs, dpframe.jobs.job as job, dpframe.jobs.checks as checks
import dpframe.jobs.checker as checker
import dpframe.jobs.planning as planning
from dpframe.engines.polars import PolarsEngine
from dpframe.polars.pram import MicrodataRelease
from dpframe.polars.release import Release
from dpframe.cli import app
base.update(end=rss(), maxrss=maxrss())
threading.Thread(target=sampler, daemon=True).start()
wrap(dpframe.jobs, "plan", "plan (printed by the command, then run)")
wrap(planning, "build_releases", "build the releases, once (public facts only)")
wrap(job, "ensure_checks_available", "ensure the checks can run")
wrap(job, "start_checker", "start the checker process")
wrap(PolarsEngine, "rows", "input rows")
wrap(Release, "prepare", lambda a, k: f"prepare {a[0].name} ({a[0].kind}): exact inputs")
wrap(Release, "draw", lambda a, k: f"charge + draw {a[0].name} (first passes too)")
wrap(MicrodataRelease, "write_armed", lambda a, k: f"write {Path(str(a[2])).name} (PRAM sink)")
wrap(job, "write_parquet", lambda a, k: f"write {a[1].name}")
wrap(PolarsEngine, "written_counts", lambda a, k: f"count {Path(str(a[1])).name} (for its check)")
wrap(checks, "_gx", "import great_expectations (in the job)", once="great_expectations")
wrap(job, "validate", lambda a, k: f"check {a[0].release} ({a[0].kind})")
wrap(job, "save_check", lambda a, k: f"save check {a[0].release}")
t = time.perf_counter()
app(["release", sys.argv[1], "--no-progress"], standalone_mode=False)  # dpframe release
stop.set()
elapsed = time.perf_counter() - t
running = checker._checker
child = None
if running is not None and running.alive():  # its own peak (VmHWM), before it is stopped
    with open(f"/proc/{running.process.pid}/status") as f:
        child = next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmHWM"))
print(json.dumps({"base": base, "steps": steps, "time": elapsed, "maxrss": maxrss(),
                  "checker": child}))
"""


def write_survey(
    path: Path, rows: int, chunk: int = 1_000_000, row_group_size: int | None = None
) -> None:
    """The synthetic survey, ``chunk`` rows at a time (one seed each), to one Parquet file;
    each chunk's household ids follow the last chunk's (a household stays 1-5 respondents,
    as in one ``synthetic_survey`` of all the rows, not one id shared across the chunks)."""
    import polars as pl
    import pyarrow.parquet as pq

    from dpframe.datasets import synthetic_survey

    writer = None
    done = 0
    households = 0  # each chunk's households numbered after the last chunk's
    try:
        for i in range(-(-rows // chunk)):
            n = min(chunk, rows - done)
            frame = synthetic_survey(n, seed=20261122 + i)
            frame = frame.with_columns(pl.col("household") + households)
            households = int(frame["household"].max()) + 1  # type: ignore[arg-type]
            table = frame.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=row_group_size or chunk)
            done += n
    finally:
        if writer is not None:
            writer.close()


def measure(cmd: list[str], cwd: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *cmd], capture_output=True, text=True, cwd=cwd
    )
    res = json.loads(out.stdout)
    if res["rc"] != 0:
        raise RuntimeError(f"{cmd} exited {res['rc']}:\n{res['stdout']}\n{res['stderr']}")
    return res


def fresh(folder: Path) -> None:
    """Forget the previous run: the ledger (the spec's budget fits one run) and outputs."""
    (folder / "ledger.db").unlink(missing_ok=True)
    shutil.rmtree(folder / "released", ignore_errors=True)


def steps_table(folder: Path, spec: Path, src: Path, read: float) -> None:
    """The per-step breakdown of one release, and each release's time against one read
    of the input: the fastest of ``read`` and two more reads, just before and after it
    (the machine's load changes between the paths' runs and this one)."""
    reads = [read]
    reads.append(measure([sys.executable, "-c", READ, str(src)], folder)["time"])
    fresh(folder)
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-c", STEPS, str(spec)],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    res = json.loads(out.stdout)
    if res["rc"] != 0:
        raise RuntimeError(res["stderr"])
    doc = json.loads(res["stdout"].strip().splitlines()[-1])
    reads.append(measure([sys.executable, "-c", READ, str(src)], folder)["time"])
    read = min(reads)
    print(
        f"\nwhere the release's memory goes (one more run, every job step wrapped; "
        f"{doc['time']:.1f} s, peak {doc['maxrss']:.0f} MiB; RSS in MiB):"
    )
    if doc.get("checker") is not None:
        print(f"(the checker process, beside it: peak {doc['checker']:.0f} MiB)")
    else:
        print("(no checker process: the checks ran in the job's process)")
    print(
        f"{'step':<52}{'time (s)':>9}{'CPU (s)':>9}{'RSS start':>11}{'RSS end':>9}"
        f"{'max in step':>13}{'ru_maxrss':>11}"
    )
    b = doc["base"]
    print(
        f"{b['step']:<52}{'':>9}{'':>9}{b['start']:>11.0f}{b['end']:>9.0f}{b['end']:>13.0f}"
        f"{b['maxrss']:>11.0f}"
    )
    for s in sorted(doc["steps"], key=lambda s: s["t0"]):
        label = "  " * s["depth"] + s["step"]
        print(
            f"{label:<52}{s['time']:>9.2f}{s['cpu']:>9.2f}{s['start']:>11.0f}{s['end']:>9.0f}"
            f"{s['sampled']:>13.0f}{s['maxrss']:>11.0f}"
        )
    per: dict[str, float] = {}  # each release: its exact inputs, its charge and draw
    for s in doc["steps"]:
        words = s["step"].split()
        if s["depth"] == 0 and words[0] in ("prepare", "charge"):
            name = words[1] if words[0] == "prepare" else words[3]
            per[name] = per.get(name, 0.0) + s["time"]
    print(f"\neach release (prepare + charge + draw) against one read of the input ({read:.2f} s):")
    print(f"{'release':<20}{'time (s)':>9}{'x read':>8}")
    for name, t in per.items():
        print(f"{name:<20}{t:>9.2f}{t / read:>8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3e5 rows, one run of each path")
    ap.add_argument("--rows", type=int, default=None, help="rows (default 5e7)")
    ap.add_argument(
        "--repeats", type=int, default=None, help="runs of each path (default 2; --quick 1)"
    )
    ap.add_argument(
        "--row-group-size", type=int, default=1_000_000, help="rows per Parquet row group"
    )
    ap.add_argument("--no-steps", action="store_true", help="skip the per-step breakdown")
    ap.add_argument("--steps-runs", type=int, default=1, help="per-step breakdowns to run")
    args = ap.parse_args()
    rows = args.rows or (300_000 if args.quick else 50_000_000)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 2

    import numpy as np
    import polars as pl
    import pyarrow.parquet as pq

    print(
        f"numpy {np.__version__}, polars {pl.__version__}, python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; rows={rows:,}"
    )
    here = Path(__file__).resolve().parents[1]
    demo_spec = here / "dpframe" / "data" / "demo_release.toml"
    with tempfile.TemporaryDirectory(prefix="bench-release-") as tmp:
        folder = Path(tmp)
        src = folder / "survey.parquet"
        t = time.perf_counter()
        write_survey(src, rows, row_group_size=args.row_group_size)
        n = pl.scan_parquet(src).select(pl.len()).collect().item()
        assert n == rows, (n, rows)
        groups = pq.ParquetFile(src).metadata.num_row_groups
        print(
            f"wrote {src.name}: {src.stat().st_size / 2**20:.0f} MiB, {rows:,} rows in "
            f"{groups} row groups, in {time.perf_counter() - t:.1f} s"
        )
        spec = folder / "spec.toml"
        shutil.copy(demo_spec, spec)
        cli = [sys.executable, "-m", "dpframe.cli"]
        in_job = folder / "in_job.py"  # a file, as the command is (python -c costs more)
        in_job.write_text(IN_JOB)
        paths = {
            "baseline": [sys.executable, "-c", BASELINE, str(src), str(folder / "copy.parquet")],
            "I/O floor": [sys.executable, "-c", IO_FLOOR, str(src), str(folder / "copy.parquet")],
            "read": [sys.executable, "-c", READ, str(src)],
            "plan": [*cli, "plan", str(spec)],
            "import GE": [sys.executable, "-c", IMPORT_GE],
            "release": [*cli, "release", str(spec), "--no-progress"],
            "release, GE in job": [sys.executable, str(in_job), str(spec)],
            "release, no checks": [sys.executable, "-c", NO_CHECKS, str(spec)],
        }
        results: dict[str, list[dict]] = {k: [] for k in paths}
        for _ in range(args.repeats):
            for name, cmd in paths.items():
                fresh(folder)
                results[name].append(measure(cmd, folder))
        base_t = min(r["time"] for r in results["baseline"])
        base_m = min(r["peak"] for r in results["baseline"])
        floor_t = min(r["time"] for r in results["I/O floor"])
        print(
            f"\n{'path':<20}{'best time (s)':>14}{'x baseline':>11}{'x I/O floor':>12}"
            f"{'peak RSS (MiB)':>16}{'(highest)':>10}{'x baseline':>11}{'CPU (s)':>9}"
            f"{'cores busy':>11}"
        )
        for name, rs in results.items():
            bt = min(r["time"] for r in rs)
            pk = min(r["peak"] for r in rs)
            hi = max(r["peak"] for r in rs)
            cpu = min(r["cpu"] for r in rs)
            print(
                f"{name:<20}{bt:>14.2f}{bt / base_t:>11.2f}{bt / floor_t:>12.2f}{pk:>16.0f}"
                f"{hi:>10.0f}{pk / base_m:>11.2f}{cpu:>9.2f}{cpu / bt:>11.2f}"
            )
        rel = max(r["peak"] for r in results["release"])
        nochk = max(r["peak"] for r in results["release, no checks"])
        ratio = min(r["time"] for r in results["release"]) / floor_t
        verdict = "PASS" if rel <= GOAL_MIB else "FAIL"
        print(
            f"\ngoal: peak RSS of the release <= 1 GB ({GOAL_MIB:.0f} MiB): {verdict} "
            f"(highest {rel:.0f} MiB; without the check step {nochk:.0f} MiB); wall time "
            f"<= {GOAL_FLOOR}x the I/O floor: {'PASS' if ratio <= GOAL_FLOOR else 'FAIL'} "
            f"({ratio:.2f}x); information only"
        )
        cores = os.cpu_count() or 1
        cpu = min(r["cpu"] for r in results["release"])
        print(
            f"CPU: the release used {cpu:.1f} core-seconds (the job, its checker and every "
            f"thread); on {cores} cores no schedule runs it in less than {cpu / cores:.2f} s "
            f"= {cpu / cores / floor_t:.2f}x the I/O floor; {GOAL_FLOOR}x the floor leaves "
            f"{GOAL_FLOOR * floor_t * cores:.1f} core-seconds on {cores} cores"
        )
        if not args.no_steps:
            for _ in range(args.steps_runs):
                steps_table(folder, spec, src, min(r["time"] for r in results["read"]))


if __name__ == "__main__":
    main()
