"""A release job's progress: a bar per step on a terminal, one log line per step otherwise.

:class:`JobProgress` is given the job's steps one at a time (``with progress.step(...)``).

* On a terminal (``stderr`` is a TTY), a ``rich`` bar on stderr shows the step, its
  number, and for a streamed step (a PRAM column written morsel by morsel) the rows done
  out of the input's rows; the bar is gone when the job ends.
* Otherwise (a scheduler's log), each step is one line logged on the ``dpframe.jobs``
  logger when it ends: ``[3/11] drawing by_region: 0.42 s`` (``failed after`` when it
  raised). The ``dpframe`` command sends that logger to stderr; a Python job sees the
  lines with its own logging configuration.
* ``enabled=False`` shows and logs nothing.

A streamed step learns of each batch through :func:`dpframe.engines.progress.rows_done`;
progress reads no confidential value, only how many rows have gone through.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

from dpframe.engines.progress import counting_rows

__all__ = ["LOGGER", "JobProgress"]

#: where a job's steps are logged when not on a terminal
LOGGER = logging.getLogger("dpframe.jobs")


class JobProgress:
    """The progress of one job of ``total`` steps.

    Parameters
    ----------
    enabled : bool
        Show (or log) the steps at all.
    total : int
        How many steps the job has (the ``N`` of ``[i/N]``).
    terminal : bool, optional
        Draw a bar rather than log lines; default: ``stderr`` is a TTY.

    Examples
    --------
    >>> p = JobProgress(True, total=2, terminal=False)
    >>> with p:
    ...     with p.step("checking by_region"):
    ...         pass
    """

    def __init__(self, enabled: bool, total: int, *, terminal: bool | None = None) -> None:
        self.enabled = enabled
        self.total = total
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.done = 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> JobProgress:
        if self.enabled and self.terminal:
            from rich.console import Console  # loaded only for an interactive run
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None

    @contextlib.contextmanager
    def step(self, description: str, rows: int | None = None) -> Iterator[None]:
        """One step of the job; ``rows``: the step streams that many input rows."""
        self.done += 1
        label = f"[{self.done}/{self.total}] {description}"
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        if self._bar is not None:
            task = self._bar.add_task(label, total=rows if rows else 1)
            advance = (lambda n: self._bar.advance(task, n)) if rows else None
            try:
                with counting_rows(advance):
                    yield
            finally:
                self._bar.remove_task(task)
            return
        try:
            yield
        except BaseException:
            LOGGER.info("%s: failed after %.2f s", label, time.perf_counter() - start)
            raise
        LOGGER.info("%s: %.2f s", label, time.perf_counter() - start)
