"""Grouped releases' nulls= policy (dpframe.core.missing): refuse, drop or fill, with the
same release as the user's own filter or fill, and the refusals that keep it honest."""

from __future__ import annotations

import math
import warnings

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dpframe
from dpframe.errors import DPFrameError, InvalidDataError, InvalidParameterError, UnsafeSeedWarning

REGIONS = pl.DataFrame({"region": ["N", "S", "E"]})
PEOPLE = pl.DataFrame(
    {
        "region": ["N", "N", "S", None, "S", "N"],
        "income": [10.0, None, 30.0, 5.0, math.nan, 40.0],
        "age": [30, 40, None, 50, 60, 70],
    }
)


@pytest.fixture(autouse=True)
def _seeded():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSeedWarning)
        yield


def _release(frame, seed=3, **kw):
    acct = dpframe.Accountant(epsilon=2.0)
    grouping = dpframe.group_by(frame, "region", margins=REGIONS, accountant=acct, seed=seed, **kw)
    release = grouping.agg(
        dpframe.agg.count(epsilon=0.5),
        dpframe.agg.sum("income", lower=0, upper=50, epsilon=0.5),
        dpframe.agg.mean("age", lower=0, upper=100, epsilon=0.5),
    )
    return release, acct


def test_refuse_names_every_column_at_once_and_spends_nothing():
    release, acct = _release(PEOPLE.with_columns(pl.col("region").fill_null("E")))
    with pytest.raises(InvalidDataError) as err:
        release.collect()
    assert "'income' (2)" in str(err.value) and "'age' (1)" in str(err.value)
    assert "nulls='drop'" in str(err.value)
    assert acct.ledger == ()


def test_drop_is_the_release_of_the_records_without_missing_values():
    release, acct = _release(PEOPLE.lazy(), nulls="drop")
    kept = PEOPLE.filter(
        pl.col("region").is_not_null()
        & pl.col("income").is_not_null()
        & pl.col("income").is_not_nan()
        & pl.col("age").is_not_null()
    )
    assert kept.height == 2
    by_hand, _ = _release(kept)
    assert_frame_equal(release.collect(), by_hand.collect())
    assert acct.spent.epsilon == pytest.approx(1.5)
    assert all("number kept is data" in n for n in release.summarize()["note"])


def test_fill_is_the_release_of_the_filled_records():
    fill = {"income": 0, "region": "E", "age": 45}
    release, _ = _release(PEOPLE, nulls=fill)
    filled = PEOPLE.with_columns(
        pl.col("income").fill_nan(0.0).fill_null(0.0),
        pl.col("region").fill_null("E"),
        pl.col("age").fill_null(45),
    )
    by_hand, _ = _release(filled)
    assert_frame_equal(release.collect(), by_hand.collect())


def test_infinities_are_refused_under_every_policy():
    frame = PEOPLE.with_columns(pl.col("income").fill_null(math.inf))
    for nulls in ("drop", {"income": 0, "region": "E", "age": 1}):
        release, acct = _release(frame, nulls=nulls)
        with pytest.raises(InvalidDataError, match="income"):
            release.collect()
        assert acct.ledger == ()


@pytest.mark.parametrize(
    ("nulls", "match"),
    [
        ({"income": "zero"}, "fill it with a number"),
        ({"age": 2.5}, "fill it with an integer"),
        ({"region": 1}, "fill it with a string"),
        ({"other": 1}, "not read by this release"),
    ],
)
def test_fill_values_the_column_cannot_hold_are_refused_before_anything(nulls, match):
    release, acct = _release(PEOPLE, nulls=nulls)
    with pytest.raises(InvalidParameterError, match=match):
        release.summarize()
        release.collect()
    assert acct.ledger == ()


def test_drop_with_public_sizes_is_refused():
    margins = REGIONS.with_columns(pl.Series("n", [3, 2, 0]))
    with pytest.raises(InvalidParameterError, match="public sizes"):
        dpframe.group_by(PEOPLE, "region", margins=margins, sizes="n", nulls="drop")


def test_the_namespace_and_an_enum_key_take_it_too():
    frame = PEOPLE.with_columns(pl.col("region").cast(pl.Enum(["N", "S", "E"]))).lazy()
    with dpframe.Accountant(epsilon=1.0):
        out = (
            frame.dp.group_by(
                "region", margins=REGIONS.cast(pl.Enum(["N", "S", "E"])), nulls={"region": "E"}
            )
            .agg(dpframe.agg.count(epsilon=1.0))
            .collect()
        )
    assert out.height == 3
    with pytest.raises(DPFrameError, match="not a category"), dpframe.Accountant(epsilon=1.0):
        frame.dp.group_by(
            "region", margins=REGIONS.cast(pl.Enum(["N", "S", "E"])), nulls={"region": "W"}
        ).agg(dpframe.agg.count(epsilon=1.0)).collect()


# -- one rule for every column a grouped release reads (issue 31) -------------------------

NAN, INF = math.nan, math.inf
AB = pl.DataFrame({"g": ["a", "b"]})


