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

A budget is either ``(epsilon, delta)`` (pure or approximate DP, the default) or
``rho`` (zero-concentrated DP, Bun & Steinke 2016: ``Accountant(rho=..., delta=...)``).
On a zCDP budget rhos add: a Gaussian release is charged its ``rho``, a pure
epsilon-DP release ``epsilon**2 / 2``; ``delta`` there is only the delta at which the
budget's (epsilon, delta) guarantee is stated (:mod:`dpframe.core.zcdp`). An
(epsilon, delta) budget refuses a release that is only zCDP.

With ``accounting="pld"`` an (epsilon, delta) budget is spent by *tight composition*:
the whole ledger -- every entry, every running job's reservation and the new charge -- is
composed by the releases' privacy-loss distributions (:mod:`dpframe.core.composition`,
each charge described by :mod:`dpframe.core.losses`), and a charge fits when that
composition is still (epsilon, delta)-DP. Many releases then cost what they cost
together (100 releases of epsilon 0.1 cost about 4.8 at delta 1e-6, not 10); the
composition is never below the truth, and never above basic composition. zCDP
(Gaussian) releases may be charged there too.

The privacy unit (:mod:`dpframe.core.units`) is part of a budget: an accountant made
for a person column accepts only releases that bound each person's contributions
(by that column); one made for records accepts both.

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

from dpframe.core import losses
from dpframe.core.advice import advise
from dpframe.core.budget import charge_for, exact
from dpframe.core.chain import anchor, anchor_problem
from dpframe.core.constraints import (
    PRIVACY_MAX,
    check,
    check_delta,
    check_epsilon,
    check_privacy_amount,
    check_real,
)
from dpframe.core.interrupts import deferred
from dpframe.core.legacy import JSONLedger
from dpframe.core.postgres import PostgresStore, is_postgres_url
from dpframe.core.processes import is_gone, this_process
from dpframe.core.records import (
    ENTRY_COLUMNS,
    Budget,
    Charge,
    LedgerEntry,
    Reservation,
    html_table,
)
from dpframe.core.sqlite import SQLiteStore
from dpframe.core.stores import Changes, LedgerState, LedgerStore, MemoryStore, new_header
from dpframe.core.units import PrivacyUnit, as_unit
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerMismatchError,
)

__all__ = [
    "NAME_KEY",
    "RESERVATION_KEY",
    "RHO_KEY",
    "UNIT_KEY",
    "Accountant",
    "Budget",
    "Charge",
    "LedgerEntry",
    "Reservation",
    "check_budget",
    "current_accountant",
    "ledger_exists",
]

#: the key of a ledger entry's ``details`` that names the reservation it was drawn from
RESERVATION_KEY = "reservation"
#: the key of a zCDP ledger entry's ``details`` that holds the rho it was charged
RHO_KEY = "rho"
#: the key of a ledger entry's ``details`` that names its privacy unit's person column
UNIT_KEY = "unit"
#: the key of a ledger entry's ``details`` that names the release (a spec's release name;
#: entries of older versions and unnamed Python releases have none)
NAME_KEY = "release_name"
#: keys of ``details`` only the accountant writes
_ACCOUNTANT_KEYS = (RESERVATION_KEY, RHO_KEY, UNIT_KEY, NAME_KEY, losses.LOSS_KEY)

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
    """The accountant of the innermost ``with accountant:`` block, or ``None``.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.current_accountant() is None
    True
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     dpframe.current_accountant() is acct
    True
    """
    stack = _ACTIVE.get()
    return stack[-1] if stack else None


def check_budget(
    epsilon: Any, delta: Any, rho: Any, accounting: Any, *, stored: bool = False
) -> tuple[float, float, float | None]:
    """A budget's rules, for :class:`Accountant` and the release spec's ``[privacy.budget]``
    alike: ``(epsilon, delta, rho)`` checked (``rho`` ``None`` for a pure budget; a zCDP
    budget's epsilon is the one its rho implies at delta). ``stored``: read from a ledger
    (whose header records both epsilon and rho).

    Examples
    --------
    >>> check_budget(1.0, 0.0, None, None)
    (1.0, 0.0, None)
    """
    from dpframe.core import zcdp

    check("accounting", accounting)
    delta = check_delta(delta)
    if accounting == "pld":
        if rho is not None:
            raise InvalidParameterError(
                "rho: accounting='pld' composes an (epsilon, delta) budget by privacy-loss "
                "distributions; give epsilon=... and delta=..., not rho (zCDP releases are "
                "composed there too)"
            )
        if epsilon is None:
            raise InvalidParameterError(
                "epsilon: accounting='pld' needs the budget epsilon=... and delta=..."
            )
        if delta <= 0:
            fix = advise(python="pass delta=...", spec="set privacy.budget.delta = ...")
            raise InvalidParameterError(
                "delta: tight composition (accounting='pld') spends less than basic "
                f"composition only at a delta > 0; {fix} (e.g. 1e-6, well below 1/number "
                "of people), or leave accounting unset"
            )
        return check_epsilon(epsilon), delta, None
    if rho is None and accounting != "zcdp":
        if epsilon is None:
            raise InvalidParameterError(
                "epsilon: the accountant needs a budget: epsilon=... (and delta=...), or "
                "rho=... for a zCDP budget"
            )
        return check_epsilon(epsilon), delta, None
    if rho is not None and epsilon is not None and not stored:
        raise InvalidParameterError(
            "rho, epsilon: give one budget -- rho=... (zCDP), or epsilon=... with "
            "delta=... and accounting='zcdp' for the rho that implies them"
        )
    if delta <= 0:
        fix = advise(python="pass delta=...", spec="set privacy.budget.delta = ...")
        raise InvalidParameterError(
            "delta: a zCDP budget implies (epsilon, delta)-DP only for a delta > 0; "
            f"{fix} (e.g. 1e-6, well below 1/number of people)"
        )
    if rho is None:
        if epsilon is None:
            raise InvalidParameterError(
                "epsilon: accounting='zcdp' needs epsilon=... and delta=... (or rho=...)"
            )
        rho = zcdp.rho_for(check_epsilon(epsilon), delta)
    rho = check_privacy_amount("rho", rho)
    implied = zcdp.epsilon_of_rho(rho, delta)
    if implied > PRIVACY_MAX:
        raise InvalidParameterError(
            f"rho: a zCDP budget of rho={rho!r} implies epsilon={implied!r} at "
            f"delta={delta!r}, above dpframe's largest privacy amount {PRIVACY_MAX:g}; "
            "pass a smaller rho"
        )
    return implied, delta, rho


