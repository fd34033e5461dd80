"""Cyclic PRAM designs: the risk formula, the search against enumeration, exact sampling.

The risk is recomputed from the estimator's covariance written out, not from the module's
spectral formula; the enumeration tries every subset of every size.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.cyclic import CYCLIC_MAX_CATEGORIES, circulant_matrix, cyclic_design
from dpframe.mechanisms.pram.optimum import krr
from dpframe.mechanisms.pram.sampling import staircase_sampler


def risk(p: np.ndarray, m: np.ndarray) -> float:
    """n tr Cov(p_hat), Cov = M^-T (diag(pi) - pi pi^T) M^-1 / n, pi = M^T p."""
    pi = m.T @ p
    b = np.linalg.inv(m.T)
    return float(np.trace(b @ (np.diag(pi) - np.outer(pi, pi)) @ b.T))


@pytest.mark.parametrize(("s", "epsilon"), [(5, 0.3), (8, 0.1), (13, 1.0), (30, 0.5)])
def test_risk_is_the_constant_minus_the_squared_norm_at_every_prior(s, epsilon):
    d = cyclic_design(s, epsilon)
    rng = np.random.default_rng(s)
    for p in [np.full(s, 1 / s), np.eye(s)[0], *rng.dirichlet(np.full(s, 0.3), size=5)]:
        assert risk(p, d.matrix) == pytest.approx(d.r - p @ p, rel=1e-9)


def test_block_one_is_krr_and_the_bound_holds():
    for s, eps in [(3, 2.0), (6, 3.0), (9, 1.0)]:
        m = circulant_matrix(s, (0,), eps)
        assert np.allclose(m, krr(s, eps).matrix, rtol=1e-9)
    for s in range(3, 20):
        for eps in (0.05, 0.5, 2.0):
            d = cyclic_design(s, eps)
            assert d.bound <= d.r * (1 + 1e-12)
            assert d.r <= d.krr_r  # k-RR is always a candidate
            assert d.krr_r == pytest.approx(risk(np.full(s, 1 / s), krr(s, eps).matrix) + 1 / s)


def _enumerated_best(s: int, epsilon: float) -> float:
    """min over every subset D (containing 0: a shift permutes columns) of r."""
    u = np.full(s, 1 / s)
    best = math.inf
    for size in range(1, s):
        for rest in itertools.combinations(range(1, s), size - 1):
            m = circulant_matrix(s, (0, *rest), epsilon)
            if np.linalg.cond(m) < 1e12:
                best = min(best, risk(u, m) + 1 / s)
    return best


@pytest.mark.parametrize("s", list(range(3, 12)))
@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 3.0])
def test_search_equals_the_enumeration_of_every_subset(s, epsilon):
    assert cyclic_design(s, epsilon).r == pytest.approx(_enumerated_best(s, epsilon), rel=1e-9)


@pytest.mark.parametrize(
    ("s", "block"),
    [(7, 3), (11, 5), (13, 4)],  # Fano plane, quadratic residues mod 11, Singer (q = 3)
)
def test_difference_sets_reach_the_bound(s, block):
    d = cyclic_design(s, 0.1)
    assert d.block == block
    # Jensen's bound for this block size, attained only by a difference set
    z = (math.exp(0.1) - 1) * block + s
    jensen = (1 + (s - 1) ** 2 * z**2 / ((math.exp(0.1) - 1) ** 2 * (s * block - block**2))) / s
    assert d.r == pytest.approx(jensen, rel=1e-9)
    assert d.bound <= d.r * (1 + 1e-12)
    diffs = sorted((a - b) % s for a in d.subset for b in d.subset if a != b)
    lam = block * (block - 1) // (s - 1)
    assert diffs == sorted(list(range(1, s)) * lam)  # every difference exactly lambda times


def exactly_dp(weights: np.ndarray, epsilon: float) -> bool:
    with localcontext() as ctx:
        ctx.prec = 60
        bound = Fraction(Decimal(epsilon).exp())
    return all(
        Fraction(int(col.max()), int(col.min())) <= bound and col.min() > 0 for col in weights.T
    )


@pytest.mark.parametrize(("s", "epsilon"), [(3, 1e-9), (7, 0.1), (20, 0.5), (64, 2.0)])
def test_sampled_integers_are_exactly_epsilon_dp(s, epsilon):
    sam = staircase_sampler(cyclic_design(s, epsilon).matrix, epsilon)
    assert sam.epsilon_actual <= epsilon
    assert exactly_dp(sam.weights(), epsilon)


def test_large_sizes_gain_as_the_theory_says():
    # subset-style designs scale as S, k-RR as S^2 at small epsilon: the gain grows
    gains = [cyclic_design(s, 0.1).gain_over_krr for s in (20, 40, 80)]
    assert gains[0] < gains[1] < gains[2] and gains[2] > 10
    for s in (40, 80):
        d = cyclic_design(s, 0.1)
        assert d.r / d.bound < 1.3  # within 30% of a perfect difference set


def test_deterministic_and_immutable():
    a, b = cyclic_design(20, 0.3), cyclic_design(20, 0.3)
    assert a.subset == b.subset and a.r == b.r
    m = a.matrix
    m[0, 0] = 99.0  # a fresh array each time: the design is unchanged
    assert a.matrix[0, 0] != 99.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_categories": 1, "epsilon": 1.0}, "n_categories"),
        ({"n_categories": CYCLIC_MAX_CATEGORIES + 1, "epsilon": 1.0}, "n_categories"),
        ({"n_categories": 5, "epsilon": 0.0}, "epsilon"),
        ({"n_categories": 5, "epsilon": 13.0}, "epsilon"),
        ({"n_categories": 7, "epsilon": 355.0}, "epsilon"),
        ({"n_categories": 5, "epsilon": float("nan")}, "epsilon"),
        ({"n_categories": 5, "epsilon": 1.0, "restarts": 0}, "restarts"),
        ({"n_categories": 5, "epsilon": 1.0, "seed": -1}, "seed"),
        ({"n_categories": "5", "epsilon": 1.0}, "n_categories"),
    ],
)
def test_errors_name_the_argument(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        cyclic_design(**kwargs)
