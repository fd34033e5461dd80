"""Tests of the discrete Gaussian's batches: the numpy passes (dpframe.mechanisms.gaussian_batch)
and the compiled ones (dpframe.mechanisms.gaussian_kernel).

Their two decisions are checked against exact arithmetic (the proposal against the
discrete Laplace's inverse CDF, the acceptance against ``decimal`` bounds on
``exp(-gamma)``); the two implementations give the same draws and events from the same
words; and every path that hands a draw back to Python -- the proposal's fallback, the
acceptance's fallback, the Python-integer acceptance -- is forced on both and its draws
tested against the exact law (chi-square, p < 1e-3, fixed seeds).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from dpframe.mechanisms import discrete, gaussian, gaussian_batch, gaussian_kernel
from dpframe.mechanisms.gaussian import sample_discrete_gaussian
from dpframe.mechanisms.gaussian_batch import _ACCEPT, _EXACT, _GAMMA_CLAMP, _LAPLACE

from .test_gaussian import MIN_P_VALUE, chisquare_p_value, make_rng
from .test_inverse_cdf import ulp_error

LOW63 = 2**63 - 1


def test_margin_covers_the_documented_error():
    # gaussian's notes: zeta < 4.05e-13 (gamma <= 700, the libm bound) plus 4.1 roundings
    eta = 5.01 * 2.0**-53
    zeta = math.expm1(700.001 * eta) + discrete.LIBM_RELATIVE_ERROR * 1.001
    assert zeta < 4.05e-13
    assert zeta + 4.1 * 2.0**-53 < gaussian._MARGIN
    assert math.exp(-_GAMMA_CLAMP) > 2.0**-1022  # a normal float
    assert math.exp(-(_GAMMA_CLAMP - 1)) < 2.0**-1008


PATHS = {"numpy": gaussian_batch._draw_numpy, "compiled": gaussian_kernel.draw}


def crafted_words(seed: int, count: int) -> np.ndarray:
    """Random words, and proposals' words at U = 0, tiny U (wide 1/u terms), sign only."""
    words = discrete._word_draws(count, make_rng(seed))
    words[0:8:2] = [0, 1, 2**20, -(2**63)]
    return words


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("t", [1, 4, 1025, 10**6 + 1, 2**31])
def test_proposals_are_the_discrete_laplace_inverse_cdf(t, path):
    # limit = -1 hands every certain proposal back as an EXACT event with its Y: each
    # must be the discrete Laplace's exact draw from the same word.
    words = crafted_words(11, 4000)
    count = words.size // 2
    out = np.zeros(count, dtype=np.int64)
    events = np.zeros((count, 4), dtype=np.int64)
    floats = np.zeros((count, 2))
    params = gaussian._params(1, 1, t)
    params = (*params[:3], -1, *params[4:])
    slot, used, k = PATHS[path](out, 0, words, params, events, floats)
    assert (slot, used, k) == (count, words.size, count)
    proposals = words[0::2]
    expected = discrete._apply_sign(
        discrete._magnitudes(proposals, t, 1, True, make_rng(12)), proposals
    )
    kinds = events[:, 1]
    certain = kinds == _EXACT
    assert kinds[0] == _LAPLACE and set(kinds.tolist()) <= {_EXACT, _LAPLACE}
    assert certain.sum() >= count - 8
    np.testing.assert_array_equal(events[certain, 2], expected[certain])
    np.testing.assert_array_equal(events[:, 0], np.arange(count))
    # an uncertain proposal hands back its word and a bracket that holds its magnitude
    for (_, _, word, _), (a, slack) in zip(events[~certain], floats[~certain], strict=True):
        u = int(word) & LOW63
        bracket = discrete._bracket(float(a), float(slack))
        m = discrete._exact_magnitude(u, t, 1, True, make_rng(13), bracket)
        assert m == discrete._exact_magnitude(u, t, 1, True, make_rng(13), None)


