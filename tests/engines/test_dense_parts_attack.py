"""Adversarial inputs of the compiled pass over dense keys (:mod:`dpframe.engines.dense_parts`).

Each test gives the pass (forced on by ``DENSE_ROWS = 0``) an input at an edge -- keys
whose combinations overflow int64, grids whose bins per unit overflow float64, values at
the grid's edges -- and checks it against the polars query or ``Grid.cell_index``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dpframe.engines import dense_parts as dp
from dpframe.engines.driver import dense_histogram, indexed_margins
from dpframe.engines.polars import PolarsEngine
from dpframe.mechanisms.quantile import grid_from_edges, uniform_grid
from dpframe.mechanisms.statistics import Operand, Part, count

KEYS = pl.Enum(["a", "b"])


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(dp, "DENSE_ROWS", 0)


def test_key_combinations_past_int64_are_left_to_polars(forced):
    """Four enums of 65535 categories: 65536**4 == 2**64 groups, which ``np.prod`` in
    int64 wrapped to 0 -- the layout passed the slot bound with empty arrays and the
    compiled loop wrote out of bounds (a segfault). Such keys are too many: polars."""
    big = pl.Enum([str(i) for i in range(65535)])
    keys = [f"k{i}" for i in range(4)]
    schema = pl.Schema(dict.fromkeys(keys, big))
    parts = count(epsilon=1.0).parts(False)
    assert dp.dense_layout(schema, keys, parts, keys) is None
    assert dp.dense_layout(schema, keys[:1], parts, keys[:1]) is not None
    rng = np.random.default_rng(0)
    frame = pl.DataFrame(
        {k: pl.Series(rng.integers(0, 65535, 50).astype(str), dtype=big) for k in keys}
    )
    out = PolarsEngine(frame).grouped_parts(keys, parts, keys)
    assert int(out["__rows"].sum()) == 50


def _histogram(frame: pl.DataFrame, grid) -> np.ndarray:
    hist = Part("h", "hist", Operand("x"), grid=grid)
    margins = indexed_margins(
        pl.DataFrame({"g": ["a", "b"]}, schema={"g": KEYS}), frame.schema, ["g"]
    )
    _, rows = PolarsEngine(frame).grouped_parts_and_histograms(
        ["g"], [Part("c", "count")], [], [hist], margins
    )
    return dense_histogram(rows["h"], 2, grid.cells)


def _edge_values(edges: np.ndarray) -> np.ndarray:
    out = np.concatenate(
        [
            edges,
            np.nextafter(edges, np.inf),
            np.nextafter(edges, -np.inf),
            [np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308],
            edges[:-1] / 2 + edges[1:] / 2,
        ]
    )
    return out


GRIDS = {
    "subnormal": [0.0, 5e-324],
    "subnormal-bins": [0.0, 5e-324, 1e-323, 1.5e-323],
    "around-zero": [-1e-323, -5e-324, 0.0, 5e-324],
    "two-ulps": [1.0, np.nextafter(1.0, 2.0), np.nextafter(np.nextafter(1.0, 2.0), 2.0)],
    "all-of-float64": [-1.7e308, 0.0, 1.7e308],
    "wide-uniform": [k * 1e307 for k in range(-10, 11)],
    "far-from-zero": [1e300, 1e300 * (1 + 1e-15), 1e300 * (1 + 2e-15), 1e300 * (1 + 3e-15)],
    "jagged": np.cumsum([0.0, 1.0, 2.9, 0.1, 1.0, 1.9, 0.2, 1.0]).tolist(),
    "mixed-scales": [-1e300, -1.0, -5e-324, 0.0, 5e-324, 1.0, 1e300],
    "fine": uniform_grid(-7.3, 113.9, bins=20000).edges.tolist(),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the polars path's own arithmetic
@pytest.mark.parametrize("edges", GRIDS.values(), ids=GRIDS.keys())
def test_cells_at_extreme_grids_are_the_grids_cells(forced, edges):
    """Grids of subnormal width (bins per unit: inf, so ``0 * inf`` was NaN and
    ``int(NaN)`` a garbage bin: a value on the lower edge went to cell 1), grids spanning
    float64 (an infinite step), grids far from equal steps: every value on, next to and
    between the edges, +-inf, +-0.0 and subnormals in ``Grid.cell_index``'s cell."""
    grid = grid_from_edges(edges)
    values = _edge_values(grid.edges)
    groups = np.arange(values.size) % 2
    frame = pl.DataFrame({"g": pl.Series(np.array(["a", "b"])[groups], dtype=KEYS), "x": values})
    flat = groups * grid.cells + grid.cell_index(values)
    want = np.bincount(flat, minlength=2 * grid.cells).reshape(2, -1)
    np.testing.assert_array_equal(_histogram(frame, grid), want)


