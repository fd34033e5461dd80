"""The SQLite ledger as a file: links, swaps, the files released from it (issue 14).

What both stores share is tested once for both, in tests/core/test_stores.py. Each test
names what the JSON ledger of before let through.
"""

from __future__ import annotations

import json
import os

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.core.accountant import Accountant
from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    LedgerIntegrityError,
    LedgerMismatchError,
    LedgerReadOnlyError,
)


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "ledger.db"
    Accountant.open(path, epsilon=1.0)
    return path


def _spend(acct, eps=0.1):
    return acct.spend(eps, mechanism="laplace", columns=["x"])


def test_a_symbolic_link_opens_the_same_ledger(ledger, tmp_path):
    # old: the first write replaced the link by a copy, so 0.4 + 0.4 were spent on 0.5
    link = tmp_path / "elsewhere.db"
    link.symlink_to(ledger)
    a, b = Accountant.open(ledger), Accountant.open(link)
    _spend(a, 0.5)
    _spend(a, 0.4)
    with pytest.raises(BudgetExceededError):
        _spend(b, 0.4)
    assert link.is_symlink() and Accountant.open(link).spent.epsilon == pytest.approx(0.9)


def test_a_hard_link_is_refused(ledger, tmp_path):
    os.link(ledger, tmp_path / "second-name.db")
    with pytest.raises(LedgerMismatchError, match="hard links"):
        Accountant.open(ledger)


def test_a_swapped_ledger_is_refused(ledger, tmp_path):
    acct = Accountant.open(ledger)
    _spend(acct)
    other = tmp_path / "other.db"
    Accountant.open(other, epsilon=1.0)
    os.replace(other, ledger)
    with pytest.raises(LedgerIntegrityError, match="replaced"):
        _spend(acct)


def test_a_rewritten_chain_is_caught_by_the_released_files(ledger, tmp_path):
    """Whoever can write the database can rebuild it with less spent (there is no key);
    the files published from it still record their entries and hashes."""
    acct = Accountant.open(ledger)
    df = pl.DataFrame({"x": [1.0, 2.0]})
    out = tmp_path / "released.parquet"
    q = df.lazy().select(
        pl.col("x").dp.laplace(
            epsilon=0.4, sensitivity=1.0, accountant=acct, composition="parallel"
        )
    )
    dpframe.sink_parquet(q, out)
    res = CliRunner().invoke(app, ["ledger", "verify", str(ledger), "--against", str(tmp_path)])
    assert res.exit_code == 0, res.output
    ledger.unlink()
    Accountant.open(ledger, epsilon=1.0)  # a fresh ledger under the same name
    res = CliRunner().invoke(app, ["ledger", "verify", str(ledger), "--against", str(out)])
    assert res.exit_code == 1 and "lacks" in res.output


def test_a_released_files_provenance_is_verified(tmp_path):
    acct = Accountant(epsilon=1.0)
    out = tmp_path / "t.parquet"
    table = pl.DataFrame({"x": [1.0]})
    _spend(acct, 0.5)
    dpframe.write_parquet(table, out, ledger=acct)
    assert dpframe.read_provenance(out).epsilon == pytest.approx(0.5)
    meta = pl.read_parquet_metadata(out)
    doc = json.loads(meta["dpframe"])
    doc["entries"][0]["epsilon"] = 0.05  # make the release look cheaper
    table.write_parquet(out, metadata={"dpframe": json.dumps(doc)})
    with pytest.raises(LedgerIntegrityError, match="edited"):
        dpframe.read_provenance(out)


# -- the command ---------------------------------------------------------------------------------


def test_ledger_verify_and_export_exit_codes(ledger, tmp_path):
    _spend(Accountant.open(ledger))
    runner = CliRunner()
    res = runner.invoke(app, ["ledger", "verify", str(ledger)])
    assert res.exit_code == 0 and "1 entries" in res.output
    res = runner.invoke(app, ["ledger", "verify", str(tmp_path / "missing.db")])
    assert res.exit_code in (1, 2)
    for name in ("l.json", "l.parquet"):
        res = runner.invoke(
            app, ["ledger", "export", str(ledger), "--output", str(tmp_path / name)]
        )
        assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "l.json").read_text())["spent"]["epsilon"] == 0.1
    assert pl.read_parquet(tmp_path / "l.parquet").height == 1
    res = runner.invoke(app, ["ledger", "export", str(ledger), "--output", str(tmp_path / "l.txt")])
    assert res.exit_code == 2


def test_every_ledger_error_is_a_dpframe_error():
    assert issubclass(LedgerIntegrityError, DPFrameError)
    assert issubclass(LedgerReadOnlyError, LedgerMismatchError)


def test_another_applications_database_is_refused_and_left_untouched(tmp_path):
    # old: the open added dpframe's reservations table to it, then refused
    import sqlite3

    other = tmp_path / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('ada')")
    con.commit()
    con.close()
    before = other.read_bytes()
    with pytest.raises(LedgerMismatchError, match="not a dpframe ledger"):
        Accountant.open(other)
    assert other.read_bytes() == before
    tables = sqlite3.connect(other).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("users",)]


def test_a_clean_up_that_cannot_run_never_hides_why_creating_a_ledger_failed(
    tmp_path, monkeypatch
) -> None:
    """A folder cut off mid-creation (its parent's search permission taken back) failed
    in the clean-up of the temporary file with a raw PermissionError, hiding dpframe's
    refusal; the creation's own error comes out, and nothing is left behind."""
    from pathlib import Path

    def cut_off(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    def no_link(src: object, dst: object) -> None:
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(os, "link", no_link)
    monkeypatch.setattr(Path, "unlink", cut_off)
    with pytest.raises(dpframe.DPFrameError) as caught:  # dpframe's words, not the OS's
        Accountant.open(tmp_path / "ledger.db", epsilon=1.0)
    assert "ledger.db" in str(caught.value)
    monkeypatch.undo()
    assert not (tmp_path / "ledger.db").exists()
