"""The PostgreSQL ledger (psycopg 3, ``pip install 'dpframe[postgres]'``): one budget
shared by jobs on many hosts.

A ledger is named by a URL, ``postgresql://user@host:port/database``, optionally with
``?schema=name`` (default ``public``); it lives in four tables of that schema
(``dpframe_header``, ``dpframe_entries``, ``dpframe_issued``, ``dpframe_reservations``),
so one database can hold one ledger per schema. Every transaction pins the schema and
the session settings the ledger depends on (``search_path``, ``extra_float_digits``):
one URL names one ledger whichever role connects, and amounts read back exactly as they
were written. A password in the URL (``user:password@`` or ``?password=``) never
appears in a message. The same rules as the SQLite store, held by the server:

* constraints: epsilon and delta finite and ``>= 0`` (NaN and infinity fail the
  ``<= 1e300`` check), one header row fixed at creation;
* triggers refuse ``UPDATE``, ``DELETE`` and ``TRUNCATE`` of the header and the entries,
  ``UPDATE`` of a reservation, and any decrease of the count of issued entries (which is
  how a deleted entry is seen while the triggers are in place); the count is kept by the
  server (``entries_are_counted``, a ``SECURITY DEFINER`` trigger that also refuses an
  entry that is not the next one), so a job's role needs no right to change it;
* every change is one transaction that first locks the reservations table
  (``LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE``, which a role that may give back a
  reservation can take):
  charges are serialised across hosts, reads are not blocked; every read is one
  ``REPEATABLE READ`` snapshot;
* an accountant checks at every transaction that the header (creation id) is the one it
  opened, so a dropped and re-created ledger is refused; a missing table is a deleted
  ledger, never a fresh budget.

Give jobs a role that may only read and append (``GRANT SELECT, INSERT ON dpframe_entries
...``, see docs/ledger.md): the owner of the tables can drop them, as the owner of a
SQLite file can delete it.
"""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

from dpframe.core.stores import BUSY_TIMEOUT, DatabaseStore, header_insert
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerUnavailableError,
)

__all__ = ["PostgresStore", "is_postgres_url"]

_SCHEMES = ("postgresql://", "postgres://")

_SCHEMA = """
CREATE TABLE dpframe_header (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    format TEXT NOT NULL CHECK (format = 'dpframe-ledger'),
    version INTEGER NOT NULL,
    creation_id TEXT NOT NULL,
    created TEXT NOT NULL,
    epsilon DOUBLE PRECISION NOT NULL CHECK (epsilon > 0 AND epsilon <= 1e300),
    delta DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta < 1),
    neighbours TEXT NOT NULL CHECK (neighbours IN ('substitute', 'add_remove')),
    unit TEXT CHECK (unit IS NULL OR length(unit) > 0),
    rho DOUBLE PRECISION CHECK (rho IS NULL OR (rho > 0 AND rho <= 1e300)),
    accounting TEXT CHECK (accounting IS NULL OR accounting = 'pld'),
    hash TEXT NOT NULL
);
CREATE TABLE dpframe_entries (
    seq BIGINT PRIMARY KEY CHECK (seq >= 1),
    id TEXT NOT NULL UNIQUE,
    release TEXT NOT NULL,
    time TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    columns TEXT NOT NULL,
    epsilon DOUBLE PRECISION NOT NULL CHECK (epsilon >= 0 AND epsilon <= 1e300),
    delta DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta <= 1),
    scale DOUBLE PRECISION,
    composition TEXT NOT NULL,
    note TEXT NOT NULL,
    details TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE dpframe_issued (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    issued BIGINT NOT NULL CHECK (issued >= 0)
);
CREATE TABLE dpframe_reservations (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    owner TEXT NOT NULL,
    note TEXT NOT NULL,
    epsilon DOUBLE PRECISION NOT NULL CHECK (epsilon >= 0 AND epsilon <= 1e300),
    delta DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta <= 1),
    rho DOUBLE PRECISION CHECK (rho IS NULL OR (rho >= 0 AND rho <= 1e300)),
    losses TEXT CHECK (losses IS NULL OR length(losses) > 1)
);
CREATE OR REPLACE FUNCTION dpframe_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$;
CREATE OR REPLACE FUNCTION dpframe_issued_grows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.issued < OLD.issued THEN
        RAISE EXCEPTION 'the count of issued ledger entries never decreases';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER header_is_fixed BEFORE UPDATE OR DELETE ON dpframe_header
    FOR EACH ROW EXECUTE FUNCTION dpframe_refuse('the ledger header is fixed at creation');
CREATE TRIGGER header_is_kept BEFORE TRUNCATE ON dpframe_header
    FOR EACH STATEMENT EXECUTE FUNCTION dpframe_refuse('the ledger header is fixed at creation');
CREATE TRIGGER entries_are_fixed BEFORE UPDATE OR DELETE ON dpframe_entries
    FOR EACH ROW EXECUTE FUNCTION dpframe_refuse('ledger entries are append-only');
CREATE TRIGGER entries_are_kept BEFORE TRUNCATE ON dpframe_entries
    FOR EACH STATEMENT EXECUTE FUNCTION dpframe_refuse('ledger entries are append-only');
CREATE TRIGGER issued_grows BEFORE UPDATE ON dpframe_issued
    FOR EACH ROW EXECUTE FUNCTION dpframe_issued_grows();
CREATE TRIGGER issued_is_kept BEFORE DELETE ON dpframe_issued
    FOR EACH ROW EXECUTE FUNCTION dpframe_refuse('the count of issued entries is kept');
CREATE TRIGGER issued_is_not_truncated BEFORE TRUNCATE ON dpframe_issued
    FOR EACH STATEMENT EXECUTE FUNCTION dpframe_refuse('the count of issued entries is kept');
CREATE TRIGGER reservations_are_fixed BEFORE UPDATE ON dpframe_reservations
    FOR EACH ROW EXECUTE FUNCTION
    dpframe_refuse('a reservation is fixed: draw from it or give it back');
"""

