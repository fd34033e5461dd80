"""GroupedRelease.accuracy(): per-group half-widths and "uninformative" flags, computed
from the released values alone (post-processing: no data read, nothing charged). The
maths is checked by Monte Carlo in tests/mechanisms/test_accuracy.py."""

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidParameterError


def survey(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.choice(["N", "S", "E"], n, p=[0.6, 0.399, 0.001])
    x = rng.uniform(0.0, 10.0, n)
    y = np.clip(0.5 * x + rng.normal(0.0, 1.0, n), 0.0, 10.0)
    return pl.DataFrame({"g": g, "x": x, "y": y, "b": x > 3.0})


MARGINS = pl.DataFrame({"g": ["N", "S", "E", "W"]})  # W: nobody


def stats():
    return [
        dpframe.agg.count(epsilon=0.5),
        dpframe.agg.sum("x", lower=0, upper=10, epsilon=0.5),
        dpframe.agg.mean("x", lower=0, upper=10, epsilon=1.0),
        dpframe.agg.proportion("b", epsilon=1.0),
        dpframe.agg.var("x", lower=0, upper=10, epsilon=1.0),
        dpframe.agg.cov("x", "y", lower_x=0, upper_x=10, lower_y=0, upper_y=10, epsilon=2.0),
    ]


def test_accuracy_columns_follow_the_released_table(tmp_path):
    acct = Accountant(epsilon=10.0)
    rel = dpframe.group_by(survey(), "g", margins=MARGINS, accountant=acct, seed=1).agg(stats())
    with pytest.raises(InvalidParameterError, match="collect"):
        rel.accuracy()  # nothing released yet: nothing to describe
    out = rel.collect()
    acc = rel.accuracy()
    assert acc["g"].to_list() == out["g"].to_list()
    assert acc.columns == [
        "g",
        "count_error95",
        "x_sum_error95",
        "x_mean_error95",
        "x_mean_uninformative",
        "x_mean_noisy_n",
        "b_proportion_error95",
        "b_proportion_uninformative",
        "b_proportion_noisy_n",
        "x_var_error95",
        "x_var_uninformative",
        "x_var_noisy_n",
        "x_y_var_x_error95",
        "x_y_var_y_error95",
        "x_y_cov_error95",
        "x_y_corr_error95",
        "x_y_uninformative",
        "x_y_noisy_n",
    ]
    assert acc["x_mean_uninformative"].dtype == pl.Boolean
    assert acc["x_mean_noisy_n"].dtype == pl.Int64
    rows = {r["g"]: r for r in acc.iter_rows(named=True)}
    # N: 12,000 records, every ratio informative and its error small
    assert not rows["N"]["x_mean_uninformative"] and rows["N"]["x_mean_error95"] < 0.1
    assert not rows["N"]["x_y_uninformative"] and rows["N"]["x_y_corr_error95"] < 0.3
    # W: nobody -- its ratios are noise over a noisy count near 0
    assert rows["W"]["x_mean_uninformative"] and rows["W"]["x_y_uninformative"]
    assert rows["W"]["x_mean_error95"] == 10.0  # the whole range
    # the count's and sum's noise is added to the statistic: the same in every group
    assert acc["count_error95"].n_unique() == 1
    assert acc["count_error95"][0] == rel.summarize()["error95"][0]
    # another level: narrower intervals, named for it; no charge either way
    spent = acct.spent.epsilon
    acc90 = rel.accuracy(level=0.9)
    assert "x_mean_error90" in acc90.columns
    assert (acc90["x_mean_error90"] <= acc["x_mean_error95"]).all()
    assert acct.spent.epsilon == spent and len(acct.ledger) == 6
    with pytest.raises(InvalidParameterError, match="level"):
        rel.accuracy(level=95)


def test_accuracy_never_reads_the_data(tmp_path, monkeypatch):
    """After collect() the source may be gone: accuracy() reads released values only."""
    path = tmp_path / "survey.parquet"
    survey().write_parquet(path)
    with Accountant(epsilon=10.0):
        rel = dpframe.group_by(pl.scan_parquet(path), "g", margins=MARGINS, seed=2).agg(stats())
        rel.collect()
    path.unlink()

    def refuse(*args, **kwargs):
        raise AssertionError("accuracy() read the data")

    monkeypatch.setattr(rel, "exact_aggregates", refuse)
    monkeypatch.setattr(rel, "_exact_inputs", refuse)
    monkeypatch.setattr(rel, "engine", None)
    rel._steps = None  # the exact inputs kept for collect() are out of reach too
    acc = rel.accuracy()
    assert acc.height == 4 and acc["x_mean_error95"].null_count() == 0


def test_public_sizes_accuracy_is_data_free_per_size():
    df = survey()
    sizes = df.group_by("g").len("n")
    margins = MARGINS.join(sizes, on="g", how="left").with_columns(pl.col("n").fill_null(0))
    with Accountant(epsilon=10.0):
        rel = dpframe.group_by(df, "g", margins=margins, sizes="n", seed=3).agg(
            dpframe.agg.mean("x", lower=0, upper=10, epsilon=1.0),
            dpframe.agg.cov("x", "y", lower_x=0, upper_x=10, lower_y=0, upper_y=10, epsilon=2.0),
        )
        summary = rel.summarize()
        out = rel.collect()
    acc = rel.accuracy()
    assert "x_mean_noisy_n" not in acc.columns  # sizes are public: nothing noisy to show
    rows = {r["g"]: r for r in acc.iter_rows(named=True)}
    assert rows["W"]["x_mean_error95"] is None and rows["W"]["x_mean_uninformative"]
    assert out.filter(pl.col("g") == "W")["x_mean"][0] is None
    assert not rows["N"]["x_mean_uninformative"]
    # the plan's error95 is the worst over the groups' sizes: the smallest group's
    cov_row = summary.filter(pl.col("statistic") == "x_y").row(0, named=True)
    mean_row = summary.filter(pl.col("statistic") == "x_mean").row(0, named=True)
    assert mean_row["error95"] == pytest.approx(acc["x_mean_error95"].max())
    # covariance with public sizes: error95 filled (the variances', data-free)
    assert cov_row["error95"] == pytest.approx(
        max(acc["x_y_var_x_error95"].max(), acc["x_y_var_y_error95"].max())
    )
    assert "see release.accuracy() after release" in cov_row["note"]


def test_summarize_says_where_the_error_depends_on_the_data():
    with Accountant(epsilon=10.0):
        rel = dpframe.group_by(survey(), "g", margins=MARGINS).agg(stats())
        summary = {r["statistic"]: r for r in rel.summarize().iter_rows(named=True)}
    for name in ("x_mean", "b_proportion", "x_var", "x_y"):
        assert summary[name]["error95"] is None
        assert (
            "depends on the group's size; see release.accuracy() after release"
            in (summary[name]["note"])
        )
        assert "uninformative where its noisy count is <=" in summary[name]["note"]
    assert summary["count"]["error95"] is not None and summary["count"]["note"] == "count"


def test_an_accuracy_column_named_as_a_key_is_refused_and_the_release_kept():
    """A key named ``count_error95`` would be overwritten by the count's half-widths:
    accuracy() refuses, naming it; the released table is unchanged."""
    df = survey(2_000).rename({"g": "count_error95"})
    margins = MARGINS.rename({"g": "count_error95"})
    with Accountant(epsilon=1.0):
        release = dpframe.group_by(df, "count_error95", margins=margins).agg(
            dpframe.agg.count(epsilon=0.5)
        )
        table = release.collect()
    with pytest.raises(InvalidParameterError, match=r"\['count_error95'\].*key column"):
        release.accuracy()
    assert table["count_error95"].to_list() == ["N", "S", "E", "W"]
    assert release.accuracy(level=0.9).columns == ["count_error95", "count_error90"]
