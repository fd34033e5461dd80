"""Where Spark wins: the release of ``bench_spark.py`` on polars, Spark ``local[2]`` and a
Spark standalone cluster (a master and two workers), and the size at which Spark overtakes.

The spec and the data are those of ``bench_spark.py`` (imported from it): a grouped release
by region (count, two means) and the PRAM of ``age_band``, over Parquet files of
``dpframe.datasets.synthetic_survey`` at each size (``--sizes``, default 1e6 and 1e7 rows;
row groups of at most 1e6 rows and at least 8 per file, so Spark reads every file in
parallel). The script starts its own standalone cluster in a temporary folder::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --cores 1 --memory 2g

(twice for the worker; ``spark-class`` is in the pyspark install's ``bin``), waits until
both workers have registered (``--start-timeout``, default 300 s), and stops the three
processes when it ends, whatever happens.

Each configuration runs in a fresh subprocess, one after the other:

* **polars**: ``dpframe.jobs.run(load_spec(spec), progress=False)``;
* **Spark local[2]**: ``dpframe.engines.spark.local_session("local[2]")``;
* **standalone, 1 core**: ``local_session("spark://127.0.0.1:P", conf={"spark.cores.max":
  "1", ...})``: one executor of one core, on one of the two workers;
* **standalone, 2 cores**: the same with ``spark.cores.max`` 2: one executor on each worker;

``dpframe.jobs.run(..., engine="spark", spark=session, progress=False)`` on Spark. In each
subprocess: the session start (Spark) is timed, a first release at the smallest size
(cold: Great Expectations' import, the first reads, the Python workers' start), then
``--repeats`` rounds (default 2) of one warm release at each size, the sizes alternating;
the best warm time per size is kept.

The model, per configuration: a warm release takes ``a + b * rows`` (a line through the
best warm times, least squares over the sizes); a job from a fresh process takes
``start + a + b * rows``, where ``start`` is the session start plus the cold extra of the
first release (its time minus the warm time at the same size; polars: the import and its
cold extra). Spark overtakes polars at ``rows = (start_S + a_S - start_P - a_P) / (b_P -
b_S)`` when its per-row cost ``b_S`` is below polars'. For a cluster of ``c`` cores the
script **assumes** the per-row cost scales as ``b_S(c) = b_1 / c`` (``b_1``: the measured
1-core standalone cost), the start-up and ``a`` those of the 2-core cluster; it prints the
measured 2-core / 1-core ratio of ``b`` (1/2 if the assumption held), the same model with
Amdahl's law fitted to the two measurements (``b_S(c) = b_s + b_p / c``), the rows from
which a cluster of 2 to 128 cores overtakes polars under each, and the cores Spark needs
at 1e8, 1e9 and 1e10 rows. polars stays on this machine in the model.

Nothing asserts anything; the machine is shared (read the ratios). Without Java or pyspark
the script prints why and exits 0.

Run from the repository root (Java 17+ and ``pip install -e '.[spark]'``)::

    .venv/bin/python benchmarks/bench_spark_cluster.py [--quick] [--sizes N N ...]
        [--repeats N] [--start-timeout S]

``--quick``: sizes 1e5 and 3e5, polars and a cluster of one worker (1 core) only, one
round (about 35 s, most of it Spark's start; no per-row cost is measurable at these sizes,
and the model of larger clusters, which needs the 1- and 2-core fits, is not printed).
The full run (1e6, 1e7) takes about 3 minutes on 2 shared cores, 5 to 7 with
``--sizes 1e6 1e7 5e7``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_spark import AGE_BANDS, REGIONS, SPEC, write_survey

CHILD = r"""
import json, os, shutil, sys, time

cfg = json.loads(sys.argv[1])
t = time.perf_counter()
import dpframe
from dpframe.jobs import load_spec, run
out = {"import": time.perf_counter() - t, "runs": []}
spark = None
if cfg["master"]:
    from dpframe.engines.spark import local_session
    t = time.perf_counter()
    spark = local_session(cfg["master"], conf=cfg["conf"])
    out["session"] = time.perf_counter() - t
    out["parallelism"] = spark.sparkContext.defaultParallelism

