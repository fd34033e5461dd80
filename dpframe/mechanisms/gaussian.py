"""The discrete Gaussian mechanism on a grid: exact sampling, its law, and calibration.

Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020, arXiv:2004.00010). The discrete Gaussian ``N_Z(0, sigma^2)`` is the law
on the integers with ``P(Z = k)`` proportional to ``exp(-k^2 / (2 sigma^2))``.

* **Privacy** (their Theorems 14 and 15): adding independent ``N_Z(0, sigma^2)`` noise to
  each coordinate of an integer-valued query whose l2 sensitivity is ``Delta`` (any real
  ``Delta > 0``; the query's values are integers, ``Delta`` need not be) is
  ``Delta^2 / (2 sigma^2)``-zCDP (:mod:`dpframe.core.zcdp` converts to
  ``(epsilon, delta)``).
* **Grid**: a statistic is rounded to a power-of-two grid ``g`` (:mod:`dpframe.core.grid`),
  ``m = round(s / g)``, and ``g * (m + Z)`` is released. Rounding moves each coordinate by
  at most half a step, so two neighbouring vectors that differ in at most ``changed``
  coordinates are at l2 distance at most ``Delta / g + sqrt(changed)`` in grid units
  after rounding (``Delta / g`` when the values are already on the grid).
* **Sampling** (their Algorithm 3): with ``t = floor(sigma) + 1``, draw ``Y`` from the
  discrete Laplace law of scale ``t`` and keep it with probability
  ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``; else retry (1.315 proposals a draw).
  ``sigma^2 = num / den`` is rational, so the exponent is the rational
  ``gamma = a^2 / M`` with ``a = |Y| den t - num`` and ``M = 2 num den t^2``.

Each proposal takes two uniform 64-bit words (``Generator.integers``). Proposals are
made and decided in batches, in linear passes, for blocks of :data:`_SLOTS` draws: numpy
passes (:mod:`dpframe.mechanisms.gaussian_batch`) or, from :data:`_COMPILED_MIN` draws a
call, compiled ones (:mod:`dpframe.mechanisms.gaussian_kernel`) that compute the same
floats in the same order, so that the same words give the same draws:

* ``Y`` from the first word by the discrete Laplace's inverse CDF
  (:mod:`dpframe.mechanisms.discrete`: the word's sign bit and ``floor(-t ln(U (1 +
  p) / 2))``, ``p = exp(-1 / t)``), taken where that module's proven float pre-filter
  makes the magnitude certain, else by its exact fallback from the same word.
* The acceptance ``U' < exp(-gamma)``, ``U'`` in ``[u', u' + 1) / 2**63`` from the
  second word's low 63 bits ``u'``. In floating point, ``a`` and ``M`` are correctly
  rounded and ``gamma_f = a_f a_f / M_f`` is within a relative ``eta <= 5.01 * 2**-53``
  of ``gamma`` (``a_f``'s rounding counts twice, ``M_f``'s, the product's and the
  quotient's once). Where ``gamma_f <= 700``, numpy's ``exp_f(-gamma_f)`` is a normal
  float within a relative ``2**-46``
  (:data:`~dpframe.mechanisms.discrete.LIBM_RELATIVE_ERROR`, measured by the tests up to
  700) of ``exp(-gamma_f) = exp(-gamma) exp(-gamma eta)``, and
  ``|gamma eta| <= 700.001 * 5.01 * 2**-53 < 3.9e-13``: so ``x = 2**63 exp_f(-gamma_f)``
  is within a relative ``zeta < 4.05e-13`` of ``2**63 exp(-gamma)``. The comparisons
  ``fl(fl(u') + 1) < fl(x fl(1 - m))`` (accept: then ``u' + 1 <= 2**63 exp(-gamma)``) and
  ``fl(u') > fl(x fl(1 + m))`` (reject: then ``u' >= 2**63 exp(-gamma)``) add at most
  ``4.1 * 2**-53`` of rounding, so with the margin ``m =`` :data:`_MARGIN` ``= 1e-12 >
  zeta + 4.1 * 2**-53`` each answer they give is the exact one. Where ``gamma_f > 700``,
  ``gamma > 699`` and ``exp(-gamma) < 2**-1008 < 2**-63``, and ``x`` is ``2**63
  exp_f(-700) < 1e-285`` (``exp``'s argument is clamped at 700): the same
  comparisons then reject with certainty unless ``u' = 0``, and never accept. Every
  other case (below ``2e-12`` of the proposals, and those with ``|Y| den t`` beyond
  int64) is decided exactly: ``exp(-gamma)`` enclosed by correctly
  rounded ``decimal`` bounds, ``U'`` extended by fresh words until the comparison is
  certain (:func:`_decide_exactly`). Floats therefore only choose *how* each decision
  is computed, never its outcome; nothing overflows however large ``M`` or ``a`` are.

The law (:func:`discrete_gaussian_pmf`, ``_cdf``, ``_tail``, ``_quantile_abs``,
``_variance``) is computed in floating point, for calibration, error bars and tests: by
direct summation over ``|k| <= 40 sigma + 10`` (the rest is below ``exp(-800)``) for
``sigma < 1000``, and for larger ``sigma`` from the Poisson-summation identity
``sum_k exp(-k^2/(2 sigma^2)) = sqrt(2 pi) sigma sum_j exp(-2 pi^2 sigma^2 j^2)`` (the
``j != 0`` terms vanish in double precision) with midpoint Euler--Maclaurin tails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.budget import exact
from dpframe.core.constraints import check_int, check_positive, check_privacy_amount, check_real
from dpframe.core.frozen import frozen_array
from dpframe.core.grid import check_granularity, default_granularity, grid_indices
from dpframe.core.randomness import secure_generator
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms import discrete
from dpframe.mechanisms.discrete import (
    _LOW_BITS,
    _bracket,
    _exact_constants,
    _exact_magnitude,
    _exp_bounds,
    _LazyUniform,
    _word_draws,
)
from dpframe.mechanisms.gaussian_batch import (
    _ACCEPT,
    _LAPLACE,
    Params,
    _decide,
    _draw_numpy,
    _exp_minus,
)

__all__ = [
    "GaussianCalibration",
    "calibrate_gaussian",
    "check_gaussian_values",
    "discrete_gaussian_cdf",
    "discrete_gaussian_pmf",
    "discrete_gaussian_quantile_abs",
    "discrete_gaussian_tail",
    "discrete_gaussian_variance",
    "release_gaussian",
    "sample_discrete_gaussian",
]

#: Largest numerator / denominator of ``sigma^2`` the sampler takes.
MAX_SIGMA2_INT = 2**62
#: Largest ``t = floor(sigma) + 1`` (the discrete Laplace sampler's scale limit).
_MAX_T = 2**31
_TWO62 = 2**62
_LOW63 = int(_LOW_BITS)
#: Relative margin around a float comparison beyond which its answer is certain.
_MARGIN = 1e-12
#: Below this sigma the law is summed directly; above it, the asymptotic forms are exact
#: to double precision.
_DIRECT_MAX = 1000.0
#: ``sigma^2`` in grid units is rounded up to a multiple of ``2**-k`` with ~40 bits.
_SIGMA2_BITS = 40


# ---------------------------------------------------------------------------
# Exact sampling
# ---------------------------------------------------------------------------


def _check_sigma2_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidParameterError(
            f"{name} must be an integer in [1, 2**62], got {value!r}; pass sigma^2 as the "
            "exact fraction sigma2_num / sigma2_den"
        )
    v = int(value)
    if not 1 <= v <= MAX_SIGMA2_INT:
        raise InvalidParameterError(f"{name} must be an integer in [1, 2**62], got {v}")
    return v


#: Slots one batch fills (its words and temporaries stay in the CPU's cache).
_SLOTS = 1 << 13
#: Events one batch may leave before it returns (each decided in Python).
_EVENTS = 256
#: Words drawn a slot still to fill (a slot takes 2.63 on average: 1.315 proposals).
_WORDS_PER_SLOT = 2.75
#: From this many draws a call uses the compiled passes, about twice as fast as the
#: numpy passes; below it, the numpy passes (a few ms), as numba's first use costs a
#: process about 0.4 s. Both give the same draws from the same words.
_COMPILED_MIN = 1 << 16


def _decide_exactly(u2: int, a: int, big_m: int, rng: np.random.Generator) -> bool:
    """Whether ``U' < exp(-a^2 / M)`` exactly, ``U'`` starting with the 63 bits ``u2``.

    ``exp(-gamma)`` is enclosed by correctly rounded ``decimal`` bounds, narrowed (and
    ``U'`` extended by fresh words) until the comparison is certain; ``exp(-gamma)`` is
    irrational for a rational ``gamma > 0``, so this ends with probability one.
    """
    if a == 0:
        return True  # exp(0) = 1 > U'
    uniform = _LazyUniform(u2, 63, rng)
    return uniform.less_than(lambda prec: _exp_bounds(a * a, big_m, prec))


def _bernoulli_exp_square(a_exact: np.ndarray, big_m: int, rng: np.random.Generator) -> np.ndarray:
    """Exact ``Bernoulli(exp(-a^2 / M))`` for integers ``a`` (int64 or object array).

    One word each: ``U'`` (its low 63 bits) against the float ``exp(-gamma)`` where that
    comparison is certain (:func:`_decide`, the module notes), :func:`_decide_exactly`
    elsewhere.
    """
    words = _word_draws(a_exact.shape[0], rng)
    a_float = a_exact.astype(np.float64)  # correctly rounded (int64 and Python ints)
    g = a_float * a_float / float(big_m)
    status = _decide(_exp_minus(g), words & _LOW_BITS, _MARGIN)
    result = status == 1
    for i in np.flatnonzero(status == _ACCEPT):
        result[i] = _decide_exactly(int(words[i] & _LOW63), int(a_exact[i]), big_m, rng)
    return result


def _params(n: int, d: int, t: int) -> Params:
    """The batches' parameters, read from the pre-filters' constants at each call: the
    proposal's scale ``t``, ``d t`` (0 beyond ``2**62``: then only ``Y = 0`` fits), ``n``,
    the largest ``|Y|`` with ``|Y| d t - n`` inside int64, the discrete Laplace's ``(1 +
    p) / 2`` and ``K_1``, ``K_2`` (:mod:`dpframe.mechanisms.discrete`), ``float(M)``, and
    the acceptance's margin."""
    dt = d * t
    limit = _TWO62 // dt
    _, lap_d = _exact_constants(t, 1, True)
    big_m = 2 * n * d * t * t
    return (
        t,
        dt if dt <= _TWO62 else 0,
        n,
        limit,
        lap_d,
        discrete._K1_EXACT,
        discrete._K2,
        float(big_m),
        _MARGIN,
    )


