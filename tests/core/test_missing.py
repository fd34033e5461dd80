"""dpframe.core.missing: the nulls= policy, and why "drop" keeps grouped sensitivities."""

from __future__ import annotations

import itertools
import math

import pytest

from dpframe.core.missing import MissingValues, check_nulls
from dpframe.core.units import PrivacyUnit, count_sensitivity, sum_sensitivity
from dpframe.errors import InvalidParameterError

GROUPS = ("a", "b")


def _parts(records, lo, hi):
    """Per-group counts and clipped sums of the records nulls='drop' keeps."""
    kept = [(g, v) for g, v in records if g is not None and v is not None]
    count = [sum(1 for g, _ in kept if g == k) for k in GROUPS]
    total = [sum(min(max(v, lo), hi) for g, v in kept if g == k) for k in GROUPS]
    return count, total


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (-2.0, 1.0), (3.0, 5.0)])
def test_drop_keeps_the_substitute_sensitivities_of_grouped_counts_and_sums(lo, hi):
    """Brute force over every dataset of 3 records (a key or null, a value or null) and
    every substitution of one record: the per-group counts and sums of the records kept
    move by no more than the substitute sensitivities dpframe uses (l1 and l2)."""
    states = [(g, v) for g in (*GROUPS, None) for v in (lo, (lo + hi) / 2, hi, hi + 7, None)]
    one = PrivacyUnit()
    worst = {"count1": 0.0, "count2": 0.0, "sum1": 0.0, "sum2": 0.0}
    for data in itertools.product(states, repeat=3):
        c0, s0 = _parts(data, lo, hi)
        for new in states:
            c1, s1 = _parts((new, *data[1:]), lo, hi)
            dc = [abs(x - y) for x, y in zip(c0, c1, strict=True)]
            ds = [abs(x - y) for x, y in zip(s0, s1, strict=True)]
            worst["count1"] = max(worst["count1"], sum(dc))
            worst["count2"] = max(worst["count2"], math.hypot(*dc))
            worst["sum1"] = max(worst["sum1"], sum(ds))
            worst["sum2"] = max(worst["sum2"], math.hypot(*ds))
    assert worst["count1"] <= count_sensitivity(one, "substitute") + 1e-12
    assert worst["count2"] <= count_sensitivity(one, "substitute", "l2") + 1e-12
    assert worst["sum1"] <= sum_sensitivity(lo, hi, one, "substitute") + 1e-12
    assert worst["sum2"] <= sum_sensitivity(lo, hi, one, "substitute", "l2") + 1e-12
    # and a record that becomes dropped does move them (the bound is not vacuous)
    assert worst["count1"] >= 1 and worst["sum1"] >= max(abs(lo), abs(hi)) - 1e-12


def test_policies():
    assert check_nulls("refuse", public_sizes=True) == MissingValues()
    assert check_nulls("drop", public_sizes=False).policy == "drop"
    fill = check_nulls({"income": 0, "region": "unknown"}, public_sizes=True)
    assert fill == MissingValues("fill", {"income": 0.0, "region": "unknown"})
    assert check_nulls(fill, public_sizes=True) == fill
    assert "number kept is data" in check_nulls("drop", public_sizes=False).note


@pytest.mark.parametrize(
    ("value", "sizes", "match"),
    [
        ("drop", True, "public sizes"),
        ("ignore", False, "'refuse', 'drop'"),
        ({}, False, "empty"),
        ({"x": float("nan")}, False, "finite number"),
        ({"x": float("inf")}, False, "finite number"),
        ({"x": True}, False, "finite number"),
        ({"x": None}, False, "finite number"),
        ({3: 1.0}, False, "names"),
        (["x"], False, "list"),
        (None, False, "NoneType"),
    ],
)
def test_bad_policies_are_named(value, sizes, match):
    with pytest.raises(InvalidParameterError, match=match):
        check_nulls(value, public_sizes=sizes)
