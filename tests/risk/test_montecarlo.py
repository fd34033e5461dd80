"""Monte-Carlo DR-HA (dpframe.risk.montecarlo) against closed forms and exact probabilities."""

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import DPFrameError
from dpframe.risk.measures import cell_risk
from dpframe.risk.montecarlo import Simulation, simulate
from dpframe.risk.noise import absent_probability, noise_scale

Z = 4.5  # two-sided z bound for each Monte-Carlo comparison
CHI2_TAIL = 1e-6  # tail probability of the chi-square bound across cells

EPS = {
    "laplace": [0.05, 0.5, 2.0, 8.0],
    "gaussian": [0.05, 0.3, 0.9],
    "gaussian_pdp": [0.05, 0.5, 2.0, 8.0],
    "analytic_gaussian": [0.05, 0.5, 2.0, 8.0],
}
DELTA = {"laplace": None, "gaussian": 1e-3, "gaussian_pdp": 1e-3, "analytic_gaussian": 1e-3}


def local_formula(counts, mechanism, epsilon, delta=None, scenario8="conservative"):
    """Σ_{k: n_k>0} π(n_k) Π_{k'≠k} a(n_k'), a = F(0.5 - c), written independently."""
    counts = np.asarray(counts)
    scale = np.atleast_1d(noise_scale(mechanism, epsilon, delta, 1.0))
    a = absent_probability(mechanism, counts[:, :, None], scale[None, None, :])  # (N, K, E)
    out = np.zeros((counts.shape[0], scale.size))
    for k in range(counts.shape[1]):
        term = 1.0 - a[:, k]
        for j in range(counts.shape[1]):
            if j != k:
                term = term * a[:, j]
        if scenario8 == "records":
            weight = counts[:, k] / counts.sum(axis=1)
        else:
            weight = (counts[:, k] > 0).astype(float)
        out += weight[:, None] * term
    return out


def scenario_probabilities(counts, mechanism, epsilon, delta=None):
    """Exact P(Scenario s) per cell, (N, E, 8), from independent presence of counts."""
    counts = np.asarray(counts)
    scale = np.atleast_1d(noise_scale(mechanism, epsilon, delta, 1.0))
    a = absent_probability(mechanism, counts[:, :, None], scale[None, None, :])
    n_cells, n_levels = counts.shape
    empty = a.prod(axis=1)
    only = np.zeros((n_cells, n_levels, scale.size))
    for k in range(n_levels):
        t = 1.0 - a[:, k]
        for j in range(n_levels):
            if j != k:
                t = t * a[:, j]
        only[:, k] = t
    held = (counts > 0)[:, :, None]
    hit = (only * held).sum(axis=1)
    miss = (only * ~held).sum(axis=1)
    many = 1.0 - empty - hit - miss
    hom = ((counts > 0).sum(axis=1) == 1)[:, None]
    out = np.zeros((n_cells, scale.size, 8))
    out[..., 0] = np.where(hom, hit, 0)
    out[..., 1] = np.where(hom, miss, 0)
    out[..., 2] = np.where(hom, many, 0)
    out[..., 3] = np.where(hom, empty, 0)
    out[..., 4] = np.where(hom, 0, many)
    out[..., 5] = np.where(hom, 0, empty)
    out[..., 6] = np.where(hom, 0, miss)
    out[..., 7] = np.where(hom, 0, hit)
    return out


def homogeneous_table(rng, n_cells=40, n_levels=3):
    sizes = rng.integers(1, 7, n_cells)
    levels = rng.integers(0, n_levels, n_cells)
    counts = np.zeros((n_cells, n_levels), dtype=np.int64)
    counts[np.arange(n_cells), levels] = sizes
    return counts


def assert_matches(sim: Simulation, exact: np.ndarray, reps: int):
    """Each average within Z standard errors; cells jointly by a chi-square bound."""
    for weighted in (False, True):
        w = sim.weights(weighted)
        mean, se = sim.average(weighted)
        target = w @ exact
        # SE from the exact per-cell variance (a per-cell p of 0 or 1 has no variance)
        var = exact * (1 - exact) / reps if sim.scenario8 == "conservative" else sim.se**2
        se_exact = np.sqrt((w * w) @ var)
        assert np.all(np.abs(mean - target) <= Z * np.maximum(se_exact, 1e-12)), (
            mean,
            target,
            se,
        )
    if sim.scenario8 == "conservative":
        p = exact
        var = p * (1 - p) / reps
        keep = var > 1e-12
        for e in range(p.shape[1]):
            k = keep[:, e]
            chi2 = (((sim.values[k, e] - p[k, e]) ** 2) / var[k, e]).sum()
            assert chi2 <= stats.chi2.ppf(1 - CHI2_TAIL, df=max(int(k.sum()), 1)), (e, chi2)


