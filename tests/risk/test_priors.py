"""Empirical-Bayes Dirichlet hyperparameters and cell-size models (dpframe.risk.priors).

Tolerances come from theory: Wald statistics against chi-square quantiles at 1e-4, z
scores against the matching normal quantile, and a parametric bootstrap whose spread is
compared with the Fisher standard errors through the chi-square law of a sample variance.
"""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.risk.priors import (
    BoundaryEstimateWarning,
    _paper_s2_moments,
    dirichlet_eb,
    dirichlet_multinomial_loglik,
    fit_size_model,
)

LEVEL = 1e-4  # false-alarm rate of each statistical check
Z = stats.norm.isf(LEVEL / 2)

# -- data ---------------------------------------------------------------------------------

_DATA_DIRS = [
    Path(__file__).resolve().parents[2] / "dpframe" / "data" / "drha",
    Path("/work/shared/data/drha"),
]


def _data_file(name: str) -> Path:
    for d in _DATA_DIRS:
        if (d / name).exists():
            return d / name
    pytest.skip(f"DR-HA data file {name} not available")


def _read(name: str) -> tuple[list[str], list[list[str]]]:
    with _data_file(name).open(newline="") as f:
        rows = [[c.strip() for c in row] for row in csv.reader(f) if row]
    return rows[0], rows[1:]


def _cells(name: str, qids: list[str], y: str) -> tuple[np.ndarray, list[str]]:
    """Counts grouped by the QIDs: (N cells, K levels of y)."""
    header, rows = _read(name)
    col = {h: i for i, h in enumerate(header[:-1])}
    levels = sorted({r[col[y]] for r in rows})
    cells: dict[tuple[str, ...], list[int]] = {}
    for r in rows:
        key = tuple(r[col[q]] for q in qids)
        cells.setdefault(key, [0] * len(levels))[levels.index(r[col[y]])] += int(r[-1])
    return np.array(list(cells.values()), dtype=np.int64), levels


def _paper_rows(name: str, y: str) -> np.ndarray:
    """Each QID x Y row as its own (homogeneous) cell, as the paper reads Adult."""
    header, rows = _read(name)
    col = header.index(y)
    levels = sorted({r[col] for r in rows})
    out = np.zeros((len(rows), len(levels)), dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, levels.index(r[col])] = int(r[-1])
    return out


ADULT_QIDS = ["age", "relationship", "education", "race", "sex", "hours-per-week"]


@pytest.fixture(scope="module")
def ff() -> np.ndarray:
    return _cells("FFcount.csv", ["IR", "MR", "OR", "CR", "CO"], "FF")[0]


@pytest.fixture(scope="module")
def bank() -> np.ndarray:
    return _cells("bankcount.csv", ["IR", "MR", "FF", "CR", "CO", "OR"], "class")[0]


@pytest.fixture(scope="module")
def adult6() -> np.ndarray:
    return _cells("adultcount.csv", ADULT_QIDS, "income")[0]


@pytest.fixture(scope="module")
def adult_rows() -> np.ndarray:
    return _paper_rows("adultcount.csv", "income")


def _simulate(rng: np.random.Generator, alpha: np.ndarray, n_cells: int, lam: float = 5.0):
    sizes = 1 + rng.poisson(lam, n_cells)
    return rng.multinomial(sizes, rng.dirichlet(alpha, n_cells))


# -- Dirichlet-multinomial likelihood -------------------------------------------------------


def test_loglik_matches_scipy_dirichlet_multinomial():
    rng = np.random.default_rng(1)
    counts = _simulate(rng, np.array([0.7, 2.0, 0.4]), 40, lam=3.0)
    alpha = np.array([0.9, 1.7, 0.3])
    ref = sum(stats.dirichlet_multinomial.logpmf(row, alpha, row.sum()) for row in counts)
    assert dirichlet_multinomial_loglik(counts, alpha) == pytest.approx(ref, rel=1e-12)


def test_singletons_inform_means_only():
    """A one-record cell contributes log(alpha_k / alpha.) whatever the precision."""
    single = np.array([[1, 0], [0, 1], [1, 0]])
    for scale in (0.01, 1.0, 300.0):
        alpha = scale * np.array([0.25, 0.75])
        assert dirichlet_multinomial_loglik(single, alpha) == pytest.approx(
            2 * math.log(0.25) + math.log(0.75), rel=1e-12
        )


