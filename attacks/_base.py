"""Shared: a published output folder to attack (built once, copied per attack)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH picks dpframe

from tests.jobs.conftest import write_spec

BASE = Path("/tmp/atk/base")


def published() -> Path:
    """/tmp/atk/base: survey, spec, ledger and released/ (one run)."""
    if not (BASE / "released" / "current").exists():
        shutil.rmtree(BASE, ignore_errors=True)
        BASE.mkdir(parents=True)
        spec = write_spec(BASE, rows=5_000)
        from dpframe.jobs import run
        from dpframe.jobs.spec import load_spec

        run(load_spec(spec), progress=False)
    return BASE


def fresh(name: str) -> Path:
    """A private copy of the base folder under /tmp/atk/<name>."""
    base = published()
    target = Path("/tmp/atk") / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target, symlinks=True)
    return target


def new_job(name: str, budget: float = 20.0) -> Path:
    """A folder with the survey and a spec (nothing published yet); the spec's path."""
    target = Path("/tmp/atk") / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    return write_spec(target, rows=5_000, budget=budget)
