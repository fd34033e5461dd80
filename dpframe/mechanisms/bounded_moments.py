"""Distribution functions and moments of the truncated and BIT Laplace laws.

A statistic ``s`` with public bounds ``[c0, c1]`` (either may be infinite: one-sided
bounds) is released with Laplace noise of scale ``lam > 0`` in one of two ways
(Liu 2019, "Statistical properties of sanitized results from differentially private
Laplace mechanism with univariate bounding constraints", Definition 2):

* **truncated**: ``s*`` ~ Laplace(s, lam) conditioned on ``c0 <= s* <= c1``;
* **BIT** (boundary-inflated truncation): ``s* = clip(Laplace(s, lam), c0, c1)``, with
  point masses ``P(s* = c0) = F(c0)`` and ``P(s* = c1) = 1 - F(c1)``, ``F`` the Laplace
  CDF. For ``s`` inside the bounds these are ``exp(-(s - c0)/lam)/2`` and
  ``exp(-(c1 - s)/lam)/2`` (the paper's eq. (5) prints ``1 - exp(...)/2`` for the
  upper mass: a typo).

Everything here is a pure numpy kernel: arguments broadcast against each other, and a
0-d result comes back as a numpy scalar. Nothing is drawn at random; the ``*_ppf``
functions are the inverse CDFs a sampler is tested against.

Notation and closed forms
-------------------------
Work in units of the scale: ``A = (s - c0)/lam``, ``B = (c1 - s)/lam`` (both ``>= 0``
when ``s`` is inside), ``d = (c1 - c0)/lam`` and ``t = B - A = (c0 + c1 - 2 s)/lam``.
The three functions ``P_k(x) = 1 - exp(-x) sum_{j<k} x^j/j!`` (k = 1, 2, 3; the
regularized lower incomplete gamma function) carry all the moments:

* truncated, ``s`` inside (Prop. 1, eq. (6), and Appendix B, re-derived)::

      Z     = (P_1(A) + P_1(B)) / 2                       (= 1 - p1 - p2)
      bias  = lam * sign(t) exp(-m) (m P_1(|t|) + P_2(|t|)) / (2 Z),  m = min(A, B)
      MSE   = lam**2 * (P_3(A) + P_3(B)) / Z
            = 2 lam**2 - [p1 ((s-c0)**2 + 2 lam (s-c0)) + p2 ((c1-s)**2 + 2 lam (c1-s))] / Z

  with ``p1 = exp(-A)/2``, ``p2 = exp(-B)/2``. The last line is the correct form of the
  boxed formula in the paper's Appendix B, which halves the bracket and adds an
  ``s**2 (p1 + p2)/Z`` term (see ``docs/papers.md``).
* BIT, ``s`` inside (eq. (7) and Appendix B)::

      bias  = lam (exp(-A) - exp(-B)) / 2 = lam * sign(t) exp(-m) P_1(|t|) / 2
      MSE   = lam**2 (P_2(A) + P_2(B))
            = 2 lam**2 (1 - p1 - p2) - 2 lam ((s - c0) p1 + (c1 - s) p2)

* ``s`` outside, say ``s < c0`` with ``a = (c0 - s)/lam``: the truncated law is
  ``c0 + lam V`` with ``V`` ~ Exp(1) truncated to ``[0, d]``, so
  ``E V = P_2(d)/P_1(d)``, ``E V**2 = 2 P_3(d)/P_1(d)``; BIT is ``c0 + lam W`` where
  ``W = min(Exp(1), d)`` with probability ``q = exp(-a)/2`` and 0 otherwise, so
  ``E W = q P_1(d)``, ``E W**2 = 2 q P_2(d)``. ``s > c1`` is the mirror image.

Numerical stability
-------------------
The printed forms of eqs (6), (7) subtract numbers close to 1 (or close to ``lam``) when
``lam >> c1 - c0``: eq. (6) loses about ``2 log10(lam/(c1 - c0))`` of its 16 digits, eq. (7)
about ``log10(lam/(c1 - c0))``, and the MSEs written as ``2 lam**2 - ...`` lose all of them
(the one-sided eqs (9), (10) have no such cancellation). The forms above never subtract
nearly equal quantities: ``P_2``, ``P_3`` are evaluated by their power series for ``x < 2``
(all terms positive) and as ``1 - Q_k`` beyond; the bias numerators use the exact identity
``(1+A) e^-A - (1+B) e^-B = e^-A (A P_1(B-A) + P_2(B-A))`` with ``B - A`` computed from
the bounds directly; the mean of an out-of-bounds ``s`` is anchored at the nearest bound;
a variance is ``E U**2 - (E U)**2`` of the standardized law relative to its anchor (``s``
inside, the nearest bound outside), which loses at most a factor ~4. CDFs and inverse CDFs
work with ``expm1``/``log1p``/``logaddexp`` and pick the tail (lower or upper) whose
probability is small, so they stay accurate for ``s`` far outside the bounds, ``s`` on a
bound, and ``lam`` tiny or huge relative to ``c1 - c0``. Valid whenever ``(c1-c0)/lam``
and ``lam**2`` are representable doubles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpframe.errors import InvalidParameterError

__all__ = [
    "bit_laplace_bias",
    "bit_laplace_cdf",
    "bit_laplace_masses",
    "bit_laplace_mean",
    "bit_laplace_mse",
    "bit_laplace_ppf",
    "bit_laplace_variance",
    "truncated_laplace_bias",
    "truncated_laplace_cdf",
    "truncated_laplace_mean",
    "truncated_laplace_mse",
    "truncated_laplace_pdf",
    "truncated_laplace_ppf",
    "truncated_laplace_variance",
]

#: An array of float64, or a numpy float64 scalar when every argument was a scalar.
FloatResult = npt.NDArray[np.float64] | np.float64
_F = npt.NDArray[np.float64]

#: ``P_k`` uses its power series below this argument (all terms positive; at x = 2 the
#: closed form ``1 - Q_k`` loses at most a factor ~2 to cancellation).
_SERIES_MAX_X = 2.0
#: Terms of that series: the omitted tail is below 1e-21 relative for x < 2.
_SERIES_TERMS = 25
#: Beyond this, ``exp(-x) * poly(x)`` underflows to 0 (and ``x**2`` must not overflow).
_BIG = 1.0e3


# ---------------------------------------------------------------------------------------
# special functions


def _p1(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``P_1(x) = 1 - exp(-x)`` for ``x >= 0`` (``inf -> 1``)."""
    return -np.expm1(-x)


