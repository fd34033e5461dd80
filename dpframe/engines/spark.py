"""The Spark engine (``pip install 'dpframe[spark]'``): the same releases, on Spark.

Thin on purpose: Spark computes, dpframe releases. :class:`SparkEngine` implements the
engine protocol (:mod:`dpframe.engines.protocol`) with Spark expressions:

* **exact aggregates** -- the clipped per-group parts of a grouped release with
  ``groupBy().agg()``, the count per value of a column, the covariance of clipped
  columns; each small result comes to the driver with ``toArrow()``, where the same
  checks as for polars run (:mod:`dpframe.engines.driver`) before anything is charged;
* **row-wise** -- PRAM with ``mapInArrow``: every task calls
  :func:`dpframe.engines.arrow.pram_record_batch` on its Arrow batches, with a generator
  keyed from the executor's OS entropy for every batch (never a public or fixed seed),
  so no two partitions, and no retried attempt, repeat noise. The randomization runs
  exactly once, inside the write; Spark keeps one attempt's output (its commit
  protocol). A lazily randomized DataFrame is never handed out: every action on it
  would draw fresh noise under the one charge.

Every release API takes a Spark DataFrame where it takes a polars frame
(``dpframe.group_by(sdf, ...)``, ``dpframe.covariance_matrix(sdf, ...)``,
``dpframe.proportions(sdf, ...)``, ``dpframe.pram.release(sdf, ...)``,
``dpframe.pram.dp_prior(sdf, ...)``); the charge, the noise and the ledger run on the
driver, with the polars path's code. Spark's strings carry no categories: PRAM and
proportions need them declared (never taken from data).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import operator
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from dpframe.core.files import atomic_write_text
from dpframe.core.missing import MissingValues
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit, check_person_rows
from dpframe.core.values import refuse_missing_ids
from dpframe.engines.bounding import check_unit
from dpframe.engines.driver import (
    BAD_PREFIX,
    BIN,
    COUNT,
    GROUP,
    ROWS,
    VALUE,
    VALUE_ROWS,
    person_of,
    with_person,
)
from dpframe.engines.protocol import CovarianceInputs
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.statistics import Operand

if TYPE_CHECKING:
    from dpframe.mechanisms.pram.plan import ArmedPram
    from dpframe.mechanisms.statistics import Part

__all__ = ["SparkEngine", "bounded_spark", "local_session", "require_spark", "schema_frame"]


def require_spark() -> Any:
    """Import pyspark, or explain how to install it (and that Spark needs Java)."""
    try:
        import pyspark
    except ImportError:
        raise InvalidParameterError(
            "the Spark engine needs pyspark >= 4: pip install 'dpframe[spark]' (and Java 17+)"
        ) from None
    return pyspark


def local_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """A SparkSession for ``dpframe release --engine spark`` (``DPFRAME_SPARK_MASTER``).

    Checks for Java first (Spark needs it) and makes the executors run this interpreter,
    so they find dpframe and its dependencies. ``conf`` adds Spark settings, e.g.
    ``{"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"}``.
    """
    import os
    import shutil
    import sys

    require_spark()
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise InvalidParameterError(
            "the Spark engine needs Java 17+ (no `java` on PATH and no JAVA_HOME); install a "
            "JDK or run the release with the polars engine"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pathlib import Path

    from pyspark.sql import SparkSession

    # errors only: Spark's startup warnings say nothing about a release (conf may override)
    logging = Path(__file__).resolve().parents[1] / "data" / "spark-log4j2.properties"
    quiet = f"-Dlog4j2.configurationFile={logging.as_uri()}"
    session = (
        SparkSession.builder.master(master or os.environ.get("DPFRAME_SPARK_MASTER", "local[2]"))
        .appName("dpframe release")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # dpframe shows its own progress
        .config("spark.driver.extraJavaOptions", quiet)
        .config("spark.executor.extraJavaOptions", quiet)
        .config(map=dict(conf or {}))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def schema_frame(sdf: Any) -> pl.LazyFrame:
    """An empty polars frame with the Spark DataFrame's schema (what a plan reads).

    Spark's types arrive through Arrow (``limit(0).toArrow()``): strings as String, numbers
    as the matching numeric dtype, booleans as Boolean; no rows are read.
    """
    return pl.from_arrow(sdf.limit(0).toArrow()).lazy()


def _quoted(column: str) -> str:
    """``column`` as Spark's parser reads a name literally: in backticks, a backtick
    doubled. Unquoted, Spark reads ``a.b`` as field ``b`` of a struct ``a`` (an error, or
    another column's values where such a struct exists), so every user column name
    reaches Spark through here (:func:`_col`)."""
    return "`" + column.replace("`", "``") + "`"


def _col(column: str) -> Any:
    """The Spark column named ``column`` (:func:`_quoted`: a dot or a backtick is part
    of the name)."""
    from pyspark.sql import functions as sf

    return sf.col(_quoted(column))


def _plain_names(sdf: Any, prefix: str) -> tuple[Any, dict[str, str]]:
    """``sdf`` with its columns renamed ``<prefix>0``, ``<prefix>1``, ... in their order,
    and the new name of each old one. Some of Spark's own steps read a frame's names
    unquoted (``mapInArrow`` takes ``df[name]`` of each column; a self-join resolves
    them again), so a frame that goes through them carries only such plain names; the
    caller renames the result back (``toDF``: positional, literal)."""
    names = {c: f"{prefix}{i}" for i, c in enumerate(sdf.columns)}
    return sdf.toDF(*names.values()), names


def _operand(op: Operand) -> Any:
    from pyspark.sql import functions as sf

    col = _col(op.column).cast("double")
    if op.lower is None:
        return col
    return sf.least(sf.greatest(col, sf.lit(op.lower)), sf.lit(op.upper))


def _part(part: Part) -> Any:
    """The Spark aggregate of one exact part (as :func:`dpframe.engines.polars.part_expr`)."""
    from pyspark.sql import functions as sf

    if part.op == "count":
        return sf.count(sf.lit(1)).cast("double")
    if part.op == "at_least":  # a bounds pass's histogram: unclipped, by comparison
        col = _col(part.x.column).cast("double")
        return sf.sum(sf.when(col >= sf.lit(part.x.lower), 1.0).otherwise(0.0))
    if part.op == "sum":
        x = _operand(part.x)
        return sf.sum(x if part.y is None else x * _operand(part.y))
    if part.op == "mean":
        return sf.avg(_operand(part.x))
    if part.op == "var":
        return sf.var_samp(_operand(part.x))
    if part.op == "cov":
        return sf.covar_samp(_operand(part.x), _operand(part.y))
    if part.op == "distinct":
        return sf.countDistinct(_col(person_of(part))).cast("double")
    raise InvalidParameterError(f"unknown aggregate {part.op!r}")


def _bad_rows(column: str, dtype: Any) -> Any:
    """Whether each value of a column is null, NaN or infinite (the rule of
    :mod:`dpframe.core.values`), a Boolean a row."""
    from pyspark.sql import functions as sf
    from pyspark.sql.types import DoubleType, FloatType

    col = _col(column)
    bad = col.isNull()
    if isinstance(dtype, DoubleType | FloatType):
        bad = bad | sf.isnan(col) | (sf.abs(col) == sf.lit(float("inf")))
    return bad


def _bad(column: str, dtype: Any) -> Any:
    """Null, NaN or infinite values of a column (:func:`_bad_rows`), counted."""
    from pyspark.sql import functions as sf

    return sf.sum(sf.when(_bad_rows(column, dtype), 1).otherwise(0)).cast("long")


def _bad_totals(sdf: Any, person: str | None, sources: Sequence[str]) -> dict[str, int]:
    """One pass over all the rows: a missing or infinite identifier refused
    (:func:`dpframe.core.values.refuse_missing_ids`), and each source column's count of
    bad values, by ``__bad__<column>`` name."""
    fields = {f.name: f.dataType for f in sdf.schema.fields}
    columns = list(dict.fromkeys(sources))
    exprs = [_bad(c, fields[c]).alias(f"{BAD_PREFIX}{c}") for c in columns]
    if person is not None:
        exprs.append(_bad(person, fields[person]).alias("__bad_person"))
    if not exprs:
        return {}
    row = sdf.select(*exprs).first()
    if person is not None:
        refuse_missing_ids(person, int(row["__bad_person"] or 0))
    return {f"{BAD_PREFIX}{c}": int(row[f"{BAD_PREFIX}{c}"] or 0) for c in columns}


def _histogram_rows(joined: Any, column: str, part: Part) -> pl.DataFrame:
    """One hist part's ``(__group, __bin, __count)`` rows of ``joined`` (the records with
    their margins' row in ``__group`` and the part's values in ``column``, a plain name)."""
    import pyarrow as pa
    from pyspark.sql import functions as sf

    grid = part.grid

    def binned(batches):  # runs on the executors
        import numpy as np

        for batch in batches:
            x = batch.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
            yield pa.RecordBatch.from_arrays(
                [batch.column(GROUP), pa.array(grid.cell_index(x), type=pa.int64())],
                names=[GROUP, BIN],
            )

    values = joined.select(GROUP, column)
    rows = values.mapInArrow(binned, f"{GROUP} long, {BIN} long")
    counted = rows.groupBy(GROUP, BIN).agg(sf.count(sf.lit(1)).alias(COUNT))
    return cast(pl.DataFrame, pl.from_arrow(counted.toArrow()))


def _path_exists(spark: Any, path: str) -> bool:
    """Whether ``path`` exists, on whatever file system Spark writes it to (HDFS, S3, ...)."""
    try:
        jvm = spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        return bool(
            hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(hpath)
        )
    except Exception:  # Spark Connect: no JVM on this side
        import os

        return os.path.exists(path)


def _remove_path(spark: Any, path: str) -> None:
    """Delete ``path`` (recursively) on Spark's file system; best effort."""
    try:
        jvm = spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(hpath, True)
    except Exception:  # Spark Connect: no JVM on this side
        import shutil

        shutil.rmtree(path, ignore_errors=True)


