"""Grouped releases: public margins, one charge, one vectorised noise pass, cached."""

import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import (
    Accountant,
    BudgetExceededError,
    InvalidDataError,
    InvalidParameterError,
    MissingMarginsError,
    NoAccountantError,
)


def people(n=1_000_000, groups=10_000, seed=0):
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"g": rng.integers(0, groups, n), "x": rng.uniform(0.0, 10.0, n)})


def release(frame, margins, acct, *stats, **kw):
    stats = stats or (dpframe.agg.count(epsilon=0.5),)
    return frame.lazy().dp.group_by("g", margins=margins, accountant=acct, **kw).agg(*stats)


def test_1e4_groups_1e6_rows_one_entry_and_identical_recollect():
    df = people()
    margins = pl.DataFrame({"g": np.arange(10_000)})
    acct = Accountant(epsilon=1.0)
    rel = release(df, margins, acct)
    first = rel.collect()
    second = rel.collect()
    assert first.equals(second)
    assert len(acct.ledger) == 1 and acct.spent.epsilon == 0.5
    assert first.height == 10_000 and first.columns == ["g", "count"]


@pytest.mark.slow
def test_streaming_1e7_rows_one_entry():
    df = people(n=10_000_000, groups=1_000, seed=1)
    path_frame = df.lazy()
    margins = pl.DataFrame({"g": np.arange(1_000)})
    acct = Accountant(epsilon=1.0)
    rel = release(
        path_frame,
        margins,
        acct,
        dpframe.agg.count(epsilon=0.25),
        dpframe.agg.sum("x", lower=0, upper=10, epsilon=0.25),
    )
    out = rel.collect()
    assert len({e.release for e in acct.ledger}) == 1
    assert len(acct.ledger) == 2  # one entry per statistic, one release
    assert rel.collect().equals(out)
    assert len(acct.ledger) == 2
    exact = df.group_by("g").len().sort("g")["len"].to_numpy()
    noise = out.sort("g")["count"].to_numpy() - exact
    b = acct.ledger[0].scale  # counts: integer noise at scale 2/0.25 = 8
    assert b == 8.0
    assert abs(noise.mean()) < 5 * np.sqrt(2 * b * b / noise.size)


def test_empty_groups_are_released_not_dropped():
    df = pl.DataFrame({"g": [0, 0, 1], "x": [1.0, 2.0, 3.0]})
    margins = pl.DataFrame({"g": [0, 1, 2, 3]})
    acct = Accountant(epsilon=10.0)
    out = release(
        df, margins, acct, dpframe.agg.sum("x", lower=0, upper=5, epsilon=1.0), seed=0
    ).collect()
    assert out["g"].to_list() == [0, 1, 2, 3]  # margins order, empty groups included
    assert out["x_sum"].null_count() == 0


def test_exact_aggregates_fill_zero_and_clip():
    df = pl.DataFrame({"g": [0, 0, 1], "x": [1.0, 20.0, -3.0]})
    margins = pl.DataFrame({"g": [0, 1, 2]})
    rel = release(
        df,
        margins,
        Accountant(epsilon=1.0),
        dpframe.agg.count(epsilon=0.5),
        dpframe.agg.sum("x", lower=0, upper=5, epsilon=0.5),
    )
    exact = rel.exact_aggregates()
    assert exact["count:n"].to_list() == [2.0, 1.0, 0.0]
    assert exact["x_sum:sum"].to_list() == [6.0, 0.0, 0.0]  # 1 + clip(20) ; clip(-3) ; empty


def test_sensitivities_follow_the_neighbour_relation():
    df = pl.DataFrame({"g": [0], "x": [1.0]})
    margins = pl.DataFrame({"g": [0]})
    stats = (
        dpframe.agg.count(epsilon=1.0),
        dpframe.agg.sum("x", lower=-2, upper=5, epsilon=1.0),
    )
    sub = release(df, margins, Accountant(epsilon=2.0), *stats).summarize()
    addrem = release(df, margins, Accountant(epsilon=2.0, neighbours="add_remove"), *stats)
    addrem = addrem.summarize()
    assert sub["sensitivity"].to_list() == [2.0, 10.0]
    assert addrem["sensitivity"].to_list() == [1.0, 5.0]


def test_over_budget_charges_nothing():
    df = people(n=1000, groups=10)
    margins = pl.DataFrame({"g": np.arange(10)})
    acct = Accountant(epsilon=1.0)
    rel = release(
        df,
        margins,
        acct,
        dpframe.agg.count(epsilon=0.6),
        dpframe.agg.sum("x", lower=0, upper=10, epsilon=0.6),
    )
    with pytest.raises(BudgetExceededError):
        rel.collect()
    assert acct.ledger == ()


