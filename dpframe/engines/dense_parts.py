"""The exact grouped parts of a record-level release over few keys, in one compiled pass.

Where every key is an enum or a boolean (its physical integers are its values, so the
keys' combinations can be numbered without reading them: at most :data:`DENSE_SLOTS`
groups x histogram cells) and every part adds up over any split of a group (counts, sums
of clipped values or of their products, records at or above an edge), polars' streaming
aggregation of many parts costs two to three reads of the columns (the demo's
``by_region``, 15 aggregates over region x age band x 2001 cells of a median's grid: 2.3 s
at 5e7 rows against a 0.5 s read). Here polars only decodes the columns and numbers each
record's group (on its threads), and one compiled loop adds every part into a dense
array, one slot per group (and per cell of the one histogram); the bad values (null, NaN,
infinite: :mod:`dpframe.core.values`) are counted in the same loop, so the counts that
refuse a release and the sums it releases come from the same read of the records.

The batches' sums are added with Neumaier's compensation (each batch's own sum is a
plain one, in four lanes). Results match
:meth:`dpframe.engines.polars.PolarsEngine.grouped_parts` (and the histogram rows of its
``grouped_parts_and_histograms``) in every column and dtype, counts bit for bit and sums
to rounding (``tests/engines/test_dense_parts.py``), wherever no value is bad: a null
in a summed column makes its group's sum NaN here (polars skips it), which no release
sees -- any bad value refuses the release, counted over every row in the same pass.

Used by the polars engine past :data:`DENSE_ROWS` records only: below, loading the
compiled loop (:mod:`dpframe.engines.dense_kernel`; numba, about 0.2 s in a fresh
process) costs more than it saves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from dpframe.engines.bounding_spill import key_values
from dpframe.engines.driver import VALUE, VALUE_ROWS
from dpframe.mechanisms.statistics import Part

__all__ = ["DENSE_BYTES", "DENSE_ROWS", "DENSE_SLOTS", "DenseLayout", "dense_layout", "dense_parts"]

#: The fewest records for which the engine takes the compiled pass.
DENSE_ROWS = 2**22
#: The most groups (every combination of the keys' codes, a null code each) x histogram
#: cells the pass's arrays hold (8 MiB of counts).
DENSE_SLOTS = 2**20
#: The most bytes the pass's arrays may take (per group: rows, sums, their compensation,
#: four lanes of a batch's sums, bad-value counts, histogram counts; and the two batches'
#: buffers, 4 MiB a column).
DENSE_BYTES = 2**26
#: Records per batch read.
_BATCH = 2**18


@dataclass(frozen=True)
class DenseLayout:
    """How a release's parts map onto the compiled pass: the keys' sizes (categories,
    plus one code for null), the numeric source columns read as Float64 (``values``),
    each summed part's op and operands as indices into ``values``, and the histogram's
    column and grid (if any)."""

    keys: tuple[str, ...]
    sizes: tuple[int, ...]
    values: tuple[str, ...]
    summed: tuple[Part, ...]
    ops: np.ndarray  # int64 (parts,)
    operands: np.ndarray  # int64 (parts, 2): x's and y's column (-1: none)
    bounds: np.ndarray  # float64 (parts, 4): x's and y's lower and upper (+-inf: none)
    hist_column: int  # -1: no histogram
    edges: np.ndarray  # float64: the histogram's grid edges (empty: none)
    walk: bool  # the grid's edges are about equally spaced: guess a bin and walk to it

    @property
    def groups(self) -> int:
        return math.prod(self.sizes)  # Python ints: never wraps (np.prod's int64 would)

    @property
    def cells(self) -> int:
        return 2 * (self.edges.size - 1) + 1 if self.edges.size else 0


def dense_layout(
    schema: pl.Schema,
    keys: Sequence[str],
    parts: Sequence[Part],
    sources: Sequence[str],
    hist: Part | None = None,
) -> DenseLayout | None:
    """The layout of the compiled pass for these parts, or None where it does not apply
    (a key that is not an enum or a boolean, a part that is not a count or a sum, a
    source column that is not numeric, more than :data:`DENSE_SLOTS` slots or
    :data:`DENSE_BYTES` of per-group arrays).

    Examples
    --------
    >>> from dpframe.mechanisms.statistics import count
    >>> schema = pl.Schema({"g": pl.Enum(["a", "b"]), "x": pl.Float64()})
    >>> dense_layout(schema, ["g"], count(epsilon=1.0).parts(False), ["x"]).sizes
    (3,)
    >>> dense_layout(schema, ["x"], count(epsilon=1.0).parts(False), []) is None
    True
    """
    sizes = []
    for k in keys:
        dtype = schema[k]
        if isinstance(dtype, pl.Enum):
            sizes.append(len(dtype.categories) + 1)
        elif isinstance(dtype, pl.Boolean):
            sizes.append(3)
        else:
            return None
    if any(p.op not in ("count", "sum", "at_least") for p in parts):
        return None
    operands = [o for p in [*parts, *([hist] if hist else [])] for o in (p.x, p.y) if o]
    columns = [*(o.column for o in operands), *sources]
    values = tuple(dict.fromkeys(c for c in columns if c not in keys))
    if any(c in keys for c in (o.column for o in operands)):
        return None
    if any(not schema[c].is_numeric() for c in values):
        return None
    index = {c: i for i, c in enumerate(values)}
    first: dict[str, Part] = {}  # a name's first part, as the polars query keeps it
    for p in parts:
        if p.op != "count":
            first.setdefault(p.name, p)
    summed = tuple(first.values())
    from dpframe.engines.dense_kernel import AT_LEAST, PRODUCT, SUM

    ops = np.zeros(len(summed), dtype=np.int64)
    cols = np.full((len(summed), 2), -1, dtype=np.int64)
    bounds = np.tile(np.array([-np.inf, np.inf, -np.inf, np.inf]), (len(summed), 1))
    for i, p in enumerate(summed):
        ops[i] = AT_LEAST if p.op == "at_least" else PRODUCT if p.y is not None else SUM
        for j, o in enumerate((p.x, p.y)):
            if o is None:
                continue
            cols[i, j] = index[o.column]
            if o.lower is not None:
                bounds[i, 2 * j : 2 * j + 2] = (o.lower, np.inf if p.op == "at_least" else o.upper)
    edges = np.zeros(0, dtype=np.float64)
    walk = True
    if hist is not None:
        # a copy: a grid's edges may be read-only, and a read-only array is another
        # signature of the loop (compiled on a fresh environment's first such release)
        edges = np.array(hist.grid.edges, dtype=np.float64)
        with np.errstate(all="ignore"):  # a grid spanning float64 (inf step): searched
            step = (edges[-1] - edges[0]) / (edges.size - 1)
            guess = edges[0] + step * np.arange(edges.size)
            walk = bool(np.all(np.abs(guess - edges) <= 2 * step))
            # the kernel's bins per unit must be finite (a grid narrower than its bins over
            # float64's largest value, e.g. of subnormal width, is searched)
            walk = walk and bool(np.isfinite((edges.size - 1) / (edges[-1] - edges[0])))
    layout = DenseLayout(
        tuple(keys),
        tuple(sizes),
        values,
        summed,
        ops,
        cols,
        bounds,
        index[hist.x.column] if hist is not None else -1,
        edges,
        walk,
    )
    per_group = 8 * (3 + 6 * len(summed) + len(values) + layout.cells)
    buffers = 2 * _BATCH * 8 * (len(values) + 1)  # two batches read ahead
    if layout.groups * max(layout.cells, 1) > DENSE_SLOTS:
        return None
    if layout.groups * per_group + buffers > DENSE_BYTES:
        return None
    return layout


def _group_expr(layout: DenseLayout) -> pl.Expr:
    """Each record's group number: the keys' codes (a null the code after the last
    category), mixed radix, the last key varying fastest."""
    expr = pl.lit(0, dtype=pl.Int64)
    for k, size in zip(layout.keys, layout.sizes, strict=True):
        code = pl.col(k).to_physical().cast(pl.Int64).fill_null(size - 1)
        expr = expr * size + code
    return expr


def dense_parts(
    frame: pl.LazyFrame,
    layout: DenseLayout,
    parts: Sequence[Part],
    sources: Sequence[str],
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The exact parts per group of the keys present (one row each: the keys, ``__rows``,
    each part, each source's ``__bad__`` count), and the histogram's records per (keys,
    cell) present (the keys, ``__bin``, ``__count``; None without one), from one read of
    ``frame`` in batches.

    Examples
    --------
    >>> from dpframe.mechanisms.statistics import count, mean
    >>> lf = pl.LazyFrame({"g": pl.Series(["a", "b", "a"], dtype=pl.Enum(["a", "b"])),
    ...                    "x": [1.0, 2.0, 30.0]})
    >>> stats = [count(epsilon=1.0), mean("x", lower=0, upper=10, epsilon=1.0)]
    >>> parts = [p for s in stats for p in s.parts(False)]
    >>> layout = dense_layout(lf.collect_schema(), ["g"], parts, ["x"])
    >>> agg, _ = dense_parts(lf, layout, parts, ["x"])
    >>> agg.sort("g").select("g", "__rows", "x_mean:sum").rows()
    [('a', 2, 11.0), ('b', 1, 2.0)]
    """
    from dpframe.engines.dense_kernel import accumulate
    from dpframe.engines.driver import BAD_PREFIX, BIN, COUNT, ROWS

    keys = list(layout.keys)
    schema = frame.collect_schema()
    groups, cells, nvals, nsum = layout.groups, layout.cells, len(layout.values), len(layout.summed)
    rows = np.zeros(groups, dtype=np.int64)
    sums = np.zeros((groups, nsum), dtype=np.float64)
    spare = np.zeros((groups, nsum), dtype=np.float64)
    bad = np.zeros((groups, nvals), dtype=np.int64)
    hist = np.zeros((groups, max(cells, 1)), dtype=np.int64)
    scratch = (
        np.zeros(groups, dtype=np.int64),
        np.zeros((4, nsum, groups), dtype=np.float64),
        np.zeros(groups, dtype=np.int64),
    )
    query = frame.select(
        _group_expr(layout).alias("g"),
        *(
            pl.col(c).cast(pl.Float64).fill_null(float("nan")).alias(f"v{i}")
            for i, c in enumerate(layout.values)
        ),
    )
    # the loop adds one batch (numba releases the GIL) while polars reads the next into
    # the other buffers (writable copies: the loop's one signature, whatever polars hands
    # over): each record's group, and a row per column
    groups_in = [np.zeros(_BATCH, dtype=np.int64) for _ in range(2)]
    buffers = [np.zeros((nvals, _BATCH), dtype=np.float64) for _ in range(2)]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpframe-dense") as pool:
        added = None
        for k, batch in enumerate(query.collect_batches(chunk_size=_BATCH, engine="streaming")):
            n, j = batch.height, k % 2
            if n > groups_in[j].size:
                groups_in[j] = np.zeros(n, dtype=np.int64)
                buffers[j] = np.zeros((nvals, n), dtype=np.float64)
            group, values = groups_in[j], buffers[j]
            group[:n] = batch.get_column("g").to_numpy()
            for i in range(nvals):
                values[i, :n] = batch.get_column(f"v{i}").to_numpy()
            if added is not None:
                added.result()
            added = pool.submit(
                accumulate, group, n, values, layout.ops, layout.operands, layout.bounds,
                layout.hist_column, layout.edges, layout.walk, rows, sums, spare, bad, hist,
                *scratch,
            )  # fmt: skip
        if added is not None:
            added.result()
    present = np.flatnonzero(rows)
    codes = _codes(layout, present)
    out: dict[str, pl.Series] = {}
    for j, k in enumerate(keys):
        out[k] = _key_series(k, schema[k], codes[j], layout.sizes[j])
    out[ROWS] = pl.Series(ROWS, rows[present])
    total = sums + spare
    by_name = {p.name: i for i, p in enumerate(layout.summed)}
    for p in parts:
        if p.name in out:
            continue
        if p.op == "count":
            out[p.name] = pl.Series(p.name, rows[present].astype(np.float64))
        else:
            out[p.name] = pl.Series(p.name, total[present, by_name[p.name]])
    index = {c: i for i, c in enumerate(layout.values)}
    for c in dict.fromkeys(sources):
        name = f"{BAD_PREFIX}{c}"
        if c in index:
            out[name] = pl.Series(name, bad[present, index[c]])
        else:  # a key: its null code
            j = keys.index(c)
            out[name] = pl.Series(name, np.where(codes[j] == layout.sizes[j] - 1, rows[present], 0))
    agg = pl.DataFrame(list(out.values()))
    if cells == 0:
        return agg, None
    g, cell = np.nonzero(hist)
    cell_codes = _codes(layout, g)
    counted = {
        k: _key_series(k, schema[k], cell_codes[j], layout.sizes[j]) for j, k in enumerate(keys)
    }
    counted[BIN] = pl.Series(BIN, cell, dtype=pl.Int32)
    counted[COUNT] = pl.Series(COUNT, hist[g, cell])
    return agg, pl.DataFrame(list(counted.values()))


