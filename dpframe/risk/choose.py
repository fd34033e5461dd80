"""Choosing ε by the DR-HA it leaves, and the utility (TVD of low-order marginals) it costs.

:func:`choose_epsilon` reads the average DR-HA curve of a table
(:func:`dpframe.risk.measures.cell_risk`) on a log grid of ε and returns the largest ε
whose risk stays at or below a target *at every ε from the bottom of the grid up to
it*. The curve of an all-homogeneous table increases in ε (from ``2^-K`` as ε → 0 to 1),
but heterogeneous cells add a Scenario-8 term that *grows* as ε falls (noise can make a
mixed cell look homogeneous), so the curve can dip and rise again. The function says
whether the curve is monotone, lists every ε interval where the risk meets the target,
and never reports an ε from a higher interval as if everything below it were safe. (If
the risk at the smallest ε already exceeds the target, the answer is the top of the
lowest interval that meets it, and the note says that smaller ε give *more* risk.)

Optionally (the paper's Sec. 5.3) a utility constraint gives a *lower* bound on ε: the
expected total variation distance between the original and the sanitized distribution
of every 1-, 2- and 3-way marginal must stay below ``max_tvd``.
:func:`marginal_tvd` computes those TVDs (the data of the paper's Figure 4).

TVD convention (footnote 8: ``TVD = ||p - p~||_1 / 2``): the ``N x K`` table (non-empty
quasi-identifier cells x every level of Y) is sanitized as ``n~ = n + e``; each released
count is post-processed to ``max(n~, 0)``; a marginal sums those over the cells it
merges, and is renormalised by the total of the post-processed table (the same for
every marginal, as each marginal partitions the cells). Should every sanitized count
be <= 0 the marginal is taken as uniform. Only cells of the released table enter:
quasi-identifier combinations that are empty in the data are not released, as in the
DR-HA model.

Everything here is an *assessment*: it reads the confidential table, spends no budget,
and its output is for the data owner.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from dpframe.core.constraints import check, check_real
from dpframe.errors import EpsilonAtEdgeWarning, EpsilonNotFoundError, InvalidParameterError
from dpframe.risk.measures import ASSESSMENT, _check_counts
from dpframe.risk.montecarlo import _CHUNK_ELEMENTS, _check_reps, _check_rng
from dpframe.risk.noise import ZCDP, epsilon_grid, noise_scale, sample_noise

__all__ = ["DEFAULT_EPSILONS", "EpsilonChoice", "choose_epsilon", "choose_rho", "marginal_tvd"]

DEFAULT_EPSILONS = np.logspace(-3, 2, 201)
_SUBGRID = 17  # points per grid step when refining a crossing
_BISECT_RTOL = 1e-9  # relative width at which a bisection on ε stops
TVD_ASSESSMENT = (
    "utility (TVD) of sanitizing the confidential table: no budget spent, not for publication"
)


@dataclass(frozen=True)
class EpsilonChoice:
    """The ε chosen for a DR-HA target (an assessment of the confidential table).

    Attributes
    ----------
    epsilon : float
        The largest ε such that the risk is <= ``target_risk`` at every ε from the
        bottom of the feasible interval up to it (the bottom is the smallest ε of the
        grid unless ``note`` says otherwise). Refined between grid points by bisection.
    target_risk : float
    risk_at_epsilon : float
    monotone : bool
        Whether the risk curve is non-decreasing over the grid.
    feasible_intervals : list of (float, float)
        Every ε interval where risk <= target (ends refined; an end at the edge of the
        grid means "at least this far").
    epsilon_min_utility : float or None
        Smallest ε from which every marginal's expected TVD is <= ``max_tvd`` (``inf``
        if no ε on the grid achieves it; ``None`` when no utility constraint was asked).
    curve : polars.DataFrame
        ``epsilon, risk`` on the grid.
    note : str
        What was found, in words.
    interval : (float, float) or None
        The recommended ε range: the chosen feasible interval, cut from below by the
        utility bound; ``None`` when the two constraints cannot both hold.
    utility_curve : polars.DataFrame or None
        ``epsilon, tvd_max, tvd_max_se, marginal`` (the worst marginal at each ε) when a
        ``table`` was given.
    """

    epsilon: float
    target_risk: float
    risk_at_epsilon: float
    monotone: bool
    feasible_intervals: list[tuple[float, float]]
    epsilon_min_utility: float | None
    curve: pl.DataFrame
    note: str
    interval: tuple[float, float] | None = None
    utility_curve: pl.DataFrame | None = None
    assessment: str = field(default=ASSESSMENT)
    mechanism: str = "laplace"

    @property
    def rho(self) -> float:
        """The chosen ρ (zCDP) of a discrete-Gaussian choice (:func:`choose_rho`)."""
        if self.mechanism not in ZCDP:
            raise InvalidParameterError(
                f"this choice is for mechanism={self.mechanism!r}: its parameter is epsilon"
            )
        return self.epsilon


# --------------------------------------------------------------------------- marginals


class _Marginals:
    """Marginals of the released ``N x K`` cells and Monte-Carlo TVD at any ε.

    The standard noise draws are fixed by a seed taken once from ``rng`` and redrawn
    in chunks at each evaluation, so ``tvd(ε)`` is a deterministic function of ε
    (common random numbers): bisection on it is well defined, and memory is bounded.
    """

    def __init__(
        self,
        keys: pl.DataFrame,
        counts: np.ndarray,
        qids: Sequence[str],
        sensitive: str,
        orders: Sequence[int],
        mechanism: str,
        delta: float | None,
        sensitivity: float,
        reps: int,
        rng: np.random.Generator,
    ) -> None:
        from scipy import sparse

        n_cells, n_levels = counts.shape
        self.mechanism, self.delta, self.sensitivity = mechanism, delta, sensitivity
        self.reps = reps
        self.flat = counts.reshape(-1).astype(np.float64)  # cell i, level k at i*K + k
        self.total = float(self.flat.sum())
        attrs = [*qids, sensitive]
        codes: dict[str, np.ndarray] = {}
        for q in qids:
            c = keys[q].rank("dense").to_numpy().astype(np.int64) - 1
            codes[q] = np.repeat(c, n_levels)
        codes[sensitive] = np.tile(np.arange(n_levels, dtype=np.int64), n_cells)
        self.names: list[str] = []
        self.orders: list[int] = []
        self.sizes: list[int] = []
        cols, starts = [], []
        offset = 0
        for order in orders:
            for combo in itertools.combinations(attrs, order):
                key = np.zeros(self.flat.size, dtype=np.int64)
                for a in combo:
                    key = key * (int(codes[a].max()) + 1) + codes[a]
                _, group = np.unique(key, return_inverse=True)
                g = int(group.max()) + 1
                cols.append(group + offset)
                starts.append(offset)
                self.names.append("×".join(combo))
                self.orders.append(order)
                self.sizes.append(g)
                offset += g
        rows = np.tile(np.arange(self.flat.size), len(cols))
        self.agg = sparse.csr_matrix(
            (np.ones(rows.size), (np.concatenate(cols), rows)), shape=(offset, self.flat.size)
        )  # (G, cells): marginal cell x released cell
        self.starts = np.asarray(starts)
        self.block = np.repeat(np.arange(len(starts)), self.sizes)
        self.uniform = 1.0 / np.asarray(self.sizes, dtype=np.float64)[self.block]
        self.p = (self.agg @ self.flat) / self.total  # (G,)
        self.seed = int(rng.integers(0, 2**63 - 1))
        self.chunk = max(1, min(reps, _CHUNK_ELEMENTS // max(1, self.flat.size)))

    def tvd(self, epsilon: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Mean and Monte-Carlo SE of each marginal's TVD at each ε: two (E, M) arrays."""
        eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
        scales = np.atleast_1d(noise_scale(self.mechanism, eps, self.delta, self.sensitivity))
        m = len(self.starts)
        s1 = np.zeros((eps.size, m))
        s2 = np.zeros((eps.size, m))
        gen = np.random.default_rng(self.seed)
        done = 0
        while done < self.reps:
            c = min(self.chunk, self.reps - done)
            discrete = self.mechanism in ZCDP
            z = None if discrete else sample_noise(self.mechanism, 1.0, (c, self.flat.size), gen)
            for e, s in enumerate(scales):
                if discrete:  # integer noise, drawn for each sigma
                    noise = sample_noise(self.mechanism, s, (c, self.flat.size), gen)
                else:
                    noise = s * z
                released = np.maximum(self.flat + noise, 0.0)  # (c, cells)
                tot = released.sum(axis=1)
                marg = (self.agg @ released.T).T  # (c, G)
                zero = tot <= 0
                with np.errstate(invalid="ignore", divide="ignore"):
                    p_tilde = marg / tot[:, None]
                if zero.any():
                    p_tilde[zero] = self.uniform
                d = 0.5 * np.add.reduceat(np.abs(p_tilde - self.p), self.starts, axis=1)
                s1[e] += d.sum(axis=0)
                s2[e] += (d * d).sum(axis=0)
            done += c
        mean = s1 / self.reps
        if self.reps > 1:
            var = np.maximum(s2 - self.reps * mean * mean, 0.0) / (self.reps - 1)
            se = np.sqrt(var / self.reps)
        else:
            se = np.full(mean.shape, np.nan)
        return mean, se


