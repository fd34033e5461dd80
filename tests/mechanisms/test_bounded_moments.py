"""Truncated and BIT Laplace laws: closed forms against independent computations.

References used here, each independent of the module's algebra:

* **quadrature**: ``scipy.integrate.quad`` of the Laplace density over the bounds (plus
  the two point masses, from ``scipy.stats.laplace``, for BIT). It is written in the
  coordinate ``t = (x - r)/lam`` anchored at the point ``r`` of ``[c0, c1]`` nearest to
  ``s``, split at fixed breakpoints, with ``epsabs=0, epsrel=1e-13``; so its error is
  about 1e-13 relative for every moment except the bias of an ``s`` inside the bounds,
  which is a difference of the two halves of the density and carries an *absolute*
  error of about ``eps * lam``.
* **high precision**: the moments from the antiderivatives of ``t**k exp(-|t|)/2``
  (``k = 0, 1, 2``), evaluated with 80 significant digits in ``decimal``. mpmath is
  not installed; ``decimal`` carries ``exp`` to any precision and an exponent range
  wide enough for ``exp(-1e6)``. The subtractions it makes cost at most ~45 digits on
  the grid below, so it is exact to double precision.

Tolerances (stated, not tuned): the module against the high-precision reference, 1e-12
relative (a few dozen roundings, amplified at most 4x by a variance formula); against
quadrature 1e-9 relative (+ ``64 eps lam`` absolute for the bias); Monte Carlo
4 standard errors; KS p > 1e-3.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from decimal import Context, Decimal, localcontext

import numpy as np
import pytest
from scipy import integrate, stats

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms import bounded_moments as bm

INF = math.inf
EPS = float(np.finfo(float).eps)
C0, C1 = 1.0, 3.0  # bounds away from 0: catches formulas that are not shift invariant
WIDTH = C1 - C0
RATIOS = (1e-6, 1e-2, 1.0, 1e2, 1e6)  # lam / (c1 - c0)


def _grid() -> list[tuple[float, float, float, float]]:
    """(s, lam, c0, c1): on a bound, inside, at the midpoint, outside by 50 lam, one-sided."""
    cases = []
    for r in RATIOS:
        lam = r * WIDTH
        for s in (C0, C1, C0 + WIDTH / 4, C0 + WIDTH / 2, C0 - 50 * lam, C1 + 50 * lam):
            cases.append((s, lam, C0, C1))
        cases.append((C0 - 0.3 * lam, lam, C0, C1))
        for s in (C0, C0 + WIDTH / 4, C0 + 3 * lam, C0 - 50 * lam):
            cases.append((s, lam, C0, INF))
        for s in (C1, C1 - WIDTH / 4, C1 - 3 * lam, C1 + 50 * lam):
            cases.append((s, lam, -INF, C1))
    cases.append((0.3, 2.0, -INF, INF))
    return cases


GRID = _grid()
GRID_IDS = [f"s={s:.6g},lam={lam:.0e},[{c0:g},{c1:g}]" for s, lam, c0, c1 in GRID]
INSIDE = [c for c in GRID if c[2] <= c[0] <= c[3]]

FUNCS = {
    "truncated": {
        "bias": bm.truncated_laplace_bias,
        "variance": bm.truncated_laplace_variance,
        "mse": bm.truncated_laplace_mse,
        "mean": bm.truncated_laplace_mean,
    },
    "bit": {
        "bias": bm.bit_laplace_bias,
        "variance": bm.bit_laplace_variance,
        "mse": bm.bit_laplace_mse,
        "mean": bm.bit_laplace_mean,
    },
}


# ---------------------------------------------------------------------------------------
# reference 1: high-precision antiderivatives (decimal, 80 digits)

CTX = Context(prec=80, Emin=-(10**9), Emax=10**9)  # every reference function runs in it
HALF = Decimal("0.5")


def _g0(u: Decimal) -> Decimal:
    """F(u) - 1/2 for the standard Laplace law."""
    if u.is_infinite():
        return HALF.copy_sign(u)
    v = HALF - HALF * (-abs(u)).exp()
    return v if u >= 0 else -v


def _g1(u: Decimal) -> Decimal:
    """An antiderivative of t exp(-|t|)/2."""
    if u.is_infinite():
        return Decimal(0)
    return -HALF * (1 + abs(u)) * (-abs(u)).exp()


def _g2(u: Decimal) -> Decimal:
    """An antiderivative of t**2 exp(-|t|)/2 (odd, 0 at 0)."""
    if u.is_infinite():
        return Decimal(1).copy_sign(u)
    au = abs(u)
    v = 1 - HALF * (au * au + 2 * au + 2) * (-au).exp()
    return v if u >= 0 else -v


def _std_dec(s, lam, c0, c1):
    s, lam, c0, c1 = (Decimal(v) for v in (s, lam, c0, c1))
    al = (c0 - s) / lam if c0.is_finite() else Decimal("-Infinity")
    be = (c1 - s) / lam if c1.is_finite() else Decimal("Infinity")
    return s, lam, al, be


def hp_moments(kind: str, s, lam, c0, c1) -> dict[str, float]:
    """bias, variance, mse, mean of the truncated or BIT law, to 80 digits."""
    with localcontext(CTX):
        s_, lam_, al, be = _std_dec(s, lam, c0, c1)
        z = _g0(be) - _g0(al)
        m1 = _g1(be) - _g1(al)
        m2 = _g2(be) - _g2(al)
        if kind == "truncated":
            m1, m2 = m1 / z, m2 / z
        else:  # add the point masses P(U <= alpha) at alpha and P(U >= beta) at beta
            if al.is_finite():
                pa = _g0(al) + HALF
                m1, m2 = m1 + al * pa, m2 + al * al * pa
            if be.is_finite():
                pb = HALF - _g0(be)
                m1, m2 = m1 + be * pb, m2 + be * be * pb
        var = m2 - m1 * m1
        return {
            "bias": float(lam_ * m1),
            "variance": float(lam_ * lam_ * var),
            "mse": float(lam_ * lam_ * m2),
            "mean": float(s_ + lam_ * m1),
        }


def hp_truncated_cdf(x, s, lam, c0, c1) -> float:
    if x < c0:
        return 0.0
    if x >= c1:
        return 1.0
    with localcontext(CTX):
        s_, lam_, al, be = _std_dec(s, lam, c0, c1)
        u = (Decimal(x) - s_) / lam_
        return float((_g0(u) - _g0(al)) / (_g0(be) - _g0(al)))


# ---------------------------------------------------------------------------------------
# reference 2: quadrature

_L = 750.0  # exp(-750) * 750**2 underflows: nothing beyond contributes
_BREAKS = (0.0, 1.0, 4.0, 16.0, 64.0, 256.0)


def _quad(fn, lo: float, hi: float) -> float:
    lo, hi = max(lo, -_L), min(hi, _L)
    inner = {b for x in _BREAKS for b in (x, -x) if lo < b < hi}
    pts = sorted({lo, hi, *inner})
    return sum(
        integrate.quad(fn, a, b, epsabs=0.0, epsrel=1e-13, limit=200)[0]
        for a, b in itertools.pairwise(pts)
    )


def _frame(s, lam, c0, c1):
    """Anchor r (nearest point of [c0, c1] to s), offset delta = (r - s)/lam, t-range,
    and exp(-(|t + delta| - |delta|)), the Laplace density up to a constant."""
    r = min(max(s, c0), c1)
    delta = (r - s) / lam
    lo, hi = (c0 - r) / lam, (c1 - r) / lam
    if delta > 0:
        return r, delta, lo, hi, lambda t: math.exp(-t)
    if delta < 0:
        return r, delta, lo, hi, lambda t: math.exp(t)
    return r, delta, lo, hi, lambda t: math.exp(-abs(t))


def quad_moments(kind: str, s, lam, c0, c1) -> dict[str, float]:
    r, delta, lo, hi, g = _frame(s, lam, c0, c1)
    if kind == "truncated":
        z = _quad(g, lo, hi)
        m = _quad(lambda t: t * g(t), lo, hi) / z
        v = _quad(lambda t: (t - m) ** 2 * g(t), lo, hi) / z
    else:
        w = 0.5 * math.exp(-abs(delta))  # Laplace density of U at t + delta is w g(t)
        atoms = [
            (lo, stats.laplace.cdf(c0, loc=s, scale=lam)),
            (hi, stats.laplace.sf(c1, loc=s, scale=lam)),
        ]
        atoms = [(a, p) for a, p in atoms if math.isfinite(a)]
        total = w * _quad(g, lo, hi) + sum(p for _, p in atoms)
        assert total == pytest.approx(1.0, rel=1e-12)
        m = w * _quad(lambda t: t * g(t), lo, hi) + sum(a * p for a, p in atoms)
        v = w * _quad(lambda t: (t - m) ** 2 * g(t), lo, hi) + sum(
            (a - m) ** 2 * p for a, p in atoms
        )
    bias = (r - s) + lam * m
    return {"bias": bias, "variance": lam**2 * v, "mse": lam**2 * v + bias**2, "mean": r + lam * m}


# ---------------------------------------------------------------------------------------
# closed forms against the references


@pytest.mark.parametrize("kind", ["truncated", "bit"])
def test_moments_match_high_precision_reference(kind):
    for case in GRID:
        want = hp_moments(kind, *case)
        for name, fn in FUNCS[kind].items():
            got = float(fn(*case))
            assert got == pytest.approx(want[name], rel=1e-12, abs=0.0), (name, case)


@pytest.mark.parametrize("kind", ["truncated", "bit"])
def test_moments_match_quadrature(kind):
    for case in GRID:
        want = quad_moments(kind, *case)
        lam = case[1]
        for name, fn in FUNCS[kind].items():
            got = float(fn(*case))
            atol = 64 * EPS * lam if name == "bias" else 0.0
            assert got == pytest.approx(want[name], rel=1e-9, abs=atol), (name, case)


def test_mse_is_variance_plus_squared_bias_and_mean_is_s_plus_bias():
    for case in GRID:
        for kind in FUNCS.values():
            b, v, m = (float(kind[k](*case)) for k in ("bias", "variance", "mse"))
            assert m == pytest.approx(v + b * b, rel=1e-13)
            mean = float(kind["mean"](*case))
            assert case[2] <= mean <= case[3]
            assert mean == pytest.approx(case[0] + b, rel=1e-13, abs=4 * EPS * abs(case[0]))


def test_one_sided_bounds_reduce_to_eqs_9_and_10():
    """Remark 3: for [c0, inf) and (-inf, c1] the biases have the printed closed forms
    (which, unlike eqs (6), (7), are stable: no nearly equal terms are subtracted)."""
    for lam in (1e-3, 0.5, 2.0, 1e4):
        for gap in (0.0, 0.1, 1.0, 7.0):
            e = math.exp(-gap / lam)
            mu1_minus_s = 0.5 * (lam + gap) * e / (1 - 0.5 * e)
            assert bm.truncated_laplace_bias(C0 + gap, lam, C0, INF) == pytest.approx(
                mu1_minus_s, rel=1e-13
            )
            assert bm.truncated_laplace_bias(C1 - gap, lam, -INF, C1) == pytest.approx(
                -mu1_minus_s, rel=1e-13
            )
            assert bm.bit_laplace_bias(C0 + gap, lam, C0, INF) == pytest.approx(
                0.5 * lam * e, rel=1e-13
            )
            assert bm.bit_laplace_bias(C1 - gap, lam, -INF, C1) == pytest.approx(
                -0.5 * lam * e, rel=1e-13
            )


def test_no_bounds_is_the_laplace_law():
    assert bm.truncated_laplace_mse(0.3, 2.0, -INF, INF) == 8.0
    assert bm.bit_laplace_variance(0.3, 2.0, -INF, INF) == 8.0
    assert bm.truncated_laplace_mean(0.3, 2.0, -INF, INF) == 0.3
    x = np.array([-3.0, 0.3, 5.0])
    np.testing.assert_allclose(
        bm.truncated_laplace_cdf(x, 0.3, 2.0, -INF, INF),
        stats.laplace.cdf(x, 0.3, 2.0),
        rtol=1e-14,
    )


def test_naive_eq6_loses_digits_where_the_stable_form_does_not():
    """docs/papers.md, erratum 3: eqs (6), (7) lose digits when lam >> c1 - c0."""
    s, lam, c0, c1 = 0.25, 1e6, 0.0, 1.0
    e0, e1 = math.exp((c0 - s) / lam), math.exp((s - c1) / lam)
    eq6 = ((lam - c0 + s) / 2 * e0 - (lam + c1 - s) / 2 * e1) / (1 - e0 / 2 - e1 / 2)
    eq7 = lam / 2 * (e0 - e1)
    want_tr = hp_moments("truncated", s, lam, c0, c1)["bias"]
    want_bit = hp_moments("bit", s, lam, c0, c1)["bias"]
    assert abs(eq6 - want_tr) / want_tr > 1e-6  # ~2.4e-4: ~12 of 16 digits lost
    assert abs(eq7 - want_bit) / want_bit > 1e-12  # ~1e-10: ~6 digits lost
    assert bm.truncated_laplace_bias(s, lam, c0, c1) == pytest.approx(want_tr, rel=1e-15)
    assert bm.bit_laplace_bias(s, lam, c0, c1) == pytest.approx(want_bit, rel=1e-15)


# ---------------------------------------------------------------------------------------
# the paper's propositions


def _inside_grid():
    s = C0 + WIDTH * np.linspace(0.0, 1.0, 17)
    lam = WIDTH * np.logspace(-6, 6, 25)
    return np.meshgrid(s, lam, indexing="ij")


def test_prop1a_unbiased_at_the_midpoint():
    s, lam = 2.0, WIDTH * np.logspace(-6, 6, 13)
    assert np.all(bm.truncated_laplace_bias(s, lam, C0, C1) == 0.0)
    assert np.all(bm.bit_laplace_bias(s, lam, C0, C1) == 0.0)


def test_prop1bc_bit_no_more_biased_than_truncated_and_same_sign():
    s, lam = _inside_grid()
    b_tr = bm.truncated_laplace_bias(s, lam, C0, C1)
    b_bit = bm.bit_laplace_bias(s, lam, C0, C1)
    assert np.all(np.abs(b_bit) <= np.abs(b_tr) * (1 + 4 * EPS))  # (c), 4 ulps of rounding
    assert np.all(np.sign(b_bit) == np.sign(b_tr))  # (b)
    # one-sided too
    for c0, c1 in ((C0, INF), (-INF, C1)):
        b_tr = bm.truncated_laplace_bias(s, lam, c0, c1)
        b_bit = bm.bit_laplace_bias(s, lam, c0, c1)
        assert np.all(np.abs(b_bit) <= np.abs(b_tr) * (1 + 4 * EPS))


def test_prop2_mse_below_two_lambda_squared_inside_the_bounds():
    s, lam = _inside_grid()
    for c0, c1 in ((C0, C1), (C0, INF), (-INF, C1)):
        for mse in (bm.truncated_laplace_mse, bm.bit_laplace_mse):
            ratio = mse(s, lam, c0, c1) / (2 * lam**2)
            assert np.all(ratio <= 1.0)
            # strictly below where the gap 1 - ratio is representable: it is at least
            # [e^-A (A**2 + 2A) + e^-B (B**2 + 2B)]/4 (truncated; Z <= 1) and exactly
            # [e^-A (1 + A) + e^-B (1 + B)]/2 (BIT), A, B = distances to the bounds / lam
            with np.errstate(invalid="ignore"):
                a, b = (s - c0) / lam, (c1 - s) / lam
                tails = (np.exp(-a) * (a**2 + 2 * a), np.exp(-b) * (b**2 + 2 * b))
                gap = np.nan_to_num(tails[0]) / 4 + np.nan_to_num(tails[1]) / 4
            assert np.all(ratio[gap > 1e-13] < 1.0)
    # it needs s inside: 50 lam outside, the MSE is about (50 lam)**2
    assert bm.truncated_laplace_mse(C0 - 50.0, 1.0, C0, C1) > 2500.0


# ---------------------------------------------------------------------------------------
# Appendix B: the boxed MSE of the truncated mechanism is wrong


def paper_boxed_truncated_mse(s, lam, c0, c1):
    """The boxed closed form of Appendix B (Liu 2019), as printed."""
    e0, e1 = math.exp((c0 - s) / lam), math.exp((s - c1) / lam)
    num = lam / 2 * ((s - c0) * e0 + (c1 - s) * e1) + 0.5 * (
        (c0**2 / 4 + (c0 / 2 - s) ** 2) * e0 + (c1**2 / 4 + (c1 / 2 - s) ** 2) * e1
    )
    return 2 * lam**2 - num / (1 - e0 / 2 - e1 / 2)


def corrected_truncated_mse(s, lam, c0, c1):
    """The re-derived closed form, written like the paper's (fine for lam ~ c1 - c0)."""
    p1, p2 = math.exp((c0 - s) / lam) / 2, math.exp((s - c1) / lam) / 2
    corr = p1 * ((s - c0) ** 2 + 2 * lam * (s - c0)) + p2 * ((c1 - s) ** 2 + 2 * lam * (c1 - s))
    return 2 * lam**2 - corr / (1 - p1 - p2)