@pytest.mark.parametrize(
    ("num", "den", "limit", "margin", "cap"),
    [
        (2**20, 1, None, None, 256),  # sigma = 1024
        (10**12, 1, None, None, 256),  # sigma = 1e6: M beyond int64
        (1369, 100, 2, None, 256),  # |Y| >= 3: EXACT events
        (2**61, 2**62, None, None, 3),  # d t beyond int64; a full event table stops it
        (9, 1, None, 0.3, 256),  # a wide margin: many ACCEPT events
        (1, 2**40, None, None, 256),  # tiny sigma
    ],
)
def test_compiled_and_numpy_passes_agree(num, den, limit, margin, cap):
    words = crafted_words(14, 6001)  # an odd count: the last word is not used
    t = math.isqrt(num // den) + 1
    params = gaussian._params(num, den, t)
    if limit is not None:
        params = (*params[:3], limit, *params[4:])
    if margin is not None:
        params = (*params[:-1], margin)
    results = {}
    for name, draw in PATHS.items():
        out = np.full(2000, -(2**63), dtype=np.int64)
        events = np.zeros((cap, 4), dtype=np.int64)
        floats = np.zeros((cap, 2))
        step = draw(out, 5, words, params, events, floats)
        results[name] = (step, out, events, floats)
    (step, out, events, floats), other = results["numpy"], results["compiled"]
    assert step == other[0]
    k = step[2]
    np.testing.assert_array_equal(events[:k], other[2][:k])
    np.testing.assert_array_equal(floats[:k], other[3][:k])
    filled = np.setdiff1d(np.arange(5, step[0]), events[:k, 0])  # an event slot: undefined
    np.testing.assert_array_equal(out[filled], other[1][filled])
    assert filled.size + k == step[0] - 5
    assert (out[:5] == -(2**63)).all() and (out[filled] > -(2**63)).all() and k <= cap


def statuses(a: float, big_m: int, u: np.ndarray, margin: float) -> np.ndarray:
    g = np.full(u.size, a) ** 2 / float(big_m)
    return gaussian_batch._decide(gaussian_batch._exp_minus(g), u, margin)


@pytest.mark.parametrize(("a", "big_m"), [(7, 98), (3, 1), (1, 10**6), (0, 5), (2**40, 2**75)])
def test_acceptance_decides_only_certain_comparisons(a, big_m):
    # U' in [u, u + 1) / 2**63 against exp(-a^2 / M), u around the threshold and far off
    lo, hi = discrete._exp_bounds(a * a, big_m, 60)
    x = math.floor(Fraction(2**63) * lo)
    offsets = np.r_[np.arange(-64, 65), [-(2**40), 2**40, -(2**20), 2**20]]
    u = np.array([min(max(x + int(o), 0), LOW63) for o in offsets], dtype=np.int64)
    status = statuses(float(a), big_m, u, gaussian._MARGIN)
    for ui, st in zip(u.tolist(), status.tolist(), strict=True):
        if st == 1:
            assert Fraction(ui + 1, 2**63) <= lo
        elif st == 0:
            assert Fraction(ui, 2**63) >= hi
        else:
            assert st == _ACCEPT
    far = np.abs(offsets) >= 2**40  # beyond the margin (2**63 * 1e-12 < 2**24)
    assert (status[far] != _ACCEPT).all() or a == 0


def test_acceptance_beyond_the_clamp():
    # gamma = 10**4: a certain rejection unless U' < 2**-63
    status = statuses(100.0, 1, np.array([0, 1, LOW63]), gaussian._MARGIN)
    assert status.tolist() == [_ACCEPT, 0, 0]
    assert not gaussian._decide_exactly(0, 100, 1, make_rng(0))


def test_exp_within_4_ulp_up_to_the_clamp():
    # the acceptance's exp (numpy's, as the discrete Laplace's log: tested in
    # test_inverse_cdf.py) against correctly rounded decimal, on [0, _GAMMA_CLAMP]
    rng = np.random.default_rng(0)
    g = np.concatenate(
        [rng.random(2000) * 4, rng.random(1000) * _GAMMA_CLAMP, [0.0, 2.0**-40, _GAMMA_CLAMP]]
    )
    with localcontext() as ctx:
        ctx.prec = 40
        exact = [(-Decimal(v)).exp() for v in g.tolist()]
    assert ulp_error(gaussian_batch._exp_minus(g), exact) <= 4
    assert gaussian_batch._exp_minus(np.array([1e6]))[0] == math.exp(-_GAMMA_CLAMP)


def _counting(monkeypatch, name):
    calls = []
    real = getattr(gaussian, name)
    monkeypatch.setattr(gaussian, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


N = 20_000


@pytest.fixture(params=["numpy", "compiled"])
def path(request, monkeypatch):
    """Run the sampler on the numpy passes or on the compiled ones, whatever the size."""
    monkeypatch.setattr(gaussian, "_COMPILED_MIN", 2**62 if request.param == "numpy" else 1)
    return request.param


@pytest.mark.parametrize(("num", "den"), [(1369, 100), (2**20, 1)])
def test_forced_acceptance_fallback_matches_the_law(num, den, path, monkeypatch):
    # margin 10: no float comparison is certain, every acceptance is decided exactly
    monkeypatch.setattr(gaussian, "_MARGIN", 10.0)
    calls = _counting(monkeypatch, "_decide_exactly")
    z = sample_discrete_gaussian(num, den, size=N, rng=make_rng(21))
    assert len(calls) >= N
    assert chisquare_p_value(z, math.sqrt(num / den)) > MIN_P_VALUE


@pytest.mark.parametrize("k1", [0.05, 2.0])
def test_forced_proposal_fallback_matches_the_law(k1, path, monkeypatch):
    # K_1 widened: many (0.05: bracketed) or all (2.0: no bracket) proposals take the
    # discrete Laplace's exact fallback from their own word
    monkeypatch.setattr(discrete, "_K1_EXACT", k1)
    calls = _counting(monkeypatch, "_exact_magnitude")
    z = sample_discrete_gaussian(1369, 100, size=N, rng=make_rng(22))
    assert len(calls) >= (0.3 if k1 < 1 else 1.3) * N
    assert chisquare_p_value(z, 3.7) > MIN_P_VALUE


def test_forced_python_integer_acceptance_matches_the_law(path, monkeypatch):
    # int64 bound lowered: proposals with |Y| >= 3 are accepted with Python integers
    monkeypatch.setattr(gaussian, "_TWO62", 1000)
    calls = _counting(monkeypatch, "_bernoulli_exp_square")
    z = sample_discrete_gaussian(1369, 100, size=N, rng=make_rng(23))
    assert calls
    assert (np.abs(z) >= 3).mean() > 0.3
    assert chisquare_p_value(z, 3.7) > MIN_P_VALUE


def test_same_seed_same_draws_on_both_passes(monkeypatch):
    # through the fallbacks too: the compiled passes change the speed, not the draws
    monkeypatch.setattr(discrete, "_K1_EXACT", 0.05)
    monkeypatch.setattr(gaussian, "_COMPILED_MIN", 1)
    compiled = sample_discrete_gaussian(1369, 100, size=3000, rng=make_rng(24))
    monkeypatch.setattr(gaussian, "_COMPILED_MIN", 2**62)
    numpy = sample_discrete_gaussian(1369, 100, size=3000, rng=make_rng(24))
    np.testing.assert_array_equal(compiled, numpy)


def test_blocks_fill_every_slot(path):
    # more than one block of slots, and a size that is not a multiple of it
    count = 2 * gaussian._SLOTS + 17
    z = sample_discrete_gaussian(2**20, 1, size=count, rng=make_rng(25))
    assert z.shape == (count,)
    assert np.abs(z).max() < 10 * 1024
    assert chisquare_p_value(z, 1024.0) > MIN_P_VALUE