_ID, _PC, _GC, _N = "__bound_id", "__bound_pc", "__bound_gc", "__bound_n"
_V, _R, _POS = "__bound_v", "__bound_r", "__bound_pos"


def _raw_code(column: str, dtype: pl.DataType) -> Any:
    """A column's code where the rule takes the value's own integer (integers, booleans,
    dates, timestamps: their polars physical value), else None (the values are ranked)."""
    from pyspark.sql import functions as sf

    col = _col(column)
    if dtype.is_integer() or isinstance(dtype, pl.Boolean):
        return col.cast("long")
    if isinstance(dtype, pl.Date):
        return sf.unix_date(col).cast("long")
    if isinstance(dtype, pl.Datetime):  # Spark's timestamps reach polars in microseconds
        return sf.unix_micros(col)
    return None


def _with_rank(rows: Any, columns: list[str], name: str) -> Any:
    """``rows`` with ``name``: the dense rank (from 0) of each row's values of ``columns``
    among those present, in their order (nulls first, as polars ranks a struct), a
    single null value staying null. The distinct values are ranked in one partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    values = rows.select(*[_col(c) for c in columns]).distinct()
    if len(columns) == 1:
        values = values.where(_col(columns[0]).isNotNull())
    rank = sf.dense_rank().over(Window.orderBy(*[_col(c).asc_nulls_first() for c in columns]))
    ranked = values.withColumn(name, (rank - 1).cast("long"))
    cond = [rows[_quoted(c)].eqNullSafe(ranked[_quoted(c)]) for c in columns]
    return rows.join(ranked, on=cond, how="left").select(rows["*"], ranked[name])


def _with_codes(rows: Any, schema: pl.Schema, person: str, keys: list[str]) -> Any:
    """``rows`` with the rule's person and group codes (``__bound_pc``, ``__bound_gc``),
    equal to :func:`dpframe.engines.bounding_rule.codes` on the same records: a few
    aggregation passes, and the ranked columns' distinct values sorted in one partition."""
    from pyspark.sql import functions as sf

    from dpframe.engines.bounding_rule import GROUP_BITS, PERSON_BITS

    names = [f"__bound_k{j}" for j in range(len(keys))]
    raw = {c: _raw_code(c, schema[c]) for c in [person, *keys]}
    spans = [
        (sf.max(e) - sf.min(e)).alias(c) for c, e in raw.items() if e is not None and c == person
    ]
    first = rows.agg(sf.count(sf.lit(1)).alias("__rows"), *spans).first()
    limit = max(1 << 20, 4 * int(first["__rows"]))
    span = first[person] if raw[person] is not None else None
    if raw[person] is None or (span is not None and span >= min(limit, 1 << PERSON_BITS)):
        rows = _with_rank(rows, [person], _PC)
    else:
        rows = rows.withColumn(_PC, raw[person])
    for c, name in zip(keys, names, strict=True):
        e = raw[c]
        rows = _with_rank(rows, [c], name) if e is None else rows.withColumn(name, e)
    if not keys:
        return rows.withColumn(_GC, sf.lit(0).cast("long"))
    per = [e for k in names for e in (sf.min(k), sf.max(k), sf.count(sf.col(k)))]
    stats = rows.agg(*per, sf.count(sf.lit(1))).first()
    n = int(stats[-1])
    widths = []
    for j in range(len(names)):
        lo, hi, present = stats[3 * j] or 0, stats[3 * j + 1], int(stats[3 * j + 2])
        hi = hi if present else lo - 1
        widths.append((lo, hi - lo + 1 + (1 if present < n else 0)))
    if len(keys) == 1 and int(stats[2]) == n:  # one key without nulls: its own codes
        rows = rows.withColumn(_GC, sf.col(names[0]))
    elif math.prod(max(w, 1) for _, w in widths) >= 1 << 62:  # would overflow: ranks
        rows = _with_rank(rows, names, _GC)
    else:  # mixed radix, a null its own code
        gc = sf.lit(0).cast("long")
        for k, (lo, width) in zip(names, widths, strict=True):
            gc = gc * sf.lit(width) + sf.coalesce(sf.col(k) - sf.lit(lo), sf.lit(width - 1))
        rows = rows.withColumn(_GC, gc.cast("long"))
    lo, hi = rows.agg(sf.min(_GC), sf.max(_GC)).first()
    if lo is not None and hi - lo >= min(limit, 1 << GROUP_BITS):
        rows = _with_rank(rows.withColumnRenamed(_GC, "__bound_g0"), ["__bound_g0"], _GC)
    return rows.drop(*names, "__bound_g0")


