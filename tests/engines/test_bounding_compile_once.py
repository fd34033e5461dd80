"""The compiled bounding kernels compile once per environment, not once per process.

Every kernel a person-level release runs is cached on disk (``cache=True``) and a release
runs all of them (those of the clustered path and of the partitions alike), even when no
pair holds more than ``max_rows`` rows; nothing on the
path compiles per process (no numba typed ``List``). Checked in fresh interpreters
sharing an empty ``NUMBA_CACHE_DIR``: the first compiles, the second compiles nothing
(numba's ``numba:compile`` events) and loads every kernel from the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

#: one tiny person-level grouped release for each max_rows given (3: no pair over it;
#: 1: patient 1's two rows in ward a are); prints the compiles, then each kernel's calls
SCRIPT = """
import sys, warnings
import numba.core.event as ev
import polars as pl
import dpframe
from dpframe.engines import bounding_clustered as bc
from dpframe.engines import bounding_kernel as bk

visits = pl.DataFrame({"patient": [1, 1, 1, 2, 3, 3], "ward": ["a", "a", "b", "a", "b", "c"],
                       "cost": [10.0, 20.0, 5.0, 7.0, 1.0, 3.0]})
wards = pl.DataFrame({"ward": ["a", "b", "c"]})
with ev.install_recorder("numba:compile") as rec:
    for max_rows in sys.argv[1:]:
        with dpframe.Accountant(epsilon=1.0, unit="patient", max_rows=int(max_rows),
                                max_groups=3):
            dpframe.group_by(visits, "ward", margins=wards).agg(
                dpframe.agg.count(epsilon=0.5),
                dpframe.agg.sum("cost", lower=0, upper=50, epsilon=0.5),
            ).collect()
kernels = (bk._partition, bk._choose, bk._sample, bc._within, bc._bound_window, bc._extent)
print(len(rec.buffer), *(sum(k.stats.cache_hits.values()) for k in kernels))
"""


def _run(cache: Path, *max_rows: str) -> list[int]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, *max_rows],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [int(v) for v in out[-7:]]


def test_a_fresh_process_compiles_nothing_after_the_first_release(tmp_path):
    first = _run(tmp_path, "3")  # no pair over max_rows: still every kernel compiled
    assert first[0] > 0  # the cache was empty: this process compiled
    assert any(tmp_path.rglob("*bounding_kernel*.nbi"))  # numba's index, on disk
    compiles, *loaded = _run(tmp_path, "3", "1")  # then pairs over max_rows too
    assert compiles == 0
    assert all(n >= 1 for n in loaded)  # each kernel loaded from the cache
