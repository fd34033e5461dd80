"""The release runner and the CLI, end to end: outputs, provenance, checks, atomicity."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.errors import BudgetExceededError
from dpframe.jobs import CheckFailedError, check, load_spec, plan, run

from .conftest import EPSILON_TOTAL, write_spec

runner = CliRunner()


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _hidden(folder: Path) -> list[str]:
    return [f for f in _files(folder) if f.startswith(".")]


def _published(out: Path, foreign: tuple[str, ...] = ()) -> Path:
    """Check the layout of a published output folder; return the current run's folder.

    ``current`` names one run under ``.runs/``; every other top-level name (but the
    ``foreign`` files dpframe did not write) is a link ``-> current/<name>``, exactly the
    files of that run's manifest.
    """
    current = out / "current"
    assert current.is_symlink() and os.readlink(current).startswith(".runs/")
    run = Path(os.path.realpath(current))
    assert run.parent == (out / ".runs").resolve()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["format"] == "dpframe-run" and manifest["run"] == run.name
    names = [f for f in _files(out) if not f.startswith(".") and f not in ("current", *foreign)]
    assert (
        names
        == manifest["files"]
        == sorted(p.name for p in run.iterdir() if p.name not in ("manifest.json",))
    )
    for name in names:
        assert os.readlink(out / name) == f"current/{name}"
        assert Path(os.path.realpath(out / name)).parent == run
    return run


def test_cli_release_of_a_million_rows(tmp_path):
    spec_path = write_spec(tmp_path, rows=1_000_000)
    res = runner.invoke(app, ["plan", str(spec_path)])
    assert res.exit_code == 0, res.output
    planned = plan(load_spec(spec_path)).epsilon
    res = runner.invoke(app, ["release", str(spec_path), "--no-progress"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "released"
    names = ["by_region", "microdata", "age_shares", "scores_cov"]
    for name in names:
        assert (out / f"{name}.parquet").exists()
        assert (out / f"{name}.suite.json").exists()
        assert (out / f"{name}.validation.json").exists()
        prov = dpframe.read_provenance(out / f"{name}.parquet")
        assert prov.entries and prov.spec["release"][0]["name"] == "by_region"
    assert _hidden(out) == [".runs"]  # no staging left
    run = _published(out)
    assert sorted(p.name for p in (out / ".runs").iterdir()) == [run.name]
    ledger = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert ledger.spent.epsilon == pytest.approx(planned) == pytest.approx(EPSILON_TOTAL)
    in_files = sum(dpframe.read_provenance(out / f"{n}.parquet").epsilon for n in names)
    assert in_files == pytest.approx(planned)  # every charge is recorded with its output
    assert pl.scan_parquet(out / "microdata.parquet").select(pl.len()).collect().item() == 1e6
    res = runner.invoke(app, ["check", str(spec_path)])
    assert res.exit_code == 0, res.output


def test_an_overspending_spec_fails_at_plan_and_spends_nothing(tmp_path):
    spec_path = write_spec(tmp_path, rows=2000, budget=1.0)
    res = runner.invoke(app, ["plan", str(spec_path)])
    assert res.exit_code == 1 and "OVERSPENDS" in res.output
    res = runner.invoke(app, ["release", str(spec_path), "--no-progress"])
    assert res.exit_code == 1
    with pytest.raises(BudgetExceededError, match="Nothing was charged"):
        run(load_spec(spec_path), progress=False)
    assert not (tmp_path / "ledger.db").exists()
    assert _files(tmp_path / "released") == []


def test_checks_that_would_exit_stop_the_job_before_any_charge(tmp_path, monkeypatch):
    """pyspark without grpcio makes `import great_expectations` call sys.exit(0) in a
    program with no file (python -c). The job finds that before its first charge."""
    import sys
    import types

    pytest.importorskip("pyspark")
    import pyspark.testing.utils as pyspark_testing

    from dpframe.errors import ChecksUnavailableError

    for name in [m for m in sys.modules if m.split(".")[0] == "great_expectations"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # python -c
    monkeypatch.setattr(pyspark_testing, "should_test_connect", False)  # no grpcio
    spec_path = write_spec(tmp_path, rows=500)
    with pytest.raises(ChecksUnavailableError, match=r"pyspark\[connect\]"):
        run(load_spec(spec_path), progress=False)
    assert not (tmp_path / "ledger.db").exists()
    assert _files(tmp_path / "released") == []


def test_an_import_of_the_checks_that_exits_is_an_error_not_exit_0(tmp_path, monkeypatch):
    """Should Great Expectations' import exit anyway, the job fails loudly, publishes
    nothing, and what it charged stays spent (its noise was drawn): exit code 4, which
    says so, not 2, which would claim nothing was spent."""
    import sys

    from dpframe.errors import ChecksUnavailableError

    fake = tmp_path / "fake" / "great_expectations"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    for name in [m for m in sys.modules if m.split(".")[0] == "great_expectations"]:
        monkeypatch.delitem(sys.modules, name)
    spec_path = write_spec(tmp_path, rows=500)
    with pytest.raises(ChecksUnavailableError, match=r"pyspark\[connect\]"):
        run(load_spec(spec_path), progress=False)
    assert _files(tmp_path / "released") == []
    other = tmp_path / "cli"
    other.mkdir()
    res = runner.invoke(app, ["release", str(write_spec(other, rows=500)), "--no-progress"])
    assert res.exit_code == 4 and f"after spending epsilon {EPSILON_TOTAL:g}" in res.output
    assert _files(other / "released") == []


def test_a_crash_mid_release_leaves_no_output(tmp_path, monkeypatch):
    spec = load_spec(write_spec(tmp_path, rows=5000))
    import dpframe.jobs.job as run_mod

    real = run_mod.write_parquet

    def boom(frame, path, **kwargs):
        if "age_shares" in str(path):
            raise RuntimeError("disk full")
        return real(frame, path, **kwargs)

    monkeypatch.setattr(run_mod, "write_parquet", boom)  # the third release's file fails
    with pytest.raises(RuntimeError, match="disk full"):
        run(spec, progress=False)
    out = tmp_path / "released"
    assert _files(out) == []  # nothing published, staging removed
    ledger = dpframe.Accountant.open(tmp_path / "ledger.db")
    # old: the whole spec stayed spent. Now the spec was reserved whole; by_region (0.8),
    # microdata (1.0) and age_shares (0.2, its noise drawn before its file failed) drew
    # theirs; scores_cov (0.3) never drew, so its part came back
    assert ledger.spent.epsilon == pytest.approx(0.8 + 1.0 + 0.2, abs=1e-12)
    assert ledger.reservations == () and ledger.reserved.epsilon == 0
    assert {e.details["reservation"] for e in ledger.ledger} == {
        next(iter(ledger.ledger)).details["reservation"]
    }  # every entry drawn from the job's one reservation


def test_a_failed_expectation_publishes_nothing(tmp_path, monkeypatch):
    spec_path = write_spec(tmp_path, rows=5000, budget=5.0)  # room for a second attempt
    from dpframe.polars.frame import ProportionsRelease

    real = ProportionsRelease._finish

    def corrupt(self, outputs):
        frame = real(self, outputs)
        return frame.with_columns(pl.col("proportion") * 1.5)  # shares sum to 1.5

    monkeypatch.setattr(ProportionsRelease, "_finish", corrupt)
    with pytest.raises(CheckFailedError, match="age_shares") as info:
        run(load_spec(spec_path), progress=False)
    assert "nothing was published" in str(info.value)
    out = tmp_path / "released"
    visible = [f for f in _files(out) if not f.startswith(".")]
    assert visible == []
    failed = [f for f in _files(out) if f.startswith(".failed-")]
    assert len(failed) == 1 and "age_shares.validation.json" in _files(out / failed[0])
    res = runner.invoke(app, ["release", str(spec_path), "--no-progress"])
    assert res.exit_code == 3 and "age_shares" in res.output
    # the failed attempts drew noise: their budget stays spent, and a third one would not fit
    assert dpframe.Accountant.open(tmp_path / "ledger.db").spent.epsilon == pytest.approx(
        2 * EPSILON_TOTAL
    )


def test_check_finds_a_tampered_output(tmp_path):
    spec_path = write_spec(tmp_path, rows=5000)
    spec = load_spec(spec_path)
    run(spec, progress=False)
    out = tmp_path / "released" / "scores_cov.parquet"
    frame = pl.read_parquet(out)
    tampered = frame.with_columns(
        pl.when(pl.col("column") == "satisfaction")
        .then(pl.lit(50.0))
        .otherwise(pl.col("trust"))
        .alias("trust")
    )
    tampered.write_parquet(out)
    results = {r.release: r for r in check(spec)}
    assert not results["scores_cov"].success
    assert "scores_cov" in results["scores_cov"].report()
    res = runner.invoke(app, ["check", str(spec_path)])
    assert res.exit_code == 3


def test_spec_from_python_with_a_lazyframe(tmp_path):
    from dpframe.datasets import REGIONS, synthetic_survey
    from dpframe.jobs import parse_spec

    lf = synthetic_survey(4000).lazy().filter(pl.col("age") >= 18)
    spec = parse_spec(
        {
            "version": 1,
            "privacy": {"budget": {"epsilon": 1.0}, "ledger": str(tmp_path / "l.db")},
            "output": {"folder": str(tmp_path / "out")},
            "margins": {"r": {"values": {"region": list(REGIONS)}}},
            "release": [
                {
                    "name": "counts",
                    "kind": "grouped",
                    "by": ["region"],
                    "margins": "r",
                    "statistics": [{"stat": "count", "epsilon": 0.5}],
                }
            ],
        },
        frame=lf,
    )
    result = run(spec, progress=False)
    assert result.epsilon == pytest.approx(0.5)
    assert pl.read_parquet(result.outputs["counts"]).height == len(REGIONS)
    assert os.path.exists(tmp_path / "out" / "counts.suite.json")


def test_invalid_spec_exit_code(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[privacy]\nbudget = { epsilon = -1 }\n")
    res = runner.invoke(app, ["plan", str(bad)])
    assert res.exit_code == 2 and "budget.epsilon" in res.output
    res = runner.invoke(app, ["release", str(tmp_path / "missing.toml")])
    assert res.exit_code == 2


def _edit_spec(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _edit_data(folder: Path, column: str, value: object) -> None:
    survey = pl.read_parquet(folder / "survey.parquet")
    row = pl.int_range(pl.len()) == 7
    survey.with_columns(
        pl.when(row).then(value).otherwise(pl.col(column)).alias(column)
    ).write_parquet(folder / "survey.parquet")


BAD_LATER = {
    "a value outside a PRAM column's categories": lambda f: _edit_spec(
        f / "release.toml",
        '{ column = "age_band", epsilon = 0.5 }',
        '{ column = "age_band", epsilon = 0.5, categories = ["18-34", "35-54"] }',
    ),
    "a PRAM prior that does not fit the categories": lambda f: _edit_spec(
        f / "release.toml",
        '{ column = "region", epsilon = 0.5 }',
        '{ column = "region", epsilon = 0.5, prior = [1.0, 2.0] }',
    ),
    "a public n that is not the data's": lambda f: _edit_spec(
        f / "release.toml", 'strategy = "all_but_one"', 'strategy = "all_but_one"\nn = 5'
    ),
    "a null in a covariance column": lambda f: _edit_data(f, "trust", None),
    "a NaN in a covariance column": lambda f: _edit_data(f, "satisfaction", float("nan")),
}


@pytest.mark.parametrize("case", sorted(BAD_LATER))
def test_bad_data_in_a_later_release_is_found_before_anything_is_charged(tmp_path, case):
    spec_path = write_spec(tmp_path, rows=3000)
    BAD_LATER[case](tmp_path)
    res = runner.invoke(app, ["release", str(spec_path), "--no-progress"])
    assert res.exit_code == 2, res.output
    ledger = tmp_path / "ledger.db"
    assert not ledger.exists() or dpframe.Accountant.open(ledger).spent.epsilon == 0
    assert [f for f in _files(tmp_path / "released") if not f.startswith(".")] == []


def test_plan_draws_no_noise(tmp_path, monkeypatch):
    """plan() reads the kernels' plans only: no random source is ever asked."""
    from dpframe.core.randomness import RandomSource

    def refuse(self):
        raise AssertionError("plan() asked for a random generator")

    monkeypatch.setattr(RandomSource, "generator", refuse)
    the_plan = plan(load_spec(write_spec(tmp_path, rows=2000)))
    assert the_plan.fits and the_plan.epsilon == pytest.approx(EPSILON_TOTAL)
    assert not (tmp_path / "ledger.db").exists()


