"""Truncated and BIT grid-Laplace releases against numpy's floating-point Laplace.

Releases 1e6 statistics (``--quick``: 1e5) through
``dpframe.mechanisms.calibrate_bounded(...).release`` -- exact integer noise from the
secure AES-CTR source, truncation by the exact truncated discrete Laplace sampler --
and times ``numpy.random.default_rng().laplace`` (floating point, PCG64, *not* safe for
DP) on the same number of draws in the same run. Three placements of the statistics:
spread over the interval, all on a bound (the worst case for truncation), and an
interval narrow relative to the noise scale. Prints the best of ``--repeats`` and the
ratio to numpy (the issue's goal: within 4x).

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
from dpframe.mechanisms.bounded import calibrate_bounded


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 draws instead of 1e6")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    print(
        f"bench_bounded: numpy {np.__version__}, python {platform.python_version()}, "
        f"cpu_count={os.cpu_count()}, n={n:.0e}, best of {args.repeats}"
    )
    numpy_rng = np.random.default_rng()
    base = best(lambda: numpy_rng.laplace(size=n), args.repeats)
    print(f"numpy Generator.laplace (float, PCG64): {base:.4f} s\n")
    cases = {
        "spread over [0, 1], Δ=0.01": (np.linspace(0, 1, n), 0.01, 0.0, 1.0),
        "all on the lower bound, Δ=0.01": (np.zeros(n), 0.01, 0.0, 1.0),
        "narrow interval, Δ=1 on [0, 0.1]": (np.full(n, 0.05), 1.0, 0.0, 0.1),
    }
    print(f"{'case':34s} {'method':10s} {'time s':>8s} {'/numpy':>7s}")
    for label, (values, sens, lo, hi) in cases.items():
        for method in ("truncated", "bit"):
            cal = calibrate_bounded(1.0, sens, lo, hi, method=method)
            t = best(
                lambda cal=cal, values=values: cal.release(values, secure_generator()), args.repeats
            )
            print(f"{label:34s} {method:10s} {t:8.4f} {t / base:7.2f}")


if __name__ == "__main__":
    main()
