"""One suite for every ledger store: SQLite and PostgreSQL (issue 14).

Each backend runs the same properties -- the schema refuses edits and bad amounts, a
verified chain catches what gets past it, an open accountant refuses a deleted, swapped
or older ledger, many processes never overspend or lose an entry, a process killed at any
moment leaves a verified ledger, and reservations hold budget against overlapping jobs.
What only a file has (links, hard links) is in test_sqlite.py.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from typing import ClassVar

import pytest
from typer.testing import CliRunner

import dpframe
from dpframe.cli import app
from dpframe.core.accountant import Accountant
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerIntegrityError,
)

# -- the two backends ----------------------------------------------------------------------------


class SQLiteBackend:
    name = "sqlite"
    tables: ClassVar = {"header": "header", "entries": "entries", "reservations": "reservations"}
    triggers = ("header_is_fixed", "header_is_kept", "entries_are_kept", "entries_are_fixed")
    error = sqlite3.DatabaseError

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.target = str(tmp_path / "ledger.db")

    def sql(self, *statements):
        con = sqlite3.connect(self.target, isolation_level=None)
        try:
            for s in statements:
                con.execute(s.format(**self.tables))
        finally:
            con.close()

    def drop_triggers(self):
        return [f"DROP TRIGGER {t}" for t in self.triggers]

    def delete(self):
        for f in self.tmp.glob("ledger.db*"):
            f.unlink()

    def swap(self):
        other = self.tmp / "other.db"
        Accountant.open(other, epsilon=1.0)
        os.replace(other, self.target)

    def snapshot(self):
        backup = self.tmp / "backup.db"
        con = sqlite3.connect(self.target)
        con.execute(f"VACUUM INTO '{backup}'")  # a consistent copy, as a backup tool makes
        con.close()
        return backup

    def restore(self, backup):
        shutil.copyfile(backup, self.target)  # same inode, older content
        for f in self.tmp.glob("ledger.db-*"):
            f.unlink()


class PostgresBackend:
    name = "postgres"
    tables: ClassVar = {
        "header": "dpframe_header",
        "entries": "dpframe_entries",
        "reservations": "dpframe_reservations",
    }
    triggers = (
        ("header_is_fixed", "dpframe_header"),
        ("header_is_kept", "dpframe_header"),
        ("entries_are_fixed", "dpframe_entries"),
        ("entries_are_kept", "dpframe_entries"),
    )

    def __init__(self, url):
        import psycopg

        self.psycopg = psycopg
        self.error = psycopg.Error
        self.target = url
        self.base, self.db = url.rsplit("/", 1)

    def _admin(self, *statements):
        with self.psycopg.connect(f"{self.base}/postgres", autocommit=True) as con:
            for s in statements:
                con.execute(s)

    def sql(self, *statements):
        with self.psycopg.connect(self.target, autocommit=True) as con:
            for s in statements:
                con.execute(s.format(**self.tables))

    def drop_triggers(self):
        return [f"DROP TRIGGER {t} ON {table}" for t, table in self.triggers]

    def delete(self):
        self.sql(*(f"DROP TABLE {t}" for t in (*self.tables.values(), "dpframe_issued")))

    def swap(self):
        self.delete()
        self.sql("DROP FUNCTION dpframe_refuse", "DROP FUNCTION dpframe_issued_grows")
        Accountant.open(self.target, epsilon=1.0)

    def snapshot(self):
        name = f"{self.db}_backup"
        self._admin(f"CREATE DATABASE {name} TEMPLATE {self.db}")
        return name

    def restore(self, backup):
        self._admin(f"DROP DATABASE {self.db} WITH (FORCE)")
        self._admin(f"ALTER DATABASE {backup} RENAME TO {self.db}")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        b = SQLiteBackend(tmp_path)
    else:
        b = PostgresBackend(request.getfixturevalue("postgres_url"))
    Accountant.open(b.target, epsilon=1.0)
    return b


def _spend(acct, eps=0.1):
    return acct.spend(eps, mechanism="laplace", columns=["x"])


# -- the basics ------------------------------------------------------------------------------------


def test_a_ledger_keeps_its_budget_entries_and_relation(backend):
    acct = Accountant.open(backend.target)
    _spend(acct, 0.25)
    _spend(acct, 0.5)
    again = Accountant.open(backend.target)
    assert [e.epsilon for e in again.ledger] == [0.25, 0.5]
    assert again.spent.epsilon == 0.75 and again.remaining.epsilon == 0.25
    with pytest.raises(BudgetExceededError):
        _spend(again, 0.3)
    assert len(Accountant.open(backend.target).ledger) == 2
    with pytest.raises(dpframe.LedgerMismatchError, match="epsilon"):
        Accountant.open(backend.target, epsilon=2.0)


# -- deletion, swaps, old copies -------------------------------------------------------------------


def test_a_ledger_deleted_while_open_refuses_to_spend(backend):
    # old: deleting the file silently started a new budget
    acct = Accountant.open(backend.target)
    _spend(acct)
    backend.delete()
    with pytest.raises(LedgerIntegrityError, match="deleted"):
        _spend(acct)
    with pytest.raises(LedgerIntegrityError):
        acct.spent  # noqa: B018
    with pytest.raises((LedgerIntegrityError, InvalidParameterError), match=r"epsilon|deleted"):
        Accountant.open(backend.target)  # nothing recreated it: no budget without epsilon


def test_a_swapped_ledger_is_refused(backend):
    acct = Accountant.open(backend.target)
    _spend(acct)
    backend.swap()
    with pytest.raises(LedgerIntegrityError, match=r"replaced|swapped"):
        _spend(acct)


def test_an_older_copy_put_back_is_refused_by_an_open_accountant(backend):
    acct = Accountant.open(backend.target)
    _spend(acct)
    backup = backend.snapshot()
    _spend(acct, 0.5)
    backend.restore(backup)
    with pytest.raises(LedgerIntegrityError, match=r"truncated|older"):
        _spend(acct)


# -- edits through SQL -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE {entries} SET epsilon = 0.0",
        "DELETE FROM {entries}",
        "UPDATE {header} SET epsilon = 100.0",
        "DELETE FROM {header}",
    ],
)
def test_the_schema_refuses_edits_and_deletions(backend, statement):
    _spend(Accountant.open(backend.target))
    with pytest.raises(backend.error, match=r"fixed|append-only"):
        backend.sql(statement)
    assert Accountant.open(backend.target).spent.epsilon == pytest.approx(0.1)


@pytest.mark.parametrize("value", ["-10.0", "'nan'", "NULL", "1e999", "'0.1x'", "'Infinity'"])
def test_the_schema_refuses_bad_amounts(backend, value):
    # old: an entry with epsilon -10, "0.1" or NaN was accepted as spent
    row = f"(99, 'e', 'r', 't', 'm', '[]', {value}, 0.0, NULL, 'sequential', '', '{{{{}}}}', 'h')"
    with pytest.raises(backend.error):
        backend.sql(f"INSERT INTO {{entries}} VALUES {row}")


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE {entries} SET epsilon = 0.01 WHERE seq = 1",  # lower what was spent
        "DELETE FROM {entries} WHERE seq = 2",  # remove an entry
        "UPDATE {entries} SET seq = CASE seq WHEN 1 THEN 2 ELSE 1 END + 10",  # reorder
        "UPDATE {header} SET epsilon = 100.0",  # raise the budget
        "UPDATE {entries} SET note = 'x' WHERE seq = 2",
    ],
)
def test_edits_with_the_triggers_dropped_fail_verification(backend, edit):
    acct = Accountant.open(backend.target)
    _spend(acct, 0.3)
    _spend(acct, 0.3)
    backend.sql(*backend.drop_triggers(), edit)
    with pytest.raises(LedgerIntegrityError):
        Accountant.open(backend.target)
    with pytest.raises(LedgerIntegrityError):
        _spend(acct)
    res = CliRunner().invoke(app, ["ledger", "verify", backend.target])
    assert res.exit_code == 1 and "FAILED" in res.output


def test_a_reservation_is_fixed(backend):
    acct = Accountant.open(backend.target)
    with acct.reserve(dpframe.Budget(0.5)):
        with pytest.raises(backend.error, match="fixed"):
            backend.sql("UPDATE {reservations} SET epsilon = 0.0")
        assert acct.reserved.epsilon == 0.5


# -- reservations ----------------------------------------------------------------------------------


def test_a_reservation_holds_its_budget_and_gives_back_what_was_not_drawn(backend):
    job, other = Accountant.open(backend.target), Accountant.open(backend.target)
    with job.reserve([dpframe.Charge(0.3), dpframe.Charge(0.4)], note="job 1") as r:
        assert other.reserved.epsilon == pytest.approx(0.7)
        with pytest.raises(BudgetExceededError, match="reservations hold"):
            _spend(other, 0.4)  # 0.7 held: only 0.3 is free
        _spend(other, 0.3)
        drawn = _spend(job, 0.3)
        assert drawn.details["reservation"] == r.id
        with pytest.raises(BudgetExceededError, match="reservation has left"):
            _spend(job, 0.5)  # more than the 0.4 still held; nothing charged
    # the 0.4 not drawn is back; what was drawn stays spent
    final = Accountant.open(backend.target)
    assert final.spent.epsilon == pytest.approx(0.6)
    assert final.reserved.epsilon == 0 and final.reservations == ()
    assert final.remaining.epsilon == pytest.approx(0.4)


def test_a_failing_job_gives_back_what_it_did_not_draw(backend):
    acct = Accountant.open(backend.target)
    with pytest.raises(RuntimeError), acct.reserve(dpframe.Budget(0.9)):
        _spend(acct, 0.2)
        raise RuntimeError("the job failed after its first release")
    assert Accountant.open(backend.target).spent.epsilon == pytest.approx(0.2)
    assert Accountant.open(backend.target).remaining.epsilon == pytest.approx(0.8)


def test_a_reservation_that_does_not_fit_holds_nothing(backend):
    acct = Accountant.open(backend.target)
    _spend(acct, 0.5)
    with pytest.raises(BudgetExceededError), acct.reserve(dpframe.Budget(0.6)):
        pytest.fail("the block must not run")
    assert Accountant.open(backend.target).reservations == ()
    with (
        pytest.raises(InvalidParameterError, match="already holds"),
        acct.reserve(dpframe.Budget(0.1)),
        acct.reserve(dpframe.Budget(0.1)),
    ):
        pass


def test_a_cancelled_reservation_draws_nothing_more(backend):
    acct = Accountant.open(backend.target)
    operator = Accountant.open(backend.target)
    with acct.reserve(dpframe.Budget(0.5)) as r:
        with pytest.raises(InvalidParameterError, match="may still be running"):
            operator.cancel(r.id)
        operator.cancel(r.id, force=True)
        with pytest.raises(LedgerIntegrityError, match="cancelled"):
            _spend(acct, 0.1)
    assert Accountant.open(backend.target).spent.epsilon == 0


def _holder(target: str, eps: float, out) -> None:
    """Reserve, draw part, report, then wait to be killed."""
    acct = Accountant.open(target)
    try:
        with acct.reserve(dpframe.Budget(eps)):
            _spend(acct, eps / 4)
            out.put("holding")
            time.sleep(600)
    except BudgetExceededError:
        out.put("refused")


def test_a_killed_jobs_reservation_is_given_back_and_its_draws_stay_spent(backend):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    holder = ctx.Process(target=_holder, args=(backend.target, 0.8, out))
    holder.start()
    assert out.get(timeout=120) == "holding"
    acct = Accountant.open(backend.target)
    with pytest.raises(BudgetExceededError):
        _spend(acct, 0.5)  # 0.2 spent, 0.6 held by a running job
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(timeout=30)
    _spend(acct, 0.5)  # the dead job's 0.6 came back; its 0.2 did not
    final = Accountant.open(backend.target)
    assert final.spent.epsilon == pytest.approx(0.7) and final.reservations == ()


def test_overlapping_reservations_exactly_those_that_fit_hold(backend):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_holder, args=(backend.target, 0.3, out)) for _ in range(5)]
    for p in procs:
        p.start()
    try:
        answers = sorted(out.get(timeout=120) for _ in procs)
        assert answers == ["holding"] * 3 + ["refused"] * 2  # 3 x 0.3 fit in 1.0
        acct = Accountant.open(backend.target)
        assert acct.spent.epsilon + acct.reserved.epsilon == pytest.approx(0.9)
    finally:
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
            p.join(timeout=30)


# -- many processes, and kills ---------------------------------------------------------------


def _spender(target: str, n: int, eps: float, out) -> None:
    try:
        acct = Accountant.open(target)
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


def _fresh(backend, epsilon):
    """A new ledger of ``epsilon`` in place of the fixture's."""
    if backend.name == "sqlite":
        backend.delete()
    else:
        backend.swap()
        backend.delete()
        backend.sql("DROP FUNCTION dpframe_refuse", "DROP FUNCTION dpframe_issued_grows")
    Accountant.open(backend.target, epsilon=epsilon)


