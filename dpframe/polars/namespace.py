"""The ``.dp`` (and ``.dpf``) namespaces: a forwarding veneer over typed functions.

Every method forwards to the function of the same name (``.dp.pram`` to
:func:`dpframe.pram.apply`, ``lf.dp.group_by`` to :func:`dpframe.group_by`, ...):
no logic and no maths here.

``import dpframe`` registers the namespaces on ``pl.Expr``, ``pl.DataFrame`` and
``pl.LazyFrame`` under two names:

* ``.dpf`` -- always dpframe's (unambiguous; use it in library code);
* ``.dp`` -- dpframe's unless another package (OpenDP registers ``pl.Expr.dp``) took it
  first. Then dpframe leaves it alone and warns (:class:`NamespaceConflictWarning`);
  call :func:`register_namespace` ``("dp", force=True)`` to take it. A package imported
  *after* dpframe that registers ``dp`` takes it over (polars warns): ``.dpf`` is
  never ambiguous.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from polars.api import NameSpace

from dpframe.core.accountant import Accountant
from dpframe.core.constraints import Compression
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.errors import InvalidParameterError, NamespaceConflictWarning
from dpframe.polars.column import gaussian, laplace, truncated_laplace
from dpframe.polars.frame import (
    CovarianceMatrixRelease,
    ProportionsRelease,
    covariance_matrix,
    proportions,
)
from dpframe.polars.grouped import GroupBy, group_by
from dpframe.polars.io import sink_parquet, write_parquet
from dpframe.polars.pram import apply
from dpframe.polars.runner import collect

__all__ = ["DataFrameDP", "ExprDP", "LazyFrameDP", "register_namespace"]


class ExprDP:
    """``pl.col(...).dp``: releases on a column of statistics."""

    def __init__(self, expr: pl.Expr) -> None:
        self._expr = expr

    def laplace(
        self,
        *,
        epsilon: float,
        sensitivity: float,
        composition: str,
        public_groups: bool = False,
        granularity: float | None = None,
        accountant: Accountant | None = None,
        seed: int | RandomSource | None = None,
    ) -> pl.Expr:
        """Laplace release of this column of statistics; see :func:`dpframe.laplace`."""
        return laplace(
            self._expr,
            epsilon=epsilon,
            sensitivity=sensitivity,
            composition=composition,
            public_groups=public_groups,
            granularity=granularity,
            accountant=accountant,
            seed=seed,
        )

    def gaussian(
        self,
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
        """Discrete Gaussian release of this column of statistics, charged ``rho``
        (zCDP); see :func:`dpframe.gaussian`."""
        return gaussian(
            self._expr,
            sensitivity=sensitivity,
            composition=composition,
            rho=rho,
            sigma=sigma,
            public_groups=public_groups,
            granularity=granularity,
            accountant=accountant,
            seed=seed,
        )

    def truncated_laplace(
        self,
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
        """Bounded release of this column; see :func:`dpframe.truncated_laplace`."""
        return truncated_laplace(
            self._expr,
            epsilon,
            lower,
            upper,
            sensitivity,
            method=method,
            calibration=calibration,
            composition=composition,
            public_groups=public_groups,
            granularity=granularity,
            accountant=accountant,
            seed=seed,
        )

    def pram(
        self,
        epsilon: float | None = None,
        *,
        categories: Sequence[Any] | None = None,
        prior: Any = "uniform",
        matrix: Any = None,
        diagonal: str = "optimal",
        prior_share: float = 0.1,
        accountant: Accountant | None = None,
        seed: int | RandomSource | None = None,
        estimable: bool | float = True,
        design: str = "auto",
    ) -> pl.Expr:
        """Post-randomize this categorical column; see :func:`dpframe.pram.apply`.

        A row-wise release: run the query with :func:`dpframe.collect`,
        :func:`dpframe.sink_parquet`, ``lf.dpf.collect()`` or ``df.dpf.with_columns()``.
        """
        return apply(
            self._expr,
            epsilon,
            categories=categories,
            prior=prior,
            matrix=matrix,
            diagonal=diagonal,
            prior_share=prior_share,
            accountant=accountant,
            seed=seed,
            estimable=estimable,
            design=design,
        )

    def drha(
        self,
        *,
        epsilon: float | None = None,
        levels: Sequence[Any] | None = None,
        delta: float | None = None,
        mechanism: str = "laplace",
        measure: str = "local",
        sensitivity: float = 1.0,
        alpha: Any = None,
        size_model: Any = None,
        scenario8: str = "conservative",
        method: str = "exact",
        rho: float | None = None,
    ) -> pl.Expr:
        """Per-cell DR-HA in ``group_by(qids).agg(...)``; see :func:`dpframe.risk.frame.drha_expr`.

        An assessment of the confidential data: spends no budget, not for publication.
        """
        from dpframe.risk.frame import drha_expr  # scipy: loaded on first use

        return drha_expr(
            self._expr,
            epsilon=epsilon,
            levels=levels,
            delta=delta,
            mechanism=mechanism,
            measure=measure,
            sensitivity=sensitivity,
            alpha=alpha,
            size_model=size_model,
            scenario8=scenario8,
            method=method,
            rho=rho,
        )


class _FrameDP:
    def __init__(self, frame: pl.DataFrame | pl.LazyFrame) -> None:
        self._frame = frame

    def group_by(
        self,
        keys: str | Sequence[str],
        *,
        margins: pl.DataFrame | None,
        sizes: str | None = None,
        unknown_keys: str = "error",
        accountant: Accountant | None = None,
        seed: int | RandomSource | None = None,
        unit: str | PrivacyUnit | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        nonnegative: bool = True,
        nulls: str | Mapping[str, float | str] = "refuse",
    ) -> GroupBy:
        """Grouped release over public keys; see :func:`dpframe.group_by`."""
        return group_by(
            self._frame,
            keys,
            margins=margins,
            sizes=sizes,
            unknown_keys=unknown_keys,
            accountant=accountant,
            seed=seed,
            unit=unit,
            max_rows=max_rows,
            max_groups=max_groups,
            nonnegative=nonnegative,
            nulls=nulls,
        )

    def covariance_matrix(
        self, columns: Sequence[str], bounds: Sequence[tuple[float, float]], **kwargs: Any
    ) -> CovarianceMatrixRelease:
        """Covariance-matrix release; see :func:`dpframe.covariance_matrix`."""
        return covariance_matrix(self._frame, columns, bounds, **kwargs)

    def proportions(self, column: str, **kwargs: Any) -> ProportionsRelease:
        """Proportion-vector release; see :func:`dpframe.proportions`."""
        return proportions(self._frame, column, **kwargs)

    def drha(
        self,
        *,
        qids: Sequence[str] | str,
        sensitive: str,
        epsilon: Any = None,
        **kwargs: Any,
    ) -> pl.DataFrame:
        """DR-HA table for an ε (or ρ, ``rho=``) grid; see :func:`dpframe.risk.frame.drha`.

        An assessment of the confidential data: spends no budget, not for publication.
        """
        from dpframe.risk.frame import drha  # scipy: loaded on first use

        return drha(self._frame, qids, sensitive, epsilon=epsilon, **kwargs)

    def write_parquet(
        self, path: str | os.PathLike[str], *, ledger: Any, spec: dict[str, Any] | None = None
    ) -> Path:
        """Atomic Parquet write with provenance; see :func:`dpframe.write_parquet`."""
        return write_parquet(self._frame, path, ledger=ledger, spec=spec)


class DataFrameDP(_FrameDP):
    """``df.dp``: grouped releases, row-wise releases and Parquet with provenance."""

    def with_columns(
        self, *exprs: Any, public: Sequence[str] | None = None, **named: Any
    ) -> pl.DataFrame:
        """``df.with_columns(...)`` run by :func:`dpframe.collect` (for ``.dp.pram``).

        The frame's other columns leave too, so each must be released or named in
        ``public=`` (published as it is).
        """
        return collect(self._frame.lazy().with_columns(*exprs, **named), public=public)

    def select(
        self, *exprs: Any, public: Sequence[str] | None = None, **named: Any
    ) -> pl.DataFrame:
        """``df.select(...)`` run by :func:`dpframe.collect` (for ``.dp.pram``)."""
        return collect(self._frame.lazy().select(*exprs, **named), public=public)


class LazyFrameDP(_FrameDP):
    """``lf.dp``: grouped releases, row-wise runners and Parquet with provenance."""

    def collect(
        self, *, public: Sequence[str] | None = None, **collect_kwargs: Any
    ) -> pl.DataFrame:
        """Run the query, charging its releases once; see :func:`dpframe.collect`."""
        return collect(self._frame, public=public, **collect_kwargs)

    def sink_parquet(
        self,
        path: str | os.PathLike[str],
        *,
        public: Sequence[str] | None = None,
        spec: dict[str, Any] | None = None,
        compression: Compression = "zstd",
    ) -> Path:
        """Stream to Parquet with provenance; see :func:`dpframe.sink_parquet`."""
        return sink_parquet(self._frame, path, public=public, spec=spec, compression=compression)


_TARGETS: tuple[tuple[type, type, Any], ...] = (
    (pl.Expr, ExprDP, pl.api.register_expr_namespace),
    (pl.DataFrame, DataFrameDP, pl.api.register_dataframe_namespace),
    (pl.LazyFrame, LazyFrameDP, pl.api.register_lazyframe_namespace),
)


def _owner(cls: type, name: str) -> str | None:
    ns = getattr(cls, name, None)
    return None if ns is None else getattr(ns, "__module__", "?")


def register_namespace(name: str = "dp", *, force: bool = False) -> bool:
    """Register dpframe's namespaces on polars objects under ``name``.

    Returns ``True`` if dpframe now owns ``name`` everywhere. If another package owns
    it and ``force`` is false, nothing is replaced and a
    :class:`~dpframe.errors.NamespaceConflictWarning` says how to choose.

    Examples
    --------
    >>> import dpframe
    >>> dpframe.register_namespace("dpf")
    True
    """
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise InvalidParameterError(
            f"name must be a Python identifier not starting with '_' (e.g. 'dp'), got {name!r}"
        )
    if not isinstance(force, bool):
        raise InvalidParameterError(f"force must be True or False, got {force!r}")
    builtin = [
        cls.__name__
        for cls, _, _ in _TARGETS
        if any(name in vars(c) and not isinstance(vars(c)[name], NameSpace) for c in cls.__mro__)
    ]
    if builtin:
        raise InvalidParameterError(
            f"name {name!r} is polars' own attribute of {builtin}: a namespace there would "
            "replace it; choose another name (dpframe's is always at .dpf)"
        )
    taken = {
        cls.__name__: owner
        for cls, _, _ in _TARGETS
        if (owner := _owner(cls, name)) is not None and not owner.startswith("dpframe")
    }
    if taken and not force:
        owners = ", ".join(f"pl.{k}.{name} from {v}" for k, v in taken.items())
        warnings.warn(
            f"{owners} already registered: dpframe leaves .{name} to it. dpframe's namespace "
            f"is always at .dpf; to take .{name} call dpframe.register_namespace({name!r}, "
            "force=True)",
            NamespaceConflictWarning,
            stacklevel=2,
        )
        return False
    for cls, ns_class, register in _TARGETS:
        if _owner(cls, name) == ns_class.__module__:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # polars' "overriding" warning
            register(name)(ns_class)
    return True
