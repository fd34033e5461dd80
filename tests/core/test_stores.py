"""The SQLite ledger against a careless or adversarial operator (issue 14).

Each test names what the JSON ledger of before let through.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import queue
import shutil
import signal
import sqlite3
import time

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.core.accountant import Accountant
from dpframe.core.legacy import migrate_json
from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    InvalidParameterError,
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


# -- links, deletion, swaps, old copies ------------------------------------------------------


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


def test_a_ledger_deleted_while_open_refuses_to_spend(ledger):
    # old: deleting the file silently started a new budget
    acct = Accountant.open(ledger)
    _spend(acct)
    for f in ledger.parent.glob("ledger.db*"):
        f.unlink()
    with pytest.raises(LedgerIntegrityError, match="deleted"):
        _spend(acct)
    with pytest.raises(LedgerIntegrityError):
        acct.spent  # noqa: B018
    assert not ledger.exists()  # nothing recreated it


def test_a_swapped_ledger_is_refused(ledger, tmp_path):
    acct = Accountant.open(ledger)
    _spend(acct)
    other = tmp_path / "other.db"
    Accountant.open(other, epsilon=1.0)
    os.replace(other, ledger)
    with pytest.raises(LedgerIntegrityError, match="replaced"):
        _spend(acct)


def test_an_older_copy_put_back_is_refused_by_an_open_accountant(ledger, tmp_path):
    acct = Accountant.open(ledger)
    _spend(acct)
    backup = tmp_path / "backup.db"
    con = sqlite3.connect(ledger)
    con.execute(f"VACUUM INTO '{backup}'")  # a consistent copy, as a backup tool makes
    con.close()
    _spend(acct, 0.5)
    shutil.copyfile(backup, ledger)  # same inode, older content
    for f in ledger.parent.glob("ledger.db-*"):
        f.unlink()
    with pytest.raises(LedgerIntegrityError, match=r"truncated|older"):
        _spend(acct)


# -- edits through SQL -------------------------------------------------------------------------


def _sql(path, *statements):
    con = sqlite3.connect(path, isolation_level=None)
    try:
        for s in statements:
            con.execute(s)
    finally:
        con.close()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE entries SET epsilon = 0.0",
        "DELETE FROM entries",
        "UPDATE header SET epsilon = 100.0",
        "DELETE FROM header",
    ],
)
def test_the_schema_refuses_edits_and_deletions(ledger, statement):
    _spend(Accountant.open(ledger))
    with pytest.raises(sqlite3.DatabaseError, match=r"fixed|append-only"):
        _sql(ledger, statement)
    assert Accountant.open(ledger).spent.epsilon == pytest.approx(0.1)


@pytest.mark.parametrize("value", ["-10.0", "'nan'", "NULL", "1e999", "'0.1x'"])
def test_the_schema_refuses_bad_amounts(ledger, value):
    # old: an entry with epsilon -10, "0.1" or NaN was accepted as spent
    row = f"(99, 'e', 'r', 't', 'm', '[]', {value}, 0.0, NULL, 'sequential', '', '{{}}', 'h')"
    with pytest.raises(sqlite3.DatabaseError):
        _sql(ledger, f"INSERT INTO entries VALUES {row}")


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE entries SET epsilon = 0.01 WHERE seq = 1",  # lower what was spent
        "DELETE FROM entries WHERE seq = 2",  # remove an entry
        "UPDATE entries SET seq = CASE seq WHEN 1 THEN 2 ELSE 1 END + 10",  # reorder
        "UPDATE header SET epsilon = 100.0",  # raise the budget
        "UPDATE entries SET note = 'x' WHERE seq = 2",
    ],
)
def test_edits_with_the_triggers_dropped_fail_verification(ledger, edit):
    acct = Accountant.open(ledger)
    _spend(acct, 0.3)
    _spend(acct, 0.3)
    _sql(
        ledger,
        *(f"DROP TRIGGER {t}" for t in ("header_is_fixed", "header_is_kept")),
        *(f"DROP TRIGGER {t}" for t in ("entries_are_kept", "entries_are_fixed")),
        edit,
    )
    with pytest.raises(LedgerIntegrityError):
        Accountant.open(ledger)
    with pytest.raises(LedgerIntegrityError):
        _spend(acct)
    res = CliRunner().invoke(app, ["ledger", "verify", str(ledger)])
    assert res.exit_code == 1 and "FAILED" in res.output


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


# -- old JSON ledgers --------------------------------------------------------------------------


def _json_ledger(path, entries):
    doc = {
        "format": "dpframe-ledger",
        "version": 1,
        "epsilon": 1.0,
        "delta": 0.0,
        "neighbours": "substitute",
        "entries": entries,
    }
    path.write_text(json.dumps(doc))


def _entry(**kw):
    e = {
        "id": "e1",
        "release": "r1",
        "time": "2026-01-01T00:00:00+00:00",
        "mechanism": "laplace",
        "columns": ["x"],
        "epsilon": 0.25,
        "delta": 0.0,
        "scale": 4.0,
        "composition": "sequential",
        "note": "",
    }
    e.update(kw)
    return e


BAD_JSON_ENTRIES = {
    "negative": [_entry(epsilon=-10)],
    "string": [_entry(epsilon="0.1")],
    "nan": [_entry(epsilon=math.nan)],
    "null": [_entry(epsilon=None)],
    "infinite": [_entry(delta=math.inf)],
    "bool": [_entry(epsilon=True)],
    "list instead of object": [[0.1]],
    "missing key": [{k: v for k, v in _entry().items() if k != "mechanism"}],
    "unknown key": [_entry(extra=1)],
    "number as id": [_entry(id=7)],
    "entries not a list": {"a": 1},
}


@pytest.mark.parametrize("entries", BAD_JSON_ENTRIES.values(), ids=BAD_JSON_ENTRIES.keys())
def test_every_bad_json_edit_is_a_clear_error(tmp_path, entries):
    # old: 14 of 38 edits gave a raw traceback, and -10 or "0.1" were accepted
    path = tmp_path / "ledger.json"
    text = json.dumps(
        {
            "format": "dpframe-ledger",
            "epsilon": 1.0,
            "delta": 0.0,
            "neighbours": "substitute",
            "entries": entries,
        },
        allow_nan=True,
    )
    path.write_text(text)
    with pytest.raises(LedgerIntegrityError):
        Accountant.open(path)


def test_a_json_ledger_is_read_only_until_migrated(tmp_path):
    path = tmp_path / "ledger.json"
    _json_ledger(path, [_entry(), _entry(id="e2", epsilon=0.5)])
    old = Accountant.open(path)
    assert old.spent.epsilon == 0.75
    with pytest.raises(LedgerReadOnlyError, match="dpframe ledger migrate"):
        _spend(old)
    res = CliRunner().invoke(app, ["ledger", "migrate", str(path)])
    assert res.exit_code == 0, res.output
    new = Accountant.open(tmp_path / "ledger.db")
    assert [e.id for e in new.ledger] == ["e1", "e2"] and new.spent.epsilon == 0.75
    assert new.epsilon == 1.0 and new.neighbours == "substitute"
    _spend(new, 0.25)
    with pytest.raises(BudgetExceededError):
        _spend(new, 0.01)
    with pytest.raises(InvalidParameterError, match="already exists"):
        migrate_json(path, tmp_path / "ledger.db")
    assert json.loads(path.read_text())["entries"][0]["id"] == "e1"  # left as it was


def test_a_new_ledger_is_not_named_json(tmp_path):
    with pytest.raises(InvalidParameterError, match=r"ledger\.db"):
        Accountant.open(tmp_path / "ledger.json", epsilon=1.0)
    assert not (tmp_path / "ledger.json").exists()


# -- many processes, and kills ---------------------------------------------------------------


def _spender(path: str, n: int, eps: float, out) -> None:
    try:
        acct = Accountant.open(path)
        for _ in range(n):
            try:
                entry = acct.spend(eps, mechanism="laplace")
            except BudgetExceededError:
                out.put(("refused", ""))
            else:
                out.put(("spent", entry.id))
    except Exception:  # reported, so the test fails with the reason, not a timeout
        import traceback

        out.put(("error", traceback.format_exc()))


def _collect(out, procs, n: int, seconds: float = 240) -> list[tuple[str, str]]:
    """The spenders' reports; fails with the reason if one errs, dies or stalls."""
    results: list[tuple[str, str]] = []
    deadline = time.monotonic() + seconds
    while len(results) < n:
        try:
            results.append(out.get(timeout=2))
        except queue.Empty:
            crashed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not crashed, f"a spender died: exit codes {crashed}"
            errors = [r for r in results if r[0] == "error"]
            assert not errors, errors
            assert time.monotonic() < deadline, f"spenders stalled after {len(results)}"
    errors = [r for r in results if r[0] == "error"]
    assert not errors, errors
    return results


