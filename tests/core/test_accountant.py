import json
import multiprocessing as mp
import os
import subprocess
import sys
import threading

import pytest

import dpframe
from dpframe import Accountant, BudgetExceededError, Charge
from dpframe.errors import InvalidParameterError, LedgerMismatchError


def test_over_budget_second_release_refused_and_nothing_charged():
    acct = Accountant(epsilon=1.0)
    acct.spend(0.6, mechanism="laplace", columns=["x"])
    with pytest.raises(BudgetExceededError) as info:
        acct.spend(0.6, mechanism="laplace", columns=["x"])
    msg = str(info.value)
    assert "budget epsilon=1" in msg and "spent epsilon=0.6" in msg
    assert "requests epsilon=0.6" in msg
    assert acct.remaining.epsilon == pytest.approx(0.4, abs=0)  # exactly 0.4
    assert len(acct.ledger) == 1


def test_decimal_budget_arithmetic_is_exact():
    acct = Accountant(epsilon=1.0)
    for eps in (0.1, 0.2, 0.7):  # floats sum to 1.0000000000000002 naively
        acct.spend(eps, mechanism="m")
    assert acct.remaining.epsilon == 0.0
    with pytest.raises(BudgetExceededError):
        acct.spend(1e-12, mechanism="m")


def test_delta_composes_and_is_bounded():
    acct = Accountant(epsilon=1.0, delta=1e-6)
    acct.spend(0.1, 5e-7, mechanism="gauss")
    with pytest.raises(BudgetExceededError):
        acct.spend(0.1, 6e-7, mechanism="gauss")
    assert acct.spent.delta == 5e-7


