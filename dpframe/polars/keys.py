"""Keys not known in advance, selected privately: ``dpframe.select_keys``.

A grouped release needs the public list of its groups (``margins=``): a key that only the
data holds must never appear for free. :func:`select_keys` releases the keys of a frame
that enough distinct persons hold, with the exact selection of
:mod:`dpframe.mechanisms.key_selection` (magic partition selection by default), charged
``(epsilon, delta)``. Its output, a frame of keys, is a differentially private release:
public from then on, so it serves as the margins of the grouped releases that follow,
which are charged as usual (a separate charge; unselected keys' records are dropped with
``unknown_keys="drop"``). With public margins too, the keys to release are their union
(the hybrid: every public key, plus the ones the data shows privately).

Who counts: with a record unit each row is a person (a row holds one key); with a person
unit a person counts once in each key and, bounded by the rule of
:mod:`dpframe.engines.bounding_rule`, in at most ``max_groups`` keys, so one person changes
at most ``max_groups`` keys' counts by one (twice that under substitution: a removal and an
addition) and the selection is planned for that many.

Examples
--------
>>> import polars as pl, dpframe
>>> visits = pl.DataFrame({"code": ["A"] * 300 + ["B"] * 200 + ["rare"]})
>>> with dpframe.Accountant(epsilon=1.0, delta=1e-6, neighbours="add_remove"):
...     keys = dpframe.select_keys(visits, "code", epsilon=1.0, delta=1e-6).collect()
>>> keys["code"].to_list()
['A', 'B']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from dpframe.core.executor import MechanismPlan, summary_row
from dpframe.core.records import Charge
from dpframe.core.units import RECORD, PrivacyUnit
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.key_selection import KeySelectionPlan, plan_key_selection
from dpframe.mechanisms.statistics import Part
from dpframe.polars.release import Release

__all__ = ["KeySelection", "KeySelectionRelease", "select_keys"]

#: the distinct persons of a key (a person-level selection's one part)
_PERSONS = "__persons"


@dataclass(frozen=True)
class KeySelection:
    """The executor's plan of a key selection (a
    :class:`~dpframe.core.executor.MechanismPlan`): the kernel's plan, and what its
    charge names. ``check`` / ``draw`` take the distinct persons of each key present.

    Examples
    --------
    >>> from dpframe.mechanisms.key_selection import plan_key_selection
    >>> plan = KeySelection(plan_key_selection(1.0, 1e-6), ("code",))
    >>> plan.charges[0].epsilon, plan.charges[0].delta, plan.charges[0].mechanism
    (1.0, 1e-06, 'key_selection_magic')
    """

    selection: KeySelectionPlan
    keys: tuple[str, ...]
    unit: PrivacyUnit = RECORD
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def mechanism(self) -> str:
        return f"key_selection_{self.selection.method}"

    @property
    def charges(self) -> tuple[Charge, ...]:
        s = self.selection
        return (
            Charge(
                epsilon=s.epsilon,
                delta=s.delta,
                unit=self.unit.person,
                mechanism=self.mechanism,
                columns=(f"keys:{','.join(self.keys)}",),
                composition="sequential",
                details={
                    **self.details,
                    "pass": "keys",
                    "keys": list(self.keys),
                    "method": s.method,
                    "changed_keys": s.max_groups,
                    "threshold": s.threshold,
                    "epsilon_used": s.epsilon_used,
                    "delta_used": float(s.delta_used),
                    **self.unit.bounds(),
                },
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        s = self.selection
        odds = ", ".join(
            f"{k}: {s.probability_released(k):.3g}"
            for k in sorted({1, 2, 5, 10, 20, 50, s.threshold})
            if k <= s.threshold
        )
        return [
            summary_row(
                f"keys:{','.join(self.keys)}",
                self.mechanism,
                s.epsilon,
                delta=s.delta,
                note=(
                    f"a key is released with a probability set by its distinct persons "
                    f"k (k: probability) {odds}; every key of {s.threshold} persons or "
                    f"more; a person changes at most {s.max_groups} keys"
                ),
            )
        ]

    def check(self, exact: np.ndarray) -> None:
        self.selection.check(exact)

    def draw(self, exact: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.selection.draw(exact, rng)


class KeySelectionRelease(Release[pl.DataFrame]):
    """The private selection of a frame's keys (see :func:`select_keys`).

    ``collect()`` returns the selected keys, one row each, sorted; the keys present in the
    data but not selected never leave (not in the output, the ledger, a message or the
    summary).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"code": ["A"] * 100})
    >>> with dpframe.Accountant(epsilon=1.0, delta=1e-6, neighbours="add_remove"):
    ...     release = dpframe.select_keys(df, "code", epsilon=1.0, delta=1e-6)
    ...     release.summarize()["mechanism"].to_list()
    ['key_selection_magic']
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
        self._epsilon, self._delta = epsilon, delta
        self.plan = self._plan(self.neighbours)
        self.check_schema()
        self._present: pl.DataFrame | None = None  # the keys present: never released

    def _plan(self, neighbours: str) -> KeySelection:
        # one person changes each of max_groups keys by one (a record: one key); under
        # substitution a removal and an addition: twice as many
        changed = self.unit.max_groups if not self.unit.is_record else 1
        if neighbours == "substitute":
            changed *= 2
        selection = plan_key_selection(
            self._epsilon, self._delta, max_groups=changed, method=self.method
        )
        details = {"seeded": self.random.seeded, "neighbours": neighbours}
        return KeySelection(selection, self.keys, self.unit, details)

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
        order = agg.select(keys).with_row_index("__at").sort(keys)["__at"]
        self._present = agg.select(keys)[order]
        return [persons.fill_null(0).cast(pl.Int64).to_numpy()[order.to_numpy()]]

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        present, self._present = self._present, None  # not kept past the release
        if present is None:
            raise InvalidParameterError("select_keys: nothing drawn to finish")
        mask = np.asarray(outputs[0], dtype=bool)
        return present.filter(pl.Series(mask))  # sorted by the keys


