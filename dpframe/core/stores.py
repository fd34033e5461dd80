"""Where a ledger lives: what every store offers, the in-memory store, and the SQL both
databases share.

A store keeps a ledger's header, its entries (each with the hash that chains it to the
one before, :mod:`dpframe.core.chain`) and its open reservations, and offers one
operation that changes them, :meth:`transact`: in one exclusive transaction it reads and
verifies everything, lets the accountant decide what to change (or refuse, changing
nothing) and applies the :class:`Changes` -- entries appended with their hashes,
reservations opened, reservations given back. Nothing else writes a ledger.

The persistent stores are :class:`dpframe.core.sqlite.SQLiteStore` (the default, one
file) and :class:`dpframe.core.postgres.PostgresStore` (jobs on many hosts); both are a
:class:`DatabaseStore`: the same tables, checks and verification, each with its own
connection, locking and schema.

Examples
--------
>>> from dpframe.core.stores import MemoryStore, new_header
>>> store = MemoryStore(new_header(1.0, 0.0, "substitute"))
>>> store.header()["epsilon"], store.read().entries
(1.0, [])
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from dpframe.core.chain import canonical, entry_hash, header_hash, verify
from dpframe.core.records import LedgerEntry, Reservation
from dpframe.errors import LedgerIntegrityError, LedgerMismatchError

__all__ = [
    "LEDGER_FORMAT",
    "LEDGER_VERSION",
    "Changes",
    "DatabaseStore",
    "LedgerState",
    "LedgerStore",
    "MemoryStore",
    "new_header",
]

LEDGER_FORMAT = "dpframe-ledger"
LEDGER_VERSION = 2

#: How long a transaction waits for another process's (seconds).
BUSY_TIMEOUT = 120.0

HEADER_KEYS = ("format", "version", "creation_id", "created", "epsilon", "delta", "neighbours")
#: Header keys a ledger has only when they differ from the default (stored as NULL
#: otherwise, and absent from older ledgers): ``unit``, the person column of a
#: person-level ledger (absent: one row is one person); ``rho``, a zCDP budget (absent:
#: an (epsilon, delta) budget); ``accounting``, ``"pld"`` for a budget composed by
#: privacy-loss distributions (absent: epsilons and deltas add).
OPTIONAL_HEADER_KEYS = ("unit", "rho", "accounting")
ENTRY_COLUMNS = (
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
RESERVATION_COLUMNS = ("id", "created", "owner", "note", "epsilon", "delta")
#: a column of the reservations of ledgers made since zCDP budgets exist (NULL otherwise)
RESERVATION_RHO = "rho"
#: a column of the reservations of ledgers made since tight composition exists: the JSON
#: list of a reservation's privacy-loss descriptions (NULL on other ledgers)
RESERVATION_LOSSES = "losses"


@dataclass(frozen=True)
class LedgerState:
    """A ledger's entries and open reservations, read in one snapshot and verified."""

    entries: list[LedgerEntry]
    reservations: list[Reservation] = field(default_factory=list)


@dataclass(frozen=True)
class Changes:
    """What one transaction does: append ``entries``, open ``reserve``, close ``give_back``."""

    entries: Sequence[LedgerEntry] = ()
    reserve: Sequence[Reservation] = ()
    give_back: Sequence[str] = ()


class LedgerStore(Protocol):
    """What the accountant needs of a store."""

    where: str

    def header(self) -> dict[str, Any]: ...

    def read(self) -> LedgerState: ...

    def transact(self, decide: Callable[[LedgerState], Changes]) -> list[LedgerEntry]: ...


def new_header(
    epsilon: float,
    delta: float,
    neighbours: str,
    *,
    unit: str | None = None,
    rho: float | None = None,
    accounting: str | None = None,
) -> dict[str, Any]:
    """The header of a new ledger: the budget, the relation, the privacy unit (a person
    column, or ``None``), a zCDP budget ``rho`` (or ``None``), ``accounting="pld"`` for
    tight composition (or ``None``) and a fresh creation id."""
    header = {
        "format": LEDGER_FORMAT,
        "version": LEDGER_VERSION,
        "creation_id": uuid.uuid4().hex,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "neighbours": neighbours,
    }
    if unit is not None:
        header["unit"] = unit
    if rho is not None:
        header["rho"] = float(rho)
    if accounting is not None:
        header["accounting"] = accounting
    return header


