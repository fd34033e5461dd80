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

One selection is the **exponential mechanism** (McSherry & Talwar 2007) over
*split candidates*: an edge ``e_c`` of a :class:`Grid` together with a split position
``j = 0 .. SPLITS`` inside the sub-problem's rows tied at ``e_c``. Candidate ``(c, j)``
says "the target lies at rank ``r = L(c) + floor(j T(c) / SPLITS)``" (``L(c)``: the
sub-problem's rows below ``e_c``, ``T(c)``: equal to it) and scores the integer

    s(c, j) = |den * r - num * n|

(``n``: the sub-problem's rows; ``q = num / den`` exactly, from ``q``'s decimal repr, so
0.1 is 1/10): ``den`` times the distance from the target rank ``q n`` to the split. The
released value is ``e_c``; the recursion splits the sub-problem *at rank r*: its rows of
rank ``< r`` go left (candidates ``e_a .. e_c``), the others right (``e_c .. e_b``),
where rows of one cell are interchangeable (they are equal). Why the split position:
real data are tied (delays in whole minutes on a 1-minute grid: 2-3 % of a column at one
value). A split at a value sends all rows tied at it to one side, so every target below
is rescaled as if the split were at ``q_j n`` when it is up to a whole tie block away --
on such data the recursion's error stopped falling with ``n`` at 0.1-0.4 % of the rows
(0.09 % for quartiles, 0.4 % for deciles at a million rows, where OpenDP's quantile, one
selection per target, reaches 0.01 %). Splitting inside the tie at the selected rank
removes that bias: the sub-problems are exactly the rows below and above the released
rank. A last selection (no target left below or above it: every selection of a single
median) splits nothing, so its candidates are the edges alone, scored ``den`` times the
distance from ``q n`` to the edge's ranks ``[L, L + T]``: rows tied at an edge cost
nothing, and ``B + 1`` candidates, not ``(B + 1) (SPLITS + 1)``, enter its error.
The exact input is a histogram of ``2B + 1`` *cells* per group (:meth:`Grid.cell_index`):
the rows equal to each edge and the rows strictly between two.

Privacy: a sub-problem is the group's rows of ranks ``r_a <= r < r_b`` between its
parents' splits. One added (or removed) row changes exactly one sub-problem of each level
by that row: a split at ``L + floor(j T / SPLITS)`` puts it on one side and leaves the
other side's rows as they were (``floor(j (T + 1) / SPLITS)`` is ``floor(j T /
SPLITS)`` or one more), so a level's selections compose in parallel. In that
sub-problem ``r`` and ``n`` move by at most 1 each, ``r`` only with ``n`` and the same
way, so ``s`` by at most ``dS = max(num, den - num)`` (brute-forced in the tests). The
mechanism's law is ``P(c, j) ~ exp(-x)``, ``x = eps_level * (s - s_min) / (2 * rows *
dS)``: ``eps_level``-DP for a sub-problem whose person moves its scores by ``rows * dS``.

Exact and float-safe: the law is drawn by rejection (:func:`_select_level`): a proposal
from tiers of candidates weighted ``2**(-4 t)`` (an exact integer draw), accepted with
probability ``exp(-x) 2**(4 t)`` by a coin ``U < exp(-x)`` on a uniform ``U``, of which
only as many bits are drawn as the decision needs; a float pre-filter decides when its
proven error bound allows (relative error ``2**-40 + x 2**-48`` on ``exp(-x)``, libm
assumed within ``2**-46`` as in :mod:`~dpframe.mechanisms.discrete`), exact rational bounds
on ``exp(-x)`` from ``decimal`` otherwise, drawing 63 more bits of ``U`` until they decide.
The score is V-shaped in the candidates' order (``r`` never decreases), so each tier is
two intervals around the best candidate, found by binary search, in integers. The output
is an edge of the public grid: no floating-point value computed from the data is
released. Scores are exact integers (int64 while ``den * n < 2**61``, Python integers
beyond; no overflow, e.g. 1e9 rows a group). Permute-and-flip (never worse than the
exponential mechanism in expected score) has no exact sampler at this speed over
``(B + 1) (SPLITS + 1)`` candidates; measured on the benchmark's data its rank errors
equalled the exponential mechanism's within their standard errors.

