"""PRAM microdata under a person unit (issue 16): every row randomized, each at
``epsilon / max_rows``, the release charged ``epsilon`` for all of a person's rows.

The privacy claim is checked by brute force (every pair of a person's value vectors and
every output, with the matrix actually sampled) and by an empirical audit of the sampler;
the refusals (a person with more rows than charged for, a null person, ``.dp.pram`` on a
person ledger) spend nothing and write nothing.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.core.units import PrivacyUnit
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.jobs import load_spec, run
from dpframe.mechanisms.pram.plan import plan_pram

CATS = ["a", "b", "c"]
NAN, INF = float("nan"), float("inf")
NO_ID = (InvalidDataError, "person column 'pid' holds nulls, NaN or infinite values")


def _worst_loss(matrix: np.ndarray, rows: int) -> float:
    """max over a person's value vectors x, x' and outputs y of log P(y|x) / P(y|x')."""
    s = matrix.shape[0]
    worst = 0.0
    vectors = list(itertools.product(range(s), repeat=rows))
    for y in vectors:
        p = [math.prod(matrix[x[i], y[i]] for i in range(rows)) for x in vectors]
        worst = max(worst, math.log(max(p) / min(p)))
    return worst


@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"prior": "uniform"},
        {"prior": {"a": 0.7, "b": 0.2, "c": 0.1}},
        {"matrix": [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]},
    ],
)
def test_the_charge_covers_every_row_of_a_person_by_brute_force(rows, kwargs):
    unit = PrivacyUnit("pid", max_rows=rows)
    eps = 2.5 * rows if "matrix" in kwargs else 1.2
    plan = plan_pram("c", CATS, eps, unit=unit, **kwargs)
    charge = plan.charges[0]
    assert charge.unit == "pid" and charge.details["rows_per_person"] == rows
    loss = _worst_loss(plan.sampler.matrix, rows)
    assert loss <= charge.epsilon * (1 + 1e-12)
    # and the charge is not loose: each row gets (about) epsilon / rows, all of it used
    assert loss >= rows * plan.sampler.epsilon_actual * (1 - 1e-9)
    if "matrix" not in kwargs:
        assert charge.epsilon == eps and loss >= 0.99 * eps


def test_a_matrix_too_strong_for_a_persons_rows_is_refused():
    m = [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]  # epsilon log 8 a row
    plan_pram("c", CATS, 2.1, matrix=m)  # one row a person: fine
    with pytest.raises(InvalidParameterError, match="times 2 rows a person"):
        plan_pram("c", CATS, 2.1, matrix=m, unit=PrivacyUnit("pid", max_rows=2))
    no_eps = plan_pram("c", CATS, matrix=m, unit=PrivacyUnit("pid", max_rows=2))
    assert no_eps.charges[0].epsilon >= 2 * math.log(8)


def test_the_dp_prior_histogram_scales_its_sensitivity_by_a_persons_rows():
    plan = plan_pram("c", CATS, 1.0, prior="dp", unit=PrivacyUnit("pid", max_rows=4))
    prior, pram = plan.charges
    assert prior.details["sensitivity"] == 8 and prior.unit == pram.unit == "pid"
    assert prior.epsilon + pram.epsilon <= 1.0
    armed = plan.draw(np.array([50, 30, 20]), np.random.default_rng(0))
    assert 4 * armed.sampler.epsilon_actual <= pram.epsilon


