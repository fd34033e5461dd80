"""The engine protocol: what an engine computes from the records, and nothing more.

Every release runs in three parts (``docs/architecture.md``): an engine computes small
exact results from the records where they live; the driver checks them
(:mod:`dpframe.engines.driver`); the release -- charge, noise, ledger, Parquet -- runs
once on the driver with the same code for every engine. An engine implements:

* :meth:`Engine.schema` -- the data's (public) schema, as polars dtypes;
* :meth:`Engine.rows` -- the number of records (public under substitute neighbours);
* :meth:`Engine.bounded` -- the same engine over the rows each person keeps (a person
  privacy unit: contribution bounding, uniformly at random);
* :meth:`Engine.without_missing` -- the same engine after a ``nulls=`` policy (records
  with a null or NaN dropped, or those values filled);
* :meth:`Engine.grouped_parts` -- exact per-group aggregates of clipped values;
  :meth:`Engine.bounded_grouped_parts` -- the same over the rows each person keeps, with
  the bad values (and identifiers) of *all* rows counted;
* :meth:`Engine.grouped_histograms` -- per group of public margins, the records' bins
  on a quantile's grid; :meth:`Engine.grouped_parts_and_histograms` -- both, from one
  read of the records where the engine can;
* :meth:`Engine.category_counts` -- the number of records per value of columns;
* :meth:`Engine.covariance_inputs` -- the sample covariance of clipped columns;
* :meth:`Engine.write_rowwise` -- randomize columns record by record (PRAM) and write
  the result once, to :meth:`Engine.output_target`; :meth:`Engine.written_counts` counts
  what was written.

What the layers above need to know of an engine is asked of it, never read from its
name: :meth:`Engine.output_target`, :attr:`Engine.streams_rows`,
:attr:`Engine.offers_dp_prior`. A user names an engine (``dpframe release --engine``) in
one place, :func:`dpframe.engines.input_engine`.

None of these charges anything or draws noise from the records' aggregates; only
``write_rowwise`` draws, under a charge the executor has already made.

``dpframe.engines.engine_for(frame)`` picks the engine of a frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

if TYPE_CHECKING:
    import numpy as np

    from dpframe.core.missing import MissingValues
    from dpframe.core.randomness import RandomSource
    from dpframe.core.units import PrivacyUnit
    from dpframe.mechanisms.pram.plan import ArmedPram
    from dpframe.mechanisms.statistics import Part

__all__ = ["CovarianceInputs", "Engine", "is_spark_frame"]


@dataclass(frozen=True)
class CovarianceInputs:
    """The exact sample covariance (divisor ``n - 1``) of clipped columns, with the number
    of records and each column's count of null, NaN or infinite values."""

    cov: np.ndarray
    rows: int
    bad: dict[str, int]