def _with_priority(pairs: Any, key: tuple[int, int]) -> Any:
    """``pairs`` with each pair's priority (``__bound_v``): the rule's own numpy
    function (:func:`dpframe.engines.bounding_rule.pair_priority`) on the executors'
    Arrow batches of codes, under the release's key (sent with the task)."""
    from pyspark.sql.types import LongType, StructField, StructType

    def priority(batches):  # runs on the executors
        import pyarrow as pa

        from dpframe.engines.bounding_rule import pair_priority

        for batch in batches:
            pc = batch.column(_PC).to_numpy(zero_copy_only=False)
            gc = batch.column(_GC).to_numpy(zero_copy_only=False)
            v = pair_priority(key, pc, gc).astype("int64")
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(v, type=pa.int64())],
                names=[*batch.schema.names, _V],
            )

    schema = StructType([*pairs.schema.fields, StructField(_V, LongType(), False)])
    return pairs.mapInArrow(priority, schema)


def _with_row_priority(rows: Any, key: tuple[int, int]) -> Any:
    """``rows`` (codes and positions) with each row's priority (``__bound_v``): the
    rule's own numpy function (:func:`dpframe.engines.bounding_rule.row_priority`, its
    uint64 bits as a long, order kept by flipping the sign bit) on the executors' Arrow
    batches, under the release's row key (sent with the task)."""
    from pyspark.sql.types import LongType, StructField, StructType

    def priority(batches):  # runs on the executors
        import numpy as np
        import pyarrow as pa

        from dpframe.engines.bounding_rule import row_priority

        for batch in batches:
            pc, gc, pos = (batch.column(c).to_numpy(zero_copy_only=False) for c in (_PC, _GC, _POS))
            v = (row_priority(key, pc, gc, pos) ^ np.uint64(1 << 63)).view(np.int64)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(v, type=pa.int64())],
                names=[*batch.schema.names, _V],
            )

    schema = StructType([*rows.schema.fields, StructField(_V, LongType(), False)])
    return rows.mapInArrow(priority, schema)


