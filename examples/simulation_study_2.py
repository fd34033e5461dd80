"""Simulation study 2 of Liu (2019): a proportion vector released in [0, 1], summing to 1.

Reproduces Section 4.2 (Figures 2-5) and Appendix I of the bounded-Laplace paper with
dpframe's kernels :func:`dpframe.mechanisms.proportions.release_proportions`,
:func:`~dpframe.mechanisms.synthesis.multiple_synthesis` and
:func:`~dpframe.mechanisms.synthesis.combine_synthesis`.
p = (0.1, 0.2, 0.3, 0.4); each repetition draws counts from multinomial(n, p) and releases the
sample proportions p-hat with truncated and BIT Laplace noise, under each sum-to-one strategy:

* ``rescale``: each proportion sanitized in [0, 1], then divided by the sum;
* ``all_but_one``: p2, p3, p4 sanitized in turn inside the room left, p1 = 1 - the rest
  (the paper computed its p1 last: ``order=0``);
* ``universal_histogram``: Hay et al.'s tree with the root fixed at 1, leaves (p1, p2 | p3, p4)
  as in the paper; ``universal_histogram_alt``: the paper's other grouping (p1, p4 | p2, p3);
* ``ms_rescale``: multiple synthesis, m = 5 rescaled releases at epsilon/5 each, combined with
  :func:`combine_synthesis` (within-variance p*(1 - p*)/n of each release).

Truncation also runs at the paper's scale (``calibration="paper"``, rescale only) to show what
the exact calibration changes. It reports, for each proportion and for the pairwise sums
p1 + p2, p1 + p3, p1 + p4 of Appendix I, the bias and RMSE against the true p and the coverage
(CP) of 95 % intervals: for one release the naive Wald interval p* -+ 1.96 sqrt(p*(1 - p*)/n)
(as the paper), for multiple synthesis the combining rule; and the same for the original p-hat.

Sensitivity. The paper used delta_1 = 1/n for the vector; the correct value is 2/n under either
neighbour relation (docs/papers.md), and dpframe uses it. So the paper's results at epsilon
correspond to dpframe's at 2 epsilon: besides the paper's epsilon in {0.1, 0.5, 1}, this study
also runs epsilon = 0.2 and 2 (the paper's 0.1 and 1 under the correct sensitivity).

Run:
    .venv/bin/python examples/simulation_study_2.py docs/figures      # full: 500 repetitions
    .venv/bin/python examples/simulation_study_2.py /tmp/sim2 --quick  # a few seconds

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
from functools import partial
from pathlib import Path

import numpy as np

from dpframe.mechanisms.proportions import plan_proportions, release_proportions
from dpframe.mechanisms.synthesis import combine_synthesis, multiple_synthesis

P = np.array([0.1, 0.2, 0.3, 0.4])
EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0)
NS = (50, 100, 200, 300, 400, 500)
REPS = 500
M = 5  # releases in multiple synthesis
SEED = 20190602
Z95 = 1.959963984540054
#: strategy -> release_proportions keyword arguments
STRATEGIES = {
    "rescale": {"strategy": "rescale"},
    "all_but_one": {"strategy": "all_but_one", "order": 0},
    "universal_histogram": {"strategy": "universal_histogram"},
    "universal_histogram_alt": {"strategy": "universal_histogram", "order": (0, 3, 1, 2)},
}
#: (method, calibration, strategy); "ms_rescale" is multiple synthesis of "rescale"
VARIANTS = (
    *(("truncated", "exact", s) for s in STRATEGIES),
    *(("bit", "exact", s) for s in STRATEGIES),
    ("truncated", "paper", "rescale"),
    ("truncated", "exact", "ms_rescale"),
    ("bit", "exact", "ms_rescale"),
)
PROPORTIONS = ("p1", "p2", "p3", "p4")
SUMS = {"p1+p2": (0, 1), "p1+p3": (0, 2), "p1+p4": (0, 3)}
QUANTITIES = PROPORTIONS + tuple(SUMS)
COLUMNS = (
    "epsilon",
    "n",
    "reps",
    "method",
    "calibration",
    "strategy",
    "quantity",
    "true",
    "bias",
    "bias_se",
    "rmse",
    "rmse_vs_sample",
    "cp",
    "ci_width",
    "degenerate",
    "scale",
    "epsilon_charged",
)


def _with_sums(x: np.ndarray) -> np.ndarray:
    """Append the pairwise sums of Appendix I along the last axis."""
    return np.concatenate([x, *(x[..., [i]] + x[..., [j]] for i, j in SUMS.values())], axis=-1)


def _summary(est, lower, upper, sample, n, reps, **fixed) -> list[dict]:
    truth = _with_sums(P)
    rows = []
    for j, name in enumerate(QUANTITIES):
        err = est[:, j] - truth[j]
        rows.append(
            {
                **fixed,
                "n": n,
                "reps": reps,
                "quantity": name,
                "true": truth[j],
                "bias": err.mean(),
                "bias_se": err.std(ddof=1) / math.sqrt(reps),
                "rmse": math.sqrt(np.mean(err**2)),
                "rmse_vs_sample": math.sqrt(np.mean((est[:, j] - sample[:, j]) ** 2)),
                "cp": float(np.mean((lower[:, j] <= truth[j]) & (truth[j] <= upper[:, j]))),
                "ci_width": float(np.mean(upper[:, j] - lower[:, j])),
            }
        )
    return rows


def _wald(est: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    half = Z95 * np.sqrt(np.clip(est * (1 - est), 0.0, None) / n)
    return est - half, est + half


def draw_proportions(n: int, reps: int, seed: int) -> np.ndarray:
    """Sample proportions of ``reps`` multinomial(n, P) data sets (the same for every epsilon)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, n)))
    return rng.multinomial(n, P, size=reps) / n


