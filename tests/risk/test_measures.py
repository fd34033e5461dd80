"""DR-HA measures (dpframe.risk.measures) against independent computations.

The oracles here share nothing with the kernel but the definition: presence patterns are
enumerated with their probabilities from scipy's noise CDFs, count vectors with their
(Dirichlet-)multinomial pmfs written from ``gammaln``, and the paper's closed forms are
typed in from the paper (with the corrections in docs/papers.md).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from scipy import stats
from scipy.special import beta as beta_fn
from scipy.special import erf, gammaln

from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.risk.measures import MEASURES, CellRisk, cell_risk
from dpframe.risk.noise import noise_scale

MECHS = [
    ("laplace", None),
    ("gaussian", 1e-3),
    ("gaussian_pdp", 1e-3),
    ("analytic_gaussian", 1e-3),
]
EPS = np.array([0.004, 0.05, 0.3, 0.9])  # < 1 so the classic Gaussian is valid too


# --------------------------------------------------------------------------- oracles


def scale_of(mechanism, eps, delta, sensitivity=1.0):
    """The noise scale, written out from eqs. (3)-(4) (analytic Gaussian: the kernel's)."""
    eps = np.asarray(eps, dtype=float)
    if mechanism == "laplace":
        return sensitivity / eps
    if mechanism == "gaussian":
        return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / eps
    if mechanism == "gaussian_pdp":
        z = stats.norm.ppf(delta / 2)
        return sensitivity * (np.sqrt(z * z + 2 * eps) - z) / (2 * eps)
    return noise_scale(mechanism, eps, delta, sensitivity)


def cdf(mechanism, x, scale):
    if mechanism == "laplace":
        return stats.laplace.cdf(x, scale=scale)
    return stats.norm.cdf(x, scale=scale)


def brute_local(cell, mechanism, scale, records=False):
    """Sum over the 2^K presence patterns of the sanitized cell."""
    cell = [int(c) for c in cell]
    n = sum(cell)
    total = np.zeros_like(np.asarray(scale, dtype=float))
    for present in itertools.product([False, True], repeat=len(cell)):
        prob = np.ones_like(total)
        for c, p in zip(cell, present, strict=True):
            absent = cdf(mechanism, 0.5 - c, scale)
            prob = prob * ((1 - absent) if p else absent)
        if sum(present) == 1:
            k = present.index(True)
            if cell[k] > 0:  # homogeneous in one of the cell's own levels
                total = total + prob * (cell[k] / n if records else 1.0)
    return total


def compositions(n, k):
    return [c for c in itertools.product(range(n + 1), repeat=k) if sum(c) == n]


def multinomial_pmf(c, p):
    c = np.asarray(c, dtype=float)
    p = np.asarray(p, dtype=float)
    if ((c > 0) & (p == 0)).any():
        return 0.0
    logp = np.where(c > 0, c * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return math.exp(gammaln(c.sum() + 1) - gammaln(c + 1).sum() + logp.sum())


def dirmult_pmf(c, alpha):
    c = np.asarray(c, dtype=float)
    a = np.asarray(alpha, dtype=float)
    n, a0 = c.sum(), a.sum()
    log = (
        gammaln(n + 1)
        - gammaln(c + 1).sum()
        + gammaln(a0)
        - gammaln(n + a0)
        + (gammaln(c + a) - gammaln(a)).sum()
    )
    return math.exp(log)


def brute_expectation(n, k, pmf, mechanism, scale, records=False):
    return sum(pmf(c) * brute_local(c, mechanism, scale, records) for c in compositions(n, k))


def random_table(rng, n_cells, k, max_count):
    t = rng.integers(0, max_count + 1, size=(n_cells, k))
    t[t.sum(axis=1) == 0, 0] = 1
    return t


# --------------------------------------------------------------------------- paper closed forms


def lap_hom(eps, n, k):
    """Corollary 2 / Theorem 1 Scenario-1 term, Laplace."""
    return (1 - 0.5 * np.exp(-0.5 * eps)) ** (k - 1) * (1 - 0.5 * np.exp((0.5 - n) * eps))


def lap_het(eps, n, k):
    """Theorem 1 Scenario-8 term with the supplement's power K - 2 (eq. 14)."""
    return (
        (1 - 0.5 * np.exp(-0.5 * eps)) ** (k - 2)
        * 0.5
        * (np.exp(-0.5 * eps) + np.exp((1.5 - n) * eps) - np.exp((1 - n) * eps))
    )


def gauss_hom(sigma, n, k):
    """Corollary 4 / eq. (27), general K."""
    s = np.sqrt(2) * sigma
    return (1 + erf(0.5 / s)) ** (k - 1) * (1 + erf((n - 0.5) / s)) / 2**k


def gauss_het(sigma, n, k):
    """Eq. (23)'s Scenario-8 term: (1 + erf(0.5/s))^(K-2) E_i / 2^K."""
    s = np.sqrt(2) * sigma
    e_i = (1 - erf((1.5 - n) / s)) * (1 + erf(-0.5 / s)) + (1 + erf((1.5 - n) / s)) * (
        1 + erf(0.5 / s)
    )
    return (1 + erf(0.5 / s)) ** (k - 2) * e_i / 2**k


def dm_homogeneous(n, alpha):
    """A_i of Theorem 1: P(Dirichlet-multinomial cell of size n is homogeneous)."""
    a = np.asarray(alpha, dtype=float)
    return sum(
        math.exp(gammaln(a.sum()) + gammaln(ak + n) - gammaln(a.sum() + n) - gammaln(ak))
        for ak in a
    )


# --------------------------------------------------------------------------- data


def _data_dir() -> Path | None:
    for d in (
        Path(__file__).resolve().parents[2] / "dpframe" / "data" / "drha",
        Path("/work/shared/data/drha"),
    ):
        if (d / "FFcount.csv").exists():
            return d
    return None


def read_table(file, qids, y, levels):
    d = _data_dir()
    if d is None:
        pytest.skip("the DR-HA example tables are not available")
    raw = pl.read_csv(d / file)  # CRLF; the last header repeats Y's name
    raw = raw.rename({raw.columns[-1]: "count"}).with_columns(pl.col(y).str.strip_chars())
    wide = raw.pivot(on=y, index=list(qids), values="count", aggregate_function="sum")
    return wide.fill_null(0).select(levels).to_numpy()


@pytest.fixture(scope="module")
def ff():
    return read_table("FFcount.csv", ["IR", "MR", "OR", "CR", "CO"], "FF", ["A", "N", "P"])


@pytest.fixture(scope="module")
def bank():
    return read_table("bankcount.csv", ["IR", "MR", "FF", "CR", "CO", "OR"], "class", ["B", "NB"])


# --------------------------------------------------------------------------- local


@pytest.mark.parametrize(("mechanism", "delta"), MECHS)
@pytest.mark.parametrize("scenario8", ["conservative", "records"])
def test_local_matches_presence_enumeration(mechanism, delta, scenario8):
    rng = np.random.default_rng(7)
    for k in (2, 3, 4):
        t = random_table(rng, 12, k, 4)
        for sens in (1.0, 2.0):
            r = cell_risk(
                t,
                mechanism=mechanism,
                epsilon=EPS,
                delta=delta,
                sensitivity=sens,
                scenario8=scenario8,
            )
            scale = scale_of(mechanism, EPS, delta, sens)
            want = np.stack([brute_local(c, mechanism, scale, scenario8 == "records") for c in t])
            np.testing.assert_allclose(r.values, want, rtol=1e-10, atol=1e-14)
            assert r.values.shape == (12, EPS.size)
            homogeneous = (t > 0).sum(axis=1) == 1
            expect_exact = homogeneous | (scenario8 == "records")
            assert r.exact.tolist() == expect_exact.tolist()


def test_local_large_counts_and_wide_eps():
    t = np.array([[500, 0, 0], [250, 250, 0], [1, 1, 1], [0, 0, 7]])
    eps = np.logspace(-4, 2, 13)
    for mechanism, delta in [("laplace", None), ("gaussian_pdp", 1e-5)]:
        r = cell_risk(t, mechanism=mechanism, epsilon=eps, delta=delta)
        scale = scale_of(mechanism, eps, delta)
        want = np.stack([brute_local(c, mechanism, scale) for c in t])
        np.testing.assert_allclose(r.values, want, rtol=1e-10, atol=1e-300)


# ----------------------------------------------------------- expected, shrinkage, marginal


@pytest.mark.parametrize(("mechanism", "delta"), MECHS)
@pytest.mark.parametrize("scenario8", ["conservative", "records"])
def test_expected_matches_enumeration(mechanism, delta, scenario8):
    rng = np.random.default_rng(11)
    records = scenario8 == "records"
    scale = scale_of(mechanism, EPS, delta)
    for k in (2, 3):
        t = random_table(rng, 8, k, 3)
        t[0] = [1] + [0] * (k - 1)  # n = 1
        t[1] = [0] * (k - 1) + [5]  # homogeneous
        r = cell_risk(
            t,
            mechanism=mechanism,
            epsilon=EPS,
            delta=delta,
            measure="expected",
            scenario8=scenario8,
        )
        for i, cell in enumerate(t):
            n = int(cell.sum())
            p = cell / n
            want = brute_expectation(
                n, k, lambda c, p=p: multinomial_pmf(c, p), mechanism, scale, records
            )
            np.testing.assert_allclose(r.values[i], want, rtol=1e-10, atol=1e-14)
        homogeneous = (t > 0).sum(axis=1) == 1
        expect_exact = homogeneous | (t.sum(axis=1) == 1) | records
        assert r.exact.tolist() == expect_exact.tolist()


@pytest.mark.parametrize(("mechanism", "delta"), MECHS)
@pytest.mark.parametrize("scenario8", ["conservative", "records"])
def test_shrinkage_matches_enumeration(mechanism, delta, scenario8):
    records = scenario8 == "records"
    scale = scale_of(mechanism, EPS, delta)
    for alpha in ([0.7, 2.5], [0.4, 1.0, 3.0]):
        k = len(alpha)
        t = np.zeros((5, k), dtype=int)
        t[:, 0] = [1, 2, 3, 4, 6]  # shrinkage depends on the size only
        t[2, -1] = 2  # ... not on the counts: (3, .., 2) has n = 5
        r = cell_risk(
            t,
            mechanism=mechanism,
            epsilon=EPS,
            delta=delta,
            measure="shrinkage",
            alpha=alpha,
            scenario8=scenario8,
        )
        for i, n in enumerate(t.sum(axis=1)):
            want = brute_expectation(
                int(n), k, lambda c, a=alpha: dirmult_pmf(c, a), mechanism, scale, records
            )
            np.testing.assert_allclose(r.values[i], want, rtol=1e-10, atol=1e-14)
        assert r.exact.tolist() == ((t.sum(axis=1) == 1) | records).tolist()


@pytest.mark.parametrize(("mechanism", "delta"), [MECHS[0], MECHS[2]])
@pytest.mark.parametrize("scenario8", ["conservative", "records"])
def test_marginal_measures_are_sums_over_sizes(mechanism, delta, scenario8):
    records = scenario8 == "records"
    scale = scale_of(mechanism, EPS, delta)
    sizes = SimpleNamespace(support=np.array([1, 2, 4, 5]), pmf=np.array([0.1, 0.4, 0.3, 0.2]))
    t = np.array([[3, 0, 0], [2, 1, 0], [1, 1, 2], [0, 4, 2]])
    r = cell_risk(
        t,
        mechanism=mechanism,
        epsilon=EPS,
        delta=delta,
        measure="marginal",
        size_model=sizes,
        scenario8=scenario8,
    )
    for i, cell in enumerate(t):
        p = cell / cell.sum()
        want = sum(
            f
            * brute_expectation(
                int(n), 3, lambda c, p=p: multinomial_pmf(c, p), mechanism, scale, records
            )
            for n, f in zip(sizes.support, sizes.pmf, strict=True)
        )
        np.testing.assert_allclose(r.values[i], want, rtol=1e-10)
    assert r.exact.tolist() == [True, records, records, records]

    alpha = [0.5, 1.5, 1.0]
    rms = cell_risk(
        t,
        mechanism=mechanism,
        epsilon=EPS,
        delta=delta,
        measure="marginal_shrinkage",
        alpha=alpha,
        size_model=sizes,
        scenario8=scenario8,
    )
    want = sum(
        f * brute_expectation(int(n), 3, lambda c: dirmult_pmf(c, alpha), mechanism, scale, records)
        for n, f in zip(sizes.support, sizes.pmf, strict=True)
    )
    np.testing.assert_allclose(rms.values, np.tile(want, (4, 1)), rtol=1e-10)
    assert rms.exact.tolist() == [records] * 4
    np.testing.assert_allclose(rms.average(True), want, rtol=1e-12)


def test_marginal_skips_only_negligible_size_mass():
    t = np.array([[2, 1], [3, 0]])
    eps = np.array([0.1, 1.0])
    tail = SimpleNamespace(support=[1, 2, 250], pmf=[0.5, 0.5 - 1e-17, 1e-17])
    head = SimpleNamespace(support=[1, 2], pmf=[0.5, 0.5])
    for measure, kw in [("marginal", {}), ("marginal_shrinkage", {"alpha": [1.0, 2.0]})]:
        a = cell_risk(t, mechanism="laplace", epsilon=eps, measure=measure, size_model=tail, **kw)
        b = cell_risk(t, mechanism="laplace", epsilon=eps, measure=measure, size_model=head, **kw)
        np.testing.assert_allclose(a.values, b.values, atol=1e-15)


def test_marginal_printed_form_is_not_definition_9(bank):
    """Eqs. (16)/(20) weigh each cell by f(n_i) at its own size (an erratum)."""
    n = bank.sum(axis=1)
    lam = n.mean()  # any size model will do; a zero-truncated Poisson here
    support = np.arange(1, 60)
    pmf = stats.poisson.pmf(support, lam)
    pmf /= pmf.sum()
    sizes = SimpleNamespace(support=support, pmf=pmf)
    eps = np.array([100.0])
    r = cell_risk(bank, mechanism="laplace", epsilon=eps, measure="marginal", size_model=sizes)
    # Definition 9: every cell homogeneous, so rho^m -> 1 as eps -> inf
    np.testing.assert_allclose(r.average(False), 1.0, atol=1e-12)
    assert r.all_exact
    # printed eq. (20): sum_i w_i f(n_i) (...)  ->  mean f(n_i), far from 1
    f_at_own = np.interp(n, support, pmf)
    printed = np.mean(f_at_own * lap_hom(100.0, n, 2))
    assert printed < 0.3


# --------------------------------------------------------------------------- Corollaries 2 and 4


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize(("mechanism", "delta"), MECHS)
def test_corollaries_on_homogeneous_tables(k, mechanism, delta):
    rng = np.random.default_rng(3 + k)
    n = rng.integers(1, 9, size=10)
    t = np.zeros((10, k), dtype=int)
    t[np.arange(10), rng.integers(0, k, size=10)] = n
    scale = scale_of(mechanism, EPS, delta)
    if mechanism == "laplace":
        closed = lap_hom(EPS[None, :], n[:, None], k)  # eq. (18)
    else:
        closed = gauss_hom(scale[None, :], n[:, None], k)  # eq. (27), general K
    for measure in ("local", "expected"):
        for method in ("exact", "paper"):
            r = cell_risk(
                t, mechanism=mechanism, epsilon=EPS, delta=delta, measure=measure, method=method
            )
            np.testing.assert_allclose(r.values, closed, rtol=1e-12)
            assert r.all_exact
            w = n / n.sum()
            np.testing.assert_allclose(r.average(True), w @ closed, rtol=1e-12)
            np.testing.assert_allclose(r.average(False), closed.mean(axis=0), rtol=1e-12)
    # eqs. (20)/(29) read as Definition 9: sum_n f(n) hom(n), the same for every cell
    sizes = SimpleNamespace(support=np.array([1, 3, 7]), pmf=np.array([0.2, 0.5, 0.3]))
    if mechanism == "laplace":
        per_n = lap_hom(EPS[None, :], sizes.support[:, None], k)
    else:
        per_n = gauss_hom(scale[None, :], sizes.support[:, None], k)
    for method in ("exact", "paper"):
        r = cell_risk(
            t,
            mechanism=mechanism,
            epsilon=EPS,
            delta=delta,
            measure="marginal",
            size_model=sizes,
            method=method,
        )
        np.testing.assert_allclose(r.values, np.tile(sizes.pmf @ per_n, (10, 1)), rtol=1e-12)
        assert r.all_exact


@pytest.mark.parametrize("alpha", [[1.0, 1.0], [2.0, 3.0], [0.5, 1.0, 2.0]])
@pytest.mark.parametrize(("mechanism", "delta"), [MECHS[0], MECHS[2]])
def test_corollary_shrinkage_drops_scenario8(alpha, mechanism, delta):
    """(19)/(28) keep only A_i hom(n_i); the Scenario-8 part is not zero under the prior."""
    k = len(alpha)
    n = np.array([1, 2, 3, 5])
    t = np.zeros((4, k), dtype=int)
    t[:, 0] = n  # all homogeneous: the shrinkage measure does not care
    scale = scale_of(mechanism, EPS, delta)
    hom = lap_hom(EPS, n[:, None], k) if mechanism == "laplace" else gauss_hom(scale, n[:, None], k)
    a_i = np.array([dm_homogeneous(m, alpha) for m in n])[:, None]
    corollary = a_i * hom  # eq. (19), and eq. (28) with 2^K and power K-1
    exact = cell_risk(
        t, mechanism=mechanism, epsilon=EPS, delta=delta, measure="shrinkage", alpha=alpha
    ).values
    scen8 = np.stack(
        [
            sum(
                dirmult_pmf(c, alpha) * brute_local(c, mechanism, scale)
                for c in compositions(int(m), k)
                if sum(x > 0 for x in c) > 1
            )
            if m > 1
            else np.zeros(EPS.size)
            for m in n
        ]
    )
    np.testing.assert_allclose(exact, corollary + scen8, rtol=1e-10)
    np.testing.assert_allclose(exact[0], corollary[0], rtol=1e-12)  # n = 1: no Scenario 8
    assert (exact[1:] > corollary[1:] + 1e-3).all()
    if k == 2 and mechanism != "laplace":
        # the printed eq. (28) divides by 4 B(a1, a2) although A_i is already normalised
        printed = corollary / beta_fn(*alpha)
        same = math.isclose(beta_fn(*alpha), 1.0)
        assert np.allclose(printed, corollary) == same
    # the paper's form with the Scenario-8 term kept
    het = lap_het(EPS, n[:, None], k) if mechanism == "laplace" else gauss_het(scale, n[:, None], k)
    kept = corollary + (1 - a_i) * np.where(n[:, None] >= 2, het, 0.0)
    paper = cell_risk(
        t,
        mechanism=mechanism,
        epsilon=EPS,
        delta=delta,
        measure="shrinkage",
        alpha=alpha,
        method="paper",
    ).values
    np.testing.assert_allclose(paper, kept, rtol=1e-12)
    if k == 2:  # only two-level cells arise: the paper's term is a bound here
        assert (paper >= exact - 1e-14).all()


def test_shrinkage_paper_bound_fails_with_three_levels():
    alpha = [1.0, 1.0, 1.0]
    t = np.array([[3, 0, 0]])
    eps = np.array([1e-6])
    exact = cell_risk(t, mechanism="laplace", epsilon=eps, measure="shrinkage", alpha=alpha)
    paper = cell_risk(
        t, mechanism="laplace", epsilon=eps, measure="shrinkage", alpha=alpha, method="paper"
    )
    # eps -> 0: every count present w.p. 1/2, so rho = E|support(c)| / 2^K
    p3 = dirmult_pmf([1, 1, 1], alpha)  # = 0.1 (uniform over the 10 compositions)
    a3 = dm_homogeneous(3, alpha)  # = 0.3
    np.testing.assert_allclose(exact.values[0, 0], (a3 + 2 * (1 - a3 - p3) + 3 * p3) / 8, atol=1e-6)
    np.testing.assert_allclose(paper.values[0, 0], a3 / 8 + (1 - a3) / 4, atol=1e-6)
    assert paper.values[0, 0] < exact.values[0, 0]


# ------------------------------------------------ paper forms for heterogeneous cells


@pytest.mark.parametrize(("mechanism", "delta"), MECHS)
def test_paper_local_and_expected_match_theorems(mechanism, delta):
    """Theorem 1 eqs. (13)-(14) / Theorem 3 eqs. (22)-(23), Scenario-8 power K - 2."""
    t = np.array([[4, 0, 0], [3, 1, 0], [2, 2, 1], [1, 0, 0], [0, 5, 5]])
    n = t.sum(axis=1)[:, None]
    scale = scale_of(mechanism, EPS, delta)
    if mechanism == "laplace":
        hom, het = lap_hom(EPS, n, 3), lap_het(EPS, n, 3)
    else:
        hom, het = gauss_hom(scale, n, 3), gauss_het(scale, n, 3)
    homog = ((t > 0).sum(axis=1) == 1)[:, None]
    r = cell_risk(t, mechanism=mechanism, epsilon=EPS, delta=delta, method="paper")
    np.testing.assert_allclose(r.values, np.where(homog, hom, het), rtol=1e-12)
    assert r.exact.tolist() == homog.ravel().tolist()
    s = ((t / n) ** n).sum(axis=1)[:, None]
    r = cell_risk(
        t, mechanism=mechanism, epsilon=EPS, delta=delta, measure="expected", method="paper"
    )
    want = s * hom + np.where(n >= 2, (1 - s) * het, 0.0)
    np.testing.assert_allclose(r.values, want, rtol=1e-12)


def test_printed_eq13_power_is_not_a_bound():
    """Eq. (13) as typeset gives the Scenario-8 term the power 2K - 3 and falls below the
    exact value; the supplement's power K - 2 is a bound for two-level cells."""
    t = np.array([[3, 1, 0]])
    eps = np.array([1e-4, 0.5, 2.0])
    exact = cell_risk(t, mechanism="laplace", epsilon=eps).values[0]
    printed = (1 - 0.5 * np.exp(-0.5 * eps)) ** 2 * lap_het(eps, 4, 3)
    corrected = lap_het(eps, 4, 3)
    assert (printed < exact).all()
    assert (corrected >= exact).all()
    # (S1), K = 2: the factor is 1/2 (as in S2), not (1 - e^{-eps/2}/2)
    t2 = np.array([[3, 1]])
    paper = cell_risk(t2, mechanism="laplace", epsilon=eps, method="paper").values[0]
    x = np.exp(-0.5 * eps) + np.exp((1.5 - 4) * eps) - np.exp((1 - 4) * eps)
    np.testing.assert_allclose(paper, 0.5 * x, rtol=1e-12)
    printed_s1 = (1 - 0.5 * np.exp(-0.5 * eps)) * x
    assert (printed_s1[1:] > paper[1:] * 1.2).all()


def test_scenario8_bound_fails_for_three_levels():
    """docs/papers.md erratum: a cell holding three levels, eps -> 0: exact 3/8, 'bound' 2/8."""
    t = np.array([[4, 2, 1]])  # the FF table's three-level cell
    for mechanism, delta, eps in [("laplace", None, 1e-7), ("gaussian_pdp", 1e-3, 1e-7)]:
        exact = cell_risk(t, mechanism=mechanism, epsilon=eps, delta=delta)
        paper = cell_risk(t, mechanism=mechanism, epsilon=eps, delta=delta, method="paper")
        np.testing.assert_allclose(exact.values[0, 0], 3 / 8, atol=1e-5)
        np.testing.assert_allclose(paper.values[0, 0], 2 / 8, atol=1e-5)
        assert paper.values[0, 0] < exact.values[0, 0]
        assert not exact.exact[0] and not paper.exact[0]
    eps = np.logspace(-3, 2, 60)
    exact = cell_risk(t, mechanism="laplace", epsilon=eps).values[0]
    paper = cell_risk(t, mechanism="laplace", epsilon=eps, method="paper").values[0]
    assert (paper < exact).any() and (paper > exact).any()


@pytest.mark.parametrize(("mechanism", "delta"), [MECHS[0], MECHS[2], MECHS[3]])
def test_scenario8_term_bounds_two_level_cells(mechanism, delta):
    """For a cell with exactly two levels the paper's het(n) (the cell (n-1, 1)) is >= the
    exact value, for K = 2 and 3, at every eps on the grid."""
    eps = np.logspace(-3, 2, 41)
    for k in (2, 3):
        rows = [[x, n - x] + [0] * (k - 2) for n in range(2, 31) for x in range(1, n)]
        t = np.array(rows)
        exact = cell_risk(t, mechanism=mechanism, epsilon=eps, delta=delta).values
        paper = cell_risk(t, mechanism=mechanism, epsilon=eps, delta=delta, method="paper").values
        assert (paper >= exact - 1e-15).all()
        # equality for the most unbalanced cell, (n - 1, 1)
        unbalanced = [i for i, r in enumerate(rows) if min(r[0], r[1]) == 1]
        np.testing.assert_allclose(paper[unbalanced], exact[unbalanced], rtol=1e-9, atol=1e-300)
        # and so the expected measure's bound holds for two-level plug-ins too
        te = np.array([[5, 2] + [0] * (k - 2), [1, 6] + [0] * (k - 2)])
        ex = cell_risk(te, mechanism=mechanism, epsilon=eps, delta=delta, measure="expected")
        pa = cell_risk(
            te, mechanism=mechanism, epsilon=eps, delta=delta, measure="expected", method="paper"
        )
        assert (pa.values >= ex.values - 1e-15).all()


# --------------------------------------------------------------------------- limits and edge cases


def test_limits_large_and_small_epsilon():
    rng = np.random.default_rng(5)
    t = random_table(rng, 40, 3, 3)
    n = t.sum(axis=1)
    homog = (t > 0).sum(axis=1) == 1
    r = cell_risk(t, mechanism="laplace", epsilon=200.0)
    np.testing.assert_allclose(r.average(False), homog.mean(), atol=1e-12)
    np.testing.assert_allclose(r.average(True), n[homog].sum() / n.sum(), atol=1e-12)
    r = cell_risk(t, mechanism="gaussian_pdp", epsilon=1e4, delta=1e-5)
    np.testing.assert_allclose(r.average(False), homog.mean(), atol=1e-12)
    # eps -> 0: every count present w.p. 1/2; a homogeneous cell keeps 2^-K
    for mechanism, delta in [("laplace", None), ("gaussian_pdp", 1e-5)]:
        r = cell_risk(t, mechanism=mechanism, epsilon=1e-9, delta=delta)
        np.testing.assert_allclose(r.values[homog, 0], 2.0**-3, atol=1e-6)
        levels = (t > 0).sum(axis=1)
        np.testing.assert_allclose(r.values[:, 0], levels / 8, atol=1e-6)


def test_single_cell_single_record():
    t = [[1, 0]]
    eps = np.array([0.01, 1.0, 10.0])
    want = (1 - 0.5 * np.exp(-0.5 * eps)) ** 2
    one = SimpleNamespace(support=[1], pmf=[1.0])
    cases = {
        "local": {},
        "expected": {},
        "shrinkage": {"alpha": [0.3, 2.0]},
        "marginal": {"size_model": one},
        "marginal_shrinkage": {"alpha": [0.3, 2.0], "size_model": one},
    }
    for measure, kw in cases.items():
        for method in ("exact", "paper"):
            r = cell_risk(t, mechanism="laplace", epsilon=eps, measure=measure, method=method, **kw)
            assert isinstance(r, CellRisk)
            np.testing.assert_allclose(r.values, want[None, :], rtol=1e-12)
            assert r.all_exact, (measure, method)
            assert r.sizes.tolist() == [1]
            assert r.measure == measure and r.method == method and r.delta is None
    r = cell_risk([[0, 2]], mechanism="laplace", epsilon=eps)
    np.testing.assert_allclose(r.values[0], lap_hom(eps, 2, 2), rtol=1e-12)
    r = cell_risk([[1, 1]], mechanism="laplace", epsilon=eps)
    a1 = 0.5 * np.exp(-0.5 * eps)
    np.testing.assert_allclose(r.values[0], 2 * (1 - a1) * a1, rtol=1e-12)
    assert not r.all_exact


def test_result_is_read_only_and_input_untouched():
    eps = np.array([0.5, 1.0])
    t = np.array([[2, 0], [1, 3]])
    r = cell_risk(t, mechanism="gaussian_pdp", epsilon=eps, delta=1e-3)
    assert eps.flags.writeable and t.flags.writeable
    assert r.delta == 1e-3 and r.mechanism == "gaussian_pdp"
    with pytest.raises(ValueError):
        r.values[0, 0] = 0.0
    assert cell_risk(t.astype(float), mechanism="laplace", epsilon=1.0).values.shape == (2, 1)


# --------------------------------------------------------------------------- the paper's tables


def test_bankruptcy_table(bank):
    assert bank.shape == (103, 2)
    assert ((bank > 0).sum(axis=1) == 1).all()
    assert bank.sum() == 250
    eps = np.array([1e-6, 1.0, 100.0])
    n = bank.sum(axis=1)
    for measure in ("local", "expected"):
        r = cell_risk(bank, mechanism="laplace", epsilon=eps, measure=measure)
        assert r.all_exact
        want = lap_hom(eps[None, :], n[:, None], 2)
        np.testing.assert_allclose(r.average(False), want.mean(axis=0), rtol=1e-12)
        # Sec. 5.2: lower asymptote 0.25 = 2^-K, upper 1
        np.testing.assert_allclose(r.average(False)[[0, 2]], [0.25, 1.0], atol=1e-6)


def test_ff_subset_table(ff):
    assert ff.shape == (78, 3)
    n = ff.sum(axis=1)
    levels = (ff > 0).sum(axis=1)
    assert n.sum() == 250
    assert (levels == 1).sum() == 54 and n[levels == 1].sum() == 142
    assert (levels == 3).sum() == 1
    big, small = np.array([100.0]), np.array([1e-7])

    # upper asymptotes (Sec. 5.2): 0.69 and 0.57 for the local measure ...
    r = cell_risk(ff, mechanism="laplace", epsilon=big)
    np.testing.assert_allclose(r.average(False), 54 / 78, atol=1e-12)
    np.testing.assert_allclose(r.average(True), 142 / 250, atol=1e-12)
    assert round(54 / 78, 2) == 0.69 and round(142 / 250, 2) == 0.57
    # ... and 0.75, 0.63 for the plug-in expected measure: N^-1 sum_i sum_k phat_ik^n_i
    p = ff / n[:, None]
    s = (p ** n[:, None]).sum(axis=1)
    for method in ("exact", "paper"):
        r = cell_risk(ff, mechanism="laplace", epsilon=big, measure="expected", method=method)
        np.testing.assert_allclose(r.average(False), s.mean(), atol=1e-12)
        np.testing.assert_allclose(r.average(True), (n * s).sum() / n.sum(), atol=1e-12)
    assert round(s.mean(), 2) == 0.75 and round((n * s).sum() / n.sum(), 2) == 0.63

    # lower asymptotes: rho -> |levels| / 2^K (exact); the paper's bound gives 2-level
    # value 1/4 to every heterogeneous cell
    r = cell_risk(ff, mechanism="laplace", epsilon=small)
    np.testing.assert_allclose(r.average(False), levels.mean() / 8, atol=1e-6)  # 103/624
    np.testing.assert_allclose(r.average(True), (n * levels).sum() / n.sum() / 8, atol=1e-6)
    paper = cell_risk(ff, mechanism="laplace", epsilon=small, method="paper")
    np.testing.assert_allclose(paper.average(False), (54 / 8 + 24 / 4) / 78, atol=1e-6)
    # expected: E|support(c)| / 8 with c ~ Multinomial(n_i, phat_i)
    e_support = (1 - (1 - p) ** n[:, None]).sum(axis=1)
    r = cell_risk(ff, mechanism="laplace", epsilon=small, measure="expected")
    np.testing.assert_allclose(r.average(False), e_support.mean() / 8, atol=1e-6)
    np.testing.assert_allclose(r.average(True), (n * e_support).sum() / n.sum() / 8, atol=1e-6)
    # the paper's reading: 0.16 (both unweighted), 0.18 (local w), 0.17 (expected w)
    lows = [
        cell_risk(ff, mechanism="laplace", epsilon=small, measure=m).average(w)[0]
        for m, w in [("local", False), ("expected", False), ("local", True), ("expected", True)]
    ]
    assert np.allclose(lows, [0.16, 0.16, 0.18, 0.17], atol=0.006)
    assert (cell_risk(ff, mechanism="laplace", epsilon=small).exact == (levels == 1)).all()


def test_adult_table_grouped_by_qids():
    adult = read_table(
        "adultcount.csv",
        ["age", "relationship", "education", "race", "sex", "hours-per-week"],
        "income",
        ["<=50K", ">50K"],
    )
    n = adult.sum(axis=1)
    homog = (adult > 0).sum(axis=1) == 1
    assert adult.shape == (5009, 2) and homog.sum() == 4044 and n.sum() == 27504
    eps = np.logspace(-2, 1, 7)
    ex = cell_risk(adult, mechanism="laplace", epsilon=eps, measure="expected")
    pa = cell_risk(adult, mechanism="laplace", epsilon=eps, measure="expected", method="paper")
    np.testing.assert_allclose(ex.values[homog], pa.values[homog], rtol=1e-12)
    assert (pa.values >= ex.values - 1e-15).all()  # K = 2: two-level cells only
    assert ex.exact.sum() == homog.sum() + ((n == 1) & ~homog).sum()


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ([1, 2], "2-d"),
        ([[1], [2]], "K >= 2"),
        (np.zeros((0, 2)), "no cells"),
        ([[1, 0], [0, 0]], "empty cell: DR-HA is defined over non-empty cells"),
        ([[1, -1]], "negative"),
        ([[1.5, 0]], "non-integer"),
        ([[np.nan, 1]], "finite"),
        ([["a", "b"]], "integer counts"),
        ([[True, False]], "integer counts"),
    ],
)
def test_bad_counts(counts, match):
    with pytest.raises(InvalidDataError, match=match):
        cell_risk(counts, mechanism="laplace", epsilon=1.0)


