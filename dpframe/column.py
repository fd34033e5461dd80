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
import math
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dpframe.core.accountant import Accountant, LedgerEntry, current_accountant
from dpframe.core.constraints import (
    COMPOSITIONS,
    check_choice,
    check_epsilon,
    check_positive,
)
from dpframe.core.randomness import RandomSource, as_source
from dpframe.errors import (
    InvalidDataError,
    InvalidParameterError,
    NoAccountantError,
    ReleaseReuseError,
)

if TYPE_CHECKING:  # numpy and the kernels are imported on first use: `import dpframe` stays fast
    from collections.abc import Iterator

    import numpy as np


__all__ = ["ColumnRelease", "laplace", "pending_releases", "truncated_laplace"]

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
    """One release of a column of statistics (the callable polars runs).

    Not built directly: use :func:`laplace`, :func:`truncated_laplace` or the
    ``.dp`` namespace. ``calibrate(epsilon_row)`` returns the per-row calibration of
    the mechanism (anything with ``scale``, ``privacy_loss``, ``error()``,
    ``details()``, ``check()`` and ``release()``).
    """

    def __init__(
        self,
        *,
        mechanism: str,
        epsilon: float,
        sensitivity: float | None,
        composition: str,
        public_groups: bool,
        calibrate: Callable[..., Any],
        accountant: Accountant | None,
        random: RandomSource,
        column: str | None,
        row_params: tuple[str, ...] = (),
    ) -> None:
        self.id = uuid.uuid4().hex
        self.mechanism = mechanism
        self.epsilon = check_epsilon(epsilon)
        self.row_params = row_params
        self.sensitivity = (
            None if sensitivity is None else check_positive("sensitivity", sensitivity)
        )
        self.composition = check_choice("composition", composition, COMPOSITIONS)
        if not isinstance(public_groups, bool):
            raise InvalidParameterError(
                f"public_groups must be True or False, got {public_groups!r}"
            )
        self.public_groups = public_groups
        self._calibrate = calibrate
        self.accountant = accountant
        self.random = random
        self.column = column
        self.entry: LedgerEntry | None = None
        self._memo: _Memo | None = None
        self._lock = threading.Lock()
        if not row_params:  # validate the mechanism's parameters now, not at collect time
            calibrate(self.epsilon)
        with _PENDING_LOCK:
            _PENDING.add(self)

    # -- calibration ------------------------------------------------------------------

    def rows_touched(self, n_rows: int) -> int:
        """How many rows one record can change.

        ``"sequential"``: all ``n_rows`` (they describe the same records).
        ``"parallel"``: one -- or two under ``"substitute"`` unless ``public_groups``,
        since a changed record may leave one group and join another.
        """
        if self.composition == "sequential":
            return max(n_rows, 1)
        neighbours = self.accountant.neighbours if self.accountant else "substitute"
        return 2 if neighbours == "substitute" and not self.public_groups else 1

    def calibration(self, n_rows: int, **row_values: float) -> Any:
        """Per-row calibration: each row gets ``epsilon / rows_touched`` (losses add up)."""
        return self._calibrate(self.epsilon / self.rows_touched(n_rows), **row_values)

    def charge(self, n_rows: int, calibrations: list[Any] | None = None) -> float:
        """Epsilon charged: ``epsilon``, or the mechanism's true loss if larger.

        The true loss is the worst row's loss times the rows one record can change; it
        exceeds ``epsilon`` only for ``calibration="paper"`` truncation, and is then
        rounded *up* to 9 decimals.
        """
        cals = calibrations or [self.calibration(n_rows)]
        loss = max(c.privacy_loss for c in cals) * self.rows_touched(n_rows)
        return self.epsilon if loss <= self.epsilon else math.ceil(loss * 1e9) / 1e9

    @property
    def materialised(self) -> bool:
        """True once the release has been charged and its noise drawn."""
        return self._memo is not None

    def summary(self, n_rows: int | None = None) -> dict[str, Any]:
        """Mechanism, epsilon, scale and 95% error, computed without drawing noise."""
        known = not self.row_params and (self.composition == "parallel" or n_rows is not None)
        cal = self.calibration(n_rows or 1) if known else None
        return {
            "release": self.id,
            "column": self.column,
            "mechanism": self.mechanism,
            "composition": self.composition,
            "epsilon": self.charge(n_rows or 1) if known else self.epsilon,
            "delta": 0.0,
            "sensitivity": self.sensitivity,
            "scale": cal.scale if cal else None,
            "error95": cal.error(0.95) if cal else None,
            "materialised": self.materialised,
        }

    # -- evaluation (called by polars) ------------------------------------------------

    def __call__(self, series: pl.Series) -> pl.Series:
        import numpy as np

        if series.dtype == pl.Struct:  # the statistic and its per-row parameters
            fields = series.struct.unnest()
            value, params = fields["value"], {k: fields[k] for k in self.row_params}
        else:
            value, params = series, {}
        name = self.column or series.name
        values = _numeric(value, name, "a statistic to release")
        arrays = {
            k: _numeric(v, k, "a per-row parameter", allow_inf=True) for k, v in params.items()
        }
        if values.size == 0:
            return pl.Series(name, [], dtype=pl.Float64)
        fp = _fingerprint(np.stack([values, *arrays.values()]))
        with self._lock:
            if self._memo is not None:
                if self._memo.fingerprint == fp:
                    return self._memo.output.alias(name)
                raise ReleaseReuseError(
                    f"release {self.id[:8]} on column {name!r} has already materialised; "
                    "evaluating it on other values would draw fresh noise without a charge. "
                    "If polars is calling it once per group (inside group_by().agg()), use "
                    "dpframe.group_by(frame, keys, margins=...) instead; for a new release, "
                    "build a new .dp expression"
                )
            if self.accountant is None:
                raise NoAccountantError(
                    f".dp.{self.mechanism} on column {name!r} was built with no accountant, "
                    "so it cannot be charged: build it inside `with accountant:` or pass "
                    "accountant=..."
                )
            groups = self._calibrate_rows(values.size, arrays)
            for cal, rows in groups:  # refuse bad values before anything is charged
                cal.check(values[rows])
            cals = [cal for cal, _ in groups]
            self.entry = self.accountant.spend(
                self.charge(values.size, cals),
                0.0,
                mechanism=self.mechanism,
                columns=[name],
                scale=max(c.scale for c in cals),
                composition=self.composition,
                details={
                    **cals[0].details(),
                    "privacy_loss": max(c.privacy_loss for c in cals),
                    "scale_min": min(c.scale for c in cals),
                    "per_row_parameters": list(self.row_params),
                    "rows": int(values.size),
                    "rows_touched": self.rows_touched(values.size),
                    "epsilon_requested": self.epsilon,
                    "public_groups": self.public_groups,
                    "seeded": self.random.seeded,
                },
            )
            rng = self.random.generator()
            noisy = np.empty(values.size)
            for cal, rows in groups:
                noisy[rows] = cal.release(values[rows], rng)
            out = pl.Series(name, noisy, dtype=pl.Float64)
            self._memo = _Memo(fp, out)
            with _PENDING_LOCK:
                _PENDING.discard(self)
            return out

    def _calibrate_rows(self, n_rows: int, arrays: dict[str, Any]) -> list[tuple[Any, Any]]:
        """One calibration per distinct combination of per-row parameters, with its rows."""
        import numpy as np

        if not arrays:
            return [(self.calibration(n_rows), np.arange(n_rows))]
        table = np.stack(list(arrays.values()), axis=1)
        unique, inverse = np.unique(table, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        return [
            (
                self.calibration(n_rows, **dict(zip(arrays, map(float, row), strict=True))),
                np.flatnonzero(inverse == i),
            )
            for i, row in enumerate(unique)
        ]


def _numeric(series: pl.Series, name: str, what: str, allow_inf: bool = False) -> Any:
    """A numeric Series as a float array, refusing nulls, NaN (and infinities)."""
    import numpy as np

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
    bad = np.isnan(values) if allow_inf else ~np.isfinite(values)
    if bad.any():
        raise InvalidDataError(
            f"column {name!r} has NaN or infinite values; {what} must be finite: fix them first"
        )
    return values


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
    sens = check_positive("sensitivity", sensitivity)

    def calibrate(epsilon_row: float) -> Any:
        from dpframe.mechanisms.laplace import calibrate_laplace

        return calibrate_laplace(epsilon_row, sens, granularity)

    return _release_expr(
        expr,
        ColumnRelease(
            mechanism="laplace",
            epsilon=epsilon,
            sensitivity=sens,
            composition=composition,
            public_groups=public_groups,
            calibrate=calibrate,
            accountant=_resolve_accountant(accountant),
            random=as_source(seed),
            column=_output_name(expr),
        ),
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
        to the bounds before noise (a statistic's bounds are part of its definition).
    epsilon : float
        Privacy cost (> 0), charged once.
    lower, upper : float, None or polars.Expr
        Public bounds of the statistic; ``None`` (or an infinity) for a one-sided bound;
        an expression for per-row bounds (e.g. ``pl.col("max_share")``).
    sensitivity : float or polars.Expr
        l1 sensitivity of one row's statistic (see :mod:`dpframe.core.sensitivity`); an
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
    if isinstance(expr, str):
        expr = pl.col(expr)
    fixed = {"lower": lower, "upper": upper, "sensitivity": sensitivity}
    per_row = {k: v for k, v in fixed.items() if isinstance(v, pl.Expr)}
    fixed = {k: v for k, v in fixed.items() if k not in per_row}
    if "sensitivity" in fixed:
        fixed["sensitivity"] = check_positive("sensitivity", fixed["sensitivity"])

    def calibrate(epsilon_row: float, **row: float) -> Any:
        from dpframe.mechanisms.bounded import calibrate_bounded

        params = {**fixed, **row}
        return calibrate_bounded(
            epsilon_row,
            params["sensitivity"],
            params["lower"],
            params["upper"],
            method=method,
            calibration=calibration,
            granularity=granularity,
        )

    name = "truncated_laplace" if method == "truncated" else "bit_laplace"
    release = ColumnRelease(
        mechanism=name,
        epsilon=epsilon,
        sensitivity=fixed.get("sensitivity"),
        composition=composition,
        public_groups=public_groups,
        calibrate=calibrate,
        accountant=_resolve_accountant(accountant),
        random=as_source(seed),
        column=_output_name(expr),
        row_params=tuple(per_row),
    )
    if not per_row:
        return _release_expr(expr, release)
    if not isinstance(expr, pl.Expr):
        raise InvalidParameterError(
            f"expr must be a polars expression or a column name, got {type(expr).__name__}"
        )
    packed = pl.struct(expr.alias("value"), *[e.alias(k) for k, e in per_row.items()])
    out = packed.map_batches(release, return_dtype=pl.Float64, is_elementwise=False)
    return out.alias(release.column) if release.column else out


def _resolve_accountant(accountant: Accountant | None) -> Accountant | None:
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"accountant must be a dpframe.Accountant, got {type(accountant).__name__}"
        )
    return accountant or current_accountant()


def _release_expr(expr: pl.Expr, release: ColumnRelease) -> pl.Expr:
    if not isinstance(expr, pl.Expr):
        raise InvalidParameterError(
            f"expr must be a polars expression or a column name, got {type(expr).__name__}"
        )
    # not elementwise: polars evaluates the whole column at once, never per morsel
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