# -- EB maximum likelihood ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alpha", "seed"), [((0.5, 1.5), 11), ((2.0, 1.0, 0.5), 12)], ids=["K2", "K3"]
)
def test_mle_recovers_alpha(alpha, seed):
    """Wald statistic with the observed Fisher information ~ chi2(K)."""
    a = np.array(alpha)
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an interior fit warns about nothing
        fit = dirichlet_eb(_simulate(rng, a, 2000))
    assert fit.boundary is None and fit.converged and fit.method == "mle"
    assert fit.n_cells == 2000 and fit.cov is not None
    d = fit.alpha - a
    wald = float(d @ np.linalg.solve(fit.cov, d))
    assert wald < stats.chi2.isf(LEVEL, a.size)
    np.testing.assert_allclose(fit.means, fit.alpha / fit.precision)
    assert fit.precision == pytest.approx(fit.alpha.sum())


def test_fisher_se_matches_parametric_bootstrap():
    """B bootstrap fits from alpha-hat: (B-1) s^2 / se^2 ~ chi2(B-1) if se is right."""
    rng = np.random.default_rng(21)
    a = np.array([2.0, 1.0, 0.5])
    fit = dirichlet_eb(_simulate(rng, a, 2000))
    b = 30
    boot = np.array([dirichlet_eb(_simulate(rng, fit.alpha, 2000)).alpha for _ in range(b)])
    ratio = (b - 1) * boot.var(axis=0, ddof=1) / fit.se**2
    lo, hi = stats.chi2.ppf(LEVEL / 2, b - 1), stats.chi2.isf(LEVEL / 2, b - 1)
    assert ((ratio > lo) & (ratio < hi)).all(), ratio
    # and the bootstrap mean is near alpha-hat (bias small against se / sqrt(B))
    assert (
        np.abs(boot.mean(axis=0) - fit.alpha)
        < Z * boot.std(axis=0, ddof=1) / math.sqrt(b) + 0.02 * fit.alpha
    ).all()


def test_mle_is_the_maximum(ff):
    """No nearby alpha (grid in log-space) has a higher likelihood; the score is ~0."""
    fit = dirichlet_eb(ff)
    best = fit.loglik
    assert best == pytest.approx(dirichlet_multinomial_loglik(ff, fit.alpha), rel=1e-12)
    steps = np.array([-0.05, 0.0, 0.05])
    for d in np.stack(np.meshgrid(steps, steps, steps), -1).reshape(-1, 3):
        assert dirichlet_multinomial_loglik(ff, fit.alpha * np.exp(d)) <= best + 1e-9
    moments = dirichlet_eb(ff, method="moments")
    assert moments.loglik <= best


def test_mle_with_many_singleton_cells():
    """Half the cells of size 1: the precision is still recovered (from the rest)."""
    rng = np.random.default_rng(31)
    a = np.array([0.5, 1.5])
    counts = np.vstack([_simulate(rng, a, 1500), rng.multinomial(1, rng.dirichlet(a, 1500))])
    fit = dirichlet_eb(counts)
    d = fit.alpha - a
    assert float(d @ np.linalg.solve(fit.cov, d)) < stats.chi2.isf(LEVEL, 2)


# -- moments ---------------------------------------------------------------------------------


def test_moments_is_consistent():
    """Spread at N = 2,000 from replicates; at N = 200,000 the error is ~10x smaller."""
    rng = np.random.default_rng(41)
    a = np.array([2.0, 1.0, 0.5])
    reps = np.array(
        [dirichlet_eb(_simulate(rng, a, 2000), method="moments").alpha for _ in range(20)]
    )
    sd_small = reps.std(axis=0, ddof=1)
    big = dirichlet_eb(_simulate(rng, a, 200_000), method="moments")
    assert big.boundary is None and big.method == "moments" and big.cov is None
    # sd estimated from 20 replicates: allow its chi2(19) upper quantile on top of Z
    sd_big = sd_small * math.sqrt(2000 / 200_000) * math.sqrt(19 / stats.chi2.ppf(LEVEL, 19))
    assert (np.abs(big.alpha - a) < Z * sd_big).all(), (big.alpha, sd_big)


def test_paper_s2_is_not_consistent():
    """On a large simulated table the printed S2 (theta-hat read as p-hat) is way off."""
    rng = np.random.default_rng(42)
    a = np.array([2.0, 1.0, 0.5])
    counts = _simulate(rng, a, 100_000)
    s2 = _paper_s2_moments(counts)["alpha"]
    assert (s2 < 0).all()
    assert np.allclose(dirichlet_eb(counts, method="moments").alpha, a, rtol=0.1)


