"""Oracles shared by the tests: exact reference computations, written once."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction


def exact_sum(values: Iterable[float]) -> Fraction:
    """How the accountant adds charges: the decimals they print as, added exactly."""
    return sum((Fraction(repr(float(v))) for v in values), Fraction(0))