class Engine(Protocol):
    """What every engine computes (see the module docstring)."""

    #: shown to people (messages, ``repr``); never tested above ``engines/``
    name: str
    #: the records (a polars LazyFrame, a Spark DataFrame)
    frame: Any
    #: whether :meth:`write_rowwise` streams the records through this process, so a
    #: progress bar sees its batches (polars); Spark's executors write them elsewhere
    streams_rows: bool
    #: whether a PRAM release can estimate its prior with DP in the same pass
    #: (``prior="dp"``)
    offers_dp_prior: bool

    def schema(self) -> pl.Schema: ...

    def rows(self) -> int: ...

    def with_constant(self, column: str) -> Engine:
        """The same records with one more column, ``column``, True in every row (the one
        public key of a release over the whole frame)."""
        ...

    def bounded(
        self, unit: PrivacyUnit, keys: Sequence[str], source: RandomSource | None = None
    ) -> Engine:
        """An engine over the rows each person keeps: at most ``unit.max_groups`` groups
        (values of ``keys``) and ``unit.max_rows`` rows in each, chosen uniformly at
        random with the secure source; ``self`` for a record unit."""
        ...

    def grouped_parts(
        self, keys: Sequence[str], parts: Sequence[Part], sources: Sequence[str]
    ) -> pl.DataFrame:
        """One row per group present: the keys, ``__rows``, each part, and
        ``__bad__<source>`` counts of null, NaN or infinite values."""
        ...

    def bounded_grouped_parts(
        self,
        unit: PrivacyUnit,
        keys: Sequence[str],
        parts: Sequence[Part],
        sources: Sequence[str],
        source: RandomSource | None = None,
    ) -> pl.DataFrame:
        """:meth:`grouped_parts` of the rows each person keeps (counts and sums), the
        ``__bad__<source>`` counts over **all** input rows, and a null, NaN or infinite
        identifier refused (:func:`dpframe.core.values.refuse_missing_ids`)."""
        ...

    def grouped_histograms(
        self, parts: Sequence[Part], margins: pl.DataFrame
    ) -> dict[str, pl.DataFrame]:
        """For each ``"hist"`` part (by name), the cells of the records whose keys are in
        ``margins`` (the keys in the data's dtypes and ``__group``, the margins' row:
        :func:`dpframe.engines.driver.indexed_margins`): ``__group`` and ``__bin`` (the
        rule of :meth:`dpframe.mechanisms.quantile.Grid.cell_index`), one row per record,
        or per ``(group, bin)`` with ``__count``; the driver puts them in shape
        (:func:`dpframe.engines.driver.dense_histogram`)."""
        ...

    def grouped_parts_and_histograms(
        self,
        keys: Sequence[str],
        parts: Sequence[Part],
        sources: Sequence[str],
        hists: Sequence[Part],
        margins: pl.DataFrame,
    ) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
        """``(grouped_parts(keys, parts, sources), grouped_histograms(hists, margins))``
        of the same records, read once where the engine can."""
        ...

    def category_counts(
        self, columns: Sequence[str], per_person: tuple[str, int] | None = None
    ) -> dict[str, pl.DataFrame]:
        """For each column, a table of its values (``value``, in the column's dtype; null
        counted as a value) and their records (``rows``): the names of
        :data:`dpframe.engines.driver.VALUE` and :data:`~dpframe.engines.driver.VALUE_ROWS`,
        whatever the column's own name. With ``per_person=(person, k)``, only each
        person's first ``k`` records of this read are counted: whatever the read returns,
        one person moves at most ``k`` records of each table (a bound that holds by
        construction, not by a check on another read)."""
        ...

    def without_missing(self, missing: MissingValues, columns: Sequence[str]) -> Engine:
        """The records after the ``nulls=`` policy on ``columns``
        (:mod:`dpframe.core.missing`): those with a null or NaN dropped, or filled."""
        ...

    def largest_person_rows(self, person: str) -> int:
        """The most rows any one person has (0 for no rows); a null, NaN or infinite
        identifier refused (:func:`dpframe.core.values.refuse_missing_ids`)."""
        ...

    def covariance_inputs(
        self, columns: Sequence[str], bounds: Sequence[tuple[float, float]]
    ) -> CovarianceInputs: ...

    def check_output(self, path: Any) -> Any:
        """The output ``path`` for :meth:`write_rowwise`, checked before anything is charged."""
        ...

    def output_target(self, path: Path) -> Any:
        """Where :meth:`write_rowwise` writes the local path ``path``, as this engine
        names it (a path; Spark: its ``file://`` URI, so the executors write there)."""
        ...

    def write_rowwise(
        self,
        columns: Sequence[ArmedPram],
        keep: Sequence[str],
        path: Any,
        metadata: dict[str, str],
        source: RandomSource | None = None,
        unit: PrivacyUnit | None = None,
    ) -> Any:
        """Randomize ``columns`` record by record, keep ``keep`` unchanged, write once
        (each batch keyed afresh from ``source``, else from OS entropy). Under a person
        ``unit``, the rows per person are checked on what the randomizing pass wrote;
        more than ``max_rows`` refuses, publishing nothing."""
        ...

    def written_frame(self, path: Any) -> pl.LazyFrame:
        """What ``write_rowwise`` wrote, scanned lazily (for its schema)."""
        ...

    def written_counts(self, path: Any, columns: Sequence[str]) -> dict[str, pl.DataFrame]:
        """Each written column's records per value, counted by the engine (for the checks):
        tables as :meth:`category_counts` returns."""
        ...

    def cancel_work(self) -> None:
        """Stop the work the engine still runs for this process (an interrupted job:
        Spark's running jobs are cancelled; polars runs nothing once the call returned)."""
        ...


def is_spark_frame(obj: Any) -> bool:
    """True for a ``pyspark.sql.DataFrame`` (classic or Connect), without importing pyspark."""
    return any(
        c.__module__.startswith("pyspark.sql") and c.__name__ == "DataFrame"
        for c in type(obj).__mro__
    )
