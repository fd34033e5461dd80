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
The dry pass also refuses a plan that uses one release at two places (a ``concat`` of two
queries holding the same expression, a self-join, ``select(e.alias("a"), e.alias("b"))``
with common-subexpression elimination off): each place would randomize the same records
again under one charge. Limits, stated plainly:

* with ``validate=False`` there is no dry pass, so neither check runs: use it only for
  queries built with one expression per use;
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

from dpframe.core.accountant import LedgerEntry
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
    #: how many times each row-wise release was called in this run (per morsel)
    calls: dict[str, int] = field(default_factory=dict)
    _charged: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def called(self, release_id: str) -> int:
        """Count a call of ``release_id`` in this run; return how many there were."""
        with self._lock:
            self.calls[release_id] = self.calls.get(release_id, 0) + 1
            return self.calls[release_id]

    def charge_once(self, release_id: str, charge: Any) -> list[LedgerEntry]:
        """Call ``charge()`` the first time ``release_id`` runs in this run, else reuse.

        ``charge()`` returns the ledger entry (or entries) it made; all of them go into
        the run's ``entries`` (and so into the Parquet provenance).
        """
        with self._lock:
            entries = self._charged.get(release_id)
            if entries is None:
                made = charge()
                entries = [made] if isinstance(made, LedgerEntry) else list(made)
                self._charged[release_id] = entries
                self.entries.extend(entries)
            return entries


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


def _thread_last_run() -> Run:
    """The run this thread's last :func:`sink_parquet` made (immune to other threads)."""
    return _LOCAL.last


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


def _validate(lf: pl.LazyFrame, optimizations: Any = None) -> None:
    """The dry pass: run the query with row-wise releases returning their input.

    Every column of the result is reduced to its null count, so polars must evaluate
    every release that reaches the output, on the streaming engine, in bounded memory.
    A null or an unknown category anywhere raises here, before anything is charged.

    Then the query plan (as polars will run it, ``optimizations`` as the real run's) must
    hold no more Python functions than the distinct releases the dry pass met: one
    ``.dp.pram`` expression used at two places of a plan (``concat`` of two queries that
    both use it, a self-join) would randomize the same records twice under one charge.
    """
    with _running(validating=True) as run:
        lf.select(pl.all().null_count()).collect(engine="streaming")
    plan = lf.explain() if optimizations is None else lf.explain(optimizations=optimizations)
    udfs = plan.count("python_udf(")
    if udfs > len(run.calls):
        raise InvalidParameterError(
            f"the query's plan runs {udfs} Python functions but holds {len(run.calls)} "
            "distinct .dp.pram release(s): a .dp.pram expression is used at more than one "
            "place (each place would randomize the same records again under one charge), "
            "or the query holds another Python function. Build one .dp.pram expression per "
            "use, and apply other Python functions in a separate query. Nothing was charged."
        )


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
        _validate(lf, collect_kwargs.get("optimizations"))
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

    from dpframe.core.files import atomic_file
    from dpframe.io import METADATA_KEY, _output_path, _provenance_json

    lf = _check_lazy(frame)
    target = _output_path(path, spec)
    if validate:
        _validate(lf)
    with atomic_file(target) as tmp, _running() as run:

        def metadata(_context: Any) -> dict[str, str]:
            # polars calls this once the data is written: the run's charges are known
            neighbours = {e.details.get("neighbours") for e in run.entries} - {None}
            nb = neighbours.pop() if len(neighbours) == 1 else None
            doc = _provenance_json(run.entries, nb, spec, designs=run.records)
            return {METADATA_KEY: doc}

        lf.sink_parquet(tmp, metadata=metadata, compression=compression)
    _LOCAL.last = run  # this thread's run (dpframe.last_run() is the process's)
    return target
