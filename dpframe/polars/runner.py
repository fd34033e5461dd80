"""The runner of queries that hold ``.dp`` expressions: ``dpframe.collect`` / ``sink_parquet``.

A row-wise release (``.dp.pram``) randomizes each record independently, so polars may
run it morsel by morsel -- that is what lets it stream over larger-than-memory Parquet --
but then no single call sees the whole column, and nothing in polars tells a Python
function where one query ends and the next begins. So a query holding ``.dp``
expressions runs through a runner, in four steps:

1. **inspect** the query plan (no data read). Every Python object in it must be one of
   dpframe's releases, each at one place: an opaque Python step (``LazyFrame.map_batches``,
   a ``map_batches``/``map_elements`` of another function, a Python scan) could evaluate a
   release again, or out of sight; one release at two places (a ``concat`` of two queries
   holding it, a self-join) would randomize the same records twice under one charge.
   Then the plan's **lineage** (:mod:`dpframe.polars.lineage`) decides what may leave:
   only a release's own output (selected or renamed, nothing computed from it) or a
   column declared ``public=[...]``; a release's input computed row by row from each
   record's own values; no rows selected, joined, grouped or ordered by a column that is
   not published. Decided from the plan's structure, never from values.
2. **dry pass**: the query runs once with every release returning a data-free stand-in
   (nothing charged, nothing drawn): each release checks its data (nulls, categories,
   values) and records its plan and exact inputs.

   The query that runs (here and in step 4) is **the plan that was checked**: polars
   rebuilds it from the very bytes the inspection read (:class:`Prepared` ``.plan``), in
   which each release is a handle only this run resolves -- to dpframe's own wrapper of a
   copy of the release made at inspection, bound to this run -- and each
   :func:`~dpframe.polars.memory.scan_frame` source a copy of its frame taken then. The
   caller's query and expression objects never take part in a run: another thread
   evaluating the same expression meanwhile gets what it would get outside any run (a
   row-wise release refuses), a Python object wrapping a release never runs, and a
   change to any of them after the inspection reaches nothing.
3. **charge**: the executor charges every release of the query at once, atomically
   (:func:`dpframe.core.executor.execute`), and arms them.
4. **real pass**: the releases draw under that charge -- a column release returns its
   noisy values, a row-wise release randomizes each morsel with a freshly keyed
   generator, checking each morsel again (categories, nulls) and never more records
   than the dry pass saw; a failure there publishes nothing (the charge stays spent).

Runs are serialised: one runner at a time per process. A plain ``collect()`` of a query
holding a row-wise release refuses (:class:`~dpframe.errors.ReleaseNotArmedError`), inside
a run or not.

The runner trusts that each row of the *input* (a scan, an in-memory frame) is one record
(one person); inside the query, the lineage refuses a release whose input a join, concat
or ``explode`` may repeat. Bound each person's contribution first (``docs/privacy.md``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import pickle
import re
import secrets
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import polars as pl
from polars.functions.lazy import _map_batches_wrapper

from dpframe.core.accountant import Accountant, Charge, LedgerEntry
from dpframe.core.constraints import POLARS_ENGINES, Compression
from dpframe.core.executor import Execution, Step, drawing, execute
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    NoAccountantError,
    ReleaseNotArmedError,
)
from dpframe.polars.lineage import MARKER, check_lineage
from dpframe.polars.memory import FrameSource, data_hidden, scan_frame
from dpframe.polars.pinning import pin_scans

__all__ = [
    "Prepared",
    "Run",
    "RunnerRelease",
    "collect",
    "inspect_plan",
    "last_run",
    "prepare",
]

_RUN_LOCK = threading.Lock()
_STATE_LOCK = threading.Lock()
_LAST: Run | None = None
_LOCAL = threading.local()


class RunnerRelease:
    """Base of the callables dpframe puts in a polars query (column and row-wise releases).

    The runner recognises them in a query plan; anything else there is foreign.
    """

    id: str
    column: str | None
    accountant: Accountant | None
    #: its input rows are records (a row-wise release); else a column of statistics
    per_record: bool = False

    def evaluate(self, series: pl.Series, run: Run | None) -> pl.Series:
        """One evaluation by polars: inside ``run`` (the runner's own plan) or, with
        ``run=None``, outside any run (a plain ``collect()``, another thread)."""
        raise NotImplementedError

    def __call__(self, series: pl.Series) -> pl.Series:
        """polars evaluates the caller's own expression: never part of a run."""
        return self.evaluate(series, None)

    def snapshot(self) -> Self:
        """The copy of this release a run uses (taken when its plan is inspected: later
        changes to this object's attributes do not reach the run)."""
        snap = object.__new__(type(self))
        snap.__dict__.update(self.__dict__)
        snap.origin = self.origin
        return snap

    @property
    def origin(self) -> Self:
        """The release the caller built (itself, unless this is a run's snapshot)."""
        origin: Self = self.__dict__.get("origin", self)
        return origin

    @origin.setter
    def origin(self, value: Self) -> None:
        self.__dict__["origin"] = value

    def held(self, run: Run) -> contextlib.AbstractContextManager[Any]:
        """Held while the runner charges ``run`` and arms this release (nothing to hold
        unless the release keeps state across runs)."""
        return contextlib.nullcontext()

    def charged(self, entries: tuple[LedgerEntry, ...], output: Any, run: Run) -> None:
        """The runner charged this release with its query (inside :meth:`held`)."""

    def planned_charges(self) -> list[Charge]:
        """What a run of it charges, or more, known before the data is read."""
        epsilon = getattr(self, "epsilon", None)
        if isinstance(epsilon, int | float) and not isinstance(epsilon, bool) and epsilon > 0:
            return [Charge(float(epsilon), 0.0, "planned", (self.column or "value",))]
        return []

    def __reduce__(self) -> Any:  # a query plan with a release never pickles its data
        raise TypeError("a dpframe release cannot be pickled: build it where it runs")


@dataclass
class Run:
    """One execution of a query by the runner: the dry pass, then the armed real pass."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: True in the dry pass (check only; nothing charged or drawn)
    dry: bool = True
    releases: dict[str, RunnerRelease] = field(default_factory=dict)
    steps: dict[str, Step] = field(default_factory=dict)
    keys: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    drawn: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    #: the accountant charged for the run, and the ledger entries it made
    accountant: Accountant | None = None
    entries: list[LedgerEntry] = field(default_factory=list)
    #: the PRAM design each released column used, JSON-ready, for provenance
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the designs themselves (``None`` for a user matrix)
    designs: dict[str, Any] = field(default_factory=dict)
    _stand_ins: dict[str, pl.Series] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def stand_in(
        self, release: RunnerRelease, rows: int, make: Callable[[int], pl.Series]
    ) -> pl.Series:
        """Dry pass: ``rows`` rows of the release's data-free stand-in (``make(n)`` builds
        ``n`` rows of it, never from the data). Nothing downstream can compute on it: the
        plan's lineage allows a release's output to be selected or renamed only."""
        with self._lock:
            cached = self._stand_ins.get(release.id)
            if cached is None or cached.len() < rows:
                size = max(rows, 2 * (0 if cached is None else cached.len()), 1)
                cached = make(size)
                self._stand_ins[release.id] = cached
        return cached.slice(0, rows)

    def register(self, release: RunnerRelease, step: Step, key: Any, rows: int) -> None:
        """Dry pass: a release met its data (checked); keep its step for the charge."""
        with self._lock:
            known = self.keys.get(release.id, key)
            if known != key:
                raise InvalidParameterError(
                    f"release on column {release.column!r} met two different inputs in one "
                    "query (polars split it, e.g. in group_by().agg()); a release is one "
                    "column of one frame. Nothing was charged."
                )
            self.releases[release.id] = release
            self.keys[release.id] = key
            self.rows[release.id] = self.rows.get(release.id, 0) + rows
            if release.id not in self.steps:
                self.steps[release.id] = step

    def armed_output(self, release: RunnerRelease, rows: int) -> Any:
        """Real pass: what the executor drew for ``release`` (row-wise: its armed sampler).

        Counts the rows: a row-wise release never randomizes more records than it met in
        the dry pass (a backstop; the plan inspection already refused double use).
        """
        with self._lock:
            if release.id not in self.outputs:
                raise ReleaseNotArmedError(
                    f"release on column {release.column!r} was not met by the dry pass, so "
                    "it was not charged; nothing is drawn for it"
                )
            drawn = self.drawn.get(release.id, 0) + rows
            if drawn > self.rows.get(release.id, 0):
                raise InvalidParameterError(
                    f"release on column {release.column!r} was asked to randomize more records "
                    "than its charge covers (it is evaluated again somewhere in the query); "
                    "the run stops and publishes nothing"
                )
            self.drawn[release.id] = drawn
            return self.outputs[release.id]


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


def thread_last_run() -> Run:
    """The run this thread's last runner call made (immune to other threads)."""
    last: Run = _LOCAL.last
    return last


