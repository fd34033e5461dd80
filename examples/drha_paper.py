"""Section 5 of Liu & Zhao's DR-HA paper (homogeneity attack after DP sanitization), with dpframe.

Reproduces the experiments of "Disclosure Risk from Homogeneity Attack in Differentially
Privately Sanitized Frequency Distribution" (``drha-homogeneity-attack.txt``, Sec. 5) on the
paper's own tables, shipped as :func:`dpframe.datasets.drha_table`:

1. the cell counts of Sec. 5.1 (Bankruptcy, its FF subset, and Adult in two readings: the
   paper's, where each of the 5,974 QID x income rows is a homogeneous cell of its own, and
   the table as the paper defines DR-HA, grouped by the six QIDs: 5,009 cells, 965 of them
   heterogeneous) -> ``drha_cell_counts.csv``;
2. Figure 3: local and expected DR-HA, unweighted and weighted, against ε in [1e-3, 1e2] for
   the Laplace mechanism, the Gaussian mechanism of (ε, δ)-DP (ε < 1), the Gaussian of
   (ε, δ)-pDP and, as an addition, the analytic Gaussian, at δ = 1/n, 0.01 and 0.1 ->
   ``drha_fig3_<data>.png`` and ``drha_curves.csv`` (dpframe's exact values and, for the
   tables with heterogeneous cells, the paper's closed forms, corrected);
3. the asymptotes of Sec. 5.2, paper against dpframe -> ``drha_asymptotes.csv``, and the
   claim that the pDP Gaussian sits about 0.05 above the (ε, δ)-DP one for ε < 1 ->
   ``drha_pdp_vs_dp.csv``;
4. Figure 4: the TVD of the 6 one-way, 15 two-way and 20 three-way marginals of the FF table
   at ε in {0.1, 1, 10} (0.1 and 0.99 for the classic Gaussian) -> ``drha_fig4_tvd.png``,
   ``drha_fig4_tvd_laplace.png`` and ``drha_tvd.csv``, and the choice of ε that Sec. 5.3
   makes from Figures 3 and 4;
5. the two readings of the Adult table side by side -> ``drha_adult_readings.png`` and
   ``drha_adult_readings.csv``.

Run:
    .venv/bin/python examples/drha_paper.py docs/figures              # full (about 20 s)
    .venv/bin/python examples/drha_paper.py /tmp/drha --quick         # 5-10 s

``--quick``: a 6-point ε grid, 10 TVD draws, Figure 3 for the FF table only, no expected
measure for Adult, low-dpi figures.

DR-HA is an assessment of the confidential table (here the paper's public tables): it spends
no budget. The TVD of Figure 4 is Monte Carlo with *seeded* noise, for research only; a real
release must use dpframe's default secure random source.
"""

from __future__ import annotations

import argparse
import io
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

from dpframe.datasets import drha_table
from dpframe.risk.choose import choose_epsilon, marginal_tvd
from dpframe.risk.frame import cell_table, drha
from dpframe.risk.measures import cell_risk
from dpframe.risk.plot import plot_tvd

SEED = 20220724
MECHANISMS = ("laplace", "gaussian", "gaussian_pdp", "analytic_gaussian")
MECH_TITLE = {
    "laplace": "Laplace, ε-DP",
    "gaussian": "Gaussian, (ε, δ)-DP (ε < 1)",
    "gaussian_pdp": "Gaussian, (ε, δ)-pDP",
    "analytic_gaussian": "analytic Gaussian, (ε, δ)-DP (addition)",
}
MEASURES = ("local", "expected")
#: dataset key -> (drha_table name, each row its own cell?)
DATASETS = {
    "bankruptcy": ("bankruptcy", False),
    "bankruptcy_ff": ("bankruptcy_ff", False),
    "adult_rows": ("adult", True),
    "adult": ("adult", False),
}
LABEL = {
    "bankruptcy": "Bankruptcy",
    "bankruptcy_ff": "Bankruptcy subset, Y = FF",
    "adult_rows": "Adult, the paper's reading (5,974 QID × income rows as cells)",
    "adult": "Adult grouped by the six QIDs (the paper's Definitions 4-6)",
}
#: Sec. 5.1, Figure 2 and footnote 6: cells, homogeneous cells, mean cell size (Poisson ML)
PAPER_CELLS = {
    "bankruptcy": (103, 103, 2.43),
    "bankruptcy_ff": (78, 54, 3.21),
    "adult_rows": (5974, 5974, 4.6),
    "adult": (5974, 5974, 4.6),  # what the paper states for "the" Adult table
}
#: Sec. 5.2 (3): FF subset, K = 3 (measure, weighted) -> (lower, upper)
PAPER_FF = {
    ("local", False): (0.16, 0.69),
    ("local", True): (0.18, 0.57),
    ("expected", False): (0.16, 0.75),
    ("expected", True): (0.17, 0.63),
}
EPS_TOP = 0.99  # the largest ε on the grids of the classic Gaussian (it needs ε < 1)
EPS_LO, EPS_HI = 1e-9, 500.0  # stand-ins for ε -> 0 and ε -> ∞ (exact to double precision)
COLORS = ("tab:blue", "tab:orange", "tab:green")


