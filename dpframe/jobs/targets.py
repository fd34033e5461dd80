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

Every release kind takes a target where its error is data-free given public facts: a
proportions or covariance release on itself (its ``epsilon``; at its ``n``, else the
input's row count), a PRAM column on itself (the 95 % error of a share estimated from the
release, at the input's row count); each kind's class declares where
(``accuracy_parts``) and how (``error_curve``). A mean or proportion statistic takes one
at a stated ``group_size``; ``relative = true`` states a target as a fraction of the
largest value a group of ``group_size`` rows can give
(:func:`dpframe.mechanisms.allocation.relative_scale`). ``share = 0.2`` in place of a
target gives a part that share of the release-wide budget, fixed before the targets are
allocated. Each assumption is recorded and printed by the plan. A target settled at the
input's row count is checked again by the plan on the input it reads: another row count
gives other budgets, and is refused.

Examples
--------
>>> data = {"release": [{"name": "r", "statistics": [{"stat": "count", "error95": 50}]}]}
>>> data, wanted = take_targets(data)
>>> data["release"][0]["statistics"][0], wanted[(0, "statistics", 0)].error95
({'stat': 'count', 'epsilon': 1.0}, 50.0)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe.core.accountant import Accountant
from dpframe.core.constraints import LEAST, check
from dpframe.core.randomness import RandomSource, derived_source
from dpframe.core.units import RECORD, PrivacyUnit
from dpframe.errors import BudgetExceededError, InvalidParameterError
from dpframe.jobs.kinds import KINDS
from dpframe.mechanisms.allocation import (
    Allocation,
    ErrorCurve,
    allocate,
    relative_scale,
    statistic_curve,
)
from dpframe.polars.grouped import statistic

if TYPE_CHECKING:
    from dpframe.jobs.spec import Spec
    from dpframe.polars.release import SpecContext

__all__ = [
    "TARGET",
    "Wanted",
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

#: The field of a statistic (or release, or PRAM column) that states its target.
TARGET = "error95"
#: The field that asks for a share of the release-wide budget instead.
SHARE = "share"
#: What a part with a target holds until its budget is found (never charged: the
#: spec is settled before it is returned).
_PLACEHOLDER = 1.0
#: The fields a target replaces.
_BUDGETS = ("epsilon", "rho", "sigma")
#: Where in a release a target may stand: on the release itself (its ``epsilon``), on
#: each of its ``statistics`` (a grouped release) or its ``columns`` (PRAM).
_WHOLE = "release"

#: A target's place: (release index, part, index in the part) -- ``(i, "statistics", j)``,
#: ``(i, "columns", k)``, or ``(i, "release", 0)`` for the release's own epsilon.
Loc = tuple[int, str, int]


@dataclass(frozen=True)
class Wanted:
    """One part's target, as the spec states it.

    Attributes
    ----------
    error95 : float or None
        The 95 % error asked for (a fraction of :func:`relative_scale` when ``relative``);
        ``None`` for a share.
    relative : bool
        ``error95`` is relative (to the largest value a group of ``group_size`` rows can
        give).
    group_size : int or None
        The group size the error is stated at (a mean's, a relative target's, a
        quantile's value error); default the ``[accuracy]`` table's.
    share : float or None
        A share of the release-wide budget, fixed before the targets are allocated.

    Examples
    --------
    >>> Wanted(50.0).error95, Wanted(None, share=0.2).share
    (50.0, 0.2)
    """

    error95: float | None
    relative: bool = False
    group_size: int | None = None
    share: float | None = None


def _place(data: Any, loc: Loc) -> Any:
    """The entry (a dict, or a spec model) at ``loc`` of a spec's releases."""
    r = data["release"][loc[0]] if isinstance(data, dict) else data.release[loc[0]]
    if loc[1] == _WHOLE:
        return r
    return (r[loc[1]] if isinstance(r, dict) else getattr(r, loc[1]))[loc[2]]


def _parts(i: int, r: Any) -> list[tuple[Loc, Any]]:
    """Every place of release ``r`` (a dict) that may hold a target, with its entry."""
    out: list[tuple[Loc, Any]] = [((i, _WHOLE, 0), r)]
    for part in ("statistics", "columns"):
        items = r.get(part)
        if isinstance(items, list):
            out += [((i, part, j), e) for j, e in enumerate(items) if isinstance(e, dict)]
    return out


def _where(loc: Loc) -> str:
    """How a message names ``loc``: ``release[0].statistics[1]``."""
    return f"release[{loc[0]}]" + ("" if loc[1] == _WHOLE else f".{loc[1]}[{loc[2]}]")


def _offered(r: dict[str, Any], part: str) -> bool:
    """Whether release ``r``'s kind takes a target on ``part`` (its class's
    ``accuracy_parts``; every grouped statistic takes one)."""
    if part == "statistics":
        return True
    cls = KINDS.get(str(r.get("kind")))
    return part in getattr(cls, "accuracy_parts", ())


def take_targets(data: Any) -> tuple[Any, dict[Loc, Wanted]]:
    """The spec's data with each ``error95`` (or ``share``) taken out (a placeholder
    budget in its place, so the rest validates as usual), and the targets by place.
    Checks each target (a finite number > 0; a share in (0, 1)) and refuses one given
    with a budget, or where the release's kind takes none.

    Examples
    --------
    >>> take_targets({"release": [{"statistics": [{"stat": "count", "epsilon": 1}]}]})[1]
    {}
    """
    if not isinstance(data, dict) or not isinstance(data.get("release"), list):
        return data, {}
    found: dict[Loc, Wanted] = {}
    out = None
    for i, r in enumerate(data["release"]):
        if not isinstance(r, dict):
            continue
        for loc, s in _parts(i, r):
            asked = [k for k in (TARGET, SHARE) if k in s]
            if not asked:
                continue
            where = _where(loc)
            if not _offered(r, loc[1]):
                raise InvalidParameterError(
                    f"{where}.{asked[0]}: an error95 target is for a grouped release's "
                    "statistics, a proportions or covariance release, or a PRAM column; "
                    "give this release's epsilon"
                )
            if len(asked) > 1:
                raise InvalidParameterError(f"{where}: give error95 or share, not both; remove one")
            given = [k for k in _BUDGETS if s.get(k) is not None]
            if given:
                raise InvalidParameterError(
                    f"{where}: give {asked[0]} (dpframe finds the budget) or "
                    f"{' and '.join(given)}, not both; remove one"
                )
            found[loc] = _wanted(s, where)
            if out is None:
                out = copy.deepcopy(data)
            entry = {k: v for k, v in s.items() if k not in (TARGET, SHARE, *_EXTRAS)}
            key = "rho" if entry.get("mechanism") == "gaussian" else "epsilon"
            entry[key] = _PLACEHOLDER
            if loc[1] == _WHOLE:
                out["release"][i] = entry
            else:
                out["release"][i][loc[1]][loc[2]] = entry
    if out is not None:
        for i, r in enumerate(data["release"]):
            if isinstance(r, dict):
                for loc, s in _parts(i, r):
                    stray = [k for k in _EXTRAS if k in s and loc not in found]
                    if stray:
                        raise InvalidParameterError(
                            f"{_where(loc)}.{stray[0]}: only with error95; remove it"
                        )
    return (data if out is None else out), found


#: The fields that qualify an error95 target (taken out with it).
_EXTRAS = ("relative", "group_size")


def _wanted(s: Mapping[str, Any], where: str) -> Wanted:
    """The target of entry ``s``, each field checked."""
    if SHARE in s:
        extra = [k for k in _EXTRAS if k in s]
        if extra:
            raise InvalidParameterError(f"{where}.{extra[0]}: only with error95; remove it")
        share = check("allocation_share", s[SHARE], name=f"{where}.{SHARE}")
        return Wanted(None, share=share)
    relative = s.get("relative", False)
    if not isinstance(relative, bool):
        raise InvalidParameterError(f"{where}.relative must be true or false, got {relative!r}")
    size = s.get("group_size")
    if size is not None:
        size = check("proportions_n", size, name=f"{where}.group_size")
    return Wanted(check(TARGET, s[TARGET], name=f"{where}.{TARGET}"), relative, size)


def target_key(release: str, name: str) -> str:
    """How the ``[accuracy]`` table names a statistic: ``"<release>/<statistic>"``.

    Examples
    --------
    >>> target_key("by_region", "count")
    'by_region/count'
    """
    return f"{release}/{name}"


def _keys(spec: Spec) -> dict[str, Loc]:
    """Every place of the spec that may hold a target, by its ``[accuracy]`` key: a
    statistic's ``"<release>/<statistic>"``, a PRAM column's ``"<release>/<column>"``, a
    release's own ``"<release>"``."""
    out: dict[str, Loc] = {}
    for i, r in enumerate(spec.release):
        out[r.name] = (i, _WHOLE, 0)
        for j, s in enumerate(getattr(r, "statistics", None) or ()):
            out[target_key(r.name, statistic(s).name)] = (i, "statistics", j)
        for k, c in enumerate(getattr(r, "columns", None) or ()):
            if not isinstance(c, str):
                out[target_key(r.name, c.column)] = (i, "columns", k)
    return out


def _key(spec: Spec, loc: Loc) -> str:
    """The ``[accuracy]`` key of ``loc``."""
    return next(k for k, v in _keys(spec).items() if v == loc)


def recorded(spec: Spec) -> dict[Loc, Wanted]:
    """The targets the spec's ``[accuracy]`` table records, by place (empty for a spec
    without targets).

    Raises
    ------
    InvalidParameterError
        A recorded target names no statistic of the spec.
    """
    acc = spec.accuracy
    if acc is None or not (acc.targets or acc.shares):
        return {}
    where = _keys(spec)
    unknown = sorted((set(acc.targets) | set(acc.shares)) - set(where))
    if unknown:
        raise InvalidParameterError(
            f"accuracy.targets: {unknown} name no statistic of the spec (keys are "
            "'<release>/<statistic>'); give error95 on the statistic instead"
        )
    out = {
        where[k]: Wanted(t, acc.relative.get(k, False), acc.group_sizes.get(k))
        for k, t in acc.targets.items()
    }
    out.update({where[k]: Wanted(None, share=v) for k, v in acc.shares.items()})
    return out


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


class _Facts:
    """The input's public facts a release kind's ``from_spec`` reads, for settling a
    target when the spec is read (:class:`dpframe.polars.release.SpecContext`; a job's
    :class:`dpframe.jobs.planning.Context` when it plans): its schema, and its row count,
    counted once and only if a target needs it."""

    def __init__(self, spec: Spec) -> None:
        from dpframe.engines import input_engine

        path = None if spec.input.path is None else Path(spec.resolve(spec.input.path) or "")
        self._spec = spec
        self._engine = input_engine(None, frame=spec.frame, path=path, scan=spec.lazy_input)
        self._rows: int | None = None
        self.accountant = None
        self.error = InvalidParameterError

    @property
    def frame(self) -> Any:
        return self._engine.frame

    @property
    def schema(self) -> pl.Schema:
        if self._spec.frame is None and self._spec.input.path is not None:
            return self._spec.lazy_input().collect_schema()
        return self._engine.schema()

    @property
    def neighbours(self) -> str:
        return self._spec.privacy.neighbours

    def rows(self) -> int:
        if self._rows is None:
            self._rows = int(self._engine.rows())
        return self._rows

    def source(self, entry: Any) -> RandomSource:
        return derived_source(None, entry.name)

    def unit(self, entry: Any) -> dict[str, Any]:
        u = release_unit(self._spec, entry)
        if u.is_record:
            return {}
        return {"unit": u.person, "max_rows": u.max_rows, "max_groups": u.max_groups}

    def margins(self, entry: Any) -> pl.DataFrame:  # pragma: no cover - grouped only
        raise InvalidParameterError("margins are not read to settle a target")

    def margins_sizes(self, entry: Any) -> str | None:  # pragma: no cover - grouped only
        return None


def curves(
    spec: Spec, wanted: Mapping[Loc, Wanted], context: SpecContext | None = None
) -> tuple[dict[str, ErrorCurve], dict[str, float]]:
    """Each targeted part's error curve, keyed as the ``[accuracy]`` table keys it, and
    each error95 target in the curve's units (a relative one times its scale).
    ``context`` gives the input's public facts (read from the spec's input if needed)."""
    acc = spec.accuracy
    default = None if acc is None else acc.group_size
    out: dict[str, ErrorCurve] = {}
    goal: dict[str, float] = {}
    for loc, w in wanted.items():
        r = spec.release[loc[0]]
        key = _key(spec, loc)
        size = w.group_size if w.group_size is not None else default
        try:
            if loc[1] == "statistics":
                stat = statistic(r.statistics[loc[2]])
                c = statistic_curve(
                    stat, spec.privacy.neighbours, release_unit(spec, r), group_size=size
                )
                scale, said = 1.0, ""
                if w.relative:
                    if size is None:
                        raise InvalidParameterError(
                            f"relative error95 of {stat.name!r}: a relative target is "
                            "stated at a group size; give group_size (on the statistic or "
                            "in [accuracy])"
                        )
                    scale, said = relative_scale(stat, size)
                    said = f"relative {w.error95:g} of {scale:g} ({said})"
            else:
                if w.relative or w.group_size is not None:
                    raise InvalidParameterError(
                        f"{_where(loc)}: relative and group_size are for a grouped "
                        "statistic; give this target in its units"
                    )
                if context is None:
                    context = _Facts(spec)
                cls = KINDS[r.kind]
                c = cls.error_curve(r, loc[2], context)  # type: ignore[attr-defined]
                scale, said = 1.0, ""
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"release {r.name!r}: {exc}") from None
        words = "; ".join(x for x in (said, c.assumption) if x)
        out[key] = ErrorCurve(key, c.currency, c.error, c.units, words, c.highest)
        if w.error95 is not None:
            goal[key] = w.error95 * scale
    return out, goal


def allocation(
    spec: Spec,
    wanted: Mapping[Loc, Wanted],
    remaining: float | None = None,
    *,
    context: SpecContext | None = None,
    budget: float | str | None = None,
) -> Allocation:
    """The budgets of the targeted parts (see the module docstring)."""
    found, goal = curves(spec, wanted, context)
    shares = {_key(spec, loc): w.share for loc, w in wanted.items() if w.share is not None}
    if budget is None:
        budget = LEAST if spec.accuracy is None else spec.accuracy.budget
    return allocate(
        list(found.values()),
        goal,
        budget=budget,
        accounting=_accounting(spec),
        remaining=remaining,
        shares=shares,
    )


def _budget_of(entry: Any) -> tuple[float | None, float | None]:
    """The (epsilon, rho) a targeted part holds."""
    options = getattr(entry, "options", None) or {}
    rho = getattr(entry, "rho", None)
    return getattr(entry, "epsilon", None), rho if rho is not None else options.get("rho")


def spent_on_targets(spec: Spec, wanted: Mapping[Loc, Wanted]) -> float:
    """What the targeted parts cost as the spec holds them, in the ledger's currency
    (epsilons; rhos on a zCDP budget, a Laplace statistic's ``epsilon**2 / 2``)."""
    zcdp = _accounting(spec) == "zcdp"
    total = 0.0
    for loc in wanted:
        eps, rho = _budget_of(_place(spec, loc))
        if rho is not None:
            total += float(rho)
        else:
            e = float(eps or 0.0)
            total += e * e / 2 if zcdp else e
    return total


def check_budgets(spec: Spec, wanted: Mapping[Loc, Wanted], found: Allocation) -> None:
    """Refuse a spec whose targeted parts' budgets are not the ones their targets give
    (a recorded spec edited by hand, or read from another input): the ``[accuracy]``
    table would say what the release is not."""
    for loc in wanted:
        key = _key(spec, loc)
        eps, rho = _budget_of(_place(spec, loc))
        has = rho if found.currencies[key] == "rho" else eps
        if has != found.budgets[key]:
            asked = wanted[loc]
            what = (
                f"error95 target {asked.error95:g}"
                if asked.share is None
                else (f"share {asked.share:g}")
            )
            raise InvalidParameterError(
                f"release {spec.release[loc[0]].name!r}: {key!r} has "
                f"{found.currencies[key]} {has!r}, but its {what} gives "
                f"{found.budgets[key]!r} on this input (a spec edited by hand, or read "
                "with an input of another row count); read the spec again with this input, "
                "or give its budget without a target"
            )


def check_room(
    spec: Spec,
    wanted: Mapping[Loc, Wanted],
    room: float,
    context: SpecContext | None = None,
) -> Allocation:
    """The allocation, refused (:class:`~dpframe.errors.BudgetExceededError`, before any
    charge) when what the ledger has left for the targeted parts, ``room``, cannot
    meet them: the message names each part the best split of ``room`` leaves above its
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
        return allocation(spec, wanted, remaining=room, context=context)
    a = allocation(spec, wanted, context=context)
    if a.total > room * (1 + 1e-12):
        best = allocation(spec, wanted, context=context, budget=room)
        raise BudgetExceededError(
            f"accuracy.budget = {budget:g} ({what}) is more than the ledger has left for "
            f"the targeted statistics ({room:g}); there the best split has the worst "
            f"error/target {best.ratio:.4g} ("
            + ", ".join(f"{k!r}: error95 {best.errors[k]:.4g}" for k in best.errors)
            + "). Nothing was charged: lower accuracy.budget or give a larger budget."
        )
    return a


def settle(spec: Spec, data: dict[str, Any], wanted: Mapping[Loc, Wanted]) -> Any:
    """``data`` (the spec's, its targets taken out) with each targeted part's budget
    found, and the ``[accuracy]`` table recording the allocation."""
    a = allocation(spec, wanted)
    out = copy.deepcopy(data)
    for loc in wanted:
        key = _key(spec, loc)
        entry = _place(out, loc)
        entry["rho" if a.currencies[key] == "rho" else "epsilon"] = a.budgets[key]
    table = dict(out.get("accuracy") or {})
    keyed = {_key(spec, loc): w for loc, w in wanted.items()}
    table.update(
        targets={k: w.error95 for k, w in keyed.items() if w.error95 is not None},
        found=dict(a.budgets),
        errors=dict(a.errors),
        total=a.total,
    )
    extras = {
        "shares": {k: w.share for k, w in keyed.items() if w.share is not None},
        "relative": {k: True for k, w in keyed.items() if w.relative},
        "group_sizes": {k: w.group_size for k, w in keyed.items() if w.group_size is not None},
        "assumptions": dict(a.assumptions),
    }
    table.update({k: v for k, v in extras.items() if v})
    out["accuracy"] = table
    return out
