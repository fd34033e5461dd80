"""Who owns a piece of work: a process, named so that another process can tell if it died.

An owner is ``{"host", "pid", "started"}`` (``started``: the process's start time in
clock ticks since boot, from ``/proc``, so a reused pid is not mistaken for the owner).
:func:`is_gone` answers ``True`` only when it is certain: the owner ran on this host and
no process with its pid and start time exists. An owner on another host is never judged.

Examples
--------
>>> from dpframe.core.processes import is_gone, this_process
>>> is_gone(this_process())
False
"""

from __future__ import annotations

import os
import socket
from typing import Any

__all__ = ["is_gone", "this_process"]


def _started(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), if ``/proc`` says."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def this_process() -> dict[str, Any]:
    """This process as an owner."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": _started(pid)}


def is_gone(owner: Any) -> bool:
    """Whether the owning process is certainly dead (see the module docstring)."""
    try:
        host, pid = owner["host"], int(owner["pid"])
    except (TypeError, KeyError, ValueError):
        return False  # not ours to judge
    if host != socket.gethostname():
        return False  # another host's process: it may be running
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. another user's process: it exists
        pass
    started = owner.get("started")
    now = _started(pid)
    return started is not None and now is not None and now != started
