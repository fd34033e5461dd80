"""Every compiled kernel compiles once per environment, never once per process.

What a process runs before its first compiled release (the ``load_kernels`` of each
module, which a release calls) loads every kernel from numba's cache on disk once any
process of the environment compiled it; then the releases themselves -- person-level
(each bounding path, pairs over ``max_rows`` or not), the dense pass over enum keys, both
PRAM samplers' compiled step, the discrete Gaussian's compiled passes, the streamed
bounding of records sorted by person and in random order -- compile
nothing and add no signature to any kernel (so no release waits for a compile, and no
path runs a specialization the loads did not cache).

Checked in a fresh interpreter on the environment's own cache, which this test (and
the suite) filled first: a kernel without ``cache=True``, or a path that needs a new
signature, compiles there and fails the test. numba's ``numba:compile`` events are the
witness; a function compiled on purpose shows the recorder sees compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

#: the kernel modules (every numba dispatcher in them is checked)
MODULES = (
    "dpframe.engines.bounding_kernel",
    "dpframe.engines.bounding_clustered",
    "dpframe.engines.dense_kernel",
    "dpframe.mechanisms.pram.sampling_kernel",
    "dpframe.mechanisms.gaussian_kernel",
)

#: what a process runs before its first compiled release (a ``load_kernels`` each)
LOAD = """
import numpy as np
from dpframe.engines import bounding, dense_kernel
from dpframe.mechanisms.pram import sampling_kernel
from dpframe.mechanisms.gaussian import _params
from dpframe.mechanisms.gaussian_kernel import draw

def load():
    bounding._load_kernels()
    dense_kernel.load_kernels()
    sampling_kernel.load_kernels()
    words = np.random.default_rng(0).integers(-(2**63), 2**63, 64, dtype=np.int64)
    draw(np.zeros(3, dtype=np.int64), 0, words, _params(4, 1, 3), np.zeros((8, 4), np.int64),
         np.zeros((8, 2)))
"""

SCRIPT = (
    LOAD
    + """
import importlib, json, sys
import numba
import numba.core.event as ev
import polars as pl
import dpframe
import warnings
from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines import dense_parts
from dpframe.engines.bounding import bounded_grouped_parts
from dpframe.engines.polars import PolarsEngine
from dpframe.mechanisms.statistics import Operand, Part
from dpframe.mechanisms.gaussian import sample_discrete_gaussian, _COMPILED_MIN
from dpframe.mechanisms.pram import design
from dpframe.mechanisms.pram.sampling import sampler

from dpframe.engines import bounding_clustered, bounding_spill

paths = {"clustered": [], "parts": 0}  # which streamed paths ran (so the test covers both)
clustered, bound_part = bounding_clustered.clustered_parts, bounding_spill._bound_part

def counted_clustered(*args, **kwargs):
    out = clustered(*args, **kwargs)
    paths["clustered"].append(out is not None)
    return out

def counted_part(*args, **kwargs):
    paths["parts"] += 1
    return bound_part(*args, **kwargs)

bounding_clustered.clustered_parts, bounding_spill._bound_part = counted_clustered, counted_part

kernels = {f"{m}.{n}": v for m in sys.argv[1:] for n, v in vars(importlib.import_module(m)).items()
           if isinstance(v, numba.core.registry.CPUDispatcher)}
with ev.install_recorder("numba:compile") as loading:
    load()
signatures = {n: len(k.signatures) for n, k in kernels.items()}

visits = pl.DataFrame({"patient": [1, 1, 1, 2, 3, 3], "ward": ["a", "a", "b", "a", "b", "c"],
                       "cost": [10.0, 20.0, 5.0, 7.0, 1.0, 3.0]})
wards = pl.DataFrame({"ward": ["a", "b", "c"]})
enum = pl.Enum(["a", "b", "c"])
dense_parts.DENSE_ROWS = 0  # the dense pass for any number of records
with ev.install_recorder("numba:compile") as releasing:
    for max_rows in (3, 1):  # 3: no pair over max_rows; 1: patient 1's two rows in ward a
        with dpframe.Accountant(epsilon=1.0, unit="patient", max_rows=max_rows, max_groups=3):
            dpframe.group_by(visits, "ward", margins=wards).agg(
                dpframe.agg.count(epsilon=0.5),
                dpframe.agg.sum("cost", lower=0, upper=50, epsilon=0.5),
            ).collect()
    with dpframe.Accountant(epsilon=1.0):
        dpframe.group_by(visits.with_columns(pl.col("ward").cast(enum)), "ward",
                         margins=wards.cast(enum)).agg(
            dpframe.agg.count(epsilon=0.5),
            dpframe.agg.median("cost", lower=0, upper=50, epsilon=0.5),
        ).collect()
    # past the memory setting: sorted by person (the clustered path, window by window) and
    # in random order (partitioned by person, spilled)
    rng = np.random.default_rng(0)
    n = 100_000  # more than a window: the random order is not clustered
    records = pl.DataFrame({"pid": rng.integers(0, 20_000, n), "g": rng.integers(0, 9, n),
                            "x": rng.uniform(0, 9, n)})
    unit = PrivacyUnit("pid", max_rows=2, max_groups=2)
    for lf in (records.sort("pid").lazy(), records.lazy()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a seeded source
            source = RandomSource(seed=1)
        bounded_grouped_parts(lf, unit, ["g"], {"s": pl.col("x")}, [], {}, source,
                              memory=1 << 16)
    # the pass without keys (a release's totals)
    parts = [Part("s", "sum", Operand("cost", 0.0, 1.0)), Part("c", "count")]
    PolarsEngine(visits).grouped_parts([], parts, [])
    for kind in (sampler(design(np.full(4, 0.25), 1.0)),
                 sampler(np.full((3, 3), 1 / 3) * 0.4 + np.eye(3) * 0.6)):
        kind.randomize(np.zeros(100, dtype=np.int64), np.random.default_rng(0), compiled=True)
    sample_discrete_gaussian(9, 1, _COMPILED_MIN, np.random.default_rng(0))

@numba.njit
def probe(x):
    return x + 1

with ev.install_recorder("numba:compile") as witness:
    probe(1)
print(json.dumps({
    "loading": len(loading.buffer), "releasing": len(releasing.buffer),
    "witness": len(witness.buffer), "paths": paths,
    "added": {n: len(k.signatures) - signatures[n] for n, k in kernels.items()
              if len(k.signatures) != signatures[n]},
    "kernels": sorted(kernels),
}))
"""
)


def test_a_fresh_process_loads_every_kernel_and_its_releases_compile_nothing():
    namespace: dict = {}
    exec(LOAD, namespace)
    namespace["load"]()  # fills the environment's cache, if no process did yet
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, *MODULES],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["witness"] > 0  # the recorder sees a compile
    # the sorted records bounded window by window, the others in spilled parts
    assert got["paths"]["clustered"][-2:] == [True, False] and got["paths"]["parts"] > 1
    assert len(got["kernels"]) >= 15  # every module's dispatchers were found
    assert got["loading"] == 0  # every kernel loaded from the cache
    assert got["releasing"] == 0, got  # no release compiled anything...
    assert got["added"] == {}  # ...nor ran a signature the loads did not load
