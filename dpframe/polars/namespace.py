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
        """Laplace release of this column of statistics; see :func:`dpframe.laplace`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> means = pl.DataFrame({"mean": [6.48, 5.71]})
        >>> with dpframe.Accountant(epsilon=1.0) as acct:
        ...     noisy = means.with_columns(
        ...         pl.col("mean").dp.laplace(
        ...             epsilon=0.5, sensitivity=0.002, composition="sequential"
        ...         )
        ...     )
        >>> noisy.columns, acct.spent.epsilon
        (['mean'], 0.5)
        """
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
        (zCDP); see :func:`dpframe.gaussian`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> counts = pl.DataFrame({"visits": [120.0, 87.0]})
        >>> with dpframe.Accountant(rho=0.5, delta=1e-6) as acct:
        ...     noisy = counts.with_columns(
        ...         pl.col("visits").dp.gaussian(sensitivity=1.0, rho=0.1, composition="parallel")
        ...     )
        >>> noisy.height, round(acct.spent.rho, 12)
        (2, 0.1)
        """
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
        """Bounded release of this column; see :func:`dpframe.truncated_laplace`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> shares = pl.DataFrame({"share": [0.02, 0.5, 0.97]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     noisy = shares.with_columns(
        ...         pl.col("share").dp.truncated_laplace(
        ...             1.0, 0.0, 1.0, 0.01, composition="parallel", public_groups=True
        ...         )
        ...     )
        >>> bool(noisy["share"].is_between(0, 1).all())  # released within the bounds
        True
        """
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

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.LazyFrame({"tenure": ["own", "rent", "rent", "other"]})
        >>> with dpframe.Accountant(epsilon=1.0) as acct:
        ...     out = people.with_columns(
        ...         pl.col("tenure").dp.pram(1.0, categories=["own", "rent", "other"])
        ...     ).dp.collect()
        >>> set(out["tenure"]) <= {"own", "rent", "other"}, acct.spent.epsilon
        (True, 1.0)
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

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> df = pl.DataFrame({"age": ["<40"] * 3 + ["50+"] * 2, "y": ["a", "a", "a", "a", "b"]})
        >>> risk = df.group_by("age", maintain_order=True).agg(
        ...     pl.col("y").dp.drha(epsilon=1.0, levels=["a", "b"]).alias("risk")
        ... )
        >>> risk["risk"].round(4).to_list()
        [0.6681, 0.4226]
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
        """Grouped release over public keys; see :func:`dpframe.group_by`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.LazyFrame({"region": ["North", "South", "North"]})
        >>> regions = pl.DataFrame({"region": ["North", "South", "Islands"]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     table = people.dp.group_by("region", margins=regions).agg(
        ...         dpframe.agg.count(epsilon=0.5)
        ...     ).collect()
        >>> sorted(table["region"])  # every public key, also one with no record
        ['Islands', 'North', 'South']
        """
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
        """Covariance-matrix release; see :func:`dpframe.covariance_matrix`.

        Examples
        --------
        >>> import numpy as np, polars as pl, dpframe
        >>> rng = np.random.default_rng(0)
        >>> df = pl.DataFrame({"x": rng.uniform(-3, 3, 500), "y": rng.uniform(-4, 4, 500)})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     table = df.dp.covariance_matrix(["x", "y"], [(-3, 3), (-4, 4)], epsilon=1.0, n=500)
        ...     table = table.collect()
        >>> table.columns
        ['column', 'x', 'y']
        """
        return covariance_matrix(self._frame, columns, bounds, **kwargs)

    def proportions(self, column: str, **kwargs: Any) -> ProportionsRelease:
        """Proportion-vector release; see :func:`dpframe.proportions`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> df = pl.DataFrame({"vote": ["a", "b", "b", "c"] * 50})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     table = df.dp.proportions(
        ...         "vote", categories=["a", "b", "c", "d"], epsilon=1.0, n=200
        ...     ).collect()
        >>> round(table["proportion"].sum(), 9)
        1.0
        """
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

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> df = pl.DataFrame({"age": ["<40"] * 3 + ["50+"] * 2, "y": ["a", "a", "b", "b", "b"]})
        >>> table = df.dp.drha(qids=["age"], sensitive="y", epsilon=[0.1, 100.0], levels=["a", "b"],
        ...                    weighted=False)
        >>> table.select("epsilon", "risk").rows()[1]
        (100.0, 0.5)
        """
        from dpframe.risk.frame import drha  # scipy: loaded on first use

        return drha(self._frame, qids, sensitive, epsilon=epsilon, **kwargs)

    def write_parquet(
        self, path: str | os.PathLike[str], *, ledger: Any, spec: dict[str, Any] | None = None
    ) -> Path:
        """Atomic Parquet write with provenance; see :func:`dpframe.write_parquet`.

        Examples
        --------
        >>> import os, tempfile, polars as pl, dpframe
        >>> acct = dpframe.Accountant(epsilon=1.0)
        >>> _ = acct.spend(0.5, mechanism="laplace", columns=["x"])
        >>> path = os.path.join(tempfile.mkdtemp(), "release.parquet")
        >>> _ = pl.DataFrame({"x": [1.5]}).dp.write_parquet(path, ledger=acct)
        >>> dpframe.read_provenance(path).epsilon
        0.5
        """
        return write_parquet(self._frame, path, ledger=ledger, spec=spec)


class DataFrameDP(_FrameDP):
    """``df.dp``: grouped releases, row-wise releases and Parquet with provenance."""

    def with_columns(
        self, *exprs: Any, public: Sequence[str] | None = None, **named: Any
    ) -> pl.DataFrame:
        """``df.with_columns(...)`` run by :func:`dpframe.collect` (for ``.dp.pram``).

        The frame's other columns leave too, so each must be released or named in
        ``public=`` (published as it is).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"id": [1, 2, 3], "c": ["a", "b", "a"]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     out = people.dp.with_columns(
        ...         pl.col("c").dp.pram(1.0, categories=["a", "b"]), public=["id"]
        ...     )
        >>> out.columns
        ['id', 'c']
        """
        return collect(self._frame.lazy().with_columns(*exprs, **named), public=public)

    def select(
        self, *exprs: Any, public: Sequence[str] | None = None, **named: Any
    ) -> pl.DataFrame:
        """``df.select(...)`` run by :func:`dpframe.collect` (for ``.dp.pram``).

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> people = pl.DataFrame({"c": ["a", "b", "a"]})
        >>> with dpframe.Accountant(epsilon=1.0) as acct:
        ...     out = people.dp.select(pl.col("c").dp.pram(1.0, categories=["a", "b"]))
        >>> out.height, acct.spent.epsilon
        (3, 1.0)
        """
        return collect(self._frame.lazy().select(*exprs, **named), public=public)


class LazyFrameDP(_FrameDP):
    """``lf.dp``: grouped releases, row-wise runners and Parquet with provenance."""

    def collect(
        self, *, public: Sequence[str] | None = None, **collect_kwargs: Any
    ) -> pl.DataFrame:
        """Run the query, charging its releases once; see :func:`dpframe.collect`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> with dpframe.Accountant(epsilon=1.0) as acct:  # the release is built inside
        ...     query = pl.LazyFrame({"c": [1, 2, 2]}).select(
        ...         pl.col("c").dp.pram(1.0, categories=[1, 2])
        ...     )
        ...     out = query.dp.collect()
        >>> out.height, acct.spent.epsilon
        (3, 1.0)
        """
        return collect(self._frame, public=public, **collect_kwargs)

    def sink_parquet(
        self,
        path: str | os.PathLike[str],
        *,
        public: Sequence[str] | None = None,
        spec: dict[str, Any] | None = None,
        compression: Compression = "zstd",
    ) -> Path:
        """Stream to Parquet with provenance; see :func:`dpframe.sink_parquet`.

        Examples
        --------
        >>> import os, tempfile, polars as pl, dpframe
        >>> path = os.path.join(tempfile.mkdtemp(), "released.parquet")
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     query = pl.LazyFrame({"x": [0, 1, 2, 1]}).select(
        ...         pl.col("x").dp.pram(0.5, categories=[0, 1, 2])
        ...     )
        ...     _ = query.dp.sink_parquet(path)
        >>> dpframe.read_provenance(path).epsilon
        0.5
        """
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
