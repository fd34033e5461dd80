"""dpframe: differential privacy for polars.

Importing dpframe registers the ``.dp`` namespace (and its unambiguous alias ``.dpf``)
on polars expressions, DataFrames and LazyFrames. The typed functions below are the API
proper; the namespaces are thin veneers over them.

Examples
--------
>>> import polars as pl, dpframe
>>> with dpframe.Accountant(epsilon=1.0) as acct:
...     out = pl.DataFrame({"m": [3.5, 4.1]}).with_columns(
...         pl.col("m").dpf.laplace(epsilon=0.5, sensitivity=0.1, composition="parallel")
...     )
>>> acct.remaining.epsilon
0.5
"""

from __future__ import annotations

from dpframe import agg
from dpframe.column import ColumnRelease, laplace, pending_releases, truncated_laplace
from dpframe.core import sensitivity
from dpframe.core.accountant import Accountant, Budget, Charge, LedgerEntry, current_accountant
from dpframe.core.randomness import RandomSource, secure_generator
from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    InvalidDataError,
    InvalidParameterError,
    LedgerMismatchError,
    MissingMarginsError,
    NamespaceConflictWarning,
    NoAccountantError,
    ReleaseNotArmedError,
    ReleaseReuseError,
    UnsafeSeedWarning,
)
from dpframe.frame_releases import FrameRelease, covariance_matrix, proportions
from dpframe.grouped import GroupBy, GroupedRelease, group_by
from dpframe.io import Provenance, ledger_frame, read_parquet, read_provenance, write_parquet
from dpframe.namespace import register_namespace
from dpframe.rowwise import collect, last_run, sink_parquet
from dpframe.summary import summarize

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "Charge",
    "ColumnRelease",
    "DPFrameError",
    "FrameRelease",
    "GroupBy",
    "GroupedRelease",
    "InvalidDataError",
    "InvalidParameterError",
    "LedgerEntry",
    "LedgerMismatchError",
    "MissingMarginsError",
    "NamespaceConflictWarning",
    "NoAccountantError",
    "Provenance",
    "RandomSource",
    "ReleaseNotArmedError",
    "ReleaseReuseError",
    "UnsafeSeedWarning",
    "__version__",
    "agg",
    "collect",
    "covariance_matrix",
    "current_accountant",
    "group_by",
    "laplace",
    "last_run",
    "ledger_frame",
    "pending_releases",
    "pram",
    "proportions",
    "read_parquet",
    "read_provenance",
    "register_namespace",
    "risk",
    "secure_generator",
    "sensitivity",
    "sink_parquet",
    "summarize",
    "truncated_laplace",
    "write_parquet",
]


def __getattr__(name: str) -> object:
    # dpframe.pram and dpframe.risk need numpy and their kernels: load them on first use
    if name in ("pram", "risk"):
        import importlib

        return importlib.import_module(f"dpframe.{name}")
    raise AttributeError(f"module 'dpframe' has no attribute {name!r}")


register_namespace("dpf", force=True)
register_namespace("dp")
