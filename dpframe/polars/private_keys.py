"""Groups not known in advance: the private key selection of a grouped release.

``dpframe.group_by(frame, keys, private_keys=dpframe.select_keys(epsilon=..., delta=...))``
releases the groups that a private key selection
(:mod:`dpframe.mechanisms.key_selection`) lets out, instead of a public list of them
(``margins=``); with ``margins=`` too, every margin key is released and so are the
extra keys of the data that the selection lets out (a hybrid).

The selection is a **first pass** of the release (as the private bounds of
``lower="auto"``, :meth:`dpframe.polars.release.Release.draw`): planned without data
(:class:`KeysPlan`: its own line in ``summarize()``, with the threshold and the
probability that a key of ``k`` persons is released), charged -- its epsilon *and* its
delta -- before it draws, then the release's statistics are computed over the selected
keys as if they were margins, with their own charges. Its input is the number of
distinct persons holding each candidate key (each row a person at record level; at
person level the persons of the rows each person keeps after the bounding to
``max_groups`` groups). A key value is data: the selection's ledger entry records none,
and the statistics' entries record only how many keys were selected.

Examples
--------
>>> import polars as pl, dpframe
>>> people = pl.DataFrame({"code": ["A"] * 300 + ["B"]})
>>> with dpframe.Accountant(epsilon=2.0, delta=1e-6):
...     release = dpframe.group_by(
...         people, "code", private_keys=dpframe.select_keys(epsilon=1.0, delta=1e-6)
...     ).agg(dpframe.agg.count(epsilon=1.0))
...     table = release.collect()
>>> table["code"].to_list()  # "B" (one person) is released with probability 1e-6
['A']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.advice import advise
from dpframe.core.constraints import check
from dpframe.core.executor import summary_row
from dpframe.core.units import RECORD, PrivacyUnit
from dpframe.errors import BudgetExceededError, InvalidParameterError
from dpframe.mechanisms.key_selection import KeySelectionPlan, plan_key_selection

__all__ = ["KeySelection", "KeysPlan", "select_keys"]

#: the mechanism's name in the ledger and the summary
MECHANISM = "key_selection"
#: the person counts whose release probability the summary states
SHOWN_COUNTS = (1, 2, 5, 10, 20)


@dataclass(frozen=True)
class KeySelection:
    """A private key selection, declared (``dpframe.select_keys``): nothing is read.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.select_keys(epsilon=1.0, delta=1e-6)
    KeySelection(epsilon=1.0, delta=1e-06, method='magic')
    """

    epsilon: float
    delta: float
    method: str = "magic"

    def plan(self, max_groups: int) -> KeySelectionPlan:
        """The kernel's plan for a person in at most ``max_groups`` keys.

        Examples
        --------
        >>> import dpframe
        >>> dpframe.select_keys(epsilon=1.0, delta=1e-6).plan(1).threshold
        28
        """
        return plan_key_selection(
            self.epsilon, self.delta, max_groups=max_groups, method=self.method
        )


def select_keys(*, epsilon: float, delta: float, method: str = "magic") -> KeySelection:
    """Declare a private key selection for ``group_by(..., private_keys=...)``.

    Parameters
    ----------
    epsilon : float
        The selection's epsilon (charged before it draws, beside the statistics').
    delta : float
        Its delta, in (0, 1): about the chance that a key held by one person only is
        released. The accountant needs a delta budget (``Accountant(epsilon=...,
        delta=...)``).
    method : {"magic", "laplace"}, default "magic"
        The kernel's method (:mod:`dpframe.mechanisms.key_selection`): ``"magic"``
        releases every key at least as often as ``"laplace"`` at equal budget.

    Returns
    -------
    KeySelection

    Raises
    ------
    InvalidParameterError
        A bad epsilon, a delta not in (0, 1), an unknown method (named, with the fix).

    Examples
    --------
    >>> import dpframe
    >>> dpframe.select_keys(epsilon=0.5, delta=1e-6, method="laplace").method
    'laplace'
    >>> dpframe.select_keys(epsilon=0.5, delta=0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: delta must be > 0: ...
    """
    selection = KeySelection(check("epsilon", epsilon), check("delta", delta), check_method(method))
    selection.plan(1)  # refuses what the kernel cannot draw with, before any data
    return selection


def check_method(method: Any) -> str:
    """``method`` checked against the kernel's methods."""
    return str(check("key_selection_method", method, name="method"))


def as_selection(private_keys: Any) -> KeySelection | None:
    """``private_keys=`` checked: ``None`` or a :func:`select_keys` declaration."""
    if private_keys is None or isinstance(private_keys, KeySelection):
        return private_keys
    raise InvalidParameterError(
        f"private_keys must be dpframe.select_keys(epsilon=..., delta=...), got "
        f"{type(private_keys).__name__}"
    )


def require_delta(accountant: Any, delta: float) -> None:
    """Refuse, before anything is charged, a key selection on an accountant without a
    delta budget (a zCDP budget refuses the delta charge itself, also before any)."""
    if accountant is None or accountant.rho is not None or accountant.delta > 0:
        return
    raise BudgetExceededError(
        f"delta: selecting keys privately costs delta={delta:g}, and this accountant holds "
        f"no delta budget (epsilon={accountant.epsilon:g}, delta=0); open a budget with "
        "delta: "
        + advise(
            python="dpframe.Accountant(epsilon=..., delta=...)",
            spec="set privacy.budget.delta = ...",
        )
        + " (nothing was charged)",
        budget_epsilon=accountant.epsilon,
        budget_delta=0.0,
        requested_delta=delta,
    )


@dataclass(frozen=True)
class KeysPlan:
    """The selection's first pass (a :class:`~dpframe.core.executor.MechanismPlan`).

    ``check`` and ``draw`` take the int64 counts of distinct persons of the candidate
    keys; ``draw`` returns the boolean mask of the keys released.

    Examples
    --------
    >>> import numpy as np, dpframe
    >>> from dpframe.polars.private_keys import KeysPlan
    >>> plan = KeysPlan(dpframe.select_keys(epsilon=1.0, delta=1e-6).plan(1), ("code",))
    >>> plan.draw(np.array([0, 500]), np.random.default_rng(0)).tolist()
    [False, True]
    """

    kernel: KeySelectionPlan
    keys: tuple[str, ...]
    unit: PrivacyUnit = RECORD
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def charges(self) -> tuple[Charge, ...]:
        k = self.kernel
        return (
            Charge(
                epsilon=k.epsilon,
                delta=k.delta,
                unit=self.unit.person,
                mechanism=f"{MECHANISM}:{k.method}",
                columns=(f"keys:{','.join(self.keys)}",),
                composition="sequential",
                details={
                    **self.details,
                    "pass": "keys",
                    "keys": list(self.keys),
                    "method": k.method,
                    "max_groups": k.max_groups,
                    "threshold": k.threshold,
                    "epsilon_used": k.epsilon_used,
                    "delta_used": float(k.delta_used),
                    **self.unit.bounds(),
                },
            ),
        )

    def released_with(self) -> str:
        """The probability that a key of ``k`` persons is released, for a few ``k``."""
        shown = [n for n in SHOWN_COUNTS if n < self.kernel.threshold]
        said = ", ".join(f"{n}: {self.kernel.probability_released(n):.3g}" for n in shown)
        sure = "surely" if self.kernel.method == "magic" else "with probability"
        at = self.kernel.threshold
        last = (
            f"{at}: 1 ({sure})"
            if self.kernel.method == "magic"
            else f"{at}: {self.kernel.probability_released(at):.3g}"
        )
        return f"{said}, {last}" if said else last

    def summary(self) -> list[dict[str, Any]]:
        k = self.kernel
        return [
            summary_row(
                "keys",
                f"{MECHANISM}:{k.method}",
                k.epsilon,
                delta=k.delta,
                sensitivity=float(k.max_groups),
                note=(
                    f"first pass: selects the keys ({', '.join(self.keys)}) privately; "
                    f"threshold {k.threshold} persons; a key of k persons is released with "
                    f"probability (k: p) {self.released_with()}"
                ),
            )
        ]

    def check(self, exact: np.ndarray) -> None:
        self.kernel.check(exact)

    def draw(self, exact: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.kernel.draw(exact, rng)
