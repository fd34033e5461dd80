"""Person-level bounding out of core: the records partitioned by person, spilled, bounded.

The compiled kernel (:mod:`dpframe.engines.bounding_kernel`) holds the records it bounds
in memory (about :func:`record_bytes` a record). When the records would pass the memory
setting (:func:`bounding_memory`), columns whose codes are their values
(:func:`streamable`) are read in batches, each placed in the kernel's buckets as it
arrives (:func:`streamed_bytes` a record, :mod:`dpframe.engines.bounding`), while that
fits; otherwise :func:`spilled_parts` bounds them in parts instead:

1. **Codes** from the distinct values only (memory in the distinct persons and groups,
   not in the rows): the rule's codes (:func:`~dpframe.engines.bounding_rule.person_codes`,
   :func:`~dpframe.engines.bounding_rule.group_codes`) of the distinct values, mapped
   back onto the rows by the streaming engine (a person column whose codes are its
   values is not mapped at all). The codes are those the in-memory path computes: a code
   depends only on which values are present.
2. **Partition by person**: one streaming pass writes each record's codes, values and
   bad-value flags to the part of a hash of its person code (uncompressed Arrow IPC,
   ``sink_ipc`` into :class:`polars.PartitionBy`; a pair's rows stay in the input's
   order), in a temporary folder removed when the call ends, whether it succeeds or
   fails. Up to :data:`RESCAN_PARTS` parts, each part is read by a streaming pass of its
   own instead (nothing written: faster for so few).
3. **Bound each part** in the compiled kernel and add the per-group parts up.

The rule's choice of a person's rows depends only on that person's rows, the codes and the
keys (:mod:`dpframe.engines.bounding_rule`), so any partition of the persons keeps the
same rows as the in-memory path: the counts are equal bit for bit, the sums up to the
order of float additions.

Examples
--------
>>> record_bytes(values=1, flags=1)
42
>>> bounding_memory(2**20)
1048576
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from dpframe.core.constraints import check
from dpframe.core.values import refuse_missing_ids
from dpframe.engines.bounding_rule import (
    GROUP_BITS,
    RuleKeys,
    encodable,
    group_codes,
    person_codes,
)
from dpframe.engines.driver import WIDE_INTEGERS, missing_count
from dpframe.errors import InvalidParameterError

__all__ = [
    "BOUNDING_MEMORY",
    "MEMORY_VARIABLE",
    "RESCAN_PARTS",
    "Spilled",
    "bounding_memory",
    "key_values",
    "partitions",
    "record_bytes",
    "remove_stale_spills",
    "spilled_parts",
    "streamable",
    "streamed_bytes",
]

#: The default memory setting (bytes) of person-level bounding: the records the kernel
#: holds at once (a release at 1e8 rows stays under 1 GB peak).
BOUNDING_MEMORY = 256 * 2**20
#: The environment variable that overrides :data:`BOUNDING_MEMORY` (a number of bytes).
MEMORY_VARIABLE = "DPFRAME_BOUNDING_MEMORY"
#: Up to this many parts, each part is read by a pass of its own over the input (filtered
#: by the part's hash) instead of spilled to disk in one pass: faster for a few parts
#: (``benchmarks/bench_person_level.py``), the same rows either way.
RESCAN_PARTS = 2
#: The seed of the hash that puts a person in a part (any fixed hash: the parts change
#: no result).
_PART_SEED = 0x5EED


def bounding_memory(memory: int | None = None) -> int:
    """The memory setting of person-level bounding, in bytes: ``memory`` if given, else
    the environment variable ``DPFRAME_BOUNDING_MEMORY``, else :data:`BOUNDING_MEMORY`;
    at least 64 KiB (``check("bounding_memory", ...)``).

    Examples
    --------
    >>> bounding_memory(), bounding_memory(2**30)
    (268435456, 1073741824)
    """
    if memory is None:
        raw = os.environ.get(MEMORY_VARIABLE, "").strip()
        if not raw:
            return BOUNDING_MEMORY
        try:
            memory = int(raw)
        except ValueError:
            raise InvalidParameterError(
                f"{MEMORY_VARIABLE} must be a number of bytes, got {raw!r}; set it to an "
                f"integer such as {BOUNDING_MEMORY} (or unset it for that default)"
            ) from None
        return int(check("bounding_memory", memory))
    return int(check("bounding_memory", memory))


def record_bytes(values: int, flags: int) -> int:
    """Bytes the kernel holds a record of ``values`` summed columns and ``flags``
    bad-value flags: the two codes, the values and flags as read, and the kernel's own
    copy (a priority, the values, a mark).

    Examples
    --------
    >>> record_bytes(values=0, flags=0)
    25
    """
    return 16 + 8 * values + flags + 8 + 8 * values + 1


def partitions(rows: int, values: int, flags: int, memory: int) -> int:
    """The number of parts the records are bounded in: 1 (in memory) when they fit in
    ``memory`` bytes, else enough parts that each fits (on average).

    Examples
    --------
    >>> partitions(10**6, 1, 1, 2**30), partitions(10**8, 1, 1, 2**28)
    (1, 16)
    """
    return max(1, math.ceil(rows * record_bytes(values, flags) / memory))


def streamed_bytes(values: int) -> int:
    """Bytes a record of ``values`` summed columns takes when the kernel reads the records
    in batches (:func:`streamable` columns): the person and key codes read first (16,
    freed), then the kernel's own copy as the batches arrive (a priority, the values, a
    mark).

    Examples
    --------
    >>> streamed_bytes(1), streamed_bytes(3)
    (17, 33)
    """
    return max(16, 8 + 8 * values + 1)


def streamable(schema: pl.Schema, person: str, keys: Sequence[str]) -> bool:
    """Whether the kernel may read the records in batches (:func:`streamed_bytes`): the
    person's codes may be its values (integers up to 63 bits, booleans, enums, dates and
    times), and there is no key or one such key (its values read back from its codes,
    :func:`key_values`).

    Examples
    --------
    >>> schema = pl.Schema({"p": pl.Int64(), "g": pl.Int32(), "s": pl.String()})
    >>> streamable(schema, "p", ["g"]), streamable(schema, "p", ["s"])
    (True, False)
    """
    if not _value_coded(schema[person]) or len(keys) > 1:
        return False
    return not keys or _value_coded(schema[keys[0]])


def key_values(name: str, codes: np.ndarray, dtype: pl.DataType) -> pl.Series:
    """The values of a :func:`streamable` key, read back from its rule codes (its
    physical integers): an enum's categories at those indices, else the integers cast.

    Examples
    --------
    >>> key_values("k", np.array([2, 0]), pl.Enum(["a", "b", "c"])).to_list()
    ['c', 'a']
    >>> key_values("k", np.array([1]), pl.Boolean()).to_list()
    [True]
    """
    if isinstance(dtype, pl.Enum):
        return pl.Series(name, dtype.categories).gather(codes).cast(dtype)
    return pl.Series(name, codes).cast(dtype)


def _value_coded(dtype: pl.DataType) -> bool:
    """Whether a column's rule codes are its physical integers (unless they span too many
    integers, then their ranks): integers up to 63 bits, booleans, enums, temporals."""
    if not encodable(dtype) or isinstance(dtype, pl.String | pl.Categorical | pl.UInt64):
        return False
    return dtype not in WIDE_INTEGERS


def _person_expr(
    frame: pl.LazyFrame, person: str, dtype: pl.DataType, rows: int
) -> tuple[pl.Expr, tuple[int, int]]:
    """The expression of each row's person code -- the values themselves where they are
    their codes, else the distinct values' codes mapped back (a null refused) -- and the
    codes' least and greatest."""
    raw = pl.col(person).to_physical().cast(pl.Int64)
    if _value_coded(dtype):
        stats = frame.select(raw.min().alias("lo"), raw.max().alias("hi"), raw.null_count())
        lo, hi, nulls = stats.collect(engine="streaming").row(0)
        refuse_missing_ids(person, int(nulls))
        if lo is None:
            return raw, (0, 0)
        if person_codes(pl.Series([lo, hi]), rows).to_list() == [lo, hi]:
            return raw, (int(lo), int(hi))  # no dense ranks: the codes are the values
    seen = frame.select(pl.col(person).unique()).collect(engine="streaming")[person]
    refuse_missing_ids(person, missing_count(seen))
    codes = person_codes(seen, rows)
    expr = pl.col(person).replace_strict(seen, codes, return_dtype=pl.Int64)
    return expr, (int(codes.min() or 0), int(codes.max() or 0))  # type: ignore[arg-type]


