"""Statistics for grouped releases: ``dpframe.group_by(...).agg(agg.count(...), agg.sum(...))``.

Each statistic carries its own epsilon; the statistics of one release compose
sequentially (their epsilons add up), and each is released over disjoint groups
(parallel composition across groups).
"""

from __future__ import annotations

from typing import Any

from dpframe._validation import check_epsilon, check_real
from dpframe.errors import InvalidParameterError
from dpframe.grouped import Statistic

__all__ = ["Statistic", "count", "sum"]


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(f"name must be a non-empty string, got {name!r}")
    return name


def count(*, epsilon: float, name: str = "count") -> Statistic:
    """The number of records per group, released with integer Laplace noise.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.count(epsilon=0.5).name
    'count'
    """
    return Statistic("count", _check_name(name), check_epsilon(epsilon))


def sum(
    column: str, *, lower: float, upper: float, epsilon: float, name: str | None = None
) -> Statistic:
    """The per-group sum of ``column`` after clipping each value to ``[lower, upper]``.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.agg.sum("income", lower=0, upper=100_000, epsilon=0.5).name
    'income_sum'
    """
    if not isinstance(column, str):
        raise InvalidParameterError(f"column must be a column name, got {column!r}")
    lo, hi = check_real("lower", lower), check_real("upper", upper)
    if not lo < hi:
        raise InvalidParameterError(f"lower must be < upper, got lower={lo!r}, upper={hi!r}")
    return Statistic(
        "sum",
        _check_name(name or f"{column}_sum"),
        check_epsilon(epsilon),
        column=column,
        lower=lo,
        upper=hi,
    )
