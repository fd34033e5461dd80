"""Private key selection: its delta brute-force checked, its sampler's law, Google's formula."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.discrete import _exp_bounds
from dpframe.mechanisms.key_selection import KeySelectionPlan, plan_key_selection

METHODS = ("magic", "laplace")


def _exp_low(epsilon: float) -> Fraction:
    """A rational lower bound on ``e**epsilon``."""
    eps = Fraction(epsilon)
    return max(Fraction(1), 1 / _exp_bounds(eps.numerator, eps.denominator, 60)[1])


def _hockey_stick(plan: KeySelectionPlan, before: tuple[int, ...], epsilon: float) -> Fraction:
    """An upper bound on the (epsilon)-hockey-stick divergence, both directions, between
    the released masks of keys of counts ``before`` and of ``before + 1`` (one person
    added to each), from the plan's certain probability bounds."""
    e_low = _exp_low(epsilon)
    p = [plan.probability_bounds(k) for k in before]
    q = [plan.probability_bounds(k + 1) for k in before]
    worst = Fraction(0)
    for a, b in ((p, q), (q, p)):
        total = Fraction(0)
        for outcome in itertools.product((False, True), repeat=len(before)):
            hi = lo = Fraction(1)
            for released, (a_lo, a_hi), (b_lo, b_hi) in zip(outcome, a, b, strict=True):
                hi *= a_hi if released else 1 - a_lo
                lo *= b_lo if released else 1 - b_hi
            total += max(Fraction(0), hi - e_low * lo)
        worst = max(worst, total)
    return worst


