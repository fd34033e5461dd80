"""Grouped means, proportions and variances, with public or private group sizes."""

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidDataError, InvalidParameterError
from dpframe.mechanisms.bounded import calibrate_bounded


def survey(groups=200, n=50, seed=0):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(groups), n)
    x = rng.uniform(0.0, 1.0, g.size)
    return pl.DataFrame({"g": g, "x": x, "flag": x > 0.3})


def margins(groups=200, n=50):
    return pl.DataFrame({"g": np.arange(groups), "n": np.full(groups, n)})


def grouped(df, acct, *stats, sizes="n", m=None, seed=1):
    m = margins() if m is None else m
    return df.dp.group_by("g", margins=m, sizes=sizes, accountant=acct, seed=seed).agg(*stats)


def test_public_size_mean_uses_the_bounded_mechanism_per_group_size():
    acct = Accountant(epsilon=1.0)
    df = survey()
    rel = grouped(df, acct, dpframe.agg.mean("x", lower=0, upper=1, epsilon=1.0))
    out = rel.collect()
    entry = acct.ledger[0]
    assert entry.mechanism == "truncated_laplace" and entry.epsilon == 1.0
    expected = calibrate_bounded(1.0, dpframe.core.sensitivity.mean(0, 1, 50), 0, 1)
    assert entry.scale == pytest.approx(expected.scale)
    assert out["x_mean"].is_between(0, 1).all()
    exact = df.group_by("g").agg(pl.col("x").mean()).sort("g")["x"].to_numpy()
    err = out.sort("g")["x_mean"].to_numpy() - exact
    # exact means are near 0.5, far from the bounds relative to the scale (~0.02): the
    # truncation bias is negligible and the error has mean 0, sd ~ sqrt(2) * scale
    assert abs(err.mean()) < 4 * np.sqrt(2) * expected.scale / np.sqrt(err.size)


def test_public_sizes_must_match_the_data():
    acct = Accountant(epsilon=1.0)
    wrong = margins().with_columns(pl.when(pl.col("g") == 3).then(49).otherwise(50).alias("n"))
    rel = grouped(survey(), acct, dpframe.agg.mean("x", lower=0, upper=1, epsilon=1.0), m=wrong)
    with pytest.raises(InvalidDataError, match="public size"):
        rel.collect()
    assert acct.ledger == ()


def test_public_sizes_refused_under_add_remove():
    acct = Accountant(epsilon=1.0, neighbours="add_remove")
    with pytest.raises(InvalidParameterError, match="add_remove"):
        grouped(survey(), acct, dpframe.agg.mean("x", lower=0, upper=1, epsilon=1.0))


def test_empty_public_group_is_null_and_costs_nothing_extra():
    df = survey(groups=3)
    m = pl.DataFrame({"g": [0, 1, 2, 3], "n": [50, 50, 50, 0]})
    acct = Accountant(epsilon=1.0)
    out = grouped(df, acct, dpframe.agg.mean("x", lower=0, upper=1, epsilon=0.5), m=m).collect()
    assert out.filter(pl.col("g") == 3)["x_mean"].to_list() == [None]
    assert out["x_mean"].null_count() == 1 and acct.spent.epsilon == 0.5


def test_paper_calibration_charges_the_true_loss():
    acct = Accountant(epsilon=5.0)
    stat = dpframe.agg.mean("x", lower=0, upper=1, epsilon=1.0, calibration="paper")
    grouped(survey(), acct, stat).collect()
    loss = calibrate_bounded(1.0, 1 / 50, 0, 1, calibration="paper").privacy_loss
    assert acct.ledger[0].epsilon == pytest.approx(loss, abs=1e-9) and loss > 1.0


def test_private_size_mean_is_a_clipped_ratio_of_noisy_sum_and_count():
    acct = Accountant(epsilon=2.0)
    df = survey(groups=500, n=400)
    m = margins(500, 400).drop("n")
    rel = grouped(df, acct, dpframe.agg.mean("x", lower=0, upper=1, epsilon=2.0), sizes=None, m=m)
    plan = rel.summarize()
    assert plan["mechanism"][0] == "laplace_ratio" and plan["error95"][0] is None
    out = rel.collect().sort("g")["x_mean"].to_numpy()
    assert ((out >= 0) & (out <= 1)).all()
    exact = df.group_by("g").agg(pl.col("x").mean()).sort("g")["x"].to_numpy()
    # first order: error ~ (e_sum - mean * e_n) / n with Laplace scales 2/1 (sum) and 2/1
    b = 2 * 1.0 / 1.0  # each part gets eps = 1; sensitivities 2 (substitute)
    sd = np.sqrt(2 * b * b + 0.25 * 2 * b * b) / 400
    assert np.abs(out - exact).mean() < 3 * sd
    assert acct.ledger[0].details["sizes"] == "private"


def test_proportion_needs_a_boolean_column():
    acct = Accountant(epsilon=1.0)
    out = grouped(survey(), acct, dpframe.agg.proportion("flag", epsilon=1.0)).collect()
    assert out["flag_proportion"].is_between(0, 1).all()
    bad = grouped(survey(), Accountant(epsilon=1.0), dpframe.agg.proportion("x", epsilon=1.0))
    with pytest.raises(InvalidDataError, match="Boolean"):
        bad.collect()


