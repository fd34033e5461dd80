"""Statistics sharing one budget: the component-group calibration and the plan steps."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe.core.accountant import Accountant
from dpframe.core.executor import Step, execute
from dpframe.errors import BudgetExceededError, InvalidDataError
from dpframe.mechanisms.bounded import calibrate_bounded, grid_truncated_privacy_loss, solve_gamma
from dpframe.mechanisms.components import plan_components
from dpframe.mechanisms.covariance import (
    plan_covariance_matrix,
)
from dpframe.mechanisms.proportions import (
    plan_proportions,
)

P4 = np.array([0.1, 0.2, 0.3, 0.4])
BOUNDS2 = [(-3.0, 3.0), (-4.5, 4.5)]  # the paper's Simulation study 1


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("method", ["truncated", "bit"])
@pytest.mark.parametrize("calibration", ["exact", "paper"])
@pytest.mark.parametrize(
    ("eps", "delta", "hi"), [(1.0, 0.1, 1.0), (0.3, 0.02, 1.0), (2.0, 5.0, 9.0)]
)
def test_scalar_plan_matches_calibrate_bounded(method, calibration, eps, delta, hi):
    """A single statistic is calibrated exactly as dpframe.mechanisms.bounded does."""
    ref = calibrate_bounded(eps, delta, 0.0, hi, method=method, calibration=calibration)
    plan = plan_components(method, calibration, eps, delta, delta, 1, 1, 0.0, hi, ref.granularity)
    cal = plan.calibrate(0.0, hi)
    assert cal.scale == pytest.approx(ref.scale, rel=1e-6)
    assert cal.privacy_loss == pytest.approx(ref.privacy_loss, rel=1e-6)
    assert plan.epsilon_charged == pytest.approx(ref.epsilon_charged, rel=1e-8)


def test_truncated_loss_is_concave_in_the_change():
    """The joint bound rests on f(d) concave and non-decreasing with f(0) = 0."""
    for gamma, width in [(0.001, 2000.0), (0.05, 40.0), (0.5, 10.0)]:
        d = np.linspace(0.0, width, 401)
        f = np.array([grid_truncated_privacy_loss(gamma, x, width) for x in d])
        assert abs(f[0]) < 1e-15
        assert (np.diff(f) >= -1e-15).all()
        assert (np.diff(f, 2) <= 1e-12).all()


def test_the_plan_charges_before_anything_is_drawn():
    """The plan is made from parameters alone; an overspend draws nothing."""
    gen = rng(0)
    before = gen.bit_generator.state
    small = Accountant(epsilon=0.5)
    with pytest.raises(BudgetExceededError):
        execute([Step(plan_proportions(4, 100, 1.0), P4)], small)
    with pytest.raises(BudgetExceededError):
        execute([Step(plan_covariance_matrix(2, 100, BOUNDS2, 1.0), np.eye(2))], small)
    assert gen.bit_generator.state == before and small.spent.epsilon == 0


def test_plans_charged_with_an_accountant():
    acct = Accountant(epsilon=1.0)
    execute([Step(plan_covariance_matrix(3, 100, [(-3, 3)] * 3, 0.6), np.eye(3))], acct)
    assert len(acct.ledger) == 6 and acct.spent.epsilon <= 0.6
    execute([Step(plan_proportions(4, 100, 0.4, strategy="universal_histogram"), P4)], acct)
    assert acct.spent.epsilon <= 1.0 and len(acct.ledger) == 8
    with pytest.raises(BudgetExceededError):
        execute([Step(plan_proportions(4, 100, 0.01), P4)], acct)
    entry = acct.ledger[-1]
    assert entry.mechanism == "truncated_laplace" and entry.details["max_changed"] == 2


def test_bad_exact_inputs_are_refused_by_the_check_before_the_charge():
    acct = Accountant(epsilon=1.0)
    with pytest.raises(InvalidDataError):
        execute([Step(plan_proportions(4, 100, 1.0), [0.5, 0.5, 0.5, 0.5])], acct)
    bad = np.eye(2)
    bad[0, 1] = np.inf
    with pytest.raises(InvalidDataError):
        execute([Step(plan_covariance_matrix(2, 100, BOUNDS2, 1.0), bad)], acct)
    assert acct.spent.epsilon == 0 and not acct.ledger


def test_solver_is_monotone_and_safe():
    """The solved gamma never loses more than asked, and cached results are reused."""
    for d, width in [(3.0, 40.0), (1.5, 10.0), (1025.0, 1e5)]:
        for target in (0.01, 0.5, 2.0):
            gamma = float(solve_gamma("truncated", target, d, width))
            assert grid_truncated_privacy_loss(gamma, d, width) <= target
            assert grid_truncated_privacy_loss(gamma * 1.001, d, width) > target * 0.99