def _counts(plan: KeySelectionPlan) -> list[int]:
    top = plan.threshold + 2
    return sorted({0, 1, 2, 3, top // 3, top // 2, top - 3, top - 2, top - 1, top})


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("epsilon", "delta", "max_groups"),
    [(1.0, 1e-6, 1), (0.5, 1e-3, 1), (2.0, 1e-5, 2), (1.0, 1e-4, 3)],
)
def test_delta_brute_force(method: str, epsilon: float, delta: float, max_groups: int) -> None:
    plan = plan_key_selection(epsilon, delta, max_groups=max_groups, method=method)
    assert plan.delta_used <= Fraction(delta)
    assert plan.epsilon_used <= epsilon
    grid = range(plan.threshold + 3) if max_groups == 1 else _counts(plan)
    for size in range(1, max_groups + 1):
        for before in itertools.combinations_with_replacement(grid, size):
            assert _hockey_stick(plan, before, epsilon) <= Fraction(delta), before


@pytest.mark.parametrize("method", METHODS)
def test_undercharged_selection_fails_the_check(method: str) -> None:
    # a person in two keys against a plan for one: the check must see the excess
    plan = plan_key_selection(1.0, 1e-4, max_groups=1, method=method)
    worst = max(_hockey_stick(plan, (k, k), 1.0) for k in range(plan.threshold + 2))
    assert worst > Fraction(1e-4)
    # ten times the delta, checked against delta
    loose = plan_key_selection(1.0, 1e-3, method=method)
    assert max(_hockey_stick(loose, (k,), 1.0) for k in range(loose.threshold + 2)) > Fraction(1e-4)


@pytest.mark.parametrize("method", METHODS)
def test_sampler_law(method: str) -> None:
    plan = plan_key_selection(1.0, 1e-3, method=method)
    rng = np.random.default_rng(20261128)
    n = 40_000
    for k in range(0, plan.threshold + 2, 2):
        p = plan.probability_released(k)
        released = plan.draw(np.full(n, k, dtype=np.int64), rng)
        assert released.dtype == np.bool_
        se = math.sqrt(p * (1 - p) / n)
        # |z| < 5 fails with probability below 6e-7 per point under the law
        assert abs(released.mean() - p) <= 5 * se + 1e-12, (k, released.mean(), p)


def _paper_pi(epsilon: float, delta: float, n: int) -> float:
    """Desfontaines et al. (2022), Theorem 1: two geometric regimes, then 1 (floats)."""
    e = math.exp(epsilon)
    geometric = [0.0]  # delta (e**(n eps) - 1) / (e**eps - 1) while below the other bound
    while True:
        g = geometric[-1]
        nxt = delta * math.expm1(len(geometric) * epsilon) / math.expm1(epsilon)
        if nxt > 1 - (1 - g - delta) / e:
            break
        geometric.append(nxt)
    n1 = len(geometric) - 1
    if n <= n1:
        return geometric[n]
    fixed = 1 + delta / math.expm1(epsilon)  # the fixed point of the second regime
    return min(1.0, fixed - math.exp(-(n - n1) * epsilon) * (fixed - geometric[n1]))


# pi(n) from the closed form above at (epsilon, delta, n), computed once, not by dpframe
REFERENCE = {
    (1.0, 1e-6, 1): 1e-06,
    (1.0, 1e-6, 10): 0.012818308050524606,
    (1.0, 1e-6, 20): 0.9992566750275028,
    (1.0, 1e-6, 27): 0.9999999036213758,
    (0.5, 1e-3, 5): 0.017237748268427888,
    (0.5, 1e-3, 20): 0.994559574547907,
}


@pytest.mark.parametrize(
    ("epsilon", "delta", "max_groups"),
    [(1.0, 1e-6, 1), (0.5, 1e-3, 1), (2.0, 1e-8, 2), (0.1, 1e-5, 1)],
)
def test_magic_matches_the_paper(epsilon: float, delta: float, max_groups: int) -> None:
    plan = plan_key_selection(epsilon, delta, max_groups=max_groups)
    eps, dlt = epsilon / max_groups, delta / max_groups
    for n in range(1, plan.threshold + 3):
        ours, paper = plan.probability_released(n), _paper_pi(eps, dlt, n)
        assert ours == pytest.approx(paper, rel=1e-9, abs=1e-15), n
    assert _paper_pi(eps, dlt, plan.threshold - 1) < 1.0


def test_magic_reference_values() -> None:
    for (epsilon, delta, n), value in REFERENCE.items():
        assert plan_key_selection(epsilon, delta).probability_released(n) == pytest.approx(
            value, rel=1e-9
        )


@pytest.mark.parametrize(
    ("epsilon", "delta", "max_groups"),
    [(1.0, 1e-6, 1), (0.1, 1e-8, 1), (3.0, 1e-10, 1), (1.0, 1e-6, 4), (0.5, 1e-3, 10)],
)
def test_magic_releases_at_least_as_often_as_laplace(
    epsilon: float, delta: float, max_groups: int
) -> None:
    magic = plan_key_selection(epsilon, delta, max_groups=max_groups)
    laplace = plan_key_selection(epsilon, delta, max_groups=max_groups, method="laplace")
    assert magic.method == "magic"  # the default
    gains = []
    for n in range(1, max(magic.threshold, laplace.threshold) + 40):
        m, lap = magic.probability_bounds(n)[0], laplace.probability_bounds(n)[1]
        assert m >= lap - Fraction(1, 2**55), n  # the grid's rounding only
        gains.append(float(m - lap))
    assert max(gains) > 0.01  # and strictly more somewhere


def test_extreme_budgets_stay_within_them() -> None:
    for method in METHODS:
        for epsilon, delta, max_groups in ((50.0, 1e-3, 1), (1.0, 1e-17, 2), (2.0, 0.5, 1)):
            plan = plan_key_selection(epsilon, delta, max_groups=max_groups, method=method)
            assert plan.delta_used <= Fraction(delta)
            assert plan.epsilon_used <= epsilon
            for k in range(plan.threshold + 2):
                assert (
                    _hockey_stick(plan, (k,), epsilon / max_groups) <= Fraction(delta) / max_groups
                ), (method, epsilon, delta, k)


def test_magic_at_a_negligible_epsilon_is_monotone_and_within_budget() -> None:
    # e**-eps's upper bound may exceed 1 here: b must not fall below 1
    plan = plan_key_selection(1e-70, 0.01)
    probabilities = [plan.probability_bounds(k)[0] for k in range(plan.threshold + 2)]
    assert probabilities == sorted(probabilities)
    assert all(
        _hockey_stick(plan, (k,), 1e-70) <= Fraction(0.01) for k in range(plan.threshold + 2)
    )


def test_draw_extremes() -> None:
    for method in METHODS:
        plan = plan_key_selection(1.0, 1e-6, method=method)
        counts = np.array([0] * 1000 + [plan.threshold + 200] * 1000, dtype=np.int64)
        released = plan.draw(counts, np.random.default_rng(3))
        assert not released[:1000].any()
        assert released[1000:].all()
        assert plan.draw(np.array([], dtype=np.int64), np.random.default_rng(3)).shape == (0,)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0, "delta": 1e-6}, "epsilon"),
        ({"epsilon": -1.0, "delta": 1e-6}, "epsilon"),
        ({"epsilon": float("nan"), "delta": 1e-6}, "epsilon"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0, "delta": -1e-6}, "delta"),
        ({"epsilon": 1.0, "delta": 1e-30}, "delta"),
        ({"epsilon": 1.0, "delta": 1e-6, "max_groups": 0}, "max_groups"),
        ({"epsilon": 1.0, "delta": 1e-6, "max_groups": 1.5}, "max_groups"),
        ({"epsilon": 1.0, "delta": 1e-6, "method": "gumbel"}, "method"),
        ({"epsilon": 1e-9, "delta": 1e-9}, "epsilon"),
        ({"epsilon": 1e-12, "delta": 1e-6, "method": "laplace"}, "epsilon"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        plan_key_selection(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "counts",
    [
        np.array([1, -1]),
        np.array([1.0, 2.0]),
        np.array([True, False]),
        np.array([[1, 2]]),
        np.array(["a"]),
        np.array([2**62]),
    ],
)
def test_bad_counts(counts: np.ndarray) -> None:
    plan = plan_key_selection(1.0, 1e-6)
    with pytest.raises(InvalidDataError, match="counts"):
        plan.check(counts)
    with pytest.raises(InvalidDataError, match="counts"):
        plan.draw(counts, np.random.default_rng(0))


def test_bad_rng() -> None:
    plan = plan_key_selection(1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="rng"):
        plan.draw(np.array([1]), 0)  # type: ignore[arg-type]