def original_rows(n: int, reps: int, seed: int, epsilons) -> list[dict]:
    """Bias, RMSE and Wald-interval CP of the unsanitized p-hat (repeated for each epsilon)."""
    sample = _with_sums(draw_proportions(n, reps, seed))
    lo, hi = _wald(sample, n)
    return [
        row
        for e in epsilons
        for row in _summary(
            sample,
            lo,
            hi,
            sample,
            n,
            reps,
            epsilon=e,
            method="none",
            calibration="",
            strategy="original",
            degenerate=0.0,
            scale=0.0,
            epsilon_charged=0.0,
        )
    ]


def simulate_cell(task: tuple[int, int, int, int]) -> list[dict]:
    """Every variant at one (epsilon, n); the data sets are the same for every epsilon."""
    e_index, n, reps, seed = task
    eps = EPSILONS[e_index]
    phat = draw_proportions(n, reps, seed)
    sample = _with_sums(phat)
    rows = []

    for v_index, (method, calibration, strategy) in enumerate(VARIANTS):
        rng = np.random.default_rng(
            np.random.SeedSequence(seed, spawn_key=(1, n, e_index, v_index))
        )
        kwargs = STRATEGIES["rescale" if strategy == "ms_rescale" else strategy]
        release = partial(release_proportions, method=method, calibration=calibration, **kwargs)
        # one release's plan at the budget multiple_synthesis gives it (epsilon / M)
        plan = partial(
            plan_proportions, P.size, n, method=method, calibration=calibration, **kwargs
        )
        degenerate = 0
        if strategy == "ms_rescale":
            est = np.empty((M, reps, P.size))
            for i in range(reps):
                ms = multiple_synthesis(plan, phat[i], M, eps, rng=rng)
                est[:, i] = ms.estimates()
                degenerate += any(r.degenerate for r in ms.releases)
            charged = ms.epsilon_charged
            scale = ms.releases[0].charges[0].scale
            sums = _with_sums(est)
            within = np.clip(sums * (1 - sums), 0.0, None) / n
            c = combine_synthesis(sums, within)  # every repetition and quantity at once
            values, lo, hi = np.asarray(c.estimate), np.asarray(c.lower), np.asarray(c.upper)
        else:
            out = np.empty((reps, P.size))
            for i in range(reps):
                r = release(phat[i], n, eps, rng=rng)
                out[i] = r.values
                degenerate += r.degenerate
            charged = r.epsilon_charged
            scale = float(np.nanmax(r.scales))
            values = _with_sums(out)
            lo, hi = _wald(values, n)
        rows += _summary(
            values,
            lo,
            hi,
            sample,
            n,
            reps,
            epsilon=eps,
            method=method,
            calibration=calibration,
            strategy=strategy,
            degenerate=degenerate / reps,
            scale=scale,
            epsilon_charged=charged,
        )
    return rows