def test_appendix_b_boxed_mse_differs_from_quadrature():
    case = (0.25, 1.0, 0.0, 1.0)
    quad = quad_moments("truncated", *case)["mse"]  # 0.1139558635...
    paper = paper_boxed_truncated_mse(*case)  # 1.0047646922...
    assert quad == pytest.approx(0.11395586350621, rel=1e-12)
    assert paper / quad > 8.0  # the printed formula is ~8.8x too large here
    assert corrected_truncated_mse(*case) == pytest.approx(quad, rel=1e-13)
    assert bm.truncated_laplace_mse(*case) == pytest.approx(quad, rel=1e-13)
    # with s = 0 the printed form is lam**2 + MSE/2, i.e. (2 lam**2 - MSE) is halved
    case0 = (0.0, 1.0, 0.0, 1.0)
    mse0 = float(bm.truncated_laplace_mse(*case0))
    assert paper_boxed_truncated_mse(*case0) == pytest.approx(1.0 + mse0 / 2, rel=1e-13)


def test_appendix_b_boxed_mse_is_not_shift_invariant():
    """Shifting s, c0, c1 together shifts s*; E[(s* - s)**2] cannot change."""
    a, b = (0.25, 1.0, 0.0, 1.0), (10.25, 1.0, 10.0, 11.0)
    assert bm.truncated_laplace_mse(*a) == pytest.approx(bm.truncated_laplace_mse(*b), rel=1e-12)
    assert paper_boxed_truncated_mse(*b) < 0  # -86.7: not even a second moment
    assert quad_moments("truncated", *b)["mse"] == pytest.approx(
        float(bm.truncated_laplace_mse(*b)), rel=1e-9
    )