def _resolve(
    events: np.ndarray,
    floats: np.ndarray,
    block: np.ndarray,
    n: int,
    d: int,
    t: int,
    rng: np.random.Generator,
) -> list[int]:
    """Decide a batch's events exactly, filling ``block``; return the rejected slots.

    Each event continues its own draw: a :data:`_LAPLACE` magnitude from the same word
    (the discrete Laplace's exact fallback), an :data:`_ACCEPT` decision from the same
    ``U'``; an :data:`_EXACT` proposal (and a :data:`_LAPLACE` one) is accepted with a
    fresh word by :func:`_bernoulli_exp_square` on Python integers.
    """
    dt, big_m = d * t, 2 * n * d * t * t
    rejected: list[int] = []
    slots: list[int] = []
    proposals: list[int] = []
    for (slot, kind, value, u2), (a_float, slack) in zip(
        events.tolist(), floats.tolist(), strict=True
    ):
        if kind == _LAPLACE:
            m = _exact_magnitude(value & _LOW63, t, 1, True, rng, _bracket(a_float, slack))
            slots.append(slot)
            proposals.append(-m if value < 0 else m)
        elif kind == _ACCEPT:
            if _decide_exactly(u2, abs(value) * dt - n, big_m, rng):
                block[slot] = value
            else:
                rejected.append(slot)
        else:  # _EXACT
            slots.append(slot)
            proposals.append(value)
    if slots:
        a = np.array([abs(y) * dt - n for y in proposals], dtype=object)
        accept = _bernoulli_exp_square(a, big_m, rng)
        for slot, y, ok in zip(slots, proposals, accept.tolist(), strict=True):
            if ok:
                block[slot] = y
            else:
                rejected.append(slot)
    return rejected


