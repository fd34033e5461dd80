"""Thin polars adapters for the multi-statistic releases of :mod:`dpframe.releases`.

Each function computes the exact statistic with polars (values clipped to the public
bounds), checks that the declared public size ``n`` is the frame's row count, and calls
the numpy kernel with the accountant's atomic ``spend_all`` as its charge hook, so the
whole release is charged once, before any noise is drawn. Calling again is a new release
(charged again).

Both need the dataset size to be public (the paper's setting), so both refuse an
accountant with ``neighbours="add_remove"``, under which the size is private.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant, LedgerEntry, current_accountant
from dpframe.core.randomness import RandomSource, as_source
from dpframe.errors import InvalidDataError, InvalidParameterError, NoAccountantError

__all__ = [
    "FrameRelease",
    "covariance_matrix",
    "covariance_matrix_from_exact",
    "proportions",
    "proportions_from_counts",
]


@dataclass(frozen=True)
class FrameRelease:
    """A released table, the ledger entries that paid for it, and the kernel's result."""

    frame: pl.DataFrame
    ledger: tuple[LedgerEntry, ...]
    result: Any


def _accountant(accountant: Accountant | None) -> Accountant:
    acct = accountant or current_accountant()
    if acct is None:
        raise NoAccountantError(
            "no accountant: call inside `with accountant:` or pass accountant=..."
        )
    if acct.neighbours == "add_remove":
        raise InvalidParameterError(
            "n: this release needs the dataset size to be public, which it is not under "
            "neighbours='add_remove'; use an accountant with neighbours='substitute'"
        )
    return acct


