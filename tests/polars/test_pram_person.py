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


# -- prior="dp": every entry point refuses an impossible split before the charge -----------


def _dp_entry(entry: str, frame: pl.DataFrame, acct, out: Path, cfg: dict) -> pl.DataFrame:
    """Run one ``prior="dp"`` release of column ``c`` through ``entry``; the output."""
    kw = {k: cfg[k] for k in ("design", "estimable", "diagonal")}
    if entry.startswith("release"):
        cols = [
            {
                "column": "c",
                "epsilon": cfg["epsilon"],
                "categories": cfg["cats"],
                "prior": "dp",
                **kw,
            }
        ]
        unit = {"unit": "pid", "max_rows": 2} if entry == "release by person" else {}
        dpframe.pram.release(frame, cols, accountant=acct, **unit).write(out)
        return pl.read_parquet(out)
    expr = pl.col("c").dp.pram(
        cfg["epsilon"],
        categories=cfg["cats"],
        prior="dp",
        prior_share=cfg["share"],
        accountant=acct,
        **kw,
    )
    query = frame.lazy().select(expr)
    if entry == "collect":
        return dpframe.collect(query)
    if entry == "dpf.collect":
        return query.dpf.collect()
    if entry == "with_columns":
        return frame.select("c").dpf.with_columns(expr)
    dpframe.sink_parquet(query, out)
    return pl.read_parquet(out)


ENTRIES = ["collect", "dpf.collect", "with_columns", "sink_parquet", "release", "release by person"]


def _dp_config(rng: np.random.Generator) -> dict:
    """A random (epsilon, split, categories, design), half of them near a limit of the
    split: the prior's share near its largest (4 for 2 rows of sensitivity, 8 for 4) or
    the design's near 12, or either near the smallest (1e-9)."""
    share = float(rng.uniform(0.01, 0.99))
    near = rng.integers(4)
    if near == 0:
        eps = float(np.exp(rng.uniform(np.log(1e-10), np.log(100))))
    elif near == 1:  # the histogram's share near 4 (or 8 under a 2-row person unit)
        eps = float(rng.choice([4.0, 8.0])) / share * float(rng.uniform(0.8, 1.2))
    elif near == 2:  # the design's share near 12 (per row under a person unit)
        eps = float(rng.choice([12.0, 24.0])) / (1 - share) * float(rng.uniform(0.8, 1.2))
    else:  # the smallest epsilons
        eps = float(rng.choice([1e-9, 2e-9])) / min(share, 1 - share) * float(rng.uniform(0.5, 2))
    design = str(rng.choice(["auto", "paper", "global"]))
    return {
        "epsilon": eps,
        "share": share,
        "cats": [f"k{j}" for j in range(int(rng.choice([2, 3, 5, 8])))],
        "design": design,
        "estimable": False if design == "global" else bool(rng.integers(2)),
        "diagonal": "optimal" if design == "global" else str(rng.choice(["optimal", "dominant"])),
    }


def test_prior_dp_is_refused_before_the_charge_or_released_on_every_entry_point(tmp_path):
    """Issue 31: a prior='dp' split was refused by dpframe.collect before the charge, but
    configurations like it were reported to raise after the charge on other entry points.
    The plan itself now refuses every split its draw could not run (the histogram's share
    beyond its calibration, the design's outside [1e-9, 12]) and the draw falls back to
    k-RR when a design fails, so on every entry point and for 150 random (epsilon,
    split, categories, design): refused with nothing spent and nothing written, or
    released (every row, declared categories) within the epsilon charged."""
    rng = np.random.default_rng(31)
    outcomes = {"refused": 0, "released": 0}
    for i in range(150):
        cfg = _dp_config(rng)
        entry = ENTRIES[i % len(ENTRIES)]
        n = int(rng.choice([1, 7, 40]))
        frame = pl.DataFrame({"c": rng.choice(cfg["cats"], n).tolist(), "pid": np.arange(n) // 2})
        acct = dpframe.Accountant(epsilon=1000.0)
        out = tmp_path / f"out{i}.parquet"
        try:
            released = _dp_entry(entry, frame, acct, out, cfg)
        except dpframe.errors.DPFrameError as exc:
            assert acct.ledger == (), f"{entry} {cfg}: charged, then raised {exc}"
            assert not out.exists()
            outcomes["refused"] += 1
            continue
        assert acct.ledger, (entry, cfg)
        assert float(acct.spent.epsilon) <= cfg["epsilon"] * (1 + 1e-12)
        assert released.height == n
        assert set(released["c"].to_list()) <= set(cfg["cats"])
        outcomes["released"] += 1
    assert min(outcomes.values()) >= 20, outcomes  # both outcomes are exercised


@pytest.mark.parametrize(
    ("epsilon", "share", "match"),
    [
        (10.0, 0.5, "the prior's share cannot be calibrated"),  # 5 for the histogram: > 4
        (3e-9, 0.3, "the prior's share cannot be calibrated"),  # 9e-10: too small
        (30.0, 0.1, "a design epsilon of 27"),  # 27 for the design: > 12
    ],
)
def test_an_impossible_dp_prior_split_is_refused_by_the_plan_itself(epsilon, share, match):
    """The plan refuses (mechanisms/pram/plan.py), so every entry point does so before
    it reads data or charges: the expression, pram.release, and the plan alone (before,
    the histogram's calibration failed only when the runner computed the charges)."""
    with pytest.raises(InvalidParameterError, match=match):
        plan_pram("c", CATS, epsilon, prior="dp", prior_share=share)
    with pytest.raises(InvalidParameterError, match="prior='dp' splits"):
        pl.col("c").dp.pram(epsilon, categories=CATS, prior="dp", prior_share=share)


def test_after_the_charge_a_failing_design_falls_back_to_k_rr(monkeypatch):
    """The draw of a prior='dp' plan runs after the charge: if every design fails for the
    prior drawn, k-RR (which cannot fail for a planned epsilon) is used and recorded."""
    from dpframe.mechanisms.pram import plan as pram_plan

    def fail(*args, **kwargs):
        raise RuntimeError("no design")

    monkeypatch.setattr(pram_plan, "paper_design", fail)
    monkeypatch.setattr(pram_plan, "_plan_auto", fail)
    plan = plan_pram("c", CATS, 2.0, prior="dp")
    armed = plan.draw(np.array([3, 1, 0]), np.random.default_rng(0))
    assert "k-RR used" in armed.record["fallback"]
    assert armed.sampler.epsilon_actual <= plan.row_epsilon
