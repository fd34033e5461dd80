"""The checker process: Great Expectations imported beside a release job, off its path.

Importing Great Expectations costs about 3 s (and 240 MB), and any import of one of its
submodules runs its package's ``__init__``, which imports nearly all of it: it cannot be
made cheaper from here. A release job does not need it until its checks, so
:func:`start_checker` starts (when the job starts) a child process that imports it while
the releases are read, drawn and written; :func:`validate` then sends it each released
table's suite (:class:`~dpframe.polars.expectations.Suite`: plain data and small polars
tables, never the input) and gets back the :class:`~dpframe.jobs.checks.CheckResult`
that :func:`~dpframe.jobs.checks.check_release` computes there -- the same function, on
the same suite, as in the job's own process. Importing in a thread instead could deadlock
on the import lock against the job's own first imports.

One checker serves every job of a process (Great Expectations is imported once per
process, as in-process checking would); it is started again if it died between jobs.
The checks run in the job's own process instead when Great Expectations is imported
there already, or when no checker can be started (no Python executable, a frozen
program, an error starting it).

A checker that dies or answers garbage while a job waits for it fails the job closed:
:class:`~dpframe.errors.ChecksUnavailableError`, so nothing is published and the job
ends as any failed check does. The checker never outlives the process that started it:
it is killed with it (Linux's parent-death signal, set first thing in the child), it
exits when its requests pipe closes, and an ``atexit`` hook ends it; it runs in a
session of its own, so a terminal's Ctrl-C reaches the job only (which then fails as
interrupted jobs do).

Examples
--------
>>> import polars as pl
>>> from dpframe.polars.frame import proportions_suite
>>> entry = {"name": "shares", "kind": "proportions", "column": "vote",
...          "categories": ["a", "b"], "tolerance": 1e-9}
>>> suite = proportions_suite(entry, {}, pl.DataFrame({"vote": ["a", "b"],
...                                                    "proportion": [0.25, 0.75]}))
>>> validate(suite).success  # here, or in this process's checker if one runs
True
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

from dpframe.errors import ChecksUnavailableError, DPFrameError
from dpframe.jobs.checks import CheckResult, check_release
from dpframe.polars.expectations import Suite

__all__ = ["start_checker", "stop_checker", "validate"]

#: the first message a checker sends (before it imports Great Expectations)
HELLO = ("dpframe-checker", 1)

#: how long a checker is given to end when it is stopped, before it is killed (seconds)
STOP_WAIT = 5.0

#: how much a checker lowers its priority (``os.nice``) before it imports Great Expectations
_NICENESS = 10


class _Checker:
    """A running checker process and the pipes to it (one request at a time)."""

    def __init__(
        self, process: subprocess.Popen[bytes], errors: IO[bytes], path: list[str]
    ) -> None:
        self.process = process
        self.path = path  # the module search path it was started with
        self.errors = errors  # its stderr, for the message if it dies
        self.owner = os.getpid()  # a forked copy of this process never shares it
        self.started: bool | None = None  # whether it greeted (None: not read yet)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def greeted(self) -> bool:
        """Whether the checker started (its greeting read once): False if it ended before
        it could greet, never having read a request (it is then stopped)."""
        if self.started is None:
            assert self.process.stdout is not None
            try:
                hello = pickle.load(self.process.stdout)
            except (OSError, EOFError, pickle.UnpicklingError):
                hello = None
            if hello is not None and hello != HELLO:
                raise ChecksUnavailableError(self.died("did not greet as a checker"))
            self.started = hello is not None
            if not self.started:
                self.stop()
        return self.started

    def check(self, suite: Suite) -> CheckResult:
        """Send ``suite``, return the checker's result (raise what it raised)."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(pickle.dumps(suite, protocol=pickle.HIGHEST_PROTOCOL))
            stdin.flush()
            reply = pickle.load(stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            raise ChecksUnavailableError(self.died(f"stopped answering ({exc!r})")) from None
        if not isinstance(reply, tuple) or len(reply) != 3 or reply[0] not in ("ok", "error"):
            raise ChecksUnavailableError(self.died("answered something that is not a result"))
        if reply[0] == "error":
            if not isinstance(reply[1], Exception):
                raise ChecksUnavailableError(self.died("answered an error that is not one"))
            raise reply[1]
        result, names = reply[1], reply[2]
        if not isinstance(result, CheckResult) or result.release != suite.release:
            raise ChecksUnavailableError(self.died("answered another release's result"))
        # the tables checked are the suite's own (not sent back)
        return dataclasses.replace(result, tables={t: suite.tables[t] for t in names})

    def died(self, what: str) -> str:
        """What a job says when its checker failed it (the checker stopped first)."""
        self.end()
        code = self.process.returncode
        try:
            self.errors.seek(0)
            tail = self.errors.read()[-2000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            tail = ""
        self.stop()
        return (
            f"the checker process (Great Expectations) {what}; it exited with code {code}"
            + (f":\n{tail}\n" if tail else ". ")
            + "Nothing was published; run the job again."
        )

    def stop(self) -> None:
        """End the checker (no answer is awaited), reap it and close its pipes."""
        if self.owner != os.getpid():
            return  # the parent's checker, seen from a forked copy: the parent ends it
        self.end()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.errors.close()

    def end(self) -> None:
        """End the checker process and reap it."""
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_lock = threading.Lock()
_checker: _Checker | None = None


def _imported() -> bool:
    """Whether Great Expectations is imported in this process (then checks run here)."""
    return "great_expectations" in sys.modules


def _command() -> list[str] | None:
    """How to start a checker here, or None if it cannot be (then checks run in process)."""
    if not sys.executable or getattr(sys, "frozen", False):
        return None
    # Linux signals a child when the *thread* that started it ends: only the main thread's
    # end is the process's (started elsewhere, it ends when its pipe closes)
    main = threading.current_thread() is threading.main_thread()
    return [
        sys.executable,
        "-I",  # isolated: no PYTHON* variables, no user site, not the working folder
        "-c",
        _BOOT,
        json.dumps(_search_path(sys.path)),
        str(os.getpid()),
        str(int(main)),
    ]


#: the checker's first lines: this process's module search path, in its order, before any
#: import of dpframe or Great Expectations (so it imports what this process would)
_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv.pop(1)); "
    "from dpframe.jobs.checker import main; main()"
)


