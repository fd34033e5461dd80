"""One release through Spark (``local[2]``) and through polars: time, memory, where it goes.

The same release spec, over the same Parquet file (1e7 rows), run by both engines in one
run of this script:

* the spec (written by the script into its temporary folder): one ``grouped`` release by
  ``region`` over declared margins (count, mean income in [0, 200000], mean satisfaction
  in [0, 10]) and one ``pram`` release of ``age_band`` (categories declared, as Spark
  needs them);
* the file: ``dpframe.datasets.synthetic_survey`` in chunks of 1e6 rows (one seed each),
  appended with pyarrow's ``ParquetWriter`` (one row group per chunk), ``region`` and
  ``age_band`` cast from Enum to String -- Spark reads Enums as strings, so both engines
  read the same strings.

Each engine runs in a fresh subprocess, started through a launcher that samples the
memory of the subprocess's whole process tree every 50 ms (``--interval``) from ``/proc``
(the tree found through the ppid field of ``/proc/*/stat``): the sum of the resident sets
(``statm``) of the driver Python, the JVM it spawns and Spark's Python workers (the daemon
and the workers it forks), and, once a second, the sum of their proportional sets (``Pss``
of ``smaps_rollup``: pages shared between processes counted once). A child spawned by
``vfork``/``posix_spawn`` (the JVM's ``jspawnhelper``) shares its parent's memory until it
execs: it is counted once. The polars subprocess is sampled the same way (its tree is one
process), so the two "tree RSS" figures are comparable; ``ru_maxrss`` (the largest single
process) is printed as well.

* **polars**: ``dpframe.jobs.run(load_spec(spec), progress=False)``, run
  ``--releases`` times (default 2: the first as ``dpframe release`` runs it, in a fresh
  process; the second warm, Great Expectations already imported; a fresh ledger and output
  folder each); then, best of ``--repeats``: the same grouped aggregates in plain polars
  (``group_by().agg()``, streaming), dpframe's exact aggregates alone
  (``GroupedRelease.prepare``), the charge and noise alone (``collect()`` of the prepared
  release), a plain ``scan_parquet -> sink_parquet`` of ``age_band`` (the copy floor) and
  the PRAM of ``age_band`` (``dpframe.sink_parquet``, with its dry pass: the privacy check,
  which can no longer be skipped).
* **Spark**: ``dpframe.engines.spark.local_session("local[2]")`` (its start timed apart),
  ``dpframe.jobs.run(load_spec(spec), engine="spark", spark=spark, progress=False)``, run
  ``--releases`` times in that session (the first with a cold JVM and no Python workers
  yet); then, in the same session, best of ``--repeats``: the plain
  ``groupBy("region").agg(...).toArrow()`` of the same aggregates, dpframe's
  ``dpframe.group_by(sdf, ...).agg(...).prepare()`` (its exact aggregates, computed by
  Spark, nothing charged), the charge and noise alone (``rel.collect()``), a plain
  ``select("age_band").write.parquet`` (the copy floor), an identity ``mapInArrow`` of
  that column written to Parquet (the JVM <-> Python Arrow crossing alone) and the PRAM
  (``dpframe.pram.release(sdf, columns, accountant=...).write(path)``: a data check, then
  the randomized Parquet folder).

Both releases are traced step by step (the runner's functions and Spark's actions are
wrapped, in the subprocess only; the library is not changed): each step's time in each run
and the highest tree RSS sampled during it in the first.

Read the ratios, each against a baseline measured in the same run and named on its line:
Spark's release against polars', Spark's PRAM against its identity ``mapInArrow`` and its
copy, Spark's copy against polars' copy. The machine is shared and noisy (and has few
cores: ``local[2]`` uses both); nothing here asserts anything, and the script exits 0.

The subprocesses run their scripts from files, not ``python -c``: with pyspark 4.3 and no
grpcio, ``import great_expectations`` imports ``pyspark.sql.connect``, whose dependency
check takes a ``__main__`` without ``__file__`` for a doctest run and calls
``sys.exit(0)``. (``dpframe[spark]`` now installs ``pyspark[connect]``, and a release
loads Great Expectations before it charges anything, turning such an exit into
``ChecksUnavailableError``; running from files keeps this script independent of both.)

Run from the repository root (Java 17+ and ``pip install -e '.[spark]'``)::

    .venv/bin/python benchmarks/bench_spark.py [--quick] [--rows N] [--repeats N]
        [--releases N] [--interval S]

``--quick``: 2e5 rows, one repeat, one release run (about a minute, most of it Spark's
start and first jobs). The full run (1e7 rows) takes about 3.5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGE_BANDS = ["18-34", "35-54", "55+"]
REGIONS = ["North", "South", "East", "West", "Centre", "Islands"]

SPEC = """\
version = 1