@pytest.mark.slow  # ten processes
def test_ten_processes_never_overspend_and_never_lose_an_entry(backend):
    _fresh(backend, 1.5)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spender, args=(backend.target, 20, 0.01, out)) for _ in range(10)]
    for p in procs:
        p.start()
    results = _collect(out, procs, 200)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    spent_ids = {i for kind, i in results if kind == "spent"}
    final = Accountant.open(backend.target)
    assert len(spent_ids) == 150 == len(final.ledger)  # exactly what fits: 150 x 0.01
    assert {e.id for e in final.ledger} == spent_ids
    assert final.remaining.epsilon == 0.0


@pytest.mark.slow  # another process appending for seconds
def test_opening_while_another_process_appends_sees_one_snapshot(backend):
    """Opening reads the header, the entries and the issued count in one transaction: read
    apart, an append landing between them looked like deleted entries."""
    _fresh(backend, 1000.0)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    writers = [
        ctx.Process(target=_spender, args=(backend.target, 100, 0.01, out)) for _ in range(3)
    ]
    for w in writers:
        w.start()
    try:
        opened = 0
        while any(w.is_alive() for w in writers) or opened < 50:
            assert Accountant.open(backend.target).spent.epsilon >= 0  # never a false alarm
            opened += 1
    finally:
        for w in writers:
            w.join(timeout=120)
    results = _collect(out, writers, 300)
    assert len(Accountant.open(backend.target).ledger) == len(results) == 300


