"""Adversarial samplers for the compiled PRAM step: equal codes bit for bit at the edges.

The extremes of the integer tables (a threshold of 0: never moves; of ``2**bits``: always
moves), the widest draws (staircase alias tables of 61 bits), strided and 2-D codes, one
record: the compiled loop (:mod:`dpframe.mechanisms.pram.sampling_kernel`) releases what
the numpy passes release, every code in ``[0, S)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.mechanisms.pram import design
from dpframe.mechanisms.pram import sampling as sm
from dpframe.mechanisms.pram.sampling import PramSampler, sampler, staircase_sampler


def _staircase(s: int, epsilon: float) -> PramSampler:
    channel = np.ones((s, s))
    np.fill_diagonal(channel, math.exp(epsilon))
    return staircase_sampler(channel / channel.sum(axis=1, keepdims=True), epsilon)


SAMPLERS = {
    "never-and-always": lambda: PramSampler("pram", 3, 61, np.array([0, 1 << 61, (1 << 61) - 1])),
    "staircase-2": lambda: _staircase(2, 2.0),
    "staircase-40": lambda: _staircase(40, 1.0),
    "design-1000": lambda: sampler(design(np.random.default_rng(3).dirichlet(np.ones(1000)), 3.0)),
    "alias-200": lambda: sampler(
        np.random.default_rng(4).dirichlet(np.ones(200), size=200) * 0.3 + np.eye(200) * 0.7
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize("shape", [(1,), (sm._CHUNK + 3,), (301, 7)], ids=["one", "blocks", "2d"])
def test_extreme_samplers_release_the_same_codes_compiled(name, shape):
    samp = SAMPLERS[name]()
    s = samp.n_categories
    codes = np.random.default_rng(1).integers(0, s, shape)
    want = samp.randomize(codes, np.random.default_rng(9))
    got = samp.randomize(codes, np.random.default_rng(9), compiled=True)
    assert got.shape == want.shape and got.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    assert got.min() >= 0 and got.max() < s


def test_the_extreme_thresholds_never_and_always_move():
    """Code 0 (threshold 0) never moves, code 1 (threshold ``2**bits``) always does."""
    samp = SAMPLERS["never-and-always"]()
    codes = np.repeat(np.array([0, 1]), 5000)
    got = samp.randomize(codes, np.random.default_rng(2), compiled=True)
    assert (got[:5000] == 0).all()
    assert (got[5000:] != 1).all() and set(np.unique(got[5000:])) == {0, 2}


def test_strided_read_only_codes_are_released_as_their_copy():
    samp = SAMPLERS["staircase-40"]()
    wide = np.random.default_rng(5).integers(0, 40, 2 * sm._CHUNK + 10)
    view = wide[::2]  # not contiguous
    view.setflags(write=False)
    want = samp.randomize(np.ascontiguousarray(view), np.random.default_rng(6))
    np.testing.assert_array_equal(samp.randomize(view, np.random.default_rng(6), True), want)
