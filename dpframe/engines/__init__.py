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

from typing import Any

import polars as pl

from dpframe.engines.polars import PolarsEngine
from dpframe.engines.protocol import CovarianceInputs, Engine, is_spark_frame
from dpframe.engines.spark import SparkEngine
from dpframe.errors import InvalidParameterError

__all__ = ["CovarianceInputs", "Engine", "PolarsEngine", "SparkEngine", "engine_for"]


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