def _logged_spender(target: str, n: int, eps: float, log: str) -> None:
    """Spends, writing each committed entry's id to ``log`` with one unbuffered write
    right after the commit: a kill loses at most the id of the commit it interrupts (a
    multiprocessing queue's feeder thread could lose many under load)."""
    acct = Accountant.open(target)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    for _ in range(n):
        entry = acct.spend(eps, mechanism="laplace")
        os.write(fd, f"{entry.id}\n".encode())


def test_processes_killed_at_random_moments_leave_a_verified_ledger(backend, tmp_path):
    """SIGKILL four spenders at staggered moments: the ledger still verifies, and holds
    every entry any of them was told was spent (a killed transaction leaves no trace)."""
    _fresh(backend, 1000.0)
    ctx = mp.get_context("spawn")
    logs = [tmp_path / f"spent{k}.log" for k in range(4)]
    procs = [
        ctx.Process(target=_logged_spender, args=(backend.target, 10_000, 0.01, str(log)))
        for log in logs
    ]
    for p in procs:
        p.start()

    def reported() -> set[str]:
        return {i for log in logs if log.exists() for i in log.read_text().split()}

    deadline = time.monotonic() + 120
    while len(reported()) < 40 and time.monotonic() < deadline:  # all are spending
        assert all(p.exitcode is None for p in procs), "a spender died before the kills"
        time.sleep(0.05)
    for k, p in enumerate(procs):
        time.sleep(0.013 * (k + 1))  # kills land at different points of a transaction
        os.kill(p.pid, signal.SIGKILL)
        p.join(timeout=30)
    told = reported()
    assert len(told) >= 40
    final = Accountant.open(backend.target)
    ids = {e.id for e in final.ledger}
    assert told <= ids  # nothing that was reported spent is lost
    assert len(ids) - len(told) <= 4  # at most one unreported commit per process
    _spend(final)  # still usable


