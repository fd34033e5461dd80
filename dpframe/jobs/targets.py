"""Plan by accuracy in a spec: ``error95`` targets on statistics, settled into budgets.

A grouped release's statistic may give ``error95 = 50`` (its 95 % error, in its units; a
quantile's in rows of the group, or in its value's units with ``[accuracy] group_size``)
in place of its ``epsilon`` (or ``rho``). When the spec is read, each such statistic gets
the budget :func:`dpframe.mechanisms.allocation.allocate` finds -- the least meeting every
target (``[accuracy] budget = "least"``, the default) or the best split of a fixed total
(``budget = 1.0``: the targets are weights) -- and the ``[accuracy]`` table records the
targets, the budgets found and the errors they give (the spec is recorded in every output's
provenance). The spec then plans and runs as if those budgets had been written: nothing
else changes. A spec without targets is read exactly as before.

Examples
--------
>>> data = {"release": [{"name": "r", "statistics": [{"stat": "count", "error95": 50}]}]}
>>> data, wanted = take_targets(data)
>>> data["release"][0]["statistics"][0], wanted
({'stat': 'count', 'epsilon': 1.0}, {(0, 0): 50.0})
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpframe.core.accountant import Accountant
from dpframe.core.constraints import LEAST, check
from dpframe.core.units import RECORD, PrivacyUnit
from dpframe.errors import BudgetExceededError, InvalidParameterError
from dpframe.mechanisms.allocation import Allocation, ErrorCurve, allocate, statistic_curve
from dpframe.polars.grouped import statistic

if TYPE_CHECKING:
    from dpframe.jobs.spec import Spec

__all__ = [
    "TARGET",
    "allocation",
    "check_budgets",
    "check_room",
    "curves",
    "recorded",
    "release_unit",
    "settle",
    "spent_on_targets",
    "take_targets",
    "target_key",
]

#: The field of a statistic that states its target.
TARGET = "error95"
#: What a statistic with a target holds until its budget is found (never charged: the
#: spec is settled before it is returned).
_PLACEHOLDER = 1.0
#: The fields a target replaces.
_BUDGETS = ("epsilon", "rho", "sigma")


def take_targets(data: Any) -> tuple[Any, dict[tuple[int, int], float]]:
    """The spec's data with each statistic's ``error95`` taken out (a placeholder budget in
    its place, so the rest validates as usual), and the targets by (release, statistic)
    index. Checks each target (a finite number > 0) and refuses one given with a budget.

    Examples
    --------
    >>> take_targets({"release": [{"statistics": [{"stat": "count", "epsilon": 1}]}]})[1]
    {}
    """
    if not isinstance(data, dict) or not isinstance(data.get("release"), list):
        return data, {}
    found: dict[tuple[int, int], float] = {}
    out = None
    for i, r in enumerate(data["release"]):
        _not_offered(r, f"release[{i}]")
        stats = r.get("statistics") if isinstance(r, dict) else None
        if not isinstance(stats, list):
            continue
        for j, s in enumerate(stats):
            if not isinstance(s, dict) or TARGET not in s:
                continue
            where = f"release[{i}].statistics[{j}]"
            given = [k for k in _BUDGETS if s.get(k) is not None]
            if given:
                raise InvalidParameterError(
                    f"{where}: give error95 (dpframe finds the budget) or "
                    f"{' and '.join(given)}, not both; remove one"
                )
            found[(i, j)] = check(TARGET, s[TARGET], name=f"{where}.{TARGET}")
            if out is None:
                out = copy.deepcopy(data)
            entry = dict(s)
            del entry[TARGET]
            key = "rho" if entry.get("mechanism") == "gaussian" else "epsilon"
            entry[key] = _PLACEHOLDER
            out["release"][i]["statistics"][j] = entry
    return (data if out is None else out), found


def _not_offered(release: Any, where: str) -> None:
    """Refuse ``error95`` on a release, or a column of one, that takes no target."""
    if not isinstance(release, dict):
        return
    parts = [(where, release)] + [
        (f"{where}.columns[{k}]", c)
        for k, c in enumerate(release.get("columns") or ())
        if isinstance(c, dict)
    ]
    for place, part in parts:
        if TARGET in part:
            raise InvalidParameterError(
                f"{place}.{TARGET}: an error95 target is for a grouped release's count, "
                "distinct count, sum or quantile (its statistics); give this release's "
                "epsilon"
            )


def target_key(release: str, name: str) -> str:
    """How the ``[accuracy]`` table names a statistic: ``"<release>/<statistic>"``.

    Examples
    --------
    >>> target_key("by_region", "count")
    'by_region/count'
    """
    return f"{release}/{name}"


def recorded(spec: Spec) -> dict[tuple[int, int], float]:
    """The targets the spec's ``[accuracy]`` table records, by (release, statistic) index
    (empty for a spec without targets).

    Raises
    ------
    InvalidParameterError
        A recorded target names no statistic of the spec.
    """
    acc = spec.accuracy
    if acc is None or not acc.targets:
        return {}
    where = {}
    for i, r in enumerate(spec.release):
        for j, s in enumerate(getattr(r, "statistics", None) or ()):
            where[target_key(r.name, statistic(s).name)] = (i, j)
    unknown = sorted(set(acc.targets) - set(where))
    if unknown:
        raise InvalidParameterError(
            f"accuracy.targets: {unknown} name no statistic of the spec (keys are "
            "'<release>/<statistic>'); give error95 on the statistic instead"
        )
    return {where[k]: t for k, t in acc.targets.items()}


def release_unit(spec: Spec, r: Any) -> PrivacyUnit:
    """Release ``r``'s privacy unit (its own, else the spec's), as its release object
    takes it.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> privacy = SimpleNamespace(unit="household", max_rows=3, max_groups=1)
    >>> release_unit(SimpleNamespace(privacy=privacy), SimpleNamespace()).describe()
    'person "household" (at most 3 rows in each of at most 1 groups)'
    """
    p = spec.privacy
    person = getattr(r, "unit", None) or p.unit
    if person == "record":
        return RECORD
    rows = getattr(r, "max_rows", None)
    groups = getattr(r, "max_groups", None)
    return PrivacyUnit(
        person,
        max_rows=p.max_rows if rows is None else rows,
        max_groups=p.max_groups if groups is None else groups,
    )


def _accounting(spec: Spec) -> str | None:
    """The ledger's accounting the spec's budget makes (``"zcdp"`` for a rho budget)."""
    acct = Accountant(**spec.privacy.ledger_terms())
    return "zcdp" if acct.rho is not None else acct.accounting


def curves(spec: Spec, targets: Mapping[tuple[int, int], float]) -> dict[str, ErrorCurve]:
    """Each targeted statistic's error curve, keyed by :func:`target_key`."""
    acc = spec.accuracy
    group_size = None if acc is None else acc.group_size
    out = {}
    for i, j in targets:
        r = spec.release[i]
        stat = statistic(r.statistics[j])
        key = target_key(r.name, stat.name)
        try:
            c = statistic_curve(
                stat, spec.privacy.neighbours, release_unit(spec, r), group_size=group_size
            )
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"release {r.name!r}: {exc}") from None
        out[key] = ErrorCurve(key, c.currency, c.error, c.units, c.assumption, c.highest)
    return out