def _nan_ids(extra: int) -> pl.DataFrame:
    """The issue's table: NaN, 1, 2 in groups a, a, b, then ``extra`` NaN-id rows in b."""
    return pl.DataFrame(
        {"pid": [NAN, 1.0, 2.0] + [NAN] * extra, "g": ["a", "a", "b"] + ["b"] * extra}
    )


@pytest.mark.parametrize("nulls", ["refuse", "drop"])
@pytest.mark.parametrize("extra", [0, 3])
def test_nan_person_ids_are_refused_under_every_nulls_policy(extra, nulls):
    """Issue 31: NaN ids were one person, so adding one person with 3 NaN-id rows moved
    the pre-noise counts [2, 1] to [1, 2] (l1 change 2, charged 1). A missing id is
    refused before the charge, and nulls='drop' does not drop it."""
    acct = dpframe.Accountant(epsilon=1.0, neighbours="add_remove")
    release = dpframe.group_by(
        _nan_ids(extra),
        "g",
        margins=AB,
        unit="pid",
        max_rows=1,
        max_groups=1,
        accountant=acct,
        nulls=nulls,
    ).agg(dpframe.agg.count(epsilon=1.0))
    with pytest.raises(InvalidDataError, match="person column 'pid' holds nulls, NaN or inf"):
        release.collect()
    assert acct.ledger == ()


@pytest.mark.parametrize("bad", [INF, -INF, None])
def test_infinite_or_null_person_ids_are_refused(bad):
    frame = pl.DataFrame({"pid": [1.0, bad, 2.0], "g": ["a", "a", "b"]})
    acct = dpframe.Accountant(epsilon=1.0)
    release = dpframe.group_by(
        frame, "g", margins=AB, unit="pid", max_rows=1, max_groups=1, accountant=acct
    ).agg(dpframe.agg.count(epsilon=1.0))
    with pytest.raises(InvalidDataError, match="holds nulls, NaN or infinite"):
        release.collect()
    assert acct.ledger == ()


def test_a_person_id_is_never_filled():
    frame = pl.DataFrame({"pid": [1.0, NAN], "g": ["a", "a"], "x": [1.0, 2.0]})
    with pytest.raises(InvalidParameterError, match="identifies people"):
        dpframe.group_by(
            frame,
            "g",
            margins=AB,
            unit="pid",
            max_rows=1,
            max_groups=1,
            nulls={"pid": 0.0},
            accountant=dpframe.Accountant(epsilon=1.0),
        ).agg(dpframe.agg.sum("pid", lower=0, upper=1, epsilon=1.0)).collect()


@pytest.mark.parametrize("unit", [None, "pid"], ids=["record", "person"])
@pytest.mark.parametrize("bad", [INF, -INF, NAN, None], ids=["inf", "-inf", "nan", "null"])
def test_missing_or_infinite_keys_are_refused_over_all_rows(bad, unit):
    """A bad key is refused whether or not the bounding would have kept its row (person 1
    has two groups and keeps one: the refusal must not depend on that draw)."""
    frame = pl.DataFrame({"pid": [1, 1, 2], "k": [1.0, bad, 2.0]})
    margins = pl.DataFrame({"k": [1.0, 2.0]})
    for seed in range(6):
        acct = dpframe.Accountant(epsilon=1.0)
        bounds = {} if unit is None else {"max_rows": 1, "max_groups": 1}
        release = dpframe.group_by(
            frame, "k", margins=margins, unit=unit, accountant=acct, seed=seed, **bounds
        ).agg(dpframe.agg.count(epsilon=1.0))
        with pytest.raises(InvalidDataError, match="column 'k'"):
            release.collect()
        assert acct.ledger == ()


@pytest.mark.parametrize("bad", [INF, -INF, NAN, None])
def test_margins_with_a_missing_or_infinite_key_are_refused(bad):
    with pytest.raises(InvalidParameterError, match=r"margins has null, infinite or NaN keys"):
        dpframe.group_by(pl.DataFrame({"k": [1.0]}), "k", margins=pl.DataFrame({"k": [1.0, bad]}))


def test_nested_keys_are_refused_before_reading():
    frame = pl.DataFrame({"k": [[1.0], [NAN]]})
    acct = dpframe.Accountant(epsilon=1.0)
    release = dpframe.group_by(frame, "k", margins=pl.DataFrame({"k": [[1.0]]}), accountant=acct)
    with pytest.raises(InvalidDataError, match="nested"):
        release.agg(dpframe.agg.count(epsilon=1.0)).collect()
    assert acct.ledger == ()


def test_nulls_drop_never_drops_a_missing_person_id_even_as_a_statistics_column():
    frame = pl.DataFrame({"pid": [1.0, NAN, 2.0], "g": ["a", "a", "b"]})
    acct = dpframe.Accountant(epsilon=1.0)
    release = dpframe.group_by(
        frame, "g", margins=AB, unit="pid", max_rows=1, max_groups=1, nulls="drop", accountant=acct
    ).agg(dpframe.agg.sum("pid", lower=0, upper=2, epsilon=1.0))
    with pytest.raises(InvalidDataError, match="person column 'pid' holds nulls, NaN"):
        release.collect()
    assert acct.ledger == ()
