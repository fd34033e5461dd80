"""The privacy unit: whom a release protects, and how far one of them can move it.

By default one row of the input is one person (``PrivacyUnit()``, the *record* unit).
With a person identifier (``PrivacyUnit("person_id", max_rows=3, max_groups=2)``) the
guarantee is about people: neighbouring datasets differ in *all* the rows of one
person. Before any aggregation each person's contributions are bounded -- at most
``max_groups`` groups per person and at most ``max_rows`` rows per person in each group,
chosen at random with the secure source (never by file order; :mod:`dpframe.engines`
does the choosing) -- and every sensitivity scales by the bounds, as written here
(``docs/privacy-units.md``; brute-force checks in ``tests/core/test_units.py``).

The record unit is the special case ``max_rows = max_groups = 1`` of every formula
below, so the same functions serve both.

Conventions: a grouped release is a vector with one entry per group. Under
``"add_remove"`` one person (all their kept rows) is added or removed; under
``"substitute"`` one person's kept rows are replaced by another person's kept rows (any
number of them, within the same bounds). Values are clipped to ``[lower, upper]``
*per row* before they are summed.

Examples
--------
>>> from dpframe.core.units import PrivacyUnit, count_sensitivity, sum_sensitivity
>>> unit = PrivacyUnit("person_id", max_rows=2, max_groups=3)
>>> count_sensitivity(unit, "add_remove"), count_sensitivity(unit, "add_remove", "l2")
(6.0, 3.4641016151377544)
>>> sum_sensitivity(0, 10, PrivacyUnit(), "substitute")   # one row: 2 max(|lower|, |upper|)
20.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpframe.core.advice import advise
from dpframe.core.constraints import NORMS, check, check_bounds
from dpframe.errors import InvalidDataError, InvalidParameterError

__all__ = [
    "BOUNDS",
    "NORMS",
    "RECORD",
    "PrivacyUnit",
    "as_unit",
    "changed_groups",
    "check_person_rows",
    "count_sensitivity",
    "distinct_sensitivity",
    "missing_bounds",
    "per_row_epsilon",
    "pram_rows",
    "recorded_unit",
    "sum_sensitivity",
]

#: A bound not given to :class:`PrivacyUnit` (1 for the record unit; refused for a person)
_UNSTATED: Any = object()


#: The contribution bounds a person-level release must state: a grouped release both, a
#: row-wise release (PRAM, no groups) ``("max_rows",)``. Never a silent default: a bound
#: of 1 drops every row but one a person (a count of person-years becomes a count of
#: persons), a large one multiplies the noise.
BOUNDS = ("max_rows", "max_groups")


def missing_bounds(
    person: str,
    given: dict[str, Any],
    needs: tuple[str, ...] = BOUNDS,
) -> str | None:
    """What is wrong when a person-level release does not state its bounds (``None``:
    nothing). The one rule for functions, ``.dp`` methods, accountants' releases and the
    spec (the fix in the entry point's words, :func:`dpframe.core.advice.advise`).

    Examples
    --------
    >>> print(missing_bounds("pid", {"max_rows": 2, "max_groups": None}))  # doctest: +ELLIPSIS
    max_groups: a release under the person unit 'pid' must state its contribution bounds...
    >>> missing_bounds("pid", {"max_rows": 2}, needs=("max_rows",)) is None
    True
    """
    missing = [b for b in needs if given.get(b) is None]
    if not missing:
        return None
    how = {
        "max_rows": "max_rows = the rows a person keeps in each group",
        "max_groups": "max_groups = the groups a person keeps",
    }
    return (
        f"{'/'.join(missing)}: a release under the person unit {person!r} must state its "
        f"contribution bounds ({'; '.join(how[b] for b in needs)}); there is no default. "
        "Choose them from public knowledge of how the data is made (e.g. a high quantile of "
        "rows per person in a public or earlier dataset, never this one's raw rows): rows "
        "beyond a bound are dropped (bias down), and the noise grows with each bound. "
        + advise(
            spec=f"Set {' and '.join(f'{b} = ...' for b in needs)} in the release or in [privacy] ",
            python=f"Pass {', '.join(f'{b}=...' for b in needs)} with unit=, or to the accountant ",
        )
        + "(docs/privacy-units.md). Nothing was spent."
    )


@dataclass(frozen=True)
class PrivacyUnit:
    """Whom a release protects: one row (``person=None``) or one person's rows.

    Parameters
    ----------
    person : str or None
        The column that identifies a person; ``None`` (the default): one row is one
        person.
    max_rows : int
        With a person column: the rows a person keeps in each group (the rows a person
        keeps in all, for a release without groups). Required with a person column
        (:func:`missing_bounds`); 1 for the record unit.
    max_groups : int
        With a person column: the groups a person keeps. A grouped release refuses a
        unit that does not state it (:attr:`stated`); 1 where not given (a release
        without groups, the record unit).

    Examples
    --------
    >>> PrivacyUnit().is_record
    True
    >>> PrivacyUnit("patient", max_rows=5, max_groups=1).describe()
    'person "patient" (at most 5 rows in each of at most 1 groups)'
    """

    person: str | None = None
    max_rows: int = _UNSTATED
    max_groups: int = _UNSTATED
    #: the bounds given (not defaulted): a release needing one that is not here refuses
    stated: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.person is not None and (not isinstance(self.person, str) or not self.person):
            raise InvalidParameterError(
                f"unit: the person identifier must be a column name (a non-empty string), "
                f"got {self.person!r}; pass None for one row per person"
            )
        stated = {
            b: check(b, getattr(self, b)) for b in BOUNDS if getattr(self, b) is not _UNSTATED
        }
        if self.person is not None:  # max_groups: checked by the releases that have groups
            problem = missing_bounds(self.person, stated, ("max_rows",))
            if problem is not None:
                raise InvalidParameterError(problem)
        object.__setattr__(self, "stated", tuple(stated))
        for b in BOUNDS:
            object.__setattr__(self, b, stated.get(b, 1))
        if self.person is None and (self.max_rows, self.max_groups) != (1, 1):
            fix = advise(python="pass unit='<person column>'", spec="set unit = '<person column>'")
            raise InvalidParameterError(
                f"max_rows={self.max_rows}, max_groups={self.max_groups}: contribution "
                f"bounds need a person identifier; {fix} (with one row per person the "
                "bounds are 1)"
            )

    @property
    def is_record(self) -> bool:
        """True when one row is one person (no identifier, no bounding)."""
        return self.person is None

    def describe(self) -> str:
        """The unit in words (for plans, ledgers and errors)."""
        if self.person is None:
            return "record (one row is one person)"
        return (
            f'person "{self.person}" (at most {self.max_rows} rows in each of at most '
            f"{self.max_groups} groups)"
        )

    def bounds(self) -> dict[str, Any]:
        """The contribution bounds, JSON-ready, for a ledger entry's details (empty for the
        record unit; the accountant records the person column itself)."""
        if self.person is None:
            return {}
        return {"max_rows": self.max_rows, "max_groups": self.max_groups}


#: One row is one person.
RECORD = PrivacyUnit()


def as_unit(
    unit: Any = None,
    max_rows: Any = None,
    max_groups: Any = None,
    *,
    needs: tuple[str, ...] = BOUNDS,
) -> PrivacyUnit:
    """A :class:`PrivacyUnit` from the arguments users write (``unit="person_id"``).

    ``unit`` may be ``None`` or ``"record"`` (one row per person), a column name, or a
    :class:`PrivacyUnit` (then the bounds must not be passed again). With a column name
    the bounds in ``needs`` must be given (:func:`missing_bounds`); a bound outside
    ``needs`` defaults to 1 (``max_groups`` of a release without groups). An accountant
    passes ``needs=()``: its bounds are only defaults for its releases, which still need
    them stated (:attr:`dpframe.Accountant.stated_bounds`).

    Examples
    --------
    >>> as_unit("pid", max_rows=2, max_groups=1).max_rows
    2
    >>> as_unit().is_record
    True
    >>> as_unit("pid")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: max_rows/max_groups: a release under the person ...
    """
    if isinstance(unit, PrivacyUnit):
        if max_rows is not None or max_groups is not None:
            raise InvalidParameterError(
                "max_rows/max_groups: the unit already holds its bounds; pass either a "
                "PrivacyUnit or unit='<column>' with max_rows=..., max_groups=..."
            )
        if unit.person is not None:
            stated = {b: getattr(unit, b) for b in unit.stated}
            problem = missing_bounds(unit.person, stated, needs)
            if problem is not None:
                raise InvalidParameterError(problem)
        return unit
    person = None if unit is None or unit == "record" else unit
    if isinstance(person, str) and person:
        given = {"max_rows": max_rows, "max_groups": max_groups}
        for b, v in given.items():  # a bad bound is named as such, before a missing one
            if v is not None:
                check(b, v)
        problem = missing_bounds(person, given, needs)
        if problem is not None:
            raise InvalidParameterError(problem)
    rows = 1 if max_rows is None else max_rows
    groups = 1 if max_groups is None else max_groups
    return PrivacyUnit(person, rows, groups)


def changed_groups(unit: PrivacyUnit, neighbours: str, groups: int | None = None) -> int:
    """How many entries of a per-group vector one person can change.

    ``max_groups`` under add/remove, twice that under substitution (the old person's
    groups and the new person's); never more than ``groups``, the vector's length, when
    given.

    Examples
    --------
    >>> changed_groups(PrivacyUnit(), "substitute"), changed_groups(PrivacyUnit(), "add_remove")
    (2, 1)
    """
    check("neighbours", neighbours)
    k = unit.max_groups * (2 if neighbours == "substitute" else 1)
    return k if groups is None else min(k, groups)


def count_sensitivity(unit: PrivacyUnit, neighbours: str, norm: str = "l1") -> float:
    """Sensitivity of the vector of per-group counts of kept rows.

    A person changes at most ``G = max_groups`` counts by at most ``R = max_rows`` each
    under add/remove (l1 ``G R``, l2 ``sqrt(G) R``), and at most ``2G`` counts under
    substitution (l1 ``2 G R``, l2 ``sqrt(2G) R``: the old and the new person's groups
    may be disjoint; where they overlap a count changes by at most ``R``).

    Examples
    --------
    >>> one = PrivacyUnit()
    >>> count_sensitivity(one, "substitute"), count_sensitivity(one, "add_remove")
    (2.0, 1.0)
    """
    check("norm", norm)
    k = changed_groups(unit, neighbours)
    r = float(unit.max_rows)
    return k * r if norm == "l1" else math.sqrt(k) * r


def distinct_sensitivity(unit: PrivacyUnit, neighbours: str, norm: str = "l1") -> float:
    """Sensitivity of the vector of per-group numbers of distinct persons among the kept
    rows (``dpframe.agg.count_distinct``).

    After bounding a person is in at most ``G = max_groups`` groups, and counts once in
    each however many rows they keep there (``max_rows`` plays no part): a person changes
    at most ``G`` entries by 1 under add/remove (l1 ``G``, l2 ``sqrt(G)``), and at most
    ``2G`` entries by 1 under substitution (l1 ``2G``, l2 ``sqrt(2G)``: the old person
    leaves their groups, the new one enters theirs; where the two share a group its count
    does not move). That is :func:`changed_groups`, and its square root. The other
    persons' kept groups do not change (a person's kept rows depend on their own rows
    only: :mod:`dpframe.engines.bounding_rule`). Brute-forced in
    ``tests/core/test_distinct_sensitivity.py``.

    Examples
    --------
    >>> unit = PrivacyUnit("patient", max_rows=5, max_groups=3)
    >>> distinct_sensitivity(unit, "add_remove"), distinct_sensitivity(unit, "substitute")
    (3.0, 6.0)
    >>> distinct_sensitivity(unit, "add_remove", "l2") == 3 ** 0.5
    True
    """
    check("norm", norm)
    k = changed_groups(unit, neighbours)
    return float(k) if norm == "l1" else math.sqrt(k)


def sum_sensitivity(
    lower: float, upper: float, unit: PrivacyUnit, neighbours: str, norm: str = "l1"
) -> float:
    """Sensitivity of the vector of per-group sums of kept values clipped to the bounds.

    With ``M = max(|lower|, |upper|)``, ``R = max_rows``, ``G = max_groups``: a person's
    sum in one group is a sum of 1 to ``R`` values in ``[lower, upper]``, at most ``R M``
    in absolute value.

    * add/remove: l1 ``G R M``, l2 ``sqrt(G) R M``;
    * substitute: l1 ``2 G R M``; l2 ``sqrt(G) max(W, sqrt(2) R M)`` where ``W`` is the
      width of the set of a person's possible sums in one group,
      ``max(U, R U) - min(L, R L)`` (two people in the same group), against ``R M`` each
      in two different groups.

    With one row per person these are the familiar ``M`` / ``2M`` (l1) and ``M`` /
    ``max(upper - lower, sqrt(2) M)`` (l2).

    Examples
    --------
    >>> sum_sensitivity(-1, 1, PrivacyUnit(), "substitute", "l2")
    2.0
    >>> sum_sensitivity(0, 1, PrivacyUnit("p", max_rows=2, max_groups=2), "add_remove")
    4.0
    """
    lo, hi = check_bounds(lower, upper)
    check("neighbours", neighbours)
    check("norm", norm)
    r, g = float(unit.max_rows), float(unit.max_groups)
    m = max(abs(lo), abs(hi))
    if neighbours == "add_remove":
        return g * r * m if norm == "l1" else math.sqrt(g) * r * m
    if norm == "l1":
        return 2.0 * g * r * m
    width = max(hi, r * hi) - min(lo, r * lo)
    return math.sqrt(g) * max(width, math.sqrt(2.0) * r * m)


def recorded_unit(details: dict[str, Any]) -> str:
    """A ledger entry's privacy unit in words, from its ``details``: the person column the
    accountant recorded with the bounds the release recorded, or ``"record"`` (an entry
    without a person column, as every entry before person units, protects one row).

    Examples
    --------
    >>> recorded_unit({"unit": "household", "max_rows": 3, "max_groups": 1})
    'person "household" (max_rows=3, max_groups=1)'
    >>> recorded_unit({"unit": "pid", "rows_per_person": 2}), recorded_unit({})
    ('person "pid" (max_rows=2)', 'record')
    """
    person = details.get("unit")
    if not isinstance(person, str):
        return "record"
    bounds = {
        "max_rows": details.get("max_rows", details.get("rows_per_person")),
        "max_groups": details.get("max_groups"),
    }
    said = ", ".join(f"{k}={v}" for k, v in bounds.items() if v is not None)
    return f'person "{person}"' + (f" ({said})" if said else "")


def pram_rows(unit: PrivacyUnit) -> int:
    """How many of one person's rows a PRAM release randomizes, at most: its privacy loss
    is this many times the matrix's epsilon.

    PRAM randomizes every row independently with one epsilon-DP matrix, so a person whose
    ``r`` rows all change value moves the output's likelihood by at most ``e**(r eps)``
    (basic composition over the person's rows, tight when every row changes). Under a
    person unit the released file keeps one row per input row, as under the record unit:
    what it protects is the *values* of a person's rows, not how many rows the person has
    (that is public, like the number of records); a person with more than ``max_rows``
    rows is refused (:func:`check_person_rows`), never silently cut.

    Examples
    --------
    >>> pram_rows(PrivacyUnit()), pram_rows(PrivacyUnit("pid", max_rows=3))
    (1, 3)
    """
    return 1 if unit.is_record else unit.max_rows


def per_row_epsilon(epsilon: float, rows: int) -> float:
    """The epsilon of each of a person's ``rows`` rows when a row-wise release (PRAM) is
    charged ``epsilon`` for all of them: the largest float ``e`` with ``rows * e <=
    epsilon`` exactly (never a hair above, so the charge stays ``epsilon``).

    Examples
    --------
    >>> per_row_epsilon(1.0, 1), per_row_epsilon(1.0, 4)
    (1.0, 0.25)
    >>> from fractions import Fraction
    >>> 3 * Fraction(per_row_epsilon(0.1, 3)) <= Fraction(0.1)
    True
    """
    rows = int(rows)
    if rows < 1:
        raise InvalidParameterError(f"rows must be an integer >= 1, got {rows!r}")
    e = epsilon / rows
    while rows * Fraction(e) > Fraction(epsilon):
        e = math.nextafter(e, 0.0)
    return e


def check_person_rows(
    largest: int, unit: PrivacyUnit, release: str, *, after_charge: str | None = None
) -> None:
    """Refuse a row-wise release under ``unit`` when a person has more rows than
    ``max_rows``: the release randomizes *every* row and is charged for ``max_rows`` rows
    a person (:func:`pram_rows`), so a person with more would be under-charged.

    Checked twice: before the charge, on the input; and after it, on the rows the
    randomizing pass actually wrote (``after_charge``: what the message says of the
    charge then), since a lazy input may read differently the second time.

    Examples
    --------
    >>> check_person_rows(3, PrivacyUnit("pid", max_rows=3), "PRAM")
    >>> try:
    ...     check_person_rows(4, PrivacyUnit("pid", max_rows=3), "PRAM")
    ... except InvalidDataError as exc:
    ...     print(str(exc)[:56])
    unit: a person (column 'pid') has 4 rows, more than max_
    """
    if unit.is_record or largest <= unit.max_rows:
        return
    raise InvalidDataError(
        f"unit: a person (column {unit.person!r}) has {largest} rows, more than "
        f"max_rows={unit.max_rows}; {release} randomizes every row of a person and is "
        f"charged for max_rows rows a person, so raise max_rows to at least {largest} (the "
        "charge stays epsilon, each row gets epsilon / max_rows) or keep at most max_rows "
        "rows a person in the input. " + (after_charge or "Nothing was charged.")
    )
