"""Exact integers for staircase channels (``sampling.staircase_weights``/``_sampler``)."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.sampling import staircase_sampler, staircase_weights


def staircase(patterns: np.ndarray, epsilon: float) -> np.ndarray:
    """The channel whose columns are theta_j * (1 or e^eps), rows summing to 1 (P square)."""
    levels = np.where(patterns, math.exp(epsilon), 1.0)
    theta = np.linalg.solve(levels, np.ones(levels.shape[0]))
    assert (theta > 0).all()
    return levels * theta


def krr(s: int, epsilon: float) -> np.ndarray:
    return staircase(np.eye(s, dtype=bool), epsilon)


def binary_split(s: int, epsilon: float) -> np.ndarray:
    """Two outputs: the first half of the categories high in column 0, the rest in 1."""
    half = s // 2
    e = math.exp(epsilon)
    out = np.zeros((s, s))
    # row in the first half: (e, 1) / (1 + e); second half: (1, e) / (1 + e)
    out[:half, 0], out[:half, 1] = e / (1 + e), 1 / (1 + e)
    out[half:, 0], out[half:, 1] = 1 / (1 + e), e / (1 + e)
    return out


def exact_ratio_at_most(weights: np.ndarray, epsilon: float) -> bool:
    """max_j max_i W_ij / min_i W_ij <= exp(epsilon), decided with 60-digit bounds."""
    with localcontext() as ctx:
        ctx.prec = 60
        bound = Fraction(Decimal(epsilon).exp()) * (1 - Fraction(1, 10**55))
    for j in range(weights.shape[1]):
        col = [int(v) for v in weights[:, j]]
        if max(col) == 0:
            continue
        if min(col) == 0 or Fraction(max(col), min(col)) > bound:
            return False
    return True


CASES = [
    ("k-RR", lambda: krr(5, 1.0), 1.0),
    ("k-RR small eps", lambda: krr(6, 0.01), 0.01),
    ("k-RR eps 1e-6", lambda: krr(3, 1e-6), 1e-6),
    ("binary split", lambda: binary_split(4, 0.1), 0.1),
    ("binary split large eps", lambda: binary_split(7, 8.0), 8.0),
    (
        "mixed patterns",
        lambda: staircase(np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], bool), 0.7),
        0.7,
    ),
]


@pytest.mark.parametrize(("name", "make", "epsilon"), CASES)
def test_weights_are_exact_and_close(name, make, epsilon):
    channel = make()
    w, bits = staircase_weights(channel, epsilon)
    s = channel.shape[0]
    assert w.dtype == np.int64 and (w >= 0).all()
    assert all(int(v) == s << bits for v in w.sum(axis=1))  # rows exact
    assert exact_ratio_at_most(w, epsilon - 1e-13)  # every column, exactly
    assert ((w > 0) == (channel > 0)).all()  # unused outputs stay impossible
    # close to the channel: the remainder is a relative 2**-40..., far below 1e-6
    np.testing.assert_allclose(w / float(s << bits), channel, atol=1e-6)
    sam = staircase_sampler(channel, epsilon)
    assert sam.epsilon_actual <= epsilon
    np.testing.assert_array_equal(sam.weights(), w)


def test_sampler_draws_the_rounded_channel():
    channel = binary_split(5, 0.5)
    sam = staircase_sampler(channel, 0.5)
    rng = np.random.default_rng(3)
    n = 60_000
    for k in range(5):
        z = sam.randomize(np.full(n, k), rng)
        counts = np.bincount(z, minlength=5)
        expected = sam.matrix[k] * n
        used = expected > 0
        assert counts[~used].sum() == 0  # outputs 2..4 never appear
        assert stats.chisquare(counts[used], expected[used]).pvalue > 1e-3


@pytest.mark.parametrize(
    ("channel", "match"),
    [
        (np.array([[0.5, 0.5], [1.0, 0.0]]), "zero and a non-zero"),
        (np.array([[0.7, 0.3], [0.4, 0.6]]), "staircase"),  # 0.7/0.4 is not e^eps
        (np.ones((2, 3)) / 3, "S x S"),
        (np.array([[np.nan, 1], [0.5, 0.5]]), "finite"),
    ],
)
def test_refuses_what_is_not_a_staircase(channel, match):
    with pytest.raises(InvalidParameterError, match=match):
        staircase_weights(channel, math.log(3.0))


def test_refuses_epsilon_below_the_slack():
    with pytest.raises(InvalidParameterError, match="epsilon"):
        staircase_weights(krr(3, 1.0), 1e-14)


def test_a_constant_column_keeps_its_level():
    # a column with no high entry: L e^eps is never formed (it could exceed int64)
    w, bits = staircase_weights(np.array([[0.8, 0.2], [0.8, 0.2]]), 1.0)
    assert all(int(v) == 2 << bits for v in w.sum(axis=1))
    assert (w[0] == w[1]).all()