def chained(head: str, new: Sequence[LedgerEntry]) -> list[LedgerEntry]:
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
        self._reservations: dict[str, Reservation] = {}
        self._lock = threading.Lock()

    def header(self) -> dict[str, Any]:
        return dict(self._header)

    def read(self) -> LedgerState:
        with self._lock:
            return LedgerState(list(self._entries), list(self._reservations.values()))

    def transact(self, decide: Callable[[LedgerState], Changes]) -> list[LedgerEntry]:
        with self._lock:
            changes = decide(LedgerState(list(self._entries), list(self._reservations.values())))
            head = self._entries[-1].hash if self._entries else header_hash(self._header)
            new = chained(head, changes.entries)
            self._entries.extend(new)
            for r in changes.reserve:
                self._reservations[r.id] = r
            for rid in changes.give_back:
                self._reservations.pop(rid, None)
            return new


class DatabaseStore:
    """The SQL a ledger database runs, whatever the database (see the module docstring).

    A subclass names its tables, its parameter marker and how it connects, begins a
    transaction, and counts the entries it ever issued (so a deleted entry is seen).
    """

    where: str
    #: table names
    HEADER = "header"
    ENTRIES = "entries"
    RESERVATIONS = "reservations"

    def __init__(self, header: dict[str, Any]) -> None:
        self._header = header

    # -- what a database supplies -----------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[Any]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def _issued(self, con: Any) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _record_issued(self, con: Any, total: int) -> None:
        """Count the entries issued so far (a database that does not count them itself)."""

    def _sql(self, text: str) -> str:
        """``text`` with ``?`` parameter markers in the database's own style."""
        return text

    # -- the shared part ------------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return dict(self._header)

    def read(self) -> LedgerState:
        with self._transaction(write=False) as con:
            return self._verified(con)

    def transact(self, decide: Callable[[LedgerState], Changes]) -> list[LedgerEntry]:
        """One exclusive transaction: verify, ``decide(state)``, apply its changes."""
        with self._transaction(write=True) as con:
            state = self._verified(con)
            changes = decide(state)
            head = state.entries[-1].hash if state.entries else header_hash(self._header)
            new = chained(head, changes.entries)
            if new:
                n = len(state.entries)
                columns = ("seq", *ENTRY_COLUMNS, "hash")
                con.cursor().executemany(
                    self._sql(
                        f"INSERT INTO {self.ENTRIES} ({', '.join(columns)}) "
                        f"VALUES ({', '.join('?' * len(columns))})"
                    ),
                    [(n + i, *entry_row(e)) for i, e in enumerate(new, start=1)],
                )
                self._record_issued(con, n + len(new))
            for r in changes.reserve:
                row = reservation_row(r)
                columns = [*RESERVATION_COLUMNS, RESERVATION_RHO, RESERVATION_LOSSES][: len(row)]
                con.execute(
                    self._sql(
                        f"INSERT INTO {self.RESERVATIONS} ({', '.join(columns)}) "
                        f"VALUES ({', '.join('?' * len(row))})"
                    ),
                    row,
                )
            for rid in changes.give_back:
                con.execute(self._sql(f"DELETE FROM {self.RESERVATIONS} WHERE id = ?"), (rid,))
            return new

    def read_header(self, con: Any) -> tuple[dict[str, Any], str]:
        """The stored header and its stored hash."""
        cur = con.execute(f"SELECT * FROM {self.HEADER}")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        if len(rows) != 1:
            raise LedgerIntegrityError(f"ledger {self.where} has {len(rows)} header rows, not one")
        row = dict(zip(names, rows[0], strict=True))
        header = {k: row[k] for k in HEADER_KEYS}
        header.update(
            {k: row[k] for k in OPTIONAL_HEADER_KEYS if row.get(k) is not None}  # NULL: absent
        )
        return header, row["hash"]

    def read_state(self, con: Any, start: str) -> LedgerState:
        """Every entry (checked contiguous, none deleted) and every open reservation."""
        rows = con.execute(
            f"SELECT seq, {', '.join(ENTRY_COLUMNS)}, hash FROM {self.ENTRIES} ORDER BY seq"
        ).fetchall()
        issued = self._issued(con)
        if issued != len(rows):
            raise LedgerIntegrityError(
                f"ledger {self.where} holds {len(rows)} entries but issued {issued}: "
                "entries were deleted. Restore it from a backup."
            )
        entries = []
        previous = start
        for i, (seq, *values, stored) in enumerate(rows, start=1):
            d = dict(zip(ENTRY_COLUMNS, values, strict=True))
            if seq != i:
                raise LedgerIntegrityError(
                    f"ledger {self.where}: entries are not contiguous at {i} (seq {seq})"
                )
            d["columns"] = tuple(json.loads(d["columns"]))
            d["details"] = json.loads(d["details"])
            entries.append(LedgerEntry(**d, previous=previous, hash=stored))
            previous = stored
        cur = con.execute(f"SELECT * FROM {self.RESERVATIONS} ORDER BY created, id")
        names = [c[0] for c in cur.description]
        reservations = []
        for row in cur.fetchall():
            stored = dict(zip(names, row, strict=True))
            d = {c: stored[c] for c in RESERVATION_COLUMNS}
            d["rho"] = stored.get(RESERVATION_RHO)
            losses = stored.get(RESERVATION_LOSSES)
            d["losses"] = None if losses is None else tuple(json.loads(losses))
            try:
                owner = json.loads(d["owner"])
                if not isinstance(owner, dict):
                    raise TypeError
            except (TypeError, ValueError):  # a row written by hand: held, never judged
                owner = {"unreadable": str(d["owner"])[:80]}
            d["owner"] = owner
            for key in ("id", "created", "note"):
                d[key] = str(d[key])
            reservations.append(Reservation(**d))
        return LedgerState(entries, reservations)

    def verified_open(self, con: Any) -> LedgerState:
        """Read and verify a ledger being opened: its header against its own hash."""
        header, stored_hash = self.read_header(con)
        if header_hash(header) != stored_hash:
            raise LedgerIntegrityError(
                f"ledger {self.where}: its header (budget, relation or creation id) was "
                "edited. Restore it from a backup."
            )
        self._header = header
        state = self.read_state(con, stored_hash)
        verify(header, [(e.content(), e.hash) for e in state.entries], self.where)
        return state

    def _verified(self, con: Any) -> LedgerState:
        header, _ = self.read_header(con)
        if header != self._header:
            raise LedgerIntegrityError(
                f"ledger {self.where} is not the ledger that was opened (creation id "
                f"{header.get('creation_id')!r}, expected {self._header['creation_id']!r}): "
                "it was swapped or restored; nothing was charged."
            )
        state = self.read_state(con, header_hash(self._header))
        verify(self._header, [(e.content(), e.hash) for e in state.entries], self.where)
        return state


