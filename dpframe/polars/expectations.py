"""A release's suite as plain data: the expectations its table must meet (no Great Expectations).

Each release kind declares its own suite next to its release object (``grouped_suite`` in
:mod:`dpframe.polars.grouped`, ``covariance_suite`` and ``proportions_suite`` in
:mod:`dpframe.polars.frame`, ``pram_suite`` in :mod:`dpframe.polars.pram`), as a function
of the release's declared arguments (its spec entry, :meth:`Release.to_spec`), the public
facts its file records (:meth:`Release.facts`: margins, sizes, the input's rows, the
categories) and the released table alone -- never the input -- so a published file is
checked again from its provenance. This module holds what those suites share.

A suite is a :class:`Suite`: the released table (``"main"``) and small tables derived from
it in polars (``"keys"``, ``"pairs"``, ``"types"``, ``"values.<column>"``, ...), and a list
of expectations, each ``{"type": "expect_...", "kwargs": {...}, "table": name, "meta":
{...}}``: the expectation type and arguments as Great Expectations names them, the table it
applies to, and what the failure message needs. Only built-in expectation types are used
(a suite reloaded from JSON silently drops one whose class is not imported).
:mod:`dpframe.jobs.checks` turns a suite into Great Expectations suites and validates it.

Examples
--------
>>> import polars as pl
>>> from dpframe.polars.frame import proportions_suite
>>> entry = {"name": "shares", "kind": "proportions", "column": "vote",
...          "categories": ["a", "b"], "tolerance": 1e-9}
>>> table = pl.DataFrame({"vote": ["a", "b"], "proportion": [0.25, 0.75]})
>>> suite = proportions_suite(entry, {}, table)
>>> [(e["type"], e["kwargs"]) for e in suite.expectations
...  if e["kwargs"].get("column") == "proportion"][1]
('expect_column_values_to_be_between', {'column': 'proportion', 'min_value': 0.0, 'max_value': 1.0})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dpframe.core.sensitivity import variance_bound
from dpframe.errors import InvalidParameterError

__all__ = [
    "FINITE",
    "PROPORTIONS_TOLERANCE",
    "RTOL",
    "Suite",
    "bounds_rule",
    "declared",
    "expect_finite_between",
    "expect_types",
    "for_gx",
    "number",
    "table_column",
    "values_like",
    "variance_cap",
]

#: Relative tolerance of the derived checks (Cauchy--Schwarz, symmetry, variance upper bound,
#: correlation in [-1, 1]): rounding in the release must not fail a correct table.
RTOL = 1e-9

#: how far a proportions release's sum may be from 1 (a spec entry's default ``tolerance``)
PROPORTIONS_TOLERANCE = 1e-9

#: the largest finite float: a "between" with it as a bound refuses +-inf
FINITE = 1.7976931348623157e308


@dataclass
class Suite:
    """A release's suite: the tables to validate and the expectations on them (plain data).

    ``release`` and ``kind`` name the release and its spec kind (``"grouped"``, ...);
    ``index`` gives, per table, the columns that locate a failing row in a message.
    """

    release: str
    kind: str
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    index: dict[str, list[str]] = field(default_factory=dict)
    expectations: list[dict[str, Any]] = field(default_factory=list)

    def add_table(self, name: str, frame: pl.DataFrame, index: list[str]) -> None:
        """Add a table to validate, with the columns that locate its rows."""
        self.tables[name] = frame
        self.index[name] = [c for c in index if c in frame.columns]

    def expect(
        self, type_: str, table: str, *, meta: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """Add an expectation on ``table`` (its id is its position, for the messages' order)."""
        meta = {**(meta or {}), "id": len(self.expectations)}
        self.expectations.append({"type": type_, "kwargs": kwargs, "table": table, "meta": meta})


def start(arguments: Mapping[str, Any], table: Any) -> tuple[Suite, pl.DataFrame | pl.LazyFrame]:
    """An empty suite for ``arguments``' release, and ``table`` checked to be a polars frame."""
    if not isinstance(table, pl.DataFrame | pl.LazyFrame):
        raise InvalidParameterError(
            "frame must be a polars DataFrame or LazyFrame (the released table), got "
            f"{type(table).__name__}"
        )
    return Suite(str(arguments["name"]), str(arguments["kind"])), table


def input_rows(facts: Mapping[str, Any]) -> int | None:
    """The input's row count the facts record (an integer >= 0), if they do."""
    n = facts.get("input_rows")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise InvalidParameterError(f"input_rows must be an integer >= 0, got {n!r}")
    return n


def number(v: float) -> str:
    """A bound as a message shows it."""
    return format(float(v), ".10g")


def for_gx(frame: pl.DataFrame) -> pl.DataFrame:
    """Enum, Categorical, temporal and other columns as strings (plain pandas values)."""
    casts = [pl.col(c).cast(pl.String) for c, t in frame.schema.items() if not _gx_dtype_ok(t)]
    return frame.with_columns(casts) if casts else frame


def _gx_dtype_ok(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() or dtype in (pl.String, pl.Boolean, pl.Null)


def values_like(values: list[Any], dtype: pl.DataType | None) -> list[Any]:
    """``values`` as the checked column holds them once handed to Great Expectations."""
    s = pl.Series(values, strict=False)
    if dtype is not None and s.dtype != dtype:
        cast = s.cast(dtype, strict=False)
        if cast.null_count() == s.null_count():
            s = cast
    if not _gx_dtype_ok(s.dtype):
        s = s.cast(pl.String)
    return s.to_list()


def table_column(frame: pl.DataFrame, name: str, dtype: Any = pl.Float64) -> pl.Expr:
    """Column ``name`` of ``frame``, or nulls if the table lacks it (its own check says so)."""
    if name in frame.columns:
        return pl.col(name)
    return pl.lit(None, dtype=dtype).alias(name)


def bounds_rule(lo: float | None, hi: float | None) -> str:
    """The rule a value outside ``[lo, hi]`` (either may be open) breaks."""
    if lo is not None and hi is not None:
        return f"outside [{number(lo)}, {number(hi)}]"
    if lo is not None:
        return f"below {number(lo)}"
    return f"above {number(hi)}" if hi is not None else "not a number"


def _range_rule(lo: float | None, hi: float | None) -> str:
    """The rule a finite statistic with optional bounds breaks."""
    if lo is None and hi is None:
        return "not finite"
    return f"{bounds_rule(lo, hi)} or not finite"


def expect_finite_between(
    suite: Suite, table: str, col: str, lo: float | None, hi: float | None, meta: dict[str, Any]
) -> None:
    """``col`` finite and within ``[lo, hi]`` (either may be open)."""
    suite.expect(
        "expect_column_values_to_be_between",
        table,
        column=col,
        min_value=-FINITE if lo is None else lo,
        max_value=FINITE if hi is None else hi,
        meta={**meta, "rule": _range_rule(lo, hi)},
    )


def expect_types(suite: Suite, frame: pl.DataFrame, expected: dict[str, str], index: str) -> None:
    """Each of ``expected``'s columns has its polars dtype (a derived table, one row a
    column: Great Expectations sees pandas dtypes, which blur them)."""
    rows = [
        {
            "column": c,
            "dtype": str(frame.schema[c]) if c in frame.columns else "missing",
            "expected": want,
            "ok": int(c not in frame.columns or str(frame.schema[c]) == want),
        }
        for c, want in expected.items()
    ]
    types = pl.DataFrame(
        rows,
        schema={"column": pl.String, "dtype": pl.String, "expected": pl.String, "ok": pl.Int64},
    )
    suite.add_table(index, types, ["column", "dtype", "expected"])
    suite.expect(
        "expect_column_values_to_be_between",
        index,
        column="ok",
        min_value=1,
        max_value=1,
        meta={
            "subject_from": "column",
            "noun": "columns",
            "rule": "of the wrong type",
            "example": "{column} has type {dtype}, expected {expected}",
        },
    )


def variance_cap(lo: float | None, hi: float | None) -> float | None:
    """The largest sample variance of values in ``[lo, hi]`` over every ``n >= 2``."""
    if lo is None or hi is None:
        return None
    return variance_bound(lo, hi, 2)


def declared(values: Any, dtype: pl.DataType | None, what: str, hint: str) -> list[Any]:
    """The declared categories: given, else those of the column's Enum dtype."""
    if values is not None:
        return list(values)
    if isinstance(dtype, pl.Enum):
        return dtype.categories.to_list()
    raise InvalidParameterError(
        f"{what}: no declared categories to check against; {hint} (the categories present in "
        "the data are not a public declaration)"
    )
