"""A release job never replaces what it reads, its ledger, or a name dpframe did not
create (issue 31, C): refused before anything is charged or written."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import EXIT_INVALID, app
from dpframe.errors import InvalidParameterError
from dpframe.jobs import SpecError, load_spec, parse_spec, run

from .conftest import write_spec

runner = CliRunner()


def _edit(path: Path, *pairs: tuple[str, str]) -> None:
    text = path.read_text()
    for old, new in pairs:
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)


def _glob_spec(tmp_path: Path) -> Path:
    """``input.path = "data/*.parquet"``, ``output.folder = "data"``, a release ``part-1``."""
    spec = write_spec(tmp_path, rows=500, budget=10.0)
    (tmp_path / "data").mkdir()
    os.replace(tmp_path / "survey.parquet", tmp_path / "data" / "part-1.parquet")
    _edit(
        spec,
        ('path = "survey.parquet"', 'path = "data/*.parquet"'),
        ('folder = "released"', 'folder = "data"'),
        ('name = "microdata"', 'name = "part-1"'),
    )
    return spec


def test_an_output_folder_matched_by_the_input_glob_is_refused(tmp_path):
    """Old: the input ``data/part-1.parquet`` became a link to the released table (its
    500 rows gone)."""
    spec = _glob_spec(tmp_path)
    part = tmp_path / "data" / "part-1.parquet"
    before = part.read_bytes()
    with pytest.raises(SpecError, match=r"data/\*\.parquet"):
        load_spec(spec)
    res = runner.invoke(app, ["release", str(spec), "--no-progress"])
    assert res.exit_code == EXIT_INVALID, res.output
    assert "matches the input" in res.output
    assert not part.is_symlink() and part.read_bytes() == before
    assert pl.read_parquet(part).height == 500
    assert sorted(os.listdir(tmp_path / "data")) == ["part-1.parquet"]
    assert not (tmp_path / "ledger.db").exists()  # nothing charged: no ledger was opened


def test_an_output_that_is_a_file_the_input_frame_scans_is_refused(tmp_path):
    """The same through a spec built in Python: the frame's scan sources (the glob as
    polars expands it) are what the run reads."""
    spec_path = _glob_spec(tmp_path)
    part = tmp_path / "data" / "part-1.parquet"
    before = part.read_bytes()
    data = {
        "version": 1,
        "privacy": {"budget": {"epsilon": 10.0}, "ledger": str(tmp_path / "ledger.db")},
        "output": {"folder": str(tmp_path / "data")},
        "release": [
            {
                "name": "part-1",
                "kind": "pram",
                "columns": [{"column": "region", "epsilon": 0.5}],
            }
        ],
    }
    spec = parse_spec(data, frame=pl.scan_parquet(tmp_path / "data" / "*.parquet"))
    with pytest.raises(InvalidParameterError, match=r"^output.folder: .*part-1\.parquet is the"):
        run(spec, progress=False)
    assert part.read_bytes() == before and not part.is_symlink()
    assert not (tmp_path / "ledger.db").exists()
    assert spec_path.exists()


def test_publish_never_replaces_a_file_or_folder_it_did_not_create(tmp_path):
    """Old: publish ``rmtree``d the user's ``by_region.checks/`` (with ``my-notes.txt``)
    and replaced their ``report.html``; docs: "other files in the output folder are left
    alone"."""
    spec = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    (out / "by_region.checks").mkdir(parents=True)
    (out / "by_region.checks" / "my-notes.txt").write_text("mine")
    (out / "report.html").write_text("my report")
    res = runner.invoke(app, ["release", str(spec), "--no-progress"])
    assert res.exit_code == EXIT_INVALID, res.output
    assert "by_region.checks, report.html" in res.output
    assert "did not create" in res.output and "move them" in res.output
    assert sorted(os.listdir(out)) == ["by_region.checks", "report.html"]
    assert (out / "by_region.checks" / "my-notes.txt").read_text() == "mine"
    assert (out / "report.html").read_text() == "my report"
    assert not (tmp_path / "ledger.db").exists()  # refused before the ledger was opened
    # moved away, the run publishes; a second run replaces only its own links
    (out / "report.html").rename(tmp_path / "report.html")
    (out / "by_region.checks").rename(tmp_path / "by_region.checks")
    first = run(load_spec(spec), progress=False)
    second = run(load_spec(spec), progress=False)
    assert os.readlink(out / "report.html") == "current/report.html"
    assert Path(os.path.realpath(out / "current")).name == second.run != first.run


