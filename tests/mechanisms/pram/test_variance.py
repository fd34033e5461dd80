"""The least-variance eps-DP PRAM matrix (``pram.variance``), checked independently."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.optimum import design, krr
from dpframe.mechanisms.pram.variance import (
    VarianceDesign,
    estimation_risk,
    variance_design,
    variance_sampler,
)


def stacked_risk(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """n tr Cov(p_hat) for a stack of matrices (K, S, S), written from the definition."""
    a = np.linalg.inv(np.transpose(m, (0, 2, 1)))  # (M^T)^{-1}
    pi = np.einsum("i,kij->kj", p, m)
    ap = np.einsum("kij,kj->ki", a, pi)
    cov = np.einsum("kij,kj,klj->kil", a, pi, a) - ap[:, :, None] * ap[:, None, :]
    return np.trace(cov, axis1=1, axis2=2)


def dp_mask(m: np.ndarray, epsilon: float) -> np.ndarray:
    return (m.max(axis=1) <= math.exp(epsilon) * m.min(axis=1)).all(axis=1)


# ---------------------------------------------------------------------------
# estimation_risk
# ---------------------------------------------------------------------------


def test_risk_matches_monte_carlo():
    rng = np.random.default_rng(7)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    m = np.array(
        [[0.5, 0.2, 0.2, 0.1], [0.2, 0.4, 0.2, 0.2], [0.15, 0.2, 0.45, 0.2], [0.2, 0.2, 0.2, 0.4]]
    )
    n, reps = 2_000, 20_000
    pi = m.T @ p
    counts = rng.multinomial(n, pi, size=reps)
    p_hat = np.linalg.solve(m.T, (counts / n).T).T
    y = n * ((p_hat - p) ** 2).sum(axis=1)  # unbiased for the risk, one value per release
    se = y.std(ddof=1) / math.sqrt(reps)
    assert abs(y.mean() - estimation_risk(p, m)) < 4 * se


def test_risk_equals_definition_and_closed_form():
    p = np.array([0.3, 0.7])
    q = 0.8
    m = np.array([[q, 1 - q], [1 - q, q]])
    pi0 = p @ m[:, 0]
    # binary RR: Var(p_hat_0) = pi0 (1 - pi0) / (2q - 1)^2, twice for the trace
    assert estimation_risk(p, m) == pytest.approx(2 * pi0 * (1 - pi0) / (2 * q - 1) ** 2)
    rng = np.random.default_rng(1)
    mats = rng.dirichlet(np.ones(3), size=(5, 3))
    p3 = np.array([0.2, 0.5, 0.3])
    want = stacked_risk(p3, mats)
    got = [estimation_risk(p3, k) for k in mats]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_risk_singular_and_errors():
    assert estimation_risk([0.5, 0.5], np.full((2, 2), 0.5)) == math.inf
    with pytest.raises(InvalidParameterError, match="matrix"):
        estimation_risk([0.5, 0.5], np.eye(3))
    with pytest.raises(InvalidParameterError, match="p "):
        estimation_risk([0.5, 0.6], np.eye(2))
    with pytest.raises(InvalidParameterError, match="rows must sum"):
        estimation_risk([0.5, 0.5], [[0.5, 0.4], [0.5, 0.5]])


# ---------------------------------------------------------------------------
# variance_design: independent checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("p0", [0.5, 0.8, 0.95])
def test_s2_matches_exhaustive_grid(p0, epsilon):
    """Every 2x2 eps-DP matrix is [[1-x, x], [y, 1-y]] with y in an interval per x; the
    grid holds that interval's end points, so its minimum is attained by a DP matrix."""
    p = np.array([p0, 1 - p0])
    a = math.exp(epsilon)
    x = np.linspace(0.0, 1.0, 801)
    lo = np.maximum.reduce([(1 - x) / a, 1 - a * x, np.zeros_like(x)])
    hi = np.minimum.reduce([a * (1 - x), 1 - x / a, np.ones_like(x)])
    ok = lo <= hi
    x, lo, hi = x[ok], lo[ok], hi[ok]
    u = np.linspace(0.0, 1.0, 801)
    xx = np.repeat(x, u.size)
    yy = (lo[:, None] + (hi - lo)[:, None] * u).ravel()
    m = np.stack([np.stack([1 - xx, xx], -1), np.stack([yy, 1 - yy], -1)], 1)
    r = np.full(m.shape[0], np.inf)
    ok = np.abs(np.linalg.det(m)) > 1e-9
    r[ok] = stacked_risk(p, m[ok])
    r = r.reshape(x.size, u.size)
    i, j = np.unravel_index(np.argmin(r), r.shape)
    grid_min = r[i, j]
    # resolution: the largest change of the risk to a grid neighbour of the minimiser
    nb = r[max(i - 1, 0) : i + 2, max(j - 1, 0) : j + 2]
    resolution = float(np.max(np.abs(nb[np.isfinite(nb)] - grid_min)))
    d = variance_design(p, epsilon)
    assert d.risk <= grid_min * (1 + 1e-9)  # a grid point is DP: never beaten by it
    assert d.risk >= grid_min - resolution - 1e-12  # and not below what the grid resolves