def test_bit_mse_of_appendix_b_is_right():
    for s, lam, c0, c1 in INSIDE:
        if math.isinf(c0) or math.isinf(c1) or lam > 10 * WIDTH:
            continue  # the printed form cancels for lam >> c1 - c0 (and inf * 0 one-sided)
        p1, p2 = math.exp((c0 - s) / lam) / 2, math.exp((s - c1) / lam) / 2
        printed = 2 * lam**2 * (1 - p1 - p2) + 2 * lam * ((c0 - s) * p1 + (s - c1) * p2)
        assert bm.bit_laplace_mse(s, lam, c0, c1) == pytest.approx(printed, rel=1e-12)


def test_eq5_upper_mass_as_printed_is_a_typo():
    s, lam, c0, c1 = 2.0, 1.0, C0, C1
    m0, m1 = bm.bit_laplace_masses(s, lam, c0, c1)
    interior = stats.laplace.cdf(c1, s, lam) - stats.laplace.cdf(c0, s, lam)
    assert m0 == pytest.approx(0.5 * math.exp(-(s - c0) / lam), rel=1e-15)
    assert m1 == pytest.approx(0.5 * math.exp(-(c1 - s) / lam), rel=1e-15)
    assert m0 + m1 + interior == pytest.approx(1.0, rel=1e-15)
    printed_m1 = 1 - 0.5 * math.exp(-(c1 - s) / lam)
    assert m0 + printed_m1 + interior > 1.6  # 1.632: not a probability distribution


