"""Gaussian (zCDP) against Laplace (basic composition): the error of one released count.

k counts are released together at an equal total (epsilon, delta). Each count has
sensitivity 1 (add/remove, one row per person).

* Laplace: each count gets epsilon / k (basic composition), discrete Laplace noise of
  scale k / epsilon; standard deviation about sqrt(2) k / epsilon.
* Gaussian: the whole budget becomes rho = rho_for(epsilon, delta) (the tight
  conversion of Canonne, Kamath & Steinke 2020, as OpenDP's), each count gets rho / k,
  discrete Gaussian noise with sigma = sqrt(k / (2 rho)).

The standard deviations and 95% half-widths are the exact ones of the discrete laws
(dpframe.mechanisms.discrete / dpframe.mechanisms.gaussian). Also: a single histogram
(k counts over disjoint groups, parallel composition), which costs epsilon once for
Laplace and rho once for Gaussian (l2 sensitivity 1 under add/remove) -- the same
comparison as k = 1.

Writes gaussian_vs_laplace.png, gaussian_vs_laplace.csv (k curve) and
gaussian_vs_laplace_histogram.csv (one histogram, across epsilon), and prints the
numbers quoted in docs/gaussian.md::

    .venv/bin/python examples/gaussian_vs_laplace.py docs/figures
    .venv/bin/python examples/gaussian_vs_laplace.py /tmp/gvl --quick
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from dpframe.core.zcdp import rho_for
from dpframe.mechanisms.discrete import discrete_laplace_quantile_abs, discrete_laplace_variance
from dpframe.mechanisms.gaussian import discrete_gaussian_quantile_abs, discrete_gaussian_variance

BUDGETS = [(1.0, 1e-6), (0.5, 1e-6)]
EPSILONS = [0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]


def one_count(epsilon: float, delta: float, k: int) -> dict:
    """The noise of one of k counts released together at total (epsilon, delta)."""
    rho = rho_for(epsilon, delta)
    scale = k / epsilon  # Laplace: epsilon / k per count, l1 sensitivity 1
    sigma = math.sqrt(k / (2.0 * rho))  # Gaussian: rho / k per count, l2 sensitivity 1
    return {
        "epsilon": epsilon,
        "delta": delta,
        "k": k,
        "rho": rho,
        "laplace_scale": scale,
        "gaussian_sigma": sigma,
        "laplace_sd": math.sqrt(discrete_laplace_variance(scale)),
        "gaussian_sd": math.sqrt(discrete_gaussian_variance(sigma)),
        "laplace_hw95": discrete_laplace_quantile_abs(0.95, scale),
        "gaussian_hw95": discrete_gaussian_quantile_abs(0.95, sigma),
    }


def ks(quick: bool) -> list[int]:
    top = 64 if quick else 1000
    out = sorted({round(10 ** (i / 20)) for i in range(0, 61)} | set(range(1, 41)))
    return [k for k in out if k <= top]


def crossover(epsilon: float, delta: float) -> int:
    """Smallest k at which the Gaussian count's standard deviation is below Laplace's."""
    k = 1
    while True:
        row = one_count(epsilon, delta, k)
        if row["gaussian_sd"] < row["laplace_sd"]:
            return k
        k += 1


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (eps, delta), colour in zip(BUDGETS, ["C0", "C1"], strict=True):
        sel = [r for r in rows if r["epsilon"] == eps]
        x = [r["k"] for r in sel]
        ax.plot(
            x,
            [r["laplace_sd"] for r in sel],
            "--",
            color=colour,
            label=f"Laplace, eps/k each (eps={eps:g})",
        )
        ax.plot(
            x,
            [r["gaussian_sd"] for r in sel],
            "-",
            color=colour,
            label=f"Gaussian, rho/k each (eps={eps:g}, delta={delta:g})",
        )
        kc = crossover(eps, delta)
        ax.axvline(kc, color=colour, lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("k: counts released together on the same people")
    ax.set_ylabel("standard deviation of one released count")
    ax.set_title("Equal total (epsilon, delta): Laplace (basic composition) vs Gaussian (zCDP)")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/figures", help="output folder")
    parser.add_argument("--quick", action="store_true", help="k up to 64 only")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rows = [one_count(e, d, k) for e, d in BUDGETS for k in ks(args.quick)]
    write_csv(out / "gaussian_vs_laplace.csv", rows)
    hist = []
    for eps in EPSILONS:
        r = one_count(eps, 1e-6, 1)
        hist.append(
            {
                key: r[key]
                for key in (
                    "epsilon",
                    "delta",
                    "rho",
                    "laplace_sd",
                    "gaussian_sd",
                    "laplace_hw95",
                    "gaussian_hw95",
                )
            }
        )
    write_csv(out / "gaussian_vs_laplace_histogram.csv", hist)
    plot(out / "gaussian_vs_laplace.png", rows)

    result = {"crossover": {}, "table": [], "histogram": hist}
    for eps, delta in BUDGETS:
        kc = crossover(eps, delta)
        result["crossover"][(eps, delta)] = kc
        print(
            f"eps={eps:g} delta={delta:g}: rho={rho_for(eps, delta):.6f}; "
            f"Gaussian beats Laplace from k = {kc}"
        )
    print("\none of k counts (eps, delta) = (1, 1e-6): sd and 95% half-width")
    print(f"{'k':>5} {'lap_sd':>9} {'gau_sd':>9} {'lap_hw':>7} {'gau_hw':>7}")
    for k in [1, 2, 5, 10, 20, 50, 100]:
        r = one_count(1.0, 1e-6, k)
        result["table"].append(r)
        print(
            f"{k:>5} {r['laplace_sd']:>9.2f} {r['gaussian_sd']:>9.2f} "
            f"{r['laplace_hw95']:>7} {r['gaussian_hw95']:>7}"
        )
    print("\none histogram (parallel composition), delta = 1e-6: sd of a cell")
    print(f"{'eps':>5} {'rho':>9} {'lap_sd':>9} {'gau_sd':>9}")
    for r in hist:
        sds = f"{r['laplace_sd']:>9.3f} {r['gaussian_sd']:>9.3f}"
        print(f"{r['epsilon']:>5g} {r['rho']:>9.5f} {sds}")
    return result


if __name__ == "__main__":
    main()
