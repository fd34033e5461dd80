"""A release from the Python API checks itself: the suite of its own declaration.

A release object -- ``dpframe.group_by(...).agg(...)``, ``dpframe.covariance_matrix``,
``dpframe.proportions`` or a PRAM ``MicrodataRelease`` -- already holds everything its
released table promises (keys and margins, statistics and bounds, the public ``n``,
categories). :func:`spec_of` turns that declaration into the release spec the checks
read (:mod:`dpframe.jobs.checks`), so :func:`check` validates the released table without
restating a statistic. Nothing here charges or draws: a release must have been collected
(or written) before it is checked.

Examples
--------
>>> import polars as pl, dpframe
>>> from dpframe.jobs.selfcheck import check
>>> acct = dpframe.Accountant(epsilon=1.0)
>>> df = pl.DataFrame({"region": ["N", "S", "N"], "income": [10.0, 20.0, 30.0]})
>>> rel = dpframe.group_by(df, "region", margins=pl.DataFrame({"region": ["N", "S"]}),
...                        accountant=acct, seed=1).agg(dpframe.agg.count(epsilon=0.5))
>>> _ = rel.collect()
>>> check(rel).success
True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from dpframe.errors import InvalidParameterError
from dpframe.jobs.checks import CheckResult, check_release, expectations_for
from dpframe.jobs.spec import (
    CovarianceSpec,
    GroupedSpec,
    PramColumnSpec,
    PramSpec,
    ProportionsSpec,
    StatisticSpec,
)
from dpframe.polars.frame import CovarianceMatrixRelease, ProportionsRelease
from dpframe.polars.grouped import GroupedRelease
from dpframe.polars.io import read_provenance
from dpframe.polars.pram import MicrodataRelease
from dpframe.polars.release import Release

__all__ = ["check", "expectations", "spec_of"]

_SIZE = "__public_size"


def _name(release: Any, name: str | None) -> str:
    return name or f"{release.kind.replace(' ', '_')}_{release.id[:8]}"


def _statistic(s: Any) -> StatisticSpec:
    if s.kind == "cov":
        o = s.options
        return StatisticSpec(
            stat="cov",
            epsilon=s.epsilon,
            x=s.column,
            y=o["y"],
            lower=s.lower,
            upper=s.upper,
            lower_y=o["lower_y"],
            upper_y=o["upper_y"],
            method=s.method,
            name=s.name,
        )
    return StatisticSpec(
        stat=s.kind,
        epsilon=s.epsilon,
        column=s.column,
        lower=s.lower,
        upper=s.upper,
        method=s.method,
        name=s.name,
    )


def spec_of(release: Any, *, name: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The release spec a Python-API release declares, and the public inputs of its checks.

    Returns ``(spec, kwargs)`` for :func:`dpframe.jobs.checks.check_release`.
    """
    if not isinstance(release, Release):
        raise InvalidParameterError(
            "release must be a release object of the Python API (dpframe.group_by(...)"
            ".agg(...), dpframe.covariance_matrix, dpframe.proportions, dpframe.pram.release), "
            f"got {type(release).__name__}"
        )
    n = _name(release, name)
    if isinstance(release, GroupedRelease):
        g = release.grouping
        margins = g.margins
        kwargs: dict[str, Any] = {"margins": margins}
        if g.sizes is not None:
            kwargs = {"margins": margins.with_columns(pl.Series(_SIZE, g.sizes)), "sizes": _SIZE}
        spec = GroupedSpec(
            name=n,
            kind="grouped",
            by=g.keys,
            margins="margins",
            statistics=[_statistic(s) for s in release.statistics],
            nonnegative=g.nonnegative,
        )
        return spec, kwargs
    if isinstance(release, CovarianceMatrixRelease):
        spec = CovarianceSpec(
            name=n,
            kind="covariance",
            columns=release.columns,
            bounds=[list(b) for b in release.bounds],
            epsilon=sum(c.epsilon for c in release.plan.charges),
            n=release.n,
        )
        return spec, {}
    if isinstance(release, ProportionsRelease):
        spec = ProportionsSpec(
            name=n,
            kind="proportions",
            column=release.column,
            categories=list(release.categories),
            epsilon=sum(c.epsilon for c in release.plan.charges),
            n=release.n,
        )
        return spec, {}
    if isinstance(release, MicrodataRelease):
        columns = [
            PramColumnSpec(
                column=p.column, epsilon=p.charges[0].epsilon, categories=list(p.categories)
            )
            for p in release.plans()
        ]
        spec = PramSpec(name=n, kind="pram", columns=columns)
        return spec, {"input_rows": release.input_rows, "keep": release.keep}
    raise InvalidParameterError(
        "release must be a dpframe release object (group_by(...).agg(...), covariance_matrix, "
        f"proportions or a PRAM MicrodataRelease), got {type(release).__name__}"
    )


def _released(release: Any, table: Any) -> Any:
    if table is not None:
        if isinstance(table, str | Path):
            p = Path(table)
            return pl.scan_parquet(p / "*.parquet" if p.is_dir() else p)
        return table
    if isinstance(release, MicrodataRelease):
        raise InvalidParameterError(
            "table: a PRAM release's records are not kept; pass the file it wrote "
            "(check(release, table='microdata.parquet'))"
        )
    if not release.materialised:
        raise InvalidParameterError(
            "release: collect it first (checking never charges or draws: an uncollected "
            "release has no table to check)"
        )
    return release.collect()  # the same table again: a release materialises once


def expectations(release: Any, table: Any = None, *, name: str | None = None) -> list[dict]:
    """The expectations ``release``'s table must meet (plain data, no Great Expectations).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
    >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = people.dp.group_by("region", margins=regions).agg(
    ...         dpframe.agg.count(epsilon=0.5)
    ...     )
    ...     _ = release.collect()
    >>> dpframe.expectations(release)[0]["type"]
    'expect_table_columns_to_match_set'
    """
    spec, kwargs = spec_of(release, name=name)
    return expectations_for(spec, _released(release, table), **kwargs)


def check(release: Any, table: Any = None, *, name: str | None = None) -> CheckResult:
    """Validate a collected release's table (or a PRAM release's written file) against the
    suite of its own declaration; see :func:`dpframe.jobs.checks.check_release`.

    Parameters
    ----------
    release
        A collected release object of the Python API.
    table : polars frame or path, optional
        The released table; default the release's own output. A PRAM release needs the
        path it wrote (its file, or a Spark folder).
    name : str, optional
        The name the suite and its messages use (default: the release's kind and id).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.DataFrame({"region": ["North", "South", "North"]})
    >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     release = people.dp.group_by("region", margins=regions).agg(
    ...         dpframe.agg.count(epsilon=0.5)
    ...     )
    ...     _ = release.collect()
    >>> dpframe.check(release).success
    True
    """
    spec, kwargs = spec_of(release, name=name)
    frame = _released(release, table)
    if isinstance(release, MicrodataRelease) and kwargs["input_rows"] is None:
        kwargs["input_rows"] = read_provenance(table).facts.get("input_rows")
    return check_release(spec, frame, **kwargs)