def bounded_spark(
    sdf: Any, unit: PrivacyUnit, keys: Sequence[str], source: RandomSource | None = None
) -> Any:
    """The rows each person keeps, as a Spark DataFrame with the input's columns.

    The rule of :mod:`dpframe.engines.bounding_rule`, as the polars engine executes it
    (the same rows for the same key): the key is drawn on the driver from ``source``
    (default: secure), the row key right after it; the rule's codes are computed in
    Spark; each ``(person, keys)`` pair's priority by the rule's numpy function in
    ``mapInArrow``; each person keeps the ``max_groups`` first by ``(priority, group
    code)`` (``row_number()`` over a window partitioned by person). The kept pairs' rows
    are numbered in input order (``monotonically_increasing_id``): a pair within
    ``max_rows`` keeps its first ``max_rows`` numbers, an oversized pair the rows of its
    ``max_rows`` smallest row priorities (the rule's numpy function on the executors,
    ranked in a window over the pair), so the caps hold within the evaluation that keeps
    them, even if the input changed between reads. Nothing reaches the driver but the
    number of rows, the codes' ranges and whether the person column holds a null, a NaN
    or an infinity (refused: NaN is no person). The choices are a function of the rows
    and the keys drawn when this is called: every action on the result sees the same
    rows (for an input with a stable order).
    """
    keys = list(keys)
    check_unit(schema_frame(sdf).collect_schema(), unit, keys)
    _bad_totals(sdf, unit.person, [])
    return _bounded_rows(sdf, unit, keys, source)


