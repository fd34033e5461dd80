"""dpframe: differential privacy for polars.

Importing dpframe registers the ``.dp`` namespace (and its unambiguous alias ``.dpf``)
on polars expressions, DataFrames and LazyFrames. The typed functions below are the API
proper; the namespaces are thin veneers over them. ``docs/architecture.md`` shows the
layers: :mod:`dpframe.core` (the privacy rules), :mod:`dpframe.mechanisms` (numpy
kernels), :mod:`dpframe.engines` (polars, Spark), :mod:`dpframe.polars` (this API) and
:mod:`dpframe.jobs` (release specs).

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

from typing import TYPE_CHECKING

from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    EpsilonAtEdgeWarning,
    EpsilonNotFoundError,
    InvalidDataError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerMismatchError,
    LedgerReadOnlyError,
    LedgerUnavailableError,
    LineageError,
    MissingMarginsError,
    NamespaceConflictWarning,
    NoAccountantError,
    PublishFailedError,
    ReleaseInterrupted,
    ReleaseNotArmedError,
    ReleaseReuseError,
    UnsafeSeedWarning,
)
from dpframe.polars.namespace import load_module, register_namespace
from dpframe.version import __version__

if TYPE_CHECKING:  # what the names below are; at run time each is imported on first use
    from dpframe.core import sensitivity
    from dpframe.core.accountant import Accountant, Budget, Charge, LedgerEntry, current_accountant
    from dpframe.core.randomness import RandomSource, secure_generator
    from dpframe.mechanisms import statistics as agg
    from dpframe.polars import pram
    from dpframe.polars.column import (
        ColumnRelease,
        gaussian,
        laplace,
        pending_releases,
        truncated_laplace,
    )
    from dpframe.polars.frame import (
        CovarianceMatrixRelease,
        ProportionsRelease,
        covariance_matrix,
        proportions,
    )
    from dpframe.polars.grouped import GroupBy, GroupedRelease, group_by, median, quantile
    from dpframe.polars.io import (
        Provenance,
        copy_provenance,
        ledger_frame,
        read_parquet,
        read_provenance,
        sink_parquet,
        write_parquet,
    )
    from dpframe.polars.memory import scan_frame
    from dpframe.polars.private_keys import KeySelection, KeysRelease, release_keys, select_keys
    from dpframe.polars.release import Release
    from dpframe.polars.runner import collect, last_run
    from dpframe.polars.summary import summarize

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "Charge",
    "ColumnRelease",
    "CovarianceMatrixRelease",
    "DPFrameError",
    "EpsilonAtEdgeWarning",
    "EpsilonNotFoundError",
    "GroupBy",
    "GroupedRelease",
    "InvalidDataError",
    "InvalidParameterError",
    "KeySelection",
    "KeysRelease",
    "LedgerEntry",
    "LedgerIntegrityError",
    "LedgerMismatchError",
    "LedgerReadOnlyError",
    "LedgerUnavailableError",
    "LineageError",
    "MissingMarginsError",
    "NamespaceConflictWarning",
    "NoAccountantError",
    "ProportionsRelease",
    "Provenance",
    "PublishFailedError",
    "RandomSource",
    "Release",
    "ReleaseInterrupted",
    "ReleaseNotArmedError",
    "ReleaseReuseError",
    "UnsafeSeedWarning",
    "__version__",
    "agg",
    "check",  # loaded on first use, as are expectations and risk (see __getattr__)
    "collect",
    "copy_provenance",
    "covariance_matrix",
    "current_accountant",
    "expectations",
    "gaussian",
    "group_by",
    "laplace",
    "last_run",
    "ledger_frame",
    "median",
    "pending_releases",
    "pram",
    "proportions",
    "quantile",
    "read_parquet",
    "read_provenance",
    "register_namespace",
    "release_keys",
    "risk",
    "scan_frame",
    "secure_generator",
    "select_keys",
    "sensitivity",
    "sink_parquet",
    "summarize",
    "truncated_laplace",
    "write_parquet",
]


#: names loaded on first use, so that ``import dpframe`` costs little more than ``import
#: polars`` (benchmarks/bench_import.py): the releases need numpy, pydantic and the kernels;
#: dpframe.risk needs scipy (0.4 s to import); the checks of a release
#: (``dpframe.check(release)``) need the spec models and, to run, Great Expectations.
#: ``dpframe.agg``, ``dpframe.pram`` and ``dpframe.sensitivity`` are modules of their own
#: names (``dpframe/agg.py`` ...), each the module it stands for
_LAZY = {
    "Accountant": ("dpframe.core.accountant", "Accountant"),
    "agg": ("dpframe.agg", None),
    "Budget": ("dpframe.core.accountant", "Budget"),
    "Charge": ("dpframe.core.accountant", "Charge"),
    "collect": ("dpframe.polars.runner", "collect"),
    "ColumnRelease": ("dpframe.polars.column", "ColumnRelease"),
    "copy_provenance": ("dpframe.polars.io", "copy_provenance"),
    "covariance_matrix": ("dpframe.polars.frame", "covariance_matrix"),
    "CovarianceMatrixRelease": ("dpframe.polars.frame", "CovarianceMatrixRelease"),
    "current_accountant": ("dpframe.core.accountant", "current_accountant"),
    "gaussian": ("dpframe.polars.column", "gaussian"),
    "group_by": ("dpframe.polars.grouped", "group_by"),
    "GroupBy": ("dpframe.polars.grouped", "GroupBy"),
    "GroupedRelease": ("dpframe.polars.grouped", "GroupedRelease"),
    "KeySelection": ("dpframe.polars.private_keys", "KeySelection"),
    "KeysRelease": ("dpframe.polars.private_keys", "KeysRelease"),
    "laplace": ("dpframe.polars.column", "laplace"),
    "last_run": ("dpframe.polars.runner", "last_run"),
    "ledger_frame": ("dpframe.polars.io", "ledger_frame"),
    "LedgerEntry": ("dpframe.core.accountant", "LedgerEntry"),
    "median": ("dpframe.polars.grouped", "median"),
    "pending_releases": ("dpframe.polars.column", "pending_releases"),
    "pram": ("dpframe.pram", None),
    "proportions": ("dpframe.polars.frame", "proportions"),
    "ProportionsRelease": ("dpframe.polars.frame", "ProportionsRelease"),
    "Provenance": ("dpframe.polars.io", "Provenance"),
    "quantile": ("dpframe.polars.grouped", "quantile"),
    "RandomSource": ("dpframe.core.randomness", "RandomSource"),
    "read_parquet": ("dpframe.polars.io", "read_parquet"),
    "read_provenance": ("dpframe.polars.io", "read_provenance"),
    "Release": ("dpframe.polars.release", "Release"),
    "release_keys": ("dpframe.polars.private_keys", "release_keys"),
    "scan_frame": ("dpframe.polars.memory", "scan_frame"),
    "secure_generator": ("dpframe.core.randomness", "secure_generator"),
    "select_keys": ("dpframe.polars.private_keys", "select_keys"),
    "sensitivity": ("dpframe.sensitivity", None),
    "sink_parquet": ("dpframe.polars.io", "sink_parquet"),
    "summarize": ("dpframe.polars.summary", "summarize"),
    "truncated_laplace": ("dpframe.polars.column", "truncated_laplace"),
    "write_parquet": ("dpframe.polars.io", "write_parquet"),
    "risk": ("dpframe.risk", None),
    "check": ("dpframe.jobs.checks", "check"),
    "expectations": ("dpframe.jobs.checks", "expectations"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module, attr = _LAZY[name]
        loaded = load_module(module)  # one thread at a time
        value = loaded if attr is None else getattr(loaded, attr)
        globals()[name] = value  # once: the next access is a plain attribute
        return value
    raise AttributeError(f"module 'dpframe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


register_namespace("dpf", force=True)
register_namespace("dp")
