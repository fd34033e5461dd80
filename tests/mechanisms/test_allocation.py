"""Plan by accuracy (:mod:`dpframe.mechanisms.allocation`): the optimiser against an
independent brute-force search over budget splits, each allocated error95 against the
actual sampler by Monte Carlo, infeasible targets refused by name."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dpframe.errors import BudgetExceededError, InvalidParameterError
from dpframe.mechanisms.accuracy import pram_share_error
from dpframe.mechanisms.allocation import (
    allocate,
    even_split,
    gaussian_curve,
    laplace_curve,
    pram_curve,
    quantile_curve,
)
from dpframe.mechanisms.gaussian import calibrate_gaussian, release_gaussian
from dpframe.mechanisms.laplace import calibrate_laplace, release_laplace
from dpframe.mechanisms.quantile import plan_quantiles, uniform_grid


def krr(k):
    def matrix(eps):
        e = math.exp(eps)
        m = np.full((k, k), 1.0)
        np.fill_diagonal(m, e)
        return m / (e + k - 1)

    return matrix


def small_specs():
    """2-4 statistics of mixed kinds with their targets (seeded)."""
    rng = np.random.default_rng(37)
    pool = [
        (lambda i: laplace_curve(f"count{i}", 1.0, counts=True), lambda: rng.uniform(5, 80)),
        (lambda i: laplace_curve(f"sum{i}", 1000.0), lambda: rng.uniform(5e3, 5e4)),
        (
            lambda i: quantile_curve(f"median{i}", 0.5, 0, 1000, bins=100, group_size=2000),
            lambda: rng.uniform(20, 200),
        ),
        (lambda i: pram_curve(f"pram{i}", krr(4), 5000), lambda: rng.uniform(0.02, 0.1)),
    ]
    specs = []
    for size in (2, 2, 3, 3, 4):
        picks = rng.choice(len(pool), size=size, replace=True)
        curves, targets = [], {}
        for i, p in enumerate(picks):
            c = pool[p][0](i)
            curves.append(c)
            targets[c.name] = float(pool[p][1]())
        specs.append((curves, targets))
    return specs


def brute_least(curve, target):
    """The least budget on a fine geometric grid (factor 1.002) meeting the target."""
    grid = np.geomspace(1e-4, curve.largest, 1 + int(math.log(curve.largest / 1e-4) / 0.002))
    errors = np.array([curve(b) for b in grid])
    ok = np.nonzero(errors <= target)[0]
    return float(grid[ok[0]]) if ok.size else None


@pytest.mark.parametrize("spec", range(5))
def test_least_total_matches_brute_force(spec):
    curves, targets = small_specs()[spec]
    a = allocate(curves, targets)
    brute = math.fsum(brute_least(c, targets[c.name]) for c in curves)
    # the grid overshoots each least budget by at most 0.2 %; the optimiser by 1e-5
    assert a.total <= brute * (1 + 1e-5)
    assert a.total >= brute * 0.99
    assert all(a.errors[n] <= targets[n] for n in targets)


def brute_split(curves, targets, total, steps):
    """min over the splits of ``total`` on a grid of ``steps`` of the worst ratio."""
    shares = np.arange(1, steps + 1) * total / steps  # share j + 1 steps at index j
    ratios = [np.array([c(s) / targets[c.name] for s in shares]) for c in curves]
    free = np.meshgrid(*[np.arange(steps)] * (len(curves) - 1), indexing="ij")
    last = steps - len(curves) - sum(free)  # the indices' steps add up to `steps`
    ok = last >= 0
    worst = np.max([r[i[ok]] for r, i in zip(ratios, [*free, last], strict=True)], axis=0)
    return float(worst.min())


@pytest.mark.parametrize("spec", range(5))
def test_fixed_budget_split_matches_brute_force(spec):
    curves, targets = small_specs()[spec]
    total = 0.8 * allocate(curves, targets).total  # the targets cannot all be met
    a = allocate(curves, targets, budget=total)
    assert a.total <= total
    assert a.ratio > 1
    steps = {2: 2000, 3: 600, 4: 150}[len(curves)]
    brute = brute_split(curves, targets, total, steps)
    # no split on the grid beats the optimiser, and the grid's best is within 1 % of it
    assert a.ratio <= brute * (1 + 1e-6)
    assert brute <= a.ratio * 1.01
    assert a.ratio == max(a.errors[n] / targets[n] for n in targets)
    # and the even split of the same total is never better
    assert a.ratio <= even_split(curves, targets, total).ratio


# -- Monte Carlo: the error95 found is the error drawn ----------------------------------------

DRAWS = 40_000
SE = math.sqrt(0.95 * 0.05 / DRAWS)


def coverage(errors, h):
    return float(np.mean(np.abs(errors) <= h + 1e-9))


@pytest.mark.parametrize(("counts", "sens", "target"), [(True, 1.0, 30.0), (False, 500.0, 4e3)])
def test_laplace_error95_by_monte_carlo(counts, sens, target):
    curve = laplace_curve("x", sens, counts=counts)
    a = allocate([curve], {"x": target})
    eps, h = a.budgets["x"], a.errors["x"]
    cal = calibrate_laplace(eps, sens, 1.0 if counts else None, values_on_grid=counts)
    g = cal.granularity
    exact = np.full(DRAWS, 123.0 if counts else 4096 * g)  # on the grid: no rounding
    err = release_laplace(exact, cal, np.random.default_rng(1)) - exact
    assert coverage(err, h) >= 0.95 - 4 * SE
    assert coverage(err, h - g) < 0.95 + 4 * SE  # the least such half-width, to a step


def test_gaussian_error95_by_monte_carlo():
    curve = gaussian_curve("x", 1.0, counts=True)
    a = allocate([curve], {"x": 25.0}, accounting="zcdp")
    cal = calibrate_gaussian(1.0, rho=a.budgets["x"], granularity=1.0, values_on_grid=True)
    exact = np.full(DRAWS, 50.0)
    err = release_gaussian(exact, cal, np.random.default_rng(2)) - exact
    h = a.errors["x"]
    assert h <= 25.0
    assert coverage(err, h) >= 0.95 - 4 * SE
    assert coverage(err, h - 1) < 0.95 + 4 * SE


def test_quantile_error95_by_monte_carlo_under_its_assumption():
    # the assumption made true: n values spread evenly, one in each bin
    bins = 400
    curve = quantile_curve("m", 0.5, 0, bins, bins=bins, group_size=bins)
    a = allocate([curve], {"m": 12.0})
    grid = uniform_grid(0, bins, bins=bins)
    plan = plan_quantiles(0.5, grid, a.budgets["m"])
    groups = 4000
    hist = np.zeros((groups, grid.cells), dtype=np.int64)
    hist[:, 1::2] = 1
    out = plan.draw(hist, np.random.default_rng(3))[:, 0]
    se = math.sqrt(0.95 * 0.05 / groups)
    assert coverage(out - bins / 2, a.errors["m"]) >= 0.95 - 4 * se


def test_pram_error95_by_monte_carlo():
    k, n = 4, 4000
    curve = pram_curve("p", krr(k), n)
    a = allocate([curve], {"p": 0.05})
    m = krr(k)(a.budgets["p"])
    rng = np.random.default_rng(4)
    trials = 4000
    truth = np.zeros(k)
    truth[0] = 1.0  # a vertex: every record in one category (the worst mix under k-RR)
    released = rng.multinomial(n, m[0], size=trials) / n
    estimate = released @ np.linalg.inv(m)
    se = math.sqrt(0.95 * 0.05 / trials)
    assert a.errors["p"] == pytest.approx(1.96 * pram_share_error(m) / math.sqrt(n))
    assert coverage(estimate[:, 0] - truth[0], a.errors["p"]) >= 0.95 - 4 * se


def test_a_means_error95_at_a_group_size_by_monte_carlo():
    import dpframe
    from dpframe.mechanisms.allocation import statistic_curve
    from dpframe.mechanisms.statistics import plan_statistic

    stat = dpframe.agg.mean("x", lower=0, upper=100, epsilon=1.0)
    curve = statistic_curve(stat, "substitute", group_size=1000)
    a = allocate([curve], {"x_mean": 0.5})
    h = a.errors["x_mean"]
    plan = plan_statistic(dataclasses.replace(stat, epsilon=a.budgets["x_mean"]), "substitute")
    n = 1000
    for mean, tight in ((97.0, True), (50.0, False)):  # near the bound: the error approached
        exact = {stat.part("sum"): np.full(DRAWS, n * mean), stat.part("n"): np.full(DRAWS, n)}
        err = plan.draw(exact, np.random.default_rng(5))[stat.name] - mean
        assert coverage(err, h) >= 0.95 - 4 * SE  # a bound for every mean in the bounds
        if tight:
            assert coverage(err, 0.97 * h) < 0.95 + 4 * SE  # and reached near its edge


def test_a_share_is_fixed_before_the_targets_are_allocated():
    curves = [laplace_curve(n, 1.0, counts=True) for n in ("a", "b", "c")]
    fixed = allocate(curves, {"a": 10, "b": 20}, budget=1.0, shares={"c": 0.2})
    assert fixed.budgets["c"] == 0.2 and fixed.shares == {"c": 0.2}
    rest = allocate(curves[:2], {"a": 10, "b": 20}, budget=0.8)
    assert fixed.budgets["a"] == rest.budgets["a"] and fixed.ratio == rest.ratio
    least = allocate(curves, {"a": 10, "b": 20}, shares={"c": 0.2})
    alone = allocate(curves[:2], {"a": 10, "b": 20})
    assert least.budgets["c"] == pytest.approx(0.2 * alone.total / 0.8, rel=1e-5)
    assert least.budgets["c"] <= 0.2 * alone.total / 0.8
    with pytest.raises(InvalidParameterError, match="share: a share is of the release-wide"):
        allocate(curves[2:], {}, shares={"c": 0.2})
    with pytest.raises(InvalidParameterError, match="the shares add up to 1"):
        allocate(curves, {"a": 10}, shares={"b": 0.5, "c": 0.5})


# -- refusals ---------------------------------------------------------------------------------


def test_remaining_budget_too_small_names_the_statistic_and_its_best_error():
    curves = [laplace_curve("count", 1.0, counts=True), laplace_curve("total", 1000.0)]
    targets = {"count": 10.0, "total": 1e4}
    need = allocate(curves, targets).total
    with pytest.raises(BudgetExceededError) as info:
        allocate(curves, targets, remaining=need / 2)
    msg = str(info.value)
    best = allocate(curves, targets, budget=need / 2)
    for name in targets:
        assert f"{name!r}: error95 {best.errors[name]:.4g} (target {targets[name]:g})" in msg
    assert "Nothing was charged" in msg
    assert allocate(curves, targets, remaining=need * 1.001).total == need


def test_a_target_no_budget_meets_is_refused_by_name():
    curve = quantile_curve("median", 0.5, 0, 1000, bins=100, group_size=500)
    with pytest.raises(InvalidParameterError, match=r"error95 of 'median': 5 cannot be met"):
        allocate([curve], {"median": 5.0})  # below one grid step (10): never
    count = laplace_curve("count", 1.0, counts=True)  # at most epsilon 2 on its grid
    with pytest.raises(InvalidParameterError, match=r"least error95 its mechanism reaches is 1"):
        allocate([count], {"count": 0.5})


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "50", True, None])
def test_bad_targets_are_refused_naming_the_statistic(bad):
    with pytest.raises(InvalidParameterError, match=r"error95 of 'c'"):
        allocate([laplace_curve("c", 1.0, counts=True)], {"c": bad})


def test_bad_budget_and_accounting_are_refused():
    c = [laplace_curve("c", 1.0, counts=True)]
    with pytest.raises(InvalidParameterError, match="budget must be 'least'"):
        allocate(c, {"c": 10}, budget="most")
    with pytest.raises(InvalidParameterError, match="targets: give one error95"):
        allocate(c, {"d": 10})
    with pytest.raises(InvalidParameterError, match="accounting='zcdp'"):
        allocate([gaussian_curve("g", 1.0)], {"g": 10})


def test_zcdp_adds_rhos_and_pld_states_an_upper_bound():
    curves = [laplace_curve("c", 1.0, counts=True), gaussian_curve("g", 1.0, counts=True)]
    a = allocate(curves, {"c": 20, "g": 20}, accounting="zcdp")
    assert a.total == pytest.approx(a.budgets["c"] ** 2 / 2 + a.budgets["g"])
    p = allocate(curves[:1], {"c": 20}, accounting="pld")
    assert p.total == p.budgets["c"]


def test_meet_targets_gives_group_by_the_budgets_its_summary_shows():
    import polars as pl

    import dpframe
    from dpframe.core.units import PrivacyUnit
    from dpframe.mechanisms.allocation import meet_targets

    unit = PrivacyUnit("pid", max_rows=2, max_groups=1)
    stats, found = meet_targets(
        [
            dpframe.agg.count(mechanism="gaussian", rho=1.0),
            dpframe.agg.sum("x", lower=0, upper=10, mechanism="gaussian", rho=1.0),
            dpframe.agg.mean("x", lower=0, upper=10, epsilon=0.5),  # no target: kept
        ],
        {"count": 30, "x_sum": 200},
        unit=unit,
        accounting="zcdp",
    )
    assert stats[2].epsilon == 0.5 and stats[0].options["rho"] == found.budgets["count"]
    frame = pl.DataFrame({"pid": [1, 2, 3], "g": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
    with dpframe.Accountant(rho=1.0, delta=1e-6, unit="pid", max_rows=2, max_groups=1):
        summary = (
            dpframe.group_by(frame, "g", margins=pl.DataFrame({"g": ["a", "b"]}))
            .agg(*stats)
            .summarize()
        )
    shown = dict(zip(summary["statistic"], summary["error95"], strict=True))
    assert shown["count"] == found.errors["count"] <= 30
    assert shown["x_sum"] == found.errors["x_sum"] <= 200
    with pytest.raises(InvalidParameterError, match=r"targets: \['y'\] name no statistic"):
        meet_targets(stats, {"y": 1.0})


def test_summarize_shows_each_target_the_budget_found_and_its_error():
    import polars as pl

    import dpframe
    from dpframe.mechanisms.allocation import meet_targets

    stats, found = meet_targets(
        [
            dpframe.agg.count(epsilon=1.0),
            dpframe.agg.mean("x", lower=0, upper=10, epsilon=1.0),
            dpframe.agg.sum("x", lower=0, upper=10, epsilon=1.0),
            dpframe.agg.median("x", lower=0, upper=10, epsilon=0.1),  # no target: kept
        ],
        {"count": 20, "x_mean": 0.5},
        budget=2.0,
        shares={"x_sum": 0.25},
        group_size=200,
    )
    frame = pl.DataFrame({"g": ["a", "b"], "x": [1.0, 2.0]})
    with dpframe.Accountant(epsilon=3.0):
        release = dpframe.group_by(frame, "g", margins=pl.DataFrame({"g": ["a", "b"]}))
        release = release.agg(*stats)
        plain = dpframe.summarize(release)
        summary = dpframe.summarize(release, targets=found)
    assert summary.columns[: plain.width] == plain.columns  # the plan's columns, then these
    rows = {r["statistic"]: r for r in summary.iter_rows(named=True)}
    assert rows["count"]["target"] == 20 and rows["count"]["found"] == stats[0].epsilon
    worst = found.ratio * (1 + 1e-9)  # a fixed total: each error within its weight
    assert rows["count"]["error95"] == rows["count"]["error95_found"] <= 20 * worst
    # a mean's plan states no error (its group size is private): the allocation's, assumed
    assert rows["x_mean"]["error95"] is None and rows["x_mean"]["error95_found"] <= 0.5 * worst
    assert "a group of 200 rows" in rows["x_mean"]["assumption"]
    assert rows["x_sum"]["share"] == 0.25 and rows["x_sum"]["found"] == 0.5
    assert rows["x_sum"]["target"] is None
    last = stats[3].name
    assert rows[last]["target"] is None and rows[last]["found"] is None
    _, other = meet_targets([dpframe.agg.count(epsilon=1.0, name="n2")], {"n2": 5})
    with pytest.raises(InvalidParameterError, match=r"targets: \['n2'\] name no statistic"):
        dpframe.summarize(release, targets=other)
