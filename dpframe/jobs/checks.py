"""Check a released table before it is published: Great Expectations suites built from the spec.

Every release of a spec gets a suite derived from its declaration, not from the data:

* **grouped** -- the key columns take only the public margins' values, every margin key
  appears exactly once, the row count is the margins' height, the columns are exactly the
  keys and the statistics, each count an Int64 and every other statistic a Float64; every
  statistic is finite and lies in its bounds (a mean in ``[lower, upper]``, a proportion
  in ``[0, 1]``, a variance in ``[0, R**2 / 2]`` -- the largest sample variance of values
  in bounds of width ``R`` --, a count ``>= 0`` and a sum of non-negative values ``>= 0``
  when ``nonnegative``, a correlation in ``[-1, 1]``); a count is an integer; a covariance
  obeys Cauchy--Schwarz, ``|cov| <= sqrt(var_x var_y)``; a correlation is
  ``cov / sqrt(var_x var_y)`` clipped to ``[-1, 1]``, and null exactly where a released
  variance is 0; no nulls -- except in a correlation column (a correlation is undefined
  where a released variance is 0, so it may be null or NaN) and, when the margins carry
  public group sizes (``sizes=``), in a statistic of a group too small to have one
  (size 0; size 0 or 1 for a variance or covariance), which the release leaves null;
* **pram** -- exactly the declared columns (a column PRAM did not randomize must not be
  published); every PRAM'd column takes only its declared categories (``categories=``, or
  the categories its release recorded, or of its Enum dtype, or the keys of a public
  prior), holds no null, and has as many rows as the input (``input_rows=``, recorded in
  the file's provenance);
* **proportions** -- exactly the declared categories, once each, proportions in ``[0, 1]``
  summing to 1 within the spec's ``tolerance``;
* **covariance** -- one row per variable, exactly the variables' columns (Float64), every
  cell finite and not null, variances ``>= 0`` and at most ``n R**2 / (4 (n - 1))`` (with
  the public size ``n``, from the spec or the file's provenance; ``R**2 / 2`` when it is
  unknown), every covariance within Cauchy--Schwarz and the matrix symmetric (both within a
  relative tolerance of 1e-9).

Only built-in expectations are used (a suite reloaded from JSON silently drops an
expectation whose class is not imported, so custom classes would vanish on reload). The
checks that span rows or columns -- Cauchy--Schwarz, symmetry, "each key exactly once",
"as many rows as the input" -- run on small tables derived in polars (``"pairs"``,
``"keys"``, ``"values.<column>"``, ...), each validated as its own batch with its own suite.

Great Expectations has no polars data source: each (small) table is converted with
``to_pandas()`` at the boundary. Great Expectations itself (about 3 s and 240 MB to import)
is imported only when a check runs; :func:`expectations_for` needs none of it.

Examples
--------
>>> import polars as pl
>>> from dpframe.jobs.spec import ProportionsSpec
>>> spec = ProportionsSpec(name="shares", kind="proportions", column="vote",
...                        categories=["a", "b"], epsilon=1.0)
>>> table = pl.DataFrame({"vote": ["a", "b"], "proportion": [0.25, 0.75]})
>>> exps = expectations_for(spec, table)
>>> [(e["type"], e["kwargs"]) for e in exps if e["kwargs"].get("column") == "proportion"][1]
('expect_column_values_to_be_between', {'column': 'proportion', 'min_value': 0.0, 'max_value': 1.0})
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.files import atomic_write_text
from dpframe.core.sensitivity import variance_bound
from dpframe.errors import (
    ChecksUnavailableError,
    InvalidDataError,
    InvalidParameterError,
    MissingMarginsError,
)
from dpframe.jobs.kinds import statistic
from dpframe.jobs.spec import (
    CovarianceSpec,
    GroupedSpec,
    PramSpec,
    ProportionsSpec,
    StatisticSpec,
)

__all__ = [
    "FINITE",
    "RTOL",
    "CheckResult",
    "check_release",
    "expectations_for",
    "load_suite",
    "save_check",
]

#: Relative tolerance of the derived checks (Cauchy--Schwarz, symmetry, variance upper bound,
#: correlation in [-1, 1]): rounding in the release must not fail a correct table.
RTOL = 1e-9

#: the largest finite float: a "between" with it as a bound refuses +-inf
FINITE = 1.7976931348623157e308

SUITE_FORMAT = "dpframe.check/1"
_MAX_EXAMPLES = 3

_Release = GroupedSpec | PramSpec | ProportionsSpec | CovarianceSpec


# -- the result ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    """The outcome of :func:`check_release`.

    ``failures`` holds one readable line per failed expectation (it names the column and
    shows offending values); ``suite`` and ``result`` are the Great Expectations suites and
    validation results as JSON-ready dicts (one per validated table, under ``"suites"`` /
    ``"results"``), as :func:`save_check` writes them.
    """

    release: str
    success: bool
    failures: list[str]
    suite: dict = field(repr=False)
    result: dict = field(repr=False)
    n_expectations: int
    #: every table validated, as Great Expectations saw it: the released one (``"main"``)
    #: and those derived from it (see :func:`save_check`)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    def report(self) -> str:
        """A multi-line human-readable summary."""
        kind = self.suite.get("kind", "?")
        if self.success:
            return (
                f"check of release {self.release!r} ({kind}): passed, "
                f"{self.n_expectations} expectations met"
            )
        stats = self.result.get("statistics", {})
        failed = stats.get("unsuccessful_expectations", len(self.failures))
        lines = [
            f"check of release {self.release!r} ({kind}): FAILED, {failed} of "
            f"{self.n_expectations} expectations not met:"
        ]
        lines += [f"  - {f}" for f in self.failures]
        return "\n".join(lines)


# -- the plan: tables to validate and expectations on them (no Great Expectations here) ----


@dataclass
class _Suite:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    index: dict[str, list[str]] = field(default_factory=dict)
    expectations: list[dict] = field(default_factory=list)

    def add_table(self, name: str, frame: pl.DataFrame, index: list[str]) -> None:
        self.tables[name] = frame
        self.index[name] = [c for c in index if c in frame.columns]

    def expect(self, type_: str, table: str, *, meta: dict | None = None, **kwargs: Any) -> None:
        self.expectations.append(
            {"type": type_, "kwargs": kwargs, "table": table, "meta": dict(meta or {})}
        )


def _fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return format(v, ".10g")
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return {"NaN": "NaN", "Infinity": "inf", "-Infinity": "-inf"}[v]
    return repr(v)


def _num(v: float) -> str:
    return format(float(v), ".10g")


def _gx_dtype_ok(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() or dtype in (pl.String, pl.Boolean, pl.Null)


def _for_gx(frame: pl.DataFrame) -> pl.DataFrame:
    """Enum, Categorical, temporal and other columns as strings (plain pandas values)."""
    casts = [pl.col(c).cast(pl.String) for c, t in frame.schema.items() if not _gx_dtype_ok(t)]
    return frame.with_columns(casts) if casts else frame


def _values_like(values: list[Any], dtype: pl.DataType | None) -> list[Any]:
    """``values`` as the checked column holds them once handed to Great Expectations."""
    s = pl.Series(values, strict=False)
    if dtype is not None and s.dtype != dtype:
        cast = s.cast(dtype, strict=False)
        if cast.null_count() == s.null_count():
            s = cast
    if not _gx_dtype_ok(s.dtype):
        s = s.cast(pl.String)
    return s.to_list()


def _col(frame: pl.DataFrame, name: str, dtype: pl.DataType = pl.Float64) -> pl.Expr:
    if name in frame.columns:
        return pl.col(name)
    return pl.lit(None, dtype=dtype).alias(name)


def _bounds_rule(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"outside [{_num(lo)}, {_num(hi)}]"
    if lo is not None:
        return f"below {_num(lo)}"
    return f"above {_num(hi)}"


def _range_rule(lo: float | None, hi: float | None) -> str:
    """The rule a finite statistic with optional bounds breaks."""
    if lo is None and hi is None:
        return "not finite"
    return f"{_bounds_rule(lo, hi)} or not finite"


def _expect_finite_between(
    plan: _Suite, table: str, col: str, lo: float | None, hi: float | None, meta: dict
) -> None:
    """``col`` finite and within ``[lo, hi]`` (either may be open)."""
    plan.expect(
        "expect_column_values_to_be_between",
        table,
        column=col,
        min_value=-FINITE if lo is None else lo,
        max_value=FINITE if hi is None else hi,
        meta={**meta, "rule": _range_rule(lo, hi)},
    )


def _expect_types(plan: _Suite, frame: pl.DataFrame, expected: dict[str, str], index: str) -> None:
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
    plan.add_table(index, types, ["column", "dtype", "expected"])
    plan.expect(
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


def _variance_cap(lo: float | None, hi: float | None) -> float | None:
    """The largest sample variance of values in ``[lo, hi]`` over every ``n >= 2``."""
    if lo is None or hi is None:
        return None
    return variance_bound(lo, hi, 2)


def _grouped_outputs(spec: GroupedSpec) -> list[tuple[str, str, StatisticSpec]]:
    """(column, role, statistic) of every released column, in order."""
    out: list[tuple[str, str, StatisticSpec]] = []
    for s in spec.statistics:
        if s.stat == "count":
            out.append((s.name or "count", "count", s))
        elif s.stat == "cov":
            n = s.name or f"{s.x}_{s.y}"
            out += [
                (f"{n}_var_{s.x}", "cov_var", s),
                (f"{n}_var_{s.y}", "cov_var", s),
                (f"{n}_cov", "cov", s),
                (f"{n}_corr", "corr", s),
            ]
        else:
            out.append((s.name or f"{s.column}_{s.stat}", s.stat, s))
    names = [c for c, _, _ in out]
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        raise InvalidParameterError(
            f"release {spec.name!r}: statistics {dup} would be released under the same column "
            "name; give them distinct name= values"
        )
    return out


# A statistic of a group with public size below this is released as null (dpframe.agg).
_MIN_SIZE = {"mean": 1, "proportion": 1, "var": 2, "cov_var": 2, "cov": 2}


def _plan_grouped(
    spec: GroupedSpec, frame: pl.DataFrame, margins: pl.DataFrame | None, sizes: str | None
) -> _Suite:
    if margins is None:
        raise MissingMarginsError(
            f"release {spec.name!r} (grouped): pass margins= (the public key frame "
            f"{spec.margins!r}) to check its keys and row count"
        )
    keys = list(spec.by)
    absent = [k for k in keys if k not in margins.columns]
    if absent:
        raise InvalidParameterError(
            f"margins= has no key column(s) {absent} of release {spec.name!r} (by={keys})"
        )
    if sizes is not None and sizes not in margins.columns:
        raise InvalidParameterError(f"sizes={sizes!r} is not a column of margins=")
    outputs = _grouped_outputs(spec)
    schema = frame.schema
    public = margins.select(keys).unique(maintain_order=True)
    public = public.with_columns(
        pl.col(k).cast(schema[k], strict=False) for k in keys if k in schema
    )

    plan = _Suite()
    plan.add_table("main", _for_gx(frame), keys)
    where = {"where": keys}
    plan.expect(
        "expect_table_columns_to_match_set",
        "main",
        column_set=keys + [c for c, _, _ in outputs],
        exact_match=True,
    )
    plan.expect(
        "expect_table_row_count_to_equal",
        "main",
        value=public.height,
        meta={"expected": "one row per public key of the margins"},
    )
    for k in keys:
        plan.expect("expect_column_values_to_not_be_null", "main", column=k, meta=where)
        plan.expect(
            "expect_column_values_to_be_in_set",
            "main",
            column=k,
            value_set=_values_like(margins[k].unique(maintain_order=True).to_list(), schema.get(k)),
            meta={**where, "rule": "not among the margins' keys"},
        )

    nullable = {}
    for col, role, s in outputs:
        if role == "corr":
            # a correlation is undefined (null/NaN) where a released variance is 0
            pass
        elif sizes is not None and role in _MIN_SIZE:
            nullable[col] = _MIN_SIZE[role]  # checked against the public sizes below
        else:
            plan.expect("expect_column_values_to_not_be_null", "main", column=col, meta=where)
        lo = hi = None
        if role in ("count", "sum") and spec.nonnegative and statistic(s).nonnegative:
            lo = 0.0
        elif role == "mean":
            lo, hi = s.lower, s.upper
        elif role == "proportion":
            lo, hi = 0.0, 1.0
        elif role == "var":
            lo, hi = 0.0, _variance_cap(s.lower, s.upper)
        elif role == "cov_var":
            y = s.y is not None and col.endswith(f"_var_{s.y}") and s.y != s.x
            lo = 0.0
            hi = _variance_cap(s.lower_y, s.upper_y) if y else _variance_cap(s.lower, s.upper)
        if role == "corr":
            plan.expect(
                "expect_column_values_to_be_between",
                "main",
                column=col,
                min_value=-1.0 - RTOL,
                max_value=1.0 + RTOL,
                meta={**where, "rule": "outside [-1, 1]"},
            )
        else:
            _expect_finite_between(plan, "main", col, lo, hi, where)
    types = {c: "Int64" if role == "count" else "Float64" for c, role, _ in outputs}
    _expect_types(plan, frame, types, "types")

    # counts are integers (integer noise on integer counts)
    counts = [c for c, role, _ in outputs if role == "count" and c in schema]
    if counts and all(k in schema for k in keys):
        parts = [
            frame.select(
                *[pl.col(k).cast(pl.String) for k in keys],
                pl.lit(c).alias("statistic"),
                pl.col(c).cast(pl.Float64, strict=False).alias("value"),
            )
            for c in counts
        ]
        ints = pl.concat(parts).with_columns(
            pl.when(pl.col("value").is_finite())
            .then((pl.col("value") - pl.col("value").round()).abs())
            .otherwise(0.0)
            .alias("fraction")
        )
        plan.add_table("integers", _for_gx(ints), [*keys, "statistic", "value"])
        plan.expect(
            "expect_column_values_to_be_between",
            "integers",
            column="fraction",
            min_value=0.0,
            max_value=0.0,
            meta={
                "subject_from": "statistic",
                "noun": "values",
                "rule": "not an integer (a count is released with integer noise)",
                "example": "{value}",
                "where": keys,
            },
        )

    # a correlation is its released covariance over the released standard deviations,
    # clipped to [-1, 1], and undefined (null) exactly where a released variance is 0
    corrs = [(c, s) for c, role, s in outputs if role == "corr"]
    if corrs and all(k in schema for k in keys):
        parts = []
        for col, s in corrs:
            n = col.removesuffix("_corr")
            vx, vy, cv = f"{n}_var_{s.x}", f"{n}_var_{s.y}", f"{n}_cov"
            f64 = pl.Float64
            var_x = _col(frame, vx).cast(f64, strict=False)
            var_y = _col(frame, vy).cast(f64, strict=False)
            cov = _col(frame, cv).cast(f64, strict=False)
            corr = _col(frame, col).cast(f64, strict=False)
            defined = (var_x * var_y) > 0
            expected = pl.when(defined).then((cov / (var_x * var_y).sqrt()).clip(-1.0, 1.0))
            present = corr.is_not_null() & ~corr.is_nan()
            parts.append(
                frame.select(
                    *[pl.col(k).cast(pl.String) for k in keys],
                    pl.lit(col).alias("statistic"),
                    corr.alias("corr"),
                    expected.alias("expected"),
                    pl.lit(f"{cv} / sqrt({vx} * {vy})").alias("of"),
                    pl.when(defined & present)
                    .then((corr - expected).abs() - RTOL * (1 + expected.abs()))
                    .when(defined != present)
                    .then(1.0)
                    .otherwise(0.0)
                    .alias("off"),
                )
            )
        table = pl.concat(parts)
        plan.add_table(
            "correlations", _for_gx(table), [*keys, "statistic", "corr", "expected", "of"]
        )
        plan.expect(
            "expect_column_values_to_be_between",
            "correlations",
            column="off",
            max_value=0.0,
            meta={
                "subject_from": "statistic",
                "noun": "groups",
                "rule": "inconsistent with the released cov and variances (a correlation is "
                "cov / sqrt(var_x var_y) clipped to [-1, 1], and NaN/null exactly where a "
                "variance is 0)",
                "example": "corr {corr}, expected {expected} = {of}",
                "where": keys,
            },
        )

    # every public key exactly once
    have_keys = all(k in schema for k in keys)
    if have_keys:
        counts = frame.group_by(keys).agg(pl.len().alias("rows"))
        key_table = public.join(counts, on=keys, how="left", nulls_equal=True).with_columns(
            pl.col("rows").fill_null(0)
        )
    else:
        key_table = public.with_columns(pl.lit(None, dtype=pl.UInt32).alias("rows"))
    plan.add_table("keys", _for_gx(key_table), keys)
    plan.expect(
        "expect_column_values_to_be_between",
        "keys",
        column="rows",
        min_value=1,
        max_value=1,
        meta={
            "subject": "keys",
            "noun": "public keys",
            "rule": "not released exactly once",
            "example": "{rows} rows",
            "where": keys,
        },
    )

    # Cauchy-Schwarz for every covariance
    covs = [(c, s) for c, role, s in outputs if role == "cov"]
    if covs:
        parts = []
        for col, s in covs:
            n = col.removesuffix("_cov")
            vx, vy = f"{n}_var_{s.x}", f"{n}_var_{s.y}"
            bound = (
                _col(frame, vx).cast(pl.Float64).clip(lower_bound=0)
                * _col(frame, vy).cast(pl.Float64).clip(lower_bound=0)
            ).sqrt()
            parts.append(
                frame.select(
                    *[_col(frame, k, pl.String) for k in keys],
                    pl.lit(col).alias("statistic"),
                    _col(frame, col).cast(pl.Float64).alias("cov"),
                    bound.alias("bound"),
                    pl.lit(f"sqrt({vx} * {vy})").alias("bound_of"),
                )
            )
        pairs = pl.concat(parts, how="vertical_relaxed").with_columns(
            (pl.col("cov").abs() - pl.col("bound") * (1 + RTOL)).alias("excess")
        )
        plan.add_table("pairs", _for_gx(pairs), [*keys, "statistic", "cov", "bound", "bound_of"])
        plan.expect(
            "expect_column_values_to_be_between",
            "pairs",
            column="excess",
            max_value=0.0,
            meta={
                "subject_from": "statistic",
                "noun": "groups",
                "rule": "beyond Cauchy-Schwarz |cov| <= sqrt(var_x var_y)",
                "example": "|{cov}| > {bound_of} = {bound}",
                "where": keys,
            },
        )

    # with public sizes, a null only where the group is too small to have a value
    if sizes is not None:
        sized = (
            frame.join(
                public.join(
                    margins.select(*keys, sizes).with_columns(
                        pl.col(k).cast(schema[k], strict=False) for k in keys if k in schema
                    ),
                    on=keys,
                    how="left",
                    nulls_equal=True,
                ).select(*keys, pl.col(sizes).alias("__size")),
                on=keys,
                how="left",
                nulls_equal=True,
            )
            if have_keys
            else None
        )
        parts = []
        for col, need in nullable.items():
            if sized is None or col not in sized.columns:
                continue
            c = pl.col(col)
            missing = c.is_null() | (c.is_nan() if sized.schema[col].is_float() else False)
            parts.append(
                sized.filter(missing).select(
                    *keys,
                    pl.lit(col).alias("statistic"),
                    pl.col("__size").cast(pl.Float64).alias("size"),
                    (pl.col("__size").cast(pl.Float64) - (need - 1)).alias("size_over"),
                )
            )
        empty = pl.DataFrame(
            schema={
                **{k: schema.get(k, pl.String) for k in keys},
                "statistic": pl.String,
                "size": pl.Float64,
                "size_over": pl.Float64,
            }
        )
        nulls = pl.concat([empty, *parts], how="vertical_relaxed")
        plan.add_table("nulls", _for_gx(nulls), [*keys, "statistic", "size"])
        plan.expect(
            "expect_column_values_to_be_between",
            "nulls",
            column="size_over",
            max_value=0.0,
            meta={
                "subject_from": "statistic",
                "noun": "null values",
                "rule": "are in groups that should have a value (a null is allowed only "
                "where the public size is 0, or at most 1 for a variance or covariance)",
                "example": "size {size}",
                "where": keys,
            },
        )
    return plan


def _declared(values: Any, dtype: pl.DataType | None, what: str, hint: str) -> list[Any]:
    if values is not None:
        return list(values)
    if isinstance(dtype, pl.Enum):
        return dtype.categories.to_list()
    raise InvalidParameterError(
        f"{what}: no declared categories to check against; {hint} (the categories present in "
        "the data are not a public declaration)"
    )


def _plan_pram(
    spec: PramSpec,
    frame: pl.DataFrame | pl.LazyFrame,
    input_rows: int | None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> _Suite:
    lf = frame.lazy()
    schema = lf.collect_schema()
    plan = _Suite()
    declared = [c.column for c in spec.columns] + [*spec.public, *keep]
    # exactly the declared columns (and those the release was told to keep as they are):
    # a column PRAM did not randomize must not leave
    plan.add_table(
        "columns", pl.DataFrame({"column": list(schema)}, schema={"column": pl.String}), ["column"]
    )
    plan.expect(
        "expect_column_values_to_be_in_set",
        "columns",
        column="column",
        value_set=declared,
        meta={
            "subject": "columns",
            "noun": "columns",
            "rule": f"not among the declared PRAM columns {declared} (published without "
            "randomization)",
            "where": [],
        },
    )
    for c in spec.columns:
        col = c.column
        cats = c.categories
        if cats is None and isinstance(c.prior, dict):
            cats = list(c.prior)
        cats = _declared(
            cats,
            schema.get(col),
            f"release {spec.name!r}, column {col!r}",
            "give categories=[...] in the spec or release an Enum column",
        )
        table = f"values.{col}"
        if value_counts is not None and col in value_counts:  # counted by the engine
            values = value_counts[col].select(col, "rows").sort(col, nulls_last=True)
        elif col in schema:
            values = lf.group_by(col).agg(pl.len().alias("rows")).sort(col, nulls_last=True)
            values = values.collect()
        else:
            values = pl.DataFrame(schema={"rows": pl.UInt32})
        plan.add_table(table, _for_gx(values), [col, "rows"])
        plan.expect("expect_column_to_exist", table, column=col)
        plan.expect(
            "expect_column_values_to_be_in_set",
            table,
            column=col,
            value_set=_values_like(cats, schema.get(col)),
            meta={
                "noun": "distinct values",
                "rule": f"outside the declared categories {cats}",
                "example": "{value} in {rows} row(s)",
                "where": [],
            },
        )
        plan.expect(
            "expect_column_values_to_not_be_null",
            table,
            column=col,
            meta={"noun": "distinct values", "example": "in {rows} row(s)"},
        )
        if input_rows is not None:
            plan.expect(
                "expect_column_sum_to_be_between",
                table,
                column="rows",
                min_value=int(input_rows),
                max_value=int(input_rows),
                meta={
                    "subject": col,
                    "what": "row count",
                    "expected": f"{int(input_rows)} (the input's rows)",
                },
            )
    return plan


def _plan_proportions(spec: ProportionsSpec, frame: pl.DataFrame) -> _Suite:
    col = spec.column
    dtype = frame.schema.get(col)
    cats = _declared(
        spec.categories,
        dtype,
        f"release {spec.name!r}",
        "give categories=[...] in the spec or release an Enum column",
    )
    plan = _Suite()
    plan.add_table("main", _for_gx(frame), [col])
    where = {"where": [col], "where_label": "category"}
    plan.expect(
        "expect_table_columns_to_match_set",
        "main",
        column_set=[col, "proportion"],
        exact_match=True,
    )
    plan.expect(
        "expect_table_row_count_to_equal",
        "main",
        value=len(cats),
        meta={"expected": "one row per declared category"},
    )
    plan.expect("expect_column_values_to_not_be_null", "main", column=col, meta=where)
    plan.expect(
        "expect_column_distinct_values_to_equal_set",
        "main",
        column=col,
        value_set=_values_like(cats, dtype),
        meta={"expected": f"the declared categories {cats}"},
    )
    plan.expect("expect_column_values_to_be_unique", "main", column=col, meta=where)
    plan.expect("expect_column_values_to_not_be_null", "main", column="proportion", meta=where)
    plan.expect(
        "expect_column_values_to_be_between",
        "main",
        column="proportion",
        min_value=0.0,
        max_value=1.0,
        meta={**where, "rule": "outside [0, 1]"},
    )
    plan.expect(
        "expect_column_sum_to_be_between",
        "main",
        column="proportion",
        min_value=1.0 - spec.tolerance,
        max_value=1.0 + spec.tolerance,
        meta={"expected": f"1 within {spec.tolerance:g}"},
    )
    return plan


def _plan_covariance(spec: CovarianceSpec, frame: pl.DataFrame, input_rows: int | None) -> _Suite:
    cols = list(spec.columns)
    plan = _Suite()
    plan.add_table("main", _for_gx(frame), ["column"])
    where = {"where": ["column"], "where_label": "row"}
    plan.expect(
        "expect_table_columns_to_match_set", "main", column_set=["column", *cols], exact_match=True
    )
    plan.expect(
        "expect_table_row_count_to_equal",
        "main",
        value=len(cols),
        meta={"expected": "one row per variable"},
    )
    plan.expect("expect_column_values_to_not_be_null", "main", column="column", meta=where)
    plan.expect(
        "expect_column_distinct_values_to_equal_set",
        "main",
        column="column",
        value_set=cols,
        meta={"expected": f"the variables {cols}"},
    )
    plan.expect("expect_column_values_to_be_unique", "main", column="column", meta=where)
    for c in cols:
        plan.expect("expect_column_values_to_not_be_null", "main", column=c, meta=where)

    # the matrix by name (rows located by the "column" column, not by position)
    cell: dict[tuple[str, str], float | None] = {}
    if "column" in frame.columns:
        names = frame["column"].cast(pl.String).to_list()
        for i in cols:
            r = names.index(i) if i in names else None
            for j in cols:
                if r is not None and j in frame.columns:
                    v = frame[j][r]
                    cell[i, j] = None if v is None else float(v)
    for c in cols:  # every cell finite
        _expect_finite_between(plan, "main", c, None, None, where)
    _expect_types(plan, frame, {"column": "String", **{c: "Float64" for c in cols}}, "types")
    n = spec.n if spec.n is not None else input_rows
    size = n if n is not None and n >= 2 else 2  # with n unknown: the largest over n >= 2
    diag = pl.DataFrame(
        {
            "variable": cols,
            "var": [cell.get((c, c)) for c in cols],
            "upper": [variance_bound(lo, hi, size) for lo, hi in spec.bounds],
        },
        schema={"variable": pl.String, "var": pl.Float64, "upper": pl.Float64},
    ).with_columns((pl.col("var") - pl.col("upper") * (1 + RTOL)).alias("over"))
    plan.add_table("diagonal", diag, ["variable", "var", "upper"])
    vwhere = {"where": ["variable"], "where_label": "variable"}
    plan.expect(
        "expect_column_values_to_be_between",
        "diagonal",
        column="var",
        min_value=0.0,
        meta={**vwhere, "subject": "diagonal (variances)", "rule": "below 0"},
    )
    bound_rule = (
        f"above n R^2 / (4 (n - 1)) with n = {n} (R = upper - lower)"
        if n is not None and n >= 2
        else "above R^2 / 2, the largest sample variance of values in their bounds"
    )
    plan.expect(
        "expect_column_values_to_be_between",
        "diagonal",
        column="over",
        max_value=0.0,
        meta={
            **vwhere,
            "subject": "diagonal (variances)",
            "rule": bound_rule,
            "example": "{var} > {upper}",
        },
    )

    rows = []
    for a, i in enumerate(cols):
        for j in cols[a + 1 :]:
            cij, cji = cell.get((i, j)), cell.get((j, i))
            vi, vj = cell.get((i, i)), cell.get((j, j))
            bound = None if vi is None or vj is None else math.sqrt(max(vi, 0.0) * max(vj, 0.0))
            cs = asym = None
            if cij is not None and cji is not None:
                big = max(abs(cij), abs(cji))
                asym = abs(cij - cji) - RTOL * big
                if bound is not None:
                    cs = big - bound * (1 + RTOL)
            larger = cij if cji is None or (cij is not None and abs(cij) >= abs(cji)) else cji
            rows.append(
                {
                    "pair": f"cov({i}, {j})",
                    "cov": larger,
                    "bound_of": f"sqrt(cov({i}, {i}) cov({j}, {j}))",
                    "cov_ij": cij,
                    "cov_ji": cji,
                    "bound": bound,
                    "cs_excess": cs,
                    "asym_excess": asym,
                }
            )
    pairs = pl.DataFrame(
        rows,
        schema={
            "pair": pl.String,
            "cov": pl.Float64,
            "bound_of": pl.String,
            "cov_ij": pl.Float64,
            "cov_ji": pl.Float64,
            "bound": pl.Float64,
            "cs_excess": pl.Float64,
            "asym_excess": pl.Float64,
        },
    )
    plan.add_table("pairs", pairs, ["pair", "cov", "bound_of", "cov_ij", "cov_ji", "bound"])
    plan.expect(
        "expect_column_values_to_be_between",
        "pairs",
        column="cs_excess",
        max_value=0.0,
        meta={
            "subject": "covariances",
            "noun": "pairs",
            "rule": "beyond Cauchy-Schwarz |cov_ij| <= sqrt(cov_ii cov_jj)",
            "example": "|{pair}| = |{cov}| > {bound_of} = {bound}",
        },
    )
    plan.expect(
        "expect_column_values_to_be_between",
        "pairs",
        column="asym_excess",
        max_value=0.0,
        meta={
            "subject": "covariances",
            "noun": "pairs",
            "rule": f"not symmetric (relative tolerance {RTOL:g})",
            "example": "{pair}: {cov_ij} vs {cov_ji}",
        },
    )
    return plan


def _plan(
    release: Any,
    frame: Any,
    margins: pl.DataFrame | None,
    input_rows: int | None,
    sizes: str | None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> _Suite:
    if not isinstance(release, _Release):
        raise InvalidParameterError(
            "release must be a release spec (GroupedSpec, PramSpec, ProportionsSpec or "
            f"CovarianceSpec from dpframe.jobs.spec), got {type(release).__name__}"
        )
    if not isinstance(frame, pl.DataFrame | pl.LazyFrame):
        raise InvalidParameterError(
            "frame must be a polars DataFrame or LazyFrame (the released table), got "
            f"{type(frame).__name__}"
        )
    if margins is not None and not isinstance(margins, pl.DataFrame):
        raise InvalidParameterError(
            f"margins must be a polars DataFrame, got {type(margins).__name__}"
        )
    if input_rows is not None and (
        isinstance(input_rows, bool) or not isinstance(input_rows, int) or input_rows < 0
    ):
        raise InvalidParameterError(f"input_rows must be an integer >= 0, got {input_rows!r}")
    if isinstance(release, PramSpec):
        plan = _plan_pram(release, frame, input_rows, value_counts, keep)
    else:
        df = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
        if isinstance(release, GroupedSpec):
            plan = _plan_grouped(release, df, margins, sizes)
        elif isinstance(release, ProportionsSpec):
            plan = _plan_proportions(release, df)
        else:
            plan = _plan_covariance(release, df, input_rows)
    for i, e in enumerate(plan.expectations):
        e["meta"]["id"] = i
    return plan


def expectations_for(
    release: _Release,
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    margins: pl.DataFrame | None = None,
    input_rows: int | None = None,
    sizes: str | None = None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> list[dict]:
    """The expectations a release's table must meet, without Great Expectations.

    Each is ``{"type": "expect_...", "kwargs": {...}, "table": name, "meta": {...}}``: the
    expectation type and arguments as Great Expectations names them, the table it applies
    to (``"main"``, the released table, or one derived from it: ``"keys"``, ``"pairs"``,
    ``"nulls"``, ``"diagonal"``, ``"values.<column>"``), and what :func:`check_release`
    needs to word a failure. The suite depends on the spec and the public inputs only
    (``margins``, ``input_rows``, ``sizes``); ``frame`` gives the dtypes the declared values
    are cast to.

    ``margins`` (the public key frame) is required for a grouped release; ``input_rows``
    (the input's row count) adds the row-count check of a PRAM release and, for a
    covariance release without ``n``, the variances' upper bound; ``sizes`` names a column
    of ``margins`` with public group sizes (a statistic of a group too small to have one is
    then allowed to be null). ``value_counts`` gives, for a PRAM release, each column's
    ``(<column>, rows)`` counts computed by the engine (Spark), so the microdata itself is
    not read on the driver; ``frame`` then gives only the dtypes. ``keep`` names the
    columns a PRAM release was told to carry through unchanged (``keep=``): the only
    columns allowed beside the randomized ones.
    """
    plan = _plan(release, frame, margins, input_rows, sizes, value_counts, keep)
    return [dict(e) for e in plan.expectations]


# -- Great Expectations (imported here only) ---------------------------------------------


def _gx():
    """Import Great Expectations, turning an exit during its import into an error.

    Great Expectations imports ``pyspark.sql.connect`` when pyspark is installed, and
    pyspark 4 then calls ``sys.exit(0)`` if the Spark Connect dependencies (grpcio, ...)
    are missing and the main module has no file (``python -c``, a script on stdin): it
    takes that for a doctest run. Silently exiting with status 0 in the middle of a
    release would be a disaster; ``dpframe[spark]`` installs ``pyspark[connect]`` so it
    does not happen, and this turns it into a clear error if it still does.
    """
    try:
        import great_expectations as gx
    except SystemExit as exc:
        raise ChecksUnavailableError(
            "importing great_expectations exited the interpreter (pyspark without its Spark "
            "Connect dependencies, in a program with no file of its own such as python -c): "
            "pip install 'pyspark[connect]' (or 'dpframe[spark]'), or run from a file"
        ) from exc
    return gx


def _import_would_exit() -> bool:
    """Whether ``import great_expectations`` would hit pyspark's ``sys.exit(0)`` (see _gx).

    pyspark exits when the main module has no spec and no file, the interpreter is not
    interactive, and its Spark Connect dependencies are missing; this asks pyspark itself
    about the last (without importing Great Expectations, which costs 240 MB).
    """
    import importlib.util
    import sys

    if "great_expectations" in sys.modules or importlib.util.find_spec("pyspark") is None:
        return False
    main = sys.modules.get("__main__")
    if main is None or main.__spec__ is not None or hasattr(main, "__file__"):
        return False
    if hasattr(sys, "ps1"):
        return False
    try:
        from pyspark.testing.utils import should_test_connect
    except Exception:  # another pyspark layout: the import-time guard in _gx still holds
        return False
    return not should_test_connect


def ensure_checks_available() -> None:
    """Raise :class:`ChecksUnavailableError` if the checks could not run (cheap: imports nothing
    heavy). A release job calls it before it charges anything."""
    import importlib.util

    if importlib.util.find_spec("great_expectations") is None:
        raise ChecksUnavailableError(
            "great_expectations is not installed; it checks every release before it is "
            "published: pip install great-expectations (a dependency of dpframe)"
        )
    if _import_would_exit():
        raise ChecksUnavailableError(
            "importing great_expectations would exit the interpreter: pyspark is installed "
            "without its Spark Connect dependencies and this program has no file of its own "
            "(python -c): pip install 'pyspark[connect]' (or 'dpframe[spark]'), or run "
            "from a file"
        )


def _context():
    gx = _gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def _expectation(e: dict):
    """A built-in Great Expectations expectation (never a dict, which could be dropped)."""
    import great_expectations.expectations as gxe

    cls_name = "".join(part.capitalize() for part in e["type"].split("_"))
    cls = getattr(gxe, cls_name, None)
    if cls is None:
        raise InvalidParameterError(f"unknown expectation type {e['type']!r}")
    kwargs = {k: v for k, v in e["kwargs"].items() if v is not None}
    return cls(**kwargs, meta={"dpframe": {**e["meta"], "table": e["table"]}})


def _jsonable(obj: Any) -> Any:
    """Strict JSON: non-finite floats as strings, tuples as lists, numpy scalars unwrapped."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    if hasattr(obj, "item"):  # numpy scalar
        return _jsonable(obj.item())
    return str(obj)


def _exception_message(info: Any) -> str | None:
    if isinstance(info, dict):
        if info.get("raised_exception") and info.get("exception_message"):
            return str(info["exception_message"]).strip().splitlines()[-1]
        for v in info.values():
            msg = _exception_message(v)
            if msg:
                return msg
    return None


def _row_desc(row: dict, meta: dict, column: str | None = None) -> str:
    where = [c for c in meta.get("where", []) if c in row and c != column]
    if not where:
        return ""
    label = meta.get("where_label")
    if label and len(where) == 1:
        return f"{label} {_fmt(row[where[0]])}"
    return ", ".join(f"{c}={_fmt(row[c])}" for c in where)


def _example(row: dict, column: str, meta: dict) -> str:
    template = meta.get("example")
    if template:
        # strings as they are (names, formulas), numbers formatted; {value} quoted
        fields = {k: v if isinstance(v, str) else _fmt(v) for k, v in row.items()}
        fields["value"] = _fmt(row.get(column))
        try:
            text = template.format(**fields)
        except (KeyError, IndexError):
            text = _fmt(row.get(column))
    elif meta.get("_type") == "expect_column_values_to_not_be_null":
        text = ""
    else:
        text = _fmt(row.get(column))
    desc = _row_desc(row, meta, column)
    if text and desc:
        return f"{text} ({desc})"
    return text or (f"at {desc}" if desc else "")


def _failure(cfg: dict, res: dict, exc: str | None) -> str:
    """One readable line for a failed expectation."""
    type_ = cfg["type"]
    kw = cfg.get("kwargs", {})
    meta = dict((cfg.get("meta") or {}).get("dpframe", {}))
    meta["_type"] = type_
    column = kw.get("column")
    subject = meta.get("subject") or column or "table"
    if exc:
        return f"{subject}: could not be checked: {exc}"
    index_rows = res.get("partial_unexpected_index_list") or []
    if meta.get("subject_from") and index_rows:
        names = sorted({str(r.get(meta["subject_from"])) for r in index_rows})
        subject = ", ".join(names)
    if type_ == "expect_table_columns_to_match_set":
        mism = (res.get("details") or {}).get("mismatched") or {}
        parts = []
        if mism.get("missing"):
            parts.append(f"missing {sorted(mism['missing'])}")
        if mism.get("unexpected"):
            parts.append(f"unexpected {sorted(mism['unexpected'])}")
        return f"columns: {'; '.join(parts) or 'differ'} (expected {sorted(kw['column_set'])})"
    if type_ == "expect_column_to_exist":
        return f"{column}: column is missing from the released table"
    if type_ == "expect_table_row_count_to_equal":
        why = meta.get("expected")
        return f"row count is {res.get('observed_value')}, expected {kw['value']}" + (
            f" ({why})" if why else ""
        )
    if type_ == "expect_column_sum_to_be_between":
        what = meta.get("what", "sum")
        expected = meta.get("expected") or f"in [{kw.get('min_value')}, {kw.get('max_value')}]"
        return f"{subject}: {what} is {_fmt(res.get('observed_value'))}, expected {expected}"
    if type_ in (
        "expect_column_distinct_values_to_equal_set",
        "expect_column_distinct_values_to_contain_set",
    ):
        parts = []
        if res.get("partial_missing_list"):
            parts.append(f"missing {[v for v in res['partial_missing_list']]}")
        if res.get("partial_unexpected_list"):
            parts.append(f"unexpected {[v for v in res['partial_unexpected_list']]}")
        expected = meta.get("expected") or f"{kw.get('value_set')}"
        return f"{subject}: values differ from {expected}: {'; '.join(parts) or 'see result'}"
    # column map expectations: between, in_set, not_null, unique
    bad = res.get("unexpected_count")
    total = res.get("element_count")
    noun = meta.get("noun", "values")
    if type_ == "expect_column_values_to_not_be_null":
        rule = "are null or NaN"
    elif type_ == "expect_column_values_to_be_unique":
        rule = "repeated"
    elif type_ == "expect_column_values_to_be_in_set":
        rule = meta.get("rule") or f"outside {kw.get('value_set')}"
    else:
        rule = meta.get("rule") or _bounds_rule(kw.get("min_value"), kw.get("max_value"))
    head = f"{subject}: {bad} of {total} {noun} {rule}"
    if index_rows:
        examples = [_example(r, column, meta) for r in index_rows[:_MAX_EXAMPLES]]
    else:
        examples = [_fmt(v) for v in (res.get("partial_unexpected_list") or [])[:_MAX_EXAMPLES]]
    examples = [x for x in examples if x]
    more = "" if (bad or 0) <= len(examples) else ", ..."
    return head + (f", e.g. {'; '.join(examples)}{more}" if examples else "")


def _failures(results: dict[str, dict]) -> list[str]:
    out: list[str] = []
    for _table, vr in results.items():
        entries = vr.get("results", [])
        # a missing column is reported once, by the column-set / column-exists check
        missing: set[str] = set()
        absent_tables = False
        for r in entries:
            cfg = r["expectation_config"]
            if r["success"]:
                continue
            if cfg["type"] == "expect_table_columns_to_match_set":
                mism = (r.get("result", {}).get("details") or {}).get("mismatched") or {}
                missing.update(mism.get("missing") or [])
            if cfg["type"] == "expect_column_to_exist":
                absent_tables = True
        order = sorted(
            entries,
            key=lambda r: ((r["expectation_config"].get("meta") or {}).get("dpframe", {})).get(
                "id", 0
            ),
        )
        for r in order:
            if r["success"]:
                continue
            cfg = r["expectation_config"]
            exc = _exception_message(r.get("exception_info"))
            if absent_tables and cfg["type"] != "expect_column_to_exist":
                continue
            if exc and cfg.get("kwargs", {}).get("column") in missing:
                continue
            out.append(_failure(cfg, r.get("result") or {}, exc))
    return out


def _result_format(index: list[str]) -> dict:
    rf: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 20}
    if index:
        rf["unexpected_index_column_names"] = index
    return rf


