"""Truncated and BIT grid-Laplace releases against numpy's floating-point Laplace.

Releases 1e6 statistics (``--quick``: 1e5) through
``dpframe.mechanisms.calibrate_bounded(...).release`` -- exact integer noise from the
secure AES-CTR source, truncation by the exact truncated discrete Laplace sampler -- and
through ``sample_truncated_laplace`` / ``sample_bit_laplace`` (a location per value), and
times ``numpy.random.default_rng().laplace`` (floating point, PCG64, *not* safe for DP) on
the same number of draws in the same run, alternately with each case so that both see
the same load. Placements: a constant location, a location per value spread over the
interval, all on a bound, the scale much larger than the interval, the scale below the
grid step. Prints the best of ``--repeats`` and the ratio to numpy, against the goals of
issue 18: truncated <= 3x, BIT <= 2.5x.

Run from the repository root::

    python benchmarks/bench_bounded.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from dpframe.core.randomness import secure_generator
from dpframe.mechanisms.bounded import (
    calibrate_bounded,
    sample_bit_laplace,
    sample_truncated_laplace,
)

GOALS = {"truncated": 3.0, "bit": 2.5}


def best_pair(
    a: Callable[[], object], b: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Best-of-``repeats`` wall time of ``a`` and of ``b``, run alternately."""
    best_a = best_b = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a()
        best_a = min(best_a, time.perf_counter() - t)
        t = time.perf_counter()
        b()
        best_b = min(best_b, time.perf_counter() - t)
    return best_a, best_b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 draws instead of 1e6")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    print(
        f"bench_bounded: numpy {np.__version__}, python {platform.python_version()}, "
        f"cpu_count={os.cpu_count()}, n={n:.0e}, best of {args.repeats}; goals: "
        + ", ".join(f"{k} <= {v}x" for k, v in GOALS.items())
    )
    numpy_rng = np.random.default_rng()
    numpy_rng.laplace(size=n)  # warm up
    spread = np.linspace(0, 1, n)
    releases = {  # label: (values, sensitivity, lower, upper, epsilon, granularity)
        "constant location 0.5, Δ=0.01": (np.full(n, 0.5), 0.01, 0.0, 1.0, 1.0, None),
        "spread over [0, 1], Δ=0.01": (spread, 0.01, 0.0, 1.0, 1.0, None),
        "all on the lower bound, Δ=0.01": (np.zeros(n), 0.01, 0.0, 1.0, 1.0, None),
        "scale >> width: Δ=1 on [0, 0.1]": (np.full(n, 0.05), 1.0, 0.0, 0.1, 1.0, None),
        "scale >> width: spread, Δ=1 on [0,0.1]": (spread / 10, 1.0, 0.0, 0.1, 1.0, None),
        "scale < grid step: g=1/16, ε=4": (spread, 0.01, 0.0, 1.0, 4.0, 2.0**-4),
    }
    cases: list[tuple[str, str, Callable[[], object]]] = []
    for label, (values, sens, lo, hi, eps, g) in releases.items():
        for method in ("truncated", "bit"):
            cal = calibrate_bounded(eps, sens, lo, hi, method=method, granularity=g)
            cases.append(
                (
                    label,
                    method,
                    lambda cal=cal, values=values: cal.release(values, secure_generator()),
                )
            )
    for label in ("sample_*: loc per value, scale 0.5", "sample_*: loc 0 on a bound, scale 0.5"):
        loc = spread if "per value" in label else 0.0
        size = None if "per value" in label else n
        cases.append(
            (
                label,
                "truncated",
                lambda loc=loc, size=size: sample_truncated_laplace(
                    loc, 0.5, 0.0, 1.0, size=size, rng=secure_generator()
                ),
            )
        )
        cases.append(
            (
                label,
                "bit",
                lambda loc=loc, size=size: sample_bit_laplace(
                    loc, 0.5, 0.0, 1.0, size=size, rng=secure_generator()
                ),
            )
        )
    print(f"\n{'case':40s} {'method':10s} {'time s':>8s} {'numpy s':>8s} {'/numpy':>7s}  goal")
    worst = dict.fromkeys(GOALS, 0.0)
    for label, method, fn in cases:
        fn()  # warm up (caches, page-in)
        t, base = best_pair(fn, lambda: numpy_rng.laplace(size=n), args.repeats)
        ratio = t / base
        worst[method] = max(worst[method], ratio)
        verdict = "met" if ratio <= GOALS[method] else "NOT met"
        print(f"{label:40s} {method:10s} {t:8.4f} {base:8.4f} {ratio:7.2f}  {verdict}")
    print()
    for method, goal in GOALS.items():
        verdict = "met" if worst[method] <= goal else "NOT met"
        print(f"worst {method}: {worst[method]:.2f}x numpy (goal <= {goal}x): {verdict}")


if __name__ == "__main__":
    main()
