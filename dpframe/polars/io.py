"""Parquet with provenance: the ledger entries of a release travel in the file metadata.

The provenance document (JSON) is stored under the key ``"dpframe"`` of the Parquet
file's key-value metadata. polars drops custom metadata on a ``scan -> sink`` round
trip, so every dpframe writer attaches it explicitly, and writes atomically: the data
goes to a temporary file in the target folder, which is renamed over ``path`` only once
complete. A failed write leaves no file behind.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant, LedgerEntry
from dpframe.core.budget import exact_sum
from dpframe.core.constraints import check
from dpframe.core.files import atomic_file, check_output_path
from dpframe.errors import InvalidParameterError, LedgerIntegrityError
from dpframe.polars.release import Release
from dpframe.polars.runner import RunnerRelease, sink
from dpframe.version import __version__

__all__ = [
    "METADATA_KEY",
    "Provenance",
    "ledger_frame",
    "provenance_json",
    "read_parquet",
    "read_provenance",
    "sink_parquet",
    "write_parquet",
]

METADATA_KEY = "dpframe"
PROVENANCE_FORMAT = "dpframe-provenance"
PROVENANCE_VERSION = 1


@dataclass(frozen=True)
class Provenance:
    """What a released Parquet file says about how it was made."""

    entries: tuple[LedgerEntry, ...]
    spec: dict[str, Any] | None
    written: str
    dpframe_version: str
    neighbours: str | None
    #: PRAM designs by released column (for :func:`dpframe.pram.estimate`)
    pram_designs: dict[str, Any] = field(default_factory=dict)
    #: public facts a release's checks need (e.g. ``input_rows``: the input's row count)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        """Total epsilon of the releases recorded in the file."""
        return float(exact_sum(e.epsilon for e in self.entries))

    def ledger_frame(self) -> pl.DataFrame:
        """The recorded entries as a polars DataFrame (see :func:`ledger_frame`)."""
        return ledger_frame(self)

    def __repr__(self) -> str:
        spec = f", spec={len(self.spec.get('release', []))} release(s)" if self.spec else ""
        pram = f", pram_designs={sorted(self.pram_designs)}" if self.pram_designs else ""
        return (
            f"Provenance(epsilon={self.epsilon:g}, entries={len(self.entries)}, "
            f"neighbours={self.neighbours!r}, written={self.written!r}, "
            f"dpframe={self.dpframe_version}{spec}{pram})"
        )

    def _repr_html_(self) -> str:
        head = html.escape(repr(self))
        return f"<p><code>{head}</code></p>{self.ledger_frame()._repr_html_()}"


def ledger_frame(ledger: Any) -> pl.DataFrame:
    """Ledger entries as a polars DataFrame, one row per entry (``details`` as JSON text).

    ``ledger`` is an :class:`~dpframe.Accountant`, a :class:`Provenance`, a collected
    release, or a sequence of :class:`~dpframe.LedgerEntry`.

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> _ = acct.spend(0.25, mechanism="laplace", columns=["x"])
    >>> dpframe.ledger_frame(acct).select("mechanism", "epsilon").row(0)
    ('laplace', 0.25)
    """
    entries = ledger.entries if isinstance(ledger, Provenance) else _entries_of(ledger, True)[0]
    schema = {  # what a reader looks for first, the identifiers last
        "mechanism": pl.String,
        "columns": pl.List(pl.String),
        "epsilon": pl.Float64,
        "delta": pl.Float64,
        "scale": pl.Float64,
        "composition": pl.String,
        "note": pl.String,
        "time": pl.String,
        "release": pl.String,
        "id": pl.String,
        "details": pl.String,
    }
    rows = []
    for e in entries:
        d = e.to_dict()
        d["details"] = json.dumps(d["details"], sort_keys=True)
        rows.append(d)
    frame = pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    return frame.with_columns(pl.col("time").str.to_datetime(time_zone="UTC"))


def _entries_of(ledger: Any, empty_ok: bool = False) -> tuple[tuple[LedgerEntry, ...], str | None]:
    """Ledger entries (and neighbour relation) from an accountant, a release or a list."""
    neighbours = None
    if isinstance(ledger, Accountant):
        entries, neighbours = ledger.ledger, ledger.neighbours
    elif isinstance(ledger, Release):
        entries = ledger.ledger
    elif isinstance(ledger, RunnerRelease):
        entry = getattr(ledger, "entry", None)
        entries = () if entry is None else (entry,)
    elif isinstance(ledger, LedgerEntry):
        entries = (ledger,)
    elif isinstance(ledger, Sequence) and not isinstance(ledger, str):
        entries = tuple(ledger)
    else:
        raise InvalidParameterError(
            "ledger must be an Accountant, a collected release, or ledger entries; "
            f"got {type(ledger).__name__}"
        )
    if (not entries and not empty_ok) or not all(isinstance(e, LedgerEntry) for e in entries):
        raise InvalidParameterError(
            "ledger must be an Accountant, a collected release, or ledger entries; "
            f"got {type(ledger).__name__} with no entries (was the release collected?)"
        )
    return tuple(entries), neighbours


def provenance_json(
    entries: Sequence[LedgerEntry],
    neighbours: str | None,
    spec: dict[str, Any] | None,
    designs: dict[str, Any] | None = None,
    facts: dict[str, Any] | None = None,
) -> str:
    doc = {
        "format": PROVENANCE_FORMAT,
        "version": PROVENANCE_VERSION,
        "dpframe_version": __version__,
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "neighbours": neighbours,
        "entries": [e.to_dict() for e in entries],
        "spec": spec,
    }
    if designs:
        doc["pram_designs"] = designs
    if facts:
        doc["facts"] = facts
    return json.dumps(doc)


def write_parquet(
    frame: pl.DataFrame | pl.LazyFrame,
    path: str | os.PathLike[str],
    *,
    ledger: Any,
    spec: dict[str, Any] | None = None,
    compression: str = "zstd",
    neighbours: str | None = None,
    facts: dict[str, Any] | None = None,
) -> Path:
    """Write a released frame to Parquet, atomically, with its ledger in the metadata.

    Parameters
    ----------
    frame : polars.DataFrame or polars.LazyFrame
        The *released* (noisy) table; a LazyFrame is streamed with ``sink_parquet``.
    path : path-like
        Destination file; its folder must exist.
    ledger : Accountant, GroupedRelease or sequence of LedgerEntry
        The releases that produced ``frame`` (an accountant contributes its whole ledger).
    spec : dict, optional
        The release spec (JSON-serialisable), stored alongside.
    neighbours : {"substitute", "add_remove"}, optional
        The neighbour relation to record when ``ledger`` is a list of entries (an
        accountant records its own).
    facts : dict, optional
        Public facts the table's checks need (e.g. ``{"input_rows": n}``), stored alongside.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import polars as pl, dpframe, tempfile, os
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> _ = acct.spend(0.5, mechanism="laplace", columns=["x"])
    >>> p = os.path.join(tempfile.mkdtemp(), "out.parquet")
    >>> _ = dpframe.write_parquet(pl.DataFrame({"x": [1.0]}), p, ledger=acct)
    >>> dpframe.read_provenance(p).epsilon
    0.5
    """
    entries, own = _entries_of(ledger)
    if neighbours is not None:
        check("neighbours", neighbours)
    neighbours = neighbours or own
    check("compression", compression)
    target = _output_path(path, spec, facts)
    metadata = {METADATA_KEY: provenance_json(entries, neighbours, spec, facts=facts)}
    if not isinstance(frame, pl.LazyFrame | pl.DataFrame):
        raise InvalidParameterError(
            f"frame must be a polars DataFrame or LazyFrame, got {type(frame).__name__}"
        )
    with atomic_file(target) as tmp:
        if isinstance(frame, pl.LazyFrame):
            frame.sink_parquet(tmp, metadata=metadata, compression=compression)
        else:
            frame.write_parquet(tmp, metadata=metadata, compression=compression)
    return target


def _output_path(
    path: str | os.PathLike[str], spec: dict[str, Any] | None, facts: Any = None
) -> Path:
    """The output path, checked (its folder exists; the spec and facts to record are
    JSON)."""
    for name, value in (("spec", spec), ("facts", facts)):
        if value is None:
            continue
        if name == "facts" and not isinstance(value, dict):
            raise InvalidParameterError(f"facts must be a dict, got {type(value).__name__}")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"{name} must be JSON data: {exc}") from None
    return check_output_path(path)


def read_provenance(path: str | os.PathLike[str]) -> Provenance:
    """The provenance stored in a Parquet file written by :func:`write_parquet`.

    Raises :class:`~dpframe.errors.InvalidParameterError` if the file has none.
    """
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise InvalidParameterError(
            f"path must be the path of a released Parquet file (str or os.PathLike), got {path!r}"
        )
    folder = Path(path)
    if not folder.exists():
        raise InvalidParameterError(f"path: {path} does not exist")
    try:
        if folder.is_dir():  # a Spark output: a folder of parts, provenance in _dpframe.json
            sidecar = folder / "_dpframe.json"
            raw = json.loads(sidecar.read_text()) if sidecar.exists() else None
            raw = raw.get(METADATA_KEY) if isinstance(raw, dict) else None
            raw = json.dumps(raw) if raw is not None else None
        else:
            raw = pl.read_parquet_metadata(path).get(METADATA_KEY)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise InvalidParameterError(
            f"path: {path} cannot be read as a released Parquet file "
            f"({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    if raw is None:
        raise InvalidParameterError(
            f"{path} has no dpframe provenance (metadata key {METADATA_KEY!r}); it was not "
            "written by dpframe.write_parquet, or a later tool dropped the metadata"
        )
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise InvalidParameterError(f"{path}: metadata key {METADATA_KEY!r} is not dpframe's")
    if doc.get("format") != PROVENANCE_FORMAT:
        raise InvalidParameterError(f"{path}: metadata key {METADATA_KEY!r} is not dpframe's")
    try:
        entries = tuple(LedgerEntry.from_dict(e) for e in doc["entries"])
    except (TypeError, AttributeError, KeyError) as exc:
        raise LedgerIntegrityError(f"provenance of {path}: malformed entries ({exc})") from None
    for e in entries:  # each entry against its hash, and consecutive ones linked
        e.verify(f"provenance of {path}")
    return Provenance(
        entries=entries,
        spec=doc.get("spec"),
        written=doc["written"],
        dpframe_version=doc["dpframe_version"],
        neighbours=doc.get("neighbours"),
        pram_designs=doc.get("pram_designs", {}),
        facts=doc.get("facts") if isinstance(doc.get("facts"), dict) else {},
    )


def read_parquet(path: str | os.PathLike[str]) -> tuple[pl.DataFrame, Provenance]:
    """Read a released Parquet file and its provenance.

    Examples
    --------
    >>> # frame, provenance = dpframe.read_parquet("release.parquet")
    """
    provenance = read_provenance(path)
    return pl.read_parquet(path), provenance


def sink_parquet(
    frame: pl.LazyFrame | pl.DataFrame,
    path: str | os.PathLike[str],
    *,
    public: Sequence[str] | None = None,
    spec: dict[str, Any] | None = None,
    compression: str = "zstd",
) -> Path:
    """Stream a query holding ``.dp`` releases to Parquet, atomically, with provenance.

    The query runs through the runner (:mod:`dpframe.polars.runner`): inspected, a dry
    pass that checks the data and refuses raw columns (``public=`` names the columns that
    may leave as they are), one atomic charge, then the real pass on the streaming engine
    (memory stays bounded on larger-than-memory input). The ledger entries of the run go
    in the file's metadata (key ``"dpframe"``, see :func:`read_provenance`). The data goes
    to a temporary file renamed over ``path`` only once complete: a failure leaves no
    file (budget charged before the failure stays spent, since randomization was drawn).

    Parameters
    ----------
    frame : polars.LazyFrame or polars.DataFrame
    path : path-like
        Destination file; its folder must exist.
    public : list of str, optional
        Output columns published as they are (not released by a ``.dp`` expression).
    spec : dict, optional
        JSON-serialisable description stored alongside the ledger.
    compression : str, default "zstd"

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import polars as pl, dpframe, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "released.parquet")
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     lf = pl.LazyFrame({"x": [0, 1, 2, 1]})
    ...     q = lf.select(pl.col("x").dp.pram(0.5, categories=[0, 1, 2]))
    ...     _ = dpframe.sink_parquet(q, out)
    >>> dpframe.read_provenance(out).epsilon
    0.5
    """
    check("compression", compression)
    target = _output_path(path, spec)

    def metadata(run: Any) -> dict[str, str]:
        nb = run.accountant.neighbours if run.accountant is not None else None
        return {METADATA_KEY: provenance_json(run.entries, nb, spec, designs=run.records)}

    with atomic_file(target) as tmp:
        sink(frame, Path(tmp), public=public, metadata=metadata, compression=compression)
    return target
