"""The globally MI-optimal eps-DP PRAM channel: design time and MI gain over the paper's family.

``dpframe.mechanisms.pram.staircase.global_design`` solves the staircase LP
(docs/pram-design.md, section 11) by enumerating all 2^S - 2 patterns (HiGHS, interior
point + crossover) or by column generation. This prints:

* design time (one run each) for S = 10, 16, 20 by enumeration where it fits (S <= 16)
  and by column generation, and column generation at S = 100 (uniform prior only: for
  non-uniform priors column generation at S >= 30 takes minutes; see the docs), with the
  certified gap ``upper_bound - MI``;
* the MI gain ``MI(global) / MI(paper family, estimable=False)`` at eps in {0.1, 0.5, 1, 2}
  for a uniform, a Dirichlet(1) (seed 2024) and a Zipf (p_k ~ k^-1.5) prior.

Nothing here asserts anything; all numbers are measurements.

Run from the repository root::

    python benchmarks/bench_pram_global.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from dpframe.mechanisms.pram import optimum, staircase

EPSILONS = (0.1, 0.5, 1.0, 2.0)


def priors(s: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(2024)
    zipf = np.arange(1, s + 1, dtype=float) ** -1.5
    return [
        ("uniform", np.full(s, 1.0 / s)),
        ("dir1", rng.dirichlet(np.ones(s))),
        ("zipf", zipf / zipf.sum()),
    ]


def timing_table(cases) -> None:
    print("\ndesign time (one run, s) and certified gap (nats)")
    print(
        f"{'S':>4} {'prior':>8} {'eps':>5} {'method':>18} {'time':>8} {'MI':>12} "
        f"{'gap':>9} {'K':>4}"
    )
    for s, method, names, epsilons in cases:
        for name, p in priors(s):
            if name not in names:
                continue
            for eps in epsilons:
                t0 = time.perf_counter()
                d = staircase.global_design(p, eps, method=method)
                dt = time.perf_counter() - t0
                print(
                    f"{s:>4} {name:>8} {eps:>5} {method:>18} {dt:>8.2f} "
                    f"{d.mutual_information:>12.6g} {d.gap:>9.1e} {d.n_outputs:>4}",
                    flush=True,
                )


def gain_table(sizes) -> None:
    print("\nMI gain over the paper's family: MI(global) / MI(design(estimable=False))")
    print(f"{'S':>4} {'prior':>8} " + " ".join(f"{'eps=' + str(e):>9}" for e in EPSILONS))
    for s in sizes:
        for name, p in priors(s):
            cells = []
            for eps in EPSILONS:
                g = staircase.global_design(p, eps).mutual_information
                paper = optimum.design(p, eps, estimable=False).mutual_information
                cells.append(f"{g / paper:>9.3f}")
            print(f"{s:>4} {name:>8} " + " ".join(cells), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller grid (smoke run)")
    args = ap.parse_args()
    print(
        f"numpy {np.__version__}, scipy {scipy.__version__}, Python "
        f"{platform.python_version()}, cpus {os.cpu_count()}, "
        f"{'quick' if args.quick else 'full'} run"
    )
    everyone = ("uniform", "dir1", "zipf")
    if args.quick:
        timing_table(
            [(10, "enumerate", everyone, (1.0,)), (10, "column-generation", everyone, (1.0,))]
        )
        gain_table((4, 8))
    else:
        timing_table(
            [
                (10, "enumerate", everyone, (0.1, 1.0)),
                (10, "column-generation", everyone, (0.1, 1.0)),
                (16, "enumerate", everyone, (0.1, 1.0)),
                (16, "column-generation", everyone, (0.1, 1.0)),
                (20, "column-generation", everyone, (0.1, 1.0)),
                (100, "column-generation", ("uniform",), (0.1, 1.0)),
            ]
        )
        gain_table((4, 6, 10, 14))


if __name__ == "__main__":
    main()
