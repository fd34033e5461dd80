"""Every benchmark script runs with ``--quick`` and exits 0 (a smoke test, never a timing).

Each script runs in a fresh interpreter from the repository root, as ``make bench`` runs
it. ``bench_spark.py`` needs pyspark (and Java): it is skipped without pyspark, unless
DPFRAME_REQUIRE_SPARK=1 (``make test``), where a missing pyspark fails it instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import spark_available

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("bench_*.py"))
TIMEOUT = 300  # seconds per script; a quick run takes well under a minute


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_runs_quick(script):
    if script.name == "bench_spark.py" and not spark_available():
        pytest.skip("bench_spark.py needs pyspark: pip install -e '.[spark]' (make test does)")
    res = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT)), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert res.returncode == 0, (
        f"{script.name} --quick exited {res.returncode}\n"
        f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}"
    )
    assert res.stdout.strip(), f"{script.name} --quick printed nothing"
