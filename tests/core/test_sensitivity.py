"""Brute-force checks of the l1 sensitivities in dpframe.core.sensitivity.

Each statistic is evaluated on every dataset over a small grid of values that contains both
bounds, and on every neighbour of it under the relation; the largest change must (a) never
exceed the formula and (b) reach it (every formula here is claimed tight, and each grid
contains an extremal configuration). Datasets are multisets, stored as count vectors over
the grid ("types"), so a neighbour is one count down and/or one count up.

Conventions (as in the module): under ``add_remove`` a dataset of size n is compared with
its neighbours of size n - 1 and n + 1; a one-record variance/covariance is 0.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from functools import cache

import pytest

from dpframe.core import sensitivity as sens
from dpframe.errors import InvalidParameterError

RELATIONS = ("substitute", "add_remove")
REL = 1e-12
Counts = tuple[int, ...]

# ----------------------------------------------------------------------------- enumeration


def compositions(total: int, parts: int) -> Iterator[Counts]:
    """Every count vector of ``parts`` non-negative entries summing to ``total`` (a multiset)."""
    for cut in itertools.combinations(range(total + parts - 1), parts - 1):
        edges = (-1, *cut, total + parts - 1)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(parts))


def shift(c: Counts, out: int | None, into: int | None) -> Counts:
    """``c`` with one record of type ``out`` removed and one of type ``into`` added."""
    lst = list(c)
    if out is not None:
        lst[out] -= 1
    if into is not None:
        lst[into] += 1
    return tuple(lst)


def neighbours(c: Counts, relation: str) -> Iterator[Counts]:
    """Every neighbour of the multiset ``c``: substitute one record, or add/remove one."""
    types = range(len(c))
    for i in types:
        if c[i]:
            if relation == "substitute":
                yield from (shift(c, i, t) for t in types if t != i)
            else:
                yield shift(c, i, None)
    if relation == "add_remove":
        yield from (shift(c, None, t) for t in types)


def brute_single(
    stat: Callable[[Counts], object],
    ntypes: int,
    n: int,
    relation: str,
    dist: Callable[[object, object], float] = lambda a, b: abs(a - b),
) -> tuple[float, tuple[Counts, Counts]]:
    """Max change of ``stat`` over every dataset of size n and every neighbour (and the pair)."""
    best, pair = -1.0, None
    for c in compositions(n, ntypes):
        f = stat(c)
        for c2 in neighbours(c, relation):
            d = dist(f, stat(c2))
            if d > best:
                best, pair = d, (c, c2)
    return best, pair


def pooled_neighbours(
    groups: tuple[Counts, ...], relation: str, membership: str
) -> Iterator[tuple[tuple[tuple[int, Counts], ...], int]]:
    """Neighbours of a grouped dataset as (changed groups, change in record count)."""
    ngroups = len(groups)
    ntypes = len(groups[0])
    for j, g in enumerate(groups):
        for i in range(ntypes):
            if not g[i]:
                continue
            if relation == "add_remove":
                yield ((j, shift(g, i, None)),), -1
                continue
            for t in range(ntypes):
                if t != i:
                    yield ((j, shift(g, i, t)),), 0
            if membership == "private":
                out = shift(g, i, None)
                for k in range(ngroups):
                    if k != j:
                        for t in range(ntypes):
                            yield ((j, out), (k, shift(groups[k], None, t))), 0
    if relation == "add_remove":
        for k, g in enumerate(groups):
            for t in range(ntypes):
                yield ((k, shift(g, None, t)),), 1


def brute_pooled(
    group_sum: Callable[[Counts], float],
    ntypes: int,
    sizes: Sequence[int],
    relation: str,
    membership: str,
) -> tuple[float, tuple]:
    """Max change of a pooled statistic sum_j group_sum(g_j) / (n - J) over all neighbours."""
    dof = sum(sizes) - len(sizes)
    best, pair = -1.0, None
    for groups in itertools.product(*(list(compositions(s, ntypes)) for s in sizes)):
        parts = [group_sum(g) for g in groups]
        total = math.fsum(parts)
        f = total / dof
        for changes, dn in pooled_neighbours(groups, relation, membership):
            t2 = total + math.fsum(group_sum(new) - parts[j] for j, new in changes)
            d = abs(f - t2 / (dof + dn))
            if d > best:
                best, pair = d, (groups, changes)
    return best, pair


def assert_tight(brute: float, formula: float) -> None:
    """(a) brute force never exceeds the formula; (b) it reaches it."""
    assert brute <= formula * (1 + REL), (brute, formula)
    assert brute >= formula * (1 - REL), (brute, formula)


# ------------------------------------------------------------------------------ statistics


def grid(lower: float, upper: float, points: int = 5) -> list[float]:
    return [lower + (upper - lower) * k / (points - 1) for k in range(points)]


def mean_stat(values: Sequence[float]) -> Callable[[Counts], float]:
    @cache
    def stat(c: Counts) -> float:
        return math.fsum(k * v for k, v in zip(c, values, strict=True)) / sum(c)

    return stat


def cross_sum(xs: Sequence[float], ys: Sequence[float]) -> Callable[[Counts], float]:
    """Centred sum of cross products (sum of squares when xs is ys) of a multiset of pairs."""

    @cache
    def ss(c: Counts) -> float:
        m = sum(c)
        mx = math.fsum(k * x for k, x in zip(c, xs, strict=True)) / m
        my = math.fsum(k * y for k, y in zip(c, ys, strict=True)) / m
        return math.fsum(k * (x - mx) * (y - my) for k, x, y in zip(c, xs, ys, strict=True))

    return ss


def sample_stat(ss: Callable[[Counts], float]) -> Callable[[Counts], float]:
    """Sample variance/covariance (divisor m - 1); 0 for a single record (the convention)."""

    @cache
    def stat(c: Counts) -> float:
        m = sum(c)
        return ss(c) / (m - 1) if m > 1 else 0.0

    return stat


BOUNDS = [(-1.0, 3.0), (-2.0, 2.0)]  # asymmetric and symmetric
NS = range(3, 7)

# ---------------------------------------------------------------------- single statistics


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize(("lower", "upper"), BOUNDS)
@pytest.mark.parametrize("n", NS)
def test_mean(n, lower, upper, relation):
    brute, _ = brute_single(mean_stat(grid(lower, upper)), 5, n, relation)
    assert_tight(brute, sens.mean(lower, upper, n, relation))


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("n", NS)
def test_proportion(n, relation):
    brute, _ = brute_single(mean_stat([0.0, 1.0]), 2, n, relation)
    assert_tight(brute, sens.proportion(n, relation))


def proportions_stat(c: Counts) -> tuple[float, ...]:
    return tuple(k / sum(c) for k in c)


def l1(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(abs(x - y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("categories", [2, 3, 4])
@pytest.mark.parametrize("n", NS)
def test_histogram_proportions(n, categories, relation):
    brute, _ = brute_single(proportions_stat, categories, n, relation, dist=l1)
    assert_tight(brute, sens.histogram_proportions(n, relation))
    if relation == "add_remove":  # the supplement's 1/n is half the true value
        assert brute == pytest.approx(2 * (1 / n))


def test_histogram_proportions_supplement_counterexample():
    # (a, b, b) -> (b, b): (1/3, 2/3) -> (0, 1), an l1 change of 2/3 = 2/n, not 1/n
    change = l1(proportions_stat((1, 2)), proportions_stat((0, 2)))
    assert change == pytest.approx(2 / 3)
    assert change > 1 / 3
    assert sens.histogram_proportions(3, "add_remove") == pytest.approx(change)


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize(("lower", "upper"), BOUNDS)
@pytest.mark.parametrize("n", [2, *NS])  # n = 2, add_remove: one-record variance is 0
def test_variance(n, lower, upper, relation):
    values = grid(lower, upper)
    brute, _ = brute_single(sample_stat(cross_sum(values, values)), 5, n, relation)
    assert_tight(brute, sens.variance(lower, upper, n, relation))


COV_BOUNDS = [((-1.0, 3.0), (0.0, 2.0)), ((-2.0, 2.0), (-2.0, 2.0))]


def pair_grid(bx, by, points: int = 3) -> tuple[list[float], list[float]]:
    pairs = list(itertools.product(grid(*bx, points), grid(*by, points)))
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize(("bx", "by"), COV_BOUNDS)
@pytest.mark.parametrize("n", [2, *NS])
def test_covariance(n, bx, by, relation):
    xs, ys = pair_grid(bx, by)  # the 3 x 3 grid {L, mid, U}^2
    brute, _ = brute_single(sample_stat(cross_sum(xs, ys)), len(xs), n, relation)
    assert_tight(brute, sens.covariance(*bx, *by, n, relation))


# ---------------------------------------------------------------------- pooled statistics

SIZES = [(2, 2), (2, 3), (3, 3), (2, 4), (3, 4)]
CASES = [("substitute", "public"), ("substitute", "private"), ("add_remove", "public")]


def supplement_pooled(sizes: Sequence[int], relation: str, covariance: bool) -> float:
    """The supplement's exact (not the 'approximated') values, sections 4-5, unit bounds."""
    n, n_groups = sum(sizes), len(sizes)
    dof = n - n_groups
    if relation == "substitute":
        return (1 - 1 / max(sizes)) / dof
    if covariance:
        return (1 + n / (4 * (dof - 1)) - 1 / math.sqrt(dof - 1)) / dof
    return (1 - 1 / max(sizes)) / dof if n > 2 * n_groups else (n - 1) / (n * (n - 2))


