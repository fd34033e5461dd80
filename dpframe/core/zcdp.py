"""Zero-concentrated differential privacy (rho-zCDP): conversions to and from (epsilon, delta).

Bun & Steinke (2016), "Concentrated Differential Privacy: Simplifications, Extensions,
and Lower Bounds" (arXiv:1605.02065): a mechanism is ``rho``-zCDP if the Renyi divergence
of order ``alpha`` between its output laws on neighbouring inputs is at most
``alpha * rho`` for every ``alpha > 1``. zCDP budgets add up under composition;
a pure ``epsilon``-DP release is ``epsilon**2 / 2``-zCDP (their Proposition 1.4).

The conversion from ``rho``-zCDP to ``(epsilon, delta)``-DP is the tight one of Canonne,
Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy" (NeurIPS,
arXiv:2004.00010), Proposition 12 / Corollary 13: for every ``alpha > 1``,

.. math::

    \\delta = \\frac{\\exp((\\alpha - 1)(\\alpha\\rho - \\varepsilon))}{\\alpha - 1}
              \\left(1 - \\frac{1}{\\alpha}\\right)^{\\alpha},

equivalently ``epsilon = alpha rho + log1p(-1/alpha) - log(alpha delta) / (alpha - 1)``.
Any ``alpha`` gives a valid bound; the best one is found by bisection on the sign of
the derivative ``rho - (-log(alpha delta)) / (alpha - 1)**2``, as OpenDP's
``cdp_epsilon`` / ``cdp_delta`` do (``make_zCDP_to_approxDP``). The search itself needs
no care (any ``alpha`` is valid); the value at the chosen ``alpha`` is rounded *up*
(:func:`epsilon_of_rho`, :func:`delta_of_rho`) or the budget *down* (:func:`rho_for`),
so a reported epsilon or delta is never below the true one.

Examples
--------
>>> from dpframe.core.zcdp import epsilon_of_rho, rho_for, rho_of_epsilon
>>> rho_of_epsilon(0.1)
Fraction(1, 200)
>>> round(epsilon_of_rho(0.5, 1e-6), 4)
5.2215
>>> epsilon_of_rho(rho_for(1.0, 1e-6), 1e-6) <= 1.0
True
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpframe.core.budget import exact
from dpframe.core.constraints import check_delta, check_epsilon, check_positive, check_real
from dpframe.errors import InvalidParameterError

__all__ = ["delta_of_rho", "epsilon_of_rho", "rho_for", "rho_of_epsilon"]

#: Smallest order searched (OpenDP's choice: below it only ``epsilon <~ rho`` gains).
_ALPHA_MIN = 1.01
#: Relative slack added to a float evaluation before it is reported (rounding up).
#: The few float operations of one evaluation err by < 20 ulps (< 5e-15) relative to
#: the sum of the magnitudes of its terms; 1e-12 of that sum covers it many times.
_SLACK = 1e-12


def _check_delta_open(delta: Any) -> float:
    d = check_delta(delta)
    if d == 0.0:
        raise InvalidParameterError(
            "delta must be > 0 to convert zCDP to (epsilon, delta)-DP: zCDP implies no "
            "pure epsilon-DP guarantee; pass a small delta such as 1e-6"
        )
    return d


def rho_of_epsilon(epsilon: Any) -> Fraction:
    """The zCDP cost ``epsilon**2 / 2`` of a pure ``epsilon``-DP release, exactly.

    ``epsilon`` is read as the decimal it prints as (:func:`dpframe.core.budget.exact`),
    so ``0.1`` costs exactly ``1/200``.

    Examples
    --------
    >>> rho_of_epsilon(1.0)
    Fraction(1, 2)
    """
    eps = exact(check_epsilon(epsilon))
    return eps * eps / 2


def _round_up(x: float, magnitude: float) -> float:
    """``x`` plus a slack covering the float error of an evaluation of that magnitude."""
    return math.nextafter(x + _SLACK * magnitude + 1e-300, math.inf)


def _best_alpha(deriv_pos: Any) -> float:
    """Bisect ``alpha`` in ``[1.01, a_max]`` for the sign change of the derivative."""
    a_min, a_max = _ALPHA_MIN, 2.0
    while not deriv_pos(a_max):
        a_max *= 2.0
        if a_max > 2.0**1000:  # rho astronomically small: any alpha is valid
            break
    while True:
        a_mid = a_min + (a_max - a_min) / 2.0
        if a_mid in (a_min, a_max):
            return a_max
        if deriv_pos(a_mid):
            a_max = a_mid
        else:
            a_min = a_mid


def epsilon_of_rho(rho: Any, delta: Any) -> float:
    """The smallest ``epsilon`` such that ``rho``-zCDP implies ``(epsilon, delta)``-DP.

    Canonne, Kamath & Steinke (2020), Corollary 13, optimised over the Renyi order
    ``alpha`` (as OpenDP's ``cdp_epsilon``), rounded up: never below the true value at
    the chosen ``alpha``, which is itself a valid bound. At most the classic
    ``rho + 2 sqrt(rho log(1/delta))`` of Bun & Steinke (2016).

    Parameters
    ----------
    rho : float
        The zCDP parameter (> 0).
    delta : float
        In ``(0, 1)``.

    Returns
    -------
    float
        ``epsilon >= 0``.

    Examples
    --------
    >>> eps = epsilon_of_rho(0.03125, 1e-3)  # OpenDP: 0.6880024554878086
    >>> 0.6880024554878086 <= eps < 0.688002455489
    True
    """
    r = check_positive("rho", rho)
    d = _check_delta_open(delta)

    def deriv_pos(a: float) -> bool:
        return r > -math.log(a * d) / (a - 1.0) ** 2

    alpha = _best_alpha(deriv_pos)
    t1 = alpha * r
    t2 = math.log1p(-1.0 / alpha)
    t3 = -math.log(alpha * d) / (alpha - 1.0)
    eps = t1 + t2 + t3
    eps = _round_up(eps, abs(t1) + abs(t2) + abs(t3))
    return max(eps, 0.0)


def delta_of_rho(rho: Any, epsilon: Any) -> float:
    """The smallest ``delta`` such that ``rho``-zCDP implies ``(epsilon, delta)``-DP.

    Canonne, Kamath & Steinke (2020), Corollary 13, optimised over ``alpha`` (as
    OpenDP's ``cdp_delta``), rounded up; at most 1.

    Examples
    --------
    >>> d = delta_of_rho(0.05, 0.25)  # OpenDP: 8.17727531036956e-2
    >>> 8.17727531036956e-2 <= d < 8.1772753104e-2
    True
    """
    r = check_positive("rho", rho)
    eps = _check_nonnegative("epsilon", epsilon)

    def deriv_pos(a: float) -> bool:
        return (2.0 * a - 1.0) * r - eps + math.log1p(-1.0 / a) >= 0.0

    alpha = _best_alpha(deriv_pos)
    t1 = (alpha - 1.0) * (alpha * r - eps)
    t2 = alpha * math.log1p(-1.0 / alpha)
    t3 = -math.log(alpha - 1.0)
    log_delta = _round_up(t1 + t2 + t3, abs(t1) + abs(t2) + abs(t3))
    if log_delta >= 0.0:
        return 1.0
    return min(1.0, math.nextafter(math.exp(log_delta) * (1.0 + 1e-15), math.inf))


def _check_nonnegative(name: str, value: Any) -> float:
    """A finite number ``>= 0`` (an epsilon that may be 0 in a conversion)."""
    x = check_real(name, value)
    if x < 0:
        raise InvalidParameterError(f"{name} must be >= 0, got {x!r}")
    return x


def rho_for(epsilon: Any, delta: Any) -> float:
    """The largest ``rho`` whose zCDP guarantee implies ``(epsilon, delta)``-DP.

    Bisection on :func:`epsilon_of_rho` (rounded up), returning a ``rho`` for which the
    rounded-up epsilon is ``<= epsilon``: the budget is rounded *down*.

    Examples
    --------
    >>> rho = rho_for(1.0, 1e-6)
    >>> round(rho, 5), epsilon_of_rho(rho, 1e-6) <= 1.0
    (0.02436, True)
    """
    eps = check_epsilon(epsilon)
    d = _check_delta_open(delta)
    # the classic bound rho + 2 sqrt(rho L) >= the tight one: its inverse is a start below
    log_inv = math.log(1.0 / d)
    lo = (math.sqrt(log_inv + eps) - math.sqrt(log_inv)) ** 2
    while lo > 0.0 and epsilon_of_rho(lo, d) > eps:
        lo /= 2.0
    if lo == 0.0:
        raise InvalidParameterError(f"epsilon={eps!r} is too small for delta={d!r}")
    hi = 2.0 * lo
    while epsilon_of_rho(hi, d) <= eps:
        lo, hi = hi, 2.0 * hi
    while True:
        mid = lo + (hi - lo) / 2.0
        if mid in (lo, hi) or hi - lo <= 1e-15 * hi:
            return lo
        if epsilon_of_rho(mid, d) <= eps:
            lo = mid
        else:
            hi = mid
