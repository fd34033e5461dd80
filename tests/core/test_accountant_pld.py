"""An accountant with ``accounting="pld"``: the whole ledger composed tightly.

The composed cost is checked against computations that share nothing with
dpframe.core.composition: the binomial law of k randomized-response pairs (the exact
optimal composition of k epsilon-DP releases, Kairouz, Oh & Viswanath 2015) and the
Renyi-to-(epsilon, delta) conversion minimised over a dense grid of orders."""

from __future__ import annotations

import math
from typing import Any

import pytest

import dpframe
from dpframe.core import zcdp
from dpframe.core.executor import Step, execute
from dpframe.core.losses import LOSS_KEY, held, loss_of_entry
from dpframe.core.records import Charge, LedgerEntry
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerMismatchError,
)

from .test_executor import SpyPlan


def _binomial_delta(k: int, e0: float, eps: float) -> float:
    """delta(eps) of k composed randomized-response pairs of e0, by the binomial law:
    L = (k - 2j) e0 with probability C(k, j) p^(k-j) q^j, p = e^e0 / (1 + e^e0)."""
    logp, logq = -math.log1p(math.exp(-e0)), -math.log1p(math.exp(e0))
    total = 0.0
    for j in range(k + 1):
        loss = (k - 2 * j) * e0
        if loss <= eps:
            break
        logw = math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
        total += math.exp(logw + (k - j) * logp + j * logq) * -math.expm1(eps - loss)
    return total


def _inverse(profile: Any, delta: float, hi: float) -> float:
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if profile(mid) <= delta else (mid, hi)
    return hi


def _renyi_epsilon(rho: float, delta: float) -> float:
    """Canonne, Kamath & Steinke (2020) Corollary 13 at the best order on a dense grid."""
    best = math.inf
    for i in range(1, 200_000):
        a = 1.0 + i * 1e-3
        eps = a * rho + (math.log(1 / delta) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)
        best = min(best, eps)
    return best


def test_100_pure_releases_cost_their_exact_composition_within_1_percent():
    acct = dpframe.Accountant(epsilon=10.0, delta=1e-6, accounting="pld")
    for _ in range(100):
        acct.spend(0.1, mechanism="laplace", columns=("x",))
    truth = _inverse(lambda e: _binomial_delta(100, 0.1, e), 1e-6, 10.0)
    spent = acct.spent
    assert truth <= spent.epsilon <= truth * 1.01  # measured: 4.7757 against 4.7756
    assert spent.epsilon < 10.0 * 0.5  # basic composition: 10
    assert spent.delta == 1e-6


def test_100_gaussian_releases_cost_their_renyi_conversion_within_1_percent():
    acct = dpframe.Accountant(epsilon=10.0, delta=1e-6, accounting="pld")
    for _ in range(100):
        acct.spend_all([Charge(epsilon=0.0, rho=0.005, mechanism="gaussian")])
    truth = _renyi_epsilon(0.5, 1e-6)
    assert truth * (1 - 1e-6) <= acct.spent.epsilon <= truth * 1.01
    basic = 100 * zcdp.epsilon_of_rho(0.005, 1e-8)  # each at delta / 100, summed
    assert acct.spent.epsilon < basic / 3


def test_a_real_gaussian_release_is_charged_on_a_tight_budget():
    import polars as pl

    acct = dpframe.Accountant(epsilon=2.0, delta=1e-6, accounting="pld")
    counts = pl.DataFrame({"visits": [120.0, 87.0]})
    with acct:
        counts.with_columns(
            pl.col("visits").dp.gaussian(sensitivity=1.0, rho=0.02, composition="parallel")
        )
    (entry,) = acct.ledger
    assert entry.details[LOSS_KEY]["mechanism"] == "zcdp"
    assert 0 < acct.spent.epsilon <= zcdp.epsilon_of_rho(entry.details["rho"], 1e-6) * 1.001


def test_an_overspend_is_refused_before_any_draw_and_charges_nothing():
    acct = dpframe.Accountant(epsilon=2.5, delta=1e-6, accounting="pld")
    for _ in range(30):
        acct.spend(0.1, mechanism="laplace")  # composes to 2.35 (basic: 3.0)
    before = acct.ledger
    plans = [SpyPlan(0.3), SpyPlan(0.3)]  # all compose to 2.80
    with pytest.raises(BudgetExceededError, match="tight composition"):
        execute([Step(p, 1.0) for p in plans], acct)
    assert acct.ledger == before and all("draw" not in p.calls for p in plans)
    execute([Step(SpyPlan(0.1), 1.0)], acct)  # fits: 2.40
    assert acct.spent.epsilon <= 2.5