def _q(k: int, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``Q_k(x) = exp(-x) sum_{j<k} x**j / j!`` for ``x >= 0`` (``inf -> 0``)."""
    xc = np.minimum(x, _BIG)
    poly = np.ones_like(xc)
    term = np.ones_like(xc)
    for j in range(1, k):
        term = term * xc / j
        poly = poly + term
    return np.exp(-xc) * poly


def _p(k: int, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``P_k(x) = 1 - Q_k(x)``, the regularized lower incomplete gamma ``P(k, x)``.

    Relative accuracy a few ulps for every ``x >= 0``: for small ``x`` the series
    ``exp(-x) x**k / k! * sum_n x**n / ((k+1)...(k+n))`` avoids the cancellation in
    ``1 - Q_k(x)``.
    """
    if k == 1:
        return _p1(x)
    xs = np.minimum(x, _SERIES_MAX_X)
    acc = np.ones_like(xs)
    for n in range(_SERIES_TERMS, 0, -1):
        acc = 1.0 + acc * xs / (k + n)
    series = np.exp(-xs) * xs**k / math.factorial(k) * acc
    return np.where(x < _SERIES_MAX_X, series, 1.0 - _q(k, x))


def _xexp(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``x exp(-x)`` for ``x >= 0``, 0 at ``inf``."""
    xc = np.minimum(x, _BIG)
    return xc * np.exp(-xc)


# ---------------------------------------------------------------------------------------
# parameters


@dataclass(frozen=True)
class _Std:
    """Broadcast parameters and the standardized quantities every function needs."""

    s: npt.NDArray[np.float64]
    lam: npt.NDArray[np.float64]
    c0: npt.NDArray[np.float64]
    c1: npt.NDArray[np.float64]
    below: npt.NDArray[np.bool_]  # s < c0
    above: npt.NDArray[np.bool_]  # s > c1
    unbounded: npt.NDArray[np.bool_]  # c0 = -inf and c1 = +inf: plain Laplace
    big_a: npt.NDArray[np.float64]  # (s - c0)/lam: >= 0 when s >= c0
    big_b: npt.NDArray[np.float64]  # (c1 - s)/lam: >= 0 when s <= c1
    d: npt.NDArray[np.float64]  # (c1 - c0)/lam
    t: npt.NDArray[np.float64]  # B - A = (c0 + c1 - 2 s)/lam

    @property
    def inside(self) -> npt.NDArray[np.bool_]:
        return ~(self.below | self.above)


def _as_float_array(name: str, value: Any) -> npt.NDArray[np.float64]:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"{name} must be a real number or an array of them, got {value!r}"
        ) from exc


def _standardize(
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    *first: tuple[str, npt.ArrayLike],
) -> tuple[list[npt.NDArray[np.float64]], _Std]:
    named = [*first, ("loc", loc), ("scale", scale), ("lower", lower), ("upper", upper)]
    arrays = [_as_float_array(name, value) for name, value in named]
    try:
        arrays = [np.array(a, dtype=np.float64) for a in np.broadcast_arrays(*arrays)]
    except ValueError as exc:
        shapes = ", ".join(f"{n}{a.shape}" for (n, _), a in zip(named, arrays, strict=True))
        raise InvalidParameterError(f"arguments do not broadcast together: {shapes}") from exc
    s, lam, c0, c1 = arrays[len(first) :]
    if not np.all(np.isfinite(s)):
        raise InvalidParameterError("loc (the statistic s) must be finite (no NaN or inf)")
    if not np.all(np.isfinite(lam) & (lam > 0)):
        raise InvalidParameterError("scale (lambda) must be finite and > 0")
    if not np.all(c0 < c1):
        raise InvalidParameterError(
            "lower must be < upper (NaN not allowed; use -inf/+inf for a one-sided bound)"
        )
    with np.errstate(all="ignore"):
        std = _Std(
            s=s,
            lam=lam,
            c0=c0,
            c1=c1,
            below=s < c0,
            above=s > c1,
            unbounded=np.isneginf(c0) & np.isposinf(c1),
            big_a=(s - c0) / lam,
            big_b=(c1 - s) / lam,
            d=(c1 - c0) / lam,
            t=((c1 - s) - (s - c0)) / lam,
        )
    return arrays[: len(first)], std


def _out(x: npt.NDArray[np.float64]) -> FloatResult:
    """Return a 0-d array as a numpy scalar, like a ufunc."""
    return x[()]


# ---------------------------------------------------------------------------------------
# moments (in units of the data; bias, variance and MSE each computed without cancellation)

_Moments = tuple[_F, _F, _F, _F]


def _moments(p: _Std, eu_in: _F, eu2_in: _F, e_out: _F, var_out: _F) -> _Moments:
    """(bias, variance, mse, mean) of a law from its standardized moments.

    ``eu_in``, ``eu2_in``: ``E U``, ``E U**2`` of ``(s* - s)/lam`` for ``s`` inside;
    ``e_out``, ``var_out``: mean and variance of ``|s* - b|/lam`` for ``s`` outside, ``b``
    the nearest bound (``s*`` lies on the interval's side of it).
    """
    lam = p.lam
    with np.errstate(all="ignore"):
        bias_in = lam * eu_in
        mse_in = lam**2 * eu2_in
        var_in = lam**2 * np.maximum(eu2_in - eu_in**2, 0.0)
        bias_below = (p.c0 - p.s) + lam * e_out
        bias_above = (p.c1 - p.s) - lam * e_out
        mean_out = np.where(p.below, p.c0 + lam * e_out, p.c1 - lam * e_out)
        var_out = lam**2 * var_out

        bias = np.where(p.below, bias_below, np.where(p.above, bias_above, bias_in))
        var = np.where(p.inside, var_in, var_out)
        mse = np.where(p.inside, mse_in, var_out + bias**2)
        # no bounds at all: the Laplace law itself
        bias = np.where(p.unbounded, 0.0, bias)
        var = np.where(p.unbounded, 2.0 * lam**2, var)
        mse = np.where(p.unbounded, 2.0 * lam**2, mse)
        # the mean is anchored at the nearest bound when s is outside (no cancellation)
        mean = np.clip(np.where(p.inside, p.s + bias, mean_out), p.c0, p.c1)
    return bias, var, mse, mean


def _truncated_moments(p: _Std) -> _Moments:
    """(bias, variance, mse, mean) of the truncated law, elementwise."""
    with np.errstate(all="ignore"):
        # s inside: mixture of the two sides of the Laplace density
        a_in, b_in = np.maximum(p.big_a, 0.0), np.maximum(p.big_b, 0.0)
        den = _p1(a_in) + _p1(b_in)  # 2 Z
        m = np.minimum(a_in, b_in)
        abs_t = np.abs(p.t)
        num = _xexp(m) * _p1(abs_t) + np.exp(-np.minimum(m, _BIG)) * _p(2, abs_t)
        eu_in = np.sign(p.t) * num / den
        eu2_in = 2.0 * (_p(3, a_in) + _p(3, b_in)) / den
        # s outside: c0 + lam V (below) or c1 - lam V (above), V ~ Exp(1) on [0, d]
        p1d = _p1(p.d)
        ev = _p(2, p.d) / p1d
        var_v = np.maximum(2.0 * _p(3, p.d) / p1d - ev**2, 0.0)
    return _moments(p, eu_in, eu2_in, ev, var_v)


def _bit_moments(p: _Std) -> _Moments:
    """(bias, variance, mse, mean) of the BIT law, elementwise."""
    with np.errstate(all="ignore"):
        # s inside: E clip(U) = (e^-A - e^-B)/2, E clip(U)^2 = P_2(A) + P_2(B)
        a_in, b_in = np.maximum(p.big_a, 0.0), np.maximum(p.big_b, 0.0)
        m = np.minimum(a_in, b_in)
        eu_in = np.sign(p.t) * 0.5 * np.exp(-np.minimum(m, _BIG)) * _p1(np.abs(p.t))
        eu2_in = _p(2, a_in) + _p(2, b_in)
        # s outside: nearest bound + lam W, W = min(Exp(1), d) w.p. q, else 0
        dist = np.where(p.below, -p.big_a, -p.big_b)  # (distance to the interval)/lam > 0
        q = 0.5 * np.exp(-np.minimum(dist, _BIG))
        ew = q * _p1(p.d)
        var_w = np.maximum(2.0 * q * _p(2, p.d) - ew**2, 0.0)
    return _moments(p, eu_in, eu2_in, ew, var_w)


class _Moment(Protocol):
    def __call__(
        self, loc: npt.ArrayLike, scale: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
    ) -> FloatResult: ...


_SHARED_PARAMETERS = """loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`."""


def _moment(
    name: str,
    law: Callable[[_Std], _Moments],
    which: int,
    summary: str,
    returns: str,
    examples: str,
    parameters: str = _SHARED_PARAMETERS,
) -> _Moment:
    """The public function ``name``: moment ``which`` (0 bias, 1 variance, 2 MSE, 3 mean)
    of ``law``, with its NumPy docstring."""

    def moment(
        loc: npt.ArrayLike, scale: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
    ) -> FloatResult:
        _, p = _standardize(loc, scale, lower, upper)
        return _out(law(p)[which])

    moment.__name__ = moment.__qualname__ = name
    moment.__doc__ = f"""{summary}

    Parameters
    ----------
    {parameters}

    Returns
    -------
    numpy.ndarray or numpy.float64
        {returns}

    Examples
    --------
    {examples.strip()}
    """
    return moment


truncated_laplace_bias = _moment(
    "truncated_laplace_bias",
    _truncated_moments,
    0,
    """Bias ``E[s*] - s`` of the truncated Laplace mechanism.

    For ``s`` inside the bounds this is Prop. 1, eq. (6) (eq. (9)/(10) for one-sided
    bounds) of Liu (2019), evaluated in the stable form given in the module docstring;
    for ``s`` outside, the bias of ``c0 + lam V``, ``V`` ~ Exp(1) truncated to ``[0, d]``.""",
    "The bias, broadcast over the arguments.",
    """
    >>> print(f"{truncated_laplace_bias(0.2, 0.1, 0.0, 1.0):.6f}")
    0.021616
    >>> print(f"{truncated_laplace_bias(0.5, 10.0, 0.0, 1.0):.1f}")  # symmetric: unbiased
    0.0""",
    parameters="""loc : array_like
        The statistic ``s`` (finite).
    scale : array_like
        The Laplace scale ``lam > 0``.
    lower, upper : array_like
        The public bounds ``c0 < c1``; ``-inf``/``+inf`` for a one-sided bound.""",
)
truncated_laplace_mean = _moment(
    "truncated_laplace_mean",
    _truncated_moments,
    3,
    "Mean ``E[s*]`` of the truncated Laplace mechanism (``mu_1`` of Prop. 1).",
    "The mean, always inside ``[lower, upper]``.",
    """
    >>> print(f"{truncated_laplace_mean(0.0, 1e6, 0.0, 1.0):.6f}")  # ~uniform on [0, 1]
    0.500000
    >>> print(f"{truncated_laplace_mean(0.0, 1.0, 0.0, float('inf')):.6f}")  # eq. (9)
    1.000000""",
)
truncated_laplace_variance = _moment(
    "truncated_laplace_variance",
    _truncated_moments,
    1,
    "Variance ``Var[s*]`` of the truncated Laplace mechanism.",
    "The variance.",
    """
    >>> print(f"{truncated_laplace_variance(0.5, 1e6, 0.0, 1.0):.6f}")  # ~1/12
    0.083333""",
)
truncated_laplace_mse = _moment(
    "truncated_laplace_mse",
    _truncated_moments,
    2,
    """Mean squared error ``E[(s* - s)**2]`` of the truncated Laplace mechanism.

    For ``s`` inside the bounds::

        MSE = 2 lam**2 - [p1 ((s-c0)**2 + 2 lam (s-c0)) + p2 ((c1-s)**2 + 2 lam (c1-s))]
                         / (1 - p1 - p2),
        p1 = exp(-(s-c0)/lam)/2,  p2 = exp(-(c1-s)/lam)/2,

    which is ``< 2 lam**2`` (Prop. 2). The boxed formula of the paper's Appendix B is
    wrong; this one is re-derived and checked by quadrature (``docs/papers.md``).""",
    "The MSE.",
    """
    >>> print(f"{truncated_laplace_mse(0.0, 1.0, 0.0, 1.0):.6f}")
    0.254070
    >>> print(f"{truncated_laplace_mse(0.0, 1.0, -float('inf'), float('inf')):.1f}")
    2.0""",
)
bit_laplace_bias = _moment(
    "bit_laplace_bias",
    _bit_moments,
    0,
    """Bias ``E[s*] - s`` of the BIT (boundary-inflated truncation) Laplace mechanism.

    For ``s`` inside the bounds this is eq. (7) (eqs (9), (10) one-sided),
    ``lam (exp(-(s-c0)/lam) - exp(-(c1-s)/lam)) / 2``, evaluated with ``expm1``.""",
    "The bias.",
    """
    >>> print(f"{bit_laplace_bias(0.2, 0.1, 0.0, 1.0):.6f}")
    0.006750""",
)
bit_laplace_mean = _moment(
    "bit_laplace_mean",
    _bit_moments,
    3,
    "Mean ``E[s*]`` of the BIT Laplace mechanism (``mu_2`` of Prop. 1).",
    "The mean, always inside ``[lower, upper]``.",
    """
    >>> print(f"{bit_laplace_mean(0.0, 1e6, 0.0, 1.0):.6f}")  # ~Bernoulli(1/2) on {0, 1}
    0.500000""",
)
bit_laplace_variance = _moment(
    "bit_laplace_variance",
    _bit_moments,
    1,
    "Variance ``Var[s*]`` of the BIT Laplace mechanism.",
    "The variance.",
    """
    >>> print(f"{bit_laplace_variance(0.5, 1e6, 0.0, 1.0):.6f}")  # ~1/4
    0.250000""",
)
bit_laplace_mse = _moment(
    "bit_laplace_mse",
    _bit_moments,
    2,
    """Mean squared error ``E[(s* - s)**2]`` of the BIT Laplace mechanism.

    For ``s`` inside: ``2 lam**2 (1 - p1 - p2) - 2 lam ((s-c0) p1 + (c1-s) p2)`` (the
    paper's Appendix B, which is right), evaluated as
    ``lam**2 (P_2((s-c0)/lam) + P_2((c1-s)/lam))``.""",
    "The MSE.",
    """
    >>> print(f"{bit_laplace_mse(0.0, 1.0, 0.0, 1.0):.6f}")
    0.264241""",
)


# ---------------------------------------------------------------------------------------
# distribution functions


def truncated_laplace_cdf(
    x: npt.ArrayLike,
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
) -> FloatResult:
    """CDF ``P(s* <= x)`` of the truncated Laplace law.

    Computed as a ratio of positive quantities (``expm1`` forms), so small
    probabilities keep their relative accuracy, whatever the position of ``s``.

    Parameters
    ----------
    x : array_like
        Where to evaluate (NaN gives NaN).
    loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Values in ``[0, 1]``: 0 below ``lower``, 1 from ``upper`` on.

    Examples
    --------
    >>> truncated_laplace_cdf([-1.0, 0.0, 0.5, 1.0], 0.0, 1.0, 0.0, 1.0).round(6)
    array([0.      , 0.      , 0.622459, 1.      ])
    """
    (xv,), p = _standardize(loc, scale, lower, upper, ("x", x))
    with np.errstate(all="ignore"):
        y0 = _p1((xv - p.c0) / p.lam)  # P_1((x - c0)/lam)
        u = (xv - p.s) / p.lam
        a_in, b_in = np.maximum(p.big_a, 0.0), np.maximum(p.big_b, 0.0)
        den = _p1(a_in) + _p1(b_in)
        f_in = np.where(
            u <= 0, np.exp(np.minimum(u, 0.0)) * y0, _p1(a_in) + _p1(np.maximum(u, 0.0))
        )
        f_in = f_in / den
        p1d = _p1(p.d)
        f_below = y0 / p1d
        f_above = np.exp(-(p.c1 - xv) / p.lam) * y0 / p1d
        f_lap = _laplace_cdf(u)
        f = np.where(p.below, f_below, np.where(p.above, f_above, f_in))
        f = np.where(p.unbounded, f_lap, f)
        f = np.where(xv < p.c0, 0.0, np.where(xv >= p.c1, 1.0, np.clip(f, 0.0, 1.0)))
        f = np.where(np.isneginf(xv), 0.0, f)  # also when lower = -inf
        f = np.where(np.isnan(xv), np.nan, f)
    return _out(f)


def truncated_laplace_pdf(
    x: npt.ArrayLike,
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
) -> FloatResult:
    """Density of the truncated Laplace law (eq. (4), generalised to ``s`` outside).

    Parameters
    ----------
    x : array_like
        Where to evaluate (NaN gives NaN).
    loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        The density on the closed interval ``[lower, upper]``, 0 outside.

    Examples
    --------
    >>> truncated_laplace_pdf([0.0, 0.5, 2.0], 0.5, 1e6, 0.0, 1.0).round(6)
    array([1., 1., 0.])
    """
    (xv,), p = _standardize(loc, scale, lower, upper, ("x", x))
    with np.errstate(all="ignore"):
        u = (xv - p.s) / p.lam
        a_in, b_in = np.maximum(p.big_a, 0.0), np.maximum(p.big_b, 0.0)
        den = _p1(a_in) + _p1(b_in)
        f_in = np.exp(-np.abs(u)) / (p.lam * den)
        p1d = _p1(p.d)
        f_below = np.exp(-(xv - p.c0) / p.lam) / (p.lam * p1d)
        f_above = np.exp(-(p.c1 - xv) / p.lam) / (p.lam * p1d)
        f = np.where(p.below, f_below, np.where(p.above, f_above, f_in))
        f = np.where(p.unbounded, np.exp(-np.abs(u)) / (2.0 * p.lam), f)
        f = np.where((xv < p.c0) | (xv > p.c1), 0.0, f)
        f = np.where(np.isnan(xv), np.nan, f)
    return _out(f)


def _check_q(q: npt.NDArray[np.float64]) -> None:
    if not np.all((q >= 0.0) & (q <= 1.0)):
        raise InvalidParameterError("q (a probability) must be in [0, 1], with no NaN")


def _texp_ppf(
    pr: npt.NDArray[np.float64], pr_c: npt.NDArray[np.float64], d: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Quantile of Exp(1) truncated to ``[0, d]`` at ``pr`` (``pr_c = 1 - pr`` exactly).

    Uses the lower tail when ``pr <= 1/2``, the upper tail otherwise, so neither
    probability is ever rounded by forming ``1 - pr``.
    """
    p1d = _p1(d)
    lower = -np.log1p(-pr * p1d)
    upper = -np.logaddexp(-d, np.log(pr_c * p1d))
    return np.where(pr <= 0.5, lower, np.clip(upper, 0.0, None))


def truncated_laplace_ppf(
    q: npt.ArrayLike,
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
) -> FloatResult:
    """Inverse CDF of the truncated Laplace law (no rejection, no loop).

    Works in log space (``log1p``/``logaddexp``) on the tail whose probability is the
    smaller one, so it is accurate for ``s`` on a bound, ``s`` far outside the bounds,
    and ``lam`` tiny or huge relative to ``upper - lower``. This is the reference a
    sampler of the truncated mechanism is tested against: ``ppf(U)``, ``U`` ~ Unif(0, 1),
    has the truncated law.

    Parameters
    ----------
    q : array_like
        Probabilities in ``[0, 1]`` (anything else, NaN included, raises).
    loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Quantiles in ``[lower, upper]`` (``q = 0`` gives ``lower``, ``q = 1`` gives
        ``upper``).

    Raises
    ------
    InvalidParameterError
        If ``q`` is outside ``[0, 1]`` or a parameter is invalid.

    Examples
    --------
    >>> truncated_laplace_ppf([0.0, 0.622459, 1.0], 0.0, 1.0, 0.0, 1.0).round(6)
    array([0. , 0.5, 1. ])
    """
    (qv,), p = _standardize(loc, scale, lower, upper, ("q", q))
    _check_q(qv)
    qc = 1.0 - qv
    with np.errstate(all="ignore"):
        # inside: split the mass at s; invert the lower or upper part
        a_in, b_in = np.maximum(p.big_a, 0.0), np.maximum(p.big_b, 0.0)
        p1a = _p1(a_in)
        den = p1a + _p1(b_in)
        # (each side: the tail form for the tail probability that is the smaller one, the
        # form in the mass between the quantile and s otherwise; 1 - q is never formed
        # from a small q)
        low = qv * den <= p1a
        lo_tail = np.logaddexp(-a_in, np.log(qv * den))  # log(e^-A + q den)
        lo_mid = np.log1p(-np.maximum(qc * den - _p1(b_in), 0.0))  # mass in [u, 0]
        hi_tail = -np.logaddexp(-b_in, np.log(qc * den))
        hi_mid = -np.log1p(-np.maximum(qv * den - p1a, 0.0))  # mass in [0, u]
        u_low = np.where(qv <= 0.5, lo_tail, lo_mid)
        u_high = np.where(qv > 0.5, hi_tail, hi_mid)
        x_in = p.s + p.lam * np.where(low, np.minimum(u_low, 0.0), np.maximum(u_high, 0.0))
        # outside: c0 + lam V or c1 - lam V, V ~ Exp(1) truncated to [0, d]
        x_below = p.c0 + p.lam * _texp_ppf(qv, qc, p.d)
        x_above = p.c1 - p.lam * _texp_ppf(qc, qv, p.d)
        x_lap = p.s + p.lam * _laplace_ppf_std(qv, qc)
        x = np.where(p.below, x_below, np.where(p.above, x_above, x_in))
        x = np.where(p.unbounded, x_lap, x)
        x = np.where(qv == 0.0, p.c0, np.where(qv == 1.0, p.c1, x))
    return _out(np.clip(x, p.c0, p.c1))


def _laplace_cdf(u: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Standard Laplace CDF."""
    with np.errstate(all="ignore"):
        return np.where(
            u <= 0, 0.5 * np.exp(np.minimum(u, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(u, 0.0))
        )


def _laplace_ppf_std(
    q: npt.NDArray[np.float64], qc: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Standard Laplace quantile from ``q`` and ``qc = 1 - q``."""
    with np.errstate(all="ignore"):
        return np.where(q <= 0.5, np.log(2.0 * q), -np.log(2.0 * qc))


def bit_laplace_cdf(
    x: npt.ArrayLike,
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
) -> FloatResult:
    """CDF ``P(s* <= x)`` of the BIT Laplace law.

    0 below ``lower``; the Laplace CDF on ``[lower, upper)`` (so the jump at ``lower`` is
    the mass ``F(lower)``); 1 from ``upper`` on (a jump of ``1 - F(upper)``).

    Parameters
    ----------
    x : array_like
        Where to evaluate (NaN gives NaN).
    loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Values in ``[0, 1]``.

    Examples
    --------
    >>> bit_laplace_cdf([-0.1, 0.0, 0.5, 1.0], 0.0, 1.0, 0.0, 1.0).round(6)
    array([0.      , 0.5     , 0.696735, 1.      ])
    """
    (xv,), p = _standardize(loc, scale, lower, upper, ("x", x))
    with np.errstate(all="ignore"):
        f = _laplace_cdf((xv - p.s) / p.lam)
        f = np.where(xv < p.c0, 0.0, np.where(xv >= p.c1, 1.0, f))
        f = np.where(np.isnan(xv), np.nan, f)
    return _out(f)


def bit_laplace_ppf(
    q: npt.ArrayLike,
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
) -> FloatResult:
    """Generalised inverse ``inf{x : F(x) >= q}`` of the BIT CDF.

    ``clip(s + lam * L(q), lower, upper)`` with ``L`` the standard Laplace quantile:
    ``ppf(U)``, ``U`` ~ Unif(0, 1), has the BIT law (``q = 0`` gives ``lower``).

    Parameters
    ----------
    q : array_like
        Probabilities in ``[0, 1]`` (anything else, NaN included, raises).
    loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Quantiles in ``[lower, upper]``.

    Examples
    --------
    >>> bit_laplace_ppf([0.2, 0.5, 0.7, 0.9], 0.0, 1.0, 0.0, 1.0).round(6)
    array([0.      , 0.      , 0.510826, 1.      ])
    """
    (qv,), p = _standardize(loc, scale, lower, upper, ("q", q))
    _check_q(qv)
    with np.errstate(all="ignore"):
        x = p.s + p.lam * _laplace_ppf_std(qv, 1.0 - qv)
        x = np.where(qv == 0.0, p.c0, x)
    return _out(np.clip(x, p.c0, p.c1))


def bit_laplace_masses(
    loc: npt.ArrayLike, scale: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
) -> tuple[FloatResult, FloatResult]:
    """The point masses ``(P(s* = lower), P(s* = upper))`` of the BIT law.

    For ``s`` inside: ``exp(-(s - c0)/lam)/2`` and ``exp(-(c1 - s)/lam)/2`` (eq. (5)
    with its typo corrected); for ``s`` outside, one of them exceeds 1/2.

    Parameters
    ----------
    loc, scale, lower, upper : array_like
        As in :func:`truncated_laplace_bias`.

    Returns
    -------
    tuple of numpy.ndarray or numpy.float64
        The masses at ``lower`` and at ``upper`` (0 at an infinite bound).

    Examples
    --------
    >>> m0, m1 = bit_laplace_masses(0.0, 1.0, 0.0, 1.0)
    >>> print(f"{m0:.6f} {m1:.6f}")
    0.500000 0.183940
    """
    _, p = _standardize(loc, scale, lower, upper)
    with np.errstate(all="ignore"):
        # P(L <= c0) and P(L >= c1), each from the tail that is small
        m0 = np.where(
            p.big_a >= 0,
            0.5 * np.exp(-np.maximum(p.big_a, 0.0)),
            1.0 - 0.5 * np.exp(np.minimum(p.big_a, 0.0)),
        )
        m1 = np.where(
            p.big_b >= 0,
            0.5 * np.exp(-np.maximum(p.big_b, 0.0)),
            1.0 - 0.5 * np.exp(np.minimum(p.big_b, 0.0)),
        )
    return _out(m0), _out(m1)
