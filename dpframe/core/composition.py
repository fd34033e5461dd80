"""Tight composition of many releases by their privacy-loss distributions (PLDs).

A release is described by plain data (a mapping of a mechanism name to its parameters:
what a ledger entry can store and hash). :func:`epsilon_for_delta` and
:func:`delta_for_epsilon` compose a sequence of them and answer with a *pessimistic*
estimate: never below the true privacy profile of the composition, and above it by at
most the error bound stated below.

The releases
------------
===================== ===================================== ============================
``mechanism``          fields                                its privacy loss
===================== ===================================== ============================
``"laplace"``          ``epsilon`` (= sensitivity / scale)   the Laplace PLD
``"discrete_laplace"`` ``epsilon``, optional ``steps``       the discrete Laplace PLD with
                       (the l1 sensitivity in grid steps,    ``steps`` (an integer); without
                       an int >= 1)                          it the generic pure PLD (its
                                                             worst case, ``steps=1``)
``"pure"``             ``epsilon``                           any pure epsilon-DP release:
                                                             the randomized-response pair
``"gaussian"``         ``sensitivity``, ``sigma`` (l2)       the Gaussian PLD
``"discrete_gaussian"`` ``sensitivity``, ``sigma``           rho-zCDP, ``rho = Δ²/(2σ²)``
``"approx"``           ``epsilon``, ``delta``                any (epsilon, delta)-DP release
``"zcdp"``             ``rho`` (``{"rho": r}`` alone too)    any rho-zCDP release
===================== ===================================== ============================

Each of ``laplace``, ``discrete_laplace``, ``pure``, ``gaussian`` and ``approx`` is
represented by a *dominating pair* ``(P, Q)`` of output laws (Zhu, Dong & Wang 2022,
"Optimal Accounting of Differential Privacy via Characteristic Function", AISTATS,
arXiv:2106.08567): the mechanism's hockey-stick divergence on any neighbouring inputs is
at most ``H_{e^eps}(P || Q)``, and the adaptive composition of mechanisms is dominated by
the product of their pairs (their Theorem 10). Every pair used here is symmetric (``(Q,
P)`` is ``(P, Q)`` mirrored), so one direction covers both. The pairs: Laplace ``Lap(0,
b)`` vs ``Lap(Δ, b)``; the discrete Laplace on the integers with ``t = steps / epsilon``;
the Gaussian ``N(0, σ²)`` vs ``N(Δ, σ²)`` (a product of Gaussians is one Gaussian with
``(Δ/σ)² = Σ (Δ_i/σ_i)²``, so every Gaussian entry is merged into one, exactly); for a
pure epsilon-DP release the randomized-response pair, and for an (epsilon, delta)-DP
release the pair of Kairouz, Oh & Viswanath (2015, "The Composition Theorem for
Differential Privacy", Theorem 4.1 / Murtagh & Vadhan 2016), which dominate every such
mechanism: under ``P`` the privacy loss is ``+inf`` with probability ``delta``,
``epsilon`` with ``(1 - delta) e^eps / (1 + e^eps)`` and ``-epsilon`` otherwise.

With ``L = log(P/Q)`` drawn under ``P``, the privacy profile of the composition is

.. math::

    \\delta(\\varepsilon) = \\Pr[L = \\infty] + E[(1 - e^{\\varepsilon - L})_+],
    \\qquad L = \\textstyle\\sum_i L_i,

with independent ``L_i``. ``zcdp`` and ``discrete_gaussian`` entries (for which no
dominating pair is known here; the discrete Gaussian's is that of Canonne, Kamath &
Steinke 2020, Theorem 4: ``Δ²/(2σ²)``-zCDP, as the continuous Gaussian) are summed into
one ``rho`` and joined to the PLD part by basic composition at the best split of epsilon
(or delta) found on a grid; the whole is also bounded by the zCDP conversion of the total
``rho`` (:func:`dpframe.core.zcdp.epsilon_of_rho`) when every entry has a ``rho`` (pure
releases at ``epsilon²/2``), and by basic composition (sums of the decimals the epsilons
and deltas print as) when no entry is Gaussian or zCDP: the smallest of the sound bounds
is returned, so the answer is never above basic composition nor the zCDP accountant's.

The computation and its error
-----------------------------
Each PLD is put on the grid ``{j h}`` (``h`` a power of two, the *discretisation
interval*) by rounding every loss *up* to the next grid point, ``L_i' = ceil(L_i/h) h
>= L_i`` (a coupling: ``Σ L_i' >= Σ L_i`` pointwise). Since ``(1 - e^{eps - L})_+``
increases with ``L``, the profile of the rounded PLD is at least the true one; since
``Σ L_i' <= Σ L_i + k h`` for ``k`` rounded PLDs (each Gaussian entry merged into one
counts once; ``k`` identical releases count ``k``), it is at most the true profile at
``eps - k h``. The rounded PLDs are convolved exactly in maths (FFT in floats; identical
releases by repeated squaring). Tails of mass at most ``1e-15`` are moved *up* (the
lower tail into the lowest grid point kept, the upper tail to ``+inf``): that can only
raise the profile, by at most ``1e-15`` per move. The float error of every step is
bounded in l1 norm and added to delta: the mass computed from a CDF (8 unit roundoffs a
grid point), each FFT convolution (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., Theorem 24.2: ``||Δz||_1 <= sqrt(N) (ζ (||a||_2 ||b||_1 + 2
||a||_1 ||b||_2) + 3u ||a||_1 ||b||_2)``, ``ζ = 7 u log2 N``, for an FFT of size ``N``
with accurate twiddle factors), the final sum. The bound grows with the number of
releases (measured: about ``3e-10`` for 100 Laplace releases, ``1e-9`` to ``4e-9`` for
1000), so a delta much below ``1e-7`` loses relatively more to it. Hence, for the PLD part,

* ``delta_for_epsilon``: ``delta_true(eps) <= result <= delta_true(eps - k h) + a``,
* ``epsilon_for_delta``: ``eps_true(delta) <= result <= eps_true(delta - a) + k h``
  (up to the bisection's ``1e-12`` relative),

with ``a`` the float and tail allowance. ``h`` is chosen so that ``k h <= tolerance *
eps`` (``tolerance`` defaults to ``1e-3``: an over-estimate of epsilon of at most 0.1 %),
unless that would need more than ``2**22`` grid points (then ``h`` is the smallest
power of two within that size, and the bound ``k h`` holds with it). Releases whose
losses may sum beyond ``2**22`` in size (whose grid points a float could not hold
exactly) are not put on a grid: basic composition and zCDP bound them.

Google's ``dp_accounting`` (0.6.0, its PLD accountant) would do this too, but it pins
``attrs<24`` (installing it downgrades this environment's attrs 26.1 to 23.2, and would
conflict with any package needing a newer attrs) and pulls in ``dm-tree``, a compiled
extension; it is not a dependency. The tests check this module against closed forms and
independent computations instead.

Examples
--------
>>> from dpframe.core.composition import delta_for_epsilon, epsilon_for_delta
>>> releases = [{"mechanism": "laplace", "epsilon": 0.1}] * 100
>>> eps = epsilon_for_delta(releases, 1e-6)
>>> 4.0 < eps < 10.0  # basic composition: 10.0
True
>>> delta_for_epsilon(releases, 10.0)
0.0
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.core.budget import exact, exact_sum
from dpframe.core.constraints import PRIVACY_MIN, check
from dpframe.core.zcdp import delta_of_rho, epsilon_of_rho, rho_of_epsilon
from dpframe.errors import InvalidParameterError

__all__ = ["delta_for_epsilon", "epsilon_for_delta"]

#: The unit roundoff of float64.
_U = 2.0**-53
#: The largest float, exactly (a sum of rhos above it is ``inf``).
_LARGEST = Fraction(sys.float_info.max)
#: The most mass a tail truncation moves (up: into the lowest point kept, or to +inf):
#: above the float noise of an FFT convolution, which would otherwise keep wide tails.
_TAIL = 1e-15
#: How far out a Gaussian PLD is kept, in standard deviations (``Φ(-9.5) < 1e-20``).
_GAUSS_Z = 9.5
#: The default relative over-estimate of epsilon allowed to the discretisation.
_TOLERANCE = 1e-3
#: The coarsest discretisation interval (of the first, sizing pass).
_COARSE = 2.0**-8
#: The finest one.
_FINEST = 2.0**-30
#: The most grid points the composed PLD may need.
_MAX_POINTS = 2**22
#: The largest privacy loss put on a grid: on the finest one its index is below ``2**53``,
#: so every grid point is a float exactly (a larger sum would be rounded, possibly down);
#: a ledger whose losses may sum beyond it is bounded by basic composition and zCDP only.
_MAX_LOSS = 2.0**22
#: Each mechanism's fields: required, then optional.
_FIELDS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "laplace": (("epsilon",), ()),
    "discrete_laplace": (("epsilon",), ("steps",)),
    "pure": (("epsilon",), ()),
    "gaussian": (("sensitivity", "sigma"), ()),
    "discrete_gaussian": (("sensitivity", "sigma"), ()),
    "approx": (("epsilon", "delta"), ()),
    "zcdp": (("rho",), ()),
}
#: Each field's constraint (``dpframe.core.constraints.PARAMETERS``).
_CONSTRAINTS = {
    "epsilon": "epsilon",
    "delta": "delta",
    "sensitivity": "sensitivity",
    "sigma": "sigma",
    "rho": "rho",
    "steps": "sensitivity_steps",
}

_Entry = tuple[tuple[str, Any], ...]


# -- the releases ---------------------------------------------------------------------------


def _entries(releases: Any) -> list[_Entry]:
    """Each release checked, as a sorted tuple of its fields (hashable, comparable)."""
    if isinstance(releases, str | bytes | Mapping) or not isinstance(releases, Sequence):
        raise InvalidParameterError(
            f"releases must be a list of releases (mappings such as "
            f"{{'mechanism': 'laplace', 'epsilon': 0.5}}), got {type(releases).__name__}"
        )
    out = []
    for i, release in enumerate(releases):
        where = f"releases[{i}]"
        if not isinstance(release, Mapping):
            raise InvalidParameterError(
                f"{where} must be a mapping such as {{'mechanism': 'laplace', 'epsilon': 0.5}}, "
                f"got {type(release).__name__}"
            )
        if "mechanism" not in release and "rho" in release:
            release = {"mechanism": "zcdp", **release}  # ``{"rho": r}``: a zCDP entry
        if "mechanism" not in release:
            raise InvalidParameterError(
                f"{where} has no 'mechanism'; name one of {', '.join(map(repr, _FIELDS))}"
            )
        mechanism = check("composed_mechanism", release["mechanism"], name=f"{where}['mechanism']")
        required, optional = _FIELDS[mechanism]
        missing = [f for f in required if f not in release]
        unknown = sorted(set(release) - {"mechanism", *required, *optional}, key=str)
        if missing or unknown:
            raise InvalidParameterError(
                f"{where} ({mechanism!r}) needs the fields {', '.join(required)}"
                + (f" (optional: {', '.join(optional)})" if optional else "")
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; remove {', '.join(map(repr, unknown))}" if unknown else "")
            )
        fields = {"mechanism": mechanism}
        for f in (*required, *optional):
            if f in release:
                fields[f] = check(_CONSTRAINTS[f], release[f], name=f"{where}[{f!r}]")
        out.append(tuple(sorted(fields.items())))
    return out


def _rho(entry: Mapping[str, Any]) -> Fraction | None:
    """The zCDP cost of a release, exactly, if it has one (an (epsilon, delta) release has
    none): ``epsilon²/2`` of the decimal epsilon (as the zCDP accountant charges a pure
    release), ``Δ²/(2σ²)`` of the floats, the decimal rho."""
    m = entry["mechanism"]
    if m in _PURE:
        return rho_of_epsilon(entry["epsilon"])
    if m in _GAUSSIAN or m == "discrete_gaussian":
        return Fraction(entry["sensitivity"]) ** 2 / (2 * Fraction(entry["sigma"]) ** 2)
    if m == "zcdp":
        return exact(entry["rho"])
    return None


# -- privacy-loss distributions on the grid -------------------------------------------------


@dataclass(frozen=True)
class _Pld:
    """A PLD on the grid: mass ``masses[j]`` at loss ``(start + j) * h``, ``infinity`` at
    ``+inf``; ``error`` bounds the l1 distance of (masses, infinity) to the exact rounded
    PLD (float error only)."""

    h: float
    start: int
    masses: np.ndarray
    infinity: float
    error: float


def _index(x: float, h: float) -> int:
    """``ceil(x / h)``; exact (``h`` is a power of two)."""
    return math.ceil(x / h)


def _from_cdf(
    cdf: Callable[[np.ndarray], np.ndarray], lower: float, upper: float, above: float, h: float
) -> _Pld:
    """The PLD whose finite losses have CDF ``cdf``, rounded up: every loss at most
    ``lower`` goes to ``ceil(lower/h) h``, the mass ``above`` the grid point of ``upper``
    to ``+inf``."""
    lo, hi = _index(lower, h), _index(upper, h)
    cum = cdf(np.arange(lo, hi + 1, dtype=np.float64) * h)
    masses = np.diff(cum, prepend=0.0)
    np.maximum(masses, 0.0, out=masses)
    return _trim(_Pld(h, lo, masses, above, 8.0 * _U * (masses.size + 2)))


def _atoms(epsilon: float, delta: float, h: float) -> _Pld:
    """The randomized-response pair (``delta = 0``) or Kairouz et al.'s (epsilon, delta)
    pair: ``epsilon`` w.p. ``(1 - delta) / (1 + e^-eps)``, ``-epsilon`` w.p. ``(1 - delta)
    / (1 + e^eps)``, ``+inf`` w.p. ``delta``."""
    tail = math.exp(-epsilon)  # e^-eps (e^eps overflows above 709.78)
    up = (1.0 - delta) / (1.0 + tail)
    down = (1.0 - delta) * tail / (1.0 + tail)
    hi = _index(epsilon, h)
    if down <= _TAIL:  # a tail: moved up onto the other atom
        return _Pld(h, hi, np.array([up + down]), delta, 8.0 * _U)
    lo = _index(-epsilon, h)
    masses = np.zeros(hi - lo + 1)
    masses[0], masses[-1] = down, up
    return _Pld(h, lo, masses, delta, 8.0 * _U)


def _laplace(epsilon: float, h: float) -> _Pld:
    """Laplace: under ``P = Lap(0, b)``, ``L = (|o - Δ| - |o|)/b`` is ``epsilon`` for ``o <=
    0``, ``-epsilon`` for ``o >= Δ``, linear between: ``P(L <= x) = e^{-(eps - x)/2} / 2``
    on ``[-eps, eps)``. A grid point's mass, ``e^{-(eps - x)/2} (1 - e^{-h/2}) / 2``
    inside, is computed to a few units of roundoff relative to itself."""
    lo, hi = _index(_lowest(epsilon), h), _index(epsilon, h)
    x = np.arange(lo, hi + 1, dtype=np.float64) * h  # x[-1] >= eps > x[-2]

    def below(y: np.ndarray | float) -> Any:  # P(L <= y), -eps <= y < eps
        return 0.5 * np.exp(-(epsilon - y) / 2.0)

    masses = below(x) * -math.expm1(-h / 2.0)
    masses[0] = below(x[0])  # everything at most x[0] (x[0] >= -eps)
    masses[-1] = 1.0 - below(x[-2]) if x.size > 1 else 1.0
    return _trim(_Pld(h, lo, masses, 0.0, 8.0 * _U))


def _discrete_laplace(epsilon: float, steps: int, h: float) -> _Pld:
    """The discrete Laplace ``P(o) ∝ r^|o|`` (``r = e^{-eps/steps}``) against its shift by
    ``steps``: ``L = eps (steps - 2o) / steps`` clipped to ``[-eps, eps]``, so ``L <= x`` iff
    ``o >= m(x) = ceil(steps (eps - x) / (2 eps))``, of mass ``r^m / (1 + r)`` (``m >= 1``).
    ``m`` is taken a hair larger than computed, which can only move mass up; a grid
    point's mass ``r^m (1 - r^{m' - m}) / (1 + r)`` is accurate relative to itself."""
    lo, hi = _index(_lowest(epsilon), h), _index(epsilon, h)
    x = np.arange(lo, hi + 1, dtype=np.float64) * h
    t = steps * (epsilon - np.minimum(x, epsilon)) / (2.0 * epsilon)
    m = np.maximum(np.ceil(t * (1.0 + 8.0 * _U) + 4.0 * _U), 1.0)
    m[-1] = 0.0  # x[-1] >= eps: every loss
    r1 = 1.0 + math.exp(-epsilon / steps)
    masses = np.exp(-epsilon * (m / steps)) / r1
    masses[1:] *= -np.expm1(-epsilon * ((m[:-1] - m[1:]) / steps))
    masses[-1] = 1.0 - math.exp(-epsilon * (m[-2] / steps)) / r1 if x.size > 1 else 1.0
    return _trim(_Pld(h, lo, masses, 0.0, 8.0 * _U))


def _lowest(epsilon: float) -> float:
    """Where a (discrete) Laplace PLD starts: ``-eps``, or where the mass below is at most
    :data:`_TAIL` (``e^{-(eps - x)/2} / 2 <= _TAIL``), moved up into it."""
    return max(-epsilon, epsilon - 2.0 * math.log(1.0 / (2.0 * _TAIL)))


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * np.frompyfunc(math.erfc, 1, 1)(-z / math.sqrt(2.0)).astype(np.float64)


def _gaussian(mu: float, h: float) -> _Pld:
    """Gaussian: ``L ~ N(mu, 2 mu)`` with ``mu = (Δ/σ)² / 2``; kept within ``9.5`` standard
    deviations (the mass below goes to the lowest point, above to ``+inf``)."""
    s = math.sqrt(2.0 * mu)
    lower, upper = mu - _GAUSS_Z * s, mu + _GAUSS_Z * s
    top = _index(upper, h) * h
    above = 0.5 * math.erfc((top - mu) / (s * math.sqrt(2.0)))
    return _from_cdf(lambda x: _normal_cdf((x - mu) / s), lower, upper, above, h)


def _trim(p: _Pld) -> _Pld:
    """Tails of mass at most :data:`_TAIL` moved up (pessimistic): the low one into the
    lowest point kept, the high one to ``+inf``."""
    m = p.masses
    low = np.cumsum(m)
    cut = int(np.searchsorted(low, _TAIL, side="right"))  # points 0..cut-1 hold <= _TAIL
    cut = min(cut, m.size - 1)
    high = np.cumsum(m[::-1])
    keep = m.size - min(int(np.searchsorted(high, _TAIL, side="right")), m.size - 1 - cut)
    if cut == 0 and keep == m.size:
        return p
    kept = m[cut:keep].copy()
    if cut:
        kept[0] += low[cut - 1]
    moved = float(m[keep:].sum()) if keep < m.size else 0.0
    return _Pld(p.h, p.start + cut, kept, p.infinity + moved, p.error + 2.0 * _U)


def _convolve(a: _Pld, b: _Pld) -> _Pld:
    """The PLD of the composition: the sum of independent losses (``+inf`` if either is)."""
    na1 = float(a.masses.sum()) + a.infinity
    nb1 = float(b.masses.sum()) + b.infinity
    size = a.masses.size + b.masses.size - 1
    if a.masses.size < b.masses.size:
        a, b, na1, nb1 = b, a, nb1, na1
    atoms = np.flatnonzero(b.masses)
    if atoms.size <= 8:
        # b is a few atoms (a randomized-response or (epsilon, delta) pair): shifted copies
        # of a, each point a sum of at most atoms.size non-negative products
        c = np.zeros(size)
        for j in atoms:
            c[j : j + a.masses.size] += b.masses[j] * a.masses
        float_error = 1.01 * max(atoms.size, 1) * _U * na1 * nb1
    elif b.masses.size <= 64:
        # a sum of at most min(len) products of non-negative terms each
        c = np.convolve(a.masses, b.masses)
        float_error = 1.01 * min(a.masses.size, b.masses.size) * _U * na1 * nb1
    else:
        n = 1 << (size - 1).bit_length()
        c = np.fft.irfft(np.fft.rfft(a.masses, n) * np.fft.rfft(b.masses, n), n)[:size]
        a2, b2 = float(np.linalg.norm(a.masses)), float(np.linalg.norm(b.masses))
        zeta = 7.0 * _U * math.log2(n)
        worst = min(a2 * nb1 + 2.0 * na1 * b2, b2 * na1 + 2.0 * nb1 * a2)
        float_error = 1.01 * math.sqrt(n) * (zeta * worst + 3.0 * _U * na1 * max(a2, b2))
        np.maximum(c, 0.0, out=c)
    infinity = a.infinity + b.infinity - a.infinity * b.infinity
    error = a.error * nb1 + b.error * (na1 + a.error) + float_error + 4.0 * _U
    return _trim(_Pld(a.h, a.start + b.start, c, min(1.0, infinity), error))


def _power(p: _Pld, k: int) -> _Pld:
    """``p`` composed ``k`` times (repeated squaring)."""
    result: _Pld | None = None
    while True:
        if k & 1:
            result = p if result is None else _convolve(result, p)
        k >>= 1
        if not k:
            assert result is not None
            return result
        p = _convolve(p, p)


_PURE = ("laplace", "discrete_laplace", "pure")
_GAUSSIAN = ("gaussian",)


def _pld_of(entry: Mapping[str, Any], h: float) -> _Pld:
    m = entry["mechanism"]
    if m == "laplace":
        return _laplace(entry["epsilon"], h)
    if m == "discrete_laplace" and "steps" in entry and entry["steps"] > 1:
        return _discrete_laplace(entry["epsilon"], entry["steps"], h)
    if m == "approx":
        return _atoms(entry["epsilon"], entry["delta"], h)
    return _atoms(entry["epsilon"], 0.0, h)  # pure, or a discrete Laplace of 1 step


def _composed(counts: Mapping[_Entry, int], mu: float, h: float) -> _Pld:
    """The rounded PLD of every PLD entry (``counts``) and of the merged Gaussian ``mu``."""
    parts = [_power(_pld_of(dict(e), h), k) for e, k in sorted(counts.items())]
    if mu > 0.0:
        parts.append(_gaussian(mu, h))
    out = parts[0]
    for p in parts[1:]:
        out = _convolve(out, p)
    return out


@dataclass(frozen=True)
class _Profile:
    """The privacy profile of a composed PLD: its delta at any epsilon, rounded up."""

    pld: _Pld
    losses: np.ndarray

    @classmethod
    def of(cls, pld: _Pld) -> _Profile:
        losses = (pld.start + np.arange(pld.masses.size, dtype=np.float64)) * pld.h
        return cls(pld, losses)

    def delta(self, epsilon: float) -> float:
        j = int(np.searchsorted(self.losses, epsilon, side="right"))
        tail = self.pld.masses[j:]
        s = float(np.dot(tail, -np.expm1(epsilon - self.losses[j:]))) if tail.size else 0.0
        total = (self.pld.infinity + s) * (1.0 + (tail.size + 8) * _U) + self.pld.error
        return min(1.0, total)

    def epsilon(self, delta: float) -> float:
        if self.delta(0.0) <= delta:
            return 0.0
        hi = max(float(self.losses[-1]), 0.0)
        if self.delta(hi) > delta:
            return math.inf
        lo = 0.0
        while hi - lo > 1e-12 * hi:
            mid = lo + (hi - lo) / 2.0
            if mid in (lo, hi):
                break
            if self.delta(mid) <= delta:
                hi = mid
            else:
                lo = mid
        return hi


# -- the answers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ledger:
    """The releases split: PLD entries (counted), the merged Gaussian, the summed rho."""

    counts: Counter[_Entry]
    mu: float
    rho: float
    rho_all: float | None  # every release's rho summed, if each has one
    basic: tuple[Fraction, Fraction] | None  # (sum epsilon, sum delta), if no Gaussian/zCDP
    rounded: int  # how many PLDs are rounded to the grid (the k of the error bound)

    @classmethod
    def of(cls, releases: Any) -> _Ledger:
        entries = _entries(releases)
        counts: Counter[_Entry] = Counter()
        mu = rho = Fraction(0)
        rhos = []
        for e in entries:
            d = dict(e)
            r = _rho(d)
            rhos.append(r)
            if d["mechanism"] in _GAUSSIAN:
                assert r is not None
                mu += r
            elif r is not None and d["mechanism"] not in _PURE:
                rho += r
            else:
                counts[e] += 1
        # exact sums, as floats rounded up: a larger mu or rho is less private
        every = None if None in rhos else _up(sum((r for r in rhos if r), Fraction(0)))
        every = every if every is None or math.isfinite(every) else None  # bounds nothing
        basic = None
        if mu == 0.0 and rho == 0.0:
            es = [dict(e) for e in entries]
            basic = (
                exact_sum(d["epsilon"] for d in es),
                exact_sum(d.get("delta", 0.0) for d in es),
            )
        return cls(counts, _up(mu), _up(rho), every, basic, counts.total() + (mu > 0))

    @property
    def span(self) -> float:
        """At least the largest absolute finite loss of the composed PLD (not of zCDP)."""
        pure = sum(dict(e)["epsilon"] * k for e, k in self.counts.items())
        return pure + (self.mu + _GAUSS_Z * math.sqrt(2.0 * self.mu) if self.mu else 0.0)

    def profile(self, h: float) -> _Profile:
        return _Profile.of(_composed(self.counts, self.mu, h))

    def fine_profile(self, target: Callable[[_Profile], float], tolerance: float) -> _Profile:
        """The profile on an interval ``h`` with ``rounded * h <= tolerance * target``
        (``target`` read from a first, coarse profile), within :data:`_MAX_POINTS`."""
        width = sum(_width(dict(e)) * k for e, k in self.counts.items())
        width += 2.0 * _GAUSS_Z * math.sqrt(2.0 * self.mu) if self.mu else 0.0
        h = max(_COARSE, _pow2_at_least(width / (_MAX_POINTS / 4)))
        coarse = self.profile(h)
        first = target(coarse)
        lowest = max(first - self.rounded * h, 0.0) if math.isfinite(first) else 0.0
        extent = 2.0 * coarse.losses.size * h
        wanted = max(
            _pow2_at_most(tolerance * lowest / self.rounded),
            _FINEST,
            _pow2_at_least(extent / _MAX_POINTS),
        )
        return coarse if wanted >= h else self.profile(wanted)


def _width(entry: Mapping[str, Any]) -> float:
    """An upper bound of the span of a release's PLD (for the grid's size)."""
    return 2.0 * min(entry["epsilon"], math.log(1.0 / _TAIL) + 1.0)


def _pow2_at_most(x: float) -> float:
    return 2.0 ** math.floor(math.log2(x)) if x > 0.0 else 0.0


def _pow2_at_least(x: float) -> float:
    return 2.0 ** math.ceil(math.log2(x)) if x > 0.0 else 0.0


def _split_delta(delta: float) -> list[float]:
    """The shares of delta tried for the PLD part when zCDP releases join it."""
    shares = {2.0**-j for j in range(1, 21)} | {1.0 - 2.0**-j for j in range(1, 21)}
    shares |= {i / 20 for i in range(1, 20)}
    return sorted(s for s in shares if delta * s >= PRIVACY_MIN and delta * (1 - s) >= PRIVACY_MIN)


def epsilon_for_delta(
    releases: Sequence[Mapping[str, Any]], delta: float, *, tolerance: float = _TOLERANCE
) -> float:
    """The epsilon of the composition of ``releases`` at ``delta``, never below the truth.

    Parameters
    ----------
    releases : sequence of mappings
        The releases, each ``{"mechanism": ..., <its fields>}`` (the table in the module's
        docstring).
    delta : float
        In ``[0, 1)``.
    tolerance : float, default 1e-3
        The relative over-estimate the discretisation may add to epsilon (``k h <=
        tolerance * epsilon``, unless the grid would exceed ``2**22`` points): the result
        is at most ``eps_true(delta - a) + tolerance * eps`` with ``a`` a float
        allowance (about ``1e-9`` for 1000 releases; the module's docstring).

    Returns
    -------
    float
        Epsilon ``>= 0``; ``inf`` if no epsilon reaches ``delta`` (the deltas of the
        (epsilon, delta) releases already exceed it, or ``delta`` is 0 with a Gaussian or
        a zCDP release).

    Examples
    --------
    >>> gaussians = [{"mechanism": "gaussian", "sensitivity": 1.0, "sigma": 20.0}] * 100
    >>> eps = epsilon_for_delta(gaussians, 1e-6)  # one Gaussian of sigma 2: 2.25408...
    >>> 2.25408 < eps < 2.25408 * 1.001
    True
    >>> approx = [{"mechanism": "approx", "epsilon": 1.0, "delta": 1e-5}] * 2
    >>> epsilon_for_delta(approx, 2e-5) <= 2.0  # basic composition: (2.0, 2e-5)
    True
    """
    d = check("delta", delta)
    tol = check("composition_tolerance", tolerance, name="tolerance")
    led = _Ledger.of(releases)
    best = math.inf
    if led.basic is not None and led.basic[1] <= exact(d):
        best = _up(led.basic[0])
    if led.rho_all is not None and d > 0.0:
        best = min(best, epsilon_of_rho(led.rho_all, d) if led.rho_all > 0.0 else 0.0)
    if not led.counts and led.mu == 0.0:  # zCDP releases only, or none
        if led.rho == 0.0:
            return 0.0
        return min(best, epsilon_of_rho(led.rho, d)) if d > 0.0 else best
    if led.span > _MAX_LOSS:  # beyond a float grid's exact points
        return best
    if led.rho == 0.0:

        def answer(p: _Profile) -> float:
            return p.epsilon(d)

    elif d == 0.0:
        return best
    else:
        shares = _split_delta(d)

        def answer(p: _Profile) -> float:
            return min(p.epsilon(d * s) + epsilon_of_rho(led.rho, d * (1 - s)) for s in shares)

    return min(best, answer(led.fine_profile(answer, tol)))


def delta_for_epsilon(
    releases: Sequence[Mapping[str, Any]], epsilon: float, *, tolerance: float = _TOLERANCE
) -> float:
    """The delta of the composition of ``releases`` at ``epsilon``, never below the truth.

    Parameters
    ----------
    releases : sequence of mappings
        The releases (the table in the module's docstring).
    epsilon : float
        ``>= 0``.
    tolerance : float, default 1e-3
        The discretisation adds at most ``tolerance * epsilon`` to the epsilon of the PLD
        part (unless the grid would exceed ``2**22`` points): the result is at most
        ``delta_true((1 - tolerance) epsilon) + a`` (``a`` about ``1e-9`` for 1000
        releases; the module's docstring).

    Returns
    -------
    float
        Delta in ``[0, 1]``.

    Examples
    --------
    >>> pure = [{"mechanism": "pure", "epsilon": 0.1}] * 30
    >>> delta_for_epsilon(pure, 3.0)  # basic composition
    0.0
    >>> delta_for_epsilon(pure, 2.0) < 1e-3
    True
    """
    eps = 0.0 if _is_zero(epsilon) else check("epsilon", epsilon)
    tol = check("composition_tolerance", tolerance, name="tolerance")
    led = _Ledger.of(releases)
    best = 1.0
    if led.basic is not None and exact(eps) >= led.basic[0]:
        best = min(best, _up(led.basic[1]))
    if led.rho_all is not None:
        best = min(best, delta_of_rho(led.rho_all, eps) if led.rho_all > 0.0 else 0.0)
    if not led.counts and led.mu == 0.0:  # zCDP releases only, or none
        return min(best, delta_of_rho(led.rho, eps)) if led.rho > 0.0 else 0.0
    if led.span > _MAX_LOSS:  # beyond a float grid's exact points
        return best
    if led.rho == 0.0:

        def answer(p: _Profile) -> float:
            return p.delta(eps)

    else:
        splits = [eps * i / 64 for i in range(65)]

        def answer(p: _Profile) -> float:
            return min(p.delta(e) + delta_of_rho(led.rho, eps - e) for e in splits)

    return min(best, answer(led.fine_profile(lambda p: eps, tol)))


def _up(x: Fraction) -> float:
    """A float at least ``x``, read as the decimal it prints as (the ledger's reading);
    ``inf`` above the largest float."""
    if x > _LARGEST:
        return math.inf
    f = float(x)
    return math.nextafter(f, math.inf) if exact(f) < x else f


def _is_zero(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x == 0
