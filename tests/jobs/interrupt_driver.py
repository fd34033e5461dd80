"""Runs ``dpframe release`` again and again in one process, stopping where a test says.

Used by ``test_interrupts.py`` in a pseudo-terminal (one process serves several cases: a
process costs seconds to start and to import Great Expectations). Nothing here changes
what the job does: it only announces a named moment on stdout (``PAUSED <moment>``) and,
in ``pause`` mode, waits there for a line on stdin -- the test sends its signal to the
process group meanwhile, as a terminal does on Ctrl-C.

Protocol: after ``READY``, each stdin line ``CASE <moment> <mode> [last]`` runs the job
once; ``<moment>`` is ``step:N`` (inside progress step N), ``commit:hold``,
``commit:draw:K`` (just after the ledger write of the K-th draw committed, still inside
the accountant's transaction), ``switch`` (publishing, before ``current`` is switched) or
``<moment>+giveback`` (then pauses again inside the transaction giving back the
reservation, for a second signal). ``<mode>``: ``pause`` (wait for a line) or ``pass``
(go on). The job's exit code is printed as ``EXIT <code>``; the ``last`` case exits the
process with it.

Usage: python interrupt_driver.py release.toml
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any

from dpframe.core.stores import DatabaseStore
from dpframe.jobs.progress import JobProgress
from dpframe.jobs.publish import CURRENT

case: dict[str, Any] = {}


def pause(moment: str) -> None:
    print(f"PAUSED {moment}", flush=True)
    if case["mode"] == "pause":
        sys.stdin.readline()


class Announcing(JobProgress):
    @contextlib.contextmanager
    def step(self, description: str, rows: int | None = None) -> Iterator[None]:
        with super().step(description, rows):
            if case["moment"] == f"step:{self.done}":
                pause(f"step:{self.done} {description}")
            yield


transact = DatabaseStore.transact


def announcing_transact(self: Any, decide: Any) -> Any:
    seen = []

    def spy(state: Any) -> Any:
        seen.append(decide(state))
        return seen[-1]

    recorded = transact(self, spy)
    changes = seen[-1]
    if changes.reserve:
        kind = "commit:hold"
    elif changes.entries:
        case["draws"] += 1
        kind = f"commit:draw:{case['draws']}"
    else:
        kind = "giveback" if changes.give_back else "other"
    if case["moment"] == kind or (kind == "giveback" and case["giveback"]):
        pause(kind)
    return recorded


point: Any = None  # publish._point, once main() patched it


def announcing_point(link: Any, text: str) -> None:
    if link.name == CURRENT and case["moment"] == "switch":
        pause("switch")
    point(link, text)


def main(spec: str) -> None:
    import great_expectations  # noqa: F401  # imported once, for every case of the process

    import dpframe.jobs.job as job
    import dpframe.jobs.publish as publish
    from dpframe.cli import app

    global point
    point = publish._point
    job.JobProgress = Announcing  # type: ignore[misc]
    DatabaseStore.transact = announcing_transact  # type: ignore[method-assign]
    publish._point = announcing_point
    # between cases a signal that came late (after its job ended) is only noted
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda signum, frame: print(f"LATE {signum}", flush=True))

    print("READY", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "CASE":
            continue
        moment, _, giveback = words[1].partition("+")
        case.update(moment=moment, mode=words[2], giveback=bool(giveback), draws=0)
        if "last" in words[3:]:  # its exit code is the process's
            app(["release", spec], prog_name="dpframe")
        try:
            app(["release", spec], prog_name="dpframe")
        except SystemExit as exc:
            print(f"EXIT {exc.code or 0}", flush=True)


if __name__ == "__main__":  # imported (pytest's doctest collection), it does nothing
    main(sys.argv[1])