def test_bit_masses_outside_the_bounds():
    m0, m1 = bm.bit_laplace_masses(C0 - 5.0, 1.0, C0, C1)
    assert m0 == pytest.approx(stats.laplace.cdf(C0, C0 - 5.0, 1.0), rel=1e-15)
    assert m1 == pytest.approx(stats.laplace.sf(C1, C0 - 5.0, 1.0), rel=1e-13)
    m0, m1 = bm.bit_laplace_masses(C1 + 5.0, 1.0, C0, C1)
    assert m1 == pytest.approx(stats.laplace.sf(C1, C1 + 5.0, 1.0), rel=1e-15)
    assert m0 == pytest.approx(stats.laplace.cdf(C0, C1 + 5.0, 1.0), rel=1e-13)


# ---------------------------------------------------------------------------------------
# distribution functions

QS = np.array([0.0, 1e-300, 1e-15, 1e-9, 1e-4, 0.3, 0.5, 0.7, 1 - 1e-4, 1 - 1e-9, 1.0])


@pytest.mark.parametrize("case", GRID, ids=GRID_IDS)
def test_truncated_cdf_ppf_are_inverse_and_cdf_matches_reference(case):
    c0, c1 = case[2], case[3]
    x = bm.truncated_laplace_ppf(QS, *case)
    assert np.all((x >= c0) & (x <= c1))
    assert np.all(np.diff(x) >= 0)
    assert x[0] == c0 and x[-1] == c1
    f = bm.truncated_laplace_cdf(x, *case)
    pdf = bm.truncated_laplace_pdf(x, *case)
    with np.errstate(invalid="ignore"):
        # the quantile is exact up to a few ulps of x, the CDF value up to its rounding
        tol = 1e-12 * np.minimum(QS, 1 - QS) + 4 * pdf * np.spacing(np.abs(x)) + 4 * EPS
    finite = np.isfinite(x)
    assert np.all(np.abs(f - QS)[finite] <= tol[finite])
    for xi, fi in zip(x[finite], f[finite], strict=True):
        want = hp_truncated_cdf(float(xi), *case)
        assert fi == pytest.approx(want, rel=1e-12, abs=8 * EPS)


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(40)
_GL_BREAKS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 40.0)


