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
:class:`Grid`, with the integer score

    s(c) = max(0, den * L(c) - num * n, num * n - den * (L(c) + T(c)))

(``L(c)``: rows below ``c``; ``T(c)``: rows equal to ``c``; ``n``: the sub-problem's rows;
``q = num / den`` exactly, from ``q``'s decimal repr, so 0.1 is 1/10): ``den`` times the
distance from the target rank ``q n`` to the candidate's ranks ``[L, L + T]``. Rows tied
at an edge cost nothing: when a block of equal values straddles ``q n`` (delays in whole
minutes on a 1-minute grid), that value scores 0, as the empirical distribution says. The
exact input is therefore a histogram of ``2B + 1`` *cells* per group
(:meth:`Grid.cell_index`): the rows equal to each edge and the rows strictly between two.
One added or removed row moves ``L``, ``L + T`` and ``n`` by at most 1 each (``L`` only
together with ``n``), so ``s`` by at most ``dS = max(num, den - num)``. Each candidate
gets an independent coin ``Bernoulli(exp(-x_i))`` with ``x_i = eps_level * (s_i -
s_min) / (2 * rows * dS)`` and the output is uniform among the heads (the best
candidate's coin is always heads): exactly PF's law (a random order and the first
head), drawn for all candidates and groups at once.

Exact and float-safe: a coin is ``U < exp(-x)`` for its own uniform ``U``, of which only
as many bits are drawn as the decision needs; a float pre-filter decides when its proven
error bound allows (relative error ``2**-40 + x 2**-48`` on ``exp(-x)``, libm assumed
within ``2**-46`` as in :mod:`~dpframe.mechanisms.discrete`), exact rational bounds on
``exp(-x)`` from ``decimal`` otherwise, drawing 63 more bits of ``U`` until they decide.
The score is V-shaped in the candidate, so the candidates with ``x < X_NEAR = 11.2`` form
a window around the best one (found by binary search, in integers): their coins start
from 53 bits; every other coin has ``exp(-x) < 2**-16`` and starts from 16 bits, which
decide it (tails) unless all 16 are 0 (then 53 more follow). The uniform choice among
heads is one integer draw. The output is an edge of the public grid: no floating-point
value computed from the data is released. Scores are exact integers (int64 while ``den *
n < 2**61``, Python integers beyond; no overflow, e.g. 1e9 rows a group).

Time: the work of a selection depends on the data through the size of its window (the
candidates within ``x < 11.2`` of the best) and the rare exact fallbacks, as
:mod:`~dpframe.mechanisms.discrete`'s does through its fallback; the far coins cost the
same wherever the quantile lies. Speed: 1e4 groups x 1000 bins x 3 quantiles draw in
about 0.1 s, a tenth of a float Gumbel-max exponential mechanism over the same candidates
(``benchmarks/bench_quantile_draw.py``).

How its error behaves
---------------------
The error is in *ranks*: the distance from ``q n`` to the released value's ranks ``[L,
L + T]`` (rows below it, and equal to it), the rows between it and the true quantile; it
does not grow with ``n`` (so the relative rank error ``|F(q_hat)
- q|`` falls as ``1 / n``). One selection at relative target ``q'`` over ``K <= B + 1``
candidates, with ``eps_level = epsilon / (D * sides)``, misses its sub-problem's target by
more than

    t(beta) = 2 * rows * max(q', 1 - q') / eps_level * ln(K / beta)

rows more than its best candidate does (the rank error of a candidate is the distance from
``q' n`` to its ranks ``[L, L + T]``) with probability at most ``beta``: a candidate is
output only if its coin is heads, so ``P(out = c) <= exp(-x_c)``, and a union bound over
the candidates. The recursion sends the rows ``< e_j`` of a released ``e_j`` to the
left part (candidates ``e_a .. e_j``) and the rows ``>= e_j`` to the right (candidates
``e_j .. e_b``), so a row is in one part per level. A sub-problem lies
between two released targets ``a`` and ``b`` (or the ends, which have no error), whose
errors move its target: ``E_t <= t_t(beta) + (1 - q'_t) E_a + q'_t E_b``. With ``beta =
(1 - level) / d_t`` for the ``d_t <= D`` selections target ``t`` depends on,
:meth:`QuantilePlan.rank_error` is the largest such ``E_t``: a data-free bound, shown
before anything is spent. It grows like ``D**2 * rows * sides / epsilon`` (a level's ε
is ``epsilon / (D sides)`` and up to ``D`` errors add) and only logarithmically with the
bins: far slower than the ``m`` ways split of one selection per quantile.

Not counted: the rows strictly inside one bin (a released value is an edge, so a
selection's best edge is up to half its fullest bin's inside from its target, and a
quantile carries up to ``d_t`` such halves: choose the grid finer than the precision
wanted, 1000 bins by default), and a split's ties: the rows equal to a released ``e_j``
all go right, so a part's targets, rescaled as if the split were at ``q_j n``, move by up
to their share of that tie (rows tied at an edge a selection outputs cost nothing).

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

#: Candidates (coins) handled at once: the work arrays stay a few MB.
_CHUNK = 1 << 20

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
#: A candidate is "far" when ``x >= X_NEAR``: then ``exp(-x) < 2**-FAR_BITS`` (``X_NEAR /
#: FAR_BITS = 0.7 > ln 2``), and its coin first draws only ``FAR_BITS`` bits.
_FAR_BITS = 16
_X_NEAR = Fraction(7 * _FAR_BITS, 10)
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
        at least ``level`` (not counted: rows strictly inside one bin, and the ties at a
        released value that splits the recursion). One
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
    """One level's selections for every group: ``(groups, len(level))`` edge indices.

    A part (a group's sub-problem) between the released edges ``e_a`` and ``e_b`` holds
    the rows ``>= e_a`` (all rows at the start) and ``< e_b`` (all rows ``<= e_B`` at
    the end): the cells ``2a`` to ``2b - 1`` (to ``2B`` at the end), so the parts of a
    level are disjoint. Its candidate ``e_c`` has the rows ``L(c)`` below it and ``U(c)
    = L(c) + T(c)`` at or below it, and the score ``max(0, f(c), -h(c))`` with ``f = den
    * L - num * n`` and ``h = den * U - num * n``, both non-decreasing in ``c``.

    Each part flips a coin per candidate. The score is V-shaped in the candidate, so the
    candidates whose coin
    can be heads with probability above ``2**-FAR_BITS`` form a window around the best
    one, found by binary search: their coins are drawn from 53 bits (and more when
    needed). Every other candidate ("far": ``x >= X_NEAR``, so ``exp(-x) < 2**-FAR_BITS``)
    draws ``FAR_BITS`` bits ``u``: ``U >= 2**-FAR_BITS > exp(-x)`` unless ``u == 0``, and
    only those coins go on to 53 more bits. Every coin is its own uniform, compared
    exactly with ``exp(-x)``.
    """
    groups, width = cum.shape
    k = len(level)
    ints: Any = object if big else np.int64
    m = found.shape[1] - 2
    start_col = m + 1  # target -1, the start, is the last column
    lo = found[:, [n.a if n.a >= 0 else start_col for n in level]].ravel()  # per part
    hi = found[:, [n.b for n in level]].ravel()
    node = np.tile(np.arange(k), groups)
    at_end = np.array([n.b == m for n in level])[node]
    top = np.where(at_end, width - 1, 2 * hi)  # the part's cells are 2 lo .. top - 1
    row = np.repeat(np.arange(groups, dtype=np.int64) * width, k)
    flat = cum.ravel()
    start = flat[row + 2 * lo]
    n = (flat[row + top] - start).astype(ints)
    num = np.array([x.num for x in level], dtype=ints)[node]
    den = np.array([x.den for x in level], dtype=ints)[node]
    target = num * n

    def f(c: np.ndarray, part: Any = slice(None)) -> np.ndarray:
        # den * L(c) - num * n of part `part` at candidates c: non-decreasing in c
        return den[part] * (flat[row[part] + 2 * c] - start[part]).astype(ints) - target[part]

    def h(c: np.ndarray, part: Any = slice(None)) -> np.ndarray:
        # den * U(c) - num * n (U: rows <= e_c in the part): non-decreasing, >= f
        at = flat[row[part] + np.minimum(2 * c + 1, top[part])]
        return den[part] * (at - start[part]).astype(ints) - target[part]

    def score(c: np.ndarray, part: Any = slice(None)) -> np.ndarray:
        return np.maximum(np.maximum(f(c, part), -h(c, part)), 0)

    def first_at_least(value: Any, v: np.ndarray) -> np.ndarray:  # first c: value(c) >= v
        a, b = lo.copy(), hi + 1
        while (open_ := np.flatnonzero(a < b)).size:
            mid = (a[open_] + b[open_]) // 2
            ok = value(mid, open_) >= v[open_]
            b[open_[ok]] = mid[ok]
            a[open_[~ok]] = mid[~ok] + 1
        return a

    # the best: score -h(c) > 0 falls until h(c) >= 0, then max(0, f(c)) rises
    best = first_at_least(h, np.zeros_like(target))  # h(hi) = (den - num) n >= 0
    right = np.maximum(f(best), 0)
    left = -h(np.maximum(best - 1, lo))
    smin = np.where(best > lo, np.minimum(left, right), right)
    factors = [eps / (2 * rows * _sensitivity(x.num, x.den)) for x in level]
    near = [math.ceil(_X_NEAR / f) for f in factors]  # gap >= near: x >= X_NEAR exactly
    if not big:  # every gap is below 2**61: a larger threshold changes nothing
        near = [min(t, _INT_SAFE) for t in near]
    reach = smin + np.array(near, dtype=ints)[node]
    c1 = first_at_least(h, 1 - reach)  # score(c) < reach: -h(c) < reach and f(c) < reach
    c2 = first_at_least(f, reach) - 1

    # the window's coins
    wlen = c2 - c1 + 1
    wend = np.cumsum(wlen)
    wpart = np.repeat(np.arange(lo.size), wlen)
    cand = c1[wpart] + np.arange(int(wend[-1]), dtype=np.int64) - (wend - wlen)[wpart]
    gap = score(cand, wpart) - smin[wpart]
    u = rng.integers(0, 1 << _U_BITS, size=cand.size, dtype=np.int64)
    heads = _coins(gap, node[wpart], factors, u, _U_BITS, rng)
    hpart, hcand = wpart[heads], cand[heads]

    # the far coins: FAR_BITS bits each, and 53 more for those whose bits are all 0
    flen = (hi - lo + 1) - wlen
    fend = np.cumsum(flen)
    total = int(fend[-1])
    zero = np.flatnonzero(rng.integers(0, 1 << _FAR_BITS, size=total, dtype=np.uint16) == 0)
    if zero.size:
        zpart = np.searchsorted(fend, zero, side="right")
        offset = zero - (fend - flen)[zpart]
        before = c1[zpart] - lo[zpart]
        zcand = np.where(offset < before, lo[zpart] + offset, c2[zpart] + 1 + offset - before)
        zgap = score(zcand, zpart) - smin[zpart]
        zu = rng.integers(0, 1 << _U_BITS, size=zero.size, dtype=np.int64)
        zheads = _coins(zgap, node[zpart], factors, zu, _FAR_BITS + _U_BITS, rng)
        hpart = np.concatenate([hpart, zpart[zheads]])
        hcand = np.concatenate([hcand, zcand[zheads]])

    # uniform among each part's heads (the best candidate's coin is always heads)
    order = np.lexsort((hcand, hpart))
    hcand = hcand[order]
    count = np.bincount(hpart, minlength=lo.size)
    pick = rng.integers(0, count, dtype=np.int64)
    return hcand[np.cumsum(count) - count + pick].reshape(groups, k)


def _score(below: np.ndarray, upto: np.ndarray, n: Any, num: Any, den: Any) -> np.ndarray:
    """The score ``max(0, den * L - num * n, num * n - den * U)`` of candidates with ``L``
    rows below them and ``U`` at or below them in a sub-problem of ``n`` rows at target
    ``num / den``: ``den`` times the distance from the target rank ``q n`` to the
    candidate's ranks ``[L, U]`` (0 is the best; rows tied at a candidate cost nothing).
    One row added or removed moves it by at most ``max(num, den - num)``: it moves
    ``L``, ``U`` and ``n`` by at most 1 each, and ``L`` (``U``) together with ``n``."""
    return np.maximum(np.maximum(den * below - num * n, num * n - den * upto), 0)


def _sensitivity(num: int, den: int) -> int:
    """The most one row moves :func:`_score`."""
    return max(num, den - num)


def _coins(
    gap: np.ndarray,
    node: np.ndarray,
    factors: list[Fraction],
    u: np.ndarray,
    bits: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Independent exact coins ``Bernoulli(exp(-gap * factors[node]))``.

    A coin is heads iff ``U < exp(-x)`` with ``U`` uniform in [0, 1), of which ``u`` (an
    int below ``2**53``) gives the known bits: ``U`` is in ``[u, u + 1) / 2**bits``. The
    float pre-filter decides when that interval lies clear of ``exp(-x_f) (1 +- rel)``,
    the exact fallback (:func:`_exact_coin`) otherwise.
    """
    scale = np.array([float(f) for f in factors], dtype=np.float64)
    x = gap.astype(np.float64) * scale[node]
    np.minimum(x, _X_CLAMP, out=x)
    rel = x * _REL_PER_X
    rel += _REL_CONST
    p = np.exp(-x)
    step = 2.0**-bits
    low = u * step  # exact: u < 2**53
    heads = (low + step) <= p * (1.0 - rel)
    tails = low >= p * (1.0 + rel)
    for i in np.flatnonzero(~(heads | tails)):
        x_exact = int(gap[i]) * factors[int(node[i])]
        heads[i] = _exact_coin(int(u[i]), bits, x_exact, rng)
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
