"""Cost of a dpframe grouped DP mean against plain polars and OpenDP's polars API.

For 1e7 rows and 1e4 groups (``--quick``: 1e6 rows, 1e3 groups) in a Parquet file
scanned lazily (``g`` an Int64 group key, ``x`` a Float64 in [0, 10]), this script times

* plain:           ``lf.group_by("g").agg(pl.col("x").clip(0, 10).mean())``, streaming
  (the baseline: the exact aggregation a release wraps);
* dpframe private: ``dpframe.group_by(lf, "g", margins=keys).agg(dpframe.agg.mean("x",
  lower=0, upper=10, epsilon=1.0)).collect()`` (always streaming) -- noisy sum over noisy
  count (a fresh release and accountant per repeat: a release collects once);
* dpframe public:  the same with ``margins`` holding the true group sizes in ``n`` and
  ``sizes="n"`` -- the truncated Laplace mechanism per group size;
* OpenDP (``opendp.prelude``, its polars API): ``dp.Context.compositor(...)``, then
  ``context.query().group_by("g").agg(pl.col("x").fill_null(0).dp.mean((0, 10)))``,
  ``.with_keys(keys)`` (the public key set, as dpframe's margins) and
  ``.release().collect()``; and the same with ``Margin(invariant="lengths")`` (public
  group lengths: noise on the sum only), with ``dp.unit_of(changes=1)`` so the neighbour
  relation is dpframe's default ``"substitute"``. ``Margin.max_length``, a public bound
  on a group's size that OpenDP's float sum needs (its sensitivity grows with it), is set
  to the largest true group size in both OpenDP paths -- OpenDP's most favourable
  setting; dpframe needs no such bound. (``--opendp-max-length rows`` passes the loose
  bound OpenDP's documentation suggests, the number of rows: at 1e7 rows the noise scale
  of its sum grows from ~40 to ~1.3e4, the released means become useless);
* plain again, in OpenDP's interpreter (the plain baseline on OpenDP's polars).

OpenDP pins an exact polars version (0.16.0: polars 1.36.1; its Rust core deserializes
the polars query plan and refuses a plan from another polars), while dpframe needs polars
>= 2, so the OpenDP paths run in a *separate interpreter*: ``--opendp-python PATH``, else
``$DPFRAME_BENCH_OPENDP_PYTHON``, else this interpreter if its opendp and polars match,
else ``~/.cache/dpframe-bench/opendp-venv/bin/python``. Create that one with::

    python3 -m venv ~/.cache/dpframe-bench/opendp-venv
    ~/.cache/dpframe-bench/opendp-venv/bin/pip install "opendp[polars]"

Without one, the OpenDP rows say why they were not measured and the rest still runs.
The OpenDP interpreter runs as a long-lived worker, so all six paths still alternate
within each repeat (best of N); ``import opendp`` never happens in this process, so its
``pl.Expr.dp`` namespace cannot collide with dpframe's.

Each DP path's time is split into *build* (dpframe: ``group_by(...).agg(...)``, which
calibrates the mechanisms; OpenDP: context, query and ``release()``, which calibrates the
noise scale by binary search) and *collect* (the data pass and the noise). Peak memory
(``ru_maxrss``) comes from a fresh subprocess per path and run, started through a tiny
launcher so it does not inherit this process's peak.

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing or a memory figure.

Run from the repository root::

    .venv/bin/python benchmarks/bench_grouped_mean.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

# No top-level dpframe / opendp import: this file also runs in OpenDP's interpreter
# (polars 1.x, no dpframe), and opendp must never be imported next to dpframe.

EPSILON = 1.0
LOWER, UPPER = 0.0, 10.0
DEFAULT_OPENDP_VENV = Path.home() / ".cache" / "dpframe-bench" / "opendp-venv"

# Paths run in this process (dpframe's polars) and in OpenDP's interpreter (its polars).
LOCAL = ("plain", "private", "public")
REMOTE = ("odp_plain", "opendp", "opendp_lengths")
LABELS = {
    "plain": "plain polars (baseline)",
    "private": "dpframe, private sizes",
    "public": "dpframe, public sizes",
    "odp_plain": "plain polars, OpenDP's env",
    "opendp": "OpenDP, private sizes",
    "opendp_lengths": "OpenDP, public lengths",
}
COUNTERPART = {"private": "opendp", "public": "opendp_lengths"}


# -- data -------------------------------------------------------------------------------


def write_data(path: Path, rows: int, groups: int) -> None:
    """``rows`` records: an Int64 key ``g`` uniform over ``groups``, ``x`` uniform in [0, 10)."""
    rng = np.random.default_rng(12345)
    pl.DataFrame(
        {
            "g": rng.integers(0, groups, rows, dtype=np.int64),
            "x": rng.uniform(LOWER, UPPER, rows),
        }
    ).write_parquet(path)


def write_margins(data: Path, path: Path, groups: int) -> None:
    """Every key ``0..groups-1`` and its true size ``n`` (0 for a group absent from the data)."""
    keys = pl.DataFrame({"g": np.arange(groups, dtype=np.int64)})
    sizes = pl.scan_parquet(data).group_by("g").agg(pl.len().cast(pl.Int64).alias("n")).collect()
    keys.join(sizes, on="g", how="left").with_columns(pl.col("n").fill_null(0)).write_parquet(path)


# -- the paths: each returns (build seconds, released frame) -----------------------------


def run_plain(data: Path, margins: pl.DataFrame, max_length: int) -> tuple[float, pl.DataFrame]:
    lf = pl.scan_parquet(data)
    out = lf.group_by("g").agg(pl.col("x").clip(LOWER, UPPER).mean()).collect(engine="streaming")
    return 0.0, out


def _run_dpframe(
    data: Path, margins: pl.DataFrame, sizes: str | None
) -> tuple[float, pl.DataFrame]:
    import dpframe

    t = time.perf_counter()
    lf = pl.scan_parquet(data)
    acct = dpframe.Accountant(epsilon=1e6)
    keys = margins if sizes else margins.select("g")
    release = dpframe.group_by(lf, "g", margins=keys, sizes=sizes, accountant=acct).agg(
        dpframe.agg.mean("x", lower=LOWER, upper=UPPER, epsilon=EPSILON)
    )
    build = time.perf_counter() - t
    return build, release.collect()  # always streaming


def run_private(data: Path, margins: pl.DataFrame, max_length: int) -> tuple[float, pl.DataFrame]:
    return _run_dpframe(data, margins, None)


def run_public(data: Path, margins: pl.DataFrame, max_length: int) -> tuple[float, pl.DataFrame]:
    return _run_dpframe(data, margins, "n")


def _opendp_query(data: Path, margins: pl.DataFrame, max_length: int, lengths: bool) -> Any:
    """OpenDP's grouped mean query (not released yet); see the module docstring."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    margin = dp.polars.Margin(
        by=["g"],
        max_length=max_length,  # a public bound on a group's size: see the module docstring
        max_groups=margins.height,
        invariant="lengths" if lengths else None,
    )
    context = dp.Context.compositor(
        data=pl.scan_parquet(data),
        privacy_unit=dp.unit_of(changes=1),  # substitute one record, as dpframe's default
        privacy_loss=dp.loss_of(epsilon=EPSILON),
        split_evenly_over=1,
        margins=[margin],
    )
    query = context.query().group_by("g").agg(pl.col("x").fill_null(0).dp.mean((LOWER, UPPER)))
    # lengths invariant: the keys are public too (and every key is in the data here)
    return query if lengths else query.with_keys(margins.select("g"))


