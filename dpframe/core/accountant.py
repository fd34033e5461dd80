"""The privacy accountant: a budget, sequential composition, and a ledger of releases.

An :class:`Accountant` holds a total budget ``(epsilon, delta)`` for one neighbour
relation and composes releases sequentially (basic composition: epsilons add, deltas
add). Every charge is checked and recorded atomically, *before* the caller draws noise.
Its ledger lives in a store (:mod:`dpframe.core.stores`): in memory, or in a SQLite
database (:meth:`Accountant.open`) whose entries form a hash chain
(:mod:`dpframe.core.chain`), verified at every read.

Budget arithmetic is exact: each epsilon/delta is read as the decimal number it prints
as (``0.1`` is one tenth) and summed with :class:`fractions.Fraction`, so ``0.1 + 0.2 +
0.7`` fits a budget of ``1.0`` and nothing overspends by a rounding error. (The
mechanisms round epsilon *down* to a dyadic rational before use, so the privacy loss
they incur never exceeds the decimal amount charged.)
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.core.budget import exact
from dpframe.core.constraints import NEIGHBOURS, check_choice, check_delta, check_epsilon
from dpframe.core.legacy import JSONLedger
from dpframe.core.records import Budget, Charge, LedgerEntry
from dpframe.core.stores import MemoryStore, SQLiteStore, new_header
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerMismatchError,
)

__all__ = ["Accountant", "Budget", "Charge", "LedgerEntry", "current_accountant"]

_ACTIVE: contextvars.ContextVar[tuple[Accountant, ...]] = contextvars.ContextVar(
    "dpframe_active_accountants", default=()
)


def current_accountant() -> Accountant | None:
    """The accountant of the innermost ``with accountant:`` block, or ``None``."""
    stack = _ACTIVE.get()
    return stack[-1] if stack else None


class Accountant:
    """A privacy budget with sequential composition and a ledger of releases.

    Parameters
    ----------
    epsilon : float
        Total epsilon budget (> 0).
    delta : float, default 0.0
        Total delta budget, in [0, 1).
    neighbours : {"substitute", "add_remove"}, default "substitute"
        The neighbouring-dataset relation every release is calibrated for:
        ``"substitute"`` (same size, one record changed; bounded DP) or
        ``"add_remove"`` (one record added or removed; unbounded DP).

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> entry = acct.spend(0.6, mechanism="laplace", columns=["income"])
    >>> acct.remaining.epsilon
    0.4
    """

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbours: str = "substitute",
        *,
        _store: Any = None,
    ) -> None:
        self._epsilon = check_epsilon(epsilon)
        self._delta = check_delta(delta)
        self._neighbours = check_choice("neighbours", neighbours, NEIGHBOURS)
        self._lock = threading.RLock()
        if _store is None:
            _store = MemoryStore(new_header(self._epsilon, self._delta, self._neighbours))
        self._store: MemoryStore | SQLiteStore | JSONLedger = _store
        self._path: Path | None = getattr(_store, "path", None)
        #: how many entries this accountant has seen, and the last one's hash: a store
        #: that later shows fewer, or another entry there, went back in time
        self._seen: tuple[int, str] = (0, "")

    # -- construction -----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        epsilon: float | None = None,
        delta: float | None = None,
        neighbours: str | None = None,
    ) -> Accountant:
        """Open (or create) a persistent accountant whose ledger is a SQLite database.

        Every charge is one exclusive transaction that re-reads and verifies the whole
        ledger (its hash chain), checks the budget and appends, so several processes
        sharing one ledger can never overspend together. A symbolic link is followed to
        its file; a file with several hard links, a ledger that was edited, truncated,
        deleted or replaced is refused (:class:`~dpframe.errors.LedgerIntegrityError`).
        A JSON ledger of an older dpframe opens read-only (``dpframe ledger migrate``).

        Parameters
        ----------
        path : path-like
            The ledger file. Created if missing (its folder must exist).
        epsilon, delta, neighbours
            The budget and relation. For a new ledger ``epsilon`` is required
            (``delta`` defaults to 0, ``neighbours`` to ``"substitute"``); for an
            existing one, ``None`` takes the ledger's value and anything else must match.

        Examples
        --------
        >>> import dpframe, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
        >>> acct = dpframe.Accountant.open(path, epsilon=2.0)
        >>> _ = acct.spend(0.5, mechanism="laplace")
        >>> dpframe.Accountant.open(path).spent.epsilon
        0.5
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidParameterError(
                f"path must be a file path (str or os.PathLike), got {type(path).__name__}"
            )
        p = Path(path)
        if not p.parent.exists():
            raise InvalidParameterError(
                f"path: folder {p.parent} does not exist; create it before opening the ledger"
            )
        if p.is_dir():
            raise InvalidParameterError(f"path: {p} is a folder; give the ledger's file path")
        if not p.exists():
            if epsilon is None:
                raise InvalidParameterError(
                    f"epsilon: ledger {p} does not exist yet, so its total budget is "
                    "needed; pass epsilon=..."
                )
            if p.suffix.lower() == ".json":
                raise InvalidParameterError(
                    f"path: new ledgers are SQLite databases; name it {p.with_suffix('.db')} "
                    "(a .json name is kept for the JSON ledgers of older versions)"
                )
            acct = cls(epsilon, 0.0 if delta is None else delta, neighbours or "substitute")
            try:
                store = SQLiteStore.create(p, acct._store.header())
            except LedgerMismatchError:  # another process created it meanwhile
                store = SQLiteStore.open(p)
        elif SQLiteStore.is_sqlite(p):
            store = SQLiteStore.open(p)
        else:
            store = JSONLedger(Path(os.path.realpath(p)))
        return cls._with_store(store, epsilon, delta, neighbours)

    @classmethod
    def _with_store(
        cls, store: Any, epsilon: float | None, delta: float | None, neighbours: str | None
    ) -> Accountant:
        header = store.header()
        asked = {"epsilon": epsilon, "delta": delta, "neighbours": neighbours}
        for key, value in asked.items():
            if value is not None and value != header[key]:
                raise LedgerMismatchError(
                    f"ledger {store.where} was created with {key}={header[key]!r}, but opened "
                    f"with {key}={value!r}; open it with the same {key} (or {key}=None to take "
                    "the ledger's), or start a new ledger file"
                )
        acct = cls(header["epsilon"], header["delta"], header["neighbours"], _store=store)
        acct._entries()  # verified now, and remembered: it may never go back
        return acct

    def _header(self) -> dict[str, Any]:
        return {
            "epsilon": self._epsilon,
            "delta": self._delta,
            "neighbours": self._neighbours,
        }

    # -- read-only state --------------------------------------------------------------

    @property
    def epsilon(self) -> float:
        """Total epsilon budget."""
        return self._epsilon

    @property
    def delta(self) -> float:
        """Total delta budget."""
        return self._delta

    @property
    def neighbours(self) -> str:
        """The neighbour relation: ``"substitute"`` or ``"add_remove"``."""
        return self._neighbours

    @property
    def path(self) -> Path | None:
        """The ledger file of a persistent accountant, else ``None``."""
        return self._path

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every release charged so far, oldest first."""
        return tuple(self._entries())

    @property
    def spent(self) -> Budget:
        """Budget spent so far (re-read from the file for a persistent accountant)."""
        eps, delta = _totals(self._entries())
        return Budget(float(eps), float(delta))

    @property
    def remaining(self) -> Budget:
        """Budget left: total minus spent."""
        eps, delta = _totals(self._entries())
        return Budget(
            float(exact(self._epsilon) - eps),
            float(exact(self._delta) - delta),
        )

    # -- spending ---------------------------------------------------------------------

    def spend(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        mechanism: str,
        columns: Sequence[str] | str = (),
        scale: float | None = None,
        composition: str = "sequential",
        note: str = "",
        details: dict[str, Any] | None = None,
    ) -> LedgerEntry:
        """Charge one release, or raise :class:`BudgetExceededError` charging nothing.

        Call this *before* drawing the release's noise.

        Returns
        -------
        LedgerEntry
            The recorded entry.
        """
        charge = Charge(
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            columns=tuple([columns] if isinstance(columns, str) else columns),
            scale=scale,
            composition=composition,
            note=note,
            details=dict(details or {}),
        )
        return self.spend_all([charge])[0]

    def spend_all(self, charges: Sequence[Charge], note: str = "") -> tuple[LedgerEntry, ...]:
        """Charge several releases atomically: all are recorded, or none is.

        They share one ``release`` id in the ledger. Raises
        :class:`BudgetExceededError` (charging nothing) if their sum does not fit.
        """
        charges = list(charges)
        if not charges:
            raise InvalidParameterError("charges: nothing to charge; pass at least one Charge")
        want_eps = sum((exact(c.epsilon) for c in charges), Fraction(0))
        want_delta = sum((exact(c.delta) for c in charges), Fraction(0))
        release_id = uuid.uuid4().hex
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        new = [
            LedgerEntry(
                id=uuid.uuid4().hex,
                release=release_id,
                time=now,
                mechanism=c.mechanism,
                columns=c.columns,
                epsilon=float(c.epsilon),
                delta=float(c.delta),
                scale=None if c.scale is None else float(c.scale),
                composition=c.composition,
                note=c.note or note,
                details=dict(c.details),
            )
            for c in charges
        ]

        total = [0]

        def decide(entries: list[LedgerEntry]) -> list[LedgerEntry]:
            self._check_history(entries)
            self._check_fits(entries, want_eps, want_delta)
            total[0] = len(entries) + len(new)
            return new

        with self._lock:
            recorded = self._store.append(decide)
            self._seen = (total[0], recorded[-1].hash)
        return tuple(recorded)

    def check(self, charges: Sequence[Charge]) -> None:
        """Raise :class:`BudgetExceededError` if ``charges`` would not fit; charge nothing."""
        want_eps = sum((exact(c.epsilon) for c in charges), Fraction(0))
        want_delta = sum((exact(c.delta) for c in charges), Fraction(0))
        self._check_fits(self._entries(), want_eps, want_delta)

    def _entries(self) -> list[LedgerEntry]:
        """The ledger's entries, verified, and never fewer than this accountant has seen."""
        with self._lock:
            entries = self._store.read()
            self._check_history(entries)
            self._seen = (len(entries), entries[-1].hash if entries else "")
            return entries

    def _check_history(self, entries: Sequence[LedgerEntry]) -> None:
        n, head = self._seen
        if len(entries) < n or (n and entries[n - 1].hash != head):
            raise LedgerIntegrityError(
                f"ledger {self._store.where} now holds {len(entries)} entries, but this "
                f"accountant has seen {n} ending in {head[:12]}: it was truncated, "
                "restored from an older copy or rewritten. Nothing was charged; restore "
                "the ledger."
            )

    def _check_fits(
        self, entries: Sequence[LedgerEntry], want_eps: Fraction, want_delta: Fraction
    ) -> None:
        eps, delta = _totals(entries)
        if eps + want_eps > exact(self._epsilon) or delta + want_delta > exact(self._delta):
            raise BudgetExceededError(
                budget_epsilon=self._epsilon,
                budget_delta=self._delta,
                spent_epsilon=float(eps),
                spent_delta=float(delta),
                requested_epsilon=float(want_eps),
                requested_delta=float(want_delta),
            )

    # -- export -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Header (budget, relation, creation id), spent amounts, entries and the chain's
        head hash as a JSON-ready dict."""
        entries = self._entries()
        eps, delta = _totals(entries)
        doc = {**self._store.header(), **self._header()}
        doc["spent"] = {"epsilon": float(eps), "delta": float(delta)}
        doc["head"] = entries[-1].hash if entries else ""
        doc["entries"] = [e.to_dict() for e in entries]
        return doc

    def to_json(self) -> str:
        """The ledger document as JSON text."""
        return json.dumps(self.to_dict(), indent=2)

    # -- context ----------------------------------------------------------------------

    def __enter__(self) -> Accountant:
        _ACTIVE.set((*_ACTIVE.get(), self))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _ACTIVE.get()
        _ACTIVE.set(stack[:-1])

    def __repr__(self) -> str:
        spent = self.spent
        where = f", path={str(self._path)!r}" if self._path else ""
        return (
            f"Accountant(epsilon={self._epsilon:g}, delta={self._delta:g}, "
            f"neighbours={self._neighbours!r}, spent_epsilon={spent.epsilon:g}{where})"
        )


def _totals(entries: Sequence[LedgerEntry]) -> tuple[Fraction, Fraction]:
    eps = sum((exact(e.epsilon) for e in entries), Fraction(0))
    delta = sum((exact(e.delta) for e in entries), Fraction(0))
    return eps, delta