def _group_expr(table: pl.DataFrame, keys: list[str]) -> pl.Expr | None:
    """The expression of each row's group code, for one key without nulls (its values
    where they are their codes, else the table's codes mapped back); None: join."""
    if len(keys) != 1 or table[keys[0]].null_count():
        return None
    key, codes = table[keys[0]], table["__spill_g"]
    same = key.to_physical().cast(pl.Int64).equals(codes, check_names=False)
    if _value_coded(key.dtype) and same:
        return pl.col(keys[0]).to_physical().cast(pl.Int64)
    return pl.col(keys[0]).replace_strict(key, codes, return_dtype=pl.Int64)


def _group_table(frame: pl.LazyFrame, keys: list[str], rows: int) -> pl.DataFrame:
    """The distinct key tuples with their rule codes (``__spill_g``), by code."""
    seen = frame.select(keys).unique().collect(engine="streaming")
    return seen.with_columns(group_codes(seen, keys, rows).alias("__spill_g")).sort("__spill_g")


@dataclass(frozen=True)
class Spilled:
    """What :func:`spilled_parts` returns: by group code (from ``first``), the kept
    rows, the sums of each value column (groups, values), the kept persons; the distinct
    key tuples present with their codes (``__spill_g``); each flag's count over all
    records.

    Examples
    --------
    >>> s = Spilled(0, np.zeros(1, np.int64), np.zeros((1, 0)), np.zeros(1, np.int64),
    ...             pl.DataFrame(), [])
    >>> s.kept.size
    1
    """

    first: int
    kept: np.ndarray
    sums: np.ndarray
    persons: np.ndarray
    groups: pl.DataFrame
    flags: list[int]


