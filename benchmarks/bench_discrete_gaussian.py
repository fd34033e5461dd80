"""Exact discrete Gaussian sampling against numpy's floating-point normal, in the same run.

Times ``dpframe.mechanisms.gaussian.sample_discrete_gaussian`` (integer draws only) at
sigma = 1024 grid steps (``sigma^2 = 2**20``: the default grid of a unit sensitivity at
rho = 0.5) and at sigma = 1e6 (``sigma^2 = 10**12``, beyond int64 in the acceptance
exponent) against ``numpy.random.default_rng().normal(size=n)`` (floating point; not
safe for differential privacy), both on PCG64, for n = 1e6 and 1e7 (``--quick``: 1e6
only). The two are run alternately so that both see the same machine load; the best of
``--repeats`` runs (default 3) of each is printed with the ratio discrete/numpy. A last
line times the discrete sampler on dpframe's secure generator (AES-128-CTR), which is
what a release uses.

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    python benchmarks/bench_discrete_gaussian.py [--quick] [--repeats N]
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
from dpframe.mechanisms.gaussian import sample_discrete_gaussian

#: (sigma^2 numerator, denominator)
SIGMAS = ((2**20, 1), (10**12, 1))


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
    parser.add_argument("--quick", action="store_true", help="n = 1e6 only")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per timing (best kept)")
    args = parser.parse_args()
    sizes = (1_000_000,) if args.quick else (1_000_000, 10_000_000)

    try:
        import polars as pl

        polars_version = pl.__version__
    except ImportError:
        polars_version = "not installed"
    print(
        f"bench_discrete_gaussian: numpy {np.__version__}, polars {polars_version}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, "
        f"best of {args.repeats}"
    )

    pcg = np.random.default_rng()
    secure = secure_generator()
    print()
    print(
        f"{'sigma':>9}  {'n':>12}  {'discrete s':>10}  {'numpy s':>9}  "
        f"{'discrete/numpy':>14}  {'M/s':>6}"
    )
    for num, den in SIGMAS:
        sigma = (num / den) ** 0.5
        sample_discrete_gaussian(num, den, size=1000, rng=pcg)  # warm up
        pcg.normal(scale=sigma, size=1000)
        for n in sizes:
            t_discrete, t_numpy = best_pair(
                lambda n=n, num=num, den=den: sample_discrete_gaussian(num, den, size=n, rng=pcg),
                lambda n=n, sigma=sigma: pcg.normal(scale=sigma, size=n),
                args.repeats,
            )
            print(
                f"{sigma:>9g}  {n:>12,}  {t_discrete:>10.4f}  {t_numpy:>9.4f}  "
                f"{t_discrete / t_numpy:>14.1f}  {n / t_discrete / 1e6:>6.1f}"
            )

    n = sizes[0]
    num, den = SIGMAS[0]
    t_secure, _ = best_pair(
        lambda: sample_discrete_gaussian(num, den, size=n, rng=secure),
        lambda: None,
        args.repeats,
    )
    print(
        f"\ndiscrete (sigma={(num / den) ** 0.5:g}) on secure_generator() (AES-128-CTR), "
        f"n={n:,}: {t_secure:.4f} s"
    )


if __name__ == "__main__":
    main()
