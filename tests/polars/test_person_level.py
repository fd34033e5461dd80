"""Person-level releases and Gaussian noise through the release objects (issue 16).

The sensitivities are brute-forced in tests/core/test_units.py and the bounding's laws in
tests/engines/test_bounding.py; here the pieces are checked together: a grouped release
under a person unit is charged the scaled sensitivity, its noise passes an empirical
privacy audit for a person with ``max_rows`` rows in ``max_groups`` groups added or
removed, and Gaussian counts charge rho on a zCDP budget only.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.core.units import PrivacyUnit, count_sensitivity
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.statistics import count, plan_statistic

MARGINS = pl.DataFrame({"ward": ["a", "b", "c"]})


def _visits(seed: int = 0, people: int = 60) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = people * 5
    return pl.DataFrame(
        {
            "patient": rng.integers(0, people, n),
            "ward": rng.choice(["a", "b", "c"], n),
            "cost": rng.uniform(0, 100, n),
        }
    )


@pytest.mark.slow  # seconds of repeated releases
def test_a_person_level_release_bounds_each_person_and_charges_the_scaled_sensitivity():
    acct = dpframe.Accountant(epsilon=2.0, unit="patient", max_rows=2, max_groups=2)
    visits = _visits()
    with acct:
        release = dpframe.group_by(visits, "ward", margins=MARGINS).agg(
            dpframe.agg.count(epsilon=0.5),
            dpframe.agg.sum("cost", lower=0, upper=50, epsilon=0.5),
        )
        plan = release.summarize()
        exact = release.exact_aggregates()
        out = release.collect()
    # substitute neighbours: 2 G R for counts, 2 G R M for sums
    assert plan["sensitivity"].to_list() == [8.0, 400.0]
    people = visits["patient"].n_unique()
    assert exact["count:n"].sum() <= people * 2 * 2  # nobody keeps more than R rows in G groups
    assert out.columns == ["ward", "count", "cost_sum"]  # the person column never leaves
    entries = acct.ledger
    assert {e.details["unit"] for e in entries} == {"patient"}
    assert {(e.details["max_rows"], e.details["max_groups"]) for e in entries} == {(2, 2)}
    assert acct.spent.epsilon == 1.0


def test_a_person_ledger_refuses_a_release_of_rows_and_spends_nothing():
    acct = dpframe.Accountant(epsilon=2.0, unit="patient", max_rows=1, max_groups=1)
    with pytest.raises(InvalidParameterError, match="patient"):
        dpframe.group_by(_visits(), "ward", margins=MARGINS, accountant=acct, unit="record").agg(
            dpframe.agg.count(epsilon=0.5)
        ).collect()
    assert acct.ledger == ()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"unit": "ward", "max_rows": 1, "max_groups": 1}, "group key"),
        ({"unit": "patient", "max_rows": 1, "max_groups": 1, "sizes": "n"}, "public group sizes"),
        ({"max_rows": 2}, "person identifier"),
    ],
)
def test_person_level_declarations_that_cannot_hold_are_refused(kwargs, match):
    margins = MARGINS.with_columns(n=pl.lit(100))
    with pytest.raises(InvalidParameterError, match=match):
        dpframe.group_by(_visits(), "ward", margins=margins, **kwargs).agg(
            dpframe.agg.mean("cost", lower=0, upper=50, epsilon=0.5)
        )


def _audit(plan, base: np.ndarray, shifts: np.ndarray, runs: int, seed: int) -> float:
    """A lower confidence bound on the privacy loss the plan's noise shows for the event
    'the released total is at least t', between D (counts ``base``) and D' (``base`` plus
    the added person's bounded contribution, ``shifts[i]`` in run i)."""
    rng = np.random.default_rng(seed)
    k = base.size
    d0 = plan.draw({"count:n": np.tile(base, runs)}, rng)["count"].reshape(runs, k).sum(1)
    d1 = plan.draw({"count:n": (base + shifts).ravel()}, rng)["count"].reshape(runs, k).sum(1)
    worst = 0.0
    for t in base.sum() + shifts[0].sum() + plan.scale * np.array([0.5, 1.0, 1.5, 2.0]):
        p0, p1 = (d0 >= t).mean(), (d1 >= t).mean()
        if min(p0, p1) * runs < 200:
            continue
        se = math.sqrt((1 - p0) / (p0 * runs) + (1 - p1) / (p1 * runs))  # delta method
        worst = max(worst, math.log(p1 / p0) - 4 * se)
    return worst