def _gauss_legendre(fn, lo: float, hi: float) -> float:
    """Composite 40-point Gauss-Legendre of a vectorised fn over [lo, hi] cut to |t| <= 40.

    For integrands ``exp(-|t|)`` times a bounded factor, split at 0 and at pieces of
    width <= 8, the rule is exact to rounding; the cut drops less than 41 exp(-40) < 2e-16.
    """
    lo, hi = max(lo, -40.0), min(hi, 40.0)
    pts = sorted({lo, hi, *{b for x in _GL_BREAKS for b in (x, -x) if lo < b < hi}})
    a, b = np.array(pts[:-1])[:, None], np.array(pts[1:])[:, None]
    t = (a + b) / 2 + (b - a) / 2 * _GL_NODES
    return float(np.sum((b - a) / 2 * _GL_WEIGHTS * fn(t)))


@pytest.mark.parametrize("case", GRID, ids=GRID_IDS)
def test_truncated_pdf_integrates_to_cdf(case):
    lam = case[1]
    r, _, lo, hi, _ = _frame(*case)

    def dens(t):
        return lam * bm.truncated_laplace_pdf(r + lam * t, *case)

    # nodes r + lam t are rounded to doubles: t moves by up to spacing(x)/lam, and the
    # density (slope of its log <= 1 in t) by as much, relatively
    rtol = 1e-12 + float(np.spacing(abs(r) + 40 * lam)) / lam
    assert _gauss_legendre(dens, lo, hi) == pytest.approx(1.0, rel=rtol)
    for q in (0.1, 0.5, 0.9):
        xq = float(bm.truncated_laplace_ppf(q, *case))
        got = _gauss_legendre(dens, lo, (xq - r) / lam)
        assert got == pytest.approx(float(bm.truncated_laplace_cdf(xq, *case)), rel=rtol)