def _sample(count: int, n: int, d: int, t: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` exact draws: batches of proposals for blocks of :data:`_SLOTS` slots (the
    compiled passes from :data:`_COMPILED_MIN` draws, numpy's below), their events
    decided here, the slots whose proposal an event rejected drawn again from scratch."""
    if count >= _COMPILED_MIN:
        from dpframe.mechanisms.gaussian_kernel import draw
    else:
        draw = _draw_numpy
    out = np.empty(count, dtype=np.int64)
    params = _params(n, d, t)
    events = np.empty((_EVENTS, 4), dtype=np.int64)
    floats = np.empty((_EVENTS, 2), dtype=np.float64)
    rejected: list[int] = []
    for first in range(0, count, _SLOTS):
        block = out[first : first + _SLOTS]
        i = 0
        while i < block.size:
            words = _word_draws(2 * math.ceil(_WORDS_PER_SLOT / 2 * (block.size - i)) + 8, rng)
            i, _, k = draw(block, i, words, params, events, floats)
            if k:
                local = _resolve(events[:k], floats[:k], block, n, d, t, rng)
                rejected.extend(first + j for j in local)
    if rejected:
        out[rejected] = _sample(len(rejected), n, d, t, rng)
    return out


def sample_discrete_gaussian(
    sigma2_num: int,
    sigma2_den: int,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Exact draws of the discrete Gaussian ``N_Z(0, sigma^2)``, ``sigma^2 = num / den``.

    Canonne, Kamath & Steinke (2020), Algorithm 3, in compiled batches, with only
    ``Generator.integers`` draws: no floating point decides an outcome (see the module
    notes). Any ``sigma^2`` in range is handled without overflow; a proposal ``Y`` with
    ``|Y| den (floor(sigma) + 1)`` beyond ``2**62`` (only when ``num`` is near ``2**56`` or
    above) is accepted with Python integers, more slowly.

    Parameters
    ----------
    sigma2_num, sigma2_den : int
        ``sigma^2 = sigma2_num / sigma2_den``, integers in ``[1, 2**62]`` with
        ``sigma < 2**31 - 1``.
    size : int or tuple of int, optional
        Output shape; default one draw (a 0-d array).
    rng : numpy.random.Generator, optional
        Default :func:`dpframe.core.randomness.secure_generator` (use it for releases).

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> rng = np.random.Generator(np.random.PCG64(0))
    >>> z = sample_discrete_gaussian(9, 1, size=100_000, rng=rng)  # sigma = 3
    >>> bool(abs(z.var() - discrete_gaussian_variance(3.0)) < 0.15)
    True
    """
    n = _check_sigma2_int(sigma2_num, "sigma2_num")
    d = _check_sigma2_int(sigma2_den, "sigma2_den")
    t = math.isqrt(n // d) + 1  # floor(sqrt(n / d)) + 1
    if t > _MAX_T:
        raise InvalidParameterError(
            f"sigma^2 = {n}/{d} is too large: sigma must be below 2**31 - 1 (in grid "
            "units; use a coarser granularity)"
        )
    if rng is None:
        rng = secure_generator()
    elif not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(f"rng must be a numpy.random.Generator, got {type(rng)!r}")
    shape = () if size is None else tuple(int(s) for s in np.atleast_1d(size))
    count = math.prod(shape)
    out = _sample(count, n, d, t, rng)
    return out.reshape(shape)


# ---------------------------------------------------------------------------
# The law (floating point; calibration, error bars and tests)
# ---------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _table(sigma: float) -> tuple[np.ndarray, float]:
    """Suffix sums ``S[k] = sum_{j >= k} exp(-j^2 / (2 sigma^2))``, ``0 <= k <= K``, and Z.

    ``K = ceil(40 sigma + 10)``; the sums run from the small terms up (accurate tails).
    """
    big_k = math.ceil(40.0 * sigma + 10.0)
    j = np.arange(big_k + 2, dtype=np.float64)
    f = np.exp(-0.5 * (j / sigma) ** 2)
    f[-1] = 0.0  # S[K + 1] = 0
    suffix = np.cumsum(f[::-1])[::-1]
    norm = 2.0 * suffix[0] - f[0]
    suffix = frozen_array(suffix)
    return suffix, float(norm)


def _normaliser(sigma: float) -> float:
    """``sum_k exp(-k^2 / (2 sigma^2))``."""
    if sigma < _DIRECT_MAX:
        return _table(sigma)[1]
    j = np.arange(1, 4, dtype=np.float64)
    return (
        math.sqrt(2.0 * math.pi)
        * sigma
        * (1.0 + 2.0 * float(np.exp(-2.0 * (math.pi * sigma * j) ** 2).sum()))
    )


def _upper_direct(k: np.ndarray, sigma: float) -> np.ndarray:
    """``P(Z >= k)`` for integer-valued ``k >= 0`` by the summed table."""
    suffix, norm = _table(sigma)
    idx = np.minimum(k, suffix.size - 1).astype(np.int64)
    return suffix[idx] / norm


def _upper_asymptotic(k: np.ndarray, sigma: float) -> np.ndarray:
    """``P(Z >= k)`` for integer-valued ``k >= 1`` by midpoint Euler--Maclaurin.

    ``sum_{j >= k} f(j) = int_{k-1/2}^inf f + f'(a)/24 - 7 f'''(a)/5760 + ...`` with
    ``a = k - 1/2`` and ``f`` the normal density (the normaliser is
    ``sqrt(2 pi) sigma`` to double precision for ``sigma >= 1``).
    """
    a = k - 0.5
    z = a / (sigma * math.sqrt(2.0))
    erfc = np.vectorize(math.erfc, otypes=[np.float64])(z)
    phi = np.exp(-0.5 * (a / sigma) ** 2) / (math.sqrt(2.0 * math.pi) * sigma)
    d1 = -a / sigma**2 * phi
    d3 = (3.0 * a / sigma**4 - a**3 / sigma**6) * phi
    return np.maximum(0.5 * erfc + d1 / 24.0 - 7.0 * d3 / 5760.0, 0.0)


def _upper(k: np.ndarray, sigma: float) -> np.ndarray:
    """``P(Z >= k)`` for integer-valued float ``k`` (any sign), vectorised."""
    pos = k >= 1
    kk = np.where(pos, k, 1.0 - k)  # P(Z >= k) = 1 - P(Z >= 1 - k) for k <= 0
    u = _upper_direct(kk, sigma) if sigma < _DIRECT_MAX else _upper_asymptotic(kk, sigma)
    return np.where(pos, u, 1.0 - u)


def discrete_gaussian_pmf(k: npt.ArrayLike, sigma: float) -> np.ndarray:
    """``P(Z = k)`` for ``Z ~ N_Z(0, sigma^2)``, vectorised over ``k``.

    Examples
    --------
    >>> discrete_gaussian_pmf([0, 1], sigma=1.0).round(4)
    array([0.3989, 0.242 ])
    """
    s = check_positive("sigma", sigma)
    kk = np.asarray(k, dtype=np.float64)
    return np.exp(-0.5 * (kk / s) ** 2 - math.log(_normaliser(s)))


def discrete_gaussian_cdf(k: npt.ArrayLike, sigma: float) -> np.ndarray:
    """``P(Z <= k)`` (non-integer ``k`` is floored), vectorised over ``k``.

    Examples
    --------
    >>> float(discrete_gaussian_cdf(-1, 2.0) + discrete_gaussian_cdf(0, 2.0))
    1.0
    """
    s = check_positive("sigma", sigma)
    kk = np.floor(np.asarray(k, dtype=np.float64))
    return _upper(-kk, s)  # P(Z <= k) = P(Z >= -k)


def discrete_gaussian_tail(k: npt.ArrayLike, sigma: float) -> np.ndarray:
    """Two-sided tail ``P(|Z| >= k)`` (``1`` for ``k <= 0``; non-integer ``k`` rounds up).

    Examples
    --------
    >>> float(discrete_gaussian_tail(0, 1.0)), round(float(discrete_gaussian_tail(2, 1.0)), 4)
    (1.0, 0.1171)
    """
    s = check_positive("sigma", sigma)
    kk = np.ceil(np.asarray(k, dtype=np.float64))
    return np.where(kk <= 0, 1.0, 2.0 * _upper(np.maximum(kk, 1.0), s))


def discrete_gaussian_quantile_abs(prob: float, sigma: float) -> int:
    """Smallest ``h >= 0`` with ``P(|Z| <= h) >= prob`` (a noise interval's half-width).

    Examples
    --------
    >>> discrete_gaussian_quantile_abs(0.95, sigma=10.0)
    20
    """
    s = check_positive("sigma", sigma)
    p = check_real("prob", prob)
    if not 0.0 <= p < 1.0:
        raise InvalidParameterError(f"prob must be in [0, 1), got {p!r}")
    alpha = 1.0 - p
    lo, hi = -1, math.ceil(40.0 * s + 10.0)  # tail(lo + 1) > alpha >= tail(hi + 1)
    if float(discrete_gaussian_tail(1, s)) <= alpha:
        return 0
    lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(discrete_gaussian_tail(mid + 1, s)) <= alpha:
            hi = mid
        else:
            lo = mid
    return hi


def discrete_gaussian_variance(sigma: float) -> float:
    """``Var(Z) = E[Z^2]`` (slightly below ``sigma^2``; equal to it in double precision
    for ``sigma >= 2``, by Poisson summation:
    ``Var = sigma^2 sum_j (1 - 4 pi^2 sigma^2 j^2) q^(j^2) / sum_j q^(j^2)``,
    ``q = exp(-2 pi^2 sigma^2)``).

    Examples
    --------
    >>> round(discrete_gaussian_variance(0.5), 6), discrete_gaussian_variance(10.0)
    (0.215013, 100.0)
    """
    s = check_positive("sigma", sigma)
    if s < 1.0:
        suffix, norm = _table(s)
        j = np.arange(suffix.size - 1, dtype=np.float64)
        f = np.exp(-0.5 * (j / s) ** 2)
        return float(2.0 * (j * j * f).sum() / norm)
    j = np.arange(1, 4, dtype=np.float64)
    q = np.exp(-2.0 * (math.pi * s * j) ** 2)
    num = 1.0 + 2.0 * float(((1.0 - 4.0 * (math.pi * s * j) ** 2) * q).sum())
    den = 1.0 + 2.0 * float(q.sum())
    return s * s * num / den


# ---------------------------------------------------------------------------
# Calibration and release on the grid
# ---------------------------------------------------------------------------


def _sqrt_up(c: int) -> Fraction:
    """A rational ``>= sqrt(c)`` (exact for perfect squares, else within ``2**-32``)."""
    r = math.isqrt(c)
    if r * r == c:
        return Fraction(r)
    return Fraction(math.isqrt(c * 4**32) + 1, 2**32)


def _dyadic_up(x: Fraction) -> Fraction:
    """The smallest multiple of ``2**-k`` that is ``>= x``, ``k`` giving ~40 bits."""
    k = min(max(0, _SIGMA2_BITS - math.ceil(x).bit_length()), 60)
    return Fraction(math.ceil(x * 2**k), 2**k)


@dataclass(frozen=True)
class GaussianCalibration:
    """The parameters of one grid discrete-Gaussian release (all derived, nothing drawn).

    Attributes
    ----------
    rho : float
        The zCDP budget charged (the one asked for, or the loss ``sigma`` implies,
        rounded up).
    sensitivity : float
        The l2 sensitivity asked for (real units).
    granularity : float
        Grid step ``g`` (a power of two).
    sensitivity_units : float
        The l2 sensitivity in grid units after rounding: ``sensitivity / g +
        sqrt(changed)``, or ``sensitivity / g`` when ``values_on_grid``.
    sigma2 : fractions.Fraction
        The noise variance parameter ``sigma^2`` in grid units (exact; its numerator and
        denominator are what the sampler takes).
    values_on_grid : bool
        The values are promised to be multiples of ``g`` (checked).
    changed : int
        How many coordinates can differ between neighbouring inputs.
    """

    rho: float
    sensitivity: float
    granularity: float
    sensitivity_units: float
    sigma2: Fraction
    values_on_grid: bool = False
    changed: int = 1

    @property
    def sensitivity_units_squared(self) -> Fraction:
        """An exact rational upper bound of ``sensitivity_units**2``."""
        base = Fraction(self.sensitivity) / Fraction(self.granularity)
        if not self.values_on_grid:
            base += _sqrt_up(self.changed)
        return base * base

    @property
    def scale(self) -> float:
        """The noise ``sigma`` in real units."""
        return self.granularity * math.sqrt(self.sigma2)

    @property
    def sigma_units(self) -> float:
        """The noise ``sigma`` in grid units."""
        return math.sqrt(self.sigma2)

    @property
    def privacy_loss(self) -> Fraction:
        """The mechanism's exact zCDP ``rho``: ``units^2 / (2 sigma^2) <= rho``."""
        return self.sensitivity_units_squared / (2 * self.sigma2)

    def error(self, level: float = 0.95) -> float:
        """Half-width ``h`` with ``P(|noise| <= h) >= level`` (real units, exact law)."""
        return discrete_gaussian_quantile_abs(level, self.sigma_units) * self.granularity

    def details(self) -> dict[str, object]:
        """Facts for the ledger."""
        return {
            "sensitivity": self.sensitivity,
            "granularity": self.granularity,
            "sigma": self.scale,
            "sigma2_units": f"{self.sigma2.numerator}/{self.sigma2.denominator}",
            "privacy_loss": _float_up(self.privacy_loss),
            "changed": self.changed,
        }

    def check(self, values: npt.ArrayLike) -> np.ndarray:
        """See :func:`check_gaussian_values`."""
        return check_gaussian_values(values, self)

    def release(self, values: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """See :func:`release_gaussian`."""
        return release_gaussian(values, self, rng)


def _float_up(x: Fraction) -> float:
    """The smallest float ``>= x``."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def calibrate_gaussian(
    sensitivity: float,
    *,
    rho: float | None = None,
    sigma: float | None = None,
    granularity: float | None = None,
    changed: int = 1,
    values_on_grid: bool = False,
) -> GaussianCalibration:
    """Derive the grid and the noise of a discrete-Gaussian release (rho-zCDP).

    Adding ``N_Z(0, sigma^2)`` to an integer-valued query of l2 sensitivity ``Delta``
    (``Delta`` real, e.g. ``sqrt(2)`` for a vector) is ``Delta^2 / (2 sigma^2)``-zCDP
    (Canonne, Kamath & Steinke 2020, Theorems 14 and 15). Here the query is the
    statistic rounded to the grid, of l2 sensitivity ``sensitivity_units`` grid steps.

    Parameters
    ----------
    sensitivity : float
        l2 sensitivity of the released value(s) under the neighbour relation (> 0).
    rho : float, optional
        The zCDP budget of this release: ``sigma`` is the smallest (on a grid of
        ``2**-k`` in ``sigma^2``, grid units) whose loss is ``<= rho``.
    sigma : float, optional
        The noise in real units instead; ``rho`` is then the loss it implies (rounded
        up). Exactly one of ``rho`` and ``sigma``.
    granularity : float, optional
        Grid step, a power of two; default :func:`default_granularity` of the
        sensitivity.
    changed : int, default 1
        At most how many coordinates differ between neighbouring inputs (each adds up
        to one grid step of rounding, ``sqrt(changed)`` in l2).
    values_on_grid : bool, default False
        The statistics are already multiples of ``granularity``: no rounding, so the
        sensitivity in grid units is ``sensitivity / granularity``.

    Examples
    --------
    >>> cal = calibrate_gaussian(1.0, rho=0.5, granularity=1.0, values_on_grid=True)
    >>> cal.sigma2, cal.scale, cal.privacy_loss
    (Fraction(1, 1), 1.0, Fraction(1, 2))
    >>> cal = calibrate_gaussian(1.0, rho=0.5)
    >>> round(cal.scale, 6), cal.privacy_loss <= 0.5
    (1.000977, True)
    """
    sens = check_positive("sensitivity", sensitivity)
    if (rho is None) == (sigma is None):
        raise InvalidParameterError(
            "pass exactly one of rho= (the zCDP budget; sigma is derived) and sigma= "
            "(the noise in real units; rho is derived)"
        )
    c = check_int("changed", changed, 1, "at least one coordinate differs")
    g = default_granularity(sens) if granularity is None else check_granularity(granularity)
    units_exact = Fraction(sens) / Fraction(g)
    if not values_on_grid:
        units_exact += _sqrt_up(c)
    units_sq = units_exact * units_exact
    units = sens / g + (0.0 if values_on_grid else math.sqrt(c))
    if rho is not None:
        r = check_privacy_amount("rho", rho)
        sigma2 = _dyadic_up(units_sq / (2 * exact(r)))
    else:
        s = check_positive("sigma", sigma)
        sigma2 = _dyadic_up(Fraction(s) ** 2 / Fraction(g) ** 2)
    steps = math.isqrt(sigma2.numerator // sigma2.denominator)  # an int: never overflows
    if steps + 1 > _MAX_T:
        what = "sigma" if rho is None else "rho"
        raise InvalidParameterError(
            f"{what}: the noise is about {steps:.3g} grid steps at granularity={g!r}, above "
            f"the sampler's 2**31; pass a smaller sigma (a larger rho) or a coarser "
            f"granularity (e.g. {g * 2**12!r})"
        )
    loss = units_sq / (2 * sigma2)
    charged = float(r) if rho is not None else _float_up(loss)
    return GaussianCalibration(
        rho=charged,
        sensitivity=sens,
        granularity=g,
        sensitivity_units=units,
        sigma2=sigma2,
        values_on_grid=bool(values_on_grid),
        changed=c,
    )


def check_gaussian_values(values: npt.ArrayLike, calibration: GaussianCalibration) -> np.ndarray:
    """Validate ``values`` for a release and return them as grid indices (int64).

    Call before charging: raises :class:`~dpframe.errors.InvalidDataError` on NaN,
    infinities, values too large for the grid, or off-grid values when
    ``values_on_grid`` was promised.

    Examples
    --------
    >>> cal = calibrate_gaussian(1.0, rho=0.5, granularity=0.5)
    >>> check_gaussian_values([1.0, 1.26], cal)
    array([2, 3])
    """
    return grid_indices(values, calibration.granularity, calibration.values_on_grid)


def release_gaussian(
    values: npt.ArrayLike, calibration: GaussianCalibration, rng: np.random.Generator
) -> np.ndarray:
    """Add exact discrete-Gaussian grid noise to finite ``values`` (one draw per value).

    Returns float64 values on the grid ``calibration.granularity``.

    Examples
    --------
    >>> cal = calibrate_gaussian(1.0, rho=0.5)
    >>> release_gaussian(np.array([10.0, 20.0]), cal, secure_generator()).shape
    (2,)
    """
    grid = check_gaussian_values(values, calibration)
    s2 = calibration.sigma2
    noise = sample_discrete_gaussian(s2.numerator, s2.denominator, size=grid.shape, rng=rng)
    return (grid + noise).astype(np.float64) * calibration.granularity