def test_method_needs_public_sizes():
    from dpframe.jobs import parse_spec
    from dpframe.jobs.spec import SpecError

    spec = {
        "version": 1,
        "input": {"path": "x.parquet"},
        "privacy": {"budget": {"epsilon": 1}, "ledger": "l.db"},
        "margins": {"m": {"values": {"r": ["a", "b"]}}},
        "release": [
            {
                "name": "g",
                "kind": "grouped",
                "by": ["r"],
                "margins": "m",
                "statistics": [
                    {
                        "stat": "mean",
                        "column": "x",
                        "lower": 0,
                        "upper": 1,
                        "epsilon": 0.1,
                        "method": "bit",
                    }
                ],
            }
        ],
    }
    with pytest.raises(SpecError, match="public group sizes"):
        parse_spec(spec)


def test_published_files_are_readable_and_a_rerun_replaces_data_docs(tmp_path, monkeypatch):
    write_spec(tmp_path, rows=3000, budget=10.0)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # a relative spec path, Data Docs, twice
        res = runner.invoke(app, ["release", "release.toml", "--no-progress", "--data-docs"])
        assert res.exit_code == 0, res.output
    out = tmp_path / "released"
    assert (out / "data_docs").is_dir()
    assert _hidden(out) == [".runs"]
    run = _published(out)
    assert "data_docs" in _files(run) and (out / "data_docs").is_symlink()
    mode = (out / "by_region.parquet").stat().st_mode & 0o777
    assert mode & 0o044  # readable by others, like any file the umask allows


