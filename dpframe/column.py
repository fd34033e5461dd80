"""A release on one column of statistics: charged once, noised once.

:func:`laplace` builds a polars expression whose evaluation is a
:class:`ColumnRelease`. The release keeps the rules of DESIGN.md, "Charge when a
release materialises, exactly once":

* It is bound at build time to an accountant (``accountant=`` or the innermost
  ``with accountant:`` block). Evaluated without one, it raises
  :class:`~dpframe.errors.NoAccountantError` and draws nothing.
* polars evaluates it as one whole column (it is not elementwise), so a streaming
  query calls it once, not once per morsel.
* The first evaluation computes the noise scale, charges the accountant (which raises
  :class:`~dpframe.errors.BudgetExceededError` before any noise is drawn), then draws.
* Evaluated again on the same input (a second ``collect()``), it returns the very same
  released values. Evaluated on different input -- new data, or polars calling it once
  per group inside ``group_by().agg()`` -- it raises
  :class:`~dpframe.errors.ReleaseReuseError`: fresh noise would be a new release, which
  needs a new expression (and a new charge). Grouped statistics belong in
  :func:`dpframe.group_by`, which also keeps empty groups from vanishing.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe._validation import (
    COMPOSITIONS,
    check_choice,
    check_epsilon,
    check_positive,
)
from dpframe.accountant import Accountant, LedgerEntry, current_accountant
from dpframe.errors import (
    InvalidDataError,
    InvalidParameterError,
    NoAccountantError,
    ReleaseReuseError,
)
from dpframe.random import RandomSource, as_source

if TYPE_CHECKING:  # numpy and the kernels are imported on first use: `import dpframe` stays fast
    from collections.abc import Iterator

    import numpy as np

    from dpframe.mechanisms.laplace import LaplaceCalibration

__all__ = ["ColumnRelease", "laplace", "pending_releases"]

_PENDING: weakref.WeakSet[ColumnRelease] = weakref.WeakSet()
_PENDING_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Memo:
    fingerprint: str
    output: pl.Series


def _fingerprint(values: np.ndarray) -> str:
    import numpy as np

    h = hashlib.blake2b(digest_size=16)
    h.update(str(values.shape).encode())
    h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


class ColumnRelease:
    """One Laplace release of a column of statistics (the callable polars runs).

    Not built directly: use :func:`laplace` or ``pl.col(...).dp.laplace(...)``.
    """

    mechanism = "laplace"

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: float,
        composition: str,
        public_groups: bool,
        granularity: float | None,
        accountant: Accountant | None,
        random: RandomSource,
        column: str | None,
    ) -> None:
        self.id = uuid.uuid4().hex
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.composition = check_choice("composition", composition, COMPOSITIONS)
        if not isinstance(public_groups, bool):
            raise InvalidParameterError(
                f"public_groups must be True or False, got {public_groups!r}"
            )
        self.public_groups = public_groups
        self.granularity = granularity
        self.accountant = accountant
        self.random = random
        self.column = column
        self.entry: LedgerEntry | None = None
        self._memo: _Memo | None = None
        self._lock = threading.Lock()
        if granularity is not None:  # validate now, not at collect time
            from dpframe.mechanisms.laplace import calibrate_laplace

            calibrate_laplace(self.epsilon, self.sensitivity, granularity)
        with _PENDING_LOCK:
            _PENDING.add(self)

    # -- calibration ------------------------------------------------------------------

    def row_multiplier(self) -> int:
        """How many rows one record can change (parallel) -- 2 when it can switch group."""
        if self.composition == "sequential":
            return 1
        neighbours = self.accountant.neighbours if self.accountant else "substitute"
        return 2 if neighbours == "substitute" and not self.public_groups else 1

    def calibration(self, n_rows: int) -> LaplaceCalibration:
        """The grid-Laplace calibration for a column of ``n_rows`` statistics.

        ``"parallel"``: each row is a statistic of a disjoint group; scale
        ``k * sensitivity / epsilon`` with ``k = 2`` under ``"substitute"`` unless
        ``public_groups`` (a record that changes may leave one group and join another).
        ``"sequential"``: the rows are statistics of the same records; the l1
        sensitivity is ``n_rows * sensitivity``.
        """
        from dpframe.mechanisms.laplace import calibrate_laplace

        if self.composition == "parallel":
            total = self.row_multiplier() * self.sensitivity
        else:
            total = max(n_rows, 1) * self.sensitivity
        return calibrate_laplace(self.epsilon, total, self.granularity)

    @property
    def materialised(self) -> bool:
        """True once the release has been charged and its noise drawn."""
        return self._memo is not None

    def summary(self, n_rows: int | None = None) -> dict[str, Any]:
        """Mechanism, epsilon, scale and 95% error, computed without drawing noise."""
        known = self.composition == "parallel" or n_rows is not None
        cal = self.calibration(n_rows or 1) if known else None
        return {
            "release": self.id,
            "column": self.column,
            "mechanism": self.mechanism,
            "composition": self.composition,
            "epsilon": self.epsilon,
            "delta": 0.0,
            "sensitivity": self.sensitivity,
            "scale": cal.scale if cal else None,
            "error95": cal.error(0.95) if cal else None,
            "materialised": self.materialised,
        }

    # -- evaluation (called by polars) ------------------------------------------------

    def __call__(self, series: pl.Series) -> pl.Series:
        import numpy as np

        from dpframe.mechanisms.laplace import check_values, release_laplace

        name = series.name
        if not series.dtype.is_numeric():
            raise InvalidDataError(
                f"column {name!r} has dtype {series.dtype}; .dp.laplace needs a numeric "
                f"column of statistics: cast it with pl.col({name!r}).cast(pl.Float64)"
            )
        if series.null_count():
            raise InvalidDataError(
                f"column {name!r} has {series.null_count()} null(s); a statistic to release "
                "must be known: fill or drop them before .dp.laplace"
            )
        values = series.cast(pl.Float64).to_numpy()
        if not np.isfinite(values).all():
            raise InvalidDataError(
                f"column {name!r} has NaN or infinite values; a statistic to release must be "
                "finite: fix them before .dp.laplace"
            )
        if values.size == 0:
            return pl.Series(name, [], dtype=pl.Float64)
        fp = _fingerprint(values)
        with self._lock:
            if self._memo is not None:
                if self._memo.fingerprint == fp:
                    return self._memo.output.alias(name)
                raise ReleaseReuseError(
                    f"release {self.id[:8]} on column {name!r} has already materialised; "
                    "evaluating it on other values would draw fresh noise without a charge. "
                    "If polars is calling it once per group (inside group_by().agg()), use "
                    "dpframe.group_by(frame, keys, margins=...) instead; for a new release, "
                    "build a new .dp.laplace expression"
                )
            if self.accountant is None:
                raise NoAccountantError(
                    f".dp.laplace on column {name!r} was built with no accountant, so it "
                    "cannot be charged: build it inside `with accountant:` or pass "
                    "accountant=..."
                )
            cal = self.calibration(values.size)
            check_values(values, cal)  # refuse bad values before anything is charged
            self.entry = self.accountant.spend(
                self.epsilon,
                0.0,
                mechanism=self.mechanism,
                columns=[name],
                scale=cal.scale,
                composition=self.composition,
                details={
                    "sensitivity": self.sensitivity,
                    "rows": int(values.size),
                    "granularity": cal.granularity,
                    "epsilon_used": float(cal.epsilon_used),
                    "public_groups": self.public_groups,
                    "seeded": self.random.seeded,
                },
            )
            noisy = release_laplace(values, cal, self.random.generator())
            out = pl.Series(name, noisy, dtype=pl.Float64)
            self._memo = _Memo(fp, out)
            with _PENDING_LOCK:
                _PENDING.discard(self)
            return out


def laplace(
    expr: pl.Expr | str,
    *,
    epsilon: float,
    sensitivity: float,
    composition: str,
    public_groups: bool = False,
    granularity: float | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> pl.Expr:
    """Release a column of statistics with (grid, exactly sampled) Laplace noise.

    Parameters
    ----------
    expr : polars.Expr or str
        The column of exact statistics (a name or an expression).
    epsilon : float
        The release's privacy cost (> 0), charged once.
    sensitivity : float
        l1 sensitivity of one row's statistic to one record, under the accountant's
        neighbour relation (> 0).
    composition : {"parallel", "sequential"}
        ``"parallel"``: one statistic per disjoint group of records; ``"sequential"``:
        all rows are statistics of the same records (their sensitivities add up).
        There is no default: say which.
    public_groups : bool, default False
        Only for ``"parallel"`` under ``"substitute"``: ``True`` if a record cannot move
        from one group to another (group membership is public), so a change touches one
        row; otherwise two rows can change and each gets twice the noise.
    granularity : float, optional
        Output grid step (a power of two); default ``sensitivity / 1024`` rounded down.
    accountant : Accountant, optional
        Default: the innermost ``with accountant:`` block at build time.
    seed : int or RandomSource, optional
        Reproducible noise for tests -- **unsafe for publication**.

    Returns
    -------
    polars.Expr
        A Float64 column of released values (same name).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> stats = pl.DataFrame({"mean_age": [41.2, 38.9, 45.0]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     out = stats.with_columns(
    ...         dpframe.laplace("mean_age", epsilon=0.5, sensitivity=0.1, composition="parallel")
    ...     )
    >>> acct.spent.epsilon
    0.5
    """
    if isinstance(expr, str):
        expr = pl.col(expr)
    if not isinstance(expr, pl.Expr):
        raise InvalidParameterError(
            f"expr must be a polars expression or a column name, got {type(expr).__name__}"
        )
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"accountant must be a dpframe.Accountant, got {type(accountant).__name__}"
        )
    release = ColumnRelease(
        epsilon=epsilon,
        sensitivity=sensitivity,
        composition=composition,
        public_groups=public_groups,
        granularity=granularity,
        accountant=accountant or current_accountant(),
        random=as_source(seed),
        column=_output_name(expr),
    )
    return expr.map_batches(release, return_dtype=pl.Float64, is_elementwise=False)


def _output_name(expr: pl.Expr) -> str | None:
    try:
        return expr.meta.output_name()
    except pl.exceptions.ComputeError:
        return None


def pending_releases(accountant: Accountant | None = None) -> Iterator[ColumnRelease]:
    """Column releases built (for ``accountant``, if given) but not yet materialised."""
    with _PENDING_LOCK:
        items = list(_PENDING)
    for r in items:
        if not r.materialised and (accountant is None or r.accountant is accountant):
            yield r
