"""Proportion vectors (Liu 2019, Simulation study 2): privacy by brute force, bookkeeping."""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import logsumexp

from dpframe.core import sensitivity as sens
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.bounded import calibrate_bounded, grid_truncated_privacy_loss
from dpframe.mechanisms.components import plan_components
from dpframe.mechanisms.proportions import (
    consistent_tree,
    project_to_simplex,
    release_proportions,
)
from tests.oracles import exact_sum

P4 = np.array([0.1, 0.2, 0.3, 0.4])
BOUNDS2 = [(-3.0, 3.0), (-4.5, 4.5)]  # the paper's Simulation study 1


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def component_logpmf(method: str, gamma: float, m: int, width: int) -> np.ndarray:
    """Exact log-pmf over grid points 0..width of one component centred at index m."""
    return logpmf_table(method, gamma, width)[m]


@functools.cache
def logpmf_table(method: str, gamma: float, width: int) -> np.ndarray:
    """Row m: the exact log-pmf of the output (grid points 0..width) given index m."""
    y = np.arange(width + 1)
    dist = np.abs(y[None, :] - y[:, None]).astype(float)
    if method == "truncated":
        lp = -gamma * dist
        return lp - logsumexp(lp, axis=1, keepdims=True)
    beta = math.exp(-gamma)
    lp = math.log((1 - beta) / (1 + beta)) - gamma * dist
    lp[:, 0] = -gamma * y - math.log1p(beta)  # P(m + Z <= 0)
    lp[:, width] = -gamma * (width - y) - math.log1p(beta)  # P(m + Z >= width)
    return lp


def grid_index(value: float, g: float, width: int) -> int:
    return int(np.clip(np.rint(np.clip(value, 0.0, width * g) / g), 0, width))


def neighbour_pairs(n: int, k: int, neighbours: str):
    """All (p, p') of neighbouring datasets of n records over k categories."""
    for counts in itertools.product(range(n + 1), repeat=k):
        if sum(counts) != n:
            continue
        c = np.array(counts)
        p = c / n
        for i in range(k):
            if neighbours == "substitute":
                for j in range(k):
                    if i != j and c[i] > 0:
                        c2 = c.copy()
                        c2[i] -= 1
                        c2[j] += 1
                        yield p, c2 / n
            else:
                if c[i] > 0 and n > 1:
                    c2 = c.copy()
                    c2[i] -= 1
                    yield p, c2 / (n - 1)
                c2 = c.copy()
                c2[i] += 1
                yield p, c2 / (n + 1)


def vector_loss(method, gammas, p, p2, g, width) -> float:
    """Exact privacy loss of independent components (max over outputs, both directions)."""
    up = down = 0.0
    for gamma, a, b in zip(gammas, p, p2, strict=True):
        diff = component_logpmf(method, gamma, grid_index(a, g, width), width) - component_logpmf(
            method, gamma, grid_index(b, g, width), width
        )
        up += diff.max()
        down += (-diff).max()
    return max(up, down)


CASES = [(4, 1 / 32, 3), (4, 1 / 32, 4), (5, 1 / 16, 4), (3, 1 / 64, 5)]


@pytest.mark.parametrize("calibration", ["exact", "paper"])
@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
@pytest.mark.parametrize("method", ["truncated", "bit"])
@pytest.mark.parametrize(("n", "g", "k"), CASES)
def test_rescale_privacy_loss_by_brute_force(calibration, neighbours, method, n, g, k):
    """Every pair of neighbouring datasets, every output: the exact loss of the vector
    release never exceeds what is charged; that is epsilon unless truncation runs at the
    paper's scale, whose true loss exceeds epsilon (and is charged)."""
    eps = 1.0
    r = release_proportions(
        np.full(k, 1 / k),
        n,
        eps,
        method=method,
        calibration=calibration,
        neighbours=neighbours,
        granularity=g,
        rng=rng(),
    )
    (ch,) = r.charges
    gamma = g / ch.scale
    width = round(1 / g)
    worst = max(
        vector_loss(method, [gamma] * k, p, p2, g, width)
        for p, p2 in neighbour_pairs(n, k, neighbours)
    )
    assert worst <= ch.privacy_loss * (1 + 1e-9) <= ch.epsilon_charged * (1 + 1e-9)
    assert worst >= 0.5 * eps  # the bound is not wildly loose
    if method == "bit" or calibration == "exact":
        assert ch.privacy_loss <= eps and ch.epsilon_charged == eps
    else:
        assert ch.epsilon_charged > eps  # the true worst case is above eps in most cases here
    assert ch.scheme == ("per-component" if neighbours == "substitute" else "joint")