def _cell(v):
    """6 significant digits; an empty cell (null) for NaN."""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return v


def write_csv(rows: list[dict], path: Path) -> None:
    rows = sorted(
        rows,
        key=lambda r: (
            r["epsilon"],
            r["n"],
            r["strategy"],
            r["method"],
            r["calibration"],
            QUANTITIES.index(r["quantity"]),
        ),
    )
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: _cell(v) for k, v in row.items()})


# ------------------------------------------------------------------------------ figures

COLORS = {
    "p1": "tab:red",
    "p2": "tab:green",
    "p3": "tab:purple",
    "p4": "tab:blue",
    "p1+p2": "tab:brown",
    "p1+p3": "tab:olive",
    "p1+p4": "tab:cyan",
}
METRICS = (("bias", "bias"), ("rmse", "RMSE"), ("cp", "CP of 95 % CI"))


def _series(rows, eps, key, quantity, metric):
    sel = sorted(
        (
            r
            for r in rows
            if r["epsilon"] == eps
            and (r["method"], r["calibration"], r["strategy"]) == key
            and r["quantity"] == quantity
        ),
        key=lambda r: r["n"],
    )
    return np.array([r["n"] for r in sel]), np.array([r[metric] for r in sel])


def _axes(plt, epsilons, title):
    fig, axes = plt.subplots(
        len(METRICS),
        len(epsilons),
        squeeze=False,
        sharex=True,
        figsize=(3.1 * len(epsilons) + 0.8, 8.2),
    )
    fig.suptitle(title, fontsize=10)
    for c, eps in enumerate(epsilons):
        axes[0, c].set_title(f"ε = {eps:g}  (paper's ε = {eps / 2:g} at δ₁ = 1/n)", fontsize=8.5)
        axes[-1, c].set_xlabel("n")
        for r_, (metric, label) in enumerate(METRICS):
            ax = axes[r_, c]
            if c == 0:
                ax.set_ylabel(label)
            if metric == "bias":
                ax.axhline(0.0, color="grey", linewidth=0.8)
            elif metric == "cp":
                ax.axhline(0.95, color="grey", linewidth=0.8)
            ax.tick_params(labelsize=7)
    return fig, axes


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


def _finish(fig, axes, path, plt, dpi, legend_handles=None):
    if legend_handles is not None:
        axes[0, 0].legend(handles=legend_handles, fontsize=6.5, ncol=1)
    for ax in axes[1]:
        ax.set_ylim(bottom=0)
    _layout(fig, dpi)
    _save(fig, path, dpi)
    plt.close(fig)
    return path


