"""Show the cost of releases before spending: mechanism, epsilon, scale, 95% error."""

from __future__ import annotations

import sys
from typing import Any

import polars as pl

from dpframe.column import pending_releases
from dpframe.core.accountant import Accountant
from dpframe.errors import InvalidParameterError
from dpframe.grouped import GroupedRelease

__all__ = ["summarize"]

_SCHEMA = {
    "release": pl.String,
    "column": pl.String,
    "mechanism": pl.String,
    "composition": pl.String,
    "epsilon": pl.Float64,
    "delta": pl.Float64,
    "sensitivity": pl.Float64,
    "scale": pl.Float64,
    "error95": pl.Float64,
}


def summarize(obj: Accountant | GroupedRelease) -> pl.DataFrame:
    """List pending releases without reading data, spending budget or drawing noise.

    Parameters
    ----------
    obj : Accountant or GroupedRelease
        An accountant lists the column releases built for it and not yet collected
        (``scale``/``error95`` are null for a sequential release, whose sensitivity
        depends on its row count), and its PRAM releases (``mechanism="pram"``), which
        are charged at every run; a grouped release lists its statistics.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> e = pl.col("m").dpf.laplace(epsilon=0.5, sensitivity=1.0, composition="parallel",
    ...                             accountant=acct)
    >>> dpframe.summarize(acct).select("column", "epsilon").row(0)
    ('m', 0.5)
    """
    if isinstance(obj, GroupedRelease):
        return obj.summarize()
    if isinstance(obj, Accountant):
        rows: list[dict[str, Any]] = []
        for r in pending_releases(obj):
            s = r.summary()
            rows.append({k: s[k] for k in _SCHEMA})
        pram = sys.modules.get("dpframe.pram")  # loaded only if PRAM releases were built
        for r in list(pram._RELEASES) if pram else []:
            if r.accountant is obj:  # charged at every run of a dpframe runner
                s = r.summary()
                rows.append({k: s[k] for k in _SCHEMA})
        return pl.DataFrame(rows, schema=_SCHEMA)
    raise InvalidParameterError(
        f"summarize takes an Accountant or a GroupedRelease, got {type(obj).__name__}"
    )
