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
import uuid
from typing import Any

import polars as pl

from dpframe.accountant import Accountant
from dpframe.errors import BudgetExceededError, InvalidDataError

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
    from dpframe.io import METADATA_KEY, _provenance_json, write_parquet
    from dpframe.random import RandomSource
    from dpframe.release.plan import plan
    from dpframe.release.run import (
        CheckFailedError,
        ReleaseResult,
        _check_staged,
        _postprocess_grouped,
        _publish,
        margins_for,
    )
    from dpframe.release.spec import CovarianceSpec, GroupedSpec, PramSpec, ProportionsSpec

    dps.require_spark()
    the_plan = plan(spec)
    if not the_plan.fits:
        raise BudgetExceededError(f"the spec overspends its budget: {the_plan.summary()}")
    sdf = spark.read.parquet(str(spec.resolve(spec.input.path).absolute()))
    lf_schema = spec.lazy_input()  # the schema only (margins dtypes)
    out = spec.resolve(spec.output.folder).absolute()
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    staging = out / f".staging-{run_id}"
    staging.mkdir()
    acct = Accountant.open(
        spec.resolve(spec.privacy.ledger),
        epsilon=spec.privacy.budget.epsilon,
        delta=spec.privacy.budget.delta,
        neighbours=spec.privacy.neighbours,
    )
    seed = RandomSource(spec.privacy.seed) if spec.privacy.seed is not None else None
    result = ReleaseResult(plan=the_plan, folder=out)
    n = int(sdf.count())
    scratch = Accountant(epsilon=1e12, neighbours=spec.privacy.neighbours)
    staged: list[tuple[Any, Any, dict[str, Any]]] = []
    try:
        prepared = {}
        for r in spec.release:  # preflight: every data problem before any charge
            if isinstance(r, GroupedSpec):
                from dpframe.release.build import statistic

                prepared[r.name] = dps.grouped_release(
                    sdf,
                    r.by,
                    [statistic(s) for s in r.statistics],
                    margins=margins_for(spec, r, lf_schema),
                    sizes=spec.margins[r.margins].sizes,
                    accountant=acct,
                    seed=seed,
                )
            elif isinstance(r, PramSpec):
                _spark_preflight_pram(sdf, r)
            elif isinstance(r, ProportionsSpec):
                dps.proportions(
                    sdf,
                    r.column,
                    epsilon=r.epsilon,
                    n=r.n or n,
                    categories=r.categories,
                    strategy=r.strategy,
                    method=r.method,
                    accountant=scratch,
                )
            else:
                dps.covariance_matrix(
                    sdf,
                    r.columns,
                    [tuple(b) for b in r.bounds],
                    epsilon=r.epsilon,
                    n=r.n or n,
                    method=r.method,
                    repair=r.repair,
                    accountant=scratch,
                )
        for r in spec.release:
            path = staging / f"{r.name}.parquet"
            if isinstance(r, GroupedSpec):
                rel = prepared[r.name]
                frame = _postprocess_grouped(r, rel.collect())
                entries = list(rel.ledger)
                write_parquet(
                    frame,
                    path,
                    ledger=entries,
                    spec=spec.to_dict(),
                    neighbours=spec.privacy.neighbours,
                )
                staged.append(
                    (
                        r,
                        frame,
                        {
                            "margins": margins_for(spec, r, lf_schema),
                            "sizes": spec.margins[r.margins].sizes,
                        },
                    )
                )
            elif isinstance(r, PramSpec):
                before = len(acct.ledger)
                cols = [
                    {
                        "column": c.column,
                        "epsilon": c.epsilon,
                        "categories": c.categories,
                        "prior": c.prior,
                        "diagonal": c.diagonal,
                    }
                    for c in r.columns
                ]
                dps.pram(sdf, cols, accountant=acct).write.parquet(str(path))
                entries = list(acct.ledger[before:])
                doc = _provenance_json(entries, spec.privacy.neighbours, spec.to_dict())
                (path / "_dpframe.json").write_text(json.dumps({METADATA_KEY: json.loads(doc)}))
                staged.append((r, pl.scan_parquet(str(path / "*.parquet")), {"input_rows": n}))
            elif isinstance(r, ProportionsSpec):
                rel = dps.proportions(
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
                frame, entries = rel.frame, list(rel.ledger)
                write_parquet(
                    frame,
                    path,
                    ledger=entries,
                    spec=spec.to_dict(),
                    neighbours=spec.privacy.neighbours,
                )
                staged.append((r, frame, {}))
            else:
                assert isinstance(r, CovarianceSpec)
                rel = dps.covariance_matrix(
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
                frame, entries = rel.frame, list(rel.ledger)
                write_parquet(
                    frame,
                    path,
                    ledger=entries,
                    spec=spec.to_dict(),
                    neighbours=spec.privacy.neighbours,
                )
                staged.append((r, frame, {}))
            result.entries.extend(entries)
            result.outputs[r.name] = out / path.name
        result.checks = _check_staged(staged, staging, data_docs)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    failed = [c for c in result.checks if not c.success]
    if failed:
        kept = out / f".failed-{run_id}"
        staging.rename(kept)
        raise CheckFailedError(
            f"{len(failed)} release(s) failed their expectations; nothing was published "
            f"(staged outputs kept in {kept}):\n" + "\n".join(c.report() for c in failed)
        )
    _publish(staging, out)
    return result
