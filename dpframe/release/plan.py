"""``plan``: every release of a spec with its mechanism, ε, δ, scale and 95% error.

Nothing is spent and no noise is drawn. The plan builds each release exactly as
``release`` will, and stops it at the point where it would charge the accountant (the
kernels call their charge hook before drawing): the calibration shown is the one that
will be used. It reads only public things: the margins, the input's schema, and its row
count where a release needs the dataset size (public under substitute neighbours).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from dpframe.core.accountant import Accountant
from dpframe.release.spec import (
    CovarianceSpec,
    GroupedSpec,
    PramSpec,
    ProportionsSpec,
    Spec,
    SpecError,
)

__all__ = ["Plan", "plan"]

_LN20 = math.log(20.0)  # 95% half-width of a Laplace(b) is b ln 20


class _StopBeforeNoiseError(Exception):
    """Raised by the capturing charge hook: the release stops before drawing noise."""


@dataclass(frozen=True)
class Plan:
    """The plan of a spec: one row per statistic, and the budget before and after."""

    rows: pl.DataFrame
    budget_epsilon: float
    budget_delta: float
    spent_before: float
    epsilon: float
    delta: float
    ledger: Path
    input_rows: int | None

    @property
    def spent_after(self) -> float:
        return float(Fraction(repr(self.spent_before)) + Fraction(repr(self.epsilon)))

    @property
    def remaining_after(self) -> float:
        return float(Fraction(repr(self.budget_epsilon)) - Fraction(repr(self.spent_after)))

    @property
    def fits(self) -> bool:
        """Whether the releases fit in what the ledger has left."""
        total = Fraction(repr(self.spent_before)) + Fraction(repr(self.epsilon))
        return total <= Fraction(repr(self.budget_epsilon)) and self.delta <= self.budget_delta

    def summary(self) -> str:
        verdict = "fits" if self.fits else "OVERSPENDS: nothing will be released"
        return (
            f"budget epsilon={self.budget_epsilon:g} (ledger {self.ledger}): spent "
            f"{self.spent_before:g} before, this plan spends {self.epsilon:g}, "
            f"{self.spent_after:g} after, {self.remaining_after:g} left -- {verdict}"
        )


def _ledger_state(spec: Spec) -> tuple[float, Path]:
    path = spec.resolve(spec.privacy.ledger)
    if not path.exists():  # plan writes nothing: a missing ledger has spent nothing
        return 0.0, path
    acct = Accountant.open(
        path,
        epsilon=spec.privacy.budget.epsilon,
        delta=spec.privacy.budget.delta,
        neighbours=spec.privacy.neighbours,
    )
    return acct.spent.epsilon, path


def input_rows(spec: Spec, lf: pl.LazyFrame | None = None) -> int:
    """The input's row count (public under substitute neighbours)."""
    lf = spec.lazy_input() if lf is None else lf
    return int(lf.select(pl.len()).collect().item())


def _capture(charges_out: list[Any]):
    def charge(charges: list[Any]) -> None:
        charges_out.extend(charges)
        raise _StopBeforeNoiseError

    return charge


def _row(release: str, kind: str, what: str | None, **kw: Any) -> dict[str, Any]:
    return {
        "release": release,
        "kind": kind,
        "statistic": what,
        "mechanism": kw.get("mechanism"),
        "epsilon": kw.get("epsilon"),
        "delta": kw.get("delta", 0.0),
        "scale": kw.get("scale"),
        "error95": kw.get("error95"),
        "note": kw.get("note", ""),
    }


def _plan_grouped(spec: Spec, r: GroupedSpec, lf: pl.LazyFrame) -> list[dict[str, Any]]:
    import dpframe
    from dpframe.release.build import statistic
    from dpframe.release.run import margins_for

    margins = margins_for(spec, r, lf)
    acct = Accountant(epsilon=1e9, neighbours=spec.privacy.neighbours)  # throwaway, unspent
    sizes = spec.margins[r.margins].sizes
    release = dpframe.group_by(lf, r.by, margins=margins, sizes=sizes, accountant=acct).agg(
        *[statistic(s) for s in r.statistics]
    )
    rows = []
    for row in release.summarize().iter_rows(named=True):
        rows.append(
            _row(
                r.name,
                r.kind,
                row["statistic"],
                mechanism=row["mechanism"],
                epsilon=row["epsilon"],
                scale=row["scale"],
                error95=row["error95"],
                note=f"{row['groups']} groups",
            )
        )
    return rows


