"""Apache Spark adapter (``pip install 'dpframe[spark]'``): the same releases, on Spark.

Thin on purpose: Spark computes, dpframe releases.

* **Grouped statistics** -- :func:`grouped_release` builds the exact, clipped per-group
  aggregates with Spark's ``groupBy().agg()`` (the same parts polars computes: counts,
  clipped sums, sums of squares and products, sample variances), brings the small result
  to the driver with ``toArrow()``, and hands it to
  :meth:`dpframe.grouped.GroupedRelease.prepare_from`. From there the release is the
  polars path's own code: public margins joined (empty groups released), bad values and
  unknown keys refused before anything is charged, one atomic charge, noise drawn once on
  the driver.
* **Proportions and covariance matrices** -- :func:`proportions` and
  :func:`covariance_matrix` compute the exact counts per declared category, or the exact
  covariance matrix of the clipped columns, with Spark, and release them with the polars
  path's own code (:func:`dpframe.frame_releases.proportions_from_counts`,
  :func:`~dpframe.frame_releases.covariance_matrix_from_exact`).
* **PRAM** -- :func:`pram` charges every column once on the driver, *before* the job, then
  randomizes with ``mapInArrow`` and writes the result to Parquet, once: each task calls
  :func:`dpframe.engines.arrow.pram_record_batch` on its Arrow batches, with a generator
  keyed from the executor's OS entropy for every batch (never a public or fixed seed), so
  no two partitions, and no retried attempt, repeat noise. Spark keeps one attempt's
  output (its commit protocol); a retried task draws fresh noise that replaces the failed
  attempt's, which was never published. The randomized DataFrame is never handed out
  lazily: every action on it would draw fresh noise under the one charge.

Spark's strings carry no categories: PRAM needs them declared (never taken from data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from dpframe.errors import InvalidDataError, InvalidParameterError

__all__ = [
    "covariance_matrix",
    "dp_prior",
    "grouped_release",
    "local_session",
    "pram",
    "proportions",
    "require_spark",
    "schema_frame",
]


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
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(master or os.environ.get("DPFRAME_SPARK_MASTER", "local[2]"))
        .appName("dpframe release")
        .config("spark.ui.enabled", "false")
        .config(map=dict(conf or {}))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def schema_frame(sdf: Any) -> pl.LazyFrame:
    """An empty polars frame with the Spark DataFrame's schema (what a plan reads).

    Spark's types arrive through Arrow (``limit(0).toArrow()``): strings as String, numbers
    as the matching numeric dtype; no rows are read.
    """
    return pl.from_arrow(sdf.limit(0).toArrow()).lazy()


def _spark_value(s: Any, which: str = "x") -> Any:
    from pyspark.sql import functions as sf

    if which == "y":
        o = s.options
        col = sf.col(o["y"]).cast("double")
        return sf.least(sf.greatest(col, sf.lit(o["lower_y"])), sf.lit(o["upper_y"]))
    col = sf.col(s.column).cast("double")
    if s.kind == "proportion":
        return col
    return sf.least(sf.greatest(col, sf.lit(s.lower)), sf.lit(s.upper))


def _spark_parts(s: Any, public: bool) -> dict[str, Any]:
    """The Spark expressions of :meth:`dpframe.agg.Statistic.exact_exprs` (same names)."""
    from pyspark.sql import functions as sf

    n = sf.count(sf.lit(1)).cast("double")
    if s.kind == "count":
        return {s.part("n"): n}
    x = _spark_value(s)
    if s.kind == "sum":
        return {s.part("sum"): sf.sum(x)}
    if s.kind == "cov":
        y = _spark_value(s, "y")
        if public:
            return {
                s.part("var_x"): sf.var_samp(x),
                s.part("var_y"): sf.var_samp(y),
                s.part("cov"): sf.covar_samp(x, y),
            }
        return {
            s.part("sx"): sf.sum(x),
            s.part("sy"): sf.sum(y),
            s.part("sxx"): sf.sum(x * x),
            s.part("syy"): sf.sum(y * y),
            s.part("sxy"): sf.sum(x * y),
            s.part("n"): n,
        }
    if public:
        if s.kind == "var":
            return {s.part("var"): sf.var_samp(x)}
        return {s.part("mean"): sf.avg(x)}
    parts = {s.part("sum"): sf.sum(x), s.part("n"): n}
    if s.kind == "var":
        parts[s.part("sumsq")] = sf.sum(x * x)
    return parts


def _spark_bad(column: str, dtype: Any) -> Any:
    from pyspark.sql import functions as sf
    from pyspark.sql.types import DoubleType, FloatType

    col = sf.col(column)
    bad = col.isNull()
    if isinstance(dtype, DoubleType | FloatType):
        bad = bad | sf.isnan(col) | (sf.abs(col) == sf.lit(float("inf")))
    return sf.sum(sf.when(bad, 1).otherwise(0)).cast("long")


def spark_aggregates(release: Any, sdf: Any) -> pl.DataFrame:
    """Per-group exact aggregates of a :class:`~dpframe.grouped.GroupedRelease`, by Spark.

    Same layout as the polars path (keys, ``__rows``, ``"<statistic>:<part>"``,
    ``__bad__<column>``), brought to the driver with ``toArrow()``, keys cast to the
    margins' dtypes.
    """
    from pyspark.sql import functions as sf
    from pyspark.sql.types import BooleanType, NumericType

    g = release.grouping
    fields = {f.name: f.dataType for f in sdf.schema.fields}
    missing = [c for c in g.keys if c not in fields]
    for s in release.statistics:
        missing += [c for c in s.columns() if c not in fields]
    if missing:
        raise InvalidParameterError(
            f"columns {sorted(set(missing))} are not in the Spark DataFrame "
            f"(its columns: {sorted(fields)})"
        )
    public = g.sizes is not None
    aggs: dict[str, Any] = {"__rows": sf.count(sf.lit(1))}
    for s in release.statistics:
        for c in s.columns():
            dtype = fields[c]
            ok = (
                isinstance(dtype, BooleanType)
                if s.kind == "proportion"
                else isinstance(dtype, NumericType)
            )
            if not ok:
                need = "a boolean" if s.kind == "proportion" else "a numeric"
                raise InvalidDataError(
                    f"column {c!r} has Spark type {dtype.simpleString()}; a {s.kind} needs "
                    f"{need} column"
                )
            aggs.setdefault(f"__bad__{c}", _spark_bad(c, dtype))
        for name, expr in _spark_parts(s, public).items():
            aggs.setdefault(name, expr)
    table = sdf.groupBy(*g.keys).agg(*[e.alias(n) for n, e in aggs.items()]).toArrow()
    agg = pl.from_arrow(table)
    # a null key is a group of its own in groupBy: found here, in the one pass
    bad_keys = [k for k in g.keys if agg[k].null_count()]
    if bad_keys:
        raise InvalidDataError(
            f"key column(s) {bad_keys} hold nulls in the Spark DataFrame; a record's group "
            "must be known: fill or drop them first (nothing was charged)"
        )
    casts = []
    for k in g.keys:
        if agg.schema[k] != g.margins.schema[k]:
            casts.append(pl.col(k).cast(g.margins.schema[k], strict=False))
    if casts:
        cast = agg.with_columns(casts)
        for k in g.keys:
            # a key must survive the cast unchanged: 1.5 -> 1 or "01" -> 1 would merge groups
            back = cast[k].cast(agg.schema[k], strict=False)
            lost = (cast[k].is_null() & agg[k].is_not_null()) | (back != agg[k]).fill_null(False)
            if lost.any():
                raise InvalidDataError(
                    f"key {k!r}: values {agg.filter(lost)[k].unique().to_list()[:5]} do not "
                    f"fit the margins' dtype {g.margins.schema[k]} (keys not in the margins)"
                )
        agg = cast
    return agg


def grouped_release(
    sdf: Any,
    keys: str | Sequence[str],
    statistics: Sequence[Any],
    *,
    margins: pl.DataFrame,
    sizes: str | None = None,
    unknown_keys: str = "error",
    accountant: Any = None,
    seed: Any = None,
) -> Any:
    """A grouped release whose exact aggregates Spark computes; call ``.collect()`` on it.

    The arguments are those of :func:`dpframe.group_by` (``sdf`` is a Spark DataFrame).
    Nothing is charged until ``collect()``, which is the polars path's own.

    Examples
    --------
    >>> # rel = grouped_release(spark_df, "region", [dpframe.agg.count(epsilon=0.5)],
    >>> #                       margins=regions, accountant=acct)
    >>> # table = rel.collect()
    """
    import dpframe

    require_spark()
    key_list = [keys] if isinstance(keys, str) else list(keys)
    empty = pl.DataFrame(schema={k: margins.schema[k] for k in key_list if k in margins.columns})
    release = dpframe.group_by(
        empty.lazy(),
        key_list,
        margins=margins,
        sizes=sizes,
        unknown_keys=unknown_keys,
        accountant=accountant,
        seed=seed,
    ).agg(*statistics)
    release.prepare_from(spark_aggregates(release, sdf))
    return release


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


def _check_pram_data(sdf: Any, cols: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
    """Nulls, values outside the categories and mismatched types, in one Spark pass."""
    from pyspark.sql import functions as sf
    from pyspark.sql.types import IntegralType, StringType

    fields = {f.name: f.dataType for f in sdf.schema.fields}
    for name, cats in cols:
        dtype = fields[name]
        if all(isinstance(c, str) for c in cats):
            ok = isinstance(dtype, StringType)
        else:
            ok = isinstance(dtype, IntegralType)
        if not ok:
            raise InvalidDataError(
                f"column {name!r} has Spark type {dtype.simpleString()} but its categories "
                f"are {type(cats[0]).__name__}s: declare categories of the column's type, or "
                "cast the column (nothing was charged)"
            )
    bad = {name: sf.col(name).isNull() | ~sf.col(name).isin(list(cats)) for name, cats in cols}
    counts = sdf.select(
        *[sf.sum(sf.when(b, 1).otherwise(0)).alias(n) for n, b in bad.items()]
    ).first()
    for name, b in bad.items():
        if counts[name]:
            examples = [r[name] for r in sdf.filter(b).select(name).distinct().limit(5).collect()]
            raise InvalidDataError(
                f"column {name!r} holds {counts[name]} null(s) or value(s) outside its "
                f"declared categories, e.g. {examples}; add them to the categories or recode "
                "them (nothing was charged)"
            )


def _pram_plans(
    sdf: Any, columns: Sequence[dict[str, Any]], accountant: Any, keep: Sequence[str] = ()
) -> list[tuple[Any, tuple[Any, ...], Any, Any]]:
    """Every check of a PRAM release on Spark that needs no charge: the settings, the
    designs (a bad prior fails here) and, in one Spark pass, the data."""
    from dpframe.core.randomness import RandomSource
    from dpframe.pram import PramRelease, _check_categories

    if accountant is None:
        raise InvalidParameterError("pram on Spark needs an accountant= (charged on the driver)")
    if accountant.neighbours == "add_remove":
        raise InvalidParameterError(
            "PRAM protects values, not presence: use an accountant with neighbours='substitute'"
        )
    fields = {f.name for f in sdf.schema.fields}
    names = [c.get("column") for c in columns]
    missing = [c for c in [*names, *keep] if c not in fields]
    if missing:
        raise InvalidParameterError(
            f"columns {missing} are not in the Spark DataFrame (its columns: {sorted(fields)})"
        )
    plans = []
    for c in columns:
        if "epsilon" not in c:
            raise InvalidParameterError(f"column {c['column']!r}: give its epsilon")
        if c.get("prior") == "dp":
            raise InvalidParameterError(
                f"column {c['column']!r}: prior='dp' needs the whole column on the driver; "
                "on Spark release a DP prior first with dpframe.engines.spark.dp_prior(...) "
                "and pass it as prior="
            )
        cats = _check_categories(c.get("categories"))
        if cats is None:
            raise InvalidParameterError(
                f"column {c['column']!r}: declare its categories (Spark columns carry none, "
                "and they are never taken from the data)"
            )
        rel = PramRelease(
            epsilon=c["epsilon"],
            categories=cats,
            prior=c.get("prior", "uniform"),
            matrix=None,
            diagonal=c.get("diagonal", "optimal"),
            prior_share=0.1,
            accountant=accountant,
            random=RandomSource(),
            column=c["column"],
        )
        sampler, design = rel._sampler_for(cats)
        plans.append((rel, cats, sampler, design))
    _check_pram_data(sdf, [(rel.column, cats) for rel, cats, _, _ in plans])
    return plans


def _remove_path(spark: Any, path: str) -> None:
    """Delete ``path`` (recursively) on Spark's file system; best effort."""
    try:
        jvm = spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(hpath, True)
    except Exception:  # Spark Connect: no JVM on this side
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def pram(
    sdf: Any,
    columns: Sequence[dict[str, Any]],
    path: str,
    *,
    accountant: Any,
    keep: Sequence[str] = (),
) -> Any:
    """PRAM the columns of a Spark DataFrame and write the result, once, to Parquet.

    Everything that can fail without a charge is checked first: the settings, the
    designs, and the data (one Spark pass: nulls, values outside the categories, a
    column type that does not fit them). Then every column is charged on the driver, all
    at once (or none, if they do not fit), and the executors randomize with
    ``mapInArrow``, a freshly keyed generator per Arrow batch. The randomization runs
    exactly once, inside the write: a lazily randomized DataFrame would draw fresh noise
    at every action on it (a ``count()``, a second ``write``), each one a new release of
    the same records under one charge. So the result is returned as what was written,
    read back. If the write fails, the charge stays (noise was drawn) and the partial
    folder is removed.

    Parameters
    ----------
    sdf : pyspark.sql.DataFrame
    columns : list of dict
        Each ``{"column", "epsilon", "categories", "prior" (optional), "diagonal"
        (optional)}``; categories are required (Spark strings do not declare them).
    path : str
        Where Spark writes the Parquet folder (any file system Spark writes to). It must
        not exist: checked before anything is charged.
    accountant : Accountant
        Charged one entry per column (sequential composition), before any task runs.
    keep : list of str
        Other columns to carry through unchanged (they are not protected by PRAM).

    Returns
    -------
    pyspark.sql.DataFrame
        The written file (re-reading it is post-processing: no fresh noise).

    Examples
    --------
    >>> # out = pram(sdf, [{"column": "region", "epsilon": 1.0, "categories": regions}],
    >>> #            "s3://bucket/released/microdata", accountant=acct)
    """
    require_spark()
    from dpframe.engines.arrow import PramColumn, pram_record_batch

    path = str(path)
    if _path_exists(sdf.sparkSession, path):
        raise InvalidParameterError(
            f"path {path!r} already exists: PRAM writes a new folder (nothing was charged)"
        )
    plans = _pram_plans(sdf, columns, accountant, keep)
    # all columns charged at once (or none, if they do not fit), before any task runs
    accountant.spend_all(
        [
            rel.charge_request(rel.column, cats, sampler, design)
            for rel, cats, sampler, design in plans
        ]
    )
    specs = [PramColumn(rel.column, cats, sampler) for rel, cats, sampler, _ in plans]
    out = sdf.select(*[rel.column for rel, *_ in plans], *keep)

    def randomize(batches):  # runs on the executors
        for batch in batches:
            yield pram_record_batch(batch, specs)

    try:
        out.mapInArrow(randomize, out.schema).write.parquet(path)
    except BaseException:
        _remove_path(sdf.sparkSession, path)
        raise
    return sdf.sparkSession.read.parquet(path)


