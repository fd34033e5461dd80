"""A Python-API release checks itself, without restating its statistics (issue 15)."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.errors import InvalidParameterError
from dpframe.jobs.checks import check, check_release, expectations

REGIONS = ["N", "S", "E"]


@pytest.fixture
def survey():
    rng = np.random.default_rng(7)
    n = 3000
    return pl.DataFrame(
        {
            "region": rng.choice(REGIONS, n),
            "x": rng.uniform(0, 10, n),
            "y": rng.uniform(0, 10, n),
            "vote": rng.choice(["a", "b", "c"], n),
        }
    )


def _failed(result) -> str:
    assert not result.success
    return "\n".join(result.failures)


def test_a_grouped_release_checks_itself(survey):
    acct = dpframe.Accountant(epsilon=5.0)
    sizes = survey.group_by("region").len("size")
    margins = pl.DataFrame({"region": REGIONS}).join(sizes, on="region").cast({"size": pl.Int64})
    rel = dpframe.group_by(survey, "region", margins=margins, sizes="size", accountant=acct).agg(
        dpframe.agg.count(epsilon=0.5),
        dpframe.agg.mean("x", lower=0, upper=10, epsilon=0.5),
        dpframe.agg.var("x", lower=0, upper=10, epsilon=0.5),
        dpframe.agg.cov("x", "y", lower_x=0, upper_x=10, lower_y=0, upper_y=10, epsilon=0.6),
    )
    with pytest.raises(InvalidParameterError, match="collect it first"):
        check(rel)
    assert acct.spent.epsilon == 0  # checking never charges
    table = rel.collect()
    spent = acct.spent.epsilon
    result = check(rel, name="by_region")
    assert result.success, result.failures
    assert acct.spent.epsilon == spent  # nor does checking a collected release
    assert {e["table"] for e in expectations(rel)} >= {"main", "keys", "integers", "correlations"}
    doctored = table.with_columns(pl.col("count").map_elements(lambda v: math.inf, pl.Float64))
    assert "count" in _failed(check(rel, doctored))
    doctored = table.with_columns(pl.lit(1e6).alias("x_var"))
    assert "x_var" in _failed(check(rel, doctored))


def test_a_covariance_matrix_checks_itself(survey):
    acct = dpframe.Accountant(epsilon=1.0)
    rel = dpframe.covariance_matrix(
        survey, ["x", "y"], [(0, 10), (0, 10)], epsilon=1.0, n=survey.height, accountant=acct
    )
    table = rel.collect()
    assert rel.output_types() == {c: str(t) for c, t in table.schema.items()}
    assert check(rel).success
    doctored = table.with_columns(
        pl.when(pl.col("column") == "x").then(1e9).otherwise(pl.col("x")).alias("x")
    )
    assert "above" in _failed(check(rel, doctored))


def test_proportions_check_themselves(survey):
    acct = dpframe.Accountant(epsilon=1.0)
    rel = dpframe.proportions(
        survey, "vote", categories=["a", "b", "c"], epsilon=1.0, n=survey.height, accountant=acct
    )
    table = rel.collect()
    assert rel.output_types() == {c: str(t) for c, t in table.schema.items()}
    assert check(rel).success
    assert "sum" in _failed(check(rel, table.with_columns(pl.col("proportion") * 2)))


def test_a_pram_release_checks_its_own_file(survey, tmp_path):
    """A PRAM file checked on its own: its row count comes from the release (and the file's
    provenance), and a kept column is allowed but no other."""
    acct = dpframe.Accountant(epsilon=2.0)
    rel = dpframe.pram.release(
        survey,
        [{"column": "vote", "epsilon": 1.0, "categories": ["a", "b", "c"]}],
        keep=["region"],
        accountant=acct,
    )
    out = tmp_path / "micro.parquet"
    rel.write(out)
    assert dpframe.read_provenance(out).facts["input_rows"] == survey.height
    result = check(rel, out)
    assert result.success, result.failures
    with pytest.raises(InvalidParameterError, match="file it wrote"):
        check(rel)
    leaked = tmp_path / "leaked.parquet"
    pl.read_parquet(out).with_columns(survey["x"]).write_parquet(leaked)
    assert "x" in _failed(check(rel, leaked))
    short = tmp_path / "short.parquet"
    pl.read_parquet(out).slice(5).write_parquet(short)
    assert "row count" in _failed(check(rel, short))


def test_a_release_s_suite_needs_only_its_spec_entry_its_facts_and_its_table(survey, tmp_path):
    """The declaration is the release object's: its spec entry and facts, as a file's
    provenance records them (JSON), rebuild the same suite with no input data; a PRAM
    release's categories come back from its verified ledger entries."""
    acct = dpframe.Accountant(epsilon=5.0)
    margins = pl.DataFrame({"region": [*REGIONS, "W"]})
    rel = dpframe.group_by(survey, "region", margins=margins, accountant=acct).agg(
        dpframe.agg.count(epsilon=0.5),
        dpframe.agg.sum("x", lower=0, upper=10, epsilon=0.5, name="x_total"),
    )
    table = rel.collect()
    entry, facts = rel.to_spec(name="by_region"), rel.facts()
    assert entry["kind"] == "grouped" and entry["by"] == ["region"]
    assert facts == {"margins": {"region": [*REGIONS, "W"]}, "sizes": None}
    assert rel.output_types() == {"count": "Int64", "x_total": "Float64"}
    recorded = json.loads(json.dumps(facts))  # as a file records them
    again = type(rel).suite(json.loads(json.dumps(entry)), recorded, table)
    assert again.expectations == rel.expectations(table, facts).expectations
    assert again.release == "by_region" and again.kind == "grouped"
    # the sum's lower bound is 0: its release is clamped, and its suite expects >= 0
    (low,) = [
        e["kwargs"]["min_value"]
        for e in again.expectations
        if e["table"] == "main"
        and e["kwargs"].get("column") == "x_total"
        and "min_value" in e["kwargs"]
    ]
    assert low == 0.0

    micro = dpframe.pram.release(
        survey.lazy(),
        [{"column": "region", "epsilon": 1.0, "categories": REGIONS}],
        accountant=acct,
    )
    path = tmp_path / "micro.parquet"
    micro.write(path)
    assert (
        micro.output_types()
        == {"region": "String"}
        == {c: str(t) for c, t in pl.read_parquet_schema(path).items()}
    )
    prov = dpframe.read_provenance(path)
    entry = micro.to_spec(name="micro")
    entry["columns"][0]["categories"] = None  # left to the ledger's record
    facts = type(micro).read_facts(prov.facts, prov.entries)
    assert facts == {"input_rows": survey.height, "categories": {"region": REGIONS}}
    suite = type(micro).suite(entry, facts, pl.scan_parquet(path))
    (cats,) = [
        e["kwargs"]["value_set"]
        for e in suite.expectations
        if e["type"] == "expect_column_values_to_be_in_set" and e["table"] == "values.region"
    ]
    assert cats == REGIONS