def plot(rows: list[dict], out: Path, dpi: int = 100) -> list[Path]:
    """Figures 2-5 (one per strategy), Appendix I, the calibration and strategy comparisons."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    epsilons = sorted({r["epsilon"] for r in rows})
    original = ("none", "", "original")
    paths = []
    titles = {
        "rescale": "Rescaling (paper Fig. 2)",
        "ms_rescale": f"Multiple synthesis, m = {M} rescaled releases at ε/{M} (paper Fig. 3)",
        "all_but_one": "All-but-one, p1 computed last (paper Fig. 4)",
        "universal_histogram": "Universal histogram, leaves (p1, p2 | p3, p4) (paper Fig. 5)",
    }
    for strategy, title in titles.items():
        fig, axes = _axes(
            plt,
            epsilons,
            f"{title}: solid truncated (exact ε-DP), dashed BIT, "
            "dotted original p̂ (naive Wald CI for one release)",
        )
        for c, eps in enumerate(epsilons):
            for r_, (metric, _) in enumerate(METRICS):
                ax = axes[r_, c]
                for q in PROPORTIONS:
                    for key, ls in (
                        (("truncated", "exact", strategy), "-"),
                        (("bit", "exact", strategy), "--"),
                        (original, ":"),
                    ):
                        x, y = _series(rows, eps, key, q, metric)
                        ax.plot(
                            x,
                            y,
                            ls,
                            color=COLORS[q],
                            linewidth=1.2 if ls != ":" else 1.0,
                            marker="o" if ls == "-" else None,
                            markersize=2.5,
                        )
        handles = [
            Line2D([], [], color=COLORS[q], label=f"{q} = {P[i]:g}")
            for i, q in enumerate(PROPORTIONS)
        ]
        handles += [
            Line2D([], [], color="k", linestyle=ls, label=lab)
            for ls, lab in (("-", "truncated"), ("--", "BIT"), (":", "original p̂"))
        ]
        paths.append(_finish(fig, axes, out / f"sim2_{strategy}.png", plt, dpi, handles))

    # Appendix I: pairwise sums, rescaling vs universal histogram (BIT)
    fig, axes = _axes(
        plt,
        epsilons,
        "Pairwise sums (Appendix I), BIT: solid rescaling, dashed "
        "universal histogram (p1+p2 is a tree node), dotted original",
    )
    for c, eps in enumerate(epsilons):
        for r_, (metric, _) in enumerate(METRICS):
            for q in SUMS:
                for key, ls in (
                    (("bit", "exact", "rescale"), "-"),
                    (("bit", "exact", "universal_histogram"), "--"),
                    (original, ":"),
                ):
                    x, y = _series(rows, eps, key, q, metric)
                    axes[r_, c].plot(
                        x,
                        y,
                        ls,
                        color=COLORS[q],
                        marker="o" if ls == "-" else None,
                        markersize=2.5,
                        linewidth=1.2,
                    )
    handles = [
        Line2D([], [], color=COLORS[q], label=f"{q} = {_with_sums(P)[4 + i]:g}")
        for i, q in enumerate(SUMS)
    ]
    handles += [
        Line2D([], [], color="k", linestyle=ls, label=lab)
        for ls, lab in (("-", "rescaling"), ("--", "universal hist."), (":", "original p̂"))
    ]
    paths.append(_finish(fig, axes, out / "sim2_pairwise_sums.png", plt, dpi, handles))

    # strategies compared (BIT): RMSE and CP of p1 and p4
    keys = {
        "rescale": ("bit", "exact", "rescale"),
        "all-but-one (p1 last)": ("bit", "exact", "all_but_one"),
        "univ. hist. (p1,p2|p3,p4)": ("bit", "exact", "universal_histogram"),
        "univ. hist. (p1,p4|p2,p3)": ("bit", "exact", "universal_histogram_alt"),
        f"MS rescale (m={M})": ("bit", "exact", "ms_rescale"),
    }
    colors = ("tab:blue", "tab:red", "tab:green", "tab:olive", "tab:purple")
    fig, axes = plt.subplots(
        4, len(epsilons), squeeze=False, sharex=True, figsize=(3.1 * len(epsilons) + 0.8, 9.0)
    )
    fig.suptitle(
        "Strategies compared (BIT): RMSE and CP of p1 = 0.1 and p4 = 0.4; grey: original p̂",
        fontsize=10,
    )
    for c, eps in enumerate(epsilons):
        axes[0, c].set_title(f"ε = {eps:g}", fontsize=9)
        axes[-1, c].set_xlabel("n")
        for r_, (q, metric) in enumerate(
            (("p1", "rmse"), ("p4", "rmse"), ("p1", "cp"), ("p4", "cp"))
        ):
            ax = axes[r_, c]
            for (lab, key), col in zip(keys.items(), colors, strict=True):
                x, y = _series(rows, eps, key, q, metric)
                ax.plot(x, y, color=col, marker="o", markersize=2.5, label=lab)
            x, y = _series(rows, eps, original, q, metric)
            ax.plot(x, y, color="grey", linewidth=2)
            if metric == "cp":
                ax.axhline(0.95, color="grey", linewidth=0.8, linestyle=":")
            else:
                ax.set_ylim(bottom=0)
            ax.tick_params(labelsize=7)
            if c == 0:
                ax.set_ylabel(f"{'RMSE' if metric == 'rmse' else 'CP'} of {q}")
    axes[0, 0].legend(fontsize=6.5)
    _layout(fig, dpi)
    path = out / "sim2_strategies.png"
    _save(fig, path, dpi)
    plt.close(fig)
    paths.append(path)

    # truncation: exact calibration vs the paper's scale, rescaling, mean over p1..p4
    variants = {
        "truncated, exact ε-DP": (("truncated", "exact", "rescale"), "tab:blue", "-"),
        "truncated, paper λ (not ε-DP)": (("truncated", "paper", "rescale"), "tab:blue", "--"),
        "BIT (ε-DP)": (("bit", "exact", "rescale"), "tab:orange", "-"),
        "original p̂": (original, "grey", ":"),
    }
    fig, axes = _axes(
        plt,
        epsilons,
        "Rescaling: truncation at the exact ε-DP scale vs the "
        "paper's λ = Δ/ε (mean of |bias|, RMSE and CP over p1..p4)",
    )
    for c, eps in enumerate(epsilons):
        for r_, (metric, _) in enumerate(METRICS):
            for lab, (key, col, ls) in variants.items():
                ys = [_series(rows, eps, key, q, metric) for q in PROPORTIONS]
                y = np.mean([np.abs(v) if metric == "bias" else v for _, v in ys], axis=0)
                axes[r_, c].plot(ys[0][0], y, ls, color=col, marker="o", markersize=2.5, label=lab)
    axes[0, 0].set_ylabel("mean |bias|")
    axes[0, 0].legend(fontsize=6.5)
    paths.append(_finish(fig, axes, out / "sim2_truncation_calibration.png", plt, dpi))
    return paths


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=Path("docs/figures"),
        help="folder for sim2_results.csv and the sim2_*.png figures (default docs/figures)",
    )
    parser.add_argument("--quick", action="store_true", help="epsilon = 1, 2 values of n, 20 reps")
    parser.add_argument("--reps", type=int, default=None, help=f"repetitions (default {REPS})")
    parser.add_argument("--seed", type=int, default=SEED, help="seed (research only)")
    parser.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes"
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        e_idx, ns, reps, jobs = (EPSILONS.index(1.0),), (50, 200), args.reps or 20, 1
    else:
        e_idx, ns, reps, jobs = range(len(EPSILONS)), NS, args.reps or REPS, args.jobs
    print("Seeded noise: reproducible, for research only (never for a real release).")

    t0 = time.perf_counter()
    tasks = [(e, n, reps, args.seed) for e in e_idx for n in ns]
    rows: list[dict] = []
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            for part in pool.map(simulate_cell, tasks):
                rows.extend(part)
    else:
        for task in tasks:
            rows.extend(simulate_cell(task))
    for n in ns:
        rows += original_rows(n, reps, args.seed, [EPSILONS[e] for e in e_idx])
    t_sim = time.perf_counter() - t0

    write_csv(rows, out / "sim2_results.csv")
    paths = plot(rows, out, dpi=40 if args.quick else 100)
    print(
        f"{len(tasks)} cells x {reps} reps x {len(VARIANTS)} variants in {t_sim:.1f} s "
        f"({jobs} process(es)); wrote {out / 'sim2_results.csv'} and "
        + ", ".join(p.name for p in paths)
    )
    for row in rows:
        if (
            row["quantity"] == "p1"
            and row["n"] == ns[0]
            and row["strategy"] in ("rescale", "ms_rescale", "original")
        ):
            print(
                f"  eps={row['epsilon']:<4g} n={row['n']:4d} {row['strategy']:10s} "
                f"{row['method']:9s} {row['calibration']:5s} bias(p1)={row['bias']:+.4f} "
                f"rmse={row['rmse']:.4f} cp={row['cp']:.3f} charged={row['epsilon_charged']:g}"
            )
    return rows


if __name__ == "__main__":
    main()
