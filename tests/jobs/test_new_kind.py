"""The recipe of docs/architecture.md ("Add a release kind"), followed by a toy kind.

A kind is its release class in ``polars/`` (its plan, exact input and finish; its spec
entry, ``from_spec``, ``to_spec``, ``facts`` and ``suite``) plus one line in the registry of
kinds. Here the class lives in this test module and the registry line is monkeypatched;
the job layer (plan, run, publish, ``dpframe check`` of the folder) is used as it is:
nothing in ``jobs/`` knows the kind. Copy this module to add a kind.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import polars as pl
import pytest

import dpframe
import dpframe.jobs.kinds
from dpframe.core.budget import exact
from dpframe.core.executor import MechanismPlan
from dpframe.jobs import check_folder, load_spec, plan, run
from dpframe.jobs.spec import SpecError, rebuild_entries
from dpframe.mechanisms.laplace import plan_laplace
from dpframe.polars.expectations import Suite, start
from dpframe.polars.release import PositiveEps, Release, SpecContext, SpecEntry

# -- the kind: what polars/<kind>.py would hold -----------------------------------------


class TallySpec(SpecEntry):
    """``[[release]] kind = "tally"``: the public function's arguments."""

    kind: Literal["tally"]
    column: str
    value: str
    epsilon: PositiveEps

    def epsilon_total(self) -> Fraction:
        return exact(self.epsilon)


class TallyRelease(Release[pl.DataFrame]):
    """A noisy count of the rows whose ``column`` equals ``value`` (grid Laplace, one
    charge; under substitute neighbours one person changes it by at most 1)."""

    kind = "tally"
    spec_model = TallySpec

    def __init__(
        self,
        frame: Any,
        column: str,
        value: str,
        *,
        epsilon: float,
        accountant: Any = None,
        seed: Any = None,
        neighbours: str | None = None,
    ) -> None:
        super().__init__(frame, accountant, seed, neighbours)
        self.column, self.value = column, value
        self.plan = plan_laplace(
            epsilon, 1.0, column="count", granularity=1.0, values_on_grid=True, note="tally"
        )

    @classmethod
    def from_spec(cls, entry: Any, context: SpecContext) -> Release[Any]:
        if entry.column not in context.schema:
            raise context.error(f"release {entry.name!r}: the input has no column {entry.column!r}")
        return cls(
            context.frame,
            entry.column,
            entry.value,
            epsilon=entry.epsilon,
            accountant=context.accountant,
            seed=context.source(entry),
            neighbours=context.neighbours,
        )

    def _plans_of(self) -> list[MechanismPlan]:
        return [self.plan]

    def _exact_inputs(self) -> list[Any]:
        counts = self.engine.category_counts([self.column])[self.column]
        hits = counts.filter(pl.col("value") == self.value)["rows"].sum()
        return [[float(hits)]]

    def _finish(self, outputs: tuple[Any, ...]) -> pl.DataFrame:
        return pl.DataFrame({"value": [self.value], "count": [float(outputs[0][0])]})

    def output_types(self) -> dict[str, str]:
        return {"value": "String", "count": "Float64"}

    def to_spec(self, name: str | None = None) -> dict[str, Any]:
        return {
            "name": self.spec_name(name),
            "kind": "tally",
            "column": self.column,
            "value": self.value,
            "epsilon": self.plan.epsilon,
        }

    @classmethod
    def suite(cls, arguments: Mapping[str, Any], facts: Mapping[str, Any], table: Any) -> Suite:
        suite, lazy = start(arguments, table)
        frame = lazy.collect() if isinstance(lazy, pl.LazyFrame) else lazy
        suite.add_table("main", frame, ["value"])
        suite.expect(
            "expect_table_columns_to_match_set",
            "main",
            column_set=["value", "count"],
            exact_match=True,
        )
        suite.expect("expect_table_row_count_to_equal", "main", value=1)
        suite.expect(
            "expect_column_values_to_be_in_set",
            "main",
            column="value",
            value_set=[arguments["value"]],
        )
        suite.expect("expect_column_values_to_not_be_null", "main", column="count")
        return suite


# -- the one-line registration (jobs/kinds.py), here for this test only ------------------


@pytest.fixture
def tally_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(dpframe.jobs.kinds.KINDS, "tally", TallyRelease)
    rebuild_entries()  # the spec's entries are built from the registry at import
    yield
    monkeypatch.undo()
    rebuild_entries()


SPEC = """
version = 1

[input]
path = "people.parquet"

[privacy]
budget = {{ epsilon = 1.0 }}
ledger = "ledger.db"
seed = 7

[output]
folder = "released"

[[release]]
name = "north"
kind = "tally"
column = "region"
value = "North"
epsilon = {epsilon}
"""


def _spec(tmp_path: Path, epsilon: float = 0.4) -> Path:
    pl.DataFrame({"region": ["North"] * 60 + ["South"] * 40}).write_parquet(
        tmp_path / "people.parquet"
    )
    path = tmp_path / "release.toml"
    path.write_text(SPEC.format(epsilon=epsilon))
    return path


def test_a_new_kind_runs_from_a_spec_to_a_checked_published_folder(tmp_path, tally_kind):
    spec = load_spec(_spec(tmp_path))
    planned = plan(spec)
    assert planned.epsilon == pytest.approx(0.4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
        run(spec)
    out = tmp_path / "released"
    table = pl.read_parquet(out / "north.parquet")
    assert table.columns == ["value", "count"] and table["value"].to_list() == ["North"]
    # Laplace of scale 1/0.4: |noise| > 25 has probability exp(-10); seeded anyway
    assert abs(table["count"].item() - 60) < 25
    ledger = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert ledger.spent.epsilon == pytest.approx(0.4)
    entries = dpframe.read_provenance(out / "north.parquet").entries
    assert [(e.mechanism, e.epsilon) for e in entries] == [("laplace", 0.4)]
    assert [e.id for e in ledger.ledger] == [e.id for e in entries]  # the charge, published
    results = check_folder(out)  # from the folder's provenance alone
    assert len(results) == 1 and results[0].success


def test_a_new_kind_s_spec_entry_is_checked_by_its_own_model(tmp_path, tally_kind):
    with pytest.raises(SpecError, match="epsilon"):
        load_spec(_spec(tmp_path, epsilon=-1.0))


def test_without_its_registration_the_kind_is_unknown(tmp_path):
    with pytest.raises(SpecError, match="unknown kind"):
        load_spec(_spec(tmp_path))


def test_each_registered_kind_names_itself_the_same_everywhere():
    """The registry's name of a kind is its spec entry's ``kind`` (the TOML's), the one
    its ``to_spec`` writes: declared by the class, never restated by the jobs."""
    for name, cls in dpframe.jobs.kinds.KINDS.items():
        assert cls.spec_model is not None, name
        assert cls.spec_model.model_fields["kind"].annotation == Literal[name]
