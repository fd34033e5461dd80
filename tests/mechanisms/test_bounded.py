"""Truncated and BIT grid mechanisms: exact privacy loss, calibration, sampling law."""

import math

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.bounded import (
    calibrate_bounded,
    grid_truncated_privacy_loss,
    sample_bit_laplace,
    sample_truncated_laplace,
    truncated_laplace_privacy_loss,
    truncated_laplace_scale,
)


def brute_force_loss(gamma, d_units, a, b):
    """max over m, m' in [a, b] with |m - m'| <= D and outputs y of log P_m(y) / P_m'(y)."""
    ys = np.arange(a, b + 1)
    ms = np.arange(a, b + 1)
    logp = -gamma * np.abs(ys[None, :] - ms[:, None])
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    worst = 0.0
    for i, m in enumerate(ms):
        for j, m2 in enumerate(ms):
            if abs(m - m2) <= d_units:
                worst = max(worst, float(np.max(logp[i] - logp[j])))
    return worst


@pytest.mark.parametrize("gamma", [0.01, 0.3, 1.0, 2.5])
@pytest.mark.parametrize(("d_units", "width"), [(1, 5), (3, 10), (4, 25), (7, 7), (9, 4)])
def test_grid_loss_formula_matches_exhaustive_search(gamma, d_units, width):
    exact = brute_force_loss(gamma, d_units, 0, width)
    assert grid_truncated_privacy_loss(gamma, d_units, width) == pytest.approx(exact, rel=1e-10)


@pytest.mark.parametrize("gamma", [0.05, 0.7])
def test_grid_loss_one_sided_is_the_limit_of_wide_intervals(gamma):
    wide = brute_force_loss(gamma, 3, 0, 400)
    assert grid_truncated_privacy_loss(gamma, 3, math.inf) == pytest.approx(wide, rel=1e-9)


@pytest.mark.parametrize(
    ("sens", "lo", "hi"), [(0.1, 0, 1), (1.0, -3, 3), (0.02, 0, 1), (1, 0, None)]
)
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_exact_calibration_is_tight_and_paper_overspends(sens, lo, hi, eps):
    exact = calibrate_bounded(eps, sens, lo, hi)
    paper = calibrate_bounded(eps, sens, lo, hi, calibration="paper")
    assert exact.privacy_loss <= eps
    # not needlessly noisy: gamma = k / 2**30 loses at most one step, 1 / (gamma 2**30)
    step = 1 / (float(exact.gamma) * 2**30)
    assert exact.privacy_loss > eps * (1 - 2 * step - 1e-9)
    assert exact.epsilon_charged == eps
    assert paper.privacy_loss > eps  # lambda = sensitivity / eps is not eps-DP truncated
    assert paper.epsilon_charged >= paper.privacy_loss
    assert paper.scale == pytest.approx(sens / eps, rel=2e-3)
    bit = calibrate_bounded(eps, sens, lo, hi, method="bit")
    assert bit.privacy_loss <= eps and bit.scale == pytest.approx(sens / eps, rel=2e-3)


@pytest.mark.parametrize(
    ("scale", "sens", "lo", "hi"), [(0.1, 0.1, 0, 1), (2.0, 1.0, -3, 3), (1, 1, 0, None)]
)
def test_grid_loss_converges_to_the_continuous_loss(scale, sens, lo, hi):
    g = 2.0**-14
    gamma = g / scale
    units = math.floor(sens / g) + 1
    width = (hi - lo) / g if hi is not None else math.inf
    grid = grid_truncated_privacy_loss(gamma, units, width)
    cont = truncated_laplace_privacy_loss(scale, sens, lo, hi)
    assert grid == pytest.approx(cont, abs=3 * g / scale)


def test_paper_scale_exceeds_epsilon_as_the_holohan_example():
    # eps = 1, Δ = 0.1 on [0, 1]: the truncated mechanism at λ = Δ/ε loses about 1.49
    assert truncated_laplace_privacy_loss(0.1, 0.1, 0.0, 1.0) == pytest.approx(1.4898, abs=1e-4)
    assert truncated_laplace_scale(1.0, 0.1, 0.0, 1.0) > 0.1


def exact_truncated_pmf(m, a, b, gamma):
    ys = np.arange(a, b + 1)
    p = np.exp(-gamma * np.abs(ys - m))
    return ys, p / p.sum()


