"""Column names as an attack on the engines (Spark quotes every user name and runs
``mapInArrow`` and self-joins on plain names of its own), compared with polars.

A struct shadowing each dotted name under every kind of release, names that differ only
by dots and backticks, and names equal to dpframe's own internal ones each read their
own column; names Spark cannot tell apart (empty, alike but for case) are refused before
anything is read; a PRAM write by person never fails after its charge over a person
column's name, nor touches a folder it did not make; statistics of ``__`` names and of
names polars reads as patterns are refused alike on both engines, with nothing spent.
"""

from __future__ import annotations

import os

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dpframe
from dpframe.errors import DPFrameError

pytestmark = pytest.mark.slow

N = 12
CATS = ["a", "b", "c"]


def _frames(spark, df: pl.DataFrame):
    """The same records for each engine."""
    return {"polars": df.lazy(), "spark": spark.createDataFrame(df.to_arrow())}


def _charges(acct) -> list[tuple]:
    return [(e.mechanism, e.epsilon, e.scale) for e in acct.ledger]


def _written(path) -> pl.DataFrame:
    path = str(path).removeprefix("file://")
    return pl.read_parquet(path + "/*.parquet" if os.path.isdir(path) else path)


def _pram(frame, acct, path, column="g", **kw):
    rel = dpframe.pram.release(
        frame, [{"column": column, "epsilon": 0.5, "categories": CATS}], accountant=acct, **kw
    )
    return rel.write(str(path))


def _refused_before_charge_or_written(frame, tmp_path, **kw) -> None:
    """A PRAM write either succeeds or is refused with nothing spent (never a failure
    after the charge that the release could have seen before it)."""
    acct = dpframe.Accountant(epsilon=10)
    try:
        _pram(frame, acct, tmp_path / "micro", **kw)
    except DPFrameError as exc:
        assert acct.ledger == (), f"failed after the charge: {exc}"


# -- what holds ---------------------------------------------------------------------------