def _search_path(path: list[str]) -> list[str]:
    """The checker's module search path: ``path`` in its own order, without its ``''``
    entries (the working folder at import time: a module planted there is not imported)."""
    return [p for p in path if p]


def start_checker() -> bool:
    """Start this process's checker, unless it runs or checks are run in this process.

    Called when a release job starts: the checker imports Great Expectations while the
    job reads and draws. Returns whether a checker now runs (False: Great Expectations
    is imported in this process already, or no checker could be started, and
    :func:`validate` checks here).

    Examples
    --------
    >>> import sys
    >>> "great_expectations" in sys.modules or isinstance(start_checker(), bool)
    True
    >>> stop_checker()
    """
    global _checker
    with _lock:
        if _checker is not None and _checker.alive() and _checker.path == sys.path:
            return True
        if _checker is not None:  # died, a forked copy's parent's, or another search path
            _checker.stop()
            _checker = None
        command = _command()
        if _imported() or command is None:
            return False
        errors = tempfile.TemporaryFile()  # noqa: SIM115  # kept open with the checker
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=dict(os.environ),
                start_new_session=True,
            )
        except OSError:
            errors.close()
            return False
        _checker = _Checker(process, errors, list(sys.path))
        return True


def stop_checker() -> None:
    """Stop this process's checker, if one runs (at exit; a test's clean-up).

    Examples
    --------
    >>> stop_checker()  # nothing runs: nothing to do
    """
    global _checker
    with _lock:
        if _checker is not None:
            _checker.stop()
            _checker = None


