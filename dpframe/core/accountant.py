"""The privacy accountant: a budget, sequential composition, and a ledger of releases.

An :class:`Accountant` holds a total budget ``(epsilon, delta)`` for one neighbour
relation and composes releases sequentially (basic composition: epsilons add, deltas
add). Every charge is checked and recorded atomically, *before* the caller draws noise.
Its ledger lives in a store (:mod:`dpframe.core.stores`): in memory, in a SQLite
database or in PostgreSQL (:meth:`Accountant.open`); its entries form a hash chain
(:mod:`dpframe.core.chain`), verified at every read.

A job reserves its whole plan first (:meth:`Accountant.reserve`): the reservation is
held against every other spend, each release then draws from it, and whatever was not
drawn is given back when the job ends -- overlapping jobs that do not all fit are
refused before they spend anything.

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
import math
import os
import threading
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpframe.core.budget import exact
from dpframe.core.constraints import (
    NEIGHBOURS,
    check_choice,
    check_delta,
    check_epsilon,
    check_real,
)
from dpframe.core.legacy import JSONLedger
from dpframe.core.postgres import PostgresStore, is_postgres_url
from dpframe.core.processes import is_gone, this_process
from dpframe.core.records import Budget, Charge, LedgerEntry, Reservation
from dpframe.core.sqlite import SQLiteStore
from dpframe.core.stores import Changes, LedgerState, LedgerStore, MemoryStore, new_header
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerMismatchError,
)

__all__ = [
    "RESERVATION_KEY",
    "Accountant",
    "Budget",
    "Charge",
    "LedgerEntry",
    "Reservation",
    "current_accountant",
    "ledger_exists",
]

#: the key of a ledger entry's ``details`` that names the reservation it was drawn from
RESERVATION_KEY = "reservation"

_ACTIVE: contextvars.ContextVar[tuple[Accountant, ...]] = contextvars.ContextVar(
    "dpframe_active_accountants", default=()
)

#: the reservations open in this context (thread or task), by accountant: a reservation
#: is drawn from only by the code inside its ``with acct.reserve(...)`` block
_RESERVING: contextvars.ContextVar[tuple[tuple[int, Reservation], ...]] = contextvars.ContextVar(
    "dpframe_reservations", default=()
)


def ledger_exists(target: str | os.PathLike[str]) -> bool:
    """Whether a ledger exists at ``target`` (a file, or a ``postgresql://`` URL); creates
    nothing."""
    if is_postgres_url(target):
        return PostgresStore.exists(str(target))
    return Path(target).exists()


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
        self._store: LedgerStore = _store
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
        """Open (or create) a persistent accountant: a SQLite file, or a PostgreSQL URL.

        Every charge is one exclusive transaction that re-reads and verifies the whole
        ledger (its hash chain), checks the budget and appends, so several processes
        sharing one ledger can never overspend together. A symbolic link is followed to
        its file; a file with several hard links, a ledger that was edited, truncated,
        deleted or replaced is refused (:class:`~dpframe.errors.LedgerIntegrityError`).
        A JSON ledger of an older dpframe opens read-only (``dpframe ledger migrate``).

        Parameters
        ----------
        path : path-like or str
            The ledger file, created if missing (its folder must exist); or a
            ``postgresql://user@host/database`` URL, for jobs on many hosts
            (``pip install 'dpframe[postgres]'``; the tables are created if missing).
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
                f"path must be a file path (str or os.PathLike) or a postgresql:// URL, got "
                f"{type(path).__name__}"
            )
        if is_postgres_url(path):
            new = None
            if epsilon is not None:
                acct = cls(epsilon, 0.0 if delta is None else delta, neighbours or "substitute")
                new = acct._store.header()
            return cls._with_store(PostgresStore.open(str(path), new), epsilon, delta, neighbours)
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
    def location(self) -> str:
        """Where the ledger is: a file, a PostgreSQL URL (without its password), or
        ``"in memory"``."""
        return self._store.where

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
        """Budget left: total minus spent minus what open reservations hold."""
        state = self._state()
        eps, delta = _totals(state.entries)
        held_eps, held_delta = _held(state)
        return Budget(
            float(max(exact(self._epsilon) - eps - held_eps, Fraction(0))),
            float(max(exact(self._delta) - delta - held_delta, Fraction(0))),
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
        :class:`BudgetExceededError` (charging nothing) if their sum does not fit in
        what is left once every open reservation is held (or, inside :meth:`reserve`,
        in what this accountant's reservation has left).
        """
        charges = list(charges)
        if not charges:
            raise InvalidParameterError("charges: nothing to charge; pass at least one Charge")
        if any(RESERVATION_KEY in c.details for c in charges):
            raise InvalidParameterError(
                f"charges: details[{RESERVATION_KEY!r}] is set by the accountant (inside "
                "`with acct.reserve(...)`), never by a caller"
            )
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

        reservation = self.reservation

        def decide(state: LedgerState) -> Changes:
            if reservation is None:
                self._check_fits(state, want_eps, want_delta)
                return Changes(new, give_back=_dead(state))
            _check_drawable(state, reservation, want_eps, want_delta, self)
            drawn = [_drawn_from(e, reservation) for e in new]
            return Changes(drawn)

        return tuple(self._transact(decide))

    def check(self, charges: Sequence[Charge]) -> None:
        """Raise :class:`BudgetExceededError` if ``charges`` would not fit; charge nothing."""
        want_eps = sum((exact(c.epsilon) for c in charges), Fraction(0))
        want_delta = sum((exact(c.delta) for c in charges), Fraction(0))
        state = self._state()
        reservation = self.reservation
        if reservation is None:
            self._check_fits(state, want_eps, want_delta)
        else:
            _check_drawable(state, reservation, want_eps, want_delta, self)

    # -- reservations -----------------------------------------------------------------

    @contextlib.contextmanager
    def reserve(self, plan: Any, *, note: str = "") -> Iterator[Reservation]:
        """Hold a whole plan's cost, draw each release from it, give back the rest.

        Opening the reservation is one transaction: it is refused, holding nothing, if
        the plan does not fit in what is left once every other open reservation is held
        (so of several overlapping jobs, those that fit go on and the others spend
        nothing). Inside the block every spend of this accountant (every release it
        charges) draws from the reservation and must fit in what it has left; at the
        end of the block -- success, error or ``KeyboardInterrupt`` -- whatever was not
        drawn is given back. The reservation of a process that was killed is given back
        by the next transaction on the same host (:mod:`dpframe.core.processes`); one of
        another host by ``dpframe ledger cancel``.

        Parameters
        ----------
        plan : Budget, Charge, a mechanism plan or step, or a sequence of them
            What to hold: the sum of their charges.
        note : str
            Recorded with the reservation (e.g. the job).

        Yields
        ------
        Reservation
            The open reservation.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> with acct.reserve(dpframe.Budget(0.6)) as r:
        ...     _ = acct.spend(0.25, mechanism="laplace")  # drawn from the reservation
        ...     round(acct.remaining.epsilon, 12)           # 0.35 of it is held
        0.4
        >>> acct.remaining.epsilon                          # the rest given back
        0.75
        """
        want_eps, want_delta = _amount(plan)
        if self.reservation is not None:
            raise InvalidParameterError(
                "plan: this accountant already holds a reservation here; reserve the whole "
                "plan once, or end the first `with acct.reserve(...)` block"
            )
        r = Reservation(
            id=uuid.uuid4().hex,
            created=datetime.now(UTC).isoformat(timespec="microseconds"),
            owner=this_process(),
            note=note,
            epsilon=_at_least(want_eps),
            delta=_at_least(want_delta),
        )

        def hold(state: LedgerState) -> Changes:
            # the exact sum is checked; the stored amount is the least float not below it,
            # so the last draw is never refused by a rounding (it may hold one unit in the
            # last place more: ``remaining`` never shows less than 0 for it)
            self._check_fits(state, want_eps, want_delta)
            return Changes(reserve=[r], give_back=_dead(state))

        token = _RESERVING.set((*_RESERVING.get(), (id(self), r)))
        held = False
        try:
            try:
                self._transact(hold)
            except (BudgetExceededError, LedgerIntegrityError, InvalidParameterError):
                raise  # refused before anything was recorded: nothing to give back
            except BaseException:
                held = True  # e.g. interrupted as the hold committed: give it back
                raise
            held = True
            yield r
        finally:
            _RESERVING.reset(token)
            if held:
                try:
                    self._transact(lambda state: Changes(give_back=[r.id]))
                except Exception as exc:  # the block's own error matters more
                    warnings.warn(
                        f"reservation {r.id} could not be given back ({exc}); it stays held "
                        "until `dpframe ledger cancel` (or, once this process has ended, "
                        "the next job on this host) gives it back",
                        RuntimeWarning,
                        stacklevel=3,
                    )

    @property
    def reservation(self) -> Reservation | None:
        """The reservation this accountant's spends draw from: inside a
        ``with acct.reserve(...)`` block, in the thread (or task) that opened it."""
        for owner, r in reversed(_RESERVING.get()):
            if owner == id(self):
                return r
        return None

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        """Every open reservation of the ledger (this accountant's and other jobs')."""
        return tuple(self._state().reservations)

    @property
    def reserved(self) -> Budget:
        """Budget held by open reservations and not yet drawn from them."""
        eps, delta = _held(self._state())
        return Budget(float(eps), float(delta))

    def cancel(self, reservation_id: str, *, force: bool = False) -> Reservation:
        """Give back an open reservation whose job is gone (an operator's tool).

        Refuses a reservation whose owner is alive on this host; one owned by another
        host only with ``force=True`` (make sure that job has ended: a job drawing from
        a cancelled reservation is refused, having drawn nothing more).
        """
        found = [r for r in self._state().reservations if r.id == reservation_id]
        if not found:
            raise InvalidParameterError(
                f"reservation_id: no open reservation {reservation_id!r} in "
                f"{self._store.where}; `dpframe ledger show` lists them"
            )
        r = found[0]
        if not is_gone(r.owner) and not force:
            raise InvalidParameterError(
                f"reservation_id: reservation {r.id} belongs to process {r.owner.get('pid')} "
                f"on {r.owner.get('host')}, which may still be running; stop that job first "
                "(or pass force=True once it has ended)"
            )
        self._transact(lambda state: Changes(give_back=[r.id]))
        return r

    def _entries(self) -> list[LedgerEntry]:
        """The ledger's entries, verified, and never fewer than this accountant has seen."""
        return self._state().entries

    def _state(self) -> LedgerState:
        """The ledger's entries and open reservations, verified (see :meth:`_entries`)."""
        with self._lock:
            state = self._store.read()
            entries = state.entries
            self._check_history(entries)
            self._seen = (len(entries), entries[-1].hash if entries else "")
            return state

    def _transact(self, decide: Any) -> list[LedgerEntry]:
        """One store transaction; ``decide(state)`` sees the history checked."""
        total = [0, ""]

        def checked(state: LedgerState) -> Changes:
            self._check_history(state.entries)
            changes = decide(state)
            total[0] = len(state.entries) + len(changes.entries)
            total[1] = state.entries[-1].hash if state.entries else ""
            return changes

        with self._lock:
            recorded = self._store.transact(checked)
            self._seen = (total[0], recorded[-1].hash if recorded else total[1])
        return recorded

    def _check_history(self, entries: Sequence[LedgerEntry]) -> None:
        n, head = self._seen
        if len(entries) < n or (n and entries[n - 1].hash != head):
            raise LedgerIntegrityError(
                f"ledger {self._store.where} now holds {len(entries)} entries, but this "
                f"accountant has seen {n} ending in {head[:12]}: it was truncated, "
                "restored from an older copy or rewritten. Nothing was charged; restore "
                "the ledger."
            )

    def _check_fits(self, state: LedgerState, want_eps: Fraction, want_delta: Fraction) -> None:
        """Refuse unless ``want`` fits beside what is spent and what live jobs hold."""
        eps, delta = _totals(state.entries)
        held_eps, held_delta = _held(state)
        over_eps = eps + held_eps + want_eps > exact(self._epsilon)
        if over_eps or delta + held_delta + want_delta > exact(self._delta):
            message = None
            if held_eps or held_delta:
                message = (
                    f"privacy budget exceeded: budget epsilon={self._epsilon:g}, "
                    f"delta={self._delta:g}; spent epsilon={float(eps):g}, "
                    f"delta={float(delta):g}, and running jobs' reservations hold "
                    f"epsilon={float(held_eps):g}, delta={float(held_delta):g}; this asks "
                    f"for epsilon={float(want_eps):g}, delta={float(want_delta):g}. Nothing "
                    "was charged and no noise was drawn."
                )
            raise BudgetExceededError(
                message,
                budget_epsilon=self._epsilon,
                budget_delta=self._delta,
                spent_epsilon=float(eps + held_eps),
                spent_delta=float(delta + held_delta),
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


def _amount(plan: Any) -> tuple[Fraction, Fraction]:
    """The exact epsilon and delta that ``plan`` asks for (see :meth:`Accountant.reserve`)."""
    if isinstance(plan, Budget | Charge):
        eps = check_real("plan.epsilon", plan.epsilon)
        if eps < 0:
            raise InvalidParameterError(f"plan.epsilon must be >= 0, got {eps!r}")
        return exact(eps), exact(check_delta(plan.delta, "plan.delta"))
    if hasattr(plan, "charges"):
        return _amount(list(plan.charges))
    if hasattr(plan, "plan") and hasattr(plan.plan, "charges"):  # an executor Step
        return _amount(list(plan.plan.charges))
    if isinstance(plan, Iterable) and not isinstance(plan, str | bytes | dict):
        eps, delta = Fraction(0), Fraction(0)
        for part in plan:
            e, d = _amount(part)
            eps, delta = eps + e, delta + d
        return eps, delta
    raise InvalidParameterError(
        f"plan must be a Budget, a Charge, a plan with charges or a sequence of them, got "
        f"{type(plan).__name__}"
    )


def _at_least(amount: Fraction) -> float:
    """The least float whose decimal reading is ``>= amount`` (a hold never falls short)."""
    f = float(amount)
    while exact(f) < amount:
        f = math.nextafter(f, math.inf)
    return f


def _drawn(state: LedgerState, r: Reservation) -> tuple[Fraction, Fraction]:
    """What the entries drawn from reservation ``r`` spent."""
    mine = [e for e in state.entries if e.details.get(RESERVATION_KEY) == r.id]
    return _totals(mine)


def _live(state: LedgerState) -> LedgerState:
    """``state`` without the reservations of jobs that are certainly dead."""
    dead = set(_dead(state))
    return LedgerState(state.entries, [r for r in state.reservations if r.id not in dead])


def _held(state: LedgerState) -> tuple[Fraction, Fraction]:
    """What the open reservations of live jobs hold beyond what was drawn from them (a dead
    job draws nothing more: its reservation holds nothing, and the next transaction gives
    it back)."""
    eps, delta = Fraction(0), Fraction(0)
    state = _live(state)
    for r in state.reservations:
        de, dd = _drawn(state, r)
        eps += max(exact(r.epsilon) - de, Fraction(0))
        delta += max(exact(r.delta) - dd, Fraction(0))
    return eps, delta


def _dead(state: LedgerState) -> list[str]:
    """The open reservations whose process is certainly gone (they drew all they will)."""
    return [r.id for r in state.reservations if is_gone(r.owner)]


def _check_drawable(
    state: LedgerState,
    r: Reservation,
    want_eps: Fraction,
    want_delta: Fraction,
    acct: Accountant,
) -> None:
    """Refuse unless reservation ``r`` is open and has ``want`` left (and the budget too)."""
    if r.id not in {x.id for x in state.reservations}:
        raise LedgerIntegrityError(
            f"reservation {r.id} in {acct._store.where} was cancelled while this job held it; "
            "nothing more was charged or drawn"
        )
    de, dd = _drawn(state, r)
    eps, delta = _totals(state.entries)
    if (
        de + want_eps > exact(r.epsilon)
        or dd + want_delta > exact(r.delta)
        or eps + want_eps > exact(acct.epsilon)
        or delta + want_delta > exact(acct.delta)
    ):
        raise BudgetExceededError(
            f"the release asks for epsilon={float(want_eps):g}, delta={float(want_delta):g}, "
            f"more than its reservation has left (epsilon={float(exact(r.epsilon) - de):g}, "
            f"delta={float(exact(r.delta) - dd):g} of {r.epsilon:g}, {r.delta:g}); nothing "
            "was charged. Reserve the whole plan."
        )


def _drawn_from(e: LedgerEntry, r: Reservation) -> LedgerEntry:
    return replace(e, details={**e.details, RESERVATION_KEY: r.id})


def _totals(entries: Sequence[LedgerEntry]) -> tuple[Fraction, Fraction]:
    eps = sum((exact(e.epsilon) for e in entries), Fraction(0))
    delta = sum((exact(e.delta) for e in entries), Fraction(0))
    return eps, delta
