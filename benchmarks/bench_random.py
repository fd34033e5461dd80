"""Throughput of dpframe's secure random source against numpy's PCG64, in the same run.

dpframe draws all its noise from ``dpframe.core.randomness.secure_generator()`` (a numpy
``Generator`` over AES-128-CTR keyed from ``os.urandom``). This script times the same
calls on that generator and on ``numpy.random.default_rng()`` (PCG64), interleaving the
two so that both see the same machine load, and prints the best-of-N time of each and
the ratio secure/PCG64. It also times creating a fresh secure generator, which dpframe
does once per polars morsel.

Timings on a shared machine are noisy: read the ratios, not the absolute times. Nothing
here asserts a timing.

Run from the repository root::

    .venv/bin/python benchmarks/bench_random.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np
import polars as pl

from dpframe.core.randomness import secure_generator


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


def per_call_us(make: Callable[[], object], calls: int) -> float:
    """Mean time of one ``make()`` call over ``calls`` calls, in microseconds."""
    t = time.perf_counter()
    for _ in range(calls):
        make()
    return (time.perf_counter() - t) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 1e6 instead of 1e7")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per timing (best kept)")
    args = parser.parse_args()
    n = 1_000_000 if args.quick else 10_000_000
    repeats = args.repeats

    secure = secure_generator()
    aesni = getattr(secure.bit_generator, "use_aesni", "unknown")
    print(
        f"bench_random: numpy {np.__version__}, polars {pl.__version__}, "
        f"python {platform.python_version()}, cpu_count={os.cpu_count()}, "
        f"AES-NI={aesni}, n={n:.0e}, best of {repeats}"
    )

    pcg = np.random.default_rng()
    cases: list[tuple[str, Callable[[np.random.Generator], object]]] = [
        ("random(n)  [float64 uniform]", lambda g: g.random(n)),
        ("integers(0, 2**63, n)", lambda g: g.integers(0, 2**63, n)),
        ("integers(0, 1000, n)", lambda g: g.integers(0, 1000, n)),
        ("laplace(size=n)", lambda g: g.laplace(size=n)),
    ]
    for _, fn in cases:  # warm up (page-in, first-call costs)
        fn(secure)
        fn(pcg)

    width = max(len(name) for name, _ in cases)
    print()
    header = ("secure s", "PCG64 s", "secure/PCG64", "secure M/s")
    print(f"{'draw':<{width}}  {header[0]:>9}  {header[1]:>9}  {header[2]:>12}  {header[3]:>10}")
    for name, fn in cases:
        t_sec, t_pcg = best_pair(lambda fn=fn: fn(secure), lambda fn=fn: fn(pcg), repeats)
        print(
            f"{name:<{width}}  {t_sec:>9.4f}  {t_pcg:>9.4f}  {t_sec / t_pcg:>12.2f}  "
            f"{n / t_sec / 1e6:>10.1f}"
        )

    calls = 2_000 if args.quick else 10_000
    key = int.from_bytes(os.urandom(16), "little")
    bit_generator = type(secure.bit_generator)  # randomgen.AESCounter
    makers: list[tuple[str, Callable[[], object], str]] = [
        ("secure_generator()", secure_generator, "what dpframe pays per morsel"),
        ("  os.urandom(16)", lambda: os.urandom(16), "its entropy"),
        ("  AESCounter(key=k)", lambda: bit_generator(key=key), "its bit generator"),
        ("np.random.default_rng()", np.random.default_rng, "baseline: PCG64 from OS entropy"),
    ]
    best = {name: float("inf") for name, _, _ in makers}
    for _ in range(repeats):
        for name, make, _ in makers:
            best[name] = min(best[name], per_call_us(make, calls))
    print()
    print(f"fresh generator per call (mean of {calls} calls, best of {repeats}):")
    for name, _, note in makers:
        print(f"  {name:<24} {best[name]:8.1f} us  ({note})")
    ratio = best["secure_generator()"] / best["np.random.default_rng()"]
    print(f"  ratio secure_generator()/default_rng(): {ratio:.2f}")


if __name__ == "__main__":
    main()