# --------------------------------------------------------------------------- data


def load(key: str) -> dict:
    """The table of one experiment: frame, QIDs, Y, its cells, and n."""
    name, rows_as_cells = DATASETS[key]
    t = drha_table(name)
    frame, qids = t.frame, list(t.qids)
    if rows_as_cells:
        # the paper's reading of Adult: the row index is part of the QIDs, so every
        # QID x income row is a cell of its own (and homogeneous)
        frame, qids = frame.with_row_index("row"), ["row", *qids]
    cells = cell_table(frame, qids, t.sensitive, count="count")
    n = int(cells.sizes.sum())
    return {
        "key": key,
        "frame": frame,
        "qids": qids,
        "sensitive": t.sensitive,
        "cells": cells,
        "n": n,
        "K": len(t.levels),
        "deltas": (1.0 / n, 1e-2, 1e-1),
    }


def cell_counts(data: dict[str, dict]) -> pl.DataFrame:
    rows = []
    for key, d in data.items():
        c = d["cells"]
        sizes, levels_held = c.sizes, (c.counts > 0).sum(axis=1)
        paper_n, paper_hom, paper_mean = PAPER_CELLS[key]
        rows.append(
            {
                "dataset": key,
                "records": d["n"],
                "K": d["K"],
                "cells": sizes.size,
                "homogeneous": int(c.homogeneous.sum()),
                "heterogeneous": int((~c.homogeneous).sum()),
                "cells_3plus_levels": int((levels_held >= 3).sum()),
                "records_in_homogeneous": int(sizes[c.homogeneous].sum()),
                "size_min": int(sizes.min()),
                "size_max": int(sizes.max()),
                "size_mean": round(float(sizes.mean()), 3),
                "singletons": int((sizes == 1).sum()),
                "cells_over_120": int((sizes > 120).sum()),
                "paper_cells": paper_n,
                "paper_homogeneous": paper_hom,
                "paper_size_mean": paper_mean,
            }
        )
    return pl.DataFrame(rows)


# --------------------------------------------------------------------------- Figure 3 data