def allocation(
    spec: Spec, targets: Mapping[tuple[int, int], float], remaining: float | None = None
) -> Allocation:
    """The budgets of the targeted statistics (see the module docstring)."""
    found = curves(spec, targets)
    goal = dict(zip(found, targets.values(), strict=True))
    budget = LEAST if spec.accuracy is None else spec.accuracy.budget
    return allocate(
        list(found.values()),
        goal,
        budget=budget,
        accounting=_accounting(spec),
        remaining=remaining,
    )


def spent_on_targets(spec: Spec, targets: Mapping[tuple[int, int], float]) -> float:
    """What the targeted statistics cost as the spec holds them, in the ledger's currency
    (epsilons; rhos on a zCDP budget, a Laplace statistic's ``epsilon**2 / 2``)."""
    zcdp = _accounting(spec) == "zcdp"
    total = 0.0
    for i, j in targets:
        s = spec.release[i].statistics[j]
        if s.rho is not None:
            total += float(s.rho)
        else:
            eps = float(s.epsilon or 0.0)
            total += eps * eps / 2 if zcdp else eps
    return total


def check_budgets(spec: Spec, targets: Mapping[tuple[int, int], float], found: Allocation) -> None:
    """Refuse a spec whose targeted statistics' budgets are not the ones their targets
    give (a recorded spec edited by hand): the ``[accuracy]`` table would say what the
    release is not."""
    for (i, j), key in zip(targets, found.budgets, strict=True):
        s = spec.release[i].statistics[j]
        has = s.rho if found.currencies[key] == "rho" else s.epsilon
        if has != found.budgets[key]:
            raise InvalidParameterError(
                f"release {spec.release[i].name!r}: statistic {key!r} has "
                f"{found.currencies[key]} {has!r}, but its error95 target "
                f"{targets[(i, j)]:g} gives {found.budgets[key]!r}; give error95 in place "
                "of its budget (and no accuracy.targets), or its budget without a target"
            )


