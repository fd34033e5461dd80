"""Break: a signal between handling()'s handler restores leaves the process deaf to SIGTERM.

At its end handling() put back SIGINT's handler, then SIGTERM's, then reset its state.
A SIGTERM arriving between the two raised ReleaseInterrupted inside the context
manager's own finally: the rest was skipped, _on_signal stayed installed for SIGTERM
with _STATE.raised = True and depth = 1 -- from then on the process ignored every
SIGTERM (a scheduler's `kill` did nothing), later jobs installed no handler of their
own ("inside another job"), and the finished job raised "interrupted" without saying
what it had published.

The signal's moment is made exact by sending it from a wrapper of signal.signal, right
after SIGINT's handler is put back (what a real signal does one instruction later). Run
in a child: held = the SIGTERM stops the child (now or at the later kill), broken = the
child outlives a later SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

if "--child" in sys.argv:
    from dpframe.core import interrupts
    from dpframe.core.interrupts import handling

    real = signal.signal
    armed = [True]

    def hooked(signum, handler):
        previous = real(signum, handler)
        if armed[0] and signum == signal.SIGINT and handler is signal.default_int_handler:
            armed[0] = False
            signal.raise_signal(signal.SIGTERM)  # arrives between the two restores
        return previous

    interrupts.signal.signal = hooked  # the module's `signal` is the signal module
    try:
        with handling():
            pass  # the job's work, finished
    except KeyboardInterrupt as exc:
        print("the finished job raised:", type(exc).__name__, exc, flush=True)
    interrupts.signal.signal = real
    print("SIGTERM handler now:", signal.getsignal(signal.SIGTERM), flush=True)
    print("state: depth", interrupts._STATE.depth, "raised", interrupts._STATE.raised, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    print("still running after a later SIGTERM", flush=True)
    sys.exit(0)

child = subprocess.run(
    [sys.executable, __file__, "--child"], capture_output=True, text=True, timeout=60
)
print(child.stdout.strip())
print("child exit code:", child.returncode, "(-15: SIGTERM stopped it)")
print("BREAK: SIGTERM ignored for good" if child.returncode == 0 else "held")
