"""An in-memory frame as a query's source that the runner checks without its data.

``df.lazy()`` puts a frame's data into the query's plan, and polars writes that data
into the plan's serialization -- the only view polars gives of a plan's Python objects,
which the runner needs to find the ``.dp`` releases (:func:`dpframe.polars.runner.inspect_plan`).
That write costs about ten times PRAM's own sampler. :func:`scan_frame` starts the query
from a Python scan of the frame instead: the plan holds a :class:`FrameSource` (the
runner's serializer sees the object itself, recognises its exact class and writes a
handle in its place, which resolves to an empty source of the same schema while the plan
is checked and to a copy of the source taken at the inspection when it runs), and polars
reads the frame in morsels when the query runs. The source holds its own copy of the
frame's column list (polars' columns are immutable: a change to the caller's frame after
the query is built changes neither the check nor the run), so the dry pass and the real
pass read the same rows.

Examples
--------
>>> import polars as pl, dpframe
>>> df = pl.DataFrame({"region": ["N", "S", "S", "E"]})
>>> with dpframe.Accountant(epsilon=1.0):
...     q = dpframe.scan_frame(df).select(pl.col("region").dp.pram(1.0, categories=["N", "S", "E"]))
...     dpframe.collect(q).height
4
"""

from __future__ import annotations

import contextlib
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import polars as pl

from dpframe.errors import InvalidParameterError

__all__ = ["FrameSource", "data_hidden", "scan_frame"]

_HIDDEN = threading.local()

#: rows a morsel when polars gives no batch size (its streaming engine's own morsel)
_BATCH = 100_000
#: the most bytes of an in-memory frame a morsel holds (``2**23`` rows of one ``int64``
#: column): what a release makes of a morsel (its output, the dry pass's stand-in) is
#: about as large again
_MORSEL_BYTES = 1 << 26


