"""Row-wise releases (PRAM): charged once per run, and only inside a dpframe runner.

A row-wise mechanism randomizes each record independently, so polars may run it
morsel by morsel (``map_batches(..., is_elementwise=True)``): that is what lets it
stream over larger-than-memory Parquet. But then no single call sees the whole
column, and nothing in polars tells a Python function where one query ends and the
next begins. A plain ``lf.collect()`` run twice would draw two independent
randomizations of the same records -- two releases -- and a function that charged on
its first call could not tell the second run from more morsels of the first.

So a row-wise release only runs inside a *run* opened by one of dpframe's runners:

* :func:`collect` -- ``dpframe.collect(lf)``, also ``lf.dpf.collect()``;
* :func:`sink_parquet` -- streams to Parquet (atomically, ledger in the metadata),
  also ``lf.dpf.sink_parquet(path)``;
* ``df.dpf.with_columns(...)`` / ``df.dpf.select(...)`` for eager DataFrames.

Each runner executes one polars query (after a dry pass that only checks the data, see
:func:`collect`'s ``validate``). Inside it, the first evaluation of a
release charges its accountant (before any randomization: a
:class:`~dpframe.errors.BudgetExceededError` leaves nothing drawn) and every later
morsel of that run is covered by the same charge. Running the query again is a new
release and is charged again -- it never yields a fresh randomization for free.
Evaluated outside a runner (plain ``collect()``, an eager ``with_columns``), a
row-wise release raises :class:`~dpframe.errors.ReleaseNotArmedError` and draws
nothing.

Runs are serialised: one dpframe runner at a time per process (a second waits).
Limits, stated plainly:

* the same expression object used twice in one query (``select(e.alias("a"),
  e.alias("b"))``) is evaluated twice under one charge: build one expression per
  output column;
* a *plain* ``collect()`` of a query holding the same expression, started in another
  thread while a runner is running, would be counted as part of that run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from dpframe.accountant import LedgerEntry
from dpframe.errors import InvalidParameterError, ReleaseNotArmedError

__all__ = ["Run", "collect", "current_run", "last_run", "sink_parquet"]

_RUN_LOCK = threading.Lock()
_STATE_LOCK = threading.Lock()
_CURRENT: Run | None = None
_LAST: Run | None = None


@dataclass
class Run:
    """One execution of a polars query by a dpframe runner."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: ``"validate"``: a dry pass that only checks the data (nothing charged or drawn)
    validating: bool = False
    entries: list[LedgerEntry] = field(default_factory=list)
    #: the PRAM design each released column used (``None`` for a user matrix)
    designs: dict[str, Any] = field(default_factory=dict)
    #: the same, JSON-ready (categories, q, prior), as written to Parquet provenance
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    _charged: dict[str, LedgerEntry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge_once(self, release_id: str, charge: Any) -> LedgerEntry:
        """Call ``charge()`` the first time ``release_id`` runs in this run, else reuse."""
        with self._lock:
            entry = self._charged.get(release_id)
            if entry is None:
                entry = charge()
                self._charged[release_id] = entry
                self.entries.append(entry)
            return entry


def current_run() -> Run | None:
    """The run in progress, if a dpframe runner is executing a query."""
    with _STATE_LOCK:
        return _CURRENT


def last_run() -> Run | None:
    """The last finished run (its ledger ``entries`` and PRAM ``designs``), if any.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     _ = dpframe.collect(pl.LazyFrame({"c": [1, 2]}).select(
    ...         pl.col("c").dp.pram(1.0, categories=[1, 2, 3])))
    >>> run = dpframe.last_run()
    >>> [e.mechanism for e in run.entries], float(round(run.designs["c"].q[0], 3))
    (['pram'], 0.576)
    """
    with _STATE_LOCK:
        return _LAST


def require_run(what: str) -> Run:
    """The run in progress, or :class:`ReleaseNotArmedError` explaining the runners."""
    run = current_run()
    if run is None:
        raise ReleaseNotArmedError(
            f"{what} is a row-wise release: it only runs inside a dpframe runner, which "
            "charges it once per run. Use dpframe.collect(lf) or lf.dpf.collect(), "
            "dpframe.sink_parquet(lf, path) or lf.dpf.sink_parquet(path), or "
            "df.dpf.with_columns(...) for an eager DataFrame -- not a plain collect() "
            "or DataFrame.with_columns(). Nothing was charged or drawn."
        )
    return run


_LOCAL = threading.local()


@contextlib.contextmanager
def _running(validating: bool = False) -> Iterator[Run]:
    global _CURRENT, _LAST
    if getattr(_LOCAL, "active", False):
        raise InvalidParameterError(
            "dpframe runners cannot be nested: finish one collect/sink_parquet first"
        )
    with _RUN_LOCK:
        run = Run(validating=validating)
        with _STATE_LOCK:
            _CURRENT = run
        _LOCAL.active = True
        try:
            yield run
        finally:
            with _STATE_LOCK:
                _CURRENT = None
                _LAST = run
            _LOCAL.active = False


def _check_lazy(frame: Any, name: str = "frame") -> pl.LazyFrame:
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    if not isinstance(frame, pl.LazyFrame):
        raise InvalidParameterError(
            f"{name} must be a polars LazyFrame (or DataFrame), got {type(frame).__name__}"
        )
    return frame


def _validate(lf: pl.LazyFrame) -> None:
    """The dry pass: run the query with row-wise releases returning their input.

    Every column of the result is reduced to its null count, so polars must evaluate
    every release that reaches the output, on the streaming engine, in bounded memory.
    A null or an unknown category anywhere raises here, before anything is charged.
    """
    with _running(validating=True):
        lf.select(pl.all().null_count()).collect(engine="streaming")


def collect(
    frame: pl.LazyFrame | pl.DataFrame, *, validate: bool = True, **collect_kwargs: Any
) -> pl.DataFrame:
    """Run a query holding row-wise releases (``.dp.pram``) and return the result.

    Each row-wise release in the query is charged once, on its first evaluation and
    before it draws anything; calling :func:`collect` again is a new release, charged
    again.

    Parameters
    ----------
    frame : polars.LazyFrame or polars.DataFrame
        The query (a DataFrame is run as ``frame.lazy()``).
    validate : bool, default True
        First run a dry pass that only checks the data (nulls, unknown categories)
        without charging or drawing anything. Without it, a bad value in a later
        streaming morsel fails the run *after* the charge (randomization was drawn,
        so the budget stays spent). It costs one extra read of the input.
    **collect_kwargs
        Passed to :meth:`polars.LazyFrame.collect` (e.g. ``engine="streaming"``).

    Returns
    -------
    polars.DataFrame

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.LazyFrame({"region": ["N", "S", "S", "E"]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     q = people.with_columns(pl.col("region").dp.pram(1.0, categories=["N", "S", "E"]))
    ...     out = dpframe.collect(q)
    >>> out.height, acct.spent.epsilon
    (4, 1.0)
    """
    lf = _check_lazy(frame)
    if validate:
        _validate(lf)
    with _running():
        return lf.collect(**collect_kwargs)


def sink_parquet(
    frame: pl.LazyFrame | pl.DataFrame,
    path: str | os.PathLike[str],
    *,
    spec: dict[str, Any] | None = None,
    compression: str = "zstd",
    validate: bool = True,
) -> Path:
    """Stream a query holding row-wise releases to Parquet, atomically, with provenance.

    The query runs once on the streaming engine (memory stays bounded on
    larger-than-memory input). The ledger entries charged by this run are written in
    the file's metadata (key ``"dpframe"``, see :func:`dpframe.read_provenance`). The
    data goes to a temporary file in the target folder, renamed over ``path`` only
    once complete: a failure leaves no file (budget charged before the failure stays
    spent, since randomization was drawn).

    Parameters
    ----------
    frame : polars.LazyFrame or polars.DataFrame
    path : path-like
        Destination file; its folder must exist.
    spec : dict, optional
        JSON-serialisable description stored alongside the ledger.
    compression : str, default "zstd"
    validate : bool, default True
        Dry pass first, as in :func:`collect`.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import polars as pl, dpframe, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "released.parquet")
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     lf = pl.LazyFrame({"x": [0, 1, 2, 1]})
    ...     q = lf.select(pl.col("x").dp.pram(0.5, categories=[0, 1, 2]))
    ...     _ = dpframe.sink_parquet(q, out)
    >>> dpframe.read_provenance(out).epsilon
    0.5
    """

    from dpframe.io import METADATA_KEY, _atomic_file, _output_path, _provenance_json

    lf = _check_lazy(frame)
    target = _output_path(path, spec)
    if validate:
        _validate(lf)
    with _atomic_file(target) as tmp, _running() as run:

        def metadata(_context: Any) -> dict[str, str]:
            # polars calls this once the data is written: the run's charges are known
            neighbours = {e.details.get("neighbours") for e in run.entries} - {None}
            nb = neighbours.pop() if len(neighbours) == 1 else None
            doc = _provenance_json(run.entries, nb, spec, designs=run.records)
            return {METADATA_KEY: doc}

        lf.sink_parquet(tmp, metadata=metadata, compression=compression)
    return target
