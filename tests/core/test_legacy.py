"""Ledgers of older versions: JSON files, read-only until migrated (issue 14)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from dpframe.cli import app
from dpframe.core.accountant import Accountant
from dpframe.core.legacy import migrate_json
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerIntegrityError,
    LedgerReadOnlyError,
)


def _spend(acct, eps=0.1):
    return acct.spend(eps, mechanism="laplace", columns=["x"])


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
