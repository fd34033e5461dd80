"""Simulation study 1 of Liu (2019): a 2 x 2 covariance matrix released with bounded Laplace noise.

Reproduces Section 4.1 of the bounded-Laplace paper with dpframe's kernel
:func:`dpframe.mechanisms.covariance.release_covariance_matrix`: for (S11, S22, r) in
{(1, 2, 0), (1, 2, -0.4), (1, 2, 0.7)}, data bounds [-3, 3] x [-4.5, 4.5], epsilon = 1 split
equally over S11, S22 and S12, and n from 50 to 800, each repetition draws a fresh data set
(bivariate normal with that covariance, *clipped to the bounds*, so the bounds hold), computes
the sample covariance S and releases it three ways:

* truncation, ``calibration="exact"`` (dpframe's default: each statistic exactly eps/3-DP);
* truncation, ``calibration="paper"`` (the paper's lambda = Delta/epsilon, which is *not*
  eps-DP: the true loss, charged by dpframe, is about 1.75 instead of 1);
* BIT (boundary-inflated truncation): eps-DP at lambda = Delta/epsilon, so "paper" and
  "exact" are the same mechanism (checked at start-up).

It reports the bias and RMSE of S*11, S*22, S*12 and r* against the sample values of the same
data set, their 2.5/25/75/97.5 % error percentiles, the closed-form bias and RMSE of the
continuous laws (dpframe.mechanisms.bounded_moments) at the scales used, and, for reference,
the sampling RMSE of S against the population values (of the clipped distribution, by a large
Monte Carlo sample). Results go to ``sim1_results.csv`` and figures ``sim1_*.png`` in ``out``.

Run:
    .venv/bin/python examples/simulation_study_1.py docs/figures      # full: 500 repetitions
    .venv/bin/python examples/simulation_study_1.py /tmp/sim1 --quick  # a few seconds

The noise is drawn from *seeded* numpy Generators so that the study is reproducible. Seeded
noise is for research only: a real release must use dpframe's default random source (a
cryptographically secure generator keyed afresh from the OS), i.e. pass no ``rng``.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from dpframe.mechanisms.bounded_moments import (
    bit_laplace_bias,
    bit_laplace_mse,
    truncated_laplace_bias,
    truncated_laplace_mse,
)
from dpframe.mechanisms.covariance import release_covariance_matrix

SETTINGS = ((1.0, 2.0, 0.0), (1.0, 2.0, -0.4), (1.0, 2.0, 0.7))  # (S11, S22, r)
BOUNDS = ((-3.0, 3.0), (-4.5, 4.5))
EPSILON = 1.0
NS = (50, 100, 200, 300, 400, 600, 800)
REPS = 500
SEED = 20190601
#: (method, calibration): the paper's truncation, dpframe's exact truncation, and BIT
VARIANTS = (("truncated", "exact"), ("truncated", "paper"), ("bit", "exact"))
LABELS = {
    ("truncated", "exact"): "truncated (exact ε-DP)",
    ("truncated", "paper"): "truncated (paper λ=Δ/ε, not ε-DP)",
    ("bit", "exact"): "BIT (ε-DP)",
}
STYLE = {
    ("truncated", "exact"): {"color": "tab:blue", "marker": "o"},
    ("truncated", "paper"): {"color": "tab:blue", "marker": "s", "linestyle": "--", "alpha": 0.7},
    ("bit", "exact"): {"color": "tab:orange", "marker": "^"},
}
STATISTICS = ("S11", "S22", "S12", "r")
COLUMNS = (
    "setting",
    "S11",
    "S22",
    "rho",
    "n",
    "reps",
    "method",
    "calibration",
    "statistic",
    "population",
    "bias",
    "bias_se",
    "rmse",
    "bias_theory",
    "rmse_theory",
    "sampling_rmse",
    "err_q025",
    "err_q25",
    "err_q75",
    "err_q975",
    "at_bound",
    "degenerate",
    "scale",
    "epsilon_charged",
)


def sigma(setting: tuple[float, float, float]) -> np.ndarray:
    s11, s22, rho = setting
    c = rho * math.sqrt(s11 * s22)
    return np.array([[s11, c], [c, s22]])


def draw_covariances(setting, n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` sample covariance matrices (divisor n - 1) of clipped bivariate normal data."""
    chol = np.linalg.cholesky(sigma(setting))
    x = rng.standard_normal((reps, n, 2)) @ chol.T
    lo = np.array([b[0] for b in BOUNDS])
    hi = np.array([b[1] for b in BOUNDS])
    x = np.clip(x, lo, hi)  # the bounds are public and must hold: clip the data to them
    xc = x - x.mean(axis=1, keepdims=True)
    return np.einsum("rni,rnj->rij", xc, xc) / (n - 1)