def _simplex_grid(k: int) -> np.ndarray:
    pts = [(i / k, j / k, (k - i - j) / k) for i in range(k + 1) for j in range(k + 1 - i)]
    return np.array(pts)


@pytest.mark.parametrize(
    ("p", "epsilon"),
    [([1 / 3] * 3, 0.5), ([0.6, 0.3, 0.1], 1.0), ([0.5, 0.3, 0.2], 2.0), ([0.8, 0.15, 0.05], 0.3)],
)
def test_s3_grid_and_random_search_never_beat_it(p, epsilon):
    """Rows on a simplex grid of step 1/14 (all DP triples), plus 200k random DP matrices.

    Tolerance: the optimiser stops when the relative change of the risk is below 1e-13
    (SLSQP ftol); at a KKT point the first-order change over the grid is >= 0, so only
    the float error of the risk (~1e-12 relative) and the repair's mixing (<= 1e-9 of
    the distance to uniform) can let a DP point win: we allow 1e-7 relative.
    """
    p = np.asarray(p)
    d = variance_design(p, epsilon)
    rows = _simplex_grid(14)
    rows = rows[(rows > 0).all(axis=1)]
    idx = np.array(list(itertools.product(range(len(rows)), repeat=3)))
    m = rows[idx]  # (K, 3, 3)
    m = m[dp_mask(m, epsilon)]
    rng = np.random.default_rng(3)
    rand = rng.dirichlet(np.ones(3), size=(200_000, 3))
    m = np.concatenate([m, rand[dp_mask(rand, epsilon)]])
    assert len(m) > 500
    with np.errstate(all="ignore"):
        det = np.abs(np.linalg.det(m))
        r = stacked_risk(p, m[det > 1e-9])
    best = float(np.min(r[np.isfinite(r)]))
    assert best >= d.risk * (1 - 1e-7)


CASES = [
    ([0.25] * 4, 0.1),
    ([0.25] * 4, 1.0),
    ([0.4, 0.3, 0.2, 0.1], 0.5),
    ([0.7, 0.1, 0.1, 0.1], 2.0),
    ([0.5, 0.5], 1.0),
    ([0.2, 0.3, 0.5], 0.1),
]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"S{len(c[0])}-eps{c[1]}")
def made(request):
    p, eps = request.param
    return np.asarray(p), eps, variance_design(p, eps)