@pytest.mark.slow  # three jobs in processes of their own
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_three_overlapping_jobs_whose_budget_fits_two(tmp_path, request, store):
    """A cron overlap: three `dpframe release` of one spec at once, the budget fits two.

    Old: two published and the third failed after charging 0.8 of its PRAM columns.
    Now each job reserves its whole spec in one transaction: exactly two publish, the
    ledger holds exactly their cost, and the third says it spent nothing -- with the
    ledger in a SQLite file or in PostgreSQL.
    """
    import subprocess
    import sys

    url = request.getfixturevalue("postgres_url") if store == "postgres" else "ledger.db"
    budget = 2 * EPSILON_TOTAL + EPSILON_TOTAL / 2
    spec_path = write_spec(tmp_path, rows=3000, budget=budget, ledger=url)
    cmd = [sys.executable, "-m", "dpframe.cli", "release", str(spec_path), "--no-progress"]
    jobs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(3)
    ]
    outs = [(j.wait(timeout=600), j.stdout.read().decode()) for j in jobs]
    codes = sorted(code for code, _ in outs)
    assert codes == [0, 0, 1], "\n\n".join(t[-3000:] for _, t in outs)
    refused = next(text for code, text in outs if code == 1)
    assert "nothing spent" in refused and "Nothing was charged" in refused
    ledger = dpframe.Accountant.open(url if store == "postgres" else tmp_path / "ledger.db")
    assert ledger.spent.epsilon == pytest.approx(2 * EPSILON_TOTAL, abs=1e-12)
    # two jobs, each drawing its releases from its own reservation; none is left held
    assert len({e.details["reservation"] for e in ledger.ledger}) == 2
    assert ledger.reservations == ()


