import subprocess
import sys
import textwrap

import polars as pl
import pytest

import dpframe
from dpframe.polars.namespace import DataFrameDP, ExprDP, LazyFrameDP


def test_namespaces_registered_under_dp_and_dpf():
    for name in ("dp", "dpf"):
        assert isinstance(getattr(pl.col("x"), name), ExprDP)
        assert isinstance(getattr(pl.DataFrame({"x": [1]}), name), DataFrameDP)
        assert isinstance(getattr(pl.LazyFrame({"x": [1]}), name), LazyFrameDP)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )


def test_does_not_take_dp_from_another_package():
    res = _run(
        """
        import warnings, polars as pl
        @pl.api.register_expr_namespace("dp")
        class Other:
            def __init__(self, expr): pass
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import dpframe
        print(type(pl.col("x").dp).__name__, type(pl.col("x").dpf).__name__)
        print([str(x.message) for x in w if x.category is dpframe.NamespaceConflictWarning])
        dpframe.register_namespace("dp", force=True)
        print(type(pl.col("x").dp).__name__)
        """
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "Other ExprDP"
    assert ".dpf" in lines[1] and "force=True" in lines[1]
    assert lines[2] == "ExprDP"


def test_import_pulls_in_no_heavy_module():
    """Import time is measured by benchmarks/bench_import.py; here, what it loads."""
    res = _run(
        """
        import sys
        import dpframe
        heavy = ("great_expectations", "matplotlib", "pandas", "scipy", "typer", "rich")
        print([m for m in heavy if m in sys.modules])
        """
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@pytest.mark.parametrize("frame", [pl.DataFrame({"x": [1]}), pl.LazyFrame({"x": [1]})])
def test_frame_namespace_methods_delegate(frame):
    g = frame.dp.group_by("x", margins=pl.DataFrame({"x": [1]}), accountant=dpframe.Accountant(1))
    assert isinstance(g, dpframe.GroupBy)


def test_every_namespace_method_takes_what_its_function_takes():
    """The veneer forwards: a method whose parameters drift from its function's (a new
    argument added to the function only) fails here, not in a user's job."""
    import inspect

    from dpframe.polars import namespace as ns

    forwards = {
        (ns.ExprDP, "laplace"): dpframe.laplace,
        (ns.ExprDP, "gaussian"): dpframe.gaussian,
        (ns.ExprDP, "truncated_laplace"): dpframe.truncated_laplace,
        (ns.ExprDP, "pram"): dpframe.pram.apply,
        (ns.LazyFrameDP, "group_by"): dpframe.group_by,
        (ns.DataFrameDP, "group_by"): dpframe.group_by,
    }
    for (cls, method), function in forwards.items():
        own = list(inspect.signature(getattr(cls, method)).parameters)[1:]  # self
        theirs = list(inspect.signature(function).parameters)[1:]  # the expr or frame
        assert own == theirs, f"{cls.__name__}.{method}: {own} != {theirs}"
