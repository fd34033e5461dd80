"""The ledger bound to what was published (issue 31, item 4).

Each published run's manifest records the ledger's anchor (creation id, entry count, head
hash) and its entries. A job refuses, before reserving anything, a ledger that does not
hold every run of its output folder -- deleted (a new one is not created where runs were
published), put back from a backup, truncated with its triggers dropped, or swapped --
and ``dpframe ledger verify --against`` names every missing entry of every run.
Both stores: SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.core.accountant import ledger_exists
from dpframe.errors import LedgerIntegrityError
from dpframe.jobs import load_spec, run

runner = CliRunner()

SPEC = """
version = 1

[input]
path = "survey.parquet"

[privacy]
unit = "record"
neighbours = "substitute"
budget = {{ epsilon = {budget} }}
ledger = "{ledger}"

[output]
folder = "released"

[[release]]
name = "shares"
kind = "proportions"
column = "band"
categories = ["a", "b", "c"]
epsilon = 0.4
"""


def _spec(folder: Path, budget: float, ledger: str = "ledger.db") -> Path:
    pl.DataFrame({"band": ["a", "b", "c", "a"] * 50}).write_parquet(folder / "survey.parquet")
    path = folder / "release.toml"
    path.write_text(SPEC.format(budget=budget, ledger=ledger))
    return path


def _release(spec: Path) -> None:
    run(load_spec(spec), progress=False)


def _refused(spec: Path, target: str, match: str) -> str:
    """A job refused with ``match``, having charged nothing and published nothing."""
    before = _state(target)
    current = _current(spec.parent / "released")
    with pytest.raises(LedgerIntegrityError, match=match) as err:
        _release(spec)
    assert _state(target) == before  # nothing charged, nothing reserved (or created)
    assert _current(spec.parent / "released") == current  # nothing published
    res = runner.invoke(app, ["release", str(spec), "--no-progress"])
    assert res.exit_code != 0 and "Nothing was charged" in res.output
    assert _state(target) == before
    return str(err.value)


def _state(target: str):
    if not ledger_exists(target):
        return None
    acct = dpframe.Accountant.open(target)
    return [e.hash for e in acct.ledger], acct.reservations


def _current(out: Path) -> str | None:
    link = out / "current"
    return str(link.readlink()) if link.is_symlink() else None


def _verify_against(target: str, out: Path) -> tuple[int, str]:
    res = runner.invoke(app, ["ledger", "verify", target, "--against", str(out)])
    return res.exit_code, res.output


def _manifest_entries(out: Path) -> list[str]:
    """The ledger entries every run of ``out`` records, in the order they were charged."""
    manifests = [json.loads(m.read_text()) for m in (out / ".runs").glob("*/manifest.json")]
    manifests.sort(key=lambda m: (m["published"], m["ledger"].get("count", 0)))
    return [e for m in manifests for e in m["ledger"]["entries"]]


# -- the backends ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request, tmp_path):
    """(spec-ready ledger target, how to back it up, restore it, delete it, truncate it)."""
    if request.param == "sqlite":
        return SQLiteLedger(tmp_path)
    return PostgresLedger(request.getfixturevalue("postgres_url"))


class SQLiteLedger:
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.target = str(tmp_path / "ledger.db")
        self.spec_ledger = "ledger.db"

    def backup(self) -> Path:
        copy = self.tmp / "backup.db"
        con = sqlite3.connect(self.target)
        con.execute(f"VACUUM INTO '{copy}'")  # what `sqlite3 ledger.db .backup` makes
        con.close()
        return copy

    def restore(self, copy: Path) -> None:
        for f in self.tmp.glob("ledger.db*"):
            f.unlink()
        shutil.copyfile(copy, self.target)

    def delete(self) -> None:
        for f in self.tmp.glob("ledger.db*"):  # rm ledger.db*
            f.unlink()

    def truncate(self) -> None:
        """Drop the trigger, delete the last entry, put the sequence back by one."""
        con = sqlite3.connect(self.target, isolation_level=None)
        con.execute("DROP TRIGGER entries_are_kept")
        con.execute("DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)")
        con.execute("UPDATE sqlite_sequence SET seq = seq - 1 WHERE name = 'entries'")
        con.close()


class PostgresLedger:
    name = "postgres"

    def __init__(self, url: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.target = self.spec_ledger = url
        self.base, self.db = url.rsplit("/", 1)

    def _sql(self, *statements: str, url: str | None = None) -> None:
        with self.psycopg.connect(url or self.target, autocommit=True) as con:
            for s in statements:
                con.execute(s)

    def backup(self) -> str:
        name = f"{self.db}_backup"
        self._sql(f"CREATE DATABASE {name} TEMPLATE {self.db}", url=f"{self.base}/postgres")
        return name

    def restore(self, copy: str) -> None:
        admin = f"{self.base}/postgres"
        self._sql(f"DROP DATABASE {self.db} WITH (FORCE)", url=admin)
        self._sql(f"ALTER DATABASE {copy} RENAME TO {self.db}", url=admin)

    def delete(self) -> None:
        self._sql(
            "DROP TABLE dpframe_header, dpframe_entries, dpframe_issued, dpframe_reservations"
        )

    def truncate(self) -> None:
        self._sql(
            "DROP TRIGGER entries_are_fixed ON dpframe_entries",
            "DROP TRIGGER issued_grows ON dpframe_issued",
            "DELETE FROM dpframe_entries WHERE seq = (SELECT max(seq) FROM dpframe_entries)",
            "UPDATE dpframe_issued SET issued = issued - 1",
        )


# -- the reproductions -------------------------------------------------------------------------


def test_a_deleted_ledger_is_not_created_afresh_where_runs_were_published(ledger, tmp_path):
    """Issue 31: spec budget 0.5, one release of 0.4; release, ``rm ledger.db*``, release:
    exit 0 on a fresh ledger (0.8 published on a 0.5 budget), and ``ledger verify
    --against released`` agreed. Now the second job is refused before creating a ledger,
    and ``--against`` names the missing entry."""
    spec = _spec(tmp_path, 0.5, ledger.spec_ledger)
    _release(spec)
    (published,) = _manifest_entries(tmp_path / "released")
    ledger.delete()
    message = _refused(spec, ledger.target, "does not exist")
    assert "a new ledger is not created where runs were published" in message
    assert not ledger_exists(ledger.target)
    # an empty ledger made by hand (another creation id) is refused too, naming the entry
    dpframe.Accountant.open(ledger.target, epsilon=0.5)
    message = _refused(spec, ledger.target, "does not hold what was published")
    assert "creation id" in message and published in message
    code, output = _verify_against(ledger.target, tmp_path / "released")
    assert code == 1 and published in output and "creation id" in output


def test_a_ledger_restored_from_a_backup_is_refused(ledger, tmp_path):
    """Issue 31: run 1, backup, run 2, restore, run 3 (0.4 each, budget 1.0): all exit 0,
    1.2 published on 1.0. Now run 3 is refused, naming run 2 and its entry."""
    spec = _spec(tmp_path, 1.0, ledger.spec_ledger)
    _release(spec)
    copy = ledger.backup()
    _release(spec)
    out = tmp_path / "released"
    first, second = _manifest_entries(out)
    ledger.restore(copy)
    assert dpframe.Accountant.open(ledger.target).spent.epsilon == pytest.approx(0.4)
    message = _refused(spec, ledger.target, "does not hold what was published")
    run2 = json.loads((out / "current" / "manifest.json").read_text())["run"]
    assert f"run {run2}" in message and second in message and first not in message
    assert "entry 2 is gone" in message
    code, output = _verify_against(ledger.target, out)
    assert code == 1 and second in output and first not in output


def test_a_truncated_ledger_with_its_triggers_dropped_is_refused(ledger, tmp_path):
    """Issue 31: with write access, drop the trigger, delete the last entry, put the
    count back: the next open showed less spent and charged; ``ledger verify`` exited 0.
    Now the next job in the output folder is refused (its runs' manifests hold the count
    and head the ledger lost), and ``--against`` names the entry."""
    spec = _spec(tmp_path, 1.0, ledger.spec_ledger)
    _release(spec)
    _release(spec)
    out = tmp_path / "released"
    _, last = _manifest_entries(out)
    ledger.truncate()
    assert dpframe.Accountant.open(ledger.target).spent.epsilon == pytest.approx(0.4)
    # the ledger alone cannot show it (its chain has no key: docs/ledger.md says so) ...
    alone = runner.invoke(app, ["ledger", "verify", ledger.target])
    assert alone.exit_code == 0, alone.output
    # ... what was published from it does
    message = _refused(spec, ledger.target, "does not hold what was published")
    assert last in message and "truncated" in message
    code, output = _verify_against(ledger.target, out)
    assert code == 1 and last in output


def test_a_ledger_that_holds_every_run_is_accepted_and_each_manifest_anchors_it(ledger, tmp_path):
    spec = _spec(tmp_path, 1.0, ledger.spec_ledger)
    _release(spec)
    _release(spec)
    out = tmp_path / "released"
    acct = dpframe.Accountant.open(ledger.target)
    hashes = [e.hash for e in acct.ledger]
    records = [json.loads(m.read_text())["ledger"] for m in (out / ".runs").glob("*/manifest.json")]
    assert sorted(r["count"] for r in records) == [1, 2]
    for r in records:
        assert r["creation_id"] == acct.anchor()["creation_id"]
        assert r["head"] == hashes[r["count"] - 1]
    code, output = _verify_against(ledger.target, out)
    assert code == 0 and "2 run(s)" in output, output


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_a_password_in_the_ledger_url_is_in_no_file(postgres_url, tmp_path, form):
    """Issue 31: a PostgreSQL password in the spec's ledger URL was written verbatim into
    every published Parquet file's provenance (``spec.privacy.ledger``). Now no file the
    job writes (tables, manifests, suites, validation results, report) holds it."""
    secret = "s3cret-pw-31"
    if form == "userinfo":
        url = postgres_url.replace("://postgres@", f"://postgres:{secret}@")
    else:
        url = f"{postgres_url}?password={secret}"
    spec = _spec(tmp_path, 1.0, url)
    _release(spec)
    out = tmp_path / "released"
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in written)
    leaked = [str(p) for p in written if secret.encode() in p.read_bytes()]
    assert leaked == []
    prov = dpframe.read_provenance(out / "shares.parquet")
    assert "***" in prov.spec["privacy"]["ledger"]


def test_with_the_runs_deleted_too_copies_of_the_released_files_name_the_missing_entries(
    tmp_path,
):
    """Who can delete the ledger can delete the output folder too: the next job then
    finds no run to check and starts afresh. What holds is what was copied elsewhere: each
    released file carries its ledger entries, and ``--against`` a folder of copies names
    every entry the new ledger lacks (docs/ledger.md)."""
    spec = _spec(tmp_path, 1.0)
    _release(spec)
    _release(spec)
    out = tmp_path / "released"
    entries = _manifest_entries(out)
    archive = tmp_path / "archive"
    archive.mkdir()
    for i, f in enumerate(sorted((out / ".runs").glob("*/shares.parquet"))):
        shutil.copyfile(f, archive / f"shares-{i}.parquet")
    shutil.rmtree(out)
    for f in tmp_path.glob("ledger.db*"):
        f.unlink()
    _release(spec)  # nothing left to check it against: a fresh ledger
    code, output = _verify_against(str(tmp_path / "ledger.db"), archive)
    assert code == 1
    assert all(e in output for e in entries) and output.count("which the ledger lacks") == 2