def check_release(
    release: _Release,
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    margins: pl.DataFrame | None = None,
    input_rows: int | None = None,
    sizes: str | None = None,
    value_counts: Mapping[str, pl.DataFrame] | None = None,
    keep: Sequence[str] = (),
) -> CheckResult:
    """Validate a released table against the suite its spec implies (see the module doc).

    Imports Great Expectations (once per process: about 3 s). Each table -- the released
    one and the small ones derived from it -- is converted to pandas and validated as its
    own batch of an ephemeral context. Returns a :class:`CheckResult`; it does not raise
    when an expectation fails (``success`` is False and ``failures`` says why). Arguments
    as in :func:`expectations_for`.
    """
    plan = _plan(release, frame, margins, input_rows, sizes, value_counts, keep)
    gx = _gx()
    context = _context()
    source = context.data_sources.add_pandas(name="dpframe")
    suites: dict[str, dict] = {}
    results: dict[str, dict] = {}
    for table, data in plan.tables.items():
        planned = [e for e in plan.expectations if e["table"] == table]
        if not planned:
            continue
        suite = gx.ExpectationSuite(
            name=f"{release.name}.{table}",
            expectations=[_expectation(e) for e in planned],
            meta={"dpframe": {"release": release.name, "kind": release.kind, "table": table}},
        )
        if len(suite.expectations) != len(planned):
            raise InvalidDataError(
                f"Great Expectations kept {len(suite.expectations)} of {len(planned)} "
                f"expectations of table {table!r}"
            )
        asset = source.add_dataframe_asset(name=table)
        batch_definition = asset.add_batch_definition_whole_dataframe(name="whole")
        batch = batch_definition.get_batch(batch_parameters={"dataframe": data.to_pandas()})
        validation = batch.validate(suite, result_format=_result_format(plan.index[table]))
        suites[table] = _jsonable(suite.to_json_dict())
        results[table] = _jsonable(validation.to_json_dict())
    n = len(plan.expectations)
    failed = sum(r["statistics"]["unsuccessful_expectations"] for r in results.values())
    success = all(r["success"] for r in results.values())
    failures = [] if success else _failures(results)
    suite_doc = {
        "format": SUITE_FORMAT,
        "release": release.name,
        "kind": release.kind,
        "n_expectations": n,
        "great_expectations_version": gx.__version__,
        "suites": suites,
    }
    result_doc = {
        "format": SUITE_FORMAT,
        "release": release.name,
        "kind": release.kind,
        "success": success,
        "statistics": {
            "evaluated_expectations": n,
            "successful_expectations": n - failed,
            "unsuccessful_expectations": failed,
        },
        "failures": failures,
        "results": results,
    }
    return CheckResult(
        release=release.name,
        success=success,
        failures=failures,
        suite=suite_doc,
        result=result_doc,
        n_expectations=n,
        tables={t: plan.tables[t] for t in suites},
    )


