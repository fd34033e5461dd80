"""Simulation study of Ayed, Battiston & Camerlenghi (PRAM and mutual information), Section 4.1.

Reruns the paper's four scenarios with dpframe's PRAM kernel (:mod:`dpframe.mechanisms.pram`):

* I:   S = 10, p = (0.3, 0.1, 0.2, 0.08, 0.02, 0.04, 0.06, 0.1, 0.01, 0.09);
* II:  S = 10, p = (0.0336, 0.1059, ..., 0.3369) as printed (it adds up to exactly 1; it is
  divided by its float sum anyway);
* III: S = 30, p = 30 Gamma(1, 5) draws divided by their sum, from a fixed seed. Normalised
  Gamma(1, theta) draws are Dirichlet(1, ..., 1) whatever theta, and the paper gives no seed,
  so its p cannot be recovered: only the method is comparable, not the table;
* IV:  S = 30, p_1 = 0.05, p_k = 0.95 / 29 for k >= 2;

with alpha (= epsilon) in {0.5, 1, 1.5, 2}, n = 10^4 records and 100 repetitions.

For every scenario and alpha it prints (and writes to ``pram_vertex_counts.csv``) the
MI-optimal design's vertex counts (# v_alpha, # v_-alpha, # v_min, # v_max) next to the
paper's Tables 1-4, the mutual information of dpframe's design, of k-RR (all q = v_alpha),
and of the *best* design with the paper's counts (every assignment of the paper's values to
the categories is tried, categories with equal p counted once: at most C(10, 5) = 252 for
S = 10 and 30 for S = 30). For S = 10 and Scenario IV it also searches every vertex of
Proposition 3.2 with the paper's own MI formula. It then runs a local search like the paper's,
SLSQP from random feasible starts (``pram_local_optima.csv``; full run only), to show where
such optimisers stop. Finally, each repetition draws n records from p, randomizes them with
:func:`~dpframe.mechanisms.pram.randomize` and estimates p with
:func:`~dpframe.mechanisms.pram.estimation`; per scenario, alpha and category it writes the
true p, the mean unbiased estimate p_hat, its empirical SD, the SD from the design's
covariance formula and the mean simplex-projected estimate to ``pram_results.csv``, and one
figure per scenario (``pram_scenario_1.png`` ... ``pram_scenario_4.png``, like the paper's
Figures 1-4) if matplotlib is installed.

Run:
    .venv/bin/python examples/pram_simulation.py docs/figures        # full: 100 repetitions
    .venv/bin/python examples/pram_simulation.py /tmp/pram --quick   # a few seconds

The randomization is drawn from a *seeded* dpframe random source so that the study can be
repeated. Seeded noise is for research only: a real release must use dpframe's default random
source (a secure generator keyed afresh from the OS), i.e. pass no ``rng``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import time
import warnings
from pathlib import Path

import numpy as np

from dpframe import RandomSource
from dpframe.errors import UnsafeSeedWarning
from dpframe.mechanisms import pram

ALPHAS = (0.5, 1.0, 1.5, 2.0)
N_RECORDS = 10_000
REPS = 100
SEED = 20200401  # the randomization and the draws of the data (research only)
GAMMA_SEED = 3  # Scenario III's p
LOCAL_STARTS = 20  # SLSQP starts per (scenario, alpha) in the local-optimiser check
COUNT_KEYS = ("v_alpha", "v_-alpha", "v_min", "v_max")

#: The paper's Tables 1-4: alpha -> (# v_alpha, # v_-alpha, # v_min, # v_max)
PAPER_COUNTS = {
    1: {0.5: (4, 6, 0, 0), 1.0: (5, 5, 0, 0), 1.5: (2, 8, 0, 0), 2.0: (0, 9, 0, 1)},
    2: {0.5: (7, 3, 0, 0), 1.0: (6, 4, 0, 0), 1.5: (6, 4, 0, 0), 2.0: (0, 9, 0, 1)},
    3: {0.5: (29, 0, 1, 0), 1.0: (29, 0, 1, 0), 1.5: (30, 0, 0, 0), 2.0: (29, 0, 1, 0)},
    4: {0.5: (0, 29, 0, 1), 1.0: (30, 0, 0, 0), 1.5: (30, 0, 0, 0), 2.0: (30, 0, 0, 0)},
}
ROMAN = {1: "I", 2: "II", 3: "III", 4: "IV"}


def scenario_p(k: int) -> np.ndarray:
    """The true distribution of scenario ``k`` (1-4)."""
    if k == 1:
        p = np.array([0.3, 0.1, 0.2, 0.08, 0.02, 0.04, 0.06, 0.1, 0.01, 0.09])
    elif k == 2:
        p = np.array(
            [0.0336, 0.1059, 0.1697, 0.0962, 0.0180, 0.0062, 0.1097, 0.0005, 0.1233, 0.3369]
        )
    elif k == 3:
        p = np.random.default_rng(GAMMA_SEED).gamma(shape=1.0, scale=5.0, size=30)
    else:
        p = np.r_[0.05, np.full(29, 0.95 / 29)]
    return p / p.sum()


def vertex_values(s: int, alpha: float) -> np.ndarray:
    """(v_alpha, v_-alpha, v_min, v_max) as in dpframe's corrected Proposition 3.2.

    The paper's statement prints v_min = e^-a / (e^-a + S - 1), which is v_-alpha; the
    vertex that pairs with S - 1 copies of v_alpha is e^-a / (S - 1 + e^a)
    (:meth:`PramDesign.paper_counts` uses the same values).
    """
    a = math.exp(alpha)
    return np.array(
        [a / (a + s - 1), 1 / (1 + a * (s - 1)), 1 / (a * (s - 1 + a)), a / (s - 1 + 1 / a)]
    )


def _compositions(n: int, caps: tuple[int, ...]):
    """Tuples ``c`` with ``sum(c) == n`` and ``0 <= c[j] <= caps[j]``."""
    if len(caps) == 1:
        if n <= caps[0]:
            yield (n,)
        return
    for first in range(min(n, caps[0]) + 1):
        for rest in _compositions(n - first, caps[1:]):
            yield (first, *rest)


def assignments(p: np.ndarray, counts: tuple[int, ...]):
    """Every way to give ``counts[j]`` categories the value ``j``, as arrays of ``j``.

    Categories with equal ``p`` are exchangeable (they give the same MI), so only one
    assignment per multiset is produced: the 29 equal categories of Scenario IV leave 2
    assignments of its (1, 29) patterns instead of 30.
    """
    if sum(counts) != p.size:
        raise ValueError(f"counts {counts} do not add up to S = {p.size}")
    _, group = np.unique(p, return_inverse=True)
    members = [np.flatnonzero(group == g) for g in range(group.max() + 1)]
    lev = np.full(p.size, -1)

    def rec(g: int, left: tuple[int, ...]):
        if g == len(members):
            yield lev.copy()
            return
        for comp in _compositions(members[g].size, left):
            pos = 0
            for j, c in enumerate(comp):
                lev[members[g][pos : pos + c]] = j
                pos += c
            yield from rec(g + 1, tuple(x - c for x, c in zip(left, comp, strict=True)))

    yield from rec(0, tuple(counts))


def prop32_patterns(s: int) -> list[tuple[int, int, int, int]]:
    """The vertex types of Proposition 3.2 (with the corrected v_min) as count tuples."""
    out = [(s, 0, 0, 0), (0, s, 0, 0), (s - 1, 0, 1, 0), (0, s - 1, 0, 1)]
    return out + [(h, s - h, 0, 0) for h in range(2, s - 1)]


def check_vertex_list(s: int, alpha: float) -> None:
    """dpframe's vertex families are exactly Proposition 3.2's types at this (S, alpha)."""
    vals = vertex_values(s, alpha)
    found = set()
    for values, counts, _ in pram.vertex_families(s, alpha):
        idx = [int(np.flatnonzero(np.isclose(vals, v, rtol=1e-9, atol=0))[0]) for v in values]
        for cnt in counts:
            tup = [0, 0, 0, 0]
            for i, c in zip(idx, cnt, strict=True):
                tup[i] = c
            found.add(tuple(tup))
    if found != set(prop32_patterns(s)):
        raise RuntimeError(f"vertex families differ from Proposition 3.2 at S={s}, α={alpha}")


def best_over_vertices(p: np.ndarray, alpha: float, limit: int = 20_000) -> dict:
    """Exhaustive MI maximum over every vertex of Proposition 3.2 (None if too many)."""
    if np.unique(p).size > 12:  # Scenario III: about 2**30 vertices
        return {"mi": math.nan, "counts": None, "tried": 0}
    best = {"mi": -math.inf, "counts": None, "tried": 0}
    for pattern in prop32_patterns(p.size):
        res = best_with_counts(p, alpha, pattern)
        best["tried"] += res["tried"]
        if res["mi"] > best["mi"]:
            best.update(mi=res["mi"], counts=pattern)
        if best["tried"] > limit:
            raise RuntimeError("too many vertices to enumerate")
    return best


def batch_epsilon(qs: np.ndarray) -> np.ndarray:
    """Exact ε of the PRAM matrices with keep probabilities ``qs`` (shape ``(K, S)``)."""
    s = qs.shape[1]
    r = (1.0 - qs) / (s - 1)
    m = np.repeat(r[:, :, None], s, axis=2)  # m[k, i, j] = M_ij (row i = true category)
    idx = np.arange(s)
    m[:, idx, idx] = qs
    with np.errstate(divide="ignore"):
        return np.log(m.max(axis=1) / m.min(axis=1)).max(axis=1)


def batch_mi(p: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """I(X; Z) in nats by the paper's formula (independent of dpframe's), for ``(K, S)`` q."""
    s = p.size
    r = (1.0 - qs) / (s - 1)
    m = p * (qs - r) + (r @ p)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(qs > 0, qs * np.log(qs), 0.0) + np.where(r > 0, (1 - qs) * np.log(r), 0.0)
        out = h @ p - np.where(m > 0, m * np.log(m), 0.0).sum(axis=1)
    return out


def best_with_counts(p: np.ndarray, alpha: float, counts: tuple[int, ...]) -> dict:
    """The ε-DP design with these vertex counts that has the largest MI (exhaustive)."""
    vals = vertex_values(p.size, alpha)
    levs = np.array(list(assignments(p, counts)))
    qs = vals[levs]
    feasible = batch_epsilon(qs) <= alpha * (1 + 1e-9)
    if not feasible.any():
        return {"mi": math.nan, "worst": math.nan, "tried": len(levs), "feasible": 0}
    mis = np.where(feasible, batch_mi(p, qs), -np.inf)
    i = int(np.argmax(mis))
    mi = pram.mutual_information(p, qs[i])  # dpframe's accurate MI of the winner
    if not math.isclose(mi, mis[i], rel_tol=1e-8):
        raise RuntimeError(f"MI formulas disagree: {mi} vs {mis[i]}")
    return {
        "mi": mi,
        "q": qs[i],
        "lev": levs[i],
        "worst": float(mis[feasible].min()),
        "tried": len(levs),
        "feasible": int(feasible.sum()),
    }


def describe(lev: np.ndarray, counts: tuple[int, ...]) -> str:
    """Which categories (1-based) take the rarer values of an assignment."""
    parts = []
    for j, name in enumerate(COUNT_KEYS):
        if 0 < counts[j] <= 5:
            cats = " ".join(str(i + 1) for i in np.flatnonzero(lev == j))
            parts.append(f"{name} at {cats}")
    return "; ".join(parts) or "all " + COUNT_KEYS[int(np.argmax(counts))]


def global_row(p: np.ndarray, alpha: float, skip: bool) -> dict:
    """The MI optimum over *every* alpha-DP matrix (staircase LP), or blanks when skipped."""
    if skip:
        return {
            "mi_global": None,
            "global_outputs": None,
            "global_gap": None,
            "global_estimable": None,
        }
    g = pram.global_design(p, alpha)
    return {
        "mi_global": g.mutual_information,
        "global_outputs": g.n_outputs,
        "global_gap": g.gap,
        "global_estimable": not g.unused and bool(np.linalg.cond(g.matrix) < 1e9),
    }


def design_table(scenarios, alphas, quick: bool = False) -> list[dict]:
    rows = []
    for k in scenarios:
        p = scenario_p(k)
        s = p.size
        for alpha in alphas:
            d = pram.design(p, alpha)
            ours = d.paper_counts()
            mine = tuple(ours[c] for c in COUNT_KEYS)
            paper = PAPER_COUNTS[k][alpha]
            mi_ours = pram.mutual_information(p, d.vertex_q)
            mi_krr = pram.mutual_information(p, np.full(s, vertex_values(s, alpha)[0]))
            check_vertex_list(s, alpha)
            best = best_with_counts(p, alpha, paper)
            every = best_over_vertices(p, alpha)
            rows.append(
                {
                    "scenario": ROMAN[k],
                    "S": s,
                    "alpha": alpha,
                    **{f"paper_{c}": n for c, n in zip(COUNT_KEYS, paper, strict=True)},
                    **{f"dpframe_{c}": n for c, n in zip(COUNT_KEYS, mine, strict=True)},
                    "mi_dpframe": mi_ours,
                    "mi_krr": mi_krr,
                    "mi_paper_best": best["mi"],
                    "mi_paper_worst": best["worst"],
                    "paper_assignments": best["tried"],
                    "paper_feasible": best["feasible"],
                    "paper_best_assignment": describe(best["lev"], paper),
                    "paper_reproduces": bool(best["mi"] >= mi_ours * (1 - 1e-9)),
                    "mi_loss_percent": 100 * (1 - best["mi"] / mi_ours),
                    "same_p_as_paper": k != 3,
                    "mi_all_vertices": every["mi"],
                    "argmax_all_vertices": "/".join(map(str, every["counts"] or ())),
                    "vertices_checked": every["tried"],
                    "epsilon_actual": d.epsilon_actual,
                    # Scenario III's global LP (S = 30, 30 distinct p) takes 10-90 s per
                    # alpha by column generation: full runs only
                    **global_row(p, alpha, skip=quick and k == 3),
                }
            )
    return rows


def _dp_constraints(s: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (10)/(11) as ``C q <= b`` (three rows per ordered pair k != k')."""
    a = math.exp(alpha)
    rows, rhs = [], []
    for k, j in itertools.permutations(range(s), 2):
        for coef, b in (
            ({k: s - 1, j: a}, a),
            ({k: -1, j: -a * (s - 1)}, -1.0),
            ({k: -1, j: a}, a - 1),
        ):
            r = np.zeros(s)
            for i, c in coef.items():
                r[i] += c
            rows.append(r)
            rhs.append(b)
    return np.array(rows), np.array(rhs)