@pytest.mark.parametrize(("relation", "membership"), CASES)
@pytest.mark.parametrize("sizes", SIZES)
def test_pooled_variance(sizes, relation, membership):
    lower, upper = -1.0, 3.0
    values = grid(lower, upper)
    brute, _ = brute_pooled(cross_sum(values, values), 5, sizes, relation, membership)
    formula = sens.pooled_variance(lower, upper, sizes, relation, membership)
    assert_tight(brute, formula)
    supplement = (upper - lower) ** 2 * supplement_pooled(sizes, relation, covariance=False)
    if membership == "private":
        # the supplement's value is too small: n_max^2 / (n_max^2 - 1), (2, 2): 4/3
        assert brute / supplement == pytest.approx(max(sizes) ** 2 / (max(sizes) ** 2 - 1))
    elif relation == "substitute":
        assert_tight(brute, supplement)
    else:  # J = 2: the supplement is right, or loose when n = 2J ((2, 2): ratio 2/3)
        assert brute <= supplement * (1 + REL)


@pytest.mark.parametrize(("bx", "by"), COV_BOUNDS)
@pytest.mark.parametrize(("relation", "membership"), CASES)
@pytest.mark.parametrize("sizes", SIZES[:4])
def test_pooled_covariance(sizes, relation, membership, bx, by):
    # pair types: the four corners and the centre (the change is bilinear in the x and
    # y columns, so its extremes sit on corner data; the centre is a non-extreme point)
    xs = [bx[0], bx[0], bx[1], bx[1], (bx[0] + bx[1]) / 2]
    ys = [by[0], by[1], by[0], by[1], (by[0] + by[1]) / 2]
    brute, _ = brute_pooled(cross_sum(xs, ys), 5, sizes, relation, membership)
    formula = sens.pooled_covariance(*bx, *by, sizes, relation, membership)
    assert_tight(brute, formula)
    area = (bx[1] - bx[0]) * (by[1] - by[0])
    supplement = area * supplement_pooled(sizes, relation, covariance=True)
    if membership == "private":
        # too small: (2, 2) 7/3, (2, 3) 2.0, (3, 3) 1.875, (2, 4) 1.778
        a, b = sorted(sizes, reverse=True)
        assert brute / supplement == pytest.approx((2 - 1 / a - 1 / (b + 1)) / (1 - 1 / a))
        assert brute > 1.7 * supplement
    elif relation == "substitute":
        assert_tight(brute, supplement)
    else:
        # valid but loose: ratio exact/supplement (2, 2) 1.0, (2, 3) 0.9987, (3, 3) 0.963,
        # (2, 4) 0.9935
        assert brute <= supplement * (1 + REL)


