"""Frozen copy of dpframe.mechanisms.discrete before issue 18 (the reference samplers).

Kept verbatim (Canonne, Kamath & Steinke Algorithms 1 and 2, the truncated samplers) so that
the tests can compare the new inverse-CDF samplers' laws with the old ones. Not imported
by dpframe.
"""

from __future__ import annotations

import math

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


def _geometric_exp_minus_one(count: int, rng: np.random.Generator) -> np.ndarray:
    """Number of ``Bernoulli(exp(-1))`` successes before the first failure.

    ``P(V = v) = (1 - exp(-1)) * exp(-v)``; one round per value of ``v``.
    """
    v = np.zeros(count, dtype=np.int64)
    pending = np.flatnonzero(_bernoulli_exp_minus_one(count, rng))
    while pending.size:
        v[pending] += 1
        pending = pending[_bernoulli_exp_minus_one(pending.size, rng)]
    return v


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
# Discrete Laplace -- Canonne, Kamath & Steinke, Algorithm 2
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


def _discrete_laplace_round(
    t: _IntParam, s: _IntParam, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One attempt of Algorithm 2 for ``count`` samples.

    Returns
    -------
    accepted : ndarray of bool, shape (count,)
        Whether the attempt produced a sample (no restart).
    z : ndarray of int64, shape (accepted.sum(),)
        The samples for the accepted positions, in order.
    """
    u = rng.integers(0, t, size=count, dtype=np.int64)
    d = _bernoulli_exp_fraction(u, t, rng)  # Bernoulli(exp(-U / t))
    u, t, s = u[d], _take(t, d), _take(s, d)
    v = _geometric_exp_minus_one(u.shape[0], rng)
    if v.size:
        _check_factor(int(v.max()))
    y = (u + t * v) // s  # t * v < 2**62
    negative = rng.integers(0, 2, size=y.shape[0], dtype=np.int64) == 1
    keep = ~(negative & (y == 0))  # B == 1 and Y == 0 means restart
    accepted = d.copy()
    accepted[d] = keep
    z = np.where(negative, -y, y)[keep]
    return accepted, z


def sample_discrete_laplace(
    num: npt.ArrayLike,
    den: npt.ArrayLike,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Draw exact samples of the discrete Laplace distribution.

    ``P(Z = z)`` is proportional to ``exp(-|z| * den / num)``, i.e. the scale
    is the rational number ``t = num / den``.  Implements Algorithm 2 of
    Canonne, Kamath & Steinke (2020) with only uniform integer draws, so no
    floating-point rounding enters the sampling path.  For ``epsilon``-DP on
    an integer-valued query with sensitivity ``Delta``, use
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
    A round is accepted with probability
    ``P(D = 1) * (1 + exp(-den / num)) / 2 >= (1 - exp(-1)) / 2``, so the
    expected number of rounds per sample is below 3.2 for every scale (about
    1.6 for large scales); each round uses a handful of integer draws.

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

    out = np.empty(math.prod(shape), dtype=np.int64)
    pending = np.arange(out.shape[0])
    while pending.size:
        accepted, z = _discrete_laplace_round(t, s, pending.size, rng)
        out[pending[accepted]] = z
        pending = pending[~accepted]
        t, s = _take(t, ~accepted), _take(s, ~accepted)
    return out.reshape(shape)


# ---------------------------------------------------------------------------
# Geometric and truncated discrete Laplace (exact, no unbounded rejection)
# ---------------------------------------------------------------------------


def _geometric(t: _IntParam, s: _IntParam, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` exact draws with ``P(Y = y)`` proportional to ``exp(-y s / t)``, ``y >= 0``.

    The first steps of Algorithm 2: ``U`` uniform on ``{0..t-1}`` kept with
    probability ``exp(-U/t)``, ``V ~ Geometric(1 - exp(-1))``, ``X = U + tV`` is
    geometric with ratio ``exp(-1/t)`` and ``floor(X / s)`` with ratio ``exp(-s/t)``.
    """
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:
        u = rng.integers(0, t, size=pending.size, dtype=np.int64)
        d = _bernoulli_exp_fraction(u, t, rng)
        v = _geometric_exp_minus_one(int(d.sum()), rng)
        if v.size:
            _check_factor(int(v.max()))
        out[pending[d]] = (u[d] + _take(t, d) * v) // _take(s, d)
        pending, t, s = pending[~d], _take(t, ~d), _take(s, ~d)
    return out


def sample_geometric(
    num: npt.ArrayLike,
    den: npt.ArrayLike,
    size: int | tuple[int, ...] | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Exact geometric draws: ``P(Y = y)`` proportional to ``exp(-y * den / num)``, ``y >= 0``.

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
    return _geometric(t, s, math.prod(shape), rng).reshape(shape)


def _truncated_geometric(
    k_max: np.ndarray, t: _IntParam, s: _IntParam, rng: np.random.Generator
) -> np.ndarray:
    """Exact draws with ``P(Y = y)`` proportional to ``exp(-y s / t)`` on ``{0..k_max}``.

    ``k_max`` is a float array of integer values or ``+inf``. Two exact strategies,
    each accepting with probability >= 1/2, chosen per sample:

    * ``exp(-(k_max + 1) s / t) <= 1/2``: a geometric draw, rejected if ``> k_max``;
    * otherwise (nearly flat): ``Y`` uniform on ``{0..k_max}``, kept with probability
      ``exp(-Y s / t)`` (>= ``exp(-k_max s / t) > 1/2``).

    The choice uses floating point, but only decides which exact method runs.
    """
    n = k_max.shape[0]
    out = np.empty(n, dtype=np.int64)
    tf = np.asarray(t, dtype=np.float64)
    sf = np.asarray(s, dtype=np.float64)
    flat = np.isfinite(k_max) & ((k_max + 1.0) * sf / tf < math.log(2.0))
    pending = np.arange(n)
    while pending.size:
        t_p, s_p, k_p = _take(t, pending), _take(s, pending), k_max[pending]
        f = flat[pending]
        y = np.empty(pending.size, dtype=np.int64)
        ok = np.empty(pending.size, dtype=bool)
        if (~f).any():
            g = _geometric(_take(t_p, ~f), _take(s_p, ~f), int((~f).sum()), rng)
            y[~f] = g
            ok[~f] = g <= k_p[~f]
        if f.any():
            kf = k_p[f].astype(np.int64)
            u = rng.integers(0, kf + 1, dtype=np.int64)
            y[f] = u
            ok[f] = _bernoulli_exp(u * _take(s_p, f), _take(t_p, f), rng)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


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
    ``[lower, upper]``. No rejection loop can run long: the interval may lie far
    from 0 (then ``Z`` is ``lower`` plus a truncated geometric, or ``upper`` minus
    one) and may be tiny relative to the scale (then a flat proposal is used).

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

    ``lo <= hi`` are float arrays of integer values (or infinities), ``t``, ``s`` the
    scale ``t / s`` as ints or int64 arrays of the same length.
    """
    out = np.empty(lo.shape[0], dtype=np.int64)

    right = lo >= 0  # interval within [0, inf): lower + truncated geometric
    if right.any():
        idx = np.flatnonzero(right)
        y = _truncated_geometric(hi[idx] - lo[idx], _take(t, idx), _take(s, idx), rng)
        out[idx] = lo[idx].astype(np.int64) + y
    left = (hi <= 0) & ~right  # within (-inf, 0]: upper - truncated geometric
    if left.any():
        idx = np.flatnonzero(left)
        y = _truncated_geometric(hi[idx] - lo[idx], _take(t, idx), _take(s, idx), rng)
        out[idx] = hi[idx].astype(np.int64) - y
    middle = ~right & ~left  # lower <= 0 <= upper
    if middle.all():
        out[:] = _two_sided(lo, hi, t, s, rng)
    elif middle.any():
        idx = np.flatnonzero(middle)
        out[idx] = _two_sided(lo[idx], hi[idx], _take(t, idx), _take(s, idx), rng)
    return out


def _two_sided(
    lo: np.ndarray, hi: np.ndarray, t: _IntParam, s: _IntParam, rng: np.random.Generator
) -> np.ndarray:
    """Truncated discrete Laplace on ``[lo, hi]`` with ``lo <= 0 <= hi``.

    Propose from the symmetric law on ``[-L, L]``, ``L = max(-lo, hi)``, and reject
    outside ``[lo, hi]``: the interval holds one whole side and 0, so it keeps at
    least half of that law's mass. The symmetric law is drawn as a discrete Laplace
    rejected outside ``[-L, L]`` when that tail is <= 1/2, else (nearly flat) as a
    uniform on ``[-L, L]`` kept with probability ``exp(-|z| s / t)`` (>= 1/4).
    """
    n = lo.shape[0]
    out = np.empty(n, dtype=np.int64)
    half_width = np.maximum(-lo, hi)
    tf = np.asarray(t, dtype=np.float64)
    sf = np.asarray(s, dtype=np.float64)
    beta = np.exp(-sf / tf)
    tail = 2.0 * np.exp(-(half_width + 1.0) * sf / tf) / (1.0 + beta)
    flat = np.isfinite(half_width) & (tail > 0.5)
    if not flat.any():  # the common case: a discrete Laplace draw, kept inside [lo, hi]
        pending = np.arange(n)
        t_p, s_p, lo_p, hi_p = t, s, lo, hi
        while pending.size:
            acc, z = _discrete_laplace_round(t_p, s_p, pending.size, rng)
            keep = (z >= lo_p[acc]) & (z <= hi_p[acc])
            done = np.flatnonzero(acc)[keep]
            out[pending[done]] = z[keep]
            left = np.ones(pending.size, dtype=bool)
            left[done] = False
            pending = pending[left]
            t_p, s_p, lo_p, hi_p = _take(t_p, left), _take(s_p, left), lo_p[left], hi_p[left]
        return out
    pending = np.arange(n)
    while pending.size:
        t_p, s_p, f = _take(t, pending), _take(s, pending), flat[pending]
        z = np.empty(pending.size, dtype=np.int64)
        ok = np.ones(pending.size, dtype=bool)
        if (~f).any():
            idx = np.flatnonzero(~f)
            acc, zz = _discrete_laplace_round(_take(t_p, idx), _take(s_p, idx), idx.size, rng)
            ok[idx[~acc]] = False
            z[idx[acc]] = zz
        if f.any():
            idx = np.flatnonzero(f)
            width = half_width[pending[idx]].astype(np.int64)
            zz = rng.integers(-width, width + 1, dtype=np.int64)
            z[idx] = zz
            ok[idx] = _bernoulli_exp(np.abs(zz) * _take(s_p, idx), _take(t_p, idx), rng)
        ok &= (z >= lo[pending]) & (z <= hi[pending])
        out[pending[ok]] = z[ok]
        pending = pending[~ok]
    return out


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