def test_a_run_removes_what_killed_runs_left(tmp_path):
    """Old: `.staging-*` folders of charged, unchecked tables piled up, never cleaned.

    Now the run folders of dead jobs (killed before their commit) and leftovers of older
    publishes go too; a live job's folders stay; and a real folder an older dpframe moved
    aside is put back (then replaced by this run's link)."""
    import subprocess
    import sys

    spec_path = write_spec(tmp_path, rows=1000, budget=5.0)
    out = tmp_path / "released"
    (out / ".runs").mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    from dpframe.core.processes import this_process

    me = this_process()
    owners = {
        "dead": {**me, "pid": int(dead.stdout), "started": None},
        "live": me,
        "elsewhere": {**me, "pidns": -1, "pid": int(dead.stdout)},  # a container's job
    }
    for name, owner in owners.items():
        for folder in (out / f".staging-{name}", out / ".runs" / name):
            folder.mkdir()
            (folder / ".owner").write_text(json.dumps(owner))
            (folder / "by_region.parquet").write_bytes(b"charged but never checked")
    (out / ".runs" / "finished").mkdir()  # an older run, published and replaced: no owner
    (out / ".staging-empty").mkdir()  # killed between creating and claiming it
    (out / ".claiming-empty").mkdir()  # the same, under the name new_staging claims in
    for name in (".staging-empty", ".claiming-empty"):  # a minute ago
        os.utime(out / name, (time.time() - 120, time.time() - 120))
    (out / ".claiming-now").mkdir()  # another job claiming it at this moment: kept
    _dpframe_table(out / ".old-by_region.parquet-0123abcd")  # moved aside by a cut swap
    (out / ".link-0123abcd").symlink_to("current/by_region.parquet")  # a cut link swap
    result = run(load_spec(spec_path), progress=False)
    # a running job's folders are kept, and so are those of another process table
    assert _hidden(out) == [".claiming-now", ".runs", ".staging-elsewhere", ".staging-live"]
    runs = sorted(p.name for p in (out / ".runs").iterdir())
    assert runs == sorted(["elsewhere", "live", result.run])
    assert _published(out).name == result.run
    assert pl.read_parquet(out / "by_region.parquet").height > 0
    assert not (out / ".runs" / result.run / ".owner").exists()


def test_a_staging_folder_a_stopped_write_made_again_is_removed(tmp_path):
    """An interrupted Spark job removes its staging folder while the executors still
    write into it: they make ``.staging-<run>/microdata.parquet/_temporary/...`` again,
    with no owner (seen with SIGTERM during a PRAM write). Old: not empty, so never taken
    for a dead job's, it stayed -- charged microdata -- for good; now, a minute on, the
    next run removes it (a staging folder is always claimed before it has that name)."""
    from dpframe.jobs.publish import repair

    out = tmp_path / "released"
    part = out / ".staging-0123abcd" / "microdata.parquet" / "_temporary" / "0"
    part.mkdir(parents=True)
    (part / "part-00000.snappy.parquet").write_bytes(b"randomized rows")
    (out / ".staging-fresh" / "x").mkdir(parents=True)  # made again just now: kept a while
    old = time.time() - 120
    os.utime(out / ".staging-0123abcd", (old, old))
    repair(out)
    assert sorted(p.name for p in out.iterdir()) == [".staging-fresh"]


def _dpframe_table(path: Path) -> None:
    """A table an older dpframe published: a Parquet file carrying dpframe's provenance."""
    acct = dpframe.Accountant(epsilon=1.0)
    acct.spend(0.1, mechanism="laplace", columns=["x"])
    dpframe.write_parquet(pl.DataFrame({"x": [1.0]}), path, ledger=acct)