def _codes(layout: DenseLayout, groups: np.ndarray) -> list[np.ndarray]:
    """Each key's code in each group number (the inverse of :func:`_group_expr`)."""
    out = []
    rest = groups.astype(np.int64)
    for size in reversed(layout.sizes):
        out.append(rest % size)
        rest = rest // size
    return out[::-1]


def _key_series(name: str, dtype: pl.DataType, codes: np.ndarray, size: int) -> pl.Series:
    """A key's values from its codes (the last code: null)."""
    null = codes == size - 1
    if null.all():  # an enum of no categories has no code 0 to stand in for a null
        return pl.Series(name, [None] * codes.size, dtype=dtype)
    values = key_values(name, np.where(null, 0, codes), dtype)
    return values.scatter(np.flatnonzero(null), None) if null.any() else values


def coded(dtype: pl.DataType) -> bool:
    """Whether a column's physical integers are its values' codes, numbered from 0 without
    reading the column (an enum's categories, a boolean's two values)."""
    return isinstance(dtype, pl.Enum | pl.Boolean)


def code_counts(frame: pl.LazyFrame, columns: Sequence[str]) -> dict[str, pl.DataFrame]:
    """For each column of ``columns`` (each :func:`coded`), its values present (``value``;
    null counted as a value) and their records (``rows``), from one read of ``frame`` in
    batches: each batch's codes counted by ``numpy.bincount`` (no hash table).

    Examples
    --------
    >>> lf = pl.LazyFrame({"g": pl.Series(["a", None, "a"], dtype=pl.Enum(["a", "b"]))})
    >>> code_counts(lf, ["g"])["g"].rows()
    [('a', 2), (None, 1)]
    """
    schema = frame.collect_schema()
    sizes = [
        len(schema[c].categories) + 1 if isinstance(schema[c], pl.Enum) else 3 for c in columns
    ]
    # the physical codes as they are (an enum's UInt8/16/32, a boolean as UInt8): no
    # Int64 copy of every batch; a batch holding a null is widened to count it as a value
    query = frame.select(
        (pl.col(c).cast(pl.UInt8) if schema[c] == pl.Boolean else pl.col(c).to_physical()).alias(
            f"c{i}"
        )
        for i, c in enumerate(columns)
    )
    totals = [np.zeros(size, dtype=np.int64) for size in sizes]
    for batch in query.collect_batches(chunk_size=_BATCH, engine="streaming"):
        for i, size in enumerate(sizes):
            codes = batch.get_column(f"c{i}")
            if codes.null_count():
                codes = codes.cast(pl.Int64).fill_null(size - 1)
            totals[i] += np.bincount(codes.to_numpy(), minlength=size)
    out = {}
    for c, size, total in zip(columns, sizes, totals, strict=True):
        present = np.flatnonzero(total)
        values = _key_series(VALUE, schema[c], present, size)
        out[c] = pl.DataFrame([values, pl.Series(VALUE_ROWS, total[present])])
    return out