def select_keys(
    frame: Any,
    keys: str | Sequence[str],
    *,
    epsilon: float,
    delta: float,
    method: str = "magic",
    unit: Any = None,
    accountant: Any = None,
    seed: Any = None,
) -> KeySelectionRelease:
    """Declare the private selection of the keys of ``frame`` that enough persons hold.

    Each key present is released with a probability set by its number of distinct
    persons (:meth:`KeySelection.summary` states it for a few counts; every key of
    ``threshold`` persons or more is released), so that one person -- in at most
    ``max_groups`` keys of a person unit, one key a record -- moves the released set's law
    by at most ``(epsilon, delta)``. The selected keys are a DP release: use them as the
    ``margins=`` of grouped releases (with ``unknown_keys="drop"``), alone or joined with
    public keys. Needs an accountant with a ``delta`` budget. Nothing runs until
    ``collect()``.

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
    KeySelectionRelease

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> visits = pl.DataFrame({"code": ["A"] * 300 + ["B"] * 200 + ["rare"], "x": 1.0})
    >>> with dpframe.Accountant(epsilon=2.0, delta=1e-6, neighbours="add_remove"):
    ...     codes = dpframe.select_keys(visits, "code", epsilon=1.0, delta=1e-6).collect()
    ...     table = dpframe.group_by(
    ...         visits, "code", margins=codes, unknown_keys="drop"
    ...     ).agg(dpframe.agg.count(epsilon=1.0)).collect()
    >>> table["code"].to_list()
    ['A', 'B']
    """
    return KeySelectionRelease(
        frame,
        keys,
        epsilon=epsilon,
        delta=delta,
        method=method,
        unit=unit,
        accountant=accountant,
        seed=seed,
    )
