"""Show the cost of releases before spending: mechanism, epsilon, scale, 95% error."""

from __future__ import annotations

from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant
from dpframe.errors import InvalidParameterError
from dpframe.polars.column import pending_releases
from dpframe.polars.pram import pending_expressions
from dpframe.polars.release import SUMMARY_SCHEMA, Release

__all__ = ["summarize"]


def summarize(obj: Accountant | Release[Any]) -> pl.DataFrame:
    """List releases without reading data, spending budget or drawing noise.

    Parameters
    ----------
    obj : Accountant or a release object
        A release object (grouped, covariance matrix, proportions, PRAM microdata) lists
        its statistics. An accountant lists the column releases built for it and not yet
        collected (``scale``/``error95`` are null where they depend on the data: a
        sequential release's row count, per-row parameters), and its ``.dp.pram``
        expressions (``mechanism="pram"``), which are charged at every run.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> e = pl.col("m").dpf.laplace(epsilon=0.5, sensitivity=1.0, composition="parallel",
    ...                             accountant=acct)
    >>> dpframe.summarize(acct).select("statistic", "epsilon").row(0)
    ('m', 0.5)
    """
    if isinstance(obj, Release):
        return obj.summarize()
    if isinstance(obj, Accountant):
        rows: list[dict[str, Any]] = []
        for r in pending_releases(obj):
            rows += [{"release": r.id[:8], **row} for row in r.summary()]
        for e in pending_expressions(obj):
            rows += [{"release": e.id[:8], **row} for row in e.summary()]
        return pl.DataFrame(rows, schema=SUMMARY_SCHEMA)
    raise InvalidParameterError(
        f"summarize takes an Accountant or a release object, got {type(obj).__name__}"
    )
