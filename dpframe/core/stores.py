"""Where a ledger lives: in memory, or in a SQLite database (the persistent default).

A store keeps a ledger's header and its entries, each with the hash that chains it to
the one before (:mod:`dpframe.core.chain`), and offers one operation that changes it:
:meth:`SQLiteStore.append`, which -- in one exclusive transaction -- reads and verifies
every entry, lets the accountant decide what to add (or refuse, adding nothing), and
appends the new entries with their hashes.

The SQLite store (Python's own :mod:`sqlite3`):

* a schema that holds the rules: STRICT tables, epsilon and delta finite and
  ``>= 0`` (a NaN is stored as NULL and refused by ``NOT NULL``), one header row fixed
  at creation, and triggers that refuse any ``UPDATE`` or ``DELETE`` of the header or an
  entry (the ledger is append-only);
* every change one ``BEGIN IMMEDIATE`` transaction, in WAL mode, on a fresh connection
  opened without the right to create the file: a ledger deleted while an accountant holds
  it is an error, never a fresh budget;
* the path resolved through symbolic links to one file, and a file with more than one
  hard link refused (SQLite's journal is named after the path, so two names would be two
  journals);
* a new ledger is built under a temporary name and linked into place only if no file
  has that name (two jobs creating one ledger at once make one ledger).

Examples
--------
>>> import os, tempfile
>>> from dpframe.core.stores import SQLiteStore, new_header
>>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
>>> store = SQLiteStore.create(path, new_header(1.0, 0.0, "substitute"))
>>> store.header()["epsilon"], store.read()
(1.0, [])
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpframe.core.chain import canonical, entry_hash, header_hash, verify
from dpframe.core.records import LedgerEntry
from dpframe.errors import LedgerIntegrityError, LedgerMismatchError, LedgerUnavailableError

__all__ = ["LEDGER_FORMAT", "LEDGER_VERSION", "MemoryStore", "SQLiteStore", "new_header"]

LEDGER_FORMAT = "dpframe-ledger"
LEDGER_VERSION = 2
SQLITE_MAGIC = b"SQLite format 3\x00"

#: How long a transaction waits for another process's (seconds).
BUSY_TIMEOUT = 120.0

_SCHEMA = """
CREATE TABLE header (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    format TEXT NOT NULL CHECK (format = 'dpframe-ledger'),
    version INTEGER NOT NULL,
    creation_id TEXT NOT NULL,
    created TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon > 0 AND epsilon <= 1e300),
    delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
    neighbours TEXT NOT NULL CHECK (neighbours IN ('substitute', 'add_remove')),
    hash TEXT NOT NULL
) STRICT;
CREATE TABLE entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    release TEXT NOT NULL,
    time TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    columns TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon >= 0 AND epsilon <= 1e300),
    delta REAL NOT NULL CHECK (delta >= 0 AND delta <= 1),
    scale REAL,
    composition TEXT NOT NULL,
    note TEXT NOT NULL,
    details TEXT NOT NULL,
    hash TEXT NOT NULL
) STRICT;
CREATE TRIGGER header_is_fixed BEFORE UPDATE ON header
    BEGIN SELECT RAISE(ABORT, 'the ledger header is fixed at creation'); END;
CREATE TRIGGER header_is_kept BEFORE DELETE ON header
    BEGIN SELECT RAISE(ABORT, 'the ledger header is fixed at creation'); END;