def _neg_mi_and_grad(q: np.ndarray, p: np.ndarray) -> tuple[float, np.ndarray]:
    """-I(X; Z) in the paper's form (eq. before Prop. 3.1) and its gradient, for SLSQP.

    ``dI/dq_x = p_x (log(q_x (S-1) / (1-q_x)) - S/(S-1) log m_x + sum_z log m_z / (S-1))``.
    """
    s = q.size
    q = np.clip(q, 1e-15, 1 - 1e-15)
    r = (1.0 - q) / (s - 1)
    m = p * (q - r) + p @ r
    f = p @ (q * np.log(q) + (1 - q) * np.log(r)) - m @ np.log(m)
    g = p * (np.log(q / r) - s / (s - 1) * np.log(m) + np.log(m).sum() / (s - 1))
    return -f, -g


def local_optima(scenarios, alphas, starts: int, seed: int) -> list[dict]:
    """SLSQP on -MI from random feasible starts: where does a local method stop?"""
    from scipy.optimize import minimize

    rows = []
    for k in scenarios:
        p = scenario_p(k)
        s = p.size
        for alpha in alphas:
            c, b = _dp_constraints(s, alpha)
            ineq = {"type": "ineq", "fun": lambda q, c=c, b=b: b - c @ q, "jac": lambda q, c=c: -c}
            vals = vertex_values(s, alpha)
            rng = np.random.default_rng([seed, k, int(alpha * 10)])
            found: dict[tuple, list[float]] = {}
            for _ in range(starts):
                q0 = vals[1] + (vals[0] - vals[1]) * rng.uniform(size=s)
                while (c @ q0 > b + 1e-12).any():  # shrink towards q = 1/S (feasible)
                    q0 = 1 / s + 0.9 * (q0 - 1 / s)
                res = minimize(
                    _neg_mi_and_grad,
                    q0,
                    args=(p,),
                    jac=True,
                    method="SLSQP",
                    bounds=[(0.0, 1.0)] * s,
                    constraints=[ineq],
                    options={"maxiter": 500, "ftol": 1e-12},
                )
                q = np.clip(res.x, 0.0, 1.0)
                key = tuple(int(np.isclose(q, v, rtol=1e-4, atol=0).sum()) for v in vals)
                if sum(key) != s:
                    key = ("other",)
                found.setdefault(key, []).append(pram.mutual_information(p, q))
            best = pram.mutual_information(p, pram.design(p, alpha).vertex_q)  # the optimum
            for key, mis in sorted(found.items(), key=lambda kv: -max(kv[1])):
                rows.append(
                    {
                        "scenario": ROMAN[k],
                        "alpha": alpha,
                        "counts": "/".join(map(str, key)),
                        "starts": len(mis),
                        "mi_max": max(mis),
                        "mi_min": min(mis),
                        "reaches_optimum": bool(max(mis) >= best * (1 - 1e-6)),
                    }
                )
    return rows


