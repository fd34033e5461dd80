"""A Parquet file's key-value metadata, rewritten without touching its data.

A Parquet file is ``PAR1``, the column chunks (and any page indexes and bloom filters),
the footer -- a Thrift compact-protocol ``FileMetaData`` -- the footer's length (4 bytes,
little-endian) and ``PAR1`` again. The key-value metadata is field 5 of
``FileMetaData``, and every offset the footer holds counts from the start of the file:
so a new footer written after the old file's bytes up to its footer leaves every data
page, row group and index where it was, byte for byte. This module reads the footer's
top-level fields (each field's value kept as raw bytes) and the key-value entries, and
writes a footer whose only change is its key-value list (used by
:func:`dpframe.polars.io.copy_provenance`).

Pure standard library: the compact protocol is read without a schema, so fields this
module does not know (newer Parquet versions) are kept as they are.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Footer", "FooterError", "copy_with_metadata", "encode_footer", "read_footer"]

MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"

#: the field of FileMetaData holding the key-value list (list<KeyValue>)
KEY_VALUE_FIELD = 5
#: FileMetaData's num_rows (i64)
NUM_ROWS_FIELD = 3
#: FileMetaData's encryption_algorithm and footer_signing_key_metadata: a plaintext footer
#: of a file with encrypted columns, signed -- a changed footer would not verify
SIGNED_FIELDS = (8, 9)

# compact-protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12
_MAX_DEPTH = 64


class FooterError(ValueError):
    """The file is not a Parquet file whose footer this module can rewrite (the caller
    turns it into a dpframe error naming its argument)."""


@dataclass(frozen=True)
class KeyValue:
    """One key-value entry: its key, its value (None: no value) and its encoded bytes."""

    key: bytes
    value: bytes | None
    raw: bytes


@dataclass(frozen=True)
class Footer:
    """A Parquet file's footer, read by :func:`read_footer`."""

    #: where the footer starts: the file's bytes before it are its data
    start: int
    #: FileMetaData's top-level fields in file order: (field id, compact type, value bytes)
    fields: tuple[tuple[int, int, bytes], ...]
    #: the key-value entries, in file order
    metadata: tuple[KeyValue, ...]
    #: bytes after FileMetaData's stop field inside the footer (kept as they are)
    trailer: bytes

    @property
    def num_rows(self) -> int:
        for fid, ftype, raw in self.fields:
            if fid == NUM_ROWS_FIELD and ftype == _I64:
                return _Reader(raw).zigzag()
        raise FooterError("the footer has no row count (FileMetaData.num_rows)")

    def get(self, key: bytes) -> list[bytes | None]:
        """The values stored under ``key`` (a key may be repeated)."""
        return [kv.value for kv in self.metadata if kv.key == key]


class _Reader:
    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise FooterError("the footer ends inside a value (truncated or not Thrift)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def byte(self) -> int:
        return self.take(1)[0]

    def varint(self) -> int:
        out = shift = 0
        for _ in range(10):
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
        raise FooterError("the footer holds a malformed integer")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, ftype: int, depth: int, in_collection: bool = False) -> None:
        """Skip a value of compact type ``ftype`` (a bool in a list is one byte; a bool
        field's value is in its header)."""
        if depth > _MAX_DEPTH:
            raise FooterError("the footer nests deeper than any Parquet footer")
        if ftype in (_TRUE, _FALSE):
            if in_collection:
                self.take(1)
        elif ftype == _BYTE:
            self.take(1)
        elif ftype in (_I16, _I32, _I64):
            self.varint()
        elif ftype == _DOUBLE:
            self.take(8)
        elif ftype == _BINARY:
            self.take(self.varint())
        elif ftype in (_LIST, _SET):
            size, elem = self.list_header()
            for _ in range(size):
                self.skip(elem, depth + 1, True)
        elif ftype == _MAP:
            size = self.varint()
            if size:
                kinds = self.byte()
                for _ in range(size):
                    self.skip(kinds >> 4, depth + 1, True)
                    self.skip(kinds & 0x0F, depth + 1, True)
        elif ftype == _STRUCT:
            for _fid, _t, _start in self.fields(depth + 1):
                pass
        else:
            raise FooterError(f"the footer holds an unknown Thrift type {ftype}")

    def list_header(self) -> tuple[int, int]:
        head = self.byte()
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size = self.varint()
        if size > len(self.buf) - self.pos:  # every element takes at least one byte
            raise FooterError("the footer declares a list longer than itself")
        return size, elem

    def fields(self, depth: int) -> Iterator[tuple[int, int, int]]:
        """Yield (field id, type, value start) for each field of a struct, skipping each
        value once the caller resumes; stops after the struct's stop field."""
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return
            delta, ftype = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            start = self.pos
            yield fid, ftype, start
            if self.pos == start:  # the caller did not read the value: skip it
                self.skip(ftype, depth)
            last = fid


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_header(fid: int, ftype: int, last: int) -> bytes:
    delta = fid - last
    if 0 < delta <= 15:
        return bytes([(delta << 4) | ftype])
    return bytes([ftype]) + _varint((fid << 1) ^ (fid >> 15))


def _binary(value: bytes) -> bytes:
    return _varint(len(value)) + value


