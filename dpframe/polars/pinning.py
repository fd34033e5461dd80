"""The files a checked query reads, pinned to the schemas its check saw.

polars resolves a file scan's schema each time it runs a plan: a plan serialized, checked
and rebuilt (what the runner does, :mod:`dpframe.polars.runner`) would resolve it again
in the dry pass and again in the real pass. A file replaced in between -- one more column,
the columns in another order -- could change what a selector, ``pl.nth`` or
``pl.all().exclude(...)`` names, and so publish a column the check never saw.
:func:`pin_scans` writes each Parquet scan's schema (and its hive partitions' schema)
into the serialized plan before it is checked: the check resolves the pinned schema, and
polars refuses, at every read, a file whose columns or types differ from it (an extra
column, a missing one, another dtype). The data may change (it is the data); what the
query's names resolve to cannot.

Other file formats (CSV, IPC, NDJSON) have no schema polars enforces this way: a query
holding a ``.dp`` release reads Parquet files, in-memory frames or
:func:`dpframe.scan_frame` sources; convert other files first
(``pl.scan_csv(path).sink_parquet(...)``).

Examples
--------
>>> import tempfile, os, polars as pl
>>> path = os.path.join(tempfile.mkdtemp(), "x.parquet")
>>> pl.DataFrame({"a": [1], "b": ["x"]}).write_parquet(path)
>>> pinned = pin_scans(pl.scan_parquet(path).select(pl.nth(1)).serialize())
>>> pl.DataFrame({"a": [1], "ssn": [7], "b": ["x"]}).write_parquet(path)  # replaced
>>> import io
>>> pl.LazyFrame.deserialize(io.BytesIO(pinned)).collect()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
polars.exceptions.SchemaError: extra column in file outside of expected schema: ssn...
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from dpframe.errors import LineageError

__all__ = ["pin_scans"]

_NOTHING = " Nothing was read or charged."


def pin_scans(serialized: bytes) -> bytes:
    """``serialized`` (``LazyFrame.serialize()``) with each Parquet scan's file schema and
    hive schema written in, as polars resolves them now; other file scans refuse.

    The in-memory frames' data is copied as it is, never decoded.

    Examples
    --------
    >>> import io, polars as pl
    >>> plan = pl.LazyFrame({"a": [1, 2]}).select(pl.col("a") * 2).serialize()
    >>> pl.LazyFrame.deserialize(io.BytesIO(pin_scans(plan))).collect()["a"].to_list()
    [2, 4]
    """
    import msgpack

    start = serialized.find(b"\xa4root") - 1
    if start < 0:
        raise LineageError("the query's plan has an unknown layout; it cannot be checked")
    source = io.BytesIO(serialized)
    source.seek(start)
    unpacker = msgpack.Unpacker(source, raw=False, strict_map_key=False, max_buffer_size=0)
    parts: list[tuple[str, Any, bytes | None]] = []  # (key, decoded value, or raw bytes)
    try:
        n = unpacker.read_map_header()
        if n > 15:
            raise LineageError("the query's plan has an unknown layout; it cannot be checked")
        for _ in range(n):
            key = unpacker.unpack()
            if key == "dataframes":  # the data: copied, never decoded
                begin = start + unpacker.tell()
                unpacker.skip()
                parts.append((key, None, serialized[begin : start + unpacker.tell()]))
            else:
                parts.append((key, unpacker.unpack(), None))
    except (ValueError, msgpack.UnpackException) as exc:
        raise LineageError(
            f"the query's plan has an unknown layout ({type(exc).__name__}); it cannot be "
            "checked." + _NOTHING
        ) from None
    plain = {k: v for k, v, raw in parts if raw is None}
    arena = plain.get("dsl_plans")
    if not isinstance(arena, list):
        raise LineageError("the query's plan has an unknown layout; it cannot be checked")
    header = serialized[:start]
    for i, slot in enumerate(arena):
        value = slot.get("value") if isinstance(slot, dict) else None
        scan = value.get("Scan") if isinstance(value, dict) else None
        if scan is not None:
            _pin(scan, header, parts, {"idx": i, "version": slot.get("version")})
    out = bytearray(header)
    out += bytes([0x80 | len(parts)])
    for key, value, raw in parts:
        out += msgpack.packb(key, use_bin_type=True)
        out += raw if raw is not None else msgpack.packb(value, use_bin_type=True)
    return bytes(out)


def _pin(scan: dict[str, Any], header: bytes, parts: list[Any], node: dict[str, Any]) -> None:
    """Write the file and hive schemas polars resolves now into one Parquet scan node."""
    kind = scan.get("scan_type")
    if not isinstance(kind, dict) or list(kind) != ["Parquet"]:
        what = next(iter(kind), "?") if isinstance(kind, dict) else "?"
        raise LineageError(
            f"the query scans {what} files: a query holding a .dp release reads Parquet "
            "files (polars enforces their schema at every read, so the run reads the "
            "columns the check saw), in-memory frames or dpframe.scan_frame sources. "
            "Convert the files first, e.g. pl.scan_csv(path).sink_parquet('input.parquet')."
            + _NOTHING
        )
    options = kind["Parquet"]["options"]
    args = scan["unified_scan_args"]
    hive = args["hive_options"]
    bare = _copy(scan)  # the files' own columns: no row index, file path or partitions
    bare["unified_scan_args"].update(row_index=None, include_file_paths=None, pre_slice=None)
    bare["unified_scan_args"]["hive_options"]["enabled"] = False
    files = _schema_of(bare, header, parts, node)
    with_hive = _copy(bare)
    with_hive["unified_scan_args"]["hive_options"]["enabled"] = hive.get("enabled")
    partitions = {k: t for k, t in _schema_of(with_hive, header, parts, node).items()
                  if k not in files}  # fmt: skip
    encoded_files, encoded_hive = _encoded(files, partitions)
    if options.get("schema") is None:
        options["schema"] = encoded_files
    if hive.get("schema") is None and partitions:
        hive["schema"] = encoded_hive
    hive["enabled"] = bool(partitions)


def _copy(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_copy(v) for v in x]
    return x


def _schema_of(
    scan: dict[str, Any], header: bytes, parts: list[Any], node: dict[str, Any]
) -> pl.Schema:
    """The schema polars resolves for ``scan`` alone (a plan whose root is the scan)."""
    import msgpack

    out = bytearray(header)
    out += bytes([0x80 | len(parts)])
    for key, value, raw in parts:
        out += msgpack.packb(key, use_bin_type=True)
        if key == "root":
            value = node
        elif key == "dsl_plans":
            value = [dict(s) for s in value]
            value[node["idx"]] = {"value": {"Scan": scan}, "version": node["version"]}
        out += raw if raw is not None else msgpack.packb(value, use_bin_type=True)
    try:
        return pl.LazyFrame.deserialize(io.BytesIO(bytes(out))).collect_schema()
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LineageError(
            f"the query's Parquet scan cannot be resolved ({type(exc).__name__}: {first})."
            + _NOTHING
        ) from None


def _encoded(files: pl.Schema, partitions: dict[str, Any]) -> tuple[Any, Any]:
    """polars' own serialization of a file schema and a hive schema."""
    import msgpack

    probe = pl.scan_parquet(
        "/dev/null/dpframe.parquet", schema=files, hive_schema=partitions or None
    ).serialize()
    start = probe.find(b"\xa4root") - 1
    unpacker = msgpack.Unpacker(io.BytesIO(probe[start:]), raw=False, strict_map_key=False)
    for _ in range(unpacker.read_map_header()):
        key, value = unpacker.unpack(), unpacker.unpack()
        if key == "dsl_plans":
            for slot in value:
                scan = (slot.get("value") or {}).get("Scan")
                if scan is not None:
                    hive = scan["unified_scan_args"]["hive_options"]["schema"]
                    return scan["scan_type"]["Parquet"]["options"]["schema"], hive
    raise LineageError("the query's plan has an unknown layout; it cannot be checked")
