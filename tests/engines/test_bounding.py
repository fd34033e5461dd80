"""Person-level contribution bounding: exact caps, uniform choices, both engines."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pytest
from scipy import stats

from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines import bounding
from dpframe.engines.bounding import bounded_frame
from dpframe.engines.bounding_rule import kept_positions
from dpframe.engines.polars import PolarsEngine
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.statistics import count
from dpframe.mechanisms.statistics import sum as stat_sum

P_MIN = 1e-4  # a law test fails only if its p-value is below this


def _data(n: int = 20_000, people: int = 500, groups: int = 30, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "pid": rng.integers(0, people, n),
            "g": rng.integers(0, groups, n),
            "x": rng.uniform(-2, 12, n),
        }
    )


def _parts():
    return [
        *count(epsilon=1.0).parts(False),
        *stat_sum("x", lower=0, upper=10, epsilon=1.0).parts(False),
    ]


def _caps(out: pl.DataFrame, unit: PrivacyUnit, keys: list[str]) -> None:
    if keys:
        assert out.group_by("pid", *keys).len()["len"].max() <= unit.max_rows
        per = out.group_by("pid").agg(pl.struct(keys).n_unique().alias("k"))
        assert per["k"].max() <= unit.max_groups
    else:
        assert out.group_by("pid").len()["len"].max() <= unit.max_rows


def bounded_grouped_parts(frame, unit, keys, parts, sources, source=None):
    return PolarsEngine(frame).bounded_grouped_parts(unit, keys, parts, sources, source)


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    """Equal columns and values (sums up to float rounding)."""
    assert a.columns == b.columns and a.height == b.height
    for c in a.columns:
        assert np.allclose(a[c].to_numpy(), b[c].to_numpy()), c


def _repeated(people: int, m: int, groups: int = 1) -> pl.DataFrame:
    """``people`` persons, ``m`` rows each: position ``j`` (file order), group ``j % groups``."""
    j = np.tile(np.arange(m), people)
    return pl.DataFrame({"pid": np.repeat(np.arange(people), m), "j": j, "g": j % groups})


@pytest.mark.parametrize(
    ("keys", "rows", "groups"), [(["g"], 2, 3), (["g"], 1, 1), ([], 3, 1), (["g"], 12, 2)]
)
def test_caps_hold_exactly(keys, rows, groups):
    unit = PrivacyUnit("pid", max_rows=rows, max_groups=groups)
    df = _data()
    out = bounded_frame(df.lazy(), unit, keys, RandomSource(seed=3)).collect()
    assert out.columns == df.columns
    _caps(out, unit, keys)
    assert out.height > 0
    # kept rows are input rows, each once
    assert out.join(df, on=df.columns, how="anti").height == 0
    assert out.unique().height == out.height


def test_nothing_dropped_within_bounds():
    df = _data(2_000, people=1_000, groups=1_000)
    most = df.group_by("pid", "g").len()["len"].max()
    groups = df.group_by("pid").agg(pl.col("g").n_unique())["g"].max()
    unit = PrivacyUnit("pid", max_rows=most, max_groups=groups)
    out = bounded_frame(df.lazy(), unit, ["g"]).collect()
    assert out.sort(df.columns).equals(df.sort(df.columns))
    fast = bounded_grouped_parts(df.lazy(), unit, ["g"], _parts(), ["x"]).sort("g")
    plain = PolarsEngine(df).grouped_parts(["g"], _parts(), ["x"]).sort("g")
    _same(fast, plain)


def test_record_unit_is_the_engine_itself():
    eng = PolarsEngine(_data(10))
    assert eng.bounded(PrivacyUnit(), ["g"]) is eng


def test_rows_kept_uniformly_and_not_by_file_order():
    """m = 5 rows per person, cap 2: each position kept with probability 2/5; a person
    whose first rows are 0 and later rows 1 keeps a mean of about 1/2, not 0."""
    people, m, r = 4_000, 5, 2
    df = _repeated(people, m)
    out = bounded_frame(df.lazy(), PrivacyUnit("pid", max_rows=r), ["g"]).collect()
    assert out.group_by("pid").len()["len"].to_list() == [r] * people
    kept = np.bincount(out["j"].to_numpy(), minlength=m)
    assert stats.chisquare(kept).pvalue > P_MIN
    # first 3 rows in file order x = 0, last 2 x = 1: kept mean ~ 2/5
    x = (out["j"] >= 3).cast(pl.Float64)
    assert abs(x.mean() - 2 / 5) < 4 * np.sqrt(0.4 * 0.6 / x.len())


def test_groups_chosen_uniformly():
    people, m = 4_000, 4
    df = _repeated(people, m, groups=m)  # one row in each of 4 groups
    unit = PrivacyUnit("pid", max_rows=1, max_groups=1)
    out = bounded_frame(df.lazy(), unit, ["g"]).collect()
    assert out.height == people
    assert stats.chisquare(np.bincount(out["g"].to_numpy(), minlength=m)).pvalue > P_MIN


def test_rows_and_groups_together_and_shuffled_input():
    """Shuffling the file does not change the law: 3 groups of 3 rows, keep 2 x 1."""
    people = 3_000
    df = _repeated(people, 9, groups=3)
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=5)
    unit = PrivacyUnit("pid", max_rows=1, max_groups=2)
    for frame in (df, shuffled):
        out = bounded_frame(frame.lazy(), unit, ["g"]).collect()
        _caps(out, unit, ["g"])
        assert out.height == 2 * people
        assert stats.chisquare(np.bincount(out["j"].to_numpy(), minlength=9)).pvalue > P_MIN


def test_kept_positions_large_k_and_exact_counts():
    rng = np.random.default_rng(1)
    lens = rng.integers(1, 40, 500)
    pc, gc = np.arange(500), np.zeros(500, np.int64)
    for k in (1, 3, 20):
        mask = kept_positions(pc, gc, lens, k, (1, 2))
        got = [int(s.sum()) for s in np.split(mask, np.cumsum(lens)[:-1])]
        assert got == np.minimum(lens, k).tolist()


def test_fast_path_agrees_with_bounded_then_grouped_parts():
    """Exact where the choice cannot matter: every person has exactly max_groups groups and
    one value per (person, group) -- oversized pairs included."""
    rng = np.random.default_rng(2)
    people = 300
    g = np.concatenate([rng.choice(20, 2, replace=False) for _ in range(people)])
    n = rng.integers(1, 6, 2 * people)
    df = pl.DataFrame(
        {
            "pid": np.repeat(np.repeat(np.arange(people), 2), n),
            "g": np.repeat(g, n),
            "x": np.repeat(np.repeat(rng.uniform(-2, 12, people), 2), n),  # one value a person
        }
    )
    unit = PrivacyUnit("pid", max_rows=3, max_groups=2)
    for keys in (["g"], []):
        slow = PolarsEngine(df).bounded(unit, keys).grouped_parts(keys, _parts(), ["x"])
        fast = bounded_grouped_parts(df.lazy(), unit, keys, _parts(), ["x"])
        if keys:
            slow, fast = slow.sort(keys), fast.sort(keys)
        _same(fast, slow)


def test_fast_path_counts_bad_values_of_all_rows():
    df = pl.DataFrame({"pid": [1, 1, 1, 2], "g": [0, 0, 0, 1], "x": [1.0, np.nan, None, 2.0]})
    unit = PrivacyUnit("pid", max_rows=1, max_groups=1)
    out = bounded_grouped_parts(df.lazy(), unit, ["g"], _parts(), ["x"])
    assert int(out["__bad__x"].sum()) == 2
    assert out.sort("g")["__rows"].to_list() == [1, 1]
    with pytest.raises(InvalidParameterError, match="counts and sums"):
        from dpframe.mechanisms.statistics import mean

        bounded_grouped_parts(
            df.lazy(), unit, ["g"], mean("x", lower=0, upper=1, epsilon=1.0).parts(True), ["x"]
        )


def test_lazy_streaming_over_parquet(tmp_path):
    path = tmp_path / "d.parquet"
    _data(50_000, people=2_000, groups=50).write_parquet(path)
    unit = PrivacyUnit("pid", max_rows=2, max_groups=3)
    eng = PolarsEngine(pl.scan_parquet(path)).bounded(unit, ["g"])
    assert isinstance(eng.frame, pl.LazyFrame)
    parts = eng.grouped_parts(["g"], _parts(), ["x"])
    assert parts["__rows"].sum() == eng.rows() == eng.frame.collect(engine="streaming").height
    assert eng.category_counts(["g"])["g"]["rows"].sum() == eng.rows()
    _caps(eng.frame.collect(engine="streaming"), unit, ["g"])


BAD = [
    (
        PrivacyUnit("who", 1, 1),
        ["g"],
        InvalidParameterError,
        "person column 'who' is not in the data",
    ),
    (PrivacyUnit("pid", 1, 1), ["pid"], InvalidParameterError, "'pid' is also a group key"),
]


@pytest.mark.parametrize(("unit", "keys", "error", "message"), BAD)
def test_refusals_polars(unit, keys, error, message):
    with pytest.raises(error, match=message):
        PolarsEngine(_data(10)).bounded(unit, keys)
    with pytest.raises(error, match=message):
        bounded_grouped_parts(_data(10).lazy(), unit, keys, _parts(), ["x"])


def _null_person() -> pl.DataFrame:
    return _data(10).with_columns(
        pl.when(pl.int_range(pl.len()) != 3).then(pl.col("pid")).alias("pid")
    )


def test_null_person_refused_polars():
    df = _null_person()
    with pytest.raises(InvalidDataError, match="person column 'pid' holds nulls") as info:
        PolarsEngine(df).bounded(PrivacyUnit("pid", 1, 1), ["g"])
    assert not any(ch.isdigit() for ch in str(info.value))  # no count of anything
    with pytest.raises(InvalidDataError, match="holds nulls"):
        bounded_grouped_parts(df.lazy(), PrivacyUnit("pid", 1, 1), ["g"], _parts(), ["x"])


@pytest.mark.slow
def test_spark_same_caps_laws_and_refusals(spark):
    from dpframe.engines.spark import SparkEngine

    df = _data(5_000, people=200, groups=20)
    unit = PrivacyUnit("pid", max_rows=2, max_groups=3)
    eng = SparkEngine(spark.createDataFrame(df.to_arrow())).bounded(unit, ["g"])
    out = pl.from_arrow(eng.frame.toArrow())
    assert out.columns == df.columns
    _caps(out, unit, ["g"])
    assert out.join(df, on=df.columns, how="anti").height == 0
    parts = eng.grouped_parts(["g"], _parts(), ["x"])
    assert int(parts["__rows"].sum()) <= 200 * 2 * 3
    # laws: rows (5 per person, keep 2) and groups (3 groups, keep 1)
    people = 1_000
    rows = _repeated(people, 6, groups=3)
    one = PrivacyUnit("pid", max_rows=1, max_groups=1)
    kept = pl.from_arrow(
        SparkEngine(spark.createDataFrame(rows.to_arrow())).bounded(one, ["g"]).frame.toArrow()
    )
    assert kept.height == people
    assert stats.chisquare(np.bincount(kept["j"].to_numpy(), minlength=6)).pvalue > P_MIN
    assert SparkEngine(spark.createDataFrame(df.to_arrow())).bounded(PrivacyUnit(), []).frame
    # the same refusals, the same messages
    small = SparkEngine(spark.createDataFrame(_data(10).to_arrow()))
    for bad_unit, keys, error, message in BAD:
        with pytest.raises(error, match=message):
            small.bounded(bad_unit, keys)
    nulls = SparkEngine(spark.createDataFrame(_null_person().to_arrow()))
    with pytest.raises(InvalidDataError) as spark_err:
        nulls.bounded(PrivacyUnit("pid", 1, 1), ["g"])
    with pytest.raises(InvalidDataError) as polars_err:
        PolarsEngine(_null_person()).bounded(PrivacyUnit("pid", 1, 1), ["g"])
    assert str(spark_err.value) == str(polars_err.value)


@pytest.mark.parametrize("within", [False, True], ids=["chosen", "all-within-bounds"])
def test_caps_hold_on_an_input_that_changes_between_reads(tmp_path, within):
    """The rows are chosen in one pass and read again when the result is collected: a
    pair that had few rows when chosen and more when read again keeps at most
    ``max_rows`` (as on Spark), and a person never gains a group."""
    path = tmp_path / "records.csv"
    first = {"pid": [1, 2], "g": ["a", "a"]} if within else {"pid": [1, 1, 2], "g": ["a", "b", "a"]}
    pl.DataFrame(first).with_columns(x=pl.lit(0)).write_csv(path)
    unit = PrivacyUnit("pid", max_rows=2, max_groups=1)
    out = bounded_frame(pl.scan_csv(path), unit, ["g"], RandomSource(seed=3))
    grown = pl.DataFrame({"pid": [1] * 6 + [2] * 6, "g": ["a", "b"] * 3 + ["a"] * 6})
    grown.with_columns(x=pl.int_range(12)).write_csv(tmp_path / "new.csv")
    os.replace(tmp_path / "new.csv", path)
    kept = out.collect()
    per_pair = kept.group_by("pid", "g").len()
    assert per_pair["len"].max() <= 2, per_pair
    assert kept.group_by("pid").agg(pl.col("g").n_unique())["g"].max() <= 1


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "polars"])
def test_bounds_above_the_data_keep_everything_on_both_paths(kernel):
    """max_rows and max_groups are unbounded integers: bounds far above any person's
    rows and groups (2**31 - 1, 2**40) keep every row, on the compiled kernel (its state
    was sized by max_groups) and on polars (a pair's row count is a u32)."""
    lf = pl.LazyFrame({"pid": [1] * 5 + [2], "g": list("aabcaa"), "x": [1.0] * 6})
    for bound in (2**31 - 1, 2**40):
        unit = PrivacyUnit("pid", max_rows=bound, max_groups=bound)
        out = bounding.bounded_grouped_parts(
            lf, unit, ["g"], {"s": pl.col("x")}, [], {}, RandomSource(seed=1), kernel=kernel
        ).sort("g")
        assert out["__rows"].to_list() == [4, 1, 1]
        assert out["s"].to_list() == [4.0, 1.0, 1.0]
    framed = bounded_frame(lf, PrivacyUnit("pid", max_rows=2**40, max_groups=2**40), ["g"])
    assert framed.collect().height == 6


def test_spark_keeps_max_groups_by_key_values_when_the_input_changes(spark, tmp_path, monkeypatch):
    """A Spark frame read differently after its codes were fixed (a key from a
    non-deterministic UDF, standing for a table updated between Spark jobs): the mixed
    radix widths came from the first read, so on the second three groups of one person
    shared a group code and the person kept all three under max_groups=1. The pairs are
    now the key values, whatever the codes."""
    from pyspark.sql import functions as sf
    from pyspark.sql.types import LongType

    from dpframe.engines import spark as spark_engine

    flag = tmp_path / "phase"
    flag.write_text("0")

    def k2_of(real):  # phase 0: every k2 reads 0; then the real values
        return 0 if flag.read_text() == "0" else int(real)

    k2 = sf.udf(k2_of, LongType()).asNondeterministic()
    rows = [(p, k, 2 - k) for p in range(3) for k in range(3)]  # (0,2), (1,1), (2,0) each
    base = spark.createDataFrame(rows, "pid long, k1 long, k2raw long")
    sdf = base.select("pid", "k1", k2("k2raw").alias("k2"))
    real = spark_engine._with_codes

    def codes_then_change(*args, **kwargs):
        out = real(*args, **kwargs)  # its Spark jobs fixed the codes' widths
        flag.write_text("1")
        return out

    monkeypatch.setattr(spark_engine, "_with_codes", codes_then_change)
    unit = PrivacyUnit("pid", max_rows=3, max_groups=1)
    kept = pl.from_arrow(spark_engine.bounded_spark(sdf, unit, ["k1", "k2"]).toArrow())
    groups = kept.group_by("pid").agg(pl.struct("k1", "k2").n_unique().alias("groups"))
    assert groups["groups"].to_list() == [1, 1, 1]
    assert set(kept.select(pl.col("k1") + pl.col("k2")).to_series()) == {2}  # real k2 read


def test_category_counts_of_each_person_s_first_rows_alike_on_both_engines(spark):
    """``per_person=(person, k)``: a person moves at most k records of each table, on
    both engines alike (what a DP prior under a person unit counts)."""
    from dpframe.engines.spark import SparkEngine

    df = pl.DataFrame({"pid": [1] * 5 + [2] * 2 + [3], "c": ["a"] * 5 + ["b"] * 2 + ["a"]})
    got = [
        engine.category_counts(["c", "pid"], per_person=("pid", 2))
        for engine in (PolarsEngine(df.lazy()), SparkEngine(spark.createDataFrame(df.to_arrow())))
    ]
    coded = df.with_columns(pl.col("c").cast(pl.Enum(["a", "b"])))  # counted by its codes
    got.append(PolarsEngine(coded.lazy()).category_counts(["c", "pid"], per_person=("pid", 2)))
    for counts in got:
        assert counts["c"].sort("value").cast({"value": pl.String}).rows() == [("a", 3), ("b", 2)]
        assert counts["pid"].sort("value").rows() == [(1, 2), (2, 2), (3, 1)]