def test_an_empirical_audit_of_a_person_with_max_rows_rows_finds_no_loss_above_epsilon():
    """A person's 2 rows all 'a' against all 'b': the released pairs' frequencies (2e5
    draws each) give a lower confidence bound on the privacy loss, which must not exceed
    the charge; the bound is loose by about 4 standard errors of each frequency."""
    eps, rows, n = 1.0, 2, 200_000
    plan = plan_pram("c", CATS, eps, unit=PrivacyUnit("pid", max_rows=rows))
    armed = plan.draw(None, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    freq = []
    for value in (0, 1):
        out = armed.randomize(np.full(n * rows, value), rng).reshape(n, rows)
        pair = out[:, 0] * len(CATS) + out[:, 1]
        freq.append(np.bincount(pair, minlength=len(CATS) ** 2) / n)
    p, q = freq
    se_p, se_q = np.sqrt(p * (1 - p) / n), np.sqrt(q * (1 - q) / n)
    lower = np.log(np.maximum(p - 4 * se_p, 1e-12) / (q + 4 * se_q))
    assert lower.max() <= plan.charges[0].epsilon
    # the audit has power: the pair (a, a) is about e^eps times likelier under all 'a'
    assert np.log(p[0] / q[0]) > 0.8 * eps


def _people() -> pl.DataFrame:
    return pl.DataFrame(
        {"pid": [1, 1, 2, 3, 3, 3], "c": ["a", "b", "a", "c", "c", "b"], "x": [1] * 6}
    )


def test_a_release_under_a_person_unit_charges_epsilon_once_and_writes_every_row(tmp_path):
    out = tmp_path / "micro.parquet"
    with dpframe.Accountant(epsilon=3.0, unit="pid", max_rows=3, max_groups=2) as acct:
        rel = dpframe.pram.release(_people(), [{"column": "c", "epsilon": 1.0, "categories": CATS}])
        assert "up to 3 rows a person" in rel.summarize()["note"][0]
        rel.write(out)
    assert acct.spent.epsilon == 1.0
    (entry,) = acct.ledger
    assert entry.details["unit"] == "pid" and entry.details["rows_per_person"] == 3
    written = pl.read_parquet(out)
    assert written.columns == ["c"] and written.height == 6


def test_a_person_unit_on_a_record_ledger_and_its_bounds_given_on_the_release(tmp_path):
    acct = dpframe.Accountant(epsilon=3.0)
    cols = [{"column": "c", "epsilon": 1.0, "categories": CATS}]
    rel = dpframe.pram.release(_people(), cols, accountant=acct, unit="pid", max_rows=3)
    rel.write(tmp_path / "m.parquet")
    assert acct.ledger[0].details["unit"] == "pid"
    with pytest.raises(InvalidParameterError, match="give the person column too"):
        dpframe.pram.release(_people(), cols, accountant=acct, max_rows=3)


@pytest.mark.parametrize(
    ("frame", "error", "match"),
    [
        (_people(), InvalidDataError, "has 3 rows, more than max_rows=2"),
        (_people().with_columns(pid=pl.lit(None, pl.Int64)), InvalidDataError, "holds nulls"),
        (_people().drop("pid"), InvalidParameterError, "not in the data"),
        # NaN ids were one person with 2 rows (accepted): NaN is no one's id (issue 31)
        (_people().with_columns(pid=pl.Series([1.0, 1.0, 2.0, NAN, NAN, 3.0])), *NO_ID),
        (_people().with_columns(pid=pl.Series([1.0, 1.0, 2.0, INF, -INF, 3.0])), *NO_ID),
        (_people().with_columns(pid=pl.Series([[1]] * 6)), InvalidDataError, "nested"),
    ],
    ids=["too many rows", "null id", "no id column", "NaN ids", "infinite ids", "list ids"],
)
def test_refusals_spend_nothing_and_write_nothing(tmp_path, frame, error, match):
    out = tmp_path / "micro.parquet"
    with dpframe.Accountant(epsilon=3.0, unit="pid", max_rows=2) as acct:
        rel = dpframe.pram.release(frame, [{"column": "c", "epsilon": 1.0, "categories": CATS}])
        with pytest.raises(error, match=match):
            rel.write(out)
    assert acct.spent.epsilon == 0 and acct.ledger == () and not out.exists()


def test_a_pram_expression_on_a_person_ledger_is_refused_with_the_way_out():
    acct = dpframe.Accountant(epsilon=3.0, unit="pid", max_rows=2)
    with acct, pytest.raises(InvalidParameterError, match=r"dpframe\.pram\.release"):
        pl.col("c").dp.pram(epsilon=1.0, categories=CATS)
    assert acct.ledger == ()


SPEC = """
version = 1

[input]
path = "people.parquet"

[privacy]
unit = "record"
budget = {{ epsilon = 2.0 }}
ledger = "ledger.db"

[output]
folder = "released"

[[release]]
name = "microdata"
kind = "pram"
unit = "pid"
max_rows = {max_rows}
columns = [{{ column = "c", epsilon = 1.0, categories = ["a", "b", "c"] }}]
"""


def test_a_spec_release_under_a_person_unit(tmp_path: Path):
    _people().write_parquet(tmp_path / "people.parquet")
    spec = tmp_path / "release.toml"
    spec.write_text(SPEC.format(max_rows=3))
    result = run(load_spec(spec))
    entry = dpframe.Accountant.open(tmp_path / "ledger.db").ledger[0]
    assert entry.details["unit"] == "pid" and entry.details["rows_per_person"] == 3
    assert result is not None
    spec.write_text(SPEC.format(max_rows=2))
    with pytest.raises(InvalidDataError, match="more than max_rows=2"):
        run(load_spec(spec))
    assert dpframe.Accountant.open(tmp_path / "ledger.db").spent.epsilon == 1.0