def test_pooled_membership_irrelevant_under_add_remove():
    for sizes in [(2, 2), (3, 5, 2), (7,)]:
        for f in (
            lambda m, s=sizes: sens.pooled_variance(0, 1, s, "add_remove", m),
            lambda m, s=sizes: sens.pooled_covariance(0, 1, 0, 1, s, "add_remove", m),
        ):
            assert f("public") == f("private")


@pytest.mark.parametrize("sizes", [(2, 2, 2), (2, 2, 3), (2, 3, 3)])
@pytest.mark.parametrize(("relation", "membership"), CASES)
def test_pooled_three_groups_on_bounds(sizes, relation, membership):
    """J = 3 on the bounds only: {L, U} for the variance, the four corners for the covariance."""
    ss = cross_sum([-1.0, 3.0], [-1.0, 3.0])
    brute, _ = brute_pooled(ss, 2, sizes, relation, membership)
    assert_tight(brute, sens.pooled_variance(-1, 3, sizes, relation, membership))
    sp = cross_sum([-1.0, -1.0, 3.0, 3.0], [0.0, 2.0, 0.0, 2.0])
    brute, _ = brute_pooled(sp, 4, sizes, relation, membership)
    assert_tight(brute, sens.pooled_covariance(-1, 3, 0, 2, sizes, relation, membership))