def population_values(setting, draws: int, seed: int) -> dict[str, float]:
    """S11, S22, S12, r of the *clipped* distribution, by a large seeded Monte Carlo sample."""
    s = draw_covariances(setting, draws, 1, np.random.default_rng(seed))[0]
    return {
        "S11": s[0, 0],
        "S22": s[1, 1],
        "S12": s[0, 1],
        "r": s[0, 1] / math.sqrt(s[0, 0] * s[1, 1]),
    }


def _stats(m: np.ndarray) -> dict[str, np.ndarray]:
    """The four statistics of a stack of 2 x 2 matrices (r = 0 where a variance is 0)."""
    v1, v2, c = m[:, 0, 0], m[:, 1, 1], m[:, 0, 1]
    d = np.sqrt(v1 * v2)
    r = np.divide(c, d, out=np.zeros_like(c), where=d > 0)
    return {"S11": v1, "S22": v2, "S12": c, "r": np.clip(r, -1.0, 1.0)}


def simulate_cell(task: tuple[int, int, int, int, dict[str, float]]) -> list[dict]:
    """All variants for one (setting, n): the same data sets, one noise stream per variant."""
    k, n, reps, seed, pop = task
    setting = SETTINGS[k]
    data_seq, *noise_seqs = np.random.SeedSequence(seed, spawn_key=(k, n)).spawn(1 + len(VARIANTS))
    sample = draw_covariances(setting, n, reps, np.random.default_rng(data_seq))
    orig = _stats(sample)
    vmax = [n * (hi - lo) ** 2 / (4.0 * (n - 1)) for lo, hi in BOUNDS]

    rows = []
    for (method, calibration), seq in zip(VARIANTS, noise_seqs, strict=True):
        rng = np.random.default_rng(seq)
        out = np.empty_like(sample)
        scales = np.empty((reps, 3))
        cbound = np.empty(reps)
        degenerate = np.zeros(reps, dtype=bool)
        charged = math.nan
        grids = [math.nan] * 3  # grid steps of S11, S22, S12
        for i in range(reps):
            r = release_covariance_matrix(
                sample[i], n, BOUNDS, EPSILON, method=method, calibration=calibration, rng=rng
            )
            out[i] = r.sanitized
            scales[i] = r.scales[0, 0], r.scales[1, 1], r.scales[0, 1]
            cbound[i] = r.upper[0, 1]
            degenerate[i] = bool(r.degenerate)
            charged, grids = r.epsilon_charged, [c.granularity for c in r.charges]
        san = _stats(out)

        # closed-form bias / MSE of the continuous laws at the scales used (a check)
        bias_f, mse_f = (
            (truncated_laplace_bias, truncated_laplace_mse)
            if method == "truncated"
            else (bit_laplace_bias, bit_laplace_mse)
        )
        theory = {}
        for j, name in enumerate(("S11", "S22")):
            s = orig[name]
            theory[name] = (
                bias_f(s, scales[:, j], 0.0, vmax[j]),
                mse_f(s, scales[:, j], 0.0, vmax[j]),
            )
        # S12: bounds -+c from the sanitized variances; a statistic outside is clipped first
        s = orig["S12"]
        ok = ~degenerate
        loc = np.clip(s, -cbound, cbound)
        b12 = -s  # a degenerate interval: S12 released as 0
        m12 = s**2
        if ok.any():
            lam = scales[ok, 2]
            bb = bias_f(loc[ok], lam, -cbound[ok], cbound[ok])
            vv = mse_f(loc[ok], lam, -cbound[ok], cbound[ok]) - bb**2
            shift = loc[ok] - s[ok]
            b12[ok] = bb + shift
            m12[ok] = vv + (bb + shift) ** 2
        theory["S12"] = (b12, m12)

        # on a bound: the released values are grid points, the top one floor(upper / g) g
        top = [math.floor(vmax[j] / grids[j]) * grids[j] for j in range(2)]
        top12 = np.floor(cbound / grids[2]) * grids[2]
        at_bound = {
            "S11": (out[:, 0, 0] <= 0) | (out[:, 0, 0] >= top[0] - grids[0] / 2),
            "S22": (out[:, 1, 1] <= 0) | (out[:, 1, 1] >= top[1] - grids[1] / 2),
            "S12": ok & (np.abs(out[:, 0, 1]) >= top12 - grids[2] / 2),
        }
        at_bound["r"] = at_bound["S12"]
        for j, name in enumerate(STATISTICS):
            err = san[name] - orig[name]
            tb, tm = theory.get(name, (np.array([math.nan]), np.array([math.nan])))
            q = np.quantile(err, [0.025, 0.25, 0.75, 0.975])
            rows.append(
                {
                    "setting": k,
                    "S11": setting[0],
                    "S22": setting[1],
                    "rho": setting[2],
                    "n": n,
                    "reps": reps,
                    "method": method,
                    "calibration": calibration,
                    "statistic": name,
                    "population": pop[name],
                    "bias": err.mean(),
                    "bias_se": err.std(ddof=1) / math.sqrt(reps),
                    "rmse": math.sqrt(np.mean(err**2)),
                    "bias_theory": float(np.mean(tb)),
                    "rmse_theory": math.sqrt(float(np.mean(tm))),
                    "sampling_rmse": math.sqrt(np.mean((orig[name] - pop[name]) ** 2)),
                    "err_q025": q[0],
                    "err_q25": q[1],
                    "err_q75": q[2],
                    "err_q975": q[3],
                    "at_bound": float(np.mean(at_bound[name])),
                    "degenerate": float(np.mean(degenerate)),
                    "scale": float(np.nanmean(scales[:, min(j, 2)])),
                    "epsilon_charged": charged,
                }
            )
    return rows