def _not_nested() -> None:
    if getattr(_LOCAL, "active", False):
        raise InvalidParameterError(
            "dpframe runners cannot be nested: finish one collect/sink_parquet first"
        )


@contextlib.contextmanager
def _running(run: Run) -> Iterator[Run]:
    global _LAST
    _not_nested()
    with _RUN_LOCK:
        _LOCAL.active = True
        try:
            yield run
        finally:
            if not run.dry:
                with _STATE_LOCK:
                    _LAST = run
            _LOCAL.active = False


# -- the plan that runs: the checked bytes, with handles only the run resolves ------------


class Bound:
    """A release bound to one run: what the checked plan's handle resolves to.

    Polars calls it (through its own ``map_batches`` wrapper, built here) with the
    release's input; it evaluates the run's snapshot of the release inside that run, and
    only while the run's plan is open (a wrapper kept past its run draws nothing).
    """

    __slots__ = ("nonce", "release", "run")

    def __init__(self, release: RunnerRelease, run: Run, nonce: str) -> None:
        self.release, self.run, self.nonce = release, run, nonce

    def __call__(self, series: pl.Series, *args: Any, **kwargs: Any) -> pl.Series:
        with _STATE_LOCK:
            handles = _OPEN.get(self.nonce)
        if handles is None or handles.run is not self.run:
            raise ReleaseNotArmedError(
                "a dpframe runner's plan is evaluated outside its run; nothing is drawn"
            )
        return self.release.evaluate(series, self.run)

    def __reduce__(self) -> Any:
        raise TypeError("a bound dpframe release cannot be pickled")


