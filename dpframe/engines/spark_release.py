"""Run a release spec on Spark (issue 8, in progress): the same plan, charges and checks.

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

from dpframe.accountant import Accountant
from dpframe.errors import InvalidDataError

__all__ = ["release_spark"]


def _spark_preflight_pram(sdf: Any, r: Any) -> None:
    """Nulls and values outside the declared categories, found before any charge."""
    from pyspark.sql import functions as sf

    for c in r.columns:
        if c.categories is None:
            raise InvalidDataError(
                f"release {r.name!r}: column {c.column!r} needs declared categories on Spark"
            )
        bad = sdf.filter(
            sf.col(c.column).isNull() | ~sf.col(c.column).isin(list(c.categories))
        ).limit(5)
        rows = [row[c.column] for row in bad.collect()]
        if rows:
            raise InvalidDataError(
                f"release {r.name!r}: column {c.column!r} holds nulls or values outside its "
                f"categories, e.g. {rows}; nothing was charged"
            )


def release_spark(spec: Any, spark: Any, *, data_docs: bool = False) -> Any:
    """:func:`dpframe.release.release` with Spark computing what touches the records.

    Parameters
    ----------
    spec : Spec
        A spec with ``input.path`` (read with ``spark.read.parquet``).
    spark : pyspark.sql.SparkSession
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
    from dpframe.release.spec import GroupedSpec, PramSpec, ProportionsSpec

    dps.require_spark()
    job = start_job(spec)  # refuses an overspending plan before anything is written
    sdf = spark.read.parquet(str(spec.resolve(spec.input.path).absolute()))
    schema_only = spec.lazy_input()  # for the margins' dtypes
    n = int(sdf.count())
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
        for r in spec.release:  # preflight: every data problem before any charge
            if isinstance(r, GroupedSpec):
                prepared[r.name] = dps.grouped_release(
                    sdf,
                    r.by,
                    [statistic(s) for s in r.statistics],
                    margins=margins_for(spec, r, schema_only),
                    sizes=spec.margins[r.margins].sizes,
                    accountant=job.accountant,
                    seed=job.seed,
                )
            elif isinstance(r, PramSpec):
                _spark_preflight_pram(sdf, r)
            else:
                frame_release(r, scratch, None)  # what it draws is discarded unseen
        for r in spec.release:
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
                dps.pram(sdf, cols, accountant=job.accountant).write.parquet(str(path))
                entries = list(job.accountant.ledger[before:])
                doc = _provenance_json(entries, spec.privacy.neighbours, spec.to_dict())
                (path / "_dpframe.json").write_text(json.dumps({METADATA_KEY: json.loads(doc)}))
                job.record(r, pl.scan_parquet(str(path / "*.parquet")), entries, input_rows=n)
            else:
                rel = frame_release(r, job.accountant, job.seed)
                job.write(r, rel.frame, list(rel.ledger))
        check_job(job, data_docs)
    except BaseException:  # nothing published; a failed check already moved staging aside
        shutil.rmtree(job.staging, ignore_errors=True)
        raise
    return publish_job(job)