def spilled_parts(
    frame: pl.LazyFrame,
    person: str,
    keys: list[str],
    values: Sequence[pl.Expr],
    flags: Sequence[pl.Expr],
    rows: int,
    parts: int,
    bounds: tuple[int, int],
    rule_keys: RuleKeys,
) -> Spilled | None:
    """The records bounded in ``parts`` parts of persons, and their per-group parts (see
    the module docstring).

    Parameters
    ----------
    frame : polars.LazyFrame
        The records (read, streaming, for the codes and once for the spill).
    person : str
        The person column (its dtype encodable: the kernel's path).
    keys : list of str
        The group keys (encodable).
    values : sequence of polars.Expr
        Each summed column's values (Float64).
    flags : sequence of polars.Expr
        Each bad-value flag (a Boolean a row), counted over all records.
    rows : int
        The number of records.
    parts : int
        The number of parts (at least 1).
    bounds : tuple of two ints
        The unit's ``(max_groups, max_rows)``.
    rule_keys : RuleKeys
        The release's rule keys (not drawn, and None returned, if the groups span too
        many codes for the kernel).

    Returns
    -------
    Spilled or None

    Examples
    --------
    >>> lf = pl.LazyFrame({"p": [1, 1, 2], "g": [0, 1, 0], "x": [1.0, 2.0, 3.0]})
    >>> out = spilled_parts(lf, "p", ["g"], [pl.col("x")], [], 3, 2, (1, 5),
    ...                     RuleKeys(np.random.default_rng(0)))
    >>> int(out.kept.sum()), out.groups.height
    (2, 2)
    """
    schema = frame.collect_schema()
    pc, person_range = _person_expr(frame, person, schema[person], rows)
    if keys:
        table = _group_table(frame, keys, rows)
        g0, g1 = int(table["__spill_g"].min()), int(table["__spill_g"].max())  # type: ignore[arg-type]
    else:
        table, g0, g1 = pl.DataFrame(), 0, 0
    if g1 - g0 >= 1 << GROUP_BITS:
        return None
    key, rows_key = rule_keys.draw()
    vnames = [f"__spill_v{j}" for j in range(len(values))]
    fnames = [f"__spill_f{j}" for j in range(len(flags))]
    gc = _group_expr(table, keys) if keys else pl.lit(0, dtype=pl.Int64)
    records = frame.select(
        pc.alias("__spill_p"),
        *(keys if gc is None else [gc.alias("__spill_g")]),
        *[e.cast(pl.Float64).alias(n) for e, n in zip(values, vnames, strict=True)],
        *[e.cast(pl.UInt8).alias(n) for e, n in zip(flags, fnames, strict=True)],
    )
    if gc is None:  # several keys, or nulls: the table joined on, in the input's order
        on = table.lazy()
        records = records.join(on, on=keys, how="left", nulls_equal=True, maintain_order="left")
    part = (pl.col("__spill_p").hash(_PART_SEED) % parts).alias("__spill_part")
    records = records.select("__spill_p", "__spill_g", *vnames, *fnames, part)
    ngroups = g1 - g0 + 1
    out = Spilled(
        g0,
        np.zeros(ngroups, np.int64),
        np.zeros((ngroups, len(values))),
        np.zeros(ngroups, np.int64),
        table,
        [0] * len(flags),
    )
    ranges = (person_range, (g0, g1))
    if parts <= RESCAN_PARTS:  # each part read by its own pass: nothing written
        for j in range(parts):
            part = records.filter(pl.col("__spill_part") == j).collect(engine="streaming")
            _bound_part(part, vnames, fnames, ranges, bounds, (key, rows_key), out)
        return out
    remove_stale_spills()
    with tempfile.TemporaryDirectory(prefix=f"{_SPILL_PREFIX}{os.getpid()}-") as folder:
        target = pl.PartitionBy(folder, key="__spill_part", include_key=False)
        records.sink_ipc(target, mkdir=True, compression="uncompressed")
        for sub in sorted(Path(folder).iterdir()):
            files = sorted(sub.glob("*.ipc"))  # a part's files, in the input's order
            if files:
                part = pl.concat([pl.read_ipc(f) for f in files], rechunk=False)
                _bound_part(part, vnames, fnames, ranges, bounds, (key, rows_key), out)
                for f in files:  # the disk freed as the parts are done
                    f.unlink()
    return out


