"""The release kinds of a spec, in one registry: each entry's release object and output.

A spec's release entry (:mod:`dpframe.jobs.spec`) becomes one of the polars API's release
objects (:class:`~dpframe.polars.release.Release`) -- the same objects a Python user
builds, over a polars or a Spark frame alike -- so ``plan`` and ``run`` handle every kind
the same way: build, summarize (plan), prepare (check the data, nothing spent), charge
all at once, finish. What differs between kinds is in :data:`KINDS`:

* ``build`` -- the release object (``dpframe.group_by(...).agg(...)``,
  ``dpframe.pram.release(...)``, ``dpframe.proportions(...)``,
  ``dpframe.covariance_matrix(...)``);
* ``rowwise`` -- whether the output is microdata written by the engine (PRAM) or a small
  released table written with provenance;
* ``postprocess`` -- free post-processing applied before the checks (released counts,
  and sums of values bounded below by 0, clamped at 0; a grouped covariance clamped into
  ``±sqrt(var_x var_y)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import polars as pl

from dpframe.core.randomness import RandomSource, derived_source
from dpframe.engines.driver import fit_margins, textual_key
from dpframe.errors import DPFrameError, InvalidParameterError
from dpframe.jobs.spec import (
    CovarianceSpec,
    GroupedSpec,
    PramSpec,
    ProportionsSpec,
    Spec,
    SpecError,
    statistic,
)
from dpframe.polars.frame import CovarianceMatrixRelease, ProportionsRelease
from dpframe.polars.grouped import GroupBy, GroupedRelease
from dpframe.polars.pram import MicrodataRelease
from dpframe.polars.release import Release

__all__ = [
    "KINDS",
    "RELEASES",
    "Context",
    "Kind",
    "build",
    "kind_of",
    "margins_for",
    "release_class",
    "statistic",
]


@dataclass(frozen=True)
class Context:
    """What building a spec's releases needs: the data, its public facts, the budget
    (made from a resolved job: :meth:`dpframe.jobs.planning.Job.context`)."""

    spec: Spec
    frame: Any
    schema: pl.Schema
    #: the input's row count (public under substitute neighbours), counted at most once
    #: and shared by every release of the job
    rows: Callable[[], int]
    #: each margins table a release uses, as read once (else read from the spec)
    margins: Mapping[str, pl.DataFrame] = field(default_factory=lambda: MappingProxyType({}))
    accountant: Any = None
    seed: int | None = None

    def source(self, r: Any) -> RandomSource:
        """Release ``r``'s random source: secure, or derived from a seeded spec's seed."""
        return derived_source(self.seed, r.name)

    def unit(self, r: Any = None) -> dict[str, Any]:
        """Release ``r``'s privacy unit (its own, else the spec's), as the release objects
        take it (empty: one row is one person)."""
        p = self.spec.privacy
        own = getattr(r, "unit", None)
        person = own or p.unit
        if person == "record":
            return {}
        rows = getattr(r, "max_rows", None)
        groups = getattr(r, "max_groups", None)
        return {
            "unit": person,
            "max_rows": p.max_rows if rows is None else rows,
            "max_groups": p.max_groups if groups is None else groups,
        }


def margins_for(
    spec: Spec, r: GroupedSpec, schema: pl.Schema, read: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The public key frame of ``r``, its key columns in the input's dtypes: every value
    must fit exactly (:func:`dpframe.engines.driver.fit_margins`, the Python API's rule).
    ``read``: its margins table as the job read it (default: read from the spec now)."""
    margins = spec.margins_frame(r.margins) if read is None else read
    for key in r.by:
        if key not in margins.columns:
            raise SpecError(f"release {r.name!r}: margins {r.margins!r} has no column {key!r}")
        if key not in schema:
            raise SpecError(f"release {r.name!r}: the input has no column {key!r}")
        if textual_key(margins.schema[key]) != textual_key(schema[key]):
            raise SpecError(
                f"release {r.name!r}: margins {r.margins!r} key {key!r} has dtype "
                f"{margins.schema[key]} but the input's is {schema[key]}: list the keys with "
                "the input's type (e.g. strings for a String column)"
            )
    try:
        return fit_margins(margins, schema, r.by, f"release {r.name!r}: margins {r.margins!r}")
    except InvalidParameterError as exc:
        raise SpecError(str(exc)) from None


