"""Person-level contribution bounding for the polars engine (pure polars and numpy).

With a person identifier (:class:`dpframe.core.units.PrivacyUnit`) each person keeps at
most ``max_groups`` groups -- distinct values of the release's group keys -- and at most
``max_rows`` rows in each kept group; without group keys, at most ``max_rows`` rows in
all. Which ones is the rule of :mod:`dpframe.engines.bounding_rule` (keyed pseudo-random
pair priorities, a uniform choice of rows, the key drawn from the release's secure
source), which this module, the compiled kernel and the Spark engine all execute: a
person's kept rows depend only on their own rows and the key -- never on the file order.
Nothing about how many rows were dropped is returned or logged.

The polars-only path is shuffle-free (no sort of the records, no random permutation of
them):

1. one hash aggregation of the records to ``(person, keys)`` pairs with each pair's
   number of rows ``n`` (and, in :func:`bounded_grouped_parts`, its exact sums);
2. the pairs' codes and priorities, and each person's kept pairs
   (:func:`~dpframe.engines.bounding_rule.kept_pairs`);
3. in a kept pair with ``n > max_rows`` (rare in person data), the rule's
   ``max_rows`` row *positions* (the smallest row priorities), and only the rows of such
   pairs are read again and numbered in the input's order (``int_range().over``).

:func:`bounded_frame` returns the kept records lazily (the choices are drawn once, when
it is called, so every evaluation of the result sees the same rows for a frame with a
stable row order; every kept pair's rows are numbered when read again, so no pair keeps
more than ``max_rows`` rows nor a person an unchosen group if the input changed);
:func:`bounded_grouped_parts` is the fast path of a grouped release
of counts and sums: the compiled kernel where the codes are the values' integers (the
pairs over ``max_rows`` finished in the compiled code too; past the memory setting, for
persons and at most one key whose codes are their values, the records read in batches and
placed in the kernel's buckets as they arrive, else in parts of persons spilled to disk,
:mod:`dpframe.engines.bounding_spill`), else the pairs by polars, which goes back to the
rows for the pairs over ``max_rows`` only.

Examples
--------
>>> import warnings
>>> import polars as pl
>>> from dpframe.core.randomness import RandomSource
>>> from dpframe.core.units import PrivacyUnit
>>> from dpframe.engines.bounding import bounded_frame
>>> lf = pl.LazyFrame({"pid": [1, 1, 1, 2], "g": ["a", "a", "b", "a"], "x": [1, 2, 3, 4]})
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     src = RandomSource(seed=1)
>>> out = bounded_frame(lf, PrivacyUnit("pid", max_rows=1, max_groups=1), ["g"], src)
>>> out.collect().group_by("pid").len().sort("pid")["len"].to_list()
[1, 1]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from dpframe.core.advice import advise
from dpframe.core.constraints import RESERVED_PREFIX, refuse_pattern_name
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.core.values import missing_id_error, refuse_missing_ids
from dpframe.engines.bounding_rule import (
    RuleKeys,
    codes,
    encodable,
    group_codes,
    kept_pairs,
    kept_positions,
    person_codes,
    row_key,
    rule_key,
)
from dpframe.engines.bounding_spill import (
    BOUNDING_MEMORY,
    bounding_memory,
    key_values,
    partitions,
    spilled_parts,
    streamable,
    streamed_bytes,
)
from dpframe.engines.driver import ROWS, check_key_dtype, missing_count
from dpframe.errors import InvalidDataError, InvalidParameterError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "bounded_frame",
    "bounded_grouped_parts",
    "check_unit",
    "null_person_error",
]

#: Rows of a batch of the streaming read (:func:`_streamed_parts`): few calls of the
#: kernel, each cut for every thread.
_BATCH = 1 << 18
_N = "__bound_n"
_POS = "__bound_pos"
_ROW = "__bound_row"
_PC = "__bound_pc"
_GC = "__bound_gc"


def check_unit(schema: pl.Schema, unit: PrivacyUnit, keys: Sequence[str]) -> None:
    """Refuse a person column missing from the data, also a group key, or of a dtype
    whose missing values cannot be seen (lists, structs, objects: the schema is public,
    checked before any data is read)."""
    names = list(schema.names())
    person = unit.person
    if person not in names:
        raise InvalidParameterError(
            f"unit: the person column {person!r} is not in the data (its columns: "
            f"{sorted(names)[:20]})"
        )
    if person in keys:
        raise InvalidParameterError(
            f"unit: the person column {person!r} is also a group key; a person's groups "
            "must be other columns (drop it from the keys)"
        )
    refuse_pattern_name(person, "unit")
    if person.startswith(RESERVED_PREFIX):
        rename = advise(
            python=f"rename it, e.g. frame.rename({{{person!r}: 'person_id'}}) and "
            "unit='person_id'",
            spec="rename the column in the input file and set unit to its new name",
        )
        raise InvalidParameterError(
            f"unit: the person column {person!r} has a name dpframe keeps for its own "
            f"columns (starting with {RESERVED_PREFIX!r}, as {_N!r}); {rename}"
        )
    check_key_dtype(schema[person], person, "unit: the person column")


#: the error of a person column holding nulls, NaN or infinities (:mod:`dpframe.core.values`)
null_person_error = missing_id_error


def _pairs(
    frame: pl.LazyFrame, person: str, keys: list[str], aggs: Sequence[pl.Expr]
) -> pl.DataFrame:
    """One row per ``(person, keys)`` pair with its number of rows; a null, NaN or
    infinite identifier refused (from the pair table, which holds every identifier of
    the input: no extra pass)."""
    pairs = frame.group_by([person, *keys]).agg(pl.len().alias(_N), *aggs)
    pairs = pairs.collect(engine="streaming")
    refuse_missing_ids(person, missing_count(pairs[person]))
    return pairs


def _choose_groups(
    pairs: pl.DataFrame, person: str, keys: list[str], k: int, key: tuple[int, int]
) -> pl.DataFrame:
    """The pairs each person keeps (the rule's :func:`~.bounding_rule.kept_pairs`), with
    their person and group codes (``__bound_pc``, ``__bound_gc``)."""
    pc, gc = codes(pairs, person, keys, int(pairs[_N].sum()))
    pairs = pairs.with_columns(pc.alias(_PC), gc.alias(_GC))
    if not keys:
        return pairs
    return pairs.filter(kept_pairs(pc.to_numpy(), gc.to_numpy(), key, k))


def _kept_positions(
    big: pl.DataFrame, person: str, keys: list[str], r: int, rows_key: tuple[int, int]
) -> pl.DataFrame:
    """For the kept pairs with more than ``r`` rows: the rule's positions kept
    (:func:`~.bounding_rule.kept_positions` under the row key)."""
    import numpy as np

    lens = big[_N].to_numpy().astype(np.int64)
    keep = kept_positions(big[_PC].to_numpy(), big[_GC].to_numpy(), lens, r, rows_key)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    pos = np.arange(int(lens.sum())) - np.repeat(starts, lens)
    rows = np.repeat(np.arange(big.height), lens)[keep]
    return big.select(person, *keys)[rows].with_columns(pl.Series(_POS, pos[keep], dtype=pl.Int64))


def _oversized_rows(
    frame: pl.LazyFrame,
    person: str,
    keys: list[str],
    big: pl.DataFrame,
    r: int,
    rows_key: tuple[int, int],
) -> pl.LazyFrame:
    """The kept rows of pairs with more than ``r`` rows, lazily: only they are numbered,
    each by its position among its pair's rows in the input's order."""
    on = [person, *keys]
    positions = _kept_positions(big, person, keys, r, rows_key)
    position = pl.int_range(pl.len(), dtype=pl.Int64).over(on, order_by=_ROW)
    return (
        frame.with_row_index(_ROW)
        .join(big.lazy().select(on), on=on, how="semi", nulls_equal=True)
        .with_columns(position.alias(_POS))
        .join(positions.lazy(), on=[*on, _POS], how="semi", nulls_equal=True)
        .drop(_ROW, _POS)
    )


def bounded_frame(
    frame: pl.LazyFrame,
    unit: PrivacyUnit,
    keys: Sequence[str],
    source: RandomSource | None = None,
) -> pl.LazyFrame:
    """The records each person keeps, lazily, with the input's columns.

    Parameters
    ----------
    frame : polars.LazyFrame
        The records.
    unit : PrivacyUnit
        A person unit (a record unit returns ``frame`` unchanged).
    keys : sequence of str
        The release's group keys (empty: at most ``max_rows`` rows per person in all).
    source : RandomSource, optional
        Default: secure. A seeded source is for tests.

    Returns
    -------
    polars.LazyFrame
        Same schema; one pass over the records is made now (to draw the choices), the
        kept rows are read when the result is collected. Row order is not kept.

    Examples
    --------
    >>> import polars as pl
    >>> lf = pl.LazyFrame({"pid": [1, 1, 1, 2], "x": [1, 2, 3, 4]})
    >>> out = bounded_frame(lf, PrivacyUnit("pid", max_rows=2, max_groups=1), [])
    >>> out.collect().height
    3
    """
    if unit.is_record:
        return frame
    keys = list(keys)
    check_unit(frame.collect_schema(), unit, keys)
    person = unit.person
    rng = (source or RandomSource()).generator()
    key = rule_key(rng)
    rows_key = row_key(rng)
    every = _pairs(frame, person, keys, [])
    r = min(unit.max_rows, int(every[_N].sum()))  # no pair has more rows (a u32 count)
    pairs = _choose_groups(every, person, keys, unit.max_groups, key)
    on = [person, *keys]
    small = pairs.filter(pl.col(_N) <= r)
    big = pairs.filter(pl.col(_N) > r)
    # the records are read again when the result is collected: even a pair within the
    # bounds when chosen keeps its first r rows only (and only the pairs chosen), so the
    # caps hold on an input that changes between the reads (as on Spark)
    position = pl.int_range(pl.len(), dtype=pl.Int64).over(on, order_by=_ROW)
    kept = (
        frame.with_row_index(_ROW)
        .join(small.lazy().select(on), on=on, how="semi", nulls_equal=True)
        .filter(position < r)
        .drop(_ROW)
    )
    if big.height:
        kept = pl.concat([kept, _oversized_rows(frame, person, keys, big, r, rows_key)])
    return kept


def bounded_grouped_parts(
    frame: pl.LazyFrame,
    unit: PrivacyUnit,
    keys: Sequence[str],
    values: dict[str, pl.Expr],
    counts: Sequence[str],
    bads: dict[str, pl.Expr],
    source: RandomSource | None = None,
    *,
    kernel: bool = True,
    distinct: Sequence[str] = (),
    memory: int | None = None,
) -> pl.DataFrame:
    """The per-group parts of a person-level release of counts, sums and distinct persons.

    What ``PolarsEngine(bounded_frame(...)).grouped_parts(...)`` returns, faster. When the
    person column and the keys have integer codes (integers, booleans, strings,
    categoricals, enums, dates and times; not floats), the compiled kernel of
    :mod:`dpframe.engines.bounding_kernel` bounds and sums in a few linear passes over
    the records held in memory (the columns used, plus about ``9 + 8 * len(values)``
    bytes a record); otherwise the pairs are aggregated by polars (streaming) and chosen
    as in :func:`bounded_frame`. Call it through
    :meth:`dpframe.engines.polars.PolarsEngine.bounded_grouped_parts`, which builds the
    expressions from the parts.

    Parameters
    ----------
    frame : polars.LazyFrame
        The records.
    unit : PrivacyUnit
        A person unit.
    keys : sequence of str
        The group keys (may be empty).
    values : dict of str to polars.Expr
        Each sum part's record-level values (clipped values, squares, products), by name.
    counts : sequence of str
        The names of the count parts (each the number of kept rows, as Float64).
    bads : dict of str to polars.Expr
        By ``__bad__<column>`` name, whether each row's value is bad (a Boolean a row,
        :func:`dpframe.engines.polars.bad_rows`); the counts cover **all** input rows, not
        only the kept ones (a bad value anywhere is refused), put on the first group.
    source : RandomSource, optional
        Default: secure.
    kernel : bool, default True
        False forces the polars path (for tests comparing the two).
    distinct : sequence of str, default ()
        The names of the parts counting the distinct persons of each group's kept rows
        (the kept ``(person, group)`` pairs: each keeps at least one row), as Float64;
        from the same choice as the counts and sums.
    memory : int, optional
        The bytes of records the kernel may hold at once (default:
        :func:`~dpframe.engines.bounding_spill.bounding_memory`, the environment
        variable ``DPFRAME_BOUNDING_MEMORY`` or 256 MiB); more records are read in
        batches of the streaming engine, each placed in the kernel's buckets as it
        arrives (persons whose codes are their values and at most one such key:
        :func:`~dpframe.engines.bounding_spill.streamable`, about
        :func:`~dpframe.engines.bounding_spill.streamed_bytes` a record), or partitioned
        by person and spilled to disk (:mod:`dpframe.engines.bounding_spill`): the same
        rows kept, the same counts, the sums up to the order of float additions.

    Returns
    -------
    polars.DataFrame
        The keys, ``__rows`` (kept rows), each part and each bad count, one row per group
        with kept rows (one row in all without keys).

    Examples
    --------
    >>> import polars as pl
    >>> lf = pl.LazyFrame({"pid": [1, 2, 2], "g": ["a", "a", "b"], "x": [1.0, 2.0, 3.0]})
    >>> unit = PrivacyUnit("pid", max_rows=1, max_groups=2)
    >>> out = bounded_grouped_parts(lf, unit, ["g"], {"s": pl.col("x")}, [], {})
    >>> out.sort("g")["s"].to_list(), out.sort("g")["__rows"].to_list()
    ([3.0, 3.0], [2, 1])
    """
    keys = list(keys)
    schema = frame.collect_schema()
    check_unit(schema, unit, keys)
    limit = bounding_memory(memory)
    rule_keys = RuleKeys((source or RandomSource()).generator())
    if kernel and all(encodable(schema[c]) for c in [unit.person, *keys]):
        return _kernel_parts(frame, unit, keys, values, counts, bads, rule_keys, distinct, limit)
    return _polars_parts(frame, unit, keys, values, counts, bads, rule_keys, distinct)


@functools.cache
def _load_kernels() -> None:
    """Every compiled kernel of the kernel paths run once on a few rows (one pair over
    ``max_rows``), before the first kernel-path release of a process: the first release
    of an environment compiles them all and caches them on disk, every later process
    loads them all, whichever path its releases take -- none waits for a compile."""
    import numpy as np

    from dpframe.engines import bounding_clustered as bc
    from dpframe.engines import bounding_kernel as bk

    pid = np.array([0, 0, 1], dtype=np.int64)
    bk.bounded_sums(pid, np.zeros(3, np.int64), np.ones((1, 3)), (1, 2), 1, 1, row_key=(3, 4))
    bc.load_kernels()


def _kernel_parts(
    frame: pl.LazyFrame,
    unit: PrivacyUnit,
    keys: list[str],
    values: dict[str, pl.Expr],
    counts: Sequence[str],
    bads: dict[str, pl.Expr],
    rule_keys: RuleKeys,
    distinct: Sequence[str] = (),
    memory: int = BOUNDING_MEMORY,
) -> pl.DataFrame:
    """:func:`bounded_grouped_parts` by the compiled kernel (see its docstring), in
    memory or, for more records than ``memory`` bytes hold, read in batches
    (:func:`_streamed_parts`); past that too, in one read where each person's rows lie
    near one another (:mod:`dpframe.engines.bounding_clustered`), else in parts spilled
    to disk; the rule's keys are ``rule_keys``', drawn by the first path that bounds."""
    import numpy as np

    from dpframe.engines import bounding_kernel as bk

    _load_kernels()
    person = unit.person
    names = list(values)
    rows = int(frame.select(pl.len()).collect(engine="streaming").item())
    parts = partitions(rows, len(names), len(bads), memory)
    fits = rows * streamed_bytes(len(names)) <= memory
    if parts > 1 and not fits and streamable(frame.collect_schema(), person, keys):
        # past the batched path too: one read, if each person's rows lie near one another
        from dpframe.engines.bounding_clustered import clustered_parts

        bounds = (unit.max_groups, unit.max_rows)
        vals = [values[n] for n in names]
        runs = clustered_parts(
            frame, person, keys, vals, list(bads.values()), rows, bounds, rule_keys, memory
        )
        if runs is not None:
            groups = np.flatnonzero(runs.kept > 0) if keys else np.zeros(1, dtype=np.int64)
            out = pl.DataFrame()
            if keys:  # a code is the key's value
                dtype = frame.collect_schema()[keys[0]]
                out = pl.DataFrame([key_values(keys[0], groups + runs.first, dtype)])
            found_ = (runs.kept, runs.sums, runs.persons)
            totals = dict(zip(bads, runs.flags, strict=True))
            return _assemble(out, keys, groups, found_, names, counts, distinct, totals)
    if parts > 1 and fits and streamable(frame.collect_schema(), person, keys):
        found = _streamed_parts(frame, unit, keys, values, bads, rule_keys, rows)
        if found is not None:
            kept, sums, persons, g0, totals = found
            groups = np.flatnonzero(kept > 0) if keys else np.zeros(1, dtype=np.int64)
            out = pl.DataFrame()
            if keys:  # a code is the key's value
                dtype = frame.collect_schema()[keys[0]]
                out = pl.DataFrame([key_values(keys[0], groups + g0, dtype)])
            found_ = (kept, sums, persons)
            return _assemble(out, keys, groups, found_, names, counts, distinct, totals)
    if parts > 1:
        spilled = spilled_parts(
            frame,
            person,
            keys,
            [values[n] for n in names],
            list(bads.values()),
            rows,
            parts,
            (unit.max_groups, unit.max_rows),
            rule_keys,
        )
        if spilled is None:  # more than 2**26 groups
            return _polars_parts(frame, unit, keys, values, counts, bads, rule_keys, distinct)
        kept, sums, persons = spilled.kept, spilled.sums, spilled.persons
        groups = np.flatnonzero(kept > 0) if keys else np.zeros(1, dtype=np.int64)
        out = (
            spilled.groups.filter(pl.col("__spill_g").is_in(groups + spilled.first)).select(keys)
            if keys
            else pl.DataFrame()
        )
        totals = dict(zip(bads, spilled.flags, strict=True))
        return _assemble(out, keys, groups, (kept, sums, persons), names, counts, distinct, totals)
    # one streaming read: the person, the keys, each part's values, each bad-row flag, in
    # a frame of their own (the input's names never collide with the derived columns')
    derived = [values[n].cast(pl.Float64) for n in names] + list(bads.values())
    both = frame.select(
        pl.struct(*dict.fromkeys([person, *keys])).alias("keys"),
        *[e.alias(f"v{j}") for j, e in enumerate(derived[: len(names)])],
        *[e.alias(f"b{j}") for j, e in enumerate(derived[len(names) :])],
    ).collect(engine="streaming")
    df = both["keys"].struct.unnest()
    parts = both.drop("keys")
    refuse_missing_ids(person, missing_count(df[person]))
    pid, gid = codes(df, person, keys, df.height)
    p_range, g_range = _code_range(pid), _code_range(gid)
    if g_range[1] - g_range[0] >= 1 << bk.GROUP_BITS:  # more than 2**26 groups
        return _polars_parts(frame, unit, keys, values, counts, bads, rule_keys, distinct)
    key, rows_key = rule_keys.draw()
    work = pl.DataFrame([pid.alias("p"), gid, *[parts[f"v{j}"] for j in range(len(names))]])
    if len({tuple(len(x) for x in work[c].get_chunks()) for c in work.columns}) > 1:
        work = work.rechunk()
    chunks = {c: [x.to_numpy() for x in work[c].get_chunks()] for c in work.columns}
    vals = [
        [chunks[f"v{j}"][i] for j in range(len(names))] if names else np.empty((0, len(p)))
        for i, p in enumerate(chunks["p"])
    ]
    kept, sums, persons, group_row, _ = bk.bounded_sums(
        chunks["p"],
        chunks["g"],
        vals,
        key,
        unit.max_groups,
        unit.max_rows,
        p_range,
        g_range,
        row_key=rows_key,
    )
    del chunks, vals
    groups = np.flatnonzero(kept > 0) if keys else np.zeros(1, dtype=np.int64)
    out = df[group_row[groups]].select(keys) if keys else pl.DataFrame()  # their keys' values
    totals = {b: int(parts[f"b{j}"].sum() or 0) for j, b in enumerate(bads)}
    return _assemble(out, keys, groups, (kept, sums, persons), names, counts, distinct, totals)


def _streamed_parts(
    frame: pl.LazyFrame,
    unit: PrivacyUnit,
    keys: list[str],
    values: dict[str, pl.Expr],
    bads: dict[str, pl.Expr],
    rule_keys: RuleKeys,
    rows: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, dict[str, int]] | None:
    """The kernel's kept rows, sums and persons by group (from the least group code,
    returned too) and the bad counts, the records read twice and never held whole: the
    person and key codes first (their ranges, and the records of each bucket of
    persons), then every record in the streaming engine's batches, each placed in its
    bucket as it arrives (:class:`~dpframe.engines.bounding_kernel.StreamedRecords`:
    about :func:`~dpframe.engines.bounding_spill.streamed_bytes` a record). None
    (nothing drawn) where a code is not the value itself (a key with nulls, codes
    ranked); :class:`InvalidDataError` if the two reads differ."""
    from dpframe.engines import bounding_kernel as bk

    person = unit.person
    raw = [pl.col(c).to_physical().cast(pl.Int64) for c in [person, *keys]]
    persons, g_range, g_nulls = _read_codes(frame, person, raw, rows)
    p_range = bk.value_range([persons])
    if keys and g_nulls:
        return None
    same = person_codes(pl.Series(p_range), rows).to_list() == list(p_range)
    if keys:
        ends = pl.DataFrame({"g": list(g_range)})
        same = same and group_codes(ends, ["g"], rows).to_list() == list(g_range)
    if not same or g_range[1] - g_range[0] >= 1 << bk.GROUP_BITS:
        return None
    key, rows_key = rule_keys.draw()
    bounds = (unit.max_groups, unit.max_rows)
    records = bk.StreamedRecords([persons], len(values), bounds, p_range, g_range, key, rows_key)
    del persons  # freed before the kernel's copy of the records is written
    derived = [e.cast(pl.Float64).alias(f"v{j}") for j, e in enumerate(values.values())]
    flags = [e.alias(f"b{j}") for j, e in enumerate(bads.values())]
    gc = raw[1] if keys else pl.lit(0, dtype=pl.Int64)
    batches = frame.select(raw[0].alias("p"), gc.alias("g"), *derived, *flags)
    totals = dict.fromkeys(bads, 0)
    try:
        for batch in batches.collect_batches(chunk_size=_BATCH, engine="streaming"):
            if batch["p"].null_count() or batch["g"].null_count():
                raise ValueError("a null code")
            work = [batch.get_column(c) for c in ["p", "g", *[f"v{j}" for j in range(len(values))]]]
            if len({tuple(len(x) for x in c.get_chunks()) for c in work}) > 1:
                work = [c.rechunk() for c in work]
            chunks = {c.name: [x.to_numpy() for x in c.get_chunks()] for c in work}
            vals = [
                [chunks[f"v{j}"][i] for j in range(len(values))]
                if values
                else np.empty((0, len(p)))
                for i, p in enumerate(chunks["p"])
            ]
            records.add(chunks["p"], chunks["g"], vals)
            for j, b in enumerate(bads):
                totals[b] += int(batch[f"b{j}"].sum() or 0)
        kept, sums, persons, _ = records.bound()
    except ValueError as exc:  # the records read twice differ
        raise _changed(str(exc)) from None
    return kept, sums, persons, g_range[0], totals


def _read_codes(
    frame: pl.LazyFrame, person: str, raw: list[pl.Expr], rows: int
) -> tuple[np.ndarray, tuple[int, int], int]:
    """The persons' codes (``raw[0]``, into an array of ``rows`` of the process's own
    memory: freed, it is the memory of the kernel's records next), the least and
    greatest key code (``raw[1]``, if any) and the key's nulls, in one streaming read
    of the two columns; a null person refused (all of them counted)."""
    import numpy as np

    persons = np.empty(rows, dtype=np.int64)
    at, nulls, g_nulls = 0, 0, 0
    lo, hi = [], []
    ids = frame.select(raw[0].alias("p"), *[e.alias("g") for e in raw[1:]])
    for batch in ids.collect_batches(chunk_size=_BATCH, engine="streaming"):
        p = batch.get_column("p")
        nulls += p.null_count()
        if at + batch.height > rows:
            raise _changed("more records than counted")
        if not nulls:
            persons[at : at + batch.height] = p.to_numpy()
        at += batch.height
        if len(raw) > 1:
            g = batch.get_column("g")
            g_nulls += g.null_count()
            if g.len() > g.null_count():
                lo.append(int(g.min()))  # type: ignore[arg-type]
                hi.append(int(g.max()))  # type: ignore[arg-type]
    refuse_missing_ids(person, nulls)
    if at != rows:
        raise _changed("fewer records than counted")
    return persons, (min(lo, default=0), max(hi, default=0)), g_nulls


def _changed(what: str) -> InvalidDataError:
    return InvalidDataError(
        f"the records changed between two reads of them ({what}): person-level bounding "
        "reads its input twice; bound a stable input (e.g. a file that is not being written)"
    )


def _assemble(
    out: pl.DataFrame,
    keys: list[str],
    groups: np.ndarray,
    found: tuple[np.ndarray, np.ndarray, np.ndarray],
    names: list[str],
    counts: Sequence[str],
    distinct: Sequence[str],
    totals: dict[str, int],
) -> pl.DataFrame:
    """The parts frame: the groups' keys (``out``), then, from the kernel's kept rows,
    sums and persons by group (``found``, read at ``groups``), each part, and the bad
    counts on the first group."""
    kept, sums, persons = found
    cols = {ROWS: pl.Series(ROWS, kept[groups], dtype=pl.UInt32)}
    for n in counts:
        cols[n] = pl.Series(n, kept[groups], dtype=pl.Float64)
    for j, n in enumerate(names):
        cols[n] = pl.Series(n, sums[groups, j], dtype=pl.Float64)
    for n in distinct:
        cols[n] = pl.Series(n, persons[groups], dtype=pl.Float64)
    out = out.with_columns(**cols) if keys else pl.DataFrame(cols)
    return _with_bad_totals(out, totals)


def _code_range(codes: pl.Series) -> tuple[int, int]:
    """The least and greatest code (Int64, no nulls); ``(0, 0)`` if none."""
    if codes.len() == 0:
        return 0, 0
    return int(codes.min()), int(codes.max())  # type: ignore[arg-type]


def _with_bad_totals(out: pl.DataFrame, totals: dict[str, int]) -> pl.DataFrame:
    """The bad counts of all rows on the first group (the driver sums them), 0 elsewhere."""
    first_row = pl.int_range(pl.len()) == 0
    return out.with_columns(
        pl.when(first_row).then(pl.lit(n)).otherwise(0).cast(pl.UInt32).alias(b)
        for b, n in totals.items()
    )


def _polars_parts(
    frame: pl.LazyFrame,
    unit: PrivacyUnit,
    keys: list[str],
    values: dict[str, pl.Expr],
    counts: Sequence[str],
    bads: dict[str, pl.Expr],
    rule_keys: RuleKeys,
    distinct: Sequence[str] = (),
) -> pl.DataFrame:
    """:func:`bounded_grouped_parts` by polars: pairs aggregated, then chosen (the rule's
    keys: ``rule_keys``)."""
    key, rows_key = rule_keys.draw()
    person = unit.person
    exprs = {n: e.sum() for n, e in values.items()}
    bad_sums = [e.sum().alias(b) for b, e in bads.items()]
    pairs = _pairs(frame, person, keys, [*[e.alias(n) for n, e in exprs.items()], *bad_sums])
    r = min(unit.max_rows, int(pairs[_N].sum()))  # no pair has more rows (a u32 count)
    totals = {b: int(pairs[b].sum() or 0) for b in bads}
    kept = _choose_groups(pairs.drop(list(bads)), person, keys, unit.max_groups, key)
    on = [person, *keys]
    big = kept.filter(pl.col(_N) > r)
    kept = kept.drop(_PC, _GC)
    if big.height:
        rows = _oversized_rows(frame, person, keys, big, r, rows_key)
        fixed = rows.group_by(on).agg(e.alias(n) for n, e in exprs.items())
        fixed = fixed.collect(engine="streaming")
        kept = pl.concat(
            [
                kept.filter(pl.col(_N) <= r),
                big.select([*on, _N]).join(fixed, on=on, nulls_equal=True).select(kept.columns),
            ]
        )
    n_kept = pl.col(_N).clip(upper_bound=r).sum()
    agg_exprs = [n_kept.alias(ROWS)]
    agg_exprs += [n_kept.cast(pl.Float64).alias(n) for n in counts]
    agg_exprs += [pl.col(n).sum() for n in exprs]
    agg_exprs += [pl.len().cast(pl.Float64).alias(n) for n in distinct]  # one row a pair
    out = kept.lazy().group_by(keys).agg(agg_exprs).collect() if keys else kept.select(agg_exprs)
    return _with_bad_totals(out, totals)