def test_bad_parameters():
    t = [[2, 0], [1, 1]]
    sm = SimpleNamespace(support=[1, 2], pmf=[0.5, 0.5])
    bad = [
        ({"measure": "global"}, "measure"),
        ({"mechanism": "geometric"}, "mechanism"),
        ({"scenario8": "upper"}, "scenario8"),
        ({"method": "mc"}, "method"),
        ({"method": "paper", "scenario8": "records"}, "records"),
        ({"measure": "shrinkage"}, "alpha"),
        ({"measure": "shrinkage", "alpha": [1.0]}, "alpha"),
        ({"measure": "shrinkage", "alpha": [1.0, 0.0]}, "alpha"),
        ({"measure": "local", "alpha": [1.0, 1.0]}, "alpha"),
        ({"measure": "marginal"}, "size_model"),
        ({"measure": "local", "size_model": sm}, "size_model"),
        ({"measure": "marginal", "size_model": object()}, "size_model"),
        (
            {"measure": "marginal", "size_model": SimpleNamespace(support=[0, 1], pmf=[0.5, 0.5])},
            "size_model",
        ),
        (
            {"measure": "marginal", "size_model": SimpleNamespace(support=[1, 2], pmf=[0.5, 0.6])},
            "sum to 1",
        ),
        (
            {"measure": "marginal", "size_model": SimpleNamespace(support=[1.5], pmf=[1.0])},
            "integer",
        ),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": [[1.0]]}, "epsilon"),
        ({"delta": 1e-5}, "delta"),
        ({"mechanism": "gaussian"}, "delta"),
        ({"mechanism": "gaussian", "delta": 1e-5, "epsilon": 2.0}, "epsilon < 1"),
        ({"sensitivity": 0.0}, "sensitivity"),
    ]
    for extra, match in bad:
        kw = {"mechanism": "laplace", "epsilon": 1.0, **extra}
        with pytest.raises(InvalidParameterError, match=match):
            cell_risk(t, **kw)


