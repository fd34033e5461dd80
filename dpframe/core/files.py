"""Atomic file writes: a reader sees the old file or the complete new one, never half.

Every file dpframe writes -- a ledger, a released Parquet file, a suite, a validation
result -- goes through :func:`atomic_file`: the data is written to a temporary file in
the target's folder and renamed over the target only once complete. On a failure the
temporary file is removed and the target is untouched.

Examples
--------
>>> import os, tempfile
>>> from dpframe.core.files import atomic_write_text
>>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
>>> atomic_write_text(path, "hello")
>>> open(path).read()
'hello'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dpframe.errors import InvalidParameterError

__all__ = ["atomic_file", "atomic_write_text", "check_output_path"]


def check_output_path(path: str | os.PathLike[str], name: str = "path") -> Path:
    """An output path whose folder exists (checked before anything is spent)."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidParameterError(
            f"{name} must be a file path (str or os.PathLike), got {type(path).__name__}"
        )
    target = Path(path)
    if not target.parent.exists():
        raise InvalidParameterError(
            f"{name}: folder {target.parent} does not exist; create it first"
        )
    if target.is_dir():
        raise InvalidParameterError(f"{name}: {target} is a folder; give a file path")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise InvalidParameterError(
            f"{name}: folder {target.parent} is not writable by this user; write elsewhere"
        )
    return target


def _file_mode() -> int:
    """The mode a new file gets under the process umask (mkstemp's is always 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_file(
    target: str | os.PathLike[str], *, private: bool = False, mode: int | None = None
) -> Iterator[str]:
    """A temporary file next to ``target``, renamed onto it if the block succeeds.

    Yields the temporary path to write. ``private=True`` keeps mkstemp's mode 0600
    (a ledger); ``mode`` gives the file that mode (a file rewritten in place keeps its
    own); otherwise the file gets the mode the umask gives a new file (a published
    output).
    """
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        elif not private:
            os.chmod(tmp, _file_mode())
        with open(tmp, "rb+") as fh:  # the data is on disk before the name points at it
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, private: bool = False) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_file`)."""
    with atomic_file(path, private=private) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