class FrameSource:
    """The Python scan of one in-memory frame (what :func:`scan_frame` puts in a plan).

    Called by polars with the columns it needs, a predicate, a row limit and a batch size;
    returns the frame's morsels and ``False`` (the predicate is left to polars, which
    applies it after the scan). The runner recognises a source by its exact class; a
    subclass is not one.

    Examples
    --------
    >>> import polars as pl
    >>> source = FrameSource(pl.DataFrame({"x": [1, 2, 3]}))
    >>> batches, applied = source(["x"], None, 2, 10)  # two rows, in morsels of 10 or more
    >>> [b.height for b in batches], applied
    ([2], False)
    """

    __slots__ = ("_frame",)

    def __init__(self, frame: pl.DataFrame) -> None:
        self._frame = _plain(frame)  # a plain copy: the caller's code and edits stay out

    @property
    def frame(self) -> pl.DataFrame:
        """The frame it reads (checked to be a plain polars DataFrame)."""
        return _checked(self._frame)

    @property
    def schema(self) -> pl.Schema:
        """The frame's schema."""
        return _checked(self._frame).schema

    def empty(self) -> FrameSource:
        """A source of no rows with the same schema."""
        return FrameSource(_checked(self._frame).clear())

    def __call__(
        self,
        with_columns: list[str] | None,
        predicate: Any,
        n_rows: int | None,
        batch_size: int | None,
    ) -> tuple[Iterator[pl.DataFrame], bool]:
        frame = _checked(self._frame)
        if with_columns is not None:
            frame = frame.select(with_columns)
        if n_rows is not None:
            frame = frame.head(n_rows)
        row_bytes = -(-int(frame.estimated_size()) // max(frame.height, 1))
        rows = morsel_rows(frame.height, batch_size, row_bytes=row_bytes)
        return _morsels(frame, rows), False

    def __reduce__(self) -> Any:
        if getattr(_HIDDEN, "on", False):
            # polars pickles a plan's Python objects with pickle first, then cloudpickle:
            # the runner's inspection stands in for both; refusing here keeps the data out
            # of any other pickling while it is open
            raise pickle.PicklingError("a FrameSource's data stays out of an inspected plan")
        return (FrameSource, (self._frame,))


@contextlib.contextmanager
def data_hidden() -> Iterator[None]:
    """While it is open (in this thread), a non-empty :class:`FrameSource` refuses plain
    pickling (the runner's inspection stands in for ``pickle.dumps`` and
    ``cloudpickle.dumps`` and writes a handle instead: see
    :func:`dpframe.polars.runner.inspect_plan`).

    Examples
    --------
    >>> import pickle, polars as pl
    >>> source = FrameSource(pl.DataFrame({"x": [1]}))
    >>> with data_hidden():
    ...     pickle.dumps(source)
    Traceback (most recent call last):
    ...
    _pickle.PicklingError: a FrameSource's data stays out of an inspected plan
    >>> len(pickle.dumps(source)) > 0
    True
    """
    before = getattr(_HIDDEN, "on", False)
    _HIDDEN.on = True
    try:
        yield
    finally:
        _HIDDEN.on = before


_PYDF = type(pl.DataFrame()._df)  # polars' own frame object


def _checked(frame: Any) -> pl.DataFrame:
    """``frame`` if it is a plain polars DataFrame over polars' own frame object (no
    subclass, nothing the caller's code could run in a checked query); else refuse."""
    if type(frame) is not pl.DataFrame or type(frame._df) is not _PYDF:
        raise InvalidParameterError(
            "a dpframe.scan_frame source holds something other than a plain polars "
            "DataFrame; build it with dpframe.scan_frame(df). Nothing was charged."
        )
    return frame


def _plain(frame: pl.DataFrame) -> pl.DataFrame:
    """A plain DataFrame holding a copy of ``frame``'s column list (a subclass's methods
    and later in-place edits of ``frame`` never reach it)."""
    inner = frame._df
    if type(inner) is not _PYDF:
        raise InvalidParameterError(
            "frame: its data is not a polars frame object; pass a polars DataFrame"
        )
    return pl.DataFrame._from_pydf(inner.clone())


def morsel_rows(
    height: int, batch_size: int | None, *, row_bytes: int, threads: int | None = None
) -> int:
    """Rows a morsel of an in-memory frame of ``height`` rows of ``row_bytes`` bytes: an
    equal share for each of polars' ``threads`` (default: its thread pool), in as few
    rounds as keep a morsel within ``_MORSEL_BYTES`` (64 MiB), and never fewer rows than
    polars' ``batch_size``.

    Each morsel costs a release its fixed price once (a fresh generator, a sampler call,
    a call from polars): polars' own morsel (100,000 rows) pays it a hundred times over
    ten million rows, about a third more than the sampler's time on the whole column. A
    morsel is a slice of the frame (no copy); what a release makes of it is about as
    large, at most ``threads`` morsels at a time.

    Examples
    --------
    >>> morsel_rows(10_000_000, 100_000, row_bytes=8, threads=2)
    5000000
    >>> morsel_rows(10**8, 100_000, row_bytes=8, threads=2)  # 6 rounds of 2 morsels
    8333334
    >>> morsel_rows(10_000_000, 100_000, row_bytes=320, threads=2)  # 20 wide columns
    208334
    >>> morsel_rows(1_000, 100_000, row_bytes=8, threads=2)
    100000
    """
    threads = max(1, threads or pl.thread_pool_size())
    most = max(1, _MORSEL_BYTES // max(1, row_bytes))  # rows within _MORSEL_BYTES
    rounds = -(-height // (threads * most))  # ceil
    share = -(-height // max(1, threads * rounds))
    return max(share, batch_size or _BATCH, 1)


def _morsels(frame: pl.DataFrame, size: int) -> Iterator[pl.DataFrame]:
    size = max(1, int(size))
    for start in range(0, max(frame.height, 1), size):
        yield frame.slice(start, size)


def scan_frame(frame: pl.DataFrame) -> pl.LazyFrame:
    """A LazyFrame over an in-memory frame whose plan the runner checks without its data.

    Use it instead of ``frame.lazy()`` to start a query holding ``.dp`` releases from a
    frame in memory: :func:`dpframe.collect` and ``sink_parquet`` check the plan in time
    independent of the frame's size (polars' serialization of ``frame.lazy()`` writes the
    data, about ten times the cost of PRAM's sampler). The result is an ordinary LazyFrame
    (join it, filter it, select from it); the frame is read in morsels when it runs.

    Parameters
    ----------
    frame : polars.DataFrame
        The records. Later changes to ``frame`` (``insert_column``, ``extend``, ...) do not
        reach the query.

    Returns
    -------
    polars.LazyFrame

    Raises
    ------
    InvalidParameterError
        ``frame`` is not a polars DataFrame (a LazyFrame is already a query: use it as it is).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> lf = dpframe.scan_frame(pl.DataFrame({"x": [1, 2, 3]}))
    >>> lf.filter(pl.col("x") > 1).collect()["x"].to_list()
    [2, 3]
    """
    if not isinstance(frame, pl.DataFrame):
        what = type(frame).__name__
        lazy = isinstance(frame, pl.LazyFrame)
        fix = " (a LazyFrame is a query already: use it as it is)" if lazy else ""
        raise InvalidParameterError(f"frame must be a polars DataFrame, got {what}{fix}")
    source = FrameSource(frame)
    return pl.LazyFrame._scan_python_function(  # polars' own constructor of a Python scan
        schema=source.schema,
        scan_fn=source,
        pyarrow=False,
        validate_schema=True,
        is_pure=False,
        explain_name="dpframe.scan_frame",
    )
