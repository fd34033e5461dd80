"""Show the cost of releases before spending: mechanism, epsilon, scale, 95% error."""

from __future__ import annotations

from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant
from dpframe.core.neighbours import OTHER, SHORT
from dpframe.errors import InvalidParameterError
from dpframe.polars.column import pending_releases
from dpframe.polars.pram import pending_expressions
from dpframe.polars.release import SUMMARY_SCHEMA, Release, Summary, as_summary

__all__ = ["summarize"]


def summarize(obj: Accountant | Release[Any]) -> Summary:
    """List releases without reading data, spending budget or drawing noise.

    Parameters
    ----------
    obj : Accountant or a release object
        A release object (grouped, covariance matrix, proportions, PRAM microdata) lists
        its statistics. An accountant lists the column releases built for it and not yet
        collected (``scale``/``error95`` are null where they depend on the data: a
        sequential release's row count, per-row parameters), and its ``.dp.pram``
        expressions (``mechanism="pram"``), which are charged at every run.

    Returns
    -------
    Summary
        A polars DataFrame (printed with every column): ``statistic``, ``mechanism``,
        ``epsilon``, ``error95``, ``scale``, ``sensitivity``, ``delta``, ``rho``, ``note``,
        ``release``; ``unit``, the privacy unit the release assumes (a person column with
        its ``max_rows``/``max_groups``); ``neighbours``, the relation it is calibrated
        for; ``error95_other`` and ``other``, each statistic's 95% error under the other
        relation, from the same sensitivity code (``n/a`` with the reason where the
        release cannot be made under it, e.g. PRAM under ``add_remove``).

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
        other = OTHER[obj.neighbours]
        said = {
            "unit": obj.unit.describe(),
            "neighbours": obj.neighbours,
            "error95_other": None,
        }
        rows: list[dict[str, Any]] = []
        for r in pending_releases(obj):  # its sensitivity is the caller's, for this relation
            given = f"{other}: n/a (the sensitivity is given by the caller)"
            rows += [{"release": r.id[:8], **row, **said, "other": given} for row in r.summary()]
        for e in pending_expressions(obj):
            pram = f"{other}: n/a ({SHORT['pram']})"
            rows += [{"release": e.id[:8], **row, **said, "other": pram} for row in e.summary()]
        return as_summary(pl.DataFrame(rows, schema=SUMMARY_SCHEMA))
    raise InvalidParameterError(
        f"summarize takes an Accountant or a release object, got {type(obj).__name__}"
    )