@dataclass
class _Handles:
    """The Python objects of one inspected plan, by the handle written for each."""

    nonce: str
    thread: int
    releases: list[RunnerRelease] = field(default_factory=list)
    sources: list[FrameSource] = field(default_factory=list)
    #: set when the run starts: then a handle resolves to the run's objects
    run: Run | None = None

    def handle(self, name: str) -> bytes:
        """The pickle written in the plan in place of an object: ``_resolve(nonce, name)``
        (by a Pickler of its own: ``pickle.dumps`` is the inspection's stand-in then)."""
        out = io.BytesIO()
        pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(_Handle(self.nonce, name))
        return out.getvalue()


class _Handle:
    __slots__ = ("name", "nonce")

    def __init__(self, nonce: str, name: str) -> None:
        self.nonce, self.name = nonce, name

    def __reduce__(self) -> Any:
        return (_resolve, (self.nonce, self.name))


#: the handles of the plans inspected and not yet finished, by their secret nonce
_OPEN: dict[str, _Handles] = {}
_SOURCE = "source:"


def _resolve(nonce: str, name: str) -> Any:
    """What polars gets when it unpickles a handle of a checked plan (at each collect).

    Only in the thread that inspected the plan, while the plan is open: a release's handle
    resolves to polars' ``map_batches`` wrapper of the release's snapshot bound to the run
    (refused before the run starts); a source's handle to the frame's copy taken at the
    inspection (an empty frame of its schema while the plan is checked).
    """
    with _STATE_LOCK:
        handles = _OPEN.get(nonce)
    if handles is None or handles.thread != threading.get_ident():
        raise ReleaseNotArmedError(
            "a dpframe runner's plan is evaluated outside its run; nothing is drawn"
        )
    if name.startswith(_SOURCE):
        source = handles.sources[int(name.removeprefix(_SOURCE))]
        return source if handles.run is not None else source.empty()
    found = _MARKER_NAME.fullmatch(name)
    if handles.run is None or found is None:
        raise ReleaseNotArmedError("a .dp release of a checked plan is evaluated before its run")
    bound = Bound(handles.releases[int(found[1])], handles.run, nonce)

    def call(series: Sequence[pl.Series], *args: Any, **kwargs: Any) -> pl.Series:
        return bound(series[0])

    return _map_batches_wrapper(call, returns_scalar=False)


