"""Covariance matrices (Liu 2019, Simulation study 1) and correlation-matrix repairs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpframe.core import sensitivity as sens
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.bounded import calibrate_bounded
from dpframe.mechanisms.covariance import (
    clip_correlation,
    nearest_correlation,
    release_covariance_matrix,
)
from tests.oracles import exact_sum

P4 = np.array([0.1, 0.2, 0.3, 0.4])
BOUNDS2 = [(-3.0, 3.0), (-4.5, 4.5)]  # the paper's Simulation study 1


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def random_correlation(gen: np.random.Generator, p: int) -> np.ndarray:
    x = gen.normal(size=(p, gen.integers(1, p + 2)))
    c = x @ x.T
    d = np.sqrt(np.diag(c))
    c = c / np.outer(d, d)
    np.fill_diagonal(c, 1.0)
    return c


def test_nearest_correlation_reproduces_highams_example():
    """Higham (2002), Section 4: A = tridiag(-1, 2, -1), n = 4 (values printed to 4 d.p.)."""
    a = np.array([[2, -1, 0, 0], [-1, 2, -1, 0], [0, -1, 2, -1], [0, 0, -1, 2]], dtype=float)
    expected = np.array(
        [
            [1.0, -0.8084, 0.1916, 0.1068],
            [-0.8084, 1.0, -0.6562, 0.1916],
            [0.1916, -0.6562, 1.0, -0.8084],
            [0.1068, 0.1916, -0.8084, 1.0],
        ]
    )
    np.testing.assert_allclose(nearest_correlation(a), expected, atol=5e-5)


@pytest.mark.parametrize("p", [3, 4, 6])
def test_nearest_correlation_brute_force(p):
    gen = rng(p)
    for _ in range(5):
        a = gen.uniform(-1, 1, size=(p, p))
        a = (a + a.T) / 2
        np.fill_diagonal(a, 1.0)
        h = nearest_correlation(a)
        assert np.array_equal(h, h.T)
        assert np.array_equal(np.diag(h), np.ones(p))
        assert np.linalg.eigvalsh(h).min() >= -1e-10
        dist = np.linalg.norm(h - a)
        others = [random_correlation(gen, p) for _ in range(300)]
        for r in others:
            assert dist <= np.linalg.norm(r - a) + 1e-9
            # variational inequality: <A - H, R - H> <= 0 for every R in the set
            assert np.sum((a - h) * (r - h)) <= 1e-7
        assert dist <= np.linalg.norm(clip_correlation(a) - a) + 1e-9
        # already a correlation matrix: unchanged
        c = random_correlation(gen, p)
        np.testing.assert_allclose(nearest_correlation(c), c, atol=1e-9)


def test_clip_correlation_is_positive_definite():
    a = np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]])
    c = clip_correlation(a, floor=1e-3)
    assert np.linalg.eigvalsh(c).min() > 0
    assert np.allclose(np.diag(c), 1)
    with pytest.raises(InvalidParameterError, match="floor"):
        clip_correlation(a, floor=0)


def test_covariance_bookkeeping_table_1():
    n, eps = 200, 1.0
    cov = np.array([[1.0, 0.4], [0.4, 2.0]])
    for method in ("truncated", "bit"):
        r = release_covariance_matrix(cov, n, BOUNDS2, eps, method=method, rng=rng())
        assert [c.name for c in r.charges] == ["S[0,0]", "S[1,1]", "S[0,1]"]
        assert exact_sum(c.epsilon for c in r.charges) <= Fraction(1)
        assert r.epsilon_charged <= eps
        np.testing.assert_allclose(r.epsilons, np.full((2, 2), eps / 3))
        # Table 1: sensitivities and variance bounds
        assert r.sensitivities[0, 0] == sens.variance(-3, 3, n) == 36 / n
        assert r.sensitivities[1, 1] == sens.variance(-4.5, 4.5, n) == 81 / n
        assert r.sensitivities[0, 1] == sens.covariance(-3, 3, -4.5, 4.5, n) == 54 / n
        assert r.upper[0, 0] == n * 36 / (4 * (n - 1)) and r.lower[0, 0] == 0
        c = math.sqrt(r.sanitized[0, 0] * r.sanitized[1, 1])
        assert r.upper[0, 1] == pytest.approx(c) and r.lower[0, 1] == pytest.approx(-c)
        for ch in r.charges:
            assert ch.privacy_loss <= ch.epsilon == ch.epsilon_charged
        if method == "bit":  # lambda = Delta / epsilon_jk, up to the grid's rounding
            np.testing.assert_allclose(r.scales, r.sensitivities * 3 / eps, rtol=2e-3)


def test_covariance_split_weights():
    cov = np.diag([1.0, 2.0, 0.5])
    w = np.array([[2, 1, 1], [1, 2, 1], [1, 1, 2]], dtype=float)
    r = release_covariance_matrix(cov, 300, [(-3, 3)] * 3, 0.9, split=w, rng=rng())
    assert exact_sum(c.epsilon for c in r.charges) <= Fraction("0.9")
    np.testing.assert_allclose(r.epsilons, 0.9 * w / 9)
    flat = release_covariance_matrix(cov, 300, [(-3, 3)] * 3, 0.9, split=[2, 2, 2, 1, 1, 1])
    np.testing.assert_allclose(flat.epsilons, r.epsilons)


def test_covariance_within_bounds_and_psd_for_two_columns():
    gen = rng(21)
    for _ in range(40):
        n = int(gen.integers(10, 300))
        r = release_covariance_matrix(
            [[1.0, 0.7 * math.sqrt(2)], [0.7 * math.sqrt(2), 2.0]],
            n,
            BOUNDS2,
            1.0,
            method=str(gen.choice(["truncated", "bit"])),
            rng=gen,
        )
        s = r.values
        assert 0 <= s[0, 0] <= n * 36 / (4 * (n - 1))
        assert 0 <= s[1, 1] <= n * 81 / (4 * (n - 1))
        assert abs(s[0, 1]) <= math.sqrt(s[0, 0] * s[1, 1]) * (1 + 1e-15)
        assert -1 <= r.correlation[0, 1] <= 1


def test_covariance_degenerate_interval_released_as_zero():
    cov = np.array([[0.0, 0.0], [0.0, 2.0]])
    for seed in range(100):
        r = release_covariance_matrix(cov, 50, BOUNDS2, 0.3, method="bit", rng=rng(seed))
        if r.sanitized[0, 0] == 0:
            break
    else:
        pytest.fail("no seed gave a zero variance")
    assert r.degenerate == ((0, 1),)
    assert r.values[0, 1] == 0 and np.isnan(r.scales[0, 1])
    assert "without noise" in r.notes[0]
    assert r.epsilon_charged <= 0.3 and r.charges[2].epsilon > 0  # still charged


def test_covariance_paper_calibration():
    cov = np.array([[1.0, 0.0], [0.0, 2.0]])
    r = release_covariance_matrix(cov, 100, BOUNDS2, 1.0, calibration="paper", rng=rng())
    assert r.epsilon_charged > 1.0
    for ch in r.charges:
        assert ch.epsilon_charged >= ch.privacy_loss > ch.epsilon
        assert ch.scale == pytest.approx(ch.sensitivity / ch.epsilon, rel=2e-3)
    # the covariance is charged at its widest possible interval
    ref = calibrate_bounded(
        1 / 3,
        54 / 100,
        -r.charges[2].upper,
        r.charges[2].upper,
        calibration="paper",
        granularity=r.charges[2].granularity,
    )
    assert r.charges[2].privacy_loss == pytest.approx(ref.privacy_loss, rel=1e-9)
    bit = release_covariance_matrix(cov, 100, BOUNDS2, 1.0, method="bit", calibration="paper")
    assert bit.epsilon_charged == pytest.approx(1.0) and bit.epsilon_charged <= 1.0


def test_covariance_unbiased_with_bit_far_from_bounds():
    """n = 800, S = diag(1, 2), r = 0: BIT keeps every statistic unbiased (4 SE)."""
    reps = 600
    gen = rng(8)
    cov = np.array([[1.0, 0.0], [0.0, 2.0]])
    out = np.array(
        [
            release_covariance_matrix(cov, 800, BOUNDS2, 1.0, method="bit", rng=gen).values
            for _ in range(reps)
        ]
    )
    mean = out.mean(axis=0)
    se = out.std(axis=0, ddof=1) / math.sqrt(reps)
    assert (np.abs(mean - cov) <= 4 * se + 1e-12).all()


def test_covariance_repair():
    p = 4
    cov = np.full((p, p), 0.95) + 0.05 * np.eye(p)
    for seed in range(50):
        r = release_covariance_matrix(cov, 60, [(-3, 3)] * p, 1.0, repair="higham", rng=rng(seed))
        if np.linalg.eigvalsh(r.sanitized).min() < -1e-9:
            break
    else:
        pytest.fail("no seed gave a non-PSD sanitized matrix")
    assert r.repaired
    assert np.linalg.eigvalsh(r.values).min() >= -1e-9
    np.testing.assert_array_equal(np.diag(r.values), np.diag(r.sanitized))
    corr = r.correlation
    np.testing.assert_allclose(corr, nearest_correlation(_implied(r.sanitized)), atol=1e-9)
    clipped = release_covariance_matrix(cov, 60, [(-3, 3)] * p, 1.0, repair="clip", rng=rng(seed))
    assert np.linalg.eigvalsh(clipped.values).min() > 0
    np.testing.assert_array_equal(clipped.sanitized, r.sanitized)  # same seed, same noise
    assert np.linalg.norm(corr - _implied(r.sanitized)) <= np.linalg.norm(
        clipped.correlation - _implied(r.sanitized)
    )
    # a PSD result is left alone
    psd = release_covariance_matrix(np.diag([1.0, 2.0]), 500, BOUNDS2, 1.0, repair="higham")
    assert not psd.repaired and np.array_equal(psd.values, psd.sanitized)


def _implied(s: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.diag(s))
    c = s / np.outer(d, d)
    np.fill_diagonal(c, 1.0)
    return c


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cov": [[1.0, 0.2], [0.3, 1.0]]}, "symmetric"),
        ({"cov": [1.0, 2.0]}, "square matrix"),
        ({"cov": [[1.0, np.inf], [np.inf, 1.0]]}, "finite"),
        ({"n": 1}, "n must be >= 2"),
        ({"bounds": [(-3, 3)]}, "one \\(lower, upper\\) pair per column"),
        ({"bounds": [(3, -3), (-1, 1)]}, r"bounds\[0\] must satisfy lower < upper"),
        ({"bounds": [(-3, 3), (-1, math.inf)]}, r"bounds\[1\] upper must be a finite"),
        ({"bounds": [(-3, 3), 5]}, r"bounds\[1\] must be a pair"),
        ({"bounds": 5}, "bounds must be a sequence"),
        ({"repair": "nearPD"}, "repair must be"),
        ({"split": [1, 1]}, "split must be"),
        ({"split": [[1, 0], [0, 1]]}, "weights > 0"),
        ({"epsilon": -1}, "epsilon must be > 0"),
        ({"method": "gauss"}, "method must be one of"),
    ],
)
def test_release_covariance_bad_inputs(kwargs, match):
    args = {"cov": np.eye(2), "n": 100, "bounds": BOUNDS2, "epsilon": 1.0} | kwargs
    with pytest.raises(InvalidParameterError, match=match):
        release_covariance_matrix(
            args.pop("cov"), args.pop("n"), args.pop("bounds"), args.pop("epsilon"), **args
        )