def _cells_of(
    table: Any,
    qids: Sequence[str] | str | None,
    sensitive: str | None,
    levels: Sequence[Any] | None,
    count: str | None,
) -> tuple[Any, list[str], str]:
    from dpframe.risk.frame import cell_table

    if isinstance(table, pl.LazyFrame):
        table = table.collect()
    if not isinstance(table, pl.DataFrame):
        raise InvalidParameterError(
            f"table must be a polars DataFrame (QID columns, Y, {count!r}), "
            f"got {type(table).__name__}"
        )
    others = [c for c in table.columns if c != count]
    if sensitive is None:
        if not others:
            raise InvalidParameterError("table has no columns besides the count")
        sensitive = others[-1]
    if qids is None:
        qid_list = [c for c in others if c != sensitive]
    else:
        qid_list = [qids] if isinstance(qids, str) else list(qids)
    cells = cell_table(table, qid_list, sensitive, levels=levels, count=count)
    return cells, qid_list, sensitive


def _check_orders(orders: Any, n_attrs: int) -> list[int]:
    """Distinct orders >= 1; those above the number of attributes are skipped."""
    if isinstance(orders, int | str) or not all(
        isinstance(o, int | np.integer) and not isinstance(o, bool) for o in orders
    ):
        raise InvalidParameterError(f"orders must be a sequence of integers, got {orders!r}")
    out = sorted({int(o) for o in orders})
    if not out or out[0] < 1:
        raise InvalidParameterError(f"orders must be integers >= 1, got {orders!r}")
    out = [o for o in out if o <= n_attrs]
    if not out:
        raise InvalidParameterError(
            f"orders {orders!r}: the table has only {n_attrs} attributes (QIDs and Y)"
        )
    return out


