"""The discrete Gaussian (rho-zCDP) of the count releases, in DR-HA: exact law, Monte
Carlo, the no-noise limit, choosing rho, and the errors of the wrong parameter."""

import math

import numpy as np
import polars as pl
import pytest

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.gaussian import calibrate_gaussian, discrete_gaussian_cdf
from dpframe.risk import cell_risk, choose_epsilon, choose_rho, drha, simulate
from dpframe.risk.noise import absent_probability, noise_scale, table_sensitivity

COUNTS = np.array([[3, 0, 0], [2, 1, 0], [1, 0, 0], [5, 0, 2], [0, 4, 0], [1, 1, 1]])
SUB = math.sqrt(2.0)


def test_sigma_is_the_release_calibration():
    assert table_sensitivity("discrete_gaussian", "substitute") == SUB
    sigma = noise_scale("discrete_gaussian", [0.5, 2.0], sensitivity=SUB)
    assert np.allclose(sigma, [SUB, SUB / 2], rtol=1e-9)  # sqrt(2) / sqrt(2 rho)
    cal = calibrate_gaussian(SUB, rho=0.5, granularity=1.0, values_on_grid=True)
    assert sigma[0] == cal.sigma_units


def test_absent_probability_is_the_exact_discrete_law():
    # absent <=> c + Z <= 0 <=> Z <= -c
    p = absent_probability("discrete_gaussian", [0, 1, 3], 1.5)
    assert np.allclose(p, discrete_gaussian_cdf([0, -1, -3], 1.5), rtol=0, atol=1e-15)


@pytest.mark.parametrize("measure", ["local", "expected"])
def test_closed_form_agrees_with_monte_carlo(measure):
    rho = np.array([0.05, 0.5, 5.0])
    exact = cell_risk(COUNTS, mechanism="discrete_gaussian", rho=rho, sensitivity=SUB)
    if measure == "local":
        sim = simulate(
            COUNTS, mechanism="discrete_gaussian", rho=rho, sensitivity=SUB, reps=4000, rng=7
        )
        z = np.abs(exact.values - sim.values) / np.maximum(sim.se, 1e-3)
        assert z.max() < 4.5
        mean, se = sim.average()
        assert np.all(np.abs(exact.average(False) - mean) < 4 * se + 1e-9)
    else:
        r = cell_risk(
            COUNTS, mechanism="discrete_gaussian", rho=rho, sensitivity=SUB, measure=measure
        )
        assert r.values.shape == (6, 3) and np.all((r.values >= 0) & (r.values <= 1))


def test_large_rho_tends_to_the_no_noise_risk():
    r = cell_risk(COUNTS, mechanism="discrete_gaussian", rho=[1e4, 1e8], sensitivity=SUB)
    homogeneous = ((COUNTS > 0).sum(axis=1) == 1).astype(float)
    assert np.allclose(r.values[:, -1], homogeneous, atol=1e-12)
    assert r.average(False)[0] == pytest.approx(homogeneous.mean(), abs=1e-9)


def test_choose_rho_is_on_the_boundary():
    target = 0.3
    ch = choose_rho(COUNTS, target, sensitivity=SUB)
    assert ch.rho == ch.epsilon and ch.mechanism == "discrete_gaussian"
    risk = cell_risk(COUNTS, mechanism="discrete_gaussian", rho=ch.rho, sensitivity=SUB)
    assert risk.average(False)[0] <= target
    above = cell_risk(COUNTS, mechanism="discrete_gaussian", rho=ch.rho * 1.01, sensitivity=SUB)
    assert above.average(False)[0] > target
    same = choose_epsilon(COUNTS, target, mechanism="discrete_gaussian", sensitivity=SUB)
    assert same.epsilon == ch.rho
    with pytest.raises(InvalidParameterError, match="parameter is epsilon"):
        choose_epsilon(COUNTS, target).rho  # noqa: B018


def test_drha_table_has_a_rho_column():
    df = pl.DataFrame({"q": ["x", "x", "x", "y", "y"], "y": ["a", "a", "b", "b", "b"]})
    t = drha(
        df,
        "q",
        "y",
        epsilon=[1.0],
        rho=[0.1, 1.0],
        mechanism=["laplace", "discrete_gaussian"],
        levels=["a", "b"],
        neighbours="substitute",
        weighted=False,
    )
    dg = t.filter(pl.col("mechanism") == "discrete_gaussian")
    assert dg["rho"].to_list() == [0.1, 1.0] and dg["epsilon"].null_count() == 2
    lap = t.filter(pl.col("mechanism") == "laplace")
    assert lap["rho"].null_count() == 1 and lap["epsilon"].to_list() == [1.0]
    direct = cell_risk(
        [[2, 1], [0, 2]], mechanism="discrete_gaussian", rho=[0.1, 1.0], sensitivity=SUB
    )
    assert np.allclose(dg["risk"].to_numpy(), direct.average(False))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mechanism": "discrete_gaussian", "rho": 0.0}, "rho must be finite and > 0"),
        ({"mechanism": "discrete_gaussian", "rho": -1.0}, "rho must be finite and > 0"),
        ({"mechanism": "discrete_gaussian", "epsilon": 1.0}, "calibrated by rho"),
        ({"mechanism": "discrete_gaussian"}, "needs rho="),
        ({"mechanism": "laplace", "rho": 1.0}, "takes epsilon="),
        ({"mechanism": "discrete_gaussian", "rho": 1.0, "delta": 1e-6}, "needs no delta"),
        ({"mechanism": "discrete_gaussian", "rho": 1.0, "method": "paper"}, "method='exact'"),
    ],
)
def test_errors(kwargs, message):
    with pytest.raises(InvalidParameterError, match=message):
        cell_risk(COUNTS, **kwargs)


def test_choose_rho_refuses_epsilon_options():
    with pytest.raises(InvalidParameterError, match="takes no delta="):
        choose_rho(COUNTS, 0.3, delta=1e-6)
