"""Private bounds (issue 34): lower="auto" / upper="auto", a charged first pass.

The pass is planned and shown before anything is spent, charged on the same ledger before
it draws, drawn first; the release is then planned with the bounds it found, which the
ledger records. Never a bound read from raw data: an outlier's value never reaches a
bound, and changing one person changes the law of the bounds by at most the pass's
epsilon (the exact law, and an empirical audit of the sampler against it).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidParameterError
from dpframe.core.constraints import AUTO_BOUNDS_SHARE
from dpframe.core.units import PrivacyUnit
from dpframe.jobs import SpecError, parse_spec, plan, run
from dpframe.mechanisms.private_bounds import BoundsPlan, bounds_grid, plan_bounds

EDGES = bounds_grid().edges


def frame(n: int = 4000, seed: int = 0, outlier: float | None = None) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(8.0, 1.0, n)
    if outlier is not None:
        x[0] = outlier
    return pl.DataFrame({"g": rng.choice(["a", "b", "c"], n), "x": x})


MARGINS = pl.DataFrame({"g": ["a", "b", "c", "d"]})


def grouped(df: pl.DataFrame, acct: Accountant, *stats: object, seed: int | None = 1) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpframe.group_by(df, "g", margins=MARGINS, accountant=acct, seed=seed).agg(*stats)


def test_the_pass_is_its_own_line_of_the_summary_and_nothing_is_spent():
    acct = Accountant(epsilon=2.0)
    rel = grouped(frame(), acct, dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0))
    table = rel.summarize()
    rows = table.select("statistic", "mechanism", "epsilon").rows()
    assert rows == [
        ("x_mean:bounds", "bounds_histogram", pytest.approx(AUTO_BOUNDS_SHARE)),
        ("x_mean", "laplace_ratio", pytest.approx(1 - AUTO_BOUNDS_SHARE)),
    ]
    notes = table["note"].to_list()
    assert "first pass" in notes[0] and "upper bound of x" in notes[0]
    assert "found by the first pass: scale and error depend on them" in notes[1]
    assert table["scale"][1] is None and table["error95"][1] is None
    assert rel.epsilon == pytest.approx(1.0)  # the statistic's epsilon stays its total
    assert acct.spent.epsilon == 0 and not acct.ledger


def test_bounds_epsilon_sets_the_split():
    rel = grouped(
        frame(),
        Accountant(epsilon=2.0),
        dpframe.agg.sum("x", lower="auto", upper="auto", epsilon=1.0, bounds_epsilon=0.3),
    )
    assert rel.summarize()["epsilon"].to_list() == pytest.approx([0.3, 0.7])


def test_charged_before_drawn_and_recorded_in_the_ledger():
    acct = Accountant(epsilon=2.0)
    rel = grouped(frame(), acct, dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0))
    out = rel.collect()
    entries = acct.ledger
    assert [e.mechanism for e in entries] == ["bounds_histogram", "laplace_ratio"]
    assert acct.spent.epsilon == pytest.approx(1.0)
    found = rel.bounds_found["x_mean"]["x"]
    assert found[0] == 0.0 and found[1] in EDGES  # the upper bound is a bin edge
    main = entries[1].details
    assert main["bounds"] == "auto" and main["bounds_found"] == {"x": list(found)}
    assert (main["lower"], main["upper"]) == found
    assert out["x_mean"].drop_nulls().is_between(*found).all()
    assert entries[0].details["pass"] == "bounds" and entries[0].details["pooled"] is True


def test_after_the_release_its_cost_still_counts_the_pass():
    # the pass, once drawn, is still part of what the release cost: its epsilon,
    # and summary say what the ledger holds, never less
    acct = Accountant(epsilon=4.0)
    rel = grouped(frame(), acct, dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0))
    rel.collect()
    charged = sum(e.epsilon for e in rel.ledger)
    assert charged == pytest.approx(1.0) == acct.spent.epsilon
    assert rel.epsilon == pytest.approx(charged)
    assert rel.summarize()["statistic"].to_list() == ["x_mean:bounds", "x_mean"]
    df = pl.DataFrame({"x": np.linspace(0.0, 50.0, 100), "y": np.linspace(1.0, 9.0, 100)})
    cov = dpframe.covariance_matrix(df, ["x", "y"], "auto", epsilon=1.0, n=100, accountant=acct)
    before = cov.summarize().select("statistic", "epsilon")
    cov.collect()
    assert cov.epsilon == pytest.approx(sum(e.epsilon for e in cov.ledger)) == 1.0
    assert cov.summarize().select("statistic", "epsilon").equals(before)


def test_a_failing_draw_after_the_pass_is_charged_leaves_its_entry(monkeypatch):
    acct = Accountant(epsilon=2.0)
    rel = grouped(frame(), acct, dpframe.agg.sum("x", lower="auto", upper="auto", epsilon=1.0))

    def broken(self, exact, rng):
        raise RuntimeError("the draw failed")

    monkeypatch.setattr(BoundsPlan, "draw", broken)
    with pytest.raises(RuntimeError, match="the draw failed"):
        rel.collect()
    assert [e.mechanism for e in acct.ledger] == ["bounds_histogram"]
    assert acct.spent.epsilon == pytest.approx(AUTO_BOUNDS_SHARE)


def test_the_exact_extremes_never_reach_a_bound():
    """A huge outlier: the bounds are bin edges of the bulk, the same whatever its value."""
    acct = Accountant(epsilon=10.0)
    found = []
    for outlier in (1e9, 3e10):
        df = frame(outlier=outlier)
        rel = grouped(
            df, acct, dpframe.agg.mean("x", lower="auto", upper="auto", epsilon=1.0), seed=5
        )
        rel.collect()
        lo, hi = rel.bounds_found["x_mean"]["x"]
        assert lo in EDGES and hi in EDGES
        assert hi < outlier / 1000 and hi != df["x"].max() and lo != df["x"].min()
        found.append((lo, hi))
        for e in acct.ledger[-2:]:  # nothing in the ledger is an exact extreme
            values = [v for v in e.details.values() if isinstance(v, float)]
            assert df["x"].max() not in values and df["x"].min() not in values
    assert found[0] == found[1]  # same noise, the outlier's bin below the threshold


def _law(plan: BoundsPlan, hist: np.ndarray) -> dict[tuple[int, int] | None, float]:
    """The exact law of the pass's (lowest, highest) passing bins; None: no bin passes.

    A bin passes when ``count + Z > t``, Z discrete Laplace of the plan's scale (grid 1):
    P(Z <= k) = 1 - p**(k+1) / (1 + p) for k >= 0, p**(-k) / (1 + p) for k < 0.
    """
    p = math.exp(-1.0 / float(plan.noise.noise_scale_fraction))

    def cdf(k: int) -> float:
        return 1 - p ** (k + 1) / (1 + p) if k >= 0 else p ** (-k) / (1 + p)

    t = plan.threshold
    passes = np.array([1 - cdf(math.floor(t - c)) for c in hist])
    fails = 1 - passes
    law: dict[tuple[int, int] | None, float] = {None: float(np.prod(fails))}
    below = np.concatenate([[1.0], np.cumprod(fails)])  # below[i]: bins < i fail
    above = np.concatenate([np.cumprod(fails[::-1])[::-1], [1.0]])  # above[i]: bins >= i
    for a in range(len(hist)):
        law[(a, a)] = below[a] * passes[a] * above[a + 1]
        for b in range(a + 1, len(hist)):  # the bins between them: anything
            law[(a, b)] = below[a] * passes[a] * passes[b] * above[b + 1]
    return law


@pytest.mark.parametrize(
    ("neighbours", "unit", "moved"),
    [("substitute", None, 1), ("add_remove", None, 1), ("add_remove", ("pid", 3, 2), 6)],
)
def test_one_person_changes_the_law_of_the_bounds_by_at_most_epsilon(neighbours, unit, moved):
    """Exact law on neighbouring histograms: one person's rows (``moved`` of them)
    removed from the bulk, or moved to an outlier's bin (substitute)."""
    u = PrivacyUnit(unit[0], max_rows=unit[1], max_groups=unit[2]) if unit else None
    eps = 0.5
    plan = plan_bounds(
        "x", "s", (None, None), epsilon=eps, neighbours=neighbours, **({"unit": u} if u else {})
    )
    assert plan.rows * plan.sides >= moved
    hist = np.zeros(plan.grid.bins, dtype=np.int64)
    hist[60:64] = [3, 25, 30, 4]  # bins near the threshold, so the law is not degenerate
    other = hist.copy()
    other[61] -= moved
    if neighbours == "substitute":
        other[plan.grid.bins - 1] += moved  # an outlier, clipped into the top bin
    law, law2 = _law(plan, hist), _law(plan, other)
    assert sum(law.values()) == pytest.approx(1.0)
    bound = math.exp(eps) * (1 + 1e-9)
    for event in law:
        assert law[event] <= bound * law2[event] + 1e-300
        assert law2[event] <= bound * law[event] + 1e-300


