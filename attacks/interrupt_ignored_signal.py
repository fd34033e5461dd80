"""Break: a job makes a signal the caller ignores (SIG_IGN) stop it.

A process started with SIGINT ignored -- `dpframe release spec.toml &` from a script (a
non-interactive shell ignores SIGINT for background jobs, so a Ctrl-C on the script
leaves them running), or a wrapper that sets SIG_IGN -- is meant to outlive a Ctrl-C.
handling() installs its own handler over SIG_IGN: the job now stops on that Ctrl-C
(exit 130), the run unpublished.
"""

from __future__ import annotations

import signal
import subprocess
import sys

CHILD = """
import signal
from dpframe.core.interrupts import handling
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
try:
    with handling():
        signal.raise_signal(signal.SIGINT)  # the Ctrl-C the caller meant to ignore
        print("job went on", flush=True)
except KeyboardInterrupt as exc:
    print("job stopped:", exc, flush=True)
print("SIGINT handler after:", signal.getsignal(signal.SIGINT), flush=True)
"""
child = subprocess.run(
    [sys.executable, "-c", CHILD],
    capture_output=True,
    text=True,
    timeout=60,
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
)
print(child.stdout.strip(), child.stderr.strip()[-300:])
print("held" if "job went on" in child.stdout else "BREAK: an ignored SIGINT stopped the job")