def test_spend_all_is_atomic():
    acct = Accountant(epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        acct.spend_all([Charge(0.5, mechanism="a"), Charge(0.6, mechanism="b")])
    assert acct.ledger == ()
    entries = acct.spend_all([Charge(0.5, mechanism="a"), Charge(0.5, mechanism="b")])
    assert len({e.release for e in entries}) == 1
    assert acct.remaining.epsilon == 0.0


def test_ledger_frame_and_json():
    acct = Accountant(epsilon=2.0, neighbours="add_remove")
    acct.spend(0.5, mechanism="laplace", columns=["a", "b"], scale=2.0, note="hello")
    frame = dpframe.ledger_frame(acct)
    assert frame.height == 1
    row = frame.row(0, named=True)
    assert row["columns"] == ["a", "b"] and row["scale"] == 2.0 and row["note"] == "hello"
    assert row["time"].tzinfo is not None
    doc = json.loads(acct.to_json())
    assert doc["neighbours"] == "add_remove" and doc["spent"]["epsilon"] == 0.5
    assert dpframe.ledger_frame(Accountant(epsilon=1.0)).height == 0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": -1}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"epsilon": 1, "delta": -0.1}, "delta"),
        ({"epsilon": 1, "delta": 1.0}, "delta"),
        ({"epsilon": 1, "neighbours": "swap"}, "neighbours"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        Accountant(**kwargs)


@pytest.mark.parametrize("eps", [0, -0.5, float("nan"), float("inf"), None])
def test_spend_rejects_bad_epsilon(eps):
    acct = Accountant(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        acct.spend(eps, mechanism="m")
    assert acct.ledger == ()


def test_context_default_and_nesting():
    a, b = Accountant(epsilon=1.0), Accountant(epsilon=2.0)
    assert dpframe.current_accountant() is None
    with a:
        assert dpframe.current_accountant() is a
        with b:
            assert dpframe.current_accountant() is b
        assert dpframe.current_accountant() is a
    assert dpframe.current_accountant() is None


def test_thread_safe_spending_never_overspends():
    acct = Accountant(epsilon=1.0)
    errors = []

    def worker():
        for _ in range(50):
            try:
                acct.spend(0.01, mechanism="m")
            except BudgetExceededError:
                errors.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(acct.ledger) == 100  # exactly the budget, 100 x 0.01
    assert len(errors) == 100
    assert acct.remaining.epsilon == 0.0


def test_persistent_ledger_roundtrip(tmp_path):
    path = tmp_path / "ledger.db"
    acct = Accountant.open(path, epsilon=1.0, neighbours="add_remove")
    acct.spend(0.25, mechanism="laplace", columns=["x"])
    again = Accountant.open(path)
    assert again.neighbours == "add_remove" and again.epsilon == 1.0
    assert again.spent.epsilon == 0.25
    again.spend(0.5, mechanism="laplace")
    assert acct.spent.epsilon == 0.75  # the first handle sees the file
    with pytest.raises(LedgerMismatchError, match="epsilon"):
        Accountant.open(path, epsilon=2.0)
    with pytest.raises(LedgerMismatchError, match="neighbours"):
        Accountant.open(path, neighbours="substitute")
    assert not list(tmp_path.glob("*.tmp"))


def test_persistent_ledger_needs_epsilon_when_new(tmp_path):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        Accountant.open(tmp_path / "new.db")
    with pytest.raises(InvalidParameterError, match="folder"):
        Accountant.open(tmp_path / "missing" / "l.db", epsilon=1.0)


def test_corrupt_ledger_is_refused(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text("{not json")
    with pytest.raises(LedgerMismatchError, match="not a dpframe ledger, or is corrupt"):
        Accountant.open(path, epsilon=1.0)
    other = tmp_path / "ledger.db"
    other.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(LedgerMismatchError):
        Accountant.open(other, epsilon=1.0)


def _spend_many(path: str, n: int, eps: float, out: mp.Queue) -> None:
    acct = Accountant.open(path)
    ok = 0
    for _ in range(n):
        try:
            acct.spend(eps, mechanism="laplace", note="multi-process")
            ok += 1
        except BudgetExceededError:
            pass
    out.put(ok)


def _race(path: str, attempts: int, eps: float) -> int:
    """Two processes each try ``attempts`` charges of ``eps``; total successes."""
    Accountant.open(path, epsilon=1.0)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spend_many, args=(path, attempts, eps, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    return out.get() + out.get()


def test_two_processes_never_overspend_a_shared_ledger(tmp_path):
    path = str(tmp_path / "ledger.db")
    successes = _race(path, 10, 0.3)
    final = Accountant.open(path)
    assert successes == 3 == len(final.ledger)  # floor(1 / 0.3) releases fit, no more
    assert final.spent.epsilon <= 1.0


def test_concurrent_processes_lose_no_update(tmp_path):
    """Many small charges from two processes: every success is in the ledger, none extra.

    A lost update (two writers reading the same ledger) would leave fewer entries than
    successes; an overspend more than floor(1 / 0.03) = 33 successes.
    """
    path = str(tmp_path / "ledger.db")
    successes = _race(path, 30, 0.03)
    final = Accountant.open(path)
    assert successes == 33 == len(final.ledger)
    assert final.remaining.epsilon == pytest.approx(0.01, abs=0)


# -- reservations (found in review) ------------------------------------------------------------

PYTHON_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _orphan_reservation(target: str, epsilon: float) -> None:
    """A job that reserved and was killed (its process ends without giving back)."""
    code = (
        "import os, sys, dpframe\n"
        "acct = dpframe.Accountant.open(sys.argv[1])\n"
        f"held = acct.reserve(dpframe.Budget({epsilon}))\n"
        "held.__enter__()\n"
        "os._exit(0)  # as SIGKILL: no finally runs\n"
    )
    subprocess.run([sys.executable, "-c", code, target], check=True, env=PYTHON_ENV)


def test_remaining_and_check_disagree_about_a_dead_jobs_hold(tmp_path):
    """Same root cause, seen through the read API: ``remaining``/``reserved`` count a
    dead owner's hold that ``check()`` and ``spend`` ignore, so ``remaining`` says 0.2 is
    left while a 0.8 spend is accepted.

    Correct: the read API and the write path agree on what is held.
    """
    ledger = tmp_path / "ledger.db"
    acct = Accountant.open(ledger, epsilon=1.0)
    _orphan_reservation(str(ledger), 0.8)
    acct.check([Charge(0.8)])  # passes: the dead hold is ignored by the write path
    assert acct.remaining.epsilon == pytest.approx(1.0)  # before: 0.2


def test_another_thread_drains_a_jobs_reservation():
    """Attack: ``reserve`` stores the reservation on the Accountant object
    (``self._reservation``), so while thread A is inside ``with acct.reserve(...)``,
    EVERY spend of that accountant from any thread (a second job, a notebook cell, a
    polars callback of another query) is recorded as drawn from A's reservation. A, which
    reserved its whole plan, is then refused mid-run.

    Correct: a spend outside the block is an ordinary spend against the free budget
    (0.3 fits in the 0.4 not held), and A can draw the 0.6 it reserved.
    """
    acct = Accountant(epsilon=1.0)
    holding, go = threading.Event(), threading.Event()
    outcome: list[object] = []

    def job_a() -> None:
        with acct.reserve(dpframe.Budget(0.6)):
            holding.set()
            go.wait(30)
            try:
                outcome.append(acct.spend(0.6, mechanism="laplace"))
            except Exception as exc:
                outcome.append(exc)

    t = threading.Thread(target=job_a)
    t.start()
    assert holding.wait(30)
    other = acct.spend(0.3, mechanism="laplace")  # another thread, outside A's block
    go.set()
    t.join(30)
    assert "reservation" not in other.details  # before: drawn from A's reservation
    assert not isinstance(outcome[0], Exception), outcome[0]
    assert acct.spent.epsilon == pytest.approx(0.9)


def test_an_interrupt_after_the_reserve_commit_leaves_the_hold_forever(tmp_path):
    """Attack: ``reserve`` commits the hold, and only afterwards enters the
    ``try/finally`` that gives it back. A ``KeyboardInterrupt`` (or a PostgreSQL
    connection lost after the server committed) landing after the commit and before the
    ``try`` leaves a reservation owned by a process that is still alive (a notebook
    kernel, a service): the dead-owner rule never collects it, ``cancel`` refuses it
    ("may still be running"), and the budget is locked for the life of the process.

    Correct: once ``reserve`` raises, nothing is held (give-back is armed before the hold
    commits; giving back an id that was never recorded is a no-op).
    """
    acct = Accountant.open(tmp_path / "ledger.db", epsilon=1.0)
    real = acct._store.transact

    def interrupted(decide):
        out = real(decide)
        raise KeyboardInterrupt  # Ctrl-C delivered as the COMMIT returns
        return out

    acct._store.transact = interrupted
    with pytest.raises(KeyboardInterrupt), acct.reserve(dpframe.Budget(0.8)):
        pytest.fail("the block must not run")
    acct._store.transact = real
    assert Accountant.open(tmp_path / "ledger.db").reservations == ()  # before: 0.8 held


def test_a_signal_handlers_error_after_the_give_back_is_raised_not_swallowed(tmp_path):
    """A program's own SIGTERM handler raising an Exception (a graceful shutdown), the
    SIGTERM arriving as a reservation is given back: the ledger write finishes, then the
    handler's exception comes out of the block. Old: reserve() took it for a failed
    give-back -- warned "could not be given back" (it was) and swallowed the exception,
    so the program went on as if no SIGTERM had come."""
    import signal
    import warnings

    class ShutdownError(Exception):
        pass

    def on_term(signum, frame):
        raise ShutdownError

    acct = Accountant.open(tmp_path / "ledger.db", epsilon=1.0)
    real = acct._store.transact

    def signalled(decide):
        def deciding(state):
            changes = decide(state)
            if changes.give_back and not changes.reserve:
                signal.raise_signal(signal.SIGTERM)  # during the give-back
            return changes

        return real(deciding)

    previous = signal.signal(signal.SIGTERM, on_term)
    acct._store.transact = signalled
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "could not be given back"
            with pytest.raises(ShutdownError), acct.reserve(dpframe.Budget(0.5)):
                acct.spend(0.1, mechanism="laplace")
    finally:
        acct._store.transact = real
        signal.signal(signal.SIGTERM, previous)
    assert acct.reservations == () and acct.spent.epsilon == pytest.approx(0.1)


def test_a_plan_that_fits_exactly_is_reserved_and_remaining_never_goes_negative():
    """Found in review: ``reserve`` checks the exact sum of the plan but stores the least
    float not below it; when the sum has more digits than a float's repr (0.9 +
    0.02232211102132386) the hold is one unit in the last place larger, and
    ``remaining`` showed -5.6e-17. A plan that fits exactly is reserved, both of its
    charges are drawn, and ``remaining`` is 0, never negative."""
    acct = Accountant(epsilon=1.0)
    acct.spend(0.07767788897867614, mechanism="laplace")
    with acct.reserve([Charge(0.9), Charge(0.02232211102132386)]):
        acct.spend(0.9, mechanism="laplace")
        acct.spend(0.02232211102132386, mechanism="laplace")  # the last draw fits
        assert acct.remaining.epsilon == 0  # before: -5.6e-17
    assert acct.remaining.epsilon == 0


# -- zCDP budgets and privacy units (issue 16) ------------------------------------------------


def test_a_zcdp_budget_charges_pure_releases_epsilon_squared_over_two():
    from fractions import Fraction

    from dpframe.core.budget import exact

    acct = Accountant(rho=0.5, delta=1e-6)
    for eps in (0.1, 0.3, 0.7):
        acct.spend(eps, mechanism="laplace")
    assert [e.details["rho"] for e in acct.ledger] == [0.005, 0.045, 0.245]
    assert sum(exact(e.details["rho"]) for e in acct.ledger) == Fraction(295, 1000)
    with pytest.raises(BudgetExceededError, match="rho"):
        acct.spend(0.65, mechanism="laplace")  # 0.21125 > 0.205 left
    acct.spend(0.64, mechanism="laplace")  # 0.2048 fits
    assert acct.spent.rho == pytest.approx(0.4998) and acct.spent.delta == 1e-6


def test_a_pure_budget_refuses_a_zcdp_release_and_names_the_budget_to_open():
    from dpframe.core.records import Charge

    acct = Accountant(epsilon=10.0, delta=0.5)
    with pytest.raises(InvalidParameterError, match=r"zCDP budget.*rho="):
        acct.spend_all([Charge(0.0, rho=0.01, mechanism="gaussian")])
    assert acct.ledger == () and acct.spent.epsilon == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rho": 0.5}, "delta"),  # no delta: no (epsilon, delta) statement
        ({"rho": 0.5, "epsilon": 1.0, "delta": 1e-6}, "one budget"),
        ({"rho": -1.0, "delta": 1e-6}, "rho"),
        ({"rho": float("nan"), "delta": 1e-6}, "rho"),
        ({"accounting": "zcdp", "delta": 1e-6}, "epsilon"),
        ({"accounting": "renyi", "epsilon": 1.0}, "accounting"),
        ({}, "epsilon"),
    ],
)
def test_bad_zcdp_budgets_are_refused(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        Accountant(**kwargs)


def test_a_zcdp_budget_from_epsilon_and_delta_implies_no_more_than_them():
    acct = Accountant(epsilon=1.0, delta=1e-6, accounting="zcdp")
    assert 0 < acct.rho < 0.5 and acct.epsilon <= 1.0


@pytest.mark.parametrize("key", ["rho", "unit", "reservation"])
def test_callers_cannot_write_the_accountants_own_details(key):
    from dpframe.core.records import Charge

    acct = Accountant(rho=1.0, delta=1e-6)
    with pytest.raises(InvalidParameterError, match=key):
        acct.spend_all([Charge(0.1, mechanism="laplace", details={key: 0.0})])


def test_a_person_ledger_takes_only_releases_bounded_by_its_person_column():
    from dpframe.core.records import Charge

    acct = Accountant(epsilon=1.0, unit="pid", max_rows=3, max_groups=2)
    assert acct.unit.max_rows == 3 and acct.unit.max_groups == 2
    for unit in (None, "other"):
        with pytest.raises(InvalidParameterError, match="pid"):
            acct.spend_all([Charge(0.1, mechanism="laplace", unit=unit)])
    acct.spend_all([Charge(0.1, mechanism="laplace", unit="pid")])
    assert acct.ledger[-1].details["unit"] == "pid"
    # a person-level release also protects every single row: a record ledger takes it
    Accountant(epsilon=1.0).spend_all([Charge(0.1, mechanism="laplace", unit="pid")])
    with pytest.raises(InvalidParameterError, match="person identifier"):
        Accountant(epsilon=1.0, max_rows=2)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda d: str(d / "a\x00b.db"), "not a file path"),  # old: ValueError
        (lambda d: (d / "l.db").symlink_to(d / "gone.db") or d / "l.db", "does not exist"),
    ],
)
def test_odd_ledger_paths_are_named(tmp_path, make, match):
    # old: sqlite3.OperationalError "unable to open database file"
    from dpframe import InvalidParameterError

    with pytest.raises(InvalidParameterError, match=match):
        Accountant.open(make(tmp_path), epsilon=1.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda a: a.spend(0.5, mechanism="laplace", columns=5), "columns must be"),
        (lambda a: a.spend(0.5, mechanism="laplace", scale=float("nan")), "scale must be finite"),
        (lambda a: a.spend(0.5, mechanism="laplace", scale=-1), "scale must be >= 0"),
        (lambda a: a.spend(0.5, mechanism="laplace", composition="both"), "composition"),
        (lambda a: a.spend(0.5, mechanism="laplace", details={"x": {1}}), "JSON"),
        (lambda a: a.spend_all([0.5]), "Charge objects"),
        (lambda a: a.spend_all("x"), "list of Charge"),
    ],
)
def test_bad_charges_are_refused_and_nothing_recorded(call, match):
    # old: TypeError / AttributeError / ValueError from deep inside, or recorded as given
    from dpframe import InvalidParameterError

    acct = Accountant(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match=match):
        call(acct)
    assert acct.spent.epsilon == 0 and not acct.ledger
