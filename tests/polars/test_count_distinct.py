"""``dpframe.agg.count_distinct``: the distinct persons per group of a person-level
grouped release ("patients per ward", not visits), issue 34.

What it promises: refused where there are no persons to count (the record unit) or where
asked for another column, with the fix and nothing spent; the exact part is the number of
persons each group keeps after bounding (from the same kept rows as the release's counts);
the noise is calibrated to ``distinct_sensitivity`` (no ``max_rows`` factor), Laplace or
discrete Gaussian; the released column is an integer, never null, >= 0 (``nonnegative``)
and at most the release's count of rows in every group; its suite catches a table that
breaks these; its accuracy stays honest after the clamp.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit, distinct_sensitivity
from dpframe.engines.bounding import bounded_frame
from dpframe.errors import InvalidParameterError

WARDS = pl.DataFrame({"ward": ["A", "B", "C", "D"]})  # D: nobody


def visits(n: int = 600, persons: int = 120, seed: int = 0) -> pl.DataFrame:
    """Visits: several a patient, in several wards (never D)."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "patient": rng.integers(0, persons, n),
            "ward": rng.choice(["A", "B", "C"], n),
            "days": rng.integers(1, 30, n).astype(float),
        }
    )


def grouped(frame, accountant=None, seed=7, **unit):
    unit = unit or {"unit": "patient", "max_rows": 3, "max_groups": 2}
    accountant = accountant or dpframe.Accountant(epsilon=100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        return dpframe.group_by(
            frame, "ward", margins=WARDS, accountant=accountant, seed=seed, **unit
        )


# -- refusals ------------------------------------------------------------------------------


def test_the_record_unit_is_refused_naming_unit_and_the_fix():
    acct = dpframe.Accountant(epsilon=5.0)
    with pytest.raises(InvalidParameterError) as caught:
        dpframe.group_by(visits(), "ward", margins=WARDS, accountant=acct).agg(
            dpframe.agg.count_distinct(epsilon=1.0)
        )
    message = str(caught.value)
    assert message.startswith("unit: 'persons' (count_distinct) counts distinct persons")
    assert "pass unit='<person column>' with max_rows=... and max_groups=..." in message
    assert "Nothing was spent." in message
    assert acct.ledger == ()


def test_another_column_is_refused_by_name_and_the_person_column_is_taken():
    acct = dpframe.Accountant(epsilon=5.0)
    with pytest.raises(InvalidParameterError, match=r"^column: count_distinct counts the persons"):
        grouped(visits(), acct).agg(dpframe.agg.count_distinct(column="days", epsilon=1.0))
    assert acct.ledger == ()
    named = grouped(visits(), acct).agg(dpframe.agg.count_distinct(column="patient", epsilon=1.0))
    unnamed = grouped(visits(), acct).agg(dpframe.agg.count_distinct(epsilon=1.0))
    assert named.collect().equals(unnamed.collect())  # the same seed, the same release


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "epsilon: Laplace noise needs epsilon"),
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": 1.0, "sigma": 2.0}, "rho, sigma: these set Gaussian noise"),
        ({"mechanism": "gaussian", "epsilon": 1.0}, "epsilon: Gaussian noise is charged rho"),
        ({"epsilon": 1.0, "name": ""}, "name must be a non-empty string"),
        ({"epsilon": 1.0, "column": ""}, "column must be a column name"),
    ],
)
def test_bad_arguments_are_refused_as_a_counts_are(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        dpframe.agg.count_distinct(**kwargs)


# -- the exact part --------------------------------------------------------------------


def test_exact_part_is_the_kept_persons_from_the_same_rows_as_the_counts():
    frame = visits()
    release = grouped(frame).agg(
        dpframe.agg.count(epsilon=1.0), dpframe.agg.count_distinct(epsilon=1.0)
    )
    exact = release.exact_aggregates()
    rows, persons = exact["count:n"].to_numpy(), exact["persons:persons"].to_numpy()
    assert persons[-1] == rows[-1] == 0  # ward D: nobody
    assert (persons <= rows).all() and (persons < rows).any()
    assert (rows <= 3 * persons).all()  # at most max_rows rows a person and ward
    # the same counts as the bounded rows of the same seed, counted by polars
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = RandomSource(seed=7)
    kept = bounded_frame(frame.lazy(), PrivacyUnit("patient", 3, 2), ["ward"], source)
    by_hand = WARDS.join(
        kept.group_by("ward")
        .agg(pl.len().alias("n"), pl.col("patient").n_unique().alias("p"))
        .collect(),
        on="ward",
        how="left",
    ).fill_null(0)
    assert persons.tolist() == by_hand["p"].cast(pl.Float64).to_list()
    assert rows.tolist() == by_hand["n"].cast(pl.Float64).to_list()


def test_without_bounding_it_is_the_number_of_distinct_persons():
    frame = visits()
    release = grouped(frame, unit="patient", max_rows=50, max_groups=3).agg(
        dpframe.agg.count_distinct(epsilon=1.0)
    )
    exact = release.exact_aggregates()
    truth = WARDS.join(
        frame.group_by("ward").agg(pl.col("patient").n_unique().alias("p")), on="ward", how="left"
    ).fill_null(0)
    assert exact["persons:persons"].to_list() == truth["p"].cast(pl.Float64).to_list()


# -- the noise -----------------------------------------------------------------------------


@pytest.mark.parametrize("neighbours", ["add_remove", "substitute"])
def test_the_plan_is_calibrated_to_max_groups_not_max_rows(neighbours):
    acct = dpframe.Accountant(epsilon=5.0, neighbours=neighbours)
    release = grouped(visits(), acct, unit="patient", max_rows=7, max_groups=2).agg(
        dpframe.agg.count_distinct(epsilon=0.5)
    )
    row = release.summarize().row(0, named=True)
    delta = distinct_sensitivity(PrivacyUnit("patient", 7, 2), neighbours)
    assert row["sensitivity"] == delta == (2.0 if neighbours == "add_remove" else 4.0)
    assert row["scale"] == delta / 0.5
    release.collect()
    (entry,) = acct.ledger
    assert entry.epsilon == 0.5 and entry.mechanism == "laplace"
    assert entry.details["statistic"] == "count_distinct"


def test_gaussian_noise_charges_rho_of_the_l2_sensitivity():
    acct = dpframe.Accountant(rho=1.0, delta=1e-6, neighbours="add_remove")
    release = grouped(visits(), acct, unit="patient", max_rows=3, max_groups=4).agg(
        dpframe.agg.count_distinct(mechanism="gaussian", sigma=5.0)
    )
    out = release.collect()
    (entry,) = acct.ledger
    # l2 sensitivity sqrt(4) = 2: rho = 2**2 / (2 * 5**2), charged at least that
    assert entry.mechanism == "gaussian"
    assert acct.spent.rho == pytest.approx(4 / 50, rel=1e-9) and acct.spent.rho >= 4 / 50
    assert out["persons"].dtype == pl.Int64


# -- post-processing and the suite ---------------------------------------------------------


def test_released_persons_are_integers_nonnegative_and_at_most_the_count():
    clamped = 0
    for seed in range(15):
        release = grouped(visits(n=60, persons=30), seed=seed).agg(
            dpframe.agg.count(epsilon=0.2), dpframe.agg.count_distinct(epsilon=0.2)
        )
        out = release.collect()
        assert out["persons"].dtype == pl.Int64 and out["persons"].null_count() == 0
        assert (out["persons"] >= 0).all()
        assert (out["persons"] <= out["count"]).all()
        drawn = release._drawn[1]["persons"]  # the noisy value before post-processing
        clamped += int((drawn > np.maximum(out["count"].to_numpy(), 0)).sum())
    assert clamped > 0  # the clamp was needed, and applied


def test_without_a_count_nothing_caps_it_and_nonnegative_false_keeps_the_noise():
    release = grouped(visits(), seed=3).agg(dpframe.agg.count_distinct(epsilon=0.05))
    out = release.collect()
    assert out["persons"].to_list() == np.maximum(np.rint(release._drawn[0]["persons"]), 0).tolist()
    raw = dpframe.group_by(
        visits(),
        "ward",
        margins=WARDS,
        seed=3,
        unit="patient",
        max_rows=3,
        max_groups=2,
        nonnegative=False,
        accountant=dpframe.Accountant(epsilon=1.0),
    ).agg(dpframe.agg.count_distinct(epsilon=0.05))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = raw.collect()["persons"].to_numpy()
    assert values.tolist() == np.rint(raw._drawn[0]["persons"]).tolist()


def test_the_suite_passes_a_release_and_catches_a_distinct_count_above_the_count():
    release = grouped(visits()).agg(
        dpframe.agg.count(epsilon=1.0), dpframe.agg.count_distinct(epsilon=1.0)
    )
    out = release.collect()
    assert dpframe.check(release).success
    above = out.with_columns(
        pl.when(pl.col("ward") == "B")
        .then(pl.col("count") + 1)
        .otherwise(pl.col("persons"))
        .alias("persons")
    )
    result = dpframe.check(release, above)
    assert not result.success
    assert "above the released count of rows" in str(result.failures)
    negative = out.with_columns(pl.lit(-1, dtype=pl.Int64).alias("persons"))
    assert not dpframe.check(release, negative).success


def test_the_accuracy_after_the_clamp_covers_the_truth():
    """The stated 95% half-width holds the exact distinct count at least 95% of the time,
    clamped or not (binomial tolerance: 240 groups, 3 sigma below 0.95). The bounds do
    not bind on these data (at most a few visits a patient and ward), so the truth is the
    plain number of patients per ward. The count is much noisier than the distinct count,
    so a clamp often moves the value far from the truth: the distinct count's own
    half-width would not cover it there."""
    frame = visits(n=2000, persons=600)
    most = frame.group_by("patient", "ward").len()["len"].max()
    truth = (
        WARDS.join(
            frame.group_by("ward").agg(pl.col("patient").n_unique().alias("p")),
            on="ward",
            how="left",
        )["p"]
        .fill_null(0)
        .to_numpy()
    )
    covered = clamped = total = 0
    for seed in range(60):
        release = grouped(frame, seed=seed, unit="patient", max_rows=most, max_groups=3).agg(
            dpframe.agg.count(epsilon=0.05), dpframe.agg.count_distinct(epsilon=1.0)
        )
        out = release.collect()
        h = release.accuracy()["persons_error95"].to_numpy()
        covered += int((np.abs(out["persons"].to_numpy() - truth) <= h).sum())
        clamped += int((release._drawn[1]["persons"] > release._drawn[0]["count"]).sum())
        total += truth.size
    assert clamped > total // 10  # the clamp bit often
    assert covered / total >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / total)