def test_a_run_replaces_an_older_layout_and_drops_names_no_longer_released(tmp_path):
    """The tables and suites an older dpframe published at the top level (recognised by
    their provenance and their format) become links; a name the spec no longer releases
    disappears with its run."""
    spec_path = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    out.mkdir()
    _dpframe_table(out / "by_region.parquet")
    older_suite = {"format": "dpframe.check/1", "release": "by_region", "suites": {}}
    (out / "by_region.suite.json").write_text(json.dumps(older_suite))
    (out / "notes.txt").write_text("not dpframe's: kept")
    run(load_spec(spec_path), progress=False, data_docs=True)
    _published(out, foreign=("notes.txt",))
    assert _hidden(out) == [".runs"] and (out / "notes.txt").read_text() == "not dpframe's: kept"
    _edit_spec(spec_path, 'name = "scores_cov"', 'name = "scores_matrix"')
    second = run(load_spec(spec_path), progress=False)
    run_folder = _published(out, foreign=("notes.txt",))
    assert run_folder.name == second.run
    assert not os.path.lexists(out / "scores_cov.parquet")  # dropped from the spec
    assert not os.path.lexists(out / "data_docs")  # this run made none
    assert (out / "scores_matrix.parquet").is_symlink()


def test_every_published_name_switches_with_one_run(tmp_path):
    """After each run, every top-level name resolves into that run's folder; its manifest
    lists exactly its files, its releases and its ledger entries; only the current run
    and the one before it are kept."""
    spec_path = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    spec = load_spec(spec_path)
    results = []
    for i in range(3):
        results.append(run(spec, progress=False))
        folder = _published(out)
        assert folder.name == results[-1].run
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["previous"] == (results[-2].run if i else None)
        assert manifest["releases"] == {
            n: f"{n}.parquet" for n in ("age_shares", "by_region", "microdata", "scores_cov")
        }
        assert manifest["ledger"]["entries"] == [e.id for e in results[-1].entries]
        assert manifest["ledger"]["epsilon"] == pytest.approx(EPSILON_TOTAL)
        for name in manifest["releases"]:  # each table holds this run's ledger entries
            prov = dpframe.read_provenance(out / f"{name}.parquet")
            assert {e.id for e in prov.entries} <= set(manifest["ledger"]["entries"])
        kept = sorted(p.name for p in (out / ".runs").iterdir())
        assert kept == sorted(r.run for r in results[-2:])
    assert _hidden(out) == [".runs"]


# every file-system change publish() makes: a kill is injected before each of them
_FS_CHANGES = ("mkdir", "rename", "replace", "rmdir", "symlink", "unlink")
_KILLED = 77  # the exit status of a child killed before a change


def _stage(out: Path, run: str, names: list[str]) -> Path:
    """A claimed staging folder holding ``names`` (``data_docs`` a folder), as a job's."""
    from dpframe.jobs.publish import new_staging

    staging = new_staging(out, run)
    for name in names:
        if name == "data_docs":
            (staging / name).mkdir()
            (staging / name / "index.html").write_text(run)
        else:
            (staging / name).write_text(run)
    return staging


def _publish_killed_before_change(out: Path, run: str, names: list[str], k: int) -> bool:
    """Stage and publish ``run`` in a forked child that dies (``os._exit``: no ``finally``,
    no handler, as under SIGKILL) just before publish()'s ``k``-th file-system change.
    Returns whether it died (False: publish() made fewer than ``k`` changes)."""
    import warnings

    from dpframe.jobs.publish import publish

    with warnings.catch_warnings():  # the child calls no polars and takes no lock
        warnings.simplefilter("ignore")
        pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            staging = _stage(out, run, names)
            count = [0]

            def killed_before(change):
                def call(*args, **kwargs):
                    count[0] += 1
                    if count[0] == k:
                        os._exit(_KILLED)
                    return change(*args, **kwargs)

                return call

            for name in _FS_CHANGES:
                setattr(os, name, killed_before(getattr(os, name)))
            publish(staging, out, run=run, releases={"by_region": "by_region.parquet"})
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, _KILLED), code
    return code == _KILLED


