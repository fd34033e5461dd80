"""The ledger's hash chain: each entry's hash covers the one before, back to the header.

A ledger is a header (format, version, a random creation id, the budget and the
neighbour relation, when it was made) and its entries, oldest first. The header hashes
to the chain's start; each entry hashes together with the hash before it::

    h_0 = sha256("dpframe-ledger-header" | canonical(header))
    h_i = sha256(h_(i-1) | canonical(entry_i))

so an entry edited, removed, inserted or moved changes every hash after it, and a
ledger swapped for another has another creation id. Stores keep each entry's hash beside
it (:mod:`dpframe.core.stores`); :func:`verify` recomputes them all. Released files
carry the head hash of the ledger they were charged to (their provenance), which anchors
the chain: rewriting the whole chain (possible for whoever can write the store: it has
no secret key) no longer matches the files published from it.

Examples
--------
>>> header = {"format": "dpframe-ledger", "creation_id": "c1", "epsilon": 1.0}
>>> start = header_hash(header)
>>> entry = {"id": "e1", "epsilon": 0.5, "delta": 0.0}
>>> h1 = entry_hash(start, entry)
>>> verify(header, [(entry, h1)], "example") == h1
True
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from dpframe.errors import LedgerIntegrityError

__all__ = ["canonical", "entry_hash", "header_hash", "verify"]


def canonical(obj: Any) -> bytes:
    """The one byte string a JSON-ready value hashes as (sorted keys, no spaces, no NaN)."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def header_hash(header: Mapping[str, Any]) -> str:
    """Where the chain starts: the hash of the ledger's header."""
    return hashlib.sha256(b"dpframe-ledger-header\0" + canonical(dict(header))).hexdigest()


def entry_hash(previous: str, entry: Mapping[str, Any]) -> str:
    """The hash of ``entry`` chained to the hash before it."""
    return hashlib.sha256(previous.encode("ascii") + b"\0" + canonical(dict(entry))).hexdigest()


def verify(
    header: Mapping[str, Any], entries: Iterable[tuple[Mapping[str, Any], str]], where: str
) -> str:
    """Recompute the chain of ``(entry, stored hash)`` pairs; return the head hash.

    Raises
    ------
    LedgerIntegrityError
        At the first entry whose stored hash differs (an edit, removal, insertion or
        move at or before it), or whose amounts are not finite and non-negative.
    """
    head = header_hash(header)
    for i, (entry, stored) in enumerate(entries, start=1):
        for key in ("epsilon", "delta"):
            value = entry.get(key)
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                raise LedgerIntegrityError(
                    f"ledger {where}: entry {i} has {key}={value!r}, not a finite number >= 0: "
                    "the ledger was edited. Restore it from a backup; nothing is charged "
                    "against it until it verifies."
                )
        head = entry_hash(head, entry)
        if head != stored:
            raise LedgerIntegrityError(
                f"ledger {where}: entry {i} (id {entry.get('id')!r}) does not match its hash: "
                "an entry at or before it was edited, removed, inserted or moved. Restore "
                "the ledger from a backup; nothing is charged against it until it verifies."
            )
    return head
