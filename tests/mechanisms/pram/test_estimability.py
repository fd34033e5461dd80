"""Which PRAM designs let the category distribution be estimated, and what dpframe does.

docs/pram-design.md, section 10: with ``x_k = S q_k - 1`` the PRAM matrix has
``det M = e_{S-1}(x) / (S (S-1)^(S-1))``, so it is singular iff two or more categories
keep ``q = 1/S`` (uniform rows, hence equal rows), or none does and ``sum_k 1/x_k = 0``.
Checked here against exact rational determinants on a grid, and against numpy on random
and vertex designs; then: the plain MI optimum is singular on many cases, the default
(``estimable=True``) design never is, and estimation refuses a singular design with a
clear error instead of returning garbage. The estimable optimiser against the exhaustive
oracle is in ``tests/mechanisms/test_pram.py`` (``test_estimable_design_matches_...``).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpframe.core.constraints import PARAMETERS, check
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms import pram
from dpframe.mechanisms.pram import optimum
from dpframe.mechanisms.pram.plan import design_from_record, design_record, plan_pram

from .. import pram_oracle as po

DIAGONALS = ("optimal", "dominant")


def _exact_det(rows: list[list[Fraction]]) -> Fraction:
    """Determinant by fraction-exact Gaussian elimination."""
    m = [list(r) for r in rows]
    n = len(m)
    det = Fraction(1)
    for c in range(n):
        piv = next((r for r in range(c, n) if m[r][c] != 0), None)
        if piv is None:
            return Fraction(0)
        if piv != c:
            m[c], m[piv] = m[piv], m[c]
            det = -det
        det *= m[c][c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            m[r] = [a - f * b for a, b in zip(m[r], m[c], strict=True)]
    return det


def _exact_matrix(q: tuple[Fraction, ...]) -> list[list[Fraction]]:
    s = len(q)
    return [[qk if j == k else (1 - qk) / (s - 1) for j in range(s)] for k, qk in enumerate(q)]


def _e_sym(x: list[Fraction], k: int) -> Fraction:
    """The elementary symmetric polynomial e_k(x)."""
    return sum((math.prod(c) for c in itertools.combinations(x, k)), Fraction(0))


def _characterised_singular(q: tuple[Fraction, ...]) -> bool:
    """The characterisation of section 10, stated without the determinant."""
    s = len(q)
    x = [s * qk - 1 for qk in q]
    zeros = sum(1 for v in x if v == 0)
    if zeros >= 2:
        return True
    if zeros == 1:
        return False
    return sum(1 / v for v in x) == 0


# ---------------------------------------------------------------------------
# 1. The characterisation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("s", [2, 3, pytest.param(4, marks=pytest.mark.slow)])
def test_determinant_formula_and_singularity_exactly_on_a_grid(s):
    """Every q on the grid {j/12} (which holds 1/2, 1/3 and 1/4): the exact determinant
    equals e_{S-1}(S q - 1) / (S (S-1)^(S-1)), and it is 0 exactly when the
    characterisation says so. Also: equal rows (all S >= 3) only from two q = 1/S."""
    grid = [Fraction(j, 12) for j in range(13)]
    singular = one_uniform = mixed = 0
    for q in itertools.product(grid, repeat=s):
        det = _exact_det(_exact_matrix(q))
        x = [s * qk - 1 for qk in q]
        assert det == _e_sym(x, s - 1) / (s * (s - 1) ** (s - 1)), q
        assert (det == 0) == _characterised_singular(q), q
        singular += det == 0
        one_uniform += sum(v == 0 for v in x) == 1
        mixed += det == 0 and 0 not in x
        if s >= 3:
            rows = _exact_matrix(q)
            equal = any(rows[i] == rows[j] for i, j in itertools.combinations(range(s), 2))
            assert equal == (sum(v == 0 for v in x) >= 2), q
    # the grid exercises every branch: singular designs, designs with one uniform row
    # (invertible), and singular designs with no uniform row at all (cancellation)
    assert singular and one_uniform and mixed


def test_determinant_formula_on_random_and_vertex_designs():
    rng = np.random.default_rng(10)
    for s in range(2, 9):
        designs = [rng.random(s) for _ in range(50)]
        for eps in (0.5, 2.0):
            for values, counts, _ in pram.vertex_families(s, eps):
                designs += [np.repeat(values, c) for c in counts]
        for q in designs:
            x = s * q - 1
            e = sum(np.prod(np.delete(x, k)) for k in range(s))
            assert po.pram_determinant(q) == pytest.approx(
                e / (s * (s - 1) ** (s - 1)), rel=1e-9, abs=1e-13
            )


def test_one_uniform_row_is_invertible_two_are_not():
    q = np.array([0.7, 0.5, 0.25, 0.25])  # S = 4: categories 2 and 3 at 1/S
    assert optimum._unidentified(q) is not None
    q1 = np.array([0.7, 0.5, 0.3, 0.25])  # only category 3 at 1/S
    assert optimum._unidentified(q1) is None
    assert abs(np.linalg.det(po.pram_matrix(q1))) > 1e-3


def test_a_singular_vertex_with_no_uniform_row():
    """The paper's class 3, h x v_alpha and S - h x v_-alpha, is singular at
    e^eps = (h - 1) / (S - 1 - h) (section 10): S = 10, h = 8 at eps = log 7. It is a
    feasible vertex (log 7 < log 8), and the estimable search drops it."""
    s, h, eps = 10, 8, math.log(7)
    a = math.exp(eps)
    va, vma = a / (a + s - 1), 1 / (1 + a * (s - 1))
    q = np.r_[np.full(h, va), np.full(s - h, vma)]
    assert po.feasible(q, eps)
    assert abs(np.linalg.det(po.pram_matrix(q))) < 1e-15
    assert optimum._unidentified(q) is not None
    assert np.linalg.cond(po.pram_matrix(q)) > 1e12
    plain = {(round(v[0], 9), round(v[-1], 9)): c for v, c, _ in pram.vertex_families(s, eps)}
    assert (h, s - h) in plain[(round(va, 9), round(vma, 9))]
    for diagonal in DIAGONALS:
        for values, counts, _ in pram.vertex_families(s, eps, diagonal=diagonal, estimable=True):
            for c in counts:
                assert optimum._unidentified(np.repeat(values, c)) is None


@pytest.mark.parametrize(
    ("s", "cases"),
    [
        (2, list(itertools.product((0.5, 2.0), (0.05, 0.5), DIAGONALS))),
        (3, list(itertools.product((0.5, 2.0), (0.05, 0.5), DIAGONALS))),
        # ~5 s: 48 pieces x 194,580 subsets
        pytest.param(4, [(2.0, 0.05, "optimal")], marks=pytest.mark.slow),
    ],
)
def test_oracle_estimable_vertices_equal_brute_force(s, cases):
    """The oracle's sorted enumeration of the estimable set's vertices (used against the
    kernel in test_pram.py) equals an unsorted brute force over every piece."""
    for eps, eta, diagonal in cases:
        lower = 1 / s if diagonal == "dominant" else 0.0
        a = math.exp(eps)
        delta = eta * (a / (a + s - 1) - 1 / s)
        brute = po.estimable_vertices_bruteforce(s, eps, lower, delta)
        brute = np.unique(np.round(-np.sort(-brute, axis=1), 9), axis=0)
        ours = np.unique(np.round(po.estimable_vertex_values(s, eps, lower, delta), 9), axis=0)
        assert brute.shape == ours.shape and np.allclose(brute, ours, atol=1e-8), (s, eps, eta)


# ---------------------------------------------------------------------------
# 2. The plain optimum is often singular; the default design never is
# ---------------------------------------------------------------------------


def _grid():
    rng = np.random.default_rng(20)
    for s in (2, 3, 4, 5, 8, 12):
        for eps in (0.5, 1.0, 2.0, 4.0):
            point = np.zeros(s)
            point[0] = 1.0
            zeros = rng.dirichlet(np.ones(s))
            zeros[s // 2 :] = 0.0
            priors = [rng.dirichlet(np.full(s, c)) for c in (0.05, 0.3)]
            yield from ((s, eps, p) for p in (*priors, point, zeros / zeros.sum()))


@pytest.mark.slow  # a few seconds: the plain and estimable optima over a grid of priors
def test_default_designs_are_estimable_where_the_plain_optimum_is_not():
    singular = {"optimal": 0, "dominant": 0}
    for (s, eps, p), diagonal in itertools.product(_grid(), DIAGONALS):
        plain = pram.design(p, eps, diagonal=diagonal, estimable=False)
        d = pram.design(p, eps, diagonal=diagonal)
        assert d.estimable and d.estimable_margin == pram.ESTIMABLE_MARGIN
        assert d.epsilon_actual <= eps
        delta = pram.ESTIMABLE_MARGIN * (optimum._k_rr(s, math.exp(eps))[0] - 1 / s)
        if po.is_estimable(plain.vertex_q, delta):
            # the plain optimum keeps the margin: it is the estimable optimum too
            assert d.mutual_information == pytest.approx(plain.mutual_information, rel=1e-9)
        if plain.estimable:
            continue
        singular[diagonal] += 1
        assert plain.condition_number > 1e12
        assert d.condition_number < 1e6
        # a release of it can be estimated: exact expected counts give p back
        n = 10**6
        counts = np.rint(n * d.matrix.T @ p)
        est = pram.estimate(counts, d)
        assert np.abs(est.p_hat - p).max() < 1e-3 * d.condition_number
        with pytest.raises(InvalidParameterError, match="cannot be estimated"):
            pram.estimate(counts, plain)
    # the task's premise, measured: both diagonals give singular optima on this grid
    assert singular["optimal"] >= 10 and singular["dominant"] >= 20, singular


@pytest.mark.slow  # a few seconds of sampled designs
def test_the_margin_is_kept_by_the_sampled_design():
    """At most one category within delta (up to the grid's rounding) of 1/S."""
    for (s, eps, p), diagonal in itertools.product(_grid(), DIAGONALS):
        for eta in (pram.ESTIMABLE_MARGIN, 0.5):
            d = pram.design(p, eps, diagonal=diagonal, estimable=eta)
            delta = eta * (optimum._k_rr(s, math.exp(eps))[0] - 1 / s)
            assert po.is_estimable(d.vertex_q, delta)
            near = np.abs(d.q - 1 / s) < delta * (1 - 1e-9) - 2.0**-40
            assert near.sum() <= 1, (s, eps, diagonal, d.q)


def test_margin_one_on_a_dominant_design_is_k_rr():
    rng = np.random.default_rng(30)
    for s, eps in itertools.product((3, 6), (0.5, 2.0)):
        p = rng.dirichlet(np.full(s, 0.1))
        d = pram.design(p, eps, diagonal="dominant", estimable=1.0)
        assert np.allclose(d.vertex_q, pram.krr(s, eps).vertex_q, rtol=0, atol=1e-12)


def test_estimability_cost_and_dominance_cost():
    p = np.array([0.9, 0.05, 0.05])
    d = pram.design(p, 1.0)
    cost = pram.estimability_cost(d)
    assert cost["estimable"] == 0.0  # the plain optimum is singular here
    assert 0 < cost["share_lost"] < 0.05
    assert cost["plain"] == pram.design(p, 1.0, estimable=False).mutual_information
    uniform = pram.estimability_cost(pram.design(np.full(4, 0.25), 1.0))
    assert uniform["share_lost"] == 0.0 and uniform["estimable"] == 1.0
    dom = pram.design(p, 1.0, diagonal="dominant")
    # dominance is priced against the optimal diagonal with the same margin
    free = pram.design(p, 1.0).mutual_information
    assert pram.dominance_cost(dom)["unconstrained"] == free


# ---------------------------------------------------------------------------
# 3. Estimation refuses what cannot be estimated
# ---------------------------------------------------------------------------


def _uniform_rows_design() -> pram.PramDesign:
    d = pram.design(np.array([0.9, 0.05, 0.05]), 1.0, estimable=False)
    assert np.isclose(d.vertex_q, 1 / 3, rtol=1e-12, atol=0).sum() == 2
    return d


def _cancelling_design() -> pram.PramDesign:
    # S = 2, a point mass: every design has MI 0 and the plain search keeps the record
    # for sure, q = (1, 0) -> both rows (1, 0); no q = 1/2, but 1/x sums to 0
    d = pram.design(np.array([1.0, 0.0]), 1.0, estimable=False)
    assert np.allclose(d.vertex_q, [1.0, 0.0])
    return d


@pytest.mark.parametrize(
    ("make", "match"),
    [(_uniform_rows_design, r"categories \[1, 2\] at q = 1/S"), (_cancelling_design, "cancel")],
)
def test_estimate_refuses_a_singular_design(make, match):
    d = make()
    assert not d.estimable
    counts = np.array([600, 300, 100][: d.n_categories])
    for design in (d, design_from_record(design_record(d, tuple(range(d.n_categories)), "x"))):
        with pytest.raises(InvalidParameterError, match=match) as err:
            pram.estimate(counts, design)
        assert "estimable=True" in str(err.value)
    with pytest.raises(InvalidParameterError, match="cannot be estimated"):
        d.covariance(1000)
    # its matrix passed as a matrix (it was estimated as garbage before: condition 1e16)
    with pytest.raises(InvalidParameterError, match=r"singular \(condition number"):
        pram.estimate(counts, d.matrix)


def test_the_merged_categories_of_a_uniform_rows_design_can_be_estimated():
    """The error's advice works: merge the categories at q = 1/S and estimate their total."""
    d = _uniform_rows_design()
    p = np.array([0.7, 0.2, 0.1])
    counts = np.rint(10**6 * d.matrix.T @ p)
    m = d.matrix
    merged = np.column_stack([m[:, 0], m[:, 1] + m[:, 2]])[:2]  # rows 1 and 2 are equal
    est = pram.estimate(np.array([counts[0], counts[1] + counts[2]]), merged)
    assert est.p_hat == pytest.approx([0.7, 0.3], abs=1e-3)


def test_estimate_refuses_a_nearly_singular_matrix_and_accepts_a_fine_one():
    m = po.pram_matrix(np.array([0.6, 1 / 3 + 1e-12, 1 / 3]))
    with pytest.raises(InvalidParameterError, match="singular"):
        pram.estimate(np.array([50, 30, 20]), m)
    ok = po.pram_matrix(np.array([0.6, 0.5, 1 / 3]))  # one uniform row: invertible
    est = pram.estimate(np.rint(10**6 * ok.T @ [0.5, 0.3, 0.2]), ok)
    assert est.p_hat == pytest.approx([0.5, 0.3, 0.2], abs=1e-4)


def test_project_simplex_refuses_non_finite_input():
    with pytest.raises(InvalidParameterError, match="finite"):
        pram.project_simplex([0.5, np.nan, 0.5])


# ---------------------------------------------------------------------------
# 4. The parameter
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, math.nan, math.inf, "yes", None, [0.1]])
def test_estimable_parameter_is_checked_by_the_constraints_table(bad):
    assert "estimable" in PARAMETERS
    for call in (
        lambda: check("estimable", bad),
        lambda: pram.design([0.5, 0.5], 1.0, estimable=bad),
        lambda: pram.vertex_families(3, 1.0, estimable=bad),
        lambda: plan_pram("c", ["a", "b"], 1.0, prior=[0.9, 0.1], estimable=bad),
    ):
        with pytest.raises(
            InvalidParameterError, match="estimable must be True, False or a margin"
        ):
            call()