def test_a_grouped_release_by_dates_is_checked_from_its_recorded_keys(tmp_path):
    """The keys a file records (dates and times as text) are read back in the released
    dtypes: the job's check and a later check of the published folder both pass, and a
    key outside them fails."""
    import datetime as dt

    from dpframe.jobs import check_folder, parse_spec, run

    days = [dt.date(2024, 1, d) for d in (1, 2, 3)]
    when = pl.datetime_range(
        dt.datetime(2024, 1, 1, 9),
        dt.datetime(2024, 1, 1, 11),
        "1h",
        time_zone="Europe/Paris",
        eager=True,
    ).to_list()
    rng = np.random.default_rng(3)
    frame = pl.DataFrame(
        {
            "day": pl.Series(days).gather(rng.integers(0, 3, 500)),
            "at": pl.Series(when).gather(rng.integers(0, 3, 500)),
        }
    )
    frame.write_parquet(tmp_path / "input.parquet")
    pl.DataFrame({"day": days}).join(pl.DataFrame({"at": when}), how="cross").write_parquet(
        tmp_path / "keys.parquet"
    )
    spec = parse_spec(
        {
            "version": 1,
            "input": {"path": str(tmp_path / "input.parquet")},
            "privacy": {"budget": {"epsilon": 1.0}, "ledger": str(tmp_path / "l.db")},
            "output": {"folder": str(tmp_path / "out")},
            "margins": {"keys": {"path": str(tmp_path / "keys.parquet")}},
            "release": [
                {
                    "name": "by_day",
                    "kind": "grouped",
                    "by": ["day", "at"],
                    "margins": "keys",
                    "statistics": [{"stat": "count", "epsilon": 0.5}],
                }
            ],
        }
    )
    result = run(spec, progress=False)
    assert [c.success for c in result.checks] == [True]
    assert [c.success for c in check_folder(tmp_path / "out")] == [True]
    path = tmp_path / "out" / "by_day.parquet"
    prov = dpframe.read_provenance(path)
    assert prov.facts["margins"]["day"][:1] == ["2024-01-01"]
    rel = result.releases["by_day"]
    moved = pl.read_parquet(path).with_columns(pl.col("day").dt.offset_by("1y"))
    suite = type(rel).suite(prov.spec["release"][0], prov.facts, moved)
    assert "not among the margins' keys" in _failed(check_release(suite))


def test_a_release_s_spec_entry_is_a_valid_entry_of_a_release_spec(survey):
    """``to_spec()`` gives the release's arguments as the spec states them: each kind's
    entry is valid for the spec model of its kind (a person unit included)."""
    from dpframe.jobs.spec import CovarianceSpec, GroupedSpec, PramSpec, ProportionsSpec

    models = {
        "grouped": GroupedSpec,
        "pram": PramSpec,
        "proportions": ProportionsSpec,
        "covariance": CovarianceSpec,
    }
    acct = dpframe.Accountant(epsilon=5.0)
    people = survey.with_columns(pid=pl.int_range(pl.len()) // 2)
    margins = pl.DataFrame({"region": REGIONS})
    releases = [
        dpframe.group_by(
            people, "region", margins=margins, accountant=acct, unit="pid", max_rows=2, max_groups=1
        ).agg(dpframe.agg.count(epsilon=0.5)),
        dpframe.pram.release(
            survey.lazy(), [{"column": "vote", "epsilon": 1.0, "categories": ["a", "b", "c"]}]
        ),
        dpframe.proportions(survey, "vote", categories=["a", "b", "c"], epsilon=1.0, n=3000),
        dpframe.covariance_matrix(survey, ["x", "y"], [(0, 10), (0, 10)], epsilon=1.0, n=3000),
    ]
    for rel in releases:
        entry = rel.to_spec(name="r")
        model = models[entry["kind"]].model_validate(entry)
        assert model.name == "r"
    grouped = releases[0].to_spec()
    assert (grouped["unit"], grouped["max_rows"], grouped["max_groups"]) == ("pid", 2, 1)
