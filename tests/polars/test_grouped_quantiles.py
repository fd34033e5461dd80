"""Quantiles and medians in grouped releases and over a whole frame (issue 34).

Every public group is released (an empty one too), each value a grid edge inside
``[lower, upper]``, non-decreasing in ``q``; the release is charged its epsilon once
(``exponential``), shows a rank error before anything is spent and after release
(``accuracy()``), and its suite checks bounds, nulls and order.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.quantile import plan_quantiles, quantile_sides
from dpframe.mechanisms.statistics import quantile_grid

N = 4000
MARGINS = pl.DataFrame({"g": ["a", "b", "c", "empty"]})


@pytest.fixture(scope="module")
def people() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    return pl.DataFrame(
        {
            "g": rng.choice(["a", "b", "c"], N),
            "x": rng.uniform(0, 100, N),
            "pid": rng.integers(0, N // 4, N),
        }
    )


def _release(frame, acct, seed=1, **unit):
    return dpframe.group_by(frame, "g", margins=MARGINS, accountant=acct, seed=seed, **unit).agg(
        dpframe.agg.quantile("x", [0.1, 0.5, 0.9], lower=0, upper=100, epsilon=1.0),
        dpframe.agg.median("x", lower=0, upper=100, epsilon=0.5, resolution=0.5),
    )


def test_every_group_released_inside_the_bounds_on_the_grid_and_non_decreasing(people):
    acct = dpframe.Accountant(epsilon=2.0)
    table = _release(people, acct).collect()
    assert table.columns == ["g", "x_q10", "x_q50", "x_q90", "x_median"]
    assert table.height == 4 and table["g"].to_list() == MARGINS["g"].to_list()
    values = table.select(pl.exclude("g"))
    assert all(dt == pl.Float64 for dt in values.dtypes)
    grid = np.array(values.to_numpy())
    assert not np.isnan(grid).any() and (grid >= 0).all() and (grid <= 100).all()
    quantiles = grid[:, :3]
    assert (np.diff(quantiles, axis=1) >= 0).all()
    # on the grid: 1000 bins of 0.1, or the median's step 0.5
    assert np.allclose(quantiles * 10, np.round(quantiles * 10))
    assert np.allclose(grid[:, 3] * 2, np.round(grid[:, 3] * 2))
    entries = acct.ledger
    assert [e.mechanism for e in entries] == ["exponential"] * 2
    assert [e.epsilon for e in entries] == [1.0, 0.5]
    assert acct.spent.epsilon == pytest.approx(1.5)


def test_the_rank_error_holds_at_the_level_it_states(people):
    """|L(q_hat) - q n| <= rank_error(level) + the rows tied in one bin, in every group;
    level 1 - 1e-4 for each of 9 statements: the union bound leaves 9e-4 to fail."""
    level = 1 - 1e-4
    release = _release(people, dpframe.Accountant(epsilon=2.0), seed=5)
    table = release.collect()
    stat = release.statistics[0]
    rows, sides = quantile_sides(release.unit, "substitute")
    plan = plan_quantiles((0.1, 0.5, 0.9), quantile_grid(stat), 1.0, rows=rows, sides=sides)
    bound = plan.rank_error(level)
    for g in ["a", "b", "c"]:
        x = np.sort(people.filter(pl.col("g") == g)["x"].to_numpy())
        row = table.filter(pl.col("g") == g)
        for q, column in zip((0.1, 0.5, 0.9), ("x_q10", "x_q50", "x_q90"), strict=True):
            value = row[column].item()
            below, tied = np.searchsorted(x, value), np.sum(np.abs(x - value) < 0.1)
            assert abs(below - q * x.size) <= bound + tied, (g, q, value)


def test_summary_states_the_rank_error_before_anything_is_spent(people):
    acct = dpframe.Accountant(epsilon=2.0)
    summary = _release(people, acct).summarize()
    assert acct.spent.epsilon == 0.0
    row = summary.row(0, named=True)
    assert row["mechanism"] == "exponential" and row["epsilon"] == 1.0
    assert "rank error" in row["note"] and f"<= {row['error95']:.0f} rows" in row["note"]


def test_accuracy_after_release_is_the_rank_error_per_column(people):
    release = _release(people, dpframe.Accountant(epsilon=2.0))
    with pytest.raises(InvalidParameterError, match="collect"):
        release.accuracy()
    release.collect()
    acc = release.accuracy()
    assert acc.columns == [
        "g",
        "x_q10_error95",
        "x_q50_error95",
        "x_q90_error95",
        "x_median_error95",
    ]
    summary = release.summarize()
    assert acc["x_q50_error95"].to_list() == [summary["error95"][0]] * 4


def test_person_level_quantiles_pay_for_max_groups_rows_and_sides(people):
    acct = dpframe.Accountant(epsilon=2.0)
    release = _release(people, acct, unit="pid", max_rows=2, max_groups=3)
    release.collect()
    details = acct.ledger[0].details
    assert (details["rows"], details["sides"]) == (2, 6)  # substitute: 2 sides a group
    record = _release(people, dpframe.Accountant(epsilon=2.0)).summarize()["error95"][0]
    assert release.summarize()["error95"][0] > record


def test_the_suite_passes_and_catches_a_doctored_table(people):
    release = _release(people, dpframe.Accountant(epsilon=2.0))
    table = release.collect()
    assert dpframe.check(release).success
    swapped = table.with_columns(pl.col("x_q10").alias("x_q90"), pl.col("x_q90").alias("x_q10"))
    result = dpframe.check(release, swapped.with_columns(pl.lit(150.0).alias("x_median")))
    assert not result.success
    text = "\n".join(result.failures)
    assert "non-decreasing" in text and "x_median" in text
    nulls = dpframe.check(release, table.with_columns(pl.lit(None, pl.Float64).alias("x_q50")))
    assert not nulls.success


def test_the_spec_entry_round_trips_the_names(people):
    named = dpframe.agg.quantile("x", [0.025, 0.5], lower=0, upper=1, epsilon=1.0, name="v")
    acct = dpframe.Accountant(epsilon=3.0)
    release = dpframe.group_by(people, "g", margins=MARGINS, accountant=acct).agg(
        named, dpframe.agg.median("x", lower=0, upper=1, epsilon=1.0)
    )
    entry = release.to_spec("r")
    assert [s.get("name") for s in entry["statistics"]] == ["v", None]
    assert list(release.output_types()) == ["v_q2_5", "v_q50", "x_median"]
    from dpframe.polars.grouped import GroupedSpec, statistic

    spec = GroupedSpec.model_validate(entry)
    assert [o for s in spec.statistics for o in statistic(s).outputs()] == release.outputs


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: dpframe.agg.quantile("x", [], lower=0, upper=1, epsilon=1), "q must name"),
        (lambda: dpframe.agg.quantile("x", [0.5, 0.5], lower=0, upper=1, epsilon=1), "increasing"),
        (lambda: dpframe.agg.quantile("x", [0.0], lower=0, upper=1, epsilon=1), "strictly"),
        (lambda: dpframe.agg.quantile("x", "0.5", lower=0, upper=1, epsilon=1), "q must be"),
        (lambda: dpframe.agg.median("x", lower=0, upper=1, epsilon=0), "epsilon"),
        (lambda: dpframe.agg.median("x", lower=0, upper=1, epsilon=1, resolution=0), "resol"),
    ],
)
def test_bad_quantile_arguments_are_refused_by_name(make, match):
    with pytest.raises(InvalidParameterError, match=match):
        make()


def test_a_quantile_column_must_be_numeric(people):
    acct = dpframe.Accountant(epsilon=1.0)
    release = dpframe.group_by(people, "g", margins=MARGINS, accountant=acct).agg(
        dpframe.agg.median("g", lower=0, upper=1, epsilon=1.0)
    )
    with pytest.raises(dpframe.errors.InvalidDataError, match="numeric"):
        release.collect()
    assert acct.spent.epsilon == 0.0


def test_whole_frame_quantiles_are_one_row_by_the_function_and_the_namespace(people):
    acct = dpframe.Accountant(epsilon=3.0)
    table = dpframe.quantile(
        people, "x", q=[0.25, 0.75], lower=0, upper=100, epsilon=1.0, accountant=acct, seed=2
    ).collect()
    assert table.columns == ["x_q25", "x_q75"] and table.height == 1
    assert 15 < table["x_q25"].item() <= table["x_q75"].item() < 85
    again = people.lazy().dp.quantile(
        "x", q=[0.25, 0.75], lower=0, upper=100, epsilon=1.0, accountant=acct, seed=2
    )
    assert again.collect().equals(table)  # the same machinery, the same seed
    med = people.dp.median("x", lower=0, upper=100, epsilon=1.0, accountant=acct).collect()
    assert med.columns == ["x_median"] and 35 < med.item() < 65
    assert acct.spent.epsilon == pytest.approx(3.0)


def test_whole_frame_median_at_person_level_keeps_max_rows_a_person(people):
    acct = dpframe.Accountant(epsilon=1.0)
    release = dpframe.median(
        people, "x", lower=0, upper=100, epsilon=1.0, unit="pid", max_rows=1, accountant=acct
    )
    hist = release.exact_aggregates()["x_median:hist"].to_numpy()
    assert hist.sum() == people["pid"].n_unique()  # one row a person
    release.collect()
    assert (acct.ledger[0].details["rows"], acct.ledger[0].details["sides"]) == (1, 2)
    assert release.accuracy().columns == ["x_median_error95"]