def test_the_sampler_draws_the_exact_law():
    """An empirical audit: the pass's draws, counted, against the exact law (chi-square)."""
    plan = plan_bounds("x", "s", (None, None), epsilon=0.5, neighbours="add_remove")
    hist = np.zeros(plan.grid.bins, dtype=np.int64)
    hist[60:64] = [3, 25, 30, 4]
    law = _law(plan, hist)
    rng = np.random.default_rng(34)
    reps = 4000
    seen: dict[tuple[int, int] | None, int] = {}
    edges = list(plan.grid.edges)
    for _ in range(reps):
        noisy = plan.noise.release(hist.astype(np.float64), rng)
        passed = np.flatnonzero(noisy > plan.threshold)
        key = (int(passed[0]), int(passed[-1])) if passed.size else None
        seen[key] = seen.get(key, 0) + 1
        if key is not None:  # the plan's own rule gives these edges
            assert plan.bounds_of(noisy) == (edges[key[0]], edges[key[1] + 1])
    common = [k for k, p in law.items() if p * reps >= 5]
    rest = 1 - sum(law[k] for k in common)
    observed = [seen.get(k, 0) for k in common] + [reps - sum(seen.get(k, 0) for k in common)]
    expected = [law[k] * reps for k in common] + [rest * reps]
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True) if e > 0)
    dof = len(common)
    assert chi2 < dof + 4 * math.sqrt(2 * dof) + 10  # far beyond the 99.9% point


