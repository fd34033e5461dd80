"""The behaviour users see, frozen: the demo spec run with a seed publishes the same tables,
provenance, suites and ledger entries as the golden record.

A refactor of the layers above the mechanisms (issue 33: the release object declares itself,
the job plans and builds once) must not change one published byte of meaning. The record,
``golden/demo_seeded.json``, was written by this test's ``snapshot`` before that refactor;
write it again (``DPFRAME_WRITE_GOLDEN=1``) only for a change of behaviour that is meant, and
say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dpframe
from dpframe.datasets import synthetic_survey
from dpframe.jobs import load_spec, plan, run

GOLDEN = Path(__file__).parent / "golden" / "demo_seeded.json"

#: what differs between two runs of the same seeded spec: ids, times, hashes chained to them
VOLATILE = {"id", "time", "previous", "hash", "reservation", "great_expectations_version"}


def _stable(value: Any) -> Any:
    """``value`` without the fields that differ run to run (and with a job's run id blanked)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list | tuple):
        return [_stable(v) for v in value]
    if isinstance(value, str) and value.startswith("job "):
        return "job <run>"
    return value


def _entry(e: Any) -> dict[str, Any]:
    """A ledger entry without its ids (``release`` is the id charges of one release share)."""
    return {k: v for k, v in _stable({**vars(e), "details": e.details}).items() if k != "release"}


def _table(path: Path) -> dict[str, Any]:
    frame = pl.read_parquet(path)
    text = frame.write_csv(float_precision=None)
    return {
        "schema": {k: str(v) for k, v in frame.schema.items()},
        "rows": frame.height,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def snapshot(folder: Path) -> dict[str, Any]:
    """Everything a user of the seeded demo sees, without what differs run to run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)
        synthetic_survey(3_000).write_parquet(folder / "survey.parquet")
        text = resources.files("dpframe.data").joinpath("demo_release.toml").read_text()
        text = text.replace('ledger = "ledger.db"', 'ledger = "ledger.db"\nseed = 7')
        (folder / "release.toml").write_text(text)
        spec = load_spec(folder / "release.toml")
        planned = plan(spec)
        result = run(spec, progress=False)
    run_dir = folder / "released" / "current"
    out: dict[str, Any] = {
        "plan": _stable(planned.rows.to_dicts()),
        "epsilon": result.epsilon,
        "checks": [c.success for c in result.checks],
        "files": json.loads((run_dir / "manifest.json").read_text())["files"],
        "ledger": [_entry(e) for e in dpframe.Accountant.open(folder / "ledger.db").ledger],
        "releases": {},
    }
    for name, path in sorted(result.outputs.items()):
        prov = dpframe.read_provenance(path)
        suite = json.loads((run_dir / f"{name}.suite.json").read_text())
        out["releases"][name] = {
            "table": _table(path),
            "facts": _stable(prov.facts),
            "spec": _stable(prov.spec),
            "neighbours": prov.neighbours,
            "pram_designs": _stable(prov.pram_designs),
            "entries": [_entry(e) for e in prov.entries],
            "suite": _stable(suite),
        }
    return json.loads(json.dumps(out))  # tuples as lists, as the record holds them


def test_the_seeded_demo_publishes_what_the_golden_record_holds(tmp_path: Path) -> None:
    got = snapshot(tmp_path)
    if os.environ.get("DPFRAME_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip("golden record written")
    want = json.loads(GOLDEN.read_text())
    assert got.keys() == want.keys()
    for key in ("plan", "epsilon", "checks", "files", "ledger"):
        assert got[key] == want[key], key
    assert got["releases"].keys() == want["releases"].keys()
    for name, release in want["releases"].items():
        for part, value in release.items():
            assert got["releases"][name][part] == value, f"{name}: {part}"
