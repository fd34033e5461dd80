"""The docs' code blocks and the examples run as they are (examples with --quick)."""

import re
import runpy
import sys
from pathlib import Path

import pytest

from .conftest import spark_available

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


BLOCKS = [(p, i, code) for p in DOCS for i, code in enumerate(python_blocks(p))]


@pytest.mark.parametrize(
    ("path", "index", "code"), BLOCKS, ids=[f"{p.name}-{i}" for p, i, _ in BLOCKS]
)
def test_doc_block_runs(path, index, code, tmp_path, monkeypatch):
    if "dpframe.engines.spark" in code and not spark_available():
        pytest.skip("pyspark is not installed (make test installs it)")
    monkeypatch.chdir(tmp_path)
    if path.name == "README.md":  # its example reads the user's own records: make some
        _survey().write_parquet(tmp_path / "survey.parquet")
    exec(compile(code, f"{path.name}[{index}]", "exec"), {"__name__": "__doc__"})


def _survey():
    """Records like the README's survey: a region each (one region empty) and an income."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(0)
    n = 2_000
    return pl.DataFrame(
        {
            "region": rng.choice(["North", "South"], n),
            "income": rng.lognormal(10.5, 0.6, n).round(0),
        }
    )


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_example_runs(script, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path / "out"), "--quick"])
    runpy.run_path(str(script), run_name="__main__")