def _run_opendp(
    data: Path, margins: pl.DataFrame, max_length: int, lengths: bool
) -> tuple[float, pl.DataFrame]:
    t = time.perf_counter()
    released = _opendp_query(data, margins, max_length, lengths).release()
    build = time.perf_counter() - t
    return build, released.collect()


def run_opendp(data: Path, margins: pl.DataFrame, max_length: int) -> tuple[float, pl.DataFrame]:
    return _run_opendp(data, margins, max_length, lengths=False)


def run_opendp_lengths(
    data: Path, margins: pl.DataFrame, max_length: int
) -> tuple[float, pl.DataFrame]:
    return _run_opendp(data, margins, max_length, lengths=True)


PATHS: dict[str, Callable[[Path, pl.DataFrame, int], tuple[float, pl.DataFrame]]] = {
    "plain": run_plain,
    "private": run_private,
    "public": run_public,
    "odp_plain": run_plain,
    "opendp": run_opendp,
    "opendp_lengths": run_opendp_lengths,
}


def timed(name: str, data: Path, margins: pl.DataFrame, max_length: int) -> dict[str, Any]:
    """Run one path once: build and total seconds, and the released frame."""
    t = time.perf_counter()
    build, out = PATHS[name](data, margins, max_length)
    total = time.perf_counter() - t
    return {"build": build, "total": total, "out": out}


