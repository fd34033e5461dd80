"""Break: `dpframe check COPY` passes while a table in the copy was never checked.

In a dereferenced copy every top-level name is a file of its own, not a link into
current/. check validates current/<file> for each release the manifest names, then
copies current/'s entries over the top-level ones the manifest's "files" lists. So:

A. a tampered top-level COPY/microdata.parquet, its name dropped from "files": check
   validates current/microdata.parquet and passes; the top-level table (the one a reader
   of COPY/microdata.parquet gets) is never read and stays tampered;
B. a release dropped from the manifest's "releases": check passes without checking it,
   its (tampered) table sitting in the copy at both names.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _base
import polars as pl
from typer.testing import CliRunner

from dpframe.cli import app


def crafted(name: str, drop_release: bool) -> Path:
    work = _base.fresh(name)
    copy = work / "copy"
    shutil.copytree(work / "released", copy, symlinks=False)
    raw = pl.read_parquet(work / "survey.parquet")  # the confidential input itself
    targets = [copy / "microdata.parquet"]
    if drop_release:
        targets.append(copy / "current" / "microdata.parquet")
    for t in targets:
        raw.write_parquet(t)  # the raw records, not PRAM'd (and no provenance)
    manifest = copy / "current" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["files"].remove("microdata.parquet")
    if drop_release:
        del doc["releases"]["microdata"]
    manifest.write_text(json.dumps(doc))
    return copy


broken = False
for label, drop in (("A: top-level table left out of files", False), ("B: release dropped", True)):
    copy = crafted(label[0], drop)
    res = CliRunner().invoke(app, ["check", str(copy)])
    raw_left = pl.read_parquet(copy / "microdata.parquet").width > 2
    print(label, "| check exit code:", res.exit_code, "| raw table in copy:", raw_left)
    broken |= res.exit_code == 0 and raw_left
print("BREAK: check passed a copy holding an unchecked table" if broken else "held")