#: a spill folder's name: this prefix, the pid of the process that wrote it, "-", a random tail
_SPILL_PREFIX = "dpframe-bounding-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove_stale_spills(folder: str | None = None) -> list[str]:
    """Remove the spill folders (confidential records) that a killed process left in the
    temporary folder: those named for a process that no longer runs. Called before each
    spill; returns what it removed. Folders it may not remove are left alone.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> base = tempfile.mkdtemp()
    >>> _ = pathlib.Path(base, _SPILL_PREFIX + "999999999-x").mkdir()
    >>> [pathlib.Path(p).name for p in remove_stale_spills(base)]
    ['dpframe-bounding-999999999-x']
    """
    import shutil

    removed = []
    base = Path(folder or tempfile.gettempdir())
    try:
        found = list(base.glob(_SPILL_PREFIX + "*-*"))
    except OSError:
        return removed
    for path in found:
        pid = path.name[len(_SPILL_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        if path.is_symlink() or not path.is_dir():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed


def _bound_part(
    part: pl.DataFrame,
    vnames: list[str],
    fnames: list[str],
    ranges: tuple[tuple[int, int], tuple[int, int]],
    bounds: tuple[int, int],
    keys: tuple[tuple[int, int], tuple[int, int]],
    out: Spilled,
) -> None:
    """One part's records bounded by the kernel (the codes' ``ranges``, the unit's
    ``bounds``, the rule's pair and row ``keys``), added to ``out``."""
    from dpframe.engines import bounding_kernel as bk

    for j, n in enumerate(fnames):
        out.flags[j] += int(part[n].sum())
    if part.height == 0:
        return
    work = part.select("__spill_p", "__spill_g", *vnames)
    if len({tuple(len(x) for x in work[c].get_chunks()) for c in work.columns}) > 1:
        work = work.rechunk()
    chunks = {c: [x.to_numpy() for x in work[c].get_chunks()] for c in work.columns}
    vals = [
        [chunks[n][i] for n in vnames] if vnames else np.empty((0, len(p)))
        for i, p in enumerate(chunks["__spill_p"])
    ]
    kept, sums, persons, _, _ = bk.bounded_sums(
        chunks["__spill_p"],
        chunks["__spill_g"],
        vals,
        keys[0],
        bounds[0],
        bounds[1],
        ranges[0],
        ranges[1],
        row_key=keys[1],
    )
    out.kept[:] += kept
    out.sums[:] += sums
    out.persons[:] += persons
