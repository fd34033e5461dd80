"""dpframe.copy_provenance: a release's provenance carried into a copy another tool wrote."""

import json
import os
import stat
import struct
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpframe
from dpframe import InvalidDataError, InvalidParameterError, LedgerIntegrityError

ROWS = 3000


def release_frame() -> pl.DataFrame:
    k = ROWS // 3
    return pl.DataFrame(
        {
            "region": ["N", "S", "E"] * k,
            "band": pl.Series(["a", "b", "a"] * k, dtype=pl.Enum(["a", "b"])),
            "count": [3, 0, 12] * k,
            "mean": [1.25, None, 7.0078125] * k,
            "day": pl.Series([1, 2, 3] * k).cast(pl.Date),
        }
    )


def write_release(path: Path, acct=None, frame=None) -> Path:
    acct = acct or dpframe.Accountant(epsilon=2.0)
    acct.spend(0.5, mechanism="laplace", columns=["count", "mean"])
    return dpframe.write_parquet(
        release_frame() if frame is None else frame, path, ledger=acct, spec={"v": 1}
    )


@pytest.fixture
def src(tmp_path) -> Path:
    return write_release(tmp_path / "release.parquet")


def footer_start(path: Path) -> int:
    data = path.read_bytes()
    return len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]


def by_pyarrow(src, dst):
    pq.write_table(pq.read_table(src), dst)


def by_pyarrow_row_groups(src, dst):
    pq.write_table(pq.read_table(src), dst, row_group_size=700, compression="gzip")


def by_pyarrow_without_schema(src, dst):  # no key-value metadata at all
    pq.write_table(pq.read_table(src), dst, store_schema=False)


def by_polars(src, dst):
    pl.read_parquet(src).write_parquet(dst, row_group_size=1000)


def by_polars_sink(src, dst):
    pl.scan_parquet(src).sink_parquet(dst)


def by_pandas(src, dst):  # the Enum becomes a pandas category, the Date an object
    pytest.importorskip("pandas").read_parquet(src).to_parquet(dst)


def by_duckdb(src, dst):  # the Enum becomes VARCHAR
    duckdb = pytest.importorskip("duckdb")
    duckdb.sql(f"COPY (SELECT * FROM '{src}') TO '{dst}' (FORMAT parquet, ROW_GROUP_SIZE 1024)")