CREATE TRIGGER entries_are_kept BEFORE DELETE ON entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER entries_are_fixed BEFORE UPDATE ON entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
"""

_HEADER_KEYS = ("format", "version", "creation_id", "created", "epsilon", "delta", "neighbours")
_ENTRY_COLUMNS = (
    "id",
    "release",
    "time",
    "mechanism",
    "columns",
    "epsilon",
    "delta",
    "scale",
    "composition",
    "note",
    "details",
)


def new_header(epsilon: float, delta: float, neighbours: str) -> dict[str, Any]:
    """The header of a new ledger: the budget, the relation and a fresh creation id."""
    return {
        "format": LEDGER_FORMAT,
        "version": LEDGER_VERSION,
        "creation_id": uuid.uuid4().hex,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "neighbours": neighbours,
    }


def _chained(head: str, new: Sequence[LedgerEntry]) -> list[LedgerEntry]:
    """``new`` with the hashes that chain them after ``head``."""
    out = []
    for e in new:
        previous, head = head, entry_hash(head, e.content())
        out.append(replace(e, previous=previous, hash=head))
    return out


class MemoryStore:
    """A ledger held in memory (an accountant without a path)."""

    where = "in memory"

    def __init__(self, header: dict[str, Any]) -> None:
        self._header = dict(header)
        self._entries: list[LedgerEntry] = []
        self._lock = threading.Lock()

    def header(self) -> dict[str, Any]:
        return dict(self._header)

    def read(self) -> list[LedgerEntry]:
        with self._lock:
            return list(self._entries)

    def append(
        self, decide: Callable[[list[LedgerEntry]], Sequence[LedgerEntry]]
    ) -> list[LedgerEntry]:
        with self._lock:
            new = list(decide(list(self._entries)))
            head = self._entries[-1].hash if self._entries else header_hash(self._header)
            chained = _chained(head, new)
            self._entries.extend(chained)
            return chained


class SQLiteStore:
    """A ledger in a SQLite database file (see the module docstring)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.where = str(path)
        self._header = header
        self._identity = _identity(path)

    # -- opening and creating ---------------------------------------------------------------

    @staticmethod
    def is_sqlite(path: Path) -> bool:
        """Whether ``path`` holds a SQLite database (by its first bytes)."""
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SQLiteStore:
        """An existing ledger, its header and every entry verified."""
        real = _resolve(path)
        con = _connect(real)
        try:
            con.execute("BEGIN")  # one snapshot: other jobs may be appending meanwhile
            header, stored_hash = _read_header(con, real)
            entries = _read_entries(con, stored_hash)
            con.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise _unavailable(real, exc) from exc
        finally:
            con.close()
        if header_hash(header) != stored_hash:
            raise LedgerIntegrityError(
                f"ledger {real}: its header (budget, relation or creation id) was edited. "
                "Restore it from a backup."
            )
        verify(header, [(e.content(), e.hash) for e in entries], str(real))
        return cls(real, header)

    @classmethod
    def create(cls, path: str | os.PathLike[str], header: dict[str, Any]) -> SQLiteStore:
        """A new ledger at ``path``; refuses if a file of that name appears meanwhile."""
        target = Path(os.path.realpath(path))
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                con.execute("PRAGMA journal_mode=WAL")
                con.executescript(_SCHEMA)
                row = (1, *(header[k] for k in _HEADER_KEYS), header_hash(header))
                con.execute(
                    f"INSERT INTO header VALUES ({', '.join('?' * len(row))})",
                    row,
                )
            finally:
                con.close()
            os.chmod(tmp, 0o600)
            try:
                os.link(tmp, target)  # atomic, and never replaces an existing file
            except FileExistsError:
                raise LedgerMismatchError(
                    f"ledger {target} was created by another process meanwhile; open it"
                ) from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)
        return cls(target, header)

    # -- reading and appending ----------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return dict(self._header)

    def read(self) -> list[LedgerEntry]:
        con = self._connection()
        try:
            con.execute("BEGIN")
            entries = self._verified(con)
            con.execute("COMMIT")
            return entries
        except sqlite3.OperationalError as exc:
            raise _unavailable(self.path, exc) from exc
        finally:
            con.close()

    def append(
        self, decide: Callable[[list[LedgerEntry]], Sequence[LedgerEntry]]
    ) -> list[LedgerEntry]:
        """One exclusive transaction: verify, ``decide(entries)``, append its result."""
        con = self._connection()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                entries = self._verified(con)
                new = list(decide(entries))
                head = entries[-1].hash if entries else header_hash(self._header)
                chained = _chained(head, new)
                con.executemany(
                    f"INSERT INTO entries ({', '.join(_ENTRY_COLUMNS)}, hash) "
                    f"VALUES ({', '.join('?' * (len(_ENTRY_COLUMNS) + 1))})",
                    [_row(e) for e in chained],
                )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            return chained
        except sqlite3.OperationalError as exc:
            raise _unavailable(self.path, exc) from exc
        finally:
            con.close()

    # -- internals ------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if _identity(self.path) != self._identity:
            raise LedgerIntegrityError(
                f"ledger {self.path} was replaced since it was opened (another file now has "
                "its name); nothing was charged. Open the ledger again, or restore it."
            )
        return _connect(self.path)

    def _verified(self, con: sqlite3.Connection) -> list[LedgerEntry]:
        header, _ = _read_header(con, self.path)
        if header != self._header:
            raise LedgerIntegrityError(
                f"ledger {self.path} is not the ledger that was opened (creation id "
                f"{header.get('creation_id')!r}, expected {self._header['creation_id']!r}): "
                "it was swapped or restored; nothing was charged."
            )
        entries = _read_entries(con, header_hash(self._header))
        verify(self._header, [(e.content(), e.hash) for e in entries], str(self.path))
        return entries


