"""The Python API and the release spec refuse the same mistake with the same words.

Each bad input is given to the Python call (``dpframe.group_by(...).agg(...)``,
``dpframe.proportions``, ``dpframe.covariance_matrix``, ``dpframe.pram.release``, an
:class:`~dpframe.Accountant`'s budget) and to the equivalent spec (TOML text, loaded with
:func:`dpframe.jobs.load_spec` and planned with :func:`dpframe.jobs.plan`). Both refuse
with an error of the same class (the spec's :class:`~dpframe.jobs.SpecError` is an
:class:`~dpframe.errors.InvalidParameterError`) and the same sentence: the spec adds only
where in the TOML (the release's name and the field's path) before it. Where a message
ends with its fix, the fix is in the entry point's words (:mod:`dpframe.core.advice`:
``max_rows=...`` for Python, ``max_rows = ...`` for a spec): the Python call is made a
second time under the spec's entry for the comparison. Neither spends nor writes
anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dpframe
from dpframe.core.advice import entry
from dpframe.errors import InvalidParameterError
from dpframe.jobs import load_spec, plan

FRAME = pl.DataFrame(
    {
        "region": ["North", "South", "North", "South"],
        "income": [10.0, 20.0, 30.0, 40.0],
        "age": [30.0, 40.0, 50.0, 60.0],
        "band": ["a", "b", "a", "b"],
        "person": [1, 2, 3, 4],
    }
)
MARGINS = pl.DataFrame({"region": ["North", "South"]})

HEAD = """
version = 1
[input]
path = "input.parquet"
[output]
folder = "out"
[margins.region]
values = {{ region = ["North", "South"] }}
[privacy]
ledger = "ledger.db"
{privacy}
[[release]]
name = "r"
{release}
"""
BUDGET = "budget = { epsilon = 10.0 }"


def grouped(statistic: str, **extra: str) -> str:
    """A grouped release of one statistic (TOML), with ``extra`` release fields."""
    fields = "".join(f"{k} = {v}\n" for k, v in extra.items())
    return (
        f'kind = "grouped"\nby = ["region"]\nmargins = "region"\n{fields}statistics = [{statistic}]'
    )


def py_grouped(stat: Callable[[], Any], **extra: Any) -> Callable[[Any], Any]:
    return lambda acc: (
        dpframe.group_by(FRAME, "region", margins=MARGINS, accountant=acc, **extra)
        .agg(stat())
        .collect()
    )


def py_budget(**budget: Any) -> Callable[[Any], Any]:
    return lambda acc: dpframe.Accountant(**budget)


def pram_case(**setting: Any) -> tuple[Callable[[Any], Any], str, str]:
    """A PRAM release of ``band`` with ``setting``: the Python call, [privacy], the TOML."""
    entry = {"column": "band", "epsilon": 1, "categories": ["a", "b"], **setting}
    toml = ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry.items())
    return (
        lambda acc: dpframe.pram.release(FRAME, [entry], accountant=acc).collect(),
        BUDGET,
        f'kind = "pram"\ncolumns = [{{ {toml} }}]',
    )


#: name -> (the Python call, given an accountant; the spec's [privacy] lines; its release)
CASES: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "epsilon zero": (
        py_grouped(lambda: dpframe.agg.count(epsilon=0)),
        BUDGET,
        grouped("{ stat = 'count', epsilon = 0 }"),
    ),
    "epsilon negative": (
        py_grouped(lambda: dpframe.agg.mean("income", lower=0, upper=100, epsilon=-1)),
        BUDGET,
        grouped("{ stat = 'mean', column = 'income', lower = 0, upper = 100, epsilon = -1 }"),
    ),
    "epsilon nan": (
        py_grouped(lambda: dpframe.agg.count(epsilon=math.nan)),
        BUDGET,
        grouped("{ stat = 'count', epsilon = nan }"),
    ),
    "epsilon inf": (
        lambda acc: dpframe.proportions(
            FRAME, "band", epsilon=math.inf, n=4, categories=["a", "b"], accountant=acc
        ).collect(),
        BUDGET,
        'kind = "proportions"\ncolumn = "band"\ncategories = ["a", "b"]\nepsilon = inf',
    ),
    "epsilon a string": (
        py_grouped(lambda: dpframe.agg.count(epsilon="0.5")),
        BUDGET,
        grouped("{ stat = 'count', epsilon = '0.5' }"),
    ),
    "lower >= upper": (
        py_grouped(lambda: dpframe.agg.mean("income", lower=100, upper=0, epsilon=1)),
        BUDGET,
        grouped("{ stat = 'mean', column = 'income', lower = 100, upper = 0, epsilon = 1 }"),
    ),
    "lower nan": (
        py_grouped(lambda: dpframe.agg.sum("income", lower=math.nan, upper=100, epsilon=1)),
        BUDGET,
        grouped("{ stat = 'sum', column = 'income', lower = nan, upper = 100, epsilon = 1 }"),
    ),
    "quantile q not increasing": (
        py_grouped(
            lambda: dpframe.agg.quantile("income", [0.5, 0.25], lower=0, upper=100, epsilon=1)
        ),
        BUDGET,
        grouped(
            "{ stat = 'quantile', column = 'income', q = [0.5, 0.25], lower = 0, upper = 100, "
            "epsilon = 1 }"
        ),
    ),
    "quantile q of 1": (
        py_grouped(lambda: dpframe.agg.quantile("income", [1.0], lower=0, upper=100, epsilon=1)),
        BUDGET,
        grouped(
            "{ stat = 'quantile', column = 'income', q = [1.0], lower = 0, upper = 100, "
            "epsilon = 1 }"
        ),
    ),
    "median resolution negative": (
        py_grouped(
            lambda: dpframe.agg.median("income", lower=0, upper=100, epsilon=1, resolution=-1)
        ),
        BUDGET,
        grouped(
            "{ stat = 'median', column = 'income', lower = 0, upper = 100, epsilon = 1, "
            "resolution = -1 }"
        ),
    ),
    "median lower >= upper": (
        py_grouped(lambda: dpframe.agg.median("income", lower=100, upper=0, epsilon=1)),
        BUDGET,
        grouped("{ stat = 'median', column = 'income', lower = 100, upper = 0, epsilon = 1 }"),
    ),
    "unknown mechanism": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1, mechanism="laplace2")),
        BUDGET,
        grouped("{ stat = 'count', epsilon = 1, mechanism = 'laplace2' }"),
    ),
    "unknown method": (
        lambda acc: dpframe.proportions(
            FRAME, "band", epsilon=1, n=4, categories=["a", "b"], method="clip", accountant=acc
        ).collect(),
        BUDGET,
        'kind = "proportions"\ncolumn = "band"\ncategories = ["a", "b"]\nepsilon = 1\n'
        'method = "clip"',
    ),
    "unknown strategy": (
        lambda acc: dpframe.proportions(
            FRAME, "band", epsilon=1, n=4, categories=["a", "b"], strategy="x", accountant=acc
        ).collect(),
        BUDGET,
        'kind = "proportions"\ncolumn = "band"\ncategories = ["a", "b"]\nepsilon = 1\n'
        'strategy = "x"',
    ),
    "unknown nulls": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1), nulls="ignore"),
        BUDGET,
        grouped("{ stat = 'count', epsilon = 1 }", nulls='"ignore"'),
    ),
    "unknown unknown_keys": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1), unknown_keys="keep"),
        BUDGET,
        grouped("{ stat = 'count', epsilon = 1 }", unknown_keys='"keep"'),
    ),
    "unknown neighbours": (
        lambda acc: dpframe.Accountant(epsilon=1, neighbours="swap"),
        'neighbours = "swap"\n' + BUDGET,
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "unknown accounting": (
        py_budget(epsilon=1, delta=1e-6, accounting="renyi"),
        "budget = { epsilon = 1.0, delta = 1e-6, accounting = 'renyi' }",
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "max_rows 0": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1), unit="person", max_rows=0, max_groups=1),
        'unit = "person"\nmax_rows = 0\nmax_groups = 1\n' + BUDGET,
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "max_rows missing for a person unit": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1), unit="person", max_groups=1),
        'unit = "person"\nmax_groups = 1\n' + BUDGET,
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "public size n = 0": (
        lambda acc: dpframe.proportions(
            FRAME, "band", epsilon=1, n=0, categories=["a", "b"], accountant=acc
        ).collect(),
        BUDGET,
        'kind = "proportions"\ncolumn = "band"\ncategories = ["a", "b"]\nepsilon = 1\nn = 0',
    ),
    "unknown diagonal": pram_case(diagonal="max"),
    "bounds without a person": (
        lambda acc: dpframe.Accountant(epsilon=1, max_rows=2),
        "max_rows = 2\n" + BUDGET,
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "pram column twice": (
        lambda acc: dpframe.pram.release(
            FRAME, [{"column": "band", "epsilon": 1, "categories": ["a", "b"]}] * 2, accountant=acc
        ).collect(),
        BUDGET,
        'kind = "pram"\ncolumns = [{ column = "band", epsilon = 1, categories = ["a", "b"] }, '
        '{ column = "band", epsilon = 1, categories = ["a", "b"] }]',
    ),
    "rho and epsilon both": (
        py_budget(epsilon=1, rho=0.5, delta=1e-6),
        "budget = { epsilon = 1.0, rho = 0.5, delta = 1e-6 }",
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "zcdp budget without delta": (
        py_budget(rho=0.5),
        "budget = { rho = 0.5 }",
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "budget negative": (
        py_budget(epsilon=-2),
        "budget = { epsilon = -2.0 }",
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "budget delta >= 1": (
        py_budget(epsilon=1, delta=1.0),
        "budget = { epsilon = 1.0, delta = 1.0 }",
        grouped("{ stat = 'count', epsilon = 1 }"),
    ),
    "sigma without gaussian": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1, sigma=2.0)),
        BUDGET,
        grouped("{ stat = 'count', epsilon = 1, sigma = 2.0 }"),
    ),
    "gaussian with epsilon": (
        py_grouped(lambda: dpframe.agg.count(epsilon=1, mechanism="gaussian")),
        BUDGET,
        grouped("{ stat = 'count', epsilon = 1, mechanism = 'gaussian' }"),
    ),
    "categories with one value": (
        lambda acc: dpframe.proportions(
            FRAME, "band", epsilon=1, n=4, categories=["a"], accountant=acc
        ).collect(),
        BUDGET,
        'kind = "proportions"\ncolumn = "band"\ncategories = ["a"]\nepsilon = 1',
    ),
    "categories repeated": pram_case(categories=["a", "a", "b"]),
    "unknown prior": pram_case(prior="census"),
    "unknown design": pram_case(design="best"),
    "covariance bounds of the wrong length": (
        lambda acc: dpframe.covariance_matrix(
            FRAME, ["income", "age"], [(0, 100)], epsilon=1, n=4, accountant=acc
        ).collect(),
        BUDGET,
        'kind = "covariance"\ncolumns = ["income", "age"]\nbounds = [[0, 100]]\nepsilon = 1',
    ),
    "covariance lower >= upper": (
        lambda acc: dpframe.covariance_matrix(
            FRAME, ["income", "age"], [(0, 100), (5, 5)], epsilon=1, n=4, accountant=acc
        ).collect(),
        BUDGET,
        'kind = "covariance"\ncolumns = ["income", "age"]\nbounds = [[0, 100], [5, 5]]\n'
        "epsilon = 1",
    ),
    "unknown repair": (
        lambda acc: dpframe.covariance_matrix(
            FRAME,
            ["income", "age"],
            [(0, 100), (0, 100)],
            epsilon=1,
            n=4,
            repair="psd",
            accountant=acc,
        ).collect(),
        BUDGET,
        'kind = "covariance"\ncolumns = ["income", "age"]\nbounds = [[0, 100], [0, 100]]\n'
        'epsilon = 1\nrepair = "psd"',
    ),
}


#: the cases whose message ends with a fix, worded for the entry point (a Python argument,
#: a spec's field): the rule's sentence is the same
ADVISED = {
    "max_rows missing for a person unit",
    "sigma without gaussian",
    "gaussian with epsilon",
    "zcdp budget without delta",
    "bounds without a person",
}


def _refusal(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(InvalidParameterError) as caught:
        call()
    return caught.value


def _in_where(spec_message: str, sentence: str) -> bool:
    """``sentence`` is one line of the spec's message, with only where in the TOML (a
    location ending in ': ') before it."""
    for line in spec_message.splitlines():
        line = line.strip().removeprefix("- ")
        if line == sentence:
            return True
        if line.endswith(sentence):
            where = line[: -len(sentence)]
            if where.endswith(": ") and "must" not in where:
                return True
    return False


def test_at_least_twenty_bad_inputs():
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_and_spec_refuse_with_the_same_sentence(case: str, tmp_path: Path) -> None:
    python, privacy, release = CASES[case]
    accountant = dpframe.Accountant(epsilon=10.0)
    py = _refusal(lambda: python(accountant))
    with entry("spec"):  # the same call, its advice worded for a spec (core/advice)
        advised = _refusal(lambda: python(accountant))
    assert type(advised) is type(py)
    assert (str(advised) == str(py)) == (case not in ADVISED), (str(py), str(advised))
    assert accountant.spent.epsilon == 0
    FRAME.write_parquet(tmp_path / "input.parquet")
    path = tmp_path / "spec.toml"
    path.write_text(HEAD.format(privacy=privacy, release=release))
    spec = _refusal(lambda: plan(load_spec(path)))
    assert isinstance(spec, type(py)), (type(spec), type(py))
    sentence = str(advised)
    assert _in_where(str(spec), sentence), f"python: {py}\nspec:   {spec}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.parquet", "spec.toml"]


# -- everything the Python API takes, the spec takes ----------------------------------------

BOTH = """
version = 1
[input]
path = "input.parquet"
[output]
folder = "out"
[margins.north]
values = { region = ["North"] }
[privacy]
ledger = "ledger.db"
seed = 7
budget = { epsilon = 10.0 }
[[release]]
name = "north"
kind = "grouped"
by = ["region"]
margins = "north"
unknown_keys = "drop"
statistics = [{ stat = "count", epsilon = 1 }]
[[release]]
name = "micro"
kind = "pram"
public = ["region", "income"]
columns = [{ column = "band", epsilon = 1, categories = ["a", "b"], prior = "dp" }]
"""


def _python_twins(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    python_grouped = (
        dpframe.group_by(FRAME, "region", margins=MARGINS.head(1), unknown_keys="drop")
        .agg(dpframe.agg.count(epsilon=1))
        .collect()
    )
    python_micro = dpframe.pram.release(
        FRAME,
        [{"column": "band", "epsilon": 1, "categories": ["a", "b"], "prior": "dp"}],
        keep=["region", "income"],
    ).write(folder / "python_micro.parquet")
    python_micro = pl.read_parquet(folder / "python_micro.parquet")
    return python_grouped, python_micro


def test_the_spec_takes_pram_public_and_grouped_unknown_keys(tmp_path: Path) -> None:
    """``dpframe.pram.release(keep=...)`` is the spec's ``public``, its ``prior="dp"`` the
    spec's ``prior = "dp"`` (refused by the spec before), and
    ``group_by(unknown_keys="drop")`` its ``unknown_keys``: both run from a spec and give
    the Python call's columns and groups."""
    from dpframe.jobs import run

    FRAME.write_parquet(tmp_path / "input.parquet")
    (tmp_path / "spec.toml").write_text(BOTH)
    run(load_spec(tmp_path / "spec.toml"), progress=False)
    grouped_out = pl.read_parquet(tmp_path / "out" / "north.parquet")
    micro_out = pl.read_parquet(tmp_path / "out" / "micro.parquet")
    with dpframe.Accountant(epsilon=10.0) as python_accountant:
        python_grouped, python_micro = _python_twins(tmp_path)
    spent = dpframe.Accountant.open(tmp_path / "ledger.db").spent.epsilon
    assert spent == python_accountant.spent.epsilon == 2.0
    assert grouped_out["region"].to_list() == python_grouped["region"].to_list() == ["North"]
    assert set(micro_out.columns) == set(python_micro.columns) == {"band", "region", "income"}
    assert micro_out["income"].to_list() == FRAME["income"].to_list()  # public: as it is
    # and "error" (the default) refuses the same records, before anything is spent
    (tmp_path / "spec.toml").write_text(BOTH.replace('unknown_keys = "drop"\n', ""))
    spent = dpframe.Accountant.open(tmp_path / "ledger.db").spent.epsilon
    with pytest.raises(dpframe.errors.DPFrameError, match="not in margins; add those groups"):
        run(load_spec(tmp_path / "spec.toml"), progress=False)
    assert dpframe.Accountant.open(tmp_path / "ledger.db").spent.epsilon == spent


def test_the_spec_takes_the_public_sizes_the_functions_take(tmp_path: Path) -> None:
    """``dpframe.proportions(n=1)`` is taken (one record), so the spec takes ``n = 1`` too
    (it asked for n >= 2, the covariance's rule, before)."""
    FRAME.head(1).write_parquet(tmp_path / "input.parquet")
    path = tmp_path / "spec.toml"
    release = 'kind = "proportions"\ncolumn = "band"\ncategories = ["a", "b"]\nepsilon = 1\nn = 1'
    path.write_text(HEAD.format(privacy=BUDGET, release=release))
    assert load_spec(path).release[0].n == 1
    with dpframe.Accountant(epsilon=1.0):
        dpframe.proportions(FRAME.head(1), "band", epsilon=1, n=1, categories=["a", "b"])
