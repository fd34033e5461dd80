"""Ctrl-C (SIGINT) and SIGTERM during a release job: nothing reserved is left held, what
was drawn stays spent and is said, and a run is published whole or not at all.

Old: Ctrl-C after the charge exited 130 with no message, and the job's own account of
its spend missed a draw whose ledger write had committed when the interrupt came.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import dpframe
from dpframe.core.accountant import RESERVATION_KEY
from dpframe.core.interrupts import deferred, handling
from dpframe.engines.polars import PolarsEngine
from dpframe.errors import ReleaseInterrupted
from dpframe.jobs import load_spec, run

from .conftest import write_spec

DRIVER = Path(__file__).with_name("interrupt_driver.py")
ROOT = Path(__file__).resolve().parents[2]

#: the spec's releases, in the order they are drawn, and what each is charged
RELEASES = {"by_region": 0.8, "microdata": 1.0, "age_shares": 0.2, "scores_cov": 0.3}
#: the job's progress steps: 4 reads, the reservation, 4 x (draw, write), 4 checks, the
#: report, the publish
STEPS = 19


def _drawn(k: int) -> float:
    """Epsilon of the first ``k`` releases."""
    return sum(list(RELEASES.values())[:k])


def _spent_at(moment: str) -> float:
    """What the job has drawn when stopped at ``moment`` (whole releases only)."""
    if moment.startswith("commit:draw:"):  # the write committed: that release is drawn
        return _drawn(int(moment.rsplit(":", 1)[1]))
    if moment in ("commit:hold", "switch"):
        return _drawn(4) if moment == "switch" else 0.0
    n = int(moment.split(":")[1])
    if n <= 6:  # reading and checking, reserving, before the first draw
        return 0.0
    if n <= 13:  # step 6 + 2k draws release k + 1, step 7 + 2k writes it
        return _drawn((n - 5) // 2)
    return _drawn(4)  # the checks, the report, the publish


@dataclass(frozen=True)
class Case:
    moment: str
    signum: int
    mode: str = "pause"  # "pass": the signal follows the moment after `delay` seconds
    delay: float = 0.0
    second: int | None = None  # a second signal while the reservation is given back

    @property
    def line(self) -> str:
        giveback = "+giveback" if self.second else ""
        return f"CASE {self.moment}{giveback} {self.mode}"


def _cases(rng: random.Random) -> list[Case]:
    """20 seeded moments: before the charge, between draws, in the checks, in publish."""
    moments = [f"step:{n}" for n in rng.sample(range(1, 6), 2)] + ["commit:hold"]
    moments += [f"step:{n}" for n in rng.sample(range(6, 14), 5)]
    moments += [f"commit:draw:{k}" for k in rng.sample(range(1, 5), 2)]
    moments += [f"step:{n}" for n in rng.sample(range(14, 18), 3)]
    moments += ["step:18", "step:19", "switch"]
    signums = [signal.SIGTERM if i % 3 == 2 else signal.SIGINT for i in range(len(moments))]
    rng.shuffle(signums)
    cases = [Case(m, s) for m, s in zip(moments, signums, strict=True)]
    for n in rng.sample(range(6, 14), 2):  # at a random instant of a draw or a write
        cases.append(Case(f"step:{n}", signal.SIGINT, "pass", rng.uniform(0.0, 0.03)))
    for n in rng.sample(range(6, 14), 2):  # Ctrl-C, then SIGTERM (or Ctrl-C) during cleanup
        second = rng.choice([signal.SIGINT, signal.SIGTERM])
        cases.append(Case(f"step:{n}", signal.SIGINT, second=second))
    rng.shuffle(cases)
    # each process's last job ends it, so its exit code is the process's own: one SIGINT,
    # one SIGTERM, at a known moment
    halves = []
    for half, signum in ((cases[:10], signal.SIGINT), (cases[10:], signal.SIGTERM)):
        last = next(c for c in half if c.mode == "pause" and c.signum == signum)
        halves.append([c for c in half if c is not last] + [last])
    return halves[0] + halves[1]


class Terminal:
    """A process in a pseudo-terminal of its own (its own session and process group)."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO  # what the test types is not echoed into the output
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.text = ""

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def signal(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)  # as a terminal delivers Ctrl-C: to the group

    def read_until(self, pattern: str | None, timeout: float = 60.0) -> tuple[str, str]:
        """Read until ``pattern`` matches what was read since the last match (None: until
        the process closes the terminal); what was read up to it, and what matched."""
        deadline = time.monotonic() + timeout
        while True:
            found = None if pattern is None else re.search(pattern, self.text)
            if found:
                read, self.text = self.text[: found.end()], self.text[found.end() :]
                return read, found.group(0)
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {pattern!r} from the job; it printed:\n{self.text}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the process closed the terminal
                    chunk = b""
                if not chunk:
                    if pattern is None:
                        read, self.text = self.text, ""
                        return read, ""
                    pytest.fail(f"the job ended before {pattern!r}; it printed:\n{self.text}")
                self.text += chunk.decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self.master)


