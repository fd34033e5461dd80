"""The spec takes what dpframe's messages advise, and its messages advise the spec
(issue 32, item 5): ``unknown_keys`` on a grouped release, public columns beside a PRAM
release, and a ledger mismatch that names the spec field to change, not a Python argument."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.errors import LedgerMismatchError
from dpframe.jobs import load_spec, plan, run

REGIONS = ["N", "S", "E"]

SPEC = """
version = 1

[input]
path = "in.parquet"

[privacy]
budget = {budget}
ledger = "ledger.db"

[output]
folder = "released"

[margins.reg]
values = {{ region = ["N", "S", "E"] }}

[[release]]
name = "by_region"
kind = "grouped"
by = ["region"]
margins = "reg"
{grouped_extra}
statistics = [{{ stat = "count", epsilon = 0.5 }}]

[[release]]
name = "micro"
kind = "pram"
columns = [{{ column = "tenure", epsilon = 0.5, categories = ["own", "rent"] }}]
{pram_extra}
"""

#: Python's way of writing an argument, which a spec's user cannot type
PYTHON_ADVICE = re.compile(r"=None|\w+=\.\.\.|\bopen it with\b")


def _write(tmp: Path, *, budget="{ epsilon = 10.0 }", grouped_extra="", pram_extra="") -> Path:
    people = pl.DataFrame(
        {
            "region": ["N", "S", "E", "N", "W", "S"] * 20,  # "W" is outside the margins
            "tenure": ["own", "rent"] * 60,
            "year": [2000, 2001, 2002] * 40,
        }
    )
    people.write_parquet(tmp / "in.parquet")
    path = tmp / "spec.toml"
    path.write_text(SPEC.format(budget=budget, grouped_extra=grouped_extra, pram_extra=pram_extra))
    return path


def test_a_key_outside_the_margins_is_refused_with_advice_the_spec_takes(tmp_path):
    spec = _write(tmp_path)
    with pytest.raises(dpframe.InvalidDataError, match="unknown_keys") as refused:
        run(load_spec(spec), progress=False)
    assert "nothing" in str(refused.value).lower() or "not" in str(refused.value)
    assert dpframe.Accountant.open(tmp_path / "ledger.db").spent.epsilon == 0
    spec = _write(tmp_path, grouped_extra='unknown_keys = "drop"')
    result = run(load_spec(spec), progress=False)
    table = pl.read_parquet(result.outputs["by_region"])
    assert sorted(table["region"]) == sorted(REGIONS)  # W's records left out, not a group


def test_a_pram_release_publishes_its_public_columns_beside_it(tmp_path):
    spec = _write(tmp_path, grouped_extra='unknown_keys = "drop"', pram_extra='public = ["year"]')
    result = run(load_spec(spec), progress=False)
    micro = pl.read_parquet(result.outputs["micro"])
    assert micro.columns == ["tenure", "year"]
    assert micro["year"].to_list() == [2000, 2001, 2002] * 40  # as it is, row for row
    checked = dpframe.jobs.check_folder(tmp_path / "released")
    assert len(checked) == 2 and all(c.success for c in checked)


@pytest.mark.parametrize(
    ("public", "message"),
    [(["tenure"], "randomizes"), (["nope"], "nope"), (["year", "year"], "more than once")],
)
def test_a_pram_releases_public_columns_follow_the_python_rules(tmp_path, public, message):
    spec = _write(tmp_path, pram_extra=f"public = {public!r}".replace("'", '"'))
    with pytest.raises(dpframe.InvalidParameterError, match=message):
        plan(load_spec(spec))


@pytest.mark.parametrize(
    ("made", "budget", "field"),
    [
        ({"epsilon": 2.0}, "{ epsilon = 10.0 }", "privacy.budget.epsilon = 2.0"),
        ({"epsilon": 10.0, "delta": 1e-9}, "{ epsilon = 10.0 }", "privacy.budget.delta = 1e-09"),
        (
            {"rho": 0.5, "delta": 1e-6},
            '{ epsilon = 5.0, delta = 1e-6, accounting = "zcdp" }',
            "privacy.budget.rho = 0.5",
        ),
        ({"rho": 0.5, "delta": 1e-6}, "{ epsilon = 5.0, delta = 1e-6 }", "privacy.budget.rho"),
        (
            {"epsilon": 10.0, "delta": 1e-6},
            '{ epsilon = 10.0, delta = 1e-6, accounting = "zcdp" }',
            "privacy.budget.epsilon = 10.0",
        ),
    ],
)
def test_a_ledger_mismatch_in_a_spec_names_the_spec_field_not_a_python_argument(
    tmp_path, monkeypatch, made, budget, field
):
    spec = _write(tmp_path, budget=budget)
    dpframe.Accountant.open(tmp_path / "ledger.db", **made)
    with pytest.raises(LedgerMismatchError) as refused:
        plan(load_spec(spec))
    message = str(refused.value)
    assert field in message and "Nothing was charged" in message
    assert not PYTHON_ADVICE.search(message), message
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["plan", "spec.toml"])
    assert res.exit_code == 2 and field in res.output
    assert not PYTHON_ADVICE.search(res.output), res.output
    # the Python API keeps its own words
    with pytest.raises(LedgerMismatchError, match=r"=None|accounting='zcdp'"):
        terms = load_spec(spec).privacy.ledger_terms()
        dpframe.Accountant.open(tmp_path / "ledger.db", **terms)
