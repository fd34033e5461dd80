"""A job does its work once: one ``dpframe release`` plans its spec once, builds each
release once and counts the input's rows once, and runs the very plan it showed.

The plan it runs is data the caller holds between ``plan`` and ``run``: a row count taken
at plan time is checked again on the data before any charge, mutating what the plan
exposes cannot make the run charge less than it draws, and a plan runs only with its own
spec, once.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
import dpframe.cli
import dpframe.jobs
import dpframe.jobs.job
import dpframe.jobs.kinds
import dpframe.jobs.planning
from dpframe.datasets import synthetic_survey
from dpframe.engines.polars import PolarsEngine
from dpframe.errors import InvalidDataError
from dpframe.jobs import SpecError, load_spec, plan, run
from dpframe.polars.release import Release

#: the demo spec's releases and the class each one is built as
DEMO_RELEASES = {
    "by_region": "GroupedRelease",
    "by_age": "GroupedRelease",
    "households": "GroupedRelease",
    "microdata": "MicrodataRelease",
    "age_shares": "ProportionsRelease",
    "scores_cov": "CovarianceMatrixRelease",
}


def _demo(folder: Path, rows: int = 3_000, seed: int | None = 7) -> Path:
    """The demo spec (seeded) and its survey, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    synthetic_survey(rows).write_parquet(folder / "survey.parquet")
    text = resources.files("dpframe.data").joinpath("demo_release.toml").read_text()
    if seed is not None:
        text = text.replace('ledger = "ledger.db"', f'ledger = "ledger.db"\nseed = {seed}')
    (folder / "release.toml").write_text(text)
    return folder / "release.toml"


def _nothing_spent_or_written(folder: Path) -> None:
    ledger = folder / "ledger.db"
    assert not ledger.exists() or dpframe.Accountant.open(ledger).ledger == ()
    assert not ledger.exists() or dpframe.Accountant.open(ledger).reservations == ()
    released = folder / "released"
    assert not released.exists() or not any(released.iterdir())


