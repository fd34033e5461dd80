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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from dpframe.core.accountant import Charge
from dpframe.core.advice import advise
from dpframe.core.constraints import check
from dpframe.core.executor import MechanismPlan, summary_row
from dpframe.core.units import RECORD, PrivacyUnit
from dpframe.errors import BudgetExceededError, InvalidDataError, InvalidParameterError
from dpframe.mechanisms.key_selection import KeySelectionPlan, plan_key_selection
from dpframe.mechanisms.quantile import quantile_sides
from dpframe.mechanisms.statistics import Part
from dpframe.polars.release import Release

__all__ = ["KeySelection", "KeysPlan", "KeysRelease", "release_keys", "select_keys"]

#: the distinct persons of a key (a person-level selection's one part)
_PERSONS = "__persons"

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


def in_key_order(frame: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """``frame`` sorted by its ``keys`` as every engine sorts them: a categorical key by
    its text (an engine without polars' Enum holds it as text), each key meets the same
    draw on every engine.

    Examples
    --------
    >>> import polars as pl
    >>> f = pl.DataFrame({"k": pl.Series(["b", "a"], dtype=pl.Enum(["b", "a"]))})
    >>> in_key_order(f, ["k"])["k"].to_list()
    ['a', 'b']
    """
    schema = frame.schema
    by = [
        pl.col(k).cast(pl.String) if isinstance(schema[k], pl.Enum | pl.Categorical) else pl.col(k)
        for k in keys
    ]
    return frame.sort(by)


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


# -- the keys as a release of their own ---------------------------------------------------


class KeysRelease(Release[pl.DataFrame]):
    """The private selection of a frame's keys, released as a frame (see
    :func:`release_keys`).

    ``collect()`` returns the selected keys, one row each, sorted; the keys present in the
    data but not selected never leave (not in the output, the ledger, a message or the
    summary).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"code": ["A"] * 100})
    >>> with dpframe.Accountant(epsilon=1.0, delta=1e-6, neighbours="add_remove"):
    ...     release = dpframe.release_keys(df, "code", epsilon=1.0, delta=1e-6)
    ...     release.summarize()["mechanism"].to_list()
    ['key_selection:magic']
    """

    kind = "key selection"
    person_level = True
    substitute_only = ""

    def __init__(
        self,
        frame: Any,
        keys: str | Sequence[str],
        *,
        epsilon: float,
        delta: float,
        method: str = "magic",
        unit: Any = None,
        accountant: Any = None,
        seed: Any = None,
        neighbours: str | None = None,
    ) -> None:
        super().__init__(frame, accountant, seed, neighbours, unit)
        names = [keys] if isinstance(keys, str) else list(keys)
        if not names or not all(isinstance(k, str) for k in names):
            raise InvalidParameterError(
                f"keys must be a column name or a list of them, got {keys!r}"
            )
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"keys lists a column twice: {names}")
        if self.unit.person in names:
            raise InvalidParameterError(
                f"keys: {self.unit.person!r} is the person column; select keys of another"
            )
        self.keys = tuple(names)
        self.method = method
        self.selection = select_keys(epsilon=epsilon, delta=delta, method=method)
        require_delta(self.accountant, self.selection.delta)
        self.plan = self._plan(self.neighbours)
        self.check_schema()
        self._present: pl.DataFrame | None = None  # the keys present: never released

    def _plan(self, neighbours: str) -> KeysPlan:
        # one person changes each of max_groups keys by one (a record: one key); under
        # substitution a removal and an addition: twice as many
        _, changed = quantile_sides(self.unit, neighbours)
        details = {"seeded": self.random.seeded, "neighbours": neighbours}
        return KeysPlan(self.selection.plan(changed), self.keys, self.unit, details)

    def _plans_of(self) -> list[MechanismPlan]:
        return [self.plan]

    def _plans_under(self, neighbours: str) -> list[MechanismPlan]:
        return [self.plan if neighbours == self.neighbours else self._plan(neighbours)]

    def check_schema(self) -> None:
        schema = self.engine.schema()
        missing = [k for k in self.keys if k not in schema]
        if missing:
            raise InvalidParameterError(
                f"keys: column(s) {missing} not in the frame (columns: {list(schema)})"
            )

    def output_types(self) -> dict[str, str]:
        """The released columns and their dtypes: the keys, as in the input."""
        schema = self.engine.schema()
        return {k: str(schema[k]) for k in self.keys}

    def _exact_inputs(self) -> list[Any]:
        self.check_schema()
        keys = list(self.keys)
        if self.unit.is_record:
            agg = self.engine.grouped_parts(keys, [], keys)
            persons = agg["__rows"]
        else:
            parts = [Part(_PERSONS, "distinct")]
            agg = self.engine.bounded_grouped_parts(self.unit, keys, parts, keys, self.random)
            persons = agg[_PERSONS]
        for k in keys:  # a missing key is refused, whatever its count (never grouped)
            bad = agg.get_column(f"__bad__{k}") if f"__bad__{k}" in agg.columns else None
            if agg[k].null_count() or (bad is not None and int(bad.fill_null(0).sum())):
                raise InvalidDataError(
                    f"keys: column {k!r} holds null, NaN or infinite values; drop or fill "
                    "them before selecting keys (a missing key is not a key)"
                )
        # in the keys' order, not the engine's: each key meets the same draw on every
        # engine (Spark's groups come in any order)
        order = in_key_order(agg.select(keys).with_row_index("__at"), keys)["__at"]
        self._present = agg.select(keys)[order]
        return [persons.fill_null(0).cast(pl.Int64).to_numpy()[order.to_numpy()]]

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        present, self._present = self._present, None  # not kept past the release
        if present is None:
            raise InvalidParameterError("select_keys: nothing drawn to finish")
        mask = np.asarray(outputs[0], dtype=bool)
        return present.filter(pl.Series(mask))  # sorted by the keys


