"""One guard for every output: a writer never replaces what a run reads, a ledger, or a
file dpframe did not write.

Every dpframe writer (``write_parquet``, ``sink_parquet``, a PRAM release's ``.write``,
``copy_provenance`` and the publish of a release job) calls :func:`guard_output` with
the path it will write, before anything is charged. It refuses, naming the argument and
the fix, a path that -- through symbolic links (``os.path.realpath``) or as a hard link
(the same device and inode) --

* is, or is under, a file or folder the run reads, or matches a glob pattern it reads
  (the pattern is matched against the path as given and as resolved, and its existing
  matches are compared by inode);
* is a ledger: a ledger file the caller names, its ``-wal``, ``-shm`` or ``-journal``
  companion, any SQLite database, or the companion of one;
* already exists and was not written by dpframe (``owned``, a test the caller gives:
  a Parquet file whose footer carries dpframe's provenance, for the Parquet writers).

The guard reads no data and writes nothing. It is a check made before the write, so a
file another process puts in the way between the check and the write is not covered
(dpframe's writers then replace it atomically, as they replace their own files).

Examples
--------
>>> import os, tempfile
>>> from dpframe.core.outputs import Read, guard_output
>>> folder = tempfile.mkdtemp()
>>> _ = guard_output(os.path.join(folder, "out.parquet"), argument="path",
...                  reads=[Read(os.path.join(folder, "*.csv"), "the input")])
>>> guard_output(os.path.join(folder, "in.csv"), argument="path",
...              reads=[Read(os.path.join(folder, "*.csv"), "the input")])
Traceback (most recent call last):
    ...
dpframe.errors.InvalidParameterError: path: ... matches the input ...
"""

from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dpframe.errors import InvalidParameterError

__all__ = [
    "LEDGER_COMPANIONS",
    "Read",
    "guard_output",
    "is_glob",
    "ledger_conflict",
    "read_conflict",
]

#: the files SQLite keeps beside a database while it is open (or after a crash)
LEDGER_COMPANIONS = ("-wal", "-shm", "-journal")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_MAGIC_CHARS = "*?["


@dataclass(frozen=True)
class Read:
    """Something a run reads: a file, a folder (everything under it) or a glob pattern.

    ``what`` names it in an error, as the caller knows it (``"input.path"``, ``"the
    query's input"``, ``"the spec"``, ``"margins.region.path"``).
    """

    path: str
    what: str


def is_glob(text: str) -> bool:
    """Whether ``text`` is a glob pattern (``*``, ``?`` or ``[``)."""
    return any(ch in text for ch in _MAGIC_CHARS)


def _component_regex(part: str) -> str:
    """One path component of a glob pattern as a regular expression (``*`` and ``?``
    never cross a ``/``; a leading dot is matched like any other character, as polars
    matches it)."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = part.find("]", i + 2 if part[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = part[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace('/', '')}]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _split_pattern(pattern: str) -> tuple[str, list[str]]:
    """A pattern's literal folder (no magic character) and the components after it."""
    parts = os.path.abspath(pattern).split(os.sep)
    first = next(i for i, p in enumerate(parts) if is_glob(p))
    return os.sep.join(parts[:first]) or os.sep, parts[first:]


def _matches(path: str, base: str, rest: list[str]) -> bool:
    """Whether the absolute ``path`` is ``base`` followed by a match of ``rest`` (``**``
    matches any number of components)."""
    prefix = base.rstrip(os.sep) + os.sep
    if not path.startswith(prefix):
        return False
    pieces = []
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
        else:
            pieces.append(_component_regex(part) + ("" if last else "/"))
    regex = "".join(pieces)
    return re.fullmatch(regex, path[len(prefix) :]) is not None


