"""The checker process: the same results as checking in the job's process, fail-closed
when it dies, never outliving the process that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import dpframe
import dpframe.jobs.checker as checker
import dpframe.jobs.job as job
from dpframe.errors import ChecksUnavailableError, InvalidParameterError
from dpframe.jobs import CheckFailedError, load_spec, run
from dpframe.jobs.checks import check_release, save_check, suite_for
from dpframe.jobs.spec import GroupedSpec, PramSpec, ProportionsSpec
from dpframe.polars.expectations import Suite

from .conftest import EPSILON_TOTAL, write_spec


@pytest.fixture
def use_checker(monkeypatch):
    """Checks go through a checker process even though this process imported Great
    Expectations (the test process checks in process too, for comparison)."""
    monkeypatch.setattr(checker, "_imported", lambda: False)
    checker.stop_checker()
    yield
    checker.stop_checker()


@pytest.fixture(scope="module")
def _kept_checker():
    """The checker the tests using :func:`shared_checker` share, stopped after them."""
    yield
    checker.stop_checker()


@pytest.fixture
def shared_checker(monkeypatch, _kept_checker):
    """As :func:`use_checker`, but the checker is left running for the next such test (each
    start imports Great Expectations again: seconds)."""
    monkeypatch.setattr(checker, "_imported", lambda: False)


def _suites() -> list[Suite]:
    """Suites of every kind, passing and failing."""
    shares = ProportionsSpec(
        name="shares", kind="proportions", column="vote", categories=["a", "b"], epsilon=1.0
    )
    pram = PramSpec(
        name="micro",
        kind="pram",
        columns=[{"column": "region", "epsilon": 1.0, "categories": ["N", "S"]}],
    )
    grouped = GroupedSpec(
        name="by_g",
        kind="grouped",
        by=["g"],
        margins="m",
        statistics=[{"stat": "count", "epsilon": 1.0}],
    )
    margins = pl.DataFrame({"g": ["x", "y"]})
    return [
        suite_for(shares, pl.DataFrame({"vote": ["a", "b"], "proportion": [0.25, 0.75]})),
        suite_for(shares, pl.DataFrame({"vote": ["a", "b"], "proportion": [0.5, 0.75]})),
        suite_for(pram, pl.DataFrame({"region": ["N", "S", "X", None]}), input_rows=5),
        suite_for(grouped, pl.DataFrame({"g": ["x", "y"], "count": [3, 4]}), margins=margins),
        suite_for(grouped, pl.DataFrame({"g": ["x", "z"], "count": [3, -4]}), margins=margins),
    ]


def _timeless(doc: object) -> object:
    """``doc`` without Great Expectations' batch load times (a clock reading: two checks
    in one process differ there too)."""
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k != "ge_load_time"}
    if isinstance(doc, list):
        return [_timeless(v) for v in doc]
    return doc


def _saved(result: object, folder: Path) -> dict[str, object]:
    """The files :func:`save_check` writes: bytes, the validation JSON without load times."""
    save_check(result, folder)  # type: ignore[arg-type]
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {
        str(p.relative_to(folder)): _timeless(json.loads(p.read_text()))
        if p.name.endswith(".validation.json")
        else p.read_bytes()
        for p in files
    }


def test_the_checker_answers_as_the_job_s_own_process(tmp_path, shared_checker):
    assert checker.start_checker()
    for i, suite in enumerate(_suites()):
        here = check_release(suite)
        there = checker.validate(suite)
        assert checker._checker is not None and checker._checker.started  # it answered
        assert there.success == here.success and there.failures == here.failures
        assert there.suite == here.suite
        assert _timeless(there.result) == _timeless(here.result)
        assert there.n_expectations == here.n_expectations and list(there.tables) == list(
            here.tables
        )
        # the saved suite, validation JSON and tables: byte for byte
        assert _saved(there, tmp_path / f"there{i}") == _saved(here, tmp_path / f"here{i}")
    assert [checker.validate(s).success for s in _suites()] == [True, False, False, True, False]


def test_an_error_in_the_checker_is_raised_as_in_process(shared_checker):
    bad = Suite("t", "toy", {"main": pl.DataFrame({"a": [1]})}, {"main": []})
    bad.expect("expect_nothing_of_the_kind", "main", column="a")
    with pytest.raises(InvalidParameterError) as here:
        check_release(bad)
    assert checker.start_checker()
    with pytest.raises(InvalidParameterError) as there:
        checker.validate(bad)
    assert str(there.value) == str(here.value)
    assert checker._checker is not None and checker._checker.alive()  # still in step
    assert checker.validate(_suites()[0]).success


def test_a_failed_check_through_the_checker_publishes_nothing(
    tmp_path, monkeypatch, shared_checker
):
    spec_path = write_spec(tmp_path, rows=3000)
    from dpframe.polars.frame import ProportionsRelease

    real = ProportionsRelease._finish
    monkeypatch.setattr(
        ProportionsRelease,
        "_finish",
        lambda self, outputs: real(self, outputs).with_columns(pl.col("proportion") * 1.5),
    )
    with pytest.raises(CheckFailedError, match="age_shares") as info:
        run(load_spec(spec_path), progress=False)
    assert checker._checker is not None and checker._checker.started  # checked there
    assert "nothing was published" in str(info.value)
    out = tmp_path / "released"
    assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == []
    (failed,) = [p for p in out.iterdir() if p.name.startswith(".failed-")]
    assert (failed / "age_shares.validation.json").exists()


def test_checks_run_in_process_once_great_expectations_is_imported_here():
    import great_expectations  # noqa: F401

    checker.stop_checker()
    assert checker.start_checker() is False and checker._checker is None
    assert checker.validate(_suites()[0]).success


def test_a_killed_checker_fails_the_job_closed(tmp_path, monkeypatch, use_checker):
    spec_path = write_spec(tmp_path, rows=3000, budget=5.0)  # room for a second run
    real = job._suite

    def kill_then_suite(*args):
        running = checker._checker
        assert running is not None and running.greeted()  # started, then killed
        os.kill(running.process.pid, signal.SIGKILL)
        running.process.wait()
        return real(*args)

    monkeypatch.setattr(job, "_suite", kill_then_suite)
    with pytest.raises(ChecksUnavailableError, match="Nothing was published") as info:
        run(load_spec(spec_path), progress=False)
    assert "exited with code -9" in str(info.value)
    out = tmp_path / "released"
    assert [p.name for p in out.iterdir()] == []  # nothing published, nothing staged
    ledger = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert ledger.reservations == ()  # given back; every release had drawn its noise
    assert ledger.spent.epsilon == pytest.approx(EPSILON_TOTAL)
    # the next job starts another checker
    monkeypatch.setattr(job, "_suite", real)
    result = run(load_spec(spec_path), progress=False)
    assert all(c.success for c in result.checks) and checker._checker.started


KEEPS_A_CHECKER = """
import os, sys
import dpframe.jobs.checker as checker
if sys.argv[1] == "stuck":  # a checker that never reads its pipe (dies with its parent only)
    STUCK = "import pickle, sys, time; from dpframe.jobs.checker import HELLO, _die_with; "
    STUCK += "_die_with(int(sys.argv[1])); sys.stdout.buffer.write(pickle.dumps(HELLO)); "
    STUCK += "sys.stdout.flush(); time.sleep(600)"
    checker._command = lambda: [sys.executable, "-c", STUCK, str(os.getpid())]