def test_the_kernels_walk_survives_an_infinite_scale():
    """The kernel itself, told to walk on a grid whose bins per unit overflow (the layout
    now searches such grids; the guess must stay a bin anyway): the lower edge in cell 0."""
    from dpframe.engines.dense_kernel import accumulate

    edges = np.array([0.0, 5e-324, 1e-323])
    x = np.array([[0.0, -1.0, 5e-324, 1e-323, 7.0, -0.0]])
    n = x.shape[1]
    hist = np.zeros((1, 5), dtype=np.int64)
    accumulate(
        np.zeros(n, np.int64), n, x, np.zeros(0, np.int64), np.zeros((0, 2), np.int64),
        np.zeros((0, 4)), 0, edges, True, np.zeros(1, np.int64), np.zeros((1, 0)),
        np.zeros((1, 0)), np.zeros((1, 1), np.int64), hist, np.zeros(1, np.int64),
        np.zeros((4, 0, 1)), np.zeros(1, np.int64),
    )  # fmt: skip
    want = np.bincount(grid_from_edges(edges).cell_index(x[0]), minlength=5)
    np.testing.assert_array_equal(hist[0], want)


def test_an_enum_of_no_categories_counts_its_nulls(forced):
    """``pl.Enum([])``: every record's key is null, the only code the null one (0); the
    keys were read back by gathering category 0 for a null (none there:
    OutOfBoundsError instead of the group polars returns)."""
    empty = pl.Enum([])
    frame = pl.DataFrame({"k": pl.Series([None, None, None], dtype=empty), "x": [1.0, 2.0, 9.0]})
    parts = [Part("c", "count"), Part("s", "sum", Operand("x", 0.0, 5.0))]
    got = PolarsEngine(frame).grouped_parts(["k"], parts, ["k", "x"])
    want = PolarsEngine(frame)._parts_query(["k"], parts, ["k", "x"]).collect()
    assert got.equals(want)
    assert got.rows() == [(None, 3, 3.0, 8.0, 3, 0)]
    counts = PolarsEngine(frame).category_counts(["k"])["k"]
    assert counts.equals(frame.group_by(pl.col("k").alias("value")).agg(pl.len().alias("rows")))


def test_a_repeated_part_name_keeps_its_first_part_as_polars_does(forced):
    """Two parts of one name (a release's names are unique; an engine's caller may not
    be): the polars query keeps the first (``setdefault``); the pass kept the last."""
    frame = pl.DataFrame({"k": pl.Series(["a", "b", "a"], dtype=KEYS), "x": [1.0, 20.0, 30.0]})
    parts = [Part("s", "sum", Operand("x", 0.0, 1.0)), Part("s", "sum", Operand("x", 0.0, 99.0))]
    got = PolarsEngine(frame).grouped_parts(["k"], parts, ["x"]).sort("k")
    want = PolarsEngine(frame)._parts_query(["k"], parts, ["x"]).collect().sort("k")
    assert got.equals(want)
    assert got["s"].to_list() == [2.0, 1.0]


REGIONS = pl.Enum(["n", "s", "e"])


def _release_frame(n: int, bad: str | None) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    frame = pl.DataFrame(
        {
            "r": pl.Series(rng.choice(["n", "s", "e"], n), dtype=REGIONS),
            "b": rng.random(n) < 0.5,
            "x": rng.normal(50.0, 30.0, n),
        }
    )
    value = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
    at = pl.int_range(pl.len()) == 7
    if bad in value:
        return frame.with_columns(pl.when(at).then(value[bad]).otherwise(pl.col("x")).alias("x"))
    if bad in ("x", "r", "b"):
        return frame.with_columns(pl.when(at).then(None).otherwise(pl.col(bad)).alias(bad))
    return frame