TOOLS = [
    by_pyarrow,
    by_pyarrow_row_groups,
    by_pyarrow_without_schema,
    by_polars,
    by_polars_sink,
    by_pandas,
    by_duckdb,
]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda f: f.__name__)
def test_round_trip_after_another_tool(src, tmp_path, tool):
    dst = tmp_path / "copy.parquet"
    tool(src, dst)
    with pytest.raises(InvalidParameterError, match="no dpframe provenance"):
        dpframe.read_provenance(dst)  # the tool dropped it
    os.chmod(dst, 0o640)
    before = dst.read_bytes()
    start = footer_start(dst)
    meta = pq.read_metadata(dst)
    groups = [pq.ParquetFile(dst).read_row_group(i) for i in range(meta.num_row_groups)]
    frame = pl.read_parquet(dst)

    assert dpframe.copy_provenance(src, dst) == dst

    assert dpframe.read_provenance(dst) == dpframe.read_provenance(src)
    after = dst.read_bytes()
    assert after[:start] == before[:start]  # every page, index and statistic, byte for byte
    new = pq.read_metadata(dst)
    assert new.num_rows == meta.num_rows == ROWS
    assert new.num_row_groups == meta.num_row_groups and new.schema.equals(meta.schema)
    for i, group in enumerate(groups):
        assert new.row_group(i).to_dict() == meta.row_group(i).to_dict()
        assert pq.ParquetFile(dst).read_row_group(i).equals(group)
    assert pl.read_parquet(dst).equals(frame) and pl.read_parquet_schema(dst) == frame.schema
    kept = {k: v for k, v in (new.metadata or {}).items() if k != b"dpframe"}
    assert kept == (meta.metadata or {})  # the tool's own entries (ARROW:schema, pandas)
    assert stat.S_IMODE(os.stat(dst).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.parquet", "release.parquet"]


def test_a_subset_of_the_columns_in_another_order_and_type(src, tmp_path):
    dst = tmp_path / "subset.parquet"
    table = pq.read_table(src, columns=["mean", "count", "band"])
    table = table.set_column(1, "count", table["count"].cast(pa.float64()))  # exact: kept
    table = table.set_column(2, "band", table["band"].cast(pa.string()))
    pq.write_table(table, dst)
    dpframe.copy_provenance(src, dst)
    assert dpframe.read_provenance(dst) == dpframe.read_provenance(src)


def test_the_same_provenance_already_there_writes_nothing(src, tmp_path):
    dst = tmp_path / "copy.parquet"
    by_pyarrow(src, dst)
    dpframe.copy_provenance(src, dst)
    status, data = os.stat(dst), dst.read_bytes()
    assert dpframe.copy_provenance(src, dst) == dst
    again = os.stat(dst)
    assert (again.st_ino, again.st_mtime_ns) == (status.st_ino, status.st_mtime_ns)
    assert dst.read_bytes() == data


def test_overwrite_replaces_another_provenance(src, tmp_path):
    dst = write_release(tmp_path / "other.parquet")  # the same table, another release
    assert dpframe.read_provenance(dst) != dpframe.read_provenance(src)
    before = dst.read_bytes()
    with pytest.raises(InvalidParameterError, match=r"another dpframe provenance.*overwrite"):
        dpframe.copy_provenance(src, dst)
    assert dst.read_bytes() == before
    dpframe.copy_provenance(src, dst, overwrite=True)
    assert dpframe.read_provenance(dst) == dpframe.read_provenance(src)
    assert [k for k in pq.read_metadata(dst).metadata if k == b"dpframe"] == [b"dpframe"]


def test_a_symbolic_link_stays_a_link_to_the_rewritten_file(src, tmp_path):
    target = tmp_path / "warehouse.parquet"
    by_duckdb_or_pyarrow(src, target)
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    dpframe.copy_provenance(src, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert dpframe.read_provenance(target) == dpframe.read_provenance(src)


def by_duckdb_or_pyarrow(src, dst):
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return by_pyarrow(src, dst)
    return by_duckdb(src, dst)


def test_it_spends_nothing_and_opens_no_ledger(tmp_path, monkeypatch):
    acct = dpframe.Accountant.open(tmp_path / "ledger.db", epsilon=2.0)
    src = write_release(tmp_path / "release.parquet", acct)
    dst = tmp_path / "copy.parquet"
    by_pyarrow(src, dst)
    ledger = (tmp_path / "ledger.db").read_bytes()

    def no_ledger(*args, **kwargs):
        raise AssertionError("copy_provenance opened a ledger")

    monkeypatch.setattr(dpframe.Accountant, "open", no_ledger)
    dpframe.copy_provenance(src, dst)
    assert (tmp_path / "ledger.db").read_bytes() == ledger
    assert acct.spent.epsilon == 0.5 and len(acct.ledger) == 1


# ---------------------------------------------------------------------------------------
# refusals: each names the argument and leaves both files byte-identical
# ---------------------------------------------------------------------------------------


def copy_of(src, dst, frame_fn=None):
    """dst: src rewritten by polars, after ``frame_fn`` (another tool's edit)."""
    frame = pl.read_parquet(src)
    (frame if frame_fn is None else frame_fn(frame)).write_parquet(dst)
    return dst


def tampered_source(src, d):
    doc = json.loads(pl.read_parquet_metadata(src)["dpframe"])
    doc["entries"][0]["epsilon"] = 0.001  # its hash no longer matches
    pl.read_parquet(src).write_parquet(
        d / "tampered.parquet", metadata={"dpframe": json.dumps(doc)}
    )
    return d / "tampered.parquet", copy_of(src, d / "dst.parquet")


def footer_encrypted(src, d):
    dst = copy_of(src, d / "dst.parquet")
    dst.write_bytes(dst.read_bytes()[:-4] + b"PARE")
    return src, dst


def hard_link(src, d):
    os.link(src, d / "hard.parquet")
    return src, d / "hard.parquet"


def sym_link(src, d):
    (d / "sym.parquet").symlink_to(src)
    return src, d / "sym.parquet"


def fifo(src, d):
    os.mkfifo(d / "pipe.parquet")
    return src, d / "pipe.parquet"


def spark_folder(src, d):
    (d / "spark.parquet").mkdir()
    (d / "spark.parquet" / "_dpframe.json").write_text(
        json.dumps({"dpframe": json.loads(pl.read_parquet_metadata(src)["dpframe"])})
    )
    return d / "spark.parquet", copy_of(src, d / "dst.parquet")


def with_raw(frame):
    return frame.with_columns(income=pl.Series(range(frame.height)) * 1000)


def low_bit(frame):  # the same value to the eye, one bit of raw data in it
    bits = frame["mean"].reinterpret(dtype=pl.UInt64)
    changed = pl.concat([bits[:1] ^ 1, bits[1:]]).reinterpret(dtype=pl.Float64)
    return frame.with_columns(changed.alias("mean"))


REFUSALS = [
    # (label, make(src, folder) -> (source, destination), kwargs, error, match)
    (
        "source without provenance",
        lambda s, d: (copy_of(s, d / "plain.parquet"), copy_of(s, d / "dst.parquet")),
        {},
        InvalidParameterError,
        "source: .*no dpframe provenance",
    ),
    (
        "source missing",
        lambda s, d: (d / "missing.parquet", copy_of(s, d / "dst.parquet")),
        {},
        InvalidParameterError,
        "source: .*does not exist",
    ),
    (
        "source not Parquet",
        lambda s, d: ((d / "t.parquet").write_text("x" * 40) and d / "t.parquet", s),
        {},
        InvalidParameterError,
        "source: .*not a Parquet file",
    ),
    (
        "source a folder",
        lambda s, d: (d, copy_of(s, d / "dst.parquet")),
        {},
        InvalidParameterError,
        "source: .*is a folder",
    ),
    ("source a Spark folder", spark_folder, {}, InvalidParameterError, "source: .*folder"),
    ("source tampered", tampered_source, {}, LedgerIntegrityError, "source: "),
    (
        "destination missing",
        lambda s, d: (s, d / "missing.parquet"),
        {},
        InvalidParameterError,
        "destination: .*does not exist",
    ),
    (
        "destination not Parquet",
        lambda s, d: (s, (d / "t.csv").write_text("a,b\n1,2\n") and d / "t.csv"),
        {},
        InvalidParameterError,
        "destination: .*not a Parquet file",
    ),
    (
        "destination a folder",
        lambda s, d: (s, (d / "sub").mkdir() or d / "sub"),
        {},
        InvalidParameterError,
        "destination: .*is a folder",
    ),
    ("destination a FIFO", fifo, {}, InvalidParameterError, "destination: .*not a regular"),
    ("destination encrypted", footer_encrypted, {}, InvalidParameterError, "encrypted"),
    ("destination is source", lambda s, d: (s, s), {}, InvalidParameterError, "same file"),
    ("destination links to source", sym_link, {}, InvalidParameterError, "same file"),
    ("destination a hard link", hard_link, {}, InvalidParameterError, "same file"),
    (
        "destination carries another provenance",
        lambda s, d: (s, write_release(d / "other.parquet")),
        {},
        InvalidParameterError,
        "destination: .*another dpframe provenance.*overwrite",
    ),
    (
        "destination holds a raw column",
        lambda s, d: (s, copy_of(s, d / "dst.parquet", with_raw)),
        {},
        InvalidDataError,
        r"destination: .*\['income'\] that source .* did not release",
    ),
    (
        "destination renamed a column",
        lambda s, d: (s, copy_of(s, d / "dst.parquet", lambda f: f.rename({"mean": "avg"}))),
        {},
        InvalidDataError,
        r"destination: .*\['avg'\]",
    ),
    (
        "destination holds raw values under a released name",
        lambda s, d: (
            s,
            copy_of(s, d / "dst.parquet", lambda f: f.with_columns(pl.col("count") + 1)),
        ),
        {},
        InvalidDataError,
        "destination: column 'count' .*other values",
    ),
    (
        "destination filtered",
        lambda s, d: (s, copy_of(s, d / "dst.parquet", lambda f: f.filter(pl.col("count") > 0))),
        {},
        InvalidDataError,
        "destination: .*2000 rows where source .*3000",
    ),
    (
        "destination reordered",
        lambda s, d: (s, copy_of(s, d / "dst.parquet", lambda f: f.sort("region"))),
        {},
        InvalidDataError,
        "destination: column 'region' .*other values",
    ),
    (
        "destination hides a bit in a float",
        lambda s, d: (s, copy_of(s, d / "dst.parquet", low_bit)),
        {},
        InvalidDataError,
        "destination: column 'mean' .*other values .*row 0",
    ),
    (
        "destination lost precision",
        lambda s, d: (
            s,
            copy_of(s, d / "dst.parquet", lambda f: f.with_columns(pl.col("mean") / 3)),
        ),
        {},
        InvalidDataError,
        "destination: column 'mean' .*other values",
    ),
    (
        "destination narrowed a float",
        lambda s, d: (
            s,
            copy_of(
                s,
                d / "dst.parquet",
                lambda f: f.with_columns((pl.col("mean") + 0.1).cast(pl.Float32)),
            ),
        ),
        {},
        InvalidDataError,
        "destination: column 'mean' .*other values",
    ),
    (
        "destination changed a column's kind",
        lambda s, d: (
            s,
            copy_of(s, d / "dst.parquet", lambda f: f.with_columns(pl.col("count").cast(str))),
        ),
        {},
        InvalidDataError,
        "destination: column 'count' .*String.*not the same kind",
    ),
    (
        "overwrite not a bool",
        lambda s, d: (s, copy_of(s, d / "dst.parquet")),
        {"overwrite": "yes"},
        InvalidParameterError,
        "overwrite must be True or False",
    ),
    (
        "source None",
        lambda s, d: (None, copy_of(s, d / "dst.parquet")),
        {},
        InvalidParameterError,
        "source must be the path",
    ),
    ("destination 123", lambda s, d: (s, 123), {}, InvalidParameterError, "destination must be"),
    ("destination ''", lambda s, d: (s, ""), {}, InvalidParameterError, "destination must be"),
]


def tree(folder: Path) -> dict[str, bytes | None]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink() and stat.S_ISREG(p.stat().st_mode):
            out[str(p.relative_to(folder))] = p.read_bytes()
        else:
            out[str(p.relative_to(folder))] = None
    return out


@pytest.mark.parametrize(
    ("make", "kwargs", "error", "match"),
    [r[1:] for r in REFUSALS],
    ids=[r[0] for r in REFUSALS],
)
def test_refusals_name_the_argument_and_write_nothing(src, tmp_path, make, kwargs, error, match):
    source, destination = make(src, tmp_path)
    before = tree(tmp_path)
    with pytest.raises(error, match=match):
        dpframe.copy_provenance(source, destination, **kwargs)
    assert tree(tmp_path) == before  # both files byte-identical, no temporary file left


def test_a_failure_while_writing_leaves_the_destination_untouched(src, tmp_path, monkeypatch):
    dst = copy_of(src, tmp_path / "dst.parquet")
    before = tree(tmp_path)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpframe.core.files.os.replace", disk_full)
    with pytest.raises(OSError, match="No space"):
        dpframe.copy_provenance(src, dst)
    assert tree(tmp_path) == before


def test_a_destination_changed_meanwhile_is_not_overwritten(src, tmp_path, monkeypatch):
    import dpframe.polars.io as io

    dst = copy_of(src, tmp_path / "dst.parquet")
    copy = io.copy_with_metadata

    def and_another_tool_writes(*args, **kwargs):
        copy(*args, **kwargs)
        pl.DataFrame({"late": [1]}).write_parquet(dst)  # another writer, meanwhile

    monkeypatch.setattr(io, "copy_with_metadata", and_another_tool_writes)
    with pytest.raises(InvalidParameterError, match=r"destination: .*changed while"):
        dpframe.copy_provenance(src, dst)
    assert pl.read_parquet(dst).columns == ["late"]  # the other tool's file stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.parquet", "release.parquet"]


def test_a_copy_of_the_copy_carries_it_on(src, tmp_path):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    by_pyarrow(src, first)
    dpframe.copy_provenance(src, first)
    pq.write_table(pq.read_table(first, columns=["count"]), second)
    dpframe.copy_provenance(first, second)
    assert dpframe.read_provenance(second) == dpframe.read_provenance(src)