@pytest.mark.parametrize(
    ("sizes", "supplement_ratio"),
    [
        ((2,) * 6, 1.0390),  # n = 2J: supplement (n - 1)/(n (n - 2)) = 11/120 < 2/21
        ((3,) + (2,) * 7, 1.0125),  # n > 2J: supplement (1 - 1/3)/9 < 3/40
    ],
)
def test_pooled_variance_add_remove_many_small_groups(sizes, supplement_ratio):
    """Adding a record to the largest group dominates when N + 1 > n_max^2."""
    ss = cross_sum([-1.0, 3.0], [-1.0, 3.0])
    brute, (groups, changes) = brute_pooled(ss, 2, sizes, "add_remove", "public")
    formula = sens.pooled_variance(-1, 3, sizes, "add_remove")
    assert_tight(brute, formula)
    dof = sum(sizes) - len(sizes)
    assert formula == pytest.approx(16 * max(sizes) / (max(sizes) + 1) / (dof + 1))
    supplement = 16 * supplement_pooled(sizes, "add_remove", covariance=False)
    assert brute / supplement == pytest.approx(supplement_ratio, abs=1e-4)
    # the maximising pair adds a record (every group constant, the new value at the other bound)
    assert sum(map(sum, (new for _, new in changes))) == sum(groups[changes[0][0]]) + 1


