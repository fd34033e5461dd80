"""Parquet with provenance: the ledger entries of a release travel in the file metadata.

The provenance document (JSON) is stored under the key ``"dpframe"`` of the Parquet
file's key-value metadata. polars drops custom metadata on a ``scan -> sink`` round
trip, so every dpframe writer attaches it explicitly, and writes atomically: the data
goes to a temporary file in the target folder, which is renamed over ``path`` only once
complete. A failed write leaves no file behind.

Every writer first calls the output guard (:func:`dpframe.core.outputs.guard_output`,
through :func:`guard_release_output`): never a path that resolves to a file the query
reads, to a ledger, or to an existing file dpframe did not write
(:func:`written_by_dpframe`); refused before anything is charged.
"""

from __future__ import annotations

import html
import json
import os
import stat
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant, LedgerEntry, current_accountant
from dpframe.core.advice import advise
from dpframe.core.budget import exact_sum
from dpframe.core.constraints import Compression, check
from dpframe.core.files import atomic_file, check_output_path
from dpframe.core.outputs import Read, guard_output
from dpframe.core.postgres import redact
from dpframe.errors import (
    DPFrameError,
    InvalidDataError,
    InvalidParameterError,
    LedgerIntegrityError,
)
from dpframe.polars.memory import FrameSource
from dpframe.polars.parquet_footer import (
    Footer,
    FooterError,
    KeyValue,
    copy_with_metadata,
    read_footer,
)
from dpframe.polars.release import Release
from dpframe.polars.runner import RunnerRelease, sink
from dpframe.version import __version__

__all__ = [
    "METADATA_KEY",
    "Provenance",
    "copy_provenance",
    "frame_reads",
    "guard_release_output",
    "ledger_frame",
    "provenance_json",
    "read_parquet",
    "read_provenance",
    "sink_parquet",
    "write_parquet",
    "written_by_dpframe",
]

METADATA_KEY = "dpframe"
PROVENANCE_FORMAT = "dpframe-provenance"
PROVENANCE_VERSION = 1


@dataclass(frozen=True)
class Provenance:
    """What a released Parquet file says about how it was made.

    Examples
    --------
    >>> import os, tempfile, polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> _ = acct.spend(0.5, mechanism="laplace", columns=["x"])
    >>> path = os.path.join(tempfile.mkdtemp(), "release.parquet")
    >>> _ = dpframe.write_parquet(pl.DataFrame({"x": [1.5]}), path, ledger=acct)
    >>> frame, provenance = dpframe.read_parquet(path)
    >>> provenance.epsilon, [e.mechanism for e in provenance.entries]
    (0.5, ['laplace'])
    """

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
        """Total epsilon of the releases recorded in the file.

        Examples
        --------
        >>> import os, tempfile, polars as pl, dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.25, mechanism="laplace", columns=["x"])
        >>> path = os.path.join(tempfile.mkdtemp(), "release.parquet")
        >>> _ = dpframe.write_parquet(pl.DataFrame({"x": [1.5]}), path, ledger=acct)
        >>> dpframe.read_provenance(path).epsilon
        0.25
        """
        return float(exact_sum(e.epsilon for e in self.entries))

    def ledger_frame(self) -> pl.DataFrame:
        """The recorded entries as a polars DataFrame (see :func:`ledger_frame`).

        Examples
        --------
        >>> import os, tempfile, polars as pl, dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.25, mechanism="laplace", columns=["x"])
        >>> path = os.path.join(tempfile.mkdtemp(), "release.parquet")
        >>> _ = dpframe.write_parquet(pl.DataFrame({"x": [1.5]}), path, ledger=acct)
        >>> dpframe.read_provenance(path).ledger_frame().select("mechanism", "epsilon").row(0)
        ('laplace', 0.25)
        """
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
    schema: dict[str, Any] = {  # what a reader looks for first, the identifiers last
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
        "spec": _without_secrets(spec),
    }
    if designs:
        doc["pram_designs"] = designs
    if facts:
        doc["facts"] = facts
    return json.dumps(doc)


