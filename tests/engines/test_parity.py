"""The two engines give the same answer to the same release: the same refusal (class and
message) of the same bad input with nothing spent, and the same plan, charges and
seeded noise on good input. Each rule lives once (``dpframe.core`` and
``dpframe.engines.driver``); this is where a drift between engines would show.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dpframe
from dpframe.errors import DPFrameError

pytestmark = pytest.mark.slow

N = 40
CATS = ["a", "b", "c"]


def _good() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "g": [CATS[i % 3] for i in range(N)],
            "x": [float(i % 7) for i in range(N)],
            "y": [float(i % 5) for i in range(N)],
            "small": pl.Series([i % 3 for i in range(N)], dtype=pl.Int8),
            "pid": [float(i // 2) for i in range(N)],
            "k": [float(i % 2) for i in range(N)],
        }
    )


def _spoil(column: str, value) -> pl.DataFrame:
    df = _good()
    spoilt = pl.when(pl.int_range(pl.len()) == 5).then(pl.lit(value)).otherwise(pl.col(column))
    return df.with_columns(spoilt.cast(df.schema[column]).alias(column))


MARGINS = pl.DataFrame({"g": CATS})


def _grouped_mean(frame, acct, tmp, seed=None):
    grouping = dpframe.group_by(frame, "g", margins=MARGINS, accountant=acct, seed=seed)
    return grouping.agg(dpframe.agg.mean("x", lower=0, upper=10, epsilon=0.5)).collect()


def _covariance(frame, acct, tmp, seed=None):
    return dpframe.covariance_matrix(
        frame, ["x", "y"], [(0, 10), (0, 10)], epsilon=0.6, n=N, accountant=acct, seed=seed
    ).collect()


def _proportions(frame, acct, tmp, seed=None):
    return dpframe.proportions(
        frame, "g", epsilon=0.5, n=N, categories=CATS, accountant=acct, seed=seed
    ).collect()


def _pram(frame, acct, tmp, categories=CATS, column="g"):
    rel = dpframe.pram.release(
        frame, [{"column": column, "epsilon": 0.5, "categories": categories}], accountant=acct
    )
    return rel.write(str(tmp / "micro"))


def _grouped_person(frame, acct, tmp, seed=None):
    grouping = dpframe.group_by(
        frame, "g", margins=MARGINS, accountant=acct, seed=seed, unit="pid", max_groups=2
    )
    return grouping.agg(dpframe.agg.count(epsilon=0.5)).collect()


def _grouped_float_key(frame, acct, tmp, seed=None):
    grouping = dpframe.group_by(
        frame,
        "k",
        margins=pl.DataFrame({"k": [0.0, 1.0]}),
        accountant=acct,
        seed=seed,
        unit="pid",
        max_groups=1,
    )
    return grouping.agg(dpframe.agg.count(epsilon=0.5)).collect()


def _pram_person(frame, acct, tmp):
    rel = dpframe.pram.release(
        frame,
        [{"column": "g", "epsilon": 0.5, "categories": CATS}],
        accountant=acct,
        unit="pid",
        max_rows=2,
    )
    return rel.write(str(tmp / "micro"))


def _pram_small(frame, acct, tmp):
    return _pram(frame, acct, tmp, categories=[0, 1, 200], column="small")


def _dp_prior(frame, acct, tmp, seed=None):
    return dpframe.pram.dp_prior(frame, "g", 0.2, categories=CATS, accountant=acct, seed=seed)


BAD = [
    ("grouped mean, +inf", _grouped_mean, ("x", math.inf)),
    ("grouped mean, NaN", _grouped_mean, ("x", math.nan)),
    ("grouped mean, null", _grouped_mean, ("x", None)),
    ("grouped mean, key not in margins", _grouped_mean, ("g", "zz")),
    ("grouped mean, null key", _grouped_mean, ("g", None)),
    ("covariance, +inf", _covariance, ("x", math.inf)),
    ("covariance, -inf", _covariance, ("y", -math.inf)),
    ("covariance, NaN", _covariance, ("x", math.nan)),
    ("covariance, null", _covariance, ("y", None)),
    ("proportions, unknown category", _proportions, ("g", "zz")),
    ("proportions, null", _proportions, ("g", None)),
    ("pram, unknown category", _pram, ("g", "zz")),
    ("pram, null", _pram, ("g", None)),
    ("pram, a category the dtype cannot hold", _pram_small, None),
    ("dp prior, unknown category", _dp_prior, ("g", "zz")),
    # issue 31: missing means missing in every column, person ids and keys included
    ("grouped count by person, NaN id", _grouped_person, ("pid", math.nan)),
    ("grouped count by person, +inf id", _grouped_person, ("pid", math.inf)),
    ("grouped count by person, null id", _grouped_person, ("pid", None)),
    ("grouped count by person, NaN key", _grouped_float_key, ("k", math.nan)),
    ("grouped count by person, -inf key", _grouped_float_key, ("k", -math.inf)),
    ("grouped count by person, null key", _grouped_float_key, ("k", None)),
    ("pram by person, NaN id", _pram_person, ("pid", math.nan)),
    ("pram by person, -inf id", _pram_person, ("pid", -math.inf)),
]


def _refusal(fn, frame, tmp) -> tuple[type, str]:
    acct = dpframe.Accountant(epsilon=10)
    with pytest.raises(DPFrameError) as info:
        fn(frame, acct, tmp)
    assert acct.ledger == (), "a refusal spent budget"
    assert not (tmp / "micro").exists(), "a refusal wrote output"
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name, release, spoil", BAD, ids=[b[0] for b in BAD])
def test_the_same_bad_input_is_refused_alike_with_nothing_spent(
    spark, tmp_path, name, release, spoil
):
    df = _good() if spoil is None else _spoil(*spoil)
    (tmp_path / "polars").mkdir()
    (tmp_path / "spark").mkdir()
    on_polars = _refusal(release, df.lazy(), tmp_path / "polars")
    on_spark = _refusal(release, spark.createDataFrame(df.to_arrow()), tmp_path / "spark")
    assert on_polars == on_spark


GOOD = [_grouped_mean, _covariance, _proportions, _dp_prior]


@pytest.mark.parametrize("release", GOOD, ids=lambda f: f.__name__.strip("_"))
def test_the_same_seeded_release_gives_the_same_charges_and_values(spark, tmp_path, release):
    df = _good()
    results = []
    for frame in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = dpframe.Accountant(epsilon=10)
        out = release(frame, acct, tmp_path, seed=7)
        results.append((out, [(e.mechanism, e.epsilon, e.scale) for e in acct.ledger]))
    (a, charges_a), (b, charges_b) = results
    assert charges_a == charges_b and charges_a
    if isinstance(a, pl.DataFrame):
        key = a.columns[0]
        assert_frame_equal(a.sort(key), b.sort(key), rel_tol=1e-9)
    else:
        assert a == pytest.approx(b, rel=1e-12)


def _with_missing() -> pl.DataFrame:
    """A null and a NaN in a statistic's column and a null key."""
    df = _good()
    row = pl.int_range(pl.len())
    return df.with_columns(
        pl.when(row == 5)
        .then(None)
        .when(row == 7)
        .then(float("nan"))
        .otherwise(pl.col("x"))
        .alias("x"),
        pl.when(row == 9).then(None).otherwise(pl.col("g")).alias("g"),
    )


@pytest.mark.parametrize("nulls", ["drop", {"x": 3.0, "g": "b"}], ids=["drop", "fill"])
def test_the_nulls_policy_gives_the_same_release_on_both_engines(spark, nulls):
    df = _with_missing()
    results = []
    for frame in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = dpframe.Accountant(epsilon=10)
        grouping = dpframe.group_by(
            frame, "g", margins=MARGINS, accountant=acct, seed=7, nulls=nulls
        )
        results.append(
            grouping.agg(
                dpframe.agg.count(epsilon=0.5),
                dpframe.agg.mean("x", lower=0, upper=10, epsilon=0.5),
            ).collect()
        )
    assert_frame_equal(results[0].sort("g"), results[1].sort("g"), rel_tol=1e-9)