def release(size, cold):
    work = cfg["specs"][str(size)]
    folder = os.path.dirname(work)
    for f in ("ledger.db", "ledger.db.lock"):
        if os.path.exists(os.path.join(folder, f)):
            os.remove(os.path.join(folder, f))
    shutil.rmtree(os.path.join(folder, "released"), ignore_errors=True)
    t = time.perf_counter()
    run(load_spec(work), engine="spark" if spark else "polars", spark=spark, progress=False)
    out["runs"].append({"size": size, "cold": cold, "time": time.perf_counter() - t})

try:
    release(cfg["sizes"][0], True)
    for rep in range(cfg["repeats"]):
        for size in cfg["sizes"] if rep % 2 == 0 else cfg["sizes"][::-1]:
            release(size, False)
finally:
    if spark is not None:
        spark.stop()
print(json.dumps(out))
"""


def free_port() -> int:
    """A TCP port nothing listens on now (the cluster's master takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """For ``preexec_fn``: on Linux, the child gets ``sig`` when this script dies, even killed.

    ``spark-class`` execs the JVM, which keeps the setting, so a cluster process never
    outlives the script (``stop`` ends them first in any normal exit). A measuring child
    takes SIGKILL: a Spark driver catches SIGTERM; its JVM exits when the driver has gone.
    """

    def arm() -> None:
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None).prctl(1, sig)  # PR_SET_PDEATHSIG

    return arm


class Cluster:
    """A Spark standalone master and ``workers`` workers (1 core, 2g each) in ``folder``.

    Started by :meth:`spawn` (awaited by :meth:`wait`), stopped (terminated, then killed)
    by :meth:`stop`; use it as a context manager so the processes end with the script.
    """

    def __init__(self, folder: Path, workers: int, timeout: float) -> None:
        import pyspark

        self.folder, self.workers, self.timeout = folder, workers, timeout
        self.spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, *args: str) -> Path:
        log = self.folder / f"{name}.log"
        env = dict(os.environ)
        env["SPARK_LOCAL_DIRS"] = str(self.folder / "local")
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path.cwd()), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        with open(log, "wb") as f:
            self.procs.append(
                subprocess.Popen(
                    [str(self.spark_class), *args],
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.folder,
                    start_new_session=True,  # the JVM and its launcher, stopped as one group
                    preexec_fn=die_with_parent(),
                )
            )
        return log

    def __enter__(self) -> Cluster:
        try:
            self.spawn()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spawn(self) -> None:
        """Start the master and the workers (without waiting for them)."""
        self.t0 = time.perf_counter()
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0",
        )  # fmt: skip
        for i in range(self.workers):
            (self.folder / f"worker{i}").mkdir()
            self._spawn(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker", self.url,
                "--cores", "1", "--memory", "2g", "--webui-port", "0",
                "--work-dir", str(self.folder / f"worker{i}"),
            )  # fmt: skip

    def wait(self) -> float:
        """Seconds from :meth:`spawn` until every worker registered with the master."""
        master = self.folder / "master.log"
        while time.perf_counter() - self.t0 < self.timeout:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a cluster process exited {dead[0].returncode}: {self.logs()}")
            if master.read_text(errors="replace").count("Registering worker") >= self.workers:
                return time.perf_counter() - self.t0
            time.sleep(0.5)
        raise RuntimeError(
            f"the cluster did not start in {self.timeout:.0f} s (--start-timeout): {self.logs()}"
        )

    def logs(self) -> str:
        return "".join(
            f"\n--- {p.name}:\n{p.read_text(errors='replace')[-2000:]}"
            for p in sorted(self.folder.glob("*.log"))
        )

    def stop(self) -> None:
        """Terminate every process group started (kill what is left after 20 s)."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 15)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 9)
                p.wait()


def measure(cfg: dict, cwd: Path, timeout: float) -> dict:
    """One configuration in a fresh subprocess (the script from a file, as bench_spark.py)."""
    path = cwd / "cluster_child.py"
    path.write_text(CHILD)
    res = subprocess.run(
        [sys.executable, str(path), json.dumps(cfg)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        # the driver (and so its JVM) ends with the script, even if the script is killed
        preexec_fn=die_with_parent(signal.SIGKILL),
    )
    if res.returncode != 0:
        raise RuntimeError(f"{cfg['name']} exited {res.returncode}:\n{res.stderr[-4000:]}")
    return json.loads([x for x in res.stdout.splitlines() if x.startswith("{")][-1])


def fit(res: dict, sizes: list[int]) -> dict:
    """Best warm time per size, the line ``a + b * rows`` through them, and the start-up."""
    warm = {
        n: min(r["time"] for r in res["runs"] if r["size"] == n and not r["cold"]) for n in sizes
    }
    xs, ys = list(warm), list(warm.values())
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    a = my - b * mx
    cold = next(r["time"] for r in res["runs"] if r["cold"])
    start = res.get("session", res["import"]) + cold - warm[sizes[0]]
    return {"warm": warm, "a": a, "b": b, "cold": cold, "start": start}


def crossover(spark: dict, polars: dict) -> float | None:
    """Rows from which a job (start-up included) is faster on ``spark``; None if never."""
    if spark["b"] >= polars["b"] or spark["b"] <= 0:
        return None  # (a per-row cost <= 0: the sizes are too small to measure it)
    return max(0.0, (spark["start"] + spark["a"] - polars["start"] - polars["a"])) / (
        polars["b"] - spark["b"]
    )


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sizes 1e5, 3e5; polars and 1 core")
    ap.add_argument("--sizes", type=float, nargs="+", default=None, help="rows (default 1e6 1e7)")
    ap.add_argument("--repeats", type=int, default=None, help="warm rounds (default 2)")
    ap.add_argument("--start-timeout", type=float, default=300.0, help="cluster start (s)")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in (args.sizes or ([1e5, 3e5] if args.quick else [1e6, 1e7])))
    if len(sizes) < 2:
        ap.error("--sizes: give at least two sizes (the model fits a line)")
    repeats = args.repeats or (1 if args.quick else 2)

    try:
        import pyspark
    except ImportError:
        print("skipped: pyspark is not installed (pip install -e '.[spark]')")
        return
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        print("skipped: Spark needs Java 17+ (no `java` on PATH and no JAVA_HOME)")
        return
    import polars as pl

    # a SIGTERM (e.g. a test's timeout) ends the script through `finally`: the cluster stops
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(
        f"polars {pl.__version__}, pyspark {pyspark.__version__}, python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; sizes {sizes}, warm rounds "
        f"{repeats}"
    )
    configs = [("polars", None, {})]
    if not args.quick:
        configs.append(("Spark local[2]", "local[2]", {}))
    with tempfile.TemporaryDirectory(prefix="bench-spark-cluster-") as tmp:
        folder = Path(tmp)
        specs = {}
        for n in sizes:
            work = folder / f"rows{n}"
            work.mkdir()
            t = time.perf_counter()
            write_survey(work / "survey.parquet", n, chunk=min(1_000_000, max(10_000, n // 8)))
            spec = work / "spec.toml"
            spec.write_text(
                SPEC.format(
                    src=work / "survey.parquet",
                    regions=json.dumps(REGIONS),
                    age_bands=json.dumps(AGE_BANDS),
                )
            )
            specs[str(n)] = str(spec)
            print(f"wrote {n:,} rows in {time.perf_counter() - t:.1f} s", flush=True)
        (folder / "cluster").mkdir()
        results = {}
        ready = None
        workers = 1 if args.quick else 2
        with Cluster(folder / "cluster", workers=workers, timeout=args.start_timeout) as cluster:
            # the cluster starts while the configurations that do not need it run
            for cores in [1] if args.quick else [1, 2]:
                conf = {
                    "spark.cores.max": str(cores),
                    "spark.executor.cores": "1",
                    "spark.executor.memory": "2g",
                    "spark.pyspark.python": sys.executable,
                    "spark.executorEnv.PYTHONPATH": str(Path.cwd()),
                }
                configs.append((f"standalone, {cores} core(s)", cluster.url, conf))
            for name, master, conf in configs:
                if master == cluster.url and ready is None:
                    ready = cluster.wait()
                    print(
                        f"standalone cluster: master {cluster.url} + {workers} worker(s) (1 "
                        f"core, 2g each), all registered {ready:.1f} s after their start"
                    )
                cfg = {"name": name, "master": master, "conf": conf, "sizes": sizes,
                       "repeats": repeats, "specs": specs}  # fmt: skip
                t = time.perf_counter()
                results[name] = measure(cfg, folder, timeout=args.start_timeout + 3600)
                runs = ", ".join(
                    f"{r['size']:.0e}{' cold' * r['cold']} {r['time']:.2f}"
                    for r in results[name]["runs"]
                )
                print(f"measured {name} in {time.perf_counter() - t:.1f} s: {runs}", flush=True)

    fits = {name: fit(res, sizes) for name, res in results.items()}
    po = fits["polars"]
    heads = "".join(f"{f'{n:.0e} rows':>12}" for n in sizes)
    print(
        f"\nbest warm release (s), x polars; model: job = start-up + a + rows x b\n"
        f"{'engine':<24}{heads}{'start-up s':>11}{'a (s)':>8}{'b (ns/row)':>11}"
        f"{'x polars b':>11}{'overtakes at':>14}"
    )
    for name, f in fits.items():
        cells = "".join(
            f"{f['warm'][n]:>6.2f}{ratio(f['warm'][n], po['warm'][n]):>6}" for n in sizes
        )
        cross = "-" if name == "polars" else crossover(f, po)
        where = cross if isinstance(cross, str) else "never" if cross is None else f"{cross:.1e}"
        print(
            f"{name:<24}{cells}{f['start']:>11.1f}{f['a']:>8.2f}{f['b'] * 1e9:>11.0f}"
            f"{f['b'] / po['b']:>11.1f}{where:>14}"
        )
    for name, res in results.items():
        extra = f", session start {res['session']:.1f} s" if "session" in res else ""
        extra += f", parallelism {res['parallelism']}" if "parallelism" in res else ""
        f = fits[name]
        worst = max(abs(f["a"] + f["b"] * n - t) / t for n, t in f["warm"].items())
        print(
            f"  {name}: import {res['import']:.1f} s{extra}, cold release {f['cold']:.1f} s; "
            f"the line misses a warm time by up to {100 * worst:.0f} %"
        )

    one, two = fits.get("standalone, 1 core(s)"), fits.get("standalone, 2 core(s)")
    if one and two:
        cluster_model(po, one, two)


def cluster_model(po: dict, one: dict, two: dict) -> None:
    """Where a cluster of c cores overtakes polars (on this machine), under two models.

    Linear (the stated assumption): ``b(c) = b_1 / c``. Amdahl (fitted to the 1- and 2-core
    measurements): ``b(c) = b_s + b_p / c`` with ``b_s + b_p = b_1`` and ``b_s + b_p / 2 =
    b_2``. Both keep the 2-core cluster's start-up and ``a``.
    """
    fixed = two["start"] + two["a"] - po["start"] - po["a"]  # Spark's extra fixed time
    b1, b2, bp = one["b"], two["b"], po["b"]
    serial = max(0.0, 2 * b2 - b1)
    print(
        f"\nmodel of a cluster of c cores: job = {two['start'] + two['a']:.1f} s (the 2-core "
        f"cluster's start-up + a) + rows x b(c); polars: {po['start'] + po['a']:.1f} s + rows "
        f"x {bp * 1e9:.0f} ns\n"
        f"assumption (linear): b(c) = b_1 / c, b_1 = {b1 * 1e9:.0f} ns/row (1 core measured)\n"
        f"check: measured b(2 cores) / b(1 core) = {b2 / b1:.2f} (linear says 0.50); Amdahl fit "
        f"to both: b(c) = {serial * 1e9:.0f} + {(b1 - serial) * 1e9:.0f} / c ns/row"
    )
    print(
        f"  {'cores':>6}{'b linear':>10}{'overtakes at rows':>19}{'b Amdahl':>10}"
        f"{'overtakes at rows':>19}"
    )
    for c in (2, 4, 8, 16, 32, 64, 128):
        cells = ""
        for b in (b1 / c, serial + (b1 - serial) / c):
            rows = "never" if b >= bp else f"{max(0.0, fixed) / (bp - b):.1e}"
            cells += f"{b * 1e9:>10.0f}{rows:>19}"
        print(f"  {c:>6}{cells}")
    for n in (10**8, 10**9, 10**10):
        gap = po["start"] + po["a"] + bp * n - two["start"] - two["a"]
        need = (
            "no cluster (polars is done before Spark has started)"
            if gap <= 0
            else f"{b1 * n / gap:.1f}"
        )
        print(f"  {n:.0e} rows: cores Spark needs to overtake (linear): {need}")


if __name__ == "__main__":
    main()
