"""Run a release spec on Spark: the same plan, charges, checks and outputs as polars.

The input is read by Spark; the exact aggregates and the PRAM randomization run on
Spark (:mod:`dpframe.engines.spark`); the release itself -- ledger, noise, Parquet with
provenance, the expectation suites, the atomic publish -- is the polars runner's own
code (:mod:`dpframe.release.run`). PRAM'd microdata is written by Spark as a folder of
Parquet parts (``<release>.parquet/``) whose provenance is the JSON file
``_dpframe.json`` inside it (Spark writes no custom file metadata).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant
from dpframe.errors import InvalidParameterError
from dpframe.release.spec import SpecError

__all__ = ["release_spark"]


def _declared(r: Any, column: str, categories: Any, schema: pl.Schema) -> list[Any]:
    """The spec's categories of ``column``, else those its file's Enum dtype declares."""
    if categories is not None:
        return list(categories)
    dtype = schema.get(column)
    if isinstance(dtype, pl.Enum):
        return dtype.categories.to_list()
    raise SpecError(
        f"release {r.name!r}: give the categories of {column!r} in the spec (Spark columns "
        "declare none, and they are never taken from the data)"
    )


def _with_categories(r: Any, schema: pl.Schema) -> Any:
    """``r`` with every PRAM column's / the proportions' categories filled in."""
    from dpframe.release.spec import PramSpec, ProportionsSpec

    if isinstance(r, PramSpec):
        cols = [
            c.model_copy(update={"categories": _declared(r, c.column, c.categories, schema)})
            for c in r.columns
        ]
        return r.model_copy(update={"columns": cols})
    if isinstance(r, ProportionsSpec):
        return r.model_copy(update={"categories": _declared(r, r.column, r.categories, schema)})
    return r


def release_spark(spec: Any, spark: Any = None, *, data_docs: bool = False) -> Any:
    """:func:`dpframe.release.release` with Spark computing what touches the records.

    Parameters
    ----------
    spec : Spec
        Its input is either ``input.path`` (read with ``spark.read.parquet``) or a Spark
        DataFrame given as the spec's frame (``parse_spec(data, frame=sdf)`` /
        ``load_spec(path, frame=sdf)``).
    spark : pyspark.sql.SparkSession, optional
        Reads ``input.path``; default :func:`dpframe.engines.spark.local_session`.
    data_docs : bool
        Also build Great Expectations Data Docs of the checks.

    Returns
    -------
    ReleaseResult
        As :func:`dpframe.release.release`; PRAM'd microdata is a folder of Parquet parts.

    Raises
    ------
    BudgetExceededError, CheckFailedError, InvalidDataError, SpecError
        As :func:`dpframe.release.release`: a bad spec or bad data is found before any
        budget is spent, and nothing is published unless every check passes.
    """
    import shutil

    from dpframe.engines import spark as dps
    from dpframe.io import METADATA_KEY, _provenance_json
    from dpframe.release.build import statistic
    from dpframe.release.run import (
        _postprocess_grouped,
        check_job,
        margins_for,
        publish_job,
        start_job,
    )
    from dpframe.release.spec import GroupedSpec, PramSpec, ProportionsSpec, is_spark_frame

    dps.require_spark()
    if is_spark_frame(spec.frame):
        sdf = spec.frame
        schema_only = dps.schema_frame(sdf)  # for the plan and the margins' dtypes
    elif spec.frame is not None:
        raise InvalidParameterError(
            "this spec's input is a polars frame: run it with dpframe.release.release(spec), "
            "or pass a Spark DataFrame as its frame"
        )
    else:
        schema_only = spec.lazy_input()  # the file's schema, as the polars engine reads it
        spark = dps.local_session() if spark is None else spark
        sdf = spark.read.parquet(str(spec.resolve(spec.input.path).absolute()))
    schema = schema_only.collect_schema()
    releases = [_with_categories(r, schema) for r in spec.release]  # before any file exists
    n = int(sdf.count())
    job = start_job(spec, lf=schema_only, rows=n)  # refuses an overspend, writes nothing
    scratch = Accountant(epsilon=1e12, neighbours=spec.privacy.neighbours)

    def frame_release(r: Any, acct: Accountant, seed: Any) -> Any:
        if isinstance(r, ProportionsSpec):
            return dps.proportions(
                sdf,
                r.column,
                epsilon=r.epsilon,
                n=r.n or n,
                categories=r.categories,
                strategy=r.strategy,
                method=r.method,
                accountant=acct,
                seed=seed,
            )
        return dps.covariance_matrix(
            sdf,
            r.columns,
            [tuple(b) for b in r.bounds],
            epsilon=r.epsilon,
            n=r.n or n,
            method=r.method,
            repair=r.repair,
            accountant=acct,
            seed=seed,
        )

    try:
        prepared = {}
        for r in releases:  # preflight: every data problem before any charge
            if isinstance(r, GroupedSpec):
                prepared[r.name] = dps.grouped_release(
                    sdf,
                    r.by,
                    [statistic(s) for s in r.statistics],
                    margins=margins_for(spec, r, schema_only),
                    sizes=spec.margins[r.margins].sizes,
                    accountant=job.accountant,
                    seed=job.seed_for(r),
                )
            elif isinstance(r, PramSpec):  # settings, designs and data; nothing charged
                dps._pram_plans(sdf, [c.model_dump() for c in r.columns], scratch)
            else:
                frame_release(r, scratch, None)  # what it draws is discarded unseen
        for r in releases:
            if isinstance(r, GroupedSpec):
                rel = prepared[r.name]
                job.write(
                    r,
                    _postprocess_grouped(r, rel.collect()),
                    list(rel.ledger),
                    margins=margins_for(spec, r, schema_only),
                    sizes=spec.margins[r.margins].sizes,
                )
            elif isinstance(r, PramSpec):
                before = len(job.accountant.ledger)
                cols = [c.model_dump() for c in r.columns]
                path = job.path(r)
                # a file:// URI: the staging folder is on the driver's file system (a
                # shared mount on a cluster), whatever Spark's default file system is
                written = dps.pram(sdf, cols, path.as_uri(), accountant=job.accountant)
                entries = list(job.accountant.ledger[before:])
                designs = {  # as the polars path records them: estimate() reads them
                    e.columns[0]: e.details.get("design")
                    or {"categories": c.categories, "matrix": e.details["matrix"]}
                    for e, c in zip(entries, r.columns, strict=True)
                }
                doc = _provenance_json(
                    entries, spec.privacy.neighbours, spec.to_dict(), designs=designs
                )
                (path / "_dpframe.json").write_text(json.dumps({METADATA_KEY: json.loads(doc)}))
                counts = {  # the check's value counts, by Spark: the driver reads no microdata
                    c.column: pl.from_arrow(
                        written.groupBy(c.column)
                        .count()
                        .withColumnRenamed("count", "rows")
                        .toArrow()
                    )
                    for c in r.columns
                }
                job.record(
                    r,
                    pl.scan_parquet(str(path / "*.parquet")),  # its schema only
                    entries,
                    input_rows=n,
                    value_counts=counts,
                )
            else:
                rel = frame_release(r, job.accountant, job.seed_for(r))
                frame = rel.frame
                if isinstance(r, ProportionsSpec) and isinstance(schema.get(r.column), pl.Enum):
                    frame = frame.with_columns(pl.col(r.column).cast(schema[r.column]))
                job.write(r, frame, list(rel.ledger))
        check_job(job, data_docs)
    except BaseException:  # nothing published; a failed check already moved staging aside
        shutil.rmtree(job.staging, ignore_errors=True)
        raise
    return publish_job(job)
