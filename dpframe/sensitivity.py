"""l1 global sensitivities computed from public bounds, for either neighbour relation.

``neighbours="add_remove"``: one record is added or removed.
``neighbours="substitute"``: one record is replaced by another (same dataset size).
Under substitution a record may also move from one group to another, so a vector of
per-group statistics changes in two entries.
"""

from __future__ import annotations

from dpframe._validation import NEIGHBOURS, check_choice, check_real
from dpframe.errors import InvalidParameterError

__all__ = ["grouped_sum", "histogram_counts"]


def histogram_counts(neighbours: str = "substitute") -> float:
    """l1 sensitivity of a vector of counts over disjoint groups (a histogram).

    Adding or removing a record changes one count by 1; substituting one moves it
    from one group to another, changing two counts by 1 each.

    Examples
    --------
    >>> histogram_counts("add_remove"), histogram_counts("substitute")
    (1.0, 2.0)
    """
    check_choice("neighbours", neighbours, NEIGHBOURS)
    return 1.0 if neighbours == "add_remove" else 2.0


def grouped_sum(lower: float, upper: float, neighbours: str = "substitute") -> float:
    """l1 sensitivity of a vector of per-group sums of values clipped to ``[lower, upper]``.

    With ``M = max(|lower|, |upper|)``: adding or removing a record moves one sum by at
    most ``M``. Substituting a record either changes one sum by at most
    ``upper - lower`` or (when it changes group) two sums by at most ``M`` each; since
    ``upper - lower <= 2M``, the sensitivity is ``2M``.

    Examples
    --------
    >>> grouped_sum(0, 10, "add_remove"), grouped_sum(0, 10, "substitute")
    (10.0, 20.0)
    """
    lo = check_real("lower", lower)
    hi = check_real("upper", upper)
    if not lo < hi:
        raise InvalidParameterError(f"lower must be < upper, got lower={lo!r}, upper={hi!r}")
    check_choice("neighbours", neighbours, NEIGHBOURS)
    m = max(abs(lo), abs(hi))
    return m if neighbours == "add_remove" else 2.0 * m
