"""Interrupts (SIGINT, SIGTERM) during a release: raised once, never inside a ledger write.

Two context managers, both active only in the main thread (where Python runs signal
handlers; elsewhere they do nothing):

* :func:`handling` -- for the duration of a release job (``dpframe release``,
  :func:`dpframe.jobs.run`): SIGINT (Ctrl-C) and SIGTERM both raise
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


_STATE = _State()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _installable() -> dict[int, Any] | None:
    """The current handlers of :data:`SIGNALS`, or None if one cannot be put back (a
    handler installed from C, not by Python)."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    return None if any(h is None for h in previous.values()) else previous


def _on_signal(signum: int, frame: FrameType | None) -> None:
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
    for s in SIGNALS:
        signal.signal(s, _on_signal)
    _STATE.depth, _STATE.deferring, _STATE.pending, _STATE.raised = 1, 0, None, False
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _STATE.depth, _STATE.deferring, _STATE.pending, _STATE.raised = 0, 0, None, False


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

    for s in SIGNALS:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if caught:  # delivered now to the handler it was meant for
            signal.raise_signal(caught[0])


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