def test_person_level_pass_reads_the_kept_rows():
    """Under a person unit the pass histograms the rows the bounding keeps, its
    sensitivity scaled by max_rows * max_groups (pooled over every group)."""
    rng = np.random.default_rng(3)
    n = 3000
    df = pl.DataFrame(
        {"pid": rng.integers(0, 500, n), "g": rng.choice(["a", "b", "c"], n), "x": rng.random(n)}
    )
    acct = Accountant(epsilon=2.0, neighbours="add_remove")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpframe.group_by(
            df, "g", margins=MARGINS, accountant=acct, seed=2, unit="pid", max_rows=2, max_groups=2
        ).agg(dpframe.agg.sum("x", lower=0, upper="auto", epsilon=1.0))
    hist = rel._first_inputs()[0]
    assert hist.shape == (1, EDGES.size - 1) and 0 < hist.sum() <= 500 * 4
    rel.collect()
    first = acct.ledger[0]
    assert first.details["sensitivity"] == 4.0
    assert (first.details["max_rows"], first.details["max_groups"]) == (2, 2)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: dpframe.agg.mean("x", lower=0, upper="atuo", epsilon=1.0), "upper must be a real"),
        (lambda: dpframe.agg.sum("x", lower="Auto", upper=1, epsilon=1.0), "lower must be a real"),
        (
            lambda: dpframe.agg.sum("x", lower=0, upper="auto", mechanism="gaussian", rho=0.1),
            "mechanism='gaussian'",
        ),
        (
            lambda: dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0, calibration="paper"),
            "calibration='paper'",
        ),
        (
            lambda: dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0, bounds_epsilon=1.0),
            "bounds_epsilon must be below",
        ),
        (
            lambda: dpframe.agg.mean("x", lower=0, upper=1, epsilon=1.0, bounds_epsilon=0.1),
            "bounds_epsilon: 'x_mean' has no bound set to 'auto'",
        ),
        (
            lambda: dpframe.agg.cov(
                "x", "y", lower_x=0, upper_x="auot", lower_y=0, upper_y=1, epsilon=1.0
            ),
            "upper_x must be a real",
        ),
    ],
)
def test_bad_input_is_refused_by_name(make, match):
    with pytest.raises(InvalidParameterError, match=match):
        make()