def test_pooled_variance_add_remove_against_all_four_extremes():
    """The two-term formula against the four candidate extremes of the derivation.

    Removing (adding) a record changes s_p^2 by [c d^2 - s_p'^2] / N' with d its distance
    from the mean of the rest of its group; the extremes are d = R with every group
    constant, or d = 0 with every group spread out (half its values at each bound).
    """

    def g(m: int) -> float:
        return (m // 2) * ((m + 1) // 2) / m if m else 0.0

    for sizes in itertools.chain(
        itertools.combinations_with_replacement(range(2, 7), 3),
        [(2,) * J for J in range(1, 30)],
        [(3,) + (2,) * J for J in range(0, 30)],
        [(2, 500), (40, 3, 3, 3), (7,) * 12],
    ):
        dof, spread = sum(sizes) - len(sizes), sum(map(g, sizes))
        candidates = [spread / (dof * (dof + 1))]
        for s in sizes:
            candidates += [(1 - 1 / s) / dof, s / (s + 1) / (dof + 1)]
            if dof > 1:
                candidates.append((spread - g(s) + g(s - 1)) / ((dof - 1) * dof))
        got = sens.pooled_variance(0, 1, sizes, "add_remove")
        assert got == pytest.approx(max(candidates), rel=REL), sizes


def test_pooled_covariance_add_remove_addition_can_dominate():
    """Eight groups of three: adding a pair beats every removal (1.0027x)."""
    lo, hi = -1.0, 3.0
    anti = [(lo, hi), (lo, hi), (hi, lo)]  # |SP| = g(3) R^2, the most a group of 3 holds
    d = [[(lo, lo)] * 3] + [list(anti) for _ in range(7)]
    d2 = [[(lo, lo)] * 3 + [(hi, hi)], *d[1:]]
    change = abs(pooled(d)[1] - pooled(d2)[1])
    formula = sens.pooled_covariance(lo, hi, lo, hi, [3] * 8, "add_remove")
    assert change == pytest.approx(formula, rel=REL)
    removal = 16 * (1 - 1 / 3 + 7 * (2 / 3) / 15) / 16  # best removal, N = 16
    assert change / removal == pytest.approx(1.0027, abs=1e-4)


def pooled(groups: Sequence[Sequence[tuple[float, float]]]) -> tuple[float, float]:
    """(pooled variance of x, pooled covariance) computed directly from the records."""
    sxx = sxy = 0.0
    for g in groups:
        mx = sum(p[0] for p in g) / len(g)
        my = sum(p[1] for p in g) / len(g)
        sxx += sum((p[0] - mx) ** 2 for p in g)
        sxy += sum((p[0] - mx) * (p[1] - my) for p in g)
    dof = sum(map(len, groups)) - len(groups)
    return sxx / dof, sxy / dof


def test_documented_counterexamples():
    """The dataset pairs quoted in docs/sensitivity.md ("Departures from the supplement")."""
    lo, hi = -1.0, 3.0
    # pooled variance, private membership: a record (-1) moves from group 1 to group 2 as 3
    d = [[(lo, 0), (lo, 0)], [(lo, 0), (lo, 0)]]
    d2 = [[(lo, 0)], [(lo, 0), (lo, 0), (hi, 0)]]
    change = abs(pooled(d)[0] - pooled(d2)[0])
    assert change == pytest.approx(16 / 3)
    assert change > 16 * supplement_pooled((2, 2), "substitute", False)  # 4
    assert change == pytest.approx(sens.pooled_variance(lo, hi, [2, 2], membership="private"))
    # pooled covariance, private membership: (3, 3) leaves group 1, joins group 2 as (3, -1)
    d = [[(lo, lo), (hi, hi)], [(lo, hi), (lo, hi)]]
    d2 = [[(lo, lo)], [(lo, hi), (lo, hi), (hi, lo)]]
    change = abs(pooled(d)[1] - pooled(d2)[1])
    assert change == pytest.approx(28 / 3)
    assert change / (16 * supplement_pooled((2, 2), "substitute", True)) == pytest.approx(7 / 3)
    assert change == pytest.approx(
        sens.pooled_covariance(lo, hi, lo, hi, [2, 2], membership="private")
    )
    # pooled variance, add/remove, six groups of two at -1; add a 3 to one of them
    d = [[(lo, 0)] * 2 for _ in range(6)]
    d2 = [[(lo, 0)] * 2 + [(hi, 0)], *d[1:]]
    change = abs(pooled(d)[0] - pooled(d2)[0])
    assert change == pytest.approx(16 * 2 / 21)
    assert change > 16 * 11 / 120
    # sizes (3, 2, ..., 2) with J = 8: n = 17 > 2J, yet adding beats (1 - 1/n_max)/N
    d = [[(lo, 0)] * 3] + [[(lo, 0)] * 2 for _ in range(7)]
    d2 = [[(lo, 0)] * 3 + [(hi, 0)], *d[1:]]
    change = abs(pooled(d)[0] - pooled(d2)[0])
    assert change == pytest.approx(16 * 3 / 40)
    assert change > 16 * (2 / 3) / 9


# ------------------------------------------------------------------- consistency, shape


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("n", range(2, 40))
def test_pooled_with_one_group_is_the_plain_statistic(n, relation):
    for membership in ("public", "private"):
        assert sens.pooled_variance(-1, 3, [n], relation, membership) == pytest.approx(
            sens.variance(-1, 3, n, relation)
        )
        assert sens.pooled_covariance(-1, 3, 0, 2, [n], relation, membership) == pytest.approx(
            sens.covariance(-1, 3, 0, 2, n, relation)
        )


@pytest.mark.parametrize("relation", RELATIONS)
def test_private_membership_never_below_public(relation):
    for sizes in [(2, 2), (2, 9), (5, 5, 5), (2, 3, 50), (100, 2)]:
        for f in (
            lambda m, s=sizes: sens.pooled_variance(0, 1, s, relation, m),
            lambda m, s=sizes: sens.pooled_covariance(0, 1, 0, 1, s, relation, m),
        ):
            assert f("private") >= f("public")


def test_size_free_upper_bounds():
    """R^2/N bounds every pooled variance value, 2 Rxy/N every pooled covariance value."""
    for sizes in [(2, 2), (2,) * 30, (3, 4, 5), (2, 1000), (50, 50, 2), (3,), (9,)]:
        dof = sum(sizes) - len(sizes)
        for relation, membership in CASES:
            assert sens.pooled_variance(0, 1, sizes, relation, membership) <= 1 / dof
            assert sens.pooled_covariance(0, 1, 0, 1, sizes, relation, membership) <= 2 / dof


def test_supplement_pooled_covariance_add_remove_is_an_upper_bound():
    # exact / supplement, e.g. (3, 3): 0.963, (10, 10): 0.996, (50, 50, 50): 0.981,
    # (2, 200): 0.843
    for sizes in [(2, 2), (3, 3), (2, 5), (10, 10), (4, 4, 4), (50, 50, 50), (2, 200)]:
        exact = sens.pooled_covariance(0, 1, 0, 1, sizes, "add_remove")
        assert exact <= supplement_pooled(sizes, "add_remove", True) * (1 + REL)


def test_returns_floats_and_scales():
    assert isinstance(sens.mean(0, 1, 3), float)
    assert isinstance(sens.variance(0, 1, 3), float)
    assert sens.variance(0, 10, 5) == pytest.approx(100 * sens.variance(0, 1, 5))
    assert sens.pooled_covariance(0, 2, 0, 5, [3, 4], "add_remove") == pytest.approx(
        10 * sens.pooled_covariance(0, 1, 0, 1, [3, 4], "add_remove")
    )
    # numpy integers and tuples are accepted as sizes
    np = pytest.importorskip("numpy")
    assert sens.pooled_variance(0, 1, np.array([3, 4])) == sens.pooled_variance(0, 1, (3, 4))
    assert sens.mean(0, 1, np.int64(4)) == 0.25


# ------------------------------------------------------------------------------ validation

BAD = [
    (lambda: sens.mean(1, 1, 3), "lower must be < upper"),
    (lambda: sens.mean(3, -1, 3), "lower must be < upper"),
    (lambda: sens.mean(float("nan"), 1, 3), "lower must be finite"),
    (lambda: sens.mean(0, float("inf"), 3), "upper must be finite"),
    (lambda: sens.mean(0, "1", 3), "upper must be a real number"),
    (lambda: sens.mean(0, 1, 0), "n must be >= 1"),
    (lambda: sens.mean(0, 1, 2.0), "n must be an integer"),
    (lambda: sens.mean(0, 1, True), "n must be an integer"),
    (lambda: sens.mean(0, 1, 3, "swap"), "neighbours must be one of"),
    (lambda: sens.proportion(0), "n must be >= 1"),
    (lambda: sens.histogram_proportions(-2), "n must be >= 1"),
    (lambda: sens.histogram_proportions(3, "bounded"), "neighbours must be one of"),
    (lambda: sens.variance(0, 1, 1), "n must be >= 2"),
    (lambda: sens.variance(-1e308, 1e308, 3), "overflows"),
    (lambda: sens.variance(0, 1e200, 3), "overflows"),
    (lambda: sens.covariance(0, 1, 2, 2, 3), "lower_y must be < upper_y"),
    (lambda: sens.covariance(1, 0, 0, 2, 3), "lower_x must be < upper_x"),
    (lambda: sens.covariance(0, 1, 0, 1, 1), "n must be >= 2"),
    (lambda: sens.pooled_variance(0, 1, [3, 1]), "sizes[1] must be >= 2"),
    (lambda: sens.pooled_variance(0, 1, [3, 2.5]), "sizes[1] must be an integer"),
    (lambda: sens.pooled_variance(0, 1, []), "at least one group"),
    (lambda: sens.pooled_variance(0, 1, 5), "sizes must be a sequence"),
    (lambda: sens.pooled_variance(0, 1, "23"), "sizes must be a sequence"),
    (lambda: sens.pooled_variance(0, 1, {3, 4}), "sizes must be a sequence"),
    (lambda: sens.pooled_variance(0, 1, [3, 4], membership="hidden"), "membership must be one"),
    (lambda: sens.pooled_variance(0, 1, [3, 4], "replace"), "neighbours must be one of"),
    (lambda: sens.pooled_covariance(0, 1, 0, -1, [3, 4]), "lower_y must be < upper_y"),
    (lambda: sens.pooled_covariance(0, 1, 0, 1, [2, 0]), "sizes[1] must be >= 2"),
    (lambda: sens.pooled_covariance(0, 1, 0, 1, [2], membership=None), "membership must be"),
]


@pytest.mark.parametrize(("call", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_input_is_named(call, message):
    with pytest.raises(
        InvalidParameterError, match=message.replace("[", r"\[").replace("]", r"\]")
    ):
        call()