def test_measures_constant():
    assert MEASURES == ("local", "expected", "shrinkage", "marginal", "marginal_shrinkage")


@pytest.mark.parametrize("delta", [1e-9, 1e-5, 1e-2])
@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0, 20.0])
def test_analytic_gaussian_sigma_is_the_smallest_that_meets_the_exact_condition(eps, delta):
    """Independently of dpframe's bisection: the privacy loss of N(0, σ²) noise with
    sensitivity 1 is L ~ N(η, 2η), η = 1/(2σ²), and the mechanism is (ε, δ)-DP iff
    P(L > ε) - e^ε P(L < -ε) <= δ (Balle & Wang 2018, Thm 5). σ must meet it, and σ
    shrunk by one part in 10^6 must not."""
    from scipy import stats

    from dpframe.risk.noise import noise_scale

    def exact_delta(sigma: float) -> float:
        eta = 1.0 / (2.0 * sigma**2)
        loss = stats.norm(loc=eta, scale=np.sqrt(2.0 * eta))
        return float(loss.sf(eps) - np.exp(eps + loss.logcdf(-eps)))

    sigma = float(noise_scale("analytic_gaussian", eps, delta=delta))
    assert exact_delta(sigma) <= delta * (1 + 1e-9)
    assert exact_delta(sigma * (1 - 1e-6)) > delta


