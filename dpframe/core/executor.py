"""The one path every release takes: check, charge, draw, record.

A mechanism (:mod:`dpframe.mechanisms`) describes a release as a *plan*, made from its
parameters alone -- no data -- and two steps that read the confidential data::

    plan = mechanisms.<kernel>.plan(params)    # charges, calibration, expected error
    plan.check(exact)                          # the data: refuse, spending nothing
    plan.draw(exact, rng)                      # the noise, only after the charge

:func:`execute` runs a list of such :class:`Step` s (a plan and its exact inputs) and is
the only code in dpframe that charges an accountant:

1. **check** every step against its exact inputs (bad data raises here: nothing spent);
2. **charge** all their charges at once, atomically (all are recorded, or none is, and
   :class:`~dpframe.errors.BudgetExceededError` leaves nothing drawn);
3. **draw** each step from a freshly keyed generator of its own random source;
4. **record**: the ledger entries come back with the outputs, for provenance.

If a draw fails after the charge, the budget stays spent: noise may have been drawn. If it
is interrupted (Ctrl-C: ``KeyboardInterrupt``), :class:`~dpframe.errors.ReleaseInterrupted`
says what the charge spent.

A release object materialises once (:class:`Once`): a second ``collect()`` returns the
same output, and evaluating it on other data refuses, never drawing fresh noise under
the first charge.

Examples
--------
>>> import numpy as np, dpframe
>>> from dpframe.core.executor import Step, execute
>>> from dpframe.mechanisms.laplace import plan_laplace
>>> acct = dpframe.Accountant(epsilon=1.0)
>>> plan = plan_laplace(epsilon=0.5, sensitivity=1.0, column="count")
>>> run = execute([Step(plan, np.array([10.0, 20.0]))], acct)
>>> run.outputs[0].shape, acct.spent.epsilon
((2,), 0.5)
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from dpframe.core.accountant import Accountant, Charge, LedgerEntry
from dpframe.core.budget import exact_sum
from dpframe.core.interrupts import ledger_line
from dpframe.core.randomness import RandomSource
from dpframe.errors import (
    InvalidParameterError,
    NoAccountantError,
    ReleaseInterrupted,
    ReleaseReuseError,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SUMMARY_FIELDS",
    "Execution",
    "MechanismPlan",
    "Once",
    "Step",
    "drawing",
    "execute",
    "require_accountant",
    "summary_row",
]

T = TypeVar("T")


#: The fields of a plan's summary row, in order (``summarize()``, ``dpframe plan``).
SUMMARY_FIELDS = (  # what a reader looks for first
    "statistic",
    "mechanism",
    "epsilon",
    "error95",
    "scale",
    "sensitivity",
    "delta",
    "rho",
    "note",
)


def summary_row(
    statistic: str | None,
    mechanism: str,
    epsilon: float,
    *,
    delta: float = 0.0,
    sensitivity: float | None = None,
    scale: float | None = None,
    error95: float | None = None,
    note: str = "",
    rho: float | None = None,
) -> dict[str, Any]:
    """One row of a plan's summary: what a statistic costs (charged) and how noisy it is.

    ``rho`` is what it costs on a zCDP budget: a Gaussian release's own rho, or
    ``epsilon**2 / 2`` for a pure epsilon-DP one (null for an (epsilon, delta) release).

    ``error95`` is the half-width that holds the noise with probability 0.95 (``None``
    where it depends on the data, e.g. a ratio of noisy sums and counts).
    """
    return {
        "statistic": statistic,
        "mechanism": mechanism,
        "epsilon": float(epsilon),
        "delta": float(delta),
        "rho": float(rho) if rho is not None else (None if delta else float(epsilon) ** 2 / 2),
        "sensitivity": None if sensitivity is None else float(sensitivity),
        "scale": None if scale is None else float(scale),
        "error95": None if error95 is None else float(error95),
        "note": note,
    }


class MechanismPlan(Protocol):
    """What a kernel's plan gives the executor (see the module docstring).

    ``charges`` are fixed by the parameters (never read from the data or from an object
    that claims its own epsilon); ``summary()`` lists, per charged statistic, what it
    costs and how noisy it is, for ``summarize()`` and ``dpframe plan``.
    """

    @property
    def charges(self) -> tuple[Charge, ...]: ...

    def summary(self) -> list[dict[str, Any]]: ...

    def check(self, exact: Any) -> None: ...

    def draw(self, exact: Any, rng: np.random.Generator) -> Any: ...


@dataclass(frozen=True)
class Step:
    """One release ready to run: its plan, its exact inputs, and where its noise comes from."""

    plan: MechanismPlan
    exact: Any = None
    source: RandomSource = field(default_factory=RandomSource)
    #: the release's name (a spec's release name), recorded in its ledger entries
    name: str | None = None


@dataclass(frozen=True)
class Execution:
    """What :func:`execute` did: each step's output, and the ledger entries that paid."""

    outputs: tuple[Any, ...]
    entries: tuple[LedgerEntry, ...]
    #: how many of ``entries`` each step made, in order
    counts: tuple[int, ...]

    def entries_of(self, i: int) -> tuple[LedgerEntry, ...]:
        """The ledger entries of step ``i``."""
        start = sum(self.counts[:i])
        return self.entries[start : start + self.counts[i]]