def _bounded_rows(sdf: Any, unit: PrivacyUnit, keys: list[str], source: RandomSource | None) -> Any:
    """:func:`bounded_spark` after its checks."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    from dpframe.engines.bounding_rule import row_key, rule_key

    rng = (source or RandomSource()).generator()
    key = rule_key(rng)
    rows_key = row_key(rng)
    columns = list(sdf.columns)
    schema = schema_frame(sdf).collect_schema()
    # on plain names (a self-join and mapInArrow below), renamed back at the end
    sdf, plain = _plain_names(sdf, "__bound_c")
    schema = pl.Schema({plain[c]: dtype for c, dtype in schema.items()})
    person, r = plain[cast(str, unit.person)], unit.max_rows
    keys = [plain[k] for k in keys]
    rows = _with_codes(sdf.withColumn(_ID, sf.monotonically_increasing_id()), schema, person, keys)
    # a pair is its person's and keys' values, never their codes: the codes (the rule's
    # priorities) are fixed by earlier Spark jobs, and an input read differently since
    # could give two groups one code; by values, a person keeps at most max_groups
    # groups, with at most max_rows rows each, in any evaluation
    on = [person, *keys]
    pairs = rows.groupBy(*on).agg(
        sf.count(sf.lit(1)).alias(_N), sf.min(_PC).alias(_PC), sf.min(_GC).alias(_GC)
    )
    if keys:
        rank = sf.row_number().over(Window.partitionBy(person).orderBy(_V, _GC))
        pairs = _with_priority(pairs, key).withColumn(_R, rank)
        pairs = pairs.filter(sf.col(_R) <= unit.max_groups)
    # every kept row numbered in its pair, in input order; the cap is applied to these
    # numbers in the same evaluation (it holds even if the input changed since the count)
    position = sf.row_number().over(Window.partitionBy(*on).orderBy(_ID)) - 1
    joined = [f"__bound_j{j}" for j in range(len(on))]
    flagged = pairs.select(
        *[sf.col(c).alias(j) for c, j in zip(on, joined, strict=True)],
        (sf.col(_N) > r).alias("__bound_big"),
    )
    same = [rows[c].eqNullSafe(flagged[j]) for c, j in zip(on, joined, strict=True)]
    numbered = rows.join(flagged, on=functools.reduce(operator.and_, same)).drop(*joined)
    numbered = numbered.withColumn(_POS, position.cast("long"))
    kept = numbered.filter(~sf.col("__bound_big") & (sf.col(_POS) < r))
    # an oversized pair: the rows of its r smallest row priorities (distinct in a pair)
    oversized = _with_row_priority(numbered.filter(sf.col("__bound_big")), rows_key)
    rank = sf.row_number().over(Window.partitionBy(*on).orderBy(_V))
    oversized = oversized.withColumn(_R, rank).filter(sf.col(_R) <= r).drop(_V, _R)
    kept = kept.unionByName(oversized)
    return kept.select(*plain.values()).toDF(*columns)


def _check_names(sdf: Any) -> None:
    """Refuse a frame whose column names Spark cannot tell apart, before anything is read:
    an empty name (Arrow's schema renames it), or two names alike but for case (Spark
    matches names without case unless ``spark.sql.caseSensitive`` is on: a read of
    either is ambiguous -- in a PRAM write, only after the charge)."""
    names = list(sdf.columns)
    fold = sdf.sparkSession.conf.get("spark.sql.caseSensitive", "false").lower() != "true"
    seen: dict[str, str] = {}
    clashes = []
    for name in names:
        if name == "":
            raise InvalidParameterError(
                "frame: a column of the Spark DataFrame has an empty name; rename it (e.g. "
                "sdf.toDF(*[c or 'unnamed' for c in sdf.columns])). Nothing was read or charged."
            )
        same = name.lower() if fold else name
        if same in seen:
            clashes.append((seen[same], name))
        seen.setdefault(same, name)
    if clashes:
        pairs = ", ".join(f"{a!r} and {b!r}" for a, b in clashes[:5])
        how = " but for case (spark.sql.caseSensitive is off)" if fold else ""
        raise InvalidParameterError(
            f"frame: Spark cannot tell columns {pairs} apart: their names are alike{how}; "
            "rename or drop one of each pair (sdf.withColumnRenamed / sdf.drop). Nothing was "
            "read or charged."
        )


class SparkEngine:
    """The records as a Spark DataFrame."""

    name = "spark"
    streams_rows = False  # the executors write; the driver sees no batch
    offers_dp_prior = False

    def __init__(self, sdf: Any) -> None:
        require_spark()
        _check_names(sdf)
        self.frame = sdf
        self._schema: pl.Schema | None = None

    def schema(self) -> pl.Schema:
        if self._schema is None:
            self._schema = schema_frame(self.frame).collect_schema()
        return self._schema

    def rows(self) -> int:
        return int(self.frame.count())

    def with_constant(self, column: str) -> SparkEngine:
        """The records with ``column`` True in every row (the key of a whole frame)."""
        from pyspark.sql import functions as sf

        return SparkEngine(self.frame.withColumn(column, sf.lit(True)))

    def without_missing(self, missing: MissingValues, columns: Sequence[str]) -> SparkEngine:
        """As :meth:`PolarsEngine.without_missing`: Spark's ``na.drop`` / ``na.fill`` treat
        NaN in a numeric column as missing too."""
        if missing.policy == "refuse":
            return self
        if missing.policy == "drop":
            subset = [_quoted(c) for c in dict.fromkeys(columns)]
            return SparkEngine(self.frame.na.drop(how="any", subset=subset))
        return SparkEngine(self.frame.na.fill({_quoted(c): v for c, v in missing.fill.items()}))

    def bounded(
        self, unit: PrivacyUnit, keys: Sequence[str], source: RandomSource | None = None
    ) -> SparkEngine:
        """The rows each person keeps (:func:`bounded_spark`: the rule's key drawn from
        ``source``, default secure); ``self`` for a record unit."""
        if unit.is_record:
            return self
        return SparkEngine(bounded_spark(self.frame, unit, keys, source))

    def bounded_grouped_parts(
        self,
        unit: PrivacyUnit,
        keys: Sequence[str],
        parts: Sequence[Part],
        sources: Sequence[str],
        source: RandomSource | None = None,
    ) -> pl.DataFrame:
        """As :meth:`PolarsEngine.bounded_grouped_parts`: the parts of the rows each person
        keeps (:func:`bounded_spark`), with the bad-value counts of **all** input rows
        (one pass, with the identifiers' check), put on the first group."""
        if unit.is_record:
            return self.grouped_parts(keys, parts, sources)
        keys = list(keys)
        check_unit(self.schema(), unit, keys)
        totals = _bad_totals(self.frame, unit.person, sources)
        kept = SparkEngine(_bounded_rows(self.frame, unit, keys, source))
        out = kept.grouped_parts(keys, with_person(parts, unit.person), [])
        first = pl.int_range(pl.len()) == 0
        return out.with_columns(
            pl.when(first).then(pl.lit(n)).otherwise(0).cast(pl.Int64).alias(b)
            for b, n in totals.items()
        )

    def _fields(self) -> dict[str, Any]:
        return {f.name: f.dataType for f in self.frame.schema.fields}

    def grouped_parts(
        self, keys: Sequence[str], parts: Sequence[Part], sources: Sequence[str]
    ) -> pl.DataFrame:
        from pyspark.sql import functions as sf

        fields = self._fields()
        aggs: dict[str, Any] = {ROWS: sf.count(sf.lit(1))}
        for c in dict.fromkeys(sources):
            aggs.setdefault(f"{BAD_PREFIX}{c}", _bad(c, fields[c]))
        for p in parts:
            aggs.setdefault(p.name, _part(p))
        grouped = self.frame.groupBy(*[_col(k) for k in keys])
        table = grouped.agg(*[e.alias(n) for n, e in aggs.items()]).toArrow()
        return pl.from_arrow(table)

    def grouped_histograms(
        self, parts: Sequence[Part], margins: pl.DataFrame
    ) -> dict[str, pl.DataFrame]:
        """As :meth:`PolarsEngine.grouped_histograms`, aggregated by Spark: each record's
        cell by the grid's own :meth:`~dpframe.mechanisms.quantile.Grid.cell_index` (numpy,
        in ``mapInArrow`` on the executors, the clipped values first), then one row per
        ``(__group, __bin)`` with its ``__count``."""
        # on plain names: a key or a value named like the margins' own __group is
        # another column (the keys __hist_k<i>, each part's values __hist_v<j>)
        keys = [c for c in margins.columns if c != GROUP]
        plain = {c: f"__hist_k{i}" for i, c in enumerate(keys)}
        public = self.frame.sparkSession.createDataFrame(margins.to_arrow())
        public = public.toDF(*[plain.get(c, c) for c in margins.columns])
        values = [
            _col(cast(Operand, p.x).column).alias(f"__hist_v{j}") for j, p in enumerate(parts)
        ]
        records = self.frame.select(*[_col(c).alias(plain[c]) for c in keys], *values)
        joined = records.join(public, on=list(plain.values()))
        return {p.name: _histogram_rows(joined, f"__hist_v{j}", p) for j, p in enumerate(parts)}

    def grouped_parts_and_histograms(
        self,
        keys: Sequence[str],
        parts: Sequence[Part],
        sources: Sequence[str],
        hists: Sequence[Part],
        margins: pl.DataFrame,
    ) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
        """:meth:`grouped_parts`, then :meth:`grouped_histograms` (two Spark jobs)."""
        return self.grouped_parts(keys, parts, sources), self.grouped_histograms(hists, margins)

    def category_counts(
        self, columns: Sequence[str], per_person: tuple[str, int] | None = None
    ) -> dict[str, pl.DataFrame]:
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        frame, names = self.frame, {c: _quoted(c) for c in columns}
        if per_person is not None:  # each person's first k records of this evaluation
            person, k = per_person
            order = Window.partitionBy(_col(person)).orderBy(sf.monotonically_increasing_id())
            names = {c: f"__count_c{j}" for j, c in enumerate(dict.fromkeys(columns))}
            frame = frame.select(
                *[_col(c).alias(n) for c, n in names.items()],
                sf.row_number().over(order).alias("__count_n"),
            ).filter(sf.col("__count_n") <= k)
        # on a projection of its own names: the column may be named "value" or "rows"
        return {
            c: pl.from_arrow(
                frame.select(sf.col(names[c]).alias(VALUE))
                .groupBy(VALUE)
                .agg(sf.count(sf.lit(1)).alias(VALUE_ROWS))
                .toArrow()
            )
            for c in columns
        }

    def largest_person_rows(self, person: str) -> int:
        from pyspark.sql import functions as sf

        check_unit(self.schema(), PrivacyUnit(person, 1, 1), [])
        fields = self._fields()
        # on a projection of plain names: the person column may be named "n" or "most"
        ids = self.frame.select(_col(person).alias("__person"))
        per = ids.groupBy("__person").agg(sf.count(sf.lit(1)).alias("__n"))
        bad = _bad("__person", fields[person])
        row = per.select(sf.max("__n").alias("most"), bad.alias("bad")).collect()[0]
        refuse_missing_ids(person, int(row["bad"] or 0))
        return int(row["most"] or 0)

    def covariance_inputs(
        self, columns: Sequence[str], bounds: Sequence[tuple[float, float]]
    ) -> CovarianceInputs:
        import numpy as np
        from pyspark.sql import functions as sf

        fields = self._fields()
        clipped = {
            c: _operand(Operand(c, lo, hi)) for c, (lo, hi) in zip(columns, bounds, strict=True)
        }
        row = self.frame.select(
            sf.count(sf.lit(1)).alias(ROWS),
            *[_bad(c, fields[c]).alias(f"{BAD_PREFIX}{c}") for c in columns],
            *[  # each pair once, named by the columns' places: a name may hold any
                # character ("a|b" + "c" and "a" + "b|c" would join alike, and Spark
                # keeps both columns of a name, reading the first)
                sf.covar_samp(clipped[a], clipped[b]).alias(f"__cov_{i}_{j}")
                for i, a in enumerate(columns)
                for j, b in enumerate(columns)
                if i <= j
            ],
        ).first()
        d = len(columns)
        pairs = [[row[f"__cov_{min(i, j)}_{max(i, j)}"] for j in range(d)] for i in range(d)]
        cov = np.array([[np.nan if v is None else v for v in r] for r in pairs], dtype=np.float64)
        bad = {c: int(row[f"{BAD_PREFIX}{c}"] or 0) for c in columns}
        return CovarianceInputs(cov, int(row[ROWS]), bad)

    def output_target(self, path: Path) -> str:
        """``path``'s ``file://`` URI: the executors write there, not the driver."""
        return path.as_uri()

    def check_output(self, path: Any) -> str:
        """A folder that does not exist yet (PRAM writes a new one, never into an old one)."""
        if not isinstance(path, str | os.PathLike):
            raise InvalidParameterError(
                f"path must be a folder path (str or os.PathLike), got {type(path).__name__}"
            )
        target = str(path)
        if _path_exists(self.frame.sparkSession, target):
            raise InvalidParameterError(
                f"path {target!r} already exists: PRAM writes a new folder; remove it or "
                "choose another"
            )
        return target

    def write_rowwise(
        self,
        columns: Sequence[ArmedPram],
        keep: Sequence[str],
        path: Any,
        metadata: dict[str, str],
        source: RandomSource | None = None,
        unit: PrivacyUnit | None = None,
    ) -> Any:
        """Randomize with ``mapInArrow`` and write a Parquet folder once.

        ``path`` must not exist (checked before the charge by the caller, and again
        here). The provenance goes in ``_dpframe.json`` inside the folder (Spark writes
        no custom file metadata). If the write fails, the partial folder is removed; the
        charge stays (noise was drawn). ``source`` is ignored: the executors always key
        from their own OS entropy. Under a person ``unit`` the rows per person are
        counted again on what the randomizing job wrote (Spark evaluates a DataFrame
        afresh at every action): more than ``max_rows`` removes the folder and refuses.
        """
        from dpframe.engines.arrow import pram_record_batch  # pyarrow: loaded on first use
        from dpframe.engines.polars import after_charge_message

        target = str(path)
        spark = self.frame.sparkSession
        if _path_exists(spark, target):  # checked before the charge too (check_output)
            raise InvalidParameterError(f"path {target!r} already exists: PRAM writes a new folder")
        armed = list(columns)
        names = [*(a.column for a in armed), *keep]
        person = None if unit is None or unit.is_record else unit.person
        extra = [] if person is None or person in names else [person]
        # mapInArrow reads the frame's names unquoted: it runs on plain names
        # (:func:`_plain_names`), each batch randomized under the columns' own names
        own = [*names, *extra]
        out, plain = _plain_names(self.frame.select(*[_col(c) for c in own]), "__pram_c")

        def randomize(batches):  # runs on the executors
            import pyarrow as pa

            for batch in batches:
                named = pa.RecordBatch.from_arrays(batch.columns, names=own)
                done = pram_record_batch(named, armed)
                yield pa.RecordBatch.from_arrays(done.columns, names=list(plain.values()))

        # the raw person ids beside the randomized columns, in a folder of this write's
        # own: a name nobody else holds, removed only if this write made it
        full = target if not extra else f"{target.rstrip('/')}.persons-{uuid.uuid4().hex}"
        ours = not extra or not _path_exists(spark, full)
        try:
            out.mapInArrow(randomize, out.schema).toDF(*own).write.parquet(full)
            if person is not None:
                written = spark.read.parquet(full)
                _check_written_persons(written, cast(PrivacyUnit, unit), after_charge_message())
                if extra:
                    written.select(*[_col(c) for c in names]).write.parquet(target)
            local = target.removeprefix("file://")
            if metadata:
                doc = {k: json.loads(v) for k, v in metadata.items()}
                atomic_write_text(f"{local}/_dpframe.json", json.dumps(doc))
        except BaseException:
            _remove_path(spark, target)
            raise
        finally:
            if extra and ours:
                _remove_path(spark, full)
        return target

    def written_frame(self, path: Any) -> pl.LazyFrame:
        return pl.scan_parquet(f"{str(path).removeprefix('file://')}/*.parquet")

    def written_counts(self, path: Any, columns: Sequence[str]) -> dict[str, pl.DataFrame]:
        """Each released column's count per value, read back by Spark (for the checks):
        the driver never reads the microdata."""
        uri = Path(path).as_uri() if isinstance(path, Path) else str(path)
        written = self.frame.sparkSession.read.parquet(uri)
        return SparkEngine(written).category_counts(columns)

    def cancel_work(self) -> None:
        """Cancel the Spark jobs still running (what PySpark's own Ctrl-C handler does,
        which a dpframe job replaces while it runs): an interrupted job's executors stop
        writing. Best effort -- a write that outlives it is removed by the next run's
        repair."""
        try:
            self.frame.sparkSession.sparkContext.cancelAllJobs()
        except Exception:  # Spark Connect (no SparkContext), or the session is gone
            with contextlib.suppress(Exception):
                self.frame.sparkSession.interruptAll()


def _check_written_persons(written: Any, unit: PrivacyUnit, after: str) -> None:
    """What a randomizing Spark job wrote: no missing person id, none with more rows than
    ``max_rows`` (the Spark twin of ``engines.polars.check_written_persons``)."""
    from pyspark.sql import functions as sf

    person = cast(str, unit.person)
    col = _col(person)
    dtype = dict(written.dtypes)[person]
    infinite = sf.abs(col) == sf.lit(float("inf"))
    missing = col.isNull() | (
        (sf.isnan(col) | infinite) if dtype in ("double", "float") else sf.lit(False)
    )
    row = written.agg(
        sf.sum(missing.cast("long")).alias("missing"),
    ).collect()[0]
    if row["missing"]:
        raise InvalidDataError(
            f"unit: column {person!r} had null, NaN or infinite person ids in the pass that "
            "randomized. " + after
        )
    ids = written.select(_col(person).alias("__person"))  # plain names: a person "count"
    per = ids.groupBy("__person").agg(sf.count(sf.lit(1)).alias("__n"))
    most = per.agg(sf.max("__n")).collect()[0][0]
    check_person_rows(int(most or 0), unit, "PRAM", after_charge=after)