def test_never_above_basic_composition():
    acct = dpframe.Accountant(epsilon=3.0, delta=1e-5, accounting="pld")
    for eps in (1.0, 0.5, 0.5):
        acct.spend(eps, mechanism="laplace")
    acct.spend(0.5, 5e-6, mechanism="key_selection:magic")
    assert acct.spent.epsilon <= 2.5
    acct.spend(0.5, 5e-6, mechanism="key_selection:magic")  # basic: exactly (3.0, 1e-5)
    with pytest.raises(BudgetExceededError):
        acct.spend(0.01, 1e-6, mechanism="key_selection:magic")


def test_reservations_hold_what_their_plan_composes_as():
    acct = dpframe.Accountant(epsilon=2.0, delta=1e-6, accounting="pld")
    other = dpframe.Accountant._with_store(acct._store, None, None, None, {})  # another job
    with acct.reserve([Charge(epsilon=0.1)] * 20) as r:  # composes to 1.79
        assert r.losses is not None and len(r.losses) == 20
        with pytest.raises(BudgetExceededError):
            other.spend(0.3, mechanism="laplace")  # beside the 20 held: 2.05
        for _ in range(10):
            acct.spend(0.1, mechanism="laplace")  # drawn from what is held
        assert 0 < acct.reserved.epsilon < acct.composed().epsilon
    other.spend(0.3, mechanism="laplace")  # the 10 undrawn given back: 1.3
    assert acct.spent.epsilon <= 2.0 and len(acct.ledger) == 11


def test_a_draw_beyond_the_reservation_must_fit_the_whole_budget():
    acct = dpframe.Accountant(epsilon=1.0, delta=1e-6, accounting="pld")
    with acct.reserve([Charge(epsilon=0.5)]):
        acct.spend(0.4, mechanism="laplace")  # not planned: composed on top of the 0.5 held
        with pytest.raises(BudgetExceededError):
            acct.spend(0.2, mechanism="laplace")  # 0.5 held + 0.4 + 0.2 > 1.0
        acct.spend(0.5, mechanism="laplace")  # the planned one
    assert len(acct.ledger) == 2


def test_the_ledger_records_what_each_entry_composes_as_and_checks_it(tmp_path):
    path = tmp_path / "ledger.db"
    acct = dpframe.Accountant.open(path, epsilon=2.0, delta=1e-6, accounting="pld")
    acct.spend(0.5, mechanism="laplace")
    acct.spend(0.1, 1e-7, mechanism="key_selection:magic")
    acct.spend_all([Charge(epsilon=0.0, rho=0.01, mechanism="gaussian")])
    assert [e.details[LOSS_KEY] for e in acct.ledger] == [
        {"mechanism": "pure", "epsilon": 0.5},
        {"mechanism": "approx", "epsilon": 0.1, "delta": 1e-7},
        {"mechanism": "zcdp", "rho": 0.01},
    ]
    again = dpframe.Accountant.open(path)
    assert again.accounting == "pld" and again.spent == acct.spent
    forged = LedgerEntry(
        **{**acct.ledger[0].to_dict(), "details": {LOSS_KEY: {"mechanism": "pure", "epsilon": 0.1}}}
    )
    with pytest.raises(LedgerIntegrityError, match="edited"):
        loss_of_entry(forged)
    with pytest.raises(InvalidParameterError, match="set by the accountant"):
        acct.spend_all([Charge(epsilon=0.1, details={LOSS_KEY: {"mechanism": "pure"}})])


