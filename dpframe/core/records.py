"""The ledger's records: a budget, a charge (what a release asks to spend) and an entry.

Examples
--------
>>> from dpframe.core.records import Charge
>>> Charge(0.5, mechanism="laplace", columns="income").columns
('income',)
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from dpframe.core.chain import entry_hash
from dpframe.core.constraints import (
    check,
    check_delta,
    check_epsilon,
    check_privacy_amount,
    check_real,
)
from dpframe.errors import InvalidParameterError, LedgerIntegrityError

__all__ = ["Budget", "Charge", "LedgerEntry", "Reservation", "html_table"]


@dataclass(frozen=True)
class Budget:
    """An amount of privacy budget.

    ``rho`` is set for a zero-concentrated (zCDP) budget: then ``rho`` is what counts,
    and ``epsilon``/``delta`` are the (epsilon, delta)-DP guarantee it implies
    (:mod:`dpframe.core.zcdp`).

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> _ = acct.spend(0.25, mechanism="laplace")
    >>> acct.remaining
    Budget(epsilon=0.75, delta=0.0, rho=None)
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None


@dataclass(frozen=True)
class Charge:
    """A request to spend budget on one release (see :meth:`Accountant.spend_all`).

    ``scale`` is the noise scale the release will use (``None`` if not a single number);
    ``composition`` is how the release's rows compose (``"parallel"`` or
    ``"sequential"``); ``details`` holds mechanism-specific facts for the ledger.

    ``unit`` names the person column the release bounds (``None``: one row per person).
    A pure epsilon-DP release gives ``epsilon > 0``; a release that is only
    ``rho``-zCDP (Gaussian noise) gives ``rho > 0`` and ``epsilon = 0``: only a zCDP
    budget can pay for it (:class:`~dpframe.core.accountant.Accountant`).

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> charge = dpframe.Charge(epsilon=0.5, mechanism="laplace", columns=("count",), scale=2.0)
    >>> entries = acct.spend_all([charge])
    >>> entries[0].mechanism, acct.spent.epsilon
    ('laplace', 0.5)
    """

    epsilon: float
    delta: float = 0.0
    mechanism: str = "unspecified"
    columns: tuple[str, ...] = ()
    scale: float | None = None
    composition: str = "sequential"
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    rho: float | None = None
    #: the person column whose contributions the release bounds (``None``: one row is
    #: one person) -- see :mod:`dpframe.core.units`
    unit: str | None = None
    #: the name of the release it pays for (a spec's release name), recorded in the entry
    name: str | None = None

    def __post_init__(self) -> None:
        if self.rho is None:
            check_epsilon(self.epsilon)
        else:
            check_privacy_amount("rho", self.rho)
            if self.epsilon != 0 or self.delta != 0:
                raise InvalidParameterError(
                    f"a zCDP charge (rho={self.rho!r}) has epsilon=0 and delta=0, got "
                    f"epsilon={self.epsilon!r}, delta={self.delta!r}: a release is charged "
                    "either its pure epsilon or its rho"
                )
        check_delta(self.delta)
        columns = (self.columns,) if isinstance(self.columns, str) else self.columns
        if not isinstance(columns, Iterable) or not all(isinstance(c, str) for c in columns):
            raise InvalidParameterError(
                f"columns must be a column name or a list of them, got {self.columns!r}"
            )
        object.__setattr__(self, "columns", tuple(columns))
        if self.scale is not None:
            scale = check_real("scale", self.scale)
            if scale < 0:
                raise InvalidParameterError(f"scale must be >= 0 (or None), got {scale!r}")
        check("composition", self.composition)
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise InvalidParameterError(
                f"name must be a non-empty string or None, got {self.name!r}"
            )
        if not isinstance(self.mechanism, str) or not isinstance(self.note, str):
            raise InvalidParameterError(
                f"mechanism and note must be strings, got {self.mechanism!r} and {self.note!r}"
            )
        if not isinstance(self.details, dict):
            raise InvalidParameterError(f"details must be a dict, got {self.details!r}")
        try:
            json.dumps(self.details, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(
                f"details must be JSON data (the ledger stores it): {exc}"
            ) from None


def html_table(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A small HTML table (for notebooks' ``_repr_html_``), every cell escaped.

    Examples
    --------
    >>> html_table(["mechanism", "epsilon"], [["laplace", 0.5]])
    '<table><tr><th>mechanism</th><th>epsilon</th></tr><tr><td>laplace</td><td>0.5</td></tr></table>'
    """

    def cell(value: Any) -> str:
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        return html.escape(text)

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


#: what a notebook shows of each ledger entry
ENTRY_COLUMNS = ("time", "mechanism", "columns", "epsilon", "delta", "scale", "composition", "id")


@dataclass(frozen=True)
class LedgerEntry:
    """One release as recorded in the ledger.

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> entry = acct.spend(0.5, mechanism="laplace", columns=["count"], scale=2.0)
    >>> entry.mechanism, entry.columns, entry.epsilon, entry.scale
    ('laplace', ('count',), 0.5, 2.0)
    """

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
    #: the hash of the entry before it (or of the ledger's header), and this entry's
    #: hash chained to it (:mod:`dpframe.core.chain`); empty until a store records it
    previous: str = ""
    hash: str = ""

    def __repr__(self) -> str:
        cost = f"epsilon={self.epsilon:g}" + (f", delta={self.delta:g}" if self.delta else "")
        scale = "" if self.scale is None else f", scale={self.scale:.4g}"
        return (
            f"LedgerEntry({self.mechanism} on {list(self.columns)}, {cost}{scale}, "
            f"{self.composition}, time={self.time[:19]}, id={self.id[:8]})"
        )

    def row(self) -> tuple[Any, ...]:
        """The entry's cells under :data:`ENTRY_COLUMNS`."""
        return (
            self.time[:19],
            self.mechanism,
            ", ".join(self.columns),
            self.epsilon,
            self.delta,
            "" if self.scale is None else self.scale,
            self.composition,
            self.id[:8],
        )

    def _repr_html_(self) -> str:
        return html_table(ENTRY_COLUMNS, [self.row()])

    def content(self) -> dict[str, Any]:
        """What the entry's hash covers: every field but the chain's (JSON-ready)."""
        d = asdict(self)
        d.pop("hash")
        d.pop("previous")
        d["columns"] = list(self.columns)
        return d

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (with the hash)."""
        d = asdict(self)
        d["columns"] = list(self.columns)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LedgerEntry:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["columns"] = tuple(d.get("columns", ()))
        d.setdefault("details", {})
        d.setdefault("previous", "")
        d.setdefault("hash", "")
        return cls(**d)

    def verify(self, where: str) -> None:
        """Check that the entry matches its hash (an entry read from a file's provenance).

        Raises :class:`~dpframe.errors.LedgerIntegrityError` if it does not; an entry
        with no hash (written by dpframe before the hash chain) passes unverified.
        """
        if self.hash and entry_hash(self.previous, self.content()) != self.hash:
            raise LedgerIntegrityError(
                f"{where}: ledger entry {self.id!r} does not match its hash: it was edited"
            )


@dataclass(frozen=True)
class Reservation:
    """Budget held for one job (:meth:`Accountant.reserve`) until it draws or gives it back.

    What the job has drawn under it is recorded by ordinary ledger entries whose
    ``details["reservation"]`` is this ``id``; what is *held* is ``epsilon``/``delta``
    minus that, and counts against every other spend while the reservation is open.
    ``owner`` names the process (:mod:`dpframe.core.processes`), so a reservation of a
    job that was killed can be given back.
    """

    id: str
    created: str
    owner: dict[str, Any]
    note: str
    epsilon: float
    delta: float
    #: the rho held, on a zCDP ledger (``None`` on an (epsilon, delta) ledger)
    rho: float | None = None
    #: on a tight-composition ledger, the privacy-loss descriptions of the plan's charges
    #: (:mod:`dpframe.core.losses`); ``epsilon``/``delta`` are then their plain sums
    losses: tuple[dict[str, Any], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)