def test_publish_killed_before_each_rename_and_link_leaves_one_run(tmp_path):
    """A job killed before any of publish()'s file-system changes (each rename, link,
    unlink, folder made or removed: every one, in turn) leaves the readers one whole run,
    the previous one or the new one; repair() (the next job's first step) finishes it;
    and the next publish keeps exactly itself and its previous run.

    Old: the staged files were moved into the output folder one by one, so a kill left a
    table of one run beside the validation result of another.
    """
    from dpframe.jobs.publish import publish, repair

    old_names = ["by_region.parquet", "by_region.suite.json", "data_docs", "scores_matrix.parquet"]
    new_names = ["by_region.parquet", "by_region.suite.json", "data_docs", "scores_cov.parquet"]
    states = []
    k = 0
    while True:
        k += 1
        out = tmp_path / f"kill-{k}"
        out.mkdir()
        for older in ("oldest", "old"):  # "oldest": a run the new one's publish deletes
            publish(_stage(out, older, old_names), out, run=older, releases={})
        if not _publish_killed_before_change(out, "new", new_names, k):
            break  # publish() made k - 1 changes: every one was preceded by a kill
        # what a reader sees now: one run, whole
        current = Path(os.path.realpath(out / "current"))
        assert current.name in ("old", "new"), k
        manifest = json.loads((current / "manifest.json").read_text())
        assert manifest["files"] == sorted(old_names if current.name == "old" else new_names)
        assert all((current / f).read_text() == current.name for f in manifest["files"] if "." in f)
        for p in out.iterdir():
            if p.name.startswith(".") or p.name == "current" or not p.exists():
                continue
            assert Path(os.path.realpath(p)).parent == current, (k, p)
        linked = [f for f in manifest["files"] if os.path.lexists(out / f)]
        owned = (current / ".owner").exists()
        states.append((current.name == "new", len(linked) < len(manifest["files"]), owned))
        repair(out)  # the next job's first step
        assert _published(out).name == current.name, k
        assert _hidden(out) == [".runs"], k
        assert not [r for r in (out / ".runs").iterdir() if (r / ".owner").exists()], k
        publish(_stage(out, "next", old_names), out, run="next", releases={})
        assert _published(out).name == "next"
        assert sorted(p.name for p in (out / ".runs").iterdir()) == sorted(["next", current.name])
        assert _hidden(out) == [".runs"]
    # the kills fell in every step: before the commit (the previous run still current),
    # between the commit and the last link (the new run current, some of its names
    # missing), after (the new run current and linked, its owner file left) and while
    # deleting the oldest run
    assert any(not new for new, _, _ in states), states
    assert any(new and missing for new, missing, _ in states), states
    assert any(new and not missing and owned for new, missing, owned in states), states
    assert any(new and not missing and not owned for new, missing, owned in states), states


@pytest.mark.slow  # a job in a process of its own
def test_a_job_killed_while_publishing_leaves_one_run(tmp_path):
    """One whole `dpframe release` job, SIGKILLed while publishing (between the commit
    and its last link): a reader sees the new run, whole; the next run repairs the rest.
    (A kill before each of publish()'s changes:
    test_publish_killed_before_each_rename_and_link_leaves_one_run.)"""
    import subprocess
    import sys

    spec_path = write_spec(tmp_path, rows=1000, budget=3 * EPSILON_TOTAL + 1)
    out = tmp_path / "released"
    run(load_spec(spec_path), progress=False)  # a published run to replace
    # the job renames a release: a name to link, and a name to drop
    _edit_spec(spec_path, 'name = "scores_cov"', 'name = "scores_matrix"')
    # the job through the CLI; its driver SIGKILLs it at its second link of publishing
    # (the first is the commit: `current`)
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import os, signal, sys\n"
        "import dpframe.jobs.job as job\n"
        "from dpframe.cli import app\n"
        "links = []\n"
        "symlink = os.symlink\n"
        "def killing(*a, **k):\n"
        "    if links:\n"
        "        links.append(1)\n"
        "        if len(links) == 3:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return symlink(*a, **k)\n"
        "os.symlink = killing\n"
        "publish = job.publish\n"
        "def announced(*a, **k):\n"
        "    links.append(0)\n"
        "    return publish(*a, **k)\n"
        "job.publish = announced\n"
        "sys.argv[0] = 'dpframe'\n"
        "app()\n"
    )
    before = os.path.realpath(out / "current")
    cmd = [sys.executable, str(driver), "release", str(spec_path), "--no-progress"]
    job = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert job.returncode == -signal.SIGKILL, job.stdout + job.stderr
    # what a reader sees now: the new run, whole, some of its names not linked yet
    current = Path(os.path.realpath(out / "current"))
    assert str(current) != before
    manifest = json.loads((current / "manifest.json").read_text())
    assert all((current / f).exists() for f in manifest["files"])
    for p in out.iterdir():
        if p.name.startswith(".") or p.name == "current" or not p.exists():
            continue
        assert Path(os.path.realpath(p)).parent == current, p
    assert [f for f in manifest["files"] if not os.path.lexists(out / f)]
    assert (current / ".owner").exists()
    last = run(load_spec(spec_path), progress=False)  # repairs everything
    folder = _published(out)
    assert folder.name == last.run
    assert _hidden(out) == [".runs"]
    runs = sorted(p.name for p in (out / ".runs").iterdir())
    previous = json.loads((folder / "manifest.json").read_text())["previous"]
    assert runs == sorted([last.run, previous]) and previous == current.name
    assert not [r for r in runs if (out / ".runs" / r / ".owner").exists()]


def test_check_reads_the_current_run_and_keeps_the_links(tmp_path):
    """`dpframe check` validates the current run (not the previous one kept beside it)
    and writes its results into that run: the top-level names stay links."""
    spec_path = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    spec = load_spec(spec_path)
    first, second = run(spec, progress=False), run(spec, progress=False)
    old = out / ".runs" / first.run / "scores_cov.parquet"  # the previous run, kept
    pl.DataFrame({"column": ["x"], "trust": [1e9]}).write_parquet(old)  # would fail
    before = (out / ".runs" / second.run / "by_region.validation.json").stat().st_mtime_ns
    res = runner.invoke(app, ["check", str(spec_path), "--data-docs"])
    assert res.exit_code == 0, res.output
    folder = _published(out)  # every name still a link into the current run
    assert folder.name == second.run
    assert (folder / "by_region.validation.json").stat().st_mtime_ns > before
    assert (out / "data_docs").is_symlink() and (out / "data_docs" / "by_region").is_dir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "data_docs" in manifest["files"]
    assert _hidden(out) == [".runs"]