# -- who may give back a reservation (found in review) -------------------------------------------

PYTHON_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _can_unshare_pid() -> bool:
    if shutil.which("unshare") is None:
        return False
    res = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True
    )
    return res.returncode == 0


_HOLDER = textwrap.dedent(
    """
    import sys, dpframe
    from dpframe.core.accountant import Accountant
    acct = Accountant.open(sys.argv[1])
    with acct.reserve(dpframe.Budget(0.6)) as r:
        print("holding", flush=True)
        sys.stdin.readline()  # the job computes for a while, then draws what it reserved
        try:
            acct.spend(0.6, mechanism="laplace")
            print("drawn", flush=True)
        except Exception as exc:
            print("refused:", type(exc).__name__, exc, flush=True)
    """
)


@pytest.mark.skipif(not _can_unshare_pid(), reason="needs unshare --pid (root)")
def test_a_live_job_in_another_pid_namespace_has_its_reservation_given_back(backend, tmp_path):
    """Attack: ``is_gone`` trusts ``socket.gethostname()`` as the identity of the machine
    whose process table may judge an owner. A job in another PID namespace with the same
    host name (a container with ``--network host`` / ``hostNetwork``, or a second machine
    that is also called ``localhost``/``ubuntu`` sharing a PostgreSQL ledger) is "on this
    host", its pid does not exist here (or is another process), so the very next spend on
    this machine gives its LIVE reservation back and spends into it; the job, which
    reserved its whole plan, is then refused in the middle of its run.

    Correct: a running job's reservation is never given back by the dead-owner rule; the
    other spend (0.5 > the 0.4 left) is refused and the job draws its 0.6.
    """
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    job = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(script), backend.target],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=PYTHON_ENV,
    )
    try:
        assert job.stdout.readline().strip() == "holding"
        other = Accountant.open(backend.target)
        assert other.reserved.epsilon == pytest.approx(0.6)
        with pytest.raises(BudgetExceededError):
            other.spend(0.5, mechanism="laplace")  # before: spent, the job's hold taken
        job.stdin.write("go\n")
        job.stdin.flush()
        assert job.stdout.readline().strip() == "drawn"
    finally:
        job.kill()
        job.wait(timeout=30)