def errors(out: pl.DataFrame, exact: pl.DataFrame) -> dict[str, float]:
    """Mean and max |released - exact| over the groups, and how many are null/NaN/inf."""
    (value,) = (c for c in out.columns if c != "g")  # "x" or dpframe's "x_mean"
    both = exact.rename({"x": "exact"}).join(out.rename({value: "released"}), on="g", how="left")
    x = both["released"].to_numpy().astype(float)
    finite = np.isfinite(x)
    err = np.abs(x[finite] - both["exact"].to_numpy()[finite])
    return {
        "mean_err": float(err.mean()) if err.size else float("nan"),
        "max_err": float(err.max()) if err.size else float("nan"),
        "not_finite": int((~finite).sum()),
        "height": out.height,
    }


# -- OpenDP's interpreter: probe, worker ------------------------------------------------

_PROBE = """
import json
from importlib.metadata import version
import polars
from opendp.mod import _EXPECTED_POLARS_VERSION as expected
print(json.dumps({"opendp": version("opendp"), "polars": polars.__version__,
                  "expected": expected}))
"""


def find_opendp_python(requested: str | None) -> tuple[str | None, dict[str, str], str]:
    """An interpreter whose opendp and polars match: (path, versions, why not)."""
    if requested:
        candidates = [requested]
    else:
        env = os.environ.get("DPFRAME_BENCH_OPENDP_PYTHON")
        candidates = [env] if env else []
        candidates += [sys.executable, str(DEFAULT_OPENDP_VENV / "bin" / "python")]
    reasons = []
    for py in candidates:
        if not Path(py).exists():
            reasons.append(f"{py}: no such interpreter")
            continue
        res = subprocess.run([py, "-c", _PROBE], capture_output=True, text=True)
        if res.returncode:
            last = (res.stderr.strip().splitlines() or ["?"])[-1]
            reasons.append(f"{py}: {last}")
            continue
        info = json.loads(res.stdout)
        if info["polars"] != info["expected"]:
            reasons.append(
                f"{py}: opendp {info['opendp']} needs polars {info['expected']} exactly (its "
                f"Rust core refuses a query plan serialized by another polars), found polars "
                f"{info['polars']}"
            )
            continue
        return py, info, ""
    return None, {}, "; ".join(reasons)


def opendp_summary(data: Path, margins: pl.DataFrame, max_length: int) -> dict[str, list[dict]]:
    """OpenDP's own summary (noise distribution and scale) of both OpenDP queries."""
    return {
        name: _opendp_query(data, margins, max_length, lengths=(name == "opendp_lengths"))
        .summarize()
        .select("aggregate", "distribution", "scale")
        .to_dicts()
        for name in ("opendp", "opendp_lengths")
    }


def worker(data: Path, margins_path: Path, max_length: int) -> None:
    """OpenDP's side: read a path name per line, run it, answer one JSON line."""
    margins = pl.read_parquet(margins_path)
    exact = None
    for line in sys.stdin:
        cmd = line.strip()
        try:
            if cmd == "summary":
                reply: dict[str, Any] = {"summary": opendp_summary(data, margins, max_length)}
            else:
                run = timed(cmd, data, margins, max_length)
                out = run.pop("out")
                if cmd == "odp_plain":
                    exact = out
                reply = {**run, **(errors(out, exact) if exact is not None else {})}
        except Exception as exc:  # report it; the parent decides
            reply = {"error": f"{type(exc).__name__}: {str(exc).strip()[-500:]}"}
        print(json.dumps(reply), flush=True)


