"""Tight composition (``dpframe.core.composition``) against basic composition and zCDP.

For k = 10, 100 and 1000 releases (``--quick``: 10 and 100) of the Laplace mechanism at
epsilon 0.1 each and of the Gaussian mechanism (sensitivity 1, sigma 20 each), prints the
epsilon of the composition at delta = 1e-6 by the privacy-loss distribution
(``epsilon_for_delta``), and the baselines computed in the same run: basic composition
(Laplace: the sum of the epsilons; Gaussian: the sum of each release's own tight epsilon
at delta / k) and the zCDP accountant's conversion (``dpframe.core.zcdp``, every release
at its rho: ``epsilon**2 / 2`` or ``1 / (2 sigma**2)``). The ratios tight/basic and
tight/zCDP and the epsilon saved against basic composition are printed, with the wall
time of each tight computation (noisy on a shared machine: nothing here asserts a time).

Run from the repository root::

    python benchmarks/bench_composition.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from dpframe.core.composition import epsilon_for_delta
from dpframe.core.zcdp import epsilon_of_rho

DELTA = 1e-6
LAPLACE_EPSILON = 0.1
SIGMA = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="k = 10 and 100 only")
    args = parser.parse_args()
    ks = (10, 100) if args.quick else (10, 100, 1000)
    laplace = {"mechanism": "laplace", "epsilon": LAPLACE_EPSILON}
    gaussian = {"mechanism": "gaussian", "sensitivity": 1.0, "sigma": SIGMA}
    print(
        f"bench_composition: numpy {np.__version__}, python {platform.python_version()}, "
        f"cpu_count={os.cpu_count()}, k={', '.join(map(str, ks))}, delta={DELTA:g}"
    )
    print(f"epsilon of k releases at delta = {DELTA:g} (tight: privacy-loss distributions)")
    print(
        f"{'mechanism':<24} {'k':>5} {'tight':>9} {'basic':>9} {'zCDP':>9} "
        f"{'tight/basic':>11} {'tight/zCDP':>10} {'saved':>9} {'seconds':>8}"
    )
    for name, release, rho in (
        (f"laplace eps={LAPLACE_EPSILON:g}", laplace, Fraction(LAPLACE_EPSILON) ** 2 / 2),
        (f"gaussian sigma={SIGMA:g}", gaussian, Fraction(1) / (2 * Fraction(SIGMA) ** 2)),
    ):
        for k in ks:
            t = time.perf_counter()
            tight = epsilon_for_delta([release] * k, DELTA)
            seconds = time.perf_counter() - t
            if release is laplace:
                basic = k * LAPLACE_EPSILON
            else:  # each release at its own tight epsilon at delta / k, summed
                basic = k * epsilon_for_delta([release], DELTA / k)
            zcdp = epsilon_of_rho(float(k * rho), DELTA)
            print(
                f"{name:<24} {k:>5} {tight:>9.4f} {basic:>9.4f} {zcdp:>9.4f} "
                f"{tight / basic:>11.3f} {tight / zcdp:>10.3f} {basic - tight:>9.4f} "
                f"{seconds:>8.3f}"
            )


if __name__ == "__main__":
    main()
