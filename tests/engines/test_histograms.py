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
from dpframe.mechanisms.statistics import Operand, Part, bounds_parts, median, quantile

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


# -- one read of the records: the parts and the histogram from one aggregation -----------


def _survey(seed: int, n: int = 3000) -> pl.DataFrame:
    """Keys with nulls and a key absent from the margins, values with nulls, outside the
    bounds and on the grid's edges. Every value is a multiple of 1/4 below 2**10, so
    every sum of them is exact in any order: the two paths must agree bit for bit."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-20, 130, n) / 4  # some below 0 and above 30 (clipped), many on edges
    return pl.DataFrame(
        {
            "g": pl.Series(rng.integers(0, 5, n)).set(pl.Series(rng.random(n) < 0.02), None),
            "h": rng.choice(["a", "b", "c"], n),
            "x": pl.Series(x).set(pl.Series(rng.random(n) < 0.03), None),
            "y": rng.integers(0, 41, n) / 4,
        }
    )


def _parts() -> list[Part]:
    stats = [
        dpframe.agg.count(epsilon=1.0),
        dpframe.agg.mean("x", lower=0, upper=30, epsilon=1.0),
        dpframe.agg.cov("x", "y", lower_x=0, upper_x=30, lower_y=0, upper_y=10, epsilon=1.0),
    ]
    at_least = bounds_parts("x_bounds", "x", [0.0, 2.5, 5.0, 20.0, 30.0])  # an auto bound's
    return [p for s in stats for p in s.parts(False)] + at_least


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_read_gives_the_parts_and_histogram_of_two(seed):
    lf = _survey(seed).lazy()
    keys = ["g", "h"]
    hist = _part(0.0, 30.0, 0.5)
    parts = _parts()
    assert {p.op for p in parts} >= {"count", "sum", "at_least"}
    # (5, 9) and (7, "a") are absent from the data; g = 4 and null are not in the margins
    margins = pl.DataFrame({"g": [0, 1, 2, 3, 5, 7], "h": ["a", "b", "c", "a", "b", "a"]})
    indexed = indexed_margins(margins, lf.collect_schema(), keys)
    engine = PolarsEngine(lf)
    sources = ["g", "h", "x", "y"]
    agg, rows = engine.grouped_parts_and_histograms(keys, parts, sources, [hist], indexed)
    want_agg = engine.grouped_parts(keys, parts, sources)
    want_rows = engine.grouped_histograms([hist], indexed)
    assert agg.sort(keys, nulls_last=True).equals(
        want_agg.select(agg.columns).sort(keys, nulls_last=True)
    )
    assert agg.schema == want_agg.select(agg.columns).schema
    assert agg.height == want_agg.height and agg["g"].null_count() > 0  # the null key kept
    assert rows.keys() == want_rows.keys() == {hist.name}
    got = rows[hist.name].sort("__group", "__bin", nulls_last=True)
    want = want_rows[hist.name].sort("__group", "__bin", nulls_last=True)
    assert got.equals(want.select(got.columns))
    assert got["__bin"].null_count() > 0  # a null value: a null cell, as counted alone
    dense = dense_histogram(got.drop_nulls(), margins.height, hist.grid.cells)
    assert not dense[4].any() and not dense[5].any()  # absent groups


def test_one_read_of_several_grids_or_moments_is_two_reads_of_the_same():
    """A second grid, or a part that does not add up over cells (a mean of public sizes):
    the two aggregations, each as alone."""
    lf = _survey(4).lazy()
    indexed = indexed_margins(pl.DataFrame({"g": [0, 1, 2, 3, 4]}), lf.collect_schema(), ["g"])
    engine = PolarsEngine(lf)
    other = median("y", lower=0, upper=10, epsilon=1.0, resolution=1.0).parts(False)[0]
    public = dpframe.agg.mean("x", lower=0, upper=30, epsilon=1.0).parts(True)
    for parts, hists in [(_parts(), [_part(0.0, 30.0, 0.5), other]), (public, [other])]:
        agg, rows = engine.grouped_parts_and_histograms(["g"], parts, ["x"], hists, indexed)
        want = engine.grouped_parts(["g"], parts, ["x"])
        assert agg.sort("g", nulls_last=True).equals(want.sort("g", nulls_last=True))
        want_rows = engine.grouped_histograms(hists, indexed)
        for name, got in rows.items():
            assert got.sort("__group", "__bin").equals(want_rows[name].sort("__group", "__bin"))


def _spied(frame: pl.DataFrame) -> tuple[pl.LazyFrame, list[object]]:
    """``frame`` as a Python source that records each scan of it."""
    from polars.io.plugins import register_io_source

    scans: list[object] = []

    def source(with_columns, predicate, n_rows, batch_size):
        scans.append(with_columns)
        yield frame if with_columns is None else frame.select(with_columns)

    return register_io_source(source, schema=frame.schema), scans


@pytest.mark.parametrize("fused_cells,reads", [(2**20, 1), (100, 2)])
def test_a_grouped_release_with_a_median_reads_its_input_once(monkeypatch, fused_cells, reads):
    """Counts, a mean, a covariance and a median of one grouped release: one scan of
    the records for all their exact inputs (the histogram beside the sums); two when
    margins x cells exceed the bound on one aggregation's rows, with the same inputs."""
    import dpframe.engines.polars as engine

    monkeypatch.setattr(engine, "FUSED_CELLS", fused_cells)
    df = _survey(5).drop_nulls()
    lf, scans = _spied(df)
    margins = pl.DataFrame({"g": [0, 1, 2, 3, 4, 9]})
    with dpframe.Accountant(epsilon=10):
        release = dpframe.group_by(lf, "g", margins=margins, seed=3).agg(
            dpframe.agg.count(epsilon=1.0),
            dpframe.agg.mean("x", lower=0, upper=30, epsilon=1.0),
            dpframe.agg.cov("x", "y", lower_x=0, upper_x=30, lower_y=0, upper_y=10, epsilon=1.0),
            dpframe.agg.median("x", lower=0, upper=30, epsilon=1.0, resolution=0.5),
        )
        scans.clear()
        exact = release.exact_aggregates()
    assert len(scans) == reads
    # and the inputs are the records' own: the histogram holds each group's count
    hist = exact["x_median:hist"].to_numpy()
    assert np.array_equal(hist.sum(axis=1), exact["count:n"].to_numpy())
    assert hist.sum() == df.height and not hist[-1].any()