def _declared(r: Any, column: str, categories: Any, schema: pl.Schema) -> list[Any]:
    """The spec's categories of ``column``, else those its file's Enum dtype declares."""
    if categories is not None:
        return list(categories)
    dtype = schema.get(column)
    if isinstance(dtype, pl.Enum):
        return dtype.categories.to_list()
    raise SpecError(
        f"release {r.name!r}: give the categories of {column!r} in the spec (or make it an "
        "Enum): they are never taken from the data"
    )


def _build_grouped(ctx: Context, r: GroupedSpec) -> Release:
    margins = margins_for(ctx.spec, r, ctx.schema, ctx.margins.get(r.margins))
    return GroupBy(
        ctx.frame,
        r.by,
        margins=margins,
        sizes=ctx.spec.margins[r.margins].sizes,
        unknown_keys=r.unknown_keys,
        accountant=ctx.accountant,
        seed=ctx.source(r),
        neighbours=ctx.spec.privacy.neighbours,
        nonnegative=r.nonnegative,
        nulls=r.nulls,
        **ctx.unit(r),
    ).agg(*[statistic(s) for s in r.statistics])


def _build_pram(ctx: Context, r: PramSpec) -> Release:
    columns = []
    for c in r.columns:
        if c.column not in ctx.schema:
            raise SpecError(f"release {r.name!r}: column {c.column!r} is not in the input")
        entry = c.model_dump()
        entry["categories"] = _declared(r, c.column, c.categories, ctx.schema)
        columns.append(entry)
    unit = ctx.unit(r)  # PRAM has no groups: only the person and max_rows
    return MicrodataRelease(
        ctx.frame,
        columns,
        keep=r.public,
        accountant=ctx.accountant,
        seed=ctx.source(r),
        neighbours=ctx.spec.privacy.neighbours,
        unit=unit.get("unit"),
        max_rows=unit.get("max_rows"),
    )


def _build_proportions(ctx: Context, r: ProportionsSpec) -> Release:
    return ProportionsRelease(
        ctx.frame,
        r.column,
        epsilon=r.epsilon,
        n=r.n if r.n is not None else ctx.rows(),
        categories=_declared(r, r.column, r.categories, ctx.schema),
        strategy=r.strategy,
        method=r.method,
        calibration="exact",
        accountant=ctx.accountant,
        seed=ctx.source(r),
        neighbours=ctx.spec.privacy.neighbours,
        dtype=ctx.schema.get(r.column),
    )


def _build_covariance(ctx: Context, r: CovarianceSpec) -> Release:
    return CovarianceMatrixRelease(
        ctx.frame,
        r.columns,
        [tuple(b) for b in r.bounds],
        epsilon=r.epsilon,
        n=r.n if r.n is not None else ctx.rows(),
        method=r.method,
        calibration="exact",
        repair=r.repair,
        accountant=ctx.accountant,
        seed=ctx.source(r),
        neighbours=ctx.spec.privacy.neighbours,
    )


def _unchanged(r: Any, frame: pl.DataFrame) -> pl.DataFrame:
    return frame


@dataclass(frozen=True)
class Kind:
    """How one kind of spec entry is built and what its output is."""

    build: Callable[[Context, Any], Release]
    rowwise: bool = False
    postprocess: Callable[[Any, pl.DataFrame], pl.DataFrame] = _unchanged


#: Every release kind a spec can hold.
KINDS: dict[type, Kind] = {
    GroupedSpec: Kind(_build_grouped),
    PramSpec: Kind(_build_pram, rowwise=True),
    ProportionsSpec: Kind(_build_proportions),
    CovarianceSpec: Kind(_build_covariance),
}


#: The release class of each kind a spec can hold: what its file records for its checks
#: (``facts``, ``read_facts``) and its suite (``suite``).
RELEASES: dict[str, type[Release]] = {
    "grouped": GroupedRelease,
    "pram": MicrodataRelease,
    "proportions": ProportionsRelease,
    "covariance": CovarianceMatrixRelease,
}


def release_class(r: Any) -> type[Release]:
    """The release class of a spec's release entry (by its ``kind``)."""
    return RELEASES[r.kind]


def kind_of(r: Any) -> Kind:
    """The registry entry of a spec's release entry."""
    return KINDS[type(r)]


def build(ctx: Context, r: Any) -> Release:
    """The release object of spec entry ``r`` (nothing read but the schema and row count)."""
    try:
        release = kind_of(r).build(ctx, r)
        release.name = r.name  # recorded in its ledger entries
        return release
    except SpecError:
        raise
    except DPFrameError as exc:  # name the release in the message
        raise type(exc)(f"release {r.name!r}: {exc}") from None