def marginal_tvd(
    table: pl.DataFrame | pl.LazyFrame,
    *,
    qids: Sequence[str] | str,
    sensitive: str,
    mechanism: str,
    epsilon: npt.ArrayLike,
    delta: float | None = None,
    sensitivity: float = 1.0,
    orders: Sequence[int] = (1, 2, 3),
    reps: int = 200,
    rng: np.random.Generator | int | None = None,
    levels: Sequence[Any] | None = None,
    count: str | None = "count",
) -> pl.DataFrame:
    """Expected TVD of every k-way marginal after sanitizing the table (paper's Figure 4).

    The ``N x K`` table (non-empty quasi-identifier cells x every level of Y) is
    sanitized ``reps`` times per ε, post-processed to ``max(n~, 0)``, aggregated to each
    marginal over the attributes (the QIDs and Y) and compared with the original:
    ``TVD = ||p - p~||_1 / 2`` (see the module docstring for the conventions).

    Parameters
    ----------
    table : polars.DataFrame
        A frequency table (QID columns, Y, and a ``count`` column) or, with
        ``count=None``, microdata (one row per record).
    qids : list of str
    sensitive : str
    mechanism : {"laplace", "gaussian", "gaussian_pdp", "analytic_gaussian"}
    epsilon : float or array_like
    delta : float, optional
    sensitivity : float, default 1.0
    orders : sequence of int, default (1, 2, 3)
        Which marginals: all ``order``-subsets of the attributes (orders above the
        number of attributes are skipped).
    reps : int, default 200
    rng : numpy.random.Generator or int, optional
        Fresh ``default_rng()`` by default. The same draws serve every ε.
    levels : list, optional
        Every level of Y (required unless Y is an Enum; see
        :func:`dpframe.risk.frame.cell_table`).
    count : str or None, default "count"

    Returns
    -------
    polars.DataFrame
        ``epsilon, order, marginal, tvd_mean, tvd_se, assessment``; one row per ε and
        marginal (named like ``"IR×MR"``).

    Examples
    --------
    >>> import polars as pl
    >>> t = pl.DataFrame({"a": ["x", "x", "y"], "y": ["u", "v", "u"], "count": [5, 2, 4]})
    >>> out = marginal_tvd(t, qids=["a"], sensitive="y", mechanism="laplace",
    ...                    epsilon=[0.1, 100.0], orders=(1, 2), levels=["u", "v"], rng=1)
    >>> out.select("epsilon", "order", "marginal").rows()[:3]
    [(0.1, 1, 'a'), (0.1, 1, 'y'), (0.1, 2, 'a×y')]
    >>> bool(out.filter(pl.col("epsilon") == 100.0)["tvd_mean"].max() < 0.01)
    True
    """
    check("risk_mechanism", mechanism, name="mechanism")
    eps = epsilon_grid(epsilon)
    noise_scale(mechanism, eps, delta, sensitivity)  # validates delta, sensitivity
    n_reps = _check_reps(reps, "reps", minimum=2)
    gen = _check_rng(rng)
    if not isinstance(sensitive, str):
        raise InvalidParameterError(f"sensitive must be a column name, got {sensitive!r}")
    cells, qid_list, sens = _cells_of(table, qids, sensitive, levels, count)
    order_list = _check_orders(orders, len(qid_list) + 1)
    engine = _Marginals(
        cells.keys,
        cells.counts,
        qid_list,
        sens,
        order_list,
        mechanism,
        delta,
        sensitivity,
        n_reps,
        gen,
    )
    mean, se = engine.tvd(eps)
    m = len(engine.names)
    return pl.DataFrame(
        {
            "epsilon": np.repeat(eps, m),
            "order": pl.Series(engine.orders * eps.size, dtype=pl.Int64),
            "marginal": engine.names * eps.size,
            "tvd_mean": mean.reshape(-1),
            "tvd_se": se.reshape(-1),
        }
    ).with_columns(pl.lit(TVD_ASSESSMENT).alias("assessment"))