@pytest.mark.parametrize("accounting", ["zcdp", "pure"])
def test_a_tight_ledger_opened_as_another_is_refused(tmp_path, accounting):
    path = tmp_path / "ledger.db"
    dpframe.Accountant.open(path, epsilon=2.0, delta=1e-6, accounting="pld")
    with pytest.raises(LedgerMismatchError, match="accounting"):
        dpframe.Accountant.open(path, accounting=accounting)
    plain = tmp_path / "plain.db"
    dpframe.Accountant.open(plain, epsilon=2.0, delta=1e-6)
    with pytest.raises(LedgerMismatchError, match="accounting='pld'"):
        dpframe.Accountant.open(plain, accounting="pld")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 1.0}, "delta"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"rho": 0.5, "delta": 1e-6}, "rho"),
        ({"delta": 1e-6}, "epsilon"),
    ],
)
def test_bad_tight_budgets_are_refused_by_name(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        dpframe.Accountant(accounting="pld", **kwargs)


def test_held_matches_drawn_releases_one_for_one():
    from dpframe.core.records import Reservation

    a, b = {"mechanism": "pure", "epsilon": 0.5}, {"mechanism": "zcdp", "rho": 0.1}
    r = Reservation("r", "now", {}, "", 1.0, 0.0, losses=(a, a, b))
    assert held(r, [a]) == [a, b]
    assert held(r, [a, a, a, b]) == []  # a release it did not plan holds nothing back


@pytest.mark.parametrize("epsilon", [710.0, 1e5, 1e200])
def test_a_release_of_a_huge_epsilon_is_composed_not_overflowed(epsilon):
    # old: e^epsilon (and epsilon**2 / 2 as a float) overflowed: OverflowError, not a charge
    acct = dpframe.Accountant(epsilon=1e300, delta=1e-6, accounting="pld")
    acct.spend(epsilon, mechanism="laplace")
    acct.spend(0.5, mechanism="laplace")
    basic = math.nextafter(epsilon + 0.5, math.inf)  # the float at least the exact sum
    assert epsilon <= acct.spent.epsilon <= basic
    with pytest.raises(BudgetExceededError):
        acct.check([Charge(epsilon=1e300)])


@pytest.mark.parametrize("epsilon", [2.0**24, 1e17])
def test_a_loss_a_float_grid_cannot_hold_is_never_rounded_away(epsilon):
    # with e^-epsilon (no overflow), 1e17 + 1 on a grid of 2**-8 rounded to 1e17: four
    # releases of 1.0 beyond a budget of 1e17 were charged
    acct = dpframe.Accountant(epsilon=epsilon, delta=1e-6, accounting="pld")
    acct.spend(epsilon, mechanism="laplace")
    with pytest.raises(BudgetExceededError):
        acct.spend(1.0, mechanism="laplace")
    assert len(acct.ledger) == 1 and acct.spent.epsilon == epsilon


@pytest.mark.parametrize("spends", [[0.5], [0.1] * 10, [1.0]])
def test_remaining_is_the_budget_less_the_composition_and_promises_no_fit(spends):
    """``remaining`` is a guide (the budget's epsilon less what the ledger composes to);
    whether a release fits only the composition says: the grid's over-estimate (at most
    0.1 %) can refuse a release of exactly the remaining epsilon."""
    acct = dpframe.Accountant(epsilon=2.0, delta=1e-6, accounting="pld")
    for e in spends:
        acct.spend(e, mechanism="laplace")
    assert acct.remaining.epsilon == pytest.approx(2.0 - acct.spent.epsilon, abs=1e-12)
    acct.check([Charge(epsilon=0.99 * acct.remaining.epsilon)])


def test_draws_from_a_budget_reservation_stand_as_it_while_they_fit_in_it():
    # old: the Budget held one release of 0.6 that no draw matched, and each draw was
    # composed beside it: the second draw of 0.25 was refused (0.6 + 0.5 > 1.0)
    acct = dpframe.Accountant(epsilon=1.0, delta=1e-6, accounting="pld")
    other = dpframe.Accountant._with_store(acct._store, None, None, None, {})  # another job
    with acct.reserve(dpframe.Budget(0.6)):  # the reserve() docstring's example
        acct.spend(0.25, mechanism="laplace")
        acct.spend(0.25, mechanism="laplace")  # 0.5 drawn of the 0.6 held
        assert acct.composed().epsilon <= 0.6  # the box, not the box and its draws
        with pytest.raises(BudgetExceededError):
            other.spend(0.5, mechanism="laplace")  # beside the 0.6 held: 1.1
        with pytest.raises(BudgetExceededError):
            acct.spend(0.25, mechanism="laplace")  # beyond the box: 0.6 + 0.75 > 1.0
    assert acct.spent.epsilon <= 0.5 and len(acct.ledger) == 2
    other.spend(0.5, mechanism="laplace")  # the box given back: 0.5 + 0.5


def test_a_box_that_does_not_hold_its_draws_stands_for_none_of_them():
    """The reservations are not hash-chained: a Budget reservation written by hand, with
    the id of a finished job and a tiny box, must not make that job's entries vanish."""
    from dpframe.core.losses import boxed
    from dpframe.core.processes import this_process
    from dpframe.core.records import Reservation
    from dpframe.core.stores import Changes

    acct = dpframe.Accountant(epsilon=1.0, delta=1e-6, accounting="pld")
    with acct.reserve([Charge(epsilon=0.45)] * 2) as r:
        acct.spend(0.45, mechanism="laplace")
        acct.spend(0.45, mechanism="laplace")
    tiny = (boxed({"mechanism": "pure", "epsilon": 0.01}),)
    forged = Reservation(r.id, "now", this_process(), "", 0.01, 0.0, losses=tiny)
    acct._store.transact(lambda state: Changes(reserve=[forged]))
    assert acct.composed().epsilon >= acct.spent.epsilon  # both entries, and the box
    with pytest.raises(BudgetExceededError):
        acct.spend(0.2, mechanism="laplace")  # 0.9 + 0.01 + 0.2 > 1.0