[input]
path = "{src}"

[privacy]
unit = "record"
neighbours = "substitute"
budget = {{ epsilon = 2.0 }}
ledger = "ledger.db"

[output]
folder = "released"

[margins.regions]
values = {{ region = {regions} }}

[[release]]
name = "by_region"
kind = "grouped"
by = ["region"]
margins = "regions"
statistics = [
    {{ stat = "count", epsilon = 0.3 }},
    {{ stat = "mean", column = "income", lower = 0, upper = 200000, epsilon = 0.3 }},
    {{ stat = "mean", column = "satisfaction", lower = 0, upper = 10, epsilon = 0.2 }},
]

[[release]]
name = "microdata"
kind = "pram"
columns = [
    {{ column = "age_band", epsilon = 0.5, categories = {age_bands} }},
]
"""

# Runs the command, sampling the memory of its process tree (itself and every descendant,
# found through the ppid field of /proc/*/stat) every `interval` seconds.
LAUNCHER = r"""
import json, os, resource, subprocess, sys, tempfile, time

interval, cmd = float(sys.argv[1]), sys.argv[2:]
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 2**20
PSS_EVERY = max(1, round(1.0 / interval))  # smaps_rollup of a JVM costs ~20 ms: once a second

def stat(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        s = f.read()
    r = s.rfind(b")")
    return int(s[r + 2 :].split(None, 2)[1]), s[s.find(b"(") + 1 : r]

class Tree:
    # The subprocess and its descendants: pid -> (ppid, comm). Only new pids are looked
    # up: a process outside the tree never joins it (a parent changes only to init), and
    # a child's pid is looked at after its parent's; every 2 s all of them (pid reuse).
    def __init__(self, root):
        self.root, self.n = root, 0
        self.reset()
    def reset(self):
        self.inside, self.outside = {self.root: (0, b"driver")}, set()
    def pids(self):
        self.n += 1
        if self.n % max(1, round(2.0 / interval)) == 0:
            self.reset()
        live = {int(d) for d in os.listdir("/proc") if d.isdigit()}
        for pid in sorted(live - self.inside.keys() - self.outside):
            try:
                ppid, comm = stat(pid)
            except (OSError, ValueError, IndexError):
                continue
            if ppid in self.inside:
                self.inside[pid] = (ppid, comm)
            else:
                self.outside.add(pid)
        for pid in list(self.inside):
            try:
                self.inside[pid] = stat(pid)  # a process's name changes when it execs
            except (OSError, ValueError, IndexError):
                del self.inside[pid]
        self.outside &= live
        return self.inside

def statm(pid):
    with open(f"/proc/{pid}/statm") as f:
        size, resident = f.read().split()[:2]
    return int(size), int(resident)

def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0

out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
t = time.perf_counter()
p = subprocess.Popen(cmd, stdout=out, stderr=err)
tree = Tree(p.pid)
samples, cost, i = [], 0.0, 0
while p.poll() is None:
    c = time.perf_counter()
    # RSS of the driver (the subprocess), the JVM, Python workers, other; PSS of all
    # (null between the 1-second PSS samples); number of processes
    row = [0.0, 0.0, 0.0, 0.0, 0.0 if i % PSS_EVERY == 0 else None]
    procs = tree.pids()
    mem = {}
    for pid in procs:
        try:
            mem[pid] = statm(pid)
        except (OSError, ValueError, IndexError):
            pass
    for pid, m in mem.items():
        ppid, name = procs[pid]
        if pid != p.pid and mem.get(ppid) == m:
            continue  # a vfork / posix_spawn child (e.g. the JVM's jspawnhelper) before its
            # exec shares its parent's memory: count it once
        try:
            if row[4] is not None:
                row[4] += pss(pid)
        except (OSError, ValueError, IndexError):
            pass
        k = 0 if pid == p.pid else 1 if name == b"java" else 2 if name.startswith(b"python") else 3
        row[k] += m[1] * PAGE
    samples.append([time.time(), *[None if v is None else round(v / MIB, 1) for v in row],
                    len(procs)])
    i += 1
    cost += time.perf_counter() - c
    time.sleep(max(0.0, interval - (time.perf_counter() - c)))
elapsed = time.perf_counter() - t
out.seek(0)
err.seek(0)
print(json.dumps({
    "rc": p.returncode, "time": elapsed, "samples": samples, "cost": cost,
    "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    "stdout": out.read().decode(errors="replace"),
    "stderr": err.read().decode(errors="replace")[-4000:],
}))
"""

# Shared by both subprocesses: phases (named windows of wall-clock time, matched to the
# launcher's samples afterwards) and wrappers that trace the release's steps.
PRELUDE = r"""
import functools, json, sys, time

EVENTS, STACK, ACTIVE = [], [], [False]

class phase:
    def __init__(self, name, **kw):
        self.name, self.kw = name, kw
    def __enter__(self):
        self.w0, self.t0 = time.time(), time.perf_counter()
        return self
    def __exit__(self, *exc):
        EVENTS.append({"name": self.name, "kind": "phase", "w0": self.w0, "w1": time.time(),
                       "time": time.perf_counter() - self.t0, **self.kw})

def wrap(owner, attr, label, leaf=False, skip=None):
    real = getattr(owner, attr, None)
    if real is None:  # the library changed: trace what is there
        return
    def wrapper(*args, **kwargs):
        if not ACTIVE[0] or (leaf and STACK and STACK[-1][1]) or (skip and skip()):
            return real(*args, **kwargs)  # a Spark action inside another is not a step
        what = label(args, kwargs) if callable(label) else label
        w0, t0 = time.time(), time.perf_counter()
        STACK.append((what, leaf))
        try:
            return real(*args, **kwargs)
        finally:
            STACK.pop()
            EVENTS.append({"name": what, "kind": "step", "depth": len(STACK), "w0": w0,
                           "w1": time.time(), "time": time.perf_counter() - t0})
    setattr(owner, attr, functools.wraps(real)(wrapper))

def wrap_release_steps():
    import dpframe.jobs.checks as checks
    import dpframe.jobs.job as job
    import dpframe.jobs.planning as planning
    from dpframe.engines.polars import PolarsEngine
    from dpframe.polars.pram import MicrodataRelease
    from dpframe.polars.release import Release

    wrap(job, "plan", "plan (budget, no data read)")
    wrap(planning, "build_releases", "build the releases, once (public facts only)")
    wrap(Release, "prepare", lambda a, k: f"{a[0].kind}: exact inputs + data check (prepare)")
    wrap(job, "execute", "charge + noise, all releases (executor)")
    wrap(job, "write_parquet", lambda a, k: f"write {a[1].name} (small table)")
    wrap(MicrodataRelease, "write_armed", "PRAM: randomize + write (write_armed)")
    wrap(PolarsEngine, "rows", "input rows")
    try:
        from dpframe.engines.spark import SparkEngine
    except ImportError:
        pass
    else:
        wrap(SparkEngine, "rows", "input rows")
    wrap(job, "_written_counts", "count the PRAM'd output (for its check)")
    wrap(checks, "_gx", "import great_expectations", leaf=True,
         skip=lambda: "great_expectations" in sys.modules)
    wrap(job, "check_release", lambda a, k: f"check {a[0].release}")
    wrap(job, "publish", "publish")

def fresh(folder):
    # a new ledger and output folder for each run of the release (the budget fits one)
    import os, shutil
    for f in ("ledger.db", "ledger.db.lock"):
        if os.path.exists(os.path.join(folder, f)):
            os.remove(os.path.join(folder, f))
    shutil.rmtree(os.path.join(folder, "released"), ignore_errors=True)

def done(**extra):
    print(json.dumps({"events": EVENTS, **extra}))

def release_parts():
    # the spec's statistics, for the step-by-step baselines of both engines
    import dpframe
    import polars as pl

    regions = ["North", "South", "East", "West", "Centre", "Islands"]
    stats = lambda: [
        dpframe.agg.count(epsilon=0.3),
        dpframe.agg.mean("income", lower=0, upper=200_000, epsilon=0.3),
        dpframe.agg.mean("satisfaction", lower=0, upper=10, epsilon=0.2),
    ]
    acct = dpframe.Accountant(epsilon=1e9)
    return ["18-34", "35-54", "55+"], acct, pl.DataFrame({"region": regions}), stats
"""

POLARS_CHILD = (
    PRELUDE
    + r"""
import resource
spec_path, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
repeats, releases = int(sys.argv[4]), int(sys.argv[5])
with phase("import"):
    import polars as pl
    import dpframe
    from dpframe.jobs import load_spec, run as run_job
wrap_release_steps()
for run in range(releases):
    fresh(work)
    ACTIVE[0] = True
    with phase("release", run=run):
        result = run_job(load_spec(spec_path), progress=False)
    ACTIVE[0] = False
    if run == 0:
        release_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

CATS, acct, margins, stats = release_parts()
lf = pl.scan_parquet(src)
for rep in range(repeats):
    with phase("agg", rep=rep):
        lf.group_by("region").agg(
            pl.len(),
            pl.col("income").clip(0, 200_000).sum(),
            pl.col("satisfaction").clip(0, 10).sum(),
        ).collect(engine="streaming")
    rel = dpframe.group_by(lf, "region", margins=margins, accountant=acct).agg(*stats())
    with phase("dp agg", rep=rep):
        rel.prepare()  # always streaming
    with phase("noise", rep=rep):
        rel.collect()
    with phase("copy", rep=rep):
        lf.select("age_band").sink_parquet(f"{work}/copy.parquet")
    with phase("pram", rep=rep):
        dpframe.sink_parquet(  # with its dry pass, the privacy check (no longer optional)
            lf.select(pl.col("age_band").dp.pram(0.5, categories=CATS, accountant=acct)),
            f"{work}/pram.parquet",
        )
done(release_maxrss=release_maxrss, outputs=sorted(result.outputs))
"""
)

SPARK_CHILD = (
    PRELUDE
    + r"""
import os
spec_path, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
repeats, releases = int(sys.argv[4]), int(sys.argv[5])
os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python workers
with phase("import"):
    import polars as pl
    import dpframe
    from dpframe.engines import spark as dps
    from dpframe.jobs import load_spec, run as run_job
    from pyspark.sql import functions as sf
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
with phase("session start"):
    spark = dps.local_session("local[2]")
try:
    wrap_release_steps()
    # Spark actions, traced where the release calls them (the DataFrame class Spark returns)
    frame_cls = type(spark.range(1))
    for action in ("count", "first", "collect", "toArrow"):
        wrap(frame_cls, action, f"Spark job: DataFrame.{action}()", leaf=True)
    wrap(DataFrameWriter, "parquet", "Spark job: write.parquet()", leaf=True)
    wrap(DataFrameReader, "parquet", "Spark: read.parquet() (schema)", leaf=True)
    tracker = spark.sparkContext.statusTracker()
    release_jobs = []
    for run in range(releases):
        fresh(work)
        jobs0 = len(tracker.getJobIdsForGroup())
        ACTIVE[0] = True
        with phase("release", run=run):
            result = run_job(load_spec(spec_path), engine="spark", spark=spark, progress=False)
        ACTIVE[0] = False
        release_jobs.append(len(tracker.getJobIdsForGroup()) - jobs0)

    CATS, acct, margins, stats = release_parts()

    def clip(c, lo, hi):
        return sf.least(sf.greatest(sf.col(c).cast("double"), sf.lit(lo)), sf.lit(hi))

    def identity(batches):
        yield from batches

    for rep in range(repeats):
        sdf = spark.read.parquet(src)
        with phase("agg", rep=rep):
            sdf.groupBy("region").agg(
                sf.count(sf.lit(1)).alias("n"),
                sf.sum(clip("income", 0, 200_000)).alias("income"),
                sf.sum(clip("satisfaction", 0, 10)).alias("satisfaction"),
            ).toArrow()
        with phase("dp agg", rep=rep):
            rel = dpframe.group_by(sdf, "region", margins=margins, accountant=acct).agg(*stats())
            rel.prepare()  # Spark computes the exact aggregates, nothing charged
        with phase("noise", rep=rep):
            rel.collect()
        col = sdf.select("age_band")
        with phase("copy", rep=rep):
            col.write.mode("overwrite").parquet(f"{work}/copy")
        with phase("identity", rep=rep):
            col.mapInArrow(identity, col.schema).write.mode("overwrite").parquet(f"{work}/ident")
        with phase("pram", rep=rep):
            cols = [{"column": "age_band", "epsilon": 0.5, "categories": CATS}]
            dpframe.pram.release(sdf, cols, accountant=acct).write(f"{work}/pram-{rep}")
    conf = {}
    for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled",
              "spark.sql.execution.arrow.maxRecordsPerBatch", "spark.driver.memory"):
        try:
            conf[k] = spark.conf.get(k)
        except Exception:  # unset, no default
            conf[k] = spark.sparkContext.getConf().get(k, "default")
    partitions = spark.read.parquet(src).rdd.getNumPartitions()
    done(release_jobs=release_jobs, conf=conf, partitions=partitions,
         outputs=sorted(result.outputs))
