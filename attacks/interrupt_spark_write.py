"""Attack: SIGTERM while Spark writes a job's PRAM microdata (engine="spark").

The signal arrives in the driver while the executors run mapInArrow + write.parquet into
the staging folder; the driver raises ReleaseInterrupted out of the py4j call, gives
back the reservation and removes its staging folder -- while the JVM job may still be
writing into it. Checked: the message, the ledger, and what is left in the output folder
a few seconds later (a staging folder re-created by the still-running write has no
.owner, so repair() would never remove it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _base

import dpframe
import dpframe.engines.spark as spark_engine
from dpframe.errors import ReleaseInterrupted
from dpframe.jobs import load_spec, run

spec = _base.new_job("spark_term")
work = spec.parent
real = spark_engine.SparkEngine.write_rowwise
delay = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def write_rowwise(self, *args, **kwargs):
    threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    return real(self, *args, **kwargs)


spark_engine.SparkEngine.write_rowwise = write_rowwise
try:
    run(load_spec(spec), engine="spark", progress=False)
    print("the job finished before the signal")
except ReleaseInterrupted as exc:
    print("exit code", exc.exit_code, "| said:", str(exc)[:160])
time.sleep(5)
acct = dpframe.Accountant.open(work / "ledger.db")
print("reservations:", acct.reservations, "| spent:", acct.spent.epsilon)
left = sorted(p.name for p in (work / "released").iterdir()) if (work / "released").exists() else []
print("left in released/:", left)
