"""The ``.dp`` (and ``.dpf``) namespaces: a forwarding veneer over typed functions.

Every method *is* the function of the same name with its receiver bound (``.dp.pram`` is
:func:`dpframe.pram.apply`, ``lf.dp.group_by`` is :func:`dpframe.group_by`, ...): the
same parameters, kinds, defaults and types, declared once, on the function; no logic
and no maths here. Only ``df.dp.with_columns`` / ``df.dp.select``, which run polars'
own methods through :func:`dpframe.collect`, have no function of their own.

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

import importlib
import inspect
import threading
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

import polars as pl
from polars.api import NameSpace

from dpframe.errors import InvalidParameterError, NamespaceConflictWarning

if TYPE_CHECKING:
    from dpframe.polars.column import gaussian, laplace, truncated_laplace
    from dpframe.polars.frame import covariance_matrix, proportions
    from dpframe.polars.grouped import group_by, median, quantile
    from dpframe.polars.io import sink_parquet, write_parquet
    from dpframe.polars.memory import scan_frame
    from dpframe.polars.pram import apply
    from dpframe.polars.private_keys import release_keys
    from dpframe.polars.runner import collect
    from dpframe.risk.frame import drha, drha_expr

__all__ = ["DataFrameDP", "ExprDP", "LazyFrameDP", "register_namespace"]

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R", pl.Expr, pl.DataFrame, pl.LazyFrame)
F = TypeVar("F", pl.DataFrame, pl.LazyFrame)


#: One first-use import at a time: two threads importing a package and its submodules in
#: two orders at once deadlock, and Python refuses one of them (an ImportError)
_LOADING = threading.RLock()


def load_module(module: str) -> ModuleType:
    """``importlib.import_module(module)``, one thread at a time (what a name of
    ``dpframe``, or a namespace's method, loads on first use).

    Examples
    --------
    >>> load_module("dpframe.polars.column").__name__
    'dpframe.polars.column'
    """
    with _LOADING:
        return importlib.import_module(module)


class _Later:
    """A function of ``module`` imported on first use: ``import dpframe`` registers the
    namespaces without loading the releases (numpy, pydantic, the kernels) or
    ``dpframe.risk`` (scipy)."""

    def __init__(self, module: str, name: str) -> None:
        self._module, self.__name__ = module, name

    def _function(self) -> Callable[..., Any]:
        function: Callable[..., Any] = getattr(load_module(self._module), self.__name__)
        return function

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._function())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function()(*args, **kwargs)


if not TYPE_CHECKING:
    gaussian = _Later("dpframe.polars.column", "gaussian")
    laplace = _Later("dpframe.polars.column", "laplace")
    truncated_laplace = _Later("dpframe.polars.column", "truncated_laplace")
    covariance_matrix = _Later("dpframe.polars.frame", "covariance_matrix")
    proportions = _Later("dpframe.polars.frame", "proportions")
    group_by = _Later("dpframe.polars.grouped", "group_by")
    median = _Later("dpframe.polars.grouped", "median")
    quantile = _Later("dpframe.polars.grouped", "quantile")
    sink_parquet = _Later("dpframe.polars.io", "sink_parquet")
    write_parquet = _Later("dpframe.polars.io", "write_parquet")
    apply = _Later("dpframe.polars.pram", "apply")
    release_keys = _Later("dpframe.polars.private_keys", "release_keys")
    collect = _Later("dpframe.polars.runner", "collect")
    scan_frame = _Later("dpframe.polars.memory", "scan_frame")
    drha = _Later("dpframe.risk.frame", "drha")
    drha_expr = _Later("dpframe.risk.frame", "drha_expr")


def forward(
    function: Callable[Concatenate[Any, P], T], doc: str
) -> Callable[Concatenate[Any, P], T]:
    """The method ``function`` with the namespace's polars object as its receiver.

    Its parameters are the function's after the receiver, for mypy (``P``), for
    ``inspect.signature`` (through ``__wrapped__``) and for the reference site (the
    griffe extension ``docs/_ext/sphinx_roles.py:Forwards``); ``doc`` is its docstring
    (the namespace's examples).
    """

    def method(self: _Namespace[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return function(self._target, *args, **kwargs)

    method.__name__ = getattr(function, "__name__", "method")
    method.__doc__ = doc
    method.__dict__["__wrapped__"] = _Signature(function)
    return method


class _Signature:
    """What ``inspect`` sees of a forward: the function's signature with ``self`` for
    its receiver (read on first use: a ``_Later`` function is imported then)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function

    @property
    def __signature__(self) -> inspect.Signature:
        signature = inspect.signature(self._function)
        _receiver, *rest = signature.parameters.values()
        self_ = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return signature.replace(parameters=[self_, *rest])


class _Namespace(Generic[R]):
    """What polars builds on ``obj.dp``: the object (the receiver of every method)."""

    def __init__(self, target: R) -> None:
        self._target: R = target

    def __init_subclass__(cls) -> None:
        for name, member in vars(cls).items():
            if isinstance(getattr(member, "__wrapped__", None), _Signature):  # a forward
                member.__qualname__ = f"{cls.__qualname__}.{name}"


class ExprDP(_Namespace[pl.Expr]):
    """``pl.col(...).dp``: releases on a column of statistics."""

    laplace = forward(
        laplace,
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
        """,
    )

    gaussian = forward(
        gaussian,
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
        """,
    )

    truncated_laplace = forward(
        truncated_laplace,
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
        """,
    )

    pram = forward(
        apply,
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
        """,
    )

    drha = forward(
        drha_expr,
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
        """,
    )


class _FrameDP(_Namespace[F]):
    group_by = forward(
        group_by,
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
        """,
    )

    quantile = forward(
        quantile,
        """Quantiles of a column over the whole frame; see :func:`dpframe.quantile`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> df = pl.LazyFrame({"x": [float(i % 100) for i in range(4000)]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     table = df.dp.quantile("x", q=[0.1, 0.9], lower=0, upper=100, epsilon=1.0)
        ...     table = table.collect()
        >>> table.columns
        ['x_q10', 'x_q90']
        """,
    )

    median = forward(
        median,
        """The median of a column over the whole frame; see :func:`dpframe.median`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> df = pl.DataFrame({"x": [float(i % 100) for i in range(4000)]})
        >>> with dpframe.Accountant(epsilon=1.0):
        ...     table = df.dp.median("x", lower=0, upper=100, epsilon=1.0).collect()
        >>> table.columns
        ['x_median']
        """,
    )

    covariance_matrix = forward(
        covariance_matrix,
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
        """,
    )

    proportions = forward(
        proportions,
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
        """,
    )

    release_keys = forward(
        release_keys,
        """Keys selected privately, as a frame; see :func:`dpframe.release_keys`.

        Examples
        --------
        >>> import polars as pl, dpframe
        >>> df = pl.DataFrame({"code": ["A"] * 300 + ["rare"]})
        >>> with dpframe.Accountant(epsilon=1.0, delta=1e-6, neighbours="add_remove"):
        ...     keys = df.dp.release_keys("code", epsilon=1.0, delta=1e-6).collect()
        >>> keys["code"].to_list()
        ['A']
        """,
    )

    drha = forward(
        drha,
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
        """,
    )

    write_parquet = forward(
        write_parquet,
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
        """,
    )


class DataFrameDP(_FrameDP[pl.DataFrame]):
    """``df.dp``: grouped releases, row-wise releases and Parquet with provenance."""

    def with_columns(
        self, *exprs: Any, public: Sequence[str] | None = None, **named: Any
    ) -> pl.DataFrame:
        """``df.with_columns(...)`` run by :func:`dpframe.collect` (for ``.dp.pram``), over
        :func:`dpframe.scan_frame` ``(df)``: the plan is checked without the frame's data.

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
        return collect(scan_frame(self._target).with_columns(*exprs, **named), public=public)

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
        return collect(scan_frame(self._target).select(*exprs, **named), public=public)


class LazyFrameDP(_FrameDP[pl.LazyFrame]):
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
        # not forward(collect): its **collect_kwargs could take the frame by name
        return collect(self._target, public=public, **collect_kwargs)

    sink_parquet = forward(
        sink_parquet,
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
        """,
    )


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
