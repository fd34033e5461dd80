"""Private bounds for quantiles (issue 34): ``lower="auto"`` / ``upper="auto"`` on a
quantile or median. The first pass (the means' ApproxBounds-style pass) is planned and
shown before anything is spent, charged before it draws; the candidates are then 1000
equal bins of the bounds it found, which the ledger, provenance and report record.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidParameterError
from dpframe.core.constraints import AUTO_BOUNDS_SHARE
from dpframe.jobs import plan, run
from dpframe.mechanisms.private_bounds import BoundsPlan, bounds_grid
from dpframe.mechanisms.quantile import uniform_grid
from tests.polars.test_private_bounds import _spec

EDGES = bounds_grid().edges
MARGINS = pl.DataFrame({"g": ["a", "b", "c"]})


def frame(n: int = 6000, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"g": rng.choice(["a", "b"], n), "x": rng.normal(50.0, 10.0, n)})


def grouped(df: pl.DataFrame, acct: Accountant, *stats: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpframe.group_by(df, "g", margins=MARGINS, accountant=acct, seed=3).agg(*stats)


def quartiles(**kw: object) -> object:
    return dpframe.agg.quantile("x", lower="auto", upper="auto", epsilon=1.0, **kw)


def test_the_pass_is_its_own_line_of_the_summary_and_nothing_is_spent():
    acct = Accountant(epsilon=2.0)
    table = grouped(frame(), acct, quartiles()).summarize()
    rows = table.select("statistic", "mechanism", "epsilon").rows()
    assert rows == [
        ("x_quantile:bounds", "bounds_histogram", pytest.approx(AUTO_BOUNDS_SHARE)),
        ("x_quantile", "exponential", pytest.approx(1 - AUTO_BOUNDS_SHARE)),
    ]
    assert "lower and upper bound of x" in table["note"][0]
    assert acct.spent.epsilon == 0 and not acct.ledger


def test_charged_before_drawn_found_bounds_recorded_and_quantiles_inside(monkeypatch):
    acct = Accountant(epsilon=2.0)
    rel = grouped(frame(), acct, quartiles(bounds_epsilon=0.25))
    spent_at_draw = []
    draw = BoundsPlan.draw

    def watched(self, exact, rng):
        spent_at_draw.append(acct.spent.epsilon)
        return draw(self, exact, rng)

    monkeypatch.setattr(BoundsPlan, "draw", watched)
    out = rel.collect()
    assert spent_at_draw == [pytest.approx(0.25)]  # the pass was charged before it drew
    assert [e.mechanism for e in acct.ledger] == ["bounds_histogram", "exponential"]
    assert [e.epsilon for e in acct.ledger] == pytest.approx([0.25, 0.75])
    lo, hi = rel.bounds_found["x_quantile"]["x"]
    assert lo in EDGES and hi in EDGES and lo < 20 < 80 < hi  # bin edges around the data
    main = acct.ledger[1].details
    assert main["bounds"] == "auto" and main["bounds_found"] == {"x": [lo, hi]}
    assert main["bins"] == 1000  # the candidates: 1000 equal bins of the bounds found
    values = out.select("x_q25", "x_q50", "x_q75").to_numpy()
    assert ((values >= lo) & (values <= hi)).all()
    assert (np.diff(values, axis=1) >= 0).all()  # monotone in q, the empty group too
    assert np.isin(values, uniform_grid(lo, hi).edges).all()


def test_the_whole_frame_median_and_the_namespace_find_their_bounds():
    df = frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Accountant(epsilon=2.0) as acct:
            rel = dpframe.median(df, "x", lower=0, upper="auto", epsilon=0.5, seed=1)
            value = rel.collect()["x_median"].item()
            lazy = df.lazy().dp.quantile("x", q=[0.1, 0.9], lower="auto", upper=100, epsilon=0.5)
            table = lazy.collect()
    lo, hi = rel.bounds_found["x_median"]["x"]
    assert lo == 0.0 and hi in EDGES and lo <= value <= hi
    assert lazy.bounds_found["x_quantile"]["x"][1] == 100.0
    assert table["x_q10"].item() <= table["x_q90"].item()
    assert acct.spent.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: quartiles(resolution=0.5), "resolution: not offered with 'auto' bounds"),
        (
            lambda: dpframe.agg.median("x", lower=0, upper="auto", epsilon=1.0, bounds_epsilon=1),
            "bounds_epsilon must be below",
        ),
        (
            lambda: dpframe.agg.median("x", lower=0, upper=1, epsilon=1.0, bounds_epsilon=0.1),
            "bounds_epsilon: 'x_median' has no bound set to 'auto'",
        ),
        (lambda: dpframe.agg.median("x", lower="atuo", upper=1, epsilon=1.0), "lower must be"),
    ],
)
def test_bad_input_is_refused_by_name(make, match):
    with pytest.raises(InvalidParameterError, match=match):
        make()


def test_the_auto_bounds_median_is_as_accurate_as_with_the_true_bounds():
    """Normal(50, 10), n = 20000, epsilon = 2. Each release's median misses rank n/2 by at
    most its stated rank error (``accuracy()``, 95 %) plus one bin of its grid (a value
    is a grid edge; rows inside a bin are not counted by the bound): that bin holds at
    most ``n * step * phi(0) / sigma`` rows. Both bounds are of the same size, so the
    auto release's error is comparable to the one with the true bounds [0, 100]."""
    n, sigma = 20000, 10.0
    x = np.random.default_rng(7).normal(50.0, sigma, n)
    df = pl.DataFrame({"x": x})
    errors, bounds = [], []
    for lower, upper in (("auto", "auto"), (0.0, 100.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Accountant(epsilon=4.0):
                rel = dpframe.median(df, "x", lower=lower, upper=upper, epsilon=2.0, seed=11)
                value = rel.collect()["x_median"].item()
        lo, hi = rel.bounds_found.get("x_median", {}).get("x", (lower, upper))
        one_bin = n * (hi - lo) / 1000 / (sigma * np.sqrt(2 * np.pi))
        stated = rel.accuracy()["x_median_error95"].item()
        errors.append(abs(int((x < value).sum()) - n / 2))
        bounds.append(stated + one_bin + 1)
    assert errors[0] <= bounds[0] and errors[1] <= bounds[1]
    assert bounds[0] <= 2 * bounds[1]  # comparable: within twice the true bounds' bound


def between(check: object) -> list[dict]:
    """The bounds each ``expect_column_values_to_be_between`` of a check's suite holds."""
    return [
        e["kwargs"]
        for e in check.suite["suites"]["main"]["expectations"]
        if e["type"] == "expect_column_values_to_be_between"
    ]


def test_a_spec_with_an_auto_bound_median_plans_runs_and_checks(tmp_path):
    df = frame()
    stat = {"stat": "median", "column": "x", "lower": "auto", "upper": "auto", "epsilon": 1.0}
    spec = _spec(tmp_path, df, {**stat, "bounds_epsilon": 0.2})
    planned = plan(spec)
    assert planned.rows["statistic"].to_list() == ["x_median:bounds", "x_median"]
    assert planned.rows["epsilon"].to_list() == pytest.approx([0.2, 0.8])
    result = run(spec, plan=planned, progress=False)
    assert [e.mechanism for e in result.entries] == ["bounds_histogram", "exponential"]
    assert result.epsilon == pytest.approx(1.0) and all(c.success for c in result.checks)
    prov = dpframe.read_provenance(result.outputs["t"])
    lo, hi = prov.entries[1].details["bounds_found"]["x"]
    assert prov.spec["release"][0]["statistics"][0]["lower"] == "auto"
    facts = dpframe.GroupedRelease.read_facts(prov.facts, prov.entries)
    assert facts["bounds_found"] == {"x_median": {"x": [lo, hi]}}
    # the suite checks the median inside the bounds found (read from the ledger entries)
    (check,) = result.checks
    assert {"column": "x_median", "min_value": lo, "max_value": hi} in between(check)
    assert f"bounds of x found by the first pass: [{lo:g}, {hi:g}]" in result.report.read_text()


@pytest.mark.slow
def test_spark_finds_the_same_bounds_and_releases_the_same_quantiles(spark):
    """Both engines histogram the pass and the candidates by comparison with the same
    edges: the same seed gives the same charges, bounds and quantiles."""
    from polars.testing import assert_frame_equal

    df = frame(2000)
    results = []
    for data in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = Accountant(epsilon=2.0)
        rel = grouped(data, acct, quartiles())
        table = rel.collect().sort("g")
        charges = [(e.mechanism, e.epsilon, e.details.get("bounds_found")) for e in acct.ledger]
        results.append((table, charges, rel.bounds_found))
    (t1, c1, b1), (t2, c2, b2) = results
    assert c1 == c2 and b1 == b2
    assert_frame_equal(t1, t2)
