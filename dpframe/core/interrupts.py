"""Interrupts (SIGINT, SIGTERM) during a release: raised once, never inside a ledger write.

Two context managers, both active only in the main thread (where Python runs signal
handlers; elsewhere they do nothing):

* :func:`handling` -- for the duration of a release job (``dpframe release``,
  :func:`dpframe.jobs.run`): SIGINT (Ctrl-C) and SIGTERM (either, unless the process
  ignores it: ``SIG_IGN`` stays) both raise
  :class:`~dpframe.errors.ReleaseInterrupted`, so a scheduler's ``kill`` is handled like
  Ctrl-C. Only the first signal raises: a second one while the job cleans up (gives back
  its reservation, removes its staging folder, says what it spent) is ignored, so it
  cannot cut that short. The previous handlers are restored at the end. Nested blocks
  share the outermost one's handlers.
* :func:`deferred` -- a critical section: a ledger transaction
  (:class:`~dpframe.core.accountant.Accountant`), the switch of a published run
  (:func:`dpframe.jobs.publish.publish`). A signal arriving inside is delivered when the
  section ends, so a write is whole *and* known to the code that made it: a draw from a
  reservation is never committed unseen, a reservation is never left held because a
  second Ctrl-C cut its give-back. Inside :func:`handling` the deferred signal raises
  :class:`~dpframe.errors.ReleaseInterrupted`; elsewhere it is sent again, once the
  section ends, to whatever handler was installed (``KeyboardInterrupt`` by default).

Examples
--------
>>> import signal
>>> from dpframe.core.interrupts import deferred, handling
>>> from dpframe.errors import ReleaseInterrupted
>>> done = []
>>> try:
...     with handling(), deferred():
...         signal.raise_signal(signal.SIGTERM)  # arrives inside the critical section
...         done.append("the write finished")
... except ReleaseInterrupted as exc:
...     print(done, exc.exit_code)
['the write finished'] 143
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from dpframe.errors import ReleaseInterrupted

__all__ = ["SIGNALS", "deferred", "handling", "ledger_line"]

#: the signals a job handles: Ctrl-C, and a scheduler's or ``kill``'s request to stop
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _State:
    """The handling of the main thread (signals run only there)."""

    def __init__(self) -> None:
        self.depth = 0  # nesting of handling()
        self.deferring = 0  # nesting of deferred() inside it
        self.pending: int | None = None  # a signal that arrived while deferring
        self.raised = False  # the job's one interrupt was raised: ignore later signals
        self.closing = False  # handling() is putting the handlers back: note, never raise
        self.late: list[int] = []  # signals noted while closing (sent on, once put back)

    def reset(self) -> None:
        self.depth, self.deferring, self.pending, self.raised = 0, 0, None, False
        self.closing, self.late = False, []


_STATE = _State()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _installable() -> dict[int, Any] | None:
    """The current handlers of :data:`SIGNALS`, or None if one cannot be put back (a
    handler installed from C, not by Python)."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    return None if any(h is None for h in previous.values()) else previous


def _put_back(previous: dict[int, Any]) -> None:
    """Install ``previous`` again, every one of them: a handler already put back may run
    (and raise) on the way -- its exception is raised once all are back, never leaving
    one of ours installed for good."""
    todo = list(previous.items())
    error: BaseException | None = None
    for _ in range(100):  # each try that fails is a signal handled (or a lasting error)
        try:
            while todo:
                signal.signal(*todo[0])
                todo.pop(0)
            break
        except BaseException as exc:  # raised by a handler put back: all of them first
            error = error or exc
    if error is not None:
        raise error


def _resend(signals: list[int]) -> None:
    """Send each of ``signals`` again, in order, to the handlers installed now: each is
    sent even if an earlier one's handler raises (Ctrl-C, then a scheduler's SIGTERM)."""
    if signals:
        try:
            signal.raise_signal(signals[0])
        finally:
            _resend(signals[1:])


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _STATE.closing:  # the handlers are being put back: sent on to them after
        _STATE.late.append(signum)
        return
    if _STATE.raised:  # the job is cleaning up after its interrupt: let it finish
        return
    if _STATE.deferring:
        if _STATE.pending is None:
            _STATE.pending = signum
        return
    _STATE.raised = True
    raise ReleaseInterrupted(signum=signum)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`~dpframe.errors.ReleaseInterrupted` (the first
    only) until the block ends; the previous handlers are restored then."""
    if not _main_thread():
        yield
        return
    if _STATE.depth:  # inside another job's handling: its handlers serve
        _STATE.depth += 1
        try:
            yield
        finally:
            _STATE.depth -= 1
        return
    previous = _installable()
    if previous is None:
        yield
        return
    try:  # a signal at any moment from here on: the handlers are put back below
        _STATE.reset()
        _STATE.depth = 1
        for s in SIGNALS:
            if previous[s] is not signal.SIG_IGN:  # one the caller ignores stays ignored
                signal.signal(s, _on_signal)
        yield
    finally:
        _STATE.closing = True  # a signal now is noted, not raised (_on_signal)
        try:
            _put_back(previous)
        finally:
            # a signal that came as the handlers were put back: to them, unless the job
            # was interrupted already (a later signal is ignored while it stops)
            late = [] if _STATE.raised else list(dict.fromkeys(_STATE.late))
            _STATE.reset()
            _resend(late)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A critical section: SIGINT and SIGTERM arriving inside take effect at its end."""
    if not _main_thread():
        yield
        return
    if _STATE.depth:
        _STATE.deferring += 1
        try:
            yield
        finally:
            _STATE.deferring -= 1
            if not _STATE.deferring and _STATE.pending is not None:
                signum, _STATE.pending = _STATE.pending, None
                if not _STATE.raised:
                    _STATE.raised = True
                    raise ReleaseInterrupted(signum=signum)
        return
    previous = _installable()
    if previous is None:
        yield
        return
    caught: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    wakeup = -1
    try:  # a signal at any moment from here on: the handlers are put back below
        # a wakeup fd (asyncio's add_signal_handler) is told of a signal as it arrives,
        # and again when it is sent again: held off too, so it hears of it once
        wakeup = signal.set_wakeup_fd(-1)
        for s in SIGNALS:
            if previous[s] is not signal.SIG_IGN:
                signal.signal(s, note)
        yield
    finally:
        try:
            _put_back(previous)  # `note` notes until its signal's handler is back
        finally:  # each signal (once) delivered now to the handler it was meant for
            if wakeup != -1:
                signal.set_wakeup_fd(wakeup)
            _resend(list(dict.fromkeys(caught)))


def ledger_line(accountant: Any) -> str:
    """What an interrupted release says of its ledger: spent, of what, what is left (and
    what open reservations hold); a note instead if the ledger cannot be read now."""
    try:
        spent, left = accountant.spent, accountant.remaining
        held = accountant.reserved
        line = (
            f"Ledger {accountant.location}: spent epsilon {spent.epsilon:g} of "
            f"{accountant.epsilon:g}, remaining {left.epsilon:g}"
        )
        if held.epsilon:
            line += f" (open reservations hold epsilon {held.epsilon:g} more)"
        return line + "."
    except Exception:  # the ledger cannot be read now: said without it
        return f"(The ledger {accountant.location} could not be read now.)"