@pytest.mark.parametrize(
    ("loc", "scale", "lo", "hi"),
    [
        (0.5, 0.1, 0.0, 1.0),  # inside
        (0.0, 0.1, 0.0, 1.0),  # on a bound
        (9.0, 0.1, 0.0, 1.0),  # far outside (90 scales): no rejection loop
        (0.5, 1e-3, 0.0, 1.0),  # scale tiny relative to the interval
        (0.5, 1e3, 0.0, 1.0),  # scale huge relative to the interval
    ],
)
def test_truncated_sampler_matches_exact_law(loc, scale, lo, hi):
    g = 2.0**-6 if scale >= 0.1 else 2.0**-14
    rng = np.random.default_rng(11)
    n = 100_000
    x = sample_truncated_laplace(loc, scale, lo, hi, size=n, rng=rng, granularity=g)
    assert x.min() >= lo and x.max() <= hi
    from dpframe.mechanisms.bounded import _sampling_grid

    _, gamma, a, b, _ = _sampling_grid(loc, scale, lo, hi, None, g)
    y = np.rint(x / g).astype(np.int64)
    assert grid_chi_square_p(y, round(loc / g), a, b, float(gamma)) > 1e-3


def test_truncated_one_sided_close_to_continuous_cdf():
    """KS against the continuous law Laplace(0.3, 1) | [0, inf): the grid is 2^-10 fine."""
    rng = np.random.default_rng(3)
    x = sample_truncated_laplace(0.3, 1.0, 0.0, None, size=50_000, rng=rng)
    lam, s = 1.0, 0.3
    mass = 1 - 0.5 * math.exp(-s / lam)

    def cdf(v):
        lap = np.where(v < s, 0.5 * np.exp((v - s) / lam), 1 - 0.5 * np.exp(-(v - s) / lam))
        return (lap - 0.5 * math.exp(-s / lam)) / mass

    assert stats.kstest(x, cdf).pvalue > 1e-3


def test_bit_point_masses():
    rng = np.random.default_rng(4)
    n = 200_000
    lam, s, lo, hi = 0.5, 0.8, 0.0, 1.0
    x = sample_bit_laplace(s, lam, lo, hi, size=n, rng=rng)
    p_hi = 0.5 * math.exp(-(hi - s) / lam)  # eq. (5) corrected: not 1 - 1/2 exp(...)
    p_lo = 0.5 * math.exp(-(s - lo) / lam)
    for observed, p in (((x == hi).mean(), p_hi), ((x == lo).mean(), p_lo)):
        assert abs(observed - p) < 4 * math.sqrt(p * (1 - p) / n) + 2.0**-10 / lam
    assert x.min() >= lo and x.max() <= hi


def test_release_clips_to_bounds_and_uses_grid():
    cal = calibrate_bounded(1.0, 0.05, 0.0, 1.0)
    rng = np.random.default_rng(0)
    out = cal.release(np.array([-5.0, 0.3, 7.0]), rng)  # out-of-bounds statistics are clipped
    assert ((out >= 0) & (out <= 1)).all()
    assert np.array_equal(out / cal.granularity, np.rint(out / cal.granularity))
    with pytest.raises(InvalidDataError):
        cal.release(np.array([np.nan]), rng)


def test_empirical_audit_paper_calibration_exceeds_epsilon():
    """Monte Carlo of the extreme event {output = lower bound} at s = lower vs s' = lower + Δ.

    With the paper's λ = Δ/ε the ratio of its probabilities exceeds e^ε (by more than
    4 SE); with the exact calibration the exact ratio stays below e^ε.
    """
    eps, sens = 1.0, 0.25
    n = 400_000
    for calibration, should_exceed in (("paper", True), ("exact", False)):
        cal = calibrate_bounded(eps, sens, 0.0, 1.0, calibration=calibration, granularity=2**-5)
        rng = np.random.default_rng(8)
        y0 = cal.release(np.zeros(n), rng)
        y1 = cal.release(np.full(n, sens), rng)
        p0, p1 = (y0 == 0).mean(), (y1 == 0).mean()
        se_log = math.sqrt((1 - p0) / (n * p0) + (1 - p1) / (n * p1))
        log_ratio = math.log(p0 / p1)
        if should_exceed:
            assert log_ratio - 4 * se_log > eps
        else:
            assert log_ratio - 4 * se_log < eps
            a, b = 0, 32
            _, q0 = exact_truncated_pmf(0, a, b, float(cal.gamma))
            _, q1 = exact_truncated_pmf(round(sens / cal.granularity), a, b, float(cal.gamma))
            assert math.log(q0[0] / q1[0]) <= eps


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"sensitivity": -1}, "sensitivity"),
        ({"lower": 1.0, "upper": 1.0}, "lower"),
        ({"lower": float("nan")}, "lower"),
        ({"method": "clamp"}, "method"),
        ({"calibration": "approx"}, "calibration"),
        ({"granularity": 0.3}, "granularity"),
    ],
)
def test_bad_parameters(kwargs, name):
    args = {"epsilon": 1.0, "sensitivity": 0.1, "lower": 0.0, "upper": 1.0} | kwargs
    with pytest.raises(InvalidParameterError, match=name):
        calibrate_bounded(**args)


