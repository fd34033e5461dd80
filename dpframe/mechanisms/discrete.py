"""Exact, vectorised sampling of the discrete Laplace distribution.

The discrete Laplace distribution with scale ``t > 0`` is the distribution on
the integers with ``P(Z = z) proportional to exp(-|z| / t)``.  Adding it to a
query with integer values (or values on an integer grid) gives
``epsilon``-differential privacy for ``t = sensitivity / epsilon``.

Samplers built on floating-point arithmetic (for example ``round(laplace)``)
leak information through the low-order bits of the released value (Mironov,
2012).  The samplers here release only integers, and every random decision is
exact: the scale is a rational number ``t / s`` (``num / den``) and each draw is
a comparison of a uniform random number with a threshold that is decided with
certainty -- by a floating-point pre-filter when its proven error bound allows,
by exact rational arithmetic otherwise.  Provided the underlying bit generator
is ideal, the output follows the law *exactly*.

Algorithm: the inverse CDF from 64-bit words
--------------------------------------------
Write ``p = exp(-s / t)`` (``gamma = s / t``).  Every sampler here draws a
magnitude

    M = #{y >= 1 : U < tau_y},   tau_y = (p**y - beta) / (alpha - beta),

from one uniform ``U`` in [0, 1), so that ``P(M >= y) = tau_y``:

* geometric: ``alpha = 1``, ``beta = 0`` -- ``P(M >= y) = p**y``;
* ``|Z|`` of the discrete Laplace: ``alpha = (1 + p) / 2``, ``beta = 0`` --
  ``P(|Z| >= y) = 2 p**y / (1 + p)``; with a uniform random sign this is the
  discrete Laplace (``P(Z = 0) = (1 - p) / (1 + p)``, ``P(Z = +-y) = (1 - p)
  p**y / (1 + p)``);
* the discrete Laplace truncated to ``[lo, hi]`` with ``lo <= 0 <= hi``: ``Z >= 1``
  with ``alpha = 1 + p - p**(1 - lo)``, ``beta = p**(hi + 1)``, and, read from ``U'
  = 1 - U``, ``Z <= 0`` as ``-M`` with the two exponents swapped (see
  :func:`_two_sided_inverse`: one inverse CDF of the whole truncated law). An interval
  on one side of 0 is the same law shifted by its bound nearest 0.

Equivalently ``M = floor(A)`` with ``A = -ln(W) / gamma`` and ``W = beta + U
(alpha - beta)`` (``U < tau_y`` iff ``W < p**y`` iff ``y < A``).  Each draw takes
one 64-bit word from ``Generator.integers``: its top bit is the sign, its low 63
bits ``u`` the leading bits of ``U`` (``U`` is in ``[u, u + 1) / 2**63``).  The
truncated discrete Laplace on ``[lo, hi]`` is always its own two-sided inverse CDF
(one word, no rejection), through the same numpy passes for every draw wherever the
interval lies -- far, near, on a bound, one-sided, infinite -- so that its work does
not depend on the location (the released value); see "Time" below. Large requests
are drawn in blocks of :data:`BLOCK` draws, whose temporaries stay in the CPU's cache.

Exactness
---------
The fast path computes ``A_f`` in float64 (``W_f = u * 2**-63 * d + beta``
with ``d = alpha - beta`` in a cancellation-free form, ``A_f = -log(W_f) * t /
s``) and returns ``floor(A_f)`` only when ``A_f`` is farther than ``delta``
from every integer, where ``delta`` bounds ``|A_f - A|`` for *every* ``U`` in
the word's interval:

    delta = (K_1 + 1.02 / u) / gamma + K_2 * A_f.

The terms: ``1 / u`` (the unseen bits of ``U``) and ``2**-53`` (rounding ``u``
to float64) for ``U``; ``E_d`` and ``E_beta``, the relative errors of ``d`` and
``beta`` (``2**-53`` when ``d`` is correctly rounded from ``decimal``, as for a
scalar untruncated scale; from ``exp`` / ``expm1`` of an argument ``x = k gamma``
rounded twice, so off by ``x 2**-52``: ``2 eps + 2**-50`` for ``d`` -- ``-expm1(-x)`` is
well conditioned for every ``x`` -- and ``eps + 2**-50`` for an array scale's ``d =
(1 + exp(-gamma)) / 2``, ``eps + 606 * 2**-52`` for the truncated law's ``beta =
exp(-x)`` with ``x <= 600``: larger arguments are clamped at 600, which moves ``beta``
by less than ``exp(-600) < 2**-865``, a relative ``2**-770`` of ``W >= 2**-95``
(``u >= 1``, ``D >= 1 - p >= 2**-32``), and any subnormal rounding is as small);
two roundings for ``W_f`` and two for ``A_f``; and ``eps |ln W|`` for ``log``,
where ``eps = LIBM_RELATIVE_ERROR = 2**-46`` is the one assumption: numpy's
float64 ``log``, ``exp`` and ``expm1`` are within 64 units in the last place
(they are within 4; ``tests/mechanisms/test_inverse_cdf.py`` measures them
against correctly rounded ``decimal`` values).  Summing, ``K_1 = 2**-49``
(correctly rounded ``d``), ``2**-43`` (an array scale) or ``2**-42`` (the truncated
law), ``K_2 = 2**-45``, each rounded up from ``1.02 (E_d + E_beta + 2**-50)`` and
``1.02 (eps + 2**-50)``; the factor 1.02 covers second-order terms.

Every other draw -- ``A_f`` within ``delta`` of an integer, ``u = 0`` --
takes the exact fallback (:func:`_exact_magnitude`, :func:`_exact_two_sided`): a
binary search (from a doubling search where no bracket is known) for the
largest ``y`` with ``U < tau_y``, each comparison decided by rational bounds on
``tau_y`` from ``decimal`` (``Decimal.exp`` is correctly rounded; the bounds are
widened by a whole ulp) and, when ``U``'s known bits cannot decide, by 64 more
random bits of ``U``.  ``tau_y`` is irrational for ``y >= 1`` inside the interval,
so this ends with probability one.  The fallback also checks that the pre-filter's bracket
holds and raises ``RuntimeError`` if it does not (``log`` less accurate than
assumed).  About one draw in ``10**9`` takes it at scale 1000 (``delta`` is
about ``1e-10``), at most a few in ``10**4`` at scale ``2**31``.  So the map
from random bits to output is exactly the inverse CDF of the law: the output
law is the law, exactly, the same as the earlier samplers (Canonne, Kamath &
Steinke 2020, Algorithm 2; kept in ``tests/mechanisms/discrete_reference.py``,
and :func:`sample_bernoulli_exp` still implements their Algorithm 1).  The
tests compare both laws exactly on small grids and exercise every branch.

Time
----
A truncated draw's work does not depend on where its interval lies (for a bounded
release: on the released value). Every draw runs the same Python lines and the same
numpy passes on arrays of the same length, takes one word, and computes the same two
``exp``, two ``expm1`` and one ``log`` (no branch between a one-sided and a two-sided
law, no rejection, no table lookup indexed by the value, no shortcut when the bounds are
equal; ``exp``'s arguments are clamped at 600, out of its slow subnormal range;
``tests/mechanisms/test_timing.py`` checks the lines and words at a bound, next to it,
in the middle and outside, and that no threshold on the time tells them apart). What
still depends on the value:

* the exact fallback: whether a draw takes it (``A_f`` within ``delta`` of an integer),
  and its work (a bisection over the interval, more words). Summing, over the integers
  ``k`` of each side, the chance that ``A`` lies within ``2 delta`` of ``k`` (``2 p**k
  sinh(2 gamma delta) / D`` in ``U``; ``sum p**k <= D / (1 - p)`` on each side and the
  mean ``k`` is below ``1 / (1 - p)``), plus the word's own resolution (at most a few
  words per threshold, about ``67 / gamma`` thresholds above ``2**-64``) and ``u = 0``:

      P(fallback) <= 8.01 (K_1 + K_2 gamma (1 + 1 / (1 - p))) / (1 - p)
                     + 2**-54 / gamma + 2**-62        (:func:`fallback_bound`)

  at every location: ``3.4e-9`` per value for ``calibrate_bounded(1, 2, 0, 100)``
  (``gamma = 6.05e-4`` per grid step), ``2.1e-9`` at scale 1000, ``4.4e-3`` at the
  largest scale ``2**31``. Off the fallback the work is the same, so the timings of any
  two locations differ in law by at most this probability per value (total variation);
* numpy's own loops: ``exp``, ``expm1`` and ``log`` are SIMD code whose time was found
  flat over the arguments the samplers pass (0.6 to 0.7 ns a value from 0 to 600; slow
  only past 704, which the clamp excludes), but numpy does not promise it.

The BIT law (and the plain discrete Laplace) draws the noise without the value and
clamps it afterwards: its fallback depends on the word only.

Speed: one integer draw, one ``log`` and a dozen numpy ufuncs in place per
sample, in cache-sized blocks, no Python loop over samples outside the rare
fallback: a discrete Laplace draw costs about 0.6 times numpy's float
``Generator.laplace`` (1.3 times at scale ``2**30``); a truncated one 1.4 to
1.9 times, wherever the values lie
(``benchmarks/bench_discrete_laplace.py``, ``benchmarks/bench_bounded.py``,
``docs/bounded.md``).

Integer safety: ``num`` and ``den`` are at most ``2**31``.  A magnitude is at
most ``A < 746 * 2**31 < 2**42`` on the fast path (``W >= 2**-1074``); the
fallback refuses to exceed ``2**62``; the fallback's products ``y * s`` and
``(L + 1) * s`` are Python integers.  A truncated draw is ``c + Z`` with ``c`` a bound
below ``2**62`` and ``Z`` inside ``[lo - c, hi - c]`` (or below ``2**42``), so every
value fits in ``int64``.  ``sample_bernoulli_exp`` keeps
its own bounds (products ``den * k`` below ``2**62``).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import check_positive, check_real
from dpframe.core.randomness import secure_generator
from dpframe.errors import InvalidParameterError

__all__ = [
    "discrete_laplace_cdf",
    "discrete_laplace_pmf",
    "discrete_laplace_quantile_abs",
    "discrete_laplace_tail",
    "discrete_laplace_variance",
    "fallback_bound",
    "sample_bernoulli_exp",
    "sample_discrete_laplace",
    "sample_geometric",
    "sample_truncated_discrete_laplace",
]

#: Largest allowed numerator / denominator of a rational parameter.
MAX_INT = 2**31

# Loop counters multiplied with values <= MAX_INT must stay below this bound so
# that the products stay below 2**62.
_MAX_FACTOR = 2**31

# A scalar parameter is kept as a Python int; an array parameter as int64.
_IntParam = int | np.ndarray


# ---------------------------------------------------------------------------
# Input validation helpers
# ---------------------------------------------------------------------------


def _validate_int(value: npt.ArrayLike, name: str, low: int) -> np.ndarray:
    """Return ``value`` as an int64 array after checking ``low <= value <= 2**31``.

    Raises
    ------
    InvalidParameterError
        A ``ValueError`` subclass, if ``value`` is not of integer dtype or lies
        outside the range.
    """
    allowed = f"integers in [{low}, 2**31]"
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise InvalidParameterError(
            f"{name} must contain {allowed}; got values of dtype {arr.dtype}"
        )
    if arr.size and (arr.min() < low or arr.max() > MAX_INT):
        raise InvalidParameterError(
            f"{name} must contain {allowed}; got values in [{arr.min()}, {arr.max()}]"
        )
    return arr.astype(np.int64)


def _validate_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(f"rng must be a numpy.random.Generator, got {type(rng)!r}")
    return rng


def _flat_param(arr: np.ndarray, shape: tuple[int, ...]) -> _IntParam:
    """Broadcast ``arr`` to ``shape`` and flatten, or return a Python int.

    Scalars (arrays with a single element) are returned as ``int`` so that
    ``Generator.integers`` receives a scalar bound, which is about three
    times faster than an array of bounds.
    """
    if arr.size == 1:
        return int(arr.reshape(()))
    return np.broadcast_to(arr, shape).ravel()


def _take(param: _IntParam, index: np.ndarray) -> _IntParam:
    """Select ``param[index]`` for array parameters; scalars pass through."""
    return param if isinstance(param, int) else param[index]


def _check_factor(k: int) -> None:
    if k >= _MAX_FACTOR:  # probability < exp(-2**30): never happens in practice
        raise RuntimeError("loop counter exceeded 2**31; refusing to overflow int64")


# ---------------------------------------------------------------------------
# Bernoulli(exp(-gamma)) -- Canonne, Kamath & Steinke, Algorithm 1
# ---------------------------------------------------------------------------


def _bernoulli_exp_minus_one_rounds(count: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Finish Algorithm 1 with ``gamma = 1`` for ``count`` runs that reached round ``k``.

    ``A_k ~ Bernoulli(1 / k)`` is ``Uniform{0, ..., k - 1} == 0``; the run stops
    at the first ``A_k = 0`` and succeeds iff that ``k`` is odd.  All runs
    still pending in a round share the same ``k``.
    """
    result = np.empty(count, dtype=bool)
    pending = np.arange(count)
    while pending.size:
        _check_factor(k)
        a = rng.integers(0, k, size=pending.size, dtype=np.int64) == 0
        result[pending[~a]] = k % 2 == 1
        pending = pending[a]
        k += 1
    return result


