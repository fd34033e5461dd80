"""Shared fixtures: a survey in Parquet and a spec over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpframe.datasets import AGE_BANDS, REGIONS, synthetic_survey

SPEC = """
version = 1

[input]
path = "survey.parquet"

[privacy]
unit = "record"
neighbours = "substitute"
budget = {{ epsilon = {budget} }}
ledger = "{ledger}"

[output]
folder = "released"

[margins.region_age]
values = {{ region = {regions}, age_band = {bands} }}

[[release]]
name = "by_region"
kind = "grouped"
by = ["region", "age_band"]
margins = "region_age"

[[release.statistics]]
stat = "count"
epsilon = 0.3

[[release.statistics]]
stat = "mean"
column = "income"
lower = 0
upper = 200000
epsilon = 0.3

[[release.statistics]]
stat = "cov"
x = "satisfaction"
y = "trust"
lower = 0
upper = 10
lower_y = 0
upper_y = 10
epsilon = 0.2

[[release]]
name = "microdata"
kind = "pram"
columns = [
    {{ column = "region", epsilon = 0.5 }},
    {{ column = "age_band", epsilon = 0.5 }},
]

[[release]]
name = "age_shares"
kind = "proportions"
column = "age_band"
epsilon = 0.2
strategy = "all_but_one"
tolerance = 1e-6

[[release]]
name = "scores_cov"
kind = "covariance"
columns = ["satisfaction", "trust"]
bounds = [[0, 10], [0, 10]]
epsilon = 0.3
repair = "higham"
"""

EPSILON_TOTAL = 0.8 + 1.0 + 0.2 + 0.3


def write_spec(
    folder: Path, rows: int = 20_000, budget: float = 3.0, ledger: str = "ledger.db"
) -> Path:
    """The survey and a spec over it; ``ledger`` a file or a ``postgresql://`` URL."""
    synthetic_survey(rows).write_parquet(folder / "survey.parquet")
    spec = folder / "release.toml"
    text = SPEC.format(budget=budget, regions=list(REGIONS), bands=list(AGE_BANDS), ledger=ledger)
    spec.write_text(text.replace("'", '"'))
    return spec


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    return write_spec(tmp_path)