_MARKER_NAME = re.compile(re.escape(MARKER.decode()) + r"(\d+);")


def _close(nonce: str) -> None:
    with _STATE_LOCK:
        _OPEN.pop(nonce, None)


# -- 1. the plan ---------------------------------------------------------------------------


def _ours(obj: Any) -> RunnerRelease | None:
    """The dpframe release a plan's Python object wraps, if it is exactly that."""
    if isinstance(obj, RunnerRelease):
        return obj
    inner = getattr(obj, "function", None)  # polars' map_batches wrapper
    if isinstance(inner, RunnerRelease):
        return inner
    closure = getattr(inner, "__closure__", None)
    name = getattr(inner, "__qualname__", "")
    if closure and name.endswith("map_batches.<locals>._wrap") and len(closure) == 1:
        cell = closure[0].cell_contents
        if isinstance(cell, RunnerRelease):
            return cell
    return None


#: the plan's Python nodes as ``explain`` shows them (a scan's header, named or not, starts
#: "PYTHON SCAN" or "PYTHON[name] SCAN": counted by its start, whatever the name holds)
_OPAQUE_NODES = re.compile(r"python_udf\(|OPAQUE_PYTHON|PYTHON(?:\[| SCAN)")


def inspect_plan(lf: pl.LazyFrame, public: Sequence[str] | None = None) -> list[RunnerRelease]:
    """The dpframe releases in ``lf``'s plan (the snapshots a run would use), after
    checking the plan's lineage.

    Polars serializes every Python object of a plan with ``pickle.dumps`` (or
    ``cloudpickle.dumps`` if that fails); the runner lists them by serializing the plan
    with both functions stood in for in its thread (nothing is pickled): each release is
    written as a handle holding a marker, any other Python object refuses. The serialized
    plan is then checked by :func:`dpframe.polars.lineage.check_lineage` (what may leave,
    which rows): decided from the plan alone, before any data is read. Fails closed: a
    plan that cannot be inspected is refused. A run (:func:`prepare`) then runs these
    very bytes.

    The serialization is the only view polars gives of the Python objects in a plan (its
    plan visitor refuses a Python function), and polars writes an in-memory frame's data
    into it before the plan's nodes: that write is this inspection's cost per row (none
    for a scan of files or :func:`~dpframe.polars.memory.scan_frame`). The check decodes
    none of it (its shadow holds empty frames of the same schemas).
    ``benchmarks/bench_pram.py`` measures it.
    """
    inspected = _inspect(lf, public)
    _close(inspected.handles.nonce)
    return inspected.found


@dataclass
class _Inspected:
    found: list[RunnerRelease]
    serialized: bytes
    handles: _Handles


