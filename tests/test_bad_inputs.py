"""The bad-input table of issue 17: several hundred wrong arguments, columns, spec fields
and command lines over dpframe's public surface, one test each.

A case passes when dpframe refuses the input cleanly:

* in-process, it raises a :class:`dpframe.errors.DPFrameError` subclass whose message
  names the argument, column or spec field at fault (one of ``case.names``, ignoring
  case), charges nothing (the case's accountant and any ledger its setup made are
  unchanged) and writes nothing (no file appears or changes in the case's folder, a
  fresh ``tmp_path``, after its setup);
* for the ``dpframe`` command (``python -m dpframe.cli``), it exits with 1 or 2, prints
  no traceback, names the argument in its output, and charges and writes nothing. The
  first case of each command runs the real entry point in a subprocess; the others run
  the same command in-process (:func:`_cli_in_process`: the same arguments, environment
  and folder, the exit code, and a traceback printed as the interpreter would), which
  spares a Python start-up (most of a case's time) per case.

``tests/bad_inputs/harness.py`` runs and classifies a case (see its docstring for the
classes); the cases are in ``tests/bad_inputs/cases.py``, grouped by surface.

To add a case, append an ``add(surface, label, fn, names, ...)`` (or a ``spec_case`` /
``cmd``) line in the right group of cases.py: ``fn(ctx)`` makes the call with the bad
input (``ctx.tmp`` is the case's folder and the current directory, ``ctx.acct`` a fresh
accountant of the kind ``acct=`` names); ``setup=`` writes the files the call needs
before the "nothing written" snapshot; mark an input the library may legitimately accept
``q=True``. A case that does not pass yet gets ``xfail="what happens today"``: it runs as a
strict xfail, so that fixing the library makes it fail (XPASS) until the mark is removed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dpframe.cli import app
from tests.bad_inputs import cases
from tests.bad_inputs.cases import CASES
from tests.bad_inputs.harness import (
    CLI_ENV,
    Case,
    CaseTimeout,
    CLIResult,
    _alarm,
    _leave_accountants,
    nobody_missing,
    reachable_by_nobody,
    run_case,
)


def _case_id(n: int, case: Case) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", case.label.lower()).strip("-")
    return f"{n:04d}-{slug[:60].rstrip('-')}"


PARAMS = [
    pytest.param(
        case,
        id=_case_id(n, case),
        marks=[pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else [],
    )
    for n, case in enumerate(CASES)
]


def _command(case: Case) -> str:
    """The command a CLI case runs: ``[cli-plan]`` (a spec), or ``dpframe <command>``."""
    words = case.label.split()
    return words[0] if words[0].startswith("[") else " ".join(words[:2])


#: the CLI cases run as ``python -m dpframe.cli`` (the real entry point: its exit code, a
#: traceback it prints): the first case of each command
END_TO_END = {
    next(c.label for c in CASES if c.kind == "cli" and _command(c) == command)
    for command in {_command(c) for c in CASES if c.kind == "cli"}
}


def _cli_in_process(ctx: Any, *args: str, timeout: float = 90.0) -> CLIResult:
    """``dpframe *args`` as :func:`tests.bad_inputs.harness.cli` runs it, in this process:
    the same environment and folder; the exit code the command exits with; an exception
    it lets out printed as the interpreter prints it (a traceback on stderr, exit 1)."""
    assert os.getcwd() == str(ctx.tmp)
    env = {k: v for k, v in CLI_ENV.items() if os.environ.get(k) != v}
    try:
        with _alarm(timeout):
            res = CliRunner().invoke(app, list(args), env=env, prog_name="dpframe")
    except CaseTimeout:
        return CLIResult(None, "", "", timed_out=True)
    finally:
        _leave_accountants()
    stderr = res.stderr
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        stderr += "".join(traceback.format_exception(res.exception))
    return CLIResult(res.exit_code, res.stdout, stderr)


@pytest.mark.parametrize("case", PARAMS)
def test_bad_input(case: Case, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    if case.kind == "cli" and case.label not in END_TO_END:
        monkeypatch.setattr(cases, "cli", _cli_in_process)
    if case.kind == "remote":
        reason = nobody_missing()
        if reason is not None:
            pytest.skip(reason)
        # a folder of its own under /tmp: pytest's folders sit under a 0700 parent that
        # other pytest processes set back to 0700 at any moment, cutting uid 65534 off
        # mid-case (a raw PermissionError where the case expects dpframe's refusal)
        own = Path(tempfile.mkdtemp(prefix="dpframe-nobody-"))
        monkeypatch.chdir(own)
        try:
            with reachable_by_nobody(own) as reason:
                if reason is not None:
                    pytest.skip(reason)
                outcome = run_case(case, own)
        finally:
            shutil.rmtree(own, ignore_errors=True)
    else:
        outcome = run_case(case, tmp_path)
    assert outcome.cls == "pass", outcome.explain(case)
