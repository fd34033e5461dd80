"""DR-HA speed: the risk table for a 100-point ε grid on ~6,000 cells.

The issue's goal: a 100-point ε grid on 6,000 cells "in well under a second". Measured on
the Adult table grouped by its six quasi-identifiers (5,009 cells, 965 heterogeneous,
K = 2) and on a synthetic 6,000-cell K = 3 table, for each measure (exact method) and
mechanism, best of 5, after one warm-up call (the first call in a process also imports
scipy.stats, about 2 s). The baseline measured in the same run is building the cell table
from the frame with polars (``cell_table``: group_by + scatter), which any DR-HA
computation needs anyway; the ratio says how much the measure adds.

Run from the repository root::

    .venv/bin/python benchmarks/bench_drha.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from functools import partial

import numpy as np
import polars as pl

from dpframe.datasets import drha_table
from dpframe.risk import cell_risk, cell_table, dirichlet_eb, fit_size_model


def best(fn, repeats: int) -> float:
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def synthetic(n_cells: int, k: int, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = 1 + rng.poisson(4.0, n_cells)
    rows = []
    for i, n in enumerate(sizes):
        p = rng.dirichlet(np.full(k, 0.3))
        for lv, c in enumerate(rng.multinomial(n, p)):
            if c:
                rows.append((f"c{i}", f"y{lv}", int(c)))
    return pl.DataFrame(rows, schema=["cell", "y", "count"], orient="row")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeats = 2 if args.quick else 5
    eps = np.logspace(-3, 2, 100)
    py = platform.python_version()
    print(f"python {py}, {os.cpu_count()} CPUs; 100 epsilons, best of {repeats}")
    adult = drha_table("adult")
    synth = synthetic(6000, 3)
    cases = [
        (
            "adult (5009 cells, K=2)",
            adult.frame,
            list(adult.qids),
            adult.sensitive,
            list(adult.levels),
        ),
        ("synthetic (6000 cells, K=3)", synth, ["cell"], "y", ["y0", "y1", "y2"]),
    ]
    print(f"{'table':<28}{'measure':<20}{'mechanism':<19}{'time (s)':>10}{'x table':>9}")
    for name, frame, qids, y, levels in cases:
        base = best(partial(cell_table, frame, qids, y, levels=levels, count="count"), repeats)
        counts = cell_table(frame, qids, y, levels=levels, count="count").counts
        alpha = dirichlet_eb(counts).alpha
        sizes = fit_size_model(counts.sum(axis=1), family="poisson")
        print(f"{name:<28}{'(cell table)':<20}{'':<19}{base:>10.4f}{1.0:>9.2f}")
        for measure in ("local", "expected", "shrinkage", "marginal", "marginal_shrinkage"):
            if args.quick and measure in ("shrinkage", "marginal_shrinkage"):
                continue
            for mech, delta in (("laplace", None), ("gaussian_pdp", 1e-5)):
                kw = {"alpha": alpha} if "shrinkage" in measure else {}
                if measure.startswith("marginal"):
                    kw["size_model"] = sizes
                run = partial(
                    cell_risk,
                    counts,
                    mechanism=mech,
                    epsilon=eps,
                    delta=delta,
                    measure=measure,
                    **kw,
                )
                t = best(run, repeats)
                print(f"{'':<28}{measure:<20}{mech:<19}{t:>10.4f}{t / base:>9.2f}")


if __name__ == "__main__":
    main()
