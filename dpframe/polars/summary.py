"""Show the cost of releases before spending: mechanism, epsilon, scale, 95% error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe.core.accountant import Accountant
from dpframe.core.neighbours import OTHER, SHORT
from dpframe.errors import InvalidParameterError
from dpframe.polars.column import pending_releases
from dpframe.polars.pram import pending_expressions
from dpframe.polars.release import SUMMARY_SCHEMA, Release, Summary, as_summary

if TYPE_CHECKING:
    from dpframe.mechanisms.allocation import Allocation

__all__ = ["summarize"]

#: The columns ``summarize(..., targets=...)`` adds: each statistic's error95 target (or
#: share of the budget), the budget found, the error95 it gives and what that assumes.
TARGET_SCHEMA = {
    "target": pl.Float64,
    "share": pl.Float64,
    "found": pl.Float64,
    "currency": pl.String,
    "error95_found": pl.Float64,
    "assumption": pl.String,
}


def summarize(obj: Accountant | Release[Any], *, targets: Allocation | None = None) -> Summary:
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

        With ``targets`` (the allocation :func:`dpframe.mechanisms.allocation.meet_targets`
        returns), also each statistic's ``target`` (its error95 target; ``share``: its
        share of the budget instead), the budget ``found`` (in its ``currency``), the
        ``error95_found`` that budget gives and its ``assumption`` (a mean's group size);
        null for a statistic without a target.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> e = pl.col("m").dpf.laplace(epsilon=0.5, sensitivity=1.0, composition="parallel",
    ...                             accountant=acct)
    >>> dpframe.summarize(acct).select("statistic", "epsilon").row(0)
    ('m', 0.5)

    A release planned by accuracy shows its targets beside the plan:

    >>> from dpframe.mechanisms.allocation import meet_targets
    >>> stats, found = meet_targets([dpframe.agg.count(epsilon=1.0)], {"count": 20})
    >>> frame = pl.DataFrame({"g": ["a", "b"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = dpframe.group_by(frame, "g", margins=frame).agg(*stats)
    ...     dpframe.summarize(release, targets=found).select(
    ...         "statistic", "target", "found", "error95", "error95_found"
    ...     ).row(0)
    ('count', 20.0, 0.292007, 20.0, 20.0)
    """
    if targets is not None:
        return _with_targets(summarize(obj), targets)
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


def _with_targets(summary: Summary, found: Allocation) -> Summary:
    """``summary`` with the allocation's columns (:data:`TARGET_SCHEMA`), matched by
    statistic; an allocation naming a statistic the summary has not is refused."""
    names = set(summary["statistic"].to_list())
    unknown = sorted(set(found.budgets) - names)
    if unknown:
        raise InvalidParameterError(
            f"targets: {unknown} name no statistic of this release (its statistics are "
            f"{sorted(names)}); pass the allocation meet_targets gave for its statistics"
        )
    rows = {row["statistic"]: row for row in found.rows()}
    extra = pl.DataFrame(
        [
            {
                "statistic": k,
                "target": r["target"],
                "share": r["share"],
                "found": r["budget"],
                "currency": r["currency"],
                "error95_found": r["error95"],
                "assumption": r["assumption"] or None,
            }
            for k, r in rows.items()
        ],
        schema={"statistic": pl.String, **TARGET_SCHEMA},
    )
    joined = pl.DataFrame(summary).join(extra, on="statistic", how="left", maintain_order="left")
    return as_summary(joined)