def _inspect(lf: pl.LazyFrame, public: Sequence[str] | None) -> _Inspected:
    """:func:`inspect_plan`, keeping the checked bytes and their handles open (the
    caller closes them)."""
    import cloudpickle  # polars' own serializer of Python objects

    _not_nested()
    me = threading.get_ident()
    handles = _Handles(secrets.token_hex(16), me)
    seen: list[Any] = []

    def standing_in_for(real: Callable[..., bytes]) -> Callable[..., bytes]:
        def spy(obj: Any, *args: Any, **kwargs: Any) -> bytes:
            if threading.get_ident() != me:  # another thread's serialization: not ours
                out: bytes = real(obj, *args, **kwargs)
                return out
            if type(obj) is FrameSource:  # dpframe's own scan of a frame: its copy, no data
                handles.sources.append(FrameSource(obj.frame))
                return handles.handle(f"{_SOURCE}{len(handles.sources) - 1}")
            seen.append(obj)
            return handles.handle(f"{MARKER.decode()}{len(seen) - 1};")

        return spy

    with _STATE_LOCK:
        _OPEN[handles.nonce] = handles
    try:
        with _RUN_LOCK:
            # polars pickles a plan's Python object with pickle, and with cloudpickle if
            # that fails: both are stood in for, so that every object is seen (one that
            # pickles plainly -- a scan's credential_provider, a pipe_with_schema
            # callable -- would otherwise pass unseen, and run in the run)
            real_pickle, real_cloudpickle = pickle.dumps, cloudpickle.dumps
            pickle.dumps = standing_in_for(real_pickle)
            cloudpickle.dumps = standing_in_for(real_cloudpickle)
            try:
                with data_hidden():
                    serialized = lf.serialize()
            except Exception as exc:
                raise InvalidParameterError(
                    f"the query's plan cannot be inspected ({type(exc).__name__}: {exc}); a "
                    "query holding a dpframe release must be a plain polars query. Nothing "
                    "was charged."
                ) from None
            finally:
                pickle.dumps, cloudpickle.dumps = real_pickle, real_cloudpickle
        ours = _refuse_foreign(seen)  # before any part of the plan is rebuilt
        serialized = pin_scans(serialized)  # the check and the run read these schemas
        found = _check_inspected(lf, public, serialized, ours, len(handles.sources))
    except BaseException:
        _close(handles.nonce)
        raise
    handles.releases = [r.snapshot() for r in found]
    return _Inspected(handles.releases, serialized, handles)


def _refuse_foreign(seen: list[Any]) -> list[RunnerRelease]:
    """The releases the inspection saw, in order; any other Python object refuses."""
    ours = [_ours(o) for o in seen]
    foreign = [o for o, r in zip(seen, ours, strict=True) if r is None]
    if foreign:
        what = ", ".join(sorted({type(o).__name__ for o in foreign}))
        raise InvalidParameterError(
            f"the query holds a Python step that is not a dpframe release ({what}: e.g. "
            "LazyFrame.map_batches, map_batches/map_elements of a function, a Python scan, "
            "pipe_with_schema, a scan's credential_provider); "
            "its inputs cannot be seen, so it could evaluate a release again out of sight. "
            "Run other Python functions in a separate query, before or after (a cloud "
            "scan: pass credential_provider=None and its keys in storage_options). Nothing "
            "was charged."
        )
    return [r for r in ours if r is not None]


def _check_inspected(
    lf: pl.LazyFrame,
    public: Sequence[str] | None,
    serialized: bytes,
    found: list[RunnerRelease],
    sources: int,
) -> list[RunnerRelease]:
    ids = [r.id for r in found]
    twice = sorted({r.column or "?" for r in found if ids.count(r.id) > 1})
    if twice:
        raise InvalidParameterError(
            f"the .dp release(s) on {twice} are used at more than one place of the query "
            "(a concat or join of queries holding the same expression, or the expression "
            "selected twice): each place would randomize the same records again under one "
            "charge. Build one expression per use. Nothing was charged."
        )
    opaque = len(_OPAQUE_NODES.findall(lf.explain(optimized=False)))
    if opaque > len(found) + sources:  # the inspection missed a Python node: fail closed
        raise InvalidParameterError(
            "the query's plan holds Python steps the runner cannot see into; nothing was charged"
        )
    pub = _check_public(public, lf.collect_schema().names())
    per_record = frozenset(i for i, r in enumerate(found) if r.per_record)
    floats = frozenset(i for i, r in enumerate(found) if not r.per_record)
    check_lineage(lf, serialized, pub, per_record, floats)
    return found


