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
Then the cost of tight composition on the ledger: one more charge on an accountant with
``accounting="pld"`` holding k distinct releases, against a basic accountant's.

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
    ledger(ks)


def ledger(ks: tuple[int, ...]) -> None:
    """A tight ledger (``accounting="pld"``) of k distinct pure releases: the time of one
    more charge (it composes the whole ledger), against the time of the same charge on a
    basic ledger of the same entries, in the same run."""
    import dpframe

    print("one more charge on a ledger of k distinct releases (epsilon 0.01 to 0.3)")
    print(f"{'k':>5} {'tight s':>9} {'basic s':>9} {'ratio':>8} {'tight eps':>10} {'sum':>8}")
    rng = np.random.default_rng(1)
    for k in ks:
        epsilons = np.round(rng.uniform(0.01, 0.3, size=k), 3).tolist()
        times = []
        tight = epsilon_for_delta([{"mechanism": "pure", "epsilon": e} for e in epsilons], DELTA)
        for accounting, budget in (("pld", 1.2 * tight + 0.2), (None, sum(epsilons) + 1.0)):
            # the tight budget close to what the ledger composes to, as a ledger in use
            acct = dpframe.Accountant(epsilon=budget, delta=DELTA, accounting=accounting)
            acct.spend_all([dpframe.Charge(epsilon=e, mechanism="laplace") for e in epsilons])
            t = time.perf_counter()
            acct.spend(0.1, mechanism="laplace")
            times.append(time.perf_counter() - t)
            if accounting == "pld":
                composed = acct.spent.epsilon
        print(
            f"{k:>5} {times[0]:>9.3f} {times[1]:>9.4f} {times[0] / times[1]:>8.0f} "
            f"{composed:>10.3f} {sum(epsilons) + 0.1:>8.3f}"
        )


if __name__ == "__main__":
    main()
