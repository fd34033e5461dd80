"""Tests of the discrete Gaussian's compiled loop (dpframe.mechanisms.gaussian_kernel).

Its two decisions are checked against exact arithmetic (the proposal against the
discrete Laplace's inverse CDF, the acceptance against ``decimal`` bounds on
``exp(-gamma)``), and every path that hands a draw back to Python -- the proposal's
fallback, the acceptance's fallback, the Python-integer acceptance -- is forced and its
draws tested against the exact law (chi-square, p < 1e-3, fixed seeds).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numba as nb
import numpy as np
import pytest

from dpframe.mechanisms import discrete, gaussian
from dpframe.mechanisms.gaussian import sample_discrete_gaussian
from dpframe.mechanisms.gaussian_kernel import (
    ACCEPT,
    EXACT,
    GAMMA_CLAMP,
    LAPLACE,
    accept_words,
    draw,
)

from .test_gaussian import MIN_P_VALUE, chisquare_p_value, make_rng
from .test_inverse_cdf import ulp_error

LOW63 = 2**63 - 1


def test_margin_covers_the_documented_error():
    # gaussian's notes: zeta < 4.05e-13 (gamma <= 700, the libm bound) plus 4.1 roundings
    eta = 5.01 * 2.0**-53
    zeta = math.expm1(700.001 * eta) + discrete.LIBM_RELATIVE_ERROR * 1.001
    assert zeta < 4.05e-13
    assert zeta + 4.1 * 2.0**-53 < gaussian._MARGIN
    assert math.exp(-GAMMA_CLAMP) > 2.0**-1022  # a normal float
    assert math.exp(-(GAMMA_CLAMP - 1)) < 2.0**-1008


@pytest.mark.parametrize("t", [1, 4, 1025, 10**6 + 1, 2**31])
def test_proposals_are_the_discrete_laplace_inverse_cdf(t):
    # limit = -1 hands every certain proposal back as an EXACT event with its Y: each
    # must be the discrete Laplace's exact draw from the same word.
    rng = make_rng(11)
    words = discrete._word_draws(4000, rng)
    words[0:8:2] = [0, 1, 2**20, -(2**63)]  # U = 0, tiny U (wide 1/u terms), sign only
    count = words.size // 2
    out = np.zeros(count, dtype=np.int64)
    events = np.zeros((count, 4), dtype=np.int64)
    floats = np.zeros((count, 2))
    params = gaussian._kernel_params(1, 1, t)
    params = (*params[:3], -1, *params[4:])
    slot, used, k = draw(out, 0, words, params, events, floats)
    assert (slot, used, k) == (count, words.size, count)
    proposals = words[0::2]
    expected = discrete._apply_sign(
        discrete._magnitudes(proposals, t, 1, True, make_rng(12)), proposals
    )
    kinds = events[:, 1]
    certain = kinds == EXACT
    assert kinds[0] == LAPLACE and set(kinds.tolist()) <= {EXACT, LAPLACE}
    assert certain.sum() >= count - 8
    np.testing.assert_array_equal(events[certain, 2], expected[certain])
    # an uncertain proposal hands back its word and a bracket that holds its magnitude
    for (_, _, word, _), (a, slack) in zip(events[~certain], floats[~certain], strict=True):
        u = int(word) & LOW63
        bracket = discrete._bracket(float(a), float(slack))
        m = discrete._exact_magnitude(u, t, 1, True, make_rng(13), bracket)
        assert m == discrete._exact_magnitude(u, t, 1, True, make_rng(13), None)


@pytest.mark.parametrize(("a", "big_m"), [(7, 98), (3, 1), (1, 10**6), (0, 5), (2**40, 2**75)])
def test_acceptance_decides_only_certain_comparisons(a, big_m):
    # U' in [u, u + 1) / 2**63 against exp(-a^2 / M), u around the threshold and far off
    lo, hi = discrete._exp_bounds(a * a, big_m, 60)
    x = math.floor(Fraction(2**63) * lo)
    offsets = np.r_[np.arange(-64, 65), [-(2**40), 2**40, -(2**20), 2**20]]
    u = np.array([min(max(x + int(o), 0), LOW63) for o in offsets], dtype=np.int64)
    status = accept_words(np.full(u.size, float(a)), u, float(big_m), gaussian._MARGIN)
    for ui, st in zip(u.tolist(), status.tolist(), strict=True):
        if st == 1:
            assert Fraction(ui + 1, 2**63) <= lo
        elif st == 0:
            assert Fraction(ui, 2**63) >= hi
        else:
            assert st == ACCEPT
    far = np.abs(offsets) >= 2**40  # beyond the margin (2**63 * 1e-12 < 2**24)
    assert (status[far] != ACCEPT).all() or a == 0


def test_acceptance_beyond_the_clamp():
    # gamma = 10**4: a certain rejection unless U' < 2**-63
    status = accept_words(np.full(3, 100.0), np.array([0, 1, LOW63]), 1.0, gaussian._MARGIN)
    assert status.tolist() == [ACCEPT, 0, 0]
    assert not gaussian._decide_exactly(0, 100, 1, make_rng(0))


@nb.njit
def _compiled_log(x):
    out = np.empty(x.size)
    for i in range(x.size):
        out[i] = math.log(x[i])
    return out


@nb.njit
def _compiled_exp(x):
    out = np.empty(x.size)
    for i in range(x.size):
        out[i] = math.exp(-min(x[i], GAMMA_CLAMP))
    return out


def test_compiled_log_exp_within_4_ulp():
    # the kernel's log and exp (numba's, not numpy's) against correctly rounded decimal
    rng = np.random.default_rng(0)
    w = np.concatenate([rng.random(2000), 1.0 - rng.random(500) * 2.0**-30, [2.0**-64]])
    x = np.concatenate([rng.random(2000) * 4, rng.random(1000) * GAMMA_CLAMP, [GAMMA_CLAMP]])
    with localcontext() as ctx:
        ctx.prec = 40
        log_exact = [Decimal(v).ln() for v in w.tolist()]
        exp_exact = [(-Decimal(v)).exp() for v in x.tolist()]
    assert ulp_error(_compiled_log(w), log_exact) <= 4
    assert ulp_error(_compiled_exp(x), exp_exact) <= 4


def _counting(monkeypatch, name):
    calls = []
    real = getattr(gaussian, name)
    monkeypatch.setattr(gaussian, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


N = 20_000


@pytest.mark.parametrize(("num", "den"), [(1369, 100), (2**20, 1)])
def test_forced_acceptance_fallback_matches_the_law(num, den, monkeypatch):
    # margin 10: no float comparison is certain, every acceptance is decided exactly
    monkeypatch.setattr(gaussian, "_MARGIN", 10.0)
    calls = _counting(monkeypatch, "_decide_exactly")
    z = sample_discrete_gaussian(num, den, size=N, rng=make_rng(21))
    assert len(calls) >= N
    assert chisquare_p_value(z, math.sqrt(num / den)) > MIN_P_VALUE


@pytest.mark.parametrize("k1", [0.05, 2.0])
def test_forced_proposal_fallback_matches_the_law(k1, monkeypatch):
    # K_1 widened: many (0.05: bracketed) or all (2.0: no bracket) proposals take the
    # discrete Laplace's exact fallback from their own word
    monkeypatch.setattr(discrete, "_K1_EXACT", k1)
    calls = _counting(monkeypatch, "_exact_magnitude")
    z = sample_discrete_gaussian(1369, 100, size=N, rng=make_rng(22))
    assert len(calls) >= (0.3 if k1 < 1 else 1.3) * N
    assert chisquare_p_value(z, 3.7) > MIN_P_VALUE


def test_forced_python_integer_acceptance_matches_the_law(monkeypatch):
    # int64 bound lowered: proposals with |Y| >= 3 are accepted with Python integers
    monkeypatch.setattr(gaussian, "_TWO62", 1000)
    calls = _counting(monkeypatch, "_bernoulli_exp_square")
    z = sample_discrete_gaussian(1369, 100, size=N, rng=make_rng(23))
    assert calls
    assert (np.abs(z) >= 3).mean() > 0.3
    assert chisquare_p_value(z, 3.7) > MIN_P_VALUE


def test_same_seed_same_draws_through_the_fallbacks(monkeypatch):
    monkeypatch.setattr(discrete, "_K1_EXACT", 0.05)
    first = sample_discrete_gaussian(1369, 100, size=3000, rng=make_rng(24))
    second = sample_discrete_gaussian(1369, 100, size=3000, rng=make_rng(24))
    np.testing.assert_array_equal(first, second)


def test_blocks_fill_every_slot():
    # more than one block of slots, and a size that is not a multiple of it
    count = 2 * gaussian._SLOTS + 17
    z = sample_discrete_gaussian(2**20, 1, size=count, rng=make_rng(25))
    assert z.shape == (count,)
    assert np.abs(z).max() < 10 * 1024
    assert chisquare_p_value(z, 1024.0) > MIN_P_VALUE
