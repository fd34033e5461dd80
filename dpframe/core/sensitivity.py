"""l1 global sensitivities computed from public bounds, for either neighbour relation.

``neighbours="add_remove"``: one record is added or removed.
``neighbours="substitute"``: one record is replaced by another (same dataset size).
Under substitution a record may also move from one group to another, so a vector of
per-group statistics changes in two entries.

Conventions shared by every function below (see ``docs/sensitivity.md``):

* ``n`` (or ``sizes``, the group sizes) describes the dataset ``D`` that is released.
  Under ``"substitute"`` a neighbour ``D'`` has the same size. Under ``"add_remove"``
  ``D'`` is ``D`` with one record removed (size ``n - 1``) *or* one record added
  (size ``n + 1``), and the value returned bounds ``|f(D) - f(D')|`` over both. For
  the mean, proportions, variance and covariance the removal dominates (so ``n`` is
  also the size of the larger dataset of the pair); for pooled statistics over many
  small groups adding a record can dominate.
* A statistic undefined on the neighbour (the mean of no records, the sample variance
  or covariance of one record) is taken to be a fixed value: any value inside the
  bounds for a mean or proportion, any probability vector for proportions, ``0`` for a
  variance or covariance. The values below also cover those pairs.
* The sensitivities for a mean, proportion, variance and covariance are non-increasing
  in ``n``: if only a lower bound on the size is public, pass that bound.
* Results are in the units of the statistic (``(upper - lower)**2`` for a variance) and
  are exact suprema (tight) unless a docstring says otherwise.

Examples
--------
>>> from dpframe import sensitivity
>>> sensitivity.mean(0, 10, 5)  # a mean of 5 values in [0, 10], one substituted
2.0
>>> sensitivity.histogram_counts("add_remove"), sensitivity.histogram_counts("substitute")
(1.0, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Set
from numbers import Integral
from typing import Any

import numpy as np

from dpframe.core.constraints import MEMBERSHIPS, check, check_real
from dpframe.errors import InvalidParameterError

__all__ = [
    "MEMBERSHIPS",
    "covariance",
    "grouped_sum",
    "histogram_counts",
    "histogram_proportions",
    "mean",
    "pooled_covariance",
    "pooled_variance",
    "proportion",
    "variance",
    "variance_bound",
    "variance_bounds",
]


def histogram_counts(neighbours: str = "substitute") -> float:
    """l1 sensitivity of a vector of counts over disjoint groups (a histogram).

    Adding or removing a record changes one count by 1; substituting one moves it
    from one group to another, changing two counts by 1 each.

    Examples
    --------
    >>> histogram_counts("add_remove"), histogram_counts("substitute")
    (1.0, 2.0)
    """
    check("neighbours", neighbours)
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
    check("neighbours", neighbours)
    m = max(abs(lo), abs(hi))
    return m if neighbours == "add_remove" else 2.0 * m


# --------------------------------------------------------------------------- checks


def _width(lower_name: str, lower: Any, upper_name: str, upper: Any) -> float:
    """``upper - lower`` for finite bounds with ``lower < upper`` (else raise, naming them)."""
    lo = check_real(lower_name, lower)
    hi = check_real(upper_name, upper)
    if not lo < hi:
        raise InvalidParameterError(
            f"{lower_name} must be < {upper_name}, got {lower_name}={lo!r}, "
            f"{upper_name}={hi!r}; pass the public bounds of the values in increasing order"
        )
    width = hi - lo
    if math.isinf(width):
        raise InvalidParameterError(
            f"{upper_name} - {lower_name} overflows a float ({lower_name}={lo!r}, "
            f"{upper_name}={hi!r}); rescale the values to narrower bounds"
        )
    return width


def _count(name: str, value: Any, minimum: int, why: str) -> int:
    """A number of records: an integer ``>= minimum`` (``why`` explains the minimum)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParameterError(
            f"{name} must be an integer number of records, got {value!r} of type "
            f"{type(value).__name__}; pass int({name})"
        )
    k = int(value)
    if k < minimum:
        raise InvalidParameterError(f"{name} must be >= {minimum} ({why}), got {k}")
    return k


def _sizes(sizes: Any) -> list[int]:
    """Group sizes: a non-empty sequence of integers, each >= 2."""
    if isinstance(sizes, str | bytes | Mapping | Set) or not isinstance(sizes, Iterable):
        raise InvalidParameterError(
            f"sizes must be a sequence of integers (one size per group), got {sizes!r} of "
            f"type {type(sizes).__name__}; pass e.g. sizes=[12, 30, 7]"
        )
    out = [
        _count(
            f"sizes[{i}]",
            s,
            2,
            "every group needs two records to contribute to a pooled "
            "estimate; merge or drop smaller groups",
        )
        for i, s in enumerate(sizes)
    ]
    if not out:
        raise InvalidParameterError("sizes must name at least one group, got an empty sequence")
    return out


