"""The least-variance eps-DP PRAM matrix: design time and risk against k-RR and the paper.

``dpframe.mechanisms.pram.variance.variance_design`` minimises the estimation risk
``n tr Cov(p_hat)`` at the prior over S x S eps-DP matrices by SLSQP from several starts
(a local optimum; docs/pram-design.md, section 12). This prints:

* design time (one run each, uniform prior, eps = 1) for S = 3, 5, 10 with the default
  starts, and S = 20 with one random start and at most 100 SLSQP iterations per start
  (the default settings take many minutes there);
* the risk ratios ``risk(k-RR) / risk(variance)`` and ``risk(paper) / risk(variance)``
  (``paper``: the estimable MI-optimal design of the paper's family, as sampled) at eps in
  {0.1, 0.5, 1, 2} for a uniform, a Dirichlet(1) (seed 2024) and a Zipf (p_k ~ k^-1.5)
  prior, at S = 5 and 10 (``--quick``: S = 4), and ``risk(auto) / risk(variance)``: what
  the default ``design="auto"`` (k-RR, the paper's design or the cyclic design, no search)
  leaves to the search.

Nothing here asserts anything; all numbers are measurements.

Run from the repository root::

    python benchmarks/bench_pram_variance.py [--quick]
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

from dpframe.mechanisms.pram.plan import plan_pram
from dpframe.mechanisms.pram.variance import estimation_risk, variance_design

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
    print("\ndesign time (one run, uniform prior, eps = 1)")
    print(f"{'S':>4} {'settings':>24} {'time s':>8} {'risk':>10} {'kRR/var':>8} {'method':>22}")
    for s, kwargs in cases:
        t0 = time.perf_counter()
        d = variance_design(np.full(s, 1.0 / s), 1.0, **kwargs)
        dt = time.perf_counter() - t0
        label = ",".join(f"{k}={v}" for k, v in kwargs.items()) or "default"
        print(
            f"{s:>4} {label:>24} {dt:>8.2f} {d.risk:>10.4g} {d.gain_over_krr:>8.3f} {d.method:>22}"
        )


def ratio_table(s: int, kwargs) -> None:
    print(f"\nrisk ratios at S = {s} ({kwargs or 'default starts'}): kRR/var  paper/var  auto/var")
    print(f"{'prior':>8} " + " ".join(f"{'eps=' + str(e):>23}" for e in EPSILONS))
    cats = [f"c{i}" for i in range(s)]
    for name, p in priors(s):
        cells = []
        for eps in EPSILONS:
            d = variance_design(p, eps, **kwargs)
            auto = plan_pram("c", cats, eps, prior=dict(zip(cats, p, strict=True)))
            ratio = estimation_risk(p, auto.sampler.matrix) / d.risk
            cells.append(f"{d.gain_over_krr:>7.3f} {d.gain_over_paper:>7.3f} {ratio:>7.3f}")
        print(f"{name:>8} " + " ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = ap.parse_args()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy "
        f"{scipy.__version__}, {os.cpu_count()} cpus"
    )
    if args.quick:
        timing_table([(3, {}), (5, {"n_random": 1})])
        ratio_table(4, {})
    else:
        timing_table([(3, {}), (5, {}), (10, {}), (20, {"n_random": 1, "maxiter": 100})])
        ratio_table(5, {})
        ratio_table(10, {})


if __name__ == "__main__":
    main()