def test_an_empirical_audit_of_the_person_level_count_finds_no_loss_above_epsilon():
    """D' adds a person with 3 rows in each of 3 wards; bounded to R = 2 rows in G = 2
    wards chosen at random, their kept rows add 2 to two random wards."""
    eps, unit = 0.5, PrivacyUnit("patient", max_rows=2, max_groups=2)
    runs = 200_000
    rng = np.random.default_rng(7)
    base = np.array([40.0, 25.0, 10.0])
    chosen = np.argsort(rng.random((runs, 3)), axis=1)[:, :2]  # 2 of 3 wards, uniformly
    shifts = np.zeros((runs, 3))
    np.put_along_axis(shifts, chosen, 2.0, axis=1)
    plan = plan_statistic(count(epsilon=eps), "add_remove", unit=unit)
    assert plan.sensitivity == count_sensitivity(unit, "add_remove") == 4.0
    assert _audit(plan, base, shifts, runs, seed=1) <= eps
    # the audit can fail: calibrated for rows (sensitivity 1) the same person shows ~4 eps
    rows = plan_statistic(count(epsilon=eps), "add_remove")
    assert _audit(rows, base, shifts, runs, seed=2) > 1.5 * eps


def test_gaussian_counts_charge_rho_on_a_zcdp_budget_and_are_refused_by_a_pure_one():
    visits = _visits(1)
    stats = [
        dpframe.agg.count(mechanism="gaussian", rho=0.02),
        dpframe.agg.sum("cost", lower=0, upper=50, mechanism="gaussian", rho=0.03),
    ]
    pure = dpframe.Accountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(InvalidParameterError, match=r"zCDP budget"):
        dpframe.group_by(visits, "ward", margins=MARGINS, accountant=pure).agg(*stats).collect()
    assert pure.ledger == ()
    acct = dpframe.Accountant(rho=0.1, delta=1e-6)
    release = dpframe.group_by(visits, "ward", margins=MARGINS, accountant=acct).agg(*stats)
    summary = release.summarize()
    assert summary["rho"].to_list() == [0.02, 0.03] and summary["epsilon"].to_list() == [0, 0]
    release.collect()
    assert acct.spent.rho == pytest.approx(0.05)
    assert [e.details["rho"] for e in acct.ledger] == [0.02, 0.03]
    assert 0 < acct.spent.epsilon < 10  # the (epsilon, delta) it implies, shown beside rho


def test_gaussian_count_noise_has_the_calibrated_spread():
    plan = plan_statistic(count(mechanism="gaussian", rho=0.5), "add_remove")
    sigma = 1 / math.sqrt(2 * 0.5)  # l2 sensitivity 1 under add/remove
    assert plan.scale == pytest.approx(sigma, rel=1e-6)
    n = 100_000
    noise = plan.draw({"count:n": np.full(n, 50.0)}, np.random.default_rng(3))["count"] - 50
    assert np.array_equal(noise, np.round(noise))  # integer counts
    var = noise.var()
    # the variance of N_Z(0, 1) is a bit below 1; its estimate's standard error ~ sqrt(2/n)
    from dpframe.mechanisms.gaussian import discrete_gaussian_variance

    assert abs(var - discrete_gaussian_variance(sigma)) < 5 * math.sqrt(2 / n) * var