def dp_prior(
    sdf: Any,
    column: str,
    epsilon: float,
    *,
    categories: Sequence[Any],
    accountant: Any = None,
    seed: Any = None,
) -> dict[Any, float]:
    """:func:`dpframe.pram.dp_prior` with the counts computed by Spark (categories declared).

    A DP estimate of the column's category distribution (discrete Laplace, charged
    ``epsilon``), publishable, to pass as a PRAM column's ``prior``: on Spark,
    ``prior="dp"`` is refused because the whole column would have to reach the driver.

    Examples
    --------
    >>> # p = dp_prior(sdf, "region", 0.1, categories=regions, accountant=acct)
    >>> # pram(sdf, [{"column": "region", "epsilon": 0.9, "categories": regions,
    >>> #             "prior": p}], path, accountant=acct)
    """
    require_spark()
    from pyspark.sql import functions as sf

    from dpframe.pram import _prior_budget, dp_prior_from_counts

    eps, acct = _prior_budget(epsilon, accountant)  # before reading anything
    if column not in sdf.columns:
        raise InvalidParameterError(f"column {column!r} is not in the Spark DataFrame")
    counts = pl.from_arrow(sdf.groupBy(column).agg(sf.count(sf.lit(1)).alias("n")).toArrow())
    return dp_prior_from_counts(
        counts, column, eps, categories=categories, accountant=acct, seed=seed
    )


