"""dpframe.jobs.progress: one line per step off a terminal, rows per streamed batch."""

from __future__ import annotations

import logging
import re

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.engines.progress import counting_rows
from dpframe.jobs import load_spec, run
from dpframe.jobs.progress import JobProgress

from .conftest import write_spec

STEP = re.compile(r"\[(\d+)/(\d+)\] (.+): (failed after )?(\d+\.\d\d) s$")


def test_a_job_logs_one_line_per_step_with_its_number_and_time(tmp_path, caplog):
    spec = load_spec(write_spec(tmp_path, rows=3000))
    with caplog.at_level(logging.INFO, logger="dpframe.jobs"):
        run(spec, progress=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "dpframe.jobs"]
    steps = [STEP.match(line) for line in lines]
    assert all(steps), lines
    n = 4 * len(spec.release) + 3
    assert [int(m[1]) for m in steps] == list(range(1, n + 1))
    assert {int(m[2]) for m in steps} == {n}
    names = [m[3] for m in steps]
    for r in spec.release:
        for what in ("reading and checking", "drawing", "writing"):
            assert f"{what} {r.name}" in names
        assert f"checking {r.name} against its expectations" in names
    assert names[-1] == "publishing the run"


def test_no_progress_logs_nothing(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="dpframe.jobs"):
        run(load_spec(write_spec(tmp_path, rows=3000)), progress=False)
    assert not [r for r in caplog.records if r.name == "dpframe.jobs"]


def test_a_failing_step_says_so(caplog):
    progress = JobProgress(True, total=3, terminal=False)
    with caplog.at_level(logging.INFO, logger="dpframe.jobs"), pytest.raises(KeyError), progress:
        with progress.step("reading and checking a"):
            pass
        with progress.step("drawing a"):
            raise KeyError("boom")
    lines = [r.getMessage() for r in caplog.records]
    assert STEP.match(lines[0])[4] is None
    assert STEP.match(lines[1])[4] == "failed after "


def test_a_streamed_pram_write_reports_its_rows_batch_by_batch(tmp_path):
    """The rows counted are the input's rows, in several batches (morsels), not one."""
    n = 400_000
    path = tmp_path / "records.parquet"
    cats = ["a", "b", "c"]
    pl.DataFrame(
        {"c": pl.Series([cats[i % 3] for i in range(n)], dtype=pl.Enum(cats))}
    ).write_parquet(path, row_group_size=50_000)
    batches: list[int] = []
    with dpframe.Accountant(epsilon=1.0), counting_rows(batches.append):
        release = dpframe.pram.release(pl.scan_parquet(path), [{"column": "c", "epsilon": 0.5}])
        release.write(tmp_path / "out.parquet")
    assert sum(batches) == n
    assert len(batches) > 1


def test_the_command_prints_the_step_lines_unless_no_progress(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, rows=3000)
    res = CliRunner().invoke(app, ["release", str(spec)])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stderr.splitlines() if line.startswith("dpframe [")]
    assert len(lines) == 4 * len(load_spec(spec).release) + 3
    res = CliRunner().invoke(
        app, ["release", str(write_spec(tmp_path, rows=3000, ledger="l2.db")), "--no-progress"]
    )
    assert not [line for line in res.stderr.splitlines() if line.startswith("dpframe [")]


def test_the_terminal_bar_follows_a_streamed_step(capsys):
    from dpframe.engines.progress import rows_done

    progress = JobProgress(True, total=2, terminal=True)
    with progress:
        with progress.step("writing microdata", rows=300):
            for _ in range(3):
                rows_done(100)
            task = progress._bar.tasks[-1]
            assert (task.completed, task.total) == (300, 300)
        with progress.step("publishing the run"):
            assert len(progress._bar.tasks) == 1  # the finished step is gone
    assert progress._bar is None
