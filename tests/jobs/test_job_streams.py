"""A release job streams: no query of a record-level job collects a frame as tall as its
input (each exact input, each check's table and each count is an aggregate)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import dpframe
from dpframe.datasets import synthetic_survey
from dpframe.engines.driver import indexed_margins
from dpframe.engines.polars import PolarsEngine
from dpframe.jobs import load_spec, run
from dpframe.mechanisms.statistics import median

ROWS = 60_000
#: the tallest aggregate the demo spec needs: by_region's median histogram, one row per
#: (group, cell) at most: 6 x 3 groups, 2 x 1000 + 1 cells
TALLEST = 18 * 2001


@pytest.fixture
def collected(monkeypatch):
    """The height of every frame a query collects meanwhile."""
    heights: list[int] = []
    collect, collect_all = pl.LazyFrame.collect, pl.collect_all

    def one(self, *args, **kwargs):
        frame = collect(self, *args, **kwargs)
        heights.append(frame.height)
        return frame

    def many(*args, **kwargs):
        frames = collect_all(*args, **kwargs)
        heights.extend(f.height for f in frames)
        return frames

    monkeypatch.setattr(pl.LazyFrame, "collect", one)
    monkeypatch.setattr(pl, "collect_all", many)
    return heights


def test_a_histogram_is_counted_while_streaming_not_collected_per_record(collected):
    part = median("x", lower=0, upper=10, epsilon=1.0, resolution=1).parts(False)[0]
    # 1000 keys in the data, 3 in the margins: what is collected is bounded by the margins
    # and the cells, not by the records nor by the keys outside the margins
    lf = pl.LazyFrame({"g": [i % 1000 for i in range(ROWS)], "x": [i % 11 for i in range(ROWS)]})
    margins = indexed_margins(pl.DataFrame({"g": [0, 1, 2]}), lf.collect_schema(), ["g"])
    rows = PolarsEngine(lf).grouped_histograms([part], margins)[part.name]
    assert rows["__count"].sum() == 3 * ROWS // 1000
    assert max(collected) <= 3 * part.grid.cells


def test_a_record_level_job_collects_no_frame_as_tall_as_its_input(tmp_path, collected):
    synthetic_survey(ROWS).write_parquet(tmp_path / "survey.parquet")
    spec = tmp_path / "release.toml"
    shutil.copy(Path(dpframe.__file__).parent / "data" / "demo_release.toml", spec)
    text = spec.read_text()
    start = text.index('[[release]]\nname = "households"')  # person-level: not this test's
    end = text.index("[[release]]", start + 1)
    spec.write_text(text[:start] + text[end:])
    result = run(load_spec(spec), progress=False)
    assert all(c.success for c in result.checks) and len(result.outputs) == 5
    assert collected and max(collected) <= TALLEST < ROWS, sorted(collected)[-5:]
