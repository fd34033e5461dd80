"""The release kinds of a spec, in one registry: kind name -> release class.

A spec's release entry (:mod:`dpframe.jobs.spec`) becomes one of the polars API's release
objects (:class:`~dpframe.polars.release.Release`) -- the same objects a Python user
builds, over a polars or a Spark frame alike -- so ``plan`` and ``run`` handle every kind
the same way: build, summarize (plan), prepare (check the data, nothing spent), charge
all at once, finish. Everything that differs between kinds is the release class's own
(:data:`KINDS` maps ``kind = "..."`` to it): ``from_spec`` (the release a spec entry
describes, given the job's public facts, :class:`Context`), ``rowwise`` (microdata written
by the engine, or a small released table written with provenance), ``facts``,
``read_facts``, ``suite`` and ``to_spec``. A new kind is one line here
(docs/architecture.md, "Add a release kind").
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
from dpframe.jobs.spec import Spec, SpecError
from dpframe.polars.frame import CovarianceMatrixRelease, ProportionsRelease
from dpframe.polars.grouped import GroupedRelease
from dpframe.polars.pram import MicrodataRelease
from dpframe.polars.release import Release

__all__ = ["KINDS", "Context", "build", "margins_for", "release_class"]

#: Every release kind a spec can hold: its ``kind = "..."`` -> its release class (one
#: line per kind; the class declares everything else).
KINDS: dict[str, type[Release[Any]]] = {
    "grouped": GroupedRelease,
    "pram": MicrodataRelease,
    "proportions": ProportionsRelease,
    "covariance": CovarianceMatrixRelease,
}


@dataclass(frozen=True)
class Context:
    """What building a spec's releases needs: the data, its public facts, the budget
    (made from a resolved job: :meth:`dpframe.jobs.planning.Job.context`); what a release
    class's ``from_spec`` is given (:class:`dpframe.polars.release.SpecContext`)."""

    spec: Spec
    frame: Any
    schema: pl.Schema
    #: the input's row count (public under substitute neighbours), counted at most once
    #: and shared by every release of the job
    rows: Callable[[], int]
    #: each margins table a release uses, as read once (else read from the spec)
    tables: Mapping[str, pl.DataFrame] = field(default_factory=lambda: MappingProxyType({}))
    accountant: Any = None
    seed: int | None = None
    #: the error a spec entry's mistake raises
    error: type[InvalidParameterError] = SpecError

    @property
    def neighbours(self) -> str:
        """The spec's neighbour relation."""
        return self.spec.privacy.neighbours

    def margins(self, r: Any) -> pl.DataFrame:
        """The public key frame of margins ``r.margins``, fitted to ``r.by`` and the
        input's dtypes (:func:`margins_for`)."""
        return margins_for(self.spec, r, self.schema, self.tables.get(r.margins))

    def margins_sizes(self, r: Any) -> str | None:
        """The public sizes column of margins ``r.margins``, if any."""
        return self.spec.margins[r.margins].sizes

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
    spec: Spec, r: Any, schema: pl.Schema, read: pl.DataFrame | None = None
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


def release_class(r: Any) -> type[Release[Any]]:
    """The release class of a spec's release entry (by its ``kind``)."""
    return KINDS[r.kind]


def build(ctx: Context, r: Any) -> Release[Any]:
    """The release object of spec entry ``r`` (nothing read but the schema and row count)."""
    try:
        release = release_class(r).from_spec(r, ctx)
        release.name = r.name  # recorded in its ledger entries
        return release
    except SpecError:
        raise
    except DPFrameError as exc:  # name the release in the message
        raise type(exc)(f"release {r.name!r}: {exc}") from None
