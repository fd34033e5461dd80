"""Proportion vectors under bounded Laplace noise (Liu 2019, Simulation study 2).

:func:`plan_proportions` (no data) -> :meth:`ProportionsPlan.check` ->
:meth:`ProportionsPlan.draw`: ``K`` proportions kept in ``[0, 1]`` and summing to 1,
by rescaling, by "all but one" (Remark 1) or by a modified universal histogram (Hay et
al. 2010; :func:`consistent_tree`, :func:`project_to_simplex`).
:func:`release_proportions` runs the three steps without an accountant, for research.
Charging is the executor's (:mod:`dpframe.core.executor`); the polars adapter is
``dpframe.proportions``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from dpframe.core import sensitivity as sens
from dpframe.core.accountant import Charge
from dpframe.core.budget import split_epsilon
from dpframe.core.constraints import (
    check,
    check_epsilon,
    check_int,
)
from dpframe.core.grid import check_granularity
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.components import (
    ComponentGroup,
    StatisticCharge,
    as_generator,
    check_array,
    choose_granularity,
    frozen,
    ledger_charges,
    plan_components,
    summary_rows,
    total,
)

__all__ = [
    "ProportionsPlan",
    "ProportionsResult",
    "consistent_tree",
    "plan_proportions",
    "project_to_simplex",
    "release_proportions",
]


@dataclass(frozen=True)
class ProportionsResult:
    """A sanitized vector of proportions (in ``[0, 1]``, summing to 1) and its privacy facts.

    Attributes
    ----------
    values : ndarray, shape (K,)
        The released proportions, in the input's category order.
    sanitized : ndarray, shape (K,)
        The noisy values before post-processing: ``q*`` before rescaling; for
        ``"all_but_one"`` the released values (the last one computed); for
        ``"universal_histogram"`` the noisy leaves.
    epsilon, epsilon_charged : float
        Budget asked for, and the total to charge (sum of ``charges``).
    charges : tuple of StatisticCharge
        ``"rescale"`` and ``"all_but_one"``: one (the vector); ``"universal_histogram"``:
        one per level of the tree (each level is a partition of the records).
    scales : ndarray, shape (K,)
        Laplace scale of each category's own noisy value (``nan`` for the one computed
        last, or one released without noise).
    order : tuple of int or None
        ``"all_but_one"``: the order of sanitization (last: computed); universal
        histogram: the categories in leaf order.
    tree, noisy_tree : tuple of ndarray or None
        Universal histogram only: the released consistent tree (level 0 is the root,
        ``[1.0]``) and the noisy levels 1..L.
    degenerate : bool
        ``"rescale"``: every ``q*`` was 0 and the uniform vector was released;
        ``"all_but_one"``: some component had no room left and was released as 0.
    """

    values: np.ndarray
    sanitized: np.ndarray
    n: int
    strategy: str
    epsilon: float
    epsilon_charged: float
    charges: tuple[StatisticCharge, ...]
    scales: np.ndarray
    granularity: float
    method: str
    calibration: str
    neighbours: str
    order: tuple[int, ...] | None
    tree: tuple[np.ndarray, ...] | None = None
    noisy_tree: tuple[np.ndarray, ...] | None = None
    degenerate: bool = False
    notes: tuple[str, ...] = ()

    def ledger_charges(self) -> list[Charge]:
        """The charges to record, one per sanitized statistic."""
        return ledger_charges(self.charges)


# ---------------------------------------------------------------------- proportions


def project_to_simplex(v: Any) -> np.ndarray:
    """Euclidean projection onto the probability simplex along the last axis.

    The sort-based algorithm of Duchi et al. (2008): ``w = max(v - theta, 0)`` with the
    ``theta`` that makes ``w`` sum to 1.

    Examples
    --------
    >>> project_to_simplex([0.6, 0.5, -0.1])
    array([0.55, 0.45, 0.  ])
    """
    x = np.asarray(v, dtype=np.float64)
    if x.ndim < 1 or x.shape[-1] < 1 or not np.isfinite(x).all():
        raise InvalidParameterError(
            "v must be a finite non-empty array (projected on its last axis)"
        )
    u = -np.sort(-x, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    j = np.arange(1, x.shape[-1] + 1)
    rho = np.sum(u - css / j > 0, axis=-1, keepdims=True)  # the condition holds for 1..rho
    theta = np.take_along_axis(css, rho - 1, axis=-1) / rho
    return np.maximum(x - theta, 0.0)


def consistent_tree(noisy: Sequence[Any], root: float = 1.0) -> list[np.ndarray]:
    """Hay et al. (2010) constrained inference on a binary tree with a fixed root.

    Parameters
    ----------
    noisy : sequence of array_like
        The noisy levels 1..L of a complete binary tree: ``noisy[l - 1]`` has ``2**l``
        nodes on its last axis, node ``i`` being the parent of ``2i`` and ``2i + 1`` of
        the next level (leading axes are a batch).
    root : float
        The root's known value (1 for proportions); it is not estimated.

    Returns
    -------
    list of ndarray
        Levels 1..L, consistent (each node is the sum of its children, level 1 sums
        to ``root``): the least-squares estimate ``argmin sum (h - noisy)**2`` over
        consistent trees (Hay et al. Theorem 3, the root fixed). Bottom-up, a node of
        height ``t`` (leaves: 1) gets ``z = (2**t - 2**(t-1)) / (2**t - 1) * noisy +
        (2**(t-1) - 1) / (2**t - 1) * sum(z of children)``; top-down, each child gets
        ``z + (parent - sum of z of the siblings) / 2``, ``parent`` the corrected value.

    Examples
    --------
    >>> levels = consistent_tree([[0.35, 0.55], [0.1, 0.2, 0.3, 0.4]])
    >>> [np.round(x, 4).tolist() for x in levels]
    [[0.3667, 0.6333], [0.1333, 0.2333, 0.2667, 0.3667]]
    """
    levels = [np.asarray(x, dtype=np.float64) for x in noisy]
    if not levels:
        raise InvalidParameterError("noisy must hold at least one level")
    for i, x in enumerate(levels, start=1):
        if x.ndim < 1 or x.shape[-1] != 2**i or not np.isfinite(x).all():
            raise InvalidParameterError(
                f"noisy[{i - 1}] must hold 2**{i} = {2**i} finite nodes on its last axis, "
                f"got shape {x.shape}"
            )
    depth = len(levels)
    z = [np.empty(0)] * depth
    z[-1] = levels[-1]
    for i in range(depth - 2, -1, -1):
        t = depth - i  # height of level i + 1 (the leaves have height 1)
        kids = z[i + 1].reshape(*z[i + 1].shape[:-1], -1, 2).sum(axis=-1)
        z[i] = ((2**t - 2 ** (t - 1)) * levels[i] + (2 ** (t - 1) - 1) * kids) / (2**t - 1)
    out = []
    parent = np.full((*levels[0].shape[:-1], 1), float(root))
    for zi in z:
        pairs = zi.reshape(*zi.shape[:-1], -1, 2)
        fixed = pairs + ((parent - pairs.sum(axis=-1)) / 2.0)[..., None]
        parent = fixed.reshape(zi.shape)
        out.append(parent)
    return out


def _proportions(p: Any) -> np.ndarray:
    x = check_array("p", p, 1)
    if x.size < 2:
        raise InvalidParameterError(f"p must hold K >= 2 proportions, got {x.size}")
    if (x < -1e-12).any() or (x > 1 + 1e-12).any():
        raise InvalidParameterError("p must hold proportions in [0, 1]")
    if abs(x.sum() - 1.0) > 1e-9 * x.size:
        raise InvalidParameterError(
            f"p must sum to 1 (category proportions of the same records), sums to {x.sum()!r}"
        )
    return np.clip(x, 0.0, 1.0)


def _order(order: Any, k: int, strategy: str) -> tuple[int, ...]:
    if order is None:
        return tuple(range(k))
    if strategy == "rescale":
        raise InvalidParameterError(
            "order applies to strategy='all_but_one' (the one computed last) and "
            "'universal_histogram' (the leaf order); omit it for 'rescale'"
        )
    if isinstance(order, Integral) and not isinstance(order, bool):
        if strategy != "all_but_one":
            raise InvalidParameterError(
                "order must be a permutation of range(K) (the leaf order) for "
                "strategy='universal_histogram'"
            )
        last = int(order)
        if not 0 <= last < k:
            raise InvalidParameterError(f"order must be a category index in [0, {k}), got {last}")
        return (*(i for i in range(k) if i != last), last)
    try:
        seq = tuple(order)
    except TypeError:
        raise InvalidParameterError(
            f"order must be None, an int or a permutation of range({k}), got {order!r}"
        ) from None
    if any(isinstance(i, bool) or not isinstance(i, Integral) for i in seq) or sorted(
        int(i) for i in seq
    ) != list(range(k)):
        raise InvalidParameterError(f"order must be a permutation of range({k}), got {order!r}")
    return tuple(int(i) for i in seq)


def _check_granularity(granularity: Any) -> float | None:
    if granularity is None:
        return None
    g = check_granularity(granularity)
    if g > 1:
        raise InvalidParameterError(
            f"granularity must be a power of two in (0, 1], got {granularity!r}"
        )
    return g


def plan_proportions(
    k: int,
    n: int,
    epsilon: float,
    *,
    strategy: str = "rescale",
    method: str = "truncated",
    calibration: str = "exact",
    neighbours: str = "substitute",
    order: Any = None,
    granularity: float | None = None,
) -> ProportionsPlan:
    """Plan the release of ``k`` proportions of ``n`` records (no data read; see
    :func:`release_proportions` for the parameters).

    Examples
    --------
    >>> plan = plan_proportions(4, 500, 1.0, strategy="universal_histogram")
    >>> [c.columns[0] for c in plan.charges]
    ['level 1', 'level 2']
    """
    eps = check_epsilon(epsilon)
    check("strategy", strategy)
    check("method", method)
    check("calibration", calibration)
    check("neighbours", neighbours)
    k_cat = check_int("k", k, 2, "a vector of proportions has at least two categories")
    n = check_int("n", n, 1, "proportions of no records are undefined")
    l1 = sens.histogram_proportions(n, neighbours)
    delta = sens.proportion(n, neighbours)
    g_user = _check_granularity(granularity)
    perm = _order(order, k_cat, strategy)
    sub = neighbours == "substitute"
    if strategy == "universal_histogram":
        depth = k_cat.bit_length() - 1
        if 2**depth != k_cat:
            raise InvalidParameterError(
                f"strategy='universal_histogram' needs K a power of 2 (a complete binary "
                f"tree), got K = {k_cat}; pad p with zero categories or use 'rescale'"
            )
        level_eps = split_epsilon(eps, [1.0] * depth)
        sizes = [(level_eps[i], 2 ** (i + 1)) for i in range(depth)]
    elif strategy == "all_but_one":
        sizes = [(eps, k_cat - 1)]
    else:
        sizes = [(eps, k_cat)]
    ks = [min(2, size) if sub else size for _, size in sizes]
    g = g_user
    if g is None:
        g = min(
            choose_granularity(delta, 0.0, 1.0, e, kk) for (e, _), kk in zip(sizes, ks, strict=True)
        )
    groups = [
        plan_components(method, calibration, e, delta, l1, size, kk, 0.0, 1.0, g)
        for (e, size), kk in zip(sizes, ks, strict=True)
    ]
    how = (
        "substitution changes 2 components by 1/n each"
        if sub
        else "add/remove changes every component, by 2/n in total"
    )
    if strategy == "universal_histogram":
        facts = tuple(
            group.charge(f"level {i + 1}", f"tree level {i + 1} ({2 ** (i + 1)} nodes): {how}")
            for i, group in enumerate(groups)
        )
    elif strategy == "all_but_one":
        facts = (
            groups[0].charge(
                "p",
                f"K - 1 = {k_cat - 1} proportions in turn, bounds tightened by those "
                f"released before: {how}",
                bounds_fixed=False,
            ),
        )
    else:
        facts = (groups[0].charge("p", f"K = {k_cat} proportions in [0, 1]: {how}"),)
    return ProportionsPlan(
        k_cat, n, strategy, eps, method, calibration, neighbours, perm, g, tuple(groups), facts
    )


@dataclass(frozen=True)
class ProportionsPlan:
    """How a proportion vector is released, fixed before any data (the kernel plan).

    ``check(p)`` refuses a vector that is not ``K`` proportions summing to 1;
    ``draw(p, rng)`` gives the :class:`ProportionsResult`.
    """

    k: int
    n: int
    strategy: str
    epsilon: float
    method: str
    calibration: str
    neighbours: str
    order: tuple[int, ...]
    granularity: float
    groups: tuple[ComponentGroup, ...]
    facts: tuple[StatisticCharge, ...]

    @property
    def charges(self) -> tuple[Charge, ...]:
        return tuple(ledger_charges(self.facts))

    @property
    def epsilon_charged(self) -> float:
        return total([c.epsilon_charged for c in self.facts])

    def summary(self) -> list[dict[str, Any]]:
        return summary_rows(self.facts, self.groups)

    def check(self, p: Any) -> None:
        """Refuse exact proportions that are not ``K`` values in [0, 1] summing to 1."""
        try:
            x = _proportions(p)
        except InvalidParameterError as exc:
            raise InvalidDataError(f"the exact proportions: {exc}") from None
        if x.size != self.k:
            raise InvalidDataError(f"the exact proportions must hold K = {self.k} values")

    def draw(self, p: Any, rng: np.random.Generator) -> ProportionsResult:
        x = _proportions(p)
        common = {
            "n": self.n,
            "strategy": self.strategy,
            "epsilon": self.epsilon,
            "epsilon_charged": self.epsilon_charged,
            "charges": self.facts,
            "granularity": self.granularity,
            "method": self.method,
            "calibration": self.calibration,
            "neighbours": self.neighbours,
        }
        if self.strategy == "rescale":
            cal = self.groups[0].calibrate(0.0, 1.0)
            assert cal is not None
            q = cal.release(x, rng)
            total_q = q.sum()
            degenerate = bool(total_q == 0)
            values = np.full(self.k, 1.0 / self.k) if degenerate else q / total_q
            notes = ("every sanitized proportion was 0: released the uniform vector",) * degenerate
            return ProportionsResult(
                values=frozen(values),
                sanitized=frozen(q),
                scales=frozen(np.full(self.k, cal.scale)),
                order=None,
                degenerate=bool(degenerate),
                notes=notes,
                **common,
            )
        if self.strategy == "all_but_one":
            return _all_but_one(x, self.groups[0], self.order, rng, common)
        return _universal_histogram(x, list(self.groups), self.order, rng, common)


def release_proportions(
    p: Any,
    n: int,
    epsilon: float,
    *,
    rng: np.random.Generator | None = None,
    **options: Any,
) -> ProportionsResult:
    """Release ``K`` proportions in ``[0, 1]`` that sum to 1 (Simulation study 2).

    One record changes the vector by at most ``2/n`` in l1
    (:func:`dpframe.core.sensitivity.histogram_proportions`, both relations; the paper used
    ``1/n``) and each proportion by at most ``1/n``
    (:func:`dpframe.core.sensitivity.proportion`). Under ``"substitute"`` it changes 2
    components; under ``"add_remove"`` all ``K``. The calibration covers both (module
    docstring): under substitution each proportion is ``epsilon/2``-DP at ``1/n``; under
    add/remove the concave bound ``K f(min(D, T/K))`` uses the total ``2/n``.

    Parameters
    ----------
    p : array_like, shape (K,)
        The sample proportions (``K >= 2``, each in ``[0, 1]``, summing to 1).
    n : int
        Number of records (public, ``>= 1``).
    epsilon : float
        Total budget.
    rng : numpy.random.Generator, optional
        Default: a secure generator (:func:`dpframe.secure_generator`).
    **options
        The plan's keyword arguments (:func:`plan_proportions`, declared there):

    strategy : {"rescale", "all_but_one", "universal_histogram"}, default "rescale"
        ``"rescale"``: sanitize each proportion in ``[0, 1]``, divide by the sum (the
        uniform vector if the sum is 0). ``"all_but_one"``: sanitize ``K - 1``
        proportions in turn, ``q_i`` in ``[0, 1 - (sum of those released before)]``
        (Remark 1), the last is ``1 - sum``. ``"universal_histogram"``: a binary tree
        over the ``K`` categories (``K`` a power of 2), root fixed at 1, each of the
        ``log2 K`` levels sanitized at ``epsilon / log2 K``, then
        :func:`consistent_tree` and :func:`project_to_simplex` on the leaves.
    method : {"truncated", "bit"}, default "truncated"
    calibration : {"exact", "paper"}, default "exact"
        ``"paper"``: the scale ``2 / (n epsilon_level)`` (the paper's rule with the
        corrected sensitivity); truncation is then charged its true loss.
    neighbours : {"substitute", "add_remove"}, default "substitute"
    order : int or sequence of int, optional
        ``"all_but_one"``: the category computed last (an int; the paper: ``0``, its
        ``p_1``) or the full order of sanitization. ``"universal_histogram"``: the
        categories in leaf order (siblings are ``order[0:2]``, ``order[2:4]``, ...).
    granularity : float, optional
        Grid step, a power of two; default ``min(1/n, 1) / 1024`` rounded down.

    Returns
    -------
    ProportionsResult

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> r = release_proportions([0.1, 0.2, 0.3, 0.4], 500, 1.0, strategy="all_but_one",
    ...                         order=0, rng=rng)
    >>> bool(r.values.min() >= 0 and abs(r.values.sum() - 1) < 1e-12), r.epsilon_charged
    (True, 1.0)
    """
    x = _proportions(p)  # a research call: bad input is a bad parameter
    plan = plan_proportions(x.size, n, epsilon, **options)
    return plan.draw(x, as_generator(rng))


def _all_but_one(
    x: np.ndarray,
    group: ComponentGroup,
    perm: tuple[int, ...],
    gen: np.random.Generator,
    common: dict,
) -> ProportionsResult:
    k_cat = x.size
    values = np.zeros(k_cat)
    scales = np.full(k_cat, math.nan)
    room = 1.0  # a multiple of the grid step: every released value is one
    notes = []
    for i in perm[:-1]:
        cal = group.calibrate(0.0, room)
        if cal is None:  # no room left: the interval [0, 0]
            notes.append(f"p[{i}]: nothing left of the total, released 0 without noise")
            continue
        values[i] = cal.release(np.array([x[i]]), gen)[0]
        scales[i] = cal.scale
        room -= values[i]
    values[perm[-1]] = room
    return ProportionsResult(
        values=frozen(values),
        sanitized=frozen(values),
        scales=frozen(scales),
        order=perm,
        degenerate=bool(notes),
        notes=tuple(notes),
        **common,
    )


def _universal_histogram(
    x: np.ndarray,
    groups: list[ComponentGroup],
    perm: tuple[int, ...],
    gen: np.random.Generator,
    common: dict,
) -> ProportionsResult:
    leaves = x[list(perm)]
    true_levels = [leaves]
    while true_levels[0].size > 2:
        true_levels.insert(0, true_levels[0].reshape(-1, 2).sum(axis=1))
    noisy = []
    level_scales = []
    for group, level in zip(groups, true_levels, strict=True):
        cal = group.calibrate(0.0, 1.0)
        assert cal is not None
        noisy.append(cal.release(level, gen))
        level_scales.append(cal.scale)
    fitted = consistent_tree(noisy, root=1.0)
    projected = project_to_simplex(fitted[-1])
    notes = []
    if (fitted[-1] < 0).any() or (fitted[-1] > 1).any():
        notes.append(
            "the least-squares leaves left [0, 1]; projected onto the simplex (Duchi et al. 2008)"
        )
    tree = [projected]
    while tree[0].size > 1:
        tree.insert(0, tree[0].reshape(-1, 2).sum(axis=1))
    tree[0] = np.ones(1)
    values = np.empty_like(x)
    values[list(perm)] = projected
    raw = np.empty_like(x)
    raw[list(perm)] = noisy[-1]
    return ProportionsResult(
        values=frozen(values),
        sanitized=frozen(raw),
        scales=frozen(np.full(x.size, level_scales[-1])),
        order=perm,
        tree=tuple(frozen(t) for t in tree),
        noisy_tree=tuple(frozen(t) for t in noisy),
        notes=tuple(notes),
        **common,
    )