def test_ten_processes_never_overspend_and_never_lose_an_entry(tmp_path):
    path = str(tmp_path / "ledger.db")
    Accountant.open(path, epsilon=1.5)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spender, args=(path, 20, 0.01, out)) for _ in range(10)]
    for p in procs:
        p.start()
    results = _collect(out, procs, 200)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    spent_ids = {i for kind, i in results if kind == "spent"}
    final = Accountant.open(path)
    assert len(spent_ids) == 150 == len(final.ledger)  # exactly what fits: 150 x 0.01
    assert {e.id for e in final.ledger} == spent_ids
    assert final.remaining.epsilon == 0.0


def test_opening_while_another_process_appends_sees_one_snapshot(tmp_path):
    """Opening reads the header, the entries and the issued count in one transaction: read
    apart, an append landing between them looked like deleted entries."""
    path = str(tmp_path / "ledger.db")
    Accountant.open(path, epsilon=1000.0)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    writers = [ctx.Process(target=_spender, args=(path, 150, 0.01, out)) for _ in range(3)]
    for w in writers:
        w.start()
    try:
        opened = 0
        while any(w.is_alive() for w in writers) or opened < 50:
            assert Accountant.open(path).spent.epsilon >= 0  # never a false alarm
            opened += 1
    finally:
        for w in writers:
            w.join(timeout=120)
    results = _collect(out, writers, 450)
    assert len(Accountant.open(path).ledger) == len(results) == 450


