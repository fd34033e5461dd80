"""Tests of the discrete Gaussian mechanism (dpframe.mechanisms.gaussian).

Statistical tolerances come from theory: goodness of fit by chi-square and KS tests
rejected at p < 1e-3, means and frequencies within 5 standard errors. Every test uses
a fixed seed, so the outcome is deterministic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms import gaussian
from dpframe.mechanisms.gaussian import (
    calibrate_gaussian,
    discrete_gaussian_cdf,
    discrete_gaussian_pmf,
    discrete_gaussian_quantile_abs,
    discrete_gaussian_tail,
    discrete_gaussian_variance,
    release_gaussian,
    sample_discrete_gaussian,
)

from .test_discrete import IntegersOnlyGenerator

N = 200_000
Z_BOUND = 5.0
MIN_P_VALUE = 1e-3
MIN_EXPECTED = 5.0

# (sigma^2 as num/den, seed)
SIGMAS = [((1, 4), 1), ((1, 1), 2), ((1369, 100), 3), ((2500, 1), 4)]


def make_rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def brute_pmf(sigma: float, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """The pmf on ``[-half_width, half_width]`` by brute-force normalisation."""
    k = np.arange(-half_width, half_width + 1)
    w = np.exp(-(k.astype(np.float64) ** 2) / (2 * sigma * sigma))  # k^2 exact in float
    return k, w / math.fsum(w)


def chisquare_p_value(samples: np.ndarray, sigma: float) -> float:
    """Chi-square against the exact pmf; bins pooled to >= 5 expected, tails in end bins."""
    n = samples.size
    h = discrete_gaussian_quantile_abs(1.0 - 1.0 / n, sigma)
    support = np.arange(-h, h + 1)
    expected = n * discrete_gaussian_pmf(support, sigma)
    expected[0] += n * float(discrete_gaussian_cdf(-h - 1, sigma))
    expected[-1] += n * float(discrete_gaussian_cdf(-h - 1, sigma))
    rights, total, exp_bins = [], 0.0, []
    for z, e in zip(support, expected, strict=True):
        total += e
        if total >= MIN_EXPECTED:
            rights.append(z)
            exp_bins.append(total)
            total = 0.0
    exp_bins[-1] += total
    rights[-1] = support[-1]
    clipped = np.clip(samples, -h, h)
    observed = np.bincount(np.searchsorted(rights, clipped, side="left"), minlength=len(rights))
    expected_bins = np.array(exp_bins)
    return float(stats.chisquare(observed, expected_bins * n / expected_bins.sum()).pvalue)


def ks_abs_p_value(samples: np.ndarray, sigma: float) -> float:
    """KS of |Z| against its exact cdf (conservative for a discrete law).

    Both cdfs are step functions that jump only at integers, and the empirical one only
    at observed values: the supremum is attained at an observed value or just before it.
    """
    a = np.sort(np.abs(samples))
    h = np.unique(np.r_[a, np.maximum(a - 1, 0)])
    emp = np.searchsorted(a, h, side="right") / a.size
    exact = 1.0 - discrete_gaussian_tail(h + 1, sigma)
    d = float(np.max(np.abs(emp - exact)))
    return float(stats.kstwo.sf(d, a.size))


# ---------------------------------------------------------------------------
# the sampler
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("frac", "seed"), SIGMAS)
def test_sampler_matches_the_exact_law(frac, seed):
    num, den = frac
    sigma = math.sqrt(num / den)
    z = sample_discrete_gaussian(num, den, size=N, rng=make_rng(seed))
    assert z.dtype == np.int64 and z.shape == (N,)
    var = discrete_gaussian_variance(sigma)
    assert abs(z.mean()) <= Z_BOUND * math.sqrt(var / N)
    assert chisquare_p_value(z, sigma) > MIN_P_VALUE
    assert ks_abs_p_value(z, sigma) > MIN_P_VALUE


def test_sampler_draws_integers_only():
    z = sample_discrete_gaussian(
        1369, 100, size=20_000, rng=IntegersOnlyGenerator(np.random.PCG64(5))
    )
    assert chisquare_p_value(z, 3.7) > MIN_P_VALUE


def test_sampler_shapes_and_default_rng():
    assert sample_discrete_gaussian(4, 1).shape == ()
    assert sample_discrete_gaussian(4, 1, size=(3, 2)).shape == (3, 2)
    assert sample_discrete_gaussian(4, 1, size=0, rng=make_rng(0)).shape == (0,)


def test_sampler_extreme_sigmas_without_overflow():
    rng = make_rng(6)
    # sigma = 1e6: M = 2 num den t^2 ~ 2e24 is far beyond int64
    z = sample_discrete_gaussian(10**12, 1, size=50_000, rng=rng)
    assert abs(z.mean()) <= Z_BOUND * 1e6 / math.sqrt(z.size)
    assert ks_abs_p_value(z, 1e6) > MIN_P_VALUE
    # sigma close to the largest allowed (2**31 - 2 grid steps)
    s = 2**31 - 2
    z = sample_discrete_gaussian(s * s, 1, size=5_000, rng=rng)
    assert ks_abs_p_value(z, float(s)) > MIN_P_VALUE
    # a huge denominator: |Y| den t overflows int64 for |Y| >= 2 (object path)
    z = sample_discrete_gaussian(2**61, 2**62, size=20_000, rng=rng)  # sigma^2 = 1/2
    assert chisquare_p_value(z, math.sqrt(0.5)) > MIN_P_VALUE
    # tiny sigma: almost always 0
    z = sample_discrete_gaussian(1, 2**40, size=1_000, rng=rng)
    assert not z.any()


def test_acceptance_is_exact_for_huge_exponents():
    """Bernoulli(exp(-a^2 / M)) for a near and beyond 2**62, against exp(-gamma)."""
    rng = make_rng(7)
    n = 100_000
    cases = [
        (np.full(n, 2**61, dtype=np.int64), 2 * 2**122),  # gamma = 1/2, int64 a
        (np.full(n, 3 * 10**30, dtype=object), 9 * 10**60),  # gamma = 1, object a
        (np.full(n, -(10**40), dtype=object), 10**80 // 3),  # gamma = 3
        (np.full(n, 0, dtype=np.int64), 5),  # gamma = 0: always
    ]
    for a, big_m in cases:
        gamma = Fraction(int(a[0]) ** 2, big_m)
        p = math.exp(-float(gamma))
        draws = gaussian._bernoulli_exp_square(a, big_m, rng)
        assert abs(draws.mean() - p) <= Z_BOUND * math.sqrt(p * (1 - p) / n) + 1e-12
    # gamma = 1e20: never, and fast (stops at the first failing factor)
    a = np.full(1000, 10**20, dtype=object)
    assert not gaussian._bernoulli_exp_square(a, 10**20, rng).any()


def test_float_ties_are_decided_with_integers():
    """Force the float margin to cover every comparison: same law, integer decisions."""
    rng = make_rng(8)
    saved = gaussian._MARGIN
    gaussian._MARGIN = 10.0  # every comparison is "unsure"
    try:
        a = np.full(20_000, 7, dtype=np.int64)
        draws = gaussian._bernoulli_exp_square(a, 98, rng)  # gamma = 1/2
    finally:
        gaussian._MARGIN = saved
    p = math.exp(-0.5)
    assert abs(draws.mean() - p) <= Z_BOUND * math.sqrt(p * (1 - p) / draws.size)


@pytest.mark.parametrize(
    ("num", "den"), [(0, 1), (1, 0), (2**63, 1), (1.5, 1), (True, 1), (2**62, 1)]
)
def test_sampler_refuses_bad_parameters(num, den):
    with pytest.raises(InvalidParameterError, match="sigma"):
        sample_discrete_gaussian(num, den, size=3, rng=make_rng(0))


# ---------------------------------------------------------------------------
# the law
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.05, 0.5, 1.0, 3.7, 50.0, 999.5, 1000.0, 12345.6])
def test_pmf_cdf_tail_match_brute_force(sigma):
    half = math.ceil(40 * sigma + 10)
    k, pmf = brute_pmf(sigma, half)
    assert math.fsum(discrete_gaussian_pmf(k, sigma)) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(discrete_gaussian_pmf(k, sigma), pmf, rtol=1e-12, atol=1e-300)
    pts = np.unique(np.r_[np.linspace(-half, half, 201).round(), -1, 0, 1])
    idx = (pts + half).astype(np.int64)
    brute_cdf = np.cumsum(pmf)[idx]  # small terms first: accurate left tails
    np.testing.assert_allclose(discrete_gaussian_cdf(pts, sigma), brute_cdf, rtol=1e-9, atol=1e-14)
    pos = pts[pts >= 1]
    brute_tail = 2 * np.cumsum(pmf[::-1])[::-1][(pos + half).astype(np.int64)]
    np.testing.assert_allclose(
        discrete_gaussian_tail(pos, sigma), brute_tail, rtol=1e-9, atol=1e-300
    )
    assert float(discrete_gaussian_tail(0, sigma)) == 1.0


def test_asymptotic_tails_agree_with_direct_sums():
    k = np.arange(1, 12_001, 7, dtype=np.float64)
    for sigma in (300.0, 999.0):
        direct = gaussian._upper_direct(k, sigma)
        asym = gaussian._upper_asymptotic(k, sigma)
        big = direct > 1e-300
        np.testing.assert_allclose(asym[big], direct[big], rtol=1e-9)


@pytest.mark.parametrize("sigma", [0.3, 0.5, 1.0, 1.5, 3.7, 50.0])
def test_variance_matches_brute_force(sigma):
    k, pmf = brute_pmf(sigma, math.ceil(40 * sigma + 10))
    brute = math.fsum(pmf * k.astype(float) ** 2)
    assert discrete_gaussian_variance(sigma) == pytest.approx(brute, rel=1e-12)
    assert discrete_gaussian_variance(sigma) <= sigma**2


@pytest.mark.parametrize("sigma", [0.2, 1.0, 3.7, 50.0, 2000.0])
@pytest.mark.parametrize("prob", [0.0, 0.5, 0.9, 0.95, 0.999999])
def test_quantile_abs_is_the_smallest_covering_half_width(sigma, prob):
    h = discrete_gaussian_quantile_abs(prob, sigma)
    assert 1.0 - float(discrete_gaussian_tail(h + 1, sigma)) >= prob - 1e-15
    if h > 0:
        assert 1.0 - float(discrete_gaussian_tail(h, sigma)) < prob


def test_law_refuses_bad_parameters():
    with pytest.raises(InvalidParameterError, match="sigma"):
        discrete_gaussian_pmf(0, 0.0)
    with pytest.raises(InvalidParameterError, match="prob"):
        discrete_gaussian_quantile_abs(1.0, 1.0)


# ---------------------------------------------------------------------------
# calibration and release
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.001, 0.02, 0.1, 0.5, 3.0])
@pytest.mark.parametrize("sens", [1.0, 0.3, 17.0])
@pytest.mark.parametrize("changed", [1, 2])
def test_calibration_is_the_smallest_sigma_within_rho(rho, sens, changed):
    cal = calibrate_gaussian(sens, rho=rho, changed=changed)
    exact_rho = Fraction(repr(rho))
    assert cal.privacy_loss <= exact_rho
    assert cal.rho == rho
    # one step smaller in sigma^2 would exceed rho
    s2 = cal.sigma2
    smaller = Fraction(s2.numerator - 1, s2.denominator)
    assert cal.sensitivity_units_squared / (2 * smaller) > exact_rho
    # the exact units^2 bound is an upper bound of the float one, and tight
    units = sens / cal.granularity + math.sqrt(changed)
    assert cal.sensitivity_units == pytest.approx(units, rel=1e-15)
    assert float(cal.sensitivity_units_squared) >= units**2 * (1 - 1e-15)
    assert float(cal.sensitivity_units_squared) <= units**2 * (1 + 1e-9)
    assert cal.scale == pytest.approx(units * cal.granularity / math.sqrt(2 * rho), rel=1e-9)


def test_counts_on_a_unit_grid():
    cal = calibrate_gaussian(1.0, rho=0.5, granularity=1.0, values_on_grid=True)
    assert cal.sigma2 == 1 and cal.privacy_loss == Fraction(1, 2) and cal.sensitivity_units == 1.0
    cal = calibrate_gaussian(2.0, rho=0.125, granularity=1.0, values_on_grid=True)
    assert cal.sigma2 == 16 and cal.scale == 4.0


def test_sigma_given_charges_the_loss_it_implies():
    cal = calibrate_gaussian(1.0, sigma=3.0, granularity=1.0, values_on_grid=True)
    assert cal.sigma2 == 9 and cal.privacy_loss == Fraction(1, 18)
    assert Fraction(cal.rho) >= cal.privacy_loss
    cal = calibrate_gaussian(1.0, sigma=3.0)
    assert Fraction(cal.rho) >= cal.privacy_loss
    assert cal.rho == pytest.approx((1024 + 1) ** 2 / 2 / (3 * 1024) ** 2, rel=1e-9)
    assert cal.scale >= 3.0


def test_error_is_the_exact_quantile():
    cal = calibrate_gaussian(1.0, rho=0.5, granularity=1.0, values_on_grid=True)
    assert cal.error(0.95) == 2.0  # P(|Z| <= 2) = 0.9545 for sigma = 1
    assert set(cal.details()) >= {"sensitivity", "granularity", "privacy_loss", "sigma"}


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sensitivity": 1.0}, "rho"),
        ({"sensitivity": 1.0, "rho": 1.0, "sigma": 1.0}, "rho"),
        ({"sensitivity": 0.0, "rho": 1.0}, "sensitivity"),
        ({"sensitivity": 1.0, "rho": -1.0}, "rho"),
        ({"sensitivity": 1.0, "sigma": float("nan")}, "sigma"),
        ({"sensitivity": 1.0, "rho": 1.0, "changed": 0}, "changed"),
        ({"sensitivity": 1.0, "rho": 1.0, "granularity": 0.3}, "granularity"),
        ({"sensitivity": 1.0, "rho": 1e-15}, "granularity"),
    ],
)
def test_bad_calibration_inputs(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        calibrate_gaussian(**kwargs)


def test_bad_values_refused():
    cal = calibrate_gaussian(1.0, rho=0.5, granularity=1.0, values_on_grid=True)
    for bad in ([np.nan], [np.inf], [0.5], [2.0**70]):
        with pytest.raises(InvalidDataError):
            cal.check(np.array(bad))


def test_release_is_grid_plus_exact_discrete_gaussian():
    cal = calibrate_gaussian(1.0, rho=0.5, granularity=2.0**-4)
    x = np.full(N, 10.3)
    out = cal.release(x, make_rng(9))
    g = cal.granularity
    assert np.array_equal(out / g, np.rint(out / g))
    noise = (out / g - np.rint(10.3 / g)).astype(np.int64)
    assert chisquare_p_value(noise, cal.sigma_units) > MIN_P_VALUE
    assert release_gaussian([1.0], cal, make_rng(0)).shape == (1,)


def test_exact_renyi_divergence_within_rho():
    """D_alpha between the outputs at neighbouring grid inputs is <= alpha * privacy_loss."""
    cal = calibrate_gaussian(1.0, rho=0.1, granularity=2.0**-3)
    s = cal.sigma_units
    half = math.ceil(40 * s + 40)
    k = np.arange(-half, half + 1)
    worst = 0.0
    for x0, x1 in ((0.0, 1.0), (0.06, 1.0624), (0.2, -0.8)):  # |x0 - x1| <= 1
        m0, m1 = np.rint(x0 / cal.granularity), np.rint(x1 / cal.granularity)
        with np.errstate(divide="ignore"):  # log(0) = -inf far in the tails
            lp0 = np.log(discrete_gaussian_pmf(k - m0, s))
            lp1 = np.log(discrete_gaussian_pmf(k - m1, s))
        both = np.isfinite(lp0) & np.isfinite(lp1)  # the rest is below exp(-700)
        for alpha in (1.5, 2.0, 5.0, 20.0):
            d = special.logsumexp(alpha * lp0[both] + (1 - alpha) * lp1[both]) / (alpha - 1)
            worst = max(worst, d / alpha)
    assert worst <= float(cal.privacy_loss) * (1 + 1e-9)
    assert cal.privacy_loss <= Fraction(1, 10)


def test_empirical_privacy_loss_matches_the_exact_log_ratio():
    """Monte Carlo at inputs 0 and Delta: log(p0(k) / p1(k)) = (Delta^2 - 2 k Delta) / (2 s^2)."""
    cal = calibrate_gaussian(2.0, rho=0.08, granularity=1.0, values_on_grid=True)
    s2 = float(cal.sigma2)  # 2^2 / (2 * 0.08) = 25
    assert s2 == 25.0
    rng = make_rng(10)
    n = 400_000
    out0 = cal.release(np.zeros(n), rng).astype(np.int64)
    out1 = cal.release(np.full(n, 2.0), rng).astype(np.int64)
    lo = min(out0.min(), out1.min())
    c0 = np.bincount(out0 - lo)
    c1 = np.bincount(out1 - lo, minlength=c0.size)[: c0.size]
    c0 = c0[: c1.size]
    k = np.arange(c0.size) + lo
    ok = (c0 >= 500) & (c1 >= 500)
    assert ok.sum() >= 20
    emp = np.log(c0[ok] / c1[ok])
    exact = (4.0 - 4.0 * k[ok]) / (2 * s2)
    se = np.sqrt(1.0 / c0[ok] + 1.0 / c1[ok])  # delta method, binomial counts
    assert np.all(np.abs(emp - exact) <= Z_BOUND * se)
    # the loss random variable's mean is the KL divergence, Delta^2 / (2 s^2) = rho here
    loss = (4.0 - 4.0 * out0) / (2 * s2)
    assert abs(loss.mean() - 0.08) <= Z_BOUND * loss.std() / math.sqrt(n)