def simulate(scenarios, alphas, reps: int, n: int, source: RandomSource) -> list[dict]:
    """Draw, randomize, estimate; per (scenario, alpha, category) summaries."""
    rows = []
    for k in (1, 2, 3, 4):
        for alpha in ALPHAS:
            rng = source.generator()  # one stream per cell, in a fixed order
            if k not in scenarios or alpha not in alphas:
                continue
            p = scenario_p(k)
            s = p.size
            d = pram.design(p, alpha)
            formula_sd = np.sqrt(np.diag(d.covariance(n)))
            est = np.empty((reps, s))
            proj = np.empty((reps, s))
            se = np.empty((reps, s))
            for i in range(reps):
                x = rng.choice(s, size=n, p=p)  # n records from p
                z = pram.randomize(x, d, rng)  # the released column
                e = pram.estimate(z, d, kind="codes")
                est[i], proj[i], se[i] = e.p_hat, e.p_simplex, e.standard_errors
            mean = est.mean(0)
            sd = est.std(0, ddof=1)
            outside = float(np.mean((est < 0).any(1)))
            for j in range(s):
                rows.append(
                    {
                        "scenario": ROMAN[k],
                        "S": s,
                        "alpha": alpha,
                        "n": n,
                        "reps": reps,
                        "category": j + 1,
                        "p": p[j],
                        "q": d.q[j],
                        "mean_p_hat": mean[j],
                        "bias": mean[j] - p[j],
                        "bias_se": sd[j] / math.sqrt(reps),
                        "z": (mean[j] - p[j]) / (sd[j] / math.sqrt(reps)),
                        "empirical_sd": sd[j],
                        "formula_sd": formula_sd[j],
                        "sd_ratio": sd[j] / formula_sd[j],
                        "mean_estimated_se": se[:, j].mean(),
                        "mean_p_simplex": proj[:, j].mean(),
                        "simplex_bias": proj[:, j].mean() - p[j],
                        "share_reps_outside_simplex": outside,
                        "_draws": est[:, j],
                    }
                )
    return rows


