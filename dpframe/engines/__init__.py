"""Engines: where the records live. Each computes exact results; the release runs once.

* :mod:`~dpframe.engines.protocol` -- what every engine computes;
* :mod:`~dpframe.engines.polars` -- polars (one machine, streaming);
* :mod:`~dpframe.engines.spark` -- Apache Spark (``pip install 'dpframe[spark]'``);
* :mod:`~dpframe.engines.arrow` -- the row-wise step over Arrow record batches (Spark);
* :mod:`~dpframe.engines.driver` -- the checks every engine's results go through.

Examples
--------
>>> import polars as pl
>>> from dpframe.engines import engine_for
>>> engine_for(pl.LazyFrame({"x": [1, 2]})).rows()
2
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.constraints import ENGINES
from dpframe.engines.polars import PolarsEngine
from dpframe.engines.protocol import CovarianceInputs, Engine, is_spark_frame
from dpframe.engines.spark import SparkEngine
from dpframe.errors import InvalidParameterError

__all__ = [
    "ENGINE_NAMES",
    "CovarianceInputs",
    "Engine",
    "PolarsEngine",
    "SparkEngine",
    "engine_for",
    "input_engine",
    "is_input_frame",
]

#: the engines a user can name (``dpframe release --engine``, ``dpframe.jobs.run(engine=)``)
ENGINE_NAMES = ENGINES  # the option set, declared in core/constraints


def engine_for(frame: Any) -> Engine:
    """The engine of a frame: polars for a polars DataFrame or LazyFrame, Spark for a Spark
    DataFrame (``pip install 'dpframe[spark]'``)."""
    if isinstance(frame, pl.DataFrame | pl.LazyFrame):
        return PolarsEngine(frame)
    if is_spark_frame(frame):
        return SparkEngine(frame)
    raise InvalidParameterError(
        "frame must be a polars DataFrame or LazyFrame, or a Spark DataFrame; got "
        f"{type(frame).__name__}"
    )


def is_input_frame(obj: Any) -> bool:
    """Whether ``obj`` is a frame some engine reads (polars, or Spark)."""
    return isinstance(obj, pl.DataFrame | pl.LazyFrame) or is_spark_frame(obj)


def input_engine(
    name: str | None,
    *,
    frame: Any = None,
    path: Path | None = None,
    scan: Callable[[], pl.LazyFrame] | None = None,
    spark: Any = None,
) -> Engine:
    """The engine a job reads its input with: the one place an engine is chosen by name.

    Parameters
    ----------
    name : {"polars", "spark"} or None
        The engine the user named; ``None``: the engine of ``frame``, else polars.
    frame : polars or Spark frame, optional
        The input, given in memory (then ``name``, if given, must be its engine).
    path : Path, optional
        The input's Parquet file or folder, read by Spark (``spark``, default
        :func:`dpframe.engines.spark.local_session`).
    scan : callable, optional
        The input scanned by polars (called only when polars reads ``path``).

    Raises
    ------
    InvalidParameterError
        An unknown ``name``, or a ``frame`` of another engine than the one named.
    """
    if name is not None and name not in ENGINE_NAMES:
        raise InvalidParameterError(f"engine must be 'polars' or 'spark', got {name!r}")
    if frame is not None:
        own = "spark" if is_spark_frame(frame) else "polars"
        if name is not None and name != own:
            raise InvalidParameterError(
                f"this spec's input is a {'Spark' if own == 'spark' else 'polars'} frame: "
                f"run it with engine={own!r}"
            )
        return engine_for(frame)
    if name == "spark":
        from dpframe.engines.spark import local_session  # pyspark: loaded when asked for

        session = local_session() if spark is None else spark
        return SparkEngine(session.read.parquet(str(path)))
    if scan is None:
        raise InvalidParameterError("the input: give a frame, or a path and its polars scan")
    return PolarsEngine(scan())
