"""Break: a seeded PRAM release of two or more columns is not reproducible.

write_rowwise() gives every PRAM column of a release one shared seeded RandomSource, and
each column's map_batches function calls source.generator() -- which spawns the next
child of one SeedSequence. Polars evaluates the columns' functions in parallel threads,
so which column gets which child depends on which thread calls first: the same seed,
data and spec give different microdata from run to run. (One call per column now that
a seeded run is not elementwise -- the order *between* columns is still a race.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _base
import polars as pl

from dpframe.jobs import load_spec, run

outs = []
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    spec = _base.new_job(f"seeded{i}")
    text = spec.read_text().replace("[privacy]\n", "[privacy]\nseed = 1234\n")
    spec.write_text(text.replace('path = "survey.parquet"', 'path = "../seeded0/survey.parquet"'))
    run(load_spec(spec), progress=False)
    outs.append(pl.read_parquet(spec.parent / "released" / "microdata.parquet"))
    same = [o.equals(outs[0]) for o in outs]
    print(f"run {i}: same microdata as run 0 -> {same[-1]}", flush=True)
print("BREAK: seeded microdata differs between runs" if not all(same) else "held")