# -- 2. the dry pass -----------------------------------------------------------------------


@dataclass
class Prepared:
    """A query that passed inspection and its dry pass: ready to be charged and run.

    ``plan`` is the query polars rebuilt from the bytes the inspection checked; it runs
    only in the thread that prepared it, until :meth:`close`.
    """

    plan: pl.LazyFrame
    run: Run
    public: tuple[str, ...]
    nonce: str = ""

    def close(self) -> None:
        """End the run's plan: its handles resolve no more."""
        _close(self.nonce)

    @property
    def steps(self) -> list[Step]:
        return list(self.run.steps.values())

    @property
    def accountant(self) -> Accountant | None:
        accts = {id(r.accountant): r.accountant for r in self.run.releases.values()}
        if len(accts) > 1:
            raise InvalidParameterError(
                "the query's .dp releases were built for different accountants; one query is "
                "charged to one accountant. Nothing was charged."
            )
        return next(iter(accts.values()), None)


def _check_lazy(frame: Any, name: str = "frame") -> pl.LazyFrame:
    if isinstance(frame, pl.DataFrame):
        return scan_frame(frame)  # checked without its data
    if not isinstance(frame, pl.LazyFrame):
        raise InvalidParameterError(
            f"{name} must be a polars LazyFrame (or DataFrame), got {type(frame).__name__}"
        )
    return frame