def test_design_is_dp_stochastic_and_no_worse(made):
    p, eps, d = made
    m = d.matrix
    assert isinstance(d, VarianceDesign)
    assert m.shape == (p.size, p.size)
    assert (m > 0).all()
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (m.max(axis=0) <= math.exp(eps) * m.min(axis=0) * (1 + 1e-12)).all()
    assert d.risk == estimation_risk(p, m)
    assert d.krr_risk == pytest.approx(estimation_risk(p, krr(p.size, eps).matrix), rel=1e-12)
    assert d.paper_risk == pytest.approx(estimation_risk(p, design(p, eps).matrix), rel=1e-12)
    assert d.risk <= min(d.krr_risk, d.paper_risk)
    assert d.gain_over_krr >= 1 and d.gain_over_paper >= 1
    assert np.isfinite(d.condition_number)
    assert not m.flags.writeable


def test_design_beats_krr_at_small_epsilon():
    """Measured: at S = 5, eps = 0.1 (uniform prior) a non-k-RR matrix has ~15% less risk."""
    d = variance_design(np.full(5, 0.2), 0.1)
    assert d.risk < 0.95 * d.krr_risk
    assert d.method.startswith("slsqp")


def test_deterministic():
    a = variance_design([0.5, 0.3, 0.2], 0.7)
    b = variance_design([0.5, 0.3, 0.2], 0.7)
    np.testing.assert_array_equal(a.matrix, b.matrix)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 13.0}, "epsilon"),
        ({"n_random": -1}, "n_random"),
        ({"seed": 1.5}, "seed"),
        ({"maxiter": 0}, "maxiter"),
        ({"p": [0.5, 0.2]}, "p"),
    ],
)
def test_design_errors(kwargs, name):
    args = {"p": [0.5, 0.5], "epsilon": 1.0, **kwargs}
    with pytest.raises(InvalidParameterError, match=name):
        variance_design(args.pop("p"), args.pop("epsilon"), **args)


# ---------------------------------------------------------------------------
# variance_sampler: exact integers keep epsilon
# ---------------------------------------------------------------------------


def exact_ratio_at_most(weights: np.ndarray, epsilon: float) -> bool:
    """max_j max_i W_ij / min_i W_ij <= exp(epsilon), decided with 60-digit bounds."""
    with localcontext() as ctx:
        ctx.prec = 60
        bound = Fraction(Decimal(epsilon).exp()) * (1 - Fraction(1, 10**55))
    for j in range(weights.shape[1]):
        col = [int(v) for v in weights[:, j]]
        if min(col) == 0 or Fraction(max(col), min(col)) > bound:
            return False
    return True


def test_sampler_keeps_epsilon(made):
    p, eps, d = made
    sam = variance_sampler(d)
    assert sam.epsilon_actual <= eps
    w = sam.weights()
    assert (w.sum(axis=1) == p.size << sam.bits).all()
    assert exact_ratio_at_most(w, eps)
    np.testing.assert_allclose(sam.matrix, d.matrix, rtol=1e-9, atol=1e-15)


def test_sampler_draws_the_matrix():
    d = variance_design([0.5, 0.3, 0.2], 1.0)
    rng = np.random.default_rng(5)
    n = 200_000
    out = variance_sampler(d).randomize(np.zeros(n, dtype=np.int64), rng)
    freq = np.bincount(out, minlength=3) / n
    se = np.sqrt(d.matrix[0] * (1 - d.matrix[0]) / n)
    assert (np.abs(freq - d.matrix[0]) < 5 * se).all()


def test_sampler_errors():
    with pytest.raises(InvalidParameterError, match="design"):
        variance_sampler(np.eye(2))  # type: ignore[arg-type]


def test_gradient_matches_finite_differences():
    from dpframe.mechanisms.pram.variance import _risk_and_grad, _risk_matrix

    rng = np.random.default_rng(11)
    p = rng.dirichlet(np.ones(4))
    m = rng.dirichlet(np.ones(4) * 3, size=4)
    _, g = _risk_and_grad(p, m)
    h = 1e-6
    fd = np.zeros_like(m)
    for i, j in itertools.product(range(4), range(4)):
        e = np.zeros_like(m)
        e[i, j] = h
        fd[i, j] = (_risk_matrix(p, m + e) - _risk_matrix(p, m - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * np.abs(g).max())
