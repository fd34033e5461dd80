"""The grid Laplace mechanism: calibration arithmetic, output law, and a privacy audit."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.discrete import discrete_laplace_pmf
from dpframe.mechanisms.laplace import (
    calibrate_laplace,
    check_values,
    default_granularity,
    release_laplace,
)


def test_default_granularity_is_power_of_two_below_sensitivity_over_1024():
    for sens in (1.0, 0.1, 3.7, 1e6, 1e-5):
        g = default_granularity(sens)
        assert math.frexp(g)[0] == 0.5
        assert g <= sens / 1024 < 2 * g


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0, 1e-3])
@pytest.mark.parametrize("sens", [1.0, 0.37, 250.0])
def test_calibration_never_exceeds_requested_epsilon(eps, sens):
    cal = calibrate_laplace(eps, sens)
    assert cal.epsilon_used <= Fraction(repr(eps))
    assert float(cal.epsilon_used) > eps * (1 - 2**-8)  # rounding costs little
    # D grid steps bound how far rounding to the grid can move neighbouring values apart
    g, d_units = cal.granularity, cal.sensitivity_units
    rng = np.random.default_rng(0)
    a = rng.uniform(-1e3, 1e3, 100_000)
    b = a + rng.uniform(-sens, sens, a.size)
    b[:10] = a[:10] + sens  # extreme pairs too
    assert np.abs(np.rint(a / g) - np.rint(b / g)).max() <= d_units
    assert sens < d_units * g <= sens * (1 + 2 / 1024)
    assert cal.scale == pytest.approx(sens / eps, rel=3e-3)


def test_counts_on_unit_grid_have_no_inflation():
    cal = calibrate_laplace(0.5, 2.0, 1.0, values_on_grid=True)
    assert cal.sensitivity_units == 2 and cal.scale == 4.0
    with pytest.raises(InvalidDataError, match="multiples"):
        check_values(np.array([1.5]), cal)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((0, 1.0), "epsilon"),
        ((float("nan"), 1.0), "epsilon"),
        ((1.0, 0), "sensitivity"),
        ((1.0, float("inf")), "sensitivity"),
        ((1.0, 1.0, 0.3), "granularity"),
        ((1.0, 1.0, -0.5), "granularity"),
    ],
)
def test_bad_calibration_inputs(args, name):
    with pytest.raises(InvalidParameterError, match=name):
        calibrate_laplace(*args)


def test_bad_values_refused():
    cal = calibrate_laplace(1.0, 1.0)
    rng = np.random.default_rng(0)
    for bad in (np.array([np.nan]), np.array([np.inf]), np.array([1e300])):
        with pytest.raises(InvalidDataError):
            release_laplace(bad, cal, rng)


def test_output_is_grid_plus_exact_discrete_laplace():
    """Noise (in grid steps) follows the discrete Laplace pmf: chi-square test."""
    cal = calibrate_laplace(1.0, 0.01)  # noise scale ~1025 grid steps
    rng = np.random.default_rng(1)
    s = 3.14159
    out = release_laplace(np.full(200_000, s), cal, rng)
    g = cal.granularity
    steps = out / g
    assert np.array_equal(steps, np.rint(steps))  # every output is a grid point
    z = (steps - np.rint(s / g)).astype(np.int64)
    t = float(cal.noise_scale_fraction)
    # bins of width 100 grid steps out to +-5 scales, tails pooled
    edges = np.arange(-5 * t, 5 * t + 100, 100).astype(np.int64)
    observed = np.histogram(z, bins=np.r_[-(2**62), edges, 2**62])[0]
    support = np.arange(edges[0], edges[-1])
    pmf = discrete_laplace_pmf(support, t)
    inner = np.add.reduceat(pmf, np.searchsorted(support, edges[:-1]))
    expected = np.r_[(1 - pmf.sum()) / 2, inner, (1 - pmf.sum()) / 2] * z.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_privacy_audit_exact_likelihood_ratio():
    """The output law at neighbouring inputs differs by at most exp(eps') pointwise.

    For every pair of inputs at distance <= sensitivity, compute the exact pmf of the
    released grid point over a window and check the worst log-ratio.
    """
    sens, eps = 1.0, 0.5
    cal = calibrate_laplace(eps, sens, 2.0**-3)  # coarse grid: an exhaustive check
    g, t = cal.granularity, float(cal.noise_scale_fraction)
    support = np.arange(-400, 401)
    worst = 0.0
    for a in np.linspace(0.0, 2.0, 41):
        for d in np.linspace(-sens, sens, 33):
            ma, mb = np.rint(a / g), np.rint((a + d) / g)
            pa = discrete_laplace_pmf(support - ma, t)
            pb = discrete_laplace_pmf(support - mb, t)
            worst = max(worst, float(np.max(np.abs(np.log(pa) - np.log(pb)))))
    assert worst <= float(cal.epsilon_used) + 1e-9
    assert float(cal.epsilon_used) <= eps


def test_empirical_audit_of_released_values():
    """Monte Carlo: the frequency of a released event at neighbouring inputs obeys e^eps.

    Event: output >= threshold. Its exact probabilities are compared with the
    observed ones (binomial SE) and the ratio of exact probabilities with e^eps.
    """
    cal = calibrate_laplace(1.0, 1.0)
    rng = np.random.default_rng(5)
    n = 200_000
    x0, x1 = 0.0, 1.0
    thr = 0.5
    out0 = release_laplace(np.full(n, x0), cal, rng)
    out1 = release_laplace(np.full(n, x1), cal, rng)
    g, t = cal.granularity, float(cal.noise_scale_fraction)
    k = np.arange(-60_000, 60_001)
    p0 = discrete_laplace_pmf(k, t)[(k + np.rint(x0 / g)) * g >= thr].sum()
    p1 = discrete_laplace_pmf(k, t)[(k + np.rint(x1 / g)) * g >= thr].sum()
    for out, p in ((out0, p0), (out1, p1)):
        se = math.sqrt(p * (1 - p) / n)
        assert abs((out >= thr).mean() - p) < 5 * se
    assert p1 / p0 <= math.exp(float(cal.epsilon_used)) + 1e-12