# -- saving and reloading -----------------------------------------------------------------


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def save_check(result: CheckResult, folder: str | Path, *, data_docs: bool = False) -> list[Path]:
    """Write ``{release}.suite.json`` and ``{release}.validation.json`` into ``folder``, and
    the folder ``{release}.checks/``: for every table validated, ``<table>.parquet`` (the
    released table as checked, ``main``, and each table derived from it: ``keys``,
    ``pairs``, ``types``, ``values.<column>``, ...) beside ``<table>.suite.json``, a plain
    Great Expectations suite -- so a Great Expectations user can run every suite in their
    own Data Context (docs/release-cli.md shows how).

    Each file is written to a temporary file and renamed into place, so a reader never
    sees half a file. With ``data_docs=True`` also builds Great Expectations Data Docs
    (static HTML: the suites and their validation results) under
    ``folder/"data_docs"/release/`` (its ``index.html`` is returned last); the pages load
    their styles and scripts from public CDNs. Returns the paths written.
    """
    if not isinstance(result, CheckResult):
        raise InvalidParameterError(f"result must be a CheckResult, got {type(result).__name__}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    texts = {
        folder / f"{result.release}.suite.json": _dump(result.suite),
        folder / f"{result.release}.validation.json": _dump(result.result),
    }
    index = _build_data_docs(result, folder / "data_docs" / result.release) if data_docs else None
    checks = _save_tables(result, folder / f"{result.release}.checks") if result.tables else []
    for path, text in texts.items():
        atomic_write_text(path, text)
    return [*texts, *checks, *([index] if index is not None else [])]


