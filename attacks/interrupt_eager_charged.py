"""Break: an eager Python release interrupted after its charge says charged=None.

`df.with_columns(dpframe.laplace(...))` runs the release inside an eager polars call,
which re-raises an exception from inside the query as type(exc)(message): the
ReleaseInterrupted that said "epsilon 0.5 stays spent" comes out with `charged` None --
documented as "raised before a job began, nothing spent" -- and signum/exit_code reset
to SIGINT. (The message is still right; a program reading the attributes is misled.)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl

import dpframe
from dpframe.core.randomness import RandomSource
from dpframe.errors import ReleaseInterrupted

stats = pl.DataFrame({"mean_age": [41.2, 38.9, 45.0]})
acct = dpframe.Accountant.open(Path(tempfile.mkdtemp()) / "l.db", epsilon=1.0)


def interrupted(self):
    raise KeyboardInterrupt  # Ctrl-C as the noise is drawn, after the charge


RandomSource.generator = interrupted
try:
    with acct:
        stats.with_columns(
            dpframe.laplace("mean_age", epsilon=0.5, sensitivity=0.1, composition="parallel")
        )
except ReleaseInterrupted as exc:
    print("message says spent:", "0.5 stays spent" in str(exc), "| charged:", exc.charged)
    print("held" if exc.charged else "BREAK: charged is None though epsilon 0.5 was spent")
