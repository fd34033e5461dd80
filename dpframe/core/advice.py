"""Advice in the words of the entry point: a Python argument, a release spec's field, or a
``dpframe`` command's option.

An error names the fix; the fix is written differently for who reads it. A function
called from Python is told ``unknown_keys='drop'``; the same refusal reached from a release
spec says ``unknown_keys = "drop"`` on the release, and from the command line (outside a
spec) an option. The entry point says who it is (:func:`entry`: the spec's loading,
planning and running, the ``dpframe`` command); a message picks its advice with
:func:`advise`. Python is the default: code that never says otherwise is advised in
Python.

Examples
--------
>>> from dpframe.core.advice import advise, entry
>>> advise(python="pass nulls='drop'", spec='set nulls = "drop"')
"pass nulls='drop'"
>>> with entry("spec"):
...     advise(python="pass nulls='drop'", spec='set nulls = "drop"')
'set nulls = "drop"'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, TypeVar, cast

__all__ = ["ENTRIES", "advise", "current_entry", "entry", "spec_entry"]

#: The entry points whose words an error's advice can be in.
ENTRIES = ("python", "spec", "cli")
Entry = Literal["python", "spec", "cli"]

_ENTRY: ContextVar[str] = ContextVar("dpframe_entry", default="python")

F = TypeVar("F", bound=Callable[..., Any])


def current_entry() -> str:
    """``"python"``, ``"spec"`` or ``"cli"``: whose words advice is given in."""
    return _ENTRY.get()


@contextmanager
def entry(kind: Entry) -> Iterator[None]:
    """Give the advice of errors raised inside in the words of ``kind``."""
    if kind not in ENTRIES:
        raise ValueError(f"entry must be one of {ENTRIES}, got {kind!r}")
    token = _ENTRY.set(kind)
    try:
        yield
    finally:
        _ENTRY.reset(token)


def spec_entry(function: F) -> F:
    """Decorate a function that loads, plans or runs a release spec: errors raised inside
    advise in the spec's words."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with entry("spec"):
            return function(*args, **kwargs)

    return cast(F, wrapper)


def advise(*, python: str, spec: str, cli: str | None = None) -> str:
    """The advice for the current entry point (``cli`` defaults to ``spec``'s words, for
    a command that runs a spec or takes the same names as options)."""
    kind = _ENTRY.get()
    if kind == "spec":
        return spec
    if kind == "cli":
        return spec if cli is None else cli
    return python
