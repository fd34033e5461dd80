"""Publishing whole runs: a reader of an output folder sees one run, never a mix of two.

An output folder ``out`` holds each published run in a folder of its own and a link
that names the published one::

    out/.runs/<run>/          one whole run: <name>.parquet (Spark microdata: a folder),
                              <name>.suite.json, <name>.validation.json, data_docs/,
                              manifest.json
    out/current -> .runs/<run>
    out/<entry> -> current/<entry>      for every entry of the run

A job stages its files in ``out/.staging-<run>/`` (claimed with an ``.owner`` file naming
its process and host). :func:`publish` then

1. renames the staging folder to ``.runs/<run>`` (still owned), with its ``manifest.json``;
2. points ``current`` at it: a new link renamed onto the old one (``os.replace``), the one
   atomic commit point -- before it the previous run is published, after it this one;
3. makes every entry's top-level name a link ``-> current/<entry>`` (replacing only what
   dpframe created there: its own link, or a table or suite an older dpframe published
   there; any other file or folder of that name is left alone, with a warning), so every
   top-level name switches with ``current``, at one instant;
4. removes top-level links into ``current/`` whose entry the run no longer has;
5. removes the run's ``.owner``;
6. deletes the run folders other than the current one and its ``previous`` (a reader
   still reading the previous run keeps its files).

A job killed anywhere in there leaves the previous run published (killed before 2) or
this one (after 2). An interrupt (SIGINT, SIGTERM) arriving during steps 1 to 5 takes
effect once they are done (:func:`dpframe.core.interrupts.deferred`): the job stops with
its run published and linked, never with a run half-moved. :func:`repair`, at the start
of every run, finishes what a killed job left: it removes the staging and run folders of
dead jobs, completes steps 3 to 6 for the current run and puts back a folder an older
dpframe's publish had moved aside.
Publishing and repairing hold a lock on the output folder (``flock``, released by the
system if the process dies), so two jobs never interleave these steps.

Before anything is charged, a job calls :func:`check_output_folder`: no path the run
writes may resolve to a file the run reads or to its ledger (the output guard,
:func:`dpframe.core.outputs.guard_output`), and no top-level name the run publishes may
exist unless dpframe created it (:func:`created_by_dpframe`).

Readers that read more than one file use :func:`published_run`, which resolves
``current`` once and reads the run's manifest.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import re
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpframe.core.budget import exact_sum
from dpframe.core.files import atomic_file, atomic_write_text
from dpframe.core.interrupts import deferred
from dpframe.core.outputs import Read, ReadIndex, guard_output
from dpframe.core.processes import is_gone, this_process
from dpframe.errors import DPFrameError, InvalidParameterError
from dpframe.polars.io import written_by_dpframe

try:  # POSIX; elsewhere publishes of one folder are not serialised
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CURRENT",
    "MANIFEST",
    "OWNER",
    "RUNS",
    "PublishedRun",
    "abandoned",
    "check_output_folder",
    "claim",
    "copied_run",
    "created_by_dpframe",
    "ledger_problems",
    "new_staging",
    "publish",
    "published_run",
    "published_runs",
    "record_entry",
    "refresh_copy",
    "repair",
    "run_folder",
    "unchecked_tables",
]

#: the folder of an output folder that holds the runs
RUNS = ".runs"
#: the link naming the published run
CURRENT = "current"
#: the file in a run folder that lists what the run holds
MANIFEST = "manifest.json"
#: the file in a staging or run folder that names the process that owns it
OWNER = ".owner"
FORMAT = "dpframe-run"
VERSION = 1

_LINK_TMP = ".link-"  # a link made under this name, then renamed into place
_OLD = ".old-"  # a folder moved aside to put a link in its place
#: the format of a suite or validation result dpframe writes (dpframe.jobs.checks)
_CHECK_FORMAT = "dpframe.check/1"
_CHECK_SUFFIXES = (".suite.json", ".validation.json")
_LOCK_TIMEOUT = 120.0


# -- owners ----------------------------------------------------------------------------------


#: seconds after which an empty folder with no owner is a killed job's (not one claiming)
UNCLAIMED_AFTER = 60.0


def claim(folder: Path) -> None:
    """Mark ``folder`` as this process's, so a later run can tell if it was abandoned."""
    (folder / OWNER).write_text(json.dumps(this_process()))


