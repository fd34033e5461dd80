"""Exact geometric and truncated discrete Laplace samplers against their exact laws."""

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.discrete import sample_geometric, sample_truncated_discrete_laplace


def chi_square_pvalue(samples, support, pmf):
    """Chi-square of samples against pmf on support, pooling bins to expected >= 5."""
    n = samples.size
    counts = np.bincount(samples - support[0], minlength=support.size)[: support.size]
    obs, exp, o, e = [], [], 0.0, 0.0
    for oi, ei in zip(counts, pmf * n, strict=True):
        o, e = o + oi, e + ei
        if e >= 5:
            obs.append(o)
            exp.append(e)
            o = e = 0.0
    if obs:
        obs[-1] += o
        exp[-1] += e
    if len(obs) < 2:
        return 1.0
    return stats.chisquare(obs, np.array(exp) * sum(obs) / sum(exp)).pvalue


def truncated_pmf(lo, hi, scale, window=80):
    lo_w = lo if np.isfinite(lo) else -window * scale - 10
    hi_w = hi if np.isfinite(hi) else window * scale + 10
    support = np.arange(int(lo_w), int(hi_w) + 1)
    p = np.exp(-np.abs(support) / scale)
    return support, p / p.sum()


@pytest.mark.parametrize(
    ("lo", "hi", "num", "den"),
    [
        (-5, 5, 3, 1),  # around 0
        (0, 40, 5, 1),  # starts at 0: one-sided geometric
        (-40, 0, 5, 1),  # ends at 0
        (2, 40, 5, 1),  # above 0
        (1000, 1010, 5, 1),  # far above 0: shifted truncated geometric, no long loop
        (-1010, -1000, 5, 1),  # far below 0
        (-2, 2, 1000, 1),  # narrow relative to the scale: flat proposal
        (5, 8, 1000, 1),  # narrow and off 0
        (-np.inf, np.inf, 3, 1),  # untruncated
        (-4, np.inf, 3, 1),  # one-sided bound
        (3, np.inf, 4, 1),
        (-np.inf, -7, 4, 1),
        (-1, 1000, 1, 3),  # scale 1/3
        (-100, 100, 7, 2),
    ],
)
def test_truncated_discrete_laplace_matches_exact_pmf(lo, hi, num, den):
    rng = np.random.Generator(np.random.PCG64(12))
    z = sample_truncated_discrete_laplace(lo, hi, num, den, size=100_000, rng=rng)
    assert z.min() >= lo and z.max() <= hi
    support, pmf = truncated_pmf(lo, hi, num / den)
    assert chi_square_pvalue(z, support, pmf) > 1e-3


def test_single_point_interval():
    rng = np.random.Generator(np.random.PCG64(1))
    assert (sample_truncated_discrete_laplace(7, 7, 3, 1, size=50, rng=rng) == 7).all()


def test_per_element_parameters_broadcast():
    rng = np.random.Generator(np.random.PCG64(2))
    lo = np.array([-5.0, 100.0, -np.inf])
    hi = np.array([5.0, 200.0, -50.0])
    z = sample_truncated_discrete_laplace(lo, hi, np.array([3, 10, 2]), 1, rng=rng)
    assert z.shape == (3,)
    assert -5 <= z[0] <= 5 and 100 <= z[1] <= 200 and z[2] <= -50


@pytest.mark.parametrize(
    ("lo", "hi", "match"),
    [(1.5, 3, "lower"), (3, 1, "lower"), (np.nan, 1, "lower"), (0, np.inf * -1, "lower")],
)
def test_bad_bounds(lo, hi, match):
    with pytest.raises(InvalidParameterError, match=match):
        sample_truncated_discrete_laplace(lo, hi, 3, 1, rng=np.random.default_rng(0))


@pytest.mark.parametrize(("num", "den"), [(1, 1), (10, 1), (3, 7)])
def test_geometric_matches_exact_law(num, den):
    rng = np.random.Generator(np.random.PCG64(3))
    y = sample_geometric(num, den, size=100_000, rng=rng)
    ratio = np.exp(-den / num)
    support = np.arange(0, int(60 * num / den) + 20)
    pmf = (1 - ratio) * ratio**support
    assert y.min() >= 0
    assert chi_square_pvalue(y, support, pmf / pmf.sum()) > 1e-3


def test_integer_bounds_beyond_float_precision_are_refused():
    # 2**53 + 1 would silently become 2**53 as a float64 bound
    with pytest.raises(InvalidParameterError, match="2\\*\\*53"):
        sample_truncated_discrete_laplace(2**53 + 1, 2**53 + 1, 3, 1, size=2)