class Worker:
    """A long-lived OpenDP interpreter running :func:`worker`."""

    def __init__(self, python: str, data: Path, margins: Path, max_length: int, log: Path) -> None:
        self._log = log.open("w")
        cmd = [python, __file__, "--worker", "--data", str(data), "--margins", str(margins)]
        self.proc = subprocess.Popen(
            [*cmd, "--max-length", str(max_length)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )

    def ask(self, cmd: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"the OpenDP worker exited (see its stderr in {self._log.name})"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._log.close()


# -- memory -----------------------------------------------------------------------------


def maxrss_mib() -> float:
    """This process's peak resident set size so far, in MiB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes vs KiB


def child(name: str, data: Path, margins_path: Path, max_length: int) -> None:
    """Subprocess entry: run one path once, print peak RSS before and after (MiB)."""
    margins = pl.read_parquet(margins_path)
    if name in ("private", "public"):
        import dpframe  # noqa: F401  (the library is part of the pre-query floor)
    elif name.startswith("opendp"):
        import opendp.prelude  # noqa: F401
    before = maxrss_mib()
    _, out = PATHS[name](data, margins, max_length)
    after = maxrss_mib()
    print(f"{before:.1f} {after:.1f} {out.height}")


# Linux carries a process's peak RSS over into a child it spawns (ru_maxrss survives
# fork/vfork + exec), so a child started from this (large) process would report at least
# our own peak. A tiny launcher process in between gives the child a clean floor.
_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def measure_memory(
    python: str, name: str, data: Path, margins: Path, max_length: int, runs: int
) -> tuple[float, float] | str:
    """Lowest peak RSS over ``runs`` fresh subprocesses: (peak, above pre-query peak)."""
    best_peak = best_delta = float("inf")
    for _ in range(runs):
        cmd = [sys.executable, "-c", _LAUNCHER, python, __file__, "--child", name]
        res = subprocess.run(
            [*cmd, "--data", str(data), "--margins", str(margins), "--max-length", str(max_length)],
            capture_output=True,
            text=True,
        )
        if res.returncode:
            return (res.stderr.strip().splitlines() or ["failed"])[-1][:200]
        before, after, _ = res.stdout.split()
        best_peak = min(best_peak, float(after))
        best_delta = min(best_delta, float(after) - float(before))
    return best_peak, best_delta


# -- report -----------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` formatted (two significant digits below 0.1), or "-"."""
    if a is None or not b:
        return "-"
    r = a / b
    return f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"


def dpframe_noise(margins: pl.DataFrame) -> dict[str, str]:
    """dpframe's own plan of both releases (no data read, nothing charged)."""
    import dpframe

    lf = pl.LazyFrame({"g": [0], "x": [0.0]})
    notes = {}
    for name, sizes in (("private", None), ("public", "n")):
        keys = margins if sizes else margins.select("g")
        acct = dpframe.Accountant(epsilon=1e6)
        release = dpframe.group_by(lf, "g", margins=keys, sizes=sizes, accountant=acct).agg(
            dpframe.agg.mean("x", lower=LOWER, upper=UPPER, epsilon=EPSILON)
        )
        plan = release.plans()[0]
        if sizes is None:
            parts = ", ".join(
                f"{p}: sensitivity {d['sensitivity']:g}, eps {d['epsilon']:g}"
                for p, d in plan.details["parts"].items()
            )
            notes[name] = (
                f"{plan.mechanism} (grid Laplace; {parts}; largest scale {plan.scale:.4g}); "
                f"charged eps {plan.epsilon:g}"
            )
        else:
            notes[name] = (
                f"{plan.mechanism} per group size ({plan.details['distinct_sizes']} sizes): "
                f"scale {plan.details['scale_min']:.4g}..{plan.scale:.4g}, output in "
                f"[{LOWER:g}, {UPPER:g}]; charged eps {plan.epsilon:.6g}"
            )
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e6 rows and 1e3 groups")
    parser.add_argument("--repeats", type=int, help="timing repeats, best kept (3; --quick: 2)")
    parser.add_argument("--mem-runs", type=int, default=1, help="subprocesses per memory figure")
    parser.add_argument("--opendp-python", help="an interpreter with opendp and its polars")
    parser.add_argument(
        "--opendp-max-length",
        choices=("largest", "rows"),
        default="largest",
        help="OpenDP's Margin.max_length: the largest group size (default) or the row count",
    )
    parser.add_argument("--no-opendp", action="store_true", help="skip the OpenDP paths")
    parser.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--margins", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--max-length", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.margins, args.max_length)
        return
    if args.worker:
        worker(args.data, args.margins, args.max_length)
        return

    rows, groups = (1_000_000, 1_000) if args.quick else (10_000_000, 10_000)
    # OpenDP calibrates its noise scale by a binary search costing seconds per release,
    # whatever the data size: fewer repeats than the other scripts keep a run short.
    if args.repeats is None:
        args.repeats = 2 if args.quick else 3
    if args.no_opendp:
        odp_python, odp_info, why = None, {}, "--no-opendp"
    else:
        odp_python, odp_info, why = find_opendp_python(args.opendp_python)
    try:
        dpf_version = version("dpframe")
    except PackageNotFoundError:
        dpf_version = "?"
    odp_desc = (
        f"opendp {odp_info['opendp']} on polars {odp_info['polars']}"
        if odp_python
        else "opendp not measured"
    )
    print(
        f"bench_grouped_mean: numpy {np.__version__}, polars {pl.__version__}, "
        f"dpframe {dpf_version}, {odp_desc}, python {platform.python_version()}, "
        f"cpu_count={os.cpu_count()}, POLARS_MAX_THREADS={pl.thread_pool_size()}, "
        f"rows={rows:.0e}, groups={groups:.0e}, epsilon={EPSILON:g}, "
        f"OpenDP max_length={args.opendp_max_length}, best of {args.repeats}, "
        f"memory: min of {args.mem_runs} subprocess(es)"
    )
    if odp_python is None:
        print(f"  OpenDP not measured: {why}")

    with tempfile.TemporaryDirectory(prefix="dpframe-bench-") as tmp:
        data, margins_path = Path(tmp) / "data.parquet", Path(tmp) / "margins.parquet"
        t = time.perf_counter()
        write_data(data, rows, groups)
        write_margins(data, margins_path, groups)
        size_mb = data.stat().st_size / 1e6
        print(f"  wrote {data.name}: {size_mb:.0f} MB in {time.perf_counter() - t:.1f} s")
        margins = pl.read_parquet(margins_path)
        largest = int(margins["n"].max())
        max_length = largest if args.opendp_max_length == "largest" else rows
        print(f"  largest group: {largest} records; OpenDP's max_length: {max_length}")

        # Warm up every path once. OpenDP's warm-up is its own summary of both queries
        # (the same calibration as a release, minus the data pass, which the plain query
        # warms), so its released values' error comes from the first timed repeat.
        exact = timed("plain", data, margins, max_length)["out"]
        quality: dict[str, dict[str, float]] = {}
        for name in ("private", "public"):
            quality[name] = errors(timed(name, data, margins, max_length)["out"], exact)
        odp: Worker | None = None
        odp_summary: dict[str, list[dict]] = {}
        summary_error = "not measured"
        failed: dict[str, str] = {}
        if odp_python:
            odp = Worker(odp_python, data, margins_path, max_length, Path(tmp) / "worker.log")
            reply = odp.ask("odp_plain")
            if "error" in reply:
                failed["odp_plain"] = reply["error"]
            reply = odp.ask("summary")
            odp_summary = reply.get("summary", {})
            summary_error = reply.get("error", "")
            print(f"  OpenDP worker: {odp_python}", flush=True)
        active = [*LOCAL, *(n for n in REMOTE if odp and n not in failed)]

        builds: dict[str, list[float]] = {n: [] for n in active}
        totals: dict[str, list[float]] = {n: [] for n in active}
        for _ in range(args.repeats):  # alternate: every path sees the same load
            for name in list(active):
                if name in LOCAL:
                    run = timed(name, data, margins, max_length)
                else:
                    assert odp is not None
                    run = odp.ask(name)
                    if "error" in run:  # report it, keep measuring the rest
                        failed[name] = run["error"]
                        active.remove(name)
                        del builds[name], totals[name]
                        continue
                    quality.setdefault(name, run)
                builds[name].append(run["build"])
                totals[name].append(run["total"])
        if odp:
            odp.close()
        for name in active:  # every path released every margin group
            if quality.get(name, {}).get("height", groups) != groups:
                raise RuntimeError(f"{name}: {quality[name]['height']} groups, not {groups}")

        memory: dict[str, tuple[float, float] | str] = {}
        for name in active:
            py = sys.executable if name in LOCAL else str(odp_python)
            memory[name] = measure_memory(py, name, data, margins_path, max_length, args.mem_runs)

    best = {n: min(v) for n, v in totals.items()}
    best_build = {n: min(v) for n, v in builds.items()}
    collect = {n: min(t - b for t, b in zip(totals[n], builds[n], strict=True)) for n in active}
    polars_of = {n: pl.__version__ if n in LOCAL else odp_info.get("polars", "?") for n in PATHS}

    def own_plain(name: str) -> str:
        return "plain" if name in LOCAL else "odp_plain"

    print()
    print(
        f"time (s, best of {args.repeats}, paths alternated; build = plan and calibrate, "
        "collect = data pass + noise)"
    )
    print(
        f"  {'path':<28} {'polars':>7}  {'build s':>8}  {'collect s':>9}  {'total s':>8}  "
        f"{'/ own plain':>11}  {'/ plain':>7}"
    )
    for name in PATHS:
        label = f"  {LABELS[name]:<28} {polars_of[name]:>7}  "
        if name not in best:
            reason = failed.get(name, why)
            print(f"{label}not measured: {reason[:160]}")
            continue
        build = f"{best_build[name]:.3f}" if name not in ("plain", "odp_plain") else "-"
        print(
            f"{label}{build:>8}  {collect[name]:>9.3f}  {best[name]:>8.3f}  "
            f"{ratio(best[name], best[own_plain(name)]):>11}  {ratio(best[name], best['plain']):>7}"
        )
    print(
        "  ('own plain': the plain aggregation on the same polars; '/ plain': on polars "
        f"{pl.__version__})"
    )

    print()
    print("dpframe / OpenDP (same statistic, same neighbours, same epsilon; < 1: dpframe faster)")
    print(f"  {'release':<16} {'total':>7}  {'collect':>7}  {'build':>7}")
    for mine, theirs in COUNTERPART.items():
        if theirs not in best:
            print(f"  {mine + ' sizes':<16} not measured (OpenDP: {failed.get(theirs, why)[:120]})")
            continue
        print(
            f"  {mine + ' sizes':<16} {ratio(best[mine], best[theirs]):>7}  "
            f"{ratio(collect[mine], collect[theirs]):>7}  "
            f"{ratio(best_build[mine], best_build[theirs]):>7}"
        )

    print()
    print(
        f"peak memory (MiB, ru_maxrss of a fresh subprocess, min of {args.mem_runs}; "
        "'query' = above the pre-query peak: interpreter, polars, the DP library, margins)"
    )
    print(
        f"  {'path':<28} {'peak':>7}  {'query':>7}  {'peak / own plain':>16}  "
        f"{'query / own plain':>17}"
    )
    for name in PATHS:
        label = f"  {LABELS[name]:<28} "
        mem = memory.get(name)
        if mem is None:
            print(f"{label}not measured")
        elif isinstance(mem, str):
            print(f"{label}failed: {mem}")
        else:
            base = memory.get(own_plain(name))
            base_peak, base_query = base if isinstance(base, tuple) else (None, None)
            q_ratio = ratio(mem[1], base_query) if base_query and base_query >= 1 else "-"
            print(
                f"{label}{mem[0]:>7.0f}  {mem[1]:>7.0f}  {ratio(mem[0], base_peak):>16}  "
                f"{q_ratio:>17}"
            )

    print()
    print("noise and error (one release per path; |released - exact mean| over the groups)")
    notes = dpframe_noise(margins)
    for name in ("private", "public", "opendp", "opendp_lengths"):
        if name in notes:
            how = notes[name]
        elif name in odp_summary:
            how = "; ".join(
                f"{r['aggregate']} {r['distribution']} scale {r['scale']:.4g}"
                for r in odp_summary[name]
            )
        else:
            how = f"(OpenDP's summary: {summary_error[:120]})"
        q = quality.get(name)
        err = (
            f"mean |err| {q['mean_err']:.3g}, max {q['max_err']:.3g}, non-finite {q['not_finite']}"
            if q and "mean_err" in q
            else ""
        )
        print(f"  {LABELS[name]:<28} {how}")
        if err:
            print(f"  {'':<28} {err}")


if __name__ == "__main__":
    main()
