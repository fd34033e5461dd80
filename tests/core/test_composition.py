"""Tight composition by privacy-loss distributions, against independent computations.

Each reference below is computed here, by a different route than the module's: the
Gaussian's closed form (Balle & Wang 2018), the exact binomial profile of k randomized
responses, and for Laplace a numerical convolution of its privacy loss rounded *down*
(an optimistic bound: below the truth), written from scipy's Laplace law of the output.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.signal import fftconvolve
from scipy.special import comb, log_ndtr, ndtr
from scipy.stats import laplace

from dpframe.core.budget import exact, exact_sum
from dpframe.core.composition import delta_for_epsilon, epsilon_for_delta
from dpframe.core.zcdp import delta_of_rho, epsilon_of_rho, rho_of_epsilon
from dpframe.errors import InvalidParameterError

DELTA = 1e-6


def gaussian_delta(epsilon, mu):
    """Balle & Wang (2018), Theorem 8: the delta of a Gaussian with ``Δ/σ = mu``."""
    a, b = mu / 2 - epsilon / mu, -mu / 2 - epsilon / mu
    return ndtr(a) - math.exp(epsilon + log_ndtr(b))


def inverse(profile, delta, hi=200.0):
    return brentq(lambda e: profile(e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)


# -- (1) Gaussian: k releases are one Gaussian of sigma / sqrt(k) ---------------------------


@pytest.mark.parametrize("sigma", [5.0, 20.0, 60.0])
def test_100_gaussians_within_1_percent_of_the_closed_form_and_never_below(sigma):
    releases = [{"mechanism": "gaussian", "sensitivity": 1.0, "sigma": sigma}] * 100
    mu = math.sqrt(100) / sigma
    truth = inverse(lambda e: gaussian_delta(e, mu), DELTA)
    eps = epsilon_for_delta(releases, DELTA)
    assert truth <= eps <= 1.01 * truth
    assert eps <= truth * (1 + 1e-3) + 1e-9  # the stated bound: tolerance 1e-3
    delta = delta_for_epsilon(releases, truth)
    assert DELTA * (1 - 1e-9) <= delta <= gaussian_delta(0.999 * truth, mu) + 1e-12


def test_gaussians_of_different_sigmas_compose_as_one():
    releases = [
        {"mechanism": "gaussian", "sensitivity": 2.0, "sigma": 30.0},
        {"mechanism": "gaussian", "sensitivity": 1.0, "sigma": 4.0},
    ] * 10
    mu = math.sqrt(10 * ((2 / 30) ** 2 + (1 / 4) ** 2))
    truth = inverse(lambda e: gaussian_delta(e, mu), 1e-8)
    assert truth <= epsilon_for_delta(releases, 1e-8) <= 1.001 * truth + 1e-9


# -- (2) Laplace: an independent numerical composition --------------------------------------


def laplace_optimistic_pld(epsilon, h):
    """The Laplace PLD rounded *down* to the grid {j h}: mass of ``[j h, (j + 1) h)`` at
    ``j h``. Output o ~ Lap(0, b) against Lap(1, b), ``b = 1 / epsilon``: the loss
    ``(|o - 1| - |o|) / b`` is below x iff ``o > (1 - b x) / 2`` (for ``-eps < x <=
    eps``)."""
    b = 1.0 / epsilon

    def below(x):  # P(L < x)
        x = np.asarray(x, dtype=float)
        inside = laplace.sf((1.0 - b * x) / 2.0, scale=b)
        return np.where(x > epsilon, 1.0, np.where(x <= -epsilon, 0.0, inside))

    lo, hi = math.floor(-epsilon / h), math.floor(epsilon / h)
    edges = np.arange(lo, hi + 2) * h
    return lo, np.diff(below(edges))


def compose_optimistic(start, masses, k):
    out_start, out = 0, np.array([1.0])
    base_start, base = start, masses
    while k:
        if k & 1:
            out_start, out = out_start + base_start, np.clip(fftconvolve(out, base), 0, None)
        k >>= 1
        if k:
            base_start, base = 2 * base_start, np.clip(fftconvolve(base, base), 0, None)
    return out_start, out


def profile_of(start, masses, h):
    losses = (start + np.arange(masses.size)) * h

    def delta(e):
        keep = losses > e
        return float(np.sum(masses[keep] * -np.expm1(e - losses[keep])))

    return delta


@pytest.mark.parametrize(("k", "epsilon"), [(100, 0.1), (100, 0.5)])
def test_100_laplace_within_1_percent_of_an_independent_composition(k, epsilon):
    h = 2.0**-13
    start, masses = compose_optimistic(*laplace_optimistic_pld(epsilon, h), k)
    lower = inverse(profile_of(start, masses, h), DELTA, hi=k * epsilon)  # <= the truth
    eps = epsilon_for_delta([{"mechanism": "laplace", "epsilon": epsilon}] * k, DELTA)
    assert lower <= eps <= 1.01 * lower
    assert eps < k * epsilon  # below basic composition
    # the optimistic bound is at most k h below the truth: the gap is what remains
    assert eps - lower <= 1e-3 * eps + k * h


def test_discrete_laplace_is_pure_at_one_step_and_near_laplace_at_many():
    pure = [{"mechanism": "pure", "epsilon": 0.2}] * 50
    one = [{"mechanism": "discrete_laplace", "epsilon": 0.2, "steps": 1}] * 50
    unspecified = [{"mechanism": "discrete_laplace", "epsilon": 0.2}] * 50
    many = [{"mechanism": "discrete_laplace", "epsilon": 0.2, "steps": 2**20}] * 50
    lap = [{"mechanism": "laplace", "epsilon": 0.2}] * 50
    e_pure = epsilon_for_delta(pure, DELTA)
    assert epsilon_for_delta(one, DELTA) == e_pure == epsilon_for_delta(unspecified, DELTA)
    e_lap, e_many = epsilon_for_delta(lap, DELTA), epsilon_for_delta(many, DELTA)
    assert e_lap < e_pure
    assert abs(e_many - e_lap) <= 2e-3 * e_lap


# -- (3) pure epsilon-DP: the exact profile of k randomized responses -----------------------


def rr_delta(epsilon, k, e0):
    """k randomized responses: the loss is ``e0 (k - 2i)``, ``i ~ Bin(k, 1 / (1 + e^e0))``."""
    p = 1.0 / (1.0 + math.exp(e0))
    i = np.arange(k + 1)
    loss = e0 * (k - 2 * i)
    w = comb(k, i) * p**i * (1 - p) ** (k - i)
    return float(np.sum(np.where(loss > epsilon, w * -np.expm1(epsilon - loss), 0.0)))


@pytest.mark.parametrize(("k", "e0"), [(1, 1.0), (2, 0.5), (20, 0.1), (100, 0.1), (40, 1.0)])
def test_pure_releases_never_above_basic_composition_and_tight(k, e0):
    releases = [{"mechanism": "pure", "epsilon": e0}] * k
    eps = epsilon_for_delta(releases, DELTA)
    basic = k * e0
    assert eps <= basic
    assert delta_for_epsilon(releases, basic) == 0.0
    truth = inverse(lambda e: rr_delta(e, k, e0), DELTA, hi=basic) if k >= 20 else None
    if truth is not None:
        assert truth <= eps <= 1.01 * truth
        assert eps < basic  # strictly below basic composition for k >= 20


# -- (4) (epsilon, delta) releases: the deltas add (at most) --------------------------------


def test_approx_releases_add_their_deltas_at_most():
    d0 = 1e-7
    releases = [{"mechanism": "approx", "epsilon": 0.2, "delta": d0}] * 3
    releases += [{"mechanism": "laplace", "epsilon": 0.1}] * 10
    # basic composition, in the ledger's arithmetic: the decimals the floats print as
    basic_eps, basic_delta = 1.6, exact_sum([d0] * 3)
    at_least = 1.0 - (1.0 - d0) ** 3  # the deltas' own mass: no epsilon removes it
    d = delta_for_epsilon(releases, basic_eps)
    assert at_least <= d and exact(d) <= basic_delta
    assert epsilon_for_delta(releases, basic_delta) <= basic_eps
    assert epsilon_for_delta(releases, 6e-7) < basic_eps
    assert epsilon_for_delta(releases, 2 * d0) == math.inf
    assert delta_for_epsilon(releases, 100.0) >= at_least


# -- (5) zCDP releases: never worse than the zCDP accountant's conversion --------------------


def test_zcdp_releases_are_the_zcdp_conversion():
    releases = [{"mechanism": "zcdp", "rho": 0.01}] * 7 + [
        {"mechanism": "discrete_gaussian", "sensitivity": 1.0, "sigma": 10.0}
    ]
    # the accountant's exact sum, 7 * 0.01 + 1 / (2 * 10**2)
    assert epsilon_for_delta(releases, DELTA) == epsilon_of_rho(0.075, DELTA)
    assert delta_for_epsilon(releases, 1.0) == delta_of_rho(0.075, 1.0)
    # a ``{"rho": r}`` entry alone is a zCDP release
    bare = [{"rho": 0.01}] * 7 + releases[7:]
    assert epsilon_for_delta(bare, DELTA) == epsilon_of_rho(0.075, DELTA)


@pytest.mark.parametrize(
    "others",
    [
        [{"mechanism": "laplace", "epsilon": 0.1}] * 30,
        [{"mechanism": "gaussian", "sensitivity": 1.0, "sigma": 10.0}] * 30,
        [{"mechanism": "laplace", "epsilon": 2.0}],
    ],
)
def test_zcdp_mixed_with_others_never_worse_than_the_zcdp_accountant(others):
    zcdp = [{"mechanism": "zcdp", "rho": 0.02}] * 5
    # the zCDP accountant's sum: exact, a pure release at the decimal epsilon**2 / 2
    rho = exact(0.02) * 5 + sum(
        rho_of_epsilon(o["epsilon"])
        if "epsilon" in o
        else Fraction(o["sensitivity"]) ** 2 / (2 * Fraction(o["sigma"]) ** 2)
        for o in others
    )
    rho_up = float(rho) if exact(float(rho)) >= rho else math.nextafter(float(rho), 1.0)
    eps = epsilon_for_delta(zcdp + others, DELTA)
    assert eps <= epsilon_of_rho(rho_up, DELTA)
    # and never below what either part alone costs
    assert eps >= epsilon_for_delta(others, DELTA)
    assert eps >= epsilon_for_delta(zcdp, DELTA)


# -- the edges --------------------------------------------------------------------------------


def test_no_release_costs_nothing_and_more_releases_cost_more():
    assert epsilon_for_delta([], DELTA) == 0.0
    assert delta_for_epsilon([], 0.0) == 0.0
    lap = [{"mechanism": "laplace", "epsilon": 0.3}]
    costs = [epsilon_for_delta(lap * k, DELTA) for k in (1, 2, 5, 10, 30)]
    assert costs == sorted(costs)
    assert costs[0] <= 0.3


def test_a_gaussian_has_no_finite_epsilon_at_delta_zero():
    g = [{"mechanism": "gaussian", "sensitivity": 1.0, "sigma": 1.0}]
    assert epsilon_for_delta(g, 0.0) == math.inf
    assert epsilon_for_delta([{"mechanism": "laplace", "epsilon": 0.5}] * 3, 0.0) == 1.5


@pytest.mark.parametrize(
    ("releases", "words"),
    [
        ({"mechanism": "laplace", "epsilon": 1.0}, "releases must be a list"),
        (["laplace"], "releases[0] must be a mapping"),
        ([{"epsilon": 1.0}], "releases[0] has no 'mechanism'"),
        ([{"mechanism": "exponential", "epsilon": 1.0}], "releases[0]['mechanism']"),
        ([{"mechanism": "gaussian", "sigma": 1.0}], "missing sensitivity"),
        ([{"mechanism": "laplace", "epsilon": 1.0, "delta": 0.1}], "remove 'delta'"),
        ([{"mechanism": "laplace", "epsilon": -1.0}], "releases[0]['epsilon']"),
        ([{"mechanism": "approx", "epsilon": 1.0, "delta": 1.5}], "releases[0]['delta']"),
        ([{"mechanism": "discrete_laplace", "epsilon": 1.0, "steps": 0.5}], "['steps']"),
    ],
)
def test_bad_releases_are_refused_by_name(releases, words):
    with pytest.raises(InvalidParameterError) as info:
        epsilon_for_delta(releases, DELTA)
    assert words in str(info.value)


def test_bad_delta_epsilon_and_tolerance_are_refused_by_name():
    lap = [{"mechanism": "laplace", "epsilon": 1.0}]
    with pytest.raises(InvalidParameterError, match="delta"):
        epsilon_for_delta(lap, 1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        delta_for_epsilon(lap, -1.0)
    with pytest.raises(InvalidParameterError, match="tolerance"):
        epsilon_for_delta(lap, DELTA, tolerance=0.0)
