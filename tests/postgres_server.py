"""A throwaway PostgreSQL server for the ledger's tests, from the machine's binaries.

``make test`` installs PostgreSQL if the machine lacks it (``make setup-postgres``) and
sets ``DPFRAME_REQUIRE_POSTGRES=1``, so the PostgreSQL tests fail rather than skip. The
server refuses to run as root: as root it runs as the ``postgres`` system user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator

REQUIRED = os.environ.get("DPFRAME_REQUIRE_POSTGRES") == "1"


def binaries() -> str | None:
    """The newest PostgreSQL server's bin folder on this machine, if any."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if found:
        return os.path.dirname(found[-1])
    on_path = shutil.which("postgres")
    return os.path.dirname(on_path) if on_path else None


def missing_reason() -> str | None:
    """Why the PostgreSQL tests cannot run here (``None``: they can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install -e '.[postgres]' (make test does)"
    if binaries() is None:
        return "no PostgreSQL server binaries (apt-get install postgresql; make test does)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root with no 'postgres' user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server() -> Iterator[str]:
    """Start a server in a temporary folder; yield its base URL; stop and remove it."""
    bin_dir = binaries()
    assert bin_dir is not None
    root = tempfile.mkdtemp(prefix="dpframe-pg-")
    os.chmod(root, 0o755)
    as_user: list[str] = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(root, "data")
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, cwd=root)

    run(f"{bin_dir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    )
    log = os.path.join(root, "log")
    run(f"{bin_dir}/pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "-t", "60", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            run(f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def new_database(base: str) -> str:
    """A fresh, empty database on the server at ``base``; its URL."""
    import psycopg

    name = f"ledger_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return f"{base}/{name}"