def grid_chi_square_p(y: np.ndarray, m: int, a: int, b: int, gamma: float) -> float:
    """Chi-square of grid draws ``y`` against ``P(y) ∝ exp(-gamma |y - m|)`` on [a, b]."""
    ys, p = exact_truncated_pmf(m, a, b, gamma)
    n = y.size
    observed = np.bincount(y - a, minlength=ys.size)
    keep = p * n >= 5
    exp_counts = np.r_[p[keep] * n, p[~keep].sum() * n]
    obs_counts = np.r_[observed[keep], observed[~keep].sum()]
    if exp_counts[-1] < 5:
        exp_counts[-2] += exp_counts[-1]
        obs_counts[-2] += obs_counts[-1]
        exp_counts, obs_counts = exp_counts[:-1], obs_counts[:-1]
    return stats.chisquare(obs_counts, exp_counts).pvalue


@pytest.mark.parametrize("method", ["truncated", "bit"])
@pytest.mark.parametrize(("sens", "upper"), [(1.0, 0.1), (0.05, 1.0)])  # flat, far truncation
def test_release_in_blocks_has_each_values_law(method, sens, upper):
    # 3 x 70,000 values, each location spanning a block boundary (blocks of 2**16): each
    # location's draws follow its own law (truncated, or the clamped discrete Laplace).
    from dpframe.mechanisms.discrete import BLOCK

    cal = calibrate_bounded(1.0, sens, 0.0, upper, method=method)
    g, a, b, gamma = cal.granularity, int(cal.grid_lower), int(cal.grid_upper), float(cal.gamma)
    locations = [0, (a + b) // 3, b]
    n = 70_000
    assert 3 * n > 3 * BLOCK and n > BLOCK
    values = np.repeat(np.array(locations, dtype=float) * g, n)
    y = np.rint(cal.release(values, np.random.default_rng(41)) / g).astype(np.int64)
    for i, m in enumerate(locations):
        draws = y[i * n : (i + 1) * n]
        assert draws.min() >= a and draws.max() <= b
        if method == "truncated":
            assert grid_chi_square_p(draws, m, a, b, gamma) > 1e-3
        else:  # BIT: the interior cells and the two point masses
            z = np.arange(a - m, b - m + 1)
            pmf = np.exp(-gamma * np.abs(z)) * math.tanh(gamma / 2)
            beta = math.exp(-gamma)
            pmf[0] = beta ** (m - a) / (1 + beta)  # P(Z <= a - m), a - m <= 0
            pmf[-1] = beta ** (b - m) / (1 + beta)  # P(Z >= b - m), b - m >= 0
            assert abs(pmf.sum() - 1) < 1e-9
            counts = np.bincount(draws - a, minlength=z.size)
            keep = pmf * n >= 5
            exp_c = np.r_[pmf[keep], pmf[~keep].sum()] * n
            obs_c = np.r_[counts[keep], counts[~keep].sum()]
            if exp_c[-1] < 5:
                exp_c, obs_c = exp_c[:-1], obs_c[:-1]
            assert stats.chisquare(obs_c, exp_c * obs_c.sum() / exp_c.sum()).pvalue > 1e-3


def test_release_checks_every_value_before_drawing():
    # a bad value in the last block is refused before the first block draws anything
    class NoDraws:
        def integers(self, *args, **kwargs):
            raise AssertionError("noise was drawn before every value was checked")

    cal = calibrate_bounded(1.0, 0.05, 0.0, 1.0)
    values = np.full(300_000, 0.5)
    values[-1] = np.nan
    with pytest.raises(InvalidDataError, match="finite"):
        cal.release(values, NoDraws())
    one_sided = calibrate_bounded(1.0, 0.05, 0.0, None, granularity=2.0**-20)
    values[-1] = 2.0**45  # 2**65 grid steps
    with pytest.raises(InvalidDataError, match="too large"):
        one_sided.release(values, NoDraws())


def test_bounds_too_far_out_for_the_grid_are_refused_before_any_release():
    # lo - m must fit in int64: a finite bound 2**61 or more grid steps from 0 is refused
    # when calibrating (it used to overflow, or wrap and loop on some values only)
    with pytest.raises(InvalidParameterError, match="lower"):
        calibrate_bounded(1.0, 1.0, -1e20, 1.0)
    with pytest.raises(InvalidParameterError, match="lower"):
        calibrate_bounded(1.0, 1.0, -9.0e18, 2.3e18, granularity=1.0)
    with pytest.raises(InvalidParameterError, match="lower"):
        sample_truncated_laplace(0.0, 1.0, -1e308, 0.0, granularity=2.0**-20)


@pytest.mark.parametrize("sampler", [sample_truncated_laplace, sample_bit_laplace])
@pytest.mark.parametrize(
    ("loc", "size", "match"),
    [(np.nan, None, "finite"), (np.inf, 3, "finite"), ("x", None, "loc"), ([1, 2, 3], 2, "loc")],
)
def test_samplers_refuse_bad_locations(sampler, loc, size, match):
    with pytest.raises(InvalidParameterError, match=match):
        sampler(loc, 1.0, 0.0, 1.0, size=size, rng=np.random.default_rng(0))
