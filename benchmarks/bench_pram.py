"""PRAM sampling against a numpy floor (one uniform + one gather per row), in the same run.

Times ``PramSampler.randomize`` (``dpframe.mechanisms.pram.sampling``: exact, integer-only
decisions) on 1e7 ``int64`` category codes (``--quick``: 1e6) for

* the grid sampler of an MI-optimal design (``design(p, 1.0)``, ``p ~ Dirichlet(1)``,
  codes drawn from ``p``), S = 10 and S = 1000;
* the alias sampler of a general matrix (rows ``0.5 Dirichlet(1) + 0.5 / S``),
  S = 10 and S = 100;

against the *numpy floor* measured in the same run, on the same codes and generator:
``np.where(rng.random(n) < q[codes], codes, -1)`` with ``q`` the matrix's diagonal, i.e.
one uniform draw, one gather, one comparison and one select per row -- less than any
PRAM does (it never picks a target), so ``dpframe / floor`` is the price of the whole
mechanism over the cheapest honest numpy pass (goal: <= 2). A second reference for the
grid sampler is a floating-point PRAM written in numpy (one uniform + one gather; the
target is read from the same uniform): what a user would write, and not safe for
differential privacy. All paths run alternately, best of ``--repeats`` (default 5; 2
with ``--quick``), both on dpframe's secure generator (``secure_generator()``,
AES-128-CTR) and on PCG64.

Also printed: the same 1e7 rows sent in batches of 1e5 (``--quick``: 1e4), as the polars
integration does once per morsel; :func:`~dpframe.mechanisms.pram.optimum.design` time for
S = 10, 100, 1000, priors Dirichlet(0.1), Dirichlet(1), Zipf (``p_k ~ 1/k``) and
uniform, eps = 0.5, 1, 2, 4 (best of 3); and the peak memory traced by ``tracemalloc``
while randomizing 1e7 codes (``int64`` and ``uint32`` input), as a multiple of the
input's size, with the floor's for reference.

Last, ``.dp.pram`` on an in-memory frame through the runner: ``dpframe.collect`` of
``pl.DataFrame({"c": codes}).lazy().select(pl.col("c").dp.pram(1.0, categories=range(S)))``
(the expression built once, outside the timing) on 1e7 ``int64`` codes (``--quick``:
1e6), S = 5, 10 and 1000 (uniform prior), against *its own sampler*:
``sampler(design).randomize(codes, secure)`` of the design the run used, on the same
codes, in the same run (goal: collect/sampler <= 1.5); with the time of the plan's
inspection alone (``inspect_plan``) and of ``LazyFrame.serialize()`` of the same query
with a plain Python function in place of the release (polars writes the frame's data
into it; the inspection's floor); and, against the same sampler, ``dpframe.collect`` of
the same release over ``dpframe.scan_frame(frame)`` (the plan checked without the frame's
data) and ``frame.dpf.with_columns(release)`` (which runs over ``scan_frame`` too).

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    python benchmarks/bench_pram.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from dpframe.core.randomness import secure_generator
from dpframe.mechanisms import pram
from dpframe.mechanisms.pram.sampling import _CHUNK

EPSILONS = (0.5, 1.0, 2.0, 4.0)
GOAL = 2.0


def best_of(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """Best-of-``repeats`` wall time of each of ``fns``, run alternately."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def floor(codes: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniform + one gather + compare + select per row: the numpy floor."""
    return np.where(rng.random(codes.size) < q[codes], codes, -1)