@pytest.mark.parametrize("case", GRID, ids=GRID_IDS)
def test_cdfs_monotone_in_unit_interval(case):
    s, lam, c0, c1 = case
    lo = c0 if math.isfinite(c0) else s - 800 * lam
    hi = c1 if math.isfinite(c1) else s + 800 * lam
    x = np.concatenate([[lo - 1.0, -INF], np.linspace(lo, hi, 2001), [hi + 1.0, INF]])
    x.sort()
    for cdf in (bm.truncated_laplace_cdf, bm.bit_laplace_cdf):
        f = cdf(x, *case)
        assert np.all((f >= 0) & (f <= 1))
        assert np.all(np.diff(f) >= 0)
        assert f[0] == 0.0 and f[-1] == 1.0
    assert np.isnan(bm.truncated_laplace_cdf(np.nan, *case))


def test_bit_cdf_jumps_are_the_masses():
    for s, lam, c0, c1 in GRID:
        m0, m1 = bm.bit_laplace_masses(s, lam, c0, c1)
        if math.isfinite(c0):
            assert bm.bit_laplace_cdf(c0, s, lam, c0, c1) == m0
            assert bm.bit_laplace_cdf(np.nextafter(c0, -INF), s, lam, c0, c1) == 0.0
        if math.isfinite(c1):
            below_c1 = bm.bit_laplace_cdf(np.nextafter(c1, -INF), s, lam, c0, c1)
            assert 1.0 - below_c1 == pytest.approx(m1, rel=1e-9, abs=4 * EPS)


