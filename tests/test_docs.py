"""Every code block of README.md and docs/ runs as it is, on a fresh clone; the examples run
(with --quick).

The convention for the docs' code blocks (writers of README.md and docs/, read this):

- A ```python, ```bash or ```sh block runs, alone, in an empty temporary folder -- never the
  repository, so a block that reads a file of the repo tree without creating it fails --
  with fresh globals (python) or ``bash -euo pipefail`` (shell), where ``dpframe`` and
  ``python`` are the code under test. A block creates what it reads.
- An HTML comment on the line before a block (invisible once rendered) says otherwise:

  - ``<!-- docs-test: spark -->``: needs the Spark extra; runs where pyspark is installed,
    and must (fails, not skips) under ``DPFRAME_REQUIRE_SPARK=1`` as in ``make test``;
  - ``<!-- docs-test: skip REASON -->``: not run here: it cannot run in a test (installs
    packages, needs a server, regenerates the repository's figures for minutes) or another
    test runs exactly it (named in the reason, which is required).
- ```toml blocks must parse; ```text (output), ```json, ```sql and unlabeled blocks
  (formulas, layouts) are not run. Any other label fails here, so no block slips out of the
  test by its label.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import spark_available

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

RUN = {"python", "bash", "sh"}
NOT_RUN = {"", "text", "json", "sql", "toml"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<lang>[\w+-]*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>\w+)\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    mark: str  # "", "spark" or "skip"
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file, with the marker on the line before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        start, i = i, i + 1
        while i < len(lines) and lines[i].strip() != fence:
            i += 1
        assert i < len(lines), f"{path.name}:{start + 1}: the code block is never closed"
        code = "\n".join(line[indent:] for line in lines[start + 1 : i]) + "\n"
        mark = _MARK.match(lines[start - 1]) if start else None
        out.append(
            Block(
                path,
                start + 1,
                m["lang"],
                code,
                mark["kind"] if mark else "",
                mark["reason"] if mark else "",
            )
        )
        i += 1
    return out


BLOCKS = [b for p in DOCS for b in blocks(p)]
RUNNABLE = [b for b in BLOCKS if b.lang in RUN]


def test_every_block_is_run_or_says_why_not():
    """A block's label is one this test knows; a marker is a known one, a skip has a reason,
    and only blocks that would run carry one."""
    for b in BLOCKS:
        assert b.lang in RUN | NOT_RUN, (
            f"{b.id}: a ```{b.lang} block: label it python, bash or sh (it runs) or text "
            "(output); see tests/test_docs.py"
        )
        assert b.mark in {"", "spark", "skip"}, f"{b.id}: unknown marker docs-test: {b.mark}"
        if b.mark:
            assert b.lang in RUN, f"{b.id}: a docs-test marker on a block that never runs"
        if b.mark == "skip":
            assert len(b.reason) > 10, f"{b.id}: say why the block cannot run in a test"


def test_the_parser_sees_every_block():
    """Every fence is paired (a block swallowed by an unclosed fence would never run)."""
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        n = sum(1 for line in lines if _FENCE.match(line))
        assert n == 2 * len(blocks(path)), path.name


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "toml"], ids=lambda b: b.id)
def test_doc_toml_parses(block):
    tomllib.loads(block.code)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty folder outside the repository as cwd, and ``dpframe``/``python`` on the
    PATH running the code under test."""
    work = tmp_path / "work"
    work.mkdir()
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, args in {"python": "", "dpframe": " -m dpframe.cli"}.items():
        shim = bin_ / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        shim.chmod(0o755)
    monkeypatch.chdir(work)
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    env.update(PYTHONPATH=pythonpath, COLUMNS="120")
    monkeypatch.setenv("PATH", env["PATH"])  # a python block's subprocesses find them too
    return work, env


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_doc_block_runs(block, fresh):
    if block.mark == "skip":
        pytest.skip(block.reason)
    if block.mark == "spark" and not spark_available():
        pytest.skip("pyspark is not installed (make test installs it)")
    work, env = fresh
    if block.lang == "python":
        exec(compile(block.code, block.id, "exec"), {"__name__": "__doc__"})
    else:
        res = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 0, f"{block.id} exited {res.returncode}:\n{res.stderr}"


def test_a_block_reading_the_repo_tree_fails(fresh):
    """The guard itself: cwd is not the repository, so README.md is not there to read."""
    work, _ = fresh
    assert not (work / "README.md").exists()
    assert Path.cwd() == work and ROOT not in work.parents


def test_spark_blocks_are_marked():
    """A block that needs pyspark says so: it is then required where the extra is."""
    for b in RUNNABLE:
        if "pyspark" in b.code or "dpframe.engines.spark" in b.code:
            assert b.mark in {"spark", "skip"}, f"{b.id}: mark it <!-- docs-test: spark -->"


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_example_runs(script, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path / "out"), "--quick"])
    runpy.run_path(str(script), run_name="__main__")