# -- boundaries and edge cases ------------------------------------------------------------------


def test_all_homogeneous_table_is_the_alpha_to_zero_boundary():
    counts = np.array([[3, 0], [0, 5], [2, 0], [1, 0], [0, 1], [4, 0]])
    with pytest.warns(BoundaryEstimateWarning, match="homogeneous"):
        fit = dirichlet_eb(counts, min_precision=1e-7)
    assert fit.boundary == "homogeneous" and fit.cov is None
    assert fit.precision == pytest.approx(1e-7)
    np.testing.assert_allclose(fit.means, [4 / 6, 2 / 6])  # shares of cells, not of records
    # the likelihood only increases towards the boundary and tends to sum log m_k(i)
    limit = 4 * math.log(4 / 6) + 2 * math.log(2 / 6)
    assert fit.loglik == pytest.approx(limit, abs=1e-5)
    for prec in (1e-3, 0.1, 1.0, 10.0):
        assert dirichlet_multinomial_loglik(counts, fit.means * prec) < fit.loglik
    with pytest.warns(BoundaryEstimateWarning, match="rho = 1"):
        mom = dirichlet_eb(counts, method="moments")
    assert mom.boundary == "homogeneous" and mom.precision == pytest.approx(1e-6)
    np.testing.assert_allclose(mom.means, [10 / 16, 6 / 16])  # moments: record shares


def test_under_dispersed_table_is_the_multinomial_boundary():
    counts = np.array([[5, 5], [4, 6], [6, 4], [5, 5], [5, 5]])
    with pytest.warns(BoundaryEstimateWarning, match="not over-dispersed"):
        fit = dirichlet_eb(counts, max_precision=1e6)
    assert fit.boundary == "multinomial" and fit.precision == pytest.approx(1e6)
    np.testing.assert_allclose(fit.means, [0.5, 0.5])
    for prec in (1.0, 100.0, 1e4):
        assert dirichlet_multinomial_loglik(counts, [prec / 2, prec / 2]) < fit.loglik
    with pytest.warns(BoundaryEstimateWarning, match="rho"):
        mom = dirichlet_eb(counts, method="moments")
    assert mom.boundary == "multinomial" and mom.precision == pytest.approx(1e8)


def test_single_row():
    with pytest.warns(BoundaryEstimateWarning):
        fit = dirichlet_eb([[3, 2]])
    assert fit.boundary == "multinomial" and fit.n_cells == 1  # one cell shows no spread
    np.testing.assert_allclose(fit.means, [0.6, 0.4])
    with pytest.raises(InvalidDataError, match="at least two cells"):
        dirichlet_eb([[3, 2]], method="moments")
    with pytest.raises(InvalidDataError, match="same level"):
        dirichlet_eb([[4, 0]])


def test_all_singletons_are_refused():
    with pytest.raises(InvalidDataError, match="not identified"):
        dirichlet_eb([[1, 0], [0, 1], [1, 0]])


def test_level_without_records_is_flagged():
    counts = np.array([[3, 1, 0], [0, 4, 0], [2, 2, 0], [5, 0, 0], [2, 3, 0]])
    with pytest.warns(BoundaryEstimateWarning, match="hold no record"):
        fit = dirichlet_eb(counts)
    assert fit.absent_levels == (2,)
    assert 0 < fit.alpha[2] < 1e-8 * fit.precision
    ref = dirichlet_eb(counts[:, :2])
    np.testing.assert_allclose(fit.alpha[:2], ref.alpha, rtol=1e-9)


# -- the paper's S2 on its own tables --------------------------------------------------------


def test_paper_s2_fails_on_ff_subset(ff):
    assert ff.shape == (78, 3) and ff.sum() == 250
    s2 = _paper_s2_moments(ff)
    assert s2["k2_denominator"] == 0.0  # K = 2 form: s^2 - n p(1-p) with s^2 = n p(1-p)
    assert not np.isfinite(s2["k2_alpha"]).all()
    assert (s2["alpha"] < 0).all()  # K >= 2 form: negative for every level
    np.testing.assert_allclose(s2["alpha"], [-1.5084, -2.5837, -1.1548], atol=1e-4)
    fit = dirichlet_eb(ff)  # the replacement: an interior, positive, converged ML fit
    assert fit.boundary is None and fit.converged and (fit.alpha > 0).all()
    np.testing.assert_allclose(fit.alpha, [0.2303, 0.2279, 0.2064], atol=5e-4)