def encode_key_value(key: bytes, value: bytes | None) -> bytes:
    """A KeyValue struct (field 1: key, field 2: value) in the compact protocol."""
    out = _field_header(1, _BINARY, 0) + _binary(key)
    if value is not None:
        out += _field_header(2, _BINARY, 1) + _binary(value)
    return out + b"\x00"


def _key_values(raw: bytes) -> tuple[KeyValue, ...]:
    """The entries of a list<KeyValue> value."""
    r = _Reader(raw)
    size, elem = r.list_header()
    if elem != _STRUCT:
        raise FooterError("the footer's key-value metadata is not a list of entries")
    out = []
    for _ in range(size):
        start = r.pos
        key = value = None
        for fid, ftype, _ in r.fields(2):
            if fid in (1, 2) and ftype == _BINARY:
                text = r.take(r.varint())
                if fid == 1:
                    key = text
                else:
                    value = text
        if key is None:
            raise FooterError("the footer holds a key-value entry without a key")
        out.append(KeyValue(key, value, raw[start : r.pos]))
    if r.pos != len(raw):
        raise FooterError("the footer's key-value metadata has trailing bytes")
    return tuple(out)


def parse_footer(data: bytes, start: int = 0) -> Footer:
    """A footer from its bytes (``start``: where it begins in its file)."""
    r = _Reader(data)
    fields = []
    for fid, ftype, value_start in r.fields(1):
        r.skip(ftype, 1)
        fields.append((fid, ftype, data[value_start : r.pos]))
    metadata: tuple[KeyValue, ...] = ()
    for fid, ftype, raw in fields:
        if fid == KEY_VALUE_FIELD:
            if ftype != _LIST:
                raise FooterError("the footer's key-value metadata is not a list")
            metadata = _key_values(raw)
    footer = Footer(start, tuple(fields), metadata, data[r.pos :])
    _ = footer.num_rows  # a footer without a row count is not Parquet's
    return footer


def read_footer(path: str | os.PathLike[str]) -> Footer:
    """The footer of the Parquet file at ``path``.

    Raises :class:`FooterError` if it is not a Parquet file, or its footer is encrypted
    or signed (a changed footer would not decrypt or verify), and OSError if it cannot be
    read.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 12:
            raise FooterError(f"{size} bytes, too short for Parquet")
        head = fh.read(4)
        fh.seek(size - 8)
        tail = fh.read(8)
        length, magic = struct.unpack("<I", tail[:4])[0], tail[4:]
        if magic == ENCRYPTED_MAGIC or head == ENCRYPTED_MAGIC:
            raise FooterError(
                "its footer is encrypted (Parquet modular encryption); dpframe cannot rewrite it"
            )
        if head != MAGIC or magic != MAGIC:
            raise FooterError("it does not start and end with the Parquet magic bytes PAR1")
        if length > size - 12:
            raise FooterError(f"its footer length ({length}) is larger than the file")
        start = size - 8 - length
        fh.seek(start)
        data = fh.read(length)
    footer = parse_footer(data, start)
    if any(fid in SIGNED_FIELDS for fid, _, _ in footer.fields):
        raise FooterError(
            "its footer is signed (encrypted columns, plaintext footer); a changed footer "
            "would not verify"
        )
    return footer


def encode_footer(footer: Footer, metadata: Sequence[KeyValue | tuple[bytes, bytes]]) -> bytes:
    """``footer`` with ``metadata`` as its key-value list (every other field as it was).

    ``metadata`` holds entries of the footer (kept as their bytes) or new ``(key, value)``
    pairs. The list takes field 5's place, or is inserted before the first field after 5
    (an empty list is not added to a footer that had none).
    """
    raw = [m.raw if isinstance(m, KeyValue) else encode_key_value(*m) for m in metadata]
    n = len(raw)
    header = bytes([(n << 4) | _STRUCT]) if n < 15 else bytes([0xF0 | _STRUCT]) + _varint(n)
    kv_field = (KEY_VALUE_FIELD, _LIST, header + b"".join(raw))
    fields = [f for f in footer.fields if f[0] != KEY_VALUE_FIELD]
    at = next((i for i, f in enumerate(footer.fields) if f[0] == KEY_VALUE_FIELD), None)
    if at is None and raw:  # none before: inserted in field order
        at = next((i for i, f in enumerate(fields) if f[0] > KEY_VALUE_FIELD), len(fields))
    if at is not None:
        fields.insert(at, kv_field)
    out = bytearray()
    last = 0
    for fid, ftype, value in fields:
        out += _field_header(fid, ftype, last) + value
        last = fid
    out += b"\x00" + footer.trailer
    if len(out) >= 2**32:
        raise FooterError("the new footer would exceed Parquet's 4 GiB footer limit")
    return bytes(out)


def copy_with_metadata(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    footer: Footer,
    metadata: Sequence[KeyValue | tuple[bytes, bytes]],
) -> None:
    """Write ``source``'s bytes up to its footer to ``target``, then a footer with
    ``metadata`` as its key-value list (see :func:`encode_footer`)."""
    new = encode_footer(footer, metadata)
    with open(source, "rb") as src, open(target, "wb") as out:
        left = footer.start
        while left:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                raise FooterError("the file became shorter while it was copied")
            out.write(chunk)
            left -= len(chunk)
        out.write(new + struct.pack("<I", len(new)) + MAGIC)
