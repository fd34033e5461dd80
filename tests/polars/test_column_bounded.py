"""`.dp.truncated_laplace` on a column of statistics (truncated and BIT)."""

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidDataError, InvalidParameterError
from dpframe.mechanisms.bounded import calibrate_bounded


def props(n=5):
    return pl.DataFrame({"p": np.linspace(0.0, 1.0, n)})


def bounded(**kw):
    args = {"epsilon": 1.0, "lower": 0.0, "upper": 1.0, "sensitivity": 0.01}
    args |= {"composition": "parallel"} | kw
    return pl.col("p").dp.truncated_laplace(**args)


@pytest.mark.parametrize("method", ["truncated", "bit"])
def test_outputs_stay_inside_bounds_and_charge_epsilon(method):
    acct = Accountant(epsilon=2.0)
    out = props(1000).with_columns(bounded(method=method, accountant=acct))
    assert out["p"].is_between(0.0, 1.0).all()
    entry = acct.ledger[0]
    assert entry.epsilon == 1.0 and entry.details["privacy_loss"] <= 1.0 / 2
    assert entry.mechanism == ("truncated_laplace" if method == "truncated" else "bit_laplace")


def test_paper_calibration_charges_the_true_loss():
    acct = Accountant(epsilon=5.0)
    props().with_columns(bounded(calibration="paper", public_groups=True, accountant=acct))
    entry = acct.ledger[0]
    expected = calibrate_bounded(1.0, 0.01, 0.0, 1.0, calibration="paper").privacy_loss
    assert entry.epsilon > 1.0  # the paper's lambda = Δ/ε loses more than ε
    assert entry.epsilon == pytest.approx(expected, abs=1e-9)
    assert entry.epsilon >= expected
    assert entry.details["epsilon_requested"] == 1.0


def test_paper_calibration_refused_when_the_true_loss_does_not_fit():
    acct = Accountant(epsilon=1.2)
    with pytest.raises(dpframe.BudgetExceededError):
        props().with_columns(bounded(calibration="paper", public_groups=True, accountant=acct))
    assert acct.ledger == ()


def test_sequential_rows_share_epsilon():
    acct = Accountant(epsilon=1.0)
    props(4).with_columns(bounded(composition="sequential", accountant=acct))
    entry = acct.ledger[0]
    assert entry.details["rows_touched"] == 4
    per_row = calibrate_bounded(0.25, 0.01, 0.0, 1.0)
    assert entry.scale == pytest.approx(per_row.scale)
    assert 4 * entry.details["privacy_loss"] <= 1.0


def test_parallel_under_substitute_halves_epsilon_per_row():
    acct = Accountant(epsilon=1.0)
    props().with_columns(bounded(accountant=acct))
    assert acct.ledger[0].scale == pytest.approx(calibrate_bounded(0.5, 0.01, 0, 1).scale)


def test_one_sided_bounds_and_clipping():
    acct = Accountant(epsilon=1.0)
    df = pl.DataFrame({"p": [-3.0, 0.0, 2.0]})
    out = df.with_columns(
        pl.col("p").dp.truncated_laplace(
            1.0, 0.0, None, 0.5, composition="parallel", accountant=acct, public_groups=True
        )
    )
    assert (out["p"] >= 0).all()  # -3 was clipped to the bound, then noised inside it
    assert acct.ledger[0].details["upper"] is None


def test_recollect_is_identical():
    acct = Accountant(epsilon=1.0)
    with acct:
        lf = props().lazy().with_columns(bounded())
    assert lf.collect().equals(lf.collect()) and len(acct.ledger) == 1


def test_bias_matches_the_exact_grid_law():
    """Mean of many releases of s = 0.02 (near the bound) vs the exact truncated mean."""
    acct = Accountant(epsilon=1.0)
    n = 100_000
    df = pl.DataFrame({"p": np.full(n, 0.02)})
    out = df.with_columns(bounded(accountant=acct, public_groups=True))["p"].to_numpy()
    cal = calibrate_bounded(1.0, 0.01, 0.0, 1.0)
    g, gamma = cal.granularity, float(cal.gamma)
    ys = np.arange(cal.grid_lower, cal.grid_upper + 1)
    w = np.exp(-gamma * np.abs(ys - round(0.02 / g)))
    w /= w.sum()
    mean, var = (ys * g * w).sum(), ((ys * g) ** 2 * w).sum() - (ys * g * w).sum() ** 2
    assert abs(out.mean() - mean) < 4 * np.sqrt(var / n)
    assert mean > 0.02  # truncation near the lower bound biases upwards


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"lower": 1.0, "upper": 0.0}, "lower"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"sensitivity": 0.0}, "sensitivity"),
        ({"method": "clip"}, "method"),
        ({"calibration": "loose"}, "calibration"),
        ({"composition": "mixed"}, "composition"),
    ],
)
def test_bad_parameters(kw, name):
    with pytest.raises(InvalidParameterError, match=name):
        bounded(accountant=Accountant(epsilon=1.0), **kw)