# ------------------------------------------------------------------------ risk curve


def _grid(epsilons: Any, mechanism: str) -> np.ndarray:
    if epsilons is None:
        grid = DEFAULT_EPSILONS
        if mechanism == "gaussian":  # the classic calibration needs ε < 1
            grid = grid[grid < 1.0]
        return grid.copy()
    try:
        grid = np.asarray(epsilons, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"epsilons must be an array of numbers, got {epsilons!r}"
        ) from None
    if grid.ndim != 1 or grid.size < 2:
        raise InvalidParameterError("epsilons must be a 1-d grid of at least two values")
    if not np.isfinite(grid).all() or (grid <= 0).any():
        raise InvalidParameterError("epsilons must be finite and > 0")
    return np.unique(grid)


def _first_flip(
    f_ok: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, lo_ok: bool
) -> tuple[float, bool]:
    """Boundary of the set {f_ok == lo_ok} that starts at ``lo``, scanning up to ``hi``.

    ``f_ok(lo) == lo_ok`` and ``f_ok(hi) != lo_ok``. A sub-grid of the step finds the
    first sub-interval where the status flips; bisection (on log ε) then refines it.
    Returns the last ε with status ``lo_ok`` and whether the sub-grid status was
    monotone (a single flip) over the step.
    """
    sub = np.geomspace(lo, hi, _SUBGRID)
    ok = f_ok(sub) == lo_ok
    ok[0], ok[-1] = True, False
    i = int(np.argmin(ok))  # first point with the other status
    single = bool(ok[:i].all() and not ok[i:].any())
    a, b = float(sub[i - 1]), float(sub[i])
    while b / a > 1.0 + _BISECT_RTOL:
        mid = math.sqrt(a * b)
        if bool(f_ok(np.array([mid]))[0] == lo_ok):
            a = mid
        else:
            b = mid
    return a, single


