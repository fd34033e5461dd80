"""The compiled step of the PRAM samplers releases what the numpy passes release.

:mod:`dpframe.mechanisms.pram.sampling_kernel` decides each record's released code from
the same draw by the same integer operations: from the same generator state, the two
paths give equal arrays, for the paper's design and for an alias table, across blocks,
for any codes' dtype. The law itself is tested on the numpy path
(``tests/mechanisms/test_pram.py``); equality carries it over.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpframe.mechanisms.pram import design
from dpframe.mechanisms.pram import sampling as sm
from dpframe.mechanisms.pram.sampling import sampler


def samplers():
    rng = np.random.default_rng(5)
    out = {}
    for s in (2, 3, 6, 300):
        p = rng.dirichlet(np.ones(s))
        out[f"design-{s}"] = sampler(design(p, 1.0))
    m = rng.dirichlet(np.ones(5), size=5) * 0.5 + np.eye(5) * 0.5  # a general matrix
    out["alias-5"] = sampler(m)
    return out


SAMPLERS = samplers()


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_the_compiled_loop_releases_the_codes_the_numpy_passes_release(name):
    samp = SAMPLERS[name]
    assert samp.kind == ("alias" if name.startswith("alias") else "pram")
    s = samp.n_categories
    n = 3 * sm._CHUNK + 17  # several blocks and a short one
    codes = np.random.default_rng(1).integers(0, s, n)
    numpy_ = samp.randomize(codes, np.random.default_rng(42))
    compiled = samp.randomize(codes, np.random.default_rng(42), compiled=True)
    assert compiled.dtype == numpy_.dtype == np.int64
    np.testing.assert_array_equal(compiled, numpy_)
    assert (compiled != codes).any()  # the test could fail: records do move


def test_read_only_codes_and_other_dtypes_release_the_same():
    samp = SAMPLERS["design-6"]
    codes = np.random.default_rng(2).integers(0, 6, 50_000)
    frozen = codes.copy()
    frozen.setflags(write=False)  # as polars hands over a column's memory
    want = samp.randomize(codes, np.random.default_rng(7))
    np.testing.assert_array_equal(samp.randomize(frozen, np.random.default_rng(7), True), want)
    small = codes.astype(np.uint8)  # not int64: the numpy passes, the same result
    got = samp.randomize(small, np.random.default_rng(7), compiled=True)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_bad_codes_are_refused_on_the_compiled_path_too():
    samp = SAMPLERS["design-3"]
    with pytest.raises(Exception, match="codes"):
        samp.randomize(np.array([0, 1, 3]), np.random.default_rng(0), compiled=True)
    with pytest.raises(Exception, match="codes"):
        samp.randomize(np.array([0, -1, 2]), np.random.default_rng(0), compiled=True)