def _unresolved(exc: Exception) -> InvalidParameterError:
    """The refusal of a query polars cannot resolve (a missing column, a clash)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InvalidParameterError(
        f"frame: polars cannot resolve the query ({type(exc).__name__}: {first}); fix the "
        "query (e.g. the column names it uses). Nothing was read or charged."
    )


#: polars' errors of a query that does not resolve (found from its plan, reading nothing)
_UNRESOLVED = (
    pl.exceptions.ColumnNotFoundError,
    pl.exceptions.SchemaError,
    pl.exceptions.SchemaFieldNotFoundError,
    pl.exceptions.StructFieldNotFoundError,
    pl.exceptions.DuplicateError,
    pl.exceptions.InvalidOperationError,
)


def _check_public(public: Any, columns: Sequence[str]) -> tuple[str, ...]:
    if public is None:
        return ()
    if isinstance(public, str) or not all(isinstance(c, str) for c in public):
        raise InvalidParameterError(f"public must be a list of column names, got {public!r}")
    unknown = sorted(set(public) - set(columns))
    if unknown:
        raise InvalidParameterError(
            f"public names {unknown}, which are not columns of the query's output {list(columns)}"
        )
    return tuple(public)


def prepare(frame: Any, *, public: Sequence[str] | None = None) -> Prepared:
    """Inspect the query and make its dry pass (steps 1 and 2): nothing is charged.

    Raises if the query holds an opaque Python step or one release twice, if any
    release's data is bad, or if an output column is neither produced by a release nor
    declared ``public``. The dry pass, and the real pass after it, run the plan rebuilt
    from the checked bytes (``Prepared.plan``), never ``frame`` itself; close it with
    :meth:`Prepared.close` (:func:`collect` and ``sink_parquet`` do).
    """
    lf = _check_lazy(frame)
    try:  # the plan and the schema only: nothing is read yet
        inspected = _inspect(lf, public)
    except _UNRESOLVED as exc:
        raise _unresolved(exc) from None
    handles = inspected.handles
    try:
        names = lf.collect_schema().names()
        pub = _check_public(public, names)
        _check_budget_first(inspected.found)
        run = Run(dry=True)
        handles.run = run  # from now on the handles resolve to the run's objects
        try:
            plan = pl.LazyFrame.deserialize(io.BytesIO(inspected.serialized))
        except Exception as exc:
            raise InvalidParameterError(
                f"the query's checked plan cannot be rebuilt to run ({type(exc).__name__}: "
                f"{exc}). Nothing was read or charged."
            ) from None
        del inspected  # the bytes (an in-memory frame's data) are not kept
        prepared = Prepared(plan, run, pub, handles.nonce)
        weakref.finalize(prepared, _close, handles.nonce)
        released = [c for c in names if c not in pub]
        probes = [pl.col(c).null_count().alias(f"n{i}") for i, c in enumerate(released)]
        with _running(run):
            if probes:
                plan.select(probes).collect(engine="streaming")
        run._stand_ins.clear()  # the dry pass's stand-ins are not kept with the run
        stray = set(run.releases) - {r.id for r in handles.releases}
        if stray:  # evaluated from somewhere the plan does not show
            raise InvalidParameterError(
                "a .dp release was evaluated outside the query's plan; nothing was charged"
            )
    except BaseException:
        _close(handles.nonce)
        raise
    return prepared


def _check_budget_first(found: list[RunnerRelease]) -> None:
    """Refuse, before any data is read, a run that its accountant would refuse anyway.

    The dry pass reads the data, and a refusal there depends on the data; a run that
    would be refused for its accountant or its budget is refused first, so that whether
    the budget or the data refuses it never tells the data. Each release's cost is what
    its plan charges where the plan does not depend on the data, else an upper bound
    (:meth:`RunnerRelease.planned_charges`); the accountant checks them as it would the
    real charges (a Gaussian release on a pure-epsilon budget is refused here too). The
    executor still makes, and checks, the exact charge.
    """
    if not found:
        return
    accts = {id(r.accountant): r.accountant for r in found}
    if len(accts) > 1:
        raise InvalidParameterError(
            "the query's .dp releases were built for different accountants (or some for "
            "none); one query is charged to one accountant. Nothing was read or charged."
        )
    acct = next(iter(accts.values()))
    if acct is None:
        raise NoAccountantError(
            "the query's .dp releases have no accountant to charge: build them inside "
            "`with accountant:` or pass accountant=...; nothing was read or charged"
        )
    charges = [c for r in found for c in r.planned_charges()]
    try:
        acct.check(charges)
    except BudgetExceededError as exc:
        raise BudgetExceededError(
            f"{exc} (checked before the data is read: nothing was read or charged)",
            spent_epsilon=acct.spent.epsilon,
        ) from None
    except InvalidParameterError as exc:
        raise InvalidParameterError(
            f"{exc} (checked before the data is read: nothing was read or charged)"
        ) from None


# -- 3 and 4. the charge and the real pass ---------------------------------------------------


def arm(prepared: Prepared, execution: Execution) -> None:
    """Give each release of a prepared query what the executor drew for it."""
    run = prepared.run
    for (rid, _), out, i in zip(
        run.steps.items(), execution.outputs, range(len(execution.outputs)), strict=True
    ):
        run.outputs[rid] = out
        run.releases[rid].charged(execution.entries_of(i), out, run)
    run.entries.extend(execution.entries)


def charge(prepared: Prepared) -> Execution | None:
    """Step 3: charge every release of the query at once (``None`` if it holds none).

    Each release is held from before the charge until it is armed (in the order of
    their ids): a release another evaluation made meanwhile refuses the run before
    anything is charged.
    """
    run = prepared.run
    if not run.steps:
        return None
    acct = prepared.accountant
    with contextlib.ExitStack() as stack:
        for rid in sorted(run.steps):
            stack.enter_context(run.releases[rid].held(run))
        execution = execute(prepared.steps, acct, note=f"query run {run.id[:8]}")
        run.accountant = acct
        arm(prepared, execution)
    return execution


@contextlib.contextmanager
def armed(prepared: Prepared) -> Iterator[Run]:
    """Step 4's context: the releases draw under the charge made in step 3."""
    run = prepared.run
    run.dry = False
    with _running(run):
        yield run
    _LOCAL.last = run