def _state(folder: Path) -> tuple[tuple, str | None, set[str]]:
    """The ledger's entries and open reservations, the current run, the run folders."""
    acct = dpframe.Accountant.open(folder / "ledger.db")
    out = folder / "released"
    current = os.readlink(out / "current").split("/")[1] if (out / "current").is_symlink() else None
    runs = {p.name for p in (out / ".runs").iterdir()} if (out / ".runs").is_dir() else set()
    return (acct.ledger, acct.reservations, acct.remaining.epsilon), current, runs


def _check_case(case: Case, folder: Path, before: tuple, said: str, code: int) -> None:
    """After one interrupted job: the ledger, the folder, the message, the exit code."""
    (entries0, _, _), current0, runs0 = before
    (entries, held, remaining), current, runs = _state(folder)
    where = f"{case}: it said\n{said}"
    assert held == (), where  # no reservation left
    new = entries[len(entries0) :]
    assert entries[: len(entries0)] == entries0, where
    assert len({e.details.get(RESERVATION_KEY) for e in new}) <= 1, where  # one job's draws
    spent = sum(e.epsilon for e in new)
    drawn_whole = [_drawn(k) for k in range(5)]
    assert min(abs(spent - d) for d in drawn_whole) < 1e-9, where  # whole releases only
    if case.mode == "pause":
        assert spent == pytest.approx(_spent_at(case.moment)), where
    published = current != current0
    if code == 0:  # the signal came after the job ended ("pass" mode only)
        assert case.mode == "pass" and published and spent == pytest.approx(_drawn(4)), where
        return
    assert code == 128 + case.signum, where  # the first signal's, whatever came next
    name = "SIGINT (Ctrl-C)" if case.signum == signal.SIGINT else "SIGTERM"
    assert f"interrupted by {name}" in said, where
    if spent:
        assert f"this job spent epsilon {spent:g} (" in said, where
        for k, (release, eps) in enumerate(RELEASES.items()):
            if spent > _drawn(k) + 1e-9:
                assert f"{release} {eps:g}" in said, where
    else:
        assert "nothing spent" in said, where
    assert f"remaining {remaining:g}." in said, where
    out = folder / "released"
    assert not list(out.glob(".staging-*")), where  # nothing staged is left
    if case.mode == "pause":  # published only if stopped inside the switch
        assert published == (case.moment == "switch"), where
    if published:  # whole: its manifest's files all there, every top-level name in it
        assert f"its run {current} was published" in said, where
        manifest = json.loads((out / ".runs" / current / "manifest.json").read_text())
        assert all((out / "current" / f).exists() for f in manifest["files"]), where
        assert manifest["ledger"]["epsilon"] == pytest.approx(spent), where
        assert not (out / ".runs" / current / ".owner").exists(), where
    else:
        assert "nothing was published" in said, where
        assert runs <= runs0, where  # no run folder of this job
    for p in out.iterdir():
        if not p.name.startswith(".") and p.name != "current":
            assert Path(os.path.realpath(p)).parent == Path(os.path.realpath(out / "current"))


