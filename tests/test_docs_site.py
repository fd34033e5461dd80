"""The API reference site: `mkdocs build --strict` (what `make docs` runs) builds it with no
warning, every public name has an entry on it, and each has a docstring with a summary line
and an ``Examples`` section (run by the suite as a doctest); every CLI command has its help
and an example on docs/reference/cli.md.

The public names: ``dpframe.__all__``, the ``.dp`` namespaces' methods, the Accountant's
public methods and properties, what users call on the release and provenance objects
(``agg``, ``summarize``, ``collect``, ...), and the ``dpframe`` command's commands.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

import dpframe
from dpframe.cli import app
from dpframe.polars.namespace import DataFrameDP, ExprDP, LazyFrameDP

from .test_docs import blocks

ROOT = Path(__file__).resolve().parents[1]


def public_names() -> list[tuple[str, Any, tuple[str, ...]]]:
    """(name, object, the anchors its entry may have on the site) of every public name."""
    out: list[tuple[str, Any, tuple[str, ...]]] = []
    for name in dpframe.__all__:
        if name == "__version__":
            continue
        obj = getattr(dpframe, name)
        real = getattr(obj, "__name__", name)
        if not inspect.ismodule(obj):
            real = f"{obj.__module__}.{obj.__qualname__}"
        out.append((f"dpframe.{name}", obj, (f"dpframe.{name}", real)))
        if inspect.ismodule(obj):  # agg, pram, risk, sensitivity: their functions
            for fn in getattr(obj, "__all__", []):
                if inspect.isfunction(getattr(obj, fn)):
                    member = (f"dpframe.{name}.{fn}", getattr(obj, fn))
                    out.append((*member, (member[0],)))
    for cls in (ExprDP, DataFrameDP, LazyFrameDP, dpframe.Accountant):
        where = (
            "dpframe.Accountant"
            if cls is dpframe.Accountant
            else f"{cls.__module__}.{cls.__name__}"
        )
        for name, member in inspect.getmembers(cls):
            if name.startswith("_"):
                continue
            obj = member.fget if isinstance(member, property) else member
            out.append((f"{cls.__name__}.{name}", obj, (f"{where}.{name}",)))
    # what users call on the objects the functions return (inherited: where it is defined)
    for cls in (
        dpframe.GroupBy,
        dpframe.GroupedRelease,
        dpframe.CovarianceMatrixRelease,
        dpframe.ProportionsRelease,
        dpframe.Provenance,
    ):
        for name in sorted(_USER_METHODS & set(dir(cls))):
            owner = next(c for c in cls.__mro__ if name in vars(c))
            member = vars(owner)[name]
            obj = member.fget if isinstance(member, property) else member
            out.append((f"{cls.__name__}.{name}", obj, (f"dpframe.{owner.__name__}.{name}",)))
    return out


_USER_METHODS = {
    "agg",
    "collect",
    "summarize",
    "epsilon",
    "materialised",
    "neighbours",
    "ledger_frame",
}
PUBLIC = public_names()
_EXAMPLES = re.compile(r"^Examples\n-{8,}\n", re.M)


@pytest.mark.parametrize(
    ("name", "obj"), [(n, o) for n, o, _ in PUBLIC], ids=[n for n, *_ in PUBLIC]
)
def test_public_name_has_a_summary_and_an_example(name, obj):
    doc = inspect.getdoc(obj) or ""
    summary = doc.split("\n\n", 1)[0].strip()
    assert summary, f"{name}: no docstring summary line"
    assert _EXAMPLES.search(doc), f"{name}: no 'Examples' section (NumPy style) in its docstring"
    assert ">>> " in doc.split("Examples", 1)[1], f"{name}: its Examples section has no example"


def _commands(group: Any, prefix: str = "dpframe") -> list[tuple[str, Any]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        if getattr(cmd, "commands", None):  # a group (typer vendors its own click)
            out += _commands(cmd, f"{prefix} {name}")
        else:
            out.append((f"{prefix} {name}", cmd))
    return out


COMMANDS = _commands(typer.main.get_command(app))


def test_the_cli_has_commands():
    assert len(COMMANDS) >= 10, [n for n, _ in COMMANDS]


@pytest.mark.parametrize(("name", "cmd"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_cli_command_has_help_and_an_example_on_the_site(name, cmd):
    assert (cmd.help or "").strip().split("\n")[0], f"{name}: no help text"
    page = ROOT / "docs" / "reference" / "cli.md"
    shown = [b for b in blocks(page) if b.lang == "bash" and re.search(rf"^{name}\b", b.code, re.M)]
    assert shown, f"{name}: no example in a bash block of {page.name}"
    assert f"`{name}" in page.read_text(encoding="utf-8"), f"{name}: no entry on {page.name}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The strict build, once (about 5 s on 2 cores)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{res.stdout}\n{res.stderr}"
    warnings = [line for line in res.stderr.splitlines() if line.startswith("WARNING")]
    assert not warnings, "\n".join(warnings)
    return out


def test_the_site_builds_strict(site):
    assert (site / "index.html").is_file()
    assert (site / "reference" / "cli" / "index.html").is_file()


def test_every_public_name_has_an_entry_on_the_site(site):
    ids: set[str] = set()
    for page in (site / "reference").rglob("index.html"):
        ids |= set(re.findall(r'id="(dpframe[^"]*)"', page.read_text(encoding="utf-8")))
    missing = [name for name, _, anchors in PUBLIC if not set(anchors) & ids]
    assert not missing, f"no entry on the reference site for: {missing}"


def test_nested_lists_render_on_the_site():
    """Python-Markdown nests a list inside a list item only when it is indented by 4
    spaces; GitHub takes 2, so a 2- or 3-space nested list reads right on GitHub and is
    flattened on the site."""
    bad = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        code = False
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                code = not code
            elif not code and re.match(r"^ {1,3}([-*+]|\d+\.) ", line):
                bad.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()[:60]}")
    assert not bad, "indent nested list items by 4 spaces:\n" + "\n".join(bad)