def _finite(value: float, what: str) -> float:
    if math.isinf(value):
        raise InvalidParameterError(
            f"the sensitivity of the {what} overflows a float; rescale the values to "
            "narrower bounds"
        )
    return value


def _max_ss(m: int) -> float:
    """Largest sum of squared deviations of ``m`` values in ``[0, 1]``: floor(m/2)ceil(m/2)/m.

    It is reached with half the values at each bound; it also bounds ``|sum of cross
    products|`` of ``m`` pairs in ``[0, 1]^2`` (Cauchy-Schwarz), reached with half the
    pairs at ``(0, 0)`` and half at ``(1, 1)`` (or ``(0, 1)`` and ``(1, 0)``).
    """
    return (m // 2) * ((m + 1) // 2) / m if m > 0 else 0.0


# ------------------------------------------------------------------- single statistics


def variance_bound(lower: float, upper: float, n: int) -> float:
    """The largest sample variance (divisor ``n - 1``) of ``n`` values in ``[lower, upper]``.

    ``n R**2 / (4 (n - 1))`` with ``R = upper - lower``, reached with half the values at
    each bound (Liu 2019, Table 1; for odd ``n`` the true maximum is slightly smaller, so
    this is a valid upper bound). A released variance lies in ``[0, variance_bound]``.

    Examples
    --------
    >>> variance_bound(0, 2, 2), variance_bound(0, 10, 101)
    (2.0, 25.25)
    """
    width = _width("lower", lower, "upper", upper)
    n = _count("n", n, 2, "a sample variance needs two records")
    return _finite(float(_variance_bound(width, n)), "variance bound")


def variance_bounds(lower: float, upper: float, n: np.ndarray) -> np.ndarray:
    """:func:`variance_bound` for an array of sizes (e.g. noisy counts), each ``>= 2``.

    Examples
    --------
    >>> variance_bounds(0, 2, np.array([2.0, 3.0])).tolist()
    [2.0, 1.5]
    """
    width = _width("lower", lower, "upper", upper)
    sizes = np.asarray(n, dtype=np.float64)
    if not (sizes >= 2).all():
        raise InvalidParameterError("n: every size must be >= 2 for a sample variance")
    return _variance_bound(width, sizes)


def _variance_bound(width: float, n: Any) -> Any:
    """``n R**2 / (4 (n - 1))``: the one place the formula is written."""
    return n * width * width / (4.0 * (n - 1))


def mean(lower: float, upper: float, n: int, neighbours: str = "substitute") -> float:
    """l1 sensitivity of the sample mean of ``n`` values in ``[lower, upper]``.

    Parameters
    ----------
    lower, upper : float
        Public bounds of the values (finite, ``lower < upper``).
    n : int
        Size of the released dataset ``D`` (``>= 1``: the mean of no records is undefined).
        Under ``"add_remove"`` the neighbour has ``n - 1`` or ``n + 1`` records.
    neighbours : {"substitute", "add_remove"}
        The neighbour relation.

    Returns
    -------
    float
        ``(upper - lower) / n`` under both relations (tight).

    Notes
    -----
    Substitution changes one term of the sum by at most ``upper - lower``. Removing
    record ``x`` changes the mean by ``|x - mean(rest)| / n <= (upper - lower) / n``;
    adding one changes it by at most ``(upper - lower) / (n + 1)``. At ``n = 1`` the
    removal leaves no record: any fixed output inside the bounds is within
    ``upper - lower`` of the single value.

    Examples
    --------
    >>> mean(0, 10, 5), mean(-1, 3, 4, "add_remove")
    (2.0, 1.0)
    """
    width = _width("lower", lower, "upper", upper)
    n = _count("n", n, 1, "the mean of no records is undefined")
    check("neighbours", neighbours)
    return width / n


def proportion(n: int, neighbours: str = "substitute") -> float:
    """l1 sensitivity of one proportion of ``n`` records (a mean of 0/1 indicators).

    Parameters
    ----------
    n : int
        Size of the released dataset (``>= 1``: a proportion of no records is undefined).
    neighbours : {"substitute", "add_remove"}
        The neighbour relation.

    Returns
    -------
    float
        ``1 / n`` under both relations (tight): :func:`mean` with bounds ``[0, 1]``.

    Examples
    --------
    >>> proportion(4), proportion(4, "add_remove")
    (0.25, 0.25)
    """
    n = _count("n", n, 1, "a proportion of no records is undefined")
    check("neighbours", neighbours)
    return 1.0 / n


def histogram_proportions(n: int, neighbours: str = "substitute") -> float:
    """l1 sensitivity of the whole vector of ``K >= 2`` category proportions of ``n`` records.

    Parameters
    ----------
    n : int
        Size of the released dataset (``>= 1``).
    neighbours : {"substitute", "add_remove"}
        The neighbour relation.

    Returns
    -------
    float
        ``2 / n`` under both relations (tight).

    Notes
    -----
    Substitution moves one record between two categories: two entries change by
    ``1/n``. Removing a record of a category with count ``c`` changes that entry by
    ``(n - c) / (n (n - 1))`` and all the others together by the same amount, in
    total ``2 (n - c) / (n (n - 1))``, largest (``2/n``) when ``c = 1``; adding one
    gives at most ``2 / (n + 1)``. The supplement (section 1) gives ``1/n`` for
    ``add_remove``: wrong, e.g. ``(a, b, b) -> (b, b)`` moves ``(1/3, 2/3)`` to
    ``(0, 1)``, an l1 change of ``2/3``.

    Examples
    --------
    >>> histogram_proportions(4), histogram_proportions(4, "add_remove")
    (0.5, 0.5)
    """
    n = _count("n", n, 1, "proportions of no records are undefined")
    check("neighbours", neighbours)
    return 2.0 / n


def variance(lower: float, upper: float, n: int, neighbours: str = "substitute") -> float:
    """l1 sensitivity of the sample variance (divisor ``n - 1``) of ``n`` values in the bounds.

    Parameters
    ----------
    lower, upper : float
        Public bounds of the values (finite, ``lower < upper``).
    n : int
        Size of the released dataset (``>= 2``: the sample variance needs two records).
    neighbours : {"substitute", "add_remove"}
        The neighbour relation.

    Returns
    -------
    float
        ``(upper - lower)**2 / n`` under both relations (tight).

    Notes
    -----
    With ``m`` the mean of the ``n - 1`` records that stay, ``s2 = SS(rest)/(n - 1) +
    (x - m)**2 / n``. Substituting ``x`` by ``x'`` changes it by ``((x - m)**2 -
    (x' - m)**2) / n``, at most ``R**2 / n`` (rest at one bound, ``x`` at the other,
    ``x' = m``). Removing ``x`` changes it by ``(x - m)**2 / n - s2(rest) / (n - 1)``:
    at most ``R**2 / n`` one way and ``R**2 / (4 (n - 2)) <= R**2 / n`` (``n >= 3``)
    the other; adding a record gives at most ``R**2 / (n + 1)``. At ``n = 2`` the
    removal leaves one record, whose variance is taken as ``0``.

    Examples
    --------
    >>> variance(0, 1, 10), variance(-1, 3, 4, "add_remove")
    (0.1, 4.0)
    """
    width = _width("lower", lower, "upper", upper)
    n = _count("n", n, 2, "the sample variance (divisor n - 1) needs two records")
    check("neighbours", neighbours)
    return _finite(width * width / n, "variance")


def covariance(
    lower_x: float,
    upper_x: float,
    lower_y: float,
    upper_y: float,
    n: int,
    neighbours: str = "substitute",
) -> float:
    """l1 sensitivity of the sample covariance (divisor ``n - 1``) of ``n`` pairs.

    Parameters
    ----------
    lower_x, upper_x, lower_y, upper_y : float
        Public bounds of ``x`` and of ``y`` (finite, lower < upper).
    n : int
        Number of pairs in the released dataset (``>= 2``).
    neighbours : {"substitute", "add_remove"}
        The neighbour relation.

    Returns
    -------
    float
        ``(upper_x - lower_x) (upper_y - lower_y) / n`` under both relations (tight).

    Notes
    -----
    With ``(u, v)`` the means of the pairs that stay, a substitution changes the
    covariance by ``((x - u)(y - v) - (x' - u)(y' - v)) / n``; over one rectangle of
    ``(x, y)`` the product ranges over an interval of length at most ``Rx Ry``
    (exactly ``Rx Ry`` when ``u`` or ``v`` is at a bound). Removing a pair changes it
    by ``(x - u)(y - v) / n - cov(rest) / (n - 1)``, which is at most ``Rx Ry / n`` in
    absolute value: the bound of the removal term of :func:`pooled_covariance` with one
    group (``docs/sensitivity.md``). Adding a pair gives at most ``Rx Ry / (n + 1)``.
    At ``n = 2`` the removal leaves one pair, whose covariance is taken as ``0``.

    Examples
    --------
    >>> covariance(0, 1, -1, 3, 4), covariance(0, 1, -1, 3, 4, "add_remove")
    (1.0, 1.0)
    """
    wx = _width("lower_x", lower_x, "upper_x", upper_x)
    wy = _width("lower_y", lower_y, "upper_y", upper_y)
    n = _count("n", n, 2, "the sample covariance (divisor n - 1) needs two pairs")
    check("neighbours", neighbours)
    return _finite(wx * wy / n, "covariance")


# ------------------------------------------------------------------ pooled statistics


def _pooled_variance_unit(sizes: list[int], neighbours: str, membership: str) -> float:
    """Pooled-variance sensitivity for values in ``[0, 1]`` (multiply by the width squared)."""
    dof = sum(sizes) - len(sizes)  # N = n - J >= J >= 1
    largest = max(sizes)
    if neighbours == "substitute":
        if membership == "public" or len(sizes) == 1:
            # one group's SS changes by at most (1 - 1/n_j) (its variance by 1/n_j)
            return (1.0 - 1.0 / largest) / dof
        # a record leaves group j (SS drops by (1 - 1/n_j) d_j^2) and joins group k (SS
        # grows by n_k/(n_k + 1) d_k^2): two non-negative terms of opposite sign, so the
        # larger alone counts; joining the largest group is the worst case.
        return largest / (largest + 1.0) / dof
    # add_remove (group membership makes no difference: the max runs over every group).
    # Removing a record from group j changes s_p^2 by [(1 - 1/n_j) d^2 - s_p'^2] / N and
    # adding one to group k by [n_k/(n_k + 1) d^2 - s_p^2] / (N + 1), d the distance from
    # the record to the mean of the rest of its group. Positive extremes: d = 1, every group
    # constant. The negative extremes (d = 0, every group spread out) are never larger:
    # s_p'^2 <= (n - 1) / (4 (N - 1)) <= 1/2 <= 1 - 1/n_max when n > 2J, and exactly
    # 1/2 (a tie) when every group has two records; s_p^2 / (N + 1) <= n / (4 N (N + 1))
    # <= 1 / (2N).
    return max((1.0 - 1.0 / largest) / dof, largest / (largest + 1.0) / (dof + 1.0))


def _pooled_covariance_unit(sizes: list[int], neighbours: str, membership: str) -> float:
    """Pooled-covariance sensitivity for pairs in ``[0, 1]^2`` (multiply by ``Rx Ry``)."""
    dof = sum(sizes) - len(sizes)
    ranked = sorted(sizes, reverse=True)
    if neighbours == "substitute":
        if membership == "public" or len(sizes) == 1:
            return (1.0 - 1.0 / ranked[0]) / dof
        # the record leaves group j (SP drops by (1 - 1/n_j) a_j b_j) and joins group k
        # (SP grows by n_k/(n_k + 1) a_k b_k); the two products have free signs, so the
        # terms add: worst with j the largest group and k the next largest.
        return (1.0 - 1.0 / ranked[0] + ranked[1] / (ranked[1] + 1.0)) / dof
    # add_remove. Removing a record from group j changes cov_p by
    #   [(1 - 1/n_j) a b - SP'_j/(N - 1) - sum_{l != j} SP_l/(N - 1)] / N,
    # adding one to group k by
    #   [n_k/(n_k + 1) a b - SP_k/N - sum_{l != k} SP_l/N] / (N + 1).
    # The group-j (k) part is at most (1 - 1/n_j) (n_k/(n_k + 1)) in absolute value (its
    # record at one corner, the others at the opposite corner); each other group's
    # |SP_l| is at most _max_ss(n_l) (half its pairs at each of two opposite corners).
    total = math.fsum(_max_ss(s) for s in sizes)
    best = 0.0
    for s in set(sizes):
        others = total - _max_ss(s)
        removal = (1.0 - 1.0 / s + (others / (dof - 1.0) if dof > 1 else 0.0)) / dof
        addition = (s / (s + 1.0) + others / dof) / (dof + 1.0)
        best = max(best, removal, addition)
    return best


def _pooled_unit(
    unit: Callable[[list[int], str, str], float],
    sizes: Iterable[int],
    neighbours: str,
    membership: str,
) -> float:
    """The checked arguments of a pooled statistic's sensitivity, passed to ``unit``."""
    groups = _sizes(sizes)
    check("neighbours", neighbours)
    check("membership", membership)
    return unit(groups, neighbours, membership)


def pooled_variance(
    lower: float,
    upper: float,
    sizes: Iterable[int],
    neighbours: str = "substitute",
    membership: str = "public",
) -> float:
    """l1 sensitivity of the pooled variance ``sum_j SS_j / (n - J)`` over ``J`` groups.

    Parameters
    ----------
    lower, upper : float
        Public bounds of the values (finite, ``lower < upper``).
    sizes : sequence of int
        The group sizes ``n_1, ..., n_J`` of the released dataset, each ``>= 2`` (the
        supplement's assumption: every group contributes a variance); ``n = sum(sizes)``.
    neighbours : {"substitute", "add_remove"}
        The neighbour relation. Under ``"add_remove"`` the neighbour has one record
        fewer or one more in one group, and both are covered.
    membership : {"public", "private"}
        ``"public"``: a substituted record stays in its group (the supplement's
        assumption). ``"private"``: it may move to another group. Under ``"add_remove"``
        the two coincide.

    Returns
    -------
    float
        With ``R = upper - lower``, ``N = n - J`` and ``n_max = max(sizes)`` (tight):

        * substitute, public: ``R**2 (1 - 1/n_max) / N`` (supplement section 4);
        * substitute, private (``J >= 2``): ``R**2 n_max / ((n_max + 1) N)``, up to 4/3
          times the supplement's value;
        * add_remove: ``R**2 max((1 - 1/n_max) / N, n_max / ((n_max + 1)(N + 1)))``:
          removing a record from the largest group, or adding one to it. The second
          wins when ``N + 1 > n_max**2`` (many small groups), where the supplement's
          value is too small.

    Notes
    -----
    When the sizes are not public (private membership, or ``add_remove``), pass the
    worst case over the sizes the data could have; ``R**2 / N`` bounds every case
    above. With one group this is :func:`variance`.

    Examples
    --------
    >>> pooled_variance(-1, 3, [2, 2])
    4.0
    >>> round(pooled_variance(-1, 3, [2, 2], membership="private"), 4)
    5.3333
    >>> round(pooled_variance(0, 1, [2] * 6, "add_remove"), 4)
    0.0952
    """
    width = _width("lower", lower, "upper", upper)
    unit = _pooled_unit(_pooled_variance_unit, sizes, neighbours, membership)
    return _finite(width * width * unit, "pooled variance")


def pooled_covariance(
    lower_x: float,
    upper_x: float,
    lower_y: float,
    upper_y: float,
    sizes: Iterable[int],
    neighbours: str = "substitute",
    membership: str = "public",
) -> float:
    """l1 sensitivity of the pooled covariance ``sum_j SP_j / (n - J)`` over ``J`` groups.

    Parameters
    ----------
    lower_x, upper_x, lower_y, upper_y : float
        Public bounds of ``x`` and of ``y`` (finite, lower < upper).
    sizes, neighbours, membership
        As in :func:`pooled_variance`.

    Returns
    -------
    float
        With ``Rxy = (upper_x - lower_x)(upper_y - lower_y)``, ``N = n - J`` and the two
        largest sizes ``n_(1) >= n_(2)`` (tight):

        * substitute, public: ``Rxy (1 - 1/n_(1)) / N`` (supplement section 5);
        * substitute, private (``J >= 2``): ``Rxy (1 - 1/n_(1) + n_(2)/(n_(2) + 1)) / N``,
          up to 7/3 times the supplement's value (two groups of two);
        * add_remove: ``Rxy`` times the largest over groups ``j`` of
          ``(1 - 1/n_j + (G - g(n_j))/(N - 1)) / N`` (removal) and
          ``(n_j/(n_j + 1) + (G - g(n_j))/N) / (N + 1)`` (addition), with
          ``g(m) = floor(m/2) ceil(m/2)/m`` and ``G = sum_j g(n_j)`` (with one group of
          two, ``N = 1``, the removal term is ``(1 - 1/n_j) / N``). The supplement's
          closed form is a valid but looser upper bound.

    Notes
    -----
    When the sizes are not public, pass the worst case over the sizes the data could
    have. With one group this is :func:`covariance`.

    Examples
    --------
    >>> pooled_covariance(-1, 3, -1, 3, [2, 2])
    4.0
    >>> round(pooled_covariance(-1, 3, -1, 3, [2, 2], membership="private"), 4)
    9.3333
    >>> pooled_covariance(0, 1, 0, 1, [2, 2], "add_remove")
    0.5
    """
    wx = _width("lower_x", lower_x, "upper_x", upper_x)
    wy = _width("lower_y", lower_y, "upper_y", upper_y)
    unit = _pooled_unit(_pooled_covariance_unit, sizes, neighbours, membership)
    return _finite(wx * wy * unit, "pooled covariance")
