"""Finding (liveness, not fixed): Ctrl-C / SIGTERM wait out a busy ledger (up to 120 s).

While another job holds the ledger's write lock, a ledger transaction waits up to
BUSY_TIMEOUT (120 s) for it, and a Ctrl-C or a scheduler's SIGTERM does not take effect
until the wait ends -- past a scheduler's grace period (Kubernetes: 30 s), which then
SIGKILLs the job. For SQLite this is Python's sqlite3 busy handler (a C sleep loop that
never checks signals; /tmp-style check: plain sqlite3 waits the same); for PostgreSQL
(psycopg waits interruptibly) it is the deferred() section, entered before the lock wait.
Nothing is written while waiting, so deferring there protects nothing. Shown on SQLite
with the timeout lowered to 6 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import dpframe
import dpframe.core.sqlite as sq

ledger = Path(tempfile.mkdtemp()) / "ledger.db"
acct = dpframe.Accountant.open(ledger, epsilon=1.0)
holder = subprocess.Popen(
    [
        sys.executable,
        "-c",
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(30)",
        str(ledger),
    ],
    stdout=subprocess.PIPE,
    text=True,
)
assert holder.stdout.readline().strip() == "locked"  # another job writes the ledger
sq.BUSY_TIMEOUT = 6.0
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
try:
    acct.spend(0.1, mechanism="laplace")
except KeyboardInterrupt:
    took = time.monotonic() - t0 - 0.5
    print(f"Ctrl-C took effect {took:.1f} s after it was pressed")
except Exception as exc:
    print(f"{type(exc).__name__} after {time.monotonic() - t0:.1f} s; then:", end=" ")
    try:
        time.sleep(0.1)
    except KeyboardInterrupt:
        print(f"Ctrl-C took effect {time.monotonic() - t0 - 0.5:.1f} s after it was pressed")
holder.kill()