#: the server counts the entries itself, as the tables' owner (a job's role needs no
#: right to change the count); added to a ledger of an older version by its owner. Its
#: tables are named with their schema, and its path ends in ``pg_temp``: a job's role
#: cannot make it count in a temporary table of its own
_COUNTED = """
CREATE OR REPLACE FUNCTION dpframe_count_issued() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = "{schema}", pg_temp AS $$
BEGIN
    IF NEW.seq <> (SELECT issued FROM "{schema}".dpframe_issued) + 1 THEN
        RAISE EXCEPTION 'ledger entry % is not the next one', NEW.seq;
    END IF;
    UPDATE "{schema}".dpframe_issued SET issued = NEW.seq;
    RETURN NEW;
END $$;
CREATE TRIGGER entries_are_counted BEFORE INSERT ON dpframe_entries
    FOR EACH ROW EXECUTE FUNCTION dpframe_count_issued();
"""

#: an advisory lock key ("dpframe" in ASCII) that serialises creating a ledger
_CREATE_LOCK = 0x6470667261_6D65


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL ledger (a ``postgresql://`` URL)."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise DPFrameError(
            "a PostgreSQL ledger needs psycopg 3: pip install 'dpframe[postgres]'"
        ) from None
    return psycopg


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _query(url: str) -> list[tuple[str, str]]:
    return urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)


def _secrets(url: str) -> list[str]:
    """Every form in which ``url``'s password could be echoed back."""
    found = []
    netloc = urllib.parse.urlsplit(url).netloc
    if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
        found.append(netloc.rsplit("@", 1)[0].split(":", 1)[1])
    raw_query = urllib.parse.urlsplit(url).query
    for part in raw_query.split("&"):
        key, _, value = part.partition("=")
        if key.lower() == "password":
            found.append(value)
    found += [urllib.parse.unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def redact(url: str) -> str:
    """``url`` without its password (for messages and the ledger's ``where``)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    query = "&".join(
        "password=***" if part.partition("=")[0].lower() == "password" else part
        for part in parts.query.split("&")
        if part
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, url: str) -> str:
    """``text`` (e.g. a driver's error) with every form of ``url``'s password masked."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def _split_schema(url: str) -> tuple[str, str]:
    """The URL libpq is given (without ``schema=``) and the ledger's schema."""
    parts = urllib.parse.urlsplit(url)
    kept = [p for p in parts.query.split("&") if p and p.partition("=")[0] != "schema"]
    schemas = [v for k, v in _query(url) if k == "schema"]
    schema = schemas[-1] if schemas else "public"
    if not _IDENTIFIER.fullmatch(schema):
        raise InvalidParameterError(
            f"schema: {schema!r} is not a plain PostgreSQL name (letters, digits, _; at most "
            "63, not starting with a digit); name the ledger's schema ?schema=name"
        )
    libpq = urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path, "&".join(kept), parts.fragment)
    )
    return libpq, schema