def test_summarize_spends_nothing_and_reports_error():
    acct = Accountant(epsilon=1.0)
    rel = release(people(100, 5), pl.DataFrame({"g": np.arange(5)}), acct)
    plan = dpframe.summarize(rel)
    assert acct.ledger == ()
    row = plan.row(0, named=True)
    assert row["scale"] == 4.0  # 2 / 0.5
    # integer noise: P(|Z| > error95) <= 5%
    b = np.exp(-1 / 4.0)
    k = row["error95"]
    assert 2 * b ** (k + 1) / (1 + b) <= 0.05 < 2 * b**k / (1 + b)


def test_missing_margins_refused():
    with pytest.raises(MissingMarginsError, match="margins"):
        people(10, 2).lazy().dp.group_by("g", margins=None)


@pytest.mark.parametrize(
    ("margins", "match"),
    [
        (pl.DataFrame({"h": [1]}), "key column"),
        (pl.DataFrame({"g": [1, 1]}), "duplicate"),
        (pl.DataFrame({"g": [1, None]}), "null"),
        (pl.DataFrame({"g": []}, schema={"g": pl.Int64}), "no rows"),
        ("g", "DataFrame"),
    ],
)
def test_bad_margins(margins, match):
    with pytest.raises(InvalidParameterError, match=match):
        people(10, 2).lazy().dp.group_by("g", margins=margins)


def test_unknown_keys_error_or_drop():
    df = pl.DataFrame({"g": [0, 1, 7], "x": [1.0, 1.0, 1.0]})
    margins = pl.DataFrame({"g": [0, 1]})
    acct = Accountant(epsilon=5.0)
    with pytest.raises(InvalidDataError, match="not in margins"):
        release(df, margins, acct).collect()
    assert acct.ledger == ()
    rel = release(df, margins, acct, unknown_keys="drop")
    assert rel.exact_aggregates()["count:n"].to_list() == [1.0, 1.0]


@pytest.mark.parametrize(
    ("x", "match"),
    [
        ([1.0, None], "null"),
        ([1.0, float("nan")], "NaN"),
        ([1.0, float("inf")], "infinite"),
        (["a", "b"], "numeric"),
    ],
)
def test_bad_values_refused_before_charging(x, match):
    df = pl.DataFrame({"g": [0, 1], "x": x})
    acct = Accountant(epsilon=5.0)
    rel = release(
        df, pl.DataFrame({"g": [0, 1]}), acct, dpframe.agg.sum("x", lower=0, upper=1, epsilon=1)
    )
    with pytest.raises(InvalidDataError, match=match):
        rel.collect()
    assert acct.ledger == ()


def test_key_dtype_mismatch_is_explained():
    df = pl.DataFrame({"g": ["a"], "x": [1.0]})
    # a text key against numeric margins: refused from the schemas, before any read
    with pytest.raises(InvalidParameterError, match="dtype String in the data but Int64"):
        release(df, pl.DataFrame({"g": [0]}), Accountant(epsilon=1.0)).collect()


def test_no_accountant_refuses():
    rel = people(10, 2).lazy().dp.group_by("g", margins=pl.DataFrame({"g": [0, 1]}))
    with pytest.raises(NoAccountantError):
        rel.agg(dpframe.agg.count(epsilon=1.0)).collect()


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: dpframe.agg.count(epsilon=0), "epsilon"),
        (lambda: dpframe.agg.sum("x", lower=1, upper=1, epsilon=1), "lower"),
        (lambda: dpframe.agg.sum("x", lower=float("nan"), upper=1, epsilon=1), "lower"),
        (lambda: dpframe.agg.sum("x", lower=0, upper=float("inf"), epsilon=1), "upper"),
        (lambda: dpframe.agg.sum(3, lower=0, upper=1, epsilon=1), "column"),
    ],
)
def test_bad_statistic_parameters(make, name):
    with pytest.raises(InvalidParameterError, match=name):
        make()


def test_dataframe_namespace_and_eager_frame():
    df = pl.DataFrame({"g": [0, 1], "x": [1.0, 2.0]})
    acct = Accountant(epsilon=1.0)
    out = (
        df.dp.group_by("g", margins=pl.DataFrame({"g": [0, 1]}), accountant=acct)
        .agg(dpframe.agg.count(epsilon=1.0))
        .collect()
    )
    assert out.height == 2 and acct.spent.epsilon == 1.0


