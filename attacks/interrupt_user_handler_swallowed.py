"""Break: a user's SIGTERM handler's exception, re-sent after a give-back, is swallowed.

A program with its own SIGTERM handler raising an Exception (a common graceful-shutdown
pattern) gets SIGTERM while a reservation is given back (outside a job: its own `with
acct.reserve(...)`). deferred() holds the signal until the give-back commits, then sends
it again: the handler's exception comes out of the give-back's ledger write, and
reserve() takes any Exception there for a failed give-back -- it warns "could not be
given back; it stays held" (false: it was given back) and swallows the exception: the
program goes on as if no SIGTERM came.
"""

from __future__ import annotations

import signal
import tempfile
import warnings
from pathlib import Path

import dpframe
from dpframe.core.stores import DatabaseStore


class ShutdownError(Exception):
    pass


def on_term(signum, frame):
    raise ShutdownError("SIGTERM: shutting down")


signal.signal(signal.SIGTERM, on_term)
acct = dpframe.Accountant.open(Path(tempfile.mkdtemp()) / "ledger.db", epsilon=1.0)
real = DatabaseStore.transact


def transact(self, decide):
    def deciding(state):
        changes = decide(state)
        if changes.give_back and not changes.reserve:
            signal.raise_signal(signal.SIGTERM)  # arrives during the give-back
        return changes

    return real(self, deciding)


DatabaseStore.transact = transact
stopped = False
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    try:
        with acct.reserve(dpframe.Budget(0.5)):
            acct.spend(0.1, mechanism="laplace")
    except ShutdownError:
        stopped = True
DatabaseStore.transact = real
print("warnings:", [str(w.message)[:80] for w in said])
print("open reservations:", acct.reservations)
print("held" if stopped else "BREAK: the SIGTERM's exception was swallowed; the program goes on")