def test_releases_that_need_a_public_size_are_refused_under_a_person_unit():
    acct = dpframe.Accountant(epsilon=1.0, unit="patient")  # refused whatever the bounds
    frame = pl.DataFrame({"patient": [1, 1, 2], "x": [0.1, 0.5, 0.9], "y": [0.0, 1.0, 0.5]})
    with pytest.raises(InvalidParameterError, match="covariance matrix under a person unit"):
        dpframe.covariance_matrix(
            frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=0.5, n=3, accountant=acct
        )
    assert acct.ledger == ()


# -- missing person identifiers (issue 31) ------------------------------------------------

NAN = float("nan")
GROUPS = pl.DataFrame({"g": ["a", "b"]})


def _counts(rows, unit: PrivacyUnit, neighbours: str, seed: int):
    """The grouped count's exact (pre-noise) counts of ``rows`` and the sensitivity it is
    charged for, through the release's own path; ``None`` if the input is refused (then
    nothing may have been spent)."""
    frame = pl.DataFrame(
        {"pid": [p for p, _ in rows], "g": [g for _, g in rows]},
        schema={"pid": pl.Float64, "g": pl.String},
    )
    acct = dpframe.Accountant(epsilon=1.0, neighbours=neighbours)
    release = dpframe.group_by(
        frame,
        "g",
        margins=GROUPS,
        unit=unit.person,
        max_rows=unit.max_rows,
        max_groups=unit.max_groups,
        accountant=acct,
        seed=seed,
    ).agg(dpframe.agg.count(epsilon=1.0))
    charged = float(release.summarize()["sensitivity"][0])
    try:
        exact = release.exact_aggregates()
    except InvalidDataError:
        assert acct.ledger == ()
        return None, charged
    return tuple(exact["count:n"].to_list()), charged


def _people(rows) -> dict:
    out: dict = {}
    for p, g in rows:
        out.setdefault("nan" if p != p else p, set()).add(g)
    return out


@pytest.mark.slow  # seconds: every neighbour of a table, released
@pytest.mark.parametrize(("max_rows", "max_groups"), [(1, 1), (2, 1), (1, 2)])
def test_no_neighbour_moves_the_grouped_counts_by_more_than_charged_or_is_refused(
    max_rows, max_groups
):
    """Brute force over every dataset of up to 3 rows (a person 1.0, NaN or null; a group a
    or b) whose people each stay within max_groups groups (so its bounded counts do not
    depend on the bounding's draws), and every person added to it under add_remove -- a
    new id 2.0, or NaN, or null, with 1 to 3 rows: over 12 draws of the bounding, the
    pre-noise counts move by at most the charged l1 sensitivity, or the input is refused
    with nothing spent. (Before the fix NaN ids were one person: adding 3 NaN rows moved
    [2, 1] to [1, 2], an l1 change of 2 against a charged 1.)"""
    unit = PrivacyUnit("pid", max_rows=max_rows, max_groups=max_groups)
    states = [(p, g) for p in (1.0, NAN, None) for g in "ab"]
    bases = [
        rows
        for n in range(4)
        for rows in itertools.combinations_with_replacement(states, n)
        if all(len(gs) <= max_groups for gs in _people(rows).values())
    ]
    added = [
        rows
        for p in (2.0, NAN, None)
        for n in (1, 2, 3)
        for rows in itertools.combinations_with_replacement([(p, "a"), (p, "b")], n)
    ]
    worst, refused, checked = 0.0, 0, 0
    for base in bases:
        before = {_counts(base, unit, "add_remove", s) for s in range(3)}
        if any(b is None for b, _ in before):
            refused += 1
            continue
        assert len(before) == 1  # within the bounds: no draw changes the counts
        ((counts, charged),) = before
        for person in added:
            for seed in range(12):
                after, _ = _counts(base + person, unit, "add_remove", seed)
                if after is None:
                    refused += 1
                    break
                checked += 1
                moved = sum(abs(x - y) for x, y in zip(counts, after, strict=True))
                worst = max(worst, moved / charged)
    assert worst <= 1.0
    assert refused and checked  # both kinds of input were met


# -- no silent person bounds (issue 32) ---------------------------------------------------