def header_insert(table: str, header: dict[str, Any], marker: str = "?") -> tuple[str, tuple]:
    """The SQL statement and row that store ``header`` (with its hash) in ``table``."""
    columns = ("singleton", *HEADER_KEYS, *OPTIONAL_HEADER_KEYS, "hash")
    row = (
        1,
        *(header[k] for k in HEADER_KEYS),
        *(header.get(k) for k in OPTIONAL_HEADER_KEYS),
        header_hash(header),
    )
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([marker] * len(row))})"
    return sql, row


def entry_row(e: LedgerEntry) -> tuple[Any, ...]:
    """An entry as a table row (after ``seq``): its content, then its hash."""
    d = e.content()
    d["columns"] = canonical(list(e.columns)).decode()
    d["details"] = canonical(e.details).decode()
    return (*(d[c] for c in ENTRY_COLUMNS), e.hash)


def reservation_row(r: Reservation) -> tuple[Any, ...]:
    """A reservation as a row of :data:`RESERVATION_COLUMNS` (and ``rho``, if it holds one)."""
    d = r.to_dict()
    d["owner"] = canonical(r.owner).decode()
    row = tuple(d[c] for c in RESERVATION_COLUMNS)
    if r.losses is not None:
        return (*row, None if r.rho is None else float(r.rho), canonical(list(r.losses)).decode())
    return row if r.rho is None else (*row, float(r.rho))


def not_a_ledger(where: str, exc: Exception | str) -> LedgerMismatchError:
    return LedgerMismatchError(f"{where} is not a dpframe ledger ({exc})")