finally:
    spark.stop()
"""
)


def write_survey(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """The synthetic survey, ``chunk`` rows at a time (one seed each), Enums as String."""
    import polars as pl
    import pyarrow.parquet as pq

    from dpframe.datasets import synthetic_survey

    writer = None
    done = 0
    try:
        for i in range(-(-rows // chunk)):
            n = min(chunk, rows - done)
            frame = synthetic_survey(n, seed=20261122 + i).with_columns(
                pl.col("region", "age_band").cast(pl.String)
            )
            table = frame.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=chunk)
            done += n
    finally:
        if writer is not None:
            writer.close()


def run(script: str, args: list[str], cwd: Path, interval: float) -> dict:
    """One fresh subprocess through the launcher: its trace, samples and times.

    The script runs from a file, not ``python -c``: with no ``__main__.__file__``,
    ``import great_expectations`` (the check step) imports ``pyspark.sql.connect``, whose
    dependency check (pyspark 4.3 without grpcio) takes the process for a doctest run
    and calls ``sys.exit(0)`` mid-release.
    """
    path = cwd / "bench_child.py"
    path.write_text(script)
    cmd = [sys.executable, "-c", LAUNCHER, str(interval), sys.executable, str(path), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    res = json.loads(out.stdout)
    if res["rc"] != 0:
        raise RuntimeError(f"subprocess exited {res['rc']}:\n{res['stdout']}\n{res['stderr']}")
    line = [x for x in res["stdout"].splitlines() if x.startswith("{")][-1]
    res.update(json.loads(line))
    return res


def peak(res: dict, w0: float, w1: float) -> dict | None:
    """The sample of highest tree RSS in [w0, w1] (None if no sample fell in it)."""
    inside = [s for s in res["samples"] if w0 <= s[0] <= w1]
    if not inside:
        return None
    s = max(inside, key=lambda s: sum(s[1:5]))
    return {
        "rss": sum(s[1:5]),
        "driver": s[1],
        "jvm": s[2],
        "workers": s[3],
        "other": s[4],
        "pss": max((x[5] for x in inside if x[5] is not None), default=None),
        "procs": s[6],
    }


def phases(res: dict, name: str) -> list[dict]:
    return [e for e in res["events"] if e["kind"] == "phase" and e["name"] == name]


def best(res: dict, name: str) -> tuple[float, float | None]:
    """Best time of a phase over its repeats, and the highest tree RSS in any of them."""
    ps = phases(res, name)
    if not ps:
        return float("nan"), None
    peaks = [p for p in (peak(res, e["w0"], e["w1"]) for e in ps) if p]
    return min(e["time"] for e in ps), max((p["rss"] for p in peaks), default=None)


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def steps_table(res: dict, title: str) -> None:
    """Each traced step of each run of the release: time, and tree RSS in the first run."""
    runs = phases(res, "release")
    per_run = []
    for rel in runs:
        steps = sorted(
            (e for e in res["events"] if e["kind"] == "step" and rel["w0"] <= e["w0"] <= rel["w1"]),
            key=lambda e: (e["w0"], e["depth"]),
        )
        seen: dict[str, int] = {}
        keyed = {}
        for e in steps:  # a step is matched across runs by its name and occurrence
            seen[e["name"]] = seen.get(e["name"], 0) + 1
            keyed[(e["name"], seen[e["name"]])] = e
        per_run.append(keyed)
    heads = "".join(f"{f'run {i + 1} (s)':>11}" for i in range(len(runs)))
    times = ", ".join(f"{r['time']:.1f}" for r in runs)
    print(f"\n{title}: {times} s")
    print(f"  {'step':<62}{heads}{'RSS run 1':>11}")
    keys = list(per_run[0]) + [k for d in per_run[1:] for k in d if k not in per_run[0]]
    for key in keys:
        first = next(d[key] for d in per_run if key in d)
        cells = "".join(f"{d[key]['time']:>11.2f}" if key in d else f"{'-':>11}" for d in per_run)
        p = peak(res, first["w0"], first["w1"]) if key in per_run[0] else None
        label = "  " * first["depth"] + first["name"]
        print(f"  {label:<62}{cells}{mib(p and p['rss']):>11}")
    rest = [
        rel["time"] - sum(e["time"] for e in d.values() if e["depth"] == 0)
        for rel, d in zip(runs, per_run, strict=True)
    ]
    print(f"  {'(not in a traced step)':<62}" + "".join(f"{x:>11.2f}" for x in rest))
    p = peak(res, runs[0]["w0"], runs[0]["w1"])
    if p:
        print(
            f"  at run 1's peak: {p['rss']:.0f} MiB in {p['procs']} process(es) = driver "
            f"{p['driver']:.0f} + JVM {p['jvm']:.0f} + Python workers {p['workers']:.0f} + "
            f"other {p['other']:.0f}; highest PSS sum {mib(p['pss'])}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2e5 rows, one repeat, one release")
    ap.add_argument("--rows", type=int, default=None, help="rows (default 1e7)")
    ap.add_argument("--repeats", type=int, default=None, help="breakdown repeats (default 2)")
    ap.add_argument(
        "--releases", type=int, default=None, help="release runs per subprocess (default 2)"
    )
    ap.add_argument("--interval", type=float, default=0.05, help="memory sampling period (s)")
    args = ap.parse_args()
    rows = args.rows or (200_000 if args.quick else 10_000_000)
    repeats = args.repeats or (1 if args.quick else 2)
    releases = args.releases or (1 if args.quick else 2)

    import numpy as np
    import polars as pl
    import pyarrow as pa
    import pyspark

    print(
        f"numpy {np.__version__}, polars {pl.__version__}, pyarrow {pa.__version__}, "
        f"pyspark {pyspark.__version__}, python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; rows={rows:,}, repeats={repeats}, releases={releases}, "
        "Spark master local[2]"
    )
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        folder = Path(tmp)
        src = folder / "survey.parquet"
        t = time.perf_counter()
        write_survey(src, rows)
        print(
            f"wrote {src.name}: {src.stat().st_size / 2**20:.0f} MiB, {rows:,} rows (region "
            f"and age_band as String) in {time.perf_counter() - t:.1f} s"
        )
        res = {}
        for name, script in (("polars", POLARS_CHILD), ("spark", SPARK_CHILD)):
            work = folder / name
            work.mkdir()
            spec = work / "spec.toml"
            spec.write_text(
                SPEC.format(src=src, regions=json.dumps(REGIONS), age_bands=json.dumps(AGE_BANDS))
            )
            argv = [str(spec), str(src), str(work), str(repeats), str(releases)]
            res[name] = run(script, argv, work, args.interval)
        po, sp = res["polars"], res["spark"]
        for name, r in res.items():
            n = len(r["samples"])
            print(
                f"{name} subprocess: {r['time']:.1f} s in all, {n} memory samples "
                f"({1000 * r['cost'] / max(n, 1):.1f} ms each), largest process ru_maxrss "
                f"{r['maxrss']:.0f} MiB"
            )
        print(
            f"Spark: {sp['partitions']} input partitions, Spark jobs per release run "
            f"{sp['release_jobs']}; {', '.join(f'{k}={v}' for k, v in sp['conf'].items())}"
        )

        again = releases > 1
        steps_table(po, "polars release, dpframe.jobs.run" + (" (run 2: same process)" * again))
        print(f"  polars process ru_maxrss after run 1: {po['release_maxrss']:.0f} MiB")
        steps_table(
            sp,
            'Spark release, dpframe.jobs.run(engine="spark") (session started'
            + ("; run 2: same session)" if again else ")"),
        )

        session = phases(sp, "session start")[0]
        imp = {k: phases(r, "import")[0]["time"] for k, r in res.items()}
        print(
            f"\nwhere the time goes (best of {repeats}, after the releases; tree RSS: highest "
            "sampled in the step, MiB)\n"
            f"  {'step':<58}{'polars (s)':>11}{'RSS':>7}{'Spark (s)':>11}{'RSS':>7}"
            f"{'Spark/polars':>13}"
        )
        got: dict[str, tuple[float, float]] = {}
        for label, key in (
            ("grouped aggregates, plain group_by / groupBy", "agg"),
            ("grouped aggregates, dpframe (group_by().agg().prepare())", "dp agg"),
            ("charge + noise on the driver (collect, aggregates ready)", "noise"),
            ("copy age_band Parquet -> Parquet (the floor)", "copy"),
            ("identity mapInArrow of age_band -> Parquet", "identity"),
            ("PRAM age_band -> Parquet", "pram"),
        ):
            pt, pm = best(po, key)
            st, sm = best(sp, key)
            got[key] = (pt, st)
            known = pt == pt  # not NaN
            print(
                f"  {label:<58}{f'{pt:.3f}' if known else '-':>11}{mib(pm):>7}{st:>11.3f}"
                f"{mib(sm):>7}{f'{st / pt:.2f}' if known else '':>13}"
            )
        ses = peak(sp, session["w0"], session["w1"])
        print(
            f"  {'import polars, dpframe (Spark: + pyspark)':<58}{imp['polars']:>11.3f}{'':>7}"
            f"{imp['spark']:>11.3f}{'':>7}{imp['spark'] / imp['polars']:>13.2f}"
        )
        print(
            f"  {'Spark session start (local_session)':<58}{'-':>11}{'':>7}"
            f"{session['time']:>11.3f}{mib(ses and ses['rss']):>7}"
        )

        def ratio(a: float, b: float) -> str:
            return f"{a / b:.2f}" if b > 0 else "-"

        prs, srs = phases(po, "release"), phases(sp, "release")
        print("\nratios (each to a baseline measured in this run):")
        lines = [
            ("Spark release / polars release (run 1)", srs[0]["time"], prs[0]["time"]),
            (
                "Spark session start + release / polars release",
                session["time"] + srs[0]["time"],
                prs[0]["time"],
            ),
        ]
        if releases > 1:
            lines += [
                ("Spark release / polars release (run 2, warm)", srs[1]["time"], prs[1]["time"]),
                ("Spark release: run 1 / run 2", srs[0]["time"], srs[1]["time"]),
                ("polars release: run 1 / run 2", prs[0]["time"], prs[1]["time"]),
            ]
        lines += [
            ("Spark plain groupBy / polars plain group_by", got["agg"][1], got["agg"][0]),
            ("Spark prepare / Spark plain groupBy", got["dp agg"][1], got["agg"][1]),
            ("polars prepare / polars plain group_by", got["dp agg"][0], got["agg"][0]),
            ("Spark copy / polars copy", got["copy"][1], got["copy"][0]),
            ("Spark identity mapInArrow / Spark copy", got["identity"][1], got["copy"][1]),
            ("Spark PRAM / Spark identity mapInArrow", got["pram"][1], got["identity"][1]),
            ("Spark PRAM / Spark copy", got["pram"][1], got["copy"][1]),
            ("polars PRAM / polars copy", got["pram"][0], got["copy"][0]),
            ("Spark PRAM / polars PRAM", got["pram"][1], got["pram"][0]),
        ]
        for label, a, b in lines:
            print(f"  {label:<58}{ratio(a, b):>8}   ({a:.2f} s / {b:.2f} s)")

        base = peak(po, prs[0]["w0"], prs[0]["w1"])
        table = [(f"polars release, run {i + 1}", e) for i, e in enumerate(prs)]
        table += [(f"Spark release, run {i + 1}", e) for i, e in enumerate(srs)]
        print(
            f"\n{'path':<40}{'wall (s)':>9}{'x polars':>9}{'tree RSS':>10}{'x polars':>9}"
            f"{'tree PSS':>10}"
        )
        rows_out = [(label, e["time"], peak(po, e["w0"], e["w1"])) for label, e in table[:releases]]
        rows_out += [
            (label, e["time"], peak(sp, e["w0"], e["w1"])) for label, e in table[releases:]
        ]
        rows_out += [
            ("Spark session start", session["time"], ses),
            ("polars subprocess, everything", po["time"], peak(po, 0, float("inf"))),
            ("Spark subprocess, everything", sp["time"], peak(sp, 0, float("inf"))),
        ]
        for label, secs, p in rows_out:
            rss = p["rss"] if p else None
            print(
                f"{label:<40}{secs:>9.1f}{ratio(secs, prs[0]['time']):>9}{mib(rss):>10}"
                f"{(ratio(rss, base['rss']) if rss and base else '-'):>9}"
                f"{mib(p and p['pss']):>10}"
            )
        print(
            "(tree RSS / PSS: highest sum over the subprocess and its descendants, sampled every "
            f"{args.interval * 1000:.0f} ms (PSS every second); x polars: against the polars "
            "release, run 1)"
        )


if __name__ == "__main__":
    main()
