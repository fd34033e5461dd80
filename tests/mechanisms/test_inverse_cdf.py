"""The inverse-CDF samplers of dpframe.mechanisms.discrete: exact laws, every branch.

1. The laws, computed exactly (rigorous rational bounds, 1e-40 apart), of the new samplers
   (from their thresholds ``tau_y``) and of the old ones (``discrete_reference``: the
   structure of Canonne, Kamath & Steinke's Algorithms 1 and 2 with their lookup table)
   agree at every point of small grids, for every branch.
2. The code realises those thresholds: fed chosen 64-bit words around each threshold
   (and chosen extension words), the sampler returns exactly the inverse CDF's value;
   the map from words to draws is monotone; the fallback runs where the pre-filter
   cannot certify, and raises if the pre-filter's bracket is ever wrong.
3. The float functions the pre-filter relies on are within 4 ulp of correctly rounded
   values (the docstring assumes 64).
4. Chi-square tests (fixed seeds, p > 1e-3) of every branch, including the extreme
   regimes and the fallback forced on every draw.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms import discrete
from dpframe.mechanisms.discrete import (
    sample_discrete_laplace,
    sample_geometric,
    sample_truncated_discrete_laplace,
)

from . import discrete_reference as ref

BITS = 320  # fixed-point precision of the test's own exp bounds
TOLERANCE = Fraction(1, 10**40)

Interval = tuple[Fraction, Fraction]


# ---------------------------------------------------------------------------
# Rigorous interval arithmetic, independent of the code under test
# ---------------------------------------------------------------------------


def exp_neg(num: int, den: int) -> Interval:
    """Bounds on exp(-num/den): Taylor series of exp(-r), r <= 1/2, then squaring."""
    if num == 0:
        return Fraction(1), Fraction(1)
    k = 0
    while 2 * num > den * 2**k:
        k += 1
    r = Fraction(num, den * 2**k)
    term, partial = Fraction(1), Fraction(1)
    sums = [partial]
    for j in range(1, 45):
        term *= -r / j
        partial += term
        sums.append(partial)
    lo, hi = min(sums[-2:]), max(sums[-2:])  # alternating, decreasing terms
    scale = 2**BITS
    lo_i, hi_i = math.floor(lo * scale), math.ceil(hi * scale)
    for _ in range(k):
        lo_i, hi_i = lo_i * lo_i >> BITS, -((-hi_i * hi_i) >> BITS)
    return Fraction(lo_i, scale), Fraction(hi_i, scale)


def add(a: Interval, b: Interval) -> Interval:
    return a[0] + b[0], a[1] + b[1]


def sub(a: Interval, b: Interval) -> Interval:
    return a[0] - b[1], a[1] - b[0]


def mul(a: Interval, b: Interval) -> Interval:  # non-negative intervals
    assert a[0] >= 0 and b[0] >= 0
    return a[0] * b[0], a[1] * b[1]


def div(a: Interval, b: Interval) -> Interval:  # non-negative over positive
    assert a[0] >= 0 and b[0] > 0
    return a[0] / b[1], a[1] / b[0]


def const(x) -> Interval:
    return Fraction(x), Fraction(x)


def normalise(masses: dict[int, Interval]) -> dict[int, Interval]:
    total = (sum(m[0] for m in masses.values()), sum(m[1] for m in masses.values()))
    return {z: div(m, total) for z, m in masses.items()}


def assert_same_law(old: dict[int, Interval], new: dict[int, Interval]) -> None:
    assert old.keys() == new.keys()
    for z in old:
        (a_lo, a_hi), (b_lo, b_hi) = old[z], new[z]
        assert a_hi - a_lo < TOLERANCE and b_hi - b_lo < TOLERANCE, z
        assert a_lo <= b_hi and b_lo <= a_hi, (z, float(a_lo), float(b_lo))  # they overlap


# ---------------------------------------------------------------------------
# The new samplers' laws, from their thresholds
# ---------------------------------------------------------------------------


@cache
def tau(y: int, t: int, s: int, symmetric: bool, cap: int | None) -> Interval:
    """tau_y = (p**y - beta) / (alpha - beta): P(M >= y) of the new samplers."""
    if y <= 0:
        return const(1)
    if cap is not None and y > cap:
        return const(0)
    beta = const(0) if cap is None else exp_neg((cap + 1) * s, t)
    alpha = const(1)
    if symmetric:
        p_lo, p_hi = exp_neg(s, t)
        alpha = ((1 + p_lo) / 2, (1 + p_hi) / 2)
    numerator = sub(exp_neg(y * s, t), beta)
    return div((max(numerator[0], Fraction(0)), numerator[1]), sub(alpha, beta))


def new_magnitude_law(t, s, symmetric, cap, ys) -> dict[int, Interval]:
    return {y: sub(tau(y, t, s, symmetric, cap), tau(y + 1, t, s, symmetric, cap)) for y in ys}


def new_laplace_law(t, s, zs, cap=None) -> dict[int, Interval]:
    m = new_magnitude_law(t, s, True, cap, {abs(z) for z in zs})
    return {z: m[0] if z == 0 else (m[abs(z)][0] / 2, m[abs(z)][1] / 2) for z in zs}


@cache
def two_sided_g(z: int, lo: int, hi: int, t: int, s: int) -> Interval:
    """G(z) = P(Z >= z) of the two-sided inverse CDF, in the closed form the code uses."""
    if z <= lo:
        return const(1)
    if z > hi:
        return const(0)
    p = exp_neg(s, t)
    e1, e2 = exp_neg((1 - lo) * s, t), exp_neg((hi + 1) * s, t)
    d = sub(add(const(1), p), add(e1, e2))
    if z >= 1:
        numerator = sub(exp_neg(z * s, t), e2)
    else:
        numerator = sub(sub(add(const(1), p), e2), exp_neg((1 - z) * s, t))
    return div((max(numerator[0], Fraction(0)), numerator[1]), d)


def new_truncated_law(lo, hi, t, s) -> dict[int, Interval]:
    """The new sampler's one path: c (the point of [lo, hi] nearest 0) plus the two-sided
    inverse CDF on [lo - c, hi - c], for every interval."""
    c = min(max(0, lo), hi)
    a, b = lo - c, hi - c
    law = {}
    for z in range(a, b + 1):
        g0, g1 = two_sided_g(z, a, b, t, s), two_sided_g(z + 1, a, b, t, s)
        law[z + c] = (max(g0[0] - g1[1], Fraction(0)), g0[1] - g1[0])
    return law


# ---------------------------------------------------------------------------
# The old samplers' laws, from their structure (discrete_reference)
# ---------------------------------------------------------------------------


def algorithm1(gamma: Fraction) -> Interval:
    """P(success) of Algorithm 1 for gamma in [0, 1]: sum over odd stopping rounds k."""
    total, last = Fraction(0), 41
    for k in range(1, last + 1, 2):
        total += gamma ** (k - 1) / math.factorial(k - 1) - gamma**k / math.factorial(k)
    return total, total + gamma**last / math.factorial(last)  # P(reaching round last + 1)


def table_exp_minus_one() -> Interval:
    """P(success) of the old Bernoulli(exp(-1)): its 8! table, then rounds 9, 10, ..."""
    table, last = ref._EXP1_TABLE, ref._EXP1_LAST_ROUND
    f = math.factorial(last)
    cont = sum(
        Fraction(f, math.factorial(k - 1)) - Fraction(f, math.factorial(k))
        for k in range(last + 1, 61)
        if k % 2 == 1
    )
    tail = Fraction(f, math.factorial(60))
    base = Fraction(int(table[1:].sum()), f)
    return base + cont / f, base + (cont + tail) / f


Q = table_exp_minus_one()


def old_bernoulli_exp(num: int, den: int) -> Interval:
    """The old _bernoulli_exp: floor(num/den) table trials, then Algorithm 1."""
    whole, frac = divmod(num, den)
    return mul((Q[0] ** whole, Q[1] ** whole), algorithm1(Fraction(frac, den)))


def old_geometric_law(t: int, s: int, ys) -> dict[int, Interval]:
    """The old _geometric: X = U + t V (U kept w.p. exp(-U/t)), Y = floor(X / s)."""
    keep = [algorithm1(Fraction(u, t)) for u in range(t)]
    kept = (sum(k[0] for k in keep), sum(k[1] for k in keep))
    out = {}
    for y in ys:
        mass = const(0)
        for x in range(y * s, y * s + s):
            v = x // t
            mass = add(mass, mul(keep[x % t], mul((1 - Q[1], 1 - Q[0]), (Q[0] ** v, Q[1] ** v))))
        out[y] = div(mass, kept)
    return out


def old_laplace_law(t, s, zs) -> dict[int, Interval]:
    """The old Algorithm 2: Y geometric, a sign, restart on (negative, 0)."""
    g = old_geometric_law(t, s, {abs(z) for z in zs} | {0})
    norm = (1 - g[0][1] / 2, 1 - g[0][0] / 2)
    return {z: div((g[abs(z)][0] / 2, g[abs(z)][1] / 2), norm) for z in zs}


def old_truncated_law(lo, hi, t, s) -> dict[int, Interval]:
    """The old branches: flat proposals (uniform + Bernoulli) or rejection."""
    if lo >= 0 or hi <= 0:
        width = hi - lo
        if (width + 1) * s / t < math.log(2.0):  # flat: uniform, kept w.p. exp(-y s/t)
            law = normalise({y: old_bernoulli_exp(y * s, t) for y in range(width + 1)})
        else:
            law = normalise(old_geometric_law(t, s, range(width + 1)))
        return {(lo + y if lo >= 0 else hi - y): p for y, p in law.items()}
    half = max(-lo, hi)
    beta = math.exp(-s / t)
    if 2.0 * math.exp(-(half + 1.0) * s / t) / (1.0 + beta) > 0.5:  # flat
        return normalise({z: old_bernoulli_exp(abs(z) * s, t) for z in range(lo, hi + 1)})
    return normalise(old_laplace_law(t, s, range(lo, hi + 1)))


# ---------------------------------------------------------------------------
# 1. The laws are the same
# ---------------------------------------------------------------------------


def test_reference_table_matches_the_code():
    np.testing.assert_array_equal(ref._EXP1_TABLE, discrete._EXP1_TABLE)


@pytest.mark.parametrize(("t", "s"), [(1, 1), (3, 1), (1, 2), (5, 2), (4, 3)])
def test_discrete_laplace_law_equals_the_old_one(t, s):
    zs = range(-12, 13)
    assert_same_law(old_laplace_law(t, s, zs), new_laplace_law(t, s, zs))


@pytest.mark.parametrize(("t", "s"), [(1, 1), (3, 1), (2, 3)])
def test_geometric_law_equals_the_old_one(t, s):
    ys = range(0, 15)
    assert_same_law(old_geometric_law(t, s, ys), new_magnitude_law(t, s, False, None, ys))


@pytest.mark.parametrize(
    ("lo", "hi", "t", "s"),
    [
        (2, 5, 10, 1),  # right, flat in both: inverse CDF of the truncation / uniform
        (0, 12, 3, 1),  # right, a location on a bound: rejection from the geometric in both
        (0, 8, 3, 1),  # right: new inverse CDF of the truncation, old rejection
        (-5, -1, 2, 1),  # left
        (-9, 0, 1, 2),  # left, scale 1/2 (below the grid step)
        (-2, 3, 10, 1),  # two-sided, flat (scale >> width): new inverse CDF, old uniform
        (-3, 6, 2, 1),  # two-sided: new inverse CDF, old untruncated
        (-6, 1, 2, 1),  # two-sided, the short side positive
        (-1, 2, 1, 1),  # two-sided, flat at scale 1
        (-3, 3, 1, 2),  # two-sided, scale 1/2 (below the grid step), flat
        (-1, 1, 10**6, 1),  # scale >> width
        (-4, 20, 3, 2),  # two-sided, untruncated proposals in both
        (0, 0, 3, 1),  # a single point
    ],
)
def test_truncated_law_equals_the_old_one(lo, hi, t, s):
    assert_same_law(old_truncated_law(lo, hi, t, s), new_truncated_law(lo, hi, t, s))


def test_laws_sum_to_one_and_match_the_pmf():
    law = new_laplace_law(3, 1, range(-200, 201))
    assert abs(float(sum(p[0] for p in law.values())) - 1) < 1e-12
    np.testing.assert_allclose(
        [float(law[z][0]) for z in range(-5, 6)],
        discrete.discrete_laplace_pmf(np.arange(-5, 6), 3.0),
        rtol=1e-12,
    )


# ---------------------------------------------------------------------------
# 2. The code realises the thresholds
# ---------------------------------------------------------------------------


class ScriptedWords:
    """An rng whose scalar ``integers`` calls return the given 64-bit words, in order."""

    def __init__(self, words=()):
        self.words = list(words)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        assert size is None and (low, high) == (-(2**63), 2**63)
        if not self.words:
            raise AssertionError("an extension word was drawn, none was expected")
        w = self.words.pop(0)
        return np.int64(w - 2**64 if w >= 2**63 else w)


def exact_prefix_magnitude(u: int, bits: int, t, s, symmetric, cap) -> int | None:
    """M for every U in [u, u + 1) / 2**bits, or None if that interval straddles a tau_y."""
    m = 0
    while True:
        lo, hi = tau(m + 1, t, s, symmetric, cap)
        if Fraction(u + 1, 2**bits) <= lo:
            m += 1
        elif Fraction(u, 2**bits) >= hi:
            return m
        else:
            return None


CODE_CASES = [  # (t, s, symmetric, cap): the untruncated laws (cap None)
    (3, 1, True, None),  # discrete Laplace, exact constants
    (1, 2, True, None),  # scale 1/2
    (7, 3, False, None),  # geometric
]


@pytest.mark.parametrize(("t", "s", "symmetric", "cap"), CODE_CASES)
def test_code_draws_are_the_inverse_cdf_around_every_threshold(t, s, symmetric, cap, monkeypatch):
    calls = []
    real = discrete._exact_magnitude
    monkeypatch.setattr(
        discrete, "_exact_magnitude", lambda *a, **k: calls.append(a) or real(*a, **k)
    )

    top = 12
    for y in range(1, top + 1):
        lo, hi = tau(y, t, s, symmetric, cap)
        threshold = math.floor(lo * 2**63)
        assert threshold == math.floor(hi * 2**63)  # T_y = floor(2**63 tau_y), exactly
        for offset in [-(2**k) for k in range(0, 62, 3)] + [2**k for k in range(0, 62, 3)]:
            u = threshold + offset
            if not 0 <= u < 2**63:
                continue
            expected = exact_prefix_magnitude(u, 63, t, s, symmetric, cap)
            words = np.array([u, u - 2**63])  # sign bit clear, then set: same magnitude
            got = discrete._magnitudes(words, t, s, symmetric, ScriptedWords())
            assert got.tolist() == [expected, expected], (y, offset)
        # u = T_y straddles tau_y: the fallback draws one more word V and must compare
        # 2**64 T_y + V with 2**127 tau_y exactly.
        lo127 = math.floor(lo * 2**127) - threshold * 2**64
        assert lo127 == math.floor(hi * 2**127) - threshold * 2**64
        for v, expected in ((lo127 - 1, y), (lo127 + 1, y - 1)):
            if 0 <= v < 2**64:
                rng = ScriptedWords([v])
                got = discrete._magnitudes(np.array([threshold]), t, s, symmetric, rng)
                assert got.tolist() == [expected] and not rng.words
    assert calls  # the points next to a threshold went through the exact fallback


@pytest.mark.parametrize(("t", "s", "symmetric", "cap"), CODE_CASES)
def test_code_map_is_monotone_and_exact_on_random_words(t, s, symmetric, cap):
    rng = np.random.default_rng(5)
    words = np.sort(rng.integers(0, 2**63, size=200_000, dtype=np.int64))
    m = discrete._magnitudes(words, t, s, symmetric, ScriptedWords())
    assert (np.diff(m) <= 0).all()
    for u, got in zip(words[::5000].tolist(), m[::5000].tolist(), strict=True):
        assert got == exact_prefix_magnitude(u, 63, t, s, symmetric, cap)


class ScriptedBatch(ScriptedWords):
    """Like ScriptedWords, and one batch call (``size=n``) that returns ``batch``."""

    def __init__(self, batch, words=()):
        super().__init__(words)
        self.batch = np.array([w - 2**64 if w >= 2**63 else w for w in batch], dtype=np.int64)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        if size is None:
            return super().integers(low, high, size, dtype, endpoint)
        assert self.batch is not None and size == self.batch.size, "one batch expected"
        batch, self.batch = self.batch, None
        return batch


def exact_prefix_two_sided(u: int, bits: int, lo, hi, t, s) -> int | None:
    """Z = max{z : U < G(z)} for every U in [u, u + 1) / 2**bits; None if it straddles."""
    z = lo
    while z < hi:
        g_lo, g_hi = two_sided_g(z + 1, lo, hi, t, s)
        if Fraction(u + 1, 2**bits) <= g_lo:
            z += 1
        elif Fraction(u, 2**bits) >= g_hi:
            return z
        else:
            return None
    return z


TWO_SIDED_CASES = [  # (lo, hi, t, s): intervals around 0, flat and wide
    (-2, 3, 10, 1),
    (-3, 6, 2, 1),
    (-6, 1, 2, 1),
    (-3, 3, 1, 2),
    (-1, 2, 10**6, 1),
    (0, 3, 1, 1),  # lo = 0: the side z <= 0 is {0}
    (0, 30, 2, 1),  # a value on a bound, wide ((L + 1) / scale = 15.5)
    (-2, 40, 3, 1),  # next to a bound, wide
    (-25, 0, 3, 2),  # the upper bound
    (-20, 25, 1, 30),  # (L + 1) gamma > 600: exp's arguments clamped
]


def draw_two_sided(lo, hi, t, s, batch, words=()):
    rng = ScriptedBatch(batch, words)
    n = len(batch)
    z = discrete._two_sided_inverse(np.full(n, float(lo)), np.full(n, float(hi)), t, s, rng)
    assert not rng.words, "an extension word was left unused"
    return z.tolist()


@pytest.mark.parametrize(("lo", "hi", "t", "s"), TWO_SIDED_CASES)
def test_two_sided_draws_are_the_inverse_cdf_around_every_threshold(lo, hi, t, s, monkeypatch):
    calls = []
    real = discrete._exact_two_sided
    monkeypatch.setattr(
        discrete, "_exact_two_sided", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    for z in range(lo + 1, hi + 1):
        g_lo, g_hi = two_sided_g(z, lo, hi, t, s)
        if not Fraction(1, 2**63) <= g_lo <= g_hi <= 1 - Fraction(1, 2**63):
            continue  # G(z) within 2**-63 of 0 or 1: only the edge words (tested below)
        threshold = math.floor(g_lo * 2**63)
        assert threshold == math.floor(g_hi * 2**63)
        for offset in [-(2**k) for k in range(0, 62, 3)] + [2**k for k in range(0, 62, 3)]:
            u = threshold + offset
            if not 0 <= u < 2**63:
                continue
            expected = exact_prefix_two_sided(u, 63, lo, hi, t, s)
            # sign bit clear, then set: the two-sided law ignores it
            assert draw_two_sided(lo, hi, t, s, [u, u + 2**63]) == [expected] * 2, (z, offset)
        # u = T straddles G(z): one extension word V, compared exactly (V two units
        # from 2**127 G(z), so that 40-digit bounds on G(z) decide without a third word)
        lo127 = math.floor(g_lo * 2**127) - threshold * 2**64
        assert lo127 == math.floor(g_hi * 2**127) - threshold * 2**64
        for v, expected in ((lo127 - 2, z), (lo127 + 2, z - 1)):
            if 0 <= v < 2**64:
                assert draw_two_sided(lo, hi, t, s, [threshold], [v]) == [expected]
    assert calls  # the points next to a threshold went through the exact fallback


@pytest.mark.parametrize(("lo", "hi", "t", "s"), TWO_SIDED_CASES)
def test_two_sided_map_is_monotone_and_exact_on_random_words(lo, hi, t, s):
    rng = np.random.default_rng(6)
    words = np.sort(rng.integers(0, 2**63, size=200_000, dtype=np.int64))
    z = np.array(draw_two_sided(lo, hi, t, s, words.tolist()))
    assert (np.diff(z) <= 0).all() and z.min() >= lo and z.max() <= hi
    for u, got in zip(words[::5000].tolist(), z[::5000].tolist(), strict=True):
        assert got == exact_prefix_two_sided(u, 63, lo, hi, t, s)


def test_two_sided_edge_words():
    # u = 0 (U < 2**-63: Z = hi) and u = 2**63 - 1 (U' < 2**-63: Z = lo) have no float
    # certainty (1/u or 1/u' is infinite): the exact search decides them.
    lo, hi, t, s = -3, 6, 2, 1
    assert draw_two_sided(lo, hi, t, s, [0]) == [hi]
    assert draw_two_sided(lo, hi, t, s, [2**63 - 1]) == [lo]


def test_two_sided_fallback_refuses_a_wrong_bracket():
    u = 2**62
    right = discrete._exact_two_sided(u, 3, 1, 2, 4, ScriptedWords())
    assert right == exact_prefix_two_sided(u, 63, -2, 4, 3, 1)
    with pytest.raises(RuntimeError, match="pre-filter"):
        discrete._exact_two_sided(u, 3, 1, 2, 4, ScriptedWords(), (right + 1, right + 2))


def test_zero_word_takes_the_search_without_a_bracket():
    # u = 0: U < 2**-63, no float bracket; the fallback gallops with extension words.
    t, s = 3, 1
    v = 2**40  # U in [2**40, 2**40 + 1) / 2**127
    expected = exact_prefix_magnitude(v, 127, t, s, True, None)
    assert expected is not None and expected > 100
    rng = ScriptedWords([v])
    assert discrete._magnitudes(np.array([0]), t, s, True, rng).tolist() == [expected]


def test_fallback_refuses_a_wrong_bracket():
    # The fallback checks the pre-filter's bracket at both ends: a float error beyond the
    # assumed bound raises instead of biasing the draw.
    u = 2**62  # U ~ 1/2: M = floor(-ln(U (1 + p) / 2) / gamma) is small
    right = discrete._exact_magnitude(u, 3, 1, True, ScriptedWords())
    assert right == exact_prefix_magnitude(u, 63, 3, 1, True, None)
    with pytest.raises(RuntimeError, match="pre-filter"):
        discrete._exact_magnitude(u, 3, 1, True, ScriptedWords(), (right + 1, right + 2))


def test_exact_bounds_enclose_the_test_bounds():
    for num, den in [(1, 1), (7, 3), (2**31, 2**28), (10**6, 2**30)]:
        lo, hi = discrete._exp_bounds(num, den, 40)
        t_lo, t_hi = exp_neg(num, den)
        assert lo <= t_lo and t_hi <= hi and hi - lo < Fraction(1, 10**35) * hi


# ---------------------------------------------------------------------------
# 3. The float functions are as accurate as the docstring assumes, with room to spare
# ---------------------------------------------------------------------------


def ulp_error(got: np.ndarray, exact: list[Decimal]) -> float:
    worst = 0.0
    for g, e in zip(got.tolist(), exact, strict=True):
        if e == 0:
            continue
        worst = max(worst, float(abs(Decimal(g) - e) / abs(e)) / 2.0**-52)
    return worst


def test_numpy_log_exp_expm1_within_4_ulp():
    assert discrete.LIBM_RELATIVE_ERROR >= 16 * 4 * 2.0**-52
    rng = np.random.default_rng(0)
    w = np.concatenate(
        [
            rng.random(3000),
            1.0 - rng.random(1000) * 2.0**-30,  # near 1: ln W near 0
            np.exp2(-rng.random(1000) * 60),
            rng.random(1000) * 2.0**-40,
        ]
    )
    x = np.concatenate(
        [
            rng.random(2000) * 4,
            rng.random(1000) * 2.0**-25,
            rng.random(1000) * discrete._EXP_CLAMP,  # the truncated law's e1, e2, D
            [2.0**-31, 4.0, discrete._EXP_CLAMP],
        ]
    )
    with localcontext() as ctx:
        ctx.prec = 40
        log_exact = [Decimal(v).ln() for v in w.tolist()]
        exp_exact = [(-Decimal(v)).exp() for v in x.tolist()]
        expm1_exact = [(-Decimal(v)).exp() - 1 for v in x.tolist()]
    assert ulp_error(np.log(w), log_exact) <= 4
    assert ulp_error(np.exp(-x), exp_exact) <= 4
    assert ulp_error(np.expm1(-x), expm1_exact) <= 4


# ---------------------------------------------------------------------------
# 4. Chi-square tests of every branch
# ---------------------------------------------------------------------------

N = 100_000
MIN_P = 1e-3


def chi_square_p(samples: np.ndarray, law: dict[int, float]) -> float:
    """Chi-square against a law on integers, pooling cells to expected counts >= 5."""
    support = sorted(law)
    n = samples.size
    counts = dict(zip(*np.unique(samples, return_counts=True), strict=True))
    assert set(counts) <= set(support)
    obs, exp, o, e = [], [], 0.0, 0.0
    for z in support:
        o, e = o + counts.get(z, 0), e + law[z] * n
        if e >= 5:
            obs.append(o)
            exp.append(e)
            o = e = 0.0
    obs[-1] += o
    exp[-1] += e
    if len(obs) < 2:
        return 1.0
    return stats.chisquare(obs, np.array(exp) * sum(obs) / sum(exp)).pvalue


def float_law(law: dict[int, Interval]) -> dict[int, float]:
    return {z: float(p[0]) for z, p in law.items()}


def truncated_float_law(lo, hi, scale) -> dict[int, float]:
    z = np.arange(lo, hi + 1)
    p = np.exp(-np.abs(z) / scale)
    return dict(zip(z.tolist(), (p / p.sum()).tolist(), strict=True))


@pytest.mark.parametrize(
    ("lo", "hi", "t", "s", "seed"),
    [
        (-1, 2, 10**6, 1, 1),  # scale >> width: truncated symmetric proposal
        (0, 3, 10**6, 1, 2),  # scale >> width, a location on a bound: inverse CDF
        (-3, 3, 1, 2, 3),  # scale 1/2 < grid step
        (-1, 1, 1, 2**31, 4),  # scale 2**-31: all mass on 0
        (0, 50, 7, 1, 5),  # on a bound, far truncation: rejection from the geometric
        (-50, 0, 7, 1, 6),  # the other bound
        (-2, 60, 7, 1, 7),  # asymmetric, untruncated proposal: rejection
        (-2, 20, 7, 1, 8),  # asymmetric, truncated proposal: rejection
        (100, 160, 7, 1, 9),  # far from 0
        (-3000, 3000, 2**31, 2**20, 10),  # large scale (2048), wide
    ],
)
def test_truncated_branches_chi_square(lo, hi, t, s, seed):
    z = sample_truncated_discrete_laplace(lo, hi, t, s, size=N, rng=np.random.default_rng(seed))
    assert z.min() >= lo and z.max() <= hi
    if t / s < 1e-6:
        assert not z.any()
    assert chi_square_p(z, truncated_float_law(lo, hi, t / s)) > MIN_P


def test_per_element_bounds_and_scales_chi_square():
    # One call mixing all branches (finite and infinite caps, left, right, two-sided) and
    # per-element scales (the float constants from exp / expm1): each block fits its law.
    cases = [(-1, 2, 1000, 1), (0, 40, 5, 1), (-40, -3, 5, 1), (-2, 60, 7, 1), (-5, 5, 3, 2)]
    n = 40_000
    lo = np.repeat([c[0] for c in cases], n).astype(float)
    hi = np.repeat([c[1] for c in cases], n).astype(float)
    t = np.repeat([c[2] for c in cases], n)
    s = np.repeat([c[3] for c in cases], n)
    z = sample_truncated_discrete_laplace(lo, hi, t, s, rng=np.random.default_rng(11))
    for i, (a, b, num, den) in enumerate(cases):
        block = z[i * n : (i + 1) * n]
        assert chi_square_p(block, truncated_float_law(a, b, num / den)) > MIN_P


@pytest.mark.parametrize(("t", "s", "seed"), [(1, 2, 21), (2**31, 1, 22), (3, 1, 23)])
def test_laplace_and_geometric_array_scales_chi_square(t, s, seed):
    # Array parameters take the libm constants; a huge scale makes the fallback common.
    rng = np.random.default_rng(seed)
    scale = np.full(N, t)
    z = sample_discrete_laplace(scale, s, rng=rng)
    y = sample_geometric(scale, s, rng=rng)
    if t / s > 1000:  # moments only: too wide for cells
        sd = math.sqrt(discrete.discrete_laplace_variance(t / s))
        assert abs(z.mean()) < 5 * sd / math.sqrt(N)
        assert abs(z.std() / sd - 1) < 0.02
        mean_y = 1 / math.expm1(s / t)
        assert abs(y.mean() / mean_y - 1) < 0.02
        return
    zs = range(-60, 61)
    assert chi_square_p(z, float_law(new_laplace_law(t, s, zs))) > MIN_P
    assert chi_square_p(y, float_law(new_magnitude_law(t, s, False, None, range(120)))) > MIN_P


# Truncations whose fallback must search wide or infinite intervals (each with the
# window of its law that holds all but e**-40 of the mass): one-sided to infinity, far
# from 0, a bound at 0.
WIDE_CASES = [
    (-3, 1, (-3, 1)),
    (0, np.inf, (0, 400)),
    (-np.inf, 3, (-400, 3)),
    (20, 80, (20, 80)),
    (-(2.0**61), 2.0**61, (-400, 400)),  # exp(-x) above x = 2**20 enclosed in [0, e**-2**20]
]


@pytest.mark.parametrize(
    ("k1_exact", "k1_wide", "bracketed"), [(0.1, 0.02, True), (2.0, 2.0, False)]
)
def test_fallback_chi_square(k1_exact, k1_wide, bracketed, monkeypatch):
    # Widen the pre-filter's margin so that many draws take the exact fallback: delta ~ 0.2
    # (a bracket of two values; 40 % of the draws) or delta >= 4 (every draw: a search
    # without a bracket, by doubling from 0 or 1 when a bound is infinite). Scales 2
    # (exact constants) and 10 (the truncated law, its inverse CDF and its own fallback).
    monkeypatch.setattr(discrete, "_K1_EXACT", k1_exact)
    monkeypatch.setattr(discrete, "_K1_WIDE", k1_wide)
    calls: dict[str, list] = {"magnitude": [], "two_sided": []}
    for name, key in (("_exact_magnitude", "magnitude"), ("_exact_two_sided", "two_sided")):
        real = getattr(discrete, name)
        monkeypatch.setattr(
            discrete,
            name,
            lambda *a, _real=real, _key=key, **k: calls[_key].append(a[-1:]) or _real(*a, **k),
        )
    n = 3000
    rng = np.random.default_rng(31)
    z = sample_discrete_laplace(2, 1, size=n, rng=rng)
    truncated = [
        sample_truncated_discrete_laplace(lo, hi, 10, 1, size=n, rng=rng)
        for lo, hi, _ in WIDE_CASES
    ]
    counts = {"magnitude": n, "two_sided": n * len(WIDE_CASES)}
    for key in calls:
        assert len(calls[key]) >= (0.3 if bracketed else 1) * counts[key], key
        with_bracket = [c for c in calls[key] if c and c[0] is not None]
        assert bool(with_bracket) == bracketed, key
    assert chi_square_p(z, float_law(new_laplace_law(2, 1, range(-40, 41)))) > MIN_P
    for zt, (lo, hi, window) in zip(truncated, WIDE_CASES, strict=True):
        assert zt.min() >= lo and zt.max() <= hi
        assert chi_square_p(zt, truncated_float_law(*window, 10.0)) > MIN_P, (lo, hi)


@pytest.mark.parametrize("widths", ["same", "varied"])
def test_two_sided_per_draw_intervals_chi_square(widths):
    # A scalar scale and per-draw intervals around 0, as in a release (one width) and
    # mixed: flat and wide ones in one call, each with its own constants from the same
    # passes. Each interval's block of draws fits its own law.
    t, s = 40, 1
    cases = [(-30, 10), (-1, 39), (0, 40), (-20, 20)]
    if widths == "varied":
        cases = [(-30, 10), (-1, 2), (0, 150), (-100, 7), (-400, 2), (-1, 1000)]
    n = 30_000
    lo = np.repeat([c[0] for c in cases], n).astype(float)
    hi = np.repeat([c[1] for c in cases], n).astype(float)
    z = discrete._two_sided_inverse(lo, hi, t, s, np.random.default_rng(12))
    for i, (a, b) in enumerate(cases):
        block = z[i * n : (i + 1) * n]
        assert block.min() >= a and block.max() <= b
        assert chi_square_p(block, truncated_float_law(a, b, t / s)) > MIN_P
