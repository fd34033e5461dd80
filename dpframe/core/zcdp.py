"""Conversions between rho-zCDP and (epsilon, delta)-DP (a conservative first version:
the classic bound of Bun & Steinke 2016, Proposition 1.3; the tight one replaces it)."""

from __future__ import annotations

import math

__all__ = ["epsilon_of_rho", "rho_for"]


def epsilon_of_rho(rho: float, delta: float) -> float:
    """An epsilon such that rho-zCDP implies (epsilon, delta)-DP."""
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho (found by bisection) with ``epsilon_of_rho(rho, delta) <= epsilon``."""
    lo, hi = 0.0, epsilon
    for _ in range(200):
        mid = (lo + hi) / 2
        if epsilon_of_rho(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo
