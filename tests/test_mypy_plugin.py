"""dpframe.mypy_plugin: mypy sees ``.dp`` / ``.dpf`` on polars objects with their real types,
and the README's and the quickstart's examples pass ``mypy --strict``."""

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from dpframe.mypy_plugin import NAMESPACES

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "[mypy]\nplugins = dpframe.mypy_plugin\nstrict = True\n"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One mypy cache for this module's runs under the plugin's configuration: polars and
    dpframe are analysed once, not once a test (a run without the plugin keeps its own:
    mypy would analyse everything again under the other options)."""
    return tmp_path_factory.mktemp("mypy-cache")


def mypy(folder: Path, files: dict[str, str], cache: Path, plugin: bool = True) -> tuple[int, str]:
    """Run mypy (a fresh process, on the module's cache) on ``files`` written into ``folder``."""
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "mypy.ini").write_text(CONFIG if plugin else "[mypy]\nstrict = True\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(cache if plugin else cache / "without-plugin"),
            *files,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_plugin_names_the_classes_polars_defines():
    """A polars release that moves Expr, DataFrame or LazyFrame must fail here, not silently
    give users an untyped ``.dp``."""
    runtime = {f"{c.__module__}.{c.__qualname__}" for c in (pl.Expr, pl.DataFrame, pl.LazyFrame)}
    assert set(NAMESPACES) == runtime


def test_readme_and_quickstart_pass_mypy_strict(tmp_path, cache):
    files = {}
    for doc in ("README.md", "docs/quickstart.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, flags=re.S)):
            files[f"{Path(doc).stem.lower()}_{i}.py"] = block
    assert len(files) >= 5
    code, out = mypy(tmp_path, files, cache)
    assert code == 0, out


TYPED = """\
import polars as pl
import dpframe

expr = pl.col("x")
reveal_type(expr.dp)
reveal_type(expr.dpf)
reveal_type(pl.DataFrame().dp)
reveal_type(pl.LazyFrame().dpf)
regions = pl.DataFrame({"region": ["North"]})
release = pl.LazyFrame().dp.group_by("region", margins=regions).agg(dpframe.agg.count(epsilon=1))
reveal_type(release.collect())
expr.dp.laplace(epsilon="1", sensitivity=1.0, composition="parallel")
expr.dp.no_such_method()
expr.dp.laplace(1.0, sensitivity=1.0, composition="parallel")
pl.LazyFrame().dp.drha("age", "y", epsilon=1.0, weighted=False)
"""


def test_the_namespace_has_its_types_and_wrong_arguments_are_errors(tmp_path, cache):
    code, out = mypy(tmp_path, {"typed.py": TYPED}, cache)
    assert code == 1
    revealed = re.findall(r'Revealed type is "([^"]+)"', out)
    assert revealed == [
        "dpframe.polars.namespace.ExprDP",
        "dpframe.polars.namespace.ExprDP",
        "dpframe.polars.namespace.DataFrameDP",
        "dpframe.polars.namespace.LazyFrameDP",
        "polars.dataframe.frame.DataFrame",
    ], out
    # the method is dpframe.laplace with its receiver bound: mypy names the argument
    assert 'typed.py:12: error: Argument "epsilon" has incompatible type "str"' in out
    assert '"ExprDP" has no attribute "no_such_method"' in out
    # the function's kinds: epsilon is keyword-only there, qids and sensitive positional
    assert "typed.py:14: error: Too many positional arguments" in out
    assert "typed.py:15:" not in out


def test_without_import_dpframe_the_namespace_is_an_error(tmp_path, cache):
    code, out = mypy(tmp_path, {"plain.py": 'import polars as pl\n\npl.col("x").dp\n'}, cache)
    assert code == 1
    assert "registered by `import dpframe`" in out


def test_without_the_plugin_mypy_does_not_see_the_namespace(tmp_path, cache):
    """What the plugin is for (if polars ever types its namespaces, this fails: drop it)."""
    program = 'import polars as pl\nimport dpframe\n\npl.col("x").dp\n'
    code, out = mypy(tmp_path, {"plain.py": program}, cache, plugin=False)
    assert code == 1
    assert '"Expr" has no attribute "dp"' in out


def test_the_public_api_passes_mypy_strict(tmp_path):
    """`mypy -p dpframe` with the project's configuration (pyproject.toml): the polars
    layer, the package's names and the engine protocol, strictly -- so a signature that
    drifts from what it forwards to, or an engine that stops meeting the protocol, fails."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "-p", "dpframe", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