@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
@pytest.mark.parametrize("method", ["truncated", "bit"])
@pytest.mark.parametrize(("n", "g"), [(4, 1 / 32), (5, 1 / 16)])
def test_universal_histogram_is_exactly_epsilon_dp_by_brute_force(neighbours, method, n, g):
    eps, k = 1.0, 4
    r = release_proportions(
        P4,
        n,
        eps,
        strategy="universal_histogram",
        method=method,
        neighbours=neighbours,
        granularity=g,
        rng=rng(),
    )
    width = round(1 / g)
    gammas = [g / c.scale for c in r.charges]
    worst = 0.0
    for p, p2 in neighbour_pairs(n, k, neighbours):
        levels = [(p[:2].sum(), p[2:].sum()), p], [(p2[:2].sum(), p2[2:].sum()), p2]
        total_up = 0.0
        for lvl, gamma in enumerate(gammas):
            size = len(levels[0][lvl])
            total_up += vector_loss(
                method, [gamma] * size, levels[0][lvl], levels[1][lvl], g, width
            )
        worst = max(worst, total_up)
    # per level: max over both directions, summed over levels (an upper bound of the
    # exact tree loss, itself exact per level)
    assert worst <= eps * (1 + 1e-9)
    assert exact_sum(c.epsilon_charged for c in r.charges) <= Fraction(1)


@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
@pytest.mark.parametrize("method", ["truncated", "bit"])
@pytest.mark.parametrize(("n", "g", "k"), [(4, 1 / 32, 3), (4, 1 / 16, 4), (3, 1 / 32, 3)])
def test_all_but_one_is_exactly_epsilon_dp_by_brute_force(neighbours, method, n, g, k):
    """Adaptive bounds: dynamic programming over the room left, exact at every step."""
    eps = 1.0
    sub = neighbours == "substitute"
    plan = plan_components(
        method,
        "exact",
        eps,
        sens.proportion(n, neighbours),
        sens.histogram_proportions(n, neighbours),
        k - 1,
        min(2, k - 1) if sub else k - 1,
        0.0,
        1.0,
        g,
    )
    width = round(1 / g)
    r = release_proportions(
        np.full(k, 1 / k),
        n,
        eps,
        strategy="all_but_one",
        method=method,
        neighbours=neighbours,
        granularity=g,
        rng=rng(),
    )
    assert r.charges[0].max_changed == plan.k and r.charges[0].scheme == plan.scheme
    assert r.scales[r.order[0]] == pytest.approx(g / float(plan.gamma(round(1 / g))), rel=1e-12)

    def loss(p, p2, sign):
        value = np.zeros(width + 1)  # after the last sanitized step: nothing more
        for i in range(k - 2, -1, -1):
            new = np.zeros(width + 1)
            for room in range(width + 1):
                if room == 0:
                    new[room] = value[0]
                    continue
                gamma = float(plan.gamma(room))
                diff = component_logpmf(
                    method, gamma, grid_index(min(p[i], room * g), g, room), room
                ) - component_logpmf(method, gamma, grid_index(min(p2[i], room * g), g, room), room)
                new[room] = np.max(sign * diff + value[room::-1])
            value = new
        return value[width]

    worst = max(max(loss(p, p2, 1), loss(p, p2, -1)) for p, p2 in neighbour_pairs(n, k, neighbours))
    assert worst <= eps * (1 + 1e-9)


