"""Tests of the exact discrete Laplace sampler (dpframe.mechanisms.discrete).

Statistical tolerances come from theory, not tuning: means are checked to within
5 standard errors (a two-sided normal tail of about 6e-7), goodness of fit by a
chi-square test at p > 1e-3.  Every test uses a fixed seed, so the outcome is
deterministic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms import discrete
from dpframe.mechanisms.discrete import (
    discrete_laplace_cdf,
    discrete_laplace_pmf,
    discrete_laplace_quantile_abs,
    discrete_laplace_tail,
    discrete_laplace_variance,
    sample_bernoulli_exp,
    sample_discrete_laplace,
)

N_BERNOULLI = 200_000
N_LAPLACE = 200_000
Z_BOUND = 5.0  # standard errors allowed for means and variances
MIN_P_VALUE = 1e-3  # chi-square goodness of fit
MIN_EXPECTED = 5.0  # smallest expected count in a chi-square bin (Cochran's rule)


def make_rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


class IntegersOnlyGenerator(np.random.Generator):
    """A Generator that fails on any draw other than ``integers(..., dtype=int64)``."""

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        assert dtype is np.int64, f"integers called with dtype={dtype!r}"
        assert not endpoint
        return super().integers(low, high, size=size, dtype=dtype, endpoint=endpoint)

    def _forbidden(self, *args, **kwargs):
        raise AssertionError("the sampler must draw with Generator.integers only")

    random = uniform = laplace = geometric = exponential = _forbidden
    standard_exponential = normal = standard_normal = binomial = _forbidden
    choice = permutation = shuffle = bytes = poisson = _forbidden


# ---------------------------------------------------------------------------
# Theory used for tolerances
# ---------------------------------------------------------------------------


def fourth_moment(scale: float) -> float:
    """E[Z^4] of the discrete Laplace distribution.

    With ``b = exp(-1/scale)`` and ``P(Z = z) = (1-b)/(1+b) * b^|z|``,
    ``E[Z^4] = 2 (1-b)/(1+b) * sum_{k>=1} k^4 b^k`` and
    ``sum_{k>=1} k^4 b^k = b (1 + 11b + 11b^2 + b^3) / (1-b)^5``, so
    ``E[Z^4] = 2b (1 + 11b + 11b^2 + b^3) / ((1+b) (1-b)^4)``
    (-> 24 scale^4, the continuous Laplace value, as scale grows).
    Checked against a brute-force sum in ``test_fourth_moment_formula``.
    """
    b = math.exp(-1.0 / scale)
    one_minus_b = -math.expm1(-1.0 / scale)
    return 2 * b * (1 + 11 * b + 11 * b**2 + b**3) / ((1 + b) * one_minus_b**4)


def variance_of_sample_variance(scale: float, n: int) -> float:
    """Exact variance of the unbiased sample variance ``S^2`` of ``n`` iid draws.

    For iid data with variance ``sigma^2`` and fourth central moment ``mu4``
    (here the mean is 0, so ``mu4 = E[Z^4]``), the classical identity is
    ``Var(S^2) = mu4 / n - sigma^4 (n - 3) / (n (n - 1))``.
    """
    sigma2 = discrete_laplace_variance(scale)
    return fourth_moment(scale) / n - sigma2**2 * (n - 3) / (n * (n - 1))


def pooled_bins(scale: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Chi-square bins for ``n`` draws: right edges (inclusive) and probabilities.

    Consecutive integers are pooled from left to right until a bin's expected
    count reaches MIN_EXPECTED.  The first bin also holds the left tail beyond
    ``-m`` and the last bin the right tail beyond ``m``, where ``m`` is chosen
    so that ``P(|Z| > m) <= 1 / n``; an underfull last bin is merged into the
    one before it.
    """
    m = discrete_laplace_quantile_abs(1.0 - 1.0 / n, scale)
    tail = n * float(discrete_laplace_cdf(-m - 1, scale))  # expected count beyond m (each side)
    support = np.arange(-m, m + 1)
    expected = n * discrete_laplace_pmf(support, scale)
    expected[0] += tail
    rights: list[float] = []
    total = 0.0
    for z, e in zip(support, expected, strict=True):
        total += e
        if total >= MIN_EXPECTED:
            rights.append(float(z))
            total = 0.0
    if total + tail >= MIN_EXPECTED:
        rights.append(np.inf)  # leftover integers and the right tail form the last bin
    else:
        rights[-1] = np.inf  # merge them into the last full bin
    edges = np.array(rights)
    probs = np.diff(discrete_laplace_cdf(edges, scale), prepend=0.0)
    return edges, probs


