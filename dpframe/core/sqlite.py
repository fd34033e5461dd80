"""The SQLite ledger (Python's own :mod:`sqlite3`): the persistent default, one file.

* a schema that holds the rules: STRICT tables, epsilon and delta finite and ``>= 0``
  (a NaN is stored as NULL and refused by ``NOT NULL``), one header row fixed at
  creation, and triggers that refuse any ``UPDATE`` or ``DELETE`` of the header or an
  entry (the ledger is append-only) and any ``UPDATE`` of a reservation;
* every change one ``BEGIN IMMEDIATE`` transaction, in WAL mode, on a fresh connection
  opened without the right to create the file: a ledger deleted while an accountant holds
  it is an error, never a fresh budget;
* the path resolved through symbolic links to one file, and a file with more than one
  hard link refused (SQLite's journal is named after the path, so two names would be two
  journals); a file that another one replaced since it was opened is refused;
* a new ledger is built under a temporary name and linked into place only if no file
  has that name (two jobs creating one ledger at once make one ledger).

Examples
--------
>>> import os, tempfile
>>> from dpframe.core.sqlite import SQLiteStore
>>> from dpframe.core.stores import new_header
>>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
>>> store = SQLiteStore.create(path, new_header(1.0, 0.0, "substitute"))
>>> store.header()["epsilon"], store.read().entries
(1.0, [])
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpframe.core.stores import BUSY_TIMEOUT, DatabaseStore, header_insert, not_a_ledger
from dpframe.errors import LedgerIntegrityError, LedgerMismatchError, LedgerUnavailableError

__all__ = ["SQLiteStore"]

SQLITE_MAGIC = b"SQLite format 3\x00"

_RESERVATIONS = """
CREATE TABLE IF NOT EXISTS reservations (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    owner TEXT NOT NULL,
    note TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon >= 0 AND epsilon <= 1e300),
    delta REAL NOT NULL CHECK (delta >= 0 AND delta <= 1),
    rho REAL CHECK (rho IS NULL OR (rho >= 0 AND rho <= 1e300)),
    losses TEXT CHECK (losses IS NULL OR length(losses) > 1)
) STRICT;
CREATE TRIGGER IF NOT EXISTS reservations_are_fixed BEFORE UPDATE ON reservations
    BEGIN SELECT RAISE(ABORT, 'a reservation is fixed: draw from it or give it back'); END;
"""

_SCHEMA = (
    """
CREATE TABLE header (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    format TEXT NOT NULL CHECK (format = 'dpframe-ledger'),
    version INTEGER NOT NULL,
    creation_id TEXT NOT NULL,
    created TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon > 0 AND epsilon <= 1e300),
    delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
    neighbours TEXT NOT NULL CHECK (neighbours IN ('substitute', 'add_remove')),
    unit TEXT CHECK (unit IS NULL OR length(unit) > 0),
    rho REAL CHECK (rho IS NULL OR (rho > 0 AND rho <= 1e300)),
    accounting TEXT CHECK (accounting IS NULL OR accounting = 'pld'),
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
    + _RESERVATIONS
)


class SQLiteStore(DatabaseStore):
    """A ledger in a SQLite database file (see the module docstring)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        super().__init__(header)
        self.path = path
        self.where = str(path)
        self._identity = _identity(path)

    @staticmethod
    def is_sqlite(path: Path) -> bool:
        """Whether ``path`` holds a SQLite database (by its first bytes)."""
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SQLiteStore:
        """An existing ledger, its header and every entry verified."""
        real = _resolve(path)
        store = cls.__new__(cls)
        DatabaseStore.__init__(store, {})
        store.path, store.where = real, str(real)
        store._identity = _identity(real)
        store._upgrade()
        with store._transaction(write=False) as con:  # one snapshot: others may append
            store.verified_open(con)
        return store

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
                con.execute(*header_insert("header", header))
            finally:
                con.close()
            os.chmod(tmp, 0o600)
            try:
                os.link(tmp, target)  # atomic, and never replaces an existing file
            except FileExistsError:
                raise LedgerMismatchError(
                    f"ledger {target} was created by another process meanwhile; open it"
                ) from None
        finally:  # a clean-up that cannot run never hides why the creation failed
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                with contextlib.suppress(OSError):
                    leftover.unlink(missing_ok=True)
        return cls(target, header)

    # -- what DatabaseStore needs ---------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        con = self._connection()
        try:
            con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc) or "no such column" in str(exc):
                raise not_a_ledger(self.where, exc) from None
            raise _unavailable(self.path, exc) from exc
        except sqlite3.DatabaseError as exc:
            raise not_a_ledger(self.where, exc) from None
        finally:
            con.close()

    def _issued(self, con: sqlite3.Connection) -> int:
        row = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
        return row[0] if row else 0

    # -- internals ------------------------------------------------------------------------------

    def _upgrade(self) -> None:
        """Add the reservations table to a ledger made before reservations existed."""
        con = self._connection()
        try:
            tables = {
                row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if not {"header", "entries"} <= tables:  # another application's database:
                raise not_a_ledger(self.where, "no dpframe header and entries tables")
            if "reservations" not in tables:  # write nothing to a file that is not ours
                con.executescript(f"BEGIN IMMEDIATE; {_RESERVATIONS} COMMIT;")
        except sqlite3.OperationalError as exc:
            raise _unavailable(self.path, exc) from exc
        except sqlite3.DatabaseError as exc:
            raise not_a_ledger(self.where, exc) from None
        finally:
            con.close()

    def _connection(self) -> sqlite3.Connection:
        if _identity(self.path) != self._identity:
            raise LedgerIntegrityError(
                f"ledger {self.path} was replaced since it was opened (another file now has "
                "its name); nothing was charged. Open the ledger again, or restore it."
            )
        return _connect(self.path)


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