def curves(d: dict, grid: np.ndarray, method: str, measures=MEASURES) -> pl.DataFrame:
    """Local and expected DR-HA, both weightings, every mechanism and δ (long table)."""
    parts = []
    # the classic Gaussian needs ε < 1; the other three share one call (Laplace ignores δ)
    # ε = 0.99: the top of the classic calibration's range, for the pDP-vs-DP comparison
    grid = np.union1d(grid, [EPS_TOP])
    for mechs, eps in (
        (["laplace", "gaussian_pdp", "analytic_gaussian"], grid),
        (["gaussian"], grid[grid < 1]),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # masked exp overflow (paper form)
            out = drha(
                d["frame"],
                d["qids"],
                d["sensitive"],
                count="count",
                epsilon=eps,
                delta=list(d["deltas"]),
                mechanism=mechs,
                measure=list(measures),
                weighted=[False, True],
                method=method,
            )
        parts.append(out.drop("assessment"))
    return pl.concat(parts).with_columns(
        pl.lit(d["key"]).alias("dataset"), pl.lit(method).alias("method")
    )


def wide(long: pl.DataFrame) -> pl.DataFrame:
    """One row per (dataset, method, mechanism, δ, ε); a column per measure x weighting."""
    keys = ["dataset", "method", "mechanism", "delta", "epsilon"]
    tagged = long.with_columns(
        (
            pl.col("measure")
            + pl.when(pl.col("weighted")).then(pl.lit("_w")).otherwise(pl.lit("_uw"))
        ).alias("column")
    )
    values = tagged.pivot(on="column", index=keys, values="risk")
    exact = tagged.group_by(keys).agg(pl.col("exact").all())
    return values.join(exact, on=keys, how="left", nulls_equal=True, maintain_order="left")


# --------------------------------------------------------------------------- asymptotes


def avg_risk(
    counts: np.ndarray,
    mech: str,
    eps: float,
    delta: float | None,
    measure: str,
    weighted: bool,
    method: str = "exact",
) -> float:
    """Average DR-HA at one ε, computed once per distinct row of the table."""
    rows, w = _distinct(counts, weighted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = cell_risk(
            rows, mechanism=mech, epsilon=eps, delta=delta, measure=measure, method=method
        )
    return float(w @ r.values[:, 0])


_DISTINCT: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _distinct(counts: np.ndarray, weighted: bool) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a table and their weights in the (un)weighted average."""
    if id(counts) not in _DISTINCT:  # the tables live as long as the run
        _DISTINCT[id(counts)] = np.unique(counts, axis=0, return_counts=True)
    rows, mult = _DISTINCT[id(counts)]
    w = mult * rows.sum(axis=1) if weighted else mult.astype(float)
    return rows, w / w.sum()


def eps_reaching(
    counts: np.ndarray, mech: str, delta: float | None, target: float = 0.99, points: int = 6001
) -> tuple[float, float]:
    """The ε at which the (increasing) risk of an all-homogeneous table reaches ``target``.

    One vectorised evaluation on a fine log grid over [1, 1000] (0.1 % steps in ε), on the
    distinct rows of the table weighted by their multiplicity, then linear interpolation in
    log ε. Returns (unweighted, weighted).
    """
    rows, _ = _distinct(counts, False)
    eps = np.logspace(0.0, 3.0, points)
    values = cell_risk(rows, mechanism=mech, epsilon=eps, delta=delta).values
    out = []
    for weighted in (False, True):
        risk = _distinct(counts, weighted)[1] @ values
        assert np.all(np.diff(risk) >= -1e-12) and risk[0] < target < risk[-1]
        out.append(float(10 ** np.interp(target, risk, np.log10(eps))))
    return out[0], out[1]


def limits(counts: np.ndarray, measure: str, weighted: bool) -> tuple[float, float]:
    """Exact DR-HA (conservative Scenario 8) as ε -> 0 and ε -> ∞, in closed form.

    ε -> 0: every count is released present with probability 1/2, independently, so a cell
    is homogeneous in one of its own levels with probability (levels held) / 2^K. ε -> ∞:
    the table comes back unchanged. The expected measure averages both over the
    multinomial(n_i, p̂_i) tables: E[levels held] = Σ_k 1 - (1 - p̂_k)^n_i, P(homogeneous) =
    Σ_k p̂_k^n_i.
    """
    n_levels = counts.shape[1]
    sizes = counts.sum(axis=1)
    if measure == "local":
        held = (counts > 0).sum(axis=1).astype(float)
        hom = ((counts > 0).sum(axis=1) == 1).astype(float)
    else:
        p = counts / sizes[:, None]
        held = (1.0 - (1.0 - p) ** sizes[:, None]).sum(axis=1)
        hom = (p ** sizes[:, None]).sum(axis=1)
    w = sizes / sizes.sum() if weighted else np.full(sizes.size, 1.0 / sizes.size)
    return float(w @ held) / 2.0**n_levels, float(w @ hom)


def printed_eq13_lower(counts: np.ndarray, weighted: bool) -> float:
    """Eq. (13) as typeset (Laplace, local) as ε -> 0: the Scenario-8 term gets (1/2)^(K-1) too.

    Typeset, eq. (13) multiplies the heterogeneous cells' term ½(1 - ½e^{-ε/2})^{K-2}(...) by
    the leading (1 - ½e^{-ε/2})^{K-1} as well; at ε -> 0 a homogeneous cell tends to 2^-K and a
    heterogeneous one to 2^{-(2K-2)} instead of the corrected 2^{-(K-1)}.
    """
    k = counts.shape[1]
    sizes = counts.sum(axis=1)
    hom = (counts > 0).sum(axis=1) == 1
    cell = np.where(hom, 2.0**-k, np.where(sizes >= 2, 2.0 ** -(2 * k - 2), 0.0))
    w = sizes / sizes.sum() if weighted else np.full(sizes.size, 1.0 / sizes.size)
    return float(w @ cell)


def asymptotes(data: dict[str, dict]) -> pl.DataFrame:
    rows = []

    def add(**kw):
        base = {
            "dataset": None,
            "quantity": None,
            "measure": None,
            "weighted": None,
            "mechanism": None,
            "delta": None,
            "paper": None,
            "exact": None,
            "paper_form": None,
            "note": "",
        }
        base.update(kw)
        rows.append(base)

    # all-homogeneous tables, K = 2 (local = expected): lower 0.25, upper 1
    for key in ("bankruptcy", "adult_rows"):
        d = data[key]
        counts = d["cells"].counts
        assert d["cells"].homogeneous.all() and d["K"] == 2
        gauss = [(m, dl) for m in ("gaussian_pdp", "analytic_gaussian") for dl in d["deltas"]]
        reach = {
            (mech, dl): eps_reaching(counts, mech, dl) for mech, dl in [("laplace", None), *gauss]
        }
        for w in (False, True):
            common = {"dataset": key, "measure": "local = expected", "weighted": w}
            for mech, dl in [("laplace", None), *gauss]:
                add(
                    **common,
                    quantity="lower, ε = 1e-3",
                    mechanism=mech,
                    delta=dl,
                    paper=0.25,
                    exact=avg_risk(counts, mech, 1e-3, dl, "local", w),
                    paper_form=avg_risk(counts, mech, 1e-3, dl, "local", w, "paper"),
                    note="limit 2^-K = 0.25"
                    if mech != "analytic_gaussian"
                    else "σ stays finite as ε -> 0 (δ > 0): no 2^-K floor",
                )
            for mech, dl in [("laplace", None), *gauss]:
                add(
                    **common,
                    quantity="ε at which risk = 0.99",
                    mechanism=mech,
                    delta=dl,
                    paper=10.0 if mech == "laplace" else 31.6 if mech == "gaussian_pdp" else None,
                    exact=reach[mech, dl][int(w)],
                    note="paper: upper asymptote 1 reached for ε >= 10 (Laplace), ~31.6 (pDP)",
                )
            add(
                **common,
                quantity="risk at ε = 10",
                mechanism="laplace",
                paper=1.0,
                exact=avg_risk(counts, "laplace", 10.0, None, "local", w),
            )
            for dl in d["deltas"]:
                add(
                    **common,
                    quantity="risk at ε = 10^1.5 = 31.6",
                    mechanism="gaussian_pdp",
                    delta=dl,
                    paper=1.0,
                    exact=avg_risk(counts, "gaussian_pdp", 10**1.5, dl, "local", w),
                )

    # FF subset, K = 3, 24 heterogeneous cells
    d = data["bankruptcy_ff"]
    counts = d["cells"].counts
    for (measure, w), (p_lo, p_hi) in PAPER_FF.items():
        lim_lo, lim_hi = limits(counts, measure, w)
        common = {"dataset": "bankruptcy_ff", "measure": measure, "weighted": w}
        for mech, dl in (("laplace", None), ("gaussian_pdp", d["deltas"][0])):
            for quantity, eps, paper, lim in (
                ("lower, ε = 1e-3", 1e-3, p_lo, None),
                ("lower, ε → 0", EPS_LO, p_lo, lim_lo),
                ("upper, ε = 100", 100.0, p_hi, None),
                ("upper, ε → ∞", EPS_HI, p_hi, lim_hi),
            ):
                exact = avg_risk(counts, mech, eps, dl, measure, w)
                note = ""
                if lim is not None:
                    assert abs(exact - lim) < 1e-6, (measure, w, mech, quantity, exact, lim)
                    note = f"closed-form limit {lim:.4f}"
                if quantity == "lower, ε → 0" and measure == "local" and mech == "laplace":
                    note += f"; eq. (13) as typeset: {printed_eq13_lower(counts, w):.4f}"
                add(
                    **common,
                    quantity=quantity,
                    mechanism=mech,
                    delta=dl,
                    paper=paper,
                    exact=exact,
                    paper_form=avg_risk(counts, mech, eps, dl, measure, w, "paper"),
                    note=note,
                )
    return pl.DataFrame(rows, infer_schema_length=None)


def scenario8_check(cells, grid: np.ndarray) -> pl.DataFrame:
    """Per-cell exact local risk vs the paper's Scenario-8 term, by levels held (Laplace)."""
    counts = cells.counts
    held = (counts > 0).sum(axis=1)
    ex = cell_risk(counts, mechanism="laplace", epsilon=grid).values
    pa = cell_risk(counts, mechanism="laplace", epsilon=grid, method="paper").values
    rows = []
    for h in sorted(set(held.tolist()) - {1}):
        sel = held == h
        diff = ex[sel] - pa[sel]
        i, j = np.unravel_index(np.argmax(diff), diff.shape)
        rows.append(
            {
                "levels_held": int(h),
                "cells": int(sel.sum()),
                "max_exact_minus_paper": float(diff.max()),
                "at_epsilon": float(grid[j]),
                "cell": str(counts[sel][i].tolist()),
                "paper_term_is_a_bound": bool((diff <= 1e-12).all()),
            }
        )
    return pl.DataFrame(rows)


def pdp_vs_dp(long: pl.DataFrame) -> pl.DataFrame:
    """pDP minus (ε, δ)-DP Gaussian, same δ, over the ε < 1 grid and at ε = 0.99 (exact)."""
    keys = ["dataset", "measure", "weighted", "delta", "epsilon"]
    a = long.filter(pl.col("mechanism") == "gaussian_pdp").select(*keys, pdp="risk")
    b = long.filter(pl.col("mechanism") == "gaussian").select(*keys, dp="risk")
    j = a.join(b, on=keys).with_columns(diff=pl.col("pdp") - pl.col("dp"))
    return (
        j.group_by("dataset", "measure", "weighted", "delta", maintain_order=True)
        .agg(
            pl.col("diff").mean().alias("mean_diff"),
            pl.col("diff").filter(pl.col("epsilon") >= 0.1).mean().alias("mean_diff_eps_0.1_1"),
            pl.col("diff").max().alias("max_diff"),
            pl.col("epsilon").get(pl.col("diff").arg_max()).alias("eps_at_max"),
            pl.col("diff").filter(pl.col("epsilon") == EPS_TOP).first().alias("diff_at_eps_0.99"),
        )
        .sort("dataset", "measure", "weighted", "delta")
    )


def delta_effect(long: pl.DataFrame) -> pl.DataFrame:
    """Largest spread of the risk across δ (1/n .. 0.1) at one ε, per Gaussian mechanism."""
    return (
        long.filter(pl.col("mechanism") != "laplace")
        .group_by("dataset", "mechanism", "measure", "weighted", "epsilon")
        .agg((pl.col("risk").max() - pl.col("risk").min()).alias("spread"))
        .group_by("dataset", "mechanism", maintain_order=True)
        .agg(
            pl.col("spread").max().alias("max_spread_over_delta"),
            pl.col("epsilon").get(pl.col("spread").arg_max()).alias("at_epsilon"),
        )
        .sort("dataset", "mechanism")
    )


# --------------------------------------------------------------------------- Figure 4


def tvd_settings(deltas: tuple[float, ...]) -> list[tuple[str, float | None, list[float]]]:
    out: list[tuple[str, float | None, list[float]]] = [("laplace", None, [0.1, 1.0, 10.0])]
    for mech in ("gaussian", "gaussian_pdp", "analytic_gaussian"):
        # the classic calibration needs ε < 1: 0.99 stands in for 1
        eps = [0.1, 0.99] if mech == "gaussian" else [0.1, 1.0, 10.0]
        out.extend((mech, dl, eps) for dl in deltas)
    return out


def tvd_table(d: dict, reps: int) -> pl.DataFrame:
    parts = []
    for i, (mech, dl, eps) in enumerate(tvd_settings(d["deltas"])):
        out = marginal_tvd(
            d["frame"],
            qids=d["qids"],
            sensitive=d["sensitive"],
            mechanism=mech,
            epsilon=eps,
            delta=dl,
            orders=(1, 2, 3),
            reps=reps,
            rng=np.random.default_rng([SEED, i]),  # seeded: research only
        )
        parts.append(
            out.drop("assessment").with_columns(
                pl.lit(mech).alias("mechanism"), pl.lit(dl, dtype=pl.Float64).alias("delta")
            )
        )
    return pl.concat(parts).select(
        "mechanism", "delta", "epsilon", "order", "marginal", "tvd_mean", "tvd_se"
    )


# --------------------------------------------------------------------------- plots


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path, dpi: int) -> Path:
    """PNG with a 256-colour palette (a third of the size of matplotlib's RGBA output)."""
    from PIL import Image  # a dependency of matplotlib

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    image = Image.open(buf).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
    return path


def _log_axis(ax) -> None:
    """Log ε axis with decade ticks only (minor log ticks make drawing many panels slow)."""
    from matplotlib.ticker import NullLocator

    ax.set_xscale("log")
    ax.set_xticks([1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0], ["0.001", "0.01", "0.1", "1", "10", "100"])
    ax.xaxis.set_minor_locator(NullLocator())


def _layout(fig, dpi: int, bottom: float) -> None:
    """tight_layout for the real figures; fixed margins for the cheap low-dpi --quick ones."""
    if dpi >= 100:
        fig.tight_layout(rect=(0, bottom, 1, 1))
    else:
        fig.subplots_adjust(left=0.08, right=0.98, bottom=bottom + 0.05, top=0.88, hspace=0.3)


def _line(df: pl.DataFrame, **kw) -> pl.DataFrame:
    expr = pl.lit(True)
    for col, val in kw.items():
        expr = expr & (pl.col(col).is_null() if val is None else pl.col(col) == val)
    return df.filter(expr).sort("epsilon")


def _delta_label(dl: float, n: int) -> str:
    return f"δ = {dl:.2g} (1/n)" if abs(dl * n - 1) < 1e-9 else f"δ = {dl:g}"


def plot_fig3(d: dict, exact: pl.DataFrame, paper: pl.DataFrame | None, path: Path, dpi: int):
    from matplotlib.lines import Line2D

    plt = _pyplot()
    key = d["key"]
    ex = exact.filter(pl.col("dataset") == key)
    pa = None if paper is None else paper.filter(pl.col("dataset") == key)
    homog = bool(d["cells"].homogeneous.all())
    if homog:
        rows = [("local", False, "unweighted\n(local = expected)"), ("local", True, "weighted")]
    else:
        rows = [
            ("local", False, "local, unweighted"),
            ("local", True, "local, weighted"),
            ("expected", False, "expected, unweighted"),
            ("expected", True, "expected, weighted"),
        ]
    fig, axes = plt.subplots(
        len(rows),
        len(MECHANISMS),
        figsize=(12.5, 2.3 * len(rows) + 1.1),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    for j, mech in enumerate(MECHANISMS):
        deltas = [None] if mech == "laplace" else list(d["deltas"])
        for i, (measure, w, ylabel) in enumerate(rows):
            ax = axes[i][j]
            for c, dl in enumerate(deltas):
                color = "k" if dl is None else COLORS[c]
                sel = {"mechanism": mech, "measure": measure, "weighted": w, "delta": dl}
                line = _line(ex, **sel)
                ax.plot(line["epsilon"], line["risk"], "-", color=color, lw=1.4)
                if pa is not None:
                    line = _line(pa, **sel)
                    ax.plot(line["epsilon"], line["risk"], ":", color=color, lw=1.4)
            ax.axhline(2.0 ** -d["K"], color="0.6", lw=0.7, ls="--")
            _log_axis(ax)
            ax.set_ylim(0, 1.03)
            ax.grid(True, alpha=0.3)
            if i == 0:
                ax.set_title(MECH_TITLE[mech], fontsize=9)
            if j == 0:
                ax.set_ylabel(ylabel, fontsize=9)
            if i == len(rows) - 1:
                ax.set_xlabel("ε")
    handles = [Line2D([], [], color="k", label="Laplace (no δ)")]
    handles += [
        Line2D([], [], color=COLORS[c], label=_delta_label(dl, d["n"]))
        for c, dl in enumerate(d["deltas"])
    ]
    handles.append(Line2D([], [], color="0.6", ls="--", label=f"2^-K = {2.0 ** -d['K']:g}"))
    if pa is not None:
        handles += [
            Line2D([], [], color="0.3", ls="-", label="dpframe exact"),
            Line2D([], [], color="0.3", ls=":", label="paper's closed form (corrected)"),
        ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    c = d["cells"]
    het = int((~c.homogeneous).sum())
    sub = f"N = {c.sizes.size} cells, {het} heterogeneous, n = {d['n']}, K = {d['K']}" + (
        "" if homog else " (heterogeneous cells: the paper's conservative Scenario-8 count)"
    )
    fig.suptitle(f"DR-HA vs ε: {LABEL[key]}\n{sub}", fontsize=10)
    _layout(fig, dpi, 0.05)
    _save(fig, path, dpi)
    plt.close(fig)
    return path


def plot_fig4(tvd: pl.DataFrame, d: dict, path: Path, dpi: int) -> Path:
    from matplotlib.patches import Patch

    plt = _pyplot()
    settings = tvd_settings(d["deltas"])
    orders = sorted(tvd["order"].unique().to_list())
    fig, axes = plt.subplots(
        len(MECHANISMS), len(orders), figsize=(12, 2.4 * len(MECHANISMS) + 1), sharey="col"
    )
    for i, mech in enumerate(MECHANISMS):
        mine = [(dl, eps) for m, dl, eps in settings if m == mech]
        eps_list = mine[0][1]
        n_d = len(mine)
        for j, order in enumerate(orders):
            ax = axes[i][j]
            data, pos, cols = [], [], []
            for e_i, eps in enumerate(eps_list):
                for d_i, (dl, _) in enumerate(mine):
                    part = _line(tvd, mechanism=mech, delta=dl, epsilon=eps, order=order)
                    data.append(part["tvd_mean"].to_numpy())
                    pos.append(e_i * (n_d + 1) + d_i)
                    cols.append("0.75" if dl is None else COLORS[d_i])
            bp = ax.boxplot(data, positions=pos, widths=0.7, patch_artist=True, manage_ticks=False)
            for patch, col in zip(bp["boxes"], cols, strict=True):
                patch.set_facecolor(col)
            for med in bp["medians"]:
                med.set_color("k")
            ax.set_xticks([e_i * (n_d + 1) + (n_d - 1) / 2 for e_i in range(len(eps_list))])
            ax.set_xticklabels([f"ε = {e:g}" for e in eps_list], fontsize=8)
            ax.set_xlim(-1, len(eps_list) * (n_d + 1) - 1)
            ax.grid(True, axis="y", alpha=0.3)
            if i == 0:
                ax.set_title(f"{order}-way marginals", fontsize=10)
            if j == 0:
                ax.set_ylabel(f"TVD\n{MECH_TITLE[mech]}", fontsize=8)
    handles = [Patch(facecolor="0.75", edgecolor="k", label="Laplace")]
    handles += [
        Patch(facecolor=COLORS[c], edgecolor="k", label=_delta_label(dl, d["n"]))
        for c, dl in enumerate(d["deltas"])
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(
        "TVD of the marginals of the FF table after sanitization (box: the 6 / 15 / 20 "
        "marginals' expected TVD)",
        fontsize=10,
    )
    _layout(fig, dpi, 0.04)
    _save(fig, path, dpi)
    plt.close(fig)
    return path


def plot_readings(exact: pl.DataFrame, data: dict[str, dict], path: Path, dpi: int) -> Path:
    from matplotlib.lines import Line2D

    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.6), sharex=True, sharey=True)
    readings = (("adult_rows", "tab:blue"), ("adult", "tab:red"))
    delta = data["adult"]["deltas"][0]
    for j, measure in enumerate(MEASURES):
        for i, w in enumerate((False, True)):
            ax = axes[i][j]
            for key, color in readings:
                for mech, dl, ls in (("laplace", None, "-"), ("gaussian_pdp", delta, "--")):
                    line = _line(
                        exact, dataset=key, mechanism=mech, measure=measure, weighted=w, delta=dl
                    )
                    ax.plot(line["epsilon"], line["risk"], ls, color=color, lw=1.4)
            ax.axhline(0.25, color="0.6", lw=0.7, ls=":")
            _log_axis(ax)
            ax.set_ylim(0, 1.03)
            ax.grid(True, alpha=0.3)
            ax.set_title(f"{measure}, {'weighted' if w else 'unweighted'}", fontsize=9)
            if i == 1:
                ax.set_xlabel("ε")
            if j == 0:
                ax.set_ylabel("DR-HA")
    n_rows = data["adult_rows"]["cells"].sizes.size
    c = data["adult"]["cells"]
    handles = [
        Line2D([], [], color="tab:blue", label=f"paper's reading: {n_rows} rows as cells"),
        Line2D(
            [],
            [],
            color="tab:red",
            label=f"grouped by QIDs: {c.sizes.size} cells ({int((~c.homogeneous).sum())} het.)",
        ),
        Line2D([], [], color="0.3", ls="-", label="Laplace"),
        Line2D([], [], color="0.3", ls="--", label=f"Gaussian pDP, δ = {delta:.2g}"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("Adult: DR-HA of the two readings of the table (dpframe exact)", fontsize=10)
    _layout(fig, dpi, 0.05)
    _save(fig, path, dpi)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- main


def adult_readings(data: dict[str, dict], measures=MEASURES) -> pl.DataFrame:
    parts = []
    for key in ("adult_rows", "adult"):
        d = data[key]
        for mech, dl in (("laplace", None), ("gaussian_pdp", d["deltas"][0])):
            out = drha(
                d["frame"],
                d["qids"],
                d["sensitive"],
                count="count",
                epsilon=[0.1, 1.0, 10.0],
                delta=dl,
                mechanism=mech,
                measure=list(measures),
            )
            parts.append(out.drop("assessment").with_columns(pl.lit(key).alias("dataset")))
    long = pl.concat(parts).with_columns(
        (pl.col("dataset") + pl.lit(" ε=") + pl.col("epsilon").cast(pl.String)).alias("column")
    )
    return long.pivot(
        on="column", index=["mechanism", "delta", "measure", "weighted"], values="risk"
    )


def _fmt_delta(df: pl.DataFrame) -> pl.DataFrame:
    """δ as text with its significant digits (1/n for Adult is 3.6e-05)."""
    if "delta" not in df.columns:
        return df
    return df.with_columns(
        pl.col("delta").map_elements(lambda x: f"{x:.6g}", return_dtype=pl.String)
    )


def write_csv(df: pl.DataFrame, path: Path) -> None:
    _fmt_delta(df).write_csv(path, float_precision=6)


def show(title: str, df: pl.DataFrame) -> None:
    df = _fmt_delta(df)
    print(f"\n== {title}")
    with pl.Config(
        tbl_rows=200,
        tbl_cols=30,
        tbl_width_chars=200,
        float_precision=4,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        fmt_str_lengths=60,
    ):
        print(df)


def show_asymptotes(asym: pl.DataFrame) -> None:
    """Compact views of the asymptote table (the CSV holds all of it)."""
    hom = asym.filter(pl.col("dataset").is_in(["bankruptcy", "adult_rows"]))
    keys = ["dataset", "quantity", "mechanism", "delta", "paper"]
    view = (
        hom.filter(pl.col("mechanism") != "analytic_gaussian")
        .pivot(on="weighted", index=keys, values="exact")
        .rename({"false": "unweighted", "true": "weighted"})
    )
    show("3a. all-homogeneous tables, K = 2 (local = expected): paper vs dpframe", view)
    ff = asym.filter(pl.col("dataset") == "bankruptcy_ff")
    keys = ["measure", "weighted", "mechanism"]
    paper = ff.group_by(keys, maintain_order=True).agg(
        pl.col("paper").first().alias("paper_lower"), pl.col("paper").last().alias("paper_upper")
    )
    exact = ff.pivot(on="quantity", index=keys, values="exact")
    form = ff.filter(pl.col("quantity").str.contains("limit")).pivot(
        on="quantity", index=keys, values="paper_form"
    )
    form = form.rename({c: f"paper form, {c}" for c in form.columns if c not in keys})
    view = paper.join(exact, on=keys).join(form, on=keys)
    show("3b. FF subset, K = 3: paper vs dpframe exact vs the paper's form (corrected)", view)
    notes = ff.filter(pl.col("note").str.contains("typeset")).select(*keys, "note")
    show("3c. the lower limit of eq. (13) as typeset (power K-1 on the Scenario-8 term)", notes)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=Path("docs/figures"),
        help="folder for the drha_*.csv and drha_*.png files (default docs/figures)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a 6-point ε grid, 10 TVD draws, Figure 3 for the FF table only, low dpi",
    )
    parser.add_argument("--reps", type=int, default=None, help="TVD Monte-Carlo draws (1000)")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    points, reps, dpi = (6, args.reps or 10, 40) if quick else (61, args.reps or 1000, 100)
    grid = np.logspace(-3, 2, points)  # full: 12 points a decade, holds 0.1, 1, 10 and 10^1.5
    print("DR-HA is an assessment of the confidential table (here the paper's public tables).")
    print("The TVD draws are seeded: reproducible, for research only.")
    timings: dict[str, float] = {}
    t_all = time.perf_counter()

    # 1. cell counts
    t0 = time.perf_counter()
    data = {key: load(key) for key in DATASETS}
    counts_tbl = cell_counts(data)
    write_csv(counts_tbl, out / "drha_cell_counts.csv")
    short = {
        "homogeneous": "hom",
        "heterogeneous": "het",
        "cells_3plus_levels": "3+ levels",
        "records_in_homogeneous": "n in hom",
        "size_min": "min n_i",
        "size_max": "max n_i",
        "size_mean": "mean n_i",
        "singletons": "n_i = 1",
        "cells_over_120": "n_i > 120",
        "paper_cells": "paper N",
        "paper_homogeneous": "paper hom",
        "paper_size_mean": "paper mean",
    }
    show(
        "1. cells (Sec. 5.1, Fig. 2, fn. 6; paper *: as the paper states them)",
        counts_tbl.rename(short),
    )
    timings["cells"] = time.perf_counter() - t0

    # 2. Figure 3: dpframe's exact values; the paper's closed forms where they differ
    t0 = time.perf_counter()
    # --quick skips Adult's expected measure (the heaviest: an exact expectation per cell)
    adult_measures = ("local",) if quick else MEASURES
    meas = {k: adult_measures if k.startswith("adult") else MEASURES for k in data}
    exact = pl.concat([curves(d, grid, "exact", meas[k]) for k, d in data.items()])
    hetero = [k for k, d in data.items() if not d["cells"].homogeneous.all()]
    paper = pl.concat([curves(data[k], grid, "paper", meas[k]) for k in hetero])
    if not quick:  # the closed forms are exact for all-homogeneous tables: check it
        for key, d in data.items():
            if key not in hetero:
                check = curves(d, grid, "paper")["risk"].to_numpy()
                mine = exact.filter(pl.col("dataset") == key)["risk"].to_numpy()
                assert np.allclose(check, mine, rtol=0, atol=1e-12), key
    write_csv(wide(pl.concat([exact, paper])), out / "drha_curves.csv")
    timings["curves"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    figs = [
        plot_fig3(d, exact, paper if key in hetero else None, out / f"drha_fig3_{key}.png", dpi)
        for key, d in data.items()
        if not quick or key == "bankruptcy_ff"
    ]
    timings["Figure 3 plots"] = time.perf_counter() - t0

    # 3. asymptotes, Scenario 8, pDP vs DP, δ
    t0 = time.perf_counter()
    asym = asymptotes(data)
    write_csv(asym, out / "drha_asymptotes.csv")
    show_asymptotes(asym)
    s8 = scenario8_check(data["bankruptcy_ff"]["cells"], grid)
    show("3d. FF: exact local risk minus the paper's Scenario-8 term, per cell (Laplace)", s8)
    diff = pdp_vs_dp(exact)
    write_csv(diff, out / "drha_pdp_vs_dp.csv")
    show(
        "3e. Gaussian pDP minus Gaussian (ε, δ)-DP, same δ, ε < 1 (paper: about +0.05)",
        diff.filter(pl.col("measure") == "local"),
    )
    show("3f. effect of δ (1/n .. 0.1): largest spread at one ε", delta_effect(exact))
    timings["asymptotes"] = time.perf_counter() - t0

    # 4. Figure 4 and the choice of ε (Sec. 5.3)
    t0 = time.perf_counter()
    ff = data["bankruptcy_ff"]
    tvd = tvd_table(ff, reps)
    write_csv(tvd, out / "drha_tvd.csv")
    summary = (
        tvd.group_by("mechanism", "delta", "epsilon", "order", maintain_order=True)
        .agg(pl.col("tvd_mean").median().round(4).alias("median_tvd"))
        .pivot(on="order", index=["mechanism", "delta", "epsilon"], values="median_tvd")
        .rename({"1": "1-way", "2": "2-way", "3": "3-way"})
    )
    show(f"4. FF: median over the marginals of the expected TVD ({reps} draws)", summary)
    figs.append(plot_fig4(tvd, ff, out / "drha_fig4_tvd.png", dpi))
    figs.append(
        plot_tvd(
            tvd.filter(pl.col("mechanism") == "laplace"),
            out / "drha_fig4_tvd_laplace.png",
            title="FF table, Laplace: TVD of the 1-, 2-, 3-way marginals",
        )
    )
    choice = choose_epsilon(
        ff["cells"].counts,
        0.4,
        mechanism="laplace",
        epsilons=grid if quick else None,
        table=ff["frame"],
        qids=ff["qids"],
        sensitive=ff["sensitive"],
        max_tvd=0.2,
        tvd_reps=max(reps // 5, 10),
        rng=np.random.default_rng([SEED, 99]),
    )
    print("\n== 4b. choose_epsilon (FF, Laplace, local unweighted risk <= 0.4, every TVD <= 0.2)")
    print(f"   ε = {choice.epsilon:.4g}, recommended interval {choice.interval}")
    print(f"   {choice.note}")
    timings["TVD"] = time.perf_counter() - t0

    # 5. the two readings of Adult
    t0 = time.perf_counter()
    readings = adult_readings(data, adult_measures)
    write_csv(readings, out / "drha_adult_readings.csv")
    show("5. Adult, both readings, at ε = 0.1, 1, 10 (dpframe exact)", readings)
    figs.append(plot_readings(exact, data, out / "drha_adult_readings.png", dpi))
    timings["Adult readings"] = time.perf_counter() - t0

    total = time.perf_counter() - t_all
    print(
        "\nwrote "
        + ", ".join(p.name for p in figs)
        + " and drha_{cell_counts,curves,asymptotes,pdp_vs_dp,tvd,adult_readings}.csv to "
        + str(out)
    )
    print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    print(f"total {total:.1f} s ({points}-point ε grid, {reps} TVD draws)")
    return {
        "cells": counts_tbl,
        "asymptotes": asym,
        "pdp_vs_dp": diff,
        "tvd": tvd,
        "readings": readings,
        "choice": choice,
    }


if __name__ == "__main__":
    main()