def _spec(tmp_path, df, statistic):
    return parse_spec(
        {
            "version": 1,
            "privacy": {"budget": {"epsilon": 2.0}, "ledger": str(tmp_path / "l.db"), "seed": 4},
            "output": {"folder": str(tmp_path / "out")},
            "margins": {"m": {"values": {"g": ["a", "b", "c", "d"]}}},
            "release": [
                {
                    "name": "t",
                    "kind": "grouped",
                    "by": ["g"],
                    "margins": "m",
                    "statistics": [statistic],
                }
            ],
        },
        frame=df.lazy(),
    )


def test_the_spec_plans_runs_publishes_and_checks_auto_bounds(tmp_path):
    df = frame()
    stat = {"stat": "mean", "column": "x", "lower": 0, "upper": "auto", "epsilon": 1.0}
    spec = _spec(tmp_path, df, {**stat, "bounds_epsilon": 0.25})
    planned = plan(spec)
    assert planned.rows["statistic"].to_list() == ["x_mean:bounds", "x_mean"]
    assert planned.rows["epsilon"].to_list() == pytest.approx([0.25, 0.75])
    assert planned.epsilon == pytest.approx(1.0)
    result = run(spec, plan=planned, progress=False)
    assert [e.mechanism for e in result.entries] == ["bounds_histogram", "laplace_ratio"]
    assert result.epsilon == pytest.approx(1.0) and all(c.success for c in result.checks)
    prov = dpframe.read_provenance(result.outputs["t"])
    found = prov.entries[1].details["bounds_found"]["x"]
    assert found[0] == 0.0 and found[1] in EDGES
    assert prov.spec["release"][0]["statistics"][0]["upper"] == "auto"
    report = result.report.read_text()  # the report shows the pass and what it found
    assert "x_mean:bounds" in report
    assert f"bounds of x found by the first pass: [0, {found[1]:g}]" in report
    # a later check reads the bounds found from the file's verified ledger entries
    facts = dpframe.GroupedRelease.read_facts(prov.facts, prov.entries)
    assert facts["bounds_found"] == {"x_mean": {"x": found}}


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("upper", "atuo", "upper must be a real number or 'auto'"), ("bounds_epsilon", 1.5, "below")],
)
def test_a_bad_spec_is_refused_by_name_and_spends_nothing(tmp_path, field, value, match):
    stat = {"stat": "sum", "column": "x", "lower": 0, "upper": "auto", "epsilon": 1.0}
    with pytest.raises(SpecError, match=match):
        _spec(tmp_path, frame(), {**stat, field: value})
    assert not (tmp_path / "l.db").exists()


def test_a_count_takes_no_bounds_epsilon(tmp_path):
    with pytest.raises(SpecError, match="bounds_epsilon"):
        _spec(tmp_path, frame(), {"stat": "count", "epsilon": 1.0, "bounds_epsilon": 0.1})


def test_bad_data_is_found_before_the_pass_is_charged():
    x = pl.col("x")
    df = frame().with_columns(pl.when(x > 1e4).then(None).otherwise(x).alias("x"))
    acct = Accountant(epsilon=2.0)
    rel = grouped(df, acct, dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0))
    with pytest.raises(dpframe.InvalidDataError):
        rel.collect()
    assert not acct.ledger and acct.spent.epsilon == 0


#: seeds of the demo's Monte Carlo, sized by the standard error: 30 seeds gave a ratio
#: of 1.75 +- 0.14, so 90 give about +- 0.08 and ratio + 3 standard errors stays below 2
#: (measured: 1.55 +- 0.09)
DEMO_REPS = 90


