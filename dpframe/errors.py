"""Exception and warning classes raised by dpframe.

Every error names the argument (or column) at fault and says how to fix it.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BudgetExceededError",
    "ChecksUnavailableError",
    "DPFrameError",
    "EpsilonAtEdgeWarning",
    "EpsilonNotFoundError",
    "InvalidDataError",
    "InvalidParameterError",
    "LedgerIntegrityError",
    "LedgerMismatchError",
    "LedgerReadOnlyError",
    "LedgerUnavailableError",
    "LineageError",
    "MissingMarginsError",
    "NamespaceConflictWarning",
    "NoAccountantError",
    "PublishFailedError",
    "ReleaseInterrupted",
    "ReleaseNotArmedError",
    "ReleaseReuseError",
    "UnsafeSeedWarning",
]


class DPFrameError(Exception):
    """Base class of every dpframe error.

    Examples
    --------
    >>> import dpframe
    >>> try:
    ...     dpframe.Accountant(epsilon=-1.0)
    ... except dpframe.DPFrameError as exc:  # catches every error dpframe raises
    ...     print(type(exc).__name__)
    InvalidParameterError
    """


class InvalidParameterError(DPFrameError, ValueError):
    """A parameter has a bad value or type (the message names it and the fix).

    Examples
    --------
    >>> import dpframe
    >>> try:
    ...     dpframe.Accountant(epsilon=-1.0)
    ... except dpframe.InvalidParameterError as exc:
    ...     print("epsilon" in str(exc), isinstance(exc, ValueError))
    True True
    """


class EpsilonNotFoundError(InvalidParameterError):
    """:func:`dpframe.risk.choose_epsilon` found no ε on its grid whose risk meets the
    target (the message gives the smallest risk reached and how to change the question).

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe.errors import EpsilonNotFoundError
    >>> from dpframe.risk import choose_epsilon
    >>> try:
    ...     choose_epsilon(np.array([[5, 0], [0, 3]]), 0.0)  # no risk at all: no epsilon
    ... except EpsilonNotFoundError:
    ...     print("refused")
    refused
    """


class LineageError(InvalidParameterError):
    """A query holding a ``.dp`` release would let out something no release produced, or
    select or order its rows by a column it does not publish (decided from the query's
    plan, before anything is read or charged).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> people = pl.LazyFrame({"c": ["a", "b"], "secret": [1, 2]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     query = people.select(pl.col("c").dp.pram(1.0, categories=["a", "b"]), "secret")
    ...     try:
    ...         dpframe.collect(query)  # "secret" is neither released nor public=
    ...     except dpframe.LineageError:
    ...         print("refused; spent", acct.spent.epsilon)
    refused; spent 0.0
    """


class PublishFailedError(DPFrameError):
    """A release failed after its charge (a write, or a check of what the randomizing pass
    read): the budget stays spent (noise may have been drawn), nothing was published; the
    message says what was spent and why.

    Examples
    --------
    >>> import dpframe
    >>> issubclass(dpframe.PublishFailedError, dpframe.DPFrameError)  # the budget stays spent
    True
    """


class InvalidDataError(DPFrameError, ValueError):
    """The data itself cannot be released as asked (nulls, NaN, wrong dtype, unknown keys).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> release = pl.DataFrame({"g": ["a", "z"]}).dp.group_by(
    ...     "g", margins=pl.DataFrame({"g": ["a"]}), accountant=acct  # "z" is not a public key
    ... ).agg(dpframe.agg.count(epsilon=0.5))
    >>> try:
    ...     release.collect()
    ... except dpframe.InvalidDataError:
    ...     print("refused; spent", acct.spent.epsilon)
    refused; spent 0.0
    """


class BudgetExceededError(DPFrameError):
    """A release would spend more privacy budget than remains.

    Raised by the accountant *before* any noise is drawn; nothing is charged.

    Examples
    --------
    >>> import dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> try:
    ...     acct.spend(2.0, mechanism="laplace")
    ... except dpframe.BudgetExceededError as exc:
    ...     print(exc.requested_epsilon, acct.spent.epsilon)
    2.0 0.0
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        budget_epsilon: float = float("nan"),
        budget_delta: float = float("nan"),
        spent_epsilon: float = float("nan"),
        spent_delta: float = float("nan"),
        requested_epsilon: float = float("nan"),
        requested_delta: float = float("nan"),
    ) -> None:
        # polars re-raises an exception from inside a query as type(exc)(message): keep a
        # positional message so that works.
        self.budget_epsilon = budget_epsilon
        self.budget_delta = budget_delta
        self.spent_epsilon = spent_epsilon
        self.spent_delta = spent_delta
        self.requested_epsilon = requested_epsilon
        self.requested_delta = requested_delta
        if message is None:
            message = (
                f"privacy budget exceeded: budget epsilon={budget_epsilon:g}, "
                f"delta={budget_delta:g}; already spent epsilon={spent_epsilon:g}, "
                f"delta={spent_delta:g}; this release requests epsilon={requested_epsilon:g}, "
                f"delta={requested_delta:g}. Nothing was charged and no noise was drawn. "
                "Lower the release's epsilon/delta or use an accountant with a larger budget."
            )
        super().__init__(message)


class LedgerMismatchError(DPFrameError):
    """A ledger file was opened with another budget or neighbour relation than it was made with.

    When one setting differs, ``key`` names it (``"epsilon"``, ``"rho"``, ...), with the
    ledger's ``recorded`` value and the ``asked`` one; otherwise they are ``None``.

    Examples
    --------
    >>> import os, tempfile, dpframe
    >>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
    >>> _ = dpframe.Accountant.open(path, epsilon=1.0)
    >>> try:
    ...     dpframe.Accountant.open(path, epsilon=2.0)
    ... except dpframe.LedgerMismatchError:
    ...     print("refused: the ledger was made with epsilon=1.0")
    refused: the ledger was made with epsilon=1.0
    """

    key: str | None = None
    recorded: object = None
    asked: object = None


class LedgerIntegrityError(LedgerMismatchError):
    """A ledger failed verification: edited, reordered, truncated, deleted or swapped.

    The budget it records may have been spent; nothing is charged against it until it is
    restored (from a backup) and verifies again.

    Examples
    --------
    >>> import dpframe
    >>> issubclass(dpframe.LedgerIntegrityError, dpframe.LedgerMismatchError)
    True
    """


class LedgerReadOnlyError(LedgerMismatchError):
    """A ledger that can be read but not charged (an old JSON ledger: migrate it first).

    Examples
    --------
    >>> import dpframe
    >>> issubclass(dpframe.LedgerReadOnlyError, dpframe.LedgerMismatchError)
    True
    """


class LedgerUnavailableError(DPFrameError):
    """The ledger's database could not be read or written (held by another job for too
    long, or an I/O error); the transaction was rolled back and nothing was charged.

    Examples
    --------
    >>> import dpframe
    >>> issubclass(dpframe.LedgerUnavailableError, dpframe.DPFrameError)  # retry later
    True
    """


class NoAccountantError(DPFrameError):
    """A release was asked for without an accountant to charge.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> noisy = pl.col("m").dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel")
    >>> try:
    ...     pl.DataFrame({"m": [1.0]}).with_columns(noisy)  # built outside `with accountant:`
    ... except dpframe.NoAccountantError:
    ...     print("refused")
    refused
    """


class ReleaseReuseError(DPFrameError):
    """A release that has already materialised was asked to produce fresh noise.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     noisy = pl.col("m").dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel")
    >>> _ = pl.DataFrame({"m": [1.0]}).with_columns(noisy)  # charged and noised once
    >>> try:
    ...     pl.DataFrame({"m": [5.0]}).with_columns(noisy)  # other values: fresh noise
    ... except dpframe.ReleaseReuseError:
    ...     print("refused")
    refused
    """


#: the last ReleaseInterrupted made (in any thread: polars may run a query's Python in
#: its own): [message, signum, charged, published]
_LAST_INTERRUPT: list[Any] = []


class ReleaseInterrupted(KeyboardInterrupt):
    """A release job was stopped by SIGINT (Ctrl-C) or SIGTERM, or a release by a
    ``KeyboardInterrupt`` after its charge.

    A ``KeyboardInterrupt`` (so ``except Exception`` does not swallow it). A job raises it
    once (:mod:`dpframe.core.interrupts`), after giving back what its reservation had not
    drawn; a release or query run (:func:`dpframe.core.executor.drawing`) once its charge
    is made. Its message says what was spent and, for a job, what it published;
    ``charged`` holds the ledger entries (``None``: raised before a job began, nothing
    spent), ``published`` the run a job published (``None``: nothing) and ``exit_code`` the
    ``dpframe`` command's exit code, 128 + the signal's number (130 for SIGINT, 143 for
    SIGTERM).

    Examples
    --------
    >>> import signal
    >>> from dpframe.errors import ReleaseInterrupted
    >>> ReleaseInterrupted(signum=signal.SIGTERM).exit_code
    143
    """

    def __init__(
        self,
        message: str = "",
        *,
        signum: int = signal.SIGINT,
        charged: Sequence[Any] | None = None,
        published: str | None = None,
    ) -> None:
        last = _LAST_INTERRUPT[:]
        if (
            last
            and message.startswith(last[0] + "\n")
            and (signum, charged, published) == (signal.SIGINT, None, None)
        ):  # polars re-raising one from inside a query as type(exc)(message): the same
            signum, charged, published = last[1:]
        self.signum = int(signum)
        #: the job's ledger entries (``None``: the job had not begun, nothing was spent)
        self.charged = None if charged is None else tuple(charged)
        self.published = published
        super().__init__(message or f"interrupted by {self.signal_name}")
        _LAST_INTERRUPT[:] = [str(self), self.signum, self.charged, self.published]

    @property
    def signal_name(self) -> str:
        """``"SIGINT (Ctrl-C)"`` or ``"SIGTERM"`` (the signal's name)."""
        try:
            name = signal.Signals(self.signum).name
        except ValueError:
            name = f"signal {self.signum}"
        return f"{name} (Ctrl-C)" if self.signum == signal.SIGINT else name

    @property
    def exit_code(self) -> int:
        """The ``dpframe`` command's exit code: 128 + the signal's number."""
        return 128 + self.signum


class ReleaseNotArmedError(DPFrameError):
    """A row-wise release (``.dp.pram``) was evaluated outside a dpframe runner.

    Row-wise releases are charged once per run of :func:`dpframe.collect` /
    :func:`dpframe.sink_parquet`; a plain ``collect()`` cannot be charged, so it refuses.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> frame = pl.DataFrame({"c": ["a", "b"]})
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     try:
    ...         frame.with_columns(pl.col("c").dp.pram(1.0, categories=["a", "b"]))
    ...     except dpframe.ReleaseNotArmedError:
    ...         print("refused: run it with dpframe.collect")
    refused: run it with dpframe.collect
    """


class MissingMarginsError(DPFrameError, ValueError):
    """A grouped release has no public key frame, so empty groups would vanish silently.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     try:
    ...         pl.DataFrame({"g": ["a"]}).dp.group_by("g", margins=None)
    ...     except dpframe.MissingMarginsError:
    ...         print("refused: margins= is the public list of groups")
    refused: margins= is the public list of groups
    """


class ChecksUnavailableError(DPFrameError):
    """Great Expectations, which checks a release before it is published, cannot be loaded.

    A release job loads it before it charges anything, so this error spends no budget.

    Examples
    --------
    >>> from dpframe.errors import ChecksUnavailableError, DPFrameError
    >>> issubclass(ChecksUnavailableError, DPFrameError)
    True
    """


class UnsafeSeedWarning(UserWarning):
    """A seeded (reproducible) random source is in use: its output is not safe to publish.

    Examples
    --------
    >>> import warnings, polars as pl, dpframe
    >>> with warnings.catch_warnings(record=True) as caught, dpframe.Accountant(epsilon=1.0):
    ...     warnings.simplefilter("always")
    ...     _ = pl.DataFrame({"m": [1.0]}).with_columns(
    ...         pl.col("m").dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel", seed=1)
    ...     )
    >>> any(w.category is dpframe.UnsafeSeedWarning for w in caught)
    True
    """


class EpsilonAtEdgeWarning(UserWarning):
    """:func:`dpframe.risk.choose_epsilon` chose an ε the risk target does not bound: the
    top of its grid (the risk meets the target up to there, so the grid chose, not the
    risk), or the top of a stretch above ε where the risk exceeds the target (smaller ε
    leave *more* risk).

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from dpframe.errors import EpsilonAtEdgeWarning
    >>> from dpframe.risk import choose_epsilon
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     choice = choose_epsilon(np.array([[5, 0], [0, 3]]), 1.0)  # any risk will do
    >>> choice.epsilon, seen[0].category is EpsilonAtEdgeWarning
    (100.0, True)
    """


class NamespaceConflictWarning(UserWarning):
    """Another package already owns the ``dp`` namespace on polars objects.

    Examples
    --------
    >>> import dpframe
    >>> issubclass(dpframe.NamespaceConflictWarning, UserWarning)  # .dpf is always dpframe's
    True
    """