def require_accountant(accountant: Any, what: str) -> Accountant:
    """``accountant`` if it is one, else a clear error naming the release."""
    if accountant is None:
        raise NoAccountantError(
            f"{what} has no accountant to charge: build it inside `with accountant:` or "
            "pass accountant=...; nothing was charged or drawn"
        )
    if not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"accountant must be a dpframe.Accountant, got {type(accountant).__name__}"
        )
    return accountant


def execute(steps: Sequence[Step], accountant: Accountant | None, *, note: str = "") -> Execution:
    """Check every step, charge them all atomically, then draw each one.

    Parameters
    ----------
    steps : sequence of Step
        The releases to run together (one charge, recorded under one release id).
    accountant : Accountant
        Charged once for everything, before any noise is drawn.
    note : str
        Recorded with every ledger entry that has no note of its own.

    Returns
    -------
    Execution
        The outputs of the steps' draws, in order, and the ledger entries.

    Raises
    ------
    InvalidDataError
        From a step's check: nothing was charged or drawn.
    BudgetExceededError
        The charges do not fit: nothing was charged or drawn.
    ReleaseInterrupted
        Interrupted (``KeyboardInterrupt``) after the charge, as the noise was drawn: the
        charge stays spent, and the message says how much.
    """
    acct = require_accountant(accountant, "this release")
    steps = list(steps)
    if not steps:
        raise InvalidParameterError("steps: nothing to release")
    for s in steps:
        if not isinstance(s, Step):
            raise InvalidParameterError(f"steps must be Step objects, got {type(s).__name__}")
    memo: dict[int, Any] = {}  # an input two steps share (one histogram) is copied once
    steps = [_snapshot(s, memo) for s in steps]
    for s in steps:
        s.plan.check(s.exact)
    charges = [
        c if s.name is None else dataclasses.replace(c, name=s.name)
        for s in steps
        for c in s.plan.charges
    ]
    counts = tuple(len(s.plan.charges) for s in steps)
    entries: Sequence[LedgerEntry] = ()
    try:
        entries = acct.spend_all(charges, note=note) if charges else ()
        outputs = tuple(s.plan.draw(s.exact, s.source.generator()) for s in steps)
    except KeyboardInterrupt as exc:  # an interrupt as the charge was written, or after
        made = tuple(entries) or tuple(getattr(exc, "recorded", ()))
        if not made or getattr(exc, "charged", None) is not None:
            raise  # nothing charged, or said already
        raise _interrupted(exc, acct, made) from exc
    return Execution(outputs, tuple(entries), counts)