def _cell(v):
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float | np.floating):
        return f"{float(v):.6g}"
    return v


def write_csv(rows: list[dict], path: Path) -> None:
    cols = [c for c in rows[0] if not c.startswith("_")]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: _cell(row[c]) for c in cols})


def markdown_counts(rows: list[dict]) -> str:
    def cnt(r, who):
        return " / ".join(str(r[f"{who}_{c}"]) for c in COUNT_KEYS)

    out = [
        "| scenario | α | paper (#vα/#v−α/#vmin/#vmax) | dpframe | I dpframe | "
        "I best with paper's counts | paper's optimum? | I global (all ε-DP matrices) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = "yes" if r["paper_reproduces"] else f"no (−{r['mi_loss_percent']:.2g} %)"
        if not r["same_p_as_paper"]:
            verdict += ", other p"
        glob = "—" if r["mi_global"] is None else f"{r['mi_global']:.4f}"
        if r["mi_global"] is not None:
            glob += f" ({r['global_outputs']} outputs, ×{r['mi_global'] / r['mi_dpframe']:.2f})"
        out.append(
            f"| {r['scenario']} | {r['alpha']:g} | {cnt(r, 'paper')} | {cnt(r, 'dpframe')} | "
            f"{r['mi_dpframe']:.4f} | {r['mi_paper_best']:.4f} | {verdict} | {glob} |"
        )
    return "\n".join(out)


def _save(fig, path: Path, dpi: int) -> None:
    """PNG with a 256-colour palette (a third of the size of matplotlib's RGBA output)."""
    import io

    from PIL import Image  # a dependency of matplotlib

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    image = Image.open(buf).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)


