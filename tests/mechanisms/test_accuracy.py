"""Accuracy from released values (dpframe.mechanisms.accuracy, StatisticPlan.accuracy),
checked by Monte Carlo: the empirical coverage of ``value +- half-width`` over many draws
at known exact values, against its binomial standard error.

Every check uses a fixed seed. With ``G`` draws the coverage's standard error is
``sqrt(0.95 * 0.05 / G)``; the tolerance is 4 of them. Where an approximation is only
asymptotic (the plug-in of the released mean, the delta method), "calibrated" is asserted
where it should hold (noisy counts far above the threshold) and "not below the level"
(conservative) for smaller groups.
"""

import math

import numpy as np
import pytest

from dpframe import InvalidParameterError
from dpframe.mechanisms.accuracy import (
    laplace_sum_quantile,
    level_label,
    pram_share_error,
    ratio_error,
    ratio_threshold,
)
from dpframe.mechanisms.laplace import calibrate_laplace
from dpframe.mechanisms.pram import design, estimate
from dpframe.mechanisms.pram.plan import plan_pram
from dpframe.mechanisms.pram.sampling import sampler
from dpframe.mechanisms.statistics import Drawn, cov, mean, plan_statistic, proportion, var

LEVEL = 0.95
G = 20_000  # draws ("groups" with the same exact values) per check
TOL = 4 * math.sqrt(LEVEL * (1 - LEVEL) / G)  # 0.0062


def coverage(plan, exact, truth, seed):
    drawn = plan.draw({k: np.full(G, float(v)) for k, v in exact.items()}, rng(seed))
    acc = plan.accuracy(drawn, LEVEL)
    out = {}
    for column, value in truth.items():
        h = acc[f"{column}_error95"]
        released = drawn[column]
        ok = np.abs(released - value) <= h
        out[column] = float(ok[~np.isnan(released)].mean())
    return out, acc, drawn


def rng(seed):
    return np.random.default_rng(seed)


# -- the noise law --------------------------------------------------------------------


@pytest.mark.parametrize(
    "scales",
    [[1.0], [2.0, 0.5], [1.0, 1.0], [3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0], [1e-9, 5.0]],
)
def test_laplace_sum_quantile_covers_its_level(scales):
    n = 400_000
    r = rng(1)
    x = sum(r.laplace(0.0, s, n) for s in scales)
    q = laplace_sum_quantile(scales, LEVEL)
    cover = np.mean(np.abs(x) <= q)
    assert abs(cover - LEVEL) < 4 * math.sqrt(LEVEL * (1 - LEVEL) / n)


def test_laplace_sum_quantile_closed_forms_and_edges():
    assert float(laplace_sum_quantile([2.0])) == pytest.approx(2 * math.log(20), rel=1e-12)
    # two equal scales: P(|X| > t) = exp(-t) (1 + t / 2); the 0.1% separation widens it
    t = float(laplace_sum_quantile([1.0, 1.0]))
    assert math.exp(-t) * (1 + t / 2) == pytest.approx(0.05, rel=2e-3)
    assert math.exp(-t) * (1 + t / 2) <= 0.05
    out = laplace_sum_quantile([[1.0, 2.0], [0.0, 0.0], [np.inf, 1.0], [np.nan, 1.0]])
    assert out[1] == 0.0 and out[2] == np.inf and np.isnan(out[3])
    with pytest.raises(InvalidParameterError, match="level"):
        laplace_sum_quantile([1.0], 1.0)
    assert level_label(0.95) == "error95" and level_label(0.9) == "error90"


# -- a ratio: mean and proportion with private sizes ------------------------------------


@pytest.mark.parametrize(
    ("lower", "upper", "mu", "epsilon"),
    [(0.0, 1.0, 0.3, 1.0), (0.0, 200_000.0, 40_000.0, 0.6), (18.0, 90.0, 60.0, 0.3)],
)
def test_ratio_half_width_is_calibrated_for_large_groups(lower, upper, mu, epsilon):
    """S~ / N~ - mu = (Z_S - mu Z_N) / N~ exactly: with mu plugged in from the released
    ratio, the coverage is the level once the ratio is accurate (n = 1,000 and 10,000)."""
    plan = plan_statistic(mean("x", lower=lower, upper=upper, epsilon=epsilon), "substitute")
    for i, n in enumerate((1_000, 10_000)):
        g = plan.details["parts"]["sum"]["granularity"]
        exact = {"x_mean:sum": round(n * mu / g) * g, "x_mean:n": n}
        cover, acc, _ = coverage(plan, exact, {"x_mean": mu}, seed=10 + i)
        assert abs(cover["x_mean"] - LEVEL) < TOL, (n, cover)
        assert not acc["x_mean_uninformative"].any()


