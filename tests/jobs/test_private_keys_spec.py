"""A release spec with groups not known in advance (issue 35): ``private_keys = {...}``
planned (the selection's line before anything is spent), run, published and checked from
the published files; a budget without delta refused when the spec is validated."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dpframe.datasets import REGIONS
from dpframe.jobs import SpecError, check, load_spec, plan, run
from dpframe.mechanisms.key_selection import plan_key_selection
from tests.jobs.conftest import write_spec

KEYS = """
[[release]]
name = "by_region_private"
kind = "grouped"
by = ["region"]
private_keys = { epsilon = 0.5, delta = 1e-6 }

[[release.statistics]]
stat = "count"
epsilon = 0.2

[[release]]
name = "by_region_hybrid"
kind = "grouped"
by = ["region"]
margins = "few"
private_keys = { epsilon = 0.5, delta = 1e-6, method = "laplace" }

[[release.statistics]]
stat = "count"
epsilon = 0.2

[margins.few]
values = { region = ["Islands", "North"] }
"""


def spec_file(tmp_path: Path, budget: str) -> Path:
    path = write_spec(tmp_path, rows=3_000, budget=4.0)
    text = path.read_text().replace("budget = { epsilon = 4.0 }", f"budget = {budget}")
    path.write_text(text + KEYS)
    return path


def test_plan_run_and_checks(tmp_path: Path) -> None:
    spec = load_spec(spec_file(tmp_path, "{ epsilon = 5.0, delta = 1e-5 }"))
    planned = plan(spec)
    rows = planned.rows.filter(pl.col("release") == "by_region_private")
    assert rows["statistic"].to_list() == ["keys", "count"]
    assert rows["delta"].to_list() == [1e-6, 0.0]
    assert "threshold" in rows["note"][0]
    result = run(spec, progress=False)
    out = tmp_path / "released"
    persons = pl.read_parquet(tmp_path / "survey.parquet")["region"].value_counts()
    sure = plan_key_selection(0.5, 1e-6, max_groups=2).threshold  # substitute: 2 keys
    surely = {r for r, n in persons.iter_rows() if n >= sure}
    assert len(surely) >= 4
    private = set(pl.read_parquet(out / "by_region_private.parquet")["region"].to_list())
    assert surely <= private <= set(REGIONS)
    hybrid = pl.read_parquet(out / "by_region_hybrid.parquet")["region"].to_list()
    assert hybrid[:2] == ["Islands", "North"]  # every margin key, in the margins' order
    assert surely - {"Islands", "North"} <= set(hybrid[2:]) <= set(REGIONS) - {"Islands", "North"}
    assert all(c.success for c in result.checks)
    assert all(c.success for c in check(spec))  # again, from the published files
    assert result.delta == pytest.approx(2e-6)
    page = (out / "report.html").read_text()
    assert "key_selection:magic" in page and "key_selection:laplace" in page  # its line


def test_a_budget_without_delta_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"privacy\.budget\.delta"):
        load_spec(spec_file(tmp_path, "{ epsilon = 5.0 }"))


def test_the_spec_runs_on_spark_with_the_same_keys(tmp_path: Path, spark) -> None:
    """The same seeded spec on both engines: the same keys selected, the same counts."""
    released = {}
    for engine in ("polars", "spark"):
        folder = tmp_path / engine
        folder.mkdir()
        path = spec_file(folder, "{ epsilon = 5.0, delta = 1e-5 }")
        path.write_text(path.read_text().replace("[privacy]", "[privacy]\nseed = 7", 1))
        spec = load_spec(path)
        if engine == "spark":
            result = run(spec, engine="spark", spark=spark, progress=False)
        else:
            result = run(spec, progress=False)
        assert all(c.success for c in result.checks)
        released[engine] = pl.read_parquet(folder / "released" / "by_region_private.parquet")
    text = released["polars"].with_columns(pl.col("region").cast(pl.String))  # Spark: no Enum
    assert text.equals(released["spark"])
    assert released["polars"].height >= 4