def chisquare_p_value(samples: np.ndarray, scale: float) -> float:
    edges, probs = pooled_bins(scale, samples.size)
    assert np.all(probs * samples.size >= MIN_EXPECTED)
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size)
    expected = samples.size * probs / probs.sum()
    return float(stats.chisquare(observed, expected).pvalue)


def assert_discrete_laplace(samples: np.ndarray, scale: float) -> None:
    """Chi-square fit, mean and variance of ``samples`` against the theory."""
    n = samples.size
    sigma2 = discrete_laplace_variance(scale)
    assert abs(samples.mean()) <= Z_BOUND * math.sqrt(sigma2 / n)
    sample_var = samples.var(ddof=1)
    assert abs(sample_var - sigma2) <= Z_BOUND * math.sqrt(variance_of_sample_variance(scale, n))
    assert chisquare_p_value(samples, scale) > MIN_P_VALUE


# ---------------------------------------------------------------------------
# sample_bernoulli_exp
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num", "den", "seed"),
    [(1, 4, 1), (1, 1, 2), (5, 2, 3), (7, 3, 4), (12, 5, 5)],
)
def test_bernoulli_exp_mean(num: int, den: int, seed: int) -> None:
    p = math.exp(-num / den)
    draws = sample_bernoulli_exp(np.full(N_BERNOULLI, num), den, make_rng(seed))
    assert draws.dtype == bool
    assert draws.shape == (N_BERNOULLI,)
    assert abs(draws.mean() - p) <= Z_BOUND * math.sqrt(p * (1 - p) / N_BERNOULLI)


def test_bernoulli_exp_gamma_zero_is_always_true() -> None:
    assert sample_bernoulli_exp(np.zeros(1000, dtype=np.int64), 7, make_rng(6)).all()


def test_bernoulli_exp_huge_gamma_is_false_and_fast() -> None:
    # P(True) = exp(-2**31): the loop over the integer part must stop early.
    assert not sample_bernoulli_exp(np.full(1000, 2**31), 1, make_rng(7)).any()


def test_bernoulli_exp_broadcasts_mixed_gammas() -> None:
    nums = np.array([[0], [1], [3], [9]])
    dens = np.array([[1], [3], [1], [4]])
    draws = sample_bernoulli_exp(nums, np.broadcast_to(dens, (4, N_BERNOULLI)), make_rng(8))
    assert draws.shape == (4, N_BERNOULLI)
    for row, (num, den) in zip(draws, zip(nums[:, 0], dens[:, 0], strict=True), strict=True):
        p = math.exp(-num / den)
        assert abs(row.mean() - p) <= Z_BOUND * math.sqrt(p * (1 - p) / N_BERNOULLI)


def test_exp_minus_one_table_is_exact() -> None:
    # The lookup table batches rounds k = 2..8 of Algorithm 1 (gamma = 1).  Its
    # success count must equal 8! * sum over odd stopping rounds K <= 7 of
    # P(K) = 1/(K-1)! - 1/K!, exactly; w = 0 (rounds 2..8 all passed) is the
    # single undecided entry and is resolved by further rounds.
    table = discrete._EXP1_TABLE
    last = discrete._EXP1_LAST_ROUND
    assert table.size == math.factorial(last)
    p_success = sum(
        Fraction(1, math.factorial(k - 1)) - Fraction(1, math.factorial(k))
        for k in range(3, last + 1, 2)
    )
    decided = table[1:]
    assert Fraction(int(decided.sum()), table.size) == p_success


