import json
import multiprocessing as mp
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
    with pytest.raises(LedgerMismatchError, match="not valid JSON"):
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
