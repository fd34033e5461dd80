"""What every engine's results go through on the driver, before anything is charged.

An engine (polars or Spark) computes small exact results from the records: per-group
aggregates, counts per value, a covariance matrix. These functions check them and put
them in the shape a release needs, with the same rules -- and the same messages -- for
every engine:

* :func:`check_sources` -- the source columns exist and have a usable dtype (the
  schema is public: checked before any data is read); :func:`check_key_dtype` -- a key
  or person column is not nested (a list or struct could hide a null or NaN);
* :func:`check_margins` and :func:`fit_margins` -- public margins hold no missing or
  infinite key (:mod:`dpframe.core.values`), and every margin value fits the data
  key's dtype exactly (``1.5`` is not an Int16 key: refused, never cast to ``1``), for
  the Python API and the release spec alike;
* :func:`finish_grouped` -- bad values and bad keys refused (:mod:`dpframe.core.values`;
  each engine counts them over all input rows), keys that change when cast to the
  margins' dtype, or are not in the margins, refused, the public margins joined
  (groups absent from the data get exact zeros), declared public sizes checked against
  the data;
* :func:`declared_counts` -- counts per *declared* category (0 where absent), refusing
  nulls and values outside the categories;
* :func:`check_categories_fit` -- declared categories fit the column's dtype (an
  integer category 200 does not fit an Int8 column: refused before the charge, not
  after it, inside polars).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe.core.advice import advise
from dpframe.core.constraints import RESERVED_PREFIX, refuse_pattern_name
from dpframe.core.missing import MissingValues
from dpframe.core.values import refuse_bad_values
from dpframe.errors import InvalidDataError, InvalidParameterError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BAD_PREFIX",
    "ROWS",
    "VALUE",
    "VALUE_ROWS",
    "check_categories_fit",
    "check_fill",
    "check_key_dtype",
    "check_margins",
    "check_sources",
    "declared_counts",
    "dense_histogram",
    "finish_grouped",
    "fit_margins",
    "indexed_margins",
    "missing_count",
    "person_of",
    "with_bad_totals",
    "with_person",
]

#: Column of an engine's per-group table counting the records of each group.
ROWS = "__rows"
#: Prefix of the columns counting null, NaN or infinite values of a source column.
BAD_PREFIX = "__bad__"
#: Columns of an engine's histogram rows: the margins' row of the group, the bin, and
#: (if the engine aggregated them) the number of records (:func:`dense_histogram`).
GROUP, BIN, COUNT = "__group", "__bin", "__count"
#: Columns of each table :meth:`~dpframe.engines.protocol.Engine.category_counts` and
#: :meth:`~dpframe.engines.protocol.Engine.written_counts` return: a value of the column
#: (in its dtype; null counted as a value) and its records. Names of their own, not the
#: column's: a counted column may be named anything, ``count`` or ``rows`` included.
VALUE, VALUE_ROWS = "value", "rows"


def check_sources(schema: pl.Schema, sources: Sequence[tuple[str, str]], what: str) -> None:
    """Refuse missing source columns, and dtypes a statistic cannot use.

    ``sources`` are ``(column, need)`` pairs, ``need`` being ``"numeric"`` or
    ``"boolean"``; ``what`` names the release in the message.
    """
    for column, _ in sources:
        refuse_pattern_name(column, what)
        if column.startswith(RESERVED_PREFIX):  # a part named after it would read as ours
            rename = advise(
                python=f"rename it, e.g. frame.rename({{{column!r}: 'x'}})",
                spec="rename the column in the input file and in the spec",
            )
            raise InvalidParameterError(
                f"{what}: column {column!r} has a name dpframe keeps for its own columns "
                f"(starting with {RESERVED_PREFIX!r}); {rename}"
            )
    missing = sorted({c for c, _ in sources if c not in schema})
    if missing:
        raise InvalidParameterError(
            f"{what}: column(s) {missing} are not in the data (its columns: "
            f"{sorted(schema.names())[:20]})"
        )
    for column, need in sources:
        dtype = schema[column]
        if need == "boolean" and dtype != pl.Boolean:
            example = advise(
                python=f"e.g. pl.col({column!r}) == value",
                spec="make it a Boolean column of the input file",
            )
            raise InvalidDataError(
                f"column {column!r} has dtype {dtype}; {what} needs a Boolean column "
                f"({example}); nothing was charged"
            )
        if need == "numeric" and not dtype.is_numeric():
            cast = advise(
                python=f"cast it with pl.col({column!r}).cast(pl.Float64)",
                spec="store it as numbers in the input file",
            )
            raise InvalidDataError(
                f"column {column!r} has dtype {dtype}; {what} needs a numeric column "
                f"({cast}); nothing was charged"
            )


def with_person(parts: Sequence[Any], person: str | None) -> list[Any]:
    """``parts`` with each distinct-persons part (``op == "distinct"``) given the unit's
    person column as its operand, for an engine that counts them on the kept rows."""
    from dataclasses import replace

    from dpframe.mechanisms.statistics import Operand

    if person is None:
        return list(parts)
    return [replace(p, x=Operand(person)) if p.op == "distinct" else p for p in parts]


def person_of(part: Any) -> str:
    """The person column a distinct-persons part counts (:func:`with_person`); refused
    without one (a record unit has no persons to count: ``dpframe.agg.count_distinct``
    refuses it before anything is read)."""
    if part.x is None:
        raise InvalidParameterError(
            f"part {part.name!r}: distinct persons are counted under a person unit only"
        )
    return str(part.x.column)


def check_key_dtype(dtype: pl.DataType, column: str, what: str) -> None:
    """Refuse a key or person column whose missing values cannot be seen: a list, array
    or struct (a null or NaN inside it), an object or an all-null column."""
    if dtype.is_nested() or isinstance(dtype, pl.Object | pl.Null):
        raise InvalidDataError(
            f"{what} {column!r} has dtype {dtype}; a group key or person identifier must "
            "be a number, text, a boolean or a date/time (a nested value can hide a null "
            "or NaN); nothing was charged"
        )


def check_fill(
    schema: pl.Schema, missing: MissingValues, columns: Sequence[str], person: str | None = None
) -> None:
    """Refuse fill values (``nulls={column: value}``) for columns the release does not
    read, for the person column (a missing identifier is never filled: it is refused),
    or that the column cannot hold exactly (so that every engine fills alike)."""
    if person is not None and person in missing.fill:
        raise InvalidParameterError(
            f"nulls: column {person!r} identifies people; a missing identifier is refused, "
            "never filled (one fill value would make every such record one person): fix "
            "or drop those records before the release"
        )
    for column, value in missing.fill.items():
        if column not in columns:
            raise InvalidParameterError(
                f"nulls: column {column!r} is not read by this release (it reads "
                f"{list(dict.fromkeys(columns))}); fill only those"
            )
        dtype = schema[column]
        if textual_key(dtype):
            if not isinstance(value, str):
                raise InvalidParameterError(
                    f"nulls: column {column!r} holds text ({dtype}); fill it with a string, "
                    f"not {value!r}"
                )
            if isinstance(dtype, pl.Enum) and value not in dtype.categories.to_list():
                raise InvalidParameterError(
                    f"nulls: {value!r} is not a category of column {column!r}'s Enum; fill "
                    "with one of its categories"
                )
        elif dtype.is_numeric():
            if isinstance(value, str):
                raise InvalidParameterError(
                    f"nulls: column {column!r} holds numbers ({dtype}); fill it with a number, "
                    f"not {value!r}"
                )
            if dtype.is_integer() and not float(value).is_integer():
                raise InvalidParameterError(
                    f"nulls: column {column!r} holds integers; fill it with an integer, not "
                    f"{value!r}"
                )
        else:
            raise InvalidParameterError(
                f"nulls: column {column!r} has dtype {dtype}; only number and text columns "
                "can be filled (drop those records, or fill them before the release)"
            )


def textual_key(dtype: pl.DataType) -> bool:
    """Whether a key's values are text (strings, categoricals, enums) rather than numbers,
    dates or booleans: a text key never matches a margin of the other kind (``"1"`` is
    not 1), so the two must agree before anything is cast."""
    return isinstance(dtype, pl.String | pl.Categorical | pl.Enum)


def missing_count(values: pl.Series) -> int:
    """How many of ``values`` are null, NaN or infinite (the rule of
    :mod:`dpframe.core.values`; NaN and infinities only in a float column)."""
    bad = values.null_count()
    if values.dtype.is_float():
        bad += int((values.is_nan() | values.is_infinite()).sum())
    return int(bad)


def check_margins(margins: pl.DataFrame, keys: Sequence[str], what: str = "margins") -> None:
    """Refuse public margins with a null, NaN or infinite key (:mod:`dpframe.core.values`):
    every group is listed by a known, finite value."""
    bad = [k for k in keys if missing_count(margins[k])]
    if bad:
        raise InvalidParameterError(
            f"{what} has null, infinite or NaN keys in {bad}: list every group by a known, "
            "finite value (NaN is not a group, and a null or NaN key would merge with no "
            "record's group); cast the keys to integers or strings if need be"
        )


def fit_margins(
    margins: pl.DataFrame, schema: pl.Schema, keys: Sequence[str], what: str = "margins"
) -> pl.DataFrame:
    """The margins with each key in the data key's dtype, every value kept exactly.

    One rule for the Python API and the release spec: a margin value that the data key's
    dtype cannot hold exactly (``1.5`` or ``70000`` for an Int16 key, ``0.1`` for a
    Float32 key, a string outside an Enum's categories) is refused, naming the margin
    and the value -- never cast (``1.5 -> 1`` would publish a group under a key nobody
    listed). ``what`` names the margins in the message.
    """
    check_margins(margins, keys, what)
    casts = []
    for k in keys:
        public, data = margins.schema[k], schema[k]
        if public == data:
            continue
        col = margins[k]
        try:
            cast = col.cast(data, strict=False)
            back = cast.cast(public, strict=False)
        except pl.exceptions.PolarsError:
            cast = back = pl.Series(k, [None] * col.len(), dtype=public)
        lost = cast.is_null() | back.is_null() | (back != col).fill_null(True)
        if lost.any():
            values = col.filter(lost).unique(maintain_order=True).head(5).to_list()
            raise InvalidParameterError(
                f"{what}: key {k!r} has value(s) {values} that do not fit the data's dtype "
                f"{data} exactly; list each group by a value the key column can hold "
                "(nothing was charged)"
            )
        casts.append(cast)
    return margins.with_columns(casts) if casts else margins


def _cast_keys(agg: pl.DataFrame, margins: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The keys of ``agg`` in the margins' dtypes; a key must survive the cast unchanged
    (``1.5 -> 1`` or ``"01" -> 1`` would merge groups)."""
    casts = [
        pl.col(k).cast(margins.schema[k], strict=False)
        for k in keys
        if agg.schema[k] != margins.schema[k]
    ]
    if not casts:
        return agg
    cast = agg.with_columns(casts)
    for k in keys:
        if agg.schema[k] == margins.schema[k]:
            continue
        back = cast[k].cast(agg.schema[k], strict=False)
        lost = (cast[k].is_null() & agg[k].is_not_null()) | (back != agg[k]).fill_null(False)
        if lost.any():
            raise InvalidDataError(
                f"key {k!r}: values {agg.filter(lost)[k].unique().to_list()[:5]} do not fit the "
                f"margins' dtype {margins.schema[k]} (keys not in the margins); nothing was "
                "charged"
            )
    return cast


def refuse_bad_parts(agg: pl.DataFrame, keys: Sequence[str]) -> None:
    """Refuse the null, NaN or infinite values ``agg``'s ``__bad__<column>`` counts hold,
    and those of its keys (:func:`dpframe.core.values.refuse_bad_values`: counts and
    column names only, never a value)."""
    counted = {
        c.removeprefix(BAD_PREFIX): int(agg[c].sum() or 0)
        for c in agg.columns
        if c.startswith(BAD_PREFIX)
    }
    for k in keys:  # an engine counts the keys' bad values over all rows; else the groups
        counted.setdefault(k, missing_count(agg[k]))
    refuse_bad_values(counted)


def finish_grouped(
    agg: pl.DataFrame,
    margins: pl.DataFrame,
    keys: Sequence[str],
    parts: Sequence[Any],
    *,
    unknown_keys: str = "error",
    sizes: Any = None,
) -> pl.DataFrame:
    """The exact per-group parts of a grouped release, one row per margins row, checked.

    ``agg`` holds one row per group present in the data: the keys, :data:`ROWS`, one
    column per exact part (``parts``: :class:`dpframe.mechanisms.statistics.Part`) and
    ``__bad__<column>`` counts, however an engine computed it. Nothing is charged if
    this raises.
    """
    keys = list(keys)
    refuse_bad_parts(agg, keys)
    agg = _cast_keys(agg, margins, keys)
    unknown = agg.join(margins.select(keys), on=keys, how="anti")
    if unknown.height and unknown_keys == "error":
        raise InvalidDataError(
            f"{unknown[ROWS].sum()} record(s) in {unknown.height} group(s) have keys "
            f"({', '.join(keys)}) that are not in margins; add those groups to margins or "
            + advise(
                python="pass unknown_keys='drop'",
                spec='set unknown_keys = "drop" on the release in the spec',
            )
            + " (nothing was charged)"
        )
    names = [p.name for p in parts]
    joined = margins.select(keys).join(
        agg.select([*keys, ROWS, *dict.fromkeys(names)]), on=keys, how="left"
    )
    if sizes is not None:  # public sizes: the data must match them
        rows = joined[ROWS].fill_null(0).to_numpy()
        wrong = int((rows != sizes).sum())
        if wrong:
            raise InvalidDataError(
                f"{wrong} group(s) have a size in the data different from the public size "
                "declared in margins; the sensitivities assume the declared sizes, so fix "
                "the margins or drop sizes= (nothing was charged)"
            )
    fill = [p.name for p in parts if p.fill is not None]
    return joined.drop(ROWS).with_columns(
        pl.col(dict.fromkeys(fill)).cast(pl.Float64).fill_null(0.0)
    )


def indexed_margins(margins: pl.DataFrame, schema: pl.Schema, keys: Sequence[str]) -> pl.DataFrame:
    """The margins' keys in the data's dtypes (:func:`fit_margins`) with their row number,
    :data:`GROUP` (UInt32): what an engine joins its records to for a histogram."""
    fitted = fit_margins(margins.select(keys), schema, keys)
    return fitted.with_row_index(GROUP).with_columns(pl.col(GROUP).cast(pl.Int64))


def dense_histogram(rows: pl.DataFrame, groups: int, bins: int) -> Any:
    """One histogram part as an int64 array ``(groups, bins)``, in the margins' order.

    ``rows`` holds :data:`GROUP` (the margins' row) and :data:`BIN` (the cell, by
    :meth:`dpframe.mechanisms.quantile.Grid.cell_index`; ``bins`` is the grid's ``cells``)
    -- one row per record, or one per ``(group, bin)`` with its records in
    :data:`COUNT`, however an engine made them; a group absent from the data gets all
    zeros. Refuses (before anything is charged) a bin or group out of range.
    """
    import numpy as np

    group, bin_ = pl.col(GROUP).cast(pl.Int64), pl.col(BIN).cast(pl.Int64)
    ranges = rows.select(
        group.min().alias("g0"), group.max().alias("g1"), bin_.min().alias("b0"), bin_.max()
    )
    g0, g1, b0, b1 = ranges.row(0)
    if rows.height and (g0 < 0 or g1 >= groups or b0 < 0 or b1 >= bins):
        raise InvalidDataError(  # pragma: no cover - an engine's bug, never the data's
            "internal error: a histogram's group or bin is out of range; nothing was charged"
        )
    flat = rows.select(group * bins + bin_).to_series().to_numpy()
    if COUNT not in rows.columns:
        counts = np.bincount(flat, minlength=groups * bins)
    else:
        counts = np.zeros(groups * bins, dtype=np.int64)
        np.add.at(counts, flat, rows[COUNT].cast(pl.Int64).to_numpy())
    return counts.astype(np.int64, copy=False).reshape(groups, bins)


def with_bad_totals(kept: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """``kept`` (per-group parts of the rows each person keeps) with the bad-value counts
    of ``every`` (the same release's :data:`BAD_PREFIX` counts over **all** input rows),
    their totals on the first group (the rule of ``bounded_grouped_parts``)."""
    bads = [c for c in every.columns if c.startswith(BAD_PREFIX)]
    totals = {c: int(every[c].sum() or 0) for c in bads}
    if kept.height == 0:
        refuse_bad_values({c.removeprefix(BAD_PREFIX): n for c, n in totals.items()})
    first = pl.int_range(pl.len()) == 0
    return kept.with_columns(
        pl.when(first).then(pl.lit(n)).otherwise(0).cast(pl.Int64).alias(c)
        for c, n in totals.items()
    )


#: integer dtypes wider than 64 bits (numpy and the kernels stop at 64)
WIDE_INTEGERS = tuple(getattr(pl, n) for n in ("Int128", "UInt128") if hasattr(pl, n))


def check_categories_fit(dtype: pl.DataType, categories: Sequence[Any], column: str) -> None:
    """Refuse declared categories that the column's dtype cannot hold (or mismatched kinds)."""
    cats = list(categories)
    strings = all(isinstance(c, str) for c in cats)
    if dtype in WIDE_INTEGERS:
        raise InvalidDataError(
            f"column {column!r} has dtype {dtype}, wider than the 64-bit integers a "
            "categorical release randomizes or counts; cast it to Int64 (or String) first "
            "(nothing was charged)"
        )
    if dtype.is_integer():
        if strings:
            raise InvalidDataError(
                f"column {column!r} holds integers but its categories are strings: declare "
                "integer categories, or cast the column to String (nothing was charged)"
            )
        fits = pl.Series(cats, dtype=pl.Int64).cast(dtype, strict=False)
        if fits.null_count():
            bad = [c for c, f in zip(cats, fits.to_list(), strict=True) if f is None][:5]
            raise InvalidDataError(
                f"categories {bad} of column {column!r} do not fit its dtype {dtype}; cast the "
                "column to a wider integer type or fix the categories (nothing was charged)"
            )
        return
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum | pl.Categorical):
        if not strings:
            raise InvalidDataError(
                f"column {column!r} holds strings but its categories are integers: declare "
                "string categories, or cast the column to an integer type (nothing was charged)"
            )
        if isinstance(dtype, pl.Enum):
            own = set(dtype.categories.to_list())
            if own != set(cats):
                raise InvalidParameterError(
                    f"column {column!r} is an Enum with categories {sorted(own)[:8]}, which "
                    f"differ from the declared {cats[:8]}; declare the same set, or omit the "
                    "categories to use the Enum's"
                )
        return
    raise InvalidDataError(
        f"column {column!r} has dtype {dtype}; a categorical release needs an Enum, "
        "Categorical, String or integer column (nothing was charged)"
    )


def declared_counts(counts: pl.DataFrame, column: str, categories: Sequence[Any]) -> np.ndarray:
    """The records of each *declared* category, in their order (0 where absent).

    ``counts`` is an engine's count of ``column``
    (:meth:`~dpframe.engines.protocol.Engine.category_counts`: :data:`VALUE`, the values
    in the data with their dtype, and :data:`VALUE_ROWS`). Refuses nulls and values
    outside the categories before anything is charged.

    Examples
    --------
    >>> counts = pl.DataFrame({"value": ["b", "a"], "rows": [3, 1]})
    >>> declared_counts(counts, "count", ["a", "b", "c"]).tolist()
    [1, 3, 0]
    """
    dtype = counts.schema[VALUE]
    check_categories_fit(dtype, categories, column)
    values = counts[VALUE]
    if isinstance(dtype, pl.Enum | pl.Categorical):
        values = values.cast(pl.String)
    known = pl.DataFrame({VALUE: pl.Series(list(categories))}).with_columns(
        pl.col(VALUE).cast(values.dtype)
    )
    found = pl.DataFrame({VALUE: values, VALUE_ROWS: counts[VALUE_ROWS]})
    unknown = found.join(known, on=VALUE, how="anti", nulls_equal=True)
    if unknown.height:
        examples = unknown[VALUE].head(5).to_list()
        raise InvalidDataError(
            f"column {column!r} holds {int(unknown[VALUE_ROWS].sum())} null(s) or value(s) "
            f"outside the declared categories, e.g. {examples}; add them to the categories "
            "or recode them (nothing was charged)"
        )
    out = known.join(found, on=VALUE, how="left", nulls_equal=True, maintain_order="left")
    return out[VALUE_ROWS].fill_null(0).cast(pl.Int64).to_numpy()
