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

import sys

from dpframe.core import sensitivity
from dpframe.core.accountant import Accountant, Budget, Charge, LedgerEntry, current_accountant
from dpframe.core.randomness import RandomSource, secure_generator
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
from dpframe.polars.namespace import register_namespace
from dpframe.polars.private_keys import KeySelection, KeysRelease, release_keys, select_keys
from dpframe.polars.release import Release
from dpframe.polars.runner import collect, last_run
from dpframe.polars.summary import summarize
from dpframe.version import __version__

# the public module names: dpframe.agg, dpframe.pram and dpframe.sensitivity are these
# modules (``import dpframe.agg`` and ``from dpframe.pram import design`` work too)
sys.modules.setdefault("dpframe.agg", agg)
sys.modules.setdefault("dpframe.pram", pram)
sys.modules.setdefault("dpframe.sensitivity", sensitivity)

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
    "secure_generator",
    "select_keys",
    "sensitivity",
    "sink_parquet",
    "summarize",
    "truncated_laplace",
    "write_parquet",
]


#: names loaded on first use: dpframe.risk needs scipy (0.4 s to import); the checks of a
#: release (``dpframe.check(release)``) need the spec models and, to run, Great Expectations
_LAZY = {
    "risk": ("dpframe.risk", None),
    "check": ("dpframe.jobs.checks", "check"),
    "expectations": ("dpframe.jobs.checks", "expectations"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        loaded = importlib.import_module(module)
        return loaded if attr is None else getattr(loaded, attr)
    raise AttributeError(f"module 'dpframe' has no attribute {name!r}")


register_namespace("dpf", force=True)
register_namespace("dp")