def _last_flip(
    f_ok: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, hi_ok: bool
) -> tuple[float, bool]:
    """Like :func:`_first_flip` scanning *down* from ``hi``: the lowest ε such that the
    status is ``hi_ok`` on the whole stretch from it up to ``hi``."""
    sub = np.geomspace(lo, hi, _SUBGRID)
    ok = f_ok(sub) == hi_ok
    ok[0], ok[-1] = False, True
    j = int(ok.size - 1 - np.argmin(ok[::-1]))  # last point with the other status
    single = bool(ok[j + 1 :].all() and not ok[: j + 1].any())
    a, b = float(sub[j]), float(sub[j + 1])
    while b / a > 1.0 + _BISECT_RTOL:
        mid = math.sqrt(a * b)
        if bool(f_ok(np.array([mid]))[0] == hi_ok):
            b = mid
        else:
            a = mid
    return b, single


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Index ranges [i, j] (inclusive) of the runs of True in ``mask``."""
    out, start = [], None
    for i, v in enumerate(mask):
        if v and start is None:
            start = i
        if not v and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(mask) - 1))
    return out


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def choose_rho(
    counts: npt.ArrayLike | None,
    target_risk: float,
    *,
    rhos: npt.ArrayLike | None = None,
    sensitivity: float | None = None,
    **options: Any,
) -> EpsilonChoice:
    """The largest ρ (zCDP) whose average DR-HA under the discrete Gaussian stays <=
    ``target_risk``: :func:`choose_epsilon` with ``mechanism="discrete_gaussian"``.

    ``rhos`` is the grid (default ``numpy.logspace(-3, 2, 201)``); the answer is the
    result's ``rho`` (also in ``epsilon``, the field's generic name). ``sensitivity`` is
    the table's l2 sensitivity (``table_sensitivity("discrete_gaussian", neighbours)``,
    e.g. √2 under substitute), or give ``neighbours=`` (or ``accountant=``) for it, as
    in :func:`choose_epsilon`; other options as there.

    Examples
    --------
    >>> import numpy as np
    >>> counts = np.array([[4, 0], [0, 2], [7, 0], [1, 0]])
    >>> ch = choose_rho(counts, 0.5, sensitivity=np.sqrt(2))
    >>> ch.rho == ch.epsilon, ch.risk_at_epsilon <= 0.5
    (True, True)
    """
    for bad in ("mechanism", "epsilons", "delta"):
        if bad in options:
            raise InvalidParameterError(
                f"choose_rho is for the discrete Gaussian (rho-zCDP): it takes no {bad}="
            )
    return choose_epsilon(
        counts,
        target_risk,
        mechanism="discrete_gaussian",
        epsilons=rhos,
        sensitivity=sensitivity,
        **options,
    )


def choose_epsilon(
    counts: npt.ArrayLike | None,
    target_risk: float,
    *,
    mechanism: str = "laplace",
    delta: float | None = None,
    sensitivity: float | None = None,
    neighbours: str | None = None,
    accountant: Any = None,
    measure: str = "local",
    weighted: bool = False,
    epsilons: npt.ArrayLike | None = None,
    alpha: Any = None,
    size_model: Any = None,
    scenario8: str = "conservative",
    table: pl.DataFrame | None = None,
    max_tvd: float | None = None,
    tvd_orders: Sequence[int] = (1, 2, 3),
    tvd_reps: int = 200,
    rng: np.random.Generator | int | None = None,
    qids: Sequence[str] | None = None,
    sensitive: str | None = None,
    levels: Sequence[Any] | None = None,
    count: str | None = "count",
) -> EpsilonChoice:
    """The largest ε whose average DR-HA stays <= ``target_risk`` from the bottom up.

    Parameters
    ----------
    counts : array_like, shape (N, K), or None
        The table (non-empty quasi-identifier cells x levels of Y). ``None`` takes it
        from ``table``.
    target_risk : float
        In [0, 1].
    mechanism, delta
        As in :func:`dpframe.risk.noise.noise_scale`.
    sensitivity, neighbours, accountant
        The table's sensitivity, by the rule of :func:`dpframe.risk.frame.drha`: given,
        or derived from ``neighbours=`` (``"substitute"``: 2 for Laplace, √2 for the
        Gaussians; ``"add_remove"``: 1), or from the accountant's relation; default 1,
        as in the paper. The same relation gives the same sensitivity as ``drha``.
    measure : str, default "local"
        Any measure of :func:`dpframe.risk.measures.cell_risk`.
    weighted : bool, default False
        Cell-size weights in the average (Definition 11).
    epsilons : array_like, optional
        The grid; default ``numpy.logspace(-3, 2, 201)`` (only ε < 1 for ``"gaussian"``).
    alpha, size_model
        For the shrinkage / marginal measures: values or a fitted model, or ``"eb"`` /
        ``"poisson"`` / ``"negbin"`` to fit them (as in :func:`dpframe.risk.frame.drha`).
    scenario8 : {"conservative", "records"}
        The Scenario-8 convention of the risk.
    table : polars.DataFrame, optional
        The full frequency table (QID columns, Y, ``count``) for the utility check.
        Its cells must be those of ``counts``.
    max_tvd : float, optional
        Utility constraint: every marginal's expected TVD must be <= this. Gives a
        lower bound on ε (needs ``table``).
    tvd_orders, tvd_reps, rng
        Which marginals, Monte-Carlo draws per ε, and the generator (fresh by default).
    qids, sensitive, levels, count
        How to read ``table``: by default Y is its last column other than ``count``
        and the QIDs are the rest; ``levels`` as in
        :func:`dpframe.risk.frame.cell_table`.

    Returns
    -------
    EpsilonChoice

    Raises
    ------
    EpsilonNotFoundError
        If the target is below every risk on the grid (the message gives the smallest
        achievable risk and the limit as ε → 0, e.g. ``2^-K`` for an all-homogeneous
        table).
    InvalidParameterError
        For bad input.

    Warns
    -----
    EpsilonAtEdgeWarning
        If the chosen ε is not bounded by the risk target: the top of the grid (the
        target holds up to there), or the top of a feasible stretch that starts above
        the bottom of the grid (smaller ε leave more risk). The note says the same.

    Examples
    --------
    >>> import numpy as np
    >>> counts = np.array([[4, 0], [0, 2], [7, 0], [1, 0]])  # all homogeneous, K = 2
    >>> ch = choose_epsilon(counts, 0.5)
    >>> round(ch.epsilon, 3), ch.risk_at_epsilon <= 0.5, ch.monotone
    (0.504, True, True)

    With ``mechanism="discrete_gaussian"`` the grid (``epsilons=``) and the answer are
    ρ (zCDP) values (:func:`choose_rho` says so in its names).
    """
    check("risk_mechanism", mechanism, name="mechanism")
    check("scenario8", scenario8)
    target = check_real("target_risk", target_risk)
    if not 0.0 <= target <= 1.0:
        raise InvalidParameterError(f"target_risk must be in [0, 1], got {target_risk!r}")
    if not isinstance(weighted, bool | np.bool_):
        raise InvalidParameterError(f"weighted must be True or False, got {weighted!r}")
    weighted = bool(weighted)
    if max_tvd is not None:
        max_tvd = check_real("max_tvd", max_tvd)
        if not 0.0 < max_tvd <= 1.0:
            raise InvalidParameterError(f"max_tvd must be in (0, 1], got {max_tvd!r}")
        if table is None:
            raise InvalidParameterError(
                "max_tvd needs table= (the frequency table whose marginals are released)"
            )
    grid = _grid(epsilons, mechanism)
    from dpframe.risk.frame import _sensitivity

    sensitivity = _sensitivity(mechanism, sensitivity, neighbours, accountant)  # drha's rule
    noise_scale(mechanism, grid, delta, sensitivity)  # validates the grid for the mechanism

    cells = None
    qid_list: list[str] = []
    sens = ""
    if table is not None:
        cells, qid_list, sens = _cells_of(table, qids, sensitive, levels, count)
        if counts is None:
            counts = cells.counts
    if counts is None:
        raise InvalidParameterError("pass counts= (an N x K table) or table=")
    tab = _check_counts(counts)
    if cells is not None:
        a = cells.counts[np.lexsort(cells.counts.T[::-1])]
        b = tab[np.lexsort(tab.T[::-1])]
        if a.shape != b.shape or not np.array_equal(a, b):
            raise InvalidParameterError(
                f"counts ({tab.shape[0]} cells x {tab.shape[1]} levels) and table (grouped "
                f"by {qid_list} with Y = {sens!r}: {a.shape[0]} x {a.shape[1]}) describe "
                "different frequency tables; pass qids=/sensitive=/levels= or counts=None"
            )

    from dpframe.risk.frame import _prior_and_sizes
    from dpframe.risk.measures import cell_risk

    a_val, sm_val = _prior_and_sizes(tab, measure, alpha, size_model)

    param = "rho" if mechanism in ZCDP else "epsilon"

    def risk(eps: np.ndarray) -> np.ndarray:
        res = cell_risk(
            tab,
            mechanism=mechanism,
            **{param: np.asarray(eps, dtype=np.float64)},
            delta=delta,
            sensitivity=sensitivity,
            measure=measure,
            alpha=a_val,
            size_model=sm_val,
            scenario8=scenario8,
        )
        return np.asarray(res.average(weighted), dtype=np.float64)

    def ok(eps: np.ndarray) -> np.ndarray:
        return risk(eps) <= target

    r = risk(grid)
    curve = pl.DataFrame({"epsilon": grid, "risk": r})
    monotone = bool(np.all(np.diff(r) >= -1e-12))
    feasible = r <= target
    label = (
        f"DR-HA ({measure}, {'weighted' if weighted else 'unweighted'}, {mechanism}"
        + (f", δ={delta:g}" if delta is not None else "")
        + f", Scenario 8 {scenario8}) on ε in [{_fmt(grid[0])}, {_fmt(grid[-1])}] "
        f"({grid.size} points)"
    )
    k_levels = tab.shape[1]
    all_hom = bool(np.all((tab > 0).sum(axis=1) == 1))

    if not feasible.any():
        i_min = int(np.argmin(r))
        tiny = min(1e-9, grid[0] * 1e-6)
        limit0 = float(risk(np.array([tiny]))[0])
        msg = (
            f"target_risk={target:g} is below every value of the {label}: the smallest is "
            f"{r[i_min]:.6g} at ε={_fmt(grid[i_min])}; as ε → 0 the risk tends to "
            f"{limit0:.6g}"
        )
        if all_hom and measure == "local":
            msg += (
                f" (= 2^-K = {2.0**-k_levels:.6g} for this all-homogeneous table with K = "
                f"{k_levels}: each count survives noise with probability 1/2, so no ε pushes "
                "the risk below it)"
            )
        if limit0 < target:
            msg += (
                f". The target lies between that limit and the curve: extend epsilons= below "
                f"{_fmt(grid[0])}"
            )
        else:
            msg += ". Raise the target, or change the mechanism or the table (coarser cells)"
        raise EpsilonNotFoundError(msg)

    refined_monotone = True
    intervals: list[tuple[float, float]] = []
    for i, j in _runs(feasible):
        lo, hi = float(grid[i]), float(grid[j])
        if i > 0:
            lo, single = _last_flip(ok, float(grid[i - 1]), float(grid[i]), True)
            refined_monotone &= single
        if j < grid.size - 1:
            hi, single = _first_flip(ok, float(grid[j]), float(grid[j + 1]), True)
            refined_monotone &= single
        intervals.append((lo, hi))

    notes = [f"{label}."]
    if monotone:
        notes.append("The risk curve is non-decreasing in ε on the grid.")
    else:
        notes.append(
            "The risk curve is NOT monotone in ε: heterogeneous cells can look homogeneous "
            "after noise (Scenario 8), a term that grows as ε falls, so the risk decreases "
            "over part of the grid."
        )
    if not refined_monotone:
        notes.append("Between some grid points the feasibility changed more than once.")
    lo_c, hi_c = intervals[0]
    i0, j0 = _runs(feasible)[0]
    if i0 == 0:
        chosen_from_below = True
    else:
        chosen_from_below = False
        notes.append(
            f"The risk at the smallest ε ({r[0]:.4g} at ε={_fmt(grid[0])}) is above the "
            f"target: no ε from the bottom of the grid meets it. The lowest feasible interval "
            f"is [{_fmt(lo_c)}, {_fmt(hi_c)}]; ε below {_fmt(lo_c)} gives MORE risk."
        )
    eps_choice = hi_c
    if bool(feasible.all()):
        notes.append(
            f"The target is at or above the whole curve (max {r.max():.4g} at "
            f"ε={_fmt(grid[int(np.argmax(r))])}): every ε on the grid meets it, so DR-HA "
            f"does not limit ε here; the choice is the top of the grid."
        )
    elif j0 == grid.size - 1:
        notes.append(f"The target holds up to the top of the grid (ε={_fmt(grid[-1])}).")
    else:
        notes.append(
            f"Chosen ε = {_fmt(eps_choice)}: the risk meets the target at every ε "
            f"{'from the bottom of the grid' if chosen_from_below else f'from {_fmt(lo_c)}'}"
            f" up to it, and exceeds it just above."
        )
    if len(intervals) > 1:
        others = ", ".join(f"[{_fmt(a)}, {_fmt(b)}]" for a, b in intervals[1:])
        notes.append(
            f"The target is met again on {others}, but not on the whole stretch below: "
            "those ε are not recommended by this rule."
        )
    risk_at = float(risk(np.array([eps_choice]))[0])
    edge = []
    if j0 == grid.size - 1:
        edge.append(
            f"ε = {_fmt(eps_choice)} is the top of the grid: the risk meets the target up "
            "to there, so the grid chose this ε, not the risk; extend epsilons= upwards to "
            "find where the target stops holding, or choose ε by utility or policy"
        )
    if not chosen_from_below:
        edge.append(
            f"the risk at the bottom of the grid ({r[0]:.4g} at ε={_fmt(grid[0])}) exceeds "
            f"the target: ε below {_fmt(lo_c)} leave MORE risk, so this ε is not the top of "
            "a stretch of safe ε from 0"
        )
    if edge:
        warnings.warn(
            f"choose_epsilon: {'; and '.join(edge)}. Read the result's note and curve.",
            EpsilonAtEdgeWarning,
            stacklevel=2,
        )

    eps_util: float | None = None
    interval: tuple[float, float] | None = (lo_c, eps_choice)
    utility_curve = None
    if cells is not None:
        engine = _Marginals(
            cells.keys,
            cells.counts,
            qid_list,
            sens,
            _check_orders(tvd_orders, len(qid_list) + 1),
            mechanism,
            delta,
            sensitivity,
            _check_reps(tvd_reps, "tvd_reps", minimum=2),
            _check_rng(rng),
        )

        def worst(eps: np.ndarray) -> np.ndarray:
            return engine.tvd(eps)[0].max(axis=1)

        mean, se = engine.tvd(grid)
        arg = mean.argmax(axis=1)
        rows = np.arange(grid.size)
        tvd_max = mean[rows, arg]
        utility_curve = pl.DataFrame(
            {
                "epsilon": grid,
                "tvd_max": tvd_max,
                "tvd_max_se": se[rows, arg],
                "marginal": [engine.names[a] for a in arg],
            }
        )
        tvd_at = float(worst(np.array([eps_choice]))[0])
        notes.append(
            f"Worst expected TVD over the {len(engine.names)} marginals at the chosen ε: "
            f"{tvd_at:.4g} (Monte Carlo, {engine.reps} draws)."
        )
        if max_tvd is not None:

            def util_ok(eps: np.ndarray) -> np.ndarray:
                return worst(eps) <= max_tvd

            good = tvd_max <= max_tvd
            if not good[-1]:
                eps_util = math.inf
                interval = None
                notes.append(
                    f"No ε on the grid meets max_tvd={max_tvd:g} at the top "
                    f"(worst TVD {tvd_max[-1]:.4g} at ε={_fmt(grid[-1])})."
                )
            else:
                start = _runs(good)[-1][0]
                if start == 0:
                    eps_util = float(grid[0])
                    notes.append(
                        f"Every ε on the grid meets max_tvd={max_tvd:g} (utility bound at "
                        f"or below ε={_fmt(grid[0])})."
                    )
                else:
                    eps_util, _ = _last_flip(
                        util_ok, float(grid[start - 1]), float(grid[start]), True
                    )
                    notes.append(
                        f"Utility (every marginal's expected TVD <= {max_tvd:g}) needs "
                        f"ε >= {_fmt(eps_util)}."
                    )
                lo_i = max(lo_c, eps_util)
                if lo_i <= eps_choice:
                    interval = (lo_i, eps_choice)
                    notes.append(f"Both hold for ε in [{_fmt(lo_i)}, {_fmt(eps_choice)}].")
                else:
                    interval = None
                    notes.append(
                        f"The two constraints cannot both hold: utility needs ε >= "
                        f"{_fmt(eps_util)}, the risk target allows at most "
                        f"{_fmt(eps_choice)}. Relax target_risk or max_tvd."
                    )
                    later = [(max(a, eps_util), b) for a, b in intervals[1:] if b >= eps_util]
                    if later:
                        spans = ", ".join(f"[{_fmt(a)}, {_fmt(b)}]" for a, b in later)
                        notes.append(
                            f"(Both are met on {spans}, above a stretch where the risk "
                            "exceeds the target.)"
                        )

    return EpsilonChoice(
        mechanism=mechanism,
        epsilon=float(eps_choice),
        target_risk=target,
        risk_at_epsilon=risk_at,
        monotone=monotone,
        feasible_intervals=intervals,
        epsilon_min_utility=eps_util,
        curve=curve,
        note=" ".join(notes),
        interval=interval,
        utility_curve=utility_curve,
    )
