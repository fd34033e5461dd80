"""``import dpframe`` loads the package's names, and the namespaces' functions, on first
use: every name is there whatever the thread that first touches it, and ``dir`` lists
them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import dpframe

ROOT = Path(__file__).resolve().parents[1]

# Each trial forgets every module the names load, then touches each name (and each
# namespace function) first from its own thread, all at once. Python refuses one of two
# threads importing a package and its submodules in two orders at once (an ImportError,
# or its _DeadlockError): measured before the fix, 6 to 7 trials of 10 failed.
_THREADS = """
import sys, threading
import dpframe
from dpframe.polars import namespace

KEEP = {"dpframe", "dpframe.errors", "dpframe.version", "dpframe.polars"}
KEEP |= {"dpframe.polars.namespace"}
names = [n for n in dpframe._LAZY if n not in ("risk", "check", "expectations")]
later = [v for v in vars(namespace).values() if isinstance(v, namespace._Later)]
failed = []
for trial in range(10):
    for m in [m for m in sys.modules if m.startswith("dpframe.") and m not in KEEP]:
        del sys.modules[m]
    for n in names:
        dpframe.__dict__.pop(n, None)
    touches = [lambda n=n: getattr(dpframe, n) for n in names]
    touches += [f._function for f in later if not f._module.startswith("dpframe.risk")]
    barrier = threading.Barrier(len(touches))

    def touch(f):
        barrier.wait()
        try:
            f()
        except Exception as exc:
            failed.append(repr(exc))

    threads = [threading.Thread(target=touch, args=(f,)) for f in touches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(failed[:3])
"""


def _prints(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (which must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_names_touched_first_from_many_threads_at_once_all_load():
    assert _prints(_THREADS) == "[]"


def test_dir_lists_every_public_name_before_its_first_use():
    code = "import dpframe; print(sorted(set(dpframe.__all__) - set(dir(dpframe))))"
    assert _prints(code) == "[]"
    assert set(dpframe.__all__) <= set(dir(dpframe))