def test_public_size_variance_bounds_and_small_groups():
    df = pl.concat([survey(groups=3), pl.DataFrame({"g": [3], "x": [0.5], "flag": [True]})])
    m = pl.DataFrame({"g": [0, 1, 2, 3], "n": [50, 50, 50, 1]})
    acct = Accountant(epsilon=1.0)
    stat = dpframe.agg.var("x", lower=0, upper=1, epsilon=1.0, method="bit")
    out = grouped(df, acct, stat, m=m).collect()
    v = out["x_var"].to_list()
    assert v[3] is None  # a variance of one record is undefined
    assert all(0 <= x <= 50 / (4 * 49) for x in v[:3])
    assert acct.ledger[0].mechanism == "bit_laplace"


def test_private_size_variance_within_bounds():
    acct = Accountant(epsilon=3.0)
    m = margins(20, 50).drop("n")
    stat = dpframe.agg.var("x", lower=0, upper=1, epsilon=3.0)
    out = grouped(survey(groups=20), acct, stat, sizes=None, m=m).collect()
    assert (out["x_var"] >= 0).all() and acct.ledger[0].mechanism == "laplace_moments"


def test_several_statistics_one_atomic_charge():
    acct = Accountant(epsilon=1.0)
    rel = grouped(
        survey(),
        acct,
        dpframe.agg.mean("x", lower=0, upper=1, epsilon=0.5),
        dpframe.agg.proportion("flag", epsilon=0.6),
    )
    with pytest.raises(dpframe.BudgetExceededError):
        rel.collect()
    assert acct.ledger == ()


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: dpframe.agg.mean("x", lower=1, upper=0, epsilon=1), "lower"),
        (lambda: dpframe.agg.mean("x", lower=0, upper=1, epsilon=1, method="clip"), "method"),
        (lambda: dpframe.agg.var("x", lower=0, upper=1, epsilon=-1), "epsilon"),
        (lambda: dpframe.agg.proportion(1, epsilon=1), "column"),
        (
            lambda: dpframe.agg.mean("x", lower=0, upper=1, epsilon=1, calibration="?"),
            "calibration",
        ),
    ],
)
def test_bad_statistic_parameters(make, name):
    with pytest.raises(InvalidParameterError, match=name):
        make()


@pytest.mark.parametrize("sizes", ["m", "g"])
def test_bad_sizes_column(sizes):
    with pytest.raises(InvalidParameterError, match="sizes"):
        grouped(survey(), Accountant(epsilon=1.0), dpframe.agg.count(epsilon=1), sizes=sizes)


def correlated(groups=100, n=200, r=0.7, seed=5):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((groups * n, 2))
    x = z[:, 0]
    y = r * z[:, 0] + np.sqrt(1 - r * r) * z[:, 1]
    return pl.DataFrame({"g": np.repeat(np.arange(groups), n), "x": x, "y": 1.5 * y})


COV = {"lower_x": -3, "upper_x": 3, "lower_y": -4.5, "upper_y": 4.5}


@pytest.mark.parametrize("sizes", ["n", None])
def test_cov_outputs_respect_table_1_bounds(sizes):
    df = correlated()
    m = margins(100, 200) if sizes else margins(100, 200).drop("n")
    acct = Accountant(epsilon=1.0)
    stat = dpframe.agg.cov("x", "y", epsilon=1.0, **COV)
    out = grouped(df, acct, stat, sizes=sizes, m=m).collect()
    assert out.columns == ["g", "x_y_var_x", "x_y_var_y", "x_y_cov", "x_y_corr"]
    vx, vy, c, r = (out[col].to_numpy() for col in out.columns[1:])
    assert (vx >= 0).all() and (vx <= 200 * 36 / (4 * 199)).all()
    assert (vy >= 0).all() and (vy <= 200 * 81 / (4 * 199)).all()
    assert (np.abs(c) <= np.sqrt(vx * vy) + 1e-12).all()
    assert (np.abs(r[~np.isnan(r)]) <= 1).all()  # null where a released variance is 0
    assert len(acct.ledger) == 1 and acct.ledger[0].columns == tuple(out.columns[1:])
    assert acct.spent.epsilon == 1.0


def test_cov_public_sizes_is_unbiased_far_from_the_bounds():
    """BIT at ε = 30 over 100 groups of 200: variances ~1 and ~2.25 and covariance ~1.05 sit
    many noise scales away from their bounds, so the bias is negligible (e^-16 scales) and
    the mean released-minus-exact difference is within 4 SE = 4 sqrt(2) λ / sqrt(100)."""
    df = correlated(r=0.7)
    acct = Accountant(epsilon=30.0)
    stat = dpframe.agg.cov("x", "y", epsilon=30.0, method="bit", **COV)
    out = grouped(df, acct, stat, m=margins(100, 200)).collect().sort("g")
    exact = (
        df.group_by("g").agg(pl.col("x").var().alias("vx"), pl.cov("x", "y").alias("c")).sort("g")
    )
    lam_var = calibrate_bounded(10.0, 0.18, 0.0, 200 * 36 / (4 * 199), method="bit").scale
    lam_cov = calibrate_bounded(10.0, 0.27, -1.5, 1.5, method="bit").scale  # bounds: no effect
    for released, truth, lam in (
        (out["x_y_var_x"], exact["vx"], lam_var),
        (out["x_y_cov"], exact["c"], lam_cov),
    ):
        diff = released.to_numpy() - truth.to_numpy()
        assert abs(diff.mean()) < 4 * np.sqrt(2) * lam / np.sqrt(diff.size)
    assert out["x_y_corr"].null_count() == 0


def test_cov_refuses_paper_truncation_and_same_column():
    with pytest.raises(InvalidParameterError, match="paper"):
        dpframe.agg.cov("x", "y", epsilon=1.0, calibration="paper", **COV)
    with pytest.raises(InvalidParameterError, match="different"):
        dpframe.agg.cov("x", "x", epsilon=1.0, **COV)