@pytest.mark.slow  # 20 jobs in a terminal
def test_ctrl_c_and_sigterm_at_20_seeded_moments_of_a_release_in_a_terminal(tmp_path):
    """``dpframe release`` in a pseudo-terminal, stopped by SIGINT to its process group
    (and SIGTERM) at 20 seeded moments: before the charge, between draws (and just after a
    draw's ledger write committed), in the checks, the report and the publish (before and
    inside the switch of ``current``), at random instants of a draw, and twice (a second
    signal while the reservation is given back). Each time: no reservation left, the
    ledger holds exactly the whole releases drawn, the message says what the job spent
    (per release and what the ledger has left) and what it published, the exit code is
    128 + the first signal (130, 143), and the output folder shows one whole run."""
    spec = write_spec(tmp_path, rows=300, budget=1000.0)
    cases = _cases(random.Random(32))
    assert len(cases) == 20
    run(load_spec(spec), progress=False)  # a published run to keep or replace
    interrupted = 0
    for part in (cases[:10], cases[10:]):  # two processes of ten jobs
        term = Terminal([sys.executable, str(DRIVER), str(spec)], tmp_path)
        try:
            term.read_until("READY")
            for i, case in enumerate(part):
                last = i == len(part) - 1
                before = _state(tmp_path)
                term.type(case.line + (" last" if last else ""))
                term.read_until(r"PAUSED \S+")
                if case.mode == "pass":
                    time.sleep(case.delay)
                term.signal(case.signum)
                if case.mode == "pause":
                    term.type("go")
                if case.second is not None:
                    term.read_until("PAUSED giveback")
                    term.signal(case.second)
                    term.type("go")
                if last:
                    said, _ = term.read_until(None)
                    code = term.proc.wait(timeout=60)  # the process's own exit code
                else:
                    said, exit_line = term.read_until(r"EXIT \d+\s")  # the whole number
                    code = int(exit_line.split()[1])
                interrupted += code != 0
                _check_case(case, tmp_path, before, said, code)
        finally:
            term.close()
    assert interrupted >= 18


# -- the same in Python ------------------------------------------------------------------------


def test_keyboardinterrupt_in_a_draw_gives_back_the_reservation(tmp_path, monkeypatch):
    """KeyboardInterrupt raised from inside a release's draw (the third of four): the
    reservation is given back, the ledger holds the three charged releases (the third's
    noise may have been drawn), and the error says so."""
    spec = write_spec(tmp_path, rows=300, budget=10.0)
    import dpframe.polars.release as release  # a job draws each release by Release.draw

    calls = []
    execute = release.execute

    def interrupted(steps, acct, note=""):
        calls.append(1)
        if len(calls) == 3:  # the charge is made, then its noise cannot be drawn
            steps = [dataclasses.replace(s, source=_Interrupting()) for s in steps]
        return execute(steps, acct, note=note)

    monkeypatch.setattr(release, "execute", interrupted)
    stopped = []  # the engine is told to stop its work (Spark: cancel its running jobs)
    monkeypatch.setattr(PolarsEngine, "cancel_work", lambda self: stopped.append(self))
    with pytest.raises(ReleaseInterrupted) as caught:
        run(load_spec(spec), progress=False)
    assert len(stopped) == 1
    acct = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert acct.reservations == ()
    assert acct.spent.epsilon == pytest.approx(_drawn(3))
    assert {e.id for e in caught.value.charged} == {e.id for e in acct.ledger}
    assert caught.value.exit_code == 130 and caught.value.published is None
    assert f"this job spent epsilon {_drawn(3):g} (" in str(caught.value)
    assert "age_shares 0.2" in str(caught.value)
    assert not (tmp_path / "released" / "current").exists()


def test_an_interrupt_as_the_reservation_block_ends_still_gives_it_back(tmp_path, monkeypatch):
    """SIGTERM as the job's reservation block ends, before the give-back's ledger write
    begins (its deferred section not yet entered): the job gives the reservation back on
    its way out. Old: it stayed held ("could not be given back: dpframe ledger cancel")."""
    spec = write_spec(tmp_path, rows=300, budget=10.0)
    from dpframe.core.accountant import Accountant

    transact, fired = Accountant._transact, []

    def signalled(self, decide):
        if decide.__name__ == "<lambda>" and not fired:  # reserve()'s give-back
            fired.append(True)
            signal.raise_signal(signal.SIGTERM)
        return transact(self, decide)

    monkeypatch.setattr(Accountant, "_transact", signalled)
    with pytest.raises(ReleaseInterrupted) as caught:
        run(load_spec(spec), progress=False)
    monkeypatch.undo()
    assert fired and caught.value.exit_code == 143
    acct = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert acct.reservations == ()
    assert acct.spent.epsilon == pytest.approx(_drawn(4))
    assert "was given back" in str(caught.value) and "ledger cancel" not in str(caught.value)


class _Interrupting:
    """A random source interrupted (Ctrl-C) as the noise is about to be drawn."""

    def generator(self):
        raise KeyboardInterrupt