# ---------------------------------------------------------------------------------------
# Monte Carlo: inverse-CDF samples against the closed forms

N_MC = 200_000
MC_CASES = [
    (C0 + WIDTH / 4, 1.0 * WIDTH, C0, C1),
    (C0, 1e-2 * WIDTH, C0, C1),
    (C1, 1e2 * WIDTH, C0, C1),
    (C0 + WIDTH / 4, 1e6 * WIDTH, C0, C1),
    (C0 - 2.0, 1.0, C0, C1),  # outside (50 lam outside is in GRID: BIT is then ~constant)
    (C1 + 0.5, 0.25, C0, C1),
    (C0 + 0.3, 1.0, C0, INF),
    (C1 + 1.5, 1.0, -INF, C1),
]


def _mse_var_bound(s, lam, c0, c1):
    """An upper bound on Var[(s* - s)**2], valid for both mechanisms.

    With D the distance from s to [c0, c1], s* - s = +-(D + lam V) where V is
    stochastically smaller than Exp(1) (a truncation of the Laplace law to an interval
    at or beyond s, or a clipping of it), so
    Var <= E[((s*-s)**2 - D**2)**2] = E[(2 D lam V + lam**2 V**2)**2]
        <= 8 D**2 lam**2 + 24 D lam**3 + 24 lam**4       (E Exp**k = k!);
    and (s*-s)**2 lies in [D**2, R**2], R = max(|c0 - s|, |c1 - s|), so by Popoviciu
    Var <= (R**2 - D**2)**2 / 4.
    """
    d = max(c0 - s, s - c1, 0.0)
    r = max(abs(c0 - s), abs(c1 - s))
    moment = 8 * d**2 * lam**2 + 24 * d * lam**3 + 24 * lam**4
    return min(moment, (r**2 - d**2) ** 2 / 4)


def _check_sample(x, case, mean, var, mse):
    s = case[0]
    se_mean = math.sqrt(var / N_MC)
    assert abs(x.mean() - mean) <= 4 * se_mean + 4 * EPS * abs(mean)
    se_mse = math.sqrt(_mse_var_bound(*case) / N_MC)
    assert abs(np.mean((x - s) ** 2) - mse) <= 4 * se_mse + 1e-12 * mse