def _shadowed() -> pl.DataFrame:
    """Columns ``g.k``, ``x.val``, ``y.v``, ``p.id``, each beside a struct whose field has
    that dotted path and other values (a key ``c``, x + 100, 50, and one person)."""
    row = pl.int_range(pl.len())
    df = pl.DataFrame(
        {
            "g.k": [CATS[i % 3] for i in range(N)],
            "x.val": [float(i % 7) for i in range(N)],
            "y.v": [float(i % 5) for i in range(N)],
            "p.id": [i // 2 for i in range(N)],
        }
    )
    return df.with_columns(
        pl.when(row == 4).then(None).otherwise(pl.col("x.val")).alias("x.val"),
        pl.struct(val=pl.col("x.val") + 100.0).alias("x"),
        pl.struct(k=pl.lit("c")).alias("g"),
        pl.struct(v=pl.lit(50.0)).alias("y"),
        pl.struct(id=pl.lit(1)).alias("p"),
    )


def test_a_struct_shadowing_each_dotted_name_changes_no_release_kind(spark, tmp_path):
    """Beside structs whose fields have the dotted paths ``g.k``, ``x.val``, ``y.v`` and
    ``p.id``: grouped parts (sum, mean, median, cov; nulls filled), proportions and a
    PRAM write by person ``p.id`` are the same seeded release, at the same charges, on
    both engines; the sums are the named column's, and PRAM writes only ``g.k`` and
    ``y.v``. (Private keys, a covariance matrix and a DP prior read through the same
    quoted parts, counts and operands; person-level parts under an odd person name:
    the next test.)"""
    df = _shadowed()
    margins = pl.DataFrame({"g.k": CATS})
    out = {}
    for name, frame in _frames(spark, df).items():
        acct = dpframe.Accountant(epsilon=50)
        grouped = dpframe.group_by(
            frame, "g.k", margins=margins, accountant=acct, seed=7, nulls={"x.val": 3.0}
        ).agg(
            dpframe.agg.sum("x.val", lower=0, upper=10, epsilon=0.5),
            dpframe.agg.mean("x.val", lower=0, upper=10, epsilon=0.5),
            dpframe.agg.median("x.val", lower=0, upper=10, epsilon=0.5),
            dpframe.agg.cov(
                "x.val", "y.v", lower_x=0, upper_x=10, lower_y=0, upper_y=10, epsilon=0.5
            ),
        )
        shares = dpframe.proportions(
            frame, "g.k", epsilon=0.5, n=N, categories=CATS, accountant=acct, seed=7
        )
        (tmp_path / name).mkdir()
        path = _pram(
            frame,
            acct,
            tmp_path / name / "micro",
            column="g.k",
            keep=["y.v"],
            unit="p.id",
            max_rows=2,
        )
        written = _written(path)
        out[name] = (
            grouped.exact_aggregates().sort("g.k"),
            grouped.collect().sort("g.k"),
            shares.collect(),
            written.columns,
            written["y.v"].sort().to_list(),
            sorted(os.listdir(tmp_path / name)),
            _charges(acct),
        )
    a, b = out["polars"], out["spark"]
    for left, right in zip(a[:3], b[:3], strict=True):
        assert_frame_equal(left, right, rel_tol=1e-9)
    filled = df.with_columns(pl.col("x.val").fill_null(3.0))
    sums = filled.group_by("g.k").agg(pl.col("x.val").sum()).sort("g.k")["x.val"].to_list()
    assert a[0]["x.val_sum:sum"].to_list() == sums  # the column's, not the struct's field
    assert a[3] == b[3] == ["g.k", "y.v"]  # no struct, no person id written
    assert a[4] == b[4] == sorted(df["y.v"].to_list())
    assert a[5] == b[5] == ["micro"]  # no ``micro.persons`` left beside it
    assert a[6] == b[6]


def test_backtick_and_dot_variants_and_internal_names_are_each_their_own_column(spark, tmp_path):
    """``a.b``, ``\\`a\\`.\\`b\\```, ``a\\`.\\`b`` and a struct ``a`` with field ``b``,
    and columns named as dpframe's own plain names (``__bound_c0``, ``__hist_v0``,
    ``__pram_c0``/``__pram_c1`` in swapped places, ``__rows``: beside the released ones,
    and kept through PRAM), by a person column ``p`i.d``: a person-level release, a
    median and a PRAM write by person read and write each under its own name (a
    statistic of a ``__`` column is refused on both engines:
    :func:`test_reserved_and_pattern_names_are_refused_alike_with_nothing_spent`)."""
    odd = ["a.b", "`a`.`b`", "a`.`b"]
    passive = ["__bound_c0", "__rows", "__hist_v0"]
    df = pl.DataFrame(
        {
            "__pram_c1": [float(i % 2) for i in range(N)],
            "g": [CATS[i % 3] for i in range(N)],
            "p`i.d": [i // 2 for i in range(N)],
            **{c: [float(j + 1)] * N for j, c in enumerate(odd)},
            **{c: [-1.0] * N for c in passive},
            "__pram_c0": [float(i % 3) for i in range(N)],
        }
    ).with_columns(pl.struct(b=pl.lit(9.0)).alias("a"))
    stats = [dpframe.agg.sum(c, lower=0, upper=10, epsilon=0.5) for c in odd]
    out = {}
    for name, frame in _frames(spark, df).items():
        acct = dpframe.Accountant(epsilon=50)
        grouping = dpframe.group_by(
            frame,
            "g",
            margins=pl.DataFrame({"g": CATS}),
            accountant=acct,
            seed=7,
            unit="p`i.d",
            max_groups=1,
            max_rows=2,
        )
        parts = grouping.agg(
            dpframe.agg.count(epsilon=0.5),
            *stats,
            dpframe.agg.median("a.b", lower=0, upper=10, epsilon=0.5),
        ).exact_aggregates()
        keep = ["__pram_c0", "__pram_c1"]
        path = _pram(frame, acct, tmp_path / name, keep=keep, unit="p`i.d", max_rows=2)
        written = _written(path)
        out[name] = (parts.sort("g"), written.columns, written.drop("g"), _charges(acct))
    a, b = out["polars"], out["spark"]
    assert_frame_equal(a[0], b[0])
    kept = a[0]["count:n"]  # the rows each group keeps: column j holds j + 1 in each
    assert kept.sum() > 0
    for j, c in enumerate(odd):
        assert a[0][f"{c}_sum:sum"].to_list() == (kept * (j + 1)).to_list()
    assert a[1] == b[1] == ["g", "__pram_c0", "__pram_c1"]
    assert_frame_equal(a[2].sort(pl.all()), b[2].sort(pl.all()))
    assert_frame_equal(a[2].sort(pl.all()), df.select("__pram_c0", "__pram_c1").sort(pl.all()))
    assert a[3] == b[3]


def test_columns_named_as_a_count_table_s_columns_are_counted_alike(spark):
    """Columns named ``count``, ``rows`` and ``value`` (the columns of an engine's count of
    each value, which PRAM, proportions and a DP prior read before their charge and a
    PRAM check after it): each engine counts them under names of its own, the same
    tables on both (Spark's count of ``count`` failed with a duplicate column)."""
    from dpframe.engines.polars import PolarsEngine
    from dpframe.engines.spark import SparkEngine

    names = ["count", "rows", "value"]
    df = pl.DataFrame({c: [CATS[(i * (j + 1)) % 3] for i in range(N)] for j, c in enumerate(names)})
    got = [
        engine(frame).category_counts(names)
        for engine, frame in [(PolarsEngine, df.lazy()), (SparkEngine, _frames(spark, df)["spark"])]
    ]
    for c in names:
        a, b = (t[c].with_columns(pl.col("rows").cast(pl.Int64)).sort("value") for t in got)
        assert_frame_equal(a, b)
        assert a.columns == ["value", "rows"] and a["rows"].sum() == N


# -- what breaks --------------------------------------------------------------------------


def test_pram_by_a_person_column_named_count_is_not_refused_after_the_charge(spark, tmp_path):
    df = pl.DataFrame({"g": [CATS[i % 3] for i in range(N)], "count": [i // 2 for i in range(N)]})
    frame = spark.createDataFrame(df.to_arrow())
    _refused_before_charge_or_written(frame, tmp_path, unit="count", max_rows=2)


def test_pram_keep_of_a_name_differing_only_in_case_is_not_refused_after_the_charge(
    spark, tmp_path
):
    df = pl.DataFrame({"g": [CATS[i % 3] for i in range(N)], "x": [1.0] * N, "X": [2.0] * N})
    frame = spark.createDataFrame(df.to_arrow())
    _refused_before_charge_or_written(frame, tmp_path, keep=["X"])


def test_an_empty_column_name_is_not_renamed_in_spark_s_public_schema(spark, tmp_path):
    df = pl.DataFrame({"g": [CATS[i % 3] for i in range(N)], "x": [1.0] * N, "": [2.0] * N})
    frame = spark.createDataFrame(df.to_arrow())
    _refused_before_charge_or_written(frame, tmp_path, keep=["column_2"])


def test_a_pram_write_by_person_keeps_an_existing_persons_folder(spark, tmp_path):
    df = pl.DataFrame({"g": [CATS[i % 3] for i in range(N)], "pid": [i // 2 for i in range(N)]})
    mine = tmp_path / "micro.persons"
    mine.mkdir()
    (mine / "mine.txt").write_text("not dpframe's")
    frame = spark.createDataFrame(df.to_arrow())
    try:
        _refused_before_charge_or_written(frame, tmp_path, unit="pid", max_rows=2)
    finally:
        assert (mine / "mine.txt").exists(), "a folder dpframe did not write was deleted"


def test_a_whole_frame_median_of_a_column_named_all_in_capitals_on_spark(spark):
    df = pl.DataFrame({"ALL": [float(i % 7) for i in range(N)]})
    out = []
    for frame in _frames(spark, df).values():
        acct = dpframe.Accountant(epsilon=5)
        out.append(
            dpframe.median(
                frame, "ALL", lower=0, upper=10, epsilon=0.5, accountant=acct, seed=7
            ).collect()
        )
    assert_frame_equal(out[0], out[1])


@pytest.mark.parametrize(
    "column, stat",
    [
        ("__group", "median"),  # the margins' own row column on Spark
        ("__bad__x", "mean"),  # its parts would read as a bad-value count
        ("^a$", "sum"),  # polars reads it as a regular expression: column a
        ("*", "sum"),  # polars reads it as every column
    ],
)
def test_reserved_and_pattern_names_are_refused_alike_with_nothing_spent(spark, column, stat):
    """A statistic of a column named as dpframe's own (``__...``) or read by polars as a
    pattern is refused on both engines, before anything is read, naming the column."""
    df = pl.DataFrame({"g": [CATS[i % 3] for i in range(N)], "a": [1.0] * N, column: [5.0] * N})
    refusals = []
    for frame in _frames(spark, df).values():
        acct = dpframe.Accountant(epsilon=5)
        grouping = dpframe.group_by(frame, "g", margins=pl.DataFrame({"g": CATS}), accountant=acct)
        with pytest.raises(DPFrameError) as info:
            grouping.agg(
                getattr(dpframe.agg, stat)(column, lower=0, upper=10, epsilon=0.5)
            ).collect()
        assert acct.ledger == () and repr(column) in str(info.value)
        refusals.append((type(info.value), str(info.value)))
    assert refusals[0] == refusals[1]
