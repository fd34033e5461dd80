"""Tests of the zCDP conversions (dpframe.core.zcdp).

The tight conversion of Canonne, Kamath & Steinke (2020) is checked against OpenDP's
published values, against a brute-force minimisation over a fine grid of Renyi orders,
and against the classic bound ``rho + 2 sqrt(rho log(1/delta))`` it improves on.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpframe.core.zcdp import delta_of_rho, epsilon_of_rho, rho_for, rho_of_epsilon
from dpframe.errors import InvalidParameterError

RHOS = [1e-6, 1e-3, 0.03125, 0.1, 0.5, 2.0, 50.0]
DELTAS = [1e-12, 1e-6, 1e-3, 0.1, 0.5]


def brute_min(f) -> float:
    """min of ``f`` over a log grid of alpha in (1, 1e9], refined around its best cell."""
    alpha = 1.0 + np.logspace(-4, 9, 200_001)
    i = int(np.argmin(f(alpha)))
    fine = np.linspace(alpha[max(i - 2, 0)], alpha[min(i + 2, alpha.size - 1)], 200_001)
    return float(f(fine).min())


def brute_epsilon(rho: float, delta: float) -> float:
    """The Corollary 13 epsilon minimised over alpha by brute force (no rounding)."""

    def f(alpha):
        return alpha * rho + np.log1p(-1.0 / alpha) - np.log(alpha * delta) / (alpha - 1.0)

    return max(brute_min(f), 0.0)


def brute_log_delta(rho: float, epsilon: float) -> float:
    def f(alpha):
        return (
            (alpha - 1.0) * (alpha * rho - epsilon)
            + alpha * np.log1p(-1.0 / alpha)
            - np.log(alpha - 1.0)
        )

    return min(brute_min(f), 0.0)


def test_rho_of_epsilon_is_exact_half_square_of_the_decimal():
    assert rho_of_epsilon(0.1) == Fraction(1, 200)
    assert rho_of_epsilon(1.0) == Fraction(1, 2)
    assert rho_of_epsilon(0.3) == Fraction(9, 200)  # not the float 0.3's binary value
    assert rho_of_epsilon(2) == 2


def test_known_values_from_opendp():
    # opendp rust/src/combinators/measure_cast/zCDP_to_approxDP/{test.rs, cdp_delta/test.rs}
    eps = epsilon_of_rho(0.03125, 1e-3)
    assert 0.6880024554878086 <= eps <= 0.6880024554878086 * (1 + 1e-11)
    d = delta_of_rho(0.05, 0.25)
    assert 8.17727531036956e-2 <= d <= 8.17727531036956e-2 * (1 + 1e-11)
    d = delta_of_rho(0.5, 0.0)
    assert 0.5588356393474351 <= d <= 0.5588356393474351 * (1 + 1e-11)
    d = delta_of_rho(0.03125, 0.0)
    assert 0.1508457845622862 <= d <= 0.1508457845622862 * (1 + 1e-11)
    # optimal alpha above 2**53
    d = delta_of_rho(5e-30, 1e-13)
    assert 2.619676329730346e-234 <= d <= 2.619676329730346e-234 * (1 + 1e-8)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_epsilon_is_tight_and_below_the_classic_bound(rho, delta):
    eps = epsilon_of_rho(rho, delta)
    brute = brute_epsilon(rho, delta)
    classic = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    # never below the optimum over alpha (the grid minimum is >= the true minimum, but
    # the refined grid is fine enough that they agree to 1e-12 relative)
    assert eps >= brute * (1 - 1e-12) - 1e-15
    assert eps <= brute * (1 + 1e-10) + 1e-15
    assert eps <= classic


@pytest.mark.parametrize("rho", [1e-3, 0.03125, 0.5, 2.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 1.0, 5.0])
def test_delta_is_tight_and_consistent_with_epsilon(rho, epsilon):
    d = delta_of_rho(rho, epsilon)
    log_brute = brute_log_delta(rho, epsilon)
    if log_brute < -700:  # underflows: rounded up to the smallest float at most
        assert 0.0 < d <= 1e-300
    else:
        assert math.exp(log_brute) * (1 - 1e-12) <= d <= math.exp(log_brute) * (1 + 1e-9)
    if 1e-300 < d < 1.0:
        # the two conversions invert each other (up to the safe rounding)
        eps_back = epsilon_of_rho(rho, d)
        assert eps_back == pytest.approx(epsilon, abs=1e-7)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_rho_for_is_the_largest_rho_that_fits(epsilon, delta):
    rho = rho_for(epsilon, delta)
    assert epsilon_of_rho(rho, delta) <= epsilon
    assert epsilon_of_rho(rho * (1 + 1e-12), delta) > epsilon * (1 - 1e-9)
    assert epsilon_of_rho(rho * (1 + 1e-9), delta) > epsilon
    # tighter than inverting the classic bound
    log_inv = math.log(1.0 / delta)
    classic = (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2
    assert rho >= classic


def test_epsilon_increases_with_rho_and_decreases_with_delta():
    eps = [epsilon_of_rho(r, 1e-6) for r in np.geomspace(1e-6, 10, 50)]
    assert all(a < b for a, b in itertools.pairwise(eps))
    eps = [epsilon_of_rho(0.5, d) for d in np.geomspace(1e-12, 0.5, 50)]
    assert all(a > b for a, b in itertools.pairwise(eps))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: epsilon_of_rho(0.0, 1e-6), "rho"),
        (lambda: epsilon_of_rho(-1.0, 1e-6), "rho"),
        (lambda: epsilon_of_rho(float("nan"), 1e-6), "rho"),
        (lambda: epsilon_of_rho(0.5, 0.0), "delta"),
        (lambda: epsilon_of_rho(0.5, 1.0), "delta"),
        (lambda: delta_of_rho(0.5, -1.0), "epsilon"),
        (lambda: rho_for(0.0, 1e-6), "epsilon"),
        (lambda: rho_for(1.0, 0.0), "delta"),
        (lambda: rho_of_epsilon(float("inf")), "epsilon"),
        (lambda: rho_of_epsilon("1"), "epsilon"),
    ],
)
def test_bad_inputs_name_the_argument(call, name):
    with pytest.raises(InvalidParameterError, match=name):
        call()