def collect(
    frame: pl.LazyFrame | pl.DataFrame,
    *,
    public: Sequence[str] | None = None,
    **collect_kwargs: Any,
) -> pl.DataFrame:
    """Run a query holding ``.dp`` releases and return the result (all four steps).

    Each release in the query is charged once, all of them together, after a dry pass
    that checks the data and before anything is drawn; calling :func:`collect` again is a
    new run, charged again (a column release returns its first values instead).

    Parameters
    ----------
    frame : polars.LazyFrame or polars.DataFrame
        The query (a DataFrame is run as :func:`dpframe.scan_frame` ``(frame)``).
    public : list of str, optional
        Output columns that leave as they are (not released by a ``.dp`` expression):
        they are published raw. Any other column that no release produced is refused.
    **collect_kwargs
        Passed to :meth:`polars.LazyFrame.collect` (e.g. ``engine="streaming"``).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.LazyFrame({"region": ["N", "S", "S", "E"], "id": [1, 2, 3, 4]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     q = people.select(pl.col("region").dp.pram(1.0, categories=["N", "S", "E"]))
    ...     out = dpframe.collect(q)
    >>> out.height, acct.spent.epsilon
    (4, 1.0)
    """
    _check_collect_arguments(collect_kwargs)
    prepared = prepare(frame, public=public)
    try:
        charge(prepared)
        with drawing(prepared.run.accountant, prepared.run.entries), armed(prepared):
            out: pl.DataFrame = prepared.plan.collect(**collect_kwargs)
            return out
    finally:
        prepared.close()


def _check_collect_arguments(kwargs: dict[str, Any]) -> None:
    """``collect``'s keyword arguments, checked against polars' own before any charge (a
    run that fails after its charge keeps the charge)."""
    params = inspect.signature(pl.LazyFrame.collect).parameters
    known = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise InvalidParameterError(
            f"dpframe.collect: unknown argument(s) {unknown}; pass only the keyword "
            f"arguments of polars.LazyFrame.collect ({', '.join(sorted(known))})"
        )
    if kwargs.get("background", False) is not False:
        raise InvalidParameterError(
            "dpframe.collect: background=True is refused: a run is charged, drawn and "
            "closed before collect returns (call dpframe.collect in a thread instead)"
        )
    engine = kwargs.get("engine", "auto")
    gpu = isinstance(engine, pl.GPUEngine)
    if not gpu and not (isinstance(engine, str) and engine in POLARS_ENGINES):
        raise InvalidParameterError(
            f"dpframe.collect: engine must be 'auto', 'in-memory', 'streaming' or 'gpu' "
            f"(or a polars.GPUEngine); got {engine!r}"
        )
    if (gpu or engine == "gpu") and importlib.util.find_spec("cudf_polars") is None:
        raise InvalidParameterError(
            "dpframe.collect: engine='gpu' needs the package cudf_polars, which is not "
            "installed; install it or pass engine='auto'"
        )
    if "optimizations" in kwargs and not isinstance(kwargs["optimizations"], pl.QueryOptFlags):
        raise InvalidParameterError(
            "dpframe.collect: optimizations must be a polars.QueryOptFlags, got "
            f"{type(kwargs['optimizations']).__name__}"
        )


def sink(
    frame: Any,
    path: Path,
    *,
    public: Sequence[str] | None,
    metadata: Any,
    compression: Compression,
) -> Run:
    """All four steps, streaming the result to ``path`` (a temporary file the caller renames).

    ``metadata(run)`` gives the Parquet key-value metadata once the run is charged.
    """
    prepared = prepare(frame, public=public)
    try:
        charge(prepared)
        with drawing(prepared.run.accountant, prepared.run.entries), armed(prepared) as r:
            prepared.plan.sink_parquet(path, metadata=metadata(r), compression=compression)
        return r
    finally:
        prepared.close()
