"""What a tight-composition ledger composes: each charge's privacy-loss description.

An accountant opened with ``accounting="pld"`` composes its whole ledger by the releases'
privacy-loss distributions (:mod:`dpframe.core.composition`) instead of adding their
epsilons and deltas. It needs, for every entry, a description of a *dominating pair* of
the release (a mapping such as ``{"mechanism": "pure", "epsilon": 0.5}``); this module
derives it from what the charge states, and from nothing else, so no caller can claim a
release costs less than its charge:

============================= ================================================
the charge                    its privacy loss, composed as
============================= ================================================
``epsilon`` (pure epsilon-DP) ``{"mechanism": "pure", "epsilon": e}``: the
                              randomized-response pair, which dominates *every*
                              epsilon-DP mechanism (Kairouz, Oh & Viswanath 2015)
``epsilon``, ``delta > 0``    ``{"mechanism": "approx", "epsilon": e, "delta": d}``:
                              the pair that dominates every (e, d)-DP mechanism
``rho`` (zCDP only)           ``{"mechanism": "zcdp", "rho": r}`` (``r`` rounded up
                              to the decimal the entry records)
============================= ================================================

The ledger entry records its description under ``details["composes_as"]`` (covered by
the hash chain, like every detail), and a reader checks it is the one the entry's own
epsilon, delta and rho give (:func:`loss_of_entry`): an entry cannot be made to compose
as less than it was charged.

A reservation of such a ledger holds the descriptions of its plan's charges; what it
still holds is those not yet matched by an entry drawn from it (:func:`held`). A
reservation of a :class:`~dpframe.core.records.Budget` holds one description marked as a
*box* (:func:`boxed`): the releases drawn from it stand as that one (epsilon, delta)
release while they compose within it (:func:`within`), the pair dominating every
mechanism that is (epsilon, delta)-DP; beyond it, they compose beside it.

Examples
--------
>>> import dpframe
>>> from dpframe.core.losses import loss_of_charge
>>> loss_of_charge(dpframe.Charge(epsilon=0.5))
{'mechanism': 'pure', 'epsilon': 0.5}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from dpframe.core.budget import exact
from dpframe.core.chain import canonical
from dpframe.core.composition import delta_for_epsilon, epsilon_for_delta
from dpframe.core.records import Charge, LedgerEntry, Reservation
from dpframe.errors import LedgerIntegrityError

__all__ = [
    "BOX_KEY",
    "LOSS_KEY",
    "box_of",
    "boxed",
    "composed_delta",
    "composed_epsilon",
    "held",
    "loss_of_charge",
    "loss_of_entry",
    "within",
]

#: the key of a tight-composition ledger entry's ``details`` that holds what it composes as
LOSS_KEY = "composes_as"
#: the key marking a reservation's one description as a box (a Budget's amount)
BOX_KEY = "box"


def loss_of_charge(charge: Charge, rho: float | None = None) -> dict[str, Any]:
    """The privacy-loss description a charge composes as (the module's table).

    ``rho`` is the rounded rho the ledger records for a zCDP charge (default: the
    charge's own).

    Examples
    --------
    >>> import dpframe
    >>> loss_of_charge(dpframe.Charge(epsilon=0.2, delta=1e-7))
    {'mechanism': 'approx', 'epsilon': 0.2, 'delta': 1e-07}
    """
    if charge.rho is not None:
        return {"mechanism": "zcdp", "rho": float(charge.rho if rho is None else rho)}
    if charge.delta > 0:
        return {
            "mechanism": "approx",
            "epsilon": float(charge.epsilon),
            "delta": float(charge.delta),
        }
    return {"mechanism": "pure", "epsilon": float(charge.epsilon)}


def loss_of_entry(entry: LedgerEntry, rho_key: str = "rho") -> dict[str, Any]:
    """The description an entry of a tight-composition ledger composes as, checked to be
    the one its epsilon, delta and rho give (refused otherwise: the ledger was forged).

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=2.0, delta=1e-6, accounting="pld")
    >>> loss_of_entry(acct.spend(0.5, mechanism="laplace"))
    {'mechanism': 'pure', 'epsilon': 0.5}
    """
    rho = entry.details.get(rho_key)
    charged = (
        {"mechanism": "zcdp", "rho": float(rho)}
        if rho is not None and entry.epsilon == 0 and entry.delta == 0
        else loss_of_charge(Charge(epsilon=entry.epsilon, delta=entry.delta))
    )
    recorded = entry.details.get(LOSS_KEY)
    if recorded != charged:
        raise LedgerIntegrityError(
            f"ledger entry {entry.id}: its privacy loss {recorded!r} is not the one its "
            f"charge gives ({charged!r}); the ledger was edited. Nothing was charged."
        )
    return charged


def held(r: Reservation, drawn: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What reservation ``r`` still holds: its descriptions less those ``drawn`` from it
    (matched one for one; a drawn release it did not plan holds nothing back).

    Examples
    --------
    >>> from dpframe.core.records import Reservation
    >>> pure = {"mechanism": "pure", "epsilon": 0.5}
    >>> r = Reservation("r", "now", {}, "", 1.0, 0.0, losses=(pure, pure))
    >>> held(r, [pure])
    [{'mechanism': 'pure', 'epsilon': 0.5}]
    """
    left = Counter(canonical(x) for x in drawn)
    out = []
    for x in r.losses or ():
        key = canonical(x)
        if left[key]:
            left[key] -= 1
        else:
            out.append(dict(x))
    return out


def boxed(loss: Mapping[str, Any]) -> dict[str, Any]:
    """``loss`` marked as a box: what the releases drawn from a Budget reservation must
    compose within.

    Examples
    --------
    >>> boxed({"mechanism": "pure", "epsilon": 0.6})
    {'mechanism': 'pure', 'epsilon': 0.6, 'box': True}
    """
    return {**loss, BOX_KEY: True}


def box_of(r: Reservation) -> dict[str, Any] | None:
    """The (epsilon, delta) release a Budget reservation's draws stand as (its box, the
    mark removed), or ``None`` for a reservation of charges.

    Examples
    --------
    >>> from dpframe.core.records import Reservation
    >>> box = boxed({"mechanism": "pure", "epsilon": 0.6})
    >>> box_of(Reservation("r", "now", {}, "", 0.6, 0.0, losses=(box,)))
    {'mechanism': 'pure', 'epsilon': 0.6}
    """
    if r.losses is None or len(r.losses) != 1 or r.losses[0].get(BOX_KEY) is not True:
        return None
    return {k: v for k, v in r.losses[0].items() if k != BOX_KEY}


def within(drawn: Sequence[Mapping[str, Any]], box: Mapping[str, Any]) -> bool:
    """Whether ``drawn`` compose within ``box`` (an (epsilon, delta) description): their
    composition's delta at its epsilon is at most its delta.

    Examples
    --------
    >>> pure = {"mechanism": "pure", "epsilon": 0.25}
    >>> within([pure, pure], {"mechanism": "pure", "epsilon": 0.6})
    True
    >>> within([pure] * 3, {"mechanism": "pure", "epsilon": 0.6})
    False
    """
    return composed_delta(drawn, box["epsilon"]) <= exact(box.get("delta", 0.0))


def composed_epsilon(losses: Sequence[Mapping[str, Any]], delta: float) -> float:
    """The epsilon, at ``delta``, of composing ``losses`` (0 for none; never below the
    truth: :func:`dpframe.core.composition.epsilon_for_delta`).

    Examples
    --------
    >>> round(composed_epsilon([{"mechanism": "pure", "epsilon": 0.1}] * 100, 1e-6), 2)
    4.78
    """
    return epsilon_for_delta(list(losses), delta) if losses else 0.0


def composed_delta(losses: Sequence[Mapping[str, Any]], epsilon: float) -> Fraction:
    """The delta, at ``epsilon``, of composing ``losses``, as the exact value of the float
    :func:`dpframe.core.composition.delta_for_epsilon` answers (0 for none).

    Examples
    --------
    >>> composed_delta([{"mechanism": "pure", "epsilon": 0.1}] * 30, 3.0)
    Fraction(0, 1)
    """
    return exact(delta_for_epsilon(list(losses), epsilon)) if losses else Fraction(0)
