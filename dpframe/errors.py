"""Exception and warning classes raised by dpframe.

Every error names the argument (or column) at fault and says how to fix it.
"""

from __future__ import annotations

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
    "ReleaseNotArmedError",
    "ReleaseReuseError",
    "UnsafeSeedWarning",
]


class DPFrameError(Exception):
    """Base class of every dpframe error."""


class InvalidParameterError(DPFrameError, ValueError):
    """A parameter has a bad value or type (the message names it and the fix)."""


class EpsilonNotFoundError(InvalidParameterError):
    """:func:`dpframe.risk.choose_epsilon` found no ε on its grid whose risk meets the
    target (the message gives the smallest risk reached and how to change the question)."""


class LineageError(InvalidParameterError):
    """A query holding a ``.dp`` release would let out something no release produced, or
    select or order its rows by a column it does not publish (decided from the query's
    plan, before anything is read or charged)."""


class PublishFailedError(DPFrameError):
    """A release failed after its charge (a write, or a check of what the randomizing pass
    read): the budget stays spent (noise may have been drawn), nothing was published; the
    message says what was spent and why."""


class InvalidDataError(DPFrameError, ValueError):
    """The data itself cannot be released as asked (nulls, NaN, wrong dtype, unknown keys)."""


class BudgetExceededError(DPFrameError):
    """A release would spend more privacy budget than remains.

    Raised by the accountant *before* any noise is drawn; nothing is charged.
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
    """

    key: str | None = None
    recorded: object = None
    asked: object = None


class LedgerIntegrityError(LedgerMismatchError):
    """A ledger failed verification: edited, reordered, truncated, deleted or swapped.

    The budget it records may have been spent; nothing is charged against it until it is
    restored (from a backup) and verifies again.
    """


class LedgerReadOnlyError(LedgerMismatchError):
    """A ledger that can be read but not charged (an old JSON ledger: migrate it first)."""


class LedgerUnavailableError(DPFrameError):
    """The ledger's database could not be read or written (held by another job for too
    long, or an I/O error); the transaction was rolled back and nothing was charged."""


class NoAccountantError(DPFrameError):
    """A release was asked for without an accountant to charge."""


class ReleaseReuseError(DPFrameError):
    """A release that has already materialised was asked to produce fresh noise."""


class ReleaseNotArmedError(DPFrameError):
    """A row-wise release (``.dp.pram``) was evaluated outside a dpframe runner.

    Row-wise releases are charged once per run of :func:`dpframe.collect` /
    :func:`dpframe.sink_parquet`; a plain ``collect()`` cannot be charged, so it refuses.
    """


class MissingMarginsError(DPFrameError, ValueError):
    """A grouped release has no public key frame, so empty groups would vanish silently."""


class ChecksUnavailableError(DPFrameError):
    """Great Expectations, which checks a release before it is published, cannot be loaded.

    A release job loads it before it charges anything, so this error spends no budget.
    """


class UnsafeSeedWarning(UserWarning):
    """A seeded (reproducible) random source is in use: its output is not safe to publish."""


class EpsilonAtEdgeWarning(UserWarning):
    """:func:`dpframe.risk.choose_epsilon` chose an ε the risk target does not bound: the
    top of its grid (the risk meets the target up to there, so the grid chose, not the
    risk), or the top of a stretch above ε where the risk exceeds the target (smaller ε
    leave *more* risk)."""


class NamespaceConflictWarning(UserWarning):
    """Another package already owns the ``dp`` namespace on polars objects."""
