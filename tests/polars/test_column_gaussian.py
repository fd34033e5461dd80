"""``.dp.gaussian``: a column of statistics with discrete Gaussian noise, charged rho."""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.core.randomness import RandomSource
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.column import plan_gaussian_column
from dpframe.mechanisms.gaussian import discrete_gaussian_variance


def _seeded(seed: int) -> RandomSource:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RandomSource(seed=seed)


def test_charges_rho_once_and_the_ledger_says_so():
    frame = pl.DataFrame({"visits": [120.0, 87.0, 45.0, 3.0]})
    acct = dpframe.Accountant(rho=0.5, delta=1e-6)
    expr = pl.col("visits").dp.gaussian(
        sensitivity=1.0, rho=0.1, composition="parallel", accountant=acct
    )
    out = frame.with_columns(expr)
    again = frame.with_columns(expr)  # the same release seen twice: one charge
    assert out.equals(again)
    assert len(acct.ledger) == 1
    entry = acct.ledger[0]
    assert entry.details["rho"] <= 0.1 and entry.details["rho"] > 0.099
    assert entry.details["norm"] == "l2" and entry.details["rows_touched"] == 2
    assert acct.spent.rho == pytest.approx(entry.details["rho"])
    assert not np.array_equal(out["visits"].to_numpy(), frame["visits"].to_numpy())


def test_a_pure_epsilon_budget_refuses_and_names_the_budget_to_open():
    frame = pl.DataFrame({"visits": [120.0, 87.0]})
    acct = dpframe.Accountant(epsilon=5.0)
    expr = pl.col("visits").dp.gaussian(
        sensitivity=1.0, rho=0.1, composition="parallel", accountant=acct
    )
    with pytest.raises(InvalidParameterError, match="zCDP budget"):
        frame.with_columns(expr)
    assert acct.ledger == ()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rho": 0.1, "sigma": 2.0}, "exactly one of rho"),
        ({}, "exactly one of rho"),
        ({"rho": 0.0}, "rho"),
        ({"rho": float("nan")}, "rho"),
        ({"rho": "0.1"}, "rho"),
        ({"sigma": -1.0}, "sigma"),
        ({"rho": 0.1, "sensitivity": 0.0}, "sensitivity"),
        ({"rho": 0.1, "composition": "both"}, "composition"),
    ],
)
def test_bad_parameters_are_refused_when_the_expression_is_built(kwargs, match):
    acct = dpframe.Accountant(rho=1.0, delta=1e-6)
    args = {"sensitivity": 1.0, "composition": "parallel", **kwargs}
    with pytest.raises(InvalidParameterError, match=match):
        pl.col("x").dp.gaussian(accountant=acct, **args)
    assert acct.ledger == ()


def test_nan_is_refused_before_anything_is_charged():
    acct = dpframe.Accountant(rho=1.0, delta=1e-6)
    frame = pl.DataFrame({"x": [1.0, float("nan")]})
    expr = dpframe.gaussian("x", sensitivity=1.0, rho=0.1, composition="parallel", accountant=acct)
    with pytest.raises(InvalidDataError):
        frame.with_columns(expr)
    assert acct.ledger == ()


@pytest.mark.parametrize(
    ("composition", "public", "n", "touched"),
    [("parallel", True, 50, 1), ("parallel", False, 50, 2), ("sequential", False, 50, 50)],
)
def test_noise_is_calibrated_to_the_columns_l2_sensitivity(composition, public, n, touched):
    """rho = (sensitivity * sqrt(rows_touched))**2 / (2 sigma**2), met within the grid."""
    rho, delta = 0.25, 2.0
    plan = plan_gaussian_column(
        composition=composition,
        public_groups=public,
        neighbours="substitute",
        n_rows=n,
        column="x",
        sensitivity=delta,
        rho=rho,
    )
    assert plan.rows_touched == touched
    l2 = delta * math.sqrt(touched)
    assert plan.rho <= rho
    # the noise is the least (on its grid) that meets rho: at most 1 % more than exact
    assert plan.scale == pytest.approx(l2 / math.sqrt(2 * rho), rel=1e-2)
    assert plan.scale >= l2 / math.sqrt(2 * rho) * (1 - 1e-12)


def test_released_noise_has_the_planned_variance():
    n = 40_000
    frame = pl.DataFrame({"x": np.full(n, 10.0)})
    acct = dpframe.Accountant(rho=10.0, delta=1e-6)
    out = frame.with_columns(
        dpframe.gaussian(
            "x",
            sensitivity=1.0,
            sigma=3.0,
            composition="parallel",
            public_groups=True,
            accountant=acct,
            seed=_seeded(4),
        )
    )
    noise = out["x"].to_numpy() - 10.0
    sigma = acct.ledger[0].scale
    assert sigma == pytest.approx(3.0, rel=1e-2)
    var = discrete_gaussian_variance(sigma)  # in real units: sigma near 3 grid-free
    # the sample variance's standard error is about var * sqrt(2 / n)
    assert abs(noise.var() - var) < 5 * var * math.sqrt(2 / n)
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)