def _lazy(frame: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    if not isinstance(frame, pl.LazyFrame):
        raise InvalidParameterError(
            f"frame must be a polars DataFrame or LazyFrame, got {type(frame).__name__}"
        )
    return frame


def _check_n(n: Any, rows: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise InvalidParameterError(f"n must be the public dataset size, an int >= 2; got {n!r}")
    if n != rows:
        raise InvalidDataError(
            f"n={n} is declared public, but the frame has {rows} rows; the sensitivities "
            "assume the declared size, so pass the true public size (nothing was charged)"
        )
    return n


def _charge_hook(acct: Accountant, sink: list[LedgerEntry]) -> Any:
    def charge(charges: list[Any]) -> None:
        sink.extend(acct.spend_all(charges))

    return charge


def covariance_matrix(
    frame: pl.LazyFrame | pl.DataFrame,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    *,
    epsilon: float,
    n: int,
    method: str = "truncated",
    calibration: str = "exact",
    repair: str | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
    engine: str = "auto",
) -> FrameRelease:
    """Release the covariance matrix of ``columns`` (Liu 2019, Simulation study 1).

    Variances first, inside ``[0, n (hi - lo)**2 / (4 (n - 1))]``; then covariances
    inside ``±sqrt(S*jj S*kk)`` of the sanitized variances; epsilon split equally; an
    optional repair to the nearest positive semi-definite matrix (``repair="higham"``
    or ``"clip"``). See :func:`dpframe.releases.release_covariance_matrix`.

    Returns
    -------
    FrameRelease
        ``frame``: a ``column`` key and one Float64 column per variable.

    Examples
    --------
    >>> import numpy as np, polars as pl, dpframe
    >>> rng = np.random.default_rng(0)
    >>> df = pl.DataFrame({"x": rng.uniform(-3, 3, 500), "y": rng.uniform(-4, 4, 500)})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     rel = dpframe.covariance_matrix(df, ["x", "y"], [(-3, 3), (-4, 4)], epsilon=1.0,
    ...                                     n=500)
    >>> rel.frame.columns
    ['column', 'x', 'y']
    """

    acct = _accountant(accountant)
    lf = _lazy(frame)
    columns = list(columns)
    if len(columns) < 2 or len(set(columns)) != len(columns):
        raise InvalidParameterError(f"columns must be two or more distinct names, got {columns}")
    if len(bounds) != len(columns):
        raise InvalidParameterError(
            f"bounds must give one (lower, upper) pair per column: {len(columns)} columns, "
            f"{len(bounds)} pairs"
        )
    schema = lf.collect_schema()
    for c in columns:
        if c not in schema or not schema[c].is_numeric():
            raise InvalidParameterError(f"column {c!r} must be a numeric column of the frame")
    clipped = {
        c: pl.col(c).cast(pl.Float64).clip(lo, hi)
        for c, (lo, hi) in zip(columns, bounds, strict=True)
    }
    bad = pl.sum_horizontal(
        [pl.col(c).is_null() | pl.col(c).cast(pl.Float64).is_nan() for c in columns]
    )
    row = (
        lf.select(
            pl.len().alias("__rows"),
            bad.sum().alias("__bad"),
            *[
                pl.cov(clipped[a], clipped[b], ddof=1).alias(f"{a}|{b}")
                for a in columns
                for b in columns
            ],
        )
        .collect(engine=engine)
        .row(0, named=True)
    )
    if row["__bad"]:
        raise InvalidDataError(
            f"columns {columns} hold {row['__bad']} null or NaN value(s); fill or drop "
            "them first (nothing was charged)"
        )
    n = _check_n(n, int(row["__rows"]))
    import numpy as np

    cov = np.array([[row[f"{a}|{b}"] for b in columns] for a in columns])
    return covariance_matrix_from_exact(
        cov,
        columns,
        bounds,
        epsilon=epsilon,
        n=n,
        method=method,
        calibration=calibration,
        repair=repair,
        accountant=acct,
        seed=seed,
    )


def covariance_matrix_from_exact(
    cov: Any,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    *,
    epsilon: float,
    n: int,
    method: str = "truncated",
    calibration: str = "exact",
    repair: str | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> FrameRelease:
    """The release half of :func:`covariance_matrix`, from an exact covariance matrix.

    ``cov`` is the sample covariance (ddof 1) of the *clipped* columns over ``n`` records,
    computed by any engine (see :mod:`dpframe.engines`).
    """
    import numpy as np

    from dpframe.releases import release_covariance_matrix

    acct = _accountant(accountant)
    cov = np.asarray(cov, dtype=np.float64)
    entries: list[LedgerEntry] = []
    result = release_covariance_matrix(
        cov,
        n,
        list(bounds),
        epsilon,
        method=method,
        calibration=calibration,
        neighbours=acct.neighbours,
        repair=repair,
        rng=as_source(seed).generator(),
        charge=_charge_hook(acct, entries),
    )
    out = pl.DataFrame({"column": columns}).with_columns(
        [pl.Series(c, result.values[:, j], dtype=pl.Float64) for j, c in enumerate(columns)]
    )
    return FrameRelease(out, tuple(entries), result)


def proportions(
    frame: pl.LazyFrame | pl.DataFrame,
    column: str,
    *,
    epsilon: float,
    n: int,
    categories: Sequence[Any] | None = None,
    strategy: str = "rescale",
    method: str = "truncated",
    calibration: str = "exact",
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
    engine: str = "auto",
) -> FrameRelease:
    """Release the share of each category of ``column``, in [0, 1] and summing to 1.

    Categories come from an Enum dtype or ``categories=`` -- never from the data.
    ``strategy`` is ``"rescale"``, ``"all_but_one"`` or ``"universal_histogram"`` (Liu
    2019, Simulation study 2; see :func:`dpframe.releases.release_proportions`).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"vote": ["a", "b", "b", "c"] * 50})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     rel = dpframe.proportions(df, "vote", categories=["a", "b", "c", "d"],
    ...                               epsilon=1.0, n=200)
    >>> round(rel.frame["proportion"].sum(), 9)
    1.0
    """

    acct = _accountant(accountant)
    lf = _lazy(frame)
    schema = lf.collect_schema()
    if column not in schema:
        raise InvalidParameterError(f"column {column!r} is not in the frame")
    dtype = schema[column]
    if categories is None:
        if not isinstance(dtype, pl.Enum):
            raise InvalidParameterError(
                f"categories: column {column!r} has dtype {dtype}, which does not declare its "
                "categories; pass categories=[...] (the public list) or cast to pl.Enum. The "
                "categories present in the data are private, so they are never taken from it"
            )
        categories = list(dtype.categories)
    categories = list(categories)
    if len(categories) < 2 or len(set(categories)) != len(categories):
        raise InvalidParameterError(
            f"categories must be 2 or more distinct values, got {categories}"
        )
    counts = lf.group_by(column).agg(pl.len().alias("count")).collect(engine=engine)
    table = counts_table(counts, column, categories)
    n = _check_n(n, int(table["count"].sum()))
    return proportions_from_counts(
        table,
        column,
        epsilon=epsilon,
        n=n,
        strategy=strategy,
        method=method,
        calibration=calibration,
        accountant=acct,
        seed=seed,
    )


def counts_table(counts: pl.DataFrame, column: str, categories: Sequence[Any]) -> pl.DataFrame:
    """Counts per *declared* category (0 where absent), from counts per value in the data.

    Refuses values outside the categories (and nulls) before anything is charged.
    """
    known = pl.DataFrame({column: pl.Series(list(categories))})
    known = known.with_columns(pl.col(column).cast(counts.schema[column], strict=False))
    if known[column].null_count():
        raise InvalidParameterError(
            f"categories {list(categories)} do not all fit the dtype {counts.schema[column]} "
            f"of {column!r}"
        )
    unknown = counts.join(known, on=column, how="anti", nulls_equal=True)
    if unknown.height:
        raise InvalidDataError(
            f"{unknown['count'].sum()} record(s) of {column!r} are null or outside the declared "
            "categories; add them to categories= or filter them out first (nothing was charged)"
        )
    return known.join(counts, on=column, how="left", nulls_equal=True).with_columns(
        pl.col("count").fill_null(0)
    )


def proportions_from_counts(
    table: pl.DataFrame,
    column: str,
    *,
    epsilon: float,
    n: int,
    strategy: str = "rescale",
    method: str = "truncated",
    calibration: str = "exact",
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> FrameRelease:
    """The release half of :func:`proportions`, from exact counts per declared category.

    ``table`` has the column of categories (every declared one, in order) and ``count``,
    computed by any engine (see :mod:`dpframe.engines`).
    """
    import numpy as np

    from dpframe.releases import release_proportions

    acct = _accountant(accountant)
    entries: list[LedgerEntry] = []
    result = release_proportions(
        table["count"].to_numpy() / n,
        n,
        epsilon,
        strategy=strategy,
        method=method,
        calibration=calibration,
        neighbours=acct.neighbours,
        rng=as_source(seed).generator(),
        charge=_charge_hook(acct, entries),
    )
    out = table.select(column).with_columns(
        pl.Series("proportion", np.asarray(result.values), dtype=pl.Float64)
    )
    return FrameRelease(out, tuple(entries), result)