def test_published_run_reads_one_run_while_another_is_published(tmp_path, monkeypatch):
    """published_run resolves `current` once: a publish that swaps it right after does
    not mix the next run's files into the one being read."""
    import dpframe.jobs.publish as publish_mod
    from dpframe.errors import DPFrameError
    from dpframe.jobs import published_run

    spec_path = write_spec(tmp_path, rows=1000, budget=10.0)
    out = tmp_path / "released"
    spec = load_spec(spec_path)
    with pytest.raises(DPFrameError, match="no published run"):
        published_run(out)
    first = run(spec, progress=False)
    real = os.path.realpath
    later: list = []

    def resolve_then_publish(path, *args, **kwargs):
        resolved = real(path, *args, **kwargs)
        if not later and Path(path).name == "current":  # right after the resolve
            monkeypatch.setattr(publish_mod.os.path, "realpath", real)
            later.append(run(spec, progress=False))
        return resolved

    monkeypatch.setattr(publish_mod.os.path, "realpath", resolve_then_publish)
    reading = published_run(out)
    assert later and reading.run == first.run != later[0].run
    assert reading.folder == Path(real(out / ".runs" / first.run))
    assert all(f.exists() for f in reading.files)  # kept: it is the previous run now
    for name in reading.releases:
        ids = {e.id for e in dpframe.read_provenance(reading.path(name)).entries}
        assert ids <= {e.id for e in first.entries}  # all of the first run
    now = published_run(out)
    assert now.run == later[0].run and now.previous == first.run
    assert published_run(now.folder).run == now.run  # a run's own folder reads too
    with pytest.raises(DPFrameError, match="no release 'missing'"):
        now.path("missing")


def test_a_killed_jobs_reservation_blocks_every_later_release_job(tmp_path):
    """Attack: a release job is killed after reserving 1.0 of a 3.0 budget (nothing
    drawn). The design says the next transaction on the host gives it back -- but
    ``run`` first calls ``plan()``, whose ``ledger_state`` counts ``acct.reserved``
    including dead owners' holds, declares the 2.3-epsilon spec "OVERSPENDS" and raises
    before any transaction runs. So the dead hold is never collected by jobs: every
    later ``dpframe release`` on the ledger fails until an operator runs
    ``dpframe ledger cancel``.

    Correct: a dead owner's hold is not counted (or is given back) before the fit check;
    the spec (2.3 <= 3.0 - 0) runs.
    """
    from dpframe.jobs import load_spec, run
    from tests.jobs.conftest import write_spec

    spec_path = write_spec(tmp_path, rows=2000, budget=3.0)
    ledger = tmp_path / "ledger.db"
    dpframe.Accountant.open(ledger, epsilon=3.0)
    from tests.core.test_accountant import _orphan_reservation

    _orphan_reservation(str(ledger), 1.0)
    assert len(dpframe.Accountant.open(ledger).reservations) == 1
    result = run(load_spec(spec_path), progress=False)  # before: BudgetExceededError
    assert result.epsilon == pytest.approx(2.3)
    assert dpframe.Accountant.open(ledger).reservations == ()  # the dead job's, given back


@pytest.mark.slow  # nine jobs in processes of their own
def test_release_jobs_killed_at_random_moments_leave_a_ledger_that_matches_what_was_published(
    tmp_path,
):
    """SIGKILL whole `dpframe release` jobs at seeded moments spread over a job's run
    (loading, checking, reserving, drawing, writing, checking, publishing). After every
    kill the ledger opens (verified) and the output folder shows one whole run; after a
    final run, no reservation is left, every published run's manifest names exactly the
    ledger entries of its job, every job that was killed recorded only releases it drew
    (in the spec's order: a prefix), and the released files agree with the ledger."""
    import random
    import subprocess
    import sys
    import time

    spec_path = write_spec(tmp_path, rows=2000, budget=100.0)
    ledger_path = tmp_path / "ledger.db"
    out = tmp_path / "released"
    cmd = [sys.executable, "-m", "dpframe.cli", "release", str(spec_path), "--no-progress"]
    started = time.monotonic()
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, timeout=600)
    duration = time.monotonic() - started  # one whole job, measured here
    published: dict[str, set[str]] = {}

    def record_published() -> None:
        if os.path.lexists(out / "current"):
            run_folder = _published(out)
            manifest = json.loads((run_folder / "manifest.json").read_text())
            published[manifest["run"]] = set(manifest["ledger"]["entries"])

    record_published()
    rng = random.Random(14)
    fractions = [0.15, 0.35, 0.5, 0.65, 0.8, 0.9, 0.97]
    rng.shuffle(fractions)
    for f in fractions:
        job = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(f * duration)
        job.kill()
        job.wait(timeout=60)
        dpframe.Accountant.open(ledger_path)  # verifies the chain, or raises
        record_published()
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, timeout=600)
    record_published()

    ledger = dpframe.Accountant.open(ledger_path)
    assert ledger.reservations == ()  # the killed jobs' holds were given back
    jobs: dict[str, list] = {}  # each job drew from its one reservation
    for e in ledger.ledger:
        jobs.setdefault(e.details["reservation"], []).append(e)
    groups = {frozenset(e.id for e in entries): entries for entries in jobs.values()}
    whole = None
    for run_id, ids in published.items():
        assert frozenset(ids) in groups, run_id  # exactly the entries of one job
        whole = [(e.mechanism, e.columns, e.epsilon) for e in groups[frozenset(ids)]]
    killed = [entries for key, entries in groups.items() if set(key) not in published.values()]
    for entries in killed:  # what a killed job recorded is what it drew, in the spec's order
        drawn = [(e.mechanism, e.columns, e.epsilon) for e in entries]
        assert drawn == whole[: len(drawn)]
    assert len(published) >= 2  # the first and the last run at least
    res = CliRunner().invoke(app, ["ledger", "verify", str(ledger_path), "--against", str(out)])
    assert res.exit_code == 0, res.output
    print(f"{len(fractions)} kills: {len(jobs)} jobs drew, {len(published)} runs published")


