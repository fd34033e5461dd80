"""PRAM releases with design="global": plan, charge, exact sampler, record, refusals."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram import design as paper_design
from dpframe.mechanisms.pram import mutual_information
from dpframe.mechanisms.pram.plan import plan_pram

CATS = ("a", "b", "c", "d")
PRIOR = {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.1}


def exactly_dp(weights: np.ndarray, epsilon: float) -> bool:
    """Every column of the sampled integers: max / min <= e^epsilon (60-digit bound)."""
    with localcontext() as ctx:
        ctx.prec = 60
        bound = Fraction(Decimal(epsilon).exp()) * (1 - Fraction(1, 10**55))
    for col in weights.T:
        col = [int(v) for v in col]
        if max(col) and (min(col) == 0 or Fraction(max(col), min(col)) > bound):
            return False
    return True


@pytest.mark.parametrize(
    ("prior", "epsilon", "estimable"),
    [("uniform", 0.1, False), ("uniform", 1.0, False), (PRIOR, 0.5, False), (PRIOR, 3.0, True)],
)
def test_global_plan_charges_epsilon_and_samples_an_exactly_dp_matrix(prior, epsilon, estimable):
    plan = plan_pram("c", CATS, epsilon, prior=prior, design="global", estimable=estimable)
    assert plan.charges[0].epsilon == epsilon  # never less than asked, never more
    assert plan.sampler.epsilon_actual <= epsilon
    assert exactly_dp(plan.sampler.weights(), epsilon)
    record = plan.record()
    p = np.full(4, 0.25) if prior == "uniform" else np.array(list(PRIOR.values()))
    # the sampled matrix's MI: at least the paper family's optimum, at most the bound
    paper = paper_design(p, epsilon, estimable=False).mutual_information
    mi = mutual_information(p, plan.sampler.matrix)
    assert record["mutual_information"] == pytest.approx(mi, rel=1e-12)
    assert mi >= paper * (1 - 1e-9)
    assert mi <= record["upper_bound"] * (1 + 1e-12)
    assert record["design"] == "global" and record["categories"] == list(CATS)
    used = [CATS[j] for j in np.flatnonzero(plan.sampler.matrix.max(axis=0) > 0)]
    assert sorted(record["labels"]) == used
    assert sorted(set(CATS) - set(used)) == sorted(record["never_released"])
    assert record["estimable"] == estimable or not estimable


def test_uniform_prior_small_epsilon_beats_k_rr_by_the_issue_s_margin():
    # S = 4, epsilon = 0.1, uniform: the binary split (MI 0.0012484) against k-RR (0.00096842)
    plan = plan_pram("c", CATS, 0.1, design="global", estimable=False)
    record = plan.record()
    assert record["mutual_information"] == pytest.approx(0.0012484, rel=1e-4)
    assert len(record["never_released"]) == 2
    krr = plan_pram("c", CATS, 0.1)
    assert krr.record()["mutual_information"] == pytest.approx(0.00096842, rel=1e-4)


def test_global_plan_draws_the_sampled_matrix():
    plan = plan_pram("c", CATS, 1.0, prior=PRIOR, design="global", estimable=False)
    armed = plan.draw(np.array([40, 30, 20, 10]), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    n = 40_000
    for k in range(4):
        z = armed.randomize(np.full(n, k), rng)
        counts = np.bincount(z, minlength=4)
        expected = plan.sampler.matrix[k] * n
        used = expected > 0
        assert counts[~used].sum() == 0
        assert stats.chisquare(counts[used], expected[used]).pvalue > 1e-3


def test_dp_prior_with_global_design_needs_estimable_false_and_then_runs():
    with pytest.raises(InvalidParameterError, match="estimable=False"):
        plan_pram("c", CATS, 1.0, prior="dp", design="global")
    plan = plan_pram("c", CATS, 1.0, prior="dp", design="global", estimable=False)
    assert sum(c.epsilon for c in plan.charges) <= 1.0
    armed = plan.draw(np.array([400, 300, 200, 100]), np.random.default_rng(2))
    assert armed.record["design"] == "global" and armed.record["prior"] == "dp"
    assert armed.sampler.epsilon_actual <= plan.row_epsilon
    assert exactly_dp(armed.sampler.weights(), plan.row_epsilon)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"design": "global"}, "estimable=False"),  # uniform, eps 0.1: 2 outputs of 4
        ({"design": "global", "diagonal": "dominant"}, "diagonal"),
        ({"design": "globall"}, "design"),
        ({"design": None}, "design"),
    ],
)
def test_global_design_refusals_name_the_argument(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        plan_pram("c", CATS, 0.1, **kwargs)


def test_global_design_with_a_matrix_is_refused():
    with pytest.raises(InvalidParameterError, match="matrix"):
        plan_pram("c", ("a", "b"), None, matrix=[[0.75, 0.25], [0.25, 0.75]], design="global")


def test_summary_says_what_the_global_design_is():
    plan = plan_pram("c", CATS, 0.1, design="global", estimable=False)
    note = plan.summary()[0]["note"]
    assert "global MI optimum (2 outputs" in note and "NOT estimable" in note
    assert math.isfinite(plan.summary()[0]["epsilon"])


# -- robustness found by an adversarial review -------------------------------------------


def test_a_solver_failure_is_refused_before_any_charge(monkeypatch):
    from dpframe.mechanisms.pram import plan as plan_module

    def broken(p, epsilon):
        raise RuntimeError("HiGHS status 4")

    monkeypatch.setattr(plan_module, "global_design", broken)
    with pytest.raises(InvalidParameterError, match="design='paper'"):
        plan_pram("c", CATS, 0.5, prior=PRIOR, design="global", estimable=False)


def test_dp_prior_falls_back_to_the_papers_design_after_the_charge(monkeypatch):
    # the design is chosen after the DP prior is charged: a solver failure there must
    # still release (the paper's design at the same epsilon), never raise
    from dpframe.mechanisms.pram import plan as plan_module

    plan = plan_pram("c", CATS, 1.0, prior="dp", design="global", estimable=False)

    def broken(p, epsilon):
        raise RuntimeError("the staircase LP returned an invalid channel")

    monkeypatch.setattr(plan_module, "global_design", broken)
    armed = plan.draw(np.array([400, 300, 200, 100]), np.random.default_rng(2))
    assert armed.record["design"] == "paper" and "failed" in armed.record["fallback"]
    assert armed.sampler.epsilon_actual <= plan.row_epsilon
    assert exactly_dp(armed.sampler.weights(), plan.row_epsilon)


def test_column_generation_always_certifies_a_finite_bound():
    # S = 16, epsilon = 10, a sparse prior: column generation used to stop before any
    # exact pricing ("the LP already holds the priced columns") with an infinite bound
    from dpframe.mechanisms.pram import global_design

    p = np.array(  # the reviewer's Dirichlet(0.3) draw that gave an infinite bound
        [
            0.00086781456872665,
            0.03415453572944874,
            0.0039887371858886,
            0.256675240349373,
            3.7063138384e-07,
            0.00013787661294378,
            0.01763821867451838,
            0.02320329437046443,
            0.06994604119786557,
            0.18498066385360112,
            0.00326999876841426,
            0.00028835056462039,
            0.10903313916804289,
            0.25457094628210025,
            0.02151207788086535,
            0.01973269416174271,
        ]
    )
    g = global_design(p, 10.0, method="column-generation")
    assert math.isfinite(g.upper_bound) and g.upper_bound >= g.mutual_information
    plan = plan_pram(
        "c", tuple(f"k{i}" for i in range(16)), 10.0, prior=p, design="global", estimable=False
    )
    record = plan.record()
    assert record["upper_bound"] is not None and record["gap"] >= 0


# -- design="variance" (the least estimator variance found) -------------------------------


@pytest.mark.slow  # seconds per epsilon: the variance search
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_variance_plan_charges_epsilon_and_beats_or_equals_krr_and_paper(epsilon):
    from dpframe.mechanisms.pram.variance import estimation_risk

    cats = tuple(f"k{i}" for i in range(6))
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    plan = plan_pram("c", cats, epsilon, prior=p, design="variance")
    assert plan.charges[0].epsilon == epsilon
    assert plan.sampler.epsilon_actual <= epsilon
    assert exactly_dp(plan.sampler.weights(), epsilon)
    record = plan.record()
    assert record["design"] == "variance" and record["categories"] == list(cats)
    sampled = estimation_risk(p, plan.sampler.matrix)
    assert record["risk"] == pytest.approx(sampled, rel=1e-12)
    # the rounding to integers moves the risk by far less than 1e-6 (relative)
    assert sampled <= min(record["risk_krr"], record["risk_paper"]) * (1 + 1e-6)
    assert "least estimator variance" in plan.summary()[0]["note"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"design": "variance", "prior": "dp"}, "dp_prior"),
        ({"design": "variance", "diagonal": "dominant"}, "diagonal"),
    ],
)
def test_variance_design_refusals(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        plan_pram("c", CATS, 1.0, **kwargs)


def test_variance_design_is_refused_beyond_its_size_and_with_a_matrix():
    with pytest.raises(InvalidParameterError, match="at most 12 categories"):
        plan_pram("c", tuple(range(13)), 1.0, design="variance")
    with pytest.raises(InvalidParameterError, match="matrix"):
        plan_pram("c", ("a", "b"), None, matrix=[[0.75, 0.25], [0.25, 0.75]], design="variance")