@pytest.mark.parametrize("n", [1, 3, 10, 30, 100])
def test_ratio_half_width_is_conservative_for_small_groups(n):
    """Small groups: the clip to the bounds and the cap at the range only widen the
    interval, and the plug-in mean does not make it too narrow (measured: coverage
    0.9496-1.0 at n = 1..100 for these settings)."""
    plan = plan_statistic(mean("x", lower=18, upper=90, epsilon=0.3), "substitute")
    cover, _, _ = coverage(plan, {"x_mean:sum": 60 * n, "x_mean:n": n}, {"x_mean": 60}, seed=n)
    assert cover["x_mean"] >= LEVEL - TOL


def test_proportion_half_width_is_calibrated():
    plan = plan_statistic(proportion("b", epsilon=1.0), "substitute")
    n = 5_000
    exact = {"b_proportion:sum": 1_500, "b_proportion:n": n}
    cover, _, _ = coverage(plan, exact, {"b_proportion": 0.3}, seed=3)
    assert abs(cover["b_proportion"] - LEVEL) < TOL


def test_uninformative_flag_is_the_noisy_count_against_the_threshold():
    """The flag reads the released noisy count only; above the threshold the half-width
    is below the range whatever the released mean; an empty group is flagged."""
    plan = plan_statistic(mean("x", lower=0, upper=200_000, epsilon=0.6), "substitute")
    parts = plan.details["parts"]
    sum_scale = calibrate_laplace(0.3, parts["sum"]["sensitivity"]).scale
    count_scale = calibrate_laplace(0.3, parts["n"]["sensitivity"], 1.0, values_on_grid=True).scale
    threshold = plan.uninformative_count
    assert threshold == ratio_threshold(sum_scale, count_scale, 0, 200_000)
    assert f"noisy count is <= {math.floor(threshold):,})" in plan.summary()[0]["note"]
    drawn = plan.draw({"x_mean:sum": np.zeros(G), "x_mean:n": np.zeros(G)}, rng(4))
    acc = plan.accuracy(drawn)
    n, flag, h = acc["x_mean_noisy_n"], acc["x_mean_uninformative"], acc["x_mean_error95"]
    assert np.array_equal(flag, n <= threshold)
    assert flag.mean() > 0.98  # an empty group: N~ is noise around 0
    assert (h[flag & (n <= 0)] == 200_000).all()
    drawn = plan.draw({"x_mean:sum": np.full(G, 4e6), "x_mean:n": np.full(G, 40.0)}, rng(5))
    acc = plan.accuracy(drawn)
    above = acc["x_mean_noisy_n"] > threshold
    assert above.any() and (acc["x_mean_error95"][above] < 200_000).all()


def test_ratio_error_by_hand():
    # N~ = 1000, mean 0.5, scales 2 and 2: q of |Z_S - 0.5 Z_N| (Laplace 2 and 1) / 1000
    q = float(laplace_sum_quantile([2.0, 1.0]))
    h = ratio_error(np.array([1000.0, 0.0, -5.0]), np.array([0.5, 1.0, 0.0]), 2.0, 2.0, 0.0, 1.0)
    assert h[0] == pytest.approx(q / 1000) and h[1] == h[2] == 1.0


# -- moments: variance and covariance with private sizes ---------------------------------


def sample(n, seed, corr=0.3):
    r = rng(seed)
    x = r.uniform(0.0, 10.0, n)
    y = np.clip(corr * x - 1 + r.normal(0.0, 1.0, n), -2.0, 3.0)
    return x, y