def test_processes_killed_at_random_moments_leave_a_verified_ledger(tmp_path):
    """SIGKILL four spenders at staggered moments: the ledger still verifies, and holds
    every entry any of them was told was spent (a killed transaction leaves no trace)."""
    path = str(tmp_path / "ledger.db")
    Accountant.open(path, epsilon=1000.0)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spender, args=(path, 10_000, 0.01, out)) for _ in range(4)]
    for p in procs:
        p.start()
    reported: set[str] = set()
    deadline = time.monotonic() + 60
    while len(reported) < 40 and time.monotonic() < deadline:  # all are spending
        kind, i = out.get(timeout=60)
        if kind == "spent":
            reported.add(i)
    for k, p in enumerate(procs):
        time.sleep(0.013 * (k + 1))  # kills land at different points of a transaction
        os.kill(p.pid, signal.SIGKILL)
        p.join(timeout=30)
    while True:
        try:
            kind, i = out.get(timeout=1)
        except Exception:
            break
        if kind == "spent":
            reported.add(i)
    final = Accountant.open(path)
    ids = {e.id for e in final.ledger}
    assert reported <= ids  # nothing that was reported spent is lost
    assert len(ids) - len(reported) <= 4  # at most one unreported commit per process
    _spend(final)  # still usable


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