def test_a_malformed_reservation_row_can_be_cancelled_by_the_operator_tool(backend):
    """Attack (availability): anyone who may INSERT into the reservations table (job
    roles must) inserts a row whose ``owner`` is not JSON. Every read then fails with a
    raw ``json.JSONDecodeError`` (not a dpframe error): ``Accountant.open``,
    ``dpframe ledger show`` and ``dpframe ledger cancel`` -- the tool meant to clear a bad
    reservation -- all crash, and no job can run until someone deletes the row by hand.

    Correct: a reservation row that does not parse is reported as a dpframe error naming
    the row, and ``cancel`` can give it back.
    """
    from typer.testing import CliRunner

    from dpframe.cli import app

    backend.sql(
        "INSERT INTO {reservations} (id, created, owner, note, epsilon, delta) "
        "VALUES ('bad', '2026-01-01', 'not json', '', 0.5, 0.0)"
    )
    res = CliRunner().invoke(app, ["ledger", "cancel", backend.target, "bad", "--force"])
    assert res.exit_code == 0, res.output  # before: JSONDecodeError traceback
    assert Accountant.open(backend.target).reservations == ()


# -- zCDP budgets and person units (issue 16) --------------------------------------------------


def _gaussian(rho, unit=None):
    from dpframe.core.records import Charge

    return Charge(0.0, rho=rho, mechanism="gaussian", columns=("x",), unit=unit)


