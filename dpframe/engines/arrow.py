"""Row-wise mechanisms over Arrow record batches: the engine-independent step.

An engine's work has three parts (docs/architecture.md): exact aggregates, category
counts and covariance inputs for the driver, and a row-wise step. The row-wise step
is a function over an Arrow ``RecordBatch``: :func:`pram_record_batch` randomizes the
declared columns of one batch, and Spark runs it in ``mapInArrow`` on its executors. The
polars path (``.dp.pram`` in ``map_batches``) shares what decides the output -- the
design, its exact sampler (:meth:`PramSampler.randomize`) and a generator keyed afresh
per batch -- but converts values to codes and back with polars itself, which is 5-10x
faster per morsel than going through Arrow (docs/spark.md).

It does **not** charge anything: the executor (:mod:`dpframe.core.executor`) charges
the release once, on the driver, before the job starts, and hands back the armed
columns; an engine may call this function once per batch, in parallel, and retry a batch
-- only one attempt's output may be kept (Spark's output commit protocol does this). Each
call draws from a freshly keyed generator (:meth:`RandomSource.generator`), so no two
batches, and no two attempts, repeat noise.

Examples
--------
>>> import pyarrow as pa
>>> import numpy as np
>>> from dpframe.engines.arrow import pram_record_batch
>>> from dpframe.mechanisms.pram.plan import plan_pram
>>> col = plan_pram("region", ["N", "S", "E"], 1.0).draw(None, np.random.default_rng(0))
>>> batch = pa.record_batch({"region": ["N", "S", "E", "N"], "x": [1, 2, 3, 4]})
>>> out = pram_record_batch(batch, [col])
>>> out.schema.names, set(out["region"].to_pylist()) <= {"N", "S", "E"}
(['region', 'x'], True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpframe.core.randomness import RandomSource
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.pram.plan import ArmedPram

__all__ = ["pram_record_batch"]


def _codes(values: pa.Array | pa.ChunkedArray, col: ArmedPram) -> np.ndarray:
    """Category codes of ``values`` (int64), or a clear error for nulls / unknown values."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if values.null_count:
        raise InvalidDataError(
            f"column {col.column!r} has {values.null_count} null value(s) in this batch; "
            "PRAM needs a category for every record: fill them with a declared category"
        )
    value_set = pa.array(list(col.categories))
    try:
        if value_set.type != values.type:
            value_set = value_set.cast(values.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InvalidDataError(
            f"column {col.column!r} has Arrow type {values.type}, which its categories "
            f"({value_set.type}) do not fit"
        ) from None
    index = pc.index_in(values, value_set=value_set)
    if index.null_count:
        bad = pc.unique(pc.filter(values, pc.is_null(index))).to_pylist()[:5]
        raise InvalidDataError(
            f"column {col.column!r} has values outside the declared categories, e.g. {bad}; "
            "add them to the categories or recode them"
        )
    return index.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def pram_record_batch(
    batch: pa.RecordBatch,
    columns: Sequence[ArmedPram],
    *,
    random: RandomSource | None = None,
) -> pa.RecordBatch:
    """Randomize ``columns`` of one record batch; the other columns pass through unchanged.

    Parameters
    ----------
    batch : pyarrow.RecordBatch
        The records (one engine batch / partition chunk).
    columns : sequence of ArmedPram
        What to randomize: charged PRAM columns (``plan.draw(...)`` of a
        :mod:`dpframe.mechanisms.pram.plan` plan), each with its declared categories in
        the design's order and the exact sampler of its design.
    random : RandomSource, optional
        Default: a secure source keyed from OS entropy for this call. A seeded source is
        for tests only (and repeats noise across calls with equal seeds).

    Returns
    -------
    pyarrow.RecordBatch
        Same schema: each randomized column keeps its Arrow type.

    Raises
    ------
    InvalidDataError
        A null or a value outside the declared categories (nothing is randomized).
    """
    if not isinstance(batch, pa.RecordBatch):
        raise InvalidParameterError(f"batch must be a pyarrow.RecordBatch, got {type(batch)}")
    names = batch.schema.names
    missing = [c.column for c in columns if c.column not in names]
    if missing:
        raise InvalidParameterError(f"columns {missing} are not in the batch ({names})")
    codes = {c.column: _codes(batch.column(c.column), c) for c in columns}  # validate all first
    rng = (random or RandomSource()).generator()
    arrays = []
    for name in names:
        col = next((c for c in columns if c.column == name), None)
        if col is None:
            arrays.append(batch.column(name))
            continue
        released = col.randomize(codes[name], rng)
        out_type = batch.schema.field(name).type
        cats = pa.array(list(col.categories))
        values = pc.take(cats, pa.array(released))
        if pa.types.is_dictionary(out_type):
            values = values.cast(out_type.value_type).dictionary_encode()
        elif values.type != out_type:
            values = values.cast(out_type)
        arrays.append(values)
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