@pytest.mark.parametrize(("first_round", "seed"), [(2, 9), (discrete._EXP1_LAST_ROUND + 1, 10)])
def test_exp_minus_one_rounds_continuation(first_round: int, seed: int) -> None:
    # Runs that reached round j (A_1 .. A_{j-1} all 1) succeed with probability
    # P(K odd | K >= j) = (j-1)! * sum_{odd K >= j} (1/(K-1)! - 1/K!); j = 2 is
    # plain Bernoulli(exp(-1)), j = 9 is the table's undecided entry w = 0.
    first_odd = first_round if first_round % 2 == 1 else first_round + 1
    p_stop = {
        k: Fraction(1, math.factorial(k - 1)) - Fraction(1, math.factorial(k)) for k in range(2, 60)
    }
    p = float(math.factorial(first_round - 1) * sum(p_stop[k] for k in range(first_odd, 60, 2)))
    draws = discrete._bernoulli_exp_minus_one_rounds(N_BERNOULLI, first_round, make_rng(seed))
    assert abs(draws.mean() - p) <= Z_BOUND * math.sqrt(p * (1 - p) / N_BERNOULLI)


# ---------------------------------------------------------------------------
# sample_discrete_laplace: distribution
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num", "den", "seed"),
    [(1, 3, 11), (1, 1, 12), (15, 2, 13), (1000, 1, 14), (1000 * 1024, 1024, 15)],
)
def test_discrete_laplace_distribution(num: int, den: int, seed: int) -> None:
    samples = sample_discrete_laplace(num, den, size=N_LAPLACE, rng=make_rng(seed))
    assert_discrete_laplace(samples, num / den)