NULLS_SPEC = """
version = 1
[input]
path = "people.parquet"
[privacy]
budget = {{ epsilon = 1.0 }}
ledger = "ledger.db"
[output]
folder = "released"
[margins.regions]
values = {{ region = ["N", "S", "E"] }}
[[release]]
name = "by_region"
kind = "grouped"
by = ["region"]
margins = "regions"
nulls = {nulls}
[[release.statistics]]
stat = "mean"
column = "income"
lower = 0
upper = 100
epsilon = 0.5
"""


@pytest.mark.parametrize(
    ("nulls", "rows"), [('"drop"', 3), ('{ income = 0, region = "E" }', 5)], ids=["drop", "fill"]
)
def test_a_spec_says_what_to_do_with_missing_values(tmp_path, nulls, rows):
    people = pl.DataFrame(
        {"region": ["N", "S", None, "N", "S"], "income": [10.0, None, 30.0, 40.0, 50.0]}
    )
    people.write_parquet(tmp_path / "people.parquet")
    (tmp_path / "release.toml").write_text(NULLS_SPEC.format(nulls=nulls))
    spec = load_spec(tmp_path / "release.toml")
    result = run(spec, progress=False)
    assert all(c.success for c in result.checks)
    assert result.epsilon == pytest.approx(0.5)
    exact = result.releases["by_region"].exact_aggregates()  # (confidential: a test's view)
    assert exact["income_mean:n"].sum() == rows


def test_a_spec_refuses_an_unknown_nulls_policy(tmp_path):
    (tmp_path / "release.toml").write_text(NULLS_SPEC.format(nulls='"ignore"'))
    with pytest.raises(dpframe.jobs.SpecError, match=r"release 'by_region' > nulls"):
        load_spec(tmp_path / "release.toml")


COUNTED_SPEC = """
version = 1
[input]
path = "in.parquet"
[privacy]
unit = "record"
neighbours = "substitute"
budget = {{ epsilon = 10 }}
ledger = "ledger.jsonl"
[output]
folder = "released"
[[release]]
name = "micro"
kind = "pram"
columns = [{columns}]
[[release]]
name = "shares"
kind = "proportions"
column = "count"
categories = {cats}
epsilon = 0.5
"""


def test_columns_named_as_the_count_tables_columns_are_counted_and_checked(tmp_path):
    """PRAM columns named ``count``, ``rows`` and ``value`` (the columns of an engine's
    count of each value, and of a PRAM check's table of them) and the proportions of
    ``count``, through a job: counted before the charge, checked after it and in a
    later check of the published folder. Each failed with a duplicate column: ``count``
    before its charge, ``rows`` in the check of the written file, after it."""
    from dpframe.jobs import check_folder

    names, cats = ["count", "rows", "value"], ["a", "b", "c"]
    df = pl.DataFrame({c: [cats[(i + j) % 3] for i in range(12)] for j, c in enumerate(names)})
    df.write_parquet(tmp_path / "in.parquet")
    columns = ", ".join(f'{{ column = "{c}", epsilon = 0.5, categories = {cats} }}' for c in names)
    spec = tmp_path / "spec.toml"
    spec.write_text(COUNTED_SPEC.format(columns=columns, cats=cats).replace("'", '"'))
    got = run(load_spec(spec), progress=False)
    assert all(c.success for c in got.checks)
    assert all(c.success for c in check_folder(got.folder))  # the file read, not counted
    assert got.epsilon == 2.0  # three columns at 0.5 each, and the shares at 0.5
    written = pl.read_parquet(got.outputs["micro"])
    assert written.columns == names and written.height == 12
    assert written.select(pl.all().is_in(cats).all()).row(0) == (True, True, True)
