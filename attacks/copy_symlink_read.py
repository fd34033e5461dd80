"""Finding: `dpframe check COPY` copied a file from outside the copy into it, through a link.

refresh_copy() refreshes a top-level folder entry (a Spark table) with
shutil.copytree(entry, tmp), which follows symbolic links: a crafted copy whose run
folder's table holds a link to a file elsewhere (a secret readable by whoever runs the
check) gets that file's content copied into the copy's top-level table -- which the
copy's owner then reads. A dereferenced copy holds no links: copy them as links.
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

work = _base.fresh("symlink_read")
copy = work / "copy"
shutil.copytree(work / "released", copy, symlinks=False)
secret = work / "secret.txt"
secret.write_text("the checker's secret\n")
meta = pl.read_parquet_metadata(copy / "current" / "microdata.parquet")["dpframe"]
for table in (copy / "current" / "microdata.parquet", copy / "microdata.parquet"):
    data = table.read_bytes()
    table.unlink()
    table.mkdir()
    (table / "part-0.parquet").write_bytes(data)  # a Spark-style table folder
    (table / "_dpframe.json").write_text(json.dumps({"dpframe": json.loads(meta)}))
(copy / "current" / "microdata.parquet" / "leak").symlink_to(secret)
res = CliRunner().invoke(app, ["check", str(copy)])
leak = copy / "microdata.parquet" / "leak"
print("check exit code:", res.exit_code)
print("top-level leak:", "link" if leak.is_symlink() else ("file" if leak.exists() else "none"))
copied = leak.exists() and not leak.is_symlink()
print("BREAK: the secret was copied into the copy" if copied else "held")