def proportions(
    sdf: Any,
    column: str,
    *,
    epsilon: float,
    n: int,
    categories: Sequence[Any],
    strategy: str = "rescale",
    method: str = "truncated",
    accountant: Any = None,
    seed: Any = None,
) -> Any:
    """:func:`dpframe.proportions` with the counts computed by Spark (categories declared)."""
    require_spark()
    from pyspark.sql import functions as sf

    from dpframe.frame_releases import _check_n, counts_table, proportions_from_counts

    if column not in sdf.columns:
        raise InvalidParameterError(f"column {column!r} is not in the Spark DataFrame")
    cats = list(categories)
    if len(cats) < 2 or len(set(cats)) != len(cats):
        raise InvalidParameterError(f"categories must be 2 or more distinct values, got {cats}")
    counts = pl.from_arrow(sdf.groupBy(column).agg(sf.count(sf.lit(1)).alias("count")).toArrow())
    table = counts_table(counts, column, cats)
    n = _check_n(n, int(table["count"].sum()))
    return proportions_from_counts(
        table,
        column,
        epsilon=epsilon,
        n=n,
        strategy=strategy,
        method=method,
        accountant=accountant,
        seed=seed,
    )


def covariance_matrix(
    sdf: Any,
    columns: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    *,
    epsilon: float,
    n: int,
    method: str = "truncated",
    repair: str | None = None,
    accountant: Any = None,
    seed: Any = None,
) -> Any:
    """:func:`dpframe.covariance_matrix` with the exact covariances computed by Spark."""
    require_spark()
    import numpy as np
    from pyspark.sql import functions as sf
    from pyspark.sql.types import NumericType

    from dpframe.frame_releases import _check_n, covariance_matrix_from_exact

    columns = list(columns)
    fields = {f.name: f.dataType for f in sdf.schema.fields}
    missing = [c for c in columns if c not in fields]
    if missing:
        raise InvalidParameterError(
            f"columns {missing} are not in the Spark DataFrame (its columns: {sorted(fields)})"
        )
    not_numeric = [c for c in columns if not isinstance(fields[c], NumericType)]
    if not_numeric:
        raise InvalidDataError(
            f"columns {not_numeric} are not numeric in Spark; a covariance needs numbers: "
            "cast them first (nothing was charged)"
        )
    if len(bounds) != len(columns):
        raise InvalidParameterError("bounds must give one (lower, upper) pair per column")
    # nulls, NaN and infinities are refused, as on polars (Spark orders NaN above every
    # number, so clipping would quietly turn it into the upper bound)
    row = sdf.select(
        sf.count(sf.lit(1)).alias("__rows"), *[_spark_bad(c, fields[c]).alias(c) for c in columns]
    ).first()
    bad = sorted(c for c in columns if row[c])
    if bad:
        raise InvalidDataError(
            f"columns {bad} hold nulls, NaN or infinities; fill or drop them first "
            "(nothing was charged)"
        )
    n = _check_n(n, int(row["__rows"]))
    clipped = {
        c: sf.least(sf.greatest(sf.col(c).cast("double"), sf.lit(lo)), sf.lit(hi))
        for c, (lo, hi) in zip(columns, bounds, strict=True)
    }
    row = sdf.select(
        *[sf.covar_samp(clipped[a], clipped[b]).alias(f"{a}|{b}") for a in columns for b in columns]
    ).first()
    cov = np.array([[row[f"{a}|{b}"] for b in columns] for a in columns], dtype=np.float64)
    return covariance_matrix_from_exact(
        cov,
        columns,
        bounds,
        epsilon=epsilon,
        n=n,
        method=method,
        repair=repair,
        accountant=accountant,
        seed=seed,
    )