def _without_secrets(value: Any) -> Any:
    """``value`` with the password of every URL in it masked (e.g. a spec's PostgreSQL
    ledger ``postgresql://job:pw@db/ledgers``): a released file never carries one."""
    if isinstance(value, str):
        if "://" not in value:
            return value
        try:
            parts = urllib.parse.urlsplit(value)
            query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        except ValueError:  # not a URL
            return value
        secret = ":" in parts.netloc.rpartition("@")[0]
        secret = secret or any(k.lower() == "password" for k, _ in query)
        return redact(value) if secret else value
    if isinstance(value, dict):
        return {k: _without_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_secrets(v) for v in value]
    return value


def write_parquet(
    frame: pl.DataFrame | pl.LazyFrame,
    path: str | os.PathLike[str],
    *,
    ledger: Any,
    spec: dict[str, Any] | None = None,
    compression: Compression = "zstd",
    neighbours: str | None = None,
    facts: dict[str, Any] | None = None,
) -> Path:
    """Write a released frame to Parquet, atomically, with its ledger in the metadata.

    Parameters
    ----------
    frame : polars.DataFrame or polars.LazyFrame
        The *released* (noisy) table; a LazyFrame is streamed with ``sink_parquet``.
    path : path-like
        Destination file; its folder must exist. Refused, before anything is written, if
        it resolves (through links, or as a hard link) to a file ``frame`` reads, to a
        ledger or its ``-wal``/``-shm``/``-journal``, or to an existing file dpframe did
        not write (:func:`dpframe.core.outputs.guard_output`).
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
    guard_release_output(frame, target, accountants=[ledger])
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

    Examples
    --------
    >>> import os, tempfile, polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> _ = acct.spend(0.5, mechanism="laplace", columns=["x"])
    >>> path = os.path.join(tempfile.mkdtemp(), "release.parquet")
    >>> _ = dpframe.write_parquet(pl.DataFrame({"x": [1.5]}), path, ledger=acct)
    >>> dpframe.read_provenance(path).ledger_frame().select("mechanism", "epsilon").row(0)
    ('laplace', 0.5)
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
            raw = pl.read_parquet_metadata(Path(path)).get(METADATA_KEY)
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
        facts=facts if isinstance(facts := doc.get("facts"), dict) else {},
    )


_SOURCE_ROLE = "the Parquet file dpframe released"
_DESTINATION_ROLE = "the Parquet file another tool rewrote from it"


def copy_provenance(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    overwrite: bool = False,
) -> Path:
    """Put a released file's provenance into a copy of it that another tool rewrote.

    pyarrow, DuckDB (``COPY``), polars (``scan -> sink``) and pandas drop a Parquet file's
    custom metadata when they rewrite it, and with it the provenance dpframe stores there
    (see :func:`read_provenance`). This function checks that ``destination`` holds the
    release ``source`` holds, then writes ``source``'s provenance into ``destination``'s
    metadata, verbatim: ``read_provenance(destination)`` afterwards returns the same
    :class:`Provenance` as ``read_provenance(source)`` (the same entries, hashes, spec,
    PRAM designs and facts, and the same ``written`` time: the release's, not the copy's).

    What ``destination`` must hold, checked before anything is written:

    * **only columns ``source`` released** (any subset, in any order, under the same
      names): a release's provenance must not vouch for a file that also holds other --
      raw -- columns;
    * **the same values, row for row**: the same number of rows in the same order, each
      value equal to ``source``'s. A tool may change the *type* within a kind of values
      (an integer column written as float, an Enum as a string or a dictionary, a
      timestamp in another unit) only where the conversion is exact both ways; floats
      are compared bit for bit. So a value that lost precision, or a raw value under a
      released column's name, is refused.

    The row count and order must match because a filtered or reordered copy is not the
    release: it is post-processing, and DP, only if the filter or the order used the
    released values alone, which dpframe cannot tell from the file. A released table's
    rows can be aligned with the confidential input (PRAM keeps each record's row), so a
    copy filtered or sorted on a raw column discloses that column, uncharged. To publish
    a derivative computed from released values only, read the release, derive the table
    in polars and write it with :func:`write_parquet` (``ledger=provenance.entries``),
    recording it as your own statement.

    ``destination`` is rewritten atomically: its bytes up to its Parquet footer (every
    row group, page, index and statistic) are copied unchanged into a temporary file in
    its folder, followed by its footer with the new key-value list (its own entries kept
    in their order, any ``"dpframe"`` entry replaced); the file is synced and renamed over
    ``destination`` (through a symbolic link: over the file it points to), keeping its
    permission bits. On any refusal or failure nothing is written and ``destination`` is
    untouched. Nothing is charged and no ledger is opened. ``destination`` must not
    resolve to ``source`` (through links, or as a hard link) or to a ledger (a SQLite
    database or its ``-wal``/``-shm``/``-journal``).

    Provenance is a claim, not a signature: anyone can write the metadata key with
    pyarrow. This function refuses to make the claim for a file it can check does not
    hold the release; ``destination``'s other metadata entries are kept as they are.

    Parameters
    ----------
    source : path-like
        A Parquet file written by :func:`write_parquet` or :func:`sink_parquet` (or by
        ``dpframe release``), holding a valid provenance. A Spark output folder is
        refused (its provenance is the folder's ``_dpframe.json``).
    destination : path-like
        The Parquet file another tool wrote from ``source``; not ``source`` itself (nor a
        link to it).
    overwrite : bool, default False
        Replace a *different* dpframe provenance ``destination`` already carries. With
        ``False`` that is refused; the same provenance is left as it is (nothing written).

    Returns
    -------
    pathlib.Path
        ``destination``.

    Raises
    ------
    InvalidParameterError
        ``source`` or ``destination`` is missing, a folder, not a regular file, not
        Parquet, or has an encrypted or signed footer; they are the same file; ``source``
        has no dpframe provenance; ``destination`` carries another provenance and
        ``overwrite`` is False; ``destination`` changed while it was being rewritten.
    InvalidDataError
        ``destination`` holds a column ``source`` did not release, a column of another
        kind, another number of rows, or other values (or the same in another order).
    LedgerIntegrityError
        ``source``'s provenance fails verification (its entries were edited).

    Examples
    --------
    >>> import os, tempfile, polars as pl, pyarrow.parquet as pq, dpframe
    >>> folder = tempfile.mkdtemp()
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> _ = acct.spend(0.5, mechanism="laplace", columns=["x"])
    >>> src = os.path.join(folder, "release.parquet")
    >>> _ = dpframe.write_parquet(pl.DataFrame({"x": [1.5, 2.5]}), src, ledger=acct)
    >>> dst = os.path.join(folder, "rewritten.parquet")
    >>> pq.write_table(pq.read_table(src), dst)  # another tool: the metadata is lost
    >>> _ = dpframe.copy_provenance(src, dst)
    >>> dpframe.read_provenance(dst) == dpframe.read_provenance(src)
    True
    """
    if not isinstance(overwrite, bool):
        raise InvalidParameterError(f"overwrite must be True or False, got {overwrite!r}")
    src, src_footer, src_stat = _parquet_file(source, "source", _SOURCE_ROLE)
    dst, dst_footer, dst_stat = _parquet_file(destination, "destination", _DESTINATION_ROLE)
    if (src_stat.st_dev, src_stat.st_ino) == (dst_stat.st_dev, dst_stat.st_ino):
        raise InvalidParameterError(
            f"destination: {destination} is the same file as source {source} (a link, or "
            "the same path); give the file the other tool wrote, not the release itself"
        )
    check_output_path(dst, "destination")  # its folder writable: the rewrite goes there
    # never a file the copy reads (source) or a ledger, through links included; the file
    # another tool wrote is replaced by design (replace=False)
    guard_output(
        destination,
        argument="destination",
        reads=[Read(os.fspath(source), "source")],
        ledgers=_ledgers(),
        replace=False,
    )
    provenance = _source_provenance(source, src)
    values = src_footer.get(METADATA_KEY.encode())
    if len(values) != 1 or values[0] is None:
        raise InvalidParameterError(
            f"source: {source} holds {len(values)} metadata entries {METADATA_KEY!r}; a "
            "file dpframe wrote holds one: give the file dpframe released"
        )
    value = values[0]
    existing = dst_footer.get(METADATA_KEY.encode())
    same = existing == [value] or (len(existing) == 1 and _same_json(existing[0], value))
    if existing and not same and not overwrite:
        raise InvalidParameterError(
            f"destination: {destination} already carries another dpframe provenance "
            f"({_describe_provenance(dst)}); "
            + advise(
                python="pass overwrite=True",
                spec="pass --overwrite",  # no spec copies provenance: the command's words
            )
            + " to replace it with source's"
        )
    _check_same_release(src, dst, source, destination, src_footer, dst_footer)
    if same:
        return Path(destination)
    key = METADATA_KEY.encode()
    entries: list[KeyValue | tuple[bytes, bytes]] = [
        kv for kv in dst_footer.metadata if kv.key != key
    ]
    entries.append((key, value))
    with atomic_file(dst, mode=stat.S_IMODE(dst_stat.st_mode)) as tmp:
        try:
            copy_with_metadata(dst, tmp, dst_footer, entries)
        except FooterError as exc:
            raise InvalidParameterError(
                f"destination: {destination} could not be rewritten ({exc}); nothing was written"
            ) from None
        _check_unchanged(dst, dst_stat, destination)
        _verify_rewrite(tmp, dst, dst_footer, entries, provenance, destination)
        _check_unchanged(dst, dst_stat, destination)  # then renamed over it at once
    return Path(destination)


def _parquet_file(path: Any, name: str, role: str) -> tuple[Path, Footer, os.stat_result]:
    """The real path, footer and status of the Parquet file argument ``name``."""
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if not isinstance(text, str) or not text:
        raise InvalidParameterError(
            f"{name} must be the path of {role} (str or os.PathLike), got {path!r}"
        )
    given = Path(text)
    if not given.exists():
        raise InvalidParameterError(f"{name}: {text} does not exist; give {role}")
    real = Path(os.path.realpath(given))
    if real.is_dir():
        raise InvalidParameterError(
            f"{name}: {text} is a folder; give {role} (one Parquet file"
            + (", not a Spark output folder)" if name == "source" else ")")
        )
    try:
        status = real.stat()
        if not stat.S_ISREG(status.st_mode):
            raise InvalidParameterError(f"{name}: {text} is not a regular file; give {role}")
        footer = read_footer(real)
    except FooterError as exc:
        raise InvalidParameterError(f"{name}: {text} is not a Parquet file: {exc}") from None
    except OSError as exc:
        raise InvalidParameterError(
            f"{name}: {text} cannot be read ({type(exc).__name__}: {exc.strerror or exc})"
        ) from None
    return real, footer, status


def _check_unchanged(dst: Path, before: os.stat_result, destination: Any) -> None:
    """Refuse if another writer replaced or changed ``dst`` since it was checked."""
    now = os.stat(dst)
    if (now.st_ino, now.st_size, now.st_mtime_ns) != (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    ):
        raise InvalidParameterError(
            f"destination: {destination} changed while its provenance was being copied; "
            "nothing was written: run again once the other tool is done"
        )


def _source_provenance(source: Any, src: Path) -> Provenance:
    """``source``'s provenance, verified, with read_provenance's refusals naming source."""
    try:
        return read_provenance(src)
    except DPFrameError as exc:
        message = str(exc).replace(str(src), os.fspath(source))
        raise type(exc)(f"source: {message}") from None


def _describe_provenance(path: Path) -> str:
    try:
        prov = read_provenance(path)
    except DPFrameError:
        return "an entry 'dpframe' that is not a valid provenance"
    return f"epsilon {prov.epsilon:g} in {len(prov.entries)} entries, written {prov.written}"


def _same_json(a: bytes | None, b: bytes) -> bool:
    try:
        return a is not None and json.loads(a) == json.loads(b)
    except ValueError:
        return False


def _check_same_release(
    src: Path, dst: Path, source: Any, destination: Any, src_footer: Footer, dst_footer: Footer
) -> None:
    """Refuse unless ``dst`` holds released columns of ``src`` with the same values, row
    for row (see :func:`copy_provenance`)."""
    try:
        released = pl.read_parquet_schema(src)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InvalidParameterError(
            f"source: {source} cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    try:
        held = pl.read_parquet_schema(dst)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InvalidDataError(
            f"destination: {destination} cannot be read by polars, so it cannot be checked "
            f"against the release ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    extra = [c for c in held if c not in released]
    if extra:
        raise InvalidDataError(
            f"destination: {destination} holds column(s) {extra} that source {source} did not "
            f"release (it released {list(released)}); a release's provenance goes only on "
            "its own released columns: drop the others before writing the destination"
        )
    for column, dtype in held.items():
        if _kind(dtype) != _kind(released[column]):
            raise InvalidDataError(
                f"destination: column {column!r} of {destination} is {dtype}, where source "
                f"released {released[column]}: not the same kind of values, so not the release"
            )
    if dst_footer.num_rows != src_footer.num_rows:
        raise InvalidDataError(
            f"destination: {destination} has {dst_footer.num_rows} rows where source "
            f"{source} released {src_footer.num_rows}; a filtered copy is not the release "
            "(see dpframe.copy_provenance's notes on filtered and reordered copies)"
        )
    for column in held:
        try:
            ours = pl.read_parquet(src, columns=[column]).to_series()
            theirs = pl.read_parquet(dst, columns=[column]).to_series()
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise InvalidDataError(
                f"destination: column {column!r} of {destination} cannot be read "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
        problem = _difference(ours, theirs)
        if problem is not None:
            raise InvalidDataError(
                f"destination: column {column!r} of {destination} {problem} than source "
                f"{source} released; only a copy holding the released values, row for row "
                "in the same order, may carry the release's provenance"
            )


def _kind(dtype: Any) -> str:
    """The kind of values of a dtype: a tool may change the type within a kind."""
    if dtype.is_numeric():
        return "number"
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        return "text"
    if dtype == pl.Date or isinstance(dtype, pl.Datetime):
        return "date"
    return str(dtype.base_type())


def _difference(ours: pl.Series, theirs: pl.Series) -> str | None:
    """Why ``theirs`` does not hold ``ours``'s values row for row (None: it does)."""
    try:  # exact both ways: a narrowing conversion, or extra digits, is not the release
        forward = ours.cast(theirs.dtype, strict=True)
        back = theirs.cast(ours.dtype, strict=True)
    except (pl.exceptions.PolarsError, ValueError, TypeError):
        return f"holds {theirs.dtype} values that do not convert exactly to the {ours.dtype}"
    for a, b in ((forward, theirs), (back, ours)):
        row = _first_mismatch(a, b)
        if row is not None:
            at = f"at row {row}" if row >= 0 else "somewhere"
            return f"holds other values ({at}, as {a.dtype})"
    return None


_FLOAT_BITS: dict[Any, Any] = {pl.Float32: pl.UInt32, pl.Float64: pl.UInt64}
if hasattr(pl, "Float16"):  # pragma: no branch
    _FLOAT_BITS[pl.Float16] = pl.UInt16


def _first_mismatch(a: pl.Series, b: pl.Series) -> int | None:
    """The first row where ``a`` and ``b`` (one dtype) differ, -1 if unknown, None if none.

    Floats are compared bit for bit (a NaN payload or a negative zero is a difference);
    text by its strings; a null equals only a null.
    """
    bits = _FLOAT_BITS.get(a.dtype)
    if bits is not None:
        a, b = a.reinterpret(dtype=bits), b.reinterpret(dtype=bits)
    elif isinstance(a.dtype, pl.Categorical | pl.Enum):
        a, b = a.cast(pl.String), b.cast(pl.String)
    try:
        rows = a.ne_missing(b).arg_true()
    except pl.exceptions.PolarsError:  # a nested dtype without elementwise comparison
        return None if a.equals(b, null_equal=True) else -1
    return int(rows[0]) if len(rows) else None


def _verify_rewrite(
    tmp: str,
    dst: Path,
    footer: Footer,
    entries: Sequence[KeyValue | tuple[bytes, bytes]],
    provenance: Provenance,
    destination: Any,
) -> None:
    """The rewritten file reads back as ``dst`` with the new metadata and provenance (read
    by this module, by polars and by pyarrow, independently)."""
    problems = []
    try:
        new = read_footer(tmp)
        if [f for f in new.fields if f[0] != 5] != [f for f in footer.fields if f[0] != 5]:
            problems.append("its footer's other fields changed")
        want = [kv.key if isinstance(kv, KeyValue) else kv[0] for kv in entries]
        if [kv.key for kv in new.metadata] != want:
            problems.append("its metadata keys differ")
        if pl.read_parquet_schema(tmp) != pl.read_parquet_schema(dst):
            problems.append("polars reads another schema")
        if read_provenance(tmp) != provenance:
            problems.append("its provenance reads back differently")
        import pyarrow.parquet as pq  # the third reader (imported on use: load time)

        old_md, new_md = pq.read_metadata(dst), pq.read_metadata(tmp)
        if (
            new_md.num_rows != old_md.num_rows
            or new_md.num_row_groups != old_md.num_row_groups
            or not new_md.schema.equals(old_md.schema)
            or any(
                new_md.row_group(i).to_dict() != old_md.row_group(i).to_dict()
                for i in range(old_md.num_row_groups)
            )
        ):
            problems.append("pyarrow reads other row groups or another schema")
    except (FooterError, OSError, ValueError, pl.exceptions.PolarsError) as exc:
        problems.append(f"it cannot be read back ({type(exc).__name__}: {str(exc)[:200]})")
    if problems:
        raise InvalidDataError(
            f"destination: {destination} did not read back as itself with the provenance "
            f"once rewritten ({'; '.join(problems)}); nothing was written"
        )


def read_parquet(path: str | os.PathLike[str]) -> tuple[pl.DataFrame, Provenance]:
    """Read a released Parquet file and its provenance.

    Examples
    --------
    >>> # frame, provenance = dpframe.read_parquet("release.parquet")
    """
    provenance = read_provenance(path)
    return pl.read_parquet(Path(path)), provenance


def sink_parquet(
    frame: pl.LazyFrame | pl.DataFrame,
    path: str | os.PathLike[str],
    *,
    public: Sequence[str] | None = None,
    spec: dict[str, Any] | None = None,
    compression: Compression = "zstd",
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
        Destination file; its folder must exist. Refused before anything is charged if it
        resolves (through links, or as a hard link) to a file the query reads, to a ledger
        or its ``-wal``/``-shm``/``-journal``, or to an existing file dpframe did not
        write (:func:`dpframe.core.outputs.guard_output`).
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
    guard_release_output(frame, target)  # before the runner charges anything

    def metadata(run: Any) -> dict[str, str]:
        nb = run.accountant.neighbours if run.accountant is not None else None
        return {METADATA_KEY: provenance_json(run.entries, nb, spec, designs=run.records)}

    with atomic_file(target) as tmp:
        sink(frame, Path(tmp), public=public, metadata=metadata, compression=compression)
    return target


# -- the output guard's facts for the polars layer -------------------------------------------


def written_by_dpframe(path: Path) -> bool:
    """Whether the existing ``path`` was written by dpframe: a Parquet file whose footer
    carries dpframe's provenance (key ``"dpframe"``, format ``dpframe-provenance``), or a
    Spark output folder whose ``_dpframe.json`` does."""
    try:
        if path.is_dir():
            doc = json.loads((path / "_dpframe.json").read_text())
            value = doc.get(METADATA_KEY) if isinstance(doc, dict) else None
            return isinstance(value, dict) and value.get("format") == PROVENANCE_FORMAT
        values = read_footer(path).get(METADATA_KEY.encode())
        if len(values) != 1 or values[0] is None:
            return False
        doc = json.loads(values[0])
    except (OSError, ValueError, FooterError):
        return False
    return isinstance(doc, dict) and doc.get("format") == PROVENANCE_FORMAT


def _local(path: str) -> str | None:
    """A local file path from a path or a ``file:`` URI (``file:///p``, Spark's
    ``file:/p``); None for another scheme (``s3://``, ``hdfs://``: not a local file)."""
    if path.startswith("file://"):
        return path.removeprefix("file://")
    if path.startswith("file:/"):
        return path.removeprefix("file:")
    if "://" in path:
        return None
    return path


def _cannot_list(why: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"frame: the files this query reads cannot be listed ({why}), so dpframe cannot "
        "check that the output does not replace one of them; collect the query first and "
        "write the DataFrame, or scan the input with pl.scan_parquet / pl.scan_csv. "
        "Nothing was written or charged."
    )


def frame_reads(frame: Any, what: str = "the query's input") -> list[Read]:
    """The files a frame reads: none for a polars DataFrame; a LazyFrame's scan sources,
    from its plan (globs and folders expanded by polars); a Spark DataFrame's
    ``inputFiles()``.

    Fails closed: a plan whose sources cannot be listed (a Python scan, an opaque Python
    step over a frame, a scan of an open file object) raises
    :class:`~dpframe.errors.InvalidParameterError`.
    """
    if isinstance(frame, pl.DataFrame):
        return []
    if isinstance(frame, pl.LazyFrame):
        return [Read(p, what) for p in _scan_sources(frame)]
    files = getattr(frame, "inputFiles", None)
    if callable(files):  # a Spark DataFrame
        try:
            found = [str(f) for f in files()]
        except Exception as exc:  # any failure: the sources are unknown
            raise _cannot_list(f"Spark's inputFiles() failed: {type(exc).__name__}") from None
        local = [_local(f) for f in found]
        return [Read(p, what) for p in local if p is not None]
    raise _cannot_list(f"a {type(frame).__name__} is not a polars or Spark frame")


def _scan_sources(lf: pl.LazyFrame) -> list[str]:
    """Every path a LazyFrame's plan scans, from polars' plan (its node traverser)."""
    try:
        nodes = lf._ldf.visit()
    except (pl.exceptions.PolarsError, OSError):
        raise  # the query itself is invalid (a missing column or file): polars says why
    except Exception as exc:  # any other failure: the sources are unknown
        raise _cannot_list(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    paths: list[str] = []
    pending = [nodes.get_node()]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        try:
            nodes.set_node(node)
            view = nodes.view_current_node()
            name = type(view).__name__
            if name == "PythonScan" and type(view.options[0]) is not FrameSource:
                raise _cannot_list("a Python scan")  # dpframe.scan_frame's: no files
            if name == "Scan":
                for p in view.paths:
                    local = _local(os.fspath(p))
                    if local is not None:
                        paths.append(local)
            pending.extend(nodes.get_inputs())
        except InvalidParameterError:
            raise
        except Exception as exc:  # any failure: the sources are unknown
            raise _cannot_list(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return paths


def _ledgers(*given: Any) -> list[str]:
    """The ledger files of the accountants given (or of the releases given), and of the
    ``with`` block's accountant."""
    files = []
    for item in (*given, current_accountant()):
        acct = item if isinstance(item, Accountant) else getattr(item, "accountant", None)
        path = acct.path if isinstance(acct, Accountant) else None
        if path is not None:
            files.append(os.fspath(path))
    return files


def guard_release_output(
    frame: Any,
    path: Any,
    *,
    argument: str = "path",
    accountants: Sequence[Any] = (),
) -> Any:
    """The output guard (:func:`dpframe.core.outputs.guard_output`) for a writer of
    ``frame``: ``path`` must not be a file ``frame`` reads, a ledger (of ``accountants``,
    of the ``with`` block's accountant, or any SQLite database), or an existing file
    dpframe did not write. Returns ``path`` unchanged; a Spark output at a URI of another
    scheme than ``file:`` is not a local file and is not checked."""
    if not isinstance(path, str | os.PathLike):
        return path  # refused by the writer's own path check
    text = os.fspath(path)
    if isinstance(frame, pl.DataFrame | pl.LazyFrame):  # written locally, whatever it says
        text = text.removeprefix("file://")
    else:  # Spark writes a URI of another scheme elsewhere: not a local file
        local = _local(text)
        if local is None:
            return path
        text = local
    guard_output(
        text,
        argument=argument,
        reads=frame_reads(frame),
        ledgers=_ledgers(*accountants),
        owned=written_by_dpframe,
    )
    return path