class PostgresStore(DatabaseStore):
    """A ledger in a PostgreSQL database (see the module docstring)."""

    HEADER = "dpframe_header"
    ENTRIES = "dpframe_entries"
    RESERVATIONS = "dpframe_reservations"

    path = None

    def __init__(self, url: str, header: dict[str, Any]) -> None:
        super().__init__(header)
        self.url = url
        self.where = redact(url)
        self._libpq, self.schema = _split_schema(url)

    @classmethod
    def exists(cls, url: str) -> bool:
        """Whether the database at ``url`` holds a ledger (reads only)."""
        with cls(url, {})._transaction(write=False) as con:
            return con.execute("SELECT to_regclass('dpframe_header')").fetchone()[0] is not None

    @classmethod
    def open(cls, url: str, header_if_new: dict[str, Any] | None = None) -> PostgresStore:
        """The ledger at ``url``, verified; created with ``header_if_new`` if it has none."""
        store = cls(url, {})
        with store._transaction(write=True, created=False) as con:
            con.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
            exists = con.execute("SELECT to_regclass('dpframe_header')").fetchone()[0]
            if exists is None:
                known = con.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (store.schema,)
                ).fetchone()
                if known is None:
                    raise InvalidParameterError(
                        f"ledger {store.where}: schema {store.schema!r} does not exist; "
                        f"create it first (CREATE SCHEMA {store.schema})"
                    )
                if header_if_new is None:
                    raise LedgerIntegrityError(
                        f"no dpframe ledger in {store.where} (deleted?); to create one, "
                        "open it with epsilon=..."
                    )
                con.execute(_SCHEMA)
                con.execute(_COUNTED.format(schema=store.schema))
                con.execute(*header_insert("dpframe_header", header_if_new, "%s"))
                con.execute("INSERT INTO dpframe_issued VALUES (1, 0)")
            elif not _counted(con) and _owns(con):  # a ledger of an older version
                con.execute(_COUNTED.format(schema=store.schema))
        with store._transaction(write=False) as con:
            store.verified_open(con)
        return store

    # -- what DatabaseStore needs ---------------------------------------------------------------

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s")

    @contextlib.contextmanager
    def _transaction(self, write: bool, created: bool = True) -> Iterator[Any]:
        psycopg = _psycopg()
        try:
            con = psycopg.connect(self._libpq, autocommit=True, connect_timeout=30)
        except psycopg.Error as exc:
            raise LedgerUnavailableError(
                f"ledger {self.where} could not be reached ({scrub(str(exc), self.url)}); "
                "nothing was charged"
            ) from None
        try:
            with con.transaction():
                if not write:
                    con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                # the ledger is where the URL says and reads back exactly, whatever the
                # role's or the database's settings
                con.execute(f'SET LOCAL search_path TO "{self.schema}"')
                con.execute("SET LOCAL extra_float_digits = 3")
                if write:
                    con.execute(f"SET LOCAL lock_timeout = '{int(BUSY_TIMEOUT)}s'")
                    if created:  # every change waits for the one before: one at a time
                        # (a lock a job's role can take: it may delete reservations, to give
                        # them back; reads are not blocked)
                        con.execute("LOCK TABLE dpframe_reservations IN SHARE ROW EXCLUSIVE MODE")
                yield con
        except psycopg.errors.UndefinedTable as exc:
            raise LedgerIntegrityError(
                f"ledger {self.where} has lost its tables ({exc.diag.message_primary}): it was "
                "deleted while in use; nothing was charged. Restore it from a backup: the "
                "budget it recorded has been spent."
            ) from None
        except psycopg.errors.InvalidParameterValue as exc:
            raise InvalidParameterError(
                f"ledger {self.where}: {scrub(str(exc), self.url)}"
            ) from None
        except psycopg.Error as exc:
            raise LedgerUnavailableError(
                f"ledger {self.where} could not be used ({scrub(str(exc), self.url)}); the "
                "transaction was rolled back: nothing was charged"
            ) from None
        finally:
            con.close()

    def _issued(self, con: Any) -> int:
        rows = con.execute("SELECT issued FROM dpframe_issued").fetchall()
        if len(rows) != 1:
            raise LedgerIntegrityError(f"ledger {self.where}: its count of entries is gone")
        return int(rows[0][0])

    def _record_issued(self, con: Any, total: int) -> None:
        """Count the entries, on a ledger made before the server counted them itself
        (``entries_are_counted``, run as the tables' owner: a job needs no right to
        change the count) and not opened by its owner since."""
        if not _counted(con):
            con.execute("UPDATE dpframe_issued SET issued = %s", (total,))


def _counted(con: Any) -> bool:
    """Whether the server counts the ledger's entries itself (``entries_are_counted``)."""
    row = con.execute(
        "SELECT 1 FROM pg_trigger WHERE tgrelid = 'dpframe_entries'::regclass "
        "AND tgname = 'entries_are_counted'"
    ).fetchone()
    return row is not None


def _owns(con: Any) -> bool:
    """Whether the connected role owns the ledger's tables (may add a trigger)."""
    row = con.execute(
        "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class "
        "WHERE oid = 'dpframe_entries'::regclass"
    ).fetchone()
    return bool(row and row[0])
