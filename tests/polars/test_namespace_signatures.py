"""One signature per operation: each ``.dp`` / ``.dpf`` method is its typed function with the
receiver bound -- the same parameter names, kinds, defaults, annotations and return -- and
every operation follows one rule for what may be positional (docs/architecture.md)."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.polars.namespace import DataFrameDP, ExprDP, LazyFrameDP
from dpframe.risk.frame import drha, drha_expr

EXPR, FRAME, LAZY = pl.col("x"), pl.DataFrame({"x": [1]}), pl.LazyFrame({"x": [1]})
FRAME_FORWARDS = {
    "group_by": dpframe.group_by,
    "quantile": dpframe.quantile,
    "median": dpframe.median,
    "covariance_matrix": dpframe.covariance_matrix,
    "proportions": dpframe.proportions,
    "release_keys": dpframe.release_keys,
    "drha": drha,
    "write_parquet": dpframe.write_parquet,
}
#: every public method of each namespace, and the function it is (None: no function of
#: its own -- polars' with_columns / select run through dpframe.collect)
METHODS: dict[type, dict[str, Any]] = {
    ExprDP: {
        "laplace": dpframe.laplace,
        "gaussian": dpframe.gaussian,
        "truncated_laplace": dpframe.truncated_laplace,
        "pram": dpframe.pram.apply,
        "drha": drha_expr,
    },
    DataFrameDP: {**FRAME_FORWARDS, "with_columns": None, "select": None},
    LazyFrameDP: {
        **FRAME_FORWARDS,
        "collect": dpframe.collect,
        "sink_parquet": dpframe.sink_parquet,
    },
}
RECEIVERS = {ExprDP: EXPR, DataFrameDP: FRAME, LazyFrameDP: LAZY}
OPERATIONS = [
    (cls, name, function)
    for cls, methods in METHODS.items()
    for name, function in methods.items()
    if function is not None
]
IDS = [f"{cls.__name__}.{name}" for cls, name, _ in OPERATIONS]
#: the rule's one exception: PRAM's epsilon is optional (a matrix= replaces it) and
#: positional, as every PRAM example since the first release writes it (.dp.pram(1.0, ...))
OPTIONAL_POSITIONAL = {(dpframe.pram.apply, "epsilon")}


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


@pytest.mark.parametrize("cls", list(METHODS), ids=lambda c: c.__name__)
def test_every_method_is_listed_with_its_function(cls):
    """A new method must say which function it is (or that it has none)."""
    assert _public(cls) == set(METHODS[cls])


@pytest.mark.parametrize("name", ["dp", "dpf"])
@pytest.mark.parametrize(("cls", "method", "function"), OPERATIONS, ids=IDS)
def test_the_method_has_the_function_signature_minus_the_receiver(cls, method, function, name):
    bound = getattr(getattr(RECEIVERS[cls], name), method)
    own, theirs = inspect.signature(bound), inspect.signature(function)
    receiver, *rest = theirs.parameters.values()
    assert receiver.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for mine, its in zip(own.parameters.values(), rest, strict=True):
        assert (mine.name, mine.kind, mine.default, mine.annotation) == (
            its.name,
            its.kind,
            its.default,
            its.annotation,
        ), f"{cls.__name__}.{method}: {mine} != {its}"
    assert own.return_annotation == theirs.return_annotation


@pytest.mark.parametrize(("cls", "method", "function"), OPERATIONS, ids=IDS)
def test_what_has_a_default_is_keyword_only(cls, method, function):
    """The rule for positional vs keyword-only, the same in every operation of the
    namespaces: positionally only the receiver and what every call must give (what is
    released: keys, columns, bounds, a path; the bounded release's epsilon, lower, upper
    and sensitivity); every parameter with a default is keyword-only."""
    positional_with_default = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        and p.default is not inspect.Parameter.empty
        and (function, p.name) not in OPTIONAL_POSITIONAL
    ]
    assert not positional_with_default, f"{cls.__name__}.{method}: {positional_with_default}"
    assert not [
        p for p in inspect.signature(function).parameters.values() if p.kind is p.VAR_POSITIONAL
    ]


def test_a_method_gives_what_its_function_gives():
    """Forwarding, not a copy: the same arguments, the same seeded release."""
    stats = pl.DataFrame({"x": np.linspace(1.0, 2.0, 5)})
    args: dict[str, Any] = {"sensitivity": 0.1, "composition": "parallel", "seed": 7}
    with pytest.warns(UserWarning), dpframe.Accountant(epsilon=2.0) as acct:
        by_method = stats.select(pl.col("x").dpf.truncated_laplace(0.5, 1.0, 2.0, **args))
        by_function = stats.select(dpframe.truncated_laplace("x", 0.5, 1.0, 2.0, **args))
    assert by_method.equals(by_function)
    assert acct.spent.epsilon == 1.0


def test_a_method_refuses_what_its_function_refuses():
    with pytest.raises(TypeError, match="positional"):
        EXPR.dp.laplace(1.0, sensitivity=1.0, composition="parallel")  # type: ignore[misc]
    with pytest.raises(TypeError, match="frame"):
        LAZY.dp.group_by(frame=LAZY, keys="x", margins=None)  # type: ignore[call-arg]