def _save_tables(result: CheckResult, target: Path) -> list[Path]:
    """``target/<table>.parquet`` and ``<table>.suite.json`` for every table, swapped in whole."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    written = []
    try:
        for table, frame in result.tables.items():
            frame.write_parquet(tmp / f"{table}.parquet")
            suite = result.suite["suites"][table]
            plain = {k: suite[k] for k in ("name", "expectations", "meta") if k in suite}
            (tmp / f"{table}.suite.json").write_text(_dump(plain))
            written += [target / f"{table}.parquet", target / f"{table}.suite.json"]
        os.chmod(tmp, 0o755)
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def _build_data_docs(result: CheckResult, target: Path) -> Path:
    """Render the suites and results with the Data Docs site builder, then move into place."""
    gx = _gx()
    from great_expectations.core.expectation_validation_result import (
        expectationSuiteValidationResultSchema,
    )
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        context = _context()
        context.add_data_docs_site(
            site_name="dpframe",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(tmp),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        run_id = RunIdentifier(run_name=f"dpframe-check-{result.release}")
        for table, suite_json in result.suite["suites"].items():
            suite = context.suites.add(_suite_from_json(gx, suite_json))
            validation = expectationSuiteValidationResultSchema.load(
                result.result["results"][table]
            )
            key = ValidationResultIdentifier(
                expectation_suite_identifier=ExpectationSuiteIdentifier(name=suite.name),
                run_id=run_id,
                batch_identifier=table,
            )
            context.validation_results_store.set(key, validation)
        context.build_data_docs(site_names=["dpframe"])
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the site is published
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / target.name)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target / "index.html"


def _suite_from_json(gx: Any, suite_json: dict):
    """Rebuild a GE suite; GE logs (and skips) an expectation it cannot build -- quieten it."""
    log = logging.getLogger("great_expectations.core.expectation_suite")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        return gx.ExpectationSuite(**suite_json)
    finally:
        log.setLevel(level)


def load_suite(path: str | Path) -> dict:
    """Re-read a suite saved by :func:`save_check`, checking that nothing was lost.

    Great Expectations silently drops, on loading, an expectation whose class is not
    registered (a custom expectation whose module was not imported). Each saved suite is
    rebuilt with Great Expectations and its expectation count compared with the count
    written at save time; a mismatch raises :class:`~dpframe.errors.InvalidDataError`
    naming the expectation types that were lost. Returns the saved document.
    """
    path = Path(path)
    if not path.exists():
        raise InvalidParameterError(f"suite file {path} does not exist")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidDataError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != SUITE_FORMAT:
        raise InvalidDataError(
            f"{path} is not a dpframe suite file (expected format {SUITE_FORMAT!r})"
        )
    saved = doc.get("n_expectations")
    suites = doc.get("suites") or {}
    in_file = sum(len(s.get("expectations", [])) for s in suites.values())
    if in_file != saved:
        raise InvalidDataError(
            f"{path}: the file lists {in_file} expectations but {saved} were saved; "
            "it was edited or truncated"
        )
    gx = _gx()
    kept = 0
    lost: Counter[str] = Counter()
    for suite_json in suites.values():
        suite = _suite_from_json(gx, suite_json)
        kept += len(suite.expectations)
        lost += Counter(e["type"] for e in suite_json["expectations"]) - Counter(
            e.expectation_type for e in suite.expectations
        )
    if kept != saved:
        raise InvalidDataError(
            f"{path}: Great Expectations loaded {kept} of the {saved} saved expectations; "
            f"it dropped {dict(lost)} (their classes are not registered: import the module "
            "defining them, or rebuild the suite with built-in expectations)"
        )
    return doc
