"""Private key (partition) selection: which keys of the data may be released.

A grouped release without public margins must not reveal a key held by one person
only. Selection releases each key with a probability that depends on ``n``, the number
of distinct persons holding it, so that adding or removing one person -- who holds at
most ``max_groups`` keys -- changes the released set's law by at most ``(epsilon,
delta)``. A key nobody holds is never released.

Methods (:data:`~dpframe.core.constraints.KEY_SELECTION_METHODS`)
----------------------------------------------------------------------
``"magic"`` (the default)
    The truncated-geometric selection of Desfontaines, Voss, Gipson & Mandayam
    ("Differentially private partition selection", PoPETs 2022; Google's
    ``cc/algorithms/partition-selection.h``): release with probability ``pi(n)``,
    ``pi(0) = 0``, ``pi(n) = min(e**eps pi(n - 1) + delta, 1 - e**-eps (1 - pi(n - 1)
    - delta), 1)`` at the per-key ``(eps, delta) = (epsilon, delta) / max_groups``. It
    is the largest ``pi`` that every per-key ``(eps, delta)`` constraint allows, so at
    the same per-key budget no selection releases any key more often (their Theorem 1;
    ``tests/mechanisms/test_key_selection.py`` shows it beats ``"laplace"`` at every
    ``n`` on a range of budgets).
``"laplace"``
    Release when ``n + Z >= threshold``, ``Z`` discrete Laplace of scale
    ``max_groups / epsilon`` (exact, :func:`~dpframe.mechanisms.discrete.sample_discrete_laplace`),
    the threshold the least with ``P(Z >= threshold - 1) <= delta / max_groups``.

A person in ``max_groups`` keys changes each of them by one, so the ``max_groups``
per-key mechanisms compose by basic composition to ``(epsilon, delta)`` (Google's
split; ``counts`` are counts of *distinct persons*, a person at most one in each).

Exactness
---------
Magic selection draws on the dyadic grid ``2**-62``: ``b`` is ``e**eps`` rounded down
and ``d`` the per-key delta rounded down to the grid (exact rationals, ``ln b <= eps``),
and the recursion is run in integers, each ``pi(n)`` rounded *down* to the grid from
its two bounds computed at the already-rounded ``pi(n - 1)``. So ``pi(n) <= b pi(n - 1)
+ d`` and ``1 - pi(n - 1) <= b (1 - pi(n)) + d`` hold exactly, ``pi`` is non-decreasing
(each bound exceeds ``pi(n - 1)``), and the mechanism is exactly ``(ln b, d)``-DP per
key. A key with ``n`` persons is released iff a uniform integer in ``[0, 2**62)`` (one
word of the secure source) is below ``2**62 pi(n)``: an exact Bernoulli, no float
anywhere. The table ends at the first ``n`` with ``pi(n) = 1`` (:attr:`KeySelectionPlan.threshold`),
at most :data:`~dpframe.core.constraints.KEY_SELECTION_MAX_STEPS`.

The Laplace method's scale is the rational ``num / den >= max_groups / epsilon``
(``num, den <= 2**31``) and its threshold is decided from certain ``decimal`` bounds on
``exp``; the draw is integers only.

Every key costs one draw whatever its count (one word for ``"magic"``), so the work
does not depend on which keys are released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from dpframe.core.constraints import (
    KEY_SELECTION_MAX_STEPS,
    check,
    check_int,
)
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.discrete import MAX_INT, _exp_bounds, sample_discrete_laplace

__all__ = ["KeySelectionPlan", "plan_key_selection"]

#: Magic selection's grid: probabilities are multiples of ``2**-62`` (fit in int64).
GRID_BITS = 62
_ONE = 1 << GRID_BITS
_PREC = 60
#: Largest count accepted (a count plus noise stays in int64).
MAX_COUNT = 2**61


@lru_cache(maxsize=32)
def _magic_table(epsilon: float, delta: float, max_groups: int) -> tuple[int, tuple[int, ...]]:
    """``(B, m)``: ``b = B / 2**62`` and ``pi(n) = m[n] / 2**62`` until ``pi = 1``."""
    eps = Fraction(epsilon) / max_groups
    _, hi = _exp_bounds(eps.numerator, eps.denominator, _PREC)  # hi >= e**-eps
    # 1 <= B / 2**62 <= e**eps (hi may exceed 1 for a tiny eps: b = 1 is still sound)
    base = max(_ONE, math.floor(_ONE / hi))
    d = math.floor(Fraction(delta) / max_groups * _ONE)
    if d == 0:
        raise InvalidParameterError(
            f"delta / max_groups must be at least 2**-{GRID_BITS}, got delta={delta!r}, "
            f"max_groups={max_groups}; raise delta or lower max_groups"
        )
    # pi(n) <= delta (e**(n eps) - 1) / (e**eps - 1): the steps before pi reaches 1/2
    eps_f = float(eps)
    steps = math.log1p(math.expm1(eps_f) / (2 * d / _ONE)) / eps_f if eps_f > 0 else math.inf
    table = [0]
    while table[-1] < _ONE:
        if len(table) > KEY_SELECTION_MAX_STEPS or steps > KEY_SELECTION_MAX_STEPS:
            raise InvalidParameterError(
                f"epsilon / max_groups = {float(eps):g} is too small for key selection: a "
                f"key would need more than {KEY_SELECTION_MAX_STEPS} persons to be released "
                "surely; raise epsilon (or delta) or lower max_groups"
            )
        m = table[-1]
        up = base * m // _ONE + d  # floor(2**62 (b pi + d))
        rest = _ONE - m - d  # 2**62 (1 - pi - d)
        down = _ONE - (-(-rest * _ONE // base)) if rest > 0 else _ONE
        table.append(min(up, down, _ONE))
    return base, tuple(table)


@lru_cache(maxsize=32)
def _laplace_constants(epsilon: float, delta: float, max_groups: int) -> tuple[int, int, int]:
    """``(num, den, threshold)``: scale ``num / den >= max_groups / epsilon``."""
    scale = max_groups / Fraction(epsilon)
    if scale > MAX_INT:
        raise InvalidParameterError(
            f"max_groups / epsilon = {float(scale):g} exceeds 2**31; raise epsilon"
        )
    k = 0
    while k < 31 and math.ceil(scale * 2 ** (k + 1)) <= MAX_INT:
        k += 1
    den = 2**k
    num = math.ceil(scale * den)
    target = Fraction(delta) / max_groups
    p_lo, _ = _exp_bounds(den, num, _PREC)

    def tail_high(m: int) -> Fraction:  # >= P(Z >= m) = p**m / (1 + p), m >= 1
        return _exp_bounds(m * den, num, _PREC)[1] / (1 + p_lo)

    # ln(1 / (2 target)) from the integers (a float target may underflow)
    log_inv = math.log(target.denominator) - math.log(2 * target.numerator)
    guess = max(1, math.floor(log_inv * num / den) - 2)
    while guess > 1 and tail_high(guess - 1) <= target:
        guess -= 1
    while tail_high(guess) > target:
        guess += 1
    return num, den, guess + 1


def _checked_counts(counts: Any) -> np.ndarray:
    arr = np.asarray(counts)
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        raise InvalidDataError(
            f"counts must be integer counts of distinct persons per key, got dtype {arr.dtype}"
        )
    if arr.ndim != 1:
        raise InvalidDataError(f"counts must be one-dimensional, got shape {arr.shape}")
    if arr.size and arr.min() < 0:
        raise InvalidDataError(f"counts must be >= 0, got {arr.min()}")
    if arr.size and arr.max() > MAX_COUNT:
        raise InvalidDataError(f"counts must be at most 2**61, got {arr.max()}")
    return arr.astype(np.int64, copy=False)


@dataclass(frozen=True)
class KeySelectionPlan:
    """Which keys a release shows: the plan of a private key selection.

    Made by :func:`plan_key_selection`; reads no data. Everything it states
    (:attr:`threshold`, :meth:`probability_released`, :attr:`epsilon_used`,
    :attr:`delta_used`) follows from its four fields, so a plan built by hand is as
    sound as one planned.

    Attributes
    ----------
    epsilon, delta : float
        What the selection costs for a person in ``max_groups`` keys.
    max_groups : int
        The most keys one person holds (the l0 bound).
    method : str
        One of :data:`~dpframe.core.constraints.KEY_SELECTION_METHODS`.

    Examples
    --------
    >>> plan = plan_key_selection(1.0, 1e-6)
    >>> plan.method, plan.threshold
    ('magic', 28)
    >>> plan.probability_released(0), plan.probability_released(28)
    (0.0, 1.0)
    """

    epsilon: float
    delta: float
    max_groups: int
    method: str

    def __post_init__(self) -> None:
        # held as the floats checked: what is drawn with is what is stated
        object.__setattr__(self, "epsilon", check("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check("delta", self.delta))
        if self.delta == 0:
            raise InvalidParameterError(
                "delta must be > 0: key selection releases a key of one person with "
                "probability at most delta; pass a delta such as 1e-6"
            )
        object.__setattr__(self, "max_groups", check("max_groups", self.max_groups))
        check("key_selection_method", self.method, name="method")
        self._constants()  # refuses parameters it cannot draw with, before any data

    def _constants(self) -> Any:
        if self.method == "magic":
            return _magic_table(self.epsilon, self.delta, self.max_groups)
        return _laplace_constants(self.epsilon, self.delta, self.max_groups)

    @property
    def threshold(self) -> int:
        """``"magic"``: the least count released surely; ``"laplace"``: the least noisy
        count released.

        Examples
        --------
        >>> plan_key_selection(1.0, 1e-6, method="laplace").threshold
        15
        """
        if self.method == "magic":
            return len(self._constants()[1]) - 1
        return int(self._constants()[2])

    @property
    def epsilon_used(self) -> float:
        """The per-key epsilon drawn with, times ``max_groups`` (at most :attr:`epsilon`).

        Examples
        --------
        >>> plan_key_selection(1.0, 1e-6).epsilon_used <= 1.0
        True
        """
        if self.method == "magic":
            base = self._constants()[0]
            used = math.log(base / _ONE) * self.max_groups
        else:
            num, den, _ = self._constants()
            used = den / num * self.max_groups
        # exactly ln(b) <= epsilon / max_groups (den / num too): only rounding can exceed
        return min(used, float(self.epsilon))

    @property
    def delta_used(self) -> Fraction:
        """The per-key delta times ``max_groups``, exactly (at most :attr:`delta`).

        For ``"magic"`` the delta on the grid; for ``"laplace"`` an upper bound on
        ``max_groups P(Z >= threshold - 1)``.

        Examples
        --------
        >>> plan_key_selection(1.0, 1e-6).delta_used <= 1e-6
        True
        """
        return self.probability_bounds(1)[1] * self.max_groups

    def probability_bounds(self, k: int) -> tuple[Fraction, Fraction]:
        """Rationals ``lo <= P(a key of k persons is released) <= hi``.

        Equal for ``"magic"`` (the exact dyadic ``pi(k)``); for ``"laplace"`` the law
        ``P(Z >= threshold - k)`` enclosed by certain ``decimal`` bounds (60 digits).

        Examples
        --------
        >>> plan_key_selection(1.0, 1e-6).probability_bounds(1)
        (Fraction(4611686018427, 4611686018427387904), Fraction(4611686018427, 4611686018427387904))
        """
        k = check_int("k", k, 0)
        if k == 0:  # a key nobody holds is not in the data
            return Fraction(0), Fraction(0)
        if self.method == "magic":
            table = self._constants()[1]
            p = Fraction(table[min(k, len(table) - 1)], _ONE)
            return p, p
        num, den, threshold = self._constants()
        p_lo, p_hi = _exp_bounds(den, num, _PREC)
        m = threshold - k  # P(Z >= m)
        if m >= 1:
            q_lo, q_hi = _exp_bounds(m * den, num, _PREC)
            return q_lo / (1 + p_hi), q_hi / (1 + p_lo)
        q_lo, q_hi = _exp_bounds((1 - m) * den, num, _PREC)
        return 1 - q_hi / (1 + p_lo), 1 - q_lo / (1 + p_hi)

    def probability_released(self, k: int) -> float:
        """The probability that a key held by ``k`` persons is released.

        For ``"magic"`` the exact dyadic ``pi(k)`` rounded to the nearest float; for
        ``"laplace"`` the midpoint of :meth:`probability_bounds` (60 digits).

        Examples
        --------
        >>> plan = plan_key_selection(1.0, 1e-6, method="laplace")
        >>> plan.probability_released(0) < 1e-6 < plan.probability_released(20)
        True
        """
        lo, hi = self.probability_bounds(k)
        return float((lo + hi) / 2)

    def check(self, counts: np.ndarray) -> None:
        """Refuse counts that are not a 1-d array of integers in ``[0, 2**61]``.

        Parameters
        ----------
        counts : numpy.ndarray
            The number of distinct persons holding each candidate key.

        Raises
        ------
        InvalidDataError
            A non-integer dtype, a wrong shape, a negative or too large count.

        Examples
        --------
        >>> plan = plan_key_selection(1.0, 1e-6)
        >>> plan.check(np.array([0, 3]))
        >>> plan.check(np.array([-1]))
        Traceback (most recent call last):
        ...
        dpframe.errors.InvalidDataError: counts must be >= 0, got -1
        """
        _checked_counts(counts)

    def draw(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Select the keys to release.

        Parameters
        ----------
        counts : numpy.ndarray
            As for :meth:`check`.
        rng : numpy.random.Generator
            The secure source (only its integer draws are used).

        Returns
        -------
        numpy.ndarray
            Boolean mask: True for each key released. A key of count 0 never is.

        Examples
        --------
        >>> plan = plan_key_selection(1.0, 1e-6)
        >>> plan.draw(np.array([0, 1, 1000]), np.random.default_rng(0)).tolist()
        [False, False, True]
        """
        arr = _checked_counts(counts)
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameterError(
                f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
            )
        if self.method == "magic":
            table = np.array(self._constants()[1], dtype=np.int64)
            words = rng.integers(0, _ONE, size=arr.shape[0], dtype=np.int64)
            return words < table[np.minimum(arr, table.shape[0] - 1)]
        num, den, threshold = self._constants()
        noise = sample_discrete_laplace(num, den, size=arr.shape[0], rng=rng)
        return (arr + noise >= threshold) & (arr > 0)


def plan_key_selection(
    epsilon: float, delta: float, *, max_groups: int = 1, method: str = "magic"
) -> KeySelectionPlan:
    """Plan a private key selection (no data read).

    Parameters
    ----------
    epsilon : float
        The selection's epsilon, > 0.
    delta : float
        Its delta, in (0, 1): at most the chance that a key of one person is released
        (times ``max_groups``).
    max_groups : int, default 1
        The most keys one person can make appear (each person counts at most once in a
        key's count).
    method : {"magic", "laplace"}, default "magic"
        ``"magic"`` releases every key at least as often as ``"laplace"`` at equal
        ``(epsilon, delta, max_groups)`` (module docstring).

    Returns
    -------
    KeySelectionPlan

    Raises
    ------
    InvalidParameterError
        A bad parameter (named), or a budget the selection cannot draw with.

    Examples
    --------
    >>> plan = plan_key_selection(2.0, 1e-5, max_groups=2)
    >>> plan.delta_used <= 1e-5, plan.epsilon_used <= 2.0
    (True, True)
    >>> plan_key_selection(1.0, 0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: delta must be > 0: ...; pass a delta such as 1e-6
    """
    return KeySelectionPlan(epsilon, delta, max_groups, method)