def test_an_interrupt_as_a_draw_commits_is_counted(tmp_path, monkeypatch):
    """A KeyboardInterrupt raised as the ledger write of the second draw returns (the
    entries committed, the executor never given them): the job's account of its spend is
    read from the ledger, so it names them; the reservation is given back.

    Old: ``charged`` held only the first release, while the ledger held two."""
    from dpframe.core.stores import DatabaseStore

    spec = write_spec(tmp_path, rows=300, budget=10.0)
    transact = DatabaseStore.transact
    draws = []

    def cut(self, decide):
        recorded = transact(self, decide)
        if recorded:
            draws.append(1)
            if len(draws) == 2:
                raise KeyboardInterrupt
        return recorded

    monkeypatch.setattr(DatabaseStore, "transact", cut)
    with pytest.raises(ReleaseInterrupted) as caught:
        run(load_spec(spec), progress=False)
    monkeypatch.undo()
    acct = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert acct.reservations == ()
    assert acct.spent.epsilon == pytest.approx(_drawn(2))
    assert {e.id for e in caught.value.charged} == {e.id for e in acct.ledger}
    assert "this job spent epsilon 1.8 (by_region 0.8, microdata 1)" in str(caught.value)


def test_a_second_ctrl_c_inside_a_ledger_write_takes_effect_after_it(tmp_path, monkeypatch):
    """SIGINT delivered in the middle of a reservation's give-back (a second Ctrl-C during
    cleanup, outside any job): the give-back is finished, then the signal goes to the
    handler it was meant for (``KeyboardInterrupt``). Old: the transaction rolled back and
    the reservation stayed held."""
    from dpframe.core.stores import DatabaseStore

    acct = dpframe.Accountant.open(tmp_path / "ledger.db", epsilon=1.0)
    transact = DatabaseStore.transact

    def signalled(self, decide):
        def deciding(state):
            changes = decide(state)
            if changes.give_back and not changes.reserve:
                signal.raise_signal(signal.SIGINT)  # arrives before the COMMIT
            return changes

        return transact(self, deciding)

    monkeypatch.setattr(DatabaseStore, "transact", signalled)
    with pytest.raises(KeyboardInterrupt), acct.reserve(dpframe.Budget(0.5)):
        acct.spend(0.2, mechanism="laplace")
        raise KeyboardInterrupt  # the first Ctrl-C
    monkeypatch.undo()
    again = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert again.reservations == ()
    assert again.spent.epsilon == pytest.approx(0.2)


def test_a_job_handles_sigterm_like_ctrl_c_and_restores_the_handlers():
    """Inside :func:`handling` SIGTERM raises ReleaseInterrupted (exit code 143) once; a
    signal inside :func:`deferred` waits for its end; the handlers are put back."""
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    order = []
    with pytest.raises(ReleaseInterrupted) as caught, handling():
        with deferred():
            signal.raise_signal(signal.SIGTERM)
            order.append("written")
        order.append("not reached")
    assert order == ["written"] and caught.value.exit_code == 143
    with pytest.raises(ReleaseInterrupted) as caught, handling():
        try:
            signal.raise_signal(signal.SIGINT)
        finally:
            signal.raise_signal(signal.SIGTERM)  # a second signal during cleanup: ignored
            order.append("cleaned up")
    assert order[-1] == "cleaned up" and caught.value.exit_code == 130
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def _signal_as_sigint_is_put_back(monkeypatch, signum: int) -> None:
    """``signum`` arrives right after SIGINT's handler is put back (and before SIGTERM's)."""
    real, armed = signal.signal, [True]

    def hooked(s, handler):
        previous = real(s, handler)
        if armed[0] and s == signal.SIGINT and handler is signal.default_int_handler:
            armed[0] = False
            signal.raise_signal(signum)
        return previous

    monkeypatch.setattr(signal, "signal", hooked)


@pytest.mark.parametrize("section", ["handling", "deferred"])
def test_a_signal_as_the_handlers_are_put_back_reaches_them(monkeypatch, section):
    """A SIGTERM (or Ctrl-C) arriving between the restores of the two handlers at the end
    of a job (or of a ledger write outside one) goes to the handler put back, and every
    handler is put back. Old: it raised inside the restore, leaving dpframe's handler
    installed for SIGTERM for good: a finished job said "interrupted", and the process
    ignored every later SIGTERM (in a job) or swallowed it (after a ledger write)."""
    from dpframe.core import interrupts

    got: list[int] = []
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own
    signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    try:
        block = handling if section == "handling" else deferred
        _signal_as_sigint_is_put_back(monkeypatch, signal.SIGTERM)
        with block():
            pass  # the job, or the write, finished
        monkeypatch.undo()
        assert got == [signal.SIGTERM]  # delivered to the handler it was meant for
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) not in (interrupts._on_signal, None)
        assert interrupts._STATE.depth == 0 and not interrupts._STATE.raised
        _signal_as_sigint_is_put_back(monkeypatch, signal.SIGINT)
        with pytest.raises(KeyboardInterrupt) as caught, block():
            pass
        monkeypatch.undo()
        assert type(caught.value) is KeyboardInterrupt  # Python's, not an interrupted job's
        signal.raise_signal(signal.SIGTERM)
        assert got == [signal.SIGTERM] * 2  # the handler is back: SIGTERM is not lost
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, before)