assert "great_expectations" not in sys.modules and checker.start_checker()
assert checker._checker.greeted()  # running: its parent's death now kills it
print(checker._checker.process.pid, flush=True)
sys.stdin.readline()  # then exits
"""


def _gone(pid: int, within: float = 20.0) -> bool:
    """Whether process ``pid`` ended (or is a zombie nobody reaped) within ``within`` s."""
    stop = time.monotonic() + within
    while time.monotonic() < stop:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    "end, kind",
    [("SIGKILL", "real"), ("SIGKILL", "stuck"), ("SIGTERM", "stuck"), ("exit", "stuck")],
)
def test_the_checker_never_outlives_the_process_that_started_it(end, kind):
    env = {**os.environ, "PYTHONPATH": str(Path(dpframe.__file__).parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-c", KEEPS_A_CHECKER, kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    pid = int(proc.stdout.readline())
    assert not _gone(pid, within=0.2)  # running beside the process that started it
    if end == "exit":
        proc.stdin.write("\n")
        proc.stdin.flush()
    else:
        proc.send_signal(getattr(signal, end))
    proc.wait(30)
    proc.stdin.close()
    proc.stdout.close()
    assert _gone(pid)


CHECKS_ONE = """
import sys
import polars as pl
import dpframe.jobs.checker as checker
from dpframe.polars.frame import proportions_suite