def test_a_zcdp_ledger_keeps_its_rho_its_unit_and_each_entrys_rho(backend):
    if backend.name == "sqlite":
        target = str(backend.tmp / "zcdp.db")
    else:
        backend.sql("CREATE SCHEMA IF NOT EXISTS zcdp")
        target = backend.target + ("&" if "?" in backend.target else "?") + "schema=zcdp"
    acct = Accountant.open(target, rho=0.5, delta=1e-6, unit="pid")
    acct.spend_all([_gaussian(0.125, unit="pid")])
    with acct.reserve([_gaussian(0.2, unit="pid")]):
        assert acct.reserved.rho == pytest.approx(0.2)
        acct.spend_all([_gaussian(0.05, unit="pid")])
    again = Accountant.open(target)
    assert again.rho == 0.5 and again.unit.person == "pid" and again.delta == 1e-6
    assert [e.details["rho"] for e in again.ledger] == [0.125, 0.05]
    assert again.spent.rho == pytest.approx(0.175) and again.reserved.rho == 0
    with pytest.raises(BudgetExceededError, match="rho"):
        again.spend_all([_gaussian(0.33, unit="pid")])
    with pytest.raises(dpframe.LedgerMismatchError, match="unit"):
        Accountant.open(target, unit="other_id")
    with pytest.raises(dpframe.LedgerMismatchError, match="zCDP"):
        Accountant.open(target, epsilon=1.0)
    if backend.name == "sqlite":  # the header's rho is covered by its hash like the epsilon
        con = sqlite3.connect(target, isolation_level=None)
        con.execute("DROP TRIGGER header_is_fixed")
        con.execute("UPDATE header SET rho = 50.0")
        con.close()
        with pytest.raises(LedgerIntegrityError, match="edited"):
            Accountant.open(target)


def test_a_truncation_with_the_count_lowered_is_caught_only_by_an_anchor_kept_outside(backend):
    """Issue 31: with the triggers dropped, the last entry deleted and the count lowered
    by one, the ledger verifies on its own and shows less spent (its chain has no key).
    An anchor taken before (what a published run's manifest records) names the loss; one
    taken of another ledger names the other creation id."""
    acct = Accountant.open(backend.target)
    for _ in range(3):
        _spend(acct, 0.25)
    kept = acct.anchor()
    assert kept["count"] == 3 and kept["head"] == acct.ledger[-1].hash
    if backend.name == "sqlite":
        backend.sql(
            "DROP TRIGGER entries_are_kept",
            "DELETE FROM entries WHERE seq = 3",
            "UPDATE sqlite_sequence SET seq = 2 WHERE name = 'entries'",
        )
    else:
        backend.sql(
            "DROP TRIGGER entries_are_fixed ON dpframe_entries",
            "DROP TRIGGER issued_grows ON dpframe_issued",
            "DELETE FROM dpframe_entries WHERE seq = 3",
            "UPDATE dpframe_issued SET issued = 2",
        )
    later = Accountant.open(backend.target)  # verifies on its own ...
    assert later.spent.epsilon == 0.5
    res = CliRunner().invoke(app, ["ledger", "verify", backend.target])
    assert res.exit_code == 0
    (problem,) = later.anchor_problems([kept])  # ... but not against what was kept
    assert "entry 3 is gone" in problem
    assert later.anchor_problems([later.anchor()]) == [None]
    other = dpframe.Accountant(epsilon=1.0).anchor()
    assert "creation id" in later.anchor_problems([other])[0]