def check_bit_calibrations_agree() -> None:
    """BIT at the paper's scale is the exact calibration: same seed, same output."""
    cov = sigma(SETTINGS[2])
    a, b = (
        release_covariance_matrix(
            cov, 100, BOUNDS, EPSILON, method="bit", calibration=c, rng=np.random.default_rng(7)
        )
        for c in ("exact", "paper")
    )
    if not (np.array_equal(a.values, b.values) and a.epsilon_charged == b.epsilon_charged):
        raise RuntimeError("BIT with calibration='paper' differs from 'exact'")


def _cell(v):
    """6 significant digits; an empty cell (null) for NaN."""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return v


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: _cell(v) for k, v in row.items()})


def _save(fig, path: Path, dpi: int) -> None:
    """PNG with a 256-colour palette (a third of the size of matplotlib's RGBA output)."""
    import io

    from PIL import Image  # a dependency of matplotlib

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    image = Image.open(buf).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)


def _layout(fig, dpi: int) -> None:
    """tight_layout for the real figures; fixed margins for the cheap low-dpi --quick ones."""
    if dpi >= 100:
        fig.tight_layout()
    else:
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.07, top=0.9, hspace=0.3, wspace=0.3)


def _series(rows, k, variant, stat, key):
    sel = sorted(
        (
            r
            for r in rows
            if r["setting"] == k
            and (r["method"], r["calibration"]) == variant
            and r["statistic"] == stat
        ),
        key=lambda r: r["n"],
    )
    return np.array([r["n"] for r in sel]), np.array([r[key] for r in sel])


