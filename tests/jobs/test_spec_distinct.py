"""``stat = "count_distinct"`` in a release spec (issue 34): the same refusals as
``dpframe.agg.count_distinct`` in the same sentence (as ``test_spec_parity.py``), and a
spec run whose published table holds the distinct persons, checked by its suite."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import dpframe
from dpframe.core.advice import entry
from dpframe.jobs import load_spec, plan, run

from .test_spec_parity import BUDGET, FRAME, HEAD, _in_where, _refusal, grouped, py_grouped

PERSON = 'unit = "person"\nmax_rows = 2\nmax_groups = 1\n'

#: name -> (the Python call, the spec's [privacy] lines, its release)
CASES = {
    "count_distinct under the record unit": (
        py_grouped(lambda: dpframe.agg.count_distinct(epsilon=1)),
        BUDGET,
        grouped("{ stat = 'count_distinct', epsilon = 1 }"),
    ),
    "count_distinct of another column": (
        py_grouped(
            lambda: dpframe.agg.count_distinct(column="band", epsilon=1),
            unit="person",
            max_rows=2,
            max_groups=1,
        ),
        PERSON + BUDGET,
        grouped("{ stat = 'count_distinct', column = 'band', epsilon = 1 }"),
    ),
    "count_distinct with gaussian and epsilon": (
        py_grouped(lambda: dpframe.agg.count_distinct(epsilon=1, mechanism="gaussian")),
        PERSON + BUDGET,
        grouped("{ stat = 'count_distinct', epsilon = 1, mechanism = 'gaussian' }"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_and_spec_refuse_count_distinct_with_the_same_sentence(case, tmp_path):
    python, privacy, release = CASES[case]
    accountant = dpframe.Accountant(epsilon=10.0)
    _refusal(lambda: python(accountant))
    with entry("spec"):  # the advice worded for a spec (core/advice)
        advised = _refusal(lambda: python(accountant))
    assert accountant.spent.epsilon == 0
    FRAME.write_parquet(tmp_path / "input.parquet")
    path = tmp_path / "spec.toml"
    path.write_text(HEAD.format(privacy=privacy, release=release))
    spec = _refusal(lambda: plan(load_spec(path)))
    assert isinstance(spec, type(advised))
    assert _in_where(str(spec), str(advised)), f"python: {advised}\nspec:   {spec}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.parquet", "spec.toml"]


def test_the_record_unit_refusal_names_the_spec_fields():
    with entry("spec"):
        message = str(
            _refusal(lambda: py_grouped(lambda: dpframe.agg.count_distinct(epsilon=1))(None))
        )
    assert "set unit = '<person column>' with max_rows and max_groups" in message


@pytest.mark.parametrize(
    "extra", ["lower = 0, upper = 1", "x = 'income'", "upper_y = 3", "method = 'bit', lower = 0"]
)
def test_a_count_distinct_entry_takes_no_bounds(extra, tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(
        HEAD.format(
            privacy=PERSON + BUDGET,
            release=grouped(f"{{ stat = 'count_distinct', epsilon = 1, {extra} }}"),
        )
    )
    with pytest.raises(dpframe.errors.InvalidParameterError, match="a count_distinct takes no"):
        load_spec(path)


VISITS = pl.DataFrame(
    {
        "region": ["North"] * 6 + ["South"] * 5,
        "person": [1, 1, 1, 2, 3, 3, 1, 4, 4, 4, 5],
    }
)

SPEC = """
version = 1
[input]
path = "input.parquet"
[output]
folder = "out"
[margins.region]
values = { region = ["North", "South", "East"] }
[privacy]
ledger = "ledger.db"
seed = 5
unit = "person"
max_rows = 3
max_groups = 2
budget = { rho = 10.0, delta = 1e-6 }
[[release]]
name = "visits"
kind = "grouped"
by = ["region"]
margins = "region"
statistics = [
    { stat = "count", mechanism = "gaussian", rho = 1.0 },
    { stat = "count_distinct", mechanism = "gaussian", rho = 1.0, name = "patients" },
]
"""


def test_a_spec_releases_distinct_persons_checked_by_its_suite(tmp_path: Path) -> None:
    VISITS.write_parquet(tmp_path / "input.parquet")
    (tmp_path / "spec.toml").write_text(SPEC)
    run(load_spec(tmp_path / "spec.toml"), progress=False)
    table = pl.read_parquet(tmp_path / "out" / "visits.parquet")
    assert table.columns == ["region", "count", "patients"]
    assert table["patients"].dtype == pl.Int64
    assert (table["patients"] <= table["count"]).all() and (table["patients"] >= 0).all()
    ledger = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert ledger.spent.rho == pytest.approx(2.0)
    statistics = sorted(e.details["statistic"] for e in ledger.ledger)
    assert statistics == ["count", "count_distinct"]
    # the published folder passes its own suite (rebuilt from the spec and from the
    # folder's own provenance alike)
    from dpframe.jobs import check, check_folder

    for results in (check(load_spec(tmp_path / "spec.toml")), check_folder(tmp_path / "out")):
        assert results and all(r.success for r in results), results
