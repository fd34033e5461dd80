"""Break: Ctrl-C as a job's reservation block ends skips the give-back.

reserve()'s finally resets its context variable, then calls _transact(give back); the
ledger write is deferred() only once _transact enters its `with deferred()`. A first
SIGINT/SIGTERM arriving between the end of the job's `with` block and that point raises
ReleaseInterrupted inside the finally, before the give-back: the reservation stays held
(the job says so, and tells the operator to run `dpframe ledger cancel`). Here the job
had drawn everything, so it holds ~0 -- but the same window exists when a release fails
after the hold (an error, then Ctrl-C), where the reservation holds undrawn budget.

The moment is made exact by raising the signal as _transact is called for the give-back.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _base

import dpframe
from dpframe.core.accountant import Accountant
from dpframe.errors import ReleaseInterrupted
from dpframe.jobs import load_spec, run

spec = _base.new_job("giveback")
work = spec.parent
real = Accountant._transact
fired = []


def transact(self, decide):
    if decide.__name__ == "<lambda>" and not fired:  # reserve()'s give-back
        fired.append(True)
        signal.raise_signal(signal.SIGINT)  # arrives before its `with deferred()`
    return real(self, decide)


Accountant._transact = transact
try:
    run(load_spec(work / "release.toml"), progress=False)
except ReleaseInterrupted as exc:
    print("job said:", exc)
Accountant._transact = real
acct = dpframe.Accountant.open(work / "ledger.db")
print("open reservations after the job:", [(r.id[:8], r.epsilon) for r in acct.reservations])
print("BREAK: reservation left held" if acct.reservations else "held")