def _release(frame: pl.DataFrame, nulls: str, dense: bool, monkeypatch):
    import warnings

    import dpframe

    monkeypatch.setattr(dp, "DENSE_ROWS", 0 if dense else 2**31)
    margins = pl.DataFrame(
        {"r": ["n", "s", "e"] * 2, "b": [True] * 3 + [False] * 3},
        schema={"r": REGIONS, "b": pl.Boolean},
    )
    stats = [
        dpframe.agg.count(epsilon=1.0),
        dpframe.agg.mean("x", lower=0, upper=100, epsilon=1.0),
        dpframe.agg.median("x", lower=0, upper=100, epsilon=1.0),  # a looked-up grid
    ]
    try:
        with warnings.catch_warnings(), dpframe.Accountant(epsilon=100.0):
            warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
            grouping = dpframe.group_by(frame, ["r", "b"], margins=margins, seed=5, nulls=nulls)
            return grouping.agg(*stats).collect().sort("r", "b")
    except Exception as e:  # compared below
        return type(e), str(e)


@pytest.mark.parametrize("nulls", ["refuse", "drop"])
@pytest.mark.parametrize("bad", [None, "nan", "inf", "-inf", "x", "r", "b"])
def test_a_release_refuses_or_releases_as_the_polars_path_does(bad, nulls, monkeypatch):
    """A seeded release over an enum and a boolean key, with a count, a mean and a
    median: the pass and the polars queries release the same table, or refuse with the
    same error -- an InvalidDataError naming the column. (A NaN under the median's
    looked-up grid made the polars path fail casting NaN to a bin index instead.)"""
    from dpframe.errors import InvalidDataError

    frame = _release_frame(600, bad)
    slow = _release(frame, nulls, False, monkeypatch)
    fast = _release(frame, nulls, True, monkeypatch)
    if isinstance(slow, pl.DataFrame):
        assert isinstance(fast, pl.DataFrame) and fast.equals(slow)
        assert bad is None or (nulls == "drop" and bad not in ("inf", "-inf"))
    else:
        assert fast == slow
        assert slow[0] is InvalidDataError
        assert "has null, NaN or infinite" in slow[1]


def test_groups_of_many_keys_with_nulls_are_labelled_as_polars_labels_them(forced):
    """An enum of 700 categories, a boolean and an enum of 3, each with nulls (their null
    codes in the middle of the mixed radix): every group's keys, rows, sums and bad
    counts as polars' ``group_by`` has them (a mislabelled group would move its rows)."""
    rng = np.random.default_rng(11)
    n = 20_000
    big = pl.Enum([f"c{i}" for i in range(700)])
    frame = pl.DataFrame(
        {
            "a": pl.Series(rng.choice([f"c{i}" for i in range(0, 700, 7)], n), dtype=big),
            "b": rng.random(n) < 0.4,
            "c": pl.Series(rng.choice(["x", "y", "z"], n), dtype=pl.Enum(["x", "y", "z"])),
            "v": rng.normal(0.0, 5.0, n),
        }
    )
    frame = frame.with_columns(
        *(
            pl.when(pl.int_range(n) % m == 0).then(None).otherwise(pl.col(k)).alias(k)
            for k, m in (("a", 53), ("b", 29), ("c", 31))
        ),
        # the key's codes are tied to the value: a group moved is a sum changed
        (pl.col("v") + pl.col("a").to_physical().cast(pl.Float64)).alias("v"),
    )
    keys = ["a", "b", "c"]
    parts = [Part("n", "count"), Part("s", "sum", Operand("v", -10.0, 710.0))]
    got = PolarsEngine(frame).grouped_parts(keys, parts, [*keys, "v"])
    want = PolarsEngine(frame)._parts_query(keys, parts, [*keys, "v"]).collect()
    assert got.schema == want.schema and got.height == want.height > 500
    got, want = got.sort(keys, nulls_last=True), want.sort(keys, nulls_last=True)
    for c in [*keys, "__rows", "n", "__bad__a", "__bad__b", "__bad__c", "__bad__v"]:
        assert got[c].to_list() == want[c].to_list(), c
    np.testing.assert_allclose(got["s"].to_numpy(), want["s"].to_numpy(), rtol=1e-12)
    for c in keys:  # and the category counts by bincount
        counts = PolarsEngine(frame).category_counts([c])[c].sort("value", nulls_last=True)
        want = frame.group_by(pl.col(c).alias("value")).agg(pl.len().alias("rows"))
        assert counts.equals(want.sort("value", nulls_last=True))
