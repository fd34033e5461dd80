"""A release spec with a grouped median and quantiles: planned (the rank error shown
before anything is spent), run, published, checked from the published files, and shown
in the report (issue 34)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dpframe.jobs import check, load_spec, plan, run
from tests.jobs.conftest import write_spec

QUANTILES = """
[[release]]
name = "income_quantiles"
kind = "grouped"
by = ["region"]
margins = "regions"

[[release.statistics]]
stat = "median"
column = "income"
lower = 0
upper = 200000
epsilon = 0.2

[[release.statistics]]
stat = "quantile"
column = "age"
q = [0.1, 0.5, 0.9]
lower = 18
upper = 90
resolution = 1
epsilon = 0.2
name = "age"

[margins.regions]
values = { region = ["North", "South", "East", "West", "Centre", "Islands"] }
"""


@pytest.fixture
def quantile_spec(tmp_path: Path) -> Path:
    path = write_spec(tmp_path, rows=3_000, budget=4.0)
    path.write_text(path.read_text() + QUANTILES)
    return path


def test_the_plan_shows_the_rank_error_before_anything_is_spent(quantile_spec: Path):
    planned = plan(load_spec(quantile_spec))
    rows = planned.rows.filter(pl.col("release") == "income_quantiles")
    assert rows["mechanism"].to_list() == ["exponential"] * 2
    assert rows["statistic"].to_list() == ["income_median", "age"]
    assert all("rank error" in note for note in rows["note"].to_list())


def test_the_run_publishes_every_group_checks_and_reports_the_quantiles(quantile_spec: Path):
    spec = load_spec(quantile_spec)
    result = run(spec, progress=False)
    out = quantile_spec.parent / "released"
    table = pl.read_parquet(out / "income_quantiles.parquet")
    assert table.columns == ["region", "income_median", "age_q10", "age_q50", "age_q90"]
    assert table.height == 6 and table.null_count().sum_horizontal().item() == 0
    ages = table.select("age_q10", "age_q50", "age_q90").to_numpy()
    assert (ages[:, :-1] <= ages[:, 1:]).all() and (ages >= 18).all() and (ages <= 90).all()
    assert all(c.success for c in result.checks)
    assert "income_quantiles" in [c.release for c in result.checks]
    assert all(c.success for c in check(spec))  # again, from the published files
    page = (out / "report.html").read_text()
    assert "Release income_quantiles" in page
    for column in ("income_median", "age_q10", "age_q90", "exponential"):
        assert column in page
