"""Many quantiles per group for one budget: exact, float-safe, vectorised over groups.

Which method, and why
---------------------
To release ``m`` quantiles ``q_1 < ... < q_m`` of each group, dpframe runs the recursive
**ApproximateQuantiles** of Kaplan, Schnapp & Stemmer (ICML 2022): release the middle
target on the data with one single-quantile selection, split the data at the released
value, and recurse on the left part with the targets rescaled to ``q / q_j`` and on the
right part with ``(q - q_j) / (1 - q_j)``. The parts of one level are disjoint, so a row
takes part in one selection per level and a level costs its ε once; there are only
``D = ceil(log2(m + 1))`` levels, so the budget is split ``D`` ways instead of ``m`` ways
(OpenDP and Tumult split ε evenly over the ``m`` quantiles: with 19 quantiles dpframe
gives each selection about 4 times their ε). Each sub-problem only considers the
candidates between its parents' outputs, so the released quantiles are non-decreasing in
``q`` and inside ``[lower, upper]`` by construction.

One selection is **permute-and-flip** (McKenna & Sheldon 2020), the exponential
mechanism's better sibling (never worse in expected error), over the edges of a
:class:`Grid`, with the integer score ``s(c) = |den * L(c) - num * n|`` (``L(c)``: rows in
the bins left of ``c``; ``n``: the sub-problem's rows; ``q = num / den`` exactly, from
``q``'s decimal repr, so 0.1 is 1/10). One added or removed row moves ``s`` by at most
``dS = max(num, den - num)``. Each candidate gets an independent coin
``Bernoulli(exp(-x_i))`` with ``x_i = eps_level * (s_i - s_min) / (2 * rows * dS)`` and the
output is uniform among the heads (the best candidate's coin is always heads): exactly
PF's law (a random order and the first head), drawn for all candidates and groups at once.

Exact and float-safe: a coin is ``U < exp(-x)`` for a uniform ``U`` built from 53 random
bits (and 64 more at a time when needed); a float pre-filter decides it when its proven
error bound allows, exact rational bounds on ``exp(-x)`` from ``decimal`` otherwise
(:func:`dpframe.mechanisms.discrete._exp_bounds`). The uniform choice among heads is one
integer draw. The output is an edge of the public grid: no floating-point value computed
from the data is released.

How its error behaves
---------------------
The error is in *ranks*: ``|L(q_hat) - q n|``, the rows between the released value and
the true quantile. It does not grow with ``n``: with ``m`` targets, ``B`` bins, ``rows``
rows per person and ``eps_level = epsilon / (D * sides)``, one selection misses its
target by more than ``2 rows max(q, 1 - q) / eps_level * ln(K / beta)`` (``K <= B + 1``
candidates) with probability at most ``beta`` (each bad candidate needs its coin: ``P(out
= c) <= exp(-x_c)``). A quantile's error adds its ancestors' errors, each scaled by a
factor below 1 (:meth:`QuantilePlan.rank_error` gives the bound at a level, for a stated
design before anything is spent). So the relative rank error ``|F(q_hat) - q|`` falls as
``1 / n``; it grows only with ``log(B)``, ``log(m)`` (through ``D``) and ``1 / epsilon``.
Rows tied inside one bin are not counted: a released value is an edge, so a bin holding
many rows costs up to its rows in rank -- choose the grid finer than the precision
wanted.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.quantile import plan_quantiles, uniform_grid
>>> grid = uniform_grid(0.0, 100.0, bins=100)
>>> plan = plan_quantiles([0.25, 0.5, 0.75], grid, epsilon=1.0)
>>> values = np.arange(100.0)
>>> hist = np.bincount(grid.bin_index(values), minlength=grid.bins)[None, :]
>>> out = plan.draw(hist, np.random.default_rng(0))
>>> out.shape, bool(np.all(np.diff(out, axis=1) >= 0))
((1, 3), True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.core.constraints import QUANTILE_MAX_BINS, check, check_bounds, check_int
from dpframe.core.units import PrivacyUnit, missing_bounds
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.discrete import _exp_bounds

__all__ = [
    "DEFAULT_BINS",
    "Grid",
    "QuantilePlan",
    "grid_from_edges",
    "levels",
    "plan_quantiles",
    "quantile_sides",
    "quantiles_of",
    "uniform_grid",
]

#: Bins of a grid built from the bounds when neither ``bins`` nor ``resolution`` is given.
DEFAULT_BINS = 1000

#: Candidates (coins) handled at once: the work arrays stay a few MB.
_CHUNK = 1 << 18

#: The float pre-filter's relative error bound on ``exp(-x)``: ``2**-40`` covers the libm
#: error (``LIBM_RELATIVE_ERROR = 2**-46`` in :mod:`~dpframe.mechanisms.discrete`) and the
#: roundings of the comparison; ``x * 2**-48`` covers ``x``'s own rounding (three roundings
#: of ``2**-53`` each: ``d`` to float, the factor to float, their product).
_REL_CONST = 2.0**-40
_REL_PER_X = 2.0**-48
#: ``exp`` is evaluated at ``min(x, 700)``: past it ``exp(-x) < 2**-1009``, far below the
#: smallest nonzero ``U`` (``2**-53``), and the bound still holds (it only over-states).
_X_CLAMP = 700.0
_U_BITS = 53
_U_SCALE = 2.0**-_U_BITS
#: Scores are int64 while ``den * n < 2**62``; Python integers beyond.
_INT_SAFE = 2**62


# -- the grid --------------------------------------------------------------------------


@dataclass(frozen=True)
class Grid:
    """Candidate values of a quantile: sorted edges ``e_0 < e_1 < ... < e_B``.

    Bin ``k`` holds the values ``x`` with ``e_k <= x < e_{k+1}`` (the last bin also holds
    ``x == e_B``); values are clipped to ``[e_0, e_B]`` first. A released quantile is an
    edge. Build one with :func:`uniform_grid` or :func:`grid_from_edges`.

    Parameters
    ----------
    edges : numpy.ndarray
        float64, shape ``(B + 1,)``, strictly increasing, finite, ``B >= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> grid = Grid(np.array([0.0, 1.0, 2.0]))
    >>> grid.bins, grid.lower, grid.upper
    (2, 0.0, 2.0)
    >>> grid.bin_index(np.array([-5.0, 0.0, 0.5, 1.0, 2.0, 9.0])).tolist()
    [0, 0, 0, 1, 1, 1]
    """

    edges: np.ndarray

    def __post_init__(self) -> None:
        edges = _checked_edges(self.edges, "edges")
        object.__setattr__(self, "edges", edges)

    @property
    def bins(self) -> int:
        """The number of bins ``B`` (one less than the candidates).

        Examples
        --------
        >>> uniform_grid(0, 1, bins=4).bins
        4
        """
        return int(self.edges.size - 1)

    @property
    def lower(self) -> float:
        """The first edge ``e_0``: the smallest value a quantile can take.

        Examples
        --------
        >>> uniform_grid(-1, 1, bins=4).lower
        -1.0
        """
        return float(self.edges[0])

    @property
    def upper(self) -> float:
        """The last edge ``e_B``: the largest value a quantile can take.

        Examples
        --------
        >>> uniform_grid(-1, 1, bins=4).upper
        1.0
        """
        return float(self.edges[-1])

    def bin_index(self, values: np.ndarray) -> np.ndarray:
        """The bin of each value: int64 in ``[0, B - 1]``.

        THE binning rule, by comparisons with the edges only (no arithmetic): a value
        below ``e_0`` is in bin 0, at or above ``e_B`` in bin ``B - 1``, else in the bin
        ``k`` with ``e_k <= x < e_{k+1}``. Every engine must match it bit for bit.

        Parameters
        ----------
        values : array_like of float
            The values (NaN refused; infinities are clipped like any value).

        Returns
        -------
        numpy.ndarray
            int64, the shape of ``values``.

        Raises
        ------
        InvalidDataError
            If ``values`` holds NaN or is not numeric.

        Examples
        --------
        >>> import numpy as np
        >>> uniform_grid(0, 10, bins=10).bin_index(np.array([0.0, 9.99, 10.0, 3.0])).tolist()
        [0, 9, 9, 3]
        """
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf":
            raise InvalidDataError(
                f"values must be numbers to bin, got dtype {arr.dtype}; cast the column "
                "to a numeric type"
            )
        arr = arr.astype(np.float64, copy=False)
        if np.isnan(arr).any():
            raise InvalidDataError(
                "values hold NaN, which no bin holds; drop or fill them first (nulls='drop')"
            )
        index = np.searchsorted(self.edges, arr, side="right").astype(np.int64) - 1
        return np.clip(index, 0, self.bins - 1)


def _checked_edges(edges: Any, name: str) -> np.ndarray:
    try:
        arr = np.array(edges, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name} must be a sequence of numbers, got {edges!r:.80}"
        ) from None
    raw = np.asarray(edges)
    if raw.dtype.kind not in "iuf":
        raise InvalidParameterError(
            f"{name} must be numbers (not strings or booleans), got dtype {raw.dtype}"
        )
    if arr.ndim != 1 or arr.size < 2:
        raise InvalidParameterError(
            f"{name} must be a flat sequence of at least 2 numbers (the first and last "
            f"are the bounds), got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise InvalidParameterError(
            f"{name} must be finite numbers; got {arr[~np.isfinite(arr)][:3]}"
        )
    if not (np.diff(arr) > 0).all():
        raise InvalidParameterError(
            f"{name} must be strictly increasing (each candidate once, in order); "
            "sort them and drop repeats"
        )
    check("bins", arr.size - 1, name=f"{name} (its bins)")
    arr.setflags(write=False)
    return arr


def uniform_grid(
    lower: float, upper: float, *, resolution: float | None = None, bins: int | None = None
) -> Grid:
    """A grid of equal steps from ``lower`` to ``upper``.

    The edges are ``lower + k * step`` and the last one is exactly ``upper``; ``step`` is
    ``resolution`` (the last bin may be shorter), else ``(upper - lower) / bins``.

    Parameters
    ----------
    lower, upper : float
        The public bounds (``lower < upper``): the smallest and largest candidates.
    resolution : float, optional
        The step between candidates. Not with ``bins``.
    bins : int, optional
        The number of bins; default :data:`DEFAULT_BINS` (1000) when ``resolution`` is
        not given either.

    Returns
    -------
    Grid

    Raises
    ------
    InvalidParameterError
        Naming ``lower``/``upper``, ``resolution`` or ``bins``: bounds not finite or not
        increasing, both ``resolution`` and ``bins`` given, too many bins
        (:data:`~dpframe.core.constraints.QUANTILE_MAX_BINS`), or a step too small for
        float64 at these bounds.

    Examples
    --------
    >>> uniform_grid(0, 1, bins=4).edges.tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> uniform_grid(0, 1, resolution=0.4).edges.tolist()
    [0.0, 0.4, 0.8, 1.0]
    """
    lo, hi = check_bounds(lower, upper)
    if resolution is not None and bins is not None:
        raise InvalidParameterError(
            "resolution and bins: pass one of them (the step between candidates, or their "
            "number), not both"
        )
    if resolution is not None:
        step = check("resolution", resolution)
        ratio = (hi - lo) / step
        if not ratio <= QUANTILE_MAX_BINS:
            raise InvalidParameterError(
                f"resolution={step!r} makes more than {QUANTILE_MAX_BINS} bins from "
                f"[{lo!r}, {hi!r}]; pass a larger resolution"
            )
        count = max(1, math.ceil(ratio))
    else:
        count = check("bins", DEFAULT_BINS if bins is None else bins)
        step = (hi - lo) / count
    edges = lo + np.arange(count + 1, dtype=np.float64) * step
    edges[-1] = hi
    edges = edges[edges <= hi]
    if edges[-1] != hi:  # pragma: no cover - the last edge is set to hi above
        edges = np.append(edges, hi)
    if not (np.diff(edges) > 0).all() or edges.size < 2:
        raise InvalidParameterError(
            f"{'resolution' if resolution is not None else 'bins'}: the step "
            f"{step!r} is too small for float64 at bounds [{lo!r}, {hi!r}] (two edges "
            "round to the same number); choose a coarser grid"
        )
    return Grid(edges)


def grid_from_edges(edges: Sequence[float]) -> Grid:
    """A grid of declared candidates (public, e.g. income brackets).

    Parameters
    ----------
    edges : sequence of float
        At least two finite numbers, strictly increasing. The first and last are the
        bounds values are clipped to.

    Returns
    -------
    Grid

    Raises
    ------
    InvalidParameterError
        Naming ``edges``: not numbers, not finite, not strictly increasing, fewer than 2.

    Examples
    --------
    >>> grid_from_edges([0, 10_000, 20_000, 50_000, 100_000]).bins
    4
    """
    return Grid(_checked_edges(edges, "edges"))


# -- accounting ------------------------------------------------------------------------


def quantile_sides(unit: PrivacyUnit, neighbours: str, *, pooled: bool = False) -> tuple[int, int]:
    """``(rows, sides)`` of a quantile release: how one person can move its selections.

    A *side* is one add/remove of at most ``rows`` rows of one person in one group; per
    level a side costs at most ``epsilon_level``. A grouped release: ``rows =
    max_rows``, ``sides = max_groups`` (twice under ``"substitute"``: a removal and an
    addition, which may land in different parts of a level). A pool over all groups (one
    selection over the whole column): ``rows = max_rows * max_groups``, ``sides = 2``
    under ``"substitute"``, else 1.

    Parameters
    ----------
    unit : PrivacyUnit
        The privacy unit (the record unit: ``rows = 1``, one group per person).
    neighbours : {"substitute", "add_remove"}
        The neighbour relation of the accountant.
    pooled : bool
        True for a release over the whole column (no groups).

    Returns
    -------
    tuple of int
        ``(rows, sides)``, for :func:`plan_quantiles`.

    Raises
    ------
    InvalidParameterError
        If ``neighbours`` is not a relation, or a person unit does not state
        ``max_groups``.

    Examples
    --------
    >>> from dpframe.core.units import PrivacyUnit
    >>> quantile_sides(PrivacyUnit(), "substitute")
    (1, 2)
    >>> quantile_sides(PrivacyUnit("pid", max_rows=3, max_groups=2), "add_remove")
    (3, 2)
    >>> quantile_sides(PrivacyUnit("pid", max_rows=3, max_groups=2), "substitute", pooled=True)
    (6, 2)
    """
    check("neighbours", neighbours)
    if not isinstance(unit, PrivacyUnit):
        raise InvalidParameterError(f"unit must be a PrivacyUnit, got {type(unit).__name__}")
    if unit.person is not None:
        problem = missing_bounds(unit.person, {b: getattr(unit, b) for b in unit.stated})
        if problem is not None:
            raise InvalidParameterError(problem)
    per = 2 if neighbours == "substitute" else 1
    if pooled:
        return unit.max_rows * unit.max_groups, per
    return unit.max_rows, unit.max_groups * per


def levels(m: int) -> int:
    """The levels ``D = ceil(log2(m + 1))`` of the recursion over ``m`` targets.

    Examples
    --------
    >>> [levels(m) for m in (1, 2, 3, 4, 7, 8, 19)]
    [1, 2, 2, 3, 3, 4, 5]
    """
    m = check_int("m", m, 1, "at least one quantile")
    return (m).bit_length()  # ceil(log2(m + 1)) exactly, in integers


# -- the recursion's shape (data-free) -------------------------------------------------


@dataclass(frozen=True)
class _Node:
    """One selection: target ``j`` between the released targets ``a`` and ``b`` (``-1``
    and ``m`` are the ends), at the rescaled target ``num / den``."""

    j: int
    a: int
    b: int
    num: int
    den: int


def _fraction(q: float) -> Fraction:
    return Fraction(repr(float(q)))


def _tree(q: tuple[float, ...]) -> list[list[_Node]]:
    """The selections of each level, from the root down (the same for every group)."""
    fq = [Fraction(0), *(_fraction(v) for v in q), Fraction(1)]  # fq[t + 1] is target t
    out: list[list[_Node]] = []
    todo = [(0, len(q))]
    while todo:
        level, nxt = [], []
        for i0, i1 in todo:
            j = (i0 + i1) // 2
            a, b = i0 - 1, i1
            rel = (fq[j + 1] - fq[a + 1]) / (fq[b + 1] - fq[a + 1])
            level.append(_Node(j, a, b, rel.numerator, rel.denominator))
            nxt += [(s, e) for s, e in ((i0, j), (j + 1, i1)) if s < e]
        out.append(level)
        todo = nxt
    return out


def _below(x: Fraction) -> float:
    """The largest float ``<= x``."""
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


# -- the plan --------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantilePlan:
    """A quantile release's plan: targets, grid, cost and the per-level budget.

    Made by :func:`plan_quantiles`; reads no data. ``check(hist)`` checks the exact
    input, ``draw(hist, rng)`` releases, ``rank_error(level)`` states the error before
    anything is spent.

    Attributes
    ----------
    q : tuple of float
        The targets, strictly increasing, each in (0, 1).
    grid : Grid
        The candidates.
    epsilon : float
        What the release costs (pure ε; a zCDP accountant charges it as a pure-ε
        release).
    rows, sides : int
        From :func:`quantile_sides`.
    levels : int
        ``D = ceil(log2(m + 1))``.
    epsilon_level : float
        The ε each level uses: the largest float ``<= epsilon / (D * sides)``, used as
        the exact rational it is.

    Examples
    --------
    >>> plan = plan_quantiles([0.1, 0.5, 0.9], uniform_grid(0, 1, bins=10), 1.0, sides=2)
    >>> plan.levels, plan.epsilon_level
    (2, 0.25)
    """

    q: tuple[float, ...]
    grid: Grid
    epsilon: float
    rows: int
    sides: int
    levels: int
    epsilon_level: float

    def check(self, hist: np.ndarray) -> None:
        """Refuse a histogram that is not ``(groups, bins)`` non-negative integers.

        Parameters
        ----------
        hist : numpy.ndarray
            Integer array ``(groups, bins)``: the rows of each group in each bin (by
            :meth:`Grid.bin_index`).

        Raises
        ------
        InvalidDataError
            A wrong shape, a non-integer dtype, a negative count, or a group of more
            than ``2**61`` rows. Nothing is drawn.

        Examples
        --------
        >>> import numpy as np
        >>> plan = plan_quantiles(0.5, uniform_grid(0, 1, bins=2), 1.0)
        >>> plan.check(np.array([[1, 2]]))
        >>> plan.check(np.array([[1, -2]]))
        Traceback (most recent call last):
        ...
        dpframe.errors.InvalidDataError: hist must hold counts >= 0, got -2
        """
        _checked_hist(hist, self.grid.bins)

    def draw(self, hist: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Release the quantiles of every group.

        Parameters
        ----------
        hist : numpy.ndarray
            Integer array ``(groups, bins)`` (see :meth:`check`).
        rng : numpy.random.Generator
            The secure source (only its integer draws are used).

        Returns
        -------
        numpy.ndarray
            float64 ``(groups, m)``: the released edges, non-decreasing along axis 1 and
            inside ``[lower, upper]``; every group is released, an empty one too
            (uniformly at random among the candidates, ordered).

        Examples
        --------
        >>> import numpy as np
        >>> grid = uniform_grid(0, 4, bins=4)
        >>> plan = plan_quantiles([0.25, 0.75], grid, epsilon=50.0)
        >>> hist = np.array([[100, 100, 100, 100], [0, 0, 0, 0]])
        >>> out = plan.draw(hist, np.random.default_rng(1))
        >>> out[0].tolist()
        [1.0, 3.0]
        >>> bool(np.all(np.diff(out, axis=1) >= 0))
        True
        """
        counts = _checked_hist(hist, self.grid.bins)
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameterError(
                f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
            )
        groups = counts.shape[0]
        m = len(self.q)
        index = np.empty((groups, m), dtype=np.int64)
        bins = self.grid.bins
        tree = _tree(self.q)
        eps = Fraction(self.epsilon_level)
        per_chunk = max(1, _CHUNK // (bins + 1))
        for start in range(0, groups, per_chunk):
            part = slice(start, min(groups, start + per_chunk))
            index[part] = _draw_indices(counts[part], tree, m, eps, self.rows, rng)
        return self.grid.edges[index]

    def rank_error(self, level: float = 0.95) -> float:
        """A data-free bound, in rows, on each quantile's rank error at ``level``.

        For each released quantile ``|L(q_hat) - q n| <= rank_error(level)`` with
        probability at least ``level`` (rows tied inside one bin not counted). One
        selection at relative target ``q' = num / den`` over ``K <= B + 1`` candidates
        misses its sub-problem's target by more than ``t(beta) = 2 rows max(q', 1 - q') /
        eps_level * ln(K / beta)`` rows with probability at most ``beta`` (``P(out = c)
        <= exp(-x_c)`` and a union over the candidates). The sub-problem of target ``t``
        lies between the released targets ``a`` and ``b`` (the ends: no error), so its
        error is ``E_t <= t_t(beta) + (1 - q'_t) E_a + q'_t E_b``. With ``beta = (1 -
        level) / d_t`` for the ``d_t`` selections ``t`` depends on (a union bound), the
        bound is the largest ``E_t`` over the targets.

        Parameters
        ----------
        level : float
            The probability in (0, 1) the bound holds with.

        Returns
        -------
        float
            Rows.

        Examples
        --------
        >>> plan = plan_quantiles(0.5, uniform_grid(0, 1, bins=99), epsilon=1.0)
        >>> round(plan.rank_error(0.95), 3)   # 2 * 0.5 / 1 * ln(100 / 0.05)
        7.601
        """
        beta_total = 1.0 - _check_level(level)
        nodes = {node.j: node for lvl in _tree(self.q) for node in lvl}
        log_k = math.log(self.grid.bins + 1)

        def depth(t: int) -> int:  # the selections t's output depends on
            node = nodes.get(t)
            return 0 if node is None else 1 + max(depth(node.a), depth(node.b))

        def bound(t: int, beta: float) -> float:
            node = nodes.get(t)
            if node is None:  # an end: no error
                return 0.0
            qr = node.num / node.den
            own = 2 * self.rows * max(qr, 1 - qr) / self.epsilon_level * (log_k - math.log(beta))
            return own + (1 - qr) * bound(node.a, beta) + qr * bound(node.b, beta)

        return max(bound(t, beta_total / depth(t)) for t in range(len(self.q)))


def _check_level(level: Any) -> float:
    """A probability strictly in (0, 1) (the level of an error bound)."""
    x = float(check("bound", level, name="level"))
    if not 0.0 < x < 1.0:
        raise InvalidParameterError(f"level must be in (0, 1), e.g. 0.95; got {x!r}")
    return x


def _checked_hist(hist: Any, bins: int) -> np.ndarray:
    arr = np.asarray(hist)
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        raise InvalidDataError(f"hist must be integer counts (groups, bins), got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != bins:
        raise InvalidDataError(
            f"hist must have shape (groups, {bins}) (one count per bin of the grid), got "
            f"shape {arr.shape}"
        )
    if arr.size and arr.min() < 0:
        raise InvalidDataError(f"hist must hold counts >= 0, got {arr.min()}")
    if arr.size and (arr.max() > 2**61 or arr.sum(axis=1, dtype=np.float64).max() > 2**61):
        raise InvalidDataError("hist: a group holds more than 2**61 rows; refusing to overflow")
    return arr.astype(np.int64, copy=False)


def plan_quantiles(
    q: float | Sequence[float],
    grid: Grid,
    epsilon: float,
    *,
    rows: int = 1,
    sides: int = 1,
) -> QuantilePlan:
    """Plan the release of the quantiles ``q`` of each group, for ``epsilon`` in all.

    Parameters
    ----------
    q : float or sequence of float
        The targets, strictly increasing, each in (0, 1) (0.5: the median). Each is taken
        as the exact fraction of its decimal repr (0.1 is 1/10).
    grid : Grid
        The candidates.
    epsilon : float
        What the whole release costs (all quantiles, all groups).
    rows, sides : int
        From :func:`quantile_sides` (1, 1: one row per person, add/remove, one group).

    Returns
    -------
    QuantilePlan

    Raises
    ------
    InvalidParameterError
        Naming ``q``, ``grid``, ``epsilon``, ``rows`` or ``sides``.

    Examples
    --------
    >>> plan = plan_quantiles([0.25, 0.5, 0.75], uniform_grid(0, 10, bins=100), 1.0)
    >>> plan.levels, plan.epsilon_level
    (2, 0.5)
    """
    targets = check("q", q)
    if not isinstance(grid, Grid):
        raise InvalidParameterError(
            f"grid must be a Grid (uniform_grid or grid_from_edges), got {type(grid).__name__}"
        )
    eps = check("epsilon", epsilon)
    rows = check_int("rows", rows, 1, "a person has at least one row")
    sides = check_int("sides", sides, 1, "a release has at least one side")
    depth = levels(len(targets))
    eps_level = _below(Fraction(eps) / (depth * sides))
    if eps_level <= 0.0:
        raise InvalidParameterError(
            f"epsilon={eps!r} split over {depth} levels and {sides} sides underflows a "
            "float; pass a larger epsilon"
        )
    return QuantilePlan(targets, grid, eps, rows, sides, depth, eps_level)


def quantiles_of(
    values: np.ndarray,
    q: float | Sequence[float],
    grid: Grid,
    epsilon: float,
    rng: np.random.Generator,
    *,
    rows: int = 1,
    sides: int = 1,
) -> np.ndarray:
    """The quantiles of one group of values (for benchmarks and tests).

    Parameters
    ----------
    values : array_like of float
        The group's values (clipped to the grid's bounds by :meth:`Grid.bin_index`).
    q, grid, epsilon, rows, sides
        As for :func:`plan_quantiles`.
    rng : numpy.random.Generator
        The source.

    Returns
    -------
    numpy.ndarray
        float64 ``(m,)``, non-decreasing, inside the grid's bounds.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> out = quantiles_of(rng.uniform(0, 1, 10_000), [0.1, 0.5, 0.9],
    ...                    uniform_grid(0, 1, bins=100), 1.0, rng)
    >>> bool(np.all(np.abs(out - [0.1, 0.5, 0.9]) <= 0.02))
    True
    """
    plan = plan_quantiles(q, grid, epsilon, rows=rows, sides=sides)
    flat = np.asarray(values).ravel()
    hist = np.bincount(grid.bin_index(flat), minlength=grid.bins).astype(np.int64)
    return plan.draw(hist[None, :], rng)[0]


# -- the draw --------------------------------------------------------------------------


def _draw_indices(
    counts: np.ndarray,
    tree: list[list[_Node]],
    m: int,
    eps: Fraction,
    rows: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """The released edge indices ``(groups, m)`` of a block of groups."""
    groups, bins = counts.shape
    cum = np.zeros((groups, bins + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=cum[:, 1:])
    big = (
        bool(groups)
        and max(n.den for lvl in tree for n in lvl) * int(cum[:, -1].max()) >= _INT_SAFE
    )
    # the edge index of each released target; column m + 1 is 0 (the start), m the end
    found = np.empty((groups, m + 2), dtype=np.int64)
    found[:, m] = bins
    found[:, m + 1] = 0
    for level in tree:
        found[:, [n.j for n in level]] = _select_level(cum, found, level, eps, rows, big, rng)
    return found[:, :m]


def _select_level(
    cum: np.ndarray,
    found: np.ndarray,
    level: list[_Node],
    eps: Fraction,
    rows: int,
    big: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    """One level's selections for every group: ``(groups, len(level))`` edge indices."""
    groups, width = cum.shape
    k = len(level)
    col = lambda t: t if t >= 0 else found.shape[1] - 1  # noqa: E731 - -1 is the start
    lo = found[:, [col(n.a) for n in level]]  # (groups, k)
    hi = found[:, [col(n.b) for n in level]]
    seg_len = (hi - lo + 1).ravel()
    seg_end = np.cumsum(seg_len)
    seg_start = seg_end - seg_len
    total = int(seg_end[-1])
    row_base = (np.arange(groups, dtype=np.int64) * width)[:, None]
    flat_cum = cum.ravel()
    base = (row_base + lo).ravel()
    left = flat_cum[base]
    n_sub = flat_cum[(row_base + hi).ravel()] - left
    pos = np.arange(total, dtype=np.int64) - np.repeat(seg_start, seg_len)
    below = flat_cum[np.repeat(base, seg_len) + pos] - np.repeat(left, seg_len)
    node_of_seg = np.tile(np.arange(k), groups)
    nums = np.array([n.num for n in level], dtype=object if big else np.int64)
    dens = np.array([n.den for n in level], dtype=object if big else np.int64)
    if big:
        below, n_sub = below.astype(object), n_sub.astype(object)
    score = np.abs(
        np.repeat(dens[node_of_seg], seg_len) * below
        - np.repeat(nums[node_of_seg] * n_sub, seg_len)
    )
    gap = score - np.repeat(np.minimum.reduceat(score, seg_start), seg_len)
    factors = [eps / (2 * rows * max(n.num, n.den - n.num)) for n in level]
    heads = _coins(gap, np.repeat(node_of_seg, seg_len), factors, rng)
    count = np.add.reduceat(heads.astype(np.int64), seg_start)
    pick = rng.integers(0, count, dtype=np.int64)  # uniform among each part's heads
    running = np.cumsum(heads, dtype=np.int64)
    before = running[seg_start] - heads[seg_start]
    where = np.searchsorted(running, before + pick + 1, side="left")
    return (lo.ravel() + where - seg_start).reshape(groups, k)


def _coins(
    gap: np.ndarray, node: np.ndarray, factors: list[Fraction], rng: np.random.Generator
) -> np.ndarray:
    """Independent exact coins ``Bernoulli(exp(-gap * factors[node]))``.

    A coin is heads iff ``U < exp(-x)`` with ``U`` uniform in [0, 1): its first 53 bits
    ``u`` place ``U`` in ``[u, u + 1) / 2**53``; the float pre-filter decides when that
    interval lies clear of ``exp(-x_f) (1 +- rel)``, the exact fallback otherwise.
    """
    size = gap.size
    scale = np.array([float(f) for f in factors], dtype=np.float64)
    x = gap.astype(np.float64) * scale[node]
    np.minimum(x, _X_CLAMP, out=x)
    rel = x * _REL_PER_X
    rel += _REL_CONST
    p = np.exp(-x)
    u = rng.integers(0, 1 << _U_BITS, size=size, dtype=np.int64)
    low = u * _U_SCALE  # exact: u < 2**53
    heads = (low + _U_SCALE) <= p * (1.0 - rel)
    tails = low >= p * (1.0 + rel)
    undecided = np.flatnonzero(~(heads | tails))
    for i in undecided:
        heads[i] = _exact_coin(int(u[i]), int(gap[i]) * factors[int(node[i])], rng)
    return heads


def _exact_coin(u: int, x: Fraction, rng: np.random.Generator) -> bool:
    """``U < exp(-x)`` exactly, for ``U`` in ``[u, u + 1) / 2**53`` and more bits drawn
    as needed."""
    bits, prec = _U_BITS, 30
    while True:
        lo_p, hi_p = _exp_bounds(x.numerator, x.denominator, prec)
        low = Fraction(u, 1 << bits)
        high = Fraction(u + 1, 1 << bits)
        if high <= lo_p:
            return True
        if low >= hi_p:
            return False
        word = int(rng.integers(0, 1 << 63, dtype=np.int64))
        u = (u << 63) | word
        bits += 63
        prec += 20
