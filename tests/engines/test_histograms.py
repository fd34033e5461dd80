"""The "hist" part of a quantile: every engine counts exactly by ``Grid.cell_index``.

The records' cells (cell 2k: equal to edge e_k; 2k + 1: strictly between e_k and e_k+1;
values clipped to the bounds first) are counted per group of the public margins into a
dense int64 array (groups, 2B + 1) in the margins' order, absent groups all zero; under
a person unit the histogram counts the rows the bounding keeps -- the same rows as the
other parts.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines.driver import dense_histogram, indexed_margins
from dpframe.engines.polars import PolarsEngine
from dpframe.mechanisms.quantile import grid_from_edges
from dpframe.mechanisms.statistics import Operand, Part, median, quantile

from ..conftest import spark_available


def _part(lower: float, upper: float, resolution: float | None = None):
    return median("x", lower=lower, upper=upper, epsilon=1.0, resolution=resolution).parts(False)[0]


def _edge_values(edges: np.ndarray) -> np.ndarray:
    """Every edge, the floats next to it on both sides, and values outside the bounds."""
    below = np.nextafter(edges, -np.inf)
    above = np.nextafter(edges, np.inf)
    mids = (edges[:-1] + edges[1:]) / 2
    outside = [edges[0] - 1.0, edges[-1] + 1.0, -1e300, 1e300]
    return np.concatenate([edges, below, above, mids, outside])


def _histogram(engine, part, keys, margins) -> np.ndarray:
    indexed = indexed_margins(margins, engine.schema(), keys)
    rows = engine.grouped_histograms([part], indexed)[part.name]
    return dense_histogram(rows, margins.height, part.grid.cells)


def _reference(groups: np.ndarray, values: np.ndarray, part, n_groups: int) -> np.ndarray:
    flat = groups * part.grid.cells + part.grid.cell_index(values)
    return np.bincount(flat, minlength=n_groups * part.grid.cells).reshape(n_groups, -1)


GRIDS = [(0.0, 100.0, None), (-3.0, 7.0, 0.1), (0.1, 0.7, 0.003), (1e9, 1e9 + 1.0, 1e-3)]


@pytest.mark.parametrize("lower,upper,resolution", GRIDS)
def test_polars_bins_values_on_and_next_to_every_edge_as_the_grid_does(lower, upper, resolution):
    part = _part(lower, upper, resolution)
    values = _edge_values(part.grid.edges)
    groups = np.arange(values.size) % 3
    lf = pl.LazyFrame({"g": groups, "x": values})
    margins = pl.DataFrame({"g": [0, 1, 2, 3]})  # 3 is absent from the data
    got = _histogram(PolarsEngine(lf), part, ["g"], margins)
    assert got.dtype == np.int64 and got.shape == (4, part.grid.cells)
    assert np.array_equal(got, _reference(groups, values, part, 4))
    assert not got[3].any()
    # every edge's own cell is hit (values on it), and every bin's inside (values next
    # to the edges); below e_0 counts at e_0, above e_B at e_B
    assert got.sum(axis=0).all()
    ref = np.bincount(part.grid.cell_index(values), minlength=part.grid.cells)
    assert ref[0] == 4 and ref[-1] == 4  # the edge, its outer neighbour, 2 far outside


def _declared(edges: np.ndarray) -> Part:
    return Part("x:hist", "hist", Operand("x", edges[0], edges[-1]), grid=grid_from_edges(edges))


@pytest.mark.parametrize(
    "edges",
    [
        # about equal steps, not e_0 + k * step bit for bit: the edges are looked up
        np.nextafter(np.arange(0.0, 1.01, 0.01), 2.0) * (np.arange(101) % 3 == 1)
        + np.arange(0.0, 1.01, 0.01) * (np.arange(101) % 3 != 1),
        np.array([-5.0, -1.0, 0.0, 0.5, 2.0, 10.0, 1e3]),  # unequal steps: searched
    ],
    ids=["near-uniform", "declared"],
)
def test_polars_bins_as_the_grid_on_any_grid(edges):
    part = _declared(edges)
    values = _edge_values(part.grid.edges)
    groups = np.arange(values.size) % 2
    lf = pl.LazyFrame({"g": groups, "x": values})
    got = _histogram(PolarsEngine(lf), part, ["g"], pl.DataFrame({"g": [0, 1]}))
    assert np.array_equal(got, _reference(groups, values, part, 2))


def test_the_histogram_follows_the_margins_order_and_drops_unknown_keys():
    part = _part(0.0, 10.0, 1.0)
    lf = pl.LazyFrame({"g": ["b", "a", "a", "zz"], "x": [9.5, 0.0, 10.0, 5.0]})
    margins = pl.DataFrame({"g": ["a", "c", "b"]})
    got = _histogram(PolarsEngine(lf), part, ["g"], margins)
    assert got.sum(axis=1).tolist() == [2, 0, 1]
    assert got[0, 0] == 1 and got[0, 20] == 1 and got[2, 19] == 1  # 0 = e_0, 10 = e_10


def test_a_released_quantile_reads_the_histogram_of_the_person_level_kept_rows():
    """Under a person unit the histogram and the count come from the same kept rows."""
    rng = np.random.default_rng(5)
    n = 3000
    df = pl.DataFrame(
        {
            "pid": rng.integers(0, 300, n),
            "g": rng.choice(["a", "b", "c"], n),
            "x": rng.uniform(0, 10, n),
        }
    )
    margins = pl.DataFrame({"g": ["a", "b", "c", "d"]})
    with dpframe.Accountant(epsilon=10):
        release = dpframe.group_by(
            df, "g", margins=margins, seed=3, unit="pid", max_rows=2, max_groups=1
        ).agg(
            dpframe.agg.count(epsilon=1.0),
            dpframe.agg.sum("x", lower=0, upper=10, epsilon=1.0),
            dpframe.agg.median("x", lower=0, upper=10, epsilon=1.0, resolution=0.5),
        )
        exact = release.exact_aggregates()
    hist = exact["x_median:hist"].to_numpy()
    counts = exact["count:n"].to_numpy()
    assert np.array_equal(hist.sum(axis=1), counts)
    assert counts[-1] == 0 and counts[:3].sum() <= 300 * 2  # bounded: <= 2 rows a person
    # the same kept rows: the cells agree with the kept rows' values (a sum within a cell)
    edges = np.arange(0, 10.5, 0.5)
    low = (hist * np.repeat(edges, 2)[:-1]).sum(axis=1)
    high = (hist * np.repeat(edges, 2)[1:]).sum(axis=1)
    sums = exact["x_sum:sum"].to_numpy()
    assert np.all(low <= sums + 1e-9) and np.all(sums <= high + 1e-9)


def test_the_kept_rows_of_the_bounded_frame_are_the_rows_the_histogram_counts():
    rng = np.random.default_rng(2)
    lf = pl.LazyFrame(
        {"pid": rng.integers(0, 50, 400), "g": rng.integers(0, 4, 400), "x": rng.random(400)}
    )
    unit = PrivacyUnit("pid", max_rows=1, max_groups=2)
    kept = PolarsEngine(lf).bounded(unit, ["g"], RandomSource(seed=9))
    part = _part(0.0, 1.0, 0.1)
    margins = pl.DataFrame({"g": [0, 1, 2, 3]})
    rows = kept.frame.collect()
    got = _histogram(kept, part, ["g"], margins)
    ref = _reference(rows["g"].to_numpy(), rows["x"].to_numpy(), part, 4)
    assert np.array_equal(got, ref)
    assert got.sum() == rows.height <= 50 * 2


@pytest.mark.slow
@pytest.mark.skipif(not spark_available(), reason="pyspark is not installed")
@pytest.mark.parametrize("lower,upper,resolution", GRIDS[:2])
def test_spark_bins_as_polars_and_the_grid(spark, lower, upper, resolution):
    from dpframe.engines.spark import SparkEngine

    part = _part(lower, upper, resolution)
    values = _edge_values(part.grid.edges)
    groups = (np.arange(values.size) % 3).astype(np.int64)
    df = pl.DataFrame({"g": groups, "x": values})
    margins = pl.DataFrame({"g": [0, 1, 2, 3]})
    on_spark = _histogram(SparkEngine(spark.createDataFrame(df.to_arrow())), part, ["g"], margins)
    on_polars = _histogram(PolarsEngine(df.lazy()), part, ["g"], margins)
    assert np.array_equal(on_spark, on_polars)
    assert np.array_equal(on_spark, _reference(groups, values, part, 4))


@pytest.mark.slow
@pytest.mark.skipif(not spark_available(), reason="pyspark is not installed")
@pytest.mark.parametrize("person", [False, True], ids=["record", "person"])
def test_the_same_seed_releases_the_same_quantiles_on_both_engines(spark, person):
    rng = np.random.default_rng(4)
    n = 600
    df = pl.DataFrame(
        {
            "pid": rng.integers(0, 100, n),
            "g": rng.choice(["a", "b"], n),
            "x": rng.normal(5, 2, n),
        }
    )
    margins = pl.DataFrame({"g": ["a", "b", "c"]})
    unit = {"unit": "pid", "max_rows": 2, "max_groups": 1} if person else {}
    out = []
    for frame in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        with dpframe.Accountant(epsilon=10) as acct:
            release = dpframe.group_by(frame, "g", margins=margins, seed=11, **unit).agg(
                quantile("x", lower=0, upper=10, epsilon=1.0),
                dpframe.agg.count(epsilon=1.0),
            )
            out.append((release.collect().sort("g"), [e.epsilon for e in acct.ledger]))
    assert out[0][1] == out[1][1]
    assert out[0][0].equals(out[1][0])