def test_add_remove_joint_bound_beats_per_component_split():
    """Under add/remove all K proportions move, by 2/n in total: the concave bound
    needs about half the noise of calibrating each at epsilon/K (K = 4)."""
    n, eps = 200, 1.0
    r = release_proportions(P4, n, eps, neighbours="add_remove", rng=rng())
    (ch,) = r.charges
    assert ch.scheme == "joint" and ch.max_changed == 4
    naive = calibrate_bounded(eps / 4, 1 / n, 0.0, 1.0, granularity=ch.granularity)
    assert ch.scale < 0.6 * naive.scale
    sub = release_proportions(P4, n, eps, neighbours="substitute", rng=rng()).charges[0]
    assert sub.scheme == "per-component" and sub.max_changed == 2
    ref = calibrate_bounded(eps / 2, 1 / n, 0.0, 1.0, granularity=sub.granularity)
    assert sub.scale == pytest.approx(ref.scale, rel=1e-6)  # each component eps/2 at 1/n


@pytest.mark.parametrize("strategy", ["rescale", "all_but_one", "universal_histogram"])
@pytest.mark.parametrize("method", ["truncated", "bit"])
@pytest.mark.parametrize("neighbours", ["substitute", "add_remove"])
def test_proportions_on_the_simplex_and_bookkeeping(strategy, method, neighbours):
    gen = rng(7)
    for eps, n in [(0.1, 50), (1.0, 500), (5.0, 20)]:
        p = gen.dirichlet(np.ones(8) * 0.5)
        r = release_proportions(
            p, n, eps, strategy=strategy, method=method, neighbours=neighbours, rng=gen
        )
        assert r.values.shape == (8,)
        assert (r.values >= 0).all() and (r.values <= 1).all()
        assert abs(r.values.sum() - 1) < 1e-12
        assert exact_sum(c.epsilon for c in r.charges) <= Fraction(repr(eps))
        assert r.epsilon_charged == float(exact_sum(c.epsilon_charged for c in r.charges))
        assert r.epsilon_charged <= eps
        for c in r.charges:
            assert c.sensitivity == sens.histogram_proportions(n, neighbours) == 2 / n
            assert c.component_sensitivity == sens.proportion(n, neighbours) == 1 / n
            assert c.privacy_loss <= c.epsilon
            assert c.max_changed == (
                min(2, c.components) if neighbours == "substitute" else c.components
            )
        ledger = r.ledger_charges()
        assert [x.epsilon for x in ledger] == [c.epsilon_charged for c in r.charges]
        with pytest.raises(ValueError):
            r.values[0] = 0.5  # read-only


def test_universal_histogram_levels_and_tree():
    r = release_proportions(P4, 1000, 1.0, strategy="universal_histogram", rng=rng(1))
    assert [c.name for c in r.charges] == ["level 1", "level 2"]
    assert [c.epsilon for c in r.charges] == [0.5, 0.5]
    assert [c.components for c in r.charges] == [2, 4]
    root, level1, leaves = r.tree
    assert root.tolist() == [1.0]
    np.testing.assert_allclose(level1, leaves.reshape(2, 2).sum(axis=1), atol=1e-15)
    np.testing.assert_allclose(leaves, r.values, atol=0)
    with pytest.raises(InvalidParameterError, match="power of 2"):
        release_proportions([0.2, 0.3, 0.5], 100, 1.0, strategy="universal_histogram")


def test_universal_histogram_order_permutes_the_leaves():
    order = (0, 3, 1, 2)  # the paper's alternative grouping (p1, p4 | p2, p3)
    r = release_proportions(
        P4, 10**6, 50.0, strategy="universal_histogram", order=order, rng=rng(2)
    )
    assert r.order == order
    np.testing.assert_allclose(r.tree[1], [P4[0] + P4[3], P4[1] + P4[2]], atol=1e-3)
    np.testing.assert_allclose(r.values, P4, atol=1e-3)


def test_all_but_one_order_and_remark_1_bounds():
    r = release_proportions(P4, 300, 1.0, strategy="all_but_one", order=0, rng=rng(3))
    assert r.order == (1, 2, 3, 0)  # p_1 computed last, as in the paper
    assert np.isnan(r.scales[0]) and np.isfinite(r.scales[1:]).all()
    assert r.charges[0].scale is None  # the scale follows the room left (per-component)
    r2 = release_proportions(P4, 300, 1.0, strategy="all_but_one", order=[3, 2, 1, 0], rng=rng(3))
    assert r2.order == (3, 2, 1, 0)
    # the running total never exceeds 1, so the last one is in [0, 1]
    for seed in range(30):
        r = release_proportions(P4, 20, 0.5, strategy="all_but_one", method="bit", rng=rng(seed))
        assert (np.cumsum(r.values[list(r.order)]) <= 1).all()
        assert r.values.min() >= 0