class Accountant:
    """A privacy budget with sequential composition and a ledger of releases.

    Parameters
    ----------
    epsilon : float, optional
        Total epsilon budget (> 0). With ``accounting="zcdp"`` the budget is the
        largest ``rho`` whose tight conversion gives ``(epsilon, delta)``.
    delta : float, default 0.0
        Total delta budget, in [0, 1); for a zCDP budget, the delta (> 0) at which its
        (epsilon, delta) guarantee is stated.
    neighbours : {"substitute", "add_remove"}, default "substitute"
        The neighbouring-dataset relation every release is calibrated for:
        ``"substitute"`` (same size, one record (person) changed; bounded DP) or
        ``"add_remove"`` (one record (person) added or removed; unbounded DP).
    rho : float, optional
        A zero-concentrated DP budget (instead of ``epsilon``): Gaussian releases
        charge ``Δ₂²/(2σ²)``, pure epsilon-DP releases ``epsilon²/2``.
    accounting : {"pure", "zcdp", "pld"}, optional
        ``"zcdp"`` with ``epsilon`` and ``delta``: a rho budget that implies them.
        ``"pld"``: the (epsilon, delta) budget is spent by tight composition of the
        whole ledger (the module's docstring; needs ``delta > 0``).
    unit, max_rows, max_groups
        The privacy unit (:mod:`dpframe.core.units`): ``None`` (one row is one
        person), or the column identifying a person, with the default bounds of the
        releases charged here (rows per person and group, groups per person). A bound
        not given here must be given to each release (there is no silent default:
        :func:`dpframe.core.units.missing_bounds`).

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> entry = acct.spend(0.6, mechanism="laplace", columns=["income"])
    >>> acct.remaining.epsilon
    0.4
    >>> z = dpframe.Accountant(rho=0.5, delta=1e-6)   # a zCDP budget
    >>> _ = z.spend(0.6, mechanism="laplace")          # charged 0.6**2 / 2 = 0.18
    >>> z.spent.rho
    0.18
    >>> t = dpframe.Accountant(epsilon=5.0, delta=1e-6, accounting="pld")
    >>> for _ in range(100):                          # basic composition: 10.0
    ...     _ = t.spend(0.1, mechanism="laplace")
    >>> round(t.spent.epsilon, 2)
    4.78
    """

    def __init__(
        self,
        epsilon: float | None = None,
        delta: float = 0.0,
        neighbours: str = "substitute",
        *,
        rho: float | None = None,
        accounting: str | None = None,
        unit: str | PrivacyUnit | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        _store: Any = None,
    ) -> None:
        self._epsilon, self._delta, self._rho = check_budget(
            epsilon, delta, rho, accounting, stored=_store is not None
        )
        self._neighbours = check("neighbours", neighbours)
        #: "pld" for tight composition, else None (basic, or zCDP when ``_rho`` is set)
        self._accounting: str | None = "pld" if accounting == "pld" else None
        self._unit = as_unit(unit, max_rows, max_groups, needs=())
        given = {"max_rows": max_rows, "max_groups": max_groups}
        named = (
            unit.stated
            if isinstance(unit, PrivacyUnit)
            else [k for k, v in given.items() if v is not None]
        )
        self._stated: dict[str, int] = (
            {} if self._unit.is_record else {k: getattr(self._unit, k) for k in named}
        )
        self._lock = threading.RLock()
        if _store is None:
            _store = MemoryStore(self._new_header())
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
        *,
        rho: float | None = None,
        accounting: str | None = None,
        unit: str | PrivacyUnit | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
    ) -> Accountant:
        """Open (or create) a persistent accountant: a SQLite file, or a PostgreSQL URL.

        Every charge is one exclusive transaction that re-reads and verifies the whole
        ledger (its hash chain), checks the budget and appends, so several processes
        sharing one ledger can never overspend together. A symbolic link is followed to
        its file; a file with several hard links, a ledger that was edited, truncated
        behind its count of issued entries, or deleted or replaced while this accountant
        held it is refused (:class:`~dpframe.errors.LedgerIntegrityError`); what the ledger
        alone cannot show (a truncation with the count lowered, an older copy put back
        before it is opened) a release job finds from its output folder's published runs
        (docs/ledger.md).
        A JSON ledger of an older dpframe opens read-only (``dpframe ledger migrate``).

        Parameters
        ----------
        path : path-like or str
            The ledger file, created if missing (its folder must exist); or a
            ``postgresql://user@host/database`` URL, for jobs on many hosts
            (``pip install 'dpframe[postgres]'``; the tables are created if missing).
        epsilon, delta, neighbours
            The budget and relation. For a new ledger ``epsilon`` (or ``rho``) is
            required (``delta`` defaults to 0, ``neighbours`` to ``"substitute"``); for
            an existing one, ``None`` takes the ledger's value and anything else must
            match.
        rho, accounting, unit, max_rows, max_groups
            As for :class:`Accountant`; the zCDP budget and the person column are fixed
            in the ledger's header (the bounds are the defaults of this accountant).

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
        terms = {
            "rho": rho,
            "accounting": accounting,
            "unit": unit,
            "max_rows": max_rows,
            "max_groups": max_groups,
        }
        if is_postgres_url(path):
            new = None
            if epsilon is not None or rho is not None:
                acct = cls(epsilon, delta or 0.0, neighbours or "substitute", **terms)
                new = acct._store.header()
            store = PostgresStore.open(str(path), new)
            return cls._with_store(store, epsilon, delta, neighbours, terms)
        if "\x00" in os.fspath(path) or not os.fspath(path):
            raise InvalidParameterError(f"path: {path!r} is not a file path")
        p = Path(path)
        if not p.parent.exists():
            raise InvalidParameterError(
                f"path: folder {p.parent} does not exist; create it before opening the ledger"
            )
        if not os.access(p.parent, os.R_OK | os.X_OK):
            raise InvalidParameterError(f"path: folder {p.parent} is not readable by this user")
        if p.is_dir():
            raise InvalidParameterError(f"path: {p} is a folder; give the ledger's file path")
        if p.is_symlink() and not p.exists():
            raise InvalidParameterError(
                f"path: {p} is a link to {os.readlink(p)}, which does not exist"
            )
        if not p.exists() and not os.access(p.parent, os.W_OK):
            raise InvalidParameterError(
                f"path: folder {p.parent} is not writable by this user, so the ledger cannot "
                "be created there"
            )
        if not p.exists():
            if epsilon is None and rho is None:
                new = f"epsilon: ledger {p} does not exist yet, so its total budget is needed; "
                raise InvalidParameterError(
                    advise(
                        python=new + "pass epsilon=... (or rho=... for a zCDP budget)",
                        spec=new + "set privacy.budget.epsilon (or rho for a zCDP budget)",
                        cli=f"ledger {p} does not exist; check the path (this command reads "
                        "an existing ledger, it never creates one)",
                    )
                )
            if p.suffix.lower() == ".json":
                raise InvalidParameterError(
                    f"path: new ledgers are SQLite databases; name it {p.with_suffix('.db')} "
                    "(a .json name is kept for the JSON ledgers of older versions)"
                )
            acct = cls(epsilon, delta or 0.0, neighbours or "substitute", **terms)
            try:
                store = SQLiteStore.create(p, acct._store.header())
            except LedgerMismatchError:  # another process created it meanwhile
                store = SQLiteStore.open(p)
        elif SQLiteStore.is_sqlite(p):
            store = SQLiteStore.open(p)
        else:
            store = JSONLedger(Path(os.path.realpath(p)))
        return cls._with_store(store, epsilon, delta, neighbours, terms)

    @classmethod
    def _with_store(
        cls,
        store: Any,
        epsilon: float | None,
        delta: float | None,
        neighbours: str | None,
        terms: dict[str, Any],
    ) -> Accountant:
        header = store.header()
        unit = terms.get("unit")
        person = unit.person if isinstance(unit, PrivacyUnit) else unit
        asked = {
            "epsilon": None if header.get("rho") is not None else epsilon,
            "delta": delta,
            "neighbours": neighbours,
            "rho": terms.get("rho"),
            "unit": None if person == "record" else person,
        }
        zcdp_asked = terms.get("accounting") == "zcdp" and terms.get("rho") is None
        if header.get("rho") is not None and zcdp_asked and epsilon is not None:
            # epsilon and delta name the zCDP budget they imply: it must be the ledger's rho
            from dpframe.core import zcdp

            d = header["delta"] if delta is None else check_delta(delta)
            implied = zcdp.rho_for(check_epsilon(epsilon), d) if d > 0 else epsilon
            if implied != header["rho"]:
                err = ledger_mismatch(store.where, "epsilon", header["epsilon"], epsilon)
                err.args = (
                    f"{err.args[0]} (the ledger holds rho={header['rho']!r}, which is "
                    f"epsilon={header['epsilon']!r} at delta={header['delta']!r}; "
                    f"epsilon={epsilon!r} with accounting='zcdp' means rho={implied!r})",
                )
                err.key, err.recorded, err.asked = "rho", header["rho"], implied
                raise err
        for key, value in asked.items():
            if value is not None and value != header.get(key):
                raise ledger_mismatch(store.where, key, header.get(key), value)
        zcdp_ledger = header.get("rho") is not None
        opened_pure = epsilon is not None and terms.get("accounting") != "zcdp"
        if zcdp_ledger and opened_pure and terms.get("rho") is None:
            err = LedgerMismatchError(
                f"ledger {store.where} holds a zCDP budget (rho={header['rho']!r}); open "
                "it with rho=None (or its rho), not epsilon=..."
            )
            err.key, err.recorded, err.asked = "rho", header["rho"], None
            raise err
        pld_ledger = header.get("accounting") == "pld"
        asked_accounting = terms.get("accounting")
        if asked_accounting is not None and (asked_accounting == "pld") != pld_ledger:
            recorded = "pld" if pld_ledger else ("zcdp" if zcdp_ledger else "pure")
            err = LedgerMismatchError(
                f"ledger {store.where} was created with accounting={recorded!r}, but opened "
                f"with accounting={asked_accounting!r}; open it with the same accounting (or "
                "leave it unset to take the ledger's), or start a new ledger file"
            )
            err.key, err.recorded, err.asked = "accounting", recorded, asked_accounting
            raise err
        if header.get("rho") is None and terms.get("accounting") == "zcdp":
            err = LedgerMismatchError(
                f"ledger {store.where} holds an (epsilon, delta) budget "
                f"(epsilon={header['epsilon']!r}), not a zCDP one; open it without "
                "accounting='zcdp'"
            )
            err.key, err.recorded, err.asked = "accounting", "pure", "zcdp"
            raise err
        acct = cls(
            None if header.get("rho") is not None else header["epsilon"],
            header["delta"],
            header["neighbours"],
            rho=header.get("rho"),
            accounting=header.get("accounting"),
            unit=header.get("unit") if person in (None, "record") else unit,
            max_rows=None if isinstance(unit, PrivacyUnit) else terms.get("max_rows"),
            max_groups=None if isinstance(unit, PrivacyUnit) else terms.get("max_groups"),
            _store=store,
        )
        acct._entries()  # verified now, and remembered: it may never go back
        return acct

    def _new_header(self) -> dict[str, Any]:
        return new_header(
            self._epsilon,
            self._delta,
            self._neighbours,
            unit=self._unit.person,
            rho=self._rho,
            accounting=self._accounting,
        )

    def _header(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epsilon": self._epsilon,
            "delta": self._delta,
            "neighbours": self._neighbours,
        }
        if self._unit.person is not None:
            out["unit"] = self._unit.person
        if self._rho is not None:
            out["rho"] = self._rho
        if self._accounting is not None:
            out["accounting"] = self._accounting
        return out

    # -- read-only state --------------------------------------------------------------

    @property
    def epsilon(self) -> float:
        """Total epsilon budget.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(epsilon=1.0).epsilon
        1.0
        """
        return self._epsilon

    @property
    def delta(self) -> float:
        """Total delta budget.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(epsilon=1.0, delta=1e-6).delta
        1e-06
        """
        return self._delta

    @property
    def neighbours(self) -> str:
        """The neighbour relation: ``"substitute"`` or ``"add_remove"``.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(epsilon=1.0, neighbours="add_remove").neighbours
        'add_remove'
        """
        return self._neighbours

    @property
    def rho(self) -> float | None:
        """The zCDP budget, or ``None`` for an (epsilon, delta) budget.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(rho=0.5, delta=1e-6).rho, dpframe.Accountant(epsilon=1.0).rho
        (0.5, None)
        """
        return self._rho

    @property
    def accounting(self) -> str:
        """How this budget composes: ``"pure"`` (epsilons and deltas add), ``"zcdp"``
        (rhos add) or ``"pld"`` (tight composition of the whole ledger).

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(epsilon=1.0, delta=1e-6, accounting="pld").accounting
        'pld'
        """
        if self._accounting is not None:
            return self._accounting
        return "pure" if self._rho is None else "zcdp"

    @property
    def unit(self) -> PrivacyUnit:
        """The privacy unit (its bounds are its releases' defaults only where stated:
        :attr:`stated_bounds`).

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> acct.unit.person is None  # one row is one person
        True
        """
        return self._unit

    @property
    def stated_bounds(self) -> dict[str, int]:
        """The contribution bounds given to this accountant (``max_rows``,
        ``max_groups``): its releases' defaults. A bound not here must be given to each
        person-level release.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(epsilon=1.0, unit="pid", max_rows=3).stated_bounds
        {'max_rows': 3}
        >>> dpframe.Accountant(epsilon=1.0).stated_bounds  # one row is one person
        {}
        """
        return dict(self._stated)

    @property
    def path(self) -> Path | None:
        """The ledger file of a persistent accountant, else ``None``.

        Examples
        --------
        >>> import os, tempfile, dpframe
        >>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
        >>> dpframe.Accountant.open(path, epsilon=1.0).path.name
        'ledger.db'
        >>> dpframe.Accountant(epsilon=1.0).path is None  # in memory
        True
        """
        return self._path

    @property
    def location(self) -> str:
        """Where the ledger is: a file, a PostgreSQL URL (without its password), or
        ``"in memory"``.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> acct.location
        'in memory'
        """
        return self._store.where

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every release charged so far, oldest first.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.5, mechanism="laplace", columns=["count"])
        >>> [(e.mechanism, e.columns, e.epsilon) for e in acct.ledger]
        [('laplace', ('count',), 0.5)]
        """
        return tuple(self._entries())

    def anchor(self) -> dict[str, Any]:
        """The ledger as this accountant last read or changed it (verified then): its
        creation id, how many entries it held and the hash of the last
        (:func:`dpframe.core.chain.anchor`; no read, so it cannot fail). A published run
        records it; any later state of this ledger holds the same hash at the same count.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> kept = acct.anchor()
        >>> _ = acct.spend(0.5, mechanism="laplace")
        >>> kept["count"], acct.anchor()["count"], acct.anchor_problems([kept])
        (0, 1, [None])
        """
        with self._lock:
            count, head = self._seen
        return anchor(self._store.header(), count, head)

    def anchor_problems(self, recorded: Sequence[dict[str, Any]]) -> list[str | None]:
        """For each anchor in ``recorded`` (as :meth:`anchor` gave it, maybe long ago), why
        this ledger is not a later state of that one -- another ledger, fewer entries, or
        another entry at its count -- or ``None`` if it is. One verified read.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> kept = acct.anchor()
        >>> _ = acct.spend(0.5, mechanism="laplace")
        >>> acct.anchor_problems([kept])  # the ledger still holds what was recorded
        [None]
        """
        header = self._store.header()
        hashes = [e.hash for e in self._entries()]
        return [anchor_problem(r, header, hashes) for r in recorded]

    @property
    def spent(self) -> Budget:
        """Budget spent so far (re-read from the file for a persistent accountant).

        On a zCDP budget: ``rho`` spent, and the (epsilon, delta) it implies.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.25, mechanism="laplace")
        >>> acct.spent
        Budget(epsilon=0.25, delta=0.0, rho=None)
        """
        if self._accounting == "pld":
            state = self._state()
            return self._composed_budget(self._composed(LedgerState(state.entries, [])))
        return self._budget(_totals(self._entries()))

    @property
    def remaining(self) -> Budget:
        """Budget left: total minus spent minus what open reservations hold.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.3, mechanism="laplace")
        >>> acct.remaining.epsilon
        0.7

        With ``accounting="pld"``, the budget's epsilon less what the ledger and running
        jobs compose to at its delta: a guide, not a promise (composition is not additive,
        and its estimate may be up to 0.1 % above the truth: whether a release fits, only
        composing it says -- :meth:`check`).
        """
        state = self._state()
        if self._accounting == "pld":  # what is left beside the ledger and running jobs
            used = self._composed_budget(self._composed(state)).epsilon
            return Budget(float(max(exact(self._epsilon) - exact(used), Fraction(0))), self._delta)
        spent = _totals(state.entries)
        held = _held(state)
        total = self._total()
        left = zip(total, spent, held, strict=True)
        return self._budget(tuple(max(t - s - h, Fraction(0)) for t, s, h in left))

    def _total(self) -> tuple[Fraction, Fraction, Fraction]:
        """The budget as exact (epsilon, delta, rho)."""
        rho = Fraction(0) if self._rho is None else exact(self._rho)
        return exact(self._epsilon), exact(self._delta), rho

    def _budget(self, amount: tuple[Fraction, ...]) -> Budget:
        """An exact (epsilon, delta, rho) amount as the :class:`Budget` users read."""
        eps, delta, rho = amount
        if self._rho is None:
            return Budget(float(eps), float(delta))
        from dpframe.core.zcdp import epsilon_of_rho

        implied = epsilon_of_rho(float(rho), self._delta) if rho > 0 else 0.0
        return Budget(implied, self._delta if rho > 0 else 0.0, float(rho))

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

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> entry = acct.spend(0.4, mechanism="laplace", columns=["count"], scale=2.5)
        >>> entry.epsilon, acct.remaining.epsilon
        (0.4, 0.6)
        """
        charge = Charge(
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            columns=columns,  # type: ignore[arg-type]  # Charge checks and normalizes it
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

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> entries = acct.spend_all(
        ...     [dpframe.Charge(epsilon=0.3, mechanism="laplace"), dpframe.Charge(epsilon=0.2)]
        ... )
        >>> len({e.release for e in entries}), acct.spent.epsilon  # one release id, charged at once
        (1, 0.5)
        """
        if isinstance(charges, str | bytes) or not isinstance(charges, Iterable):
            raise InvalidParameterError(
                f"charges must be a list of Charge, got {type(charges).__name__}"
            )
        charges = list(charges)
        if not charges:
            raise InvalidParameterError("charges: nothing to charge; pass at least one Charge")
        wrong = [c for c in charges if not isinstance(c, Charge)]
        if wrong:
            raise InvalidParameterError(
                f"charges must be Charge objects (dpframe.core.records.Charge), got "
                f"{wrong[0]!r}; to charge a number use spend(epsilon, mechanism=...)"
            )
        for key in _ACCOUNTANT_KEYS:
            if any(key in c.details for c in charges):
                raise InvalidParameterError(
                    f"charges: details[{key!r}] is set by the accountant, never by a caller"
                )
        want = self._want(charges)
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
                details=self._recorded(c),
            )
            for c in charges
        ]

        reservation = self.reservation

        def decide(state: LedgerState) -> Changes:
            if self._accounting == "pld":
                wanted = [e.details[losses.LOSS_KEY] for e in new]
                self._check_composed(state, wanted, reservation)
            elif reservation is None:
                self._check_fits(state, want)
            else:
                _check_drawable(state, reservation, want, self)
            if reservation is None:
                return Changes(new, give_back=_dead(state))
            return Changes([_drawn_from(e, reservation) for e in new])

        return tuple(self._transact(decide))

    def check(self, charges: Sequence[Charge]) -> None:
        """Raise :class:`BudgetExceededError` if ``charges`` would not fit; charge nothing.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> acct.check([dpframe.Charge(epsilon=0.4), dpframe.Charge(epsilon=0.5)])  # fits
        >>> try:
        ...     acct.check([dpframe.Charge(epsilon=2.0)])
        ... except dpframe.BudgetExceededError:
        ...     print("would overspend; spent", acct.spent.epsilon)
        would overspend; spent 0.0
        """
        want = self._want(list(charges))
        state = self._state()
        reservation = self.reservation
        if self._accounting == "pld":
            self._check_composed(state, [self._loss_of(c) for c in charges], reservation)
        elif reservation is None:
            self._check_fits(state, want)
        else:
            _check_drawable(state, reservation, want, self)

    def cost(self, charges: Sequence[Charge]) -> Budget:
        """What ``charges`` would cost this budget (``rho`` set on a zCDP budget), checked
        payable here (zCDP only on a zCDP budget, the unit); charges nothing.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.Accountant(rho=1.0, delta=1e-6).cost([dpframe.Charge(0.2)]).rho
        0.02
        """
        eps, delta, rho = self._want(list(charges))
        if self._accounting == "pld":  # composed alone, at the budget's delta
            return self._composed_budget([self._loss_of(c) for c in charges])
        return Budget(float(eps), float(delta), None if self._rho is None else float(rho))

    def rho_of(self, charge: Charge) -> Fraction:
        """What ``charge`` costs on a zCDP budget: its ``rho``, or ``epsilon**2 / 2`` for a
        pure epsilon-DP release (exact, from the decimal epsilon prints as).

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(rho=0.5, delta=1e-6)
        >>> acct.rho_of(dpframe.Charge(epsilon=0.1))  # a pure epsilon-DP release: epsilon**2 / 2
        Fraction(1, 200)
        """
        if charge.rho is not None:
            return exact(charge.rho)
        if charge.delta:
            raise InvalidParameterError(
                f"charges: an (epsilon, delta) release with delta={charge.delta!r} cannot be "
                "charged to a zCDP budget; open an (epsilon, delta) budget for it"
            )
        return exact(charge.epsilon) ** 2 / 2

    def _want(self, charges: Sequence[Charge]) -> tuple[Fraction, Fraction, Fraction]:
        """What ``charges`` ask of this budget, exactly, after checking each may be paid
        from it (its unit, and zCDP only on a zCDP budget)."""
        for c in charges:
            self._check_payable(c)
        eps = sum((exact(c.epsilon) for c in charges), Fraction(0))
        delta = sum((exact(c.delta) for c in charges), Fraction(0))
        if self._rho is None:
            return eps, delta, Fraction(0)
        rho = sum((exact(_rounded_rho(self.rho_of(c))) for c in charges), Fraction(0))
        return eps, delta, rho

    def _check_payable(self, charge: Charge) -> None:
        """Refuse a charge this budget cannot pay: a zCDP-only release on an (epsilon,
        delta) budget, a release not bounded by this ledger's person column."""
        if charge.rho is not None and self._rho is None and self._accounting != "pld":
            raise InvalidParameterError(
                f"charges: a {charge.mechanism} release is rho-zCDP (rho={charge.rho:g}), not "
                f"pure epsilon-DP, and this accountant holds an (epsilon, delta) budget; open a "
                "zCDP budget for it: "
                + advise(
                    python="dpframe.Accountant(rho=..., delta=...), or "
                    "Accountant(epsilon=..., delta=..., accounting='zcdp') (or 'pld')",
                    spec='in the spec, privacy.budget.rho = ..., or accounting = "zcdp" (or "pld")',
                )
                + ". Nothing was charged."
            )
        person = self._unit.person
        if person is not None and charge.unit != person:
            got = "one row per person" if charge.unit is None else f"person column {charge.unit!r}"
            raise InvalidParameterError(
                f"charges: this ledger protects people identified by {person!r}, but the "
                f"{charge.mechanism} release protects {got}; bound each person's "
                f"contributions with unit={person!r} (max_rows=..., max_groups=...). Nothing "
                "was charged."
            )

    def _recorded(self, charge: Charge) -> dict[str, Any]:
        """The entry's details: the charge's, with its rho (zCDP), its unit and its
        release's name."""
        details = dict(charge.details)
        if self._rho is not None:
            details[RHO_KEY] = _rounded_rho(self.rho_of(charge))
        if self._accounting == "pld":
            if charge.rho is not None:
                details[RHO_KEY] = _rounded_rho(exact(charge.rho))
            details[losses.LOSS_KEY] = self._loss_of(charge)
        if charge.unit is not None:
            details[UNIT_KEY] = charge.unit
        if charge.name is not None:
            details[NAME_KEY] = charge.name
        return details

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
            What to hold: the sum of their charges. With ``accounting="pld"``, each
            charge is held until a release like it is drawn; a :class:`Budget` is held
            as one (epsilon, delta) release that its draws stand as while they compose
            within it (:mod:`dpframe.core.losses`).
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
        want = self._amount(plan)
        held_losses = (
            tuple(self._loss_of(c) for c in self._charges_in(plan))
            if self._accounting == "pld"
            else None
        )
        if held_losses is not None and isinstance(plan, Budget):  # a box its draws fit in
            held_losses = (losses.boxed(held_losses[0]),)
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
            epsilon=_at_least(want[0]),
            delta=_at_least(want[1]),
            rho=None if self._rho is None else _at_least(want[2]),
            losses=held_losses,
        )

        def hold(state: LedgerState) -> Changes:
            # the exact sum is checked; the stored amount is the least float not below it,
            # so the last draw is never refused by a rounding (it may hold one unit in the
            # last place more: ``remaining`` never shows less than 0 for it)
            if held_losses is not None:
                box = losses.box_of(r)
                self._check_composed(state, held_losses if box is None else [box])
            else:
                self._check_fits(state, want)
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
                    if getattr(exc, "ledger_written", False):
                        raise  # given back; a signal's handler raised it after the write
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
        ``with acct.reserve(...)`` block, in the thread (or task) that opened it.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> acct.reservation is None  # outside a `with acct.reserve(...)` block
        True
        """
        for owner, r in reversed(_RESERVING.get()):
            if owner == id(self):
                return r
        return None

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        """Every open reservation of the ledger (this accountant's and other jobs').

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> acct.reservations
        ()
        """
        return tuple(self._state().reservations)

    @property
    def reserved(self) -> Budget:
        """Budget held by open reservations and not yet drawn from them.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> acct.reserved.epsilon
        0.0

        With ``accounting="pld"``, what the held releases compose to alone, at the
        budget's delta (compositions do not add: :meth:`composed` gives the whole).
        """
        state = self._state()
        if self._accounting == "pld":
            return self._composed_budget(self._parts(state)[1])
        return self._budget(_held(state))

    def composed(self, charges: Sequence[Charge] = ()) -> Budget:
        """What the ledger's entries, the running jobs' reservations and ``charges`` spend
        together (charging nothing): the sum of their amounts, or with
        ``accounting="pld"`` their tight composition (epsilon at the budget's delta).

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=5.0, delta=1e-6, accounting="pld")
        >>> _ = acct.spend(0.1, mechanism="laplace")
        >>> round(acct.composed([dpframe.Charge(epsilon=0.1)] * 99).epsilon, 2)
        4.78
        """
        charges = list(charges)
        state = self._state()
        if self._accounting == "pld":
            return self._composed_budget(self._composed(state, [self._loss_of(c) for c in charges]))
        want = self._want(charges) if charges else (Fraction(0),) * 3
        total = [
            a + b + c for a, b, c in zip(_totals(state.entries), _held(state), want, strict=True)
        ]
        return self._budget((total[0], total[1], total[2]))

    def cancel(self, reservation_id: str, *, force: bool = False) -> Reservation:
        """Give back an open reservation whose job is gone (an operator's tool).

        Refuses a reservation whose owner is alive on this host; one owned by another
        host only with ``force=True`` (make sure that job has ended: a job drawing from
        a cancelled reservation is refused, having drawn nothing more).

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> with acct.reserve(dpframe.Budget(0.5)) as r:
        ...     try:
        ...         acct.cancel(r.id)  # its job (this process) is alive on this host
        ...     except dpframe.DPFrameError as exc:
        ...         print("refused:", type(exc).__name__)
        refused: InvalidParameterError
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
        """One store transaction; ``decide(state)`` sees the history checked.

        SIGINT and SIGTERM are deferred to its end (:func:`dpframe.core.interrupts.deferred`):
        a write is never cut between its commit and its caller learning of it.
        """
        total = [0, ""]

        def checked(state: LedgerState) -> Changes:
            self._check_history(state.entries)
            changes = decide(state)
            total[0] = len(state.entries) + len(changes.entries)
            total[1] = state.entries[-1].hash if state.entries else ""
            return changes

        recorded: list[LedgerEntry] = []
        written = False
        try:
            with deferred(), self._lock:
                recorded = self._store.transact(checked)
                written = True
                self._seen = (total[0], recorded[-1].hash if recorded else total[1])
        except BaseException as exc:
            if written:  # raised as the write ended (a signal sent again): it was made
                with contextlib.suppress(Exception):  # the caller tells a failed write
                    exc.ledger_written = True  # type: ignore[attr-defined]
                if recorded and isinstance(exc, KeyboardInterrupt):
                    exc.recorded = tuple(recorded)  # type: ignore[attr-defined]
            raise
        return recorded

    # -- tight composition (accounting="pld") ---------------------------------------------

    def _loss_of(self, charge: Charge) -> dict[str, Any]:
        rho = None if charge.rho is None else _rounded_rho(exact(charge.rho))
        return losses.loss_of_charge(charge, rho)

    def _composed(
        self, state: LedgerState, want: Sequence[dict[str, Any]] = (), drawing: Any = None
    ) -> list[dict[str, Any]]:
        """Every privacy loss the ledger holds: its entries', what live reservations still
        hold (``drawing``'s less ``want``, drawn from it), and ``want``."""
        entries, held, inside = self._parts(state, want, drawing)
        return entries + held + ([] if inside else list(want))

    def _parts(
        self, state: LedgerState, want: Sequence[dict[str, Any]] = (), drawing: Any = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
        """The ledger's losses as (its entries', what live reservations hold, whether
        ``want`` is inside ``drawing``'s box). The entries drawn from a Budget reservation
        (and ``want``, drawn from it) stand as its box while they compose within it (the
        box dominates them); otherwise they count beside the whole box."""
        state = _live(state)
        mine = [losses.loss_of_entry(e, RHO_KEY) for e in state.entries]
        of = [e.details.get(RESERVATION_KEY) for e in state.entries]
        boxed: set[str] = set()
        held: list[dict[str, Any]] = []
        inside = False
        for r in state.reservations:
            drawn = [x for x, rid in zip(mine, of, strict=True) if rid == r.id]
            if drawing is not None and r.id == drawing.id:
                drawn += list(want)
            box = losses.box_of(r)
            if box is not None and losses.within(drawn, box):
                boxed.add(r.id)
                inside = inside or (drawing is not None and r.id == drawing.id)
                held.append(box)
            elif box is not None:
                held.append(box)
            else:
                held += losses.held(r, drawn) if r.losses is not None else [_as_loss(r)]
        entries = [x for x, rid in zip(mine, of, strict=True) if rid not in boxed]
        return entries, held, inside

    def _check_composed(
        self, state: LedgerState, want: Sequence[dict[str, Any]], drawing: Any = None
    ) -> None:
        """Refuse unless the ledger with ``want`` still composes within the budget."""
        if drawing is not None and drawing.id not in {x.id for x in state.reservations}:
            raise LedgerIntegrityError(
                f"reservation {drawing.id} in {self._store.where} was cancelled while this "
                "job held it; nothing more was charged or drawn"
            )
        every = self._composed(state, want, drawing)
        delta = losses.composed_delta(every, self._epsilon)
        if delta <= exact(self._delta):
            return
        before = self._composed(state)
        eps_before = losses.composed_epsilon(before, self._delta)
        eps_after = losses.composed_epsilon(every, self._delta)
        asked = sum((exact(x.get("epsilon", 0.0)) for x in want), Fraction(0))
        raise BudgetExceededError(
            f"privacy budget exceeded: budget epsilon={self._epsilon:g}, delta="
            f"{self._delta:g} under tight composition (accounting='pld'); the ledger's "
            f"{len(state.entries)} entries and running jobs' reservations compose to "
            f"epsilon={eps_before:.6g} at delta={self._delta:g}, and with the "
            f"{len(want)} release(s) asked for to epsilon={eps_after:.6g} (delta="
            f"{float(delta):.3g} at epsilon={self._epsilon:g}). Nothing was charged and no "
            "noise was drawn.",
            budget_epsilon=self._epsilon,
            budget_delta=self._delta,
            spent_epsilon=eps_before,
            spent_delta=self._delta if before else 0.0,
            requested_epsilon=float(asked),
            requested_delta=float(sum((exact(x.get("delta", 0.0)) for x in want), Fraction(0))),
        )

    def _composed_budget(self, every: Sequence[dict[str, Any]]) -> Budget:
        """What composing ``every`` spends, as (epsilon at the budget's delta, delta)."""
        if not every:
            return Budget(0.0, 0.0)
        return Budget(losses.composed_epsilon(every, self._delta), self._delta)

    def _check_history(self, entries: Sequence[LedgerEntry]) -> None:
        n, head = self._seen
        if len(entries) < n or (n and entries[n - 1].hash != head):
            raise LedgerIntegrityError(
                f"ledger {self._store.where} now holds {len(entries)} entries, but this "
                f"accountant has seen {n} ending in {head[:12]}: it was truncated, "
                "restored from an older copy or rewritten. Nothing was charged; restore "
                "the ledger."
            )

    def _check_fits(self, state: LedgerState, want: tuple[Fraction, ...]) -> None:
        """Refuse unless ``want`` fits beside what is spent and what live jobs hold."""
        spent, held = _totals(state.entries), _held(state)
        if self._rho is not None:
            total = exact(self._rho)
            if spent[2] + held[2] + want[2] > total:
                raise BudgetExceededError(
                    f"privacy budget exceeded: zCDP budget rho={self._rho:g} (epsilon="
                    f"{self._epsilon:g} at delta={self._delta:g}); spent rho="
                    f"{float(spent[2]):g}, running jobs' reservations hold rho="
                    f"{float(held[2]):g}; this asks for rho={float(want[2]):g}. Nothing was "
                    "charged and no noise was drawn.",
                    budget_epsilon=self._epsilon,
                    budget_delta=self._delta,
                    spent_epsilon=float(spent[2] + held[2]),
                    spent_delta=0.0,
                    requested_epsilon=float(want[2]),
                    requested_delta=0.0,
                )
            return
        eps, delta, _ = spent
        held_eps, held_delta, _ = held
        want_eps, want_delta, _ = want
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
        head hash as a JSON-ready dict.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.5, mechanism="laplace")
        >>> doc = acct.to_dict()
        >>> doc["epsilon"], len(doc["entries"])
        (1.0, 1)
        """
        entries = self._entries()
        spent = self.spent
        doc = {**self._store.header(), **self._header()}
        doc["spent"] = {"epsilon": spent.epsilon, "delta": spent.delta}
        if spent.rho is not None:
            doc["spent"]["rho"] = spent.rho
        doc["head"] = entries[-1].hash if entries else ""
        doc["entries"] = [e.to_dict() for e in entries]
        return doc

    def to_json(self) -> str:
        """The ledger document as JSON text.

        Examples
        --------
        >>> import dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> import json
        >>> json.loads(acct.to_json())["epsilon"]
        1.0
        """
        return json.dumps(self.to_dict(), indent=2)

    # -- context ----------------------------------------------------------------------

    def __enter__(self) -> Accountant:
        _ACTIVE.set((*_ACTIVE.get(), self))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _ACTIVE.get()
        _ACTIVE.set(stack[:-1])

    def _repr_html_(self) -> str:
        """A notebook's view: the budget, then the latest entries (20 at most)."""
        import html

        entries = self.ledger
        shown = entries[-20:]
        more = (
            f"<p>the latest {len(shown)} of {len(entries)} entries</p>"
            if len(entries) > len(shown)
            else ""
        )
        table = html_table(ENTRY_COLUMNS, [e.row() for e in shown]) if shown else ""
        return f"<p><code>{html.escape(repr(self))}</code></p>{more}{table}"

    def __repr__(self) -> str:
        spent = self.spent
        where = f", path={str(self._path)!r}" if self._path else ""
        unit = f", unit={self._unit.person!r}" if self._unit.person else ""
        if self._rho is not None:
            return (
                f"Accountant(rho={self._rho:g}, delta={self._delta:g}, "
                f"neighbours={self._neighbours!r}{unit}, spent_rho={spent.rho:g}{where})"
            )
        pld = ", accounting='pld'" if self._accounting == "pld" else ""
        return (
            f"Accountant(epsilon={self._epsilon:g}, delta={self._delta:g}{pld}, "
            f"neighbours={self._neighbours!r}{unit}, spent_epsilon={spent.epsilon:g}{where})"
        )

    def _charges_in(self, plan: Any) -> list[Charge]:
        """The charges ``plan`` holds (see :meth:`reserve`); a :class:`Budget` is one
        charge of its amount (its epsilon and delta, or its rho)."""
        if isinstance(plan, Charge):
            return [plan]
        if isinstance(plan, Budget):
            if plan.rho is not None:
                return [Charge(epsilon=0.0, rho=plan.rho, mechanism="reserved")]
            return [Charge(epsilon=plan.epsilon, delta=plan.delta, mechanism="reserved")]
        if hasattr(plan, "charges"):
            return list(plan.charges)
        if hasattr(plan, "plan") and hasattr(plan.plan, "charges"):  # an executor Step
            return list(plan.plan.charges)
        return [c for part in plan for c in self._charges_in(part)]

    def _amount(self, plan: Any) -> tuple[Fraction, Fraction, Fraction]:
        """The exact (epsilon, delta, rho) that ``plan`` asks for (see :meth:`reserve`)."""
        if isinstance(plan, Charge):
            return self._want([plan])
        if isinstance(plan, Budget):
            eps = check_real("plan.epsilon", plan.epsilon)
            if eps < 0:
                raise InvalidParameterError(f"plan.epsilon must be >= 0, got {eps!r}")
            delta = exact(check_delta(plan.delta, "plan.delta"))
            if self._rho is None:
                return exact(eps), delta, Fraction(0)
            rho = exact(eps) ** 2 / 2 if plan.rho is None else exact(plan.rho)
            return exact(eps), delta, rho
        if hasattr(plan, "charges"):
            return self._amount(list(plan.charges))
        if hasattr(plan, "plan") and hasattr(plan.plan, "charges"):  # an executor Step
            return self._amount(list(plan.plan.charges))
        if isinstance(plan, Iterable) and not isinstance(plan, str | bytes | dict):
            total = (Fraction(0), Fraction(0), Fraction(0))
            for part in plan:
                total = tuple(a + b for a, b in zip(total, self._amount(part), strict=True))
            return total
        raise InvalidParameterError(
            f"plan must be a Budget, a Charge, a plan with charges or a sequence of them, got "
            f"{type(plan).__name__}"
        )


def ledger_mismatch(where: str, key: str, recorded: Any, asked: Any) -> LedgerMismatchError:
    """The refusal of a ledger opened with another ``key`` than it records; the error
    carries ``key``, ``recorded`` and ``asked``, so that an entry point other than Python
    (the release spec) can say what to change in its own terms."""
    err = LedgerMismatchError(
        f"ledger {where} was created with {key}={recorded!r}, but opened with "
        f"{key}={asked!r}; open it with the same {key} (or {key}=None to take the "
        "ledger's), or start a new ledger file"
    )
    err.key, err.recorded, err.asked = key, recorded, asked
    return err


def _rounded_rho(rho: Fraction) -> float:
    """The rho a ledger entry records: the exact ``rho`` rounded *up* to a decimal of
    :data:`~dpframe.core.budget.CHARGE_DIGITS` significant places (``0.6**2/2`` stays
    ``0.18``)."""
    return charge_for(rho, float(rho)) if exact(float(rho)) >= rho else _at_least(rho)


def _at_least(amount: Fraction) -> float:
    """The least float whose decimal reading is ``>= amount`` (a hold never falls short)."""
    f = float(amount)
    while exact(f) < amount:
        f = math.nextafter(f, math.inf)
    return f


def _drawn(state: LedgerState, r: Reservation) -> tuple[Fraction, Fraction, Fraction]:
    """What the entries drawn from reservation ``r`` spent."""
    mine = [e for e in state.entries if e.details.get(RESERVATION_KEY) == r.id]
    return _totals(mine)


def _live(state: LedgerState) -> LedgerState:
    """``state`` without the reservations of jobs that are certainly dead."""
    dead = set(_dead(state))
    return LedgerState(state.entries, [r for r in state.reservations if r.id not in dead])


def _reserved(r: Reservation) -> tuple[Fraction, Fraction, Fraction]:
    return exact(r.epsilon), exact(r.delta), Fraction(0) if r.rho is None else exact(r.rho)


def _held(state: LedgerState) -> tuple[Fraction, Fraction, Fraction]:
    """What the open reservations of live jobs hold beyond what was drawn from them (a dead
    job draws nothing more: its reservation holds nothing, and the next transaction gives
    it back)."""
    held = [Fraction(0)] * 3
    state = _live(state)
    for r in state.reservations:
        for i, (total, drawn) in enumerate(zip(_reserved(r), _drawn(state, r), strict=True)):
            held[i] += max(total - drawn, Fraction(0))
    return held[0], held[1], held[2]


def _dead(state: LedgerState) -> list[str]:
    """The open reservations whose process is certainly gone (they drew all they will)."""
    return [r.id for r in state.reservations if is_gone(r.owner)]


def _check_drawable(
    state: LedgerState,
    r: Reservation,
    want: tuple[Fraction, Fraction, Fraction],
    acct: Accountant,
) -> None:
    """Refuse unless reservation ``r`` is open and has ``want`` left (and the budget too)."""
    if r.id not in {x.id for x in state.reservations}:
        raise LedgerIntegrityError(
            f"reservation {r.id} in {acct._store.where} was cancelled while this job held it; "
            "nothing more was charged or drawn"
        )
    drawn = _drawn(state, r)
    spent = _totals(state.entries)
    held = _reserved(r)
    total = acct._total()
    checked = (2,) if acct.rho is not None else (0, 1)
    if any(drawn[i] + want[i] > held[i] or spent[i] + want[i] > total[i] for i in checked):
        unit = ("rho",) if acct.rho is not None else ("epsilon", "delta")
        asks = ", ".join(f"{u}={float(want[i]):g}" for u, i in zip(unit, checked, strict=True))
        left = ", ".join(
            f"{u}={float(held[i] - drawn[i]):g} of {float(held[i]):g}"
            for u, i in zip(unit, checked, strict=True)
        )
        raise BudgetExceededError(
            f"the release asks for {asks}, more than its reservation has left ({left}); "
            "nothing was charged. Reserve the whole plan."
        )


def _as_loss(r: Reservation) -> dict[str, Any]:
    """A reservation without descriptions (made outside a tight ledger), held whole."""
    if r.rho is not None:
        return {"mechanism": "zcdp", "rho": float(r.rho)}
    if r.delta > 0:
        return {"mechanism": "approx", "epsilon": float(r.epsilon), "delta": float(r.delta)}
    return {"mechanism": "pure", "epsilon": float(r.epsilon)}


def _drawn_from(e: LedgerEntry, r: Reservation) -> LedgerEntry:
    return replace(e, details={**e.details, RESERVATION_KEY: r.id})


def _totals(entries: Sequence[LedgerEntry]) -> tuple[Fraction, Fraction, Fraction]:
    """The exact (epsilon, delta, rho) the entries spent (rho: on a zCDP ledger)."""
    eps = sum((exact(e.epsilon) for e in entries), Fraction(0))
    delta = sum((exact(e.delta) for e in entries), Fraction(0))
    rho = sum((exact(e.details.get(RHO_KEY, 0.0)) for e in entries), Fraction(0))
    return eps, delta, rho
