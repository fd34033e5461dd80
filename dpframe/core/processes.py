"""Who owns a piece of work: a process, named so that another process can tell if it died.

An owner is ``{"host", "boot", "pidns", "pid", "started"}``: the host name, the kernel's
boot id, the inode of its pid namespace (so a container sharing the host name, or another
machine of the same name, is not "this host"), the pid, and the process's start time in
clock ticks since boot (so a reused pid is not mistaken for the owner). :func:`is_gone`
answers ``True`` only when it is certain: the owner ran in this very process table (same
host, boot and pid namespace) and no process with its pid and start time exists. Any
other owner -- another host, a container, a record without these facts -- is never
judged.

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


def _table() -> dict[str, Any]:
    """What names this process table: host name, boot id, pid namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot: str | None = f.read().strip()
    except OSError:
        boot = None
    try:
        pidns: int | None = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pidns = None
    return {"host": socket.gethostname(), "boot": boot, "pidns": pidns}


def this_process() -> dict[str, Any]:
    """This process as an owner."""
    pid = os.getpid()
    return {**_table(), "pid": pid, "started": _started(pid)}


def is_gone(owner: Any) -> bool:
    """Whether the owning process is certainly dead (see the module docstring)."""
    try:
        pid = int(owner["pid"])
        where = {k: owner[k] for k in ("host", "boot", "pidns")}
    except (TypeError, KeyError, ValueError):
        return False  # not ours to judge
    here = _table()
    if None in here.values() or where != here:
        return False  # another process table (host, boot, container): it may be running
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. another user's process: it exists
        pass
    started = owner.get("started")
    now = _started(pid)
    return started is not None and now is not None and now != started
