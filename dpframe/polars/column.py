"""``.dp.laplace`` / ``.dp.truncated_laplace``: a column of statistics, charged once, noised once.

:func:`laplace` and :func:`truncated_laplace` build a polars expression whose
evaluation is a :class:`ColumnRelease` (the maths: :mod:`dpframe.mechanisms.column`).
It keeps the rules of ``docs/privacy.md``, "When a release is charged":

* It is bound at build time to an accountant (``accountant=`` or the innermost
  ``with accountant:`` block). Evaluated without one, it raises
  :class:`~dpframe.errors.NoAccountantError` and draws nothing.
* polars evaluates it as one whole column (it is not elementwise), so a streaming
  query calls it once, not once per morsel.
* The first evaluation checks the values, charges the accountant (through the executor:
  :class:`~dpframe.errors.BudgetExceededError` before any noise), then draws.
* Evaluated again on the same input (a second ``collect()``), it returns the very same
  released values. Evaluated on different input (new data) it raises
  :class:`~dpframe.errors.ReleaseReuseError`: fresh noise would be a new release, which
  needs a new expression (and a new charge).
* It is one column: an expression that expands to several (``pl.all()``) or to none is
  refused when the release is built, and polars evaluating it per group (inside
  ``group_by().agg()``, ``over()``, ``list.eval()``) is refused before anything is
  charged. Inside ``rolling().agg()`` polars cannot be told from a whole-column call:
  the first window is charged, the next refused.
* Inside a runner (``dpframe.collect``), its charge is made with the query's other
  releases, at once, after the dry pass.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import threading
import uuid
import weakref
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import polars as pl

from dpframe.core.accountant import Accountant, Charge, LedgerEntry
from dpframe.core.constraints import check, check_positive
from dpframe.core.executor import Once, Step, execute
from dpframe.core.randomness import RandomSource, as_source
from dpframe.core.values import check_finite
from dpframe.errors import (
    InvalidDataError,
    InvalidParameterError,
    ReleaseNotArmedError,
    ReleaseReuseError,
)
from dpframe.mechanisms.column import (
    ColumnPlan,
    GaussianColumnPlan,
    plan_column,
    plan_gaussian_column,
)
from dpframe.polars.release import resolve_accountant
from dpframe.polars.runner import Run, RunnerRelease

__all__ = ["ColumnRelease", "laplace", "pending_releases", "truncated_laplace"]

_PENDING: weakref.WeakSet[ColumnRelease] = weakref.WeakSet()
_PENDING_LOCK = threading.Lock()


def _fingerprint(values: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(str(values.shape).encode())
    h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def _numeric(series: pl.Series, name: str, what: str, allow_inf: bool = False) -> np.ndarray:
    """A numeric Series as a float array, refusing nulls, NaN (and infinities)."""
    if not series.dtype.is_numeric():
        raise InvalidDataError(
            f"column {name!r} has dtype {series.dtype}; {what} must be numeric: cast it "
            f"with pl.col({name!r}).cast(pl.Float64)"
        )
    if series.null_count():
        raise InvalidDataError(
            f"column {name!r} has {series.null_count()} null(s); {what} must be known: "
            "fill or drop them first"
        )
    values = series.cast(pl.Float64).to_numpy()
    if allow_inf:
        if np.isnan(values).any():
            raise InvalidDataError(f"column {name!r} has NaN values; {what} must be known")
    else:
        check_finite(values, name)
    return values


class ColumnRelease(RunnerRelease):
    """One release of a column of statistics (the callable polars runs).

    Not built directly: use :func:`laplace`, :func:`truncated_laplace` or the ``.dp``
    namespace.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> with acct:
    ...     noisy = pl.col("m").dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel")
    >>> [type(r).__name__ for r in dpframe.pending_releases(acct)]  # built, not yet run
    ['ColumnRelease']
    """

    def __init__(
        self,
        *,
        mechanism: str,
        epsilon: float | None,
        composition: str,
        public_groups: bool,
        sensitivity: float | None,
        lower: float | None = None,
        upper: float | None = None,
        calibration: str = "exact",
        granularity: float | None = None,
        row_params: tuple[str, ...] = (),
        accountant: Accountant | None,
        random: RandomSource,
        column: str | None,
        rho: float | None = None,
        sigma: float | None = None,
    ) -> None:
        self.id = uuid.uuid4().hex
        self.rho, self.sigma = rho, sigma
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.composition = composition
        self.public_groups = public_groups
        self.sensitivity = sensitivity
        self.lower, self.upper = lower, upper
        self.calibration = calibration
        self.granularity = granularity
        self.row_params = row_params
        self.accountant = accountant
        self.random = random
        self.column = column
        self.entry: LedgerEntry | None = None
        self._once = Once()
        # every parameter is checked now, not at collect time
        self._plan(1, self._stand_ins())
        with _PENDING_LOCK:
            _PENDING.add(self)

    def __repr__(self) -> str:
        cost = f"rho={self.rho:g}" if self.rho is not None else f"epsilon={self.epsilon:g}"
        if self.epsilon is None and self.rho is None:
            cost = f"sigma={self.sigma:g}"
        state = "released" if self.materialised else "not evaluated"
        return (
            f"ColumnRelease({self.mechanism} on {self.column!r}, {cost}, {self.composition}, "
            f"{state}, id={self.id[:8]})"
        )

    @property
    def neighbours(self) -> str:
        return self.accountant.neighbours if self.accountant is not None else "substitute"

    def _stand_ins(self) -> dict[str, np.ndarray]:
        """A valid value of each per-row parameter, to check the others with at
        declaration (its rows' own values are checked when the release reads them): a
        per-row bound one below (above) the other, fixed, bound; both per row: 0 and 1."""

        def real(v: Any) -> float | None:  # a fixed bound, if a usable number (else the
            # plan refuses it, whatever the stand-ins)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            return float(v) if ok else None

        fixed_lower, fixed_upper = real(self.lower), real(self.upper)
        lower = fixed_upper - 1.0 if fixed_upper is not None else 0.0
        upper = fixed_lower + 1.0 if fixed_lower is not None else lower + 1.0
        values = {"lower": lower, "upper": upper}
        return {k: np.full(1, values.get(k, 1.0)) for k in self.row_params}

    def _plan(self, n_rows: int, arrays: dict[str, np.ndarray]) -> ColumnPlan | GaussianColumnPlan:
        if self.mechanism == "gaussian":
            return plan_gaussian_column(
                composition=self.composition,
                public_groups=self.public_groups,
                neighbours=self.neighbours,
                n_rows=n_rows,
                column=self.column or "value",
                sensitivity=cast(float, self.sensitivity),  # given for Gaussian releases
                rho=self.rho,
                sigma=self.sigma,
                granularity=self.granularity,
            )
        return plan_column(
            mechanism=self.mechanism,
            epsilon=cast(float, self.epsilon),  # given for every non-Gaussian release
            composition=self.composition,
            public_groups=self.public_groups,
            neighbours=self.neighbours,
            n_rows=n_rows,
            column=self.column or "value",
            sensitivity=self.sensitivity,
            lower=self.lower,
            upper=self.upper,
            calibration=self.calibration,
            granularity=self.granularity,
            row_params=arrays or None,
        )

    @property
    def materialised(self) -> bool:
        """True once the release has been charged and its noise drawn."""
        return self._once.done

    def planned_charges(self) -> list[Charge]:
        """What a run charges, or more, known before the data: the plan's charges where
        they do not depend on the data (parallel, no per-row parameters; a Gaussian
        release's rho), else an upper bound (the paper calibration's loss is at most
        twice the epsilon asked: the truncated law's normalising constant moves by at
        most e^epsilon between neighbours)."""
        if not self.row_params and (self.composition == "parallel" or self.mechanism == "gaussian"):
            return list(self._plan(1, {}).charges)
        name = (self.column or "value",)
        if self.mechanism == "gaussian":
            return [Charge(0.0, 0.0, "gaussian", name, rho=self.rho)] if self.rho else []
        factor = 2.0 if self.calibration == "paper" else 1.0
        epsilon = factor * float(self.epsilon or 0.0)
        return [Charge(epsilon, 0.0, "planned", name)] if epsilon > 0 else []

    def summary(self, n_rows: int | None = None) -> list[dict[str, Any]]:
        """What the release costs and how noisy it is, without reading data.

        A sequential release's cost per row depends on its row count, and per-row
        parameters on the data: then the row shows the epsilon asked for, and no scale.
        """
        known = not self.row_params and (self.composition == "parallel" or n_rows is not None)
        if known:
            return self._plan(n_rows or 1, {}).summary()
        return [
            {
                "statistic": self.column,
                "mechanism": self._plan(1, self._stand_ins()).mechanism,
                "epsilon": self.epsilon or 0.0,
                "delta": 0.0,
                "rho": self.rho,
                "sensitivity": self.sensitivity,
                "scale": None,
                "error95": None,
                "note": f"{self.composition}: scale known at evaluation",
            }
        ]

    # -- evaluation (called by polars) ------------------------------------------------

    def _inputs(self, series: pl.Series) -> tuple[str, np.ndarray, dict[str, np.ndarray]]:
        if series.dtype == pl.Struct and self.row_params:  # the statistic and its parameters
            fields = series.struct.unnest()
            missing = [k for k in ("value", *self.row_params) if k not in fields.columns]
            if missing:
                raise InvalidDataError(
                    f"column {self.column or series.name!r}: a struct of a statistic and its "
                    f"per-row parameters lacks the field(s) {missing}; release a numeric "
                    "column (nothing was charged)"
                )
            value, params = fields["value"], {k: fields[k] for k in self.row_params}
        else:
            value, params = series, {}
        name = self.column or series.name
        values = _numeric(value, name, "a statistic to release")
        arrays = {
            k: _numeric(v, k, "a per-row parameter", allow_inf=True) for k, v in params.items()
        }
        return name, values, arrays

    def held(self, run: Run) -> contextlib.AbstractContextManager[Any]:
        """The release's single materialisation, held while the runner charges it."""
        hold = self._once.held(run.keys[self.id], what=self._what())

        @contextlib.contextmanager
        def holding() -> Iterator[None]:
            with hold as settle:
                self._settle = settle
                try:
                    yield
                finally:
                    del self._settle

        return holding()

    def charged(self, entries: tuple[LedgerEntry, ...], output: Any, run: Run) -> None:
        """The runner charged this release with its query (inside :meth:`held`): keep
        the drawn values."""
        self.entry = entries[0] if entries else None
        self._settle(output)
        with _PENDING_LOCK:
            _PENDING.discard(self.origin)

    def _what(self) -> str:
        return f"release {self.id[:8]} on column {self.column!r}"

    def _check_whole_column(self, series: pl.Series) -> None:
        """Refuse, before anything is charged, an evaluation on part of the column.

        polars calls the function once per group inside ``group_by().agg()``, ``over()``
        and ``list.eval()``, and names each group's piece ``""``; on the whole column it
        passes the input's own name. The first group would be charged, the next refused.
        """
        expected = "value" if self.row_params else self.column
        if expected and series.name != expected:
            raise ReleaseReuseError(
                f"release {self.id[:8]} on column {self.column!r} is being evaluated per "
                "group (inside group_by().agg(), over() or list.eval()): a release needs the "
                "whole column of statistics at once. Aggregate first, then release the "
                "column: df.group_by(...).agg(pl.col(...).mean()).with_columns("
                "pl.col(...).dp.laplace(...)), or use dpframe.group_by for grouped releases"
            )

    def evaluate(self, series: pl.Series, run: Run | None) -> pl.Series:
        """Release the column: outside a run, charged and drawn now (once per release);
        in a run's dry pass, checked and registered; in its real pass, what the run drew
        (a release the dry pass did not meet refuses: only the run charges in a run)."""
        self._check_whole_column(series)
        name, values, arrays = self._inputs(series)
        if values.size == 0:
            return pl.Series(name, [], dtype=pl.Float64)
        key = _fingerprint(np.stack([values, *arrays.values()]))
        if run is not None and run.dry and not self._once.done:
            plan = self._plan(values.size, arrays)
            plan.check(values)  # bad values refuse here, before anything is charged
            run.register(self, Step(plan, values, self.random), key, values.size)
            return pl.Series(name, np.zeros(values.size, dtype=np.float64))  # data-free
        if run is not None and not run.dry and not self._once.done:
            raise ReleaseNotArmedError(  # in a run, only the run charges: never by itself
                f"{self._what()} was not met by the run's dry pass (its column is declared "
                "public=, or the real pass evaluates what the dry pass did not), so the run "
                "did not charge it; nothing is drawn for it. Do not name a released column "
                "in public=."
            )

        def make() -> np.ndarray:
            plan = self._plan(values.size, arrays)
            ex = execute([Step(plan, values, self.random)], self.accountant, note=self._what())
            self.entry = ex.entries[0]
            drawn: np.ndarray = ex.outputs[0]
            return drawn

        noisy = self._once.get(key, make, what=self._what())
        with _PENDING_LOCK:
            _PENDING.discard(self.origin)
        return pl.Series(name, noisy, dtype=pl.Float64)


def _column_release(
    expr: pl.Expr | str,
    per_row: dict[str, pl.Expr],
    accountant: Accountant | None,
    seed: int | RandomSource | None,
    **fields: Any,
) -> pl.Expr:
    """The expression releasing ``expr`` (a column name or an expression) by the
    :class:`ColumnRelease` of ``fields``, with ``per_row`` parameters beside its values."""
    if isinstance(expr, str):
        expr = pl.col(expr)
    release = ColumnRelease(
        **fields,
        accountant=resolve_accountant(accountant),
        random=as_source(seed),
        column=_output_name(expr) if isinstance(expr, pl.Expr) else None,
    )
    return _release_expr(expr, release, per_row)


def _release_expr(expr: Any, release: ColumnRelease, per_row: dict[str, pl.Expr]) -> pl.Expr:
    if not isinstance(expr, pl.Expr):
        raise InvalidParameterError(
            f"expr must be a polars expression or a column name, got {type(expr).__name__}"
        )
    if per_row:
        expr = pl.struct(expr.alias("value"), *[e.alias(k) for k, e in per_row.items()])
    # not elementwise: polars evaluates the whole column at once, never per morsel
    out: pl.Expr = expr.map_batches(release, return_dtype=pl.Float64, is_elementwise=False)
    return out.alias(release.column) if release.column else out


def _output_name(expr: pl.Expr) -> str:
    """The one column ``expr`` names; refused if it expands to several or to none.

    A release is one column, charged once: ``pl.all()`` would have polars evaluate it
    once per column (the first charged, the next refused), and an unnamed expression
    (``pl.element()``) is evaluated per list.
    """
    if expr.meta.has_multiple_outputs():
        raise InvalidParameterError(
            f"expr {expr} expands to several columns; a release is one column: build one "
            "per column, e.g. [pl.col(c).dp.laplace(...) for c in columns]"
        )
    try:
        return expr.meta.output_name()
    except pl.exceptions.ComputeError:
        raise InvalidParameterError(
            f"expr {expr} has no column name; a release is a column of a frame: name it "
            "with .alias(...)"
        ) from None


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
    sensitivity = check_positive("sensitivity", sensitivity)
    return _column_release(
        expr,
        {},
        accountant,
        seed,
        mechanism="laplace",
        epsilon=epsilon,
        sensitivity=sensitivity,
        composition=composition,
        public_groups=public_groups,
        granularity=granularity,
    )


def gaussian(
    expr: pl.Expr | str,
    *,
    sensitivity: float,
    composition: str,
    rho: float | None = None,
    sigma: float | None = None,
    public_groups: bool = False,
    granularity: float | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> pl.Expr:
    """Release a column of statistics with discrete Gaussian noise, charged ``rho`` (zCDP).

    The noise is the exact discrete Gaussian (Canonne, Kamath & Steinke 2020) on the
    output grid, calibrated to the column's l2 sensitivity: one record changes at most
    ``rows_touched`` rows (1 or 2 for ``"parallel"``, every row for ``"sequential"``) by
    at most ``sensitivity`` each, so ``sensitivity * sqrt(rows_touched)``. The accountant
    must hold a zCDP budget (``Accountant(rho=...)`` or ``accounting="zcdp"``) or a
    tight-composition one (``accounting="pld"``); a pure epsilon budget refuses the
    release and says which budget to open.

    Parameters
    ----------
    expr : polars.Expr or str
        The column of exact statistics.
    sensitivity : float
        How much one record can change one row's statistic (> 0), under the
        accountant's neighbour relation.
    composition : {"parallel", "sequential"}
        As for :func:`laplace`: disjoint groups, or every row from the same records.
    rho : float, optional
        The zCDP cost; the noise is the least that keeps the loss within it.
    sigma : float, optional
        The noise's standard deviation instead (``rho`` is then what it costs). Exactly
        one of ``rho`` and ``sigma``.
    public_groups : bool, default False
        As for :func:`laplace`.
    granularity : float, optional
        Output grid step (a power of two); default from the sensitivity.
    accountant, seed
        As for :func:`laplace`.

    Returns
    -------
    polars.Expr
        A Float64 column of released values (same name).

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> stats = pl.DataFrame({"visits": [120.0, 87.0, 45.0]})
    >>> with dpframe.Accountant(rho=0.5, delta=1e-6) as acct:
    ...     out = stats.with_columns(
    ...         pl.col("visits").dp.gaussian(sensitivity=1.0, rho=0.1, composition="parallel")
    ...     )
    >>> round(acct.spent.rho, 3) <= 0.1
    True
    """
    sensitivity = check_positive("sensitivity", sensitivity)
    return _column_release(
        expr,
        {},
        accountant,
        seed,
        mechanism="gaussian",
        epsilon=None,
        rho=rho,
        sigma=sigma,
        sensitivity=sensitivity,
        composition=composition,
        public_groups=public_groups,
        granularity=granularity,
    )


def truncated_laplace(
    expr: pl.Expr | str,
    epsilon: float,
    lower: float | pl.Expr | None,
    upper: float | pl.Expr | None,
    sensitivity: float | pl.Expr,
    *,
    method: str = "truncated",
    calibration: str = "exact",
    composition: str,
    public_groups: bool = False,
    granularity: float | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> pl.Expr:
    """Release a column of bounded statistics, keeping every value inside its bounds.

    Parameters
    ----------
    expr : polars.Expr or str
        The column of exact statistics. Values outside ``[lower, upper]`` are clipped
        first (the bounds are public, and clipping is part of its definition).
    epsilon : float
        Privacy cost (> 0), charged once.
    lower, upper : float, None or polars.Expr
        Public bounds of the statistic; ``None`` (or an infinity) for a one-sided bound;
        an expression for per-row bounds (e.g. ``pl.col("max_share")``).
    sensitivity : float or polars.Expr
        l1 sensitivity of one row's statistic (see ``dpframe.sensitivity``); an
        expression for per-row sensitivities (e.g. ``1 / pl.col("n")`` for proportions
        of groups of public sizes ``n``). Per-row parameters must be *public*: they set
        the noise, so they must not be computed from the confidential data.
    method : {"truncated", "bit"}, default "truncated"
        Condition the noise on the bounds, or clamp it to them (point masses at the
        bounds; less bias, Liu 2019 Prop. 1).
    calibration : {"exact", "paper"}, default "exact"
        ``"exact"`` makes truncation exactly ``epsilon``-DP (more noise than
        ``sensitivity / epsilon``); ``"paper"`` uses ``sensitivity / epsilon`` as the
        paper does and charges the true, larger loss. BIT is exact either way.
    composition : {"parallel", "sequential"}
        As in :func:`laplace`. There is no default.
    public_groups, granularity, accountant, seed
        As in :func:`laplace`.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> props = pl.DataFrame({"share": [0.02, 0.5, 0.97]})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     out = props.with_columns(
    ...         pl.col("share").dp.truncated_laplace(
    ...             1.0, 0.0, 1.0, 0.01, composition="parallel", public_groups=True
    ...         )
    ...     )
    >>> bool(out["share"].is_between(0, 1).all())
    True
    """
    fixed = {"lower": lower, "upper": upper, "sensitivity": sensitivity}
    per_row = {k: v for k, v in fixed.items() if isinstance(v, pl.Expr)}
    fixed = {k: (None if k in per_row else v) for k, v in fixed.items()}
    check("method", method)
    return _column_release(
        expr,
        per_row,
        accountant,
        seed,
        mechanism=method,
        epsilon=epsilon,
        composition=composition,
        public_groups=public_groups,
        sensitivity=cast(float | None, fixed["sensitivity"]),  # expressions: per_row
        lower=cast(float | None, fixed["lower"]),
        upper=cast(float | None, fixed["upper"]),
        calibration=calibration,
        granularity=granularity,
        row_params=tuple(per_row),
    )


def pending_releases(accountant: Accountant | None = None) -> Iterator[ColumnRelease]:
    """Column releases built (for ``accountant``, if given) but not yet materialised.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> acct = dpframe.Accountant(epsilon=1.0)
    >>> with acct:
    ...     noisy = pl.col("m").dp.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel")
    >>> len(list(dpframe.pending_releases(acct)))
    1
    >>> _ = pl.DataFrame({"m": [1.0, 2.0]}).with_columns(noisy)  # run: charged, not pending
    >>> len(list(dpframe.pending_releases(acct))), acct.spent.epsilon
    (0, 0.5)
    """
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"accountant must be an Accountant (or None for all), got {type(accountant).__name__}"
        )
    return _pending(accountant)


def _pending(accountant: Accountant | None) -> Iterator[ColumnRelease]:
    with _PENDING_LOCK:
        items = list(_PENDING)
    for r in items:
        if not r.materialised and (accountant is None or r.accountant is accountant):
            yield r
