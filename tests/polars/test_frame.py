"""Covariance-matrix and proportion-vector releases from polars frames."""

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidDataError, InvalidParameterError


def data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, n)
    return pl.DataFrame({"x": x, "y": 0.5 * x + rng.uniform(-2, 2, n), "k": rng.integers(0, 3, n)})


BOUNDS = [(-3, 3), (-4.5, 4.5)]


def test_covariance_matrix_charged_once_and_symmetric(tmp_path):
    acct = Accountant(epsilon=1.0)
    rel = (
        data()
        .lazy()
        .dp.covariance_matrix(
            ["x", "y"], BOUNDS, epsilon=1.0, n=400, repair="higham", accountant=acct
        )
    )
    table = rel.collect()
    m = table.select("x", "y").to_numpy()
    assert np.allclose(m, m.T)
    assert np.linalg.eigvalsh(m).min() >= -1e-9  # repaired: positive semi-definite
    assert len(acct.ledger) == 3 and acct.spent.epsilon == pytest.approx(1.0, abs=1e-12)
    assert acct.spent.epsilon <= 1.0
    assert rel.collect() is table  # collected again: the same table, nothing charged
    assert len(acct.ledger) == 3
    path = dpframe.write_parquet(table, tmp_path / "cov.parquet", ledger=rel)
    assert dpframe.read_provenance(path).entries == rel.ledger


def test_covariance_bias_small_with_bit_far_from_bounds():
    """BIT at ε = 30: variances and the covariance are many scales inside their bounds."""
    df = data(n=2000)
    exact = np.cov(df["x"].to_numpy(), df["y"].to_numpy())
    diffs = []
    for seed in range(20):
        acct = Accountant(epsilon=30.0)
        rel = dpframe.covariance_matrix(
            df, ["x", "y"], BOUNDS, epsilon=30.0, n=2000, method="bit", accountant=acct, seed=seed
        )
        diffs.append(rel.collect().select("x", "y").to_numpy() - exact)
    diffs = np.array(diffs)
    scales = rel.result.scales
    se = np.sqrt(2) * scales / np.sqrt(len(diffs))
    assert (np.abs(diffs.mean(axis=0)) < 4 * se).all()


def test_covariance_checks_n_and_data():
    acct = Accountant(epsilon=5.0)
    with pytest.raises(InvalidDataError, match="400 rows"):
        dpframe.covariance_matrix(
            data(), ["x", "y"], BOUNDS, epsilon=1.0, n=399, accountant=acct
        ).collect()
    bad = data().with_columns(
        pl.when(pl.col("k") == 0).then(None).otherwise(pl.col("x")).alias("x")
    )
    with pytest.raises(InvalidDataError, match="null"):
        dpframe.covariance_matrix(
            bad, ["x", "y"], BOUNDS, epsilon=1.0, n=400, accountant=acct
        ).collect()
    with pytest.raises(InvalidParameterError, match="bounds"):
        dpframe.covariance_matrix(
            data(), ["x", "y"], BOUNDS[:1], epsilon=1.0, n=400, accountant=acct
        )
    assert acct.ledger == ()


def test_add_remove_refused():
    acct = Accountant(epsilon=1.0, neighbours="add_remove")
    with pytest.raises(InvalidParameterError, match="add_remove"):
        dpframe.covariance_matrix(data(), ["x", "y"], BOUNDS, epsilon=1.0, n=400, accountant=acct)


@pytest.mark.parametrize("strategy", ["rescale", "all_but_one", "universal_histogram"])
def test_proportions_on_the_simplex(strategy):
    acct = Accountant(epsilon=1.0)
    df = data().with_columns(pl.col("k").cast(pl.String))
    rel = df.dp.proportions(
        "k",
        categories=["0", "1", "2", "3"],
        epsilon=1.0,
        n=400,
        strategy=strategy,
        accountant=acct,
    )
    table = rel.collect()
    p = table["proportion"].to_numpy()
    assert table["k"].to_list() == ["0", "1", "2", "3"]  # category "3" is empty, kept
    assert (p >= 0).all() and (p <= 1).all() and p.sum() == pytest.approx(1.0)
    assert acct.spent.epsilon <= 1.0 and len(acct.ledger) >= 1


def test_proportions_categories_from_enum_never_from_data():
    acct = Accountant(epsilon=2.0)
    df = pl.DataFrame({"c": pl.Series(["a", "b"] * 10, dtype=pl.Enum(["a", "b", "c"]))})
    rel = dpframe.proportions(df, "c", epsilon=1.0, n=20, accountant=acct)
    assert rel.collect()["c"].to_list() == ["a", "b", "c"]
    with pytest.raises(InvalidParameterError, match="categories"):
        dpframe.proportions(df.cast({"c": pl.String}), "c", epsilon=1.0, n=20, accountant=acct)
    with pytest.raises(InvalidDataError, match="outside the declared categories"):
        dpframe.proportions(
            df.cast({"c": pl.String}),
            "c",
            categories=["a", "z"],
            epsilon=1.0,
            n=20,
            accountant=acct,
        ).collect()
