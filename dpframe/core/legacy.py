"""Ledgers of older dpframe versions: JSON files, read-only, and their migration.

Before the SQLite store a ledger was a JSON document (``format``, the budget, the
relation, ``entries``) with no hash chain. Such a file is read (every entry checked:
an object, finite non-negative amounts), never charged: :func:`migrate_json` converts it
to a SQLite ledger with the same budget, relation and entries, and verifies the result.

Examples
--------
>>> import json, os, tempfile
>>> from dpframe.core.legacy import migrate_json
>>> d = tempfile.mkdtemp()
>>> old = os.path.join(d, "ledger.json")
>>> entry = {"id": "e1", "release": "r1", "time": "2026-01-01T00:00:00+00:00",
...          "mechanism": "laplace", "columns": ["x"], "epsilon": 0.25, "delta": 0.0,
...          "scale": 4.0, "composition": "sequential", "note": ""}
>>> _ = open(old, "w").write(json.dumps({"format": "dpframe-ledger", "version": 1,
...     "epsilon": 1.0, "delta": 0.0, "neighbours": "substitute", "entries": [entry]}))
>>> store = migrate_json(old, os.path.join(d, "ledger.db"))
>>> [e.epsilon for e in store.read().entries]
[0.25]
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpframe.core.constraints import check, check_delta, check_epsilon
from dpframe.core.records import LedgerEntry
from dpframe.core.sqlite import SQLiteStore
from dpframe.core.stores import LEDGER_FORMAT, Changes, LedgerState, new_header
from dpframe.errors import (
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerMismatchError,
    LedgerReadOnlyError,
)

__all__ = ["JSONLedger", "migrate_json"]


class JSONLedger:
    """A JSON ledger of an older dpframe: read and checked, never charged."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise LedgerIntegrityError(
                f"ledger file {path} is not a dpframe ledger, or is corrupt: it is neither a "
                "SQLite database (its first bytes are not SQLite's header) nor the JSON "
                f"ledger of an older dpframe ({type(exc).__name__}: {exc}). If it is your "
                "ledger, restore it from a backup rather than deleting it: the budget it "
                "records has been spent. Otherwise check the path (a new ledger is made at "
                "a path where no file exists yet). Nothing was charged."
            ) from None
        if not isinstance(doc, dict) or doc.get("format") != LEDGER_FORMAT:
            raise LedgerMismatchError(
                f"{path} is not a dpframe ledger (no format={LEDGER_FORMAT!r})"
            )
        self._header = _header(doc, path)
        raw = doc.get("entries")
        if not isinstance(raw, list):
            raise LedgerIntegrityError(f"ledger {path}: 'entries' must be a list")
        self._entries = [_entry(e, i, path) for i, e in enumerate(raw, start=1)]

    def header(self) -> dict[str, Any]:
        return dict(self._header)

    def read(self) -> LedgerState:
        return LedgerState(list(self._entries))

    def transact(self, decide: Callable[[LedgerState], Changes]) -> Any:
        raise LedgerReadOnlyError(
            f"ledger {self.path} is a JSON ledger of an older dpframe: it can be read but "
            f"not charged. Convert it with `dpframe ledger migrate {self.path}` (entries and "
            "budget kept, verified) and open the new file instead. Nothing was charged."
        )


def _header(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    try:
        return {
            "epsilon": check_epsilon(doc["epsilon"]),
            "delta": check_delta(doc.get("delta", 0.0)),
            "neighbours": check("neighbours", doc.get("neighbours")),
        }
    except (KeyError, InvalidParameterError) as exc:
        raise LedgerIntegrityError(f"ledger {path}: bad header ({exc})") from None


def _entry(e: Any, i: int, path: Path) -> LedgerEntry:
    where = f"ledger {path}, entry {i}"
    if not isinstance(e, dict):
        raise LedgerIntegrityError(f"{where}: not an object but a {type(e).__name__}")
    for key in ("epsilon", "delta"):
        v = e.get(key)
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise LedgerIntegrityError(
                f"{where}: {key}={v!r} is not a finite number >= 0 (the file was edited); "
                "restore it from a backup"
            )
    try:
        entry = LedgerEntry.from_dict({k: v for k, v in e.items() if k != "hash"})
    except TypeError as exc:
        raise LedgerIntegrityError(f"{where}: {exc}") from None
    for key in ("id", "release", "time", "mechanism", "composition", "note"):
        if not isinstance(getattr(entry, key), str):
            raise LedgerIntegrityError(f"{where}: {key} must be a string")
    if not isinstance(entry.details, dict) or not all(isinstance(c, str) for c in entry.columns):
        raise LedgerIntegrityError(f"{where}: details must be an object, columns strings")
    return entry


def migrate_json(
    source: str | os.PathLike[str], target: str | os.PathLike[str] | None = None
) -> SQLiteStore:
    """Convert a JSON ledger into a new SQLite ledger; the JSON file is left as it is.

    Parameters
    ----------
    source : path-like
        The JSON ledger.
    target : path-like, optional
        The new ledger (must not exist); default: ``source`` with the suffix ``.db``.

    Returns
    -------
    SQLiteStore
        The new ledger, opened again and verified: same budget, relation and entries.
    """
    old = JSONLedger(Path(source))
    dest = Path(target) if target is not None else Path(source).with_suffix(".db")
    if dest.exists():
        raise InvalidParameterError(f"target: {dest} already exists; choose a new file name")
    h = old.header()
    store = SQLiteStore.create(dest, new_header(h["epsilon"], h["delta"], h["neighbours"]))
    entries = old.read().entries
    if entries:
        store.transact(lambda existing: Changes(entries))
    again = SQLiteStore.open(dest)
    if [e.content() for e in again.read().entries] != [e.content() for e in entries]:
        raise LedgerIntegrityError(f"migration of {source} to {dest} did not verify")
    return again