def test_a_link_the_user_made_at_a_published_name_is_refused(tmp_path):
    """A top-level name that is a link, but not dpframe's ``-> current/<name>`` (here to
    the input itself), is not replaced."""
    spec = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    out.mkdir()
    (out / "by_region.parquet").symlink_to(tmp_path / "survey.parquet")
    with pytest.raises(InvalidParameterError, match=r"by_region\.parquet"):
        run(load_spec(spec), progress=False)
    assert os.readlink(out / "by_region.parquet") == str(tmp_path / "survey.parquet")
    assert not (tmp_path / "ledger.db").exists()


def test_a_name_that_appears_after_the_check_is_left_alone(tmp_path, monkeypatch):
    """A file put at a published name after the pre-charge check (another process) is
    not replaced: the run is published under ``current/`` and a warning names it."""
    from dpframe.jobs import job

    spec = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    real = job.check_output_folder

    def then_a_file_appears(folder, *args, **kwargs):
        real(folder, *args, **kwargs)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.html").write_text("written meanwhile")

    monkeypatch.setattr(job, "check_output_folder", then_a_file_appears)
    with pytest.warns(UserWarning, match=r"report\.html is not dpframe's: left alone"):
        result = run(load_spec(spec), progress=False)
    assert (out / "report.html").read_text() == "written meanwhile"
    assert (out / "current" / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert os.readlink(out / "by_region.parquet") == "current/by_region.parquet"
    assert Path(os.path.realpath(out / "current")).name == result.run


def test_repair_leaves_a_user_file_named_like_a_moved_aside_folder(tmp_path):
    spec = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    out.mkdir()
    (out / ".old-notes").write_text("mine")  # not dpframe's .old-<name>-<8 hex digits>
    run(load_spec(spec), progress=False)
    assert (out / ".old-notes").read_text() == "mine"
    assert dpframe.read_provenance(out / "by_region.parquet").epsilon > 0


def test_ledger_export_never_writes_over_the_ledger(tmp_path):
    """``dpframe ledger export L --output L`` (a ledger whose file ends in .parquet) wrote
    the export over the ledger; now refused, exit code 2, the ledger intact."""
    ledger = tmp_path / "ledger.parquet"
    acct = dpframe.Accountant.open(ledger, epsilon=1.0)
    acct.spend(0.25, mechanism="laplace", columns=["x"])
    res = runner.invoke(app, ["ledger", "export", str(ledger), "--output", str(ledger)])
    assert res.exit_code == 2 and "is the ledger" in res.output, res.output
    assert dpframe.Accountant.open(ledger).spent.epsilon == 0.25


def test_on_spark_the_input_files_are_listed_and_a_foreign_name_is_refused(spark, tmp_path):
    """The same guard on the Spark engine: the frame's input files come from Spark
    (``inputFiles()``), and a name dpframe did not create is refused before the charge."""
    from dpframe.polars.io import frame_reads

    spec = write_spec(tmp_path, rows=1000, budget=10.0)
    sdf = spark.read.parquet(str(tmp_path / "survey.parquet"))
    reads = frame_reads(sdf)
    assert [Path(r.path).resolve() for r in reads] == [(tmp_path / "survey.parquet").resolve()]
    out = tmp_path / "released"
    out.mkdir()
    (out / "report.html").write_text("my report")
    with pytest.raises(InvalidParameterError, match=r"report\.html, which dpframe did not"):
        run(load_spec(spec), engine="spark", spark=spark, progress=False)
    assert (out / "report.html").read_text() == "my report"
    assert not (tmp_path / "ledger.db").exists()


def test_a_runs_folder_that_is_a_link_is_refused(tmp_path):
    """``.runs`` is emptied of older runs at each publish: a link there (to a folder of
    the user's) is refused before the charge, and nothing under it is removed."""
    spec = write_spec(tmp_path, rows=1000, budget=10.0)
    mine = tmp_path / "mine"
    (mine / "project").mkdir(parents=True)
    out = tmp_path / "released"
    out.mkdir()
    (out / ".runs").symlink_to(mine)
    with pytest.raises(InvalidParameterError, match=r"\.runs, which dpframe did not"):
        run(load_spec(spec), progress=False)
    assert (mine / "project").is_dir() and not (tmp_path / "ledger.db").exists()