def _plan_pram(spec: Spec, r: PramSpec, lf: pl.LazyFrame) -> list[dict[str, Any]]:
    from dpframe.errors import InvalidParameterError
    from dpframe.pram import _prior_weights, design, krr

    schema = lf.collect_schema()
    rows = []
    for c in r.columns:
        if c.column not in schema:
            raise SpecError(f"release {r.name!r}: column {c.column!r} is not in the input")
        cats = c.categories
        if cats is None:
            dtype = schema[c.column]
            if not isinstance(dtype, pl.Enum):
                raise SpecError(
                    f"release {r.name!r}: column {c.column!r} has dtype {dtype}; give its "
                    "categories in the spec (they are never taken from the data)"
                )
            cats = dtype.categories.to_list()
        try:
            if c.prior == "uniform":
                d = krr(len(cats), c.epsilon)
            else:
                d = design(_prior_weights(c.prior, tuple(cats)), c.epsilon, diagonal=c.diagonal)
        except InvalidParameterError as exc:
            raise SpecError(f"release {r.name!r}, column {c.column!r}: {exc}") from None
        rows.append(
            _row(
                r.name,
                r.kind,
                c.column,
                mechanism="pram",
                epsilon=c.epsilon,
                note=f"S={len(cats)}, keep probability {d.q.min():.3g}-{d.q.max():.3g}",
            )
        )
    return rows


def _plan_capture(
    r: ProportionsSpec | CovarianceSpec, n: int, neighbours: str
) -> list[dict[str, Any]]:
    from dpframe.releases import release_covariance_matrix, release_proportions

    charges: list[Any] = []
    try:
        if isinstance(r, ProportionsSpec):
            k = len(r.categories) if r.categories else 2
            release_proportions(
                np.full(k, 1.0 / k),
                n,
                r.epsilon,
                strategy=r.strategy,
                method=r.method,
                neighbours=neighbours,
                charge=_capture(charges),
            )
        else:
            p = len(r.columns)
            release_covariance_matrix(
                np.eye(p) * 1e-9,
                n,
                [tuple(b) for b in r.bounds],
                r.epsilon,
                method=r.method,
                neighbours=neighbours,
                repair=r.repair,
                charge=_capture(charges),
            )
    except _StopBeforeNoiseError:
        pass
    return [
        _row(
            r.name,
            r.kind,
            ch.columns[0] if ch.columns else None,
            mechanism=ch.mechanism,
            epsilon=ch.epsilon,
            delta=ch.delta,
            scale=ch.scale,
            error95=None if ch.scale is None else ch.scale * _LN20,
            note=ch.note,
        )
        for ch in charges
    ]


def plan(spec: Spec, *, lf: pl.LazyFrame | None = None, rows: int | None = None) -> Plan:
    """Resolve a spec into the releases it will make, without spending or drawing noise.

    Parameters
    ----------
    spec : Spec
    lf : polars.LazyFrame, optional
        Stands in for the spec's input: only its schema is read (and its row count, unless
        ``rows`` is given). Another engine passes an empty frame of its data's schema.
    rows : int, optional
        The input's row count, where a release needs the dataset size.

    Returns
    -------
    Plan
        ``rows`` (release, kind, statistic, mechanism, epsilon, delta, scale, error95,
        note), the budget and the ledger's spend before and after; ``fits`` is False if
        the releases would overspend.
    """
    from dpframe.release.spec import is_spark_frame

    if lf is None and is_spark_frame(spec.frame):
        from dpframe.engines.spark import schema_frame

        lf = schema_frame(spec.frame)
        rows = int(spec.frame.count()) if rows is None else rows
    lf = spec.lazy_input() if lf is None else lf
    spent, ledger = _ledger_state(spec)
    n: int | None = rows
    table: list[dict[str, Any]] = []
    for r in spec.release:
        if isinstance(r, GroupedSpec):
            table += _plan_grouped(spec, r, lf)
        elif isinstance(r, PramSpec):
            table += _plan_pram(spec, r, lf)
        else:
            if n is None:
                n = input_rows(spec, lf)
            size = r.n if r.n is not None else n
            if isinstance(r, ProportionsSpec) and r.categories is None:
                dtype = lf.collect_schema().get(r.column)
                if not isinstance(dtype, pl.Enum):
                    raise SpecError(
                        f"release {r.name!r}: give the categories of {r.column!r} in the spec "
                        "(or make it an Enum): they are never taken from the data"
                    )
                r = r.model_copy(update={"categories": dtype.categories.to_list()})
            table += _plan_capture(r, size, spec.privacy.neighbours)
    frame = pl.DataFrame(
        table,
        schema={
            "release": pl.String,
            "kind": pl.String,
            "statistic": pl.String,
            "mechanism": pl.String,
            "epsilon": pl.Float64,
            "delta": pl.Float64,
            "scale": pl.Float64,
            "error95": pl.Float64,
            "note": pl.String,
        },
    )
    return Plan(
        rows=frame,
        budget_epsilon=spec.privacy.budget.epsilon,
        budget_delta=spec.privacy.budget.delta,
        spent_before=spent,
        epsilon=spec.epsilon_total,
        delta=float(frame["delta"].sum()),  # every mechanism here is pure epsilon-DP: 0
        ledger=ledger,
        input_rows=n,
    )