Time: the number of proposals is random (each accepted with probability at least
``exp(-2.8)``, about 1/3 on average) and independent of where the quantile lies only
in law, as :mod:`~dpframe.mechanisms.discrete`'s fallback is. Speed: 1e4 groups x 1000
bins x 3 quantiles draw in about 0.16 s, a third of a float Gumbel-max exponential
mechanism over the edges alone (``benchmarks/bench_quantile_draw.py``).

How its error behaves
---------------------
The error is in *ranks*: the distance from ``q n`` to the released value's ranks ``[L,
L + T]`` (rows below it, and equal to it), the rows between it and the true quantile; it
does not grow with ``n`` (so the relative rank error ``|F(q_hat) - q|`` falls as ``1 /
n``). One selection at relative target ``q'`` over ``M = (B + 1) (SPLITS + 1)``
candidates, with ``eps_level = epsilon / (D * sides)``, puts its split more than

    t(beta) = 2 * rows * max(q', 1 - q') / eps_level * ln(M / beta)

rows further from its target than its best candidate does with probability at most
``beta`` (the exponential mechanism: ``P(out = u) <= exp(-x_u)`` since the best
candidate's weight is 1, and a union bound over the candidates); the released edge's
ranks hold the split, so its rank error is at most the split's. A sub-problem lies
between two released splits ``a`` and ``b`` (or the ends, which have no error), whose
errors move its target: ``E_t <= t_t(beta) + (1 - q'_t) E_a + q'_t E_b``. With ``beta =
(1 - level) / d_t`` for the ``d_t <= D`` selections target ``t`` depends on,
:meth:`QuantilePlan.rank_error` is the largest such ``E_t``: a data-free bound, shown
before anything is spent. It grows like ``D**2 * rows * sides / epsilon`` (a level's ε
is ``epsilon / (D sides)`` and up to ``D`` errors add) and only logarithmically with the
bins: far slower than the ``m`` ways split of one selection per quantile.

Not counted: the rows strictly inside one bin (a released value is an edge, so a
selection's best split is up to half its fullest bin's inside from its target, and a
quantile carries up to ``d_t`` such halves: choose the grid finer than the precision
wanted, 1000 bins by default), and the spacing of the split positions inside a tie (the
best of them is within ``T / (2 SPLITS) + 1`` rows of the target).

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.quantile import plan_quantiles, uniform_grid
>>> grid = uniform_grid(0.0, 100.0, bins=100)
>>> plan = plan_quantiles([0.25, 0.5, 0.75], grid, epsilon=1.0)
>>> values = np.arange(100.0)
>>> hist = np.bincount(grid.cell_index(values), minlength=grid.cells)[None, :]
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

from dpframe.core.constraints import (
    QUANTILE_MAX_BINS,
    check,
    check_bounds,
    check_int,
    check_positive,
)
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

#: Groups handled at once: the work arrays stay a few MB.
_CHUNK = 1 << 20

#: Split positions inside the rows tied at an edge: a selection picks an edge and ``j /
#: SPLITS`` of the part's rows tied at it, ``j = 0 .. SPLITS``, to send left; the
#: recursion then splits exactly there (candidates a part: ``(B + 1) (SPLITS + 1) <
#: 2**30`` for ``B <= QUANTILE_MAX_BINS``).
SPLITS = 512

#: The float pre-filter's relative error bound on ``exp(-x)``: ``2**-40`` covers the libm
#: error (``LIBM_RELATIVE_ERROR = 2**-46`` in :mod:`~dpframe.mechanisms.discrete`) and the
#: roundings of the comparison; ``x * 2**-48`` covers ``x``'s own rounding (three roundings
#: of ``2**-53`` each: ``d`` to float, the factor to float, their product).
_REL_CONST = 2.0**-40
_REL_PER_X = 2.0**-48
#: ``exp`` is evaluated at ``min(x, 700)``: past it ``exp(-x) < 2**-1009``, far below the
#: smallest nonzero ``U`` (``2**-85``), and the bound still holds (it only over-states).
_X_CLAMP = 700.0
_U_BITS = 53
#: The rejection sampler's tiers: tier ``t`` holds the candidates with ``t TIER_X <= x <
#: (t + 1) TIER_X`` and is proposed with weight ``2**(-TIER_BITS t)`` a candidate, which
#: bounds ``exp(-x)`` there (``TIER_X = 2.8 > TIER_BITS ln 2 = 2.77``); the last tier,
#: ``x >= TIERS TIER_X``, with ``2**-32``: its candidates' total weight is below 1/4 of
#: the best one's. The integer weights (``count << TIER_BITS (TIERS - t)``) stay below
#: ``2**62`` for fewer than ``2**30`` candidates.
_TIER_X = Fraction(14, 5)
_TIER_BITS = 4
_TIERS = 8
#: Scores are int64 while ``den * n < 2**61`` (a gap plus a threshold stays below 2**62);
#: Python integers beyond.
_INT_SAFE = 2**61


# -- the grid --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Grid:
    """Candidate values of a quantile: sorted edges ``e_0 < e_1 < ... < e_B``.

    The exact input of a release counts the rows of each group in ``2B + 1`` *cells*
    (:meth:`cell_index`): cell ``2k`` holds the values equal to ``e_k``, cell ``2k + 1``
    those strictly between ``e_k`` and ``e_{k+1}``; values are clipped to ``[e_0, e_B]``
    first. A released quantile is an edge. Build one with :func:`uniform_grid` or
    :func:`grid_from_edges`.

    Parameters
    ----------
    edges : numpy.ndarray
        float64, shape ``(B + 1,)``, strictly increasing, finite, ``B >= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> grid = Grid(np.array([0.0, 1.0, 2.0]))
    >>> grid.bins, grid.cells, grid.lower, grid.upper
    (2, 5, 0.0, 2.0)
    >>> grid.cell_index(np.array([-5.0, 0.0, 0.5, 1.0, 2.0, 9.0])).tolist()
    [0, 0, 1, 2, 4, 4]
    """

    edges: np.ndarray

    def __post_init__(self) -> None:
        edges = _checked_edges(self.edges, "edges")
        object.__setattr__(self, "edges", edges)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grid):
            return NotImplemented
        return bool(np.array_equal(self.edges, other.edges))

    def __hash__(self) -> int:
        return hash(self.edges.tobytes())

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

    @property
    def cells(self) -> int:
        """The cells ``2B + 1`` of a histogram on this grid (:meth:`cell_index`).

        Examples
        --------
        >>> uniform_grid(0, 1, bins=4).cells
        9
        """
        return int(2 * self.edges.size - 1)

    def cell_index(self, values: np.ndarray) -> np.ndarray:
        """The cell of each value: int64 in ``[0, 2B]``.

        THE histogram rule, by comparisons with the edges only (no arithmetic): values
        are clipped to ``[e_0, e_B]``, then cell ``2k`` holds the values equal to
        ``e_k`` and cell ``2k + 1`` those strictly between ``e_k`` and ``e_{k+1}``. So a
        value below ``e_0`` is in cell 0, above ``e_B`` in cell ``2B``. The cell is
        ``#{edges < x} + #{edges <= x} - 1``. Every engine must match it bit for bit.

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
        >>> grid = uniform_grid(0, 10, bins=10)
        >>> grid.cell_index(np.array([-1.0, 0.0, 0.5, 1.0, 9.99, 10.0, 11.0])).tolist()
        [0, 0, 1, 2, 19, 20, 20]
        """
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf":
            raise InvalidDataError(
                f"values must be numbers to histogram, got dtype {arr.dtype}; cast the "
                "column to a numeric type"
            )
        arr = arr.astype(np.float64, copy=False)
        if np.isnan(arr).any():
            raise InvalidDataError(
                "values hold NaN, which no cell holds; drop or fill them first (nulls='drop')"
            )
        x = np.clip(arr, self.edges[0], self.edges[-1])
        below = np.searchsorted(self.edges, x, side="left")
        at_or_below = np.searchsorted(self.edges, x, side="right")
        return (below + at_or_below).astype(np.int64) - 1


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
    and ``m`` are the ends), at the rescaled target ``num / den``; ``split``: targets
    below or above it are still to come (the recursion splits at its output)."""

    j: int
    a: int
    b: int
    num: int
    den: int
    split: bool


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
            children = [(s, e) for s, e in ((i0, j), (j + 1, i1)) if s < e]
            level.append(_Node(j, a, b, rel.numerator, rel.denominator, bool(children)))
            nxt += children
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

    def __post_init__(self) -> None:
        # a plan built by hand is held to plan_quantiles' rules: what it draws with
        # (epsilon_level) never exceeds what it says it costs (epsilon)
        if check("q", self.q) != self.q:
            raise InvalidParameterError("q must be a tuple of floats; use plan_quantiles")
        if not isinstance(self.grid, Grid):
            raise InvalidParameterError(f"grid must be a Grid, got {type(self.grid).__name__}")
        check("epsilon", self.epsilon)
        check_int("rows", self.rows, 1, "a person has at least one row")
        check_int("sides", self.sides, 1, "a release has at least one side")
        if self.levels != levels(len(self.q)):
            raise InvalidParameterError(
                f"levels must be ceil(log2(m + 1)) = {levels(len(self.q))}, got "
                f"{self.levels!r}; use plan_quantiles"
            )
        level = check_positive("epsilon_level", self.epsilon_level)
        if Fraction(level) > Fraction(self.epsilon) / (self.levels * self.sides):
            raise InvalidParameterError(
                f"epsilon_level={level!r} exceeds epsilon / (levels * sides); use plan_quantiles"
            )

    def check(self, hist: np.ndarray) -> None:
        """Refuse a histogram that is not ``(groups, cells)`` non-negative integers.

        Parameters
        ----------
        hist : numpy.ndarray
            Integer array ``(groups, 2B + 1)``: the rows of each group in each cell (by
            :meth:`Grid.cell_index`).

        Raises
        ------
        InvalidDataError
            A wrong shape, a non-integer dtype, a negative count, or a group of more
            than ``2**61`` rows. Nothing is drawn.

        Examples
        --------
        >>> import numpy as np
        >>> plan = plan_quantiles(0.5, uniform_grid(0, 1, bins=1), 1.0)
        >>> plan.check(np.array([[1, 2, 0]]))
        >>> plan.check(np.array([[1, -2, 0]]))
        Traceback (most recent call last):
        ...
        dpframe.errors.InvalidDataError: hist must hold counts >= 0, got -2
        """
        _checked_hist(hist, self.grid.cells)

    def draw(self, hist: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Release the quantiles of every group.

        Parameters
        ----------
        hist : numpy.ndarray
            Integer array ``(groups, 2B + 1)`` (see :meth:`check`).
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
        >>> values = np.repeat([0.5, 1.5, 2.5, 3.5], 100)
        >>> hist = np.stack([np.bincount(grid.cell_index(values), minlength=grid.cells),
        ...                  np.zeros(grid.cells, dtype=np.int64)])
        >>> out = plan.draw(hist, np.random.default_rng(1))
        >>> out[0].tolist()
        [1.0, 3.0]
        >>> bool(np.all(np.diff(out, axis=1) >= 0))
        True
        """
        counts = _checked_hist(hist, self.grid.cells)
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
        per_chunk = max(1, _CHUNK // (bins + 1))  # groups a block: (bins + 1) candidates each
        for start in range(0, groups, per_chunk):
            part = slice(start, min(groups, start + per_chunk))
            index[part] = _draw_indices(counts[part], tree, m, eps, self.rows, rng)
        return self.grid.edges[index]

    def rank_error(self, level: float = 0.95) -> float:
        """A data-free bound, in rows, on each quantile's rank error at ``level``.

        For each released quantile the distance from ``q n`` to its ranks ``[L, L + T]``
        (rows below it, and equal to it) is at most ``rank_error(level)`` with probability
        at least ``level`` (not counted: rows strictly inside one bin, and the spacing of
        the split positions inside a tie, ``T / (2 SPLITS) + 1``). One selection at
        relative target ``q' = num / den`` over ``M = (B + 1) (SPLITS + 1)`` candidates
        (``B + 1`` for a last selection, which splits nothing) misses its sub-problem's
        target by more than ``t(beta) = 2 rows max(q', 1 - q') / eps_level * ln(M /
        beta)`` rows with probability at most ``beta`` (``P(out = u)
        <= exp(-x_u)`` and a union over the candidates). The sub-problem of target ``t``
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
        >>> round(plan.rank_error(0.95), 3)   # 2 * 0.5 / 1 * ln(100 / 0.05): an edge only
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
            log_m = log_k + math.log(SPLITS + 1) if node.split else log_k
            own = 2 * self.rows * max(qr, 1 - qr) / self.epsilon_level * (log_m - math.log(beta))
            return own + (1 - qr) * bound(node.a, beta) + qr * bound(node.b, beta)

        return max(bound(t, beta_total / depth(t)) for t in range(len(self.q)))


def _check_level(level: Any) -> float:
    """A probability strictly in (0, 1) (the level of an error bound)."""
    x = float(check("bound", level, name="level"))
    if not 0.0 < x < 1.0:
        raise InvalidParameterError(f"level must be in (0, 1), e.g. 0.95; got {x!r}")
    return x


def _checked_hist(hist: Any, cells: int) -> np.ndarray:
    arr = np.asarray(hist)
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        raise InvalidDataError(
            f"hist must be integer counts (groups, cells), got dtype {arr.dtype}"
        )
    if arr.ndim != 2 or arr.shape[1] != cells:
        raise InvalidDataError(
            f"hist must have shape (groups, {cells}) (one count per cell of the grid: "
            f"Grid.cell_index), got shape {arr.shape}"
        )
    if arr.size and arr.min() < 0:
        raise InvalidDataError(f"hist must hold counts >= 0, got {arr.min()}")
    top = int(arr.max()) if arr.size else 0
    # a group's sum is at most cells * top: summed only when that could exceed 2**61
    if top > 2**61 or (top * cells > 2**61 and arr.sum(axis=1, dtype=np.float64).max() > 2**61):
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
        The group's values (clipped to the grid's bounds by :meth:`Grid.cell_index`).
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
    hist = np.bincount(grid.cell_index(flat), minlength=grid.cells).astype(np.int64)
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
    groups, cells = counts.shape
    bins = (cells - 1) // 2
    cum = np.zeros((groups, cells + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=cum[:, 1:])
    big = (
        bool(groups)
        and max(n.den for lvl in tree for n in lvl) * int(cum[:, -1].max()) >= _INT_SAFE
    )
    # each released target's edge index and split rank; column m + 1 is the start (edge
    # 0, rank 0), column m the end (edge B, rank n)
    edge = np.empty((groups, m + 2), dtype=np.int64)
    rank = np.empty((groups, m + 2), dtype=np.int64)
    edge[:, m], rank[:, m] = bins, cum[:, -1]
    edge[:, m + 1], rank[:, m + 1] = 0, 0
    for level in tree:
        cols = [n.j for n in level]
        edge[:, cols], rank[:, cols] = _select_level(cum, edge, rank, level, eps, rows, big, rng)
    return edge[:, :m]


def _select_level(
    cum: np.ndarray,
    edge: np.ndarray,
    rank: np.ndarray,
    level: list[_Node],
    eps: Fraction,
    rows: int,
    big: bool,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """One level's selections for every group: the released edge indices and split
    ranks, each ``(groups, len(level))``.

    A part (a group's sub-problem) between the released targets ``a`` and ``b`` holds the
    group's rows of ranks ``r_a <= r < r_b`` (in the order of their cells, rows of one
    cell in any order: they are equal), so the parts of a level are disjoint. Its
    candidates are ``u = (c - a) * (SPLITS + 1) + j``: edge ``e_c`` (``a <= c <= b``)
    with ``j / SPLITS`` of the part's rows tied at ``e_c`` sent left. Its rank ``r(u) =
    L(c) + floor(j T(c) / SPLITS)`` (``L``: the part's rows below ``e_c``, ``T``: equal to
    it) is non-decreasing in ``u``, so ``d(u) = den * r(u) - num * n`` is too, and the
    score ``|d(u)|`` is V-shaped: the candidates within a score of the best one form an
    interval, found by binary search.

    The exponential mechanism's law ``P(u) ~ exp(-x(u))``, ``x = eps * (|d| - best) / (2
    rows dS)``, is drawn by rejection, exactly: the candidates fall in tiers, tier ``t``
    holding those with ``t * TIER_X <= x < (t + 1) * TIER_X`` (the last: ``x >= TIERS *
    TIER_X``); a proposal picks tier ``t`` with weight ``2**(-TIER_BITS t)`` per
    candidate (an exact integer draw), a candidate of it uniformly, and accepts it with
    probability ``exp(-x) * 2**(TIER_BITS t) <= 1`` (``TIER_X > TIER_BITS ln 2``): a coin
    ``U < exp(-x)`` with ``U`` uniform in ``[0, 2**(-TIER_BITS t))``. An accepted
    proposal has the law ``exp(-x(u)) / sum``, and each is accepted with probability at
    least ``exp(-TIER_X)``, about 1/3 on average.
    """
    groups, width = cum.shape
    k = len(level)
    ints: Any = object if big else np.int64
    m = edge.shape[1] - 2
    acol = [n.a if n.a >= 0 else m + 1 for n in level]  # target -1, the start: column m + 1
    bcol = [n.b for n in level]
    lo, hi = edge[:, acol].ravel(), edge[:, bcol].ravel()
    r_lo, r_hi = rank[:, acol].ravel(), rank[:, bcol].ravel()
    parts = lo.size
    node = np.tile(np.arange(k), groups)
    row = np.repeat(np.arange(groups, dtype=np.int64) * width, k)
    flat = cum.ravel()
    split = np.array([x.split for x in level])[node]
    pos = np.where(split, SPLITS + 1, 1)  # a last selection only picks an edge
    size = (hi - lo + 1) * pos  # candidates of each part (< 2**30)
    num = np.array([x.num for x in level], dtype=ints)[node]
    den = np.array([x.den for x in level], dtype=ints)[node]
    target = num * (r_hi - r_lo).astype(ints)

    def ranks(u: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # the ranks [low, high] of candidate u (int64): its split (low = high), or for
        # a last selection its edge's rows below and at or below it
        c = lo[part] + u // pos[part]
        a, b = r_lo[part], r_hi[part]
        below = np.clip(flat[row[part] + 2 * c], a, b) - a
        tied = np.clip(flat[row[part] + 2 * c + 1], a, b) - a - below
        at = below + _tied_share(tied, u % pos[part])
        return np.where(split[part], at, below), np.where(split[part], at, below + tied)

    def score(u: np.ndarray, part: np.ndarray) -> np.ndarray:
        low, high = ranks(u, part)
        t = target[part]
        return np.maximum(np.maximum(den[part] * low.astype(ints) - t, t - den[part] * high), 0)

    def first_at_least(v: np.ndarray, part: np.ndarray, high: bool) -> np.ndarray:
        # the first u of each part with den * r(u) - num * n >= v (size if none), r its
        # high or low rank (one for a split): r(u) >= need, both non-decreasing in u
        n = r_hi[part] - r_lo[part]
        need = -((target[part] + v) // -den[part])  # ceil: exact in Python integers too
        need = np.minimum(np.maximum(need, 0), n + 1).astype(np.int64)
        # the first edge c whose rows <= e_c (high, or a split's top) or < e_c (low)
        # reach rank r_lo + need
        at = r_lo[part] + need
        odd = (split[part] | high).astype(np.int64)
        a, b = lo[part].copy(), hi[part].copy()
        base = row[part] + odd
        while (open_ := np.flatnonzero(a < b)).size:
            mid = (a[open_] + b[open_]) // 2
            ok = flat[base[open_] + 2 * mid] >= at[open_]
            b[open_[ok]] = mid[ok]
            a[open_[~ok]] = mid[~ok] + 1
        found = np.clip(flat[base + 2 * a], r_lo[part], r_hi[part]) - r_lo[part] >= need
        below = np.clip(flat[row[part] + 2 * a], r_lo[part], r_hi[part]) - r_lo[part]
        tied = np.clip(flat[row[part] + 2 * a + 1], r_lo[part], r_hi[part]) - r_lo[part] - below
        # a split: then the first j with floor(j T / SPLITS) >= need - L, a float guess
        # made exact
        short = np.where(split[part], np.minimum(np.maximum(need - below, 0), tied), 0)
        j = np.ceil(short / np.maximum(tied, 1) * SPLITS).clip(0, SPLITS).astype(np.int64)
        while (low := np.flatnonzero(_tied_share(tied, j) < short)).size:
            j[low] += 1
        while (up := np.flatnonzero((j > 0) & (_tied_share(tied, j - 1) >= short))).size:
            j[up] -= 1
        return np.where(found, (a - lo[part]) * pos[part] + j, size[part])

    every = np.arange(parts)
    zero = np.zeros(parts, dtype=ints)
    # the best: the score den * (L - q n) or (q n - U) falls until U reaches q n, then rises
    best = first_at_least(zero, every, high=True)  # U(last) = n: always found
    smin = score(best, every)
    left_score = score(np.maximum(best - 1, 0), every)
    smin = np.where((best > 0) & (left_score < smin), left_score, smin)

    # tier thresholds: score(u) < smin + G_t  <=>  x(u) < t * TIER_X  (G_t = ceil(t TIER_X / f))
    factors = [eps / (2 * rows * _sensitivity(x.num, x.den)) for x in level]
    gaps = [[math.ceil(t * _TIER_X / f) for t in range(1, _TIERS + 1)] for f in factors]
    if not big:  # |d| < 2**61: a larger threshold changes nothing
        gaps = [[min(g, _INT_SAFE) for g in row_] for row_ in gaps]
    bound = smin[:, None] + np.array(gaps, dtype=ints)[node]  # (parts, TIERS)
    qpart = np.repeat(every, _TIERS)
    flat_bound = bound.ravel()
    # score < bound: den * U - q n > -bound and den * L - q n < bound
    inner_lo = first_at_least(1 - flat_bound, qpart, high=True).reshape(parts, _TIERS)
    inner_hi = first_at_least(flat_bound, qpart, high=False).reshape(parts, _TIERS)
    # inner_t = [lo_t, hi_t): x < t * TIER_X, t = 0 .. TIERS + 1 (0: empty at best, last: all)
    ilo = np.column_stack([best, inner_lo, np.zeros(parts, dtype=np.int64)])
    ihi = np.column_stack([best, inner_hi, size])
    left_len = ilo[:, :-1] - ilo[:, 1:]  # tier t = inner_{t+1} minus inner_t: two pieces
    count = left_len + (ihi[:, 1:] - ihi[:, :-1])
    shift = _TIER_BITS * (_TIERS - np.arange(_TIERS + 1))
    mass = count << shift  # per candidate 2**(TIER_BITS (TIERS - t)): total < 2**62

    cum_mass = np.cumsum(mass, axis=1)
    chosen = np.empty(parts, dtype=np.int64)
    active = every
    while active.size:
        cm = cum_mass[active]
        pick = rng.integers(0, cm[:, -1], dtype=np.int64)
        t = (pick[:, None] >= cm).sum(axis=1)  # the tier: first with cm > pick
        rel = pick - (cm[np.arange(active.size), t] - mass[active, t])
        i = rel >> shift[t]  # uniform among the tier's candidates
        ll = left_len[active, t]
        u = np.where(i < ll, ilo[active, t + 1] + i, ihi[active, t] + (i - ll))
        gap = score(u, active) - smin[active]
        u53 = rng.integers(0, 1 << _U_BITS, size=active.size, dtype=np.int64)
        ok = _coins(gap, node[active], factors, u53, _U_BITS + _TIER_BITS * t, rng)
        chosen[active[ok]] = u[ok]
        active = active[~ok]

    out_edge = lo + chosen // pos
    out_rank = r_lo + ranks(chosen, every)[0]  # a split's rank (unused after a last one)
    return out_edge.reshape(groups, k), out_rank.reshape(groups, k)


def _tied_share(tied: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``floor(j * tied / SPLITS)`` in int64 without overflow (``tied < 2**62``)."""
    return (tied // SPLITS) * j + (tied % SPLITS) * j // SPLITS


def _score(below: np.ndarray, upto: np.ndarray, n: Any, num: Any, den: Any) -> np.ndarray:
    """The score ``|den * r - num * n|`` of split candidates with ``r`` rows below the
    split, in a sub-problem of ``n`` rows at target ``num / den``: ``den`` times the
    distance from the target rank ``q n`` to the split (0 is the best). ``below`` and
    ``upto`` give a candidate's rows below its edge and at or below it; ``r`` runs over
    ``below + floor(j (upto - below) / SPLITS)``, ``j = 0 .. SPLITS`` (a last axis). One
    row added or removed moves ``r`` and ``n`` by at most 1 each, ``r`` only together
    with ``n`` and in the same direction, so the score by at most ``max(num, den -
    num)``."""
    below = np.asarray(below)[..., None]
    tied = np.asarray(upto)[..., None] - below
    j = np.arange(SPLITS + 1)
    return np.abs(den * (below + tied * j // SPLITS) - num * n)


def _sensitivity(num: int, den: int) -> int:
    """The most one row moves :func:`_score`."""
    return max(num, den - num)


def _coins(
    gap: np.ndarray,
    node: np.ndarray,
    factors: list[Fraction],
    u: np.ndarray,
    bits: np.ndarray | int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Independent exact coins ``U < exp(-gap * factors[node])``.

    ``U`` is uniform in ``[u, u + 1) / 2**bits`` (``u`` an int below ``2**53``, ``bits``
    per coin or one for all; with ``bits = 53 + b`` a coin is heads with probability
    ``exp(-x) * 2**b`` when that is at most 1). The float pre-filter decides when that
    interval lies clear of ``exp(-x_f) (1 +- rel)``, the exact fallback
    (:func:`_exact_coin`) otherwise.
    """
    scale = np.array([float(f) for f in factors], dtype=np.float64)
    x = gap.astype(np.float64) * scale[node]
    np.minimum(x, _X_CLAMP, out=x)
    rel = x * _REL_PER_X
    rel += _REL_CONST
    p = np.exp(-x)
    nbits = np.broadcast_to(np.asarray(bits, dtype=np.int64), gap.shape)
    step = np.ldexp(1.0, -nbits)
    low = u * step  # exact: u < 2**53
    heads = (low + step) <= p * (1.0 - rel)
    tails = low >= p * (1.0 + rel)
    for i in np.flatnonzero(~(heads | tails)):
        x_exact = int(gap[i]) * factors[int(node[i])]
        heads[i] = _exact_coin(int(u[i]), int(nbits[i]), x_exact, rng)
    return heads


def _exact_coin(u: int, bits: int, x: Fraction, rng: np.random.Generator) -> bool:
    """``U < exp(-x)`` exactly, for ``U`` in ``[u, u + 1) / 2**bits``, with more bits
    drawn as needed (63 at a time)."""
    prec = 30
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
