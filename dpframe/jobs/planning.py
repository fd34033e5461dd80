"""``plan``: every release of a spec with its mechanism, epsilon, scale and 95% error.

Nothing is spent, nothing is written and no noise is drawn: the plan builds each release
object exactly as ``run`` will (:mod:`dpframe.jobs.kinds`) and asks it for its summary,
which comes from the kernels' plans alone (:mod:`dpframe.core.executor`). It reads only
public things: the margins, the input's schema, and its row count where a release needs
the dataset size (public under substitute neighbours).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.core.accountant import Accountant, ledger_exists
from dpframe.core.advice import spec_entry
from dpframe.core.budget import exact, exact_sum, shown
from dpframe.core.neighbours import MEANING, OTHER
from dpframe.core.postgres import redact
from dpframe.engines import engine_for
from dpframe.engines.protocol import is_spark_frame
from dpframe.errors import DPFrameError
from dpframe.jobs.kinds import Context, build
from dpframe.jobs.spec import Spec, SpecError
from dpframe.polars.release import Release

__all__ = ["JobPlan", "input_frame", "plan"]

#: The columns of a plan's table.
PLAN_SCHEMA = {
    "release": pl.String,
    "kind": pl.String,
    "statistic": pl.String,
    "mechanism": pl.String,
    "epsilon": pl.Float64,
    "delta": pl.Float64,
    "rho": pl.Float64,
    "sensitivity": pl.Float64,
    "scale": pl.Float64,
    "error95": pl.Float64,
    "note": pl.String,
    "unit": pl.String,
    "neighbours": pl.String,
    "error95_other": pl.Float64,
    "other": pl.String,
}


@dataclass(frozen=True)
class JobPlan:
    """The plan of a spec: one row per charged statistic, and the budget before and after."""

    rows: pl.DataFrame
    budget_epsilon: float
    budget_delta: float
    spent_before: float
    epsilon: float
    delta: float
    ledger: Path | str
    input_rows: int | None
    #: on a zCDP budget: the budget's rho and what the plan costs in rho (``spent_before``
    #: is then in rho too); ``None`` on an (epsilon, delta) budget
    budget_rho: float | None = None
    rho: float | None = None
    #: the neighbour relation every release is calibrated for (the spec's)
    neighbours: str = "substitute"

    @property
    def _amount(self) -> float:
        return self.epsilon if self.budget_rho is None else float(self.rho or 0.0)

    @property
    def _budget(self) -> float:
        return self.budget_epsilon if self.budget_rho is None else self.budget_rho

    @property
    def spent_after(self) -> float:
        return float(exact(self.spent_before) + exact(self._amount))

    @property
    def remaining_after(self) -> float:
        return float(exact(self._budget) - exact(self.spent_after))

    @property
    def fits(self) -> bool:
        """Whether the releases fit in what the ledger has left."""
        total = exact(self.spent_before) + exact(self._amount)
        if self.budget_rho is not None:
            return total <= exact(self.budget_rho)
        return total <= exact(self.budget_epsilon) and self.delta <= self.budget_delta

    def assumptions(self) -> list[str]:
        """What the releases assume, in words: the neighbour relation (and where the
        other relation's errors are), and each release's privacy unit with its bounds
        and why it has no error under the other relation, if it has none."""
        other = OTHER[self.neighbours]
        lines = [
            f"neighbours: {self.neighbours} ({MEANING[self.neighbours]})",
            f"error95_other: each statistic's 95% error under {other} ({MEANING[other]})",
        ]
        seen: dict[str, tuple[str, str]] = {}
        for row in self.rows.iter_rows(named=True):
            seen.setdefault(row["release"], (row["unit"] or "", row["other"] or ""))
        for name, (unit, said) in seen.items():
            na = f"; under {said}" if said.startswith(f"{other}: n/a") else ""
            lines.append(f"release {name!r}: unit {unit}{na}")
        return lines

    def summary(self) -> str:
        verdict = "fits" if self.fits else "OVERSPENDS: nothing will be released"
        if self.budget_rho is not None:
            what = (
                f"zCDP budget rho={self.budget_rho:g} (epsilon={self.budget_epsilon:g} at "
                f"delta={self.budget_delta:g})"
            )
        else:
            what = f"budget epsilon={self.budget_epsilon:g}"
        return (
            f"{what} (ledger {self.ledger}): spent {self.spent_before:g} before, this plan "
            f"spends {self._amount:g}, {self.spent_after:g} after, "
            f"{shown(self.remaining_after, self._budget)} "
            f"left -- {verdict}"
        )


def ledger_state(spec: Spec) -> tuple[float, Path | str]:
    """What the spec's ledger has spent or holds for running jobs (0 if it does not exist
    yet: nothing is created)."""
    path = spec.ledger_target()
    shown = redact(path) if isinstance(path, str) else path  # never a password in a message
    if not ledger_exists(path):  # plan writes nothing: a missing ledger has spent nothing
        return 0.0, shown
    acct = spec.privacy.open_ledger(path)
    if acct.rho is not None:
        return float(exact(acct.spent.rho) + exact(acct.reserved.rho)), shown
    return float(exact(acct.spent.epsilon) + exact(acct.reserved.epsilon)), shown


def input_frame(spec: Spec, engine: str = "polars", spark: Any = None) -> Any:
    """The spec's input: its frame (polars or Spark), or its file scanned by the engine."""
    if spec.frame is not None:
        if is_spark_frame(spec.frame) != (engine == "spark"):
            raise SpecError(
                f"this spec's input is a {'Spark' if is_spark_frame(spec.frame) else 'polars'} "
                f"frame: run it with engine={'spark' if is_spark_frame(spec.frame) else 'polars'!r}"
            )
        return spec.frame.lazy() if isinstance(spec.frame, pl.DataFrame) else spec.frame
    if engine == "spark":
        from dpframe.engines.spark import local_session  # pyspark: loaded when asked for

        spark = local_session() if spark is None else spark
        return spark.read.parquet(str(spec.resolve(spec.input.path).absolute()))
    return spec.lazy_input()