def _count_by_ward(**kwargs):
    return lambda: dpframe.group_by(_visits(), "ward", margins=MARGINS, **kwargs).agg(
        dpframe.agg.count(epsilon=0.5)
    )


def _dp_count_by_ward(**kwargs):
    return lambda: (
        _visits().dp.group_by("ward", margins=MARGINS, **kwargs).agg(dpframe.agg.count(epsilon=0.5))
    )


def _pram(**kwargs):
    frame = pl.DataFrame({"patient": [1, 1, 2], "ward": ["a", "b", "a"]})
    columns = [{"column": "ward", "epsilon": 0.5, "categories": ["a", "b", "c"]}]
    return lambda: dpframe.pram.release(frame, columns, **kwargs)


@pytest.mark.parametrize(
    ("build", "acct_kwargs", "missing"),
    [
        (_count_by_ward(unit="patient"), {}, "max_rows/max_groups"),
        (_count_by_ward(unit="patient", max_rows=3), {}, "max_groups"),
        (_count_by_ward(unit="patient", max_groups=2), {}, "max_rows"),
        (_dp_count_by_ward(unit="patient"), {}, "max_rows/max_groups"),
        (_count_by_ward(), {"unit": "patient"}, "max_rows/max_groups"),
        (_count_by_ward(), {"unit": "patient", "max_rows": 3}, "max_groups"),
        (_count_by_ward(unit="patient"), {"unit": "patient"}, "max_rows/max_groups"),
        (_count_by_ward(unit=PrivacyUnit("patient", max_rows=3)), {}, "max_groups"),
        (_pram(unit="patient"), {}, "max_rows"),
        (_pram(), {"unit": "patient"}, "max_rows"),
    ],
)
def test_a_person_unit_without_stated_bounds_is_refused_and_spends_nothing(
    build, acct_kwargs, missing
):
    """``unit="nr"`` alone once meant max_rows = max_groups = 1: a count of person-years
    silently became a count of persons."""
    acct = dpframe.Accountant(epsilon=2.0, **acct_kwargs)
    with acct, pytest.raises(InvalidParameterError) as info:
        build().collect()
    message = str(info.value)
    assert message.startswith(f"{missing}: a release under the person unit 'patient'")
    assert "no default" in message and "quantile" in message
    assert acct.ledger == ()


def test_bounds_stated_to_the_accountant_are_the_defaults_of_its_releases():
    acct = dpframe.Accountant(epsilon=2.0, unit="patient", max_rows=3)
    with acct:
        release = _count_by_ward(max_groups=2)()
        same = _count_by_ward(unit="patient", max_groups=2)()
    assert acct.stated_bounds == {"max_rows": 3}
    assert (release.unit.max_rows, release.unit.max_groups) == (3, 2)
    assert same.unit == release.unit
    assert dpframe.Accountant(epsilon=1.0, unit="patient").stated_bounds == {}
    pram = _pram(unit=PrivacyUnit("patient", max_rows=2))()  # no groups: max_rows is all
    assert (pram.unit.max_rows, pram.unit.person) == (2, "patient")


def test_a_spec_under_a_person_unit_states_its_bounds():
    from dpframe.jobs import SpecError, parse_spec

    base = {
        "version": 1,
        "privacy": {"unit": "patient", "budget": {"epsilon": 1.0}, "ledger": "l.db"},
        "margins": {"wards": {"values": {"ward": ["a", "b", "c"]}}},
        "release": [
            {
                "name": "visits",
                "kind": "grouped",
                "by": ["ward"],
                "margins": "wards",
                "statistics": [{"stat": "count", "epsilon": 0.5}],
            }
        ],
    }
    with pytest.raises(SpecError, match=r"max_rows/max_groups: .*in the release or in \[privacy\]"):
        parse_spec(base, frame=_visits())
    base["release"][0]["max_rows"] = 3
    with pytest.raises(SpecError, match=r"release 'visits': max_groups: "):
        parse_spec(base, frame=_visits())
    base["privacy"]["max_groups"] = 2
    assert parse_spec(base, frame=_visits()).release[0].max_rows == 3
