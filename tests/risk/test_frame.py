"""The polars side of DR-HA: cell tables, the tidy risk table, per-cell risk, `.dp.drha`."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.datasets import drha_table
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.risk.frame import ASSESSMENT, cell_table, drha, drha_cells
from dpframe.risk.noise import table_sensitivity


def _local(counts: np.ndarray, b: float) -> float:
    """Laplace local DR-HA of one cell, written out: sum_k pi(n_k) prod_{k'} a(n_k')."""

    def absent(c):
        x = (0.5 - c) / b
        return 0.5 * np.exp(x) if x < 0 else 1 - 0.5 * np.exp(-x)

    total = 0.0
    for k, c in enumerate(counts):
        if c == 0:
            continue
        term = 1 - absent(c)
        for j, d in enumerate(counts):
            if j != k:
                term *= absent(d)
        total += term
    return total


def test_cell_table_from_microdata_and_from_counts_agree():
    t = drha_table("bankruptcy_ff")
    micro = (
        t.frame.select([*t.qids, t.sensitive, "count"])
        .with_columns(pl.int_ranges(pl.col("count")).alias("r"))
        .explode("r")
        .drop("count", "r")
    )
    a = cell_table(t.frame, t.qids, t.sensitive, count="count")
    b = cell_table(micro, t.qids, t.sensitive)
    assert a.counts.shape == (78, 3) and a.homogeneous.sum() == 54
    key = lambda tab: sorted(  # noqa: E731
        zip(tab.keys.rows(), map(tuple, tab.counts.tolist()), strict=True)
    )
    assert key(a) == key(b)
    adult = drha_table("adult")
    c = cell_table(adult.frame, adult.qids, adult.sensitive, count="count")
    assert c.counts.shape == (5009, 2) and (~c.homogeneous).sum() == 965
    assert c.counts.sum() == 27504


def test_levels_come_from_the_dtype_or_the_argument_never_the_data():
    df = pl.DataFrame({"q": ["x", "x", "y"], "y": ["a", "b", "a"]})
    with pytest.raises(InvalidParameterError, match="levels="):
        cell_table(df, "q", "y")
    t = cell_table(df, "q", "y", levels=["a", "b", "c"])
    assert t.counts.shape == (2, 3)  # the unused level "c" still counts
    with pytest.raises(InvalidDataError, match=r"outside levels.*'b'"):
        cell_table(df, "q", "y", levels=["a", "c"])  # K smaller than the levels present
    with pytest.raises(InvalidDataError, match="null"):
        cell_table(pl.DataFrame({"q": ["x", None], "y": ["a", "a"]}), "q", "y", levels=["a", "b"])
    with pytest.raises(InvalidDataError, match="empty"):
        cell_table(df.head(0), "q", "y", levels=["a", "b"])
    with pytest.raises(InvalidParameterError, match="not in the frame"):
        cell_table(df, "nope", "y", levels=["a", "b"])


def test_tidy_table_matches_a_hand_computation():
    df = pl.DataFrame({"q": ["x", "x", "x", "y", "y"], "y": ["a", "a", "b", "b", "b"]})
    eps = np.array([0.1, 1.0, 10.0])
    t = drha(df, "q", "y", epsilon=eps, levels=["a", "b"])
    assert t.columns == [
        "mechanism",
        "measure",
        "weighted",
        "epsilon",
        "delta",
        "risk",
        "exact",
        "assessment",
    ]
    assert set(t["assessment"]) == {ASSESSMENT}
    for e in eps:
        b = 1 / e
        cells = [_local(np.array([2, 1]), b), _local(np.array([0, 2]), b)]
        row = t.filter((pl.col("epsilon") == e) & ~pl.col("weighted"))
        assert row["risk"].item() == pytest.approx(np.mean(cells), rel=1e-12)
        row = t.filter((pl.col("epsilon") == e) & pl.col("weighted"))
        assert row["risk"].item() == pytest.approx((3 * cells[0] + 2 * cells[1]) / 5, rel=1e-12)
    assert not t["exact"].any()  # a heterogeneous cell: Scenario-8 convention


def test_neighbours_set_the_table_sensitivity():
    df = pl.DataFrame({"q": ["x"] * 4, "y": ["a"] * 4})
    one = drha(df, "q", "y", epsilon=[1.0], levels=["a", "b"], weighted=False)
    sub = drha(
        df, "q", "y", epsilon=[1.0], levels=["a", "b"], weighted=False, neighbours="substitute"
    )
    half = drha(df, "q", "y", epsilon=[0.5], levels=["a", "b"], weighted=False)
    assert sub["risk"].item() == pytest.approx(half["risk"].item())  # Δ = 2 at ε = 1
    assert one["risk"].item() > sub["risk"].item()
    assert table_sensitivity("gaussian_pdp", "substitute") == pytest.approx(2**0.5)
    acct = dpframe.Accountant(epsilon=1.0, neighbours="substitute")
    via = drha(df, "q", "y", epsilon=[1.0], levels=["a", "b"], weighted=False, accountant=acct)
    assert via["risk"].item() == pytest.approx(sub["risk"].item())
    assert acct.ledger == ()  # DR-HA spends nothing
    with pytest.raises(InvalidParameterError, match="drop sensitivity= or neighbours="):
        drha(
            df, "q", "y", epsilon=[1.0], levels=["a", "b"], sensitivity=1.0, neighbours="add_remove"
        )
    with pytest.raises(InvalidParameterError, match="drop sensitivity= or accountant="):
        drha(df, "q", "y", epsilon=[1.0], levels=["a", "b"], sensitivity=1.0, accountant=acct)


def test_bad_arguments_and_bad_count_rows_are_refused():
    df = pl.DataFrame({"q": ["x", "x", "z"], "y": ["a", "a", "b"], "n": [3, -1, 2]})
    kw = {"epsilon": [1.0], "levels": ["a", "b"]}
    with pytest.raises(InvalidDataError, match="every row"):  # 3 + (-1) must not pass as 2
        drha(df, "q", "y", count="n", **kw)
    with pytest.raises(InvalidDataError, match="every row"):
        drha(df.with_columns(n=pl.Series([0.5, 0.5, 2.0])), "q", "y", count="n", **kw)
    with pytest.raises(InvalidDataError, match="must be numeric"):
        drha(df.with_columns(pl.col("n").cast(pl.String)), "q", "y", count="n", **kw)
    with pytest.raises(InvalidParameterError, match="weighted must be True, False"):
        drha(df.drop("n"), "q", "y", weighted="no", **kw)
    with pytest.raises(InvalidParameterError, match="epsilon must be"):
        drha(df.drop("n"), "q", "y", epsilon="x", levels=["a", "b"])
    with pytest.raises(InvalidParameterError, match="epsilon must be one number"):
        drha_cells(df.drop("n"), "q", "y", epsilon=[1.0, 2.0], levels=["a", "b"])


def test_grid_of_mechanisms_measures_and_deltas():
    t = drha_table("bankruptcy_ff")
    out = drha(
        t.frame,
        t.qids,
        t.sensitive,
        count="count",
        epsilon=[0.1, 0.5],
        delta=[1e-5, 1e-3],
        mechanism=["laplace", "gaussian", "gaussian_pdp", "analytic_gaussian"],
        measure=["local", "expected"],
    )
    # laplace: 1 delta; each gaussian: 2 deltas; x 2 measures x 2 weightings x 2 epsilons
    assert out.height == (1 + 3 * 2) * 2 * 2 * 2
    assert out.filter(pl.col("mechanism") == "laplace")["delta"].is_null().all()
    assert out["risk"].is_between(0, 1).all()
    with pytest.raises(InvalidParameterError, match="gaussian_pdp"):
        drha(
            t.frame,
            t.qids,
            t.sensitive,
            count="count",
            epsilon=[2.0],
            delta=1e-5,
            mechanism="gaussian",
        )
    with pytest.raises(InvalidParameterError, match="delta"):
        drha(
            t.frame,
            t.qids,
            t.sensitive,
            count="count",
            epsilon=[0.5],
            delta=1.5,
            mechanism="gaussian_pdp",
        )


def test_shrinkage_and_marginal_measures_run_with_their_fitted_inputs():
    t = drha_table("bankruptcy_ff")
    out = drha(
        t.frame,
        t.qids,
        t.sensitive,
        count="count",
        epsilon=np.logspace(-2, 2, 9),
        measure=["shrinkage", "marginal", "marginal_shrinkage"],
    )
    assert out["risk"].is_between(0, 1).all()
    assert not out["exact"].any()


def test_per_cell_risk_and_the_expression_agree():
    t = drha_table("bankruptcy_ff")
    cells = drha_cells(t.frame, t.qids, t.sensitive, count="count", epsilon=1.0)
    assert cells.height == 78
    assert cells.filter(pl.col("homogeneous"))["exact"].all()
    assert not cells.filter(~pl.col("homogeneous"))["exact"].any()
    micro = (
        t.frame.with_columns(pl.int_ranges(pl.col("count")).alias("r"))
        .explode("r")
        .drop("count", "r")
    )
    per_group = micro.group_by(list(t.qids)).agg(
        pl.col(t.sensitive).dp.drha(epsilon=1.0).alias("risk_expr")
    )
    joined = cells.join(per_group, on=list(t.qids))
    assert joined.height == 78
    unnamed = micro.group_by(list(t.qids)).agg(pl.col(t.sensitive).dp.drha(epsilon=1.0))
    assert "drha_risk" in unnamed.columns  # not the sensitive column's own name
    np.testing.assert_allclose(joined["risk"], joined["risk_expr"], rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="alpha="):
        pl.col("y").dp.drha(epsilon=1.0, measure="shrinkage")
    with pytest.raises(InvalidParameterError, match="one number"):
        pl.col("y").dp.drha(epsilon=[1.0, 2.0])


def test_frame_namespace():
    t = drha_table("bankruptcy")
    out = t.frame.dp.drha(qids=t.qids, sensitive=t.sensitive, count="count", epsilon=[1.0])
    assert out.height == 2  # unweighted and weighted
    assert out["exact"].all()  # all 103 cells homogeneous: Corollary 2 is exact


def test_a_hundred_point_grid_on_five_thousand_cells_has_the_right_shape():
    """benchmarks/bench_drha.py times this; here only the shapes and the label."""
    from dpframe.risk.measures import cell_risk

    adult = drha_table("adult")
    table = cell_table(adult.frame, adult.qids, adult.sensitive, count="count")
    eps = np.logspace(-3, 2, 100)
    res = cell_risk(table.counts, mechanism="laplace", epsilon=eps)
    assert res.values.shape == (5009, 100) and res.assessment == ASSESSMENT


def test_cli_prints_the_table_and_writes_the_plot(tmp_path):
    runner = CliRunner()
    png, csv = tmp_path / "risk.png", tmp_path / "risk.csv"
    res = runner.invoke(
        app, ["risk", "bankruptcy_ff", "--points", "21", "--plot", str(png), "--csv", str(csv)]
    )
    assert res.exit_code == 0, res.output
    assert "no budget spent" in res.output
    assert png.exists() and csv.exists()
    assert pl.read_csv(csv)["risk"].is_between(0, 1).all()
    bad = runner.invoke(app, ["risk", "nowhere.csv"])
    assert bad.exit_code == 2
    micro = tmp_path / "m.csv"
    pl.DataFrame({"q": ["x", "x", "y"], "y": ["a", "b", "a"]}).write_csv(micro)
    res = runner.invoke(app, ["risk", str(micro), "--qids", "q", "--sensitive", "y"])
    assert res.exit_code == 2 and "levels" in res.output
    res = runner.invoke(
        app, ["risk", str(micro), "--qids", "q", "--sensitive", "y", "--levels", "a,b"]
    )
    assert res.exit_code == 0, res.output
