"""Brute-force checks of the sensitivity of the distinct-persons count (issue 34).

``dpframe.agg.count_distinct`` releases, per group, the number of persons who keep at
least one row there after bounding (at most ``G = max_groups`` groups a person, at most
``R = max_rows`` rows in each). :func:`dpframe.core.units.distinct_sensitivity` says a
person moves that vector by at most ``changed_groups`` in l1 (``G``; ``2G`` under
substitution) and its square root in l2, with no ``R`` factor.

Part 1 enumerates explicit neighbouring datasets: raw persons with up to four rows
(several in one group, more rows and groups than the caps), every outcome of bounding
each person (every kept subset within the caps: a superset of any policy the engine may
use), the staying persons' outcomes shared by the two neighbours, and takes the largest
l1 and l2 change of the distinct-count vector. The formula holds everywhere and is
reached whenever the groups leave room (``J >= G``; ``J >= 2G`` under substitution); the
count of rows, on the same data, does move by ``R`` times as much (so the absence of the
``R`` factor is seen, not assumed).

Part 2 runs the engines' real bounding (the compiled kernel and the polars-only path,
the same key for both neighbours) on neighbouring frames and checks the same bound on the
distinct counts they return, reached where the added person has ``G`` groups or more.
"""

from __future__ import annotations

import itertools
import math
import warnings
from functools import cache

import numpy as np
import polars as pl
import pytest

from dpframe.core.randomness import RandomSource
from dpframe.core.units import (
    PrivacyUnit,
    changed_groups,
    count_sensitivity,
    distinct_sensitivity,
)
from dpframe.engines.bounding import bounded_grouped_parts

from .test_units import RELATIONS, assert_holds, tight_domain

Person = tuple[int, ...]  # the groups of a person's raw rows (a group repeated: several rows)

#: (J groups, G = max_groups, R = max_rows); J = 6 is the only way to reach 2G with G = 3
SHAPES = [(j, g, r) for j in (1, 2, 3, 4) for g in (1, 2, 3) for r in (1, 2, 3)]
SHAPES += [(6, 3, 1), (6, 3, 2)]


def kept_outcomes(rows: Person, g: int, r: int) -> set[tuple[tuple[int, int], ...]]:
    """Every outcome of bounding one person: 1..G of their groups, 1..R rows in each, as
    ``((group, kept rows), ...)``."""
    have = {group: rows.count(group) for group in set(rows)}
    out = set()
    for k in range(1, min(g, len(have)) + 1):
        for groups in itertools.combinations(sorted(have), k):
            ranges = [range(1, min(r, have[x]) + 1) for x in groups]
            for kept in itertools.product(*ranges):
                out.add(tuple(zip(groups, kept, strict=True)))
    return out