def test_paper_s2_fails_on_bankruptcy(bank):
    assert bank.shape == (103, 2) and bank.sum() == 250
    s2 = _paper_s2_moments(bank)
    assert s2["k2_denominator"] == 0.0 and not np.isfinite(s2["k2_alpha"]).all()
    assert (s2["alpha"] < 0).all()
    with pytest.warns(BoundaryEstimateWarning):
        fit = dirichlet_eb(bank)
    assert fit.boundary == "homogeneous"  # all 103 cells homogeneous: alpha. -> 0
    np.testing.assert_allclose(fit.means, [25 / 103, 78 / 103])


def test_adult_fits(adult6, adult_rows):
    assert adult6.shape == (5009, 2) and adult_rows.shape == (5974, 2)
    assert (_paper_s2_moments(adult6)["alpha"] < 0).all()
    fit = dirichlet_eb(adult6)
    assert fit.boundary is None and fit.converged
    np.testing.assert_allclose(fit.alpha, [1.3523, 0.3366], atol=5e-4)
    with pytest.warns(BoundaryEstimateWarning):
        paper = dirichlet_eb(adult_rows)
    assert paper.boundary == "homogeneous"


# -- size models ---------------------------------------------------------------------------


def _ztp_sample(rng: np.random.Generator, lam: float, n: int) -> np.ndarray:
    x = rng.poisson(lam, 3 * n)
    return x[x > 0][:n]


def _ztnb_sample(rng: np.random.Generator, r: float, p: float, n: int) -> np.ndarray:
    x = rng.negative_binomial(r, p, 4 * n)
    return x[x > 0][:n]


def test_ztp_recovers_lambda():
    rng = np.random.default_rng(51)
    x = _ztp_sample(rng, 2.43, 4000)
    m = fit_size_model(x)
    assert m.family == "poisson" and m.truncated
    assert abs(m.params["lambda"] - 2.43) < Z * m.se["lambda"]
    assert m.mean == pytest.approx(x.mean(), rel=1e-9)  # ML equation of the ZTP
    # the plain (untruncated) fit is biased upwards by far more than its SE
    plain = fit_size_model(x, truncated=False)
    assert plain.params["lambda"] == pytest.approx(x.mean())
    assert plain.params["lambda"] - 2.43 > 5 * m.se["lambda"]
    assert plain.loglik < m.loglik and plain.aic > m.aic


def test_ztnb_recovers_r_and_p():
    rng = np.random.default_rng(52)
    r, p = 1.5, 0.35
    x = _ztnb_sample(rng, r, p, 4000)
    m = fit_size_model(x, "negbin")
    assert m.family == "negbin" and list(m.params) == ["r", "p"]
    d = np.array([m.params["r"] - r, m.params["p"] - p])
    assert float(d @ np.linalg.solve(m.cov, d)) < stats.chi2.isf(LEVEL, 2)
    assert m.mean == pytest.approx(x.mean(), rel=1e-6)
    assert m.loglik > fit_size_model(x).loglik


def test_size_model_support_and_pmf_invariants():
    rng = np.random.default_rng(53)
    x = _ztnb_sample(rng, 2.0, 0.4, 500)
    tail = 1e-10
    for family in ("poisson", "negbin"):
        for truncated in (True, False):
            m = fit_size_model(x, family, tail=tail, truncated=truncated)
            n_max = int(m.support[-1])
            np.testing.assert_array_equal(m.support, np.arange(1, n_max + 1))
            assert (m.pmf > 0).all() and m.pmf.sum() == pytest.approx(1.0, abs=1e-12)
            assert m.mean == pytest.approx(float(m.support @ m.pmf))
            if m.family == "poisson":
                dist = stats.poisson(m.params["lambda"])
            else:
                dist = stats.nbinom(m.params["r"], m.params["p"])
            p1 = dist.sf(0)  # P(n >= 1)
            assert dist.sf(n_max) / p1 < tail <= dist.sf(n_max - 1) / p1  # the smallest n_max
            assert m.tail_mass == pytest.approx(dist.sf(n_max) / p1, rel=1e-6)
            ref = dist.pmf(m.support) / dist.pmf(m.support).sum()
            np.testing.assert_allclose(m.pmf, ref, rtol=1e-9)
            np.testing.assert_array_equal(m.pmf_at(m.support), m.pmf)
            assert m.pmf_at(0) == 0.0 and m.pmf_at(n_max + 1) == 0.0
            assert m.aic == pytest.approx(2 * len(m.params) - 2 * m.loglik)


