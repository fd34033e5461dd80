"""A release spec on a tight-composition budget (``accounting = "pld"``): the plan prices the
whole ledger by composition, the run charges it, and a ledger of the other accounting is
refused in the spec's words."""

from __future__ import annotations

from pathlib import Path

import pytest

import dpframe
from dpframe.core.losses import LOSS_KEY
from dpframe.errors import LedgerMismatchError
from dpframe.jobs import load_spec, plan, run
from tests.jobs.conftest import EPSILON_TOTAL, write_spec


def spec_file(tmp_path: Path, budget: str) -> Path:
    path = write_spec(tmp_path, rows=3_000, budget=2.2)
    text = path.read_text().replace("budget = { epsilon = 2.2 }", f"budget = {budget}")
    path.write_text(text)
    return path


def test_a_plan_over_basic_composition_fits_by_tight_composition(tmp_path: Path) -> None:
    assert EPSILON_TOTAL > 2.2
    basic = plan(load_spec(spec_file(tmp_path, "{ epsilon = 2.2, delta = 1e-3 }")))
    assert not basic.fits
    spec = load_spec(spec_file(tmp_path, '{ epsilon = 2.2, delta = 1e-3, accounting = "pld" }'))
    planned = plan(spec)
    assert planned.fits and planned.spent_after < 2.2
    assert "tight composition" in planned.summary()
    run(spec, progress=False)
    acct = dpframe.Accountant.open(tmp_path / "ledger.db")
    assert acct.accounting == "pld"
    assert all(LOSS_KEY in e.details for e in acct.ledger)
    assert acct.spent.epsilon == pytest.approx(planned.spent_after, rel=1e-9)
    again = plan(spec)  # the ledger now composes to what the first run spent
    assert not again.fits and again.spent_before == pytest.approx(acct.spent.epsilon)


def test_a_ledger_of_the_other_accounting_is_refused_in_the_spec_words(tmp_path: Path) -> None:
    dpframe.Accountant.open(tmp_path / "ledger.db", epsilon=2.2, delta=1e-3)
    spec = load_spec(spec_file(tmp_path, '{ epsilon = 2.2, delta = 1e-3, accounting = "pld" }'))
    with pytest.raises(LedgerMismatchError, match=r"remove privacy\.budget\.accounting"):
        plan(spec)
