"""Every suite a run publishes runs in a Great Expectations user's own Data Context (issue 15).

Each release's ``<name>.checks/`` folder holds the tables its checks validate (the
released table as checked, ``main``, and the tables derived from it) beside plain Great
Expectations suites. Here a fresh *file* Data Context -- as a GE user would make one --
loads them, validates them in one Checkpoint, and fails a doctored table.
"""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from dpframe.jobs import load_spec, run
from tests.jobs.conftest import write_spec


def _checkpoint(tmp_path, folders):
    """A fresh file Data Context validating every table of ``folders`` in one Checkpoint."""
    import great_expectations as gx

    context = gx.get_context(mode="file", project_root_dir=str(tmp_path / "gx"))
    definitions = []
    for folder in folders:
        release = folder.name.removesuffix(".checks")
        source = context.data_sources.add_pandas_filesystem(
            name=release, base_directory=str(folder)
        )
        for suite_file in sorted(folder.glob("*.suite.json")):
            table = suite_file.name.removesuffix(".suite.json")
            doc = json.loads(suite_file.read_text())
            suite = context.suites.add(gx.ExpectationSuite(**doc))
            # a suite reloaded from JSON silently drops an expectation it cannot build
            assert len(suite.expectations) == len(doc["expectations"]) > 0
            asset = source.add_parquet_asset(name=table)
            batch = asset.add_batch_definition_path(name=table, path=f"{table}.parquet")
            definitions.append(
                context.validation_definitions.add(
                    gx.ValidationDefinition(name=f"{release}.{table}", data=batch, suite=suite)
                )
            )
    return context.checkpoints.add(
        gx.Checkpoint(name="released", validation_definitions=definitions)
    )


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gx")
    result = run(load_spec(write_spec(folder, rows=3000, budget=10.0)), progress=False)
    return result.folder / "current"


def test_every_published_suite_runs_in_a_fresh_data_context(run_folder, tmp_path):
    folders = sorted(run_folder.glob("*.checks"))
    names = {f.name.removesuffix(".checks") for f in folders}
    assert names == {"by_region", "microdata", "age_shares", "scores_cov"}
    result = _checkpoint(tmp_path, folders).run()
    assert result.success, result.describe()
    assert len(result.run_results) >= 12  # every table of every release was validated


def test_a_doctored_table_fails_in_the_data_context(run_folder, tmp_path):
    copy = tmp_path / "by_region.checks"
    shutil.copytree((run_folder / "by_region.checks").resolve(), copy)
    keys = pl.read_parquet(copy / "keys.parquet")
    keys.with_columns(pl.col("__rows") * 2).write_parquet(copy / "keys.parquet")  # each key twice
    result = _checkpoint(tmp_path, [copy]).run()
    assert not result.success
    failed = [
        str(r.expectation_config.kwargs.get("column"))
        for v in result.run_results.values()
        for r in v.results
        if not r.success
    ]
    assert failed == ["__rows"]