def plot(rows: list[dict], out: Path, dpi: int = 100) -> list[Path]:
    """Bias, RMSE and error spread of each statistic against n (one column per setting)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted({r["setting"] for r in rows})
    titles = {k: "(S11, S22, r) = ({:g}, {:g}, {:g})".format(*SETTINGS[k]) for k in settings}
    ylab = {"S11": "S*11", "S22": "S*22", "S12": "S*12", "r": "r*"}
    paths = []

    def grid(title):
        fig, axes = plt.subplots(
            len(STATISTICS),
            len(settings),
            figsize=(4.2 * len(settings) + 0.6, 10.5),
            squeeze=False,
            sharex=True,
        )
        fig.suptitle(title, fontsize=11)
        return fig, axes

    for key, name, title in (
        (
            "bias",
            "sim1_bias.png",
            "Bias of the sanitized statistic vs the sample value (ε = 1, "
            "ε/3 each); thin dotted: closed form",
        ),
        (
            "rmse",
            "sim1_rmse.png",
            "RMSE of the sanitized statistic vs the sample value (ε = 1); "
            "grey: sampling RMSE of the sample value vs the population",
        ),
    ):
        fig, axes = grid(title)
        for c, k in enumerate(settings):
            for r_, stat in enumerate(STATISTICS):
                ax = axes[r_, c]
                for v in VARIANTS:
                    x, y = _series(rows, k, v, stat, key)
                    ax.plot(x, y, label=LABELS[v], markersize=4, **STYLE[v])
                    if key == "bias" and stat != "r":
                        _, t = _series(rows, k, v, stat, "bias_theory")
                        ax.plot(x, t, ":", color="k", linewidth=0.8)
                if key == "bias":
                    ax.axhline(0.0, color="grey", linewidth=0.8)
                else:
                    x, y = _series(rows, k, VARIANTS[0], stat, "sampling_rmse")
                    ax.plot(x, y, color="grey", linewidth=2, label="sampling (S vs population)")
                    ax.set_ylim(bottom=0)
                ax.set_xscale("log")
                ax.set_xticks(sorted({r["n"] for r in rows}))
                ax.set_xticklabels([str(t) for t in sorted({r["n"] for r in rows})], fontsize=7)
                ax.minorticks_off()
                if r_ == 0:
                    ax.set_title(titles[k], fontsize=9)
                if c == 0:
                    ax.set_ylabel(f"{key} of {ylab[stat]}")
                if r_ == len(STATISTICS) - 1:
                    ax.set_xlabel("n")
        axes[0, 0].legend(fontsize=7)
        _layout(fig, dpi)
        path = out / name
        _save(fig, path, dpi)
        plt.close(fig)
        paths.append(path)

    # the paper's Figure 1: mean and percentile bands of the error S* - S
    fig, axes = grid("Error S* − S: mean (line), 25–75 % (dark) and 2.5–97.5 % (light) bands")
    for c, k in enumerate(settings):
        for r_, stat in enumerate(STATISTICS):
            ax = axes[r_, c]
            for v in (VARIANTS[0], VARIANTS[2]):
                col = STYLE[v]["color"]
                x, m = _series(rows, k, v, stat, "bias")
                _, lo = _series(rows, k, v, stat, "err_q025")
                _, q1 = _series(rows, k, v, stat, "err_q25")
                _, q3 = _series(rows, k, v, stat, "err_q75")
                _, hi = _series(rows, k, v, stat, "err_q975")
                ax.fill_between(x, lo, hi, color=col, alpha=0.15)
                ax.fill_between(x, q1, q3, color=col, alpha=0.3)
                ax.plot(x, m, color=col, marker=STYLE[v]["marker"], markersize=4, label=LABELS[v])
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_xticks(sorted({r["n"] for r in rows}))
            ax.set_xticklabels([str(t) for t in sorted({r["n"] for r in rows})], fontsize=7)
            ax.minorticks_off()
            if r_ == 0:
                ax.set_title(titles[k], fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{ylab[stat]} − sample")
            if r_ == len(STATISTICS) - 1:
                ax.set_xlabel("n")
    axes[0, 0].legend(fontsize=7)
    _layout(fig, dpi)
    path = out / "sim1_spread.png"
    _save(fig, path, dpi)
    plt.close(fig)
    paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=Path("docs/figures"),
        help="folder for sim1_results.csv and the sim1_*.png figures (default docs/figures)",
    )
    parser.add_argument("--quick", action="store_true", help="one setting, 2 values of n, 20 reps")
    parser.add_argument("--reps", type=int, default=None, help=f"repetitions (default {REPS})")
    parser.add_argument("--seed", type=int, default=SEED, help="seed (research only)")
    parser.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes"
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    if args.quick:
        settings, ns, reps, pop_draws, jobs = (2,), (50, 200), args.reps or 20, 20_000, 1
    else:
        settings, ns, reps, pop_draws, jobs = (
            range(len(SETTINGS)),
            NS,
            args.reps or REPS,
            4_000_000,
            args.jobs,
        )
    print("Seeded noise: reproducible, for research only (never for a real release).")
    check_bit_calibrations_agree()

    t0 = time.perf_counter()
    pops = {k: population_values(SETTINGS[k], pop_draws, args.seed + k) for k in settings}
    tasks = [(k, n, reps, args.seed, pops[k]) for k in settings for n in ns]
    rows: list[dict] = []
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            for part in pool.map(simulate_cell, tasks):
                rows.extend(part)
    else:
        for task in tasks:
            rows.extend(simulate_cell(task))
    t_sim = time.perf_counter() - t0

    write_csv(rows, out / "sim1_results.csv")
    paths = plot(rows, out, dpi=40 if args.quick else 100)
    print(
        f"{len(tasks)} cells x {reps} reps x {len(VARIANTS)} variants in {t_sim:.1f} s "
        f"({jobs} process(es)); wrote {out / 'sim1_results.csv'} and "
        + ", ".join(p.name for p in paths)
    )
    for row in rows:
        if row["statistic"] == "r" and row["n"] in (ns[0], ns[-1]):
            print(
                f"  rho={row['rho']:+.1f} n={row['n']:4d} {row['method']:9s} "
                f"{row['calibration']:5s} bias(r*)={row['bias']:+.4f} rmse(r*)={row['rmse']:.4f} "
                f"charged={row['epsilon_charged']:.3f}"
            )
    return rows


if __name__ == "__main__":
    main()
