"""The privacy accountant: a budget, sequential composition, and a ledger of releases.

An :class:`Accountant` holds a total budget ``(epsilon, delta)`` for one neighbour
relation and composes releases sequentially (basic composition: epsilons add, deltas
add). Every charge is checked and recorded atomically, *before* the caller draws noise.

Budget arithmetic is exact: each epsilon/delta is read as the decimal number it prints
as (``0.1`` is one tenth) and summed with :class:`fractions.Fraction`, so ``0.1 + 0.2 +
0.7`` fits a budget of ``1.0`` and nothing overspends by a rounding error. (The
mechanisms round epsilon *down* to a dyadic rational before use, so the privacy loss
they incur never exceeds the decimal amount charged.)
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.core.budget import exact
from dpframe.core.constraints import NEIGHBOURS, check_choice, check_delta, check_epsilon
from dpframe.core.files import atomic_write_text
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerMismatchError,
)

__all__ = ["Accountant", "Budget", "Charge", "LedgerEntry", "current_accountant"]

LEDGER_FORMAT = "dpframe-ledger"
LEDGER_VERSION = 1

_ACTIVE: contextvars.ContextVar[tuple[Accountant, ...]] = contextvars.ContextVar(
    "dpframe_active_accountants", default=()
)


def current_accountant() -> Accountant | None:
    """The accountant of the innermost ``with accountant:`` block, or ``None``."""
    stack = _ACTIVE.get()
    return stack[-1] if stack else None


@dataclass(frozen=True)
class Budget:
    """An amount of privacy budget."""

    epsilon: float
    delta: float = 0.0


@dataclass(frozen=True)
class Charge:
    """A request to spend budget on one release (see :meth:`Accountant.spend_all`).

    ``scale`` is the noise scale the release will use (``None`` if not a single number);
    ``composition`` is how the release's rows compose (``"parallel"`` or
    ``"sequential"``); ``details`` holds mechanism-specific facts for the ledger.
    """

    epsilon: float
    delta: float = 0.0
    mechanism: str = "unspecified"
    columns: tuple[str, ...] = ()
    scale: float | None = None
    composition: str = "sequential"
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        if isinstance(self.columns, str):
            object.__setattr__(self, "columns", (self.columns,))
        else:
            object.__setattr__(self, "columns", tuple(self.columns))


@dataclass(frozen=True)
class LedgerEntry:
    """One release as recorded in the ledger."""

    id: str
    release: str
    time: str
    mechanism: str
    columns: tuple[str, ...]
    epsilon: float
    delta: float
    scale: float | None
    composition: str
    note: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = asdict(self)
        d["columns"] = list(self.columns)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LedgerEntry:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["columns"] = tuple(d.get("columns", ()))
        d.setdefault("details", {})
        return cls(**d)


class _MemoryStore:
    """Entries held in memory."""

    def __init__(self) -> None:
        self._entries: list[LedgerEntry] = []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[list[LedgerEntry]]:
        entries = list(self._entries)
        yield entries
        self._entries = entries

    def read(self) -> list[LedgerEntry]:
        return list(self._entries)


class _FileStore:
    """Entries kept in a JSON file, updated under a file lock with an atomic rename."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        from filelock import FileLock

        self.path = path
        self.header = header
        self._lock = FileLock(str(path) + ".lock")

    def _load(self) -> list[LedgerEntry]:
        if not self.path.exists():
            return []
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise LedgerMismatchError(
                f"ledger file {self.path} is not valid JSON ({exc}); restore it from backup "
                "rather than deleting it: the budget it records has been spent"
            ) from exc
        _check_header(self.path, doc, self.header)
        return [LedgerEntry.from_dict(e) for e in doc["entries"]]

    def _write(self, entries: list[LedgerEntry]) -> None:
        doc = dict(self.header)
        doc["entries"] = [e.to_dict() for e in entries]
        atomic_write_text(
            self.path, json.dumps(doc, indent=2, sort_keys=False) + "\n", private=True
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[list[LedgerEntry]]:
        with self._lock:
            entries = self._load()
            before = len(entries)
            yield entries
            if len(entries) != before or not self.path.exists():
                self._write(entries)

    def read(self) -> list[LedgerEntry]:
        with self._lock:
            return self._load()


def _check_header(path: Path, doc: dict[str, Any], header: dict[str, Any]) -> None:
    if doc.get("format") != LEDGER_FORMAT:
        raise LedgerMismatchError(f"{path} is not a dpframe ledger (no format={LEDGER_FORMAT!r})")
    for key in ("epsilon", "delta", "neighbours"):
        if doc.get(key) != header[key]:
            raise LedgerMismatchError(
                f"ledger {path} was created with {key}={doc.get(key)!r}, but opened with "
                f"{key}={header[key]!r}; open it with the same {key} (or {key}=None to take "
                "the file's), or start a new ledger file"
            )


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
        _path: Path | None = None,
    ) -> None:
        self._epsilon = check_epsilon(epsilon)
        self._delta = check_delta(delta)
        self._neighbours = check_choice("neighbours", neighbours, NEIGHBOURS)
        self._lock = threading.RLock()
        self._path = _path
        if _path is None:
            self._store: _MemoryStore | _FileStore = _MemoryStore()
        else:
            self._store = _FileStore(_path, self._header())

    # -- construction -----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        epsilon: float | None = None,
        delta: float | None = None,
        neighbours: str | None = None,
    ) -> Accountant:
        """Open (or create) a persistent accountant whose ledger lives in a JSON file.

        Every charge re-reads the file, checks the budget and writes the new ledger
        atomically (temporary file + rename) while holding ``<path>.lock``, so several
        processes sharing one ledger can never overspend together.

        Parameters
        ----------
        path : path-like
            The ledger file. Created if missing (its folder must exist).
        epsilon, delta, neighbours
            The budget and relation. For a new file ``epsilon`` is required
            (``delta`` defaults to 0, ``neighbours`` to ``"substitute"``); for an
            existing file, ``None`` takes the file's value and anything else must match.

        Examples
        --------
        >>> import dpframe, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "ledger.json")
        >>> acct = dpframe.Accountant.open(path, epsilon=2.0)
        >>> _ = acct.spend(0.5, mechanism="laplace")
        >>> dpframe.Accountant.open(path).spent.epsilon
        0.5
        """
        p = Path(path)
        if not p.parent.exists():
            raise InvalidParameterError(
                f"path: folder {p.parent} does not exist; create it before opening the ledger"
            )
        lock_path = str(p) + ".lock"
        from filelock import FileLock

        with FileLock(lock_path):
            if p.exists():
                try:
                    doc = json.loads(p.read_text(encoding="utf-8"))
                except json.JSONDecodeError as exc:
                    raise LedgerMismatchError(f"ledger file {p} is not valid JSON: {exc}") from exc
                if doc.get("format") != LEDGER_FORMAT:
                    raise LedgerMismatchError(f"{p} is not a dpframe ledger file")
                epsilon = doc["epsilon"] if epsilon is None else epsilon
                delta = doc["delta"] if delta is None else delta
                neighbours = doc["neighbours"] if neighbours is None else neighbours
                acct = cls(epsilon, delta, neighbours, _path=p)
                _check_header(p, doc, acct._header())
            else:
                if epsilon is None:
                    raise InvalidParameterError(
                        f"epsilon: ledger {p} does not exist yet, so its total budget is "
                        "needed; pass epsilon=..."
                    )
                acct = cls(
                    epsilon, 0.0 if delta is None else delta, neighbours or "substitute", _path=p
                )
                acct._store._write([])  # type: ignore[union-attr]
        return acct

    def _header(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "version": LEDGER_VERSION,
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
        with self._lock:
            return tuple(self._store.read())

    @property
    def spent(self) -> Budget:
        """Budget spent so far (re-read from the file for a persistent accountant)."""
        eps, delta = _totals(self._store.read())
        return Budget(float(eps), float(delta))

    @property
    def remaining(self) -> Budget:
        """Budget left: total minus spent."""
        eps, delta = _totals(self._store.read())
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
        with self._lock, self._store.transaction() as entries:
            self._check_fits(entries, want_eps, want_delta)
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
            entries.extend(new)
        return tuple(new)

    def check(self, charges: Sequence[Charge]) -> None:
        """Raise :class:`BudgetExceededError` if ``charges`` would not fit; charge nothing."""
        want_eps = sum((exact(c.epsilon) for c in charges), Fraction(0))
        want_delta = sum((exact(c.delta) for c in charges), Fraction(0))
        self._check_fits(self._store.read(), want_eps, want_delta)

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
        """Budget, relation, spent amounts and entries as a JSON-ready dict."""
        doc = self._header()
        spent = self.spent
        doc["spent"] = {"epsilon": spent.epsilon, "delta": spent.delta}
        doc["entries"] = [e.to_dict() for e in self.ledger]
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