def new_staging(out: Path, run: str) -> Path:
    """``out/.staging-<run>``, created already claimed.

    It is made and claimed under another name, then renamed: another job's
    :func:`repair` never sees it unclaimed (an empty, unclaimed staging folder is taken
    for one a killed job left, and removed -- under a live job, before this).
    """
    making = out / f".claiming-{run}"
    making.mkdir()
    claim(making)
    staging = out / f".staging-{run}"
    os.rename(making, staging)
    return staging


def abandoned(folder: Path) -> bool:
    """A staging or run folder whose job certainly died (:func:`dpframe.core.processes.is_gone`:
    the same rule that gives back a dead job's reservation)."""
    try:
        owner = json.loads((folder / OWNER).read_text())
    except FileNotFoundError:  # killed between creating and claiming it (or claiming now)
        try:
            old = time.time() - folder.stat().st_mtime > UNCLAIMED_AFTER
            # a staging folder is renamed into place claimed (new_staging): one with no
            # owner was made again by a write that outlived its stopped job (Spark's
            # executors, writing on after an interrupt removed the folder)
            made_again = folder.name.startswith(".staging-")
            return old and (made_again or not any(folder.iterdir()))
        except FileNotFoundError:
            return False
    except (OSError, ValueError):  # unreadable: not ours to judge
        return False
    return is_gone(owner)