def test_all_but_one_degenerate_room():
    """When the released values use up the total, the rest is 0 without noise."""
    p = np.array([0.97, 0.01, 0.01, 0.01])
    for seed in range(200):
        r = release_proportions(p, 10, 0.2, strategy="all_but_one", method="bit", rng=rng(seed))
        if r.degenerate:
            break
    else:
        pytest.fail("no seed used up the total")
    assert r.values[0] == 1.0 and (r.values[1:] == 0).all()
    assert any("without noise" in note for note in r.notes)
    assert np.isnan(r.scales[1:]).all()


def test_rescale_degenerate_sum_is_uniform():
    p = np.array([0.5, 0.5, 0.0, 0.0])
    for seed in range(400):
        r = release_proportions(p, 5, 0.05, method="bit", rng=rng(seed))
        if r.degenerate:
            break
    else:
        pytest.fail("no seed gave an all-zero q*")
    assert (r.sanitized == 0).all()
    np.testing.assert_array_equal(r.values, np.full(4, 0.25))
    assert "uniform" in r.notes[0]


@pytest.mark.parametrize("strategy", ["rescale", "all_but_one", "universal_histogram"])
def test_proportions_unbiased_with_bit_far_from_bounds(strategy):
    """BIT, statistics far from the bounds: the mean release is within 4 SE of p."""
    reps, n = 800, 2000
    gen = rng(11)
    out = np.array(
        [
            release_proportions(P4, n, 1.0, strategy=strategy, method="bit", rng=gen).values
            for _ in range(reps)
        ]
    )
    se = out.std(axis=0, ddof=1) / math.sqrt(reps)
    assert (np.abs(out.mean(axis=0) - P4) <= 4 * se).all()


def test_paper_calibration_charges_the_true_loss():
    n, eps = 100, 1.0
    r = release_proportions(P4, n, eps, calibration="paper", rng=rng())
    (ch,) = r.charges
    assert ch.scale == pytest.approx(2 / (n * eps), rel=2e-3)  # the paper's rule, l1 = 2/n
    gamma = ch.granularity / ch.scale
    d_units = math.floor((1 / n) / ch.granularity) + 1
    loss = 2 * grid_truncated_privacy_loss(gamma, d_units, round(1 / ch.granularity))
    assert ch.privacy_loss == pytest.approx(loss, rel=1e-9)
    assert ch.epsilon_charged >= loss > 1.3 * eps
    assert r.epsilon_charged == ch.epsilon_charged
    bit = release_proportions(P4, n, eps, method="bit", calibration="paper", rng=rng())
    assert bit.epsilon_charged == eps and bit.charges[0].scale == pytest.approx(ch.scale)


def tree_matrix(k: int) -> np.ndarray:
    """Rows: every non-root node, level by level (node i of level l covers k / 2**l leaves)."""
    rows = []
    level = 1
    while 2**level <= k:
        span = k // 2**level
        for i in range(2**level):
            row = np.zeros(k)
            row[i * span : (i + 1) * span] = 1
            rows.append(row)
        level += 1
    return np.array(rows)