def plot(rows: list[dict], designs: list[dict], out: Path, dpi: int) -> list[Path]:
    """One figure per scenario, one panel per alpha (the paper's Figures 1-4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        alphas = list(dict.fromkeys(r["alpha"] for r in rows if r["scenario"] == scen))
        s = next(r["S"] for r in rows if r["scenario"] == scen)
        ncol = 2 if len(alphas) > 1 else 1
        nrow = math.ceil(len(alphas) / ncol)
        fig, axes = plt.subplots(
            nrow, ncol, figsize=(6.2 * ncol if s <= 10 else 7.5 * ncol, 3.9 * nrow), squeeze=False
        )
        for ax, alpha in zip(axes.flat, alphas, strict=False):
            sel = [r for r in rows if r["scenario"] == scen and r["alpha"] == alpha]
            cat = np.array([r["category"] for r in sel])
            reps = sel[0]["reps"]
            jitter = np.linspace(-0.18, 0.18, reps)
            for r in sel:
                ax.plot(
                    r["category"] + jitter, r["_draws"], "*", color="tab:blue", ms=3, alpha=0.35
                )
            p = np.array([r["p"] for r in sel])
            sd = np.array([r["formula_sd"] for r in sel])
            ax.errorbar(
                cat + 0.3, p, yerr=2 * sd, fmt="none", ecolor="grey", elinewidth=1, capsize=2
            )
            ax.plot(cat, [r["mean_p_hat"] for r in sel], "-", color="tab:red", lw=1.5)
            ax.plot(cat, [r["mean_p_simplex"] for r in sel], "--", color="tab:green", lw=1.2)
            ax.plot(cat, p, "o", mfc="gold", mec="k", ms=6, zorder=5)
            ax.axhline(0.0, color="k", lw=0.5)
            dr = next(x for x in designs if x["scenario"] == scen and x["alpha"] == alpha)
            counts = "/".join(str(dr[f"dpframe_{c}"]) for c in COUNT_KEYS)
            glob = (
                ""
                if dr["mi_global"] is None
                else f"\nglobal optimum (all ε-DP matrices, not plotted): I = "
                f"{dr['mi_global']:.3f} nats, {dr['global_outputs']} outputs"
            )
            ax.set_title(
                f"α = {alpha:g}: design {counts} (vα/v−α/vmin/vmax), "
                f"I = {dr['mi_dpframe']:.3f} nats{glob}",
                fontsize=9,
            )
            ax.set_xticks(cat if s <= 10 else cat[::2])
            ax.set_xlabel("category k", fontsize=8)
            ax.set_ylabel("estimate of p_k", fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(alphas) :]:
            ax.set_visible(False)
        handles = [
            plt.Line2D([], [], ls="", marker="*", color="tab:blue", label="p̂ (one repetition)"),
            plt.Line2D([], [], color="tab:red", label="mean of unbiased p̂"),
            plt.Line2D([], [], color="tab:green", ls="--", label="mean of simplex projection"),
            plt.Line2D([], [], ls="", marker="o", mfc="gold", mec="k", label="true p"),
            plt.Line2D([], [], color="grey", label="p ± 2 SD (covariance formula)"),
        ]
        fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=8, frameon=False)
        fig.suptitle(
            f"Scenario {scen} (S = {s}): {sel[0]['reps']} repetitions of n = {sel[0]['n']:,} "
            "records, ε-DP PRAM optimal within the paper's family",
            fontsize=10,
        )
        if dpi >= 100:
            fig.tight_layout(rect=(0, 0.05, 1, 0.97))
        else:  # the cheap low-dpi --quick figures: fixed margins (tight_layout costs seconds)
            one = nrow == 1
            fig.subplots_adjust(
                left=0.07,
                right=0.98,
                bottom=0.3 if one else 0.14,
                top=0.75 if one else 0.9,
                hspace=0.4,
            )
        k = {v: k for k, v in ROMAN.items()}[scen]
        path = out / f"pram_scenario_{k}.png"
        _save(fig, path, dpi)
        plt.close(fig)
        paths.append(path)
    return paths


def summarise(rows: list[dict]) -> list[str]:
    lines = [
        "| scenario | α | max |bias|/SE | # |bias| > 2 SE | empirical / formula SD | "
        "reps with a p̂_k < 0 | max |bias| of projection |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in dict.fromkeys((r["scenario"], r["alpha"]) for r in rows):
        sel = [r for r in rows if (r["scenario"], r["alpha"]) == key]
        z = np.abs([r["z"] for r in sel])
        ratio = [r["sd_ratio"] for r in sel]
        proj = max(abs(r["simplex_bias"]) for r in sel)
        lines.append(
            f"| {key[0]} | {key[1]:g} | {z.max():.2f} | {int((z > 2).sum())} of {len(sel)} | "
            f"{min(ratio):.2f}–{max(ratio):.2f} | {sel[0]['share_reps_outside_simplex']:.0%} | "
            f"{proj:.4f} |"
        )
    z = np.abs([r["z"] for r in rows])
    ratio = np.array([r["sd_ratio"] for r in rows])
    lines.append(
        f"\nAll cells: {int((z > 2).sum())} of {z.size} |bias| > 2 SE (about {0.0455 * z.size:.0f} "
        f"expected by chance), max {z.max():.2f}; empirical/formula SD median "
        f"{np.median(ratio):.3f}, range {ratio.min():.2f}–{ratio.max():.2f}."
    )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=Path("docs/figures"),
        help="folder for pram_*.csv and pram_scenario_*.png (default docs/figures)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="α = 0.5 and 1.5, 5 repetitions, no SLSQP check"
    )
    parser.add_argument("--reps", type=int, default=None, help=f"repetitions (default {REPS})")
    parser.add_argument("--seed", type=int, default=SEED, help="seed (research only)")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    reps = args.reps or (5 if args.quick else REPS)
    scenarios, alphas = (1, 2, 3, 4), ((0.5, 1.5) if args.quick else ALPHAS)

    t0 = time.perf_counter()
    designs = design_table(scenarios, alphas, quick=args.quick)
    t_design = time.perf_counter() - t0
    write_csv(designs, out / "pram_vertex_counts.csv")
    print("Vertex counts (paper's Tables 1-4 vs dpframe) and mutual information in nats:\n")
    print(markdown_counts(designs))
    krr = sum(abs(r["mi_dpframe"] - r["mi_krr"]) <= 1e-12 * r["mi_krr"] for r in designs)
    print(f"\ndpframe's design has k-RR's MI (all q = v_alpha) in {krr} of {len(designs)} cells.")
    full = [r for r in designs if r["vertices_checked"]]
    ok = sum(r["mi_dpframe"] >= r["mi_all_vertices"] * (1 - 1e-12) for r in full)
    print(
        f"Brute force over every vertex of Proposition 3.2 (S = 10 and Scenario IV, "
        f"{sum(r['vertices_checked'] for r in full)} distinct vertices): dpframe's design is "
        f"the best in {ok} of {len(full)} cells; argmax "
        + ", ".join(sorted({r["argmax_all_vertices"] for r in full}))
    )
    print(f"(designs and exhaustive searches: {t_design:.2f} s)")

    if not args.quick:
        t0 = time.perf_counter()
        local = local_optima((1, 2), alphas, LOCAL_STARTS, args.seed)
        write_csv(local, out / "pram_local_optima.csv")
        print(f"\nSLSQP from {LOCAL_STARTS} random feasible starts (S = 10), local optima reached:")
        for key in dict.fromkeys((r["scenario"], r["alpha"]) for r in local):
            sel = [r for r in local if (r["scenario"], r["alpha"]) == key]
            hit = sum(r["starts"] for r in sel if r["reaches_optimum"])
            pats = ", ".join(f"{r['counts']}×{r['starts']}" for r in sel)
            print(f"  {key[0]:>3} α={key[1]:g}: {hit}/{LOCAL_STARTS} reach the optimum; {pats}")
        print(f"  ({time.perf_counter() - t0:.1f} s)")

    # Seeded randomization: reproducible, for research only, never for a real release.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSeedWarning)
        source = RandomSource(args.seed)
    t0 = time.perf_counter()
    rows = simulate(scenarios, alphas, reps, N_RECORDS, source)
    t_sim = time.perf_counter() - t0
    write_csv(rows, out / "pram_results.csv")
    print(
        f"\nSimulation: {len(scenarios) * len(alphas)} cells x {reps} reps x n = {N_RECORDS:,} "
        f"in {t_sim:.1f} s (seeded: research only)\n"
    )
    print("\n".join(summarise(rows)))

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("\nmatplotlib is not installed (pip install 'dpframe[plots]'): no figures written")
        return
    t0 = time.perf_counter()
    paths = plot(rows, designs, out, dpi=40 if args.quick else 100)
    print(
        f"\nwrote {', '.join(p.name for p in paths)} and pram_*.csv to {out} "
        f"({time.perf_counter() - t0:.1f} s)"
    )


if __name__ == "__main__":
    main()
