"""How many rows a streamed step has put through, for a progress bar.

The row-wise step (PRAM) runs in polars' threads, morsel by morsel; it calls
:func:`rows_done` with each morsel's length. A job step that wants to show it wraps the
write in :func:`counting_rows`. Only counts pass: never a value.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

__all__ = ["counting_rows", "rows_done"]

_LOCK = threading.Lock()
_LISTENER: Callable[[int], None] | None = None


@contextlib.contextmanager
def counting_rows(listener: Callable[[int], None] | None) -> Iterator[None]:
    """Send :func:`rows_done` counts to ``listener`` while the block runs (``None``: drop
    them).

    Examples
    --------
    >>> seen = []
    >>> with counting_rows(seen.append):
    ...     rows_done(100_000)
    >>> rows_done(5)  # outside the block: nobody listens
    >>> seen
    [100000]
    """
    global _LISTENER
    with _LOCK:
        previous, _LISTENER = _LISTENER, listener
    try:
        yield
    finally:
        with _LOCK:
            _LISTENER = previous


def rows_done(n: int) -> None:
    """A streamed step has put ``n`` more rows through."""
    listener = _LISTENER
    if listener is not None:
        listener(n)