def release_keys(
    frame: Any,
    keys: str | Sequence[str],
    *,
    epsilon: float,
    delta: float,
    method: str = "magic",
    unit: Any = None,
    accountant: Any = None,
    seed: Any = None,
) -> KeysRelease:
    """Declare the release of the keys of ``frame`` that enough persons hold, selected
    privately, as a frame.

    Each key present is released with a probability set by its number of distinct
    persons (:meth:`KeySelection.summary` states it for a few counts; every key of
    ``threshold`` persons or more is released), so that one person -- in at most
    ``max_groups`` keys of a person unit, one key a record -- moves the released set's law
    by at most ``(epsilon, delta)``. The selected keys are a DP release: use them as the
    ``margins=`` of several grouped releases (with ``unknown_keys="drop"``), alone or
    joined with public keys, paying for the selection once (``group_by(...,
    private_keys=dpframe.select_keys(...))`` selects inside one release). Needs an
    accountant with a ``delta`` budget. Nothing runs until ``collect()``.

    Parameters
    ----------
    frame : polars.DataFrame, LazyFrame or Spark DataFrame
        The records.
    keys : str or sequence of str
        The key column(s).
    epsilon, delta : float
        What the selection costs.
    method : {"magic", "laplace"}, default "magic"
        :mod:`dpframe.mechanisms.key_selection`'s methods.
    unit : PrivacyUnit, optional
        Default: the accountant's.
    accountant, seed
        As for every release.

    Returns
    -------
    KeysRelease

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> visits = pl.DataFrame({"code": ["A"] * 300 + ["B"] * 200 + ["rare"], "x": 1.0})
    >>> with dpframe.Accountant(epsilon=2.0, delta=1e-6, neighbours="add_remove"):
    ...     codes = dpframe.release_keys(visits, "code", epsilon=1.0, delta=1e-6).collect()
    ...     table = dpframe.group_by(
    ...         visits, "code", margins=codes, unknown_keys="drop"
    ...     ).agg(dpframe.agg.count(epsilon=1.0)).collect()
    >>> table["code"].to_list()
    ['A', 'B']
    """
    return KeysRelease(
        frame,
        keys,
        epsilon=epsilon,
        delta=delta,
        method=method,
        unit=unit,
        accountant=accountant,
        seed=seed,
    )