atexit.register(stop_checker)


def validate(suite: Suite) -> CheckResult:
    """Validate ``suite`` (:func:`~dpframe.jobs.checks.check_release`) in this process's
    checker if one runs, else here.

    Raises
    ------
    ChecksUnavailableError
        If the checker died or stopped answering: the job fails closed (a checker
        started again by the next job).

    Examples
    --------
    >>> import polars as pl
    >>> from dpframe.polars.frame import proportions_suite
    >>> entry = {"name": "shares", "kind": "proportions", "column": "vote",
    ...          "categories": ["a", "b"], "tolerance": 1e-9}
    >>> table = pl.DataFrame({"vote": ["a", "b"], "proportion": [0.5, 0.75]})
    >>> validate(proportions_suite(entry, {}, table)).success
    False
    """
    global _checker
    with _lock:
        checker = _checker if _checker is not None and _checker.owner == os.getpid() else None
        if checker is None:
            return check_release(suite)
        try:
            if not checker.greeted():  # it could not start (stopped): checked here
                return check_release(suite)
            return checker.check(suite)
        except ChecksUnavailableError:
            checker.stop()
            _checker = None  # the next job starts another
            raise
        except DPFrameError:  # the check's own error, answered in order: still usable
            raise
        except BaseException:  # interrupted mid-answer: its replies are out of step
            checker.stop()
            _checker = None
            raise


# -- the checker process -------------------------------------------------------------------


def _die_with(parent: int, signalled: bool = True) -> None:
    """Be killed when ``parent`` ends (Linux ``PR_SET_PDEATHSIG``, if ``signalled``); exit
    now if it already did."""
    if signalled and sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the signal was set
        os._exit(1)


def _reply(request: Any) -> tuple[str, Any, Any]:
    """The answer to one request: ``("ok", result without its tables, their names)``
    or ``("error", the exception)``."""
    try:
        if not isinstance(request, Suite):
            raise ChecksUnavailableError(f"the checker was sent a {type(request).__name__}")
        result = check_release(request)
        return "ok", dataclasses.replace(result, tables={}), list(result.tables)
    except Exception as exc:  # sent back as it is if the job's process knows its class
        module = type(exc).__module__
        if not (module == "builtins" or module.split(".")[0] == "dpframe"):
            exc = DPFrameError(f"the checks failed: {type(exc).__name__}: {exc}")
        return "error", exc, None


def main() -> None:
    """Run as a checker: import Great Expectations, then answer requests until the pipe
    closes (started by :func:`_command`: ``python -I -c <_BOOT> <search path> <parent pid>``)."""
    _die_with(int(sys.argv[1]), signalled=sys.argv[2:3] != ["0"])
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
    answers.write(pickle.dumps(HELLO))
    answers.flush()
    # the import runs beside the job's releases, whose reads use every core: at a lower
    # priority it takes the time they leave idle instead of a core from them (the checks
    # come last; the job waits for this process only if the import is not done by then)
    with contextlib.suppress(OSError):
        os.nice(_NICENESS)
    # Linux's autogroups share the CPU between sessions first, whatever the processes'
    # nice values: this process started a session of its own, so its group yields too
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
        group.write(str(_NICENESS))
    from dpframe.jobs.checks import _gx

    try:
        _gx()  # the import the job does not wait for
        broken: Exception | None = None
    except Exception as exc:  # as in process: every check raises it
        broken = exc
    requests = sys.stdin.buffer
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = _reply(request) if broken is None else ("error", broken, None)
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an answer that does not pickle: worded
            error = DPFrameError(f"the checks failed: {type(exc).__name__}: {exc}")
            data = pickle.dumps(("error", error, None))
        answers.write(data)
        answers.flush()


if __name__ == "__main__":
    main()