def test_discrete_laplace_mixed_scales() -> None:
    # One scale per row; all rows are sampled together, so the pending-index
    # bookkeeping must keep every sample with its own parameters.
    nums = np.array([[1], [5], [2000], [7]])
    dens = np.array([[2], [1], [3], [7]])
    samples = sample_discrete_laplace(nums, dens, size=(4, N_LAPLACE // 2), rng=make_rng(16))
    for row, num, den in zip(samples, nums[:, 0], dens[:, 0], strict=True):
        assert_discrete_laplace(row, num / den)


@pytest.mark.parametrize(("num", "den", "seed"), [(2**31, 2**31, 17), (2**31 - 1, 2**31, 18)])
def test_discrete_laplace_extreme_integers(num: int, den: int, seed: int) -> None:
    # Largest allowed num and den: den * k and num * V approach 2**62.
    samples = sample_discrete_laplace(num, den, size=N_LAPLACE, rng=make_rng(seed))
    assert_discrete_laplace(samples, num / den)


def test_discrete_laplace_largest_scale_moments() -> None:
    scale = float(2**31)
    samples = sample_discrete_laplace(2**31, 1, size=N_LAPLACE, rng=make_rng(19))
    sigma2 = discrete_laplace_variance(scale)
    assert abs(samples.mean()) <= Z_BOUND * math.sqrt(sigma2 / N_LAPLACE)
    deviation = abs(samples.var(ddof=1) - sigma2)
    assert deviation <= Z_BOUND * math.sqrt(variance_of_sample_variance(scale, N_LAPLACE))


def test_discrete_laplace_smallest_scale_is_zero() -> None:
    # Scale 2**-31: P(Z != 0) = 2b/(1+b) with b = exp(-2**31), i.e. 0.
    samples = sample_discrete_laplace(1, 2**31, size=10_000, rng=make_rng(20))
    assert not samples.any()


def test_chisquare_rejects_rounded_continuous_laplace() -> None:
    # Power check of the test itself: round(Laplace(1)) is not discrete
    # Laplace(1) (P(0) = 1 - exp(-1/2) = 0.39 instead of tanh(1/2) = 0.46).
    rounded = np.round(make_rng(21).laplace(scale=1.0, size=N_LAPLACE)).astype(np.int64)
    assert chisquare_p_value(rounded, 1.0) < MIN_P_VALUE


def test_sampler_uses_only_int64_integer_draws() -> None:
    rng = IntegersOnlyGenerator(np.random.PCG64(22))
    assert sample_discrete_laplace(7, 3, size=1000, rng=rng).shape == (1000,)
    assert sample_bernoulli_exp(np.arange(20), 3, rng).shape == (20,)


# ---------------------------------------------------------------------------
# sample_discrete_laplace: reproducibility, shapes, validation
# ---------------------------------------------------------------------------


def test_same_seed_same_output() -> None:
    first = sample_discrete_laplace([1, 30], 7, size=(1000, 2), rng=make_rng(23))
    second = sample_discrete_laplace([1, 30], 7, size=(1000, 2), rng=make_rng(23))
    other = sample_discrete_laplace([1, 30], 7, size=(1000, 2), rng=make_rng(24))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)
    bern_a = sample_bernoulli_exp(np.arange(1000), 100, make_rng(25))
    bern_b = sample_bernoulli_exp(np.arange(1000), 100, make_rng(25))
    np.testing.assert_array_equal(bern_a, bern_b)


@pytest.mark.parametrize(
    ("num", "den", "size", "shape"),
    [
        (3, 2, None, ()),
        (3, 2, 5, (5,)),
        (3, 2, (2, 3), (2, 3)),
        ([1, 2, 3], 2, (4, 3), (4, 3)),
        ([[1], [2]], [1, 2, 3], None, (2, 3)),
        (np.int32(4), np.uint8(3), 0, (0,)),
    ],
)
def test_output_shape_and_dtype(num, den, size, shape) -> None:
    samples = sample_discrete_laplace(num, den, size=size, rng=make_rng(26))
    assert isinstance(samples, np.ndarray)
    assert samples.dtype == np.int64
    assert samples.shape == shape


def test_default_rng_is_used_when_none_given() -> None:
    samples = sample_discrete_laplace(5, 1, size=10)
    assert samples.shape == (10,)
    assert samples.dtype == np.int64


def test_size_must_fit_parameters() -> None:
    with pytest.raises(ValueError, match="size"):
        sample_discrete_laplace([1, 2, 3], 1, size=(4, 2), rng=make_rng(27))
    with pytest.raises(ValueError, match="size"):
        sample_discrete_laplace([[1], [2]], 1, size=(3,), rng=make_rng(27))  # cannot shrink
    with pytest.raises(ValueError, match=r"num .* and den"):
        sample_discrete_laplace([1, 2, 3], [1, 2], rng=make_rng(27))
    with pytest.raises(ValueError, match=r"num .* and den"):
        sample_bernoulli_exp([1, 2, 3], [1, 2], make_rng(27))


@pytest.mark.parametrize(
    ("num", "den", "name"),
    [
        (0, 1, "num"),
        (1, 0, "den"),
        (-3, 1, "num"),
        (1, -2, "den"),
        (1.5, 1, "num"),
        (2.0, 1, "num"),
        (1, np.float64(3.0), "den"),
        (True, 1, "num"),
        ("3", 1, "num"),
        (2**31 + 1, 1, "num"),
        (1, 2**31 + 1, "den"),
        (2**70, 1, "num"),
        ([1, 0, 2], 1, "num"),
        (1, np.array([3, 2**32], dtype=np.uint64), "den"),
    ],
)
def test_discrete_laplace_rejects_bad_parameters(num, den, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must contain integers in \[1, 2\*\*31\]"):
        sample_discrete_laplace(num, den, size=3, rng=make_rng(28))


@pytest.mark.parametrize(
    ("num", "den", "name"),
    [(-1, 1, "num"), (1.0, 1, "num"), (2**31 + 1, 1, "num"), (1, 0, "den"), (0, 0.5, "den")],
)
def test_bernoulli_exp_rejects_bad_parameters(num, den, name: str) -> None:
    low = 0 if name == "num" else 1
    with pytest.raises(ValueError, match=rf"^{name} must contain integers in \[{low}, 2\*\*31\]"):
        sample_bernoulli_exp(num, den, make_rng(29))


def test_rejects_non_generator_rng() -> None:
    with pytest.raises(ValueError, match="rng"):
        sample_discrete_laplace(1, 1, size=3, rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="rng"):
        sample_bernoulli_exp(1, 1, rng=None)


# ---------------------------------------------------------------------------
# Analytic functions against brute-force sums of the pmf
# ---------------------------------------------------------------------------

SCALES = [0.3, 1.0, 7.5, 100.0]


def brute_support(scale: float) -> np.ndarray:
    """Integers carrying all but ~exp(-40) of the mass."""
    half = math.ceil(40 * scale) + 1
    return np.arange(-half, half + 1)


@pytest.mark.parametrize("scale", SCALES)
def test_pmf_matches_definition_and_sums_to_one(scale: float) -> None:
    z = brute_support(scale)
    b = math.exp(-1.0 / scale)
    pmf = discrete_laplace_pmf(z, scale)
    np.testing.assert_allclose(pmf, (1 - b) / (1 + b) * b ** np.abs(z), rtol=1e-12)
    assert math.isclose(pmf.sum(), 1.0, abs_tol=1e-12)


@pytest.mark.parametrize("scale", SCALES)
def test_cdf_matches_cumulative_sum(scale: float) -> None:
    z = brute_support(scale)
    cumulative = np.cumsum(discrete_laplace_pmf(z, scale))
    np.testing.assert_allclose(discrete_laplace_cdf(z, scale), cumulative, atol=1e-12)
    # Non-integers are floored.
    np.testing.assert_allclose(
        discrete_laplace_cdf(z[:-1] + 0.5, scale), discrete_laplace_cdf(z[:-1], scale)
    )


@pytest.mark.parametrize("scale", SCALES)
def test_tail_matches_sum(scale: float) -> None:
    z = brute_support(scale)
    pmf = discrete_laplace_pmf(z, scale)
    ks = np.arange(-3, z.max() + 1)
    brute = np.array([pmf[np.abs(z) >= k].sum() for k in ks])
    np.testing.assert_allclose(discrete_laplace_tail(ks, scale), brute, atol=1e-12)
    assert np.all(discrete_laplace_tail(ks[ks <= 0], scale) == 1.0)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("prob", [0.0, 0.5, 0.9, 0.95, 0.99, 0.999999])
def test_quantile_abs_is_smallest_k(scale: float, prob: float) -> None:
    k = discrete_laplace_quantile_abs(prob, scale)
    alpha = 1.0 - prob
    # Smallest k by linear search with the analytic tail: P(|Z| > k) = tail(k + 1).
    first = next(j for j in range(10**6) if discrete_laplace_tail(j + 1, scale) <= alpha)
    assert k == first
    # And by brute-force pmf sums (to rounding error).
    z = brute_support(scale)
    pmf = discrete_laplace_pmf(z, scale)
    assert pmf[np.abs(z) > k].sum() <= alpha + 1e-12
    if k > 0:
        assert pmf[np.abs(z) > k - 1].sum() > alpha - 1e-12


@pytest.mark.parametrize("scale", SCALES)
def test_variance_matches_sum(scale: float) -> None:
    z = brute_support(scale)
    pmf = discrete_laplace_pmf(z, scale)
    assert math.isclose(discrete_laplace_variance(scale), (z**2 * pmf).sum(), rel_tol=1e-10)


@pytest.mark.parametrize("scale", SCALES)
def test_fourth_moment_formula(scale: float) -> None:
    z = brute_support(scale).astype(float)
    pmf = discrete_laplace_pmf(z, scale)
    assert math.isclose(fourth_moment(scale), (z**4 * pmf).sum(), rel_tol=1e-10)


@pytest.mark.parametrize("scale", [1e3, 1e6, 2.0**31])
def test_analytic_functions_accurate_at_large_scale(scale: float) -> None:
    # 2b / (1-b)^2 = 1 / (2 sinh^2(1 / (2 scale))), which avoids cancellation.
    exact = 1.0 / (2.0 * math.sinh(0.5 / scale) ** 2)
    assert math.isclose(discrete_laplace_variance(scale), exact, rel_tol=1e-12)
    assert math.isclose(float(discrete_laplace_pmf(0, scale)), math.tanh(0.5 / scale))
    assert math.isclose(float(discrete_laplace_cdf(-1, scale) + discrete_laplace_cdf(0, scale)), 1)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: discrete_laplace_pmf(0, 0.0), "scale"),
        (lambda: discrete_laplace_cdf(0, -1.0), "scale"),
        (lambda: discrete_laplace_tail(1, math.inf), "scale"),
        (lambda: discrete_laplace_variance(math.nan), "scale"),
        (lambda: discrete_laplace_quantile_abs(1.0, 1.0), "prob"),
        (lambda: discrete_laplace_quantile_abs(-0.1, 1.0), "prob"),
    ],
)
def test_analytic_functions_reject_bad_arguments(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()