def float_pram(codes: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """PRAM in floating point (not DP-safe): move iff u < 1 - q_k, target from u too."""
    s = q.size
    u = rng.random(codes.size)
    m = 1.0 - q[codes]
    t = np.minimum((u / m * (s - 1)).astype(np.int64), s - 2)
    t += t >= codes
    return np.where(u < m, t, codes)


def alias_matrix(s: int, rng: np.random.Generator) -> np.ndarray:
    return 0.5 * rng.dirichlet(np.ones(s), size=s) + 0.5 / s


def priors(s: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    zipf = 1.0 / np.arange(1, s + 1)
    return {
        "Dirichlet(0.1)": rng.dirichlet(np.full(s, 0.1)),
        "Dirichlet(1)": rng.dirichlet(np.ones(s)),
        "Zipf": zipf / zipf.sum(),
        "uniform": np.full(s, 1.0 / s),
    }


def batched(
    fn: Callable[[np.ndarray], np.ndarray], codes: np.ndarray, batch: int
) -> Callable[[], None]:
    def run() -> None:
        for start in range(0, codes.size, batch):
            fn(codes[start : start + batch])

    return run


def traced_peak(fn: Callable[[], object]) -> int:
    """Peak bytes traced by tracemalloc while ``fn`` runs (its result included)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
        del out
    finally:
        tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e6 rows, batches of 1e4")
    parser.add_argument(
        "--repeats", type=int, default=None, help="repeats per timing, best kept (5; --quick 2)"
    )
    args = parser.parse_args()
    n = 1_000_000 if args.quick else 10_000_000
    batch = 10_000 if args.quick else 100_000
    repeats = args.repeats or (2 if args.quick else 5)

    try:
        import polars as pl

        polars_version = pl.__version__
    except ImportError:
        polars_version = "not installed"
    print(
        f"bench_pram: numpy {np.__version__}, polars {polars_version}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, n={n:,}, "
        f"best of {repeats}, pram.sampling._CHUNK={_CHUNK}"
    )

    setup = np.random.default_rng(20240611)  # matrices and codes only, never the noise
    cases = []
    for s in (10, 1000):
        p = setup.dirichlet(np.ones(s))
        sam = pram.sampler(pram.design(p, 1.0))
        cases.append(("grid", s, sam, p))
    for s in (10, 100):
        sam = pram.sampler(alias_matrix(s, setup))
        cases.append(("alias", s, sam, np.full(s, 1.0 / s)))
    prepared = []
    for kind, s, sam, p in cases:
        codes = setup.choice(s, size=n, p=p).astype(np.int64)
        q = np.ascontiguousarray(np.diag(sam.matrix))
        prepared.append((kind, s, sam, codes, q))
    generators = (("secure", secure_generator()), ("PCG64", np.random.default_rng()))

    print(
        "\nsampling (1) grid sampler of design(Dirichlet(1) prior, eps=1), "
        "(2) alias sampler of a general matrix;"
    )
    print("floor = np.where(rng.random(n) < q[codes], codes, -1); goal dpframe/floor <= 2")
    head = (
        f"{'rng':>6}  {'sampler':>7}  {'S':>5}  {'dpframe s':>9}  {'floor s':>8}  "
        f"{'ratio':>5}  {'float s':>8}  {'float/floor':>11}  {'M rows/s':>8}"
    )
    print(head)
    for gname, g in generators:
        for kind, s, sam, codes, q in prepared:
            fns: list[Callable[[], object]] = [
                partial(sam.randomize, codes, g),
                partial(floor, codes, q, g),
            ]
            if kind == "grid":
                fns.append(partial(float_pram, codes, q, g))
            sam.randomize(codes[:1000], g)  # warm up
            times = best_of(fns, repeats)
            t_dp, t_floor = times[:2]
            flt = (
                f"{times[2]:>8.4f}  {times[2] / t_floor:>11.2f}"
                if len(times) > 2
                else f"{'-':>8}  {'-':>11}"
            )
            print(
                f"{gname:>6}  {kind:>7}  {s:>5}  {t_dp:>9.4f}  {t_floor:>8.4f}  "
                f"{t_dp / t_floor:>5.2f}  {flt}  {n / t_dp / 1e6:>8.1f}"
            )

    print(f"\nthe same {n:,} rows in batches of {batch:,} (one randomize call per batch)")
    print(f"{'rng':>6}  {'sampler':>7}  {'S':>5}  {'dpframe s':>9}  {'floor s':>8}  {'ratio':>5}")
    gname, g = generators[0]
    for kind, s, sam, codes, q in (prepared[0], prepared[3]):
        t_dp, t_floor = best_of(
            [
                batched(partial(sam.randomize, rng=g), codes, batch),
                batched(partial(floor, q=q, rng=g), codes, batch),
            ],
            repeats,
        )
        print(
            f"{gname:>6}  {kind:>7}  {s:>5}  {t_dp:>9.4f}  {t_floor:>8.4f}  {t_dp / t_floor:>5.2f}"
        )

    print("\ndesign(p, eps) time, ms (best of 3)")
    print(f"{'S':>5}  {'prior':>14}  " + "  ".join(f"{f'eps={e:g}':>8}" for e in EPSILONS))
    worst = 0.0
    for s in (10, 100, 1000):
        for name, p in priors(s, setup).items():
            row = []
            for eps in EPSILONS:
                (t,) = best_of([lambda p=p, eps=eps: pram.design(p, eps)], 3)
                row.append(t)
                worst = max(worst, t)
            print(f"{s:>5}  {name:>14}  " + "  ".join(f"{t * 1e3:>8.1f}" for t in row))
    print(f"slowest design: {worst * 1e3:.1f} ms")

    print(f"\npeak memory traced by tracemalloc while randomizing {n:,} codes (secure rng)")
    print(
        f"{'input':>6}  {'sampler':>7}  {'S':>5}  {'input MB':>8}  {'dpframe MB':>10}  "
        f"{'x input':>7}  {'floor MB':>8}  {'x input':>7}"
    )
    for dtype in (np.int64, np.uint32):
        for kind, s, sam, codes, q in (prepared[0], prepared[3]):
            c = codes.astype(dtype)
            peak_dp = traced_peak(lambda c=c, sam=sam: sam.randomize(c, g))
            peak_floor = traced_peak(lambda c=c, q=q: floor(c, q, g))
            mb = 1e6
            print(
                f"{np.dtype(dtype).name:>6}  {kind:>7}  {s:>5}  {c.nbytes / mb:>8.1f}  "
                f"{peak_dp / mb:>10.1f}  {peak_dp / c.nbytes:>7.2f}  "
                f"{peak_floor / mb:>8.1f}  {peak_floor / c.nbytes:>7.2f}"
            )

    in_memory_collect(n, repeats)


def in_memory_collect(n: int, repeats: int) -> None:
    """``.dp.pram`` of an in-memory frame through ``dpframe.collect`` against its sampler."""
    import polars as pl

    import dpframe
    from dpframe.polars.runner import inspect_plan, last_run

    print(
        f"\n.dp.pram on an in-memory frame of {n:,} int64 codes through dpframe.collect, "
        "against its own sampler (secure rng); goal collect/sampler <= 1.5"
    )
    print(
        f"{'S':>5}  {'collect s':>9}  {'sampler s':>9}  {'ratio':>5}  {'inspect s':>9}  "
        f"{'serialize s':>11}  {'scan_frame s':>12}  {'ratio':>5}  {'with_columns s':>14}  "
        f"{'ratio':>5}"
    )
    setup = np.random.default_rng(20261128)
    for s in (5, 10, 1000):
        codes = setup.integers(0, s, n)
        frame = pl.DataFrame({"c": codes})
        acct = dpframe.Accountant(epsilon=10.0 * (3 * repeats + 3))
        # the expression is built once (its design, found at build time, is not timed);
        # each collect is a new run of it, charged again
        release = pl.col("c").dp.pram(1.0, categories=list(range(s)), accountant=acct)
        query = frame.lazy().select(release)
        out = dpframe.collect(query)
        run = last_run()
        assert run is not None and out.height == n
        sam = pram.sampler(run.designs["c"])
        g = secure_generator()
        plain = frame.lazy().select(pl.col("c").map_batches(lambda x: x))
        scanned = dpframe.scan_frame(frame).select(release)
        t_collect, t_sampler, t_inspect, t_serialize, t_scanned, t_with = best_of(
            [
                partial(dpframe.collect, query),
                partial(sam.randomize, codes, g),
                partial(inspect_plan, query),
                plain.serialize,
                partial(dpframe.collect, scanned),
                partial(frame.dpf.with_columns, release),
            ],
            repeats,
        )
        print(
            f"{s:>5}  {t_collect:>9.4f}  {t_sampler:>9.4f}  {t_collect / t_sampler:>5.2f}  "
            f"{t_inspect:>9.4f}  {t_serialize:>11.4f}  {t_scanned:>12.4f}  "
            f"{t_scanned / t_sampler:>5.2f}  {t_with:>14.4f}  {t_with / t_sampler:>5.2f}"
        )


if __name__ == "__main__":
    main()