def check_room(spec: Spec, targets: Mapping[tuple[int, int], float], room: float) -> Allocation:
    """The allocation, refused (:class:`~dpframe.errors.BudgetExceededError`, before any
    charge) when what the ledger has left for the targeted statistics, ``room``, cannot
    meet them: the message names each statistic the best split of ``room`` leaves above its
    target, with the error95 it gets there."""
    what = "rho" if _accounting(spec) == "zcdp" else "epsilon"
    if room <= 0:
        raise BudgetExceededError(
            f"the error95 targets need {what} {spec.accuracy.total if spec.accuracy else 0:g}, "
            f"but the ledger has nothing left for them ({room:g} after the spec's other "
            "releases). Nothing was charged: give a larger budget or a new ledger."
        )
    budget = LEAST if spec.accuracy is None else spec.accuracy.budget
    if budget == LEAST:
        return allocation(spec, targets, remaining=room)
    a = allocation(spec, targets)
    if a.total > room * (1 + 1e-12):
        found = curves(spec, targets)
        best = allocate(
            list(found.values()),
            dict(zip(found, targets.values(), strict=True)),
            budget=room,
            accounting=_accounting(spec),
        )
        raise BudgetExceededError(
            f"accuracy.budget = {budget:g} ({what}) is more than the ledger has left for "
            f"the targeted statistics ({room:g}); there the best split has the worst "
            f"error/target {best.ratio:.4g} ("
            + ", ".join(f"{k!r}: error95 {best.errors[k]:.4g}" for k in best.errors)
            + "). Nothing was charged: lower accuracy.budget or give a larger budget."
        )
    return a


def settle(spec: Spec, data: dict[str, Any], targets: Mapping[tuple[int, int], float]) -> Any:
    """``data`` (the spec's, its targets taken out) with each targeted statistic's budget
    found, and the ``[accuracy]`` table recording the allocation."""
    a = allocation(spec, targets)
    out = copy.deepcopy(data)
    for (i, j), key in zip(targets, a.budgets, strict=True):
        entry = out["release"][i]["statistics"][j]
        entry["rho" if a.currencies[key] == "rho" else "epsilon"] = a.budgets[key]
    table = dict(out.get("accuracy") or {})
    table.update(
        targets=dict(a.targets),
        found=dict(a.budgets),
        errors=dict(a.errors),
        total=a.total,
    )
    if a.assumptions:
        table["assumptions"] = dict(a.assumptions)
    out["accuracy"] = table
    return out
