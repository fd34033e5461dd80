"""A Python-API release checks itself, without restating its statistics (issue 15)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.errors import InvalidParameterError
from dpframe.jobs.selfcheck import check, expectations

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