@pytest.mark.parametrize("mechanism", list(EPS))
def test_all_homogeneous_matches_closed_form(mechanism):
    rng = np.random.default_rng(11)
    counts = homogeneous_table(rng)
    eps, delta, reps = EPS[mechanism], DELTA[mechanism], 4000
    sim = simulate(counts, mechanism=mechanism, epsilon=eps, delta=delta, reps=reps, rng=rng)
    exact = local_formula(counts, mechanism, eps, delta)
    closed = cell_risk(counts, mechanism=mechanism, epsilon=eps, delta=delta)
    np.testing.assert_allclose(closed.values, exact, rtol=1e-12, atol=1e-14)
    assert closed.all_exact
    assert_matches(sim, exact, reps)
    # all-homogeneous: only Scenarios 1-4 occur
    assert np.all(sim.scenario_share[:, 4:] == 0)


@pytest.mark.parametrize("scenario8", ["conservative", "records"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian_pdp"])
def test_heterogeneous_matches_exact(mechanism, scenario8):
    counts = np.array(
        [[3, 0, 0], [1, 1, 0], [2, 5, 0], [1, 0, 1], [4, 1, 2], [0, 9, 1], [1, 1, 1], [0, 0, 2]]
    )
    eps, delta, reps = [0.02, 0.4, 3.0], DELTA[mechanism], 6000
    sim = simulate(
        counts,
        mechanism=mechanism,
        epsilon=eps,
        delta=delta,
        reps=reps,
        rng=np.random.default_rng(5),
        scenario8=scenario8,
    )
    exact = cell_risk(counts, mechanism=mechanism, epsilon=eps, delta=delta, scenario8=scenario8)
    np.testing.assert_allclose(
        exact.values, local_formula(counts, mechanism, eps, delta, scenario8), atol=1e-12
    )
    assert_matches(sim, exact.values, reps)


def test_scenario_shares_sum_to_one_and_match_exact():
    counts = np.array([[3, 0, 0], [1, 1, 0], [2, 5, 0], [0, 0, 1], [4, 1, 2], [1, 1, 1]])
    eps, reps = [0.01, 0.5, 2.0, 50.0], 8000
    sim = simulate(counts, mechanism="laplace", epsilon=eps, reps=reps, rng=3)
    np.testing.assert_allclose(sim.scenario_share.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    per_cell = scenario_probabilities(counts, "laplace", eps)  # (N, E, 8)
    prob = per_cell.mean(axis=0)  # (E, 8)
    # each share averages N independent cell frequencies, each over reps draws
    se = np.sqrt((per_cell * (1 - per_cell)).sum(axis=0) / reps) / counts.shape[0]
    assert np.all(np.abs(sim.scenario_share - prob) <= Z * se + 1e-12)
    # Scenario 1 + 8 shares are the unweighted average risk
    mean, _ = sim.average(False)
    np.testing.assert_allclose(sim.scenario_share[:, 0] + sim.scenario_share[:, 7], mean)
    # at ε = 50 every count is where it was: Scenarios 1 (homogeneous) and 5 (heterogeneous)
    np.testing.assert_allclose(sim.scenario_share[-1, [0, 4]], [2 / 6, 4 / 6], atol=2e-3)


def test_heterogeneous_two_levels_below_paper_bound():
    """Two-level cells: the paper's Scenario-8 term bounds the risk (Theorems 1 and 3)."""
    counts = np.array([[1, 1], [5, 1], [2, 3], [1, 7], [4, 0], [0, 2], [10, 10]])
    for mechanism, eps, delta in [
        ("laplace", np.logspace(-2, 1.5, 8), None),
        ("gaussian", np.logspace(-2, -0.05, 6), 1e-4),
    ]:
        reps = 4000
        sim = simulate(counts, mechanism=mechanism, epsilon=eps, delta=delta, reps=reps, rng=17)
        paper = cell_risk(counts, mechanism=mechanism, epsilon=eps, delta=delta, method="paper")
        het = (counts > 0).sum(axis=1) > 1
        # per heterogeneous cell and on average: simulation <= bound (+ MC error)
        bound_se = np.sqrt(np.clip(paper.values * (1 - paper.values), 0, None) / reps)
        assert np.all(sim.values[het] <= paper.values[het] + Z * bound_se[het] + 1e-9)
        mean, se = sim.average(False)
        assert np.all(mean <= paper.average(False) + Z * se + 1e-9)


def test_paper_bound_fails_for_three_level_cells():
    """Scenario-8 'upper bound' is not one when a cell holds three levels (ε → 0: 3/8)."""
    counts = np.array([[2, 2, 2]])
    sim = simulate(counts, mechanism="laplace", epsilon=[0.01], reps=20000, rng=2)
    paper = cell_risk(counts, mechanism="laplace", epsilon=[0.01], method="paper")
    assert paper.values[0, 0] == pytest.approx(0.25, abs=0.01)
    assert sim.values[0, 0] == pytest.approx(3 / 8, abs=Z * sim.se[0, 0])
    assert sim.values[0, 0] > paper.values[0, 0] + 10 * sim.se[0, 0]


def test_reproducible_and_progress_does_not_change_results():
    counts = np.array([[3, 0], [2, 1], [0, 4]])
    kw = dict(mechanism="laplace", epsilon=[0.1, 1.0], reps=500)
    a = simulate(counts, rng=np.random.default_rng(42), progress=False, **kw)
    b = simulate(counts, rng=np.random.default_rng(42), progress=True, **kw)
    c = simulate(counts, rng=42, **kw)
    for x in (b, c):
        np.testing.assert_array_equal(a.values, x.values)
        np.testing.assert_array_equal(a.se, x.se)
        np.testing.assert_array_equal(a.scenario_share, x.scenario_share)
    d = simulate(counts, rng=np.random.default_rng(43), **kw)
    assert not np.array_equal(a.values, d.values)
    e = simulate(counts, **kw)  # fresh generator by default
    assert e.values.shape == (3, 2)


def test_many_chunks_accumulate_correctly(monkeypatch):
    """Force 10 draws per chunk: the accumulated estimate still matches the exact risk."""
    import dpframe.risk.montecarlo as mod

    counts = np.array([[3, 0], [2, 1], [0, 4]])
    monkeypatch.setattr(mod, "_CHUNK_ELEMENTS", 60)  # 60 // (3 * 2) = 10 reps per chunk
    reps = 3005  # a last, partial chunk
    sim = simulate(counts, mechanism="laplace", epsilon=[0.3, 3.0], reps=reps, rng=9)
    assert sim.reps == reps
    assert_matches(sim, local_formula(counts, "laplace", [0.3, 3.0]), reps)


def test_average_se_formula_and_weights():
    counts = np.array([[3, 0], [1, 2], [0, 5]])
    sim = simulate(counts, mechanism="laplace", epsilon=[0.5], reps=300, rng=1)
    for weighted, w in [(False, np.full(3, 1 / 3)), (True, np.array([3, 3, 5]) / 11)]:
        mean, se = sim.average(weighted)
        np.testing.assert_allclose(mean, w @ sim.values)
        np.testing.assert_allclose(se, np.sqrt((w**2) @ sim.se**2))
    # per-cell se is the sample s.d. over sqrt(reps)
    p = sim.values
    np.testing.assert_allclose(sim.se, np.sqrt(p * (1 - p) / (300 - 1)))


def test_records_scenario8_weights_by_remaining_share():
    # a (9, 1) cell at huge noise: each level alone with prob 1/4
    counts = np.array([[9, 1]])
    sim = simulate(
        counts, mechanism="laplace", epsilon=[1e-4], reps=20000, rng=4, scenario8="records"
    )
    cons = simulate(counts, mechanism="laplace", epsilon=[1e-4], reps=20000, rng=4)
    assert cons.values[0, 0] == pytest.approx(0.5, abs=Z * cons.se[0, 0])
    assert sim.values[0, 0] == pytest.approx(0.25, abs=Z * sim.se[0, 0])


def test_single_rep_has_nan_se():
    sim = simulate([[1, 0]], mechanism="laplace", epsilon=1.0, reps=1, rng=0)
    assert sim.values.shape == (1, 1) and np.isnan(sim.se).all()


@pytest.mark.parametrize(
    "counts",
    [
        [[1, 2, 3]][0],  # 1-d
        [[1], [2]],  # K = 1
        [[1, 0], [0, 0]],  # empty row
        [[1, -1]],  # negative
        [[1.5, 0]],  # fraction
        [["a", "b"]],  # not numbers
        np.zeros((0, 2)),  # no cells
    ],
)
def test_bad_counts(counts):
    with pytest.raises(DPFrameError):
        simulate(counts, mechanism="laplace", epsilon=1.0, reps=10)


@pytest.mark.parametrize(
    "kw",
    [
        dict(reps=0),
        dict(reps=2.5),
        dict(reps=True),
        dict(scenario8="half"),
        dict(progress="yes"),
        dict(rng="seed"),
        dict(epsilon=-1.0),
        dict(epsilon=[[0.1, 0.2]]),
        dict(mechanism="gaussian", delta=1e-5, epsilon=2.0),
        dict(mechanism="gaussian"),  # no delta
        dict(mechanism="poisson"),
    ],
)
def test_bad_parameters(kw):
    args = dict(mechanism="laplace", epsilon=1.0, reps=10)
    args.update(kw)
    with pytest.raises(DPFrameError):
        simulate([[1, 0]], **args)


def test_simulation_is_labelled_as_assessment():
    sim = simulate([[1, 0]], mechanism="laplace", epsilon=1.0, reps=10, rng=0)
    assert "not for publication" in sim.assessment