def test_a_signal_the_process_ignores_stays_ignored_in_a_job():
    """A job started with SIGINT ignored (a background job of a script, a wrapper's
    SIG_IGN) is not stopped by a Ctrl-C. Old: handling() installed its handler over
    SIG_IGN, and the Ctrl-C the caller meant to ignore stopped the job."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        done = []
        with handling(), deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("written")
        with handling():
            signal.raise_signal(signal.SIGINT)
            done.append("went on")
        assert done == ["written", "went on"]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_signal_inside_a_ledger_write_reaches_an_asyncio_handler_once():
    """An asyncio program (``loop.add_signal_handler``) writing the ledger: one SIGTERM
    during the write runs its callback once. Old: twice -- the wakeup fd heard of it as it
    arrived and again when deferred() sent it again."""
    import asyncio

    async def main() -> list[int]:
        got: list[int] = []
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, got.append, 15)
        with deferred():
            signal.raise_signal(signal.SIGTERM)
        await asyncio.sleep(0.1)
        return got

    assert asyncio.run(main()) == [15]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_each_signal_inside_a_ledger_write_is_delivered_after_it():
    """Outside a job, Ctrl-C then SIGTERM inside one ledger write: each goes, in order, to
    its handler once the write is done. Old: only the first was sent again; the SIGTERM
    was lost."""
    got: list[int] = []
    signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    try:
        with pytest.raises(KeyboardInterrupt), deferred():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)
            got.append(0)  # the write goes on to its end
        assert got == [0, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_ctrl_c_as_a_python_release_draws_keeps_its_charge_and_says_it(tmp_path, monkeypatch):
    """A ``KeyboardInterrupt`` as a release object draws its noise, inside the caller's
    reservation: the error says what the charge spent (it stays spent: noise may have been
    drawn), the reservation is given back, and the ledger holds that charge only.

    Old: a bare ``KeyboardInterrupt``, saying nothing of the charge."""
    import polars as pl

    from dpframe.core.randomness import RandomSource

    visits = pl.DataFrame({"ward": ["a", "a", "b"], "cost": [10.0, 20.0, 5.0]})
    wards = pl.DataFrame({"ward": ["a", "b", "c"]})
    acct = dpframe.Accountant.open(tmp_path / "ledger.db", epsilon=2.0)
    monkeypatch.setattr(RandomSource, "generator", _Interrupting.generator)
    with pytest.raises(ReleaseInterrupted) as caught, acct.reserve(dpframe.Budget(1.0)):
        dpframe.group_by(visits, "ward", margins=wards, accountant=acct).agg(
            dpframe.agg.count(epsilon=0.3),
            dpframe.agg.sum("cost", lower=0, upper=50, epsilon=0.4),
        ).collect()
    again = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert again.reservations == ()
    assert again.spent.epsilon == pytest.approx(0.7)
    assert {e.id for e in caught.value.charged} == {e.id for e in again.ledger}
    assert "after its charge: epsilon 0.7 stays spent" in str(caught.value)
    said = str(caught.value)  # said inside the reservation, which held 0.3 more then
    assert "remaining 1 (open reservations hold epsilon 0.3 more)." in said
    assert caught.value.exit_code == 130


def test_ctrl_c_as_a_python_release_charge_is_written_says_it(tmp_path, monkeypatch):
    """Ctrl-C as a Python release's charge is written (its deferred ledger write sends it
    again to Python's handler once the write is done): the error says what the charge
    spent. Old: a bare ``KeyboardInterrupt`` from the charge, before the draw, saying
    nothing of the epsilon it had spent."""
    import polars as pl

    from dpframe.core.stores import DatabaseStore

    stats = pl.DataFrame({"mean_age": [41.2, 38.9, 45.0]})
    acct = dpframe.Accountant.open(tmp_path / "ledger.db", epsilon=1.0)
    transact = DatabaseStore.transact

    def signalled(self, decide):
        recorded = transact(self, decide)  # committed...
        signal.raise_signal(signal.SIGINT)  # ...and Ctrl-C before the write returns
        return recorded

    monkeypatch.setattr(DatabaseStore, "transact", signalled)
    with pytest.raises(ReleaseInterrupted) as caught, acct:
        stats.with_columns(
            dpframe.laplace("mean_age", epsilon=0.5, sensitivity=0.1, composition="parallel")
        )
    monkeypatch.undo()
    assert acct.spent.epsilon == pytest.approx(0.5)
    assert "after its charge: epsilon 0.5 stays spent" in str(caught.value)


def test_an_eager_release_interrupted_after_its_charge_keeps_what_it_charged(monkeypatch):
    """An eager ``with_columns`` release interrupted as it draws: polars re-raises the
    error as ``type(exc)(message)``; it still holds the ledger entries it charged. Old:
    ``charged`` was None ("nothing spent") though the message said epsilon 0.5 was."""
    import polars as pl

    from dpframe.core.randomness import RandomSource

    stats = pl.DataFrame({"mean_age": [41.2, 38.9, 45.0]})
    monkeypatch.setattr(RandomSource, "generator", _Interrupting.generator)
    with pytest.raises(ReleaseInterrupted) as caught, dpframe.Accountant(epsilon=1.0) as acct:
        stats.with_columns(
            dpframe.laplace("mean_age", epsilon=0.5, sensitivity=0.1, composition="parallel")
        )
    assert "This error occurred" in str(caught.value)  # polars' copy of the error
    assert [e.id for e in caught.value.charged] == [e.id for e in acct.ledger]


def test_a_reservation_that_cannot_be_given_back_is_not_said_given_back(tmp_path, monkeypatch):
    """Interrupted, and the ledger refuses the give-back (unavailable): the message says
    the reservation is still held and how to give it back, not that it was."""
    from dpframe.core.stores import DatabaseStore
    from dpframe.errors import LedgerUnavailableError

    spec = write_spec(tmp_path, rows=300, budget=10.0)
    transact = DatabaseStore.transact
    seen = []

    def failing(self, decide):
        def deciding(state):
            changes = decide(state)
            seen.append(changes)
            if changes.give_back and not changes.reserve:
                raise LedgerUnavailableError("the ledger is locked")
            return changes

        recorded = transact(self, deciding)
        if recorded and len([c for c in seen if c.entries]) == 1:
            raise KeyboardInterrupt  # Ctrl-C as the first draw is written
        return recorded

    monkeypatch.setattr(DatabaseStore, "transact", failing)
    warned = pytest.warns(RuntimeWarning, match="could not be given back")
    with warned, pytest.raises(ReleaseInterrupted) as caught:
        run(load_spec(spec), progress=False)
    said = str(caught.value)
    assert "this job spent epsilon 0.8 (by_region 0.8)" in said
    assert "could not be given back: `dpframe ledger cancel`" in said
    assert "was given back" not in said
    assert "open reservations hold epsilon 1.5 more" in said


def test_ctrl_c_in_a_query_run_after_its_charge_says_it(monkeypatch):
    """A ``KeyboardInterrupt`` in the real pass of ``dpframe.collect`` (after the query's
    charge, as PRAM randomizes): the error says the charge stays spent.

    Old: a bare ``KeyboardInterrupt``."""
    import polars as pl

    from dpframe.core.randomness import RandomSource

    people = pl.LazyFrame({"region": ["N", "S", "S", "E"]})
    generator, calls = RandomSource.generator, []

    def interrupted(self):
        calls.append(1)
        if len(calls) == 2:  # the charge's draw went through; now the rows' randomization
            raise KeyboardInterrupt
        return generator(self)

    monkeypatch.setattr(RandomSource, "generator", interrupted)
    with dpframe.Accountant(epsilon=2.0) as acct, pytest.raises(ReleaseInterrupted) as caught:
        dpframe.collect(people.select(pl.col("region").dp.pram(1.0, categories=["N", "S", "E"])))
    assert acct.spent.epsilon == pytest.approx(1.0)
    assert "after its charge: epsilon 1 stays spent" in str(caught.value)
    assert [e.id for e in caught.value.charged] == [e.id for e in acct.ledger]
