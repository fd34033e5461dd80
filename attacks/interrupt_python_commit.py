"""Break: Ctrl-C as a Python release's charge commits: budget spent without a word.

Outside a job (a Python release: dpframe.laplace in a `with accountant:` block), the
ledger write is a deferred() section: a SIGINT arriving inside is sent again once the
write is done, to Python's default handler, so a plain KeyboardInterrupt comes out of the
charge -- before executor.drawing() is entered. Nothing says the charge was made
(compare: the same Ctrl-C one instant later, in the draw, says "epsilon 0.5 stays
spent"). The ledger is right (it over-records nothing drawn); the user is not told.
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import polars as pl

import dpframe

stats = pl.DataFrame({"mean_age": [41.2, 38.9, 45.0]})
ledger = Path(tempfile.mkdtemp()) / "ledger.db"
acct = dpframe.Accountant.open(ledger, epsilon=1.0)
store = acct._store
real = store.transact


def transact(decide):
    recorded = real(decide)  # the charge is committed ...
    signal.raise_signal(signal.SIGINT)  # ... and Ctrl-C arrives before the write returns
    return recorded


store.transact = transact
said = False
try:
    with acct:
        stats.with_columns(
            dpframe.laplace("mean_age", epsilon=0.5, sensitivity=0.1, composition="parallel")
        )
except KeyboardInterrupt as exc:
    print("raised:", type(exc).__name__, repr(str(exc)))
    said = "0.5 stays spent" in str(exc)
store.transact = real
print("ledger spent:", acct.spent.epsilon)
print("held" if said else "BREAK: the charge was made and nothing says so")
