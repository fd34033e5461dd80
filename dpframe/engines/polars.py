"""The polars engine: exact aggregates and the row-wise step with native polars, streaming.

Aggregates are computed with native polars first (``group_by().agg()`` of clipped
values, on the streaming engine), and only the small result reaches the release: a
Python function inside ``group_by().agg()`` would be called once per group. The row-wise
step (PRAM) runs in ``map_batches(..., is_elementwise=True)``, once per streaming morsel,
with a generator keyed afresh for every morsel (``docs/architecture.md``).

The value <-> category-code conversion of a polars column (:func:`encode`,
:func:`decode`) lives here too: ``.dp.pram`` uses it in its morsels.

Examples
--------
>>> import polars as pl
>>> from dpframe.engines.polars import PolarsEngine
>>> from dpframe.mechanisms.statistics import sum as stat_sum
>>> stat = stat_sum("x", lower=0, upper=10, epsilon=1.0)
>>> eng = PolarsEngine(pl.LazyFrame({"g": ["a", "a", "b"], "x": [1.0, 20.0, 3.0]}))
>>> eng.grouped_parts(["g"], stat.parts(False), ["x"]).sort("g")["x_sum:sum"].to_list()
[11.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from dpframe.core.files import atomic_file, check_output_path
from dpframe.core.missing import MissingValues
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit, check_person_rows
from dpframe.core.values import refuse_missing_ids
from dpframe.engines.bounding import (
    bounded_frame,
    bounded_grouped_parts,
    check_unit,
)
from dpframe.engines.driver import (
    BAD_PREFIX,
    BIN,
    COUNT,
    GROUP,
    ROWS,
    VALUE,
    VALUE_ROWS,
    person_of,
)
from dpframe.engines.progress import rows_done
from dpframe.engines.protocol import CovarianceInputs
from dpframe.errors import InvalidDataError, InvalidParameterError

if TYPE_CHECKING:
    import numpy as np

    from dpframe.mechanisms.pram.plan import ArmedPram
    from dpframe.mechanisms.statistics import Operand, Part

__all__ = [
    "Codebook",
    "PolarsEngine",
    "bad_rows",
    "bad_values",
    "cell_exprs",
    "decode",
    "encode",
    "operand",
    "part_expr",
    "part_values",
]


#: The parts whose value over a group is the sum of their values over any split of it.
SUMMED = ("count", "sum", "at_least")
#: The most (margin keys x cells) that one aggregation per (keys, cell) may hold, every
#: part a column of it (:meth:`PolarsEngine.grouped_parts_and_histograms`): beyond, the
#: parts are aggregated per key apart (a second read), so memory stays that of the parts
#: and of the histogram's counts.
FUSED_CELLS = 2**20
#: The fewest records for which the PRAM sink releases each morsel's codes by the
#: compiled loop (:mod:`dpframe.mechanisms.pram.sampling_kernel`): below, loading it
#: (numba, about 0.3 s a process) costs more than it saves (about 9 ns a value).
COMPILED_PRAM_ROWS = 2**22


def operand(op: Operand) -> pl.Expr:
    """The record-level value: the column as Float64, clipped to its bounds (if any)."""
    x = pl.col(op.column).cast(pl.Float64)
    return x if op.lower is None else x.clip(op.lower, op.upper)


def part_values(part: Part) -> pl.Expr:
    """The record-level values a ``sum`` part adds up (a clipped column, or a product);
    of an ``at_least`` part, 1.0 where the column is ``>=`` its bound, else 0.0."""
    if part.op == "at_least":
        return (pl.col(part.x.column).cast(pl.Float64) >= part.x.lower).cast(pl.Float64)
    x = operand(part.x)
    return x if part.y is None else x * operand(part.y)


def part_expr(part: Part) -> pl.Expr:
    """The polars aggregate of one exact part (:class:`dpframe.mechanisms.statistics.Part`)."""
    if part.op == "count":
        e = pl.len().cast(pl.Float64)
    elif part.op in ("sum", "at_least"):
        e = part_values(part).sum()
    elif part.op == "mean":
        e = operand(part.x).mean()
    elif part.op == "var":
        e = operand(part.x).var(ddof=1)
    elif part.op == "cov":
        e = pl.cov(operand(part.x), operand(part.y), ddof=1)
    elif part.op == "distinct":
        e = pl.col(person_of(part)).n_unique().cast(pl.Float64)
    else:
        raise InvalidParameterError(f"unknown aggregate {part.op!r}")
    return e.alias(part.name)


def cell_exprs(part: Part, name: str, value: str) -> list[pl.Expr]:
    """Each record's cell on a ``"hist"`` part's grid, exactly by
    :meth:`dpframe.mechanisms.quantile.Grid.cell_index`'s rule (the value clipped to the
    grid's bounds; cell ``2k`` holds ``x == e_k``, cell ``2k + 1`` holds ``e_k < x <
    e_{k+1}``), in steps, each to be run by its own ``with_columns`` in order (so that
    each is computed once: polars does not share a part of a nested expression): the
    clipped value in column ``value``, then column ``name`` -- the bin, moved, then the
    cell (Int64).

    The bin ``k`` with ``e_k <= x < e_{k+1}`` (the last also ``x == e_B``) is guessed
    from the value's position between the bounds, then moved down where ``x < e_k`` and
    up where ``x >= e_{k+1}``; the cell is ``2k``, plus 1 unless ``x == e_k``, plus 1 if
    ``x == e_B``. Comparisons with the edges decide it, the arithmetic only saves a
    search. On a grid of equal steps the guess is off by at most one bin (rounding), so
    one move each way is exact. Where every edge is ``e_0 + k * step`` bit for bit (the
    last one ``e_B``), the edges compared with are computed so (the same two float
    operations as the grid's); on other grids of about equal steps they are looked up;
    elsewhere the edges are searched (``search_sorted``: one step after the value's).
    """
    import numpy as np

    edges = np.asarray(part.grid.edges, dtype=np.float64)
    bins = int(edges.size - 1)
    lo, hi = float(edges[0]), float(edges[-1])
    # NaN as null: in no cell (a bad value, refused by its count), never an index
    x_ = pl.col(cast("Operand", part.x).column).cast(pl.Float64)
    clipped = x_.fill_nan(None).clip(lo, hi)
    x, k = pl.col(value), pl.col(name)
    step = _exact_step(edges)
    if step is not None:  # bin numbers as floats: e_k = e_0 + k * step as the grid has it

        def edge(k: pl.Expr) -> pl.Expr:  # e_k for k <= B (e_0 + B * step >= e_B)
            return (lo + k * step).clip(upper_bound=hi)

    else:
        step = float(edges[1] - edges[0])
        widths = np.diff(edges)
        if not (np.allclose(widths[:-1], step, rtol=1e-9, atol=0.0) and widths[-1] <= step):
            table = pl.lit(pl.Series(edges))
            below = table.search_sorted(x, side="left").cast(pl.Int64)
            cell = below + table.search_sorted(x, side="right").cast(pl.Int64) - 1
            return [clipped.alias(value), cell.alias(name)]
        table = pl.lit(pl.Series(edges, dtype=pl.Float64))

        def edge(k: pl.Expr) -> pl.Expr:
            return table.gather(k.cast(pl.Int64))

    guess = ((x - lo) / step).floor().clip(0, bins - 1)
    down = (k - (x < edge(k)).cast(pl.Float64)).clip(0, bins - 1)
    up = k + ((x >= edge(k + 1)) & (k < bins - 1)).cast(pl.Float64)
    cell = 2 * k.cast(pl.Int64) + (x != edge(k)).cast(pl.Int64) + (x == hi).cast(pl.Int64)
    return [clipped.alias(value), *(e.alias(name) for e in (guess, down, up, cell))]


def _with_cells(frame: pl.LazyFrame, part: Part, name: str, value: str) -> pl.LazyFrame:
    """``frame`` with each record's cell on ``part``'s grid in column ``name`` (Int32) and
    its clipped value in ``value`` (:func:`cell_exprs`; both names not in ``frame``)."""
    for step in cell_exprs(part, name, value):
        frame = frame.with_columns(step)
    return frame.with_columns(pl.col(name).cast(pl.Int32))


def _has_rows(frame: pl.LazyFrame, n: int) -> bool:
    """Whether ``frame`` has at least ``n`` records, without counting them all: a probe
    reads at most ``n`` (free on a Parquet scan, counted from its footer; a filtered or
    joined input stops reading there)."""
    probe = frame.head(n).select(pl.len()).collect(engine="streaming")
    return int(probe.item()) >= n


def _conform(frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """``frame``'s columns in ``schema``'s order and dtypes (the compiled pass's results
    as the polars query would have them)."""
    return frame.select(pl.col(n).cast(t) for n, t in schema.items())


def _exact_step(edges: np.ndarray) -> float | None:
    """The step with which every edge but the last is ``e_0 + k * step`` exactly (the last
    is the upper bound), if there is one among the likely ones; else None."""
    import numpy as np

    bins = edges.size - 1
    lo = edges[0]
    k = np.arange(bins, dtype=np.float64)
    for step in ((edges[-1] - lo) / bins, edges[1] - lo):
        if np.array_equal(lo + k * step, edges[:-1]) and lo + bins * step >= edges[-1]:
            return float(step)
    return None


def bad_rows(column: str, dtype: pl.DataType) -> pl.Expr:
    """Whether each value of a column is null, NaN or infinite (the rule of
    :mod:`dpframe.core.values`), a Boolean a row."""
    col = pl.col(column)
    bad = col.is_null()
    if dtype.is_float():
        bad = bad | col.is_nan() | col.is_infinite()
    return bad


def bad_values(column: str, dtype: pl.DataType) -> pl.Expr:
    """The number of null, NaN or infinite values of a column (:func:`bad_rows`), named
    ``__bad__<column>``."""
    return bad_rows(column, dtype).sum().alias(f"{BAD_PREFIX}{column}")


class PolarsEngine:
    """The records as a polars LazyFrame (a DataFrame is run lazily)."""

    name = "polars"
    streams_rows = True
    offers_dp_prior = True

    def __init__(self, frame: pl.LazyFrame | pl.DataFrame) -> None:
        if isinstance(frame, pl.DataFrame):
            frame = frame.lazy()
        if not isinstance(frame, pl.LazyFrame):
            raise InvalidParameterError(
                f"frame must be a polars DataFrame or LazyFrame, got {type(frame).__name__}"
            )
        self.frame = frame

    def schema(self) -> pl.Schema:
        return self.frame.collect_schema()

    def rows(self) -> int:
        return int(self.frame.select(pl.len()).collect(engine="streaming").item())

    def with_constant(self, column: str) -> PolarsEngine:
        """The records with ``column`` True in every row (the key of a whole frame)."""
        return PolarsEngine(self.frame.with_columns(pl.lit(True).alias(column)))

    def bounded(
        self, unit: PrivacyUnit, keys: Sequence[str], source: RandomSource | None = None
    ) -> PolarsEngine:
        """The records each person keeps (:func:`dpframe.engines.bounding.bounded_frame`):
        at most ``unit.max_groups`` groups of ``keys`` and ``unit.max_rows`` rows in each,
        chosen uniformly at random; ``self`` for a record unit."""
        if unit.is_record:
            return self
        return PolarsEngine(bounded_frame(self.frame, unit, keys, source))

    def without_missing(self, missing: MissingValues, columns: Sequence[str]) -> PolarsEngine:
        """The records after the ``nulls=`` policy (:mod:`dpframe.core.missing`) on
        ``columns``: those with a null or NaN dropped, or those values filled."""
        if missing.policy == "refuse":
            return self
        schema = self.schema()
        if missing.policy == "drop":
            known = [
                pl.col(c).is_not_null() & pl.col(c).is_not_nan()
                if schema[c].is_float()
                else pl.col(c).is_not_null()
                for c in dict.fromkeys(columns)
            ]
            return PolarsEngine(self.frame.filter(pl.all_horizontal(known)))
        filled = []
        for c, value in missing.fill.items():
            e = pl.col(c).fill_nan(value) if schema[c].is_float() else pl.col(c)
            filled.append(e.fill_null(pl.lit(value, dtype=schema[c])).alias(c))
        return PolarsEngine(self.frame.with_columns(filled))

    def bounded_grouped_parts(
        self,
        unit: PrivacyUnit,
        keys: Sequence[str],
        parts: Sequence[Part],
        sources: Sequence[str],
        source: RandomSource | None = None,
    ) -> pl.DataFrame:
        """``self.bounded(unit, keys, source).grouped_parts(keys, parts, sources)``, faster
        (:func:`dpframe.engines.bounding.bounded_grouped_parts`: one pass over the records),
        for counts and sums -- the parts of a person-level release. The bad-value counts
        cover all input rows, not only the kept ones.

        Examples
        --------
        >>> from dpframe.core.units import PrivacyUnit, check_person_rows
        >>> from dpframe.mechanisms.statistics import count
        >>> lf = pl.LazyFrame({"pid": [1, 1, 2], "g": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
        >>> unit = PrivacyUnit("pid", max_rows=1, max_groups=1)
        >>> parts = count(epsilon=1.0).parts(False)
        >>> out = PolarsEngine(lf).bounded_grouped_parts(unit, ["g"], parts, [])
        >>> int(out["__rows"].sum())
        2
        """
        if unit.is_record:
            return self.grouped_parts(keys, parts, sources)
        summed = ("sum", "at_least")
        wrong = [p.name for p in parts if p.op not in ("count", "distinct", *summed)]
        if wrong:
            raise InvalidParameterError(
                f"parts {wrong}: a person-level release is made of counts and sums (and "
                "counts of distinct persons) only"
            )
        schema = self.schema()
        values = {p.name: part_values(p) for p in parts if p.op in summed}
        counts = list(dict.fromkeys(p.name for p in parts if p.op == "count"))
        bads = {f"{BAD_PREFIX}{c}": bad_rows(c, schema[c]) for c in dict.fromkeys(sources)}
        distinct = list(dict.fromkeys(p.name for p in parts if p.op == "distinct"))
        return bounded_grouped_parts(
            self.frame, unit, keys, values, counts, bads, source, distinct=distinct
        )

    def grouped_parts(
        self, keys: Sequence[str], parts: Sequence[Part], sources: Sequence[str]
    ) -> pl.DataFrame:
        query = self._parts_query(keys, parts, sources)
        dense = self._dense(keys, parts, sources, None)
        if dense is not None:  # the same frame, from the compiled pass
            return _conform(dense[0], query.collect_schema())
        return query.collect(engine="streaming")

    def _dense(
        self, keys: Sequence[str], parts: Sequence[Part], sources: Sequence[str], hist: Part | None
    ) -> tuple[pl.DataFrame, pl.DataFrame | None] | None:
        """The parts (and ``hist``'s rows) by the compiled pass over dense keys
        (:func:`dpframe.engines.dense_parts.dense_parts`), where it applies and there are
        at least :data:`~dpframe.engines.dense_parts.DENSE_ROWS` records; else None.

        The records are not counted (:func:`_has_rows`)."""
        from dpframe.engines import dense_parts as dp

        layout = dp.dense_layout(self.schema(), keys, parts, sources, hist)
        if layout is None or not _has_rows(self.frame, dp.DENSE_ROWS):
            return None
        return dp.dense_parts(self.frame, layout, parts, sources)

    def _parts_query(
        self, keys: Sequence[str], parts: Sequence[Part], sources: Sequence[str]
    ) -> pl.LazyFrame:
        """The query of :meth:`grouped_parts`: one row per key, its parts aggregated."""
        schema = self.schema()
        exprs: dict[str, pl.Expr] = {}
        for p in parts:
            exprs.setdefault(p.name, part_expr(p))
        for c in dict.fromkeys(sources):
            exprs.setdefault(f"{BAD_PREFIX}{c}", bad_values(c, schema[c]))
        return self.frame.group_by(list(keys)).agg(pl.len().alias(ROWS), *exprs.values())

    def grouped_histograms(
        self, parts: Sequence[Part], margins: pl.DataFrame
    ) -> dict[str, pl.DataFrame]:
        """For each ``"hist"`` part, one row per ``(__group, __bin)`` holding a record
        whose keys are in ``margins`` (:func:`dpframe.engines.driver.indexed_margins`:
        the keys, and the margins' row in ``__group``), its cell in ``__bin``
        (:func:`cell_exprs`), with its records in ``__count``: counted while streaming
        (memory bounded by the keys and cells, not by the records), the parts sharing
        one scan (:func:`polars.collect_all`); the driver shapes them
        (:func:`dpframe.engines.driver.dense_histogram`).

        Examples
        --------
        >>> from dpframe.engines.driver import indexed_margins
        >>> from dpframe.mechanisms.statistics import median
        >>> lf = pl.LazyFrame({"g": ["a", "b", "a"], "x": [0.0, 10.0, 7.5]})
        >>> part = median("x", lower=0, upper=10, epsilon=1.0, resolution=5).parts(False)[0]
        >>> margins = indexed_margins(pl.DataFrame({"g": ["b", "a"]}), lf.collect_schema(), ["g"])
        >>> rows = PolarsEngine(lf).grouped_histograms([part], margins)[part.name]
        >>> rows.sort("__group", "__bin").rows()
        [(0, 4, 1), (1, 0, 1), (1, 3, 1)]
        """
        keys = [c for c in margins.columns if c != GROUP]
        free = _free_names(self.schema(), 2 * len(parts))
        steps = {p.name: p for p in parts}
        # the records whose keys are in the margins (a semi join: no column added), counted
        # per (keys, cell) while streaming (at most margins x cells rows), then given their
        # margins' row: the same counts as joining every record first, at less cost
        kept = self.frame.join(margins.select(keys).lazy(), on=keys, how="semi")
        for i, p in enumerate(steps.values()):
            kept = _with_cells(kept, p, free[2 * i], free[2 * i + 1])
        query = kept.select(*keys, *(pl.col(free[2 * i]).alias(n) for i, n in enumerate(steps)))
        counts = [
            query.group_by(*keys, pl.col(n).alias(BIN)).agg(pl.len().alias(COUNT)) for n in steps
        ]
        done = pl.collect_all(counts, engine="streaming")
        return _histogram_rows(list(steps), margins, done)

    def grouped_parts_and_histograms(
        self,
        keys: Sequence[str],
        parts: Sequence[Part],
        sources: Sequence[str],
        hists: Sequence[Part],
        margins: pl.DataFrame,
    ) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
        """``(self.grouped_parts(keys, parts, sources), self.grouped_histograms(hists,
        margins))``, from **one** read of the records where it can.

        With one histogram (one column on one grid) and parts that add up over any
        split of a group (:data:`SUMMED`: counts and sums), one streaming aggregation per
        ``(keys, cell)`` holds both: the histogram is its records per cell (of the keys
        in ``margins``), the parts are its sums per key -- at most keys x cells rows,
        whatever the records. Otherwise (several grids, a mean or variance of public
        sizes, distinct persons, more than :data:`FUSED_CELLS` margin keys x cells) the
        two run one after the other.

        Examples
        --------
        >>> from dpframe.engines.driver import indexed_margins
        >>> from dpframe.mechanisms.statistics import count, median
        >>> lf = pl.LazyFrame({"g": ["a", "b", "a"], "x": [0.0, 10.0, 7.5]})
        >>> hist = median("x", lower=0, upper=10, epsilon=1.0, resolution=5).parts(False)
        >>> margins = indexed_margins(pl.DataFrame({"g": ["b", "a"]}), lf.collect_schema(), ["g"])
        >>> agg, rows = PolarsEngine(lf).grouped_parts_and_histograms(
        ...     ["g"], count(epsilon=1.0).parts(False), ["x"], hist, margins
        ... )
        >>> agg.sort("g")["__rows"].to_list(), rows[hist[0].name].sort("__group", "__bin").rows()
        ([2, 1], [(0, 4, 1), (1, 0, 1), (1, 3, 1)])
        """
        names = list(dict.fromkeys(p.name for p in hists))
        fits = len(names) == 1 and margins.height * hists[0].grid.cells <= FUSED_CELLS
        if not fits or any(p.op not in SUMMED for p in parts):
            return self.grouped_parts(keys, parts, sources), self.grouped_histograms(hists, margins)
        keys = list(keys)
        cell, value = _free_names(self.schema(), 2)
        celled = _with_cells(self.frame, hists[0], cell, value)
        fine = PolarsEngine(celled)._parts_query([*keys, cell], parts, sources)
        summed = [c for c in fine.collect_schema().names() if c not in (*keys, cell)]
        dense = self._dense(keys, parts, sources, hists[0])
        if dense is not None:  # the same frames, from the compiled pass
            schema = fine.group_by(keys).agg(pl.col(summed).sum()).collect_schema()
            counted = fine.select(*keys, pl.col(cell).alias(BIN), pl.col(ROWS).alias(COUNT))
            agg = _conform(dense[0], schema)
            counts = _conform(cast("pl.DataFrame", dense[1]), counted.collect_schema())
            return agg, _histogram_rows(names, margins, [counts])
        rows = fine.collect(engine="streaming")
        agg = rows.group_by(keys).agg(pl.col(summed).sum())
        counts = rows.select(*keys, pl.col(cell).alias(BIN), pl.col(ROWS).alias(COUNT))
        return agg, _histogram_rows(names, margins, [counts])

    def category_counts(
        self, columns: Sequence[str], per_person: tuple[str, int] | None = None
    ) -> dict[str, pl.DataFrame]:
        """For each column, its values (``value``) and their records (``rows``): enums and
        booleans counted by their codes in one read
        (:func:`dpframe.engines.dense_parts.code_counts`), other columns by polars'
        ``group_by``, every query sharing one scan. ``per_person=(person, k)``: each
        person's first ``k`` records of the read only (a window over the person, in
        memory)."""
        from dpframe.engines.dense_parts import code_counts, coded

        schema = self.schema()
        frame = self.frame
        if per_person is not None:
            person, k = per_person
            frame = frame.filter(pl.int_range(pl.len()).over(person) < k)
        queries = {
            c: frame.select(pl.col(c).alias(VALUE)).group_by(VALUE).agg(pl.len().alias(VALUE_ROWS))
            for c in columns
        }
        coded_ = [c for c in dict.fromkeys(columns) if coded(schema[c])]
        rest = [c for c in dict.fromkeys(columns) if c not in coded_]
        found = dict(
            zip(rest, pl.collect_all([queries[c] for c in rest], engine="streaming"), strict=True)
        )
        if coded_:
            counted = code_counts(frame, coded_)
            found |= {c: _conform(counted[c], queries[c].collect_schema()) for c in coded_}
        return {c: found[c] for c in columns}

    def largest_person_rows(self, person: str) -> int:
        schema = self.schema()
        check_unit(schema, PrivacyUnit(person, 1, 1), [])
        per = self.frame.group_by(person).agg(pl.len().alias("__n"))  # a person may be "n"
        row = per.select(
            pl.col("__n").max().alias("most"), bad_rows(person, schema[person]).sum().alias("bad")
        ).collect(engine="streaming")
        refuse_missing_ids(person, int(row["bad"].item() or 0))
        return int(row["most"].item() or 0)

    def covariance_inputs(
        self, columns: Sequence[str], bounds: Sequence[tuple[float, float]]
    ) -> CovarianceInputs:
        import numpy as np

        schema = self.schema()
        clipped = {
            c: pl.col(c).cast(pl.Float64).clip(lo, hi)
            for c, (lo, hi) in zip(columns, bounds, strict=True)
        }
        row = (
            self.frame.select(
                pl.len().alias(ROWS),
                *[bad_values(c, schema[c]) for c in columns],
                *[  # each pair once (cov(a, b) and cov(b, a) are the same sums), named
                    # by the columns' places: a name may hold any character
                    pl.cov(clipped[a], clipped[b], ddof=1).alias(f"__cov_{i}_{j}")
                    for i, a in enumerate(columns)
                    for j, b in enumerate(columns)
                    if i <= j
                ],
            )
            .collect(engine="streaming")
            .row(0, named=True)
        )
        d = len(columns)
        cov = np.array(
            [[row[f"__cov_{min(i, j)}_{max(i, j)}"] for j in range(d)] for i in range(d)],
            dtype=np.float64,
        )
        bad = {c: int(row[f"{BAD_PREFIX}{c}"]) for c in columns}
        return CovarianceInputs(cov, int(row[ROWS]), bad)

    def output_target(self, path: Path) -> Path:
        """``path`` itself: polars writes on this machine."""
        return path

    def check_output(self, path: Any) -> Path:
        """A file path whose folder exists (the file is replaced atomically)."""
        if isinstance(path, str):
            path = path.removeprefix("file://")
        return check_output_path(path)

    def write_rowwise(
        self,
        columns: Sequence[ArmedPram],
        keep: Sequence[str],
        path: Any,
        metadata: dict[str, str],
        source: RandomSource | None = None,
        unit: PrivacyUnit | None = None,
    ) -> Any:
        source = source or RandomSource()
        schema = self.schema()
        # a large input: each morsel's codes released by the compiled loop (the same
        # codes from the same draws; loaded here once, not by the first morsels at once)
        compiled = _has_rows(self.frame, COMPILED_PRAM_ROWS)
        if compiled:
            from dpframe.mechanisms.pram.sampling_kernel import load_kernels

            load_kernels()
        exprs = [
            pl.col(a.column).map_batches(
                # each column its own source, made here in column order: what a column
                # draws does not depend on the order polars runs the columns in
                randomizer(a, source.spawn(), counts=i == 0, compiled=compiled),
                return_dtype=schema[a.column],
                # seeded: one call on the whole column, so the draws meet the rows in one
                # order (morsels reach a row-wise function in any order); unseeded streams
                is_elementwise=not source.seeded,
            )
            for i, a in enumerate(columns)
        ]
        names = [*(a.column for a in columns), *keep]
        person = None if unit is None or unit.is_record else unit.person
        with atomic_file(path) as tmp:
            if person is None:
                self.frame.select(*exprs, *[pl.col(c) for c in keep]).sink_parquet(
                    tmp, metadata=metadata, compression="zstd"
                )
                return path
            # a person unit: the rows per person are checked on what this pass wrote (the
            # same evaluation that was randomized), never on another read of a lazy input
            full = Path(f"{tmp}.persons")
            extra = [] if person in names else [pl.col(person)]
            try:
                self.frame.select(*exprs, *[pl.col(c) for c in keep], *extra).sink_parquet(
                    full, compression="zstd"
                )
                check_written_persons(pl.scan_parquet(full), cast(PrivacyUnit, unit))
                pl.scan_parquet(full).select(names).sink_parquet(
                    tmp, metadata=metadata, compression="zstd"
                )
            finally:
                full.unlink(missing_ok=True)
        return path

    def written_frame(self, path: Any) -> pl.LazyFrame:
        return pl.scan_parquet(path)

    def cancel_work(self) -> None:
        """Nothing to stop: polars' work ends with the call that ran it."""

    def written_counts(self, path: Any, columns: Sequence[str]) -> dict[str, pl.DataFrame]:
        return PolarsEngine(pl.scan_parquet(path)).category_counts(columns)


def _free_names(schema: pl.Schema, n: int) -> list[str]:
    """``n`` column names ``__bin<i>``, none a column of the data."""
    names = (f"__bin{i}" for i in range(n + len(schema)))
    return [c for c in names if c not in schema][:n]


def _histogram_rows(
    names: Sequence[str], margins: pl.DataFrame, counts: Sequence[pl.DataFrame]
) -> dict[str, pl.DataFrame]:
    """Each part's records per ``(keys, cell)`` (``counts``, in the order of ``names``)
    given their margins' row, the keys not in ``margins`` dropped: ``__group``,
    ``__bin``, ``__count`` (:meth:`PolarsEngine.grouped_histograms`)."""
    keys = [c for c in margins.columns if c != GROUP]
    return {
        n: c.join(margins, on=keys, how="inner").select(GROUP, BIN, COUNT)
        for n, c in zip(names, counts, strict=True)
    }


def after_charge_message() -> str:
    """What a check on the randomizing pass says when it fails (after the charge)."""
    return (
        "The randomizing pass read the input differently from the check before the charge "
        "(a lazy input that changes between reads, or a file rewritten): the budget is "
        "spent, nothing was published."
    )


def check_written_persons(written: pl.LazyFrame, unit: PrivacyUnit) -> None:
    """The rows a randomizing pass wrote hold no person with more than ``max_rows`` rows,
    and no missing person id (checked after the charge: the message says so)."""
    person = cast(str, unit.person)
    dtype = written.collect_schema()[person]
    missing = pl.col(person).is_null()
    if dtype.is_float():
        missing = missing | ~pl.col(person).is_finite()  # NaN and infinities: no person
    nulls = written.select(missing.sum()).collect(engine="streaming").item()
    most = (
        (written.group_by(person).agg(pl.len().alias("__n")).select(pl.col("__n").max()))
        .collect(engine="streaming")
        .item()
    )
    after = after_charge_message()
    if nulls:
        raise InvalidDataError(
            f"unit: column {person!r} had null, NaN or infinite person ids in the pass that "
            "randomized. " + after
        )
    check_person_rows(int(most or 0), unit, "PRAM", after_charge=after)


def randomizer(
    armed: ArmedPram, source: RandomSource, counts: bool = False, compiled: bool = False
) -> Callable[[pl.Series], pl.Series]:
    """The function polars runs per morsel: encode, randomize (a fresh key; ``compiled``:
    by the compiled loop, the same codes), decode (``counts``: report the morsel's rows to
    a progress bar, for one column of a query)."""

    book = Codebook(armed.categories)

    def run(s: pl.Series) -> pl.Series:
        codes = book.encode(s, armed.column)
        out = book.decode(armed.randomize(codes, source.generator(), compiled=compiled), s)
        if counts:
            rows_done(s.len())
        return out

    return run


class Codebook:
    """The declared categories of one column and the lookups between values and codes.

    Built once per column (a release's morsels share it): :meth:`encode` and
    :meth:`decode` of each morsel reuse its lookups instead of building them again.
    Integer categories ``0, 1, ..., S - 1`` are their own codes, so a morsel of them is
    only range-checked (no copy of an ``Int64`` column) and decoded without a gather.

    Parameters
    ----------
    categories : tuple
        Every possible value, in the order of their codes (checked against the column's
        dtype by the caller: :func:`dpframe.engines.driver.check_categories_fit`).

    Examples
    --------
    >>> import polars as pl
    >>> book = Codebook(("own", "rent"))
    >>> s = pl.Series("tenure", ["rent", "own", "rent"])
    >>> book.encode(s, "tenure").tolist()
    [1, 0, 1]
    >>> book.decode(book.encode(s, "tenure"), s).to_list()
    ['rent', 'own', 'rent']
    """

    __slots__ = ("_enum", "_ints", "_lookups", "categories")

    def __init__(self, categories: Sequence[Any]) -> None:
        self.categories = tuple(categories)
        self._ints: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._enum: pl.Enum | None = None
        self._lookups: dict[pl.DataType, pl.Series] = {}

    def _integers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The categories as ``int64``, their sorting order and the sorted values (built
        on the first integer morsel; empty order when they are ``0, ..., S - 1``)."""
        import numpy as np

        if self._ints is None:
            arr = np.asarray(self.categories, dtype=np.int64)
            if np.array_equal(arr, np.arange(arr.size)):
                empty = np.empty(0, dtype=np.int64)
                self._ints = (arr, empty, empty)
            else:
                order = np.argsort(arr, kind="stable")
                self._ints = (arr, order, arr[order])
        return self._ints

    def _identity(self) -> bool:
        """The categories are the integers ``0, ..., S - 1``: each value is its code."""
        arr, order, _ = self._integers()
        return arr.size > 0 and order.size == 0

    def encode(self, s: pl.Series, name: str) -> np.ndarray:
        """Category codes (``int64``, in the order of the categories) of a Series.

        Refuses nulls and values outside the categories.
        """
        import numpy as np

        if s.null_count():
            raise InvalidDataError(
                f"column {name!r} has {s.null_count()} null value(s) in this batch; PRAM "
                "needs a category for every record: fill them with a declared category "
                "(e.g. .fill_null('unknown') and list 'unknown' in categories=) or drop them"
            )
        dtype = s.dtype
        if dtype.is_integer():
            return self._int_codes(s.to_numpy(), name)
        if self._enum is None:
            self._enum = pl.Enum(list(self.categories))
        if dtype == self._enum:  # the same categories in the same order: codes as they are
            coded = s
        else:
            src = s if dtype == pl.String else s.cast(pl.String)
            coded = src.cast(self._enum, strict=False)
            if coded.null_count():
                bad = src.filter(coded.is_null()).unique().head(5).to_list()
                raise InvalidDataError(
                    f"column {name!r} has values outside the declared categories, e.g. "
                    f"{bad}; add them to categories= or recode them before PRAM"
                )
        return coded.to_physical().to_numpy().astype(np.int64, copy=False)

    def _int_codes(self, values: np.ndarray, name: str) -> np.ndarray:
        import numpy as np

        arr, order, srt = self._integers()
        if self._identity():  # a range check: no temporary, and no copy of int64 values
            # one pass: a negative value, read as unsigned, is above every category
            unsigned = values.view(values.dtype.str.replace("i", "u"))
            if values.size and unsigned.max() >= arr.size:
                bad = values[(values < 0) | (values >= arr.size)]
                self._refuse(bad, name)
            return values.astype(np.int64, copy=False)
        v = values.astype(np.int64, copy=False)
        pos = np.clip(np.searchsorted(srt, v), 0, srt.size - 1)
        wrong = srt[pos] != v
        if wrong.any():
            self._refuse(v[wrong], name)
        return np.take(order, pos)

    @staticmethod
    def _refuse(bad: np.ndarray, name: str) -> None:
        import numpy as np

        raise InvalidDataError(
            f"column {name!r} has values outside the declared categories, e.g. "
            f"{np.unique(bad)[:5].tolist()}; add them to categories= or recode them"
        )

    def decode(self, codes: np.ndarray, like: pl.Series) -> pl.Series:
        """Codes back to values, with ``like``'s dtype and name."""
        import numpy as np

        dtype = like.dtype
        if dtype.is_integer():
            values = codes if self._identity() else np.take(self._integers()[0], codes)
            return pl.Series(like.name, values).cast(dtype)
        lookup = self._lookups.get(dtype)
        if lookup is None:  # the categories in the column's dtype (built once per dtype)
            lookup = pl.Series("", list(self.categories), dtype=pl.String)
            if isinstance(dtype, pl.Enum) or dtype != pl.String:
                lookup = lookup.cast(dtype)
            self._lookups[dtype] = lookup
        return lookup.gather(codes).alias(like.name)


def encode(s: pl.Series, name: str, cats: tuple[Any, ...]) -> np.ndarray:
    """Category codes (``int64``, in the order of ``cats``) of a polars Series.

    Refuses nulls and values outside the categories (the caller checked that the
    categories fit the dtype: :func:`dpframe.engines.driver.check_categories_fit`).
    Per morsel of one column, build a :class:`Codebook` once and call its ``encode``.
    """
    return Codebook(cats).encode(s, name)


def decode(codes: np.ndarray, cats: tuple[Any, ...], like: pl.Series) -> pl.Series:
    """Codes back to values with ``like``'s dtype and name (see :class:`Codebook`)."""
    return Codebook(cats).decode(codes, like)
