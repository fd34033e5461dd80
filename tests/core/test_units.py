"""Brute-force checks of the person-level sensitivities in dpframe.core.units.

A person's contribution *after* bounding is a set of at most ``G = max_groups`` distinct
groups out of ``J``, with 1 to ``R = max_rows`` rows in each, every value clipped to
``[lower, upper]``. A grouped release is the vector over the ``J`` groups of the counts of
kept rows, or of the sums of kept values. The other persons' kept rows are the same in both
neighbours (each person's bounding depends only on their own rows and fresh randomness),
so a release changes by exactly the difference of the changed person's contributions:
one contribution against zero (``add_remove``) or two contributions (``substitute``).

Part 1 enumerates every valid contribution on small domains (``J <= 4``, and ``J = 6`` for
``G = 3``; values on a grid holding both bounds and interior points) and takes the largest
l1 and l2 norm of the difference over every pair. The formulas must hold everywhere and be
reached whenever the domain can reach the extreme: ``J >= G`` (add/remove), ``J >= 2G``
(substitute; with fewer groups the old and the new person must share some, and the
formulas, which do not know ``J``, are upper bounds).

Part 2 includes the bounding: explicit datasets of two or three raw persons with more rows
than the caps (values outside the bounds too, clipped), every kept subset of every person
within the caps (a superset of any policy the engine may use), the unchanged persons'
kept subsets shared between the neighbours, and the release computed from all kept rows.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
import pytest

from dpframe.core.units import (
    RECORD,
    PrivacyUnit,
    as_unit,
    changed_groups,
    count_sensitivity,
    sum_sensitivity,
)
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.statistics import _product_bounds, _square_bounds

RELATIONS = ("add_remove", "substitute")
NORMS = ("l1", "l2")
REL = 1e-12

#: Bounds of several shapes, and the bounds of squares and products that the moment
#: releases (variance, covariance) sum, derived from them as the statistics module does.
BASE_BOUNDS = [(0.0, 1.0), (-1.0, 1.0), (-3.0, 1.0), (2.0, 5.0), (-5.0, -2.0)]
DERIVED_BOUNDS = [
    _square_bounds(-3.0, 1.0),  # (0, 9)
    _square_bounds(-5.0, -2.0),  # (4, 25)
    _product_bounds(-3.0, 1.0, 2.0, 5.0),  # (-15, 5)
    _product_bounds(-5.0, -2.0, 2.0, 5.0),  # (-25, -4)
    _product_bounds(0.0, 1.0, -5.0, -2.0),  # (-5, 0)
]
BOUNDS = BASE_BOUNDS + DERIVED_BOUNDS
SHAPES = [(j, g, r) for j in range(1, 5) for g in range(1, 4) for r in range(1, 4)]
SHAPES += [(6, 3, 1), (6, 3, 2)]  # the only way to reach 2G distinct groups with G = 3

#: At most this many distinct sum vectors per case (the grid shrinks to stay under it).
MAX_VECTORS = 1500


def tight_domain(j: int, g: int, neighbours: str) -> bool:
    """Whether J groups leave room for the worst case: G groups, 2G under substitution."""
    return j >= (2 * g if neighbours == "substitute" else g)


def assert_holds(brute: float, formula: float, tight: bool) -> None:
    assert brute <= formula * (1 + REL) + 1e-12, (brute, formula)
    if tight:
        assert brute >= formula * (1 - REL) - 1e-12, (brute, formula)


def unit_of(g: int, r: int) -> PrivacyUnit:
    return RECORD if (g, r) == (1, 1) else PrivacyUnit("person", max_rows=r, max_groups=g)


# ------------------------------------------------------------- part 1: every contribution


def value_grid(lower: float, upper: float, points: int) -> list[float]:
    """``points`` values from ``lower`` to ``upper`` (both bounds exactly, the rest inside)."""
    inner = [lower + (upper - lower) * k / (points - 1) for k in range(1, points - 1)]
    return [lower, *inner, upper]


def group_options(lower: float, upper: float, r: int, points: int) -> list[tuple[int, float]]:
    """Every (rows, sum) one person's kept rows can put in one group: 1..R grid values."""
    values = value_grid(lower, upper, points)
    return sorted(
        {
            (k, math.fsum(rows))
            for k in range(1, r + 1)
            for rows in itertools.combinations_with_replacement(values, k)
        }
    )


