"""The release kinds of a spec, in one registry: kind name -> release class.

A spec's release entry (:mod:`dpframe.jobs.spec`) becomes one of the polars API's release
objects (:class:`~dpframe.polars.release.Release`) -- the same objects a Python user
builds, over a polars or a Spark frame alike -- so ``plan`` and ``run`` handle every kind
the same way: build, summarize (plan), prepare (check the data, nothing spent), charge
all at once, finish. Everything that differs between kinds is the release class's own
(:data:`KINDS` maps ``kind = "..."`` to it): ``spec_model`` (its spec entry),
``from_spec`` (the release an entry describes, given the job's public facts,
:class:`dpframe.jobs.planning.Context`), ``rowwise`` (microdata written by the engine, or a
small released table written with provenance), ``facts``, ``read_facts``, ``suite`` and
``to_spec``. A new kind is one line here
(docs/architecture.md, "Add a release kind").
"""

from __future__ import annotations

from typing import Any

from dpframe.polars.frame import CovarianceMatrixRelease, ProportionsRelease
from dpframe.polars.grouped import GroupedRelease
from dpframe.polars.pram import MicrodataRelease
from dpframe.polars.release import Release

__all__ = ["KINDS", "release_class"]

#: Every release kind a spec can hold: its ``kind = "..."`` -> its release class (one
#: line per kind; the class declares everything else).
KINDS: dict[str, type[Release[Any]]] = {
    "grouped": GroupedRelease,
    "pram": MicrodataRelease,
    "proportions": ProportionsRelease,
    "covariance": CovarianceMatrixRelease,
}


def release_class(r: Any) -> type[Release[Any]]:
    """The release class of a spec's release entry (by its ``kind``)."""
    return KINDS[r.kind]