def _unavailable(path: Path, exc: sqlite3.OperationalError) -> LedgerUnavailableError:
    return LedgerUnavailableError(
        f"ledger {path} could not be used ({exc}; another job may have held it for over "
        f"{BUSY_TIMEOUT:g} s); the transaction was rolled back: nothing was charged"
    )


def _resolve(path: str | os.PathLike[str]) -> Path:
    real = Path(os.path.realpath(path))
    if not real.exists():
        raise LedgerIntegrityError(f"ledger {path} does not exist (deleted?)")
    links = real.stat().st_nlink
    if links > 1:
        raise LedgerMismatchError(
            f"ledger {real} has {links} hard links: a ledger must have one name (each name "
            "would get its own journal). Remove the other links (find -samefile)."
        )
    return real


def _identity(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise LedgerIntegrityError(
            f"ledger {path} was deleted while an accountant held it; nothing was charged. "
            "Restore it from a backup: the budget it recorded has been spent."
        ) from None
    return st.st_dev, st.st_ino


def _connect(path: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(
            f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=BUSY_TIMEOUT
        )
        con.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        raise LedgerIntegrityError(f"ledger {path} cannot be opened: {exc}") from None
    return con


def _read_header(con: sqlite3.Connection, where: Path) -> tuple[dict[str, Any], str]:
    try:
        rows = con.execute(f"SELECT {', '.join(_HEADER_KEYS)}, hash FROM header").fetchall()
    except sqlite3.DatabaseError as exc:
        raise LedgerMismatchError(f"{where} is not a dpframe ledger ({exc})") from None
    if len(rows) != 1:
        raise LedgerIntegrityError(f"ledger {where} has {len(rows)} header rows, not one")
    *values, stored = rows[0]
    return dict(zip(_HEADER_KEYS, values, strict=True)), stored


def _read_entries(con: sqlite3.Connection, start: str) -> list[LedgerEntry]:
    rows = con.execute(
        f"SELECT seq, {', '.join(_ENTRY_COLUMNS)}, hash FROM entries ORDER BY seq"
    ).fetchall()
    issued = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
    if (issued[0] if issued else 0) != len(rows):
        raise LedgerIntegrityError(
            f"ledger holds {len(rows)} entries but issued {issued[0] if issued else 0}: "
            "entries were deleted. Restore it from a backup."
        )
    out = []
    previous = start
    for i, (seq, *values, stored) in enumerate(rows, start=1):
        d = dict(zip(_ENTRY_COLUMNS, values, strict=True))
        if seq != i:
            raise LedgerIntegrityError(f"ledger entries are not contiguous at {i} (seq {seq})")
        d["columns"] = tuple(json.loads(d["columns"]))
        d["details"] = json.loads(d["details"])
        out.append(LedgerEntry(**d, previous=previous, hash=stored))
        previous = stored
    return out


def _row(e: LedgerEntry) -> tuple[Any, ...]:
    d = e.content()
    d["columns"] = canonical(list(e.columns)).decode()
    d["details"] = canonical(e.details).decode()
    return (*(d[c] for c in _ENTRY_COLUMNS), e.hash)