def test_paper_footnote_6_plain_poisson_means(ff, bank, adult_rows, adult6):
    """truncated=False reproduces footnote 6: 4.6 (Adult), 2.43 (Bankruptcy), 3.21 (FF)."""
    for table, paper in ((adult_rows, 4.60), (bank, 2.43), (ff, 3.21)):
        plain = fit_size_model(table.sum(axis=1), truncated=False)
        assert round(plain.params["lambda"], 2) == paper
        ztp = fit_size_model(table.sum(axis=1))
        assert ztp.params["lambda"] < plain.params["lambda"]
    assert fit_size_model(bank.sum(axis=1)).params["lambda"] == pytest.approx(2.1423, abs=1e-4)
    # Adult's sizes are very over-dispersed: the ZTNB's r runs to 0 (logarithmic series)
    with pytest.warns(BoundaryEstimateWarning, match="logarithmic"):
        nb = fit_size_model(adult6.sum(axis=1), "negbin")
    assert nb.family == "negbin" and nb.params["r"] < 1e-6
    assert nb.aic < fit_size_model(adult6.sum(axis=1)).aic


def test_negbin_falls_back_on_under_dispersed_sizes():
    x = np.array([2, 3, 2, 3, 2, 3, 2, 3, 3, 2])
    with pytest.warns(BoundaryEstimateWarning, match="not over-dispersed"):
        m = fit_size_model(x, "negbin")
    assert m.family == "poisson" and "fell back" in m.note
    assert m.params == fit_size_model(x).params
    with pytest.warns(BoundaryEstimateWarning):
        assert fit_size_model(x, "negbin", truncated=False).family == "poisson"


def test_all_sizes_one():
    with pytest.warns(BoundaryEstimateWarning, match="lambda -> 0"):
        m = fit_size_model([1, 1, 1])
    assert m.params == {"lambda": 0.0}
    np.testing.assert_array_equal(m.support, [1])
    assert m.pmf.tolist() == [1.0] and m.mean == 1.0 and m.loglik == 0.0


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ([[1, -1], [2, 3]], ">= 0"),
        ([[0, 0], [2, 3]], "empty row"),
        ([[3], [2]], "K >= 2"),
        ([[1.5, 2.0], [2.0, 3.0]], "whole numbers"),
        ([1, 2, 3], "2-D"),
        ([[np.nan, 1.0], [2.0, 3.0]], "NaN"),
        (np.zeros((0, 2), dtype=int), "no rows"),
        ([[True, False], [False, True]], "integer"),
        ([["a", "b"]], "integer"),
    ],
)
def test_bad_counts(counts, match):
    with pytest.raises(InvalidDataError, match=match):
        dirichlet_eb(counts)


def test_bad_parameters():
    counts = [[3, 1], [1, 2]]
    with pytest.raises(InvalidParameterError, match="method"):
        dirichlet_eb(counts, method="bayes")
    with pytest.raises(InvalidParameterError, match="max_precision"):
        dirichlet_eb(counts, min_precision=1.0, max_precision=0.5)
    with pytest.raises(InvalidParameterError, match="alpha"):
        dirichlet_multinomial_loglik(counts, [1.0, -1.0])
    with pytest.raises(InvalidParameterError, match="family"):
        fit_size_model([1, 2], "geometric")
    for tail in (0.0, 1.0, -1e-3):
        with pytest.raises(InvalidParameterError, match="tail"):
            fit_size_model([1, 2], tail=tail)
    with pytest.raises(InvalidParameterError, match="truncated"):
        fit_size_model([1, 2], truncated="yes")
    with pytest.raises(InvalidParameterError, match="n must be"):
        fit_size_model([1, 2]).pmf_at(1.5)


@pytest.mark.parametrize(
    ("sizes", "match"),
    [
        ([1, 0, 2], ">= 1"),
        ([3, -2], ">= 1"),
        ([1.5, 2.0], "whole numbers"),
        ([], "non-empty"),
        ([[1, 2], [3, 4]], "1-D"),
    ],
)
def test_bad_sizes(sizes, match):
    with pytest.raises(InvalidDataError, match=match):
        fit_size_model(sizes)
