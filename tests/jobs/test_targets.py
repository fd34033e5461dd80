"""error95 targets in a release spec (issue 37): the budgets found when the spec is read,
shown by the plan, recorded in provenance, refused before any charge when the ledger
cannot meet them; bad targets refused by field."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

import dpframe
from dpframe.datasets import synthetic_survey
from dpframe.errors import BudgetExceededError
from dpframe.jobs import load_spec, plan, run
from dpframe.jobs.report import read_report_data
from dpframe.jobs.spec import SpecError, parse_spec
from dpframe.mechanisms.allocation import allocate, statistic_curve

SPEC = """
version = 1
[input]
path = "survey.parquet"
[privacy]
budget = {budget}
ledger = "ledger.db"
[output]
folder = "released"
[margins.regions]
values = {{ region = ["North", "South", "East", "West", "Centre", "Islands"] }}
{accuracy}
[[release]]
name = "by_region"
kind = "grouped"
by = ["region"]
margins = "regions"
statistics = [
  {{ stat = "count", {count} }},
  {{ stat = "sum", column = "income", lower = 0, upper = 150000, error95 = 2e6 }},
  {{ stat = "median", column = "income", lower = 0, upper = 200000, error95 = 30 }},
  {{ stat = "mean", column = "income", lower = 0, upper = 200000, epsilon = 0.2 }},
]
"""


def write(folder: Path, *, budget="{ epsilon = 2.0 }", accuracy="", count="error95 = 50"):
    synthetic_survey(3_000).write_parquet(folder / "survey.parquet")
    path = folder / "release.toml"
    path.write_text(SPEC.format(budget=budget, accuracy=accuracy, count=count))
    return path


def test_targets_become_the_least_budgets_and_the_plan_shows_them(tmp_path):
    spec = load_spec(write(tmp_path))
    stats = spec.release[0].statistics
    eps = [s.epsilon for s in stats]
    # what the allocator finds for the same statistics (the mean keeps its epsilon)
    curves = [
        statistic_curve(dpframe.agg.count(epsilon=1.0), "substitute"),
        statistic_curve(
            dpframe.agg.sum("income", lower=0, upper=150000, epsilon=1.0), "substitute"
        ),
        statistic_curve(
            dpframe.agg.median("income", lower=0, upper=200000, epsilon=1.0), "substitute"
        ),
    ]
    a = allocate(curves, {"count": 50, "income_sum": 2e6, "income_median": 30})
    assert eps == [a.budgets["count"], a.budgets["income_sum"], a.budgets["income_median"], 0.2]
    planned = plan(spec)
    rows = planned.rows
    errors = dict(zip(rows["statistic"], rows["error95"], strict=True))
    assert errors["count"] <= 50 and errors["income_sum"] <= 2e6 and errors["income_median"] <= 30
    assert errors["count"] == a.errors["count"]  # the error found is the error printed
    lines = planned.assumptions()
    assert any(line.startswith("accuracy: the least total") for line in lines)
    assert (
        f"  by_region/count: target error95 50, epsilon {a.budgets['count']:g} found"
        in "\n".join(lines)
    )
    recorded = spec.to_dict()["accuracy"]
    assert recorded["targets"] == {
        "by_region/count": 50.0,
        "by_region/income_sum": 2e6,
        "by_region/income_median": 30.0,
    }
    assert recorded["found"]["by_region/count"] == a.budgets["count"]
    assert math.isclose(recorded["total"], a.total)


def test_a_spec_without_targets_is_read_as_before(tmp_path):
    assert "accuracy" in load_spec(write(tmp_path)).to_dict()
    plain = write(tmp_path, count="epsilon = 0.3")
    text = (
        plain.read_text()
        .replace("error95 = 2e6", "epsilon = 0.3")
        .replace("error95 = 30", "epsilon = 0.2")
    )
    plain.write_text(text)
    spec = load_spec(plain)
    assert "accuracy" not in spec.to_dict() and spec.accuracy is None
    assert plan(spec).allocation is None
    assert plan(spec).accuracy_lines() == []


def test_a_fixed_budget_is_split_by_the_targets(tmp_path):
    spec = load_spec(write(tmp_path, accuracy="[accuracy]\nbudget = 0.5"))
    acc = spec.accuracy
    assert acc is not None and acc.budget == 0.5
    assert acc.total is not None and acc.total <= 0.5
    ratio = max(acc.errors[k] / acc.targets[k] for k in acc.targets)
    assert ratio > 1  # 0.5 is less than the targets need
    assert "worst error/target" in plan(spec).accuracy_lines()[0]


def test_a_quantile_target_in_value_units_states_its_assumption(tmp_path):
    path = write(tmp_path, accuracy="[accuracy]\ngroup_size = 400")
    path.write_text(path.read_text().replace("error95 = 30 }", "error95 = 10000 }"))
    spec = load_spec(path)
    assert spec.accuracy is not None
    assert "400 values spread evenly" in spec.accuracy.assumptions["by_region/income_median"]
    assert any("assuming 400 values" in line for line in plan(spec).accuracy_lines())


def test_the_ledger_left_cannot_meet_the_targets_refused_before_any_charge(tmp_path):
    path = write(tmp_path, budget="{ epsilon = 0.8 }")
    spec = load_spec(path)  # read: the least budgets need about 1.2
    with pytest.raises(BudgetExceededError) as info:
        plan(spec)
    msg = str(info.value)
    assert "'by_region/count': error95" in msg and "(target 50)" in msg
    assert "Nothing was charged" in msg
    with pytest.raises(BudgetExceededError):
        run(spec, progress=False)
    assert not (tmp_path / "released").exists()
    if (tmp_path / "ledger.db").exists():
        assert dpframe.Accountant.open(tmp_path / "ledger.db").entries == []


def test_a_fixed_budget_above_what_is_left_is_refused(tmp_path):
    path = write(tmp_path, budget="{ epsilon = 0.5 }", accuracy="[accuracy]\nbudget = 0.4")
    with pytest.raises(BudgetExceededError, match=r"accuracy.budget = 0.4 .* worst error/target"):
        plan(load_spec(path))


@pytest.mark.parametrize(
    ("count", "match"),
    [
        ("error95 = 0", "error95 must be > 0"),
        ("error95 = -5", "error95 must be > 0"),
        ("error95 = nan", "error95 must be finite"),
        ("error95 = inf", "error95 must be finite"),
        ('error95 = "50"', "error95 must be a real number"),
        ("error95 = true", "error95 must be a real number"),
        ("error95 = 50, epsilon = 0.3", "give error95 .* or epsilon, not both"),
        ('error95 = 50, mechanism = "gaussian", rho = 0.1', "or rho, not both"),
    ],
)
def test_bad_targets_are_refused_naming_the_field(tmp_path, count, match):
    with pytest.raises(SpecError, match=r"release\[0\]\.statistics\[0\]") as info:
        load_spec(write(tmp_path, count=count))
    assert info.match(match)


def test_a_target_on_a_ratio_is_refused_by_name(tmp_path):
    path = write(tmp_path)
    path.write_text(
        path.read_text().replace("upper = 200000, epsilon = 0.2", "upper = 200000, error95 = 500")
    )
    with pytest.raises(SpecError, match=r"release 'by_region': error95 of 'income_mean'.*private"):
        load_spec(path)


def test_a_bad_accuracy_budget_is_refused(tmp_path):
    with pytest.raises(SpecError, match=r"accuracy.budget.*'least'"):
        load_spec(write(tmp_path, accuracy='[accuracy]\nbudget = "most"'))


def test_python_dicts_take_targets_and_gaussian_rho_on_a_zcdp_budget(tmp_path):
    synthetic_survey(500).write_parquet(tmp_path / "survey.parquet")
    spec = parse_spec(
        {
            "version": 1,
            "input": {"path": "survey.parquet"},
            "privacy": {"budget": {"rho": 0.5, "delta": 1e-6}, "ledger": "l.db"},
            "margins": {"regions": {"values": {"region": ["North", "South"]}}},
            "release": [
                {
                    "name": "n",
                    "kind": "grouped",
                    "by": ["region"],
                    "margins": "regions",
                    "statistics": [{"stat": "count", "mechanism": "gaussian", "error95": 20}],
                }
            ],
        },
        base=tmp_path,
    )
    s = spec.release[0].statistics[0]
    assert s.rho is not None and s.epsilon is None
    planned = plan(spec)
    assert planned.allocation is not None and planned.allocation.currencies["n/count"] == "rho"
    row = planned.rows.filter(pl.col("statistic") == "count").row(0, named=True)
    assert row["error95"] <= 20


def test_a_recorded_spec_edited_by_hand_is_refused(tmp_path):
    data = load_spec(write(tmp_path)).to_dict()
    assert "error95" not in str(data["release"])  # recorded: the budgets, and the targets
    again = parse_spec(data, base=tmp_path)  # read back as recorded: the same budgets
    assert plan(again).allocation is not None
    data["release"][0]["statistics"][0]["epsilon"] = 0.05
    with pytest.raises(SpecError, match=r"'by_region/count' has epsilon 0.05, but its error95"):
        plan(parse_spec(data, base=tmp_path))


@pytest.mark.parametrize(
    ("entry", "where", "match"),
    [
        (
            'kind = "grouped"\nby = ["region"]\nmargins = "regions"\nerror95 = 3\n'
            'statistics = [{ stat = "count", epsilon = 0.1 }]',
            r"release\[1\]\.error95",
            "an error95 target is for a grouped release's statistics",
        ),
        (
            'kind = "covariance"\ncolumns = ["age", "income"]\nbounds = "auto"\nerror95 = 3',
            "release 'other'",
            "found by a first pass",
        ),
        (
            'kind = "pram"\ncolumns = [{ column = "region", prior = "dp", error95 = 0.01 }]',
            "release 'other'",
            "prior='dp' chooses its matrix",
        ),
        (
            'kind = "proportions"\ncolumn = "age_band"\nerror95 = 0.01\nrelative = true',
            "release 'other'",
            r"release\[1\]: relative and group_size are for a grouped statistic",
        ),
    ],
)
def test_a_target_where_none_is_offered_is_refused(tmp_path, entry, where, match):
    path = write(tmp_path)
    path.write_text(path.read_text() + f'\n[[release]]\nname = "other"\n{entry}\n')
    with pytest.raises(SpecError, match=where) as info:
        load_spec(path)
    assert info.match(match)


KINDS = """
[[release]]
name = "shares"
kind = "proportions"
column = "age_band"
error95 = 0.02
[[release]]
name = "cov"
kind = "covariance"
columns = ["age", "satisfaction"]
bounds = [[18, 90], [0, 10]]
error95 = 40
[[release]]
name = "micro"
kind = "pram"
columns = [{ column = "region", error95 = 0.05 }, { column = "age_band", epsilon = 1.0 }]
"""


def test_targets_on_every_release_kind_at_the_inputs_row_count(tmp_path):
    path = write(tmp_path, budget="{ epsilon = 9.0 }")
    path.write_text(path.read_text() + KINDS)
    spec = load_spec(path)
    found = spec.to_dict()["accuracy"]["found"]
    assert spec.release[1].epsilon == found["shares"]
    assert spec.release[2].epsilon == found["cov"]
    assert spec.release[3].columns[0].epsilon == found["micro/region"]
    assert spec.release[3].columns[1].epsilon == 1.0  # no target: as written
    planned = plan(spec)
    lines = "\n".join(planned.accuracy_lines())
    # the error95 is stated at the input's 3000 rows, and the plan says so
    assert (
        "shares: target error95 0.02" in lines and "(assuming n = 3000, the input's rows)" in lines
    )
    assert "micro/region: target error95 0.05" in lines and "3000 records" in lines
    # each found budget is the least meeting its target: the plan's own errors say so
    rows = planned.rows
    for name, target in (("shares", 0.02), ("cov", 40)):
        errors = rows.filter(pl.col("release") == name)["error95"].drop_nulls()
        assert errors.max() <= target
    a = planned.allocation
    assert all(a.errors[k] <= a.targets[k] for k in a.targets)
    assert math.isclose(a.errors["micro/region"], 0.05, rel_tol=1e-4)  # the least: at it
    # the same spec read from an input with another row count is refused by the plan
    synthetic_survey(2_000).write_parquet(tmp_path / "survey.parquet")
    with pytest.raises(SpecError, match=r"'shares' has epsilon .* gives .*on this input"):
        plan(spec)


def test_a_pram_target_the_ledger_cannot_meet_is_refused_naming_it(tmp_path):
    path = write(tmp_path, budget="{ epsilon = 2.0 }", count="epsilon = 0.1")
    text = (
        path.read_text()
        .replace("error95 = 2e6", "epsilon = 0.2")
        .replace("error95 = 30", "epsilon = 0.2")
    )
    pram = (
        '[[release]]\nname = "micro"\nkind = "pram"\n'
        'columns = [{ column = "region", error95 = 0.01 }]\n'
    )
    path.write_text(text + pram)
    spec = load_spec(path)  # read: a share within 0.01 at 3000 rows needs far more than 2
    with pytest.raises(BudgetExceededError) as info:
        plan(spec)
    assert "'micro/region': error95" in str(info.value) and "(target 0.01)" in str(info.value)
    with pytest.raises(BudgetExceededError):
        run(spec, progress=False)
    assert not (tmp_path / "released").exists()


def test_a_mean_at_a_stated_group_size_and_a_relative_count(tmp_path):
    path = write(tmp_path, budget="{ epsilon = 5.0 }")
    path.write_text(
        path.read_text()
        .replace(
            "upper = 200000, epsilon = 0.2", "upper = 200000, error95 = 5000, group_size = 500"
        )
        .replace("error95 = 50 }", "error95 = 0.05, relative = true, group_size = 1000 }")
    )
    spec = load_spec(path)
    acc = spec.to_dict()["accuracy"]
    assert acc["targets"]["by_region/count"] == 0.05 and acc["relative"] == {
        "by_region/count": True
    }
    lines = "\n".join(plan(spec).accuracy_lines())
    assert "by_region/count: target error95 50," in lines  # 5 % of a group of 1000
    assert "relative 0.05 of 1000 (a group of 1000 rows)" in lines
    assert "a group of 500 rows, its mean anywhere in [0, 200000]" in lines
    mean = statistic_curve(
        dpframe.agg.mean("income", lower=0, upper=200000, epsilon=1.0),
        "substitute",
        group_size=500,
    )
    assert spec.release[0].statistics[3].epsilon == mean.least(5000)


def test_a_relative_target_needs_a_group_size(tmp_path):
    with pytest.raises(SpecError, match=r"relative error95 of 'count'.*give group_size"):
        load_spec(write(tmp_path, count="error95 = 0.05, relative = true"))


def test_a_share_of_the_budget_is_fixed_before_the_targets(tmp_path):
    shared = "share = 0.25"
    path = write(tmp_path, accuracy="[accuracy]\nbudget = 1.0", count=shared)
    spec = load_spec(path)
    acc = spec.to_dict()["accuracy"]
    assert acc["shares"] == {"by_region/count": 0.25}
    assert spec.release[0].statistics[0].epsilon == 0.25  # a quarter of 1.0
    assert acc["total"] <= 1.0 + 1e-9
    lines = "\n".join(plan(spec).accuracy_lines())
    assert "by_region/count: share 0.25 of the total, epsilon 0.25 found" in lines
    # with "least": the share is of the least total T whose rest meets the targets
    least = load_spec(write(tmp_path, count=shared))
    acc = least.to_dict()["accuracy"]
    rest = acc["total"] - acc["found"]["by_region/count"]
    assert math.isclose(acc["found"]["by_region/count"], 0.25 * acc["total"], rel_tol=1e-4)
    assert math.isclose(rest, 0.75 * acc["total"], rel_tol=1e-4)


@pytest.mark.parametrize(
    ("count", "match"),
    [
        ("share = 1.5", r"share must be in \[0.0001, 0.9999\]"),
        ("share = 0.2, error95 = 3", "give error95 or share, not both"),
        ("share = 0.2, epsilon = 0.1", "give share .* or epsilon, not both"),
        ("epsilon = 0.1, relative = true", "relative: only with error95"),
        ("share = 0.2, group_size = 100", "group_size: only with error95"),
    ],
)
def test_bad_shares_are_refused_naming_the_field(tmp_path, count, match):
    with pytest.raises(SpecError, match=r"release\[0\]\.statistics\[0\]" + r"[.:].*" + match):
        load_spec(write(tmp_path, count=count))


def test_the_run_records_the_allocation_in_provenance(tmp_path):
    spec = load_spec(write(tmp_path))
    result = run(spec, progress=False)
    prov = dpframe.read_provenance(result.outputs["by_region"])
    assert prov.spec["accuracy"]["targets"]["by_region/count"] == 50.0
    assert prov.spec["accuracy"]["found"] == spec.to_dict()["accuracy"]["found"]


def test_the_runs_report_shows_the_allocation(tmp_path):
    spec = load_spec(write(tmp_path, count="share = 0.1"))
    result = run(spec, progress=False)
    page = result.report.read_text()
    found = spec.to_dict()["accuracy"]["found"]
    assert "<h2>Plan by accuracy</h2>" in page
    assert "the least total meeting the error95 targets" in page
    assert "by_region/income_median" in page and "share 0.1" in page
    assert f"{found['by_region/income_sum']:.6g}" in page
    data = read_report_data(result.report.resolve().parent)
    assert data is not None and data.accuracy is not None
    assert {r["statistic"] for r in data.accuracy["rows"]} == set(found)
    # a spec without targets: no such section
    plain = tmp_path / "plain"
    plain.mkdir()
    path = write(plain, count="epsilon = 0.1")
    path.write_text(
        path.read_text()
        .replace("error95 = 2e6", "epsilon = 0.2")
        .replace("error95 = 30", "epsilon = 0.2")
    )
    page = run(load_spec(path), progress=False).report.read_text()
    assert "Plan by accuracy" not in page