def test_multiple_keys_and_enum_margins():
    from dpframe.datasets import AGE_BANDS, REGIONS, synthetic_survey

    survey = synthetic_survey(5_000)
    margins = pl.DataFrame({"region": pl.Series(REGIONS, dtype=pl.Enum(REGIONS))}).join(
        pl.DataFrame({"age_band": pl.Series(AGE_BANDS, dtype=pl.Enum(AGE_BANDS))}), how="cross"
    )
    acct = Accountant(epsilon=1.0)
    rel = survey.lazy().dp.group_by(["region", "age_band"], margins=margins, accountant=acct)
    out = rel.agg(dpframe.agg.count(epsilon=1.0)).collect()
    assert out.height == len(REGIONS) * len(AGE_BANDS)
    assert out.filter(pl.col("region") == "Islands").height == len(AGE_BANDS)


def _sparse_release(**kw):
    """20 margins groups, 19 of them empty: at epsilon 0.05 about half of their noisy
    counts and sums fall below 0 unless clamped (all 19 >= 0: probability 2**-19)."""
    people = pl.DataFrame({"g": [0, 0, 1], "x": [1.0, 2.0, -3.0]})
    margins = pl.DataFrame({"g": list(range(20))})
    acct = dpframe.Accountant(epsilon=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
        release = dpframe.group_by(people, "g", margins=margins, seed=3, accountant=acct, **kw).agg(
            dpframe.agg.count(epsilon=0.05),
            dpframe.agg.sum("x", lower=0, upper=5, epsilon=0.05),
            dpframe.agg.sum("x", lower=-5, upper=5, epsilon=0.05, name="signed"),
        )
        return release.collect(), acct


def test_counts_and_nonnegative_sums_clamped_at_zero_by_default():
    out, _ = _sparse_release()
    assert out.schema["count"] == pl.Int64 and out.schema["x_sum"] == pl.Float64
    assert out["count"].min() >= 0 and out["x_sum"].min() >= 0
    assert out["signed"].min() < 0  # values may be negative: never clamped
    raw, _ = _sparse_release(nonnegative=False)
    assert raw["count"].min() < 0 and raw["x_sum"].min() < 0
    # the clamp is post-processing of the same draw: equal wherever raw is >= 0
    keep = raw["count"] >= 0
    assert out["count"].filter(keep).to_list() == raw["count"].filter(keep).to_list()


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_nonnegative_must_be_a_bool(bad):
    people = pl.DataFrame({"g": [0], "x": [1.0]})
    with pytest.raises(InvalidParameterError, match="nonnegative must be True or False"):
        dpframe.group_by(people, "g", margins=people.select("g"), nonnegative=bad)


@pytest.mark.parametrize(
    ("keys", "margins", "match"),
    [
        ("__bad__x", {"__bad__x": [1]}, "keeps for its own columns"),  # old: DuplicateError
        ("__rows", {"__rows": [1]}, "keeps for its own columns"),
        ("count:n", {"count:n": [1]}, "keeps for its own columns"),
        (1, {"g": [1]}, "keys must be a column name"),  # old: TypeError
        (None, {"g": [1]}, "keys must be a column name"),
        ("g", {"g": [1.0, float("nan")]}, "NaN keys"),  # old: released a null key
    ],
)
def test_bad_keys_are_refused_before_the_charge(keys, margins, match):
    frame = pl.DataFrame({"g": [1.0], "__bad__x": [1], "__rows": [1], "count:n": [1]})
    acct = Accountant(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match=match):
        frame.lazy().dp.group_by(keys, margins=pl.DataFrame(margins), accountant=acct).agg(
            dpframe.agg.count(epsilon=0.5)
        ).collect()
    assert acct.spent.epsilon == 0


def test_a_collected_release_keeps_no_exact_input():
    """After the draw the release holds released values and noisy parts only: the exact
    aggregates it was computed from are dropped (nothing later can reach them)."""
    people = pl.DataFrame({"region": ["N", "S", "N"], "income": [1.0, 2.0, 3.0]})
    with dpframe.Accountant(epsilon=1.0):
        release = dpframe.group_by(
            people, "region", margins=pl.DataFrame({"region": ["N", "S"]})
        ).agg(dpframe.agg.sum("income", lower=0, upper=5, epsilon=1.0))
        release.prepare()
        assert release._steps is not None
        release.collect()
    assert release._steps is None