def file_schema(spec: Spec, frame: Any) -> pl.Schema:
    """The input's schema as polars reads it (the file's Enum dtypes declare categories)."""
    if spec.frame is None and spec.input.path is not None:
        return spec.lazy_input().collect_schema()
    return engine_for(frame).schema()


def build_all(
    spec: Spec, frame: Any, *, accountant: Any = None
) -> tuple[dict[str, Release], Context]:
    """Every release object of ``spec`` over ``frame`` (nothing read but public facts)."""
    engine = engine_for(frame)
    ctx = Context(
        spec=spec,
        frame=frame,
        schema=file_schema(spec, frame),
        rows=functools.cache(engine.rows),
        accountant=accountant,
        seed=spec.privacy.seed,
    )
    return {r.name: build(ctx, r) for r in spec.release}, ctx


@spec_entry
def plan(spec: Spec, *, frame: Any = None) -> JobPlan:
    """Resolve a spec into the releases it will make, without spending or drawing noise.

    Parameters
    ----------
    spec : Spec
    frame : polars.LazyFrame or pyspark.sql.DataFrame, optional
        Stands in for the spec's input (default: its frame, or its file scanned by
        polars); only its schema and, where a release needs the dataset size, its row
        count are read.

    Returns
    -------
    JobPlan
        ``rows`` (release, kind, statistic, mechanism, epsilon, delta, sensitivity, scale,
        error95, note; unit, the privacy unit a release assumes with its bounds;
        neighbours; error95_other and other, the error under the other relation or why
        there is none), the budget and the ledger's spend before and after; ``fits`` is
        False if the releases would overspend.
    """
    if frame is None:
        frame = spec.frame if spec.frame is not None else spec.lazy_input()
        if isinstance(frame, pl.DataFrame):
            frame = frame.lazy()
    spent, ledger = ledger_state(spec)
    releases, ctx = build_all(spec, frame)
    table = []
    charges = []
    for r in spec.release:
        rel = releases[r.name]
        try:  # the schema is public: a missing column or a wrong dtype fails the plan
            rel.check_schema()
        except DPFrameError as exc:
            raise SpecError(f"release {r.name!r}: {exc}") from None
        for row in rel.summarize().iter_rows(named=True):
            table.append({**row, "release": r.name, "kind": r.kind})
        charges += [c for p in rel.plans() for c in p.charges]
    rows_info = ctx.rows() if ctx.rows.cache_info().currsize else None
    # the spec's budget terms, in memory, price the plan (and refuse a charge it cannot pay)
    terms = Accountant(**spec.privacy.ledger_terms())
    cost = terms.cost(charges) if charges else None
    return JobPlan(
        rows=pl.DataFrame(table, schema=PLAN_SCHEMA),
        budget_epsilon=terms.epsilon,
        budget_delta=spec.privacy.budget.delta,
        spent_before=spent,
        epsilon=float(exact_sum(c.epsilon for c in charges)),
        delta=float(exact_sum(c.delta for c in charges)),
        ledger=ledger,
        input_rows=rows_info,
        budget_rho=terms.rho,
        rho=None if cost is None else cost.rho,
        neighbours=spec.privacy.neighbours,
    )
