"""Break: outside a job, a signal between deferred()'s restores leaves SIGTERM swallowed.

Every ledger transaction of a Python release is a deferred() section: it installs a
noting handler for SIGINT then SIGTERM, and at the end puts back SIGINT's handler, then
SIGTERM's. A Ctrl-C arriving just after SIGINT's is back raises KeyboardInterrupt (the
default handler) inside that finally: SIGTERM's handler is never put back, and stays the
section's `note` -- which appends to a list no one reads. From then on the process
swallows every SIGTERM, silently. Also: two different signals inside one section (SIGINT
then SIGTERM) are re-sent as the first only: the SIGTERM is lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from dpframe.core import interrupts
from dpframe.core.interrupts import deferred

if "--child" in sys.argv:
    mode = sys.argv[2]
    if mode == "restore":
        real = signal.signal
        armed = [True]

        def hooked(signum, handler):
            previous = real(signum, handler)
            if armed[0] and signum == signal.SIGINT and handler is signal.default_int_handler:
                armed[0] = False
                signal.raise_signal(signal.SIGINT)  # Ctrl-C, one instruction later
            return previous

        interrupts.signal.signal = hooked
        try:
            with deferred():
                pass  # a ledger write
        except KeyboardInterrupt:
            print("KeyboardInterrupt, as expected", flush=True)
        interrupts.signal.signal = real
        print("SIGTERM handler now:", signal.getsignal(signal.SIGTERM), flush=True)
    else:  # both signals in one section
        try:
            with deferred():
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            print("KeyboardInterrupt; the program handles it and goes on", flush=True)
    os.kill(os.getpid(), signal.SIGTERM) if mode == "restore" else None
    print("still running: SIGTERM was lost", flush=True)
    sys.exit(0)

broken = False
for mode in ("restore", "both"):
    child = subprocess.run(
        [sys.executable, __file__, "--child", mode], capture_output=True, text=True, timeout=60
    )
    print(f"[{mode}]", child.stdout.strip().replace("\n", " | "), "| exit", child.returncode)
    broken |= child.returncode == 0
print("BREAK: a SIGTERM was swallowed" if broken else "held")