def contributions_on(
    j: int, g: int, r: int, lower: float, upper: float, points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every valid contribution: (distinct count vectors, distinct sum vectors), J columns."""
    options = group_options(lower, upper, r, points)
    rows = []
    for k in range(1, g + 1):
        for groups in itertools.combinations(range(j), k):
            for choice in itertools.product(options, repeat=k):
                counts, sums = [0] * j, [0.0] * j
                for group, (n, total) in zip(groups, choice, strict=True):
                    counts[group], sums[group] = n, total
                rows.append(counts + sums)
    table = np.array(rows, dtype=np.float64)
    return np.unique(table[:, :j], axis=0), np.unique(table[:, j:], axis=0)


@cache
def contributions(
    j: int, g: int, r: int, lower: float, upper: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`contributions_on` on the finest grid (5, 3 or 2 points) that stays small."""
    for points in (5, 3, 2):
        options = len(group_options(lower, upper, r, points))
        estimate = sum(math.comb(j, k) * options**k for k in range(g + 1))
        if estimate <= 4 * MAX_VECTORS or points == 2:
            counts, sums = contributions_on(j, g, r, lower, upper, points)
            if len(sums) <= MAX_VECTORS or points == 2:
                return counts, sums, points
    raise AssertionError("unreachable")


def max_norms(a: np.ndarray, b: np.ndarray | None) -> tuple[float, float]:
    """Largest l1 and l2 norm of ``x - y`` over every x and y in ``a`` (y = 0 if ``b`` is
    None; otherwise ``b`` is ``a``, and each unordered pair is visited once)."""
    if b is None:
        return float(np.abs(a).sum(axis=1).max()), float(np.sqrt((a * a).sum(axis=1).max()))
    best1 = best2 = 0.0
    chunk = max(1, 2_000_000 // (len(a) * a.shape[1]))
    for i in range(0, len(a), chunk):
        d = a[i : i + chunk, None, :] - a[None, i:, :]
        best2 = max(best2, float(np.einsum("ijk,ijk->ij", d, d).max()))
        best1 = max(best1, float(np.abs(d, out=d).sum(axis=2).max()))
    return best1, math.sqrt(best2)


@cache
def brute(j: int, g: int, r: int, lower: float, upper: float, neighbours: str) -> dict:
    counts, sums, points = contributions(j, g, r, lower, upper)
    other = None if neighbours == "add_remove" else counts
    count_l1, count_l2 = max_norms(counts, other)
    other = None if neighbours == "add_remove" else sums
    sum_l1, sum_l2 = max_norms(sums, other)
    return {
        "count": {"l1": count_l1, "l2": count_l2},
        "sum": {"l1": sum_l1, "l2": sum_l2},
        "points": points,
    }


@pytest.mark.parametrize("neighbours", RELATIONS)
@pytest.mark.parametrize(("j", "g", "r"), SHAPES)
def test_count_sensitivity(j, g, r, neighbours):
    found = brute(j, g, r, 0.0, 1.0, neighbours)["count"]
    unit = unit_of(g, r)
    for norm in NORMS:
        formula = count_sensitivity(unit, neighbours, norm)
        assert_holds(found[norm], formula, tight_domain(j, g, neighbours))


@pytest.mark.parametrize("neighbours", RELATIONS)
@pytest.mark.parametrize(("lower", "upper"), BOUNDS)
@pytest.mark.parametrize(("j", "g", "r"), SHAPES)
def test_sum_sensitivity(j, g, r, lower, upper, neighbours):
    found = brute(j, g, r, lower, upper, neighbours)
    unit = unit_of(g, r)
    for norm in NORMS:
        formula = sum_sensitivity(lower, upper, unit, neighbours, norm)
        tight = tight_domain(j, g, neighbours)
        assert_holds(found["sum"][norm], formula, tight)


def test_grids_hold_interior_points():
    # the grid shrinks only where it must; most cases see 5 values, every case the bounds
    points = [contributions(j, g, r, lo, hi)[2] for j, g, r in SHAPES for lo, hi in BOUNDS]
    assert points.count(5) > len(points) // 2
    assert min(points) == 2
    assert value_grid(-3.0, 1.0, 5) == [-3.0, -2.0, -1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("lower", "upper", "r", "expected"),
    [
        # l2, substitute, one group each: the same group (width W) or two groups (sqrt2 RM)
        (-1.0, 1.0, 1, 2.0),  # W = 2 > sqrt2
        (-1.0, 1.0, 3, 6.0),  # W = 6 > 3 sqrt2
        (2.0, 5.0, 1, 5 * math.sqrt(2)),  # W = 3 < 5 sqrt2
        (2.0, 5.0, 3, 15 * math.sqrt(2)),  # W = 15 - 2 = 13 < 15 sqrt2
        (-3.0, 1.0, 3, 9 * math.sqrt(2)),  # W = 3 + 9 = 12 < 9 sqrt2 = 12.73
        (-15.0, 5.0, 1, 15 * math.sqrt(2)),  # W = 20 < 15 sqrt2 = 21.21
        (-5.0, 0.0, 2, 10 * math.sqrt(2)),  # W = 10 < 10 sqrt2
    ],
)
def test_sum_l2_substitute_both_branches(lower, upper, r, expected):
    found = brute(2, 1, r, lower, upper, "substitute")["sum"]["l2"]
    unit = unit_of(1, r)
    assert found == pytest.approx(expected, rel=REL)
    assert sum_sensitivity(lower, upper, unit, "substitute", "l2") == pytest.approx(expected)


def test_same_group_branch_reached_with_one_group():
    # J = 1: the old and the new person share the only group; the width branch still binds
    # for symmetric bounds, so the formula is reached although J < 2G
    unit = unit_of(1, 2)
    found = brute(1, 1, 2, -1.0, 1.0, "substitute")["sum"]["l2"]
    assert found == pytest.approx(sum_sensitivity(-1, 1, unit, "substitute", "l2")) == 4.0


@pytest.mark.parametrize("neighbours", RELATIONS)
@pytest.mark.parametrize(("j", "g", "r"), [s for s in SHAPES if s[0] <= 4 and s[2] <= 2])
def test_changed_groups(j, g, r, neighbours):
    # the entries of the (count, sum) vector that differ, over every pair of contributions
    options = group_options(-1.0, 1.0, r, 2)
    vectors = [np.zeros(j * 2)] if neighbours == "add_remove" else []
    people = []
    for k in range(1, g + 1):
        for groups in itertools.combinations(range(j), k):
            for choice in itertools.product(options, repeat=k):
                v = np.zeros(j * 2)
                for group, (n, total) in zip(groups, choice, strict=True):
                    v[group], v[j + group] = n, total
                people.append(v)
    a = np.unique(np.array(people), axis=0)
    b = np.array(vectors) if vectors else a
    diff = a[:, None, :] != b[None, :, :]
    changed = int((diff[:, :, :j] | diff[:, :, j:]).sum(axis=2).max())
    unit = unit_of(g, r)
    assert changed == changed_groups(unit, neighbours, j)
    assert changed_groups(unit, neighbours) == g * (2 if neighbours == "substitute" else 1)
    assert changed <= changed_groups(unit, neighbours)


def test_record_unit_is_the_one_row_person():
    one = PrivacyUnit("person", max_rows=1, max_groups=1)
    for neighbours in RELATIONS:
        assert changed_groups(RECORD, neighbours) == changed_groups(one, neighbours)
        for norm in NORMS:
            assert count_sensitivity(RECORD, neighbours, norm) == count_sensitivity(
                one, neighbours, norm
            )
            for lo, hi in BOUNDS:
                assert sum_sensitivity(lo, hi, RECORD, neighbours, norm) == sum_sensitivity(
                    lo, hi, one, neighbours, norm
                )


# ------------------------------------------------- part 2: raw persons and the bounding

#: Raw values per bounds: below the lower bound, at the upper bound, above it.
RAW_BOUNDS = [(-3.0, 1.0), (2.0, 5.0)]
RAW_GROUPS = 3
RAW_CAPS = [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1)]

Row = tuple[int, float]  # (group, raw value)


def raw_values(lower: float, upper: float) -> tuple[float, ...]:
    return (lower - 2.0, upper, upper + 3.0)


def kept_subsets(rows: tuple[Row, ...], g: int, r: int) -> list[tuple[Row, ...]]:
    """Every outcome of bounding one person: <= G of their groups, 1..R rows in each."""
    by_group: dict[int, list[Row]] = {}
    for row in rows:
        by_group.setdefault(row[0], []).append(row)
    per_group = {
        group: {
            tuple(sorted(sub))
            for k in range(1, min(r, len(own)) + 1)
            for sub in itertools.combinations(own, k)
        }
        for group, own in by_group.items()
    }
    out = set()
    for k in range(1, min(g, len(by_group)) + 1):
        for groups in itertools.combinations(sorted(by_group), k):
            for parts in itertools.product(*(per_group[group] for group in groups)):
                out.add(tuple(sorted(itertools.chain.from_iterable(parts))))
    return sorted(out)


def release(kept: list[tuple[Row, ...]], lower: float, upper: float) -> tuple[float, ...]:
    """Per-group counts then sums of every kept row of every person, values clipped."""
    counts, sums = [0.0] * RAW_GROUPS, [0.0] * RAW_GROUPS
    for person in kept:
        for group, value in person:
            counts[group] += 1.0
            sums[group] += min(max(value, lower), upper)
    return (*counts, *sums)


def raw_persons(lower: float, upper: float, most: int = 4) -> list[tuple[Row, ...]]:
    """Every person with 1..``most`` rows over the groups, values from :func:`raw_values`."""
    types = [(g, v) for g in range(RAW_GROUPS) for v in raw_values(lower, upper)]
    return [
        rows
        for k in range(1, most + 1)
        for rows in itertools.combinations_with_replacement(types, k)
    ]


def unchanged_persons(lower: float, upper: float) -> list[tuple[Row, ...]]:
    """Two persons who stay: more rows than the caps, in several groups, some clipped."""
    below, at, above = raw_values(lower, upper)
    return [
        ((0, above), (0, below), (0, at), (1, at)),
        ((1, below), (2, above), (2, at)),
    ]


@cache
def raw_brute(g: int, r: int, lower: float, upper: float, stayers: int) -> dict:
    """Largest change of the release over explicit neighbouring datasets (see module)."""
    persons = raw_persons(lower, upper)
    outcomes = sorted({k for p in persons for k in kept_subsets(p, g, r)})
    stay = unchanged_persons(lower, upper)[:stayers]
    found = {rel: {"count": [0.0, 0.0], "sum": [0.0, 0.0]} for rel in RELATIONS}
    for shared in itertools.product(*(kept_subsets(p, g, r) for p in stay)):
        base = np.array(release(list(shared), lower, upper))
        with_person = np.unique(
            np.array([release([*shared, k], lower, upper) for k in outcomes]), axis=0
        )
        for rel in RELATIONS:
            other = base[None, :] if rel == "add_remove" else with_person
            d = with_person[:, None, :] - other[None, :, :]
            for part, cols in (("count", slice(0, RAW_GROUPS)), ("sum", slice(RAW_GROUPS, None))):
                x = d[:, :, cols]
                best = found[rel][part]
                best[0] = max(best[0], float(np.abs(x).sum(axis=2).max()))
                best[1] = max(best[1], float(np.sqrt((x * x).sum(axis=2).max())))
    return found


@pytest.mark.parametrize("stayers", [1, 2])
@pytest.mark.parametrize(("lower", "upper"), RAW_BOUNDS)
@pytest.mark.parametrize(("g", "r"), RAW_CAPS)
def test_bounding_then_release(g, r, lower, upper, stayers):
    found = raw_brute(g, r, lower, upper, stayers)
    unit = unit_of(g, r)
    for rel in RELATIONS:
        tight = tight_domain(RAW_GROUPS, g, rel)
        for i, norm in enumerate(NORMS):
            assert_holds(found[rel]["count"][i], count_sensitivity(unit, rel, norm), tight)
            formula = sum_sensitivity(lower, upper, unit, rel, norm)
            assert_holds(found[rel]["sum"][i], formula, tight)


def test_bounding_outcomes_respect_the_caps():
    rows = ((0, 1.0), (0, 2.0), (0, 3.0), (1, 4.0), (2, 5.0))
    for g, r in RAW_CAPS:
        for kept in kept_subsets(rows, g, r):
            groups = [row[0] for row in kept]
            assert 1 <= len(set(groups)) <= g
            assert max(groups.count(x) for x in set(groups)) <= r
    # G = 2, R = 2: the maximal outcomes the engine keeps are among them
    assert ((0, 1.0), (0, 3.0), (2, 5.0)) in kept_subsets(rows, 2, 2)
    assert len(kept_subsets(rows, 1, 1)) == 5


def test_redrawn_bounding_of_the_others_would_break_the_bound():
    # the argument needs the stayers' kept rows to be shared by the neighbours: were a
    # stayer's rows re-chosen, removing one row-person could move a sum by far more
    lower, upper = 0.0, 1.0
    unit = unit_of(1, 1)
    stayer = ((0, 5.0), (1, 5.0))  # keeps one of two groups, value clipped to 1
    changed = ((0, 5.0),)
    d = release([(stayer[0],), changed], lower, upper)
    d_prime = release([(stayer[1],)], lower, upper)
    change = sum(abs(x - y) for x, y in zip(d[RAW_GROUPS:], d_prime[RAW_GROUPS:], strict=True))
    assert change == 3.0 > sum_sensitivity(lower, upper, unit, "add_remove")


# ------------------------------------------------------------------------- validation


@pytest.mark.parametrize("argument", ["max_rows", "max_groups"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None, 2.0])
def test_bad_bounds_raise_naming_the_argument(argument, bad):
    with pytest.raises(InvalidParameterError, match=argument):
        PrivacyUnit("person", **{argument: bad})


@pytest.mark.parametrize(
    "bounds", [{"max_rows": 2}, {"max_groups": 3}, {"max_rows": 2, "max_groups": 2}]
)
def test_bounds_need_a_person(bounds):
    with pytest.raises(InvalidParameterError, match="person identifier"):
        PrivacyUnit(**bounds)
    with pytest.raises(InvalidParameterError, match="person identifier"):
        as_unit(None, **bounds)
    with pytest.raises(InvalidParameterError, match="person identifier"):
        as_unit("record", **bounds)


@pytest.mark.parametrize("person", ["", 3, b"pid"])
def test_person_must_be_a_column_name(person):
    with pytest.raises(InvalidParameterError, match="person identifier"):
        PrivacyUnit(person)


def test_as_unit():
    assert as_unit() == RECORD == as_unit("record")
    assert as_unit("pid", 2, 3) == PrivacyUnit("pid", max_rows=2, max_groups=3)
    unit = PrivacyUnit("pid", max_rows=2)
    assert as_unit(unit, needs=("max_rows",)) is unit  # a release without groups
    with pytest.raises(InvalidParameterError, match=r"^max_groups: a release under the person"):
        as_unit(unit)  # issue 32: a grouped release states max_groups, never a silent 1
    with pytest.raises(InvalidParameterError, match=r"^max_rows: a release under the person"):
        PrivacyUnit("pid")
    assert as_unit(PrivacyUnit("pid", max_rows=2, max_groups=1)).stated == (
        "max_rows",
        "max_groups",
    )
    with pytest.raises(InvalidParameterError, match="already holds its bounds"):
        as_unit(unit, max_rows=2)
    with pytest.raises(InvalidParameterError, match=r"^max_rows must"):
        as_unit("pid", max_rows=0)


@pytest.mark.parametrize("bad", [0, False, 0.0])
def test_as_unit_rejects_a_falsy_max_groups(bad):
    with pytest.raises(InvalidParameterError, match="max_groups"):
        as_unit("pid", max_groups=bad)


def test_sensitivity_arguments_are_checked():
    unit = unit_of(2, 2)
    with pytest.raises(InvalidParameterError, match="norm"):
        count_sensitivity(unit, "substitute", "linf")
    with pytest.raises(InvalidParameterError, match="neighbours"):
        count_sensitivity(unit, "swap")
    with pytest.raises(InvalidParameterError, match="lower"):
        sum_sensitivity(1, 0, unit, "substitute")
    with pytest.raises(InvalidParameterError, match="neighbours"):
        changed_groups(unit, "swap")
