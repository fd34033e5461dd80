"""The output guard (``dpframe.core.outputs``): never a path that resolves to what the run
reads, a ledger, or an existing file dpframe did not write."""

from __future__ import annotations

import os
import sqlite3

import pytest

from dpframe.core.outputs import Read, guard_output, ledger_conflict, read_conflict
from dpframe.errors import InvalidParameterError


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data").mkdir()
    for name in ("part-1.parquet", "part-2.parquet", ".hidden.parquet"):
        (tmp_path / "data" / name).write_bytes(b"confidential")
    (tmp_path / "data" / "sub").mkdir()
    (tmp_path / "data" / "sub" / "deep.parquet").write_bytes(b"confidential")
    return tmp_path


@pytest.mark.parametrize(
    ("pattern", "target", "hit"),
    [
        ("data/*.parquet", "data/part-1.parquet", True),
        ("data/*.parquet", "data/new.parquet", True),  # matched, though not there yet
        ("data/*.parquet", "data/.hidden.parquet", True),  # polars' * matches a dot
        ("data/*.parquet", "data/sub/deep.parquet", False),  # * stops at a /
        ("data/*.parquet", "data/part-1.csv", False),
        ("data/**/*.parquet", "data/sub/deep.parquet", True),
        ("data/**/*.parquet", "data/.runs/x/a.parquet", True),
        ("data/part-?.parquet", "data/part-3.parquet", True),
        ("data/part-[12].parquet", "data/part-2.parquet", True),
        ("data/part-[!12].parquet", "data/part-2.parquet", False),
        ("data/**", "data/sub/x", True),
        ("data", "data/new.parquet", True),  # a folder read: everything under it
        ("data", "elsewhere.parquet", False),
        ("data/part-1.parquet", "data/part-1.parquet", True),
        ("data/part-1.parquet", "data/part-2.parquet", False),
    ],
)
def test_a_path_the_run_reads_by_name_glob_or_folder(data, monkeypatch, pattern, target, hit):
    monkeypatch.chdir(data)
    found = read_conflict(target, [Read(pattern, "input.path")])
    assert (found is not None) == hit, found
    if hit:
        assert "input.path" in found and pattern in found


def test_links_and_hard_links_to_what_the_run_reads(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "link.parquet").symlink_to(data / "data" / "part-1.parquet")
    (out / "dir").symlink_to(data / "data")
    os.link(data / "data" / "part-2.parquet", out / "hard.parquet")
    reads = [Read(str(data / "data" / "part-*.parquet"), "the query's input")]
    assert "the query's input" in read_conflict(out / "link.parquet", reads)
    assert "the query's input" in read_conflict(out / "dir" / "part-9.parquet", reads)
    assert "hard link" in read_conflict(out / "hard.parquet", reads)
    # a pattern through a linked folder matches the resolved path
    linked = [Read(str(out / "dir" / "*.parquet"), "input.path")]
    assert read_conflict(data / "data" / "new.parquet", linked) is not None
    assert read_conflict(out / "other.parquet", reads) is None


def test_every_ledger_file_and_companion(tmp_path):
    ledger = tmp_path / "ledger.db"
    con = sqlite3.connect(ledger)
    con.execute("create table t (x)")
    con.commit()
    con.close()
    (tmp_path / "link").symlink_to(ledger)
    for path in ("ledger.db", "link", "ledger.db-wal", "ledger.db-shm", "ledger.db-journal"):
        assert ledger_conflict(tmp_path / path) is not None, path
    assert ledger_conflict(tmp_path / "ledger.db-x") is None
    # a named ledger that no longer exists (deleted under an open accountant) still counts
    gone = tmp_path / "gone.db"
    assert "the ledger" in ledger_conflict(gone, [gone])
    assert "the ledger" in ledger_conflict(tmp_path / "gone.db-wal", [gone])
    assert ledger_conflict(tmp_path / "other.db", [gone]) is None


def test_an_existing_file_is_replaced_only_if_dpframe_wrote_it(tmp_path):
    mine, theirs = tmp_path / "mine.parquet", tmp_path / "theirs.parquet"
    mine.write_bytes(b"dpframe's")
    theirs.write_bytes(b"the user's")
    owned = {mine}.__contains__
    assert guard_output(mine, argument="path", owned=owned) == mine
    assert guard_output(tmp_path / "new.parquet", argument="path", owned=owned)
    with pytest.raises(InvalidParameterError, match=r"^path: .* not written by dpframe.*move it"):
        guard_output(theirs, argument="path", owned=owned)
    with pytest.raises(InvalidParameterError, match="not written by dpframe"):
        guard_output(theirs, argument="path")  # no owner test: nothing existing is replaced
    (tmp_path / "link.parquet").symlink_to(mine)
    with pytest.raises(InvalidParameterError, match="symbolic link"):
        guard_output(tmp_path / "link.parquet", argument="path", owned=owned)
    # a rewrite in place of another tool's file checks reads and ledgers only
    assert guard_output(theirs, argument="destination", replace=False) == theirs


def test_the_error_names_the_argument_and_writes_nothing(tmp_path):
    target = tmp_path / "in.parquet"
    target.write_bytes(b"confidential")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(InvalidParameterError) as err:
        guard_output(target, argument="output.folder", reads=[Read(str(target), "input.path")])
    message = str(err.value)
    assert message.startswith("output.folder: ") and "input.path" in message
    assert "write it elsewhere" in message and "Nothing was written or charged" in message
    assert sorted(os.listdir(tmp_path)) == before and target.read_bytes() == b"confidential"