def _glob_matches(pattern: str, given: str, real: str) -> bool:
    """Whether ``pattern`` matches the path, as given or resolved through links."""
    base, rest = _split_pattern(pattern)
    return _matches(given, base, rest) or _matches(real, os.path.realpath(base), rest)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def read_conflict(path: str | os.PathLike[str], reads: Iterable[Read]) -> str | None:
    """Why writing ``path`` would replace something the run reads, or None.

    ``path`` is compared as given (made absolute) and resolved through links; a file
    read is the same as ``path`` if it resolves to it or is the same inode; a folder
    read covers everything under it; a glob pattern covers every path it matches.
    """
    given = os.path.abspath(path)
    real = os.path.realpath(path)
    identity = _identity(real)
    for read in reads:
        text = os.fspath(read.path)
        if is_glob(text):
            if _glob_matches(text, given, real):
                return f"matches {read.what} {text}"
            candidates = glob.glob(text, recursive=True, include_hidden=True)
        else:
            candidates = [text]
        for candidate in candidates:
            resolved, absolute = os.path.realpath(candidate), os.path.abspath(candidate)
            if real == resolved or given == absolute:
                return f"is {read.what} {text}"
            if _under(real, resolved) or _under(given, absolute):
                return f"is inside {read.what} {text} (a folder the run reads)"
            if identity is not None and identity == _identity(resolved):
                return f"is {read.what} {text} (a hard link to it)"
    return None


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def ledger_conflict(
    path: str | os.PathLike[str], ledgers: Iterable[str | os.PathLike[str]] = ()
) -> str | None:
    """Why writing ``path`` would replace a ledger, or None.

    A ledger is each file of ``ledgers`` (the open accountants' and the spec's) with its
    ``-wal``, ``-shm`` and ``-journal`` companions, any SQLite database, and the
    companion of one.
    """
    real = os.path.realpath(path)
    identity = _identity(real)
    for ledger in ledgers:
        file = os.path.realpath(ledger)
        for name in (file, *(file + s for s in LEDGER_COMPANIONS)):
            if real == name or (identity is not None and identity == _identity(name)):
                return f"is the ledger {os.fspath(ledger)}" + name.removeprefix(file)
    if os.path.isfile(real) and _is_sqlite(real):
        return "is a SQLite database (a ledger?)"
    for suffix in LEDGER_COMPANIONS:
        if real.endswith(suffix) and _is_sqlite(real.removesuffix(suffix)):
            return f"is the {suffix} file of the SQLite database {real.removesuffix(suffix)}"
    return None


def guard_output(
    path: str | os.PathLike[str],
    *,
    argument: str,
    reads: Sequence[Read] = (),
    ledgers: Sequence[str | os.PathLike[str]] = (),
    owned: Callable[[Path], bool] | None = None,
    replace: bool = True,
) -> Path:
    """Refuse an output path that would replace what the run reads, a ledger, or a file
    dpframe did not write; return it as a :class:`~pathlib.Path`.

    Parameters
    ----------
    path : path-like
        Where the writer will write (a file, or a folder for Spark).
    argument : str
        The argument (or spec field) that gave ``path``, named in the error.
    reads : sequence of Read
        What the run reads (files, folders, glob patterns).
    ledgers : sequence of path-like
        The ledger files of the run (the open accountants', the spec's).
    owned : callable, optional
        ``owned(path)`` is True when the existing ``path`` was written by dpframe and may
        be replaced. Without it, an existing path is refused.
    replace : bool, default True
        False when the writer is meant to rewrite an existing file another tool wrote
        (``copy_provenance``): then only the reads and the ledgers are checked.

    Raises
    ------
    InvalidParameterError
        Naming ``argument``, what ``path`` would replace, and the fix; nothing is
        written or charged.
    """
    text = os.fspath(path)
    problem = ledger_conflict(text, ledgers) or read_conflict(text, reads)
    if problem is not None:
        raise InvalidParameterError(
            f"{argument}: {text} {problem}; an output never replaces what the run reads or "
            "its ledger: write it elsewhere. Nothing was written or charged."
        )
    target = Path(text)
    if replace and os.path.lexists(target):
        if target.is_symlink():
            raise InvalidParameterError(
                f"{argument}: {text} is a symbolic link (to {os.readlink(target)}); dpframe "
                "replaces only files it wrote: give the path of the file itself, or remove "
                "the link. Nothing was written or charged."
            )
        mode = os.stat(target).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) or owned is None or not owned(target):
            raise InvalidParameterError(
                f"{argument}: {text} already exists and was not written by dpframe (it "
                "carries no dpframe provenance); dpframe replaces only files it wrote: "
                "move it, or write elsewhere. Nothing was written or charged."
            )
    return target
