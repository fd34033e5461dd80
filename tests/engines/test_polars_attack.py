"""Attacks on the polars engine's covariance inputs (c6a79e9, b2cd201): each pair's
covariance computed once, named by the columns' places (``__cov_{i}_{j}``), mirrored.

What must hold, whatever the columns are called and typed: numpy's sample covariance of
the clipped columns (cast to Float64 first), exactly symmetric, the pairs never mixed
up, and the rows and bad values counted as before. The Spark engine must agree.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.engines.polars import PolarsEngine


def _numpy_cov(frame: pl.DataFrame, names, bounds) -> np.ndarray:
    clipped = np.column_stack(
        [
            np.clip(frame[n].cast(pl.Float64).to_numpy(), lo, hi)
            for n, (lo, hi) in zip(names, bounds, strict=True)
        ]
    )
    return np.atleast_2d(np.cov(clipped.T, ddof=1))


def _check(frame: pl.DataFrame, names, bounds) -> np.ndarray:
    got = PolarsEngine(frame.lazy()).covariance_inputs(names, bounds)
    want = _numpy_cov(frame, names, bounds)
    np.testing.assert_allclose(got.cov, want, rtol=1e-10, atol=1e-12)
    assert got.cov.shape == (len(names), len(names))
    assert got.cov.dtype == np.float64
    assert np.array_equal(got.cov, got.cov.T)  # exactly, not to rounding
    assert got.rows == frame.height
    assert got.bad == dict.fromkeys(names, 0)
    return got.cov


#: names that would collide with the engine's own aliases, or join alike
ODD = [
    "__cov_0_1",
    "__cov_1_0",
    "__rows",
    "__bad__x",
    "",
    "a|b",
    "b|c",
    "a",
    "c",
    "x y.z",
    "`q`",
    "é→∑",
    "__cov_{i}_{j}",
]


def test_odd_names_never_mix_pairs_up() -> None:
    rng = np.random.default_rng(11)
    data = rng.normal(1.0, 3.0, size=(400, len(ODD)))
    data[:, 1] = data[:, 0] * 2 + rng.normal(0, 0.1, 400)  # a strong pair beside weak ones
    frame = pl.DataFrame({n: data[:, i] for i, n in enumerate(ODD)})
    bounds = [(-1.0 - i / 10, 4.0 + i) for i in range(len(ODD))]
    _check(frame, ODD, bounds)


@pytest.mark.parametrize("d", [2, 3, 7])
def test_every_order_of_the_columns_is_the_same_matrix_permuted(d) -> None:
    rng = np.random.default_rng(d)
    names = [f"v{i}" for i in range(d)]
    data = rng.uniform(-2.0, 5.0, size=(300, d))
    frame = pl.DataFrame({n: data[:, i] for i, n in enumerate(names)})
    bounds = {n: (-1.0 + i / 3, 3.0 + i) for i, n in enumerate(names)}
    base = _check(frame, names, [bounds[n] for n in names])
    orders = list(itertools.permutations(range(d)))
    for order in orders[:: max(1, len(orders) // 12)]:
        perm = [names[i] for i in order]
        got = _check(frame, perm, [bounds[n] for n in perm])
        np.testing.assert_allclose(got, base[np.ix_(order, order)], rtol=1e-12, atol=1e-14)


def test_integer_float32_and_boolean_columns_are_cast_to_float64_before_clipping() -> None:
    rng = np.random.default_rng(5)
    n = 500
    frame = pl.DataFrame(
        {
            "i8": pl.Series(rng.integers(-100, 100, n), dtype=pl.Int8),
            "u64": pl.Series(rng.integers(0, 2**40, n), dtype=pl.UInt64),
            "f32": pl.Series(rng.normal(0.3, 1.0, n), dtype=pl.Float32),
            "i64": pl.Series(rng.integers(-(2**40), 2**40, n), dtype=pl.Int64),
            "flag": pl.Series(rng.integers(0, 2, n).astype(bool)),
        }
    )
    names = frame.columns
    # a Float32 bound that is not a Float32 value: clipped in Float64, as numpy does
    bounds = [(-50.0, 60.0), (1e6, 5e11), (0.1, 0.7000001), (-1e12, 1e12), (0.0, 1.0)]
    _check(frame, names, bounds)


def test_two_columns_one_of_them_constant_after_clipping() -> None:
    frame = pl.DataFrame({"x": [5.0, 6.0, 7.0, 8.0], "y": [-3.0, 10.0, 2.0, 0.5]})
    cov = _check(frame, ["x", "y"], [(0.0, 1.0), (-1.0, 1.0)])  # x all clipped to 1
    assert cov[0, 0] == 0.0 and cov[0, 1] == 0.0 and cov[1, 0] == 0.0


def test_nulls_nan_and_infinities_are_counted_per_column() -> None:
    frame = pl.DataFrame(
        {
            "x": [1.0, None, 3.0, float("nan"), 5.0, 6.0],
            "y": [1.0, 2.0, float("inf"), 4.0, 5.0, 7.0],
            "z": pl.Series([1, 2, 3, None, 5, 6], dtype=pl.Int32),
        }
    )
    got = PolarsEngine(frame.lazy()).covariance_inputs(["x", "y", "z"], [(0, 10)] * 3)
    assert got.rows == 6
    assert got.bad == {"x": 2, "y": 1, "z": 1}
    assert np.array_equal(got.cov, got.cov.T, equal_nan=True)


@pytest.mark.parametrize("rows", [0, 1])
def test_too_few_rows_give_a_symmetric_nan_matrix_and_the_count(rows) -> None:
    frame = pl.DataFrame(
        {"x": [1.0] * rows, "y": [2.0] * rows}, schema={"x": pl.Float64, "y": pl.Float64}
    )
    got = PolarsEngine(frame.lazy()).covariance_inputs(["x", "y"], [(0, 3), (0, 3)])
    assert got.rows == rows and got.cov.shape == (2, 2) and got.cov.dtype == np.float64
    assert np.isnan(got.cov).all()


def test_the_release_refuses_bad_values_before_any_charge_and_is_symmetric() -> None:
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"a|b": rng.uniform(0, 1, 200), "c": rng.uniform(0, 2, 200)})
    acct = dpframe.Accountant(epsilon=2.0)
    bad = df.with_columns(
        pl.when(pl.int_range(200) == 7).then(None).otherwise(pl.col("c")).alias("c")
    )
    with pytest.raises(dpframe.errors.InvalidDataError):
        dpframe.covariance_matrix(bad, ["a|b", "c"], [(0, 1), (0, 2)], epsilon=1.0, n=200,
                                  accountant=acct).collect()  # fmt: skip
    assert acct.spent.epsilon == 0 and not acct.ledger
    with pytest.warns(dpframe.errors.UnsafeSeedWarning):
        rel = dpframe.covariance_matrix(
            df, ["a|b", "c"], [(0, 1), (0, 2)], epsilon=1.0, n=200, accountant=acct, seed=3
        )
    out = rel.collect()
    matrix = out.drop("column").to_numpy()
    assert np.array_equal(matrix, matrix.T)


# -- the Spark engine: the same pairs ------------------------------------------------------
