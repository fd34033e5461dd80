"""Break: SIGTERM while polars runs a job's PRAM randomizer is reported as Ctrl-C (exit 130).

A job's microdata is randomized inside a polars map_batches function (write_rowwise). The
SIGTERM's ReleaseInterrupted(signum=15) is raised inside that function; polars re-raises
it as a new exception of the same class built from its message alone, so signum falls
back to SIGINT: the job says "interrupted by SIGINT (Ctrl-C)" and `dpframe release`
exits 130, not 143 -- a scheduler that stopped the job reads it as a user's Ctrl-C.
(The same reconstruction drops `charged` from a Python release's ReleaseInterrupted.)
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _base

import dpframe.engines.polars as engine
from dpframe.errors import ReleaseInterrupted
from dpframe.jobs import load_spec, run

spec = _base.new_job("sigterm_polars")
real = engine.randomizer


def randomizer(armed, source, counts=False):
    inner = real(armed, source, counts)

    def run_(s):
        signal.raise_signal(signal.SIGTERM)  # a scheduler's kill, as polars randomizes
        return inner(s)

    return run_


engine.randomizer = randomizer
try:
    run(load_spec(spec), progress=False)
except ReleaseInterrupted as exc:
    print("exit code:", exc.exit_code, "| said:", str(exc)[:90])
    print("held" if exc.exit_code == 143 else "BREAK: a SIGTERM reported as Ctrl-C")
