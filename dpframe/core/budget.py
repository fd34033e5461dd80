"""Exact arithmetic of privacy budgets: sums, splits, and rounding a charge up.

The accountant adds epsilons as the decimal numbers they print as (``0.1`` is one
tenth), with :class:`fractions.Fraction`, so ``0.1 + 0.2 + 0.7`` fits a budget of
``1.0`` and nothing overspends by a rounding error. A mechanism's privacy loss, though,
is a binary float (often a dyadic rational such as ``epsilon`` rounded down to
``k / 2**30``); :func:`charge_for` turns it into the decimal the ledger records, never
below the loss itself.

Examples
--------
>>> from dpframe.core.budget import charge_for, exact_sum, split_epsilon
>>> float(exact_sum([0.1, 0.2, 0.7]))
1.0
>>> charge_for(1.48960001234, 1.0)  # the true loss exceeds 1.0: charged, rounded up
1.489600013
>>> sum(split_epsilon(1.0, [1, 1, 1])) <= 1.0
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

from dpframe.errors import InvalidParameterError

__all__ = ["CHARGE_DIGITS", "charge_for", "exact", "exact_sum", "shown", "split_epsilon"]

#: A charge above the requested epsilon is rounded up to this many decimals.
CHARGE_DIGITS = 9


def exact(x: float) -> Fraction:
    """The decimal number ``x`` prints as, exactly (``0.1`` -> 1/10)."""
    return Fraction(repr(float(x)))


def exact_sum(values: Iterable[float]) -> Fraction:
    """The exact sum of the decimals the values print as."""
    return sum((exact(v) for v in values), Fraction(0))


def charge_for(privacy_loss: float | Fraction, epsilon: float) -> float:
    """What the ledger is charged for a release of worst-case loss ``privacy_loss``.

    ``epsilon`` (the amount asked for) if the loss does not exceed it -- compared exactly:
    the loss's own value against the decimal ``epsilon`` prints as -- else the loss rounded
    *up* to :data:`CHARGE_DIGITS` decimals. Either way the decimal the accountant adds is
    at least the true loss, also when the loss is a dyadic rational a hair above a decimal
    epsilon, and also when ``privacy_loss`` is a float that prints below its value.

    Examples
    --------
    >>> charge_for(0.5, 0.5)
    0.5
    >>> charge_for(0.1 + 2**-40, 0.1)  # a hair above: the next 9-decimal step
    0.100000001
    """
    loss = Fraction(privacy_loss)
    if loss < 0 or not math.isfinite(float(loss)):
        raise InvalidParameterError(f"privacy_loss must be finite and >= 0, got {privacy_loss!r}")
    asked = exact(epsilon)
    if loss <= asked:
        return float(epsilon)
    steps = math.ceil(loss * 10**CHARGE_DIGITS)
    charged = float(Fraction(steps, 10**CHARGE_DIGITS))
    # the float of steps / 10**9 prints as that decimal (fewer than 16 significant digits)
    assert exact(charged) >= loss, (charged, privacy_loss)
    return charged


def shown(amount: float, total: float) -> str:
    """An ``amount`` of a budget of ``total`` as messages print it: ``:g``, and ``0`` for a
    remainder below a billionth of ``total``.

    Shares of a budget that :func:`split_epsilon` nudged down to fit (three thirds of 0.2)
    sum a hair below it, so a fully spent ledger keeps an exact remainder such as 1e-17; it
    prints as 0, as the spent amount prints as the budget. The ledger's totals stay exact.

    Examples
    --------
    >>> shown(1e-17, 2.0), shown(0.25, 2.0)
    ('0', '0.25')
    """
    if abs(amount) < abs(total) * 1e-9:
        return "0"
    return f"{amount:g}"


def split_epsilon(epsilon: float, weights: Sequence[float]) -> list[float]:
    """``epsilon * w_i / sum(w)``, nudged down so their exact decimal sum is <= ``epsilon``.

    The accountant adds charges as the decimals they print as; this guarantees the
    shares fit the total exactly.
    """
    w = [float(x) for x in weights]
    if not w or any(not math.isfinite(x) or x <= 0 for x in w):
        raise InvalidParameterError(
            f"weights must be finite numbers > 0 (every share needs some budget), got {weights!r}"
        )
    total = math.fsum(w)
    out = [epsilon * (x / total) for x in w]
    budget = exact(epsilon)
    while exact_sum(out) > budget:
        i = max(range(len(out)), key=out.__getitem__)
        out[i] = math.nextafter(out[i], 0.0)
    return out