def test_nan_statistic_refused_before_charging():
    acct = Accountant(epsilon=1.0)
    with pytest.raises(InvalidDataError, match="NaN"):
        pl.DataFrame({"p": [0.5, float("nan")]}).with_columns(bounded(accountant=acct))
    assert acct.ledger == ()


def test_per_row_bounds_and_sensitivities():
    """Proportions of groups of public sizes n: sensitivity 1/n per row, bounds per row."""
    acct = Accountant(epsilon=1.0)
    df = pl.DataFrame(
        {
            "p": [0.1, 0.5, 0.9, 0.5],
            "n": [100, 100, 1000, 10],
            "cap": [1.0, 1.0, 1.0, 0.6],
        }
    )
    out = df.with_columns(
        pl.col("p").dp.truncated_laplace(
            1.0,
            0.0,
            pl.col("cap"),
            1 / pl.col("n"),
            composition="parallel",
            public_groups=True,
            accountant=acct,
        )
    )
    assert out.columns == ["p", "n", "cap"]
    assert (out["p"] >= 0).all() and (out["p"] <= out["cap"]).all()
    entry = acct.ledger[0]
    # the largest scale belongs to the smallest group (n = 10, bounds [0, 0.6])
    assert entry.scale == pytest.approx(calibrate_bounded(1.0, 0.1, 0.0, 0.6).scale)
    assert entry.details["scale_min"] == pytest.approx(calibrate_bounded(1.0, 1e-3, 0, 1).scale)
    assert entry.epsilon == 1.0
    assert entry.details["per_row_parameters"] == ["upper", "sensitivity"]


def test_both_bounds_per_row():
    """Both bounds as expressions (they were checked at declaration with the same
    stand-in for each, 1 < 1, and always refused): each row within its own bounds."""
    acct = Accountant(epsilon=1.0)
    df = pl.DataFrame({"x": [0.5, 2.0, 30.0], "lo": [0.0, 1.0, 20.0], "hi": [1.0, 3.0, 40.0]})
    lo, hi = pl.col("lo"), pl.col("hi")
    out = df.with_columns(
        pl.col("x").dp.truncated_laplace(
            1.0, lo, hi, 0.1, composition="parallel", public_groups=True, accountant=acct
        )
    )
    assert out.select(pl.col("x").is_between(lo, hi).all()).item()
    assert acct.ledger[0].details["per_row_parameters"] == ["lower", "upper"]


def test_per_row_parameters_are_validated_at_run_time():
    acct = Accountant(epsilon=1.0)
    df = pl.DataFrame({"p": [0.5, 0.5], "n": [10, None]})
    with pytest.raises(InvalidDataError, match="null"):
        df.with_columns(
            pl.col("p").dp.truncated_laplace(
                1.0, 0, 1, 1 / pl.col("n"), composition="parallel", accountant=acct
            )
        )
    df = pl.DataFrame({"p": [0.5], "lo": [2.0]})
    with pytest.raises(InvalidParameterError, match="lower"):
        df.with_columns(
            pl.col("p").dp.truncated_laplace(
                1.0, pl.col("lo"), 1.0, 0.1, composition="parallel", accountant=acct
            )
        )
    assert acct.ledger == ()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"lower": "0"}, "lower must be a real number or None"),
        ({"lower": False}, "lower must be a real number or None"),
        ({"upper": [1.0]}, "upper must be a real number or None"),
        ({"lower": -1e308, "upper": 1e308}, "overflows"),
        ({"lower": float("nan")}, "lower must be a number"),
    ],
)
def test_bounds_of_the_wrong_type_are_refused_before_the_charge(kw, match):
    # old: a string or a bool bound was converted by float() and the release charged
    acct = Accountant(epsilon=5.0)
    with acct, pytest.raises(InvalidParameterError, match=match):
        props().select(bounded(**kw))
    assert acct.spent.epsilon == 0
