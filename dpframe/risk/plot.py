"""Plots for DR-HA: risk against log ε (the paper's S-curves) and the TVD of marginals.

matplotlib is an optional extra (``pip install 'dpframe[plots]'``); it is imported
only here, on use.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from dpframe.errors import InvalidParameterError

__all__ = ["plot_risk", "plot_tvd"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise InvalidParameterError(
            "plotting needs matplotlib: pip install 'dpframe[plots]'"
        ) from None
    return plt


def plot_risk(
    table: pl.DataFrame, path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Risk against ε (log scale), one panel per mechanism, a line per measure/weighting/δ.

    ``table`` is :func:`dpframe.risk.frame.drha`'s output. Dashed lines mark values that
    are not exact (heterogeneous cells, Scenario 8 convention).

    Examples
    --------
    >>> import polars as pl, tempfile, os
    >>> from dpframe.risk.frame import drha
    >>> df = pl.DataFrame({"a": ["x", "x", "y"], "y": ["u", "u", "v"]})
    >>> t = drha(df, "a", "y", epsilon=[0.01, 1, 100], levels=["u", "v"])
    >>> p = plot_risk(t, os.path.join(tempfile.mkdtemp(), "risk.png"))
    >>> p.exists()
    True
    """
    needed = {"mechanism", "measure", "weighted", "epsilon", "delta", "risk", "exact"}
    if not needed <= set(table.columns):
        raise InvalidParameterError(f"table must be a DR-HA table with columns {sorted(needed)}")
    plt = _pyplot()
    mechanisms = table["mechanism"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(
        1, len(mechanisms), figsize=(4.2 * len(mechanisms), 3.6), squeeze=False, sharey=True
    )
    for ax, mech in zip(axes[0], mechanisms, strict=True):
        part = table.filter(pl.col("mechanism") == mech)
        keys = part.select("measure", "weighted", "delta").unique(maintain_order=True)
        for measure, weighted, delta in keys.rows():
            line = part.filter(
                (pl.col("measure") == measure)
                & (pl.col("weighted") == weighted)
                & (pl.col("delta").is_null() if delta is None else pl.col("delta") == delta)
            ).sort("epsilon")
            label = f"{measure}, {'weighted' if weighted else 'unweighted'}"
            if delta is not None:
                label += f", δ={delta:g}"
            style = "-" if line["exact"].all() else "--"
            ax.plot(line["epsilon"], line["risk"], style, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("ε")
        ax.set_title(mech)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("DR-HA")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_tvd(tvd: pl.DataFrame, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Box plots of the TVD of k-way marginals at each ε (the paper's Figure 4).

    ``tvd`` has columns ``epsilon, order, marginal, tvd_mean`` (see
    :func:`dpframe.risk.choose.marginal_tvd`).
    """
    needed = {"epsilon", "order", "tvd_mean"}
    if not needed <= set(tvd.columns):
        raise InvalidParameterError(f"tvd must have columns {sorted(needed)}")
    plt = _pyplot()
    orders = sorted(tvd["order"].unique().to_list())
    fig, axes = plt.subplots(1, len(orders), figsize=(4 * len(orders), 3.4), squeeze=False)
    for ax, order in zip(axes[0], orders, strict=True):
        part = tvd.filter(pl.col("order") == order)
        eps = sorted(part["epsilon"].unique().to_list())
        data = [part.filter(pl.col("epsilon") == e)["tvd_mean"].to_list() for e in eps]
        ax.boxplot(data, tick_labels=[f"{e:g}" for e in eps])
        ax.set_xlabel("ε")
        ax.set_title(f"{order}-way marginals")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("TVD")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