def test_the_numbers_docs_papers_md_prints_for_the_drha_errata():
    """docs/papers.md, DR-HA errata 2 and 5: each printed number, to its printed digits."""
    import warnings

    from dpframe.datasets import drha_table
    from dpframe.risk import drha
    from dpframe.risk.frame import cell_table
    from dpframe.risk.priors import BoundaryEstimateWarning, fit_size_model

    ff = drha_table("bankruptcy_ff")
    risk = {
        m: dict(
            drha(ff.frame, list(ff.qids), ff.sensitive, count=ff.count, epsilon=[0.001], method=m)
            .select("weighted", "risk")
            .rows()
        )
        for m in ("exact", "paper")
    }
    assert round(risk["paper"][False], 4) == 0.1638 and round(risk["exact"][False], 4) == 0.1654
    assert round(risk["paper"][True], 4) == 0.1794 and round(risk["exact"][True], 4) == 0.1829
    lam = {}
    for name in ("adult", "bankruptcy", "bankruptcy_ff"):
        t = drha_table(name)
        sizes = (
            t.frame[t.count].to_numpy()
            if name == "adult"
            else cell_table(t.frame, t.qids, t.sensitive, count=t.count).sizes
        )  # Adult: the paper's N counts QID x income rows
        lam[name] = round(fit_size_model(sizes).params["lambda"], 2)
    assert lam == {"adult": 4.56, "bankruptcy": 2.14, "bankruptcy_ff": 3.05}
    adult = drha_table("adult")
    by_qids = cell_table(adult.frame, adult.qids, adult.sensitive, count=adult.count).sizes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryEstimateWarning)  # r -> 0, as the docs say
        nb = fit_size_model(by_qids, family="negbin")
    assert (round(nb.aic), round(fit_size_model(by_qids).aic)) == (21_473, 81_476)