@pytest.mark.parametrize("n", [3_000, 30_000])
def test_variance_half_width_is_calibrated_for_large_groups(n):
    plan = plan_statistic(var("x", lower=0, upper=10, epsilon=1.0), "substitute")
    x, _ = sample(n, n)
    exact = {"x_var:sum": x.sum(), "x_var:sumsq": (x * x).sum(), "x_var:n": n}
    cover, acc, _ = coverage(plan, exact, {"x_var": x.var(ddof=1)}, seed=n)
    assert abs(cover["x_var"] - LEVEL) < TOL
    assert not acc["x_var_uninformative"].any()


@pytest.mark.parametrize("n", [3, 30, 300])
def test_variance_half_width_is_conservative_for_small_groups(n):
    plan = plan_statistic(var("x", lower=0, upper=10, epsilon=1.0), "substitute")
    x, _ = sample(n, n)
    exact = {"x_var:sum": x.sum(), "x_var:sumsq": (x * x).sum(), "x_var:n": n}
    cover, _, _ = coverage(plan, exact, {"x_var": x.var(ddof=1)}, seed=n)
    assert cover["x_var"] >= LEVEL - TOL


def cov_exact(x, y):
    return {
        "x_y:sx": x.sum(),
        "x_y:sy": y.sum(),
        "x_y:sxx": (x * x).sum(),
        "x_y:syy": (y * y).sum(),
        "x_y:sxy": (x * y).sum(),
        "x_y:n": x.size,
    }


def cov_truth(x, y):
    c = np.cov(x, y)
    return {
        "x_y_var_x": c[0, 0],
        "x_y_var_y": c[1, 1],
        "x_y_cov": c[0, 1],
        "x_y_corr": c[0, 1] / math.sqrt(c[0, 0] * c[1, 1]),
    }


def test_covariance_half_widths_are_calibrated_for_large_groups():
    """All four columns (the correlation by the delta method over the six noises)."""
    stat = cov("x", "y", lower_x=0, upper_x=10, lower_y=-2, upper_y=3, epsilon=3.0)
    plan = plan_statistic(stat, "substitute")
    x, y = sample(30_000, 7)
    cover, acc, _ = coverage(plan, cov_exact(x, y), cov_truth(x, y), seed=7)
    for column, c in cover.items():
        assert abs(c - LEVEL) < TOL, (column, c)
    assert not acc["x_y_uninformative"].any()


def test_covariance_small_groups_and_strong_correlation_are_conservative():
    """Below the threshold every half-width is wide; a correlation near 1 (0.986), where
    the clip into +-sqrt(var_x var_y) binds, over-covers (measured 0.96-0.98)."""
    stat = cov("x", "y", lower_x=0, upper_x=10, lower_y=0, upper_y=10, epsilon=1.0)
    plan = plan_statistic(stat, "substitute")
    r = rng(8)
    x = r.uniform(0, 10, 3_000)
    y = np.clip(x + r.normal(0, 0.5, x.size), 0, 10)
    cover, _, _ = coverage(plan, cov_exact(x, y), cov_truth(x, y), seed=8)
    assert min(cover.values()) >= LEVEL - TOL
    x, y = sample(30, 9)
    cover, acc, _ = coverage(plan, cov_exact(x, y), cov_truth(x, y), seed=9)
    assert min(cover.values()) >= LEVEL - TOL and acc["x_y_uninformative"].all()


# -- public sizes: the bounded mechanism ----------------------------------------------


@pytest.mark.parametrize("method", ["truncated", "bit"])
def test_public_size_half_widths_cover(method):
    """Worst case over the exact value: at least the level (about it in the interior)."""
    n = 5_000
    sizes = np.full(G, n)
    plan = plan_statistic(
        mean("x", lower=0, upper=1, epsilon=1.0, method=method), "substitute", sizes
    )
    cover, acc, _ = coverage(plan, {"x_mean:mean": 0.3}, {"x_mean": 0.3}, seed=11)
    assert cover["x_mean"] >= LEVEL - TOL and not acc["x_mean_uninformative"].any()
    stat = cov("x", "y", lower_x=0, upper_x=10, lower_y=-2, upper_y=3, epsilon=1.0, method=method)
    plan = plan_statistic(stat, "substitute", sizes[:4_000])
    x, y = sample(n, 12)
    c = np.cov(x, y)
    exact = {"x_y:var_x": c[0, 0], "x_y:var_y": c[1, 1], "x_y:cov": c[0, 1]}
    drawn = plan.draw({k: np.full(4_000, v) for k, v in exact.items()}, rng(12))
    acc = plan.accuracy(drawn)
    for column, value in cov_truth(x, y).items():
        ok = np.abs(drawn[column] - value) <= acc[f"{column}_error95"]
        assert ok.mean() >= LEVEL - 4 * math.sqrt(LEVEL * (1 - LEVEL) / 4_000), column