@pytest.mark.slow
def test_on_the_demo_the_auto_bounds_mean_is_within_twice_the_public_bounds_error():
    """The demo's mean income by region x age band (dpframe/data/demo_release.toml:
    bounds [0, 200000], epsilon 0.3), released with its public bounds and with
    ``upper="auto"``: RMSE over groups and seeds against the exact group means. The
    auto release pays its pass out of the same epsilon and clips where its bounds fall."""
    from dpframe.datasets import AGE_BANDS, REGIONS, synthetic_survey

    df = synthetic_survey()
    keys = pl.DataFrame(
        {"region": [r for r in REGIONS for _ in AGE_BANDS], "age_band": list(AGE_BANDS) * 6}
    ).with_columns(pl.col(c).cast(df.schema[c]) for c in ("region", "age_band"))
    exact = keys.join(
        df.group_by("region", "age_band").agg(pl.col("income").mean()),
        on=["region", "age_band"],
        how="left",
    )["income"].to_numpy()
    seen = ~np.isnan(exact)

    def squared_error(seed: int, upper: float | str) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = dpframe.group_by(
                df,
                ["region", "age_band"],
                margins=keys,
                accountant=Accountant(epsilon=1.0),
                seed=seed,
            ).agg(dpframe.agg.mean("income", lower=0, upper=upper, epsilon=0.3))
        out = rel.collect()["income_mean"].to_numpy()
        return float(np.mean((out[seen] - exact[seen]) ** 2))

    public = np.array([squared_error(100 + s, 200_000) for s in range(DEMO_REPS)])
    auto = np.array([squared_error(100 + s, "auto") for s in range(DEMO_REPS)])
    ratio = math.sqrt(auto.mean() / public.mean())
    # delta method: var(log MSE ratio) from the seeds' spread, then the RMSE ratio's
    var = (auto.var(ddof=1) / auto.mean() ** 2 + public.var(ddof=1) / public.mean() ** 2) / (
        DEMO_REPS
    )
    se = ratio * math.sqrt(var) / 2
    print(f"RMSE auto/public = {ratio:.3f} +- {se:.3f} over {DEMO_REPS} seeds")
    assert ratio + 3 * se < 2.0


# -- the covariance matrix release ---------------------------------------------------------


def scores(n: int = 5000) -> pl.DataFrame:
    rng = np.random.default_rng(7)
    return pl.DataFrame({"x": rng.normal(0, 3, n), "y": rng.uniform(0, 10, n)})