def test_estimable_parameter_accepts_booleans_and_margins():
    assert check("estimable", True) is True and check("estimable", False) is False
    assert check("estimable", 1) == 1.0 and check("estimable", np.float64(0.2)) == 0.2
    assert pram.design([0.9, 0.1], 1.0, estimable=0.2).estimable_margin == 0.2
    assert pram.design([0.9, 0.1], 1.0, estimable=False).estimable_margin == 0.0


# ---------------------------------------------------------------------------
# 5. Through the plan and the record
# ---------------------------------------------------------------------------


def test_plan_with_a_public_prior_releases_an_estimable_design():
    cats = ("a", "b", "c", "d", "e")
    prior = [0.0575, 0.0, 0.0, 0.0, 0.9425]  # its plain dominant optimum is singular
    plan = plan_pram("c", cats, 2.0, prior=prior, diagonal="dominant")
    assert plan.design.estimable
    rec = plan.record()
    assert rec["estimable"] is True and rec["estimable_margin"] == pram.ESTIMABLE_MARGIN
    again = design_from_record(rec)
    assert again.estimable_margin == pram.ESTIMABLE_MARGIN
    assert np.array_equal(again.q, plan.design.q)
    rng = np.random.default_rng(40)
    truth = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    codes = rng.choice(5, size=200_000, p=truth)
    armed = plan.draw(np.bincount(codes, minlength=5), rng)
    est = pram.estimate(armed.randomize(codes, rng), again, kind="codes")
    assert np.all(np.abs(est.p_hat - truth) < 4.5 * est.standard_errors)
    plain = plan_pram("c", cats, 2.0, prior=prior, diagonal="dominant", estimable=False)
    assert not plain.design.estimable and plain.record()["estimable"] is False


def test_dp_prior_plan_passes_estimable_on():
    plan = plan_pram("c", ["a", "b", "c"], 2.0, prior="dp", estimable=0.3, design="paper")
    assert plan.estimable == 0.3
    armed = plan.draw(np.array([1000, 0, 0]), np.random.default_rng(1))
    assert armed.design.estimable and armed.design.estimable_margin == 0.3


def test_design_refuses_when_the_grid_erases_the_margin(monkeypatch):
    """If rounding to the sampling grid put two categories back at q = 1/S (a margin
    below the grid's step: S in the hundreds of thousands at the smallest epsilon), the
    design is refused rather than released unestimable."""

    def collapse(q, epsilon, *, at_least_uniform=False):
        b = 52
        c = np.rint((1.0 - q) * 2.0**b).astype(np.int64)
        c[:2] = 3 << (b - 2)  # q = 1/4 exactly for two categories
        return c, b, 0.0

    monkeypatch.setattr(optimum, "_round_pram", collapse)
    with pytest.raises(InvalidParameterError, match="no estimable design on dpframe's"):
        pram.design([0.7, 0.1, 0.1, 0.1], 1.0)
