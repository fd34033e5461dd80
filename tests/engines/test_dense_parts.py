"""The compiled pass over dense keys gives what the polars queries give.

:mod:`dpframe.engines.dense_parts` replaces polars' aggregation of a record-level
release's parts (and of its one histogram) where every key is an enum or a boolean. Here
both run on the same records (the pass forced on by ``DENSE_ROWS = 0``): every column and
dtype, the counts (rows, bad values, histogram cells) bit for bit, the sums to rounding.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dpframe.engines import dense_parts as dp
from dpframe.engines.driver import dense_histogram, indexed_margins
from dpframe.engines.polars import PolarsEngine
from dpframe.mechanisms.quantile import grid_from_edges, uniform_grid
from dpframe.mechanisms.statistics import (
    Operand,
    Part,
    bounds_parts,
    count,
    mean,
)

from .test_histograms import GRIDS, _edge_values, _part

REGIONS = pl.Enum(["n", "s", "e", "w"])
KEYS = pl.Enum(["a", "b", "c"])
BANDS = pl.Enum(["young", "old"])


def records(n: int, seed: int, bad: bool = False) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(50.0, 40.0, n).round(1)  # some below 0 and above 100, some on edges
    x[rng.random(n) < 0.05] = 25.0
    t = rng.integers(-3, 14, n)
    frame = pl.DataFrame(
        {
            "region": pl.Series(rng.choice(["n", "s", "e", "w"], n), dtype=REGIONS),
            "band": pl.Series(rng.choice(["young", "old"], n), dtype=BANDS),
            "flag": rng.random(n) < 0.3,
            "x": x,
            "t": t,
            "y": rng.uniform(-1.0, 11.0, n),
        }
    )
    if bad:  # nulls in a key, nulls, NaN and infinities in the values
        frame = frame.with_columns(
            pl.when(pl.int_range(n) % 97 == 0)
            .then(None)
            .otherwise(pl.col("region"))
            .alias("region"),
            pl.when(pl.int_range(n) % 31 == 0)
            .then(float("nan"))
            .when(pl.int_range(n) % 37 == 0)
            .then(float("inf"))
            .when(pl.int_range(n) % 41 == 0)
            .then(None)
            .otherwise(pl.col("x"))
            .alias("x"),
            pl.when(pl.int_range(n) % 43 == 0).then(None).otherwise(pl.col("t")).alias("t"),
        )
    return frame


def parts() -> list[Part]:
    """Counts, clipped sums, a product of two clipped columns, records at or above
    edges (unclipped), a sum of an integer column."""
    out = [
        *count(epsilon=1.0).parts(False),
        *mean("x", lower=0, upper=100, epsilon=1.0).parts(False),
    ]
    out.append(Part("xy", "sum", Operand("x", 0.0, 100.0), Operand("y", 0.0, 10.0)))
    out.append(Part("tt", "sum", Operand("t", 0.0, 10.0)))
    out.append(Part("raw_y", "sum", Operand("y")))
    return [*out, *bounds_parts("x_b", "x", [-100.0, 0.0, 25.0, 90.0, 200.0])]


@pytest.fixture
def forced(monkeypatch):
    """The compiled pass for any number of records."""
    monkeypatch.setattr(dp, "DENSE_ROWS", 0)


def both(frame, call):
    """``call(engine)`` by polars, then by the compiled pass."""
    slow = call(PolarsEngine(frame))
    mp = pytest.MonkeyPatch()
    mp.setattr(dp, "DENSE_ROWS", 0)
    try:
        fast = call(PolarsEngine(frame))
    finally:
        mp.undo()
    return slow, fast


def same(a: pl.DataFrame, b: pl.DataFrame, keys: list[str], exact: bool = False) -> None:
    assert a.schema == b.schema
    a, b = a.sort(keys, nulls_last=True), b.sort(keys, nulls_last=True)
    for c in a.columns:
        if a.schema[c].is_float() and not exact:
            np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), rtol=1e-12, atol=1e-9)
        else:
            assert a[c].to_list() == b[c].to_list(), c


@pytest.mark.parametrize("keys", [["region", "band"], ["flag"], ["band", "flag"], []])
def test_the_parts_match_the_polars_query(keys):
    frame = records(5000, 1)
    sources = [*keys, "x", "t", "y"]
    slow, fast = both(frame, lambda e: e.grouped_parts(keys, parts(), sources))
    same(slow, fast, keys)


def test_bad_values_and_null_keys_are_counted_as_polars_counts_them():
    frame = records(5000, 2, bad=True)
    keys = ["region", "band"]
    sources = [*keys, "x", "t", "y"]
    slow, fast = both(frame, lambda e: e.grouped_parts(keys, parts(), sources))
    counted = [keys[0], keys[1], "__rows", *(c for c in slow.columns if c.startswith("__bad__"))]
    assert slow.filter(pl.col("region").is_null()).height == 2  # a null region, each band
    assert int(slow["__bad__x"].sum()) > 0 and int(slow["__bad__t"].sum()) > 0
    same(slow.select(counted), fast.select(counted), keys, exact=True)


@pytest.mark.parametrize(
    "grid",
    [
        uniform_grid(0, 100, bins=40),
        uniform_grid(-7.3, 113.9, bins=1000),
        grid_from_edges([0.0, 1.0, 2.0, 25.0, 25.5, 60.0, 100.0]),  # far from equal steps
    ],
    ids=["uniform", "fine", "uneven"],
)
def test_the_histogram_and_the_parts_come_from_one_pass(grid):
    frame = records(8000, 3)
    keys = ["region", "band"]
    hist = Part("x_median", "hist", Operand("x"), grid=grid)
    margins = indexed_margins(
        frame.select(keys).unique().filter(pl.col("region") != "w"), frame.schema, keys
    )

    def call(e):
        return e.grouped_parts_and_histograms(keys, parts(), [*keys, "x", "y"], [hist], margins)

    (slow, slow_rows), (fast, fast_rows) = both(frame, call)
    same(slow, fast, keys)
    (name,) = slow_rows
    same(slow_rows[name], fast_rows[name], ["__group", "__bin"], exact=True)
    # and the cells are Grid.cell_index's
    every = indexed_margins(frame.select(keys).unique(), frame.schema, keys)
    _, rows = call_forced(frame, keys, hist, every)
    got = rows[name].group_by("__bin").agg(pl.col("__count").sum()).sort("__bin")
    cells = grid.cell_index(frame["x"].to_numpy())
    want = np.bincount(cells, minlength=2 * (len(grid.edges) - 1) + 1)
    assert dict(got.rows()) == {k: int(v) for k, v in enumerate(want) if v}


def call_forced(frame, keys, hist, margins):
    mp = pytest.MonkeyPatch()
    mp.setattr(dp, "DENSE_ROWS", 0)
    try:
        return PolarsEngine(frame).grouped_parts_and_histograms(
            keys, parts(), [*keys, "x"], [hist], margins
        )
    finally:
        mp.undo()


def test_the_batches_sums_are_added_with_compensation(forced, monkeypatch):
    """Values whose plain float sum loses its small terms (1e16 + 1.0 == 1e16): read a
    record a batch, the totals are compensated (Neumaier) and keep them all."""
    monkeypatch.setattr(dp, "_BATCH", 1)
    x = np.array([1e16, *([1.0] * 500), -1e16])
    frame = pl.DataFrame({"g": pl.Series(["a"] * x.size, dtype=pl.Enum(["a"])), "x": x})
    got = PolarsEngine(frame).grouped_parts(["g"], [Part("s", "sum", Operand("x"))], ["x"])
    naive = 0.0
    for v in x:
        naive += v
    assert naive != 500  # the test could fail
    assert got["s"].item() == 500


def test_where_the_pass_does_not_apply_polars_runs(forced, monkeypatch):
    """A key that is not an enum or a boolean, a mean of public sizes, a string operand:
    no layout (the polars query runs, as before)."""
    schema = records(10, 4).with_columns(pl.col("region").cast(pl.String)).schema
    assert dp.dense_layout(schema, ["region"], parts(), ["x"]) is None
    schema = records(10, 4).schema
    means = [Part("m", "mean", Operand("x", 0.0, 1.0))]
    assert dp.dense_layout(schema, ["band"], means, ["x"]) is None
    assert dp.dense_layout(schema, [], [Part("s", "sum", Operand("region"))], []) is None

    def refuse(*args, **kwargs):
        raise AssertionError("the compiled pass ran")

    monkeypatch.setattr(dp, "dense_parts", refuse)
    frame = records(100, 4).with_columns(pl.col("region").cast(pl.String))
    out = PolarsEngine(frame).grouped_parts(["region"], parts(), ["x"])
    assert out.height == 4


def test_too_many_slots_are_left_to_polars():
    schema = pl.Schema(
        {f"k{i}": pl.Enum([str(j) for j in range(30)]) for i in range(5)} | {"x": pl.Float64()}
    )
    keys = [f"k{i}" for i in range(5)]  # 31^5 > DENSE_SLOTS
    assert dp.dense_layout(schema, keys, count(epsilon=1.0).parts(False), []) is None
    assert dp.dense_layout(schema, keys[:3], count(epsilon=1.0).parts(False), []) is not None


def test_many_parts_over_many_groups_are_left_to_polars():
    """The per-group arrays are bounded in bytes too, not only in slots."""
    codes = [str(j) for j in range(1000)]
    schema = pl.Schema({"k0": pl.Enum(codes), "k1": pl.Enum(codes[:100]), "x": pl.Float64()})
    many = [Part(f"s{i}", "sum", Operand("x", 0.0, float(i + 1))) for i in range(20)]
    assert dp.dense_layout(schema, ["k0", "k1"], many[:1], ["x"]) is not None
    assert dp.dense_layout(schema, ["k0", "k1"], many, ["x"]) is None  # 101101 x 20 sums


def test_an_empty_frame_has_no_groups(forced):
    frame = records(10, 5).head(0)
    out = PolarsEngine(frame).grouped_parts(["region"], parts(), ["x"])
    assert out.height == 0
    assert (
        out.schema == PolarsEngine(frame)._parts_query(["region"], parts(), ["x"]).collect_schema()
    )


def test_records_read_in_many_batches(forced, monkeypatch):
    monkeypatch.setattr(dp, "_BATCH", 100)
    frame = records(3000, 6)
    keys = ["region"]
    fast = PolarsEngine(frame).grouped_parts(keys, parts(), [*keys, "x"])
    monkeypatch.setattr(dp, "DENSE_ROWS", 2**30)
    slow = PolarsEngine(frame).grouped_parts(keys, parts(), [*keys, "x"])
    same(slow, fast, keys)


@pytest.mark.parametrize("lower,upper,resolution", GRIDS)
def test_values_on_and_next_to_every_edge_are_binned_as_the_grid_bins_them(
    forced, lower, upper, resolution
):
    part = _part(lower, upper, resolution)
    values = np.concatenate([_edge_values(part.grid.edges), [np.inf, -np.inf]])
    frame = pl.DataFrame(
        {"g": pl.Series(np.array(["a", "b", "c"])[np.arange(values.size) % 3], dtype=KEYS),
         "x": values}
    )  # fmt: skip
    margins = indexed_margins(pl.DataFrame({"g": ["a", "b", "c"]}, schema={"g": KEYS}),
                              frame.schema, ["g"])  # fmt: skip
    parts = [Part("c", "count")]
    _, rows = PolarsEngine(frame).grouped_parts_and_histograms(["g"], parts, [], [part], margins)
    got = dense_histogram(rows[part.name], 3, part.grid.cells)
    groups = np.arange(values.size) % 3
    flat = groups * part.grid.cells + part.grid.cell_index(values)
    want = np.bincount(flat, minlength=3 * part.grid.cells).reshape(3, -1)
    np.testing.assert_array_equal(got, want)


def test_category_counts_of_enums_and_booleans_are_polars_counts():
    """Codes counted by bincount, nulls a value, only the values present: the same frames
    as polars' ``group_by`` (which still counts the other columns)."""
    frame = records(4000, 7, bad=True).with_columns(
        pl.when(pl.int_range(4000) % 13 == 0).then(None).otherwise(pl.col("flag")).alias("flag"),
        pl.col("region").cast(pl.String).alias("name"),
    )
    columns = ["region", "flag", "band", "name", "region"]
    got = PolarsEngine(frame).category_counts(columns)
    assert list(got) == ["region", "flag", "band", "name"]
    for c in got:
        want = frame.group_by(pl.col(c).alias("value")).agg(pl.len().alias("rows"))
        assert got[c].schema == want.schema
        assert (
            got[c].sort("value", nulls_last=True).rows()
            == want.sort("value", nulls_last=True).rows()
        )
    assert got["region"].filter(pl.col("value").is_null())["rows"].item() > 0
    empty = PolarsEngine(frame.head(0)).category_counts(["band"])["band"]
    assert empty.height == 0 and empty.schema == got["band"].schema


@pytest.mark.parametrize(
    "values, dtype",
    [
        (["b", None, "a", "b"], pl.Enum(["a", "b", "c"])),
        (["b", "a", "b"], pl.Enum(["a", "b", "c"])),
        ([f"k{i % 256}" for i in range(600)] + [None], pl.Enum([f"k{i}" for i in range(256)])),
        ([True, None, False, True], pl.Boolean),
        ([True, True], pl.Boolean),
    ],
    ids=["enum, a null", "enum", "256 categories and a null", "boolean, a null", "boolean"],
)
def test_code_counts_are_polars_counts(values, dtype):
    """Each value's records, null counted as a value, from the physical codes (an enum
    of 256 categories has a UInt8 code and its null a 257th value)."""
    frame = pl.LazyFrame({"c": pl.Series(values, dtype=dtype)})
    got = dp.code_counts(frame, ["c"])["c"]
    expected = frame.group_by("c").agg(pl.len()).collect()
    assert sorted(got.rows(), key=str) == sorted(expected.rows(), key=str)