@pytest.mark.parametrize("k", [2, 4, 8, 16, 32])
def test_consistent_tree_is_the_constrained_least_squares(k):
    """Hay et al. Theorem 3 with the root fixed: argmin ||A x - h~||^2 s.t. sum x = root."""
    a = tree_matrix(k)
    gen = rng(k)
    depth = int(math.log2(k))
    for root in (1.0, 0.7):
        noisy_flat = gen.normal(0.0, 0.3, size=a.shape[0]) + a @ gen.dirichlet(np.ones(k))
        split = np.cumsum([2**i for i in range(1, depth + 1)])[:-1]
        noisy = np.split(noisy_flat, split)
        fitted = np.concatenate(consistent_tree(noisy, root=root))
        kkt = np.block([[2 * a.T @ a, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
        rhs = np.concatenate([2 * a.T @ noisy_flat, [root]])
        x = np.linalg.solve(kkt, rhs)[:k]
        np.testing.assert_allclose(fitted, a @ x, atol=1e-12)


def test_consistent_tree_matches_the_papers_steps_for_k4():
    """Steps 3-4 of Simulation study 2 (with h(u) read as the corrected parent)."""
    gen = rng(5)
    for _ in range(20):
        h1 = gen.uniform(0, 1, 2)
        h2 = gen.uniform(0, 1, 4)
        z2 = h2
        z1 = np.array([h2[:2].sum(), h2[2:].sum()]) / 3 + 2 / 3 * h1
        bar1 = z1 + 0.5 * (1 - z1.sum())
        bar2 = np.concatenate(
            [z2[:2] + 0.5 * (bar1[0] - z2[:2].sum()), z2[2:] + 0.5 * (bar1[1] - z2[2:].sum())]
        )
        got1, got2 = consistent_tree([h1, h2])
        np.testing.assert_allclose(got1, bar1, atol=1e-15)
        np.testing.assert_allclose(got2, bar2, atol=1e-15)


def test_consistent_tree_batches():
    gen = rng(9)
    noisy = [gen.normal(size=(5, 3, 2)), gen.normal(size=(5, 3, 4)), gen.normal(size=(5, 3, 8))]
    batched = consistent_tree(noisy)
    for i, j in [(0, 0), (4, 2)]:
        single = consistent_tree([x[i, j] for x in noisy])
        for b, s in zip(batched, single, strict=True):
            np.testing.assert_allclose(b[i, j], s, atol=1e-14)


def test_project_to_simplex_is_the_euclidean_projection():
    gen = rng(4)
    for k in (2, 3, 5, 10):
        for _ in range(50):
            v = gen.normal(0.3, 0.7, size=k)
            w = project_to_simplex(v)
            assert (w >= 0).all() and abs(w.sum() - 1) < 1e-12
            # variational inequality of a projection onto a convex set
            others = gen.dirichlet(np.ones(k), size=200)
            assert ((others - w) @ (v - w) <= 1e-12).all()
            assert np.linalg.norm(v - w) <= np.linalg.norm(v - others, axis=1).min() + 1e-12
    x = gen.dirichlet(np.ones(6))
    np.testing.assert_allclose(project_to_simplex(x), x, atol=1e-15)  # already on it
    batch = gen.normal(size=(4, 7))
    np.testing.assert_allclose(
        project_to_simplex(batch), np.array([project_to_simplex(b) for b in batch])
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"p": [0.5]}, "K >= 2"),
        ({"p": [0.6, 0.6]}, "sum to 1"),
        ({"p": [1.2, -0.2]}, r"\[0, 1\]"),
        ({"p": [[0.5, 0.5]]}, "vector"),
        ({"p": [0.5, np.nan]}, "finite"),
        ({"n": 0}, "n must be >= 1"),
        ({"n": 10.0}, "n must be an integer"),
        ({"epsilon": 0}, "epsilon must be > 0"),
        ({"epsilon": math.inf}, "epsilon must be finite"),
        ({"strategy": "clip"}, "strategy must be one of"),
        ({"method": "gauss"}, "method must be one of"),
        ({"calibration": "loose"}, "calibration must be one of"),
        ({"neighbours": "swap"}, "neighbours must be one of"),
        ({"order": 1}, "order applies"),
        ({"order": [0, 1, 1, 3], "strategy": "all_but_one"}, "permutation"),
        ({"order": 7, "strategy": "all_but_one"}, "category index"),
        ({"order": 1, "strategy": "universal_histogram"}, "permutation"),
        ({"granularity": 0.3}, "power of two"),
        ({"granularity": 2.0}, "power of two"),
        ({"rng": 3}, "rng must be a numpy.random.Generator"),
        ({"epsilon": 1e-9}, "epsilon is too small"),
    ],
)
def test_release_proportions_bad_inputs(kwargs, match):
    args = {"p": P4, "n": 100, "epsilon": 1.0} | kwargs
    with pytest.raises(InvalidParameterError, match=match):
        release_proportions(args.pop("p"), args.pop("n"), args.pop("epsilon"), **args)