# -- the lock --------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold the publishing lock of ``out`` (a ``flock`` on the folder itself, or on
    ``.runs/.lock`` where folders cannot be locked); the system drops it if we die."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # can this folder be locked?
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            pass  # held by another job: it can
        except OSError as exc:  # e.g. some network file systems
            if exc.errno not in (errno.EBADF, errno.EINVAL, errno.ENOLCK, errno.EOPNOTSUPP):
                raise
            os.close(fd)
            fd = -1
            (out / RUNS).mkdir(exist_ok=True)
            fd = os.open(out / RUNS / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + _LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise DPFrameError(
                        f"another job has been publishing into {out} for over "
                        f"{_LOCK_TIMEOUT:g} s; nothing was published by this one"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # releases the lock


# -- the layout ------------------------------------------------------------------------------


def current_run(out: Path) -> str | None:
    """The id of the run ``out/current`` names, or None if nothing was published yet."""
    link = out / CURRENT
    if not link.is_symlink():
        if link.exists():
            raise DPFrameError(
                f"{link} is not dpframe's link to the published run (a file or folder of that "
                "name is in the output folder): move it, or choose another output.folder"
            )
        return None
    text = os.readlink(link)
    head, _, run = text.partition("/")
    if head != RUNS or not run or "/" in run:
        raise DPFrameError(
            f"{link} points to {text}, not to a run under {RUNS}/: it is not dpframe's link; "
            "move it, or choose another output.folder"
        )
    return run


def _read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise DPFrameError(f"{path} cannot be read: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DPFrameError(f"{path} is not a dpframe run manifest (format {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise DPFrameError(
            f"{path} has manifest version {doc.get('version')!r}; this dpframe reads {VERSION}"
        )
    files, releases = doc.get("files"), doc.get("releases")
    names = [*files] if isinstance(files, list) else None
    if isinstance(releases, dict):
        names = None if names is None else [*names, *releases, *releases.values()]
    else:
        names = None
    bad = None if names is None else [n for n in names if not _plain_name(n)]
    if names is None or bad:
        what = "its files and releases are not lists of names" if names is None else bad
        raise DPFrameError(
            f"{path} is not a dpframe run manifest: {what} (every entry a name in the run's "
            "folder, no path)"
        )
    return doc


def _plain_name(name: Any) -> bool:
    """Whether ``name`` names an entry of a run's folder: one path component, no link out
    of it (a manifest's ``files`` and ``releases``: a crafted one must not reach a path
    outside the run or its output folder)."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", CURRENT, RUNS, OWNER, MANIFEST)
        and not any(c in name for c in ("/", "\\", "\0"))
    )


def _point(link: Path, text: str) -> None:
    """Make ``link`` a symbolic link to ``text``, atomically (a new link renamed onto it)."""
    tmp = link.parent / f"{_LINK_TMP}{uuid.uuid4().hex[:12]}"
    os.symlink(text, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def created_by_dpframe(out: Path, name: str) -> bool:
    """Whether the top-level ``out/name`` is dpframe's to replace.

    dpframe's are its link ``-> current/<name>``, and what an older dpframe published
    there before runs had folders of their own: a Parquet file (or Spark folder) carrying
    dpframe's provenance, and a ``.suite.json`` or ``.validation.json`` in dpframe's check
    format naming that release. Anything else -- a file or folder of the user's, a link
    elsewhere -- is not.
    """
    target = out / name
    if target.is_symlink():
        return os.readlink(target) == f"{CURRENT}/{name}"
    if name.endswith(".parquet"):
        return written_by_dpframe(target)
    suffix = next((s for s in _CHECK_SUFFIXES if name.endswith(s)), None)
    if suffix is None or not target.is_file():
        return False
    try:
        doc = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(doc, dict)
        and doc.get("format") == _CHECK_FORMAT
        and doc.get("release") == name.removesuffix(suffix)
    )


def check_output_folder(
    out: Path,
    names: Sequence[str],
    *,
    run: str,
    reads: Sequence[Read] = (),
    ledgers: Sequence[str | os.PathLike[str]] = (),
) -> None:
    """Refuse, before anything is charged, a run whose outputs would replace what it must not.

    Every path the run ``run`` writes in ``out`` -- each of ``names`` at the top level,
    in its staging folder and in ``.runs/<run>/``, and ``current`` -- must not resolve to
    a file the run reads (``reads``: the input, its glob or folder, the margins files) or
    to a ledger (:func:`dpframe.core.outputs.guard_output`); and no top-level name may
    exist unless dpframe created it (:func:`created_by_dpframe`).

    Raises
    ------
    InvalidParameterError
        Naming ``output.folder``, the names, and the fix.
    """
    index = ReadIndex.of(reads)  # resolved once: an input may be thousands of files
    for name in (*names, CURRENT):
        for path in (out / name, out / f".staging-{run}" / name, out / RUNS / run / name):
            guard_output(
                path, argument="output.folder", reads=index, ledgers=ledgers, replace=False
            )
    foreign = [n for n in names if os.path.lexists(out / n) and not created_by_dpframe(out, n)]
    runs = out / RUNS
    if runs.is_symlink() or (os.path.lexists(runs) and not runs.is_dir()):
        foreign.append(RUNS)  # dpframe makes it a folder, and empties it of older runs
    if foreign:
        raise InvalidParameterError(
            f"output.folder: {out} already holds {', '.join(foreign)}, which dpframe did not "
            f"publish (not its link into {CURRENT}/, nor a table or suite an older dpframe "
            "wrote); dpframe never replaces a file or folder it did not create: move them, "
            "rename the release, or choose another output.folder. Nothing was written or "
            "charged."
        )


def _link_entries(out: Path, names: Sequence[str]) -> None:
    """Step 3: every entry's top-level name, a link ``-> current/<entry>``; a name
    dpframe did not create is left alone (checked before the charge; this is a file
    that appeared since)."""
    for name in names:
        target = out / name
        want = f"{CURRENT}/{name}"
        if target.is_symlink() and os.readlink(target) == want:
            continue
        if os.path.lexists(target) and not created_by_dpframe(out, name):
            warnings.warn(
                f"{target} is not dpframe's: left alone (the run's {name} is "
                f"{out / CURRENT / name}); move it and run again to link it",
                stacklevel=3,
            )
            continue
        old = None
        if target.is_dir() and not target.is_symlink():  # published by an older dpframe
            old = out / f"{_OLD}{name}-{uuid.uuid4().hex[:8]}"
            os.replace(target, old)
        _point(target, want)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _drop_stale_links(out: Path) -> None:
    """Step 4: top-level links into ``current/`` whose entry the run does not have."""
    for p in out.iterdir():
        if p.is_symlink() and os.readlink(p).startswith(f"{CURRENT}/") and not os.path.exists(p):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def _prune(out: Path) -> None:
    """Step 6: delete run folders other than the current one and its previous, and those
    of dead jobs (never a live job's)."""
    runs = out / RUNS
    if not runs.is_dir() or runs.is_symlink():  # a link: not dpframe's folder to empty
        return
    current = current_run(out)
    keep = {current}
    if current is not None:
        with contextlib.suppress(FileNotFoundError, DPFrameError):
            keep.add(_read_manifest(runs / current).get("previous"))
    for folder in runs.iterdir():
        if not folder.is_dir() or folder.is_symlink() or folder.name in keep:
            continue
        owned = (folder / OWNER).exists()
        if not owned or abandoned(folder):  # an older run, or a dead job's unpublished one
            shutil.rmtree(folder, ignore_errors=True)


def copied_run(out: Path) -> Path | None:
    """``out/current`` if ``out`` is a dereferenced copy of an output folder (``cp -rL``,
    rsync without ``-l``, an object store): a real folder holding a dpframe run manifest
    where dpframe keeps its link. None otherwise. Only readers accept it: nothing is
    ever published into a copy."""
    current = out / CURRENT
    if current.is_symlink() or not (current / MANIFEST).is_file():
        return None
    try:
        _read_manifest(current)  # a manifest that is not a run's raises: said as it is
    except FileNotFoundError:
        return None
    return Path(os.path.realpath(current))


def run_folder(out: Path) -> Path:
    """The folder holding the published run of ``out``, resolved once: ``out/current``'s
    target (or, in a dereferenced copy, the folder ``out/current``), or ``out`` itself if
    an older dpframe published there (no ``current``)."""
    copied = copied_run(out)
    if copied is not None:
        return copied
    if current_run(out) is None:
        return out
    return Path(os.path.realpath(out / CURRENT))


def refresh_copy(out: Path, folder: Path) -> None:
    """In a dereferenced copy, replace each top-level copy of an entry of the run
    ``folder`` (``out/current``) with the entry as it is now (after a check rewrote its
    suite, result or report), so the copy reads the same at both names."""
    if copied_run(out) != folder:
        return
    manifest = _read_manifest(folder)  # plain names: entries of the run's folder
    # every release's table too, listed in "files" or not: the copy's top-level table is
    # then the one checked
    for name in sorted({*manifest["files"], *manifest["releases"].values()}):
        top, entry = out / name, folder / name
        if top.is_symlink() or entry.is_symlink() or not top.exists() or not entry.exists():
            continue  # a link: not what a dereferenced copy holds, and never written through
        if entry.is_dir():
            tmp = out / f"{_OLD}{uuid.uuid4().hex[:12]}"
            shutil.copytree(entry, tmp, symlinks=True)  # a link is copied, never read through
            shutil.rmtree(top)
            os.replace(tmp, top)
        else:
            with atomic_file(top) as tmp:
                shutil.copyfile(entry, tmp)


def unchecked_tables(out: Path, folder: Path) -> list[str]:
    """The tables a check of the run ``folder`` (published in ``out``) would not read,
    one line each: a table in the run, or at the top level of a dereferenced copy, that
    the run's manifest names as no release's. ``[]``: none."""
    try:
        named = set(_read_manifest(folder)["releases"].values())
    except FileNotFoundError:  # an older dpframe's layout: no manifest, no copies
        return []
    places = [folder, *([out] if copied_run(out) == folder else [])]
    return [
        f"{p} is a table that no release of the run's manifest names"
        for place in places
        for p in sorted(place.iterdir())
        if p.name.endswith(".parquet") and p.name not in named
    ]


# -- publish and repair ----------------------------------------------------------------------


def publish(
    staging: Path,
    out: Path,
    *,
    run: str,
    releases: dict[str, str],
    entries: Sequence[Any] = (),
    anchor: dict[str, Any] | None = None,
) -> Path:
    """Publish the staged run ``run`` as a whole (steps 1 to 6 of the module docstring).

    ``releases`` maps each release name to its file in the run; ``entries`` are the
    run's ledger entries and ``anchor`` the ledger's creation id, entry count and head
    hash once they were charged (:meth:`dpframe.Accountant.anchor`), both recorded in the
    manifest: every later job in ``out`` checks that its ledger still holds them
    (:func:`ledger_problems`). Returns the run's folder.
    """
    runs = out / RUNS
    folder = runs / run
    with _locked(out):
        previous = current_run(out)
        files = sorted(p.name for p in staging.iterdir() if p.name not in (OWNER, MANIFEST))
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "run": run,
            "published": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "previous": previous,
            "files": files,
            "releases": dict(sorted(releases.items())),
            "ledger": {
                "entries": [e.id for e in entries],
                "epsilon": float(exact_sum(e.epsilon for e in entries)),
                "delta": float(exact_sum(e.delta for e in entries)),
                **(anchor or {}),
            },
        }
        with deferred():  # SIGINT, SIGTERM: after step 5 (the run whole and linked)
            try:
                atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=2) + "\n")
                runs.mkdir(exist_ok=True)
                os.replace(staging, folder)  # 1. the whole run, still owned
                _point(out / CURRENT, f"{RUNS}/{run}")  # 2. the commit
            except OSError as exc:
                if current_run(out) != run:
                    shutil.rmtree(folder, ignore_errors=True)
                raise DPFrameError(
                    f"publishing into {out} failed ({exc}); nothing of this run was published: "
                    f"{out / CURRENT} still names run {previous or '(none)'}"
                ) from exc
            try:
                _link_entries(out, files)  # 3.
                _drop_stale_links(out)  # 4.
                (folder / OWNER).unlink(missing_ok=True)  # 5.
            except OSError as exc:  # published already: the next run finishes this
                _tidying_failed(out, run, exc)
        try:
            _prune(out)  # 6.
        except OSError as exc:
            _tidying_failed(out, run, exc)
    return folder


def _tidying_failed(out: Path, run: str, exc: OSError) -> None:
    warnings.warn(
        f"run {run} is published ({out / CURRENT}), but tidying {out} failed ({exc}); "
        "the next run in this folder finishes it",
        stacklevel=3,
    )


def repair(out: Path) -> None:
    """Finish what killed jobs left in ``out`` (run at the start of every job).

    Removes the staging folders of dead jobs (charged, unchecked tables: never
    published) and their unpublished run folders; completes the publish of the current
    run (its top-level links, stale links, its ``.owner``, older run folders); puts back
    a folder an older dpframe's publish had moved aside. A live job's folders, the
    current run and its previous one are never removed.

    Raises
    ------
    DPFrameError
        If ``out/current`` is not dpframe's link (found before anything is charged).
    """
    with _locked(out):
        current = current_run(out)
        for staging in [*out.glob(".staging-*"), *out.glob(".claiming-*")]:
            if staging.is_dir() and not staging.is_symlink() and abandoned(staging):
                shutil.rmtree(staging, ignore_errors=True)
        for tmp in out.glob(f"{_LINK_TMP}*"):
            if tmp.is_symlink():  # a link made but not yet renamed into place
                tmp.unlink(missing_ok=True)
        if current is not None:
            folder = out / RUNS / current
            try:
                files = _read_manifest(folder)["files"]
            except FileNotFoundError:
                files = None  # the current run is gone: the next publish replaces it
            if files is not None:
                _link_entries(out, files)
                _drop_stale_links(out)
                (folder / OWNER).unlink(missing_ok=True)
        for old in out.glob(f"{_OLD}*"):
            moved = re.fullmatch(rf"{re.escape(_OLD)}(.+)-[0-9a-f]{{8}}", old.name)
            if moved is None:
                continue  # not a name dpframe moved aside: not ours to touch
            name = moved.group(1)
            if not os.path.lexists(out / name):
                os.replace(old, out / name)  # an older publish was cut between its moves
            else:
                shutil.rmtree(old, ignore_errors=True)
        _prune(out)


def record_entry(out: Path, folder: Path, name: str) -> None:
    """Add ``name`` (written into the run ``folder`` after it was published: ``dpframe
    check --data-docs``) to the run's manifest, and link it if the run is current."""
    with _locked(out):
        try:
            manifest = _read_manifest(folder)
        except FileNotFoundError:
            return  # an older dpframe's layout: no manifest, no links
        if name not in manifest["files"]:
            manifest["files"] = sorted([*manifest["files"], name])
            atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        if copied_run(out) == folder:  # a copy has no links: refresh its top-level copy
            refresh_copy(out, folder)
        elif current_run(out) == folder.name:
            _link_entries(out, [name])


# -- readers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishedRun:
    """One published run of an output folder, resolved once: its files all come from
    that run, whatever is published meanwhile.

    ``run`` is the run id, ``folder`` its folder (an absolute path, no links), and
    ``manifest`` the run's ``manifest.json``.
    """

    run: str
    folder: Path
    manifest: dict[str, Any]

    @property
    def releases(self) -> dict[str, str]:
        """Release name -> file name in the run."""
        return dict(self.manifest["releases"])

    @property
    def previous(self) -> str | None:
        """The run that was published before this one."""
        return self.manifest.get("previous")

    @property
    def files(self) -> list[Path]:
        """Every entry of the run (tables, suites, validation results, Data Docs)."""
        return [self.folder / f for f in self.manifest["files"]]

    def path(self, release: str) -> Path:
        """The released table of ``release`` in this run."""
        try:
            return self.folder / self.manifest["releases"][release]
        except KeyError:
            raise DPFrameError(
                f"run {self.run} has no release {release!r}; it has "
                f"{sorted(self.manifest['releases'])}"
            ) from None


def published_run(folder: str | os.PathLike[str]) -> PublishedRun:
    """The run published in the output folder ``folder`` (or ``folder`` itself, if it is a
    run's folder holding a ``manifest.json``).

    ``folder/current`` is resolved once, so every path of the result is in one run even
    if another job publishes while they are read (the previous run is kept until the
    next publish after that one).

    Examples
    --------
    >>> from dpframe.jobs import published_run
    >>> run = published_run("released")                   # doctest: +SKIP
    >>> tables = {name: run.path(name) for name in run.releases}   # doctest: +SKIP
    """
    out = Path(folder)
    for _ in range(5):
        if (copied := copied_run(out)) is not None:  # a dereferenced copy: read, not written
            resolved = copied
        elif current_run(out) is not None:
            resolved = Path(os.path.realpath(out / CURRENT))
        elif (out / MANIFEST).is_file():
            resolved = Path(os.path.realpath(out))
        else:
            raise DPFrameError(
                f"{out} holds no published run (no {CURRENT} link, no {MANIFEST}): run "
                "`dpframe release` first"
            )
        try:
            manifest = _read_manifest(resolved)
        except FileNotFoundError:
            continue  # two newer runs were published meanwhile: resolve current again
        return PublishedRun(str(manifest["run"]), resolved, manifest)
    raise DPFrameError(f"{out}: the published run kept changing while it was read; try again")


def published_runs(folder: str | os.PathLike[str]) -> list[PublishedRun]:
    """Every run kept in the output folder ``folder`` (the current one, its previous one,
    and any other under ``.runs/``), oldest first; ``[]`` if nothing was published.

    Raises
    ------
    DPFrameError
        If a run's manifest cannot be read (a run's record is never skipped).
    """
    runs = Path(folder) / RUNS
    if not runs.is_dir():
        return []
    found = []
    for sub in sorted(runs.iterdir()):
        if not sub.is_dir() or sub.is_symlink():
            continue
        try:
            manifest = _read_manifest(sub)
        except FileNotFoundError:
            continue  # being removed by a publish's tidying
        found.append(PublishedRun(str(manifest["run"]), Path(os.path.realpath(sub)), manifest))
    return sorted(found, key=lambda r: (str(r.manifest.get("published", "")), r.run))


def ledger_problems(runs: Sequence[PublishedRun], accountant: Any) -> list[str]:
    """What ``accountant``'s ledger lacks of what ``runs`` were charged, one line each.

    For each run: its manifest's anchor (the ledger's creation id, entry count and head
    hash when it was published) must be one of this ledger's states, and every ledger
    entry it lists must be in the ledger. ``[]``: the ledger holds every run.
    """
    kept = {e.id for e in accountant.ledger}
    anchored = [r for r in runs if isinstance(r.manifest.get("ledger"), dict)]
    anchors = [r.manifest["ledger"] for r in anchored if "creation_id" in r.manifest["ledger"]]
    problems = iter(accountant.anchor_problems(anchors))
    out = []
    for r in anchored:
        record = r.manifest["ledger"]
        what = f"run {r.run} (published {r.manifest.get('published', '?')})"
        if "creation_id" in record and (problem := next(problems)) is not None:
            out.append(f"{what}: {problem}")
        entries = record.get("entries")
        for entry in entries if isinstance(entries, list) else []:
            if entry not in kept:
                out.append(f"{what}: the ledger lacks its entry {entry!r}")
    return out