def _exp_minus_one_table(last: int) -> np.ndarray:
    """Outcome of Algorithm 1 (``gamma = 1``) for each ``w`` in ``{0, ..., last! - 1}``.

    Write ``w`` in the mixed radix ``(2, 3, ..., last)``, most significant
    digit first: ``w`` uniform gives independent digits ``d_k`` uniform in
    ``{0, ..., k - 1}``, so ``A_k = [d_k == 0]`` are independent
    ``Bernoulli(1 / k)`` draws (``A_1 = 1`` always).  The leading digits
    ``d_2 .. d_j`` are all zero iff ``w < last! / j!``, so the run passes
    ``passed = #{j in 2..last : w < last! / j!}`` rounds after round 1 and
    stops at ``K = 2 + passed``; it succeeds iff ``K`` is odd.  Only ``w = 0``
    (all digits zero) is undecided and must continue at round ``last + 1``.
    """
    w = np.arange(math.factorial(last), dtype=np.int64)
    thresholds = [math.factorial(last) // math.factorial(j) for j in range(2, last + 1)]
    passed = sum((w < c).astype(np.int64) for c in thresholds)
    return passed % 2 == 1


# One uniform integer below 8! = 40320 decides the first 7 Bernoulli(1/k) trials
# of Algorithm 1 for gamma = 1 (k = 2..8) by a table lookup; see
# _exp_minus_one_table.  Only w = 0 (probability 1/8!) needs further rounds.
_EXP1_LAST_ROUND = 8
_EXP1_TABLE = _exp_minus_one_table(_EXP1_LAST_ROUND)


def _bernoulli_exp_minus_one(count: int, rng: np.random.Generator) -> np.ndarray:
    """Return ``count`` independent exact ``Bernoulli(exp(-1))`` draws.

    Algorithm 1 with ``gamma = 1``; rounds ``k <= 8`` are batched into one
    uniform integer draw and a table lookup (see :func:`_exp_minus_one_table`).
    """
    w = rng.integers(0, _EXP1_TABLE.size, size=count, dtype=np.int64)
    result = _EXP1_TABLE[w]
    undecided = np.flatnonzero(w == 0)
    if undecided.size:
        result[undecided] = _bernoulli_exp_minus_one_rounds(
            undecided.size, _EXP1_LAST_ROUND + 1, rng
        )
    return result


def _bernoulli_exp_fraction(
    num: np.ndarray, den: _IntParam, rng: np.random.Generator
) -> np.ndarray:
    """Return exact ``Bernoulli(exp(-num / den))`` draws for ``0 <= num <= den``.

    Algorithm 1 for ``gamma = num / den`` in ``[0, 1]``:
    ``A_k ~ Bernoulli(num / (den * k))`` is ``Uniform{0, ..., den*k - 1} < num``;
    the run stops at the first ``A_k = 0`` and succeeds iff that ``k`` is odd.
    All runs still pending in a round share the same ``k``.

    Parameters
    ----------
    num : ndarray of int64, shape (m,)
        Numerators, ``0 <= num <= den``.
    den : int or ndarray of int64, shape (m,)
        Denominators, ``1 <= den <= 2**31``.
    rng : numpy.random.Generator
        Source of randomness.
    """
    # Round k = 1 on the full arrays; runs stopping here (k odd) succeed.
    a = rng.integers(0, den, size=num.shape[0], dtype=np.int64) < num
    result = ~a
    pending = np.flatnonzero(a)
    num, den = num[pending], _take(den, pending)
    k = 2
    while pending.size:
        _check_factor(k)
        high = den * k  # < 2**62
        a = rng.integers(0, high, size=pending.size, dtype=np.int64) < num
        result[pending[~a]] = k % 2 == 1
        pending, num, den = pending[a], num[a], _take(den, a)
        k += 1
    return result


def sample_bernoulli_exp(
    num: npt.ArrayLike, den: npt.ArrayLike, rng: np.random.Generator
) -> np.ndarray:
    """Draw exact ``Bernoulli(exp(-num / den))`` samples.

    Implements Algorithm 1 of Canonne, Kamath & Steinke (2020) using only
    uniform integer draws.  For ``gamma = num / den > 1`` it uses
    ``exp(-gamma) = exp(-1)**floor(gamma) * exp(-(gamma - floor(gamma)))``:
    ``floor(gamma)`` independent ``Bernoulli(exp(-1))`` trials (stopping at
    the first failure) followed by one trial for the fractional part
    ``(num mod den) / den``.

    Parameters
    ----------
    num : int or array_like of int
        Numerators of ``gamma``, ``0 <= num <= 2**31``.
    den : int or array_like of int
        Denominators of ``gamma``, ``1 <= den <= 2**31``.  Broadcast against
        ``num``; one draw is made per element of the broadcast shape.
    rng : numpy.random.Generator
        Source of randomness; only ``rng.integers`` is called.

    Returns
    -------
    ndarray of bool
        Draws with the broadcast shape of ``num`` and ``den``.

    Raises
    ------
    InvalidParameterError
        A ``ValueError`` subclass, if ``num`` or ``den`` is not an integer in
        its allowed range, or if ``rng`` is not a ``numpy.random.Generator``.

    Examples
    --------
    >>> rng = np.random.Generator(np.random.PCG64(0))
    >>> draws = sample_bernoulli_exp(np.full(100_000, 1), 2, rng)  # exp(-1/2)
    >>> bool(abs(draws.mean() - np.exp(-0.5)) < 0.01)
    True
    """
    num_arr = _validate_int(num, "num", 0)
    den_arr = _validate_int(den, "den", 1)
    rng = _validate_rng(rng)
    shape = _output_shape(None, num=num_arr.shape, den=den_arr.shape)
    nums = np.broadcast_to(num_arr, shape).ravel()
    dens = _flat_param(den_arr, shape)
    return _bernoulli_exp(nums, dens, rng).reshape(shape)


def _bernoulli_exp(nums: np.ndarray, dens: _IntParam, rng: np.random.Generator) -> np.ndarray:
    """Unvalidated core of :func:`sample_bernoulli_exp` on flat int64 arrays.

    ``nums >= 0`` may exceed ``2**31`` (the integer part is drawn as repeated
    ``Bernoulli(exp(-1))`` trials); ``1 <= dens <= 2**31``.
    """
    whole, frac = np.divmod(nums, dens)
    result = np.ones(nums.shape[0], dtype=bool)

    # Integer part: each pending sample needs `remaining` more exp(-1) successes.
    pending = np.flatnonzero(whole > 0)
    remaining = whole[pending]
    while pending.size:
        a = _bernoulli_exp_minus_one(pending.size, rng)
        result[pending[~a]] = False
        pending, remaining = pending[a], remaining[a] - 1
        unfinished = remaining > 0
        pending, remaining = pending[unfinished], remaining[unfinished]

    # Fractional part (exp(-0) = 1 needs no draw), only for survivors.
    pending = np.flatnonzero(result & (frac > 0))
    result[pending] = _bernoulli_exp_fraction(frac[pending], _take(dens, pending), rng)
    return result


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------


def _output_shape(
    size: int | tuple[int, ...] | None, **param_shapes: tuple[int, ...]
) -> tuple[int, ...]:
    """Shape of the output: ``size`` if given, else the broadcast parameter shape."""
    shapes = list(param_shapes.values())
    if size is not None:
        shapes.append(tuple(int(d) for d in np.atleast_1d(size)))
    try:
        broadcast = np.broadcast_shapes(*shapes)
    except ValueError:
        broadcast = None
    if broadcast is None or (size is not None and broadcast != shapes[-1]):
        target = "each other" if size is None else f"size {shapes[-1]}"
        raise InvalidParameterError(
            " and ".join(f"{k} (shape {v})" for k, v in param_shapes.items())
            + f" cannot be broadcast to {target}"
        )
    return broadcast


# ---------------------------------------------------------------------------
# The inverse CDF: one 64-bit word per draw, a float pre-filter, an exact fallback
# ---------------------------------------------------------------------------

#: ``Generator.integers(_WORD_LOW, _WORD_HIGH, dtype=int64)`` gives 64 uniform bits.
_WORD_LOW, _WORD_HIGH = -(2**63), 2**63
_LOW_BITS = np.int64(2**63 - 1)  # the 63 bits of U; bit 63 (the sign of the word) is the sign
_TWO_M63 = 2.0**-63

#: Assumed bound on the relative error of numpy's float64 ``log``, ``exp`` and ``expm1``
#: (64 units in the last place; they are within 4, see tests/mechanisms/test_inverse_cdf.py).
LIBM_RELATIVE_ERROR = 2.0**-46
# Margin constants of the pre-filter (see the module docstring, "Exactness"): the bound on
# |A_float - A| is (K_1 + 1.02 / u) / gamma + K_2 * A_float, with K_1 = 1.02 * (E_d + E_beta
# + 2**-50) and K_2 = 1.02 * (LIBM_RELATIVE_ERROR + 2**-50), rounded up to powers of two.
_K1_EXACT = 2.0**-49  # d correctly rounded (E_d <= 2**-53), beta = 0
_K1_LIBM = 2.0**-43  # d from exp (an array scale): E_d <= 2 eps + 2**-50, beta = 0
# The truncated law: d and beta from exp / expm1 of arguments x <= _EXP_CLAMP, each x
# rounded twice: E_d <= 2 eps + 2**-50 and E_beta <= eps + 600 * 2**-52 * 1.01, so K_1 =
# 1.02 (3 eps + 2**-49 + 606 * 2**-52) = 1.82e-13 < 2**-42.
_K1_WIDE = 2.0**-42
_K2 = 2.0**-45
#: Largest argument of ``exp`` in the truncated law's constants: ``exp(-x)`` for larger x
#: is taken as ``exp(-600)`` (module docstring), which keeps ``exp`` out of its slow
#: subnormal range (about 50 times slower per value on this machine's numpy) and so its
#: time independent of the bounds.
_EXP_CLAMP = 600.0


#: Large requests are drawn in blocks of this many draws, so that every temporary array
#: of the samplers stays in the CPU's cache (about 1.4 times faster at 1e6 draws than
#: whole-array passes; benchmarks/bench_bounded.py). Blocks change which words a draw
#: uses, never its law: each block's draws are independent and exact.
BLOCK = 1 << 16


def blocks(count: int) -> list[slice]:
    """The slices of ``range(count)`` that the samplers draw one at a time."""
    return [slice(start, min(count, start + BLOCK)) for start in range(0, count, BLOCK)]


def _part(param: _IntParam, part: slice) -> _IntParam:
    """``param[part]`` for array parameters; scalars pass through."""
    return param if isinstance(param, int) else param[part]


def _word_draws(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniform 64-bit words (int64)."""
    return rng.integers(_WORD_LOW, _WORD_HIGH, size=count, dtype=np.int64)


def _apply_sign(magnitude: np.ndarray, words: np.ndarray) -> np.ndarray:
    """``-magnitude`` where the word's top bit is set, ``magnitude`` elsewhere (in place)."""
    sign = words >> 63  # 0 or -1
    np.bitwise_xor(magnitude, sign, out=magnitude)
    np.subtract(magnitude, sign, out=magnitude)
    return magnitude


@lru_cache(maxsize=1024)
def _exact_constants(t: int, s: int, symmetric: bool) -> tuple[float, float]:
    """``(t / s, d)`` as correctly rounded floats, ``d = (1 + exp(-s/t)) / 2`` or 1."""
    inv = float(Fraction(t, s))
    if not symmetric:
        return inv, 1.0
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        p = (-(Decimal(s) / Decimal(t))).exp()
        return inv, float((1 + p) / 2)


def _law_constants(t: _IntParam, s: _IntParam, symmetric: bool) -> tuple[Any, Any, float]:
    """``(1 / gamma, d = alpha, K_1)`` of the untruncated law (``beta = 0``), as floats.

    Scalars (and exact, correctly rounded) for a scalar scale; per draw from ``exp``
    otherwise: ``d = (1 + exp(-gamma)) / 2`` (symmetric) or 1.
    """
    if isinstance(t, int) and isinstance(s, int):
        inv, d = _exact_constants(t, s, symmetric)
        return inv, d, _K1_EXACT
    tf = np.asarray(t, dtype=np.float64)
    sf = np.asarray(s, dtype=np.float64)
    gamma, inv = sf / tf, tf / sf
    d = 0.5 + 0.5 * np.exp(-gamma) if symmetric else 1.0
    return inv, d, _K1_LIBM


def _prefilter(
    x: np.ndarray, inv: Any, d: Any, beta: Any, k1: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The float pre-filter: ``A_f = -ln(x d + beta) / gamma``, ``floor(A_f)``, certainty.

    Returns ``(a, m, slack, certain)``: ``a = A_f``, ``m = floor(A_f)`` (truncated towards
    0), ``slack = 1/2 - delta`` with ``delta`` the module docstring's bound on ``|A_f - A|``
    for every ``U`` in the word's interval, and ``certain`` where ``floor(A) = m`` is
    certain (``A_f`` farther than ``delta`` from every integer; never where ``x = 0`` or
    ``A_f < 0``: then ``|frac - 1/2| > 1/2 > slack``, since ``delta > 0`` while
    ``A_f > -1 / 2``, see :func:`_two_sided_inverse`).
    """
    w = x * d
    if beta is not None:
        w += beta
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = np.log(w)
        a *= -inv  # A = -ln(W) / gamma; M = floor(A) unless A is nearly an integer
        m = a.astype(np.int64)
        # Error bound delta on A (module docstring): (K_1 + 1.02 / u) / gamma + K_2 * A.
        slack = np.reciprocal(x)
        slack *= 1.02 * _TWO_M63
        slack += k1
        slack *= inv
        slack += _K2 * a
        frac = a - m
        frac -= 0.5
        np.abs(frac, out=frac)  # |frac(A) - 1/2|; certain iff < 1/2 - delta (NaN: not)
        np.subtract(0.5, slack, out=slack)
        certain = frac < slack
    return a, m, slack, certain


def _bracket(a: float, slack: float, least: int | None = None) -> tuple[int, int] | None:
    """``[floor(A_f - delta), floor(A_f + delta)]``, which holds ``floor(A)``, or None.

    None where ``delta >= 1/4`` or ``A_f`` is not finite. ``least=None``: the low end
    clipped at 0 (``A >= 0`` is known); ``least=k``: None unless ``floor(A_f - delta) >=
    k``, which makes ``floor(A) >= k`` certain.
    """
    delta = 0.5 - slack
    if not (delta < 0.25 and math.isfinite(a)):
        return None
    low, high = math.floor(a - delta), math.floor(a + delta)
    if least is None:
        return max(0, low), high
    return (low, high) if low >= least else None


def _magnitudes(
    words: np.ndarray,
    t: _IntParam,
    s: _IntParam,
    symmetric: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    """``M = #{y >= 1 : U < tau_y}`` for each word, exactly (see the module docstring).

    ``U`` is the word's low 63 bits over ``2**63``, continued by fresh words if needed;
    ``tau_y = p**y / alpha``, ``p = exp(-s / t)``, ``alpha = (1 + p) / 2`` (``symmetric``)
    or 1: the untruncated laws (the truncated one is :func:`_two_sided_inverse`).
    """
    if words.size == 0:
        return np.zeros(0, dtype=np.int64)
    x = (words & _LOW_BITS).astype(np.float64)
    x *= _TWO_M63  # U up to a relative 2**-53 + 1/u
    inv, d, k1 = _law_constants(t, s, symmetric)
    a, m, slack, certain = _prefilter(x, inv, d, None, k1)
    if not certain.all():
        u = words & _LOW_BITS
        for i in np.flatnonzero(~certain):
            m[i] = _exact_magnitude(
                int(u[i]),
                int(_take(t, i)),
                int(_take(s, i)),
                symmetric,
                rng,
                _bracket(float(a[i]), float(slack[i])),
            )
    return m


# -- the exact fallback (Python integers and decimal, for the rare ambiguous draws) ------


#: ``_exp_bounds`` encloses ``exp(-x)`` for ``x > 2**20`` (a far or infinite bound) in
#: ``[0, 10**-(prec + 20)]``: valid while ``prec < 455,000``, and ``_LazyUniform`` stops at
#: 100,000 digits; the enclosure narrows with ``prec`` like every other.
_EXP_CUT = 2**20


@lru_cache(maxsize=4096)
def _exp_bounds(num: int, den: int, prec: int) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= exp(-num / den) <= hi`` about ``prec`` digits apart.

    ``num / den`` is rounded down and up in decimal; ``Decimal.exp`` is correctly rounded
    (half an ulp), so widening each result by a whole ulp gives certain bounds.
    """
    if num == 0:
        return Fraction(1), Fraction(1)
    if num > _EXP_CUT * den:  # exp(-num / den) < exp(-2**20) < 10**-455000
        return Fraction(0), Fraction(1, 10 ** (prec + 20))  # prec <= 100_020 < 455_000
    with decimal.localcontext() as ctx:
        ctx.prec = prec
        ctx.traps[decimal.Underflow] = True
        ctx.rounding = decimal.ROUND_FLOOR
        x_lo = Decimal(num) / Decimal(den)
        ctx.rounding = decimal.ROUND_CEILING
        x_hi = Decimal(num) / Decimal(den)
        ctx.rounding = decimal.ROUND_HALF_EVEN
        e_lo, e_hi = (-x_hi).exp(), (-x_lo).exp()
    ulp_lo = Fraction(10) ** (e_lo.adjusted() - prec + 1)
    ulp_hi = Fraction(10) ** (e_hi.adjusted() - prec + 1)
    return Fraction(e_lo) - ulp_lo, Fraction(e_hi) + ulp_hi


def _threshold_bounds(
    y: int, t: int, s: int, symmetric: bool, prec: int
) -> tuple[Fraction, Fraction]:
    """Bounds on ``tau_y = p**y / alpha``."""
    p_lo, p_hi = _exp_bounds(y * s, t, prec)
    if not symmetric:
        return p_lo, p_hi
    q_lo, q_hi = _exp_bounds(s, t, prec)
    return p_lo / ((1 + q_hi) / 2), p_hi / ((1 + q_lo) / 2)


class _LazyUniform:
    """``U`` in [0, 1): its leading ``bits`` bits ``prefix``, extended 64 fresh bits at a time."""

    def __init__(self, prefix: int, bits: int, rng: np.random.Generator) -> None:
        self.prefix, self.bits, self.rng = prefix, bits, rng

    def less_than(self, bounds: Callable[[int], tuple[Fraction, Fraction] | None]) -> bool:
        """Whether ``U < tau`` for the real ``tau`` that ``bounds(prec)`` encloses."""
        prec = 40
        while True:
            enclosure = bounds(prec)
            if enclosure is not None:
                lo, hi = enclosure
                scale = 1 << self.bits
                if Fraction(self.prefix + 1, scale) <= lo:
                    return True
                if Fraction(self.prefix, scale) >= hi:
                    return False
            if enclosure is not None and hi - lo < Fraction(1, 4 * (1 << self.bits)):
                word = int(self.rng.integers(_WORD_LOW, _WORD_HIGH, dtype=np.int64))
                self.prefix = (self.prefix << 64) | (word & (2**64 - 1))
                self.bits += 64
            else:
                prec += 20
            if prec > 100_000 or self.bits > 100_000:  # probability below 2**-90000
                raise RuntimeError("exact comparison did not terminate")


def _exact_magnitude(
    u: int,
    t: int,
    s: int,
    symmetric: bool,
    rng: np.random.Generator,
    bracket: tuple[int, int] | None = None,
) -> int:
    """``M = #{y >= 1 : U < tau_y}`` by exact comparisons; ``U`` starts with the 63 bits ``u``.

    ``tau_y`` decreases in ``y`` (``tau_0 >= 1``), so ``M``
    is the largest ``y`` with ``U < tau_y``: a binary search inside ``bracket`` (the float
    pre-filter's, checked at both ends), or from 0 by doubling without one.
    """
    uniform = _LazyUniform(u, 63, rng)

    def less(y: int) -> bool:
        if y <= 0:
            return True
        return uniform.less_than(lambda prec: _threshold_bounds(y, t, s, symmetric, prec))

    if bracket is not None:
        low, high = _checked_bracket(less, bracket)
    else:
        low, high = 0, 1
        while less(high):
            low, high = high, 2 * high
            if high > 2**62:
                raise RuntimeError("geometric draw above 2**62; refusing to overflow int64")
    return _bisect(less, low, high)


def _checked_bracket(less: Callable[[int], bool], bracket: tuple[int, int]) -> tuple[int, int]:
    """``(low, high)`` from the pre-filter's bracket, checked: ``less(low)`` and not
    ``less(high)``, else the float error bound was wrong and nothing is drawn."""
    low, high = bracket[0], bracket[1] + 1
    if not less(low) or less(high):
        raise RuntimeError(
            "the float pre-filter left its error bound: numpy's log/exp are less "
            f"accurate than {LIBM_RELATIVE_ERROR!r}; the fast samplers cannot be used"
        )
    return low, high


def _bisect(less: Callable[[int], bool], low: int, high: int) -> int:
    """The largest ``z`` in ``[low, high)`` with ``less(z)``, for a ``less`` that is True
    up to some point and False after, given ``less(low)`` and not ``less(high)``."""
    while high - low > 1:
        mid = (low + high) // 2
        if less(mid):
            low = mid
        else:
            high = mid
    return low


# ---------------------------------------------------------------------------
# Discrete Laplace
# ---------------------------------------------------------------------------


def _discrete_laplace(
    t: _IntParam, s: _IntParam, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``count`` discrete Laplace draws of scale ``t / s``: a magnitude and the word's sign."""
    if count > BLOCK:
        out = np.empty(count, dtype=np.int64)
        for part in blocks(count):
            size = part.stop - part.start
            out[part] = _discrete_laplace(_part(t, part), _part(s, part), size, rng)
        return out
    words = _word_draws(count, rng)
    return _apply_sign(_magnitudes(words, t, s, True, rng), words)


def sample_discrete_laplace(
    num: npt.ArrayLike,
    den: npt.ArrayLike,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Draw exact samples of the discrete Laplace distribution.

    ``P(Z = z)`` is proportional to ``exp(-|z| * den / num)``, i.e. the scale
    is the rational number ``t = num / den``.  Each draw is the inverse CDF of
    ``|Z|`` at a uniform ``U`` built from 63 random bits (more bits drawn when
    needed) and a random sign; a floating-point pre-filter decides the draws it
    can certify and exact rational comparisons decide the others (see the
    module docstring), so the output follows the law exactly.  For
    ``epsilon``-DP on an integer-valued query with sensitivity ``Delta``, use
    ``num / den = Delta / epsilon``.

    Parameters
    ----------
    num : int or array_like of int
        Numerator of the scale, ``1 <= num <= 2**31``.
    den : int or array_like of int
        Denominator of the scale, ``1 <= den <= 2**31``.
    size : int or tuple of int, optional
        Output shape; ``num`` and ``den`` must broadcast to it.  Default: the
        broadcast shape of ``num`` and ``den``.
    rng : numpy.random.Generator, optional
        Source of randomness; only ``rng.integers`` is called.  Default: a
        fresh cryptographically secure generator,
        :func:`dpframe.core.randomness.secure_generator`.

    Returns
    -------
    ndarray of int64
        Samples of shape ``size`` (a 0-d array for scalar parameters and
        ``size=None``).

    Raises
    ------
    InvalidParameterError
        A ``ValueError`` subclass, if ``num`` or ``den`` is not an integer in
        ``[1, 2**31]``, if they cannot be broadcast to ``size``, or if ``rng``
        is not a ``numpy.random.Generator``.

    Notes
    -----
    One 64-bit word per sample, no rejection; about one sample in ``10**9`` (at
    scale 1000; at most a few in ``10**4`` at scale ``2**31``) takes the exact
    fallback, which draws more words.

    Examples
    --------
    >>> rng = np.random.Generator(np.random.PCG64(0))
    >>> z = sample_discrete_laplace(3, 2, size=(2, 3), rng=rng)  # scale 1.5
    >>> z.shape, z.dtype
    ((2, 3), dtype('int64'))
    """
    num_arr = _validate_int(num, "num", 1)
    den_arr = _validate_int(den, "den", 1)
    rng = secure_generator() if rng is None else _validate_rng(rng)
    shape = _output_shape(size, num=num_arr.shape, den=den_arr.shape)
    t = _flat_param(num_arr, shape)
    s = _flat_param(den_arr, shape)
    return _discrete_laplace(t, s, math.prod(shape), rng).reshape(shape)


# ---------------------------------------------------------------------------
# Geometric and truncated discrete Laplace (exact, no long rejection loop)
# ---------------------------------------------------------------------------


def sample_geometric(
    num: npt.ArrayLike,
    den: npt.ArrayLike,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Exact geometric draws: ``P(Y = y)`` proportional to ``exp(-y * den / num)``, ``y >= 0``.

    The inverse CDF ``Y = #{y >= 1 : U < exp(-y den / num)}`` (module docstring).

    Examples
    --------
    >>> rng = np.random.Generator(np.random.PCG64(0))
    >>> y = sample_geometric(10, 1, size=100_000, rng=rng)  # ratio exp(-1/10)
    >>> bool(abs(y.mean() - 1 / np.expm1(0.1)) < 0.2)
    True
    """
    num_arr = _validate_int(num, "num", 1)
    den_arr = _validate_int(den, "den", 1)
    rng = secure_generator() if rng is None else _validate_rng(rng)
    shape = _output_shape(size, num=num_arr.shape, den=den_arr.shape)
    t, s = _flat_param(num_arr, shape), _flat_param(den_arr, shape)
    words = _word_draws(math.prod(shape), rng)
    return _magnitudes(words, t, s, False, rng).reshape(shape)


# -- the truncated law: one inverse CDF for every interval and every location -------------


def _two_sided_constants(
    lo: np.ndarray, hi: np.ndarray, t: _IntParam, s: _IntParam
) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray]:
    """``(1 / gamma, p, D, e1, e2)`` of the law ``∝ p**|z|`` on ``[lo, hi]``, as floats.

    ``e1 = p**(L1 + 1)``, ``e2 = p**(L2 + 1)`` (``L1 = -lo``, ``L2 = hi``, either may be
    infinite) and ``D = 1 + p - e1 - e2 = -expm1(-(L2 + 1) gamma) - p * expm1(-L1
    gamma)``, a sum of non-negative terms (no cancellation). Every draw computes the same
    two ``exp`` and two ``expm1`` (numpy's SIMD loops) whatever its bounds: no table, no
    gather, no shortcut for equal bounds, so the work does not depend on the location.
    Each argument is ``k * gamma`` rounded twice (``gamma`` and the product). The
    arguments of ``exp`` are clamped at :data:`_EXP_CLAMP`, below ``exp``'s slow
    subnormal range; the clamp moves ``e1`` or ``e2`` by less than ``exp(-600)``, a
    relative ``2**-770`` of ``W >= 2**-95`` (module docstring, "Exactness").
    """
    if isinstance(t, int) and isinstance(s, int):
        gamma, inv = float(Fraction(s, t)), float(Fraction(t, s))
    else:
        tf, sf = np.asarray(t, dtype=np.float64), np.asarray(s, dtype=np.float64)
        gamma, inv = sf / tf, tf / sf
    p = np.exp(-np.asarray(gamma))
    d = np.multiply(lo, gamma, dtype=np.float64)  # -L1 gamma (-inf: an infinite bound)
    np.expm1(d, out=d)
    d *= -p  # p (1 - p**L1) >= 0
    x1 = np.subtract(lo, 1.0, dtype=np.float64)
    x1 *= gamma  # -(L1 + 1) gamma
    x2 = np.add(hi, 1.0, dtype=np.float64)
    x2 *= -gamma  # -(L2 + 1) gamma
    d -= np.expm1(x2)  # + 1 - p**(L2 + 1) >= 0
    for x in (x1, x2):
        np.maximum(x, -_EXP_CLAMP, out=x)
        np.exp(x, out=x)
    return inv, p, d, x1, x2


def _select(when_zero: Any, when_minus_one: Any, mask: np.ndarray) -> np.ndarray:
    """``when_minus_one`` where ``mask`` (int64) is -1, ``when_zero`` where it is 0: exact
    float values, chosen bit by bit (faster than ``np.where`` on a random mask)."""
    a = np.asarray(when_zero, dtype=np.float64).view(np.int64)
    b = np.asarray(when_minus_one, dtype=np.float64).view(np.int64)
    out = np.bitwise_xor(a, b)
    out &= mask
    out ^= a
    return out.view(np.float64)


def _two_sided_inverse(
    lo: np.ndarray, hi: np.ndarray, t: _IntParam, s: _IntParam, rng: np.random.Generator
) -> np.ndarray:
    """Truncated discrete Laplace on ``[lo, hi]``, ``lo <= 0 <= hi``, by its inverse CDF.

    One word a draw and the same numpy passes for every draw, whatever ``lo`` and ``hi``
    (either may be infinite; ``lo = 0`` or ``hi = 0`` is a bound like any other). With
    ``L1 = -lo``, ``L2 = hi``, ``e1 = p**(L1 + 1)``, ``e2 = p**(L2 + 1)``, ``D = 1 + p -
    e1 - e2``, the law ``∝ p**|z|`` has ``P(Z >= z) = G(z)``::

        G(z) = (p**z - e2) / D                     z >= 1
        G(z) = (1 + p - e2 - p**(1 - z)) / D       z <= 0   (G(lo) = 1)

    and ``Z = max{z : U < G(z)}``. For ``z >= 1``, ``U < G(z)`` iff ``z < A``, ``A =
    -ln(U D + e2) / gamma``: where ``A > 1``, ``Z = floor(A)``. For ``z <= 0`` it is iff
    ``z < 1 - A'``, ``A' = -ln(U' D + e1) / gamma`` with ``U' = 1 - U``: where ``A' >=
    0``, ``Z = -floor(A')``. Both are the pre-filter's form (``x d + beta``, ``d`` and
    ``beta`` from ``exp`` / ``expm1``), so its error bound holds for each, with ``K_1 =
    _K1_WIDE`` (arguments of ``exp`` up to 600); ``U'`` is read from the complement of
    the word's 63 bits (``U'`` in ``(u', u' + 1] / 2**63``, ``u' = 2**63 - 1 - u``),
    which keeps the ``1 / u'`` term of that bound.

    A float comparison guesses the side (``U D + e2 < p``); a draw is certain only if
    its side's ``floor`` is certain *and* lies on that side (``floor(A) >= 1``, or
    ``floor(A') >= 0``), so a wrong guess is never certain. Every other draw takes
    :func:`_exact_two_sided`.
    """
    inv, p, d, e1, e2 = _two_sided_constants(lo, hi, t, s)
    words = _word_draws(lo.shape[0], rng)
    u = words & _LOW_BITS
    x = u.astype(np.float64)
    x *= _TWO_M63
    x *= d
    x += e2
    sign = (x >= p).view(np.int8).astype(np.int64)  # 1: the side z <= 0 (a guess)
    np.negative(sign, out=sign)  # 0 or -1
    np.bitwise_xor(u, sign, out=u)
    np.bitwise_and(u, _LOW_BITS, out=u)  # u' = 2**63 - 1 - u on the side z <= 0
    x = u.astype(np.float64)
    x *= _TWO_M63
    a, m, slack, certain = _prefilter(x, inv, d, _select(e2, e1, sign), _K1_WIDE)
    certain &= (m >= 1) | (sign < 0)  # the guessed side z >= 1 needs floor(A) >= 1
    z = _apply_sign_mask(m, sign)
    if not certain.all():
        low = words & _LOW_BITS
        for i in np.flatnonzero(~certain):
            # a bracket only where the side is certain: floor(A) >= 1, or floor(A') >= 0
            if sign[i] < 0:
                bracket = _bracket(float(a[i]), float(slack[i]), least=0)
                bracket = None if bracket is None else (-bracket[1], -bracket[0])
            else:
                bracket = _bracket(float(a[i]), float(slack[i]), least=1)
            z[i] = _exact_two_sided(
                int(low[i]),
                int(_take(t, i)),
                int(_take(s, i)),
                _finite_int(-lo[i]),
                _finite_int(hi[i]),
                rng,
                bracket,
            )
    return z


def _finite_int(x: Any) -> int | None:
    """``int(x)``, or None for an infinite bound."""
    return int(x) if math.isfinite(x) else None


def _apply_sign_mask(magnitude: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """``-magnitude`` where ``sign`` is -1, ``magnitude`` where it is 0 (in place)."""
    np.bitwise_xor(magnitude, sign, out=magnitude)
    np.subtract(magnitude, sign, out=magnitude)
    return magnitude


def _two_sided_bounds(
    z: int, t: int, s: int, l1: int | None, l2: int | None, prec: int
) -> tuple[Fraction, Fraction] | None:
    """Rational bounds on ``G(z) = P(Z >= z)`` (see :func:`_two_sided_inverse`); an
    infinite bound (None) has ``e = 0``."""
    p_lo, p_hi = _exp_bounds(s, t, prec)
    zero = (Fraction(0), Fraction(0))
    e1_lo, e1_hi = zero if l1 is None else _exp_bounds((l1 + 1) * s, t, prec)
    e2_lo, e2_hi = zero if l2 is None else _exp_bounds((l2 + 1) * s, t, prec)
    d_lo, d_hi = 1 + p_lo - e1_hi - e2_hi, 1 + p_hi - e1_lo - e2_lo
    if d_lo <= 0:
        return None
    if z >= 1:
        q_lo, q_hi = _exp_bounds(z * s, t, prec)
        n_lo, n_hi = q_lo - e2_hi, q_hi - e2_lo
    else:
        q_lo, q_hi = _exp_bounds((1 - z) * s, t, prec)
        n_lo, n_hi = 1 + p_lo - e2_hi - q_hi, 1 + p_hi - e2_lo - q_lo
    lo = n_lo / (d_hi if n_lo >= 0 else d_lo)
    hi = n_hi / (d_lo if n_hi >= 0 else d_hi)
    return lo, hi


def _exact_two_sided(
    u: int,
    t: int,
    s: int,
    l1: int | None,
    l2: int | None,
    rng: np.random.Generator,
    bracket: tuple[int, int] | None = None,
) -> int:
    """``Z = max{z in [-l1, l2] : U < G(z)}`` by exact comparisons; ``U`` starts with ``u``.

    ``G`` decreases, ``G(-l1) = 1``, ``G(l2 + 1) = 0`` (None: an infinite bound): a binary
    search inside ``bracket`` (the pre-filter's, checked at both ends), or, without one,
    from ``0`` / ``1`` outwards by doubling, then a binary search.
    """
    uniform = _LazyUniform(u, 63, rng)

    def less(z: int) -> bool:
        if l1 is not None and z <= -l1:
            return True
        if l2 is not None and z > l2:
            return False
        return uniform.less_than(lambda prec: _two_sided_bounds(z, t, s, l1, l2, prec))

    if bracket is not None:
        low, high = _checked_bracket(less, bracket)
    elif less(1):  # Z >= 1
        low, high = 1, 2
        while less(high):
            low, high = high, 2 * high
            if high > 2**62:
                raise RuntimeError("truncated draw above 2**62; refusing to overflow int64")
    else:  # Z <= 0
        low, high = 0, 1
        while not less(low):
            low, high = 2 * low - 1, low
            if low < -(2**62):
                raise RuntimeError("truncated draw below -2**62; refusing to overflow int64")
    return _bisect(less, low, high)


def fallback_bound(gamma: float) -> float:
    """Upper bound on the chance that one truncated draw takes the exact fallback.

    The module docstring's ``8.01 (K_1 + K_2 gamma (1 + 1 / (1 - p))) / (1 - p) +
    2**-54 / gamma + 2**-62``, ``p = exp(-gamma)``: the same for every interval and every
    location, and so a bound on how much the time of a truncated release can depend on
    the value (per value, in total variation).

    Examples
    --------
    >>> fallback_bound(1e-3) < 3e-9  # scale 1000
    True
    """
    gamma = check_positive("gamma", gamma)
    one_minus_p = -math.expm1(-gamma)
    main = _K1_WIDE + _K2 * gamma * (1.0 + 1.0 / one_minus_p)
    return 8.01 * main / one_minus_p + 2.0**-54 / gamma + 2.0**-62


def sample_truncated_discrete_laplace(
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    num: npt.ArrayLike,
    den: npt.ArrayLike,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Exact discrete Laplace draws conditioned on ``lower <= Z <= upper``.

    ``P(Z = z)`` is proportional to ``exp(-|z| * den / num)`` for integers ``z`` in
    ``[lower, upper]``. No rejection: every draw is the truncated law's own inverse CDF
    at one 64-bit word, through the same numpy passes wherever the interval lies
    (around 0, far from it, one-sided, tiny or wide relative to the scale), so the work
    does not depend on the bounds (only the rare exact fallback does, module docstring).

    Parameters
    ----------
    lower, upper : array_like of float
        Integer-valued bounds, ``lower <= upper``; ``-inf`` / ``+inf`` allowed.
    num, den : int or array_like of int
        The scale ``num / den`` (integers in ``[1, 2**31]``).
    size : int or tuple of int, optional
        Output shape; default the broadcast shape of the arguments.
    rng : numpy.random.Generator, optional
        Default :func:`dpframe.core.randomness.secure_generator`.

    Examples
    --------
    >>> rng = np.random.Generator(np.random.PCG64(0))
    >>> z = sample_truncated_discrete_laplace(1000, 1010, 5, 1, size=1000, rng=rng)
    >>> int(z.min()) >= 1000 and int(z.max()) <= 1010
    True
    """
    for name, given in (("lower", lower), ("upper", upper)):
        ints = np.asarray(given)
        if ints.dtype.kind in "iuO" and ints.size and np.abs(ints).max() > 2**53:
            raise InvalidParameterError(
                f"{name} must be at most 2**53 in absolute value when given as integers "
                "(larger ones are not exact as floats)"
            )
    lo_arr = np.asarray(lower, dtype=np.float64)
    hi_arr = np.asarray(upper, dtype=np.float64)
    for name, arr in (("lower", lo_arr), ("upper", hi_arr)):
        finite = arr[np.isfinite(arr)]
        if np.isnan(arr).any() or not np.array_equal(finite, np.rint(finite)):
            raise InvalidParameterError(f"{name} must hold integers or +-inf, got {arr!r}")
        if finite.size and np.abs(finite).max() >= 2.0**62:
            raise InvalidParameterError(f"{name} must be below 2**62 in absolute value")
    num_arr = _validate_int(num, "num", 1)
    den_arr = _validate_int(den, "den", 1)
    rng = secure_generator() if rng is None else _validate_rng(rng)
    shape = _output_shape(
        size, lower=lo_arr.shape, upper=hi_arr.shape, num=num_arr.shape, den=den_arr.shape
    )
    lo = np.broadcast_to(lo_arr, shape).ravel()
    hi = np.broadcast_to(hi_arr, shape).ravel()
    if (lo > hi).any() or (lo == np.inf).any() or (hi == -np.inf).any():
        raise InvalidParameterError("lower must be <= upper, with a non-empty integer range")
    t, s = _flat_param(num_arr, shape), _flat_param(den_arr, shape)
    return _truncated_discrete_laplace(lo, hi, t, s, rng).reshape(shape)


def _truncated_discrete_laplace(
    lo: np.ndarray, hi: np.ndarray, t: _IntParam, s: _IntParam, rng: np.random.Generator
) -> np.ndarray:
    """Unvalidated core of :func:`sample_truncated_discrete_laplace` on flat arrays.

    ``lo <= hi`` are float or int64 arrays of integer values (floats may be infinite),
    ``t``, ``s`` the scale ``t / s`` as ints or int64 arrays of the same length. Every
    draw takes the same path, wherever its interval lies: ``c``, the point of ``[lo,
    hi]`` nearest 0 (0 itself for a bounded release, whose ``lo <= 0 <= hi``), plus the
    law ``∝ p**|z|`` on ``[lo - c, hi - c]`` -- an interval around 0, drawn by
    :func:`_two_sided_inverse` (on ``[lo, hi]`` with ``lo > 0``, ``p**z = p**c p**(z -
    c)`` with ``z - c >= 0``: the same law). Large requests are drawn in blocks of
    :data:`BLOCK`.
    """
    if lo.shape[0] > BLOCK:
        out = np.empty(lo.shape[0], dtype=np.int64)
        for part in blocks(lo.shape[0]):
            out[part] = _truncated_discrete_laplace(
                lo[part], hi[part], _part(t, part), _part(s, part), rng
            )
        return out
    c = np.clip(0, lo, hi)  # finite: lo < inf, hi > -inf
    z = _two_sided_inverse(lo - c, hi - c, t, s, rng)
    z += c.astype(np.int64)
    return z


# ---------------------------------------------------------------------------
# Analytic properties (floating point; for calibration and testing only)
# ---------------------------------------------------------------------------


def discrete_laplace_pmf(z: npt.ArrayLike, scale: float) -> np.ndarray:
    """Probability mass function of the discrete Laplace distribution.

    ``P(Z = z) = (1 - b) / (1 + b) * b**|z|`` with ``b = exp(-1 / scale)``,
    evaluated as ``tanh(1 / (2 * scale)) * exp(-|z| / scale)`` for accuracy at
    large scales.

    Parameters
    ----------
    z : array_like of int
        Points at which to evaluate.
    scale : float
        Scale ``t > 0`` (``num / den`` for the sampler).

    Returns
    -------
    ndarray of float
        Probabilities, same shape as ``z``.

    Examples
    --------
    >>> discrete_laplace_pmf([0, 1], scale=1.0).round(4)
    array([0.4621, 0.17  ])
    """
    scale = check_positive("scale", scale)
    z = np.asarray(z)
    return np.tanh(0.5 / scale) * np.exp(-np.abs(z) / scale)


def discrete_laplace_cdf(z: npt.ArrayLike, scale: float) -> np.ndarray:
    """Cumulative distribution function ``P(Z <= z)``.

    With ``b = exp(-1 / scale)`` and ``k = floor(z)``: ``b**(-k) / (1 + b)``
    for ``k < 0`` and ``1 - b**(k + 1) / (1 + b)`` for ``k >= 0``.

    Parameters
    ----------
    z : array_like of float
        Points at which to evaluate (non-integers are floored).
    scale : float
        Scale ``t > 0``.

    Returns
    -------
    ndarray of float
        Probabilities, same shape as ``z``.

    Examples
    --------
    >>> float(discrete_laplace_cdf(-1, scale=2.0) + discrete_laplace_cdf(0, 2.0))
    1.0
    """
    scale = check_positive("scale", scale)
    k = np.floor(np.asarray(z, dtype=float))
    b = math.exp(-1.0 / scale)
    lower = np.exp(-np.abs(k) / scale) / (1.0 + b)  # P(Z <= k) for k < 0
    upper = 1.0 - np.exp(-(np.abs(k) + 1.0) / scale) / (1.0 + b)
    return np.where(k < 0, lower, upper)


def discrete_laplace_tail(k: npt.ArrayLike, scale: float) -> np.ndarray:
    """Two-sided tail ``P(|Z| >= k)``.

    Equal to ``2 * b**k / (1 + b)`` for ``k >= 1`` and ``1`` for ``k <= 0``,
    with ``b = exp(-1 / scale)``.

    Parameters
    ----------
    k : array_like of int
        Thresholds.
    scale : float
        Scale ``t > 0``.

    Returns
    -------
    ndarray of float
        Probabilities, same shape as ``k``.

    Examples
    --------
    >>> float(discrete_laplace_tail(0, scale=1.0))
    1.0
    """
    scale = check_positive("scale", scale)
    k = np.asarray(k, dtype=float)
    b = math.exp(-1.0 / scale)
    tail = 2.0 * np.exp(-np.maximum(k, 1.0) / scale) / (1.0 + b)
    return np.where(k <= 0, 1.0, tail)


def discrete_laplace_quantile_abs(prob: float, scale: float) -> int:
    """Smallest ``k >= 0`` with ``P(|Z| > k) <= 1 - prob``.

    ``[-k, k]`` then contains ``Z`` with probability at least ``prob``, e.g.
    ``prob=0.95`` gives the half-width of a 95% noise interval.

    Parameters
    ----------
    prob : float
        Coverage probability in ``[0, 1)``.
    scale : float
        Scale ``t > 0``.

    Returns
    -------
    int
        The half-width ``k``.

    Examples
    --------
    >>> discrete_laplace_quantile_abs(0.95, scale=10.0)
    30
    """
    scale = check_positive("scale", scale)
    prob = check_real("prob", prob)
    if not 0.0 <= prob < 1.0:
        raise InvalidParameterError(f"prob must be in [0, 1), got {prob!r}")
    alpha = 1.0 - prob
    b = math.exp(-1.0 / scale)
    # Solve 2 * b**(k + 1) / (1 + b) <= alpha for k, then correct the
    # floating-point guess so that it agrees with discrete_laplace_tail.
    target = math.log(alpha * (1.0 + b) / 2.0)
    k = max(0, math.ceil(-scale * target) - 1) if target < 0 else 0
    while k > 0 and discrete_laplace_tail(k, scale) <= alpha:
        k -= 1
    while discrete_laplace_tail(k + 1, scale) > alpha:
        k += 1
    return k


def discrete_laplace_variance(scale: float) -> float:
    """Variance ``2 * b / (1 - b)**2`` with ``b = exp(-1 / scale)``.

    Parameters
    ----------
    scale : float
        Scale ``t > 0``.

    Returns
    -------
    float
        The variance (the mean is 0).

    Examples
    --------
    >>> round(discrete_laplace_variance(100.0), 2)  # close to 2 * scale**2
    19999.83
    """
    scale = check_positive("scale", scale)
    b = math.exp(-1.0 / scale)
    return 2.0 * b / math.expm1(-1.0 / scale) ** 2