def test_a_covariance_matrix_finds_its_bounds_first():
    df = scores()
    acct = Accountant(epsilon=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpframe.covariance_matrix(
            df,
            ["x", "y"],
            [("auto", "auto"), (0, "auto")],
            epsilon=1.0,
            n=5000,
            accountant=acct,
            seed=3,
        )
    table = rel.summarize()
    assert table["mechanism"].to_list()[:2] == ["bounds_histogram"] * 2
    assert table["epsilon"].sum() == pytest.approx(1.0) and rel.epsilon == pytest.approx(1.0)
    assert table["scale"][2:].is_null().all() and not acct.ledger
    out = rel.collect()
    found = rel.bounds_found
    assert found["y"][0] == 0.0 and all(v in EDGES for v in (*found["x"], found["y"][1]))
    mechanisms = [e.mechanism for e in acct.ledger]
    assert mechanisms[:2] == ["bounds_histogram"] * 2 and len(mechanisms) == 5
    assert acct.ledger[2].details["bounds_found"] == {c: list(b) for c, b in found.items()}
    assert out.columns == ["column", "x", "y"] and acct.spent.epsilon == pytest.approx(1.0)
    assert rel.to_spec()["bounds"] == [["auto", "auto"], [0.0, "auto"]]


def test_a_covariance_matrix_spec_with_auto_bounds_runs_and_checks(tmp_path):
    spec = parse_spec(
        {
            "version": 1,
            "privacy": {"budget": {"epsilon": 2.0}, "ledger": str(tmp_path / "l.db"), "seed": 4},
            "output": {"folder": str(tmp_path / "out")},
            "release": [
                {
                    "name": "c",
                    "kind": "covariance",
                    "columns": ["x", "y"],
                    "bounds": "auto",
                    "epsilon": 1.0,
                    "bounds_epsilon": 0.2,
                }
            ],
        },
        frame=scores().lazy(),
    )
    assert plan(spec).rows["epsilon"].to_list()[:2] == pytest.approx([0.1, 0.1])
    result = run(spec, progress=False)
    assert result.epsilon == pytest.approx(1.0) and all(c.success for c in result.checks)
    prov = dpframe.read_provenance(result.outputs["c"])
    facts = dpframe.CovarianceMatrixRelease.read_facts(prov.facts, prov.entries)
    assert set(facts["bounds_found"]) == {"x", "y"}


@pytest.mark.parametrize(
    ("bounds", "kw", "match"),
    [
        ([("auto", "atuo"), (0, 1)], {}, r"bounds\[0\] upper must be a real number or 'auto'"),
        ("atuo", {}, "bounds must be one"),
        ([(0, 1), (0, 1)], {"bounds_epsilon": 0.1}, "bounds_epsilon: no bound is 'auto'"),
        ("auto", {"calibration": "paper"}, "calibration='paper'"),
        ("auto", {"bounds_epsilon": 2.0}, "bounds_epsilon must be below"),
    ],
)
def test_a_covariance_matrix_refuses_bad_auto_bounds_by_name(bounds, kw, match):
    acct = Accountant(epsilon=2.0)
    with pytest.raises(InvalidParameterError, match=match):
        dpframe.covariance_matrix(
            scores(), ["x", "y"], bounds, epsilon=1.0, n=5000, accountant=acct, **kw
        )
    assert not acct.ledger


@pytest.mark.slow
def test_spark_finds_the_same_bounds_and_releases_the_same_values(spark):
    """Both engines histogram the pass by comparison with the same edges: the same seed
    gives the same charges, bounds and values (a grouped mean and a covariance matrix)."""
    from polars.testing import assert_frame_equal

    df = frame(2000).with_columns(pl.col("x").alias("y") * -0.5)
    results = []
    for data in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = Accountant(epsilon=10.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grouped_release = dpframe.group_by(
                data, "g", margins=MARGINS, accountant=acct, seed=9
            ).agg(dpframe.agg.mean("x", lower="auto", upper="auto", epsilon=1.0))
            hist = grouped_release._first_inputs()[0]
            table = grouped_release.collect().sort("g")
            matrix = dpframe.covariance_matrix(
                data, ["x", "y"], "auto", epsilon=1.0, n=2000, accountant=acct, seed=9
            )
            values = matrix.collect()
        charges = [
            (e.mechanism, e.epsilon, e.scale, e.details.get("bounds_found")) for e in acct.ledger
        ]
        results.append((hist, table, values, charges, matrix.bounds_found))
    (h1, t1, v1, c1, b1), (h2, t2, v2, c2, b2) = results
    assert np.array_equal(h1, h2) and c1 == c2 and b1 == b2
    assert_frame_equal(t1, t2, rel_tol=1e-9)
    assert_frame_equal(v1, v2, rel_tol=1e-9)


def test_public_sizes_hold_with_auto_bounds():
    """With public group sizes the mean is the bounded mechanism's, at the bounds found
    (its sensitivity (U - L) / n_g needs them: planned after the pass)."""
    df = frame()
    sizes = df.group_by("g").len("n")
    margins = MARGINS.join(sizes, on="g", how="left").with_columns(pl.col("n").fill_null(0))
    acct = Accountant(epsilon=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpframe.group_by(df, "g", margins=margins, sizes="n", accountant=acct, seed=2).agg(
            dpframe.agg.mean("x", lower=0, upper="auto", epsilon=1.0)
        )
    out = rel.collect()
    lo, hi = rel.bounds_found["x_mean"]["x"]
    main = acct.ledger[1]
    assert main.mechanism == "truncated_laplace" and (
        main.details["lower"],
        main.details["upper"],
    ) == (lo, hi)
    assert out["x_mean"].drop_nulls().is_between(lo, hi).all() and out["x_mean"][3] is None


def test_the_demo_notes_name_the_bounds_found():
    from dpframe.demo import noise_notes

    people = pl.DataFrame({"region": ["N"] * 500, "age": [40.0] * 500})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpframe.group_by(
            people,
            "region",
            seed=3,
            margins=pl.DataFrame({"region": ["N", "E"]}),
            accountant=Accountant(epsilon=1.0),
        ).agg(dpframe.agg.mean("age", lower=0, upper="auto", epsilon=1.0))
        rel.collect()
    hi = rel.bounds_found["age_mean"]["age"][1]
    assert f"the whole range [0, {hi:g}]" in noise_notes(rel, rel.accuracy())[0]
