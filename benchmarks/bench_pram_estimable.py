"""What an estimable PRAM design costs: mutual information, estimation error, design time.

The plain MI-optimal design (``design(p, eps, estimable=False)``) can keep two or more
categories at ``q = 1/S``: their rows of the matrix are uniform, the matrix is singular and
the released data cannot estimate those categories' frequencies (docs/pram-design.md,
section 10). ``estimable=True`` (the default) allows at most one category within ``delta =
eta (v_alpha - 1/S)`` of ``1/S`` (``eta = ESTIMABLE_MARGIN = 0.05``). On a grid of
(S, epsilon, prior) and both diagonals this prints, against the plain optimum measured in
the same run:

* how many plain optima are singular (not estimable);
* the MI the margin costs, ``1 - MI(estimable) / MI(plain)``: in how many cases it costs
  anything, its median over those cases and its maximum, for eta = 0.01, 0.05 (the
  default), 0.1, 0.2;
* for the cases where the plain optimum is singular, the worst standard error of an
  estimated share (times sqrt(n), over every mix of categories:
  ``dpframe.mechanisms.accuracy.pram_share_error``) of the estimable design, as a multiple
  of k-RR's at the same epsilon (the plain design's is infinite);
* ``design()`` time with and without the margin (best of 3; S = 10, 100, 1000).

Priors: Dirichlet(0.1) and Dirichlet(1) (three draws each), Zipf (p_k ~ k^-1.5), and
Dirichlet(1) with half the categories at 0 (a public prior that misses categories). Nothing
here asserts anything; all numbers are measurements.

Run from the repository root::

    python benchmarks/bench_pram_estimable.py [--quick]
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

from dpframe.mechanisms import pram
from dpframe.mechanisms.accuracy import pram_share_error

ETAS = (0.01, 0.05, 0.1, 0.2)
DIAGONALS = ("optimal", "dominant")


def priors(s: int, rng: np.random.Generator, draws: int) -> list[tuple[str, np.ndarray]]:
    out = []
    for conc in (0.1, 1.0):
        out += [(f"dir{conc:g}", rng.dirichlet(np.full(s, conc))) for _ in range(draws)]
    zipf = np.arange(1, s + 1, dtype=float) ** -1.5
    out.append(("zipf", zipf / zipf.sum()))
    half = rng.dirichlet(np.ones(s))
    half[(s + 1) // 2 :] = 0.0
    out.append(("half0", half / half.sum()))
    return out


def loss(this: float, plain: float) -> float:
    return 1.0 - this / plain if plain > 0 else 0.0


def cost_table(sizes, epsilons, draws: int) -> None:
    rng = np.random.default_rng(2024)
    rows = []  # (diagonal, s, eps, prior, singular, {eta: loss}, se_ratio)
    for s in sizes:
        for eps in epsilons:
            for name, p in priors(s, rng, draws):
                for diagonal in DIAGONALS:
                    plain = pram.design(p, eps, diagonal=diagonal, estimable=False)
                    losses = {}
                    se_ratio = np.nan
                    for eta in ETAS:
                        d = pram.design(p, eps, diagonal=diagonal, estimable=eta)
                        assert d.estimable and d.epsilon_actual <= eps
                        losses[eta] = loss(d.mutual_information, plain.mutual_information)
                        if eta == pram.ESTIMABLE_MARGIN and not plain.estimable:
                            c_krr = pram_share_error(pram.krr(s, eps).matrix)
                            se_ratio = pram_share_error(d.matrix) / c_krr
                    rows.append((diagonal, s, eps, name, not plain.estimable, losses, se_ratio))

    print("\nMI cost of estimable=True (eta = 0.05) against the plain optimum, by S")
    print(
        f"{'diagonal':9} {'S':>4} {'cases':>6} {'singular':>9} {'changed':>8} "
        f"{'median loss':>12} {'max loss':>9} {'SE / k-RR (median, max)':>24}"
    )
    eta = pram.ESTIMABLE_MARGIN
    for diagonal in DIAGONALS:
        for s in sizes:
            sub = [r for r in rows if r[0] == diagonal and r[1] == s]
            ls = np.array([r[5][eta] for r in sub])
            changed = ls[ls > 1e-9]
            se = np.array([r[6] for r in sub if r[4]])
            se_txt = f"{np.median(se):.1f}, {se.max():.1f}" if se.size else "-"
            print(
                f"{diagonal:9} {s:>4} {len(sub):>6} {sum(r[4] for r in sub):>9} "
                f"{changed.size:>8} {np.median(changed) if changed.size else 0:>12.2%} "
                f"{ls.max():>9.2%} {se_txt:>24}"
            )

    print("\nMI cost by margin eta (all S, epsilon and priors above)")
    print(
        f"{'diagonal':9} {'eta':>5} {'cases':>6} {'changed':>8} {'median loss':>12} "
        f"{'max loss':>9} {'mean loss':>10}"
    )
    for diagonal in DIAGONALS:
        sub = [r for r in rows if r[0] == diagonal]
        for eta in ETAS:
            ls = np.array([r[5][eta] for r in sub])
            changed = ls[ls > 1e-9]
            print(
                f"{diagonal:9} {eta:>5} {len(sub):>6} {changed.size:>8} "
                f"{np.median(changed) if changed.size else 0:>12.2%} {ls.max():>9.2%} "
                f"{ls.mean():>10.3%}"
            )


def timing_table(sizes, epsilons) -> None:
    rng = np.random.default_rng(7)
    print("\ndesign() time, best of 3 (ms): plain / estimable=True")
    print(
        f"{'S':>5} {'prior':>7} {'diagonal':>9} "
        + " ".join(f"{'eps=' + str(e):>15}" for e in epsilons)
    )
    for s in sizes:
        for conc in (0.1, 1.0):
            p = rng.dirichlet(np.full(s, conc))
            for diagonal in DIAGONALS:
                cells = []
                for eps in epsilons:
                    best = []
                    for est in (False, True):
                        t = []
                        for _ in range(3):
                            t0 = time.perf_counter()
                            pram.design(p, eps, diagonal=diagonal, estimable=est)
                            t.append(time.perf_counter() - t0)
                        best.append(min(t) * 1e3)
                    cells.append(f"{best[0]:6.1f} / {best[1]:6.1f}")
                print(
                    f"{s:>5} {'dir' + format(conc, 'g'):>7} {diagonal:>9} "
                    + " ".join(f"{c:>15}" for c in cells)
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller grid (smoke run)")
    args = ap.parse_args()
    print(
        f"numpy {np.__version__}, Python {platform.python_version()}, "
        f"cpus {os.cpu_count()}, {'quick' if args.quick else 'full'} run"
    )
    if args.quick:
        cost_table((3, 10), (1.0, 2.0), draws=1)
        timing_table((10, 100), (1.0,))
    else:
        cost_table((3, 5, 10, 30, 100), (0.5, 1.0, 2.0, 4.0), draws=3)
        timing_table((10, 100, 1000), (0.5, 1.0, 2.0, 4.0))


if __name__ == "__main__":
    main()