@pytest.mark.parametrize("case", MC_CASES)
def test_truncated_monte_carlo(case):
    rng = np.random.default_rng(20190731)
    x = bm.truncated_laplace_ppf(rng.random(N_MC), *case)
    assert np.all((x >= case[2]) & (x <= case[3]))
    _check_sample(
        x,
        case,
        float(bm.truncated_laplace_mean(*case)),
        float(bm.truncated_laplace_variance(*case)),
        float(bm.truncated_laplace_mse(*case)),
    )
    ks = stats.kstest(x, lambda v: bm.truncated_laplace_cdf(v, *case))
    assert ks.pvalue > 1e-3


@pytest.mark.parametrize("case", MC_CASES)
def test_bit_monte_carlo(case):
    rng = np.random.default_rng(20190801)
    x = bm.bit_laplace_ppf(rng.random(N_MC), *case)
    c0, c1 = case[2], case[3]
    assert np.all((x >= c0) & (x <= c1))
    _check_sample(
        x,
        case,
        float(bm.bit_laplace_mean(*case)),
        float(bm.bit_laplace_variance(*case)),
        float(bm.bit_laplace_mse(*case)),
    )
    # the point masses: binomial counts within 4 standard errors
    for bound, mass in zip((c0, c1), bm.bit_laplace_masses(*case), strict=True):
        k = np.count_nonzero(x == bound)
        assert abs(k - N_MC * mass) <= 4 * math.sqrt(N_MC * mass * (1 - mass)) + 1
    # randomized probability integral transform: exactly Unif(0, 1) under the BIT law
    f_hi = bm.bit_laplace_cdf(x, *case)
    f_lo = bm.bit_laplace_cdf(np.nextafter(x, -INF), *case)
    u = f_lo + rng.random(N_MC) * (f_hi - f_lo)
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_bit_ppf_is_clipped_laplace_quantile():
    q = np.linspace(0.001, 0.999, 999)
    for s, lam, c0, c1 in GRID:
        want = np.clip(stats.laplace.ppf(q, s, lam), c0, c1)
        np.testing.assert_allclose(bm.bit_laplace_ppf(q, s, lam, c0, c1), want, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# interface


def test_broadcasting_matches_elementwise_calls():
    s = np.array([[0.0], [0.4], [1.5]])
    lam = np.array([0.1, 1.0, 1e3, 1e6])
    got = bm.truncated_laplace_mse(s, lam, 0.0, 1.0)
    assert got.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert got[i, j] == bm.truncated_laplace_mse(s[i, 0], lam[j], 0.0, 1.0)
    cdf = bm.truncated_laplace_cdf(np.linspace(0, 1, 5)[:, None], 0.3, lam, 0.0, 1.0)
    assert cdf.shape == (5, 4)
    assert isinstance(bm.bit_laplace_mean(0.2, 1.0, 0.0, 1.0), np.float64)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0.5, 0.0, 0.0, 1.0), "scale"),
        ((0.5, -1.0, 0.0, 1.0), "scale"),
        ((0.5, INF, 0.0, 1.0), "scale"),
        ((np.nan, 1.0, 0.0, 1.0), "loc"),
        ((0.5, 1.0, 1.0, 1.0), "lower must be < upper"),
        ((0.5, 1.0, 2.0, 1.0), "lower must be < upper"),
        ((0.5, 1.0, np.nan, 1.0), "lower must be < upper"),
        ((0.5, 1.0, "a", 1.0), "lower"),
        ((np.zeros(2), np.ones(3), 0.0, 1.0), "broadcast"),
    ],
)
def test_bad_parameters_raise(args, match):
    with pytest.raises(InvalidParameterError, match=match):
        bm.truncated_laplace_mean(*args)


@pytest.mark.parametrize("q", [-0.1, 1.5, np.nan])
def test_ppf_rejects_bad_probabilities(q):
    with pytest.raises(InvalidParameterError, match="q"):
        bm.truncated_laplace_ppf(q, 0.5, 1.0, 0.0, 1.0)
    with pytest.raises(InvalidParameterError, match="q"):
        bm.bit_laplace_ppf([0.5, q], 0.5, 1.0, 0.0, 1.0)


def test_module_imports_without_scipy():
    code = (
        "import sys; import dpframe.mechanisms.bounded_moments; "
        "sys.exit(any(m == 'scipy' or m.startswith('scipy.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
