"""The quantile kernel (dpframe.mechanisms.quantile): grid, accounting, draw, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe.core.units import PrivacyUnit
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.quantile import (
    DEFAULT_BINS,
    Grid,
    grid_from_edges,
    levels,
    plan_quantiles,
    quantile_sides,
    quantiles_of,
    uniform_grid,
)

# -- the grid ---------------------------------------------------------------------------


def test_cell_index_is_the_stated_rule():
    grid = grid_from_edges([0.0, 1.0, 2.5, 4.0])
    values = np.array(
        [-np.inf, -1.0, 0.0, 0.999, 1.0, np.nextafter(1.0, 2), 2.4999, 2.5, 3.99, 4.0, 7.0, np.inf]
    )
    assert grid.cell_index(values).tolist() == [0, 0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 6]
    assert grid.cells == 7
    # the rule by definition, after clipping to [e_0, e_B]: cell 2k if x == e_k, else
    # 2k + 1 for the k with e_k < x < e_{k+1}
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-1, 5, 1000), grid.edges, [-1.0, 9.0]])
    clipped = np.clip(x, grid.lower, grid.upper)

    def cell(v: float) -> int:
        k = next(k for k in range(grid.bins + 1) if v <= grid.edges[k])
        return 2 * k if v == grid.edges[k] else 2 * k - 1

    assert grid.cell_index(x).tolist() == [cell(v) for v in clipped]


def test_cell_index_refuses_nan():
    with pytest.raises(InvalidDataError, match="NaN"):
        uniform_grid(0, 1, bins=2).cell_index(np.array([0.5, np.nan]))


def inside(hist: np.ndarray) -> np.ndarray:
    """Cells of a histogram whose rows all lie strictly inside the bins (none at an edge)."""
    hist = np.asarray(hist)
    out = np.zeros((*hist.shape[:-1], 2 * hist.shape[-1] + 1), dtype=np.int64)
    out[..., 1::2] = hist
    return out


def test_uniform_grid_edges():
    assert uniform_grid(0, 1, bins=4).edges.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert uniform_grid(0, 1, resolution=0.3).edges.tolist()[-1] == 1.0
    assert uniform_grid(0, 1, resolution=0.3).bins == 4
    assert uniform_grid(0, 1).bins == DEFAULT_BINS
    grid = uniform_grid(-3.7, 11.1, bins=997)
    assert grid.edges[-1] == 11.1 and (np.diff(grid.edges) > 0).all()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"lower": 1, "upper": 0}, "lower"),
        ({"lower": 0, "upper": np.inf}, "upper"),
        ({"lower": 0, "upper": 1, "bins": 0}, "bins"),
        ({"lower": 0, "upper": 1, "bins": 2.5}, "bins"),
        ({"lower": 0, "upper": 1, "bins": 2**21}, "bins"),
        ({"lower": 0, "upper": 1, "resolution": -1.0}, "resolution"),
        ({"lower": 0, "upper": 1, "resolution": 1e-9}, "resolution"),
        ({"lower": 0, "upper": 1, "resolution": 0.1, "bins": 10}, "resolution"),
        ({"lower": 1e16, "upper": 1e16 + 4, "bins": 1000}, "bins"),
    ],
)
def test_uniform_grid_refuses_by_name(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        uniform_grid(**kwargs)


@pytest.mark.parametrize(
    "edges", [[1.0], [0.0, 0.0, 1.0], [1.0, 0.0], [0.0, np.nan], ["a", "b"], [[0, 1], [2, 3]]]
)
def test_grid_from_edges_refuses_by_name(edges):
    with pytest.raises(InvalidParameterError, match="edges"):
        grid_from_edges(edges)


def test_grid_edges_are_read_only():
    grid = grid_from_edges([0, 1, 2])
    with pytest.raises(ValueError):
        grid.edges[0] = 5.0
    assert isinstance(grid, Grid)


# -- accounting -------------------------------------------------------------------------


def test_levels_is_ceil_log2_m_plus_1():
    for m in range(1, 200):
        assert levels(m) == int(np.ceil(np.log2(m + 1)))


def test_sides():
    person = PrivacyUnit("pid", max_rows=3, max_groups=4)
    assert quantile_sides(PrivacyUnit(), "add_remove") == (1, 1)
    assert quantile_sides(PrivacyUnit(), "substitute") == (1, 2)
    assert quantile_sides(person, "add_remove") == (3, 4)
    assert quantile_sides(person, "substitute") == (3, 8)
    assert quantile_sides(person, "add_remove", pooled=True) == (12, 1)
    assert quantile_sides(person, "substitute", pooled=True) == (12, 2)
    with pytest.raises(InvalidParameterError, match="max_groups"):
        quantile_sides(PrivacyUnit("pid", max_rows=3), "add_remove")
    with pytest.raises(InvalidParameterError, match="neighbours"):
        quantile_sides(PrivacyUnit(), "swap")


def test_epsilon_level_is_rounded_down():
    grid = uniform_grid(0, 1, bins=10)
    for eps in (1.0, 0.1, 0.3, 1 / 3, 2.2, 1e-300):
        for m, sides in ((1, 1), (3, 2), (7, 6), (19, 10)):
            plan = plan_quantiles(list(np.arange(1, m + 1) / (m + 1)), grid, eps, sides=sides)
            from fractions import Fraction

            exact = Fraction(eps) / (plan.levels * sides)
            assert Fraction(plan.epsilon_level) <= exact
            assert plan.epsilon_level > 0 and plan.epsilon == eps


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [
        ((0.0,), {}, "q"),
        ((1.0,), {}, "q"),
        (([0.5, 0.25],), {}, "q"),
        (([0.5, 0.5],), {}, "q"),
        (([],), {}, "q"),
        (("0.5",), {}, "q"),
        ((True,), {}, "q"),
        (([0.5, np.nan],), {}, "q"),
        ((0.5, "grid"), {}, "grid"),
        ((0.5, None, 0.0), {}, "epsilon"),
        ((0.5, None, np.inf), {}, "epsilon"),
        ((0.5, None, 1.0), {"rows": 0}, "rows"),
        ((0.5, None, 1.0), {"sides": 1.5}, "sides"),
    ],
)
def test_plan_refuses_by_name(args, kwargs, name):
    grid = uniform_grid(0, 1, bins=4)
    full = list(args) + [grid, 1.0][len(args) - 1 :]
    full = [grid if a is None else a for a in full]
    with pytest.raises(InvalidParameterError, match=name):
        plan_quantiles(*full, **kwargs)


def test_q_takes_the_decimal_fraction_and_numpy_values():
    grid = uniform_grid(0, 1, bins=4)
    plan = plan_quantiles(np.array([0.1, 0.9]), grid, 1.0)
    assert plan.q == (0.1, 0.9)
    assert plan_quantiles(np.float64(0.5), grid, 1.0).q == (0.5,)


# -- check ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hist", "match"),
    [
        (np.zeros((2, 4), dtype=np.int64), "shape"),  # bins, not cells
        (np.zeros(9, dtype=np.int64), "shape"),
        (np.zeros((2, 9)), "integer"),
        (np.zeros((2, 9), dtype=bool), "integer"),
        (np.array([[0, 1, -1, 0, 0, 0, 0, 0, 0]]), ">= 0"),
        (np.array([[2**62, 2**62, 0, 0, 0, 0, 0, 0, 0]], dtype=np.uint64), "2\\*\\*61"),
    ],
)
def test_check_refuses_bad_histograms(hist, match):
    plan = plan_quantiles(0.5, uniform_grid(0, 1, bins=4), 1.0)
    with pytest.raises(InvalidDataError, match=match):
        plan.check(hist)
    with pytest.raises(InvalidDataError, match=match):
        plan.draw(hist, np.random.default_rng(0))


def test_draw_refuses_a_bad_rng():
    plan = plan_quantiles(0.5, uniform_grid(0, 1, bins=4), 1.0)
    with pytest.raises(InvalidParameterError, match="rng"):
        plan.draw(np.zeros((1, 9), dtype=np.int64), 0)


# -- draw -------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2, 3, 4, 7, 9, 19])
def test_outputs_monotone_inside_bounds_every_group(m):
    rng = np.random.default_rng(m)
    grid = uniform_grid(-2.0, 5.0, bins=37)
    q = list(np.arange(1, m + 1) / (m + 1))
    plan = plan_quantiles(q, grid, 0.5, rows=2, sides=3)
    groups = 300
    hist = rng.poisson(rng.uniform(0, 3, (groups, 1)) * rng.uniform(0, 1, (1, grid.cells)))
    hist[::7] = 0  # empty groups
    out = plan.draw(hist, rng)
    assert out.shape == (groups, m) and out.dtype == np.float64
    assert (np.diff(out, axis=1) >= 0).all()
    assert (out >= grid.lower).all() and (out <= grid.upper).all()
    assert np.isin(out, grid.edges).all()


def test_no_groups_and_one_bin():
    plan = plan_quantiles([0.25, 0.75], uniform_grid(0, 1, bins=1), 1.0)
    rng = np.random.default_rng(0)
    assert plan.draw(np.zeros((0, 3), dtype=np.int64), rng).shape == (0, 2)
    out = plan.draw(np.array([[1, 3, 1], [0, 0, 0]]), rng)
    assert out.shape == (2, 2) and np.isin(out, [0.0, 1.0]).all()


def test_empty_group_is_uniform_over_candidates_for_one_quantile():
    # an empty group: every score 0, every coin heads: uniform over the B + 1 edges
    grid = uniform_grid(0, 4, bins=4)
    plan = plan_quantiles(0.5, grid, 1.0)
    rng = np.random.default_rng(11)
    n = 20_000
    out = plan.draw(np.zeros((n, grid.cells), dtype=np.int64), rng)[:, 0]
    freq = np.array([(out == e).mean() for e in grid.edges])
    # each frequency within 5 standard errors of 1/5
    assert np.all(np.abs(freq - 0.2) <= 5 * np.sqrt(0.2 * 0.8 / n))


def test_same_seed_same_output():
    grid = uniform_grid(0, 1, bins=50)
    plan = plan_quantiles([0.1, 0.5, 0.9], grid, 1.0)
    hist = np.random.default_rng(0).poisson(3, (20, grid.cells))
    a = plan.draw(hist, np.random.default_rng(5))
    b = plan.draw(hist, np.random.default_rng(5))
    assert np.array_equal(a, b)


def test_big_counts_are_exact_and_do_not_overflow():
    # 1e9 rows per group, q with a large denominator: the scores need Python integers
    grid = uniform_grid(0, 1, bins=10)
    hist = np.full((3, 10), 10**8, dtype=np.int64)
    hist[1, :5] = 2 * 10**8
    hist[1, 5:] = 0
    for q in ([0.5], [0.1, 0.3, 0.7], [0.123456789012345]):
        out = plan_quantiles(q, grid, 1.0).draw(inside(hist), np.random.default_rng(0))
        true = [np.round(np.array(q) * 10, 0) / 10, np.round(np.array(q) * 5, 0) / 10]
        assert np.allclose(out[0], true[0], atol=0.1)
        assert np.allclose(out[1], true[1], atol=0.1)
        assert (np.diff(out, axis=1) >= 0).all()


def test_quantiles_of_recovers_quantiles_with_large_epsilon():
    rng = np.random.default_rng(2)
    grid = uniform_grid(0, 1, bins=100)
    values = rng.uniform(0, 1, 100_000)
    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    out = quantiles_of(values, q, grid, 5.0, rng)
    assert np.all(np.abs(out - np.quantile(values, q)) <= 0.01 + 1e-12)


def test_python_integer_path_gives_the_int64_paths_output(monkeypatch):
    # the scores in Python integers (for den * n >= 2**61) draw exactly as in int64
    from dpframe.mechanisms import quantile as qm

    grid = uniform_grid(0, 1, bins=60)
    plan = plan_quantiles([0.1, 0.3, 0.5, 0.9], grid, 0.7, rows=2, sides=2)
    hist = np.random.default_rng(4).poisson(2.0, (50, grid.cells))
    hist[3] = 0
    fast = plan.draw(hist, np.random.default_rng(9))
    monkeypatch.setattr(qm, "_INT_SAFE", 0)
    slow = plan.draw(hist, np.random.default_rng(9))
    assert np.array_equal(fast, slow)


def test_chunks_of_groups_do_not_change_the_law_shape(monkeypatch):
    # many groups across several chunks: every group released, in order
    from dpframe.mechanisms import quantile as qm

    monkeypatch.setattr(qm, "_CHUNK", 64)
    grid = uniform_grid(0, 1, bins=20)
    plan = plan_quantiles([0.5], grid, 50.0)
    hist = np.zeros((30, 20), dtype=np.int64)
    b = 1 + np.arange(30) % 19
    hist[np.arange(30), b - 1] = 1000  # group i: the median is exactly edge b_i
    hist[np.arange(30), b] = 1000
    out = plan.draw(inside(hist), np.random.default_rng(0))[:, 0]
    assert np.array_equal(out, grid.edges[b])


def test_grids_and_plans_compare_and_hash_by_value():
    a, b = uniform_grid(0, 1, bins=4), grid_from_edges([0, 0.25, 0.5, 0.75, 1])
    assert a == b and hash(a) == hash(b) and a != uniform_grid(0, 1, bins=5)
    assert plan_quantiles(0.5, a, 1.0) == plan_quantiles(0.5, b, 1.0)
    assert len({plan_quantiles(0.5, a, 1.0), plan_quantiles(0.5, b, 1.0)}) == 1


def test_a_plan_built_by_hand_cannot_draw_more_than_it_costs():
    from dataclasses import replace

    plan = plan_quantiles([0.25, 0.75], uniform_grid(0, 1, bins=4), 1.0, sides=2)
    with pytest.raises(InvalidParameterError, match="epsilon_level"):
        replace(plan, epsilon_level=plan.epsilon_level * 2)
    with pytest.raises(InvalidParameterError, match="epsilon_level"):
        replace(plan, sides=4)
    with pytest.raises(InvalidParameterError, match="levels"):
        replace(plan, levels=1)
    with pytest.raises(InvalidParameterError, match="q"):
        replace(plan, q=(0.75, 0.25))
    with pytest.raises(InvalidParameterError, match="grid"):
        replace(plan, grid=[0.0, 1.0])
    assert replace(plan, epsilon=2.0).epsilon == 2.0  # charging more than drawn is safe
