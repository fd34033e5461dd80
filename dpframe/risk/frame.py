"""Polars adapters for DR-HA: the risk table of a frame, per-cell risk, ``.dp.drha``.

A DR-HA assessment reads the *confidential* table and spends no budget. Its outputs
are for the data owner choosing ε, not for publication; every table this module
returns carries the column ``assessment`` saying so.

The sensitive attribute's levels (``K``) come from its Enum dtype or from ``levels=``,
never from the data: a level nobody holds still counts (it is a place noise can put a
record), and values outside the declared levels are an error.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from dpframe.core.advice import advise
from dpframe.core.constraints import MARGINAL_MEASURES, SHRINKAGE_MEASURES, check
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.risk.measures import ASSESSMENT

__all__ = ["CellTable", "cell_table", "drha", "drha_cells", "drha_expr"]


@dataclass(frozen=True)
class CellTable:
    """A frequency table over non-empty quasi-identifier cells x levels of Y."""

    keys: pl.DataFrame  # (N rows) the quasi-identifier values of each cell
    counts: np.ndarray  # (N, K) int64
    levels: tuple[Any, ...]

    @property
    def sizes(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def homogeneous(self) -> np.ndarray:
        return (self.counts > 0).sum(axis=1) == 1


def _levels_of(frame_schema: pl.Schema, sensitive: str, levels: Any) -> tuple[Any, ...]:
    dtype = frame_schema[sensitive]
    if levels is not None:
        if isinstance(levels, str) or not isinstance(levels, Sequence | pl.Series | np.ndarray):
            raise InvalidParameterError(
                f"levels must be the list of every level of {sensitive!r}, got {levels!r}"
            )
        lv = tuple(levels.to_list() if isinstance(levels, pl.Series) else list(levels))
        if isinstance(dtype, pl.Enum) and set(lv) != set(dtype.categories.to_list()):
            raise InvalidParameterError(
                f"levels={list(lv)[:8]} differ from the Enum categories of {sensitive!r}: "
                "pass levels=None to use the Enum's categories, or cast the column to an "
                "Enum with these levels"
            )
    elif isinstance(dtype, pl.Enum):
        lv = tuple(dtype.categories.to_list())
    else:
        raise InvalidParameterError(
            f"{sensitive!r} has dtype {dtype}: "
            + advise(python="pass levels=[...]", spec="give levels", cli="pass --levels a,b,...")
            + " (every possible value of the "
            "sensitive attribute) or use an Enum. dpframe does not take K from the data: "
            "which levels occur is itself confidential, and an unused level still matters"
        )
    if len(lv) < 2:
        raise InvalidParameterError(f"the sensitive attribute needs K >= 2 levels, got {len(lv)}")
    if len(set(lv)) != len(lv):
        raise InvalidParameterError(f"levels must be distinct, got {list(lv)[:8]}")
    return lv


def cell_table(
    frame: pl.DataFrame | pl.LazyFrame,
    qids: Sequence[str] | str,
    sensitive: str,
    *,
    levels: Sequence[Any] | None = None,
    count: str | None = None,
) -> CellTable:
    """Cross-tabulate ``frame`` into non-empty quasi-identifier cells x levels of Y.

    Parameters
    ----------
    frame : polars.DataFrame or LazyFrame
        Microdata (one row per record) or, with ``count=``, a frequency table.
    qids : list of str
        The quasi-identifier columns.
    sensitive : str
        The sensitive attribute Y.
    levels : list, optional
        Every level of Y (required unless Y is an Enum).
    count : str, optional
        Column holding each row's number of records.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"age": ["<40", "<40", "50+"], "cond": ["flu", "flu", "cancer"]})
    >>> t = cell_table(df, ["age"], "cond", levels=["flu", "cancer", "hiv"])
    >>> t.counts.tolist(), t.homogeneous.tolist()
    ([[2, 0, 0], [0, 1, 0]], [True, True])
    """
    qid_list = [qids] if isinstance(qids, str) else list(qids)
    lf = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    if not isinstance(lf, pl.LazyFrame):
        raise InvalidParameterError(f"frame must be a polars frame, got {type(frame).__name__}")
    if not qid_list:
        raise InvalidParameterError("qids must name at least one quasi-identifier column")
    schema = lf.collect_schema()
    missing = [c for c in [*qid_list, sensitive, *([count] if count else [])] if c not in schema]
    if missing:
        raise InvalidParameterError(f"columns {missing} are not in the frame")
    if sensitive in qid_list:
        raise InvalidParameterError(
            f"{sensitive!r} cannot be both a qid and the sensitive attribute"
        )
    lv = _levels_of(schema, sensitive, levels)
    if count and not (schema[count].is_integer() or schema[count].is_float()):
        raise InvalidDataError(
            f"count column {count!r} must be numeric, got {schema[count]}: cast it first"
        )
    aggs = [(pl.col(count).sum() if count else pl.len().cast(pl.Int64)).alias("__n")]
    if count:  # each row checked, not only the sums (a -1 must not net out a +1)
        aggs += [
            pl.col(count).min().alias("__min"),
            (pl.col(count) % 1 != 0).any().alias("__frac"),
        ]
    grouped = lf.group_by([*qid_list, sensitive]).agg(aggs).collect()
    nulls = {c: grouped[c].null_count() for c in [*qid_list, sensitive]}
    if any(nulls.values()):
        bad = [c for c, k in nulls.items() if k]
        raise InvalidDataError(
            f"columns {bad} have nulls; a cell needs known quasi-identifiers and Y: fill or "
            "drop them first"
        )
    if count:
        bad_rows = (grouped["__min"] < 0) | grouped["__frac"] | grouped["__min"].is_nan()
        if bad_rows.any():
            raise InvalidDataError(
                f"count column {count!r} must hold non-negative whole numbers in every row; "
                f"e.g. the cell {grouped.filter(bad_rows).select(qid_list).row(0)} does not"
            )
    y = grouped[sensitive]
    y_values = y.cast(pl.String).to_list() if isinstance(y.dtype, pl.Enum) else y.to_list()
    index = {v: k for k, v in enumerate(lv)}
    unknown = sorted({v for v in y_values if v not in index}, key=str)
    if unknown:
        raise InvalidDataError(
            f"{sensitive!r} holds values outside levels: {unknown[:5]}; K must cover every "
            "level present (pass the full domain in levels=)"
        )
    grouped = grouped.filter(pl.col("__n") > 0)
    keys_all = grouped.select(qid_list)
    cells = keys_all.unique(maintain_order=True)
    if cells.height == 0:
        raise InvalidDataError("the table is empty: DR-HA needs at least one non-empty cell")
    cell_id = keys_all.join(
        cells.with_row_index("__cell"), on=qid_list, how="left", nulls_equal=True
    )["__cell"].to_numpy()
    y_kept = grouped[sensitive]
    y_kept = y_kept.cast(pl.String) if isinstance(y_kept.dtype, pl.Enum) else y_kept
    level_id = np.array([index[v] for v in y_kept.to_list()], dtype=np.int64)
    counts = np.zeros((cells.height, len(lv)), dtype=np.int64)
    np.add.at(counts, (cell_id, level_id), grouped["__n"].to_numpy().astype(np.int64))
    return CellTable(keys=cells, counts=counts, levels=lv)


def _sensitivity(
    mechanism: str, sensitivity: float | None, neighbours: str | None, accountant: Any = None
) -> float:
    from dpframe.core.accountant import Accountant
    from dpframe.risk.noise import table_sensitivity

    if accountant is not None:
        if not isinstance(accountant, Accountant):
            raise InvalidParameterError(
                f"accountant must be a dpframe.Accountant, got {type(accountant).__name__}"
            )
        if neighbours is not None:
            raise InvalidParameterError("pass neighbours= or accountant=, not both")
        if sensitivity is not None:
            raise InvalidParameterError(
                "accountant= sets the neighbour relation, hence the sensitivity: drop "
                "sensitivity= or accountant="
            )
        neighbours = accountant.neighbours  # read only: DR-HA spends nothing
    if neighbours is not None:
        check("neighbours", neighbours)
        if sensitivity is not None:
            raise InvalidParameterError(
                "neighbours= sets the sensitivity: drop sensitivity= or neighbours="
            )
        return table_sensitivity(mechanism, neighbours)
    return 1.0 if sensitivity is None else sensitivity


def _prior_and_sizes(
    counts: np.ndarray, measure: str, alpha: Any, size_model: Any
) -> tuple[Any, Any]:
    """Resolve ``alpha`` ("eb" or values) and ``size_model`` ("poisson", "negbin", object)."""
    from dpframe.risk import priors

    a, sm = None, None
    if measure in SHRINKAGE_MEASURES:
        if isinstance(alpha, str):
            check("alpha_estimate", alpha, name="alpha")
            a = priors.dirichlet_eb(counts).alpha
        elif alpha is None:
            raise InvalidParameterError(f"measure={measure!r} needs alpha= ('eb' or K values)")
        else:
            a = np.asarray(alpha, dtype=np.float64)
    if measure in MARGINAL_MEASURES:
        if isinstance(size_model, str):
            check("size_model", size_model)
            sm = priors.fit_size_model(counts.sum(axis=1), family=size_model)
        elif size_model is None:
            raise InvalidParameterError(f"measure={measure!r} needs size_model= ('poisson', ...)")
        else:
            sm = size_model
    return a, sm


def _assess(
    table: CellTable,
    mechanism: str,
    measure: str,
    eps: np.ndarray,
    delta: float | None,
    sensitivity: float | None,
    neighbours: str | None,
    accountant: Any,
    **settings: Any,
) -> Any:
    """:func:`~dpframe.risk.measures.cell_risk` of a cell table, priors and sensitivity
    resolved as :func:`drha` documents them."""
    from dpframe.risk.measures import cell_risk

    a, sm = _prior_and_sizes(
        table.counts, measure, settings.pop("alpha"), settings.pop("size_model")
    )
    from dpframe.risk.noise import ZCDP

    return cell_risk(
        table.counts,
        mechanism=mechanism,
        **{"rho" if mechanism in ZCDP else "epsilon": eps},
        delta=delta,
        sensitivity=_sensitivity(mechanism, sensitivity, neighbours, accountant),
        measure=measure,
        alpha=a,
        size_model=sm,
        **settings,
    )


def _as_list(x: Any) -> list[Any]:
    if isinstance(x, str) or x is None or np.ndim(x) == 0:
        return [x]
    return list(x)


def drha(
    frame: pl.DataFrame | pl.LazyFrame,
    qids: Sequence[str] | str,
    sensitive: str,
    *,
    epsilon: Any = None,
    delta: Any = None,
    mechanism: str | Sequence[str] = "laplace",
    measure: str | Sequence[str] = "local",
    weighted: bool | Sequence[bool] = (False, True),
    levels: Sequence[Any] | None = None,
    count: str | None = None,
    sensitivity: float | None = None,
    neighbours: str | None = None,
    accountant: Any = None,
    alpha: Any = "eb",
    size_model: Any = "poisson",
    scenario8: str = "conservative",
    method: str = "exact",
    rho: Any = None,
) -> pl.DataFrame:
    """DR-HA of a frame's frequency table for a grid of privacy parameters (tidy table).

    Parameters
    ----------
    frame, qids, sensitive, levels, count
        As in :func:`cell_table`.
    epsilon : float or array_like
        The ε grid (> 0; below 1 for ``mechanism="gaussian"``).
    delta : float or list of float, optional
        For the Gaussian mechanisms (one row set per δ); ignored for Laplace.
    mechanism : str or list
        ``"laplace"``, ``"gaussian"`` ((ε, δ)-DP, ε < 1), ``"gaussian_pdp"``,
        ``"analytic_gaussian"``, ``"discrete_gaussian"`` (ρ-zCDP: takes ``rho``, no δ).
    measure : str or list
        ``"local"``, ``"expected"``, ``"shrinkage"``, ``"marginal"``,
        ``"marginal_shrinkage"`` (Definitions 6-10).
    weighted : bool or list of bool, default both
        Cell-size weights (``True``) or equal weights (Definition 11).
    sensitivity : float, optional
        Of the table (l1 for Laplace, l2 for the Gaussians). Default 1, as in the paper.
    neighbours : {"substitute", "add_remove"}, optional
        Derive the sensitivity from the neighbour relation instead (2 / √2, or 1).
    accountant : Accountant, optional
        Take the neighbour relation from it (nothing is charged: DR-HA spends no budget).
    alpha : "eb" or array_like, default "eb"
        Dirichlet prior for the shrinkage measures (empirical Bayes by default).
    size_model : "poisson", "negbin" or SizeModel, default "poisson"
        Cell-size distribution for the marginal measures (zero-truncated ML fit).
    scenario8 : {"conservative", "records"}
        How a heterogeneous cell that turns homogeneous counts (see docs/drha.md).
    method : {"exact", "paper"}
        dpframe's exact values, or the paper's closed forms (corrected for general K).
    rho : float or array_like, optional
        The ρ (zCDP) grid of ``"discrete_gaussian"`` (required by it, refused without it).

    Returns
    -------
    polars.DataFrame
        ``mechanism, measure, weighted, epsilon, delta, risk, exact, assessment``; with
        ``"discrete_gaussian"`` also ``rho`` after ``epsilon`` (each row has one of the
        two, the other null).

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"age": ["<40"] * 3 + ["50+"] * 2, "y": ["a", "a", "b", "b", "b"]})
    >>> t = drha(df, ["age"], "y", epsilon=[0.1, 100.0], levels=["a", "b"], weighted=False)
    >>> [(e, round(r, 4), x) for e, r, x in t.select("epsilon", "risk", "exact").rows()]
    [(0.1, 0.3977, False), (100.0, 0.5, False)]
    """
    from dpframe.risk.noise import ZCDP, privacy_grid

    mechanisms = _as_list(mechanism)
    zcdp = [m for m in mechanisms if m in ZCDP]
    others = [m for m in mechanisms if m not in ZCDP]
    # each mechanism family needs its own parameter; a stray one is refused
    eps = privacy_grid(others[0], epsilon, None if zcdp else rho) if others else None
    rhos = privacy_grid(zcdp[0], None if others else epsilon, rho) if zcdp else None
    weights = _as_list(weighted)
    if not weights or any(not isinstance(w, bool | np.bool_) for w in weights):
        raise InvalidParameterError(
            f"weighted must be True, False or a list of them, got {weighted!r}"
        )
    table = cell_table(frame, qids, sensitive, levels=levels, count=count)
    frames = []
    for mech, meas in itertools.product(mechanisms, _as_list(measure)):
        deltas = [None] if mech == "laplace" or mech in ZCDP else _as_list(delta)
        if mech in ZCDP and delta is not None:
            raise InvalidParameterError(
                f"the {mech} mechanism is rho-zCDP and needs no delta; assess it in a "
                "separate call from the (epsilon, delta) Gaussians"
            )
        grid = rhos if mech in ZCDP else eps
        for d in deltas:
            res = _assess(
                table,
                mech,
                meas,
                grid,
                d,
                sensitivity,
                neighbours,
                accountant,
                alpha=alpha,
                size_model=size_model,
                scenario8=scenario8,
                method=method,
            )
            nulls = pl.Series([None] * grid.size, dtype=pl.Float64)
            for w in weights:
                frames.append(
                    pl.DataFrame(
                        {
                            "mechanism": mech,
                            "measure": meas,
                            "weighted": bool(w),
                            "epsilon": nulls if mech in ZCDP else grid,
                            **({"rho": grid if mech in ZCDP else nulls} if zcdp else {}),
                            "delta": pl.Series([d] * grid.size, dtype=pl.Float64),
                            "risk": res.average(bool(w)),
                            "exact": bool(res.all_exact),
                        }
                    )
                )
    return pl.concat(frames).with_columns(pl.lit(ASSESSMENT).alias("assessment"))


def drha_cells(
    frame: pl.DataFrame | pl.LazyFrame,
    qids: Sequence[str] | str,
    sensitive: str,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    mechanism: str = "laplace",
    measure: str = "local",
    levels: Sequence[Any] | None = None,
    count: str | None = None,
    sensitivity: float | None = None,
    neighbours: str | None = None,
    accountant: Any = None,
    alpha: Any = "eb",
    size_model: Any = "poisson",
    scenario8: str = "conservative",
    method: str = "exact",
    rho: float | None = None,
) -> pl.DataFrame:
    """Per-cell DR-HA at one ε: the quasi-identifiers, ``n``, homogeneity, ``risk``, ``exact``.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"age": ["<40"] * 3 + ["50+"] * 2, "y": ["a", "b", "b", "b", "b"]})
    >>> drha_cells(df, "age", "y", epsilon=1.0, levels=["a", "b"]).columns
    ['age', 'n', 'homogeneous', 'risk', 'exact', 'assessment']
    """
    from dpframe.risk.noise import privacy_grid

    eps = privacy_grid(mechanism, epsilon, rho)
    if eps.size != 1:
        name = "epsilon" if rho is None else "rho"
        raise InvalidParameterError(f"{name} must be one number here, got {eps.tolist()!r}")
    table = cell_table(frame, qids, sensitive, levels=levels, count=count)
    res = _assess(
        table,
        mechanism,
        measure,
        eps,
        delta,
        sensitivity,
        neighbours,
        accountant,
        alpha=alpha,
        size_model=size_model,
        scenario8=scenario8,
        method=method,
    )
    return table.keys.with_columns(
        pl.Series("n", table.sizes),
        pl.Series("homogeneous", table.homogeneous),
        pl.Series("risk", res.values[:, 0]),
        pl.Series("exact", res.exact),
        pl.lit(ASSESSMENT).alias("assessment"),
    )


def drha_expr(
    expr: pl.Expr | str,
    *,
    epsilon: float | None = None,
    levels: Sequence[Any] | None = None,
    delta: float | None = None,
    mechanism: str = "laplace",
    measure: str = "local",
    sensitivity: float = 1.0,
    alpha: Any = None,
    size_model: Any = None,
    scenario8: str = "conservative",
    method: str = "exact",
    rho: float | None = None,
) -> pl.Expr:
    """Per-cell DR-HA as an aggregation: ``df.group_by(qids).agg(pl.col(y).dp.drha(...))``.

    Each group is one quasi-identifier cell; the expression counts its records per
    level of Y and returns the cell's risk at ``epsilon``. Table-level inputs cannot be
    seen from inside one group, so the shrinkage measures need ``alpha=`` (values) and
    the marginal ones ``size_model=`` (a fitted model), given explicitly. The discrete
    Gaussian takes ``rho=`` (one number) instead of ``epsilon``.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"age": ["<40"] * 3 + ["50+"] * 2, "y": ["a", "a", "a", "a", "b"]})
    >>> out = df.group_by("age", maintain_order=True).agg(
    ...     pl.col("y").dp.drha(epsilon=1.0, levels=["a", "b"]).alias("risk"))
    >>> out["risk"].round(4).to_list()
    [0.6681, 0.4226]
    """
    from dpframe.risk.noise import ZCDP, noise_scale, privacy_grid

    if isinstance(expr, str):
        expr = pl.col(expr)
    check("risk_measure", measure, name="measure")
    privacy_grid(mechanism, epsilon, rho)  # the right parameter for the mechanism
    param = "rho" if mechanism in ZCDP else "epsilon"
    value = rho if mechanism in ZCDP else epsilon
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(f"{param} must be one number here, got {value!r}")
    noise_scale(mechanism, float(value), delta, sensitivity)  # validate now
    if measure in SHRINKAGE_MEASURES and (alpha is None or isinstance(alpha, str)):
        raise InvalidParameterError(
            f"measure={measure!r} per group needs alpha= values (a group cannot see the "
            "table; estimate them with dpframe.risk.priors.dirichlet_eb first)"
        )
    if measure in MARGINAL_MEASURES and (size_model is None or isinstance(size_model, str)):
        raise InvalidParameterError(
            f"measure={measure!r} per group needs a fitted size_model= (see "
            "dpframe.risk.priors.fit_size_model)"
        )
    lv = None if levels is None else tuple(levels)

    def one_cell(s: pl.Series) -> pl.Series:
        from dpframe.risk.measures import cell_risk

        name = s.name
        cats = lv
        if cats is None:
            if not isinstance(s.dtype, pl.Enum):
                raise InvalidParameterError(
                    f"{name!r} has dtype {s.dtype}: pass levels=[...] (every level of Y)"
                )
            cats = tuple(s.dtype.categories.to_list())
        if s.null_count():
            raise InvalidDataError(f"{name!r} has nulls in a cell: fill or drop them first")
        values = s.cast(pl.String).to_list() if isinstance(s.dtype, pl.Enum) else s.to_list()
        index = {v: k for k, v in enumerate(cats)}
        unknown = sorted({v for v in values if v not in index}, key=str)
        if unknown:
            raise InvalidDataError(f"{name!r} holds values outside levels: {unknown[:5]}")
        if not values:
            return pl.Series(name, [None], dtype=pl.Float64)
        counts = np.bincount([index[v] for v in values], minlength=len(cats))[None, :]
        res = cell_risk(
            counts,
            mechanism=mechanism,
            **{param: np.array([float(value)])},
            delta=delta,
            sensitivity=sensitivity,
            measure=measure,
            alpha=alpha,
            size_model=size_model,
            scenario8=scenario8,
            method=method,
        )
        return pl.Series(name, [float(res.values[0, 0])], dtype=pl.Float64)

    # named for what it is: a risk of the confidential data, not a column to publish
    return expr.map_batches(one_cell, return_dtype=pl.Float64, returns_scalar=True).alias(
        "drha_risk"
    )
