"""report.html: the renderer (pure), and the report a job publishes and check rewrites."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import polars as pl
import pytest

from dpframe.errors import InvalidParameterError
from dpframe.jobs import check, load_spec, run
from dpframe.jobs.checks import CheckResult
from dpframe.jobs.report import RISK_LABEL, RunInfo, read_report_data, render_report
from tests.jobs.conftest import write_spec

URL_ATTR = re.compile(r"""(?:src|href)\s*=\s*["']?\s*https?:|url\(\s*["']?\s*https?:""", re.I)


def _info(**kw) -> RunInfo:
    base = {
        "run": "abc123",
        "time": "2025-01-01T00:00:00+00:00",
        "spec": "/data/spec",
        "output": "/data/released",
        "ledger": "postgresql://alice:***@db/ledger",
        "epsilon": 0.75,
        "delta": 0.0,
        "plan": [
            {
                "release": "<script>",
                "kind": "grouped",
                "statistic": "count",
                "mechanism": "laplace",
                "epsilon": 0.3,
                "delta": 0.0,
                "sensitivity": 2.0,
                "scale": 6.67,
                "error95": 20.0,
                "note": "count <b>",
            },
            {
                "release": "shares",
                "kind": "proportions",
                "statistic": "p",
                "mechanism": "truncated_laplace",
                "epsilon": 0.45,
                "delta": 0.0,
                "sensitivity": 0.001,
                "scale": None,
                "error95": None,
                "note": "",
            },
        ],
    }
    return RunInfo(**{**base, **kw})


def _check(release: str, success: bool, failures: list[str]) -> CheckResult:
    results = {
        "main": {
            "results": [
                {
                    "success": success,
                    "expectation_config": {
                        "type": "expect_column_values_to_be_between",
                        "kwargs": {
                            "column": "p",
                            "min_value": 0.0,
                            "max_value": 1.0,
                            "batch_id": "x",
                        },
                    },
                }
            ]
        }
    }
    return CheckResult(
        release=release,
        success=success,
        failures=failures,
        suite={"kind": "proportions", "suites": {}},
        result={"results": results},
        n_expectations=1,
    )


def _risk(n: int = 7) -> pl.DataFrame:
    eps = [10 ** (-2 + 4 * i / (n - 1)) for i in range(n)]
    return pl.DataFrame(
        {
            "mechanism": ["laplace"] * n,
            "measure": ["local"] * n,
            "weighted": [False] * n,
            "epsilon": eps,
            "delta": pl.Series([None] * n, dtype=pl.Float64),
            "risk": [0.1 + 0.8 * i / (n - 1) for i in range(n)],
            "exact": [True] * n,
        }
    )


def test_strings_from_the_spec_and_data_are_escaped():
    page = render_report(_info(), [_check("<script>", False, ["value <img src=x> out of range"])])
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<img" not in page and "&lt;img src=x&gt;" in page
    assert "count &lt;b&gt;" in page
    assert "<script" not in page.lower()  # no script of its own either


def test_no_network_in_any_source_or_link():
    page = render_report(_info(), [_check("shares", True, [])], _risk())
    assert not URL_ATTR.search(page)
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "<link" not in page


def test_a_failing_check_shows_its_failure_line_and_rule():
    line = "column 'p': 2 values outside [0, 1], e.g. 1.3 (row 2)"
    page = render_report(_info(), [_check("shares", False, [line])])
    assert html.escape(line) in page
    assert "FAILED" in page
    rule = "expect_column_values_to_be_between(column='p', min_value=0, max_value=1)"
    assert html.escape(rule) in page
    assert "batch_id" not in page


def test_the_plans_epsilon_values_and_the_run_facts_appear():
    page = render_report(_info(), [])
    for text in ("abc123", "0.3", "0.45", "0.75", "laplace", "truncated_laplace", "/data/spec"):
        assert text in page
    assert "postgresql://alice:***@db/ledger" in page


def test_the_risk_curve_is_an_svg_polyline_with_a_point_per_epsilon():
    risk = _risk(9)
    page = render_report(_info(), [], risk)
    lines = re.findall(r'<polyline[^>]*points="([^"]+)"', page)
    assert len(lines) == 1
    assert len(lines[0].split()) == risk.height
    assert RISK_LABEL in page
    assert "epsilon (log scale)" in page and "DR-HA (risk)" in page
    assert "<svg" in page


def test_a_risk_frame_that_is_not_drha_is_refused():
    with pytest.raises(InvalidParameterError, match="lacks the columns"):
        render_report(_info(), [], pl.DataFrame({"epsilon": [1.0]}))
    with pytest.raises(InvalidParameterError, match="wrong column types"):
        render_report(_info(), [], _risk().with_columns(pl.col("risk").cast(pl.String)))


def test_run_publishes_the_report_and_check_rewrites_it(tmp_path: Path):
    spec = load_spec(write_spec(tmp_path, rows=2_000))
    result = run(spec, progress=False, risk=_risk(5), risk_title="a curve")
    out = tmp_path / "released"
    manifest = json.loads((out / "current" / "manifest.json").read_text())
    assert "report.html" in manifest["files"] and "report.json" in manifest["files"]
    assert (out / "report.html").is_symlink() and result.report == out / "report.html"
    page = (out / "report.html").read_text()
    for name in ("by_region", "microdata", "age_shares", "scores_cov"):
        assert f"Release {name}" in page
    assert "a curve" in page and len(re.findall("<polyline", page)) == 1
    assert result.run in page and "passed" in page
    info = read_report_data(out / "current")
    assert info is not None and info.checked is None and info.risk is not None

    check(spec)
    info = read_report_data(out / "current")
    assert info is not None and info.checked is not None and info.run == result.run
    page = (out / "report.html").read_text()
    assert "checked" in page and len(re.findall("<polyline", page)) == 1  # the curve is kept


def test_a_bad_risk_frame_is_refused_before_anything_is_spent(tmp_path: Path):
    spec = load_spec(write_spec(tmp_path, rows=2_000))
    with pytest.raises(InvalidParameterError):
        run(spec, progress=False, risk=pl.DataFrame({"x": [1]}))
    assert not (tmp_path / "ledger.db").exists()


def _unit_of(page: str, release: str) -> str:
    section = page.split(f"<h2>Release {release}")[1].split("</section>")[0]
    return html.unescape(re.search(r'<dd class="unit">(.*?)</dd>', section).group(1))


def test_each_release_shows_its_unit_relation_and_the_error_under_the_other():
    person = 'person "hh" (at most 3 rows in each of at most 2 groups)'
    rows = [
        {**_info().plan[0], "unit": person, "neighbours": "substitute", "other": "add_remove: 9"},
        {
            **_info().plan[1],
            "unit": "record (one row is one person)",
            "neighbours": "substitute",
            "other": "add_remove: n/a (the dataset size is public only under substitute)",
        },
    ]
    page = render_report(_info(plan=rows), [])
    assert _unit_of(page, "&lt;script&gt;") == person  # escaped, then read back whole
    assert _unit_of(page, "shares") == "record (one row is one person)"
    assert "<dt>neighbours</dt><dd>substitute</dd>" in page
    assert "under the other neighbour relation" in page
    assert "add_remove: n/a (the dataset size is public only under substitute)" in page


def test_a_report_of_an_older_version_says_its_unit_is_unknown():
    page = render_report(_info(), [])  # plan rows without unit or neighbours
    assert _unit_of(page, "shares") == "unknown"
    assert "<dt>neighbours</dt><dd>unknown</dd>" in page


def test_a_published_report_shows_the_person_units_bounds(tmp_path: Path):
    from importlib.resources import files

    from dpframe.datasets import synthetic_survey

    synthetic_survey(2_000).write_parquet(tmp_path / "survey.parquet")
    path = tmp_path / "release.toml"
    path.write_text(files("dpframe").joinpath("data/demo_release.toml").read_text())
    run(load_spec(path), progress=False)
    page = (tmp_path / "released" / "report.html").read_text()
    assert _unit_of(page, "households") == (
        'person "household" (at most 3 rows in each of at most 1 groups)'
    )
    assert _unit_of(page, "by_region") == "record (one row is one person)"
    assert "add_remove: n/a (PRAM protects values, not presence)" in page