def _count(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, tally: Counter[str]) -> None:
    """Count the calls of ``owner.name`` under ``name`` in ``tally``."""
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        tally[name] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def test_one_release_command_plans_once_builds_once_and_counts_the_rows_once(tmp_path, monkeypatch):
    spec = _demo(tmp_path)
    calls: Counter[str] = Counter()
    # plan: every name it is reachable by (the command imports it from dpframe.jobs)
    real_plan = dpframe.jobs.planning.plan

    def counted_plan(*args: Any, **kwargs: Any) -> Any:
        calls["plan"] += 1
        return real_plan(*args, **kwargs)

    for module in (dpframe.jobs, dpframe.jobs.planning, dpframe.jobs.job):
        monkeypatch.setattr(module, "plan", counted_plan)
    # build: the registry's function, and every release object constructed, by class
    for module in (dpframe.jobs.planning,):
        _count(monkeypatch, module, "build", calls)
    built: Counter[str] = Counter()
    real_init = Release.__init__

    def counted_init(self: Release[Any], *args: Any, **kwargs: Any) -> None:
        built[type(self).__name__] += 1
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Release, "__init__", counted_init)
    # the input's rows (the engine's count; a lazy frame counted again reads it again)
    _count(monkeypatch, PolarsEngine, "rows", calls)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
        res = CliRunner().invoke(dpframe.cli.app, ["release", str(spec), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "published 6 release(s)" in res.output
    assert calls["plan"] == 1
    assert calls["build"] == len(DEMO_RELEASES)
    assert built == Counter(DEMO_RELEASES.values())
    assert calls["rows"] == 1
    # the one count is the one recorded (PRAM's input_rows) and shown by the plan
    facts = dpframe.read_provenance(tmp_path / "released" / "microdata.parquet").facts
    assert facts["input_rows"] == 3_000


def test_the_command_runs_the_plan_it_showed(tmp_path, monkeypatch):
    """``dpframe release`` hands the plan it printed to ``run`` (``plan=``)."""
    spec = _demo(tmp_path)
    shown: list[Any] = []
    ran: list[Any] = []
    real_plan, real_run = dpframe.jobs.plan, dpframe.jobs.run
    monkeypatch.setattr(
        dpframe.jobs, "plan", lambda *a, **k: shown.append(real_plan(*a, **k)) or shown[-1]
    )

    def run_it(*args: Any, **kwargs: Any) -> Any:
        ran.append(kwargs.get("plan"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(dpframe.jobs, "run", run_it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
        res = CliRunner().invoke(dpframe.cli.app, ["release", str(spec), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert len(shown) == 1 and ran == shown


def test_python_run_plans_once_itself_and_runs_a_given_plan_without_planning(tmp_path, monkeypatch):
    calls: Counter[str] = Counter()
    _count(monkeypatch, dpframe.jobs.job, "plan", calls)
    _count(monkeypatch, dpframe.jobs.planning, "build", calls)
    _count(monkeypatch, PolarsEngine, "rows", calls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
        first = run(load_spec(_demo(tmp_path / "a")), progress=False)
        assert dict(calls) == {"plan": 1, "build": 6, "rows": 1}
        spec = load_spec(_demo(tmp_path / "b"))
        given = plan(spec)  # not through job.plan: counted by build and rows only
        second = run(spec, plan=given, progress=False)
    assert dict(calls) == {"plan": 1, "build": 12, "rows": 2}
    assert second.plan is given and set(second.releases) == set(DEMO_RELEASES)
    assert all(second.releases[n] is given.releases[n] for n in DEMO_RELEASES)
    assert first.epsilon == second.epsilon == pytest.approx(2.7)


def test_an_input_rewritten_between_plan_and_run_is_refused_before_any_charge(tmp_path):
    """The row count the plan took is the public n of the proportions and the covariance
    matrix and PRAM's recorded input_rows, and its schema the releases' dtypes: an input
    file rewritten by the run is refused, spending and publishing nothing."""
    spec = load_spec(_demo(tmp_path, seed=None))
    the_plan = plan(spec)
    assert the_plan.input_rows == 3_000
    synthetic_survey(2_000).write_parquet(tmp_path / "survey.parquet")  # the lazy input
    with pytest.raises(InvalidDataError, match="the input changed since the job was planned"):
        run(spec, plan=the_plan, progress=False)
    _nothing_spent_or_written(tmp_path)


def _miscounted(monkeypatch: pytest.MonkeyPatch, rows: int) -> Any:
    """The engine's row count, while patched, says ``rows`` (a count taken at another
    time than the data is read); the real count is put back by the returned function."""
    real = PolarsEngine.rows
    monkeypatch.setattr(PolarsEngine, "rows", lambda self: rows)
    return lambda: monkeypatch.setattr(PolarsEngine, "rows", real)


def test_a_public_n_counted_at_plan_time_is_checked_on_the_data_before_any_charge(
    tmp_path, monkeypatch
):
    spec = load_spec(_demo(tmp_path, seed=None))
    restore = _miscounted(monkeypatch, 2_999)
    the_plan = plan(spec)
    restore()
    assert the_plan.input_rows == 2_999  # age_shares' and scores_cov's n
    with pytest.raises(InvalidDataError, match="n=2999 is declared public, but the frame has"):
        run(spec, plan=the_plan, progress=False)
    _nothing_spent_or_written(tmp_path)


def test_pram_refuses_rows_other_than_those_the_job_counted_before_any_charge(
    tmp_path, monkeypatch
):
    """PRAM records the job's count as its file's input_rows: checked against the rows
    the release read, before any charge."""
    text = """
version = 1
[input]
path = "survey.parquet"
[privacy]
budget = { epsilon = 1.0 }
ledger = "ledger.db"
[output]
folder = "released"
[[release]]
name = "microdata"
kind = "pram"
columns = [{ column = "age_band", epsilon = 0.5, categories = ["18-34", "35-54", "55+"] }]
"""
    synthetic_survey(3_000).write_parquet(tmp_path / "survey.parquet")
    (tmp_path / "release.toml").write_text(text)
    spec = load_spec(tmp_path / "release.toml")
    the_plan = plan(spec)
    assert the_plan.input_rows is None  # nothing needed it to plan
    restore = _miscounted(monkeypatch, 2_999)
    assert the_plan.job.rows() == 2_999  # counted now, and kept
    restore()
    with pytest.raises(InvalidDataError, match="has 3000 rows, but had 2999 when the job"):
        run(spec, plan=the_plan, progress=False)
    _nothing_spent_or_written(tmp_path)


def test_what_a_plan_exposes_is_frozen_or_cannot_lower_the_charge(tmp_path):
    spec = load_spec(_demo(tmp_path, seed=None))
    the_plan = plan(spec)
    planned = the_plan.epsilon
    with pytest.raises(dataclasses.FrozenInstanceError):
        the_plan.epsilon = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        the_plan.job.ledger = tmp_path / "other.db"  # type: ignore[misc]
    with pytest.raises(TypeError):
        the_plan.releases["age_shares"] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        the_plan.job.margins["regions"] = pl.DataFrame({"region": ["North"]})  # type: ignore[index]
    with pytest.raises(AttributeError):
        the_plan.releases["age_shares"].epsilon = 0.01  # type: ignore[misc]
    # the table shown is a copy: changed in place, the plan's is not
    shown = the_plan.rows
    shown.replace_column(
        shown.get_column_index("epsilon"), pl.Series("epsilon", [0.0] * shown.height)
    )
    assert shown["epsilon"].sum() == 0
    assert the_plan.rows["epsilon"].sum() == pytest.approx(planned)
    # a release's own attributes can be changed: the data is checked against them
    shares = the_plan.releases["age_shares"]
    shares.n = 10  # type: ignore[attr-defined]  # the public n it checks the data against
    with pytest.raises(InvalidDataError, match="n=10 is declared public"):
        run(spec, plan=the_plan, progress=False)
    _nothing_spent_or_written(tmp_path)
    # a release's plan replaced by a cheaper one: what is charged is what is drawn
    the_plan = plan(spec)
    shares = the_plan.releases["age_shares"]
    cheap = dpframe.proportions(
        pl.scan_parquet(tmp_path / "survey.parquet"),
        "age_band",
        epsilon=0.05,
        n=3_000,
        categories=["18-34", "35-54", "55+"],
    )
    shares.plan = cheap.plan  # type: ignore[attr-defined]
    # every charge, first passes (the private selection of ages) included while undrawn
    each = [c.epsilon for rel in the_plan.releases.values() for p in rel.plans() for c in p.charges]
    result = run(spec, plan=the_plan, progress=False)
    drawn = result.releases["age_shares"].result
    charged = dpframe.read_provenance(result.outputs["age_shares"]).entries
    assert drawn.epsilon == 0.05
    assert sum(e.epsilon for e in charged) == pytest.approx(drawn.epsilon_charged)
    ledger = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert ledger.spent.epsilon == pytest.approx(result.epsilon) == pytest.approx(sum(each))
    assert result.epsilon < planned


def test_a_plan_runs_only_with_its_own_spec_once_on_its_engine(tmp_path):
    mine = load_spec(_demo(tmp_path / "mine", seed=None))
    other = load_spec(_demo(tmp_path / "other", seed=None))
    the_plan = plan(mine)
    with pytest.raises(SpecError, match="plan was made from another spec"):
        run(other, plan=the_plan, progress=False)
    with pytest.raises(SpecError, match="plan was made from another spec"):
        run(load_spec(tmp_path / "mine" / "release.toml"), plan=the_plan, progress=False)
    with pytest.raises(SpecError, match=r"give engine= and spark= to dpframe\.jobs\.plan"):
        run(mine, plan=the_plan, engine="polars", progress=False)
    for folder in ("mine", "other"):
        _nothing_spent_or_written(tmp_path / folder)
    run(mine, plan=the_plan, progress=False)
    spent = dpframe.Accountant.open(tmp_path / "mine" / "ledger.db").spent.epsilon
    with pytest.raises(SpecError, match="were drawn already"):
        run(mine, plan=the_plan, progress=False)
    assert dpframe.Accountant.open(tmp_path / "mine" / "ledger.db").spent.epsilon == spent


def test_a_spec_changed_after_its_plan_is_refused_before_any_charge(tmp_path):
    """A spec's lists can be changed in place after it was planned: the plan's releases
    would run as planned but the published provenance (and the check's suite) would be
    the changed spec's -- a statistic recorded at epsilon 0.001 that drew 0.3."""
    spec = load_spec(_demo(tmp_path, seed=None))
    the_plan = plan(spec)
    statistics = spec.release[0].statistics
    statistics[0] = statistics[0].model_copy(update={"epsilon": 0.001})
    with pytest.raises(SpecError, match="changed since it was planned"):
        run(spec, plan=the_plan, progress=False)
    _nothing_spent_or_written(tmp_path)
