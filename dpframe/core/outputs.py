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
from dataclasses import dataclass, field
from pathlib import Path

from dpframe.errors import InvalidParameterError

__all__ = [
    "LEDGER_COMPANIONS",
    "Read",
    "ReadIndex",
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


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@dataclass
class ReadIndex:
    """What a run reads, resolved once (every glob expanded, every path resolved), so
    that many output paths are checked against thousands of input files quickly."""

    patterns: list[tuple[Read, str, list[str], str]] = field(default_factory=list)
    names: dict[str, tuple[Read, bool]] = field(default_factory=dict)  # path -> (read, folder)
    identities: dict[tuple[int, int], Read] = field(default_factory=dict)

    @classmethod
    def of(cls, reads: Iterable[Read]) -> ReadIndex:
        index = cls()
        for read in reads:
            text = os.fspath(read.path)
            if is_glob(text):
                base, rest = _split_pattern(text)
                index.patterns.append((read, base, rest, os.path.realpath(base)))
                candidates = glob.glob(text, recursive=True, include_hidden=True)
            else:
                candidates = [text]
            for candidate in candidates:
                resolved = os.path.realpath(candidate)
                folder = os.path.isdir(resolved)
                for name in (resolved, os.path.abspath(candidate)):
                    index.names.setdefault(name, (read, folder))
                identity = _identity(resolved)
                if identity is not None and not folder:
                    index.identities.setdefault(identity, read)
        return index

    def conflict(self, path: str | os.PathLike[str]) -> str | None:
        """Why writing ``path`` would replace something read, or None."""
        given, real = os.path.abspath(path), os.path.realpath(path)
        for read, base, rest, real_base in self.patterns:
            if _matches(given, base, rest) or _matches(real, real_base, rest):
                return f"matches {read.what} {read.path}"
        for name in (real, given):
            if name in self.names:
                return f"is {self.names[name][0].what} {self.names[name][0].path}"
        for name in (real, given):
            for parent in Path(name).parents:
                found = self.names.get(str(parent))
                if found is not None and found[1]:
                    return f"is inside {found[0].what} {found[0].path} (a folder the run reads)"
        identity = _identity(real)
        if identity is not None and identity in self.identities:
            read = self.identities[identity]
            return f"is {read.what} {read.path} (a hard link to it)"
        return None


def read_conflict(path: str | os.PathLike[str], reads: Iterable[Read] | ReadIndex) -> str | None:
    """Why writing ``path`` would replace something the run reads, or None.

    ``path`` is compared as given (made absolute) and resolved through links; a file
    read is the same as ``path`` if it resolves to it or is the same inode; a folder
    read covers everything under it; a glob pattern covers every path it matches (and
    its existing matches are compared as files and folders).
    """
    index = reads if isinstance(reads, ReadIndex) else ReadIndex.of(reads)
    return index.conflict(path)


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
    reads: Sequence[Read] | ReadIndex = (),
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
    reads : sequence of Read, or ReadIndex
        What the run reads (files, folders, glob patterns); a :class:`ReadIndex` when
        many paths are checked against the same reads.
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