@contextlib.contextmanager
def drawing(acct: Accountant | None, entries: Sequence[LedgerEntry]) -> Iterator[None]:
    """The draw (or a query's real pass) after a charge: a ``KeyboardInterrupt`` inside
    becomes :class:`~dpframe.errors.ReleaseInterrupted`, saying what the charge spent."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if acct is None or not entries or getattr(exc, "charged", None) is not None:
            raise  # nothing charged, or said already
        raise _interrupted(exc, acct, entries) from exc


def _interrupted(
    exc: KeyboardInterrupt, acct: Accountant, entries: Sequence[LedgerEntry]
) -> ReleaseInterrupted:
    """What an interrupt during the draw says: the charge stays spent, nothing released."""
    signum = exc.signum if isinstance(exc, ReleaseInterrupted) else ReleaseInterrupted().signum
    name = ReleaseInterrupted(signum=signum).signal_name
    eps = float(exact_sum(e.epsilon for e in entries))
    delta = float(exact_sum(e.delta for e in entries))
    message = (
        f"the release was interrupted by {name} after its charge: epsilon {eps:g}"
        + (f" and delta {delta:g}" if delta else "")
        + " stays spent (its noise may have been drawn); nothing was released."
    )
    message += " " + ledger_line(acct)
    return ReleaseInterrupted(message, signum=signum, charged=entries)


def _snapshot(step: Step, memo: dict[int, Any]) -> Step:
    """The step with its own copy of the plan and exact inputs, taken at charge time.

    Everything the draw samples from (a PRAM sampler's integers, scales, tables) and
    everything the charge is derived from is copied here into objects no caller holds,
    and the charges are derived again from the copy (a sampler's epsilon is recomputed
    from its copied integers): mutating a design, a matrix or a plan after planning
    changes nothing already charged, and what is charged is what is drawn. ``memo`` is
    shared by the steps of one execution: an exact input several steps read (the
    histogram of a median and of quartiles of one column) is copied once, and its copy
    is read-only, so no step's draw can change what another reads.
    """
    try:
        plan = copy.deepcopy(step.plan)
        exact = copy.deepcopy(step.exact, memo)
        _read_only(exact)
    except Exception as exc:  # fail closed: a plan that cannot be copied is not drawn
        raise InvalidParameterError(
            f"the release's plan cannot be copied at charge time ({type(exc).__name__}: "
            f"{exc}); nothing was charged"
        ) from None
    return Step(plan, exact, step.source, step.name)


def _read_only(value: Any) -> None:
    """Mark every numpy array in ``value`` (nested in dicts, lists, tuples) read-only."""
    import numpy as np

    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, dict):
        for v in value.values():
            _read_only(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _read_only(v)


class Once:
    """The single materialisation of a release.

    The first :meth:`get` runs ``make`` (which charges and draws, through
    :func:`execute`) and keeps its result with the ``key`` of the inputs it used. A later
    call with the same key returns that very result; with another key it raises
    :class:`~dpframe.errors.ReleaseReuseError`: fresh noise would be a new release,
    which needs a new charge. Thread-safe: polars may evaluate a release from several
    threads, and only one of them charges.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._key: Hashable = None
        self._value: Any = None

    @property
    def done(self) -> bool:
        """True once the release has been charged and drawn."""
        return self._done

    @property
    def value(self) -> Any:
        """The materialised result (``None`` before)."""
        return self._value

    def get(self, key: Hashable, make: Callable[[], T], *, what: str) -> T:
        """The result for ``key``: made once, then returned again; other keys refuse."""
        with self._lock:
            if self._done:
                if key == self._key:
                    return self._value
                raise ReleaseReuseError(
                    f"{what} has already been released; releasing it again on other values "
                    "would draw fresh noise without a charge. Build a new release for new "
                    "data (if polars is calling it once per group, inside group_by().agg(), "
                    "use dpframe.group_by(frame, keys, margins=...) instead)"
                )
            value = make()
            self._key, self._value, self._done = key, value, True
            return value

    @contextlib.contextmanager
    def held(self, key: Hashable, *, what: str) -> Iterator[Callable[[Any], None]]:
        """Hold the release while a runner charges it with others: yields ``settle(value)``.

        Refuses, before the charge, a release another evaluation made meanwhile (another
        thread's eager release of the same object); other evaluations wait until the
        runner has settled it, then get its values (same key) or refuse (another key).
        """
        with self._lock:
            if self._done:
                raise ReleaseReuseError(
                    f"{what} was released by another evaluation while this run was "
                    "prepared; nothing was charged for the run"
                )

            def settle(value: Any) -> None:
                self._key, self._value, self._done = key, value, True

            yield settle
