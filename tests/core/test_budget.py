"""Exact budget arithmetic: splitting an epsilon, rounding a charge up."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpframe.core.budget import split_epsilon


def exact_sum(values) -> Fraction:
    """How the accountant adds charges: the decimals they print as."""
    return sum((Fraction(repr(float(v))) for v in values), Fraction(0))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("eps", [1.0, 0.7, 0.1, 3.3, 1e-3])
@pytest.mark.parametrize("parts", [1, 3, 6, 7, 10, 28])
def test_split_epsilon_fits_exactly(eps, parts):
    shares = split_epsilon(eps, [1.0] * parts)
    assert exact_sum(shares) <= Fraction(repr(eps))
    assert max(shares) - min(shares) <= 1e-15 * eps * parts
    w = rng(parts).uniform(0.1, 3.0, size=parts)
    shares = split_epsilon(eps, w)
    assert exact_sum(shares) <= Fraction(repr(eps))
    np.testing.assert_allclose(shares, eps * w / w.sum(), rtol=1e-12)