def test_public_size_too_small_is_null_and_flagged():
    plan = plan_statistic(var("x", lower=0, upper=1, epsilon=1.0), "substitute", [1, 50])
    drawn = plan.draw({"x_var:var": np.array([np.nan, 0.1])}, rng(0))
    acc = plan.accuracy(drawn)
    assert np.isnan(acc["x_var_error95"][0]) and acc["x_var_uninformative"].tolist()[0]


# -- counts and sums: the exact quantile of the noise -----------------------------------


def test_count_half_width_is_the_noise_quantile():
    from dpframe.mechanisms.statistics import count

    plan = plan_statistic(count(epsilon=0.5), "substitute")
    drawn = plan.draw({"count:n": np.full(G, 100.0)}, rng(13))
    acc = plan.accuracy(drawn)
    assert set(acc) == {"count_error95"}
    assert (acc["count_error95"] == plan.error95).all()
    assert np.mean(np.abs(drawn["count"] - 100) <= plan.error95) >= LEVEL


def test_accuracy_takes_a_draw_only():
    """The kernel is given what draw() returned -- no exact aggregate -- and the same draw
    gives the same half-widths, copied or not."""
    plan = plan_statistic(mean("x", lower=0, upper=1, epsilon=1.0), "substitute")
    drawn = plan.draw({"x_mean:sum": np.array([40.0]), "x_mean:n": np.array([100.0])}, rng(0))
    noisy = {k: v.copy() for k, v in drawn.noisy.items()}
    copy = Drawn({k: v.copy() for k, v in drawn.items()}, noisy)
    assert plan.accuracy(copy)["x_mean_error95"] == plan.accuracy(drawn)["x_mean_error95"]
    with pytest.raises(InvalidParameterError, match="what draw"):
        plan.accuracy({"x_mean": np.array([0.4])})


# -- PRAM: the standard error of an estimated share, per record -------------------------


def test_pram_share_error_bounds_the_estimators_standard_error():
    """At a vertex (every record in one category) the bound is reached; at a mix it holds.
    2,000 releases of 2,000 records; the sample sd has relative error ~1.6%."""
    d = design(np.array([0.5, 0.3, 0.2]), 1.0)
    s = sampler(d)
    c = pram_share_error(s.matrix)
    n, runs = 2_000, 2_000
    r = rng(14)
    worst = 0.0
    for p in (np.eye(3)[0], np.eye(3)[2], np.array([0.5, 0.3, 0.2])):
        codes = np.repeat(np.arange(3), np.round(p * n).astype(int))
        est = np.array(
            [estimate(s.randomize(codes, r), s.matrix, kind="codes").p_hat for _ in range(runs)]
        )
        sd = est.std(axis=0) * math.sqrt(n)
        assert (sd <= c * (1 + 4 / math.sqrt(2 * runs))).all()
        worst = max(worst, sd.max())
    assert worst == pytest.approx(c, rel=4 / math.sqrt(2 * runs))


def test_pram_share_error_closed_form_and_summary():
    e = math.exp(1.0)
    rr = np.array([[e, 1.0], [1.0, e]]) / (e + 1)  # randomized response
    assert pram_share_error(rr) == pytest.approx(math.sqrt(e) / (e - 1))
    assert pram_share_error(np.ones((2, 2)) / 2) is None  # singular
    plan = plan_pram("region", ["a", "b", "c"], 1.0)
    c = pram_share_error(plan.sampler.matrix)
    note = plan.summary()[0]["note"]
    assert f"95% error <= {1.96 * c:.3g}/sqrt(n) for n records" in note