def test_distinct_persons_beside_a_median_come_from_the_same_kept_rows() -> None:
    """A release that holds a quantile counts every part on the bounded frame (not the
    compiled kernel's path): its distinct persons and counts are the same as without it."""
    import numpy as np

    rng = np.random.default_rng(3)
    n = 2000
    df = pl.DataFrame(
        {
            "pid": rng.integers(0, 300, n),
            "g": rng.choice(["a", "b", "c"], n),
            "x": rng.uniform(0, 10, n),
        }
    )
    margins = pl.DataFrame({"g": ["a", "b", "c", "d"]})

    def exact(*extra: dpframe.agg.Statistic) -> pl.DataFrame:
        acct = dpframe.Accountant(epsilon=10.0)
        grouping = dpframe.group_by(
            df,
            "g",
            margins=margins,
            unit="pid",
            max_rows=2,
            max_groups=2,
            accountant=acct,
            seed=11,
        )
        stats = [dpframe.agg.count(epsilon=1.0), dpframe.agg.count_distinct(epsilon=1.0)]
        release = grouping.agg(*stats, *extra)
        return release.exact_aggregates().select("g", "count:n", "persons:persons")

    alone = exact()
    beside = exact(dpframe.agg.median("x", lower=0, upper=10, epsilon=1.0))
    assert beside.equals(alone)
    assert alone["persons:persons"].to_list()[-1] == 0  # the empty group
