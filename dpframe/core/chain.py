"""The ledger's hash chain: each entry's hash covers the one before, back to the header.

A ledger is a header (format, version, a random creation id, the budget and the
neighbour relation, when it was made) and its entries, oldest first. The header hashes
to the chain's start; each entry hashes together with the hash before it::

    h_0 = sha256("dpframe-ledger-header" | canonical(header))
    h_i = sha256(h_(i-1) | canonical(entry_i))

so an entry edited, removed, inserted or moved changes every hash after it, and a
ledger swapped for another has another creation id. Stores keep each entry's hash beside
it (:mod:`dpframe.core.stores`); :func:`verify` recomputes them all.

The chain has no secret key: whoever can write the store can rewrite it whole, or cut
entries off its end. What anchors it is kept outside the store: released files carry
their entries with their hashes (their provenance), and each published run's manifest
the ledger's *anchor* (:func:`anchor`) -- its creation id, its count of entries and the
hash at that count. Any later state of the same ledger holds the same hash at the same
count, so :func:`anchor_problem` tells whether the ledger was since deleted, swapped,
truncated, rewritten or put back from an older copy.

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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpframe.errors import LedgerIntegrityError

__all__ = ["anchor", "anchor_problem", "canonical", "entry_hash", "header_hash", "verify"]


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


def anchor(header: Mapping[str, Any], count: int, head: str) -> dict[str, Any]:
    """The anchor of the ledger ``header`` when it held ``count`` entries, the last hashing
    to ``head`` (``""`` for none: the chain's start, the header's hash)."""
    return {
        "creation_id": header.get("creation_id"),
        "count": count,
        "head": head or header_hash(header),
    }


def anchor_problem(
    recorded: Mapping[str, Any], header: Mapping[str, Any], hashes: Sequence[str]
) -> str | None:
    """Why a ledger (``header`` and its entries' ``hashes``) is not a later state of the
    ledger ``recorded`` anchors, or ``None`` if it is.

    Examples
    --------
    >>> header = {"format": "dpframe-ledger", "creation_id": "c1", "epsilon": 1.0}
    >>> h1 = entry_hash(header_hash(header), {"id": "e1", "epsilon": 0.5, "delta": 0.0})
    >>> kept = anchor(header, 1, h1)
    >>> anchor_problem(kept, header, [h1]) is None
    True
    >>> print(anchor_problem(kept, header, []))  # doctest: +ELLIPSIS
    it was charged to entry 1 (hash ...), but the ledger holds 0 entries: entry 1 is gone ...
    """
    creation_id, count, head = (recorded.get(k) for k in ("creation_id", "count", "head"))
    if creation_id != header.get("creation_id"):
        return (
            f"it was charged to the ledger with creation id {creation_id!r}, but this ledger's "
            f"is {header.get('creation_id')!r}: the ledger was deleted and created again, or "
            "replaced by another"
        )
    if not isinstance(count, int) or isinstance(count, bool) or count < 0 or not head:
        return f"its record of the ledger is malformed (count {count!r}, head {head!r})"
    if count > len(hashes):
        one = count == len(hashes) + 1
        gone = f"entry {count}" if one else f"entries {len(hashes) + 1} to {count}"
        return (
            f"it was charged to entry {count} (hash {str(head)[:12]}...), but the ledger holds "
            f"{len(hashes)} entries: {gone} "
            f"{'is' if one else 'are'} gone (the ledger was truncated, or "
            "put back from an older copy)"
        )
    at = hashes[count - 1] if count else header_hash(header)
    if at != head:
        return (
            f"it was charged to entry {count} with hash {str(head)[:12]}..., but the ledger's "
            f"entry {count} has hash {at[:12]}...: the ledger was rewritten"
        )
    return None
