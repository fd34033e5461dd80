"""The executor: the one place that charges. Check before charge, one atomic charge,
draw only after it; a release materialises once."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import dpframe
from dpframe.core.accountant import Charge
from dpframe.core.executor import Once, Step, execute
from dpframe.errors import (
    BudgetExceededError,
    InvalidDataError,
    InvalidParameterError,
    NoAccountantError,
    ReleaseReuseError,
)


@dataclass
class SpyPlan:
    """A plan that records what the executor asked of it."""

    epsilon: float
    bad: bool = False
    calls: list[str] = field(default_factory=list)

    @property
    def charges(self) -> tuple[Charge, ...]:
        return (Charge(self.epsilon, 0.0, "spy", ("x",)),)

    def summary(self) -> list[dict[str, Any]]:
        return []

    def check(self, exact: Any) -> None:
        self.calls.append("check")
        if self.bad:
            raise InvalidDataError("bad data")

    def draw(self, exact: Any, rng: np.random.Generator) -> Any:
        self.calls.append("draw")
        return exact + rng.laplace()

    def __deepcopy__(self, memo: dict[int, Any]) -> SpyPlan:  # the copy reports here
        return SpyPlan(self.epsilon, self.bad, self.calls)


@dataclass
class MutablePlan:
    """A plan whose charge and draw read the same mutable array."""

    scale: np.ndarray

    @property
    def charges(self) -> tuple[Charge, ...]:
        return (Charge(float(1.0 / self.scale[0]), 0.0, "mutable", ("x",)),)

    def summary(self) -> list[dict[str, Any]]:
        return []

    def check(self, exact: Any) -> None:
        pass

    def draw(self, exact: Any, rng: np.random.Generator) -> Any:
        return self.scale.copy()


def test_the_executor_charges_and_draws_from_its_own_copy_of_the_plan():
    # a caller holding the plan's arrays cannot change what is drawn under a charge
    acct = dpframe.Accountant(epsilon=10.0)
    plan = MutablePlan(np.array([1.0]))
    exact = np.array([5.0])
    original = acct.spend_all

    def mutate_during_charge(charges, **kw):
        plan.scale[0] = 1e-9  # after the copy: changes neither charge nor draw
        exact[0] = -1.0
        return original(charges, **kw)

    acct.spend_all = mutate_during_charge  # type: ignore[method-assign]
    run = execute([Step(plan, exact)], acct)
    assert run.outputs[0].tolist() == [1.0] and acct.spent.epsilon == 1.0


@dataclass
class WritingPlan:
    """A plan whose draw writes into the exact input it is given."""

    @property
    def charges(self) -> tuple[Charge, ...]:
        return (Charge(0.1, 0.0, "writing", ("x",)),)

    def summary(self) -> list[dict[str, Any]]:
        return []

    def check(self, exact: Any) -> None:
        pass

    def draw(self, exact: Any, rng: np.random.Generator) -> Any:
        exact["hist"][0] = -7
        return exact["hist"].copy()


def test_steps_that_share_an_input_read_one_read_only_copy():
    """Two steps of one release sharing an exact input (a median's and quartiles'
    histogram) get one copy, which no draw can change under the other's feet."""
    acct = dpframe.Accountant(epsilon=1.0)
    shared = np.array([3, 4])
    exact = {"hist": shared}
    with pytest.raises(ValueError, match="read-only"):
        execute([Step(WritingPlan(), exact), Step(WritingPlan(), exact)], acct)
    assert shared.tolist() == [3, 4] and shared.flags.writeable  # the caller's own array

    seen: list[Any] = []

    class Spy(WritingPlan):
        def draw(self, exact: Any, rng: np.random.Generator) -> Any:
            seen.append(exact["hist"])
            return None

    execute([Step(Spy(), exact), Step(Spy(), exact)], dpframe.Accountant(epsilon=1.0))
    assert seen[0] is seen[1] and seen[0] is not shared and not seen[0].flags.writeable


def test_every_check_runs_before_the_charge_and_every_draw_after_it():
    acct = dpframe.Accountant(epsilon=1.0)
    plans = [SpyPlan(0.25), SpyPlan(0.5)]
    seen_spent: list[float] = []
    original = acct.spend_all

    def spy_spend_all(charges, **kw):
        assert all(p.calls == ["check"] for p in plans)  # all checked, none drawn
        out = original(charges, **kw)
        seen_spent.append(acct.spent.epsilon)
        return out

    acct.spend_all = spy_spend_all  # type: ignore[method-assign]
    run = execute([Step(p, 1.0) for p in plans], acct)
    assert seen_spent == [0.75]
    assert [p.calls for p in plans] == [["check", "draw"]] * 2
    assert len(run.outputs) == 2 and len(run.entries) == 2
    assert run.entries_of(1)[0].epsilon == 0.5


def test_bad_data_in_any_step_charges_nothing_and_draws_nothing():
    acct = dpframe.Accountant(epsilon=1.0)
    plans = [SpyPlan(0.25), SpyPlan(0.25, bad=True)]
    with pytest.raises(InvalidDataError):
        execute([Step(p, 1.0) for p in plans], acct)
    assert acct.ledger == () and all("draw" not in p.calls for p in plans)


def test_an_overspend_charges_nothing_and_draws_nothing():
    acct = dpframe.Accountant(epsilon=1.0)
    acct.spend(0.5, mechanism="earlier", columns=("y",))
    plans = [SpyPlan(0.25), SpyPlan(0.5)]  # each fits alone, not together
    with pytest.raises(BudgetExceededError):
        execute([Step(p, 1.0) for p in plans], acct)
    assert len(acct.ledger) == 1 and all("draw" not in p.calls for p in plans)


def test_no_accountant_and_odd_steps_are_refused():
    with pytest.raises(NoAccountantError):
        execute([Step(SpyPlan(0.1), 1.0)], None)
    acct = dpframe.Accountant(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="nothing to release"):
        execute([], acct)
    with pytest.raises(InvalidParameterError, match="Step"):
        execute([SpyPlan(0.1)], acct)  # type: ignore[list-item]
    assert acct.ledger == ()


def test_a_release_materialises_once_even_under_threads():
    once, made = Once(), []

    def make():
        made.append(1)
        return object()

    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(once.get("k", make, what="r")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and all(r is results[0] for r in results)
    with pytest.raises(ReleaseReuseError):
        once.get("other data", make, what="r")
