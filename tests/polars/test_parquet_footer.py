"""The Parquet footer codec: key-value metadata rewritten, every other byte kept."""

import struct
from dataclasses import replace

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpframe.polars.parquet_footer import (
    FooterError,
    copy_with_metadata,
    encode_footer,
    parse_footer,
    read_footer,
)


def footer_bytes(path) -> bytes:
    data = path.read_bytes()
    return data[len(data) - 8 - struct.unpack("<I", data[-8:-4])[0] : -8]


@pytest.fixture
def files(tmp_path):
    table = pa.table(
        {
            "x": pa.array([1.5, None, 3.0]),
            "s": pa.array(["a", "b", None]),
            "n": pa.array([1, 2, 3], pa.int64()),
        }
    )
    out = {}
    out["pyarrow"] = tmp_path / "pa.parquet"
    pq.write_table(table, out["pyarrow"], write_page_index=True, row_group_size=2)
    out["bare"] = tmp_path / "bare.parquet"  # no key-value metadata at all
    pq.write_table(table, out["bare"], store_schema=False)
    out["polars"] = tmp_path / "pl.parquet"
    pl.from_arrow(table).write_parquet(out["polars"], metadata={"k": "v"})
    many = table.replace_schema_metadata({f"key{i}": f"value{i}" for i in range(20)})
    out["many"] = tmp_path / "many.parquet"  # a list too long for the short header
    pq.write_table(many, out["many"])
    return out


@pytest.mark.parametrize("name", ["pyarrow", "bare", "polars", "many"])
def test_a_footer_encodes_back_to_its_own_bytes(files, name):
    footer = read_footer(files[name])
    assert footer.num_rows == 3
    assert encode_footer(footer, list(footer.metadata)) == footer_bytes(files[name])
    want = pq.read_metadata(files[name]).metadata or {}
    assert {kv.key: kv.value for kv in footer.metadata} == want


@pytest.mark.parametrize("name", ["pyarrow", "bare", "polars", "many"])
def test_new_metadata_keeps_the_data_and_the_other_entries(files, name, tmp_path):
    path = files[name]
    footer = read_footer(path)
    out = tmp_path / "out.parquet"
    entries = [*footer.metadata, (b"dpframe", b'{"a": 1}'), (b"long", b"x" * 100_000)]
    copy_with_metadata(path, out, footer, entries)
    meta, old = pq.read_metadata(out), pq.read_metadata(path)
    assert meta.metadata[b"dpframe"] == b'{"a": 1}' and len(meta.metadata[b"long"]) == 100_000
    assert {k: v for k, v in meta.metadata.items() if k not in (b"dpframe", b"long")} == (
        old.metadata or {}
    )
    assert meta.schema.equals(old.schema) and meta.num_row_groups == old.num_row_groups
    for i in range(old.num_row_groups):
        assert meta.row_group(i).to_dict() == old.row_group(i).to_dict()
    assert pq.read_table(out).equals(pq.read_table(path))
    assert pl.read_parquet(out).equals(pl.read_parquet(path))
    assert out.read_bytes()[: footer.start] == path.read_bytes()[: footer.start]
    again = read_footer(out)
    assert [f for f in again.fields if f[0] != 5] == [f for f in footer.fields if f[0] != 5]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"PAR1", "too short"),
        (b"PAR1" + b"\x00" * 8 + b"PAR2", "magic"),
        (b"PAR1" + b"\x00" * 4 + struct.pack("<I", 99) + b"PAR1", "larger than the file"),
        (b"PAR1" + b"\x15" + struct.pack("<I", 1) + b"PAR1", "ends inside"),
        (b"PAR1" + b"\x00" + struct.pack("<I", 1) + b"PAR1", "no row count"),
        (b"PAR1" + b"\x1d\x00" + struct.pack("<I", 2) + b"PAR1", "unknown Thrift type"),
        (b"PAR1" + b"\x00" * 4 + struct.pack("<I", 0) + b"PARE", "encrypted"),
    ],
)
def test_what_is_not_a_parquet_footer_is_refused(tmp_path, data, match):
    path = tmp_path / "x.parquet"
    path.write_bytes(data)
    with pytest.raises(FooterError, match=match):
        read_footer(path)


def test_a_signed_footer_is_refused(files, tmp_path):
    footer = read_footer(files["polars"])
    with_key = replace(footer, fields=(*footer.fields, (9, 8, b"\x03key")))  # a signing key
    signed = encode_footer(with_key, list(footer.metadata))
    assert parse_footer(signed).fields[-1] == (9, 8, b"\x03key")
    path = tmp_path / "signed.parquet"
    path.write_bytes(
        files["polars"].read_bytes()[: footer.start]
        + signed
        + struct.pack("<I", len(signed))
        + b"PAR1"
    )
    with pytest.raises(FooterError, match="signed"):
        read_footer(path)


def test_deep_nesting_is_refused_not_a_recursion_error():
    deep = b"\x1c" * 200 + b"\x00" * 201
    with pytest.raises(FooterError, match="nests deeper"):
        parse_footer(deep)