def vectors(people: list[tuple[tuple[int, int], ...]], j: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-group distinct persons and kept rows of the kept outcomes ``people``."""
    persons, rows = np.zeros(j), np.zeros(j)
    for kept in people:
        for group, n in kept:
            persons[group] += 1
            rows[group] += n
    return persons, rows


def raw_persons(j: int, most: int = 4) -> list[Person]:
    """Every person with 1..``most`` raw rows over ``j`` groups."""
    return [
        rows
        for k in range(1, most + 1)
        for rows in itertools.combinations_with_replacement(range(j), k)
    ]


def stayers(j: int) -> list[Person]:
    """Two persons who stay: more rows than the caps, several groups, sharing groups."""
    return [(0, 0, 0, min(1, j - 1)), (min(1, j - 1), j - 1, j - 1)]


@cache
def brute(j: int, g: int, r: int) -> dict[str, dict[str, tuple[float, float]]]:
    """The largest (l1, l2) change of the distinct and the row counts, per relation."""
    outcomes = sorted({o for p in raw_persons(j) for o in kept_outcomes(p, g, r)})
    found = {rel: {"distinct": [0.0, 0.0], "rows": [0.0, 0.0]} for rel in RELATIONS}
    for shared in itertools.product(*(sorted(kept_outcomes(p, g, r)) for p in stayers(j))):
        base = vectors(list(shared), j)
        moved = [vectors([*shared, o], j) for o in outcomes]
        for which, i in (("distinct", 0), ("rows", 1)):
            with_person = np.unique(np.array([m[i] for m in moved]), axis=0)
            for rel in RELATIONS:
                other = base[i][None, :] if rel == "add_remove" else with_person
                d = with_person[:, None, :] - other[None, :, :]
                best = found[rel][which]
                best[0] = max(best[0], float(np.abs(d).sum(axis=2).max()))
                best[1] = max(best[1], float(np.sqrt((d * d).sum(axis=2).max())))
    return {rel: {k: (v[0], v[1]) for k, v in f.items()} for rel, f in found.items()}


@pytest.mark.parametrize("neighbours", RELATIONS)
@pytest.mark.parametrize(("j", "g", "r"), SHAPES)
def test_distinct_sensitivity_by_brute_force(j, g, r, neighbours):
    unit = PrivacyUnit("person", max_rows=r, max_groups=g)
    found = brute(j, g, r)[neighbours]
    tight = tight_domain(j, g, neighbours)
    l1, l2 = found["distinct"]
    assert_holds(l1, distinct_sensitivity(unit, neighbours, "l1"), tight)
    assert_holds(l2, distinct_sensitivity(unit, neighbours, "l2"), tight)
    # the formula is changed_groups (and its square root): no max_rows factor
    assert distinct_sensitivity(unit, neighbours) == changed_groups(unit, neighbours)
    assert distinct_sensitivity(unit, neighbours, "l2") == math.sqrt(
        changed_groups(unit, neighbours)
    )
    if tight and r > 1 and g * r <= 4:  # (a raw person has up to 4 rows) on the same data
        # a count of rows does move by R times as much
        rows_l1 = found["rows"][0]
        assert rows_l1 == pytest.approx(count_sensitivity(unit, neighbours)) == r * l1


def test_the_domains_reach_every_bound():
    # each (G, relation) has a shape with room to reach it, for R = 1, 2 (and 3 if G < 3)
    for g in (1, 2, 3):
        for rel in RELATIONS:
            assert any(tight_domain(j, gg, rel) for j, gg, _ in SHAPES if gg == g)


# ----------------------------------------------------- part 2: the engines' real bounding


def _source(seed: int) -> RandomSource:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RandomSource(seed=seed)


def _distinct(frame: pl.DataFrame, unit: PrivacyUnit, seed: int, kernel: bool) -> np.ndarray:
    """The distinct persons of each of the 6 groups the engine keeps (0 where none)."""
    out = bounded_grouped_parts(
        frame.lazy(), unit, ["g"], {}, ["n"], {}, _source(seed), kernel=kernel, distinct=["d"]
    )
    vector = np.zeros(6)
    vector[out["g"].to_numpy()] = out["d"].to_numpy()
    return vector


def _people(rows: dict[int, list[int]]) -> pl.DataFrame:
    pid = [p for p, groups in rows.items() for _ in groups]
    g = [x for groups in rows.values() for x in groups]
    return pl.DataFrame({"pid": pid, "g": g})


#: the others: many rows, several groups each (more than the caps)
OTHERS = {1: [0, 0, 1, 2, 2, 2], 2: [1, 3, 3, 4], 3: [0, 5, 5, 5, 2], 4: [4, 4, 4, 4]}
#: the changed person (and, under substitution, the one who replaces them)
CHANGED = {9: [0, 0, 1, 1, 2, 3, 3]}
REPLACEMENT = {9: [4, 4, 5, 5, 5]}


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "polars"])
@pytest.mark.parametrize(("max_rows", "max_groups"), [(1, 1), (3, 2), (2, 3)])
def test_real_bounding_moves_the_distinct_counts_by_at_most_the_sensitivity(
    kernel, max_rows, max_groups
):
    unit = PrivacyUnit("pid", max_rows=max_rows, max_groups=max_groups)
    cases = {
        "add_remove": (_people({**OTHERS, **CHANGED}), _people(OTHERS)),
        "substitute": (_people({**OTHERS, **CHANGED}), _people({**OTHERS, **REPLACEMENT})),
    }
    for rel, (d, d_prime) in cases.items():
        l1 = []
        for seed in range(8):  # the same key for both neighbours, several keys
            diff = _distinct(d, unit, seed, kernel) - _distinct(d_prime, unit, seed, kernel)
            l1.append(float(np.abs(diff).sum()))
            assert float(np.sqrt((diff * diff).sum())) <= distinct_sensitivity(unit, rel, "l2")
        assert max(l1) <= distinct_sensitivity(unit, rel)
        # the changed person has 4 groups, their replacement 2, disjoint: every key moves
        # add/remove by exactly G, and substitution by G + min(G, 2)
        want = max_groups if rel == "add_remove" else max_groups + min(max_groups, 2)
        assert l1 == [want] * 8


def test_kernel_and_polars_path_count_the_same_kept_persons():
    rng = np.random.default_rng(3)
    frame = pl.DataFrame({"pid": rng.integers(0, 50, 400), "g": rng.integers(0, 6, 400)})
    for max_rows, max_groups in [(1, 1), (2, 3), (4, 2)]:
        unit = PrivacyUnit("pid", max_rows=max_rows, max_groups=max_groups)
        for seed in range(3):
            a = _distinct(frame, unit, seed, kernel=True)
            assert np.array_equal(a, _distinct(frame, unit, seed, kernel=False))
            assert a.sum() <= max_groups * 50