entry = {"name": "shares", "kind": "proportions", "column": "vote", "categories": ["a", "b"],
         "tolerance": 1e-9}
suite = proportions_suite(entry, {}, pl.DataFrame({"vote": ["a", "b"], "proportion": [0.5, 0.5]}))
assert checker.start_checker()
print(checker.validate(suite).success, checker._checker.started, flush=True)
"""


def test_the_checker_imports_nothing_planted_in_the_working_folder(tmp_path):
    planted = tmp_path / "work" / "great_expectations"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-code-ran"
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = tmp_path / "job.py"  # run as a file: its folder, not the working one, is on its path
    script.write_text(CHECKS_ONE)
    env = {**os.environ, "PYTHONPATH": str(Path(dpframe.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"]  # checked by the checker, by the real GE
    assert not marker.exists()


def test_a_checker_started_by_a_thread_that_ended_still_checks(use_checker):
    """Linux's parent-death signal follows the starting *thread*: a checker started by a
    job in a worker thread must serve the process's next job after that thread ended."""
    import threading

    def job_in_a_thread() -> None:
        assert checker.start_checker()
        assert checker._checker is not None and checker._checker.greeted()

    worker = threading.Thread(target=job_in_a_thread)
    worker.start()
    worker.join()
    assert checker.start_checker()  # the same checker, still running
    assert checker.validate(_suites()[0]).success and checker._checker.started


def test_the_checker_searches_this_process_s_path_in_its_order():
    # old: dpframe's parent folder went first on the checker's path, ahead of the standard
    # library and site-packages, so a module planted beside the package was imported by
    # the checker alone (and could pass a failed check)
    command = checker._command()
    assert command is not None and command[1] == "-I"  # no PYTHONPATH, no working folder
    assert json.loads(command[4]) == [p for p in sys.path if p]


def test_the_checker_imports_what_this_process_would(tmp_path):
    # dpframe imported from a folder that comes after site-packages on the job's path and
    # holds a planted great_expectations beside the package: the job would import the real
    # one, and so must its checker (old: that folder went first on the checker's path)
    import shutil

    root = tmp_path / "checkout"
    shutil.copytree(
        Path(dpframe.__file__).parent,
        root / "dpframe",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    planted = root / "great_expectations"
    planted.mkdir()
    marker = tmp_path / "planted-code-ran"
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    here = str(Path(dpframe.__file__).parents[1])
    script = tmp_path / "job.py"
    script.write_text(
        f"import sys\nsys.path[:] = [p for p in sys.path if p and p != {here!r}]\n"
        f"sys.path.append({str(root)!r})\n"
        + CHECKS_ONE
        + f"import dpframe\nassert dpframe.__file__.startswith({str(root)!r}), dpframe.__file__\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"]
    assert not marker.exists()


def test_the_checker_yields_the_cpu_to_the_job(use_checker):
    """The checker imports Great Expectations beside the job's releases at a lower
    priority (its nice value, and on Linux its session's autogroup too): it takes the
    cores the releases leave idle, not one of theirs."""
    import os
    import sys

    assert checker.start_checker()
    assert checker.validate(_suites()[0]).success  # it runs, and answers
    pid = checker._checker.process.pid
    assert os.getpriority(os.PRIO_PROCESS, pid) >= checker._NICENESS
    group = Path(f"/proc/{pid}/autogroup")
    if sys.platform == "linux" and group.exists():
        assert group.read_text().split()[-1] == str(checker._NICENESS)
