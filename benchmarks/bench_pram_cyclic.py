"""Cyclic eps-DP PRAM designs: design time, variance against k-RR, gap to the bound.

``dpframe.mechanisms.pram.cyclic.cyclic_design(S, eps)`` searches a circulant staircase
matrix (row i releases i + D mod S with weight e^eps) by seeded swaps; its estimation
risk is ``r - |p|^2`` at every prior p (docs/pram-design.md, section 12.5). This prints,
for S in {8, 16, 32, 64, 128, 256} and eps in {0.1, 0.5, 1, 2} (``--quick``: S = 8, 16 and
eps in {0.1, 1}):

* the design time (one run; the first of its S and eps in a process -- release plans
  cache it);
* the block size d = |D|;
* ``kRR/cyc``: k-RR's risk constant over the cyclic design's (its variance ratio at the
  uniform prior plus the same |p|^2 terms, i.e. how many times more records k-RR needs
  for the same error when |p|^2 is small against r);
* ``r/bound``: the gap to Jensen's bound (1: a perfect cyclic difference set);

and for ``design="auto"`` (the default of a PRAM release for estimation) at a uniform and a
Zipf (p_k ~ k^-1.5) prior, S in {4, 8, 16, 64}, eps in {0.1, 1} (``--quick``: S = 8, eps
1): the plan time, the candidate chosen, and ``risk(k-RR) / risk(chosen)`` and
``risk(paper) / risk(chosen)`` at the prior, as sampled (the paper's estimable design).

Nothing here asserts anything; all numbers are measurements.

Run from the repository root::

    python benchmarks/bench_pram_cyclic.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from dpframe.mechanisms.pram import plan as plan_module
from dpframe.mechanisms.pram.cyclic import cyclic_design
from dpframe.mechanisms.pram.plan import plan_pram
from dpframe.mechanisms.pram.variance import estimation_risk


def table(sizes: list[int], epsilons: list[float]) -> None:
    print(f"{'S':>4} {'eps':>5} {'time s':>8} {'d':>4} {'kRR/cyc':>8} {'r/bound':>8}")
    for s in sizes:
        for eps in epsilons:
            t0 = time.perf_counter()
            d = cyclic_design(s, eps)
            dt = time.perf_counter() - t0
            print(
                f"{s:>4} {eps:>5} {dt:>8.3f} {d.block:>4} {d.gain_over_krr:>8.3f} "
                f"{d.r / d.bound:>8.3f}"
            )


def auto_table(sizes: list[int], epsilons: list[float]) -> None:
    print('\ndesign="auto": plan time (uncached), choice, kRR/chosen, paper/chosen')
    print(
        f"{'S':>4} {'prior':>8} {'eps':>5} {'time s':>8} {'chosen':>8} {'kRR/ch':>8} {'pap/ch':>8}"
    )
    for s in sizes:
        cats = [f"c{i}" for i in range(s)]
        zipf = np.arange(1, s + 1, dtype=float) ** -1.5
        for name, p in (("uniform", np.full(s, 1.0 / s)), ("zipf", zipf / zipf.sum())):
            prior = "uniform" if name == "uniform" else dict(zip(cats, p, strict=True))
            for eps in epsilons:
                plan_module._cyclic_design.cache_clear()
                t0 = time.perf_counter()
                plan = plan_pram("c", cats, eps, prior=prior)
                dt = time.perf_counter() - t0
                chosen = estimation_risk(p, plan.sampler.matrix)
                krr = plan_pram("c", cats, eps, design="paper").sampler.matrix
                paper = plan_pram(
                    "c", cats, eps, prior=dict(zip(cats, p, strict=True)), design="paper"
                ).sampler.matrix
                print(
                    f"{s:>4} {name:>8} {eps:>5} {dt:>8.3f} "
                    f"{plan.record()['selection']['chosen']:>8} "
                    f"{estimation_risk(p, krr) / chosen:>8.3f} "
                    f"{estimation_risk(p, paper) / chosen:>8.3f}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cpus")
    if args.quick:
        table([8, 16], [0.1, 1.0])
        auto_table([8], [1.0])
    else:
        table([8, 16, 32, 64, 128, 256], [0.1, 0.5, 1.0, 2.0])
        auto_table([4, 8, 16, 64], [0.1, 1.0])


if __name__ == "__main__":
    main()
