"""Cyclic ``ε``-DP PRAM designs for estimating frequencies: circulant staircase matrices.

k-ary randomized response (k-RR) keeps a record's category with probability
``e^ε / (e^ε + S - 1)``: one "high" entry per row. For small ``ε`` and many categories the
variance of the estimated shares is far smaller when each row has ``d`` high entries
(a record is released as one of ``d`` categories with weight ``e^ε``, any other with
weight 1), as in subset selection, which needs ``C(S, d)`` outputs. The cyclic design
keeps ``S`` outputs -- so every released value is still a category -- by taking the high
entries of row ``i`` at ``i + D (mod S)`` for one subset ``D`` of ``{0, ..., S-1}``,
``|D| = d``:

    ``M_ij = e^ε / Z`` if ``(j - i) mod S`` is in ``D``, else ``1 / Z``,
    ``Z = (e^ε - 1) d + S``.

Every column holds ``d`` entries ``e^ε / Z`` and ``S - d`` entries ``1 / Z``: a staircase
column, so the matrix is exactly ``ε``-DP and is sampled from exact integers
(:func:`~dpframe.mechanisms.pram.sampling.staircase_sampler`). ``D = {0}`` is k-RR.

**The risk at every prior.** ``M`` is circulant, so ``M^-1`` is too and all its rows have
the same norm; :func:`~dpframe.mechanisms.pram.variance.estimation_risk` (``n E||p_hat -
p||^2``) is then ``r - ||p||^2`` for *every* prior ``p``, with (Parseval)

    ``r = (1 + sum_{k=1}^{S-1} 1 / |lambda_k|^2) / S``,
    ``lambda_k = (e^ε - 1) D_hat(k) / Z``, ``D_hat(k) = sum_{j in D} exp(-2 pi i j k / S)``.

k-RR has the same form, so a cyclic design with smaller ``r`` has less variance than
k-RR at every ``p``, not only at the uniform one. Since ``sum_{k>=1} |D_hat(k)|^2 = S d -
d^2``, Jensen's inequality gives ``r >= (1 + (S-1)^2 Z^2 / ((e^ε-1)^2 (S d - d^2))) / S``
with equality exactly when ``D`` is a cyclic difference set (e.g. the Fano plane at
``S = 7``, quadratic residues at ``S = 11``): :attr:`CyclicDesign.bound`.

:func:`cyclic_design` chooses ``D`` by a seeded best-swap local search on ``r`` (each swap
evaluated in ``O(S)`` from ``D_hat``), for every ``d`` up to 32 categories and for the
sizes with the smallest bound beyond (docs/pram-design.md, section 12.5). It is a
heuristic: it equals an enumeration of every subset for ``S = 3..11`` in the tests
(``tests/mechanisms/pram/test_cyclic.py``; a review found the same up to ``S = 16``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram.optimum import _check_design_epsilon, _check_s

__all__ = ["CYCLIC_MAX_CATEGORIES", "CyclicDesign", "cyclic_design"]

#: Largest S a cyclic design is searched for (a swap costs O(S^3) to choose: about 2 s
#: at S = 128 and 256, minutes at 512; benchmarks/bench_pram_cyclic.py)
CYCLIC_MAX_CATEGORIES = 256
#: Up to this S every block size d is searched; beyond, the SIZES_BEYOND smallest bounds
ALL_SIZES_MAX = 32
SIZES_BEYOND = 6
#: Beyond this S: SIZES_LARGE block sizes, one start each (the best of RANDOM_STARTS
#: random subsets), at most MAX_SWEEPS_LARGE improving swaps
SWAP_FULL_MAX = 128
SIZES_LARGE = 2
MAX_SWEEPS_LARGE = 32
RANDOM_STARTS = 16
#: A spectrum value below this (relative to d) counts as zero: the matrix is singular
_SINGULAR = 1e-9


@dataclass(frozen=True, eq=False)
class CyclicDesign:
    """A circulant ``ε``-DP PRAM matrix (see the module docstring).

    Attributes
    ----------
    n_categories : int
    epsilon : float
    subset : tuple of int
        ``D``: row ``i`` releases ``i + D (mod S)`` with weight ``e^ε``.
    r : float
        The risk constant: ``estimation_risk(p, matrix) = r - ||p||^2`` for every ``p``.
    bound : float
        The smallest ``r`` any cyclic design could have (a difference set of the best
        size), from Jensen's inequality (never above ``r``: float rounding can put the
        formula a few ulps above a difference set's ``r``); ``r / bound >= 1`` is the
        search's gap.
    krr_r : float
        ``r`` of k-RR (``D = {0}``), for comparison.
    p : tuple of float or None
        The prior a release chose this design for (the design does not depend on it;
        ``None``: none given).
    matrix : ndarray, shape (S, S)
        The float matrix (sample it with
        :func:`~dpframe.mechanisms.pram.sampling.staircase_sampler`).
    """

    n_categories: int
    epsilon: float
    subset: tuple[int, ...]
    r: float
    bound: float
    krr_r: float
    p: tuple[float, ...] | None = None

    @property
    def block(self) -> int:
        """``d = |D|``: how many categories a record is released as with weight ``e^ε``."""
        return len(self.subset)

    @property
    def matrix(self) -> np.ndarray:
        return circulant_matrix(self.n_categories, self.subset, self.epsilon)

    @property
    def gain_over_krr(self) -> float:
        """``krr_r / r``: k-RR's variance over this design's, minus ``||p||^2`` each."""
        return self.krr_r / self.r


def circulant_matrix(s: int, subset: tuple[int, ...], epsilon: float) -> np.ndarray:
    """``M_ij = e^ε / Z`` for ``(j - i) mod S`` in ``subset``, else ``1 / Z``."""
    a = math.exp(epsilon)
    row = np.ones(s)
    row[list(subset)] = a
    row /= row.sum()
    idx = (np.arange(s)[None, :] - np.arange(s)[:, None]) % s
    return row[idx]


def _r_of(spectrum_sq: np.ndarray, s: int, d: int, a: float) -> np.ndarray:
    """``r`` from ``|D_hat(k)|^2`` for ``k = 1..S-1`` (last axis); ``inf`` if singular."""
    z = (a - 1.0) * d + s
    lam_sq = spectrum_sq * ((a - 1.0) / z) ** 2
    with np.errstate(divide="ignore"):
        inv = np.where(spectrum_sq > (_SINGULAR * d) ** 2, 1.0 / lam_sq, np.inf)
    return (1.0 + inv.sum(axis=-1)) / s


def _bounds(s: int, a: float) -> np.ndarray:
    """Jensen's lower bound on ``r`` for each ``d = 1..S-1`` (index ``d - 1``)."""
    d = np.arange(1, s, dtype=np.float64)
    z = (a - 1.0) * d + s
    return (1.0 + (s - 1) ** 2 * z**2 / ((a - 1.0) ** 2 * (s * d - d * d))) / s


def _swap_search(
    s: int, d: int, a: float, start: np.ndarray, omega: np.ndarray, max_sweeps: int
) -> tuple[float, np.ndarray]:
    """Best-improvement swaps (one element of ``D`` out, one in) from ``start``."""
    member = np.zeros(s, dtype=bool)
    member[start] = True
    hat = omega[member].sum(axis=0)
    best = float(_r_of(np.abs(hat[1:]) ** 2, s, d, a))
    for _ in range(max_sweeps):
        ins, outs = np.flatnonzero(member), np.flatnonzero(~member)
        if outs.size == 0:
            break
        cand = hat[None, None, 1:] - omega[ins][:, None, 1:] + omega[outs][None, :, 1:]
        r = _r_of(np.abs(cand) ** 2, s, d, a)
        i, j = np.unravel_index(int(np.argmin(r)), r.shape)
        if not r[i, j] < best * (1.0 - 1e-12):
            break
        best = float(r[i, j])
        member[ins[i]], member[outs[j]] = False, True
        hat = hat - omega[ins[i]] + omega[outs[j]]
    return best, np.flatnonzero(member)


def cyclic_design(
    n_categories: int, epsilon: float, *, restarts: int = 3, seed: int = 0
) -> CyclicDesign:
    """The cyclic ``ε``-DP design with the least estimation risk found (module docstring).

    Parameters
    ----------
    n_categories : int
        ``2 <= S <= CYCLIC_MAX_CATEGORIES``.
    epsilon : float
        ``1e-9 <= epsilon <= 12`` (beyond, k-RR is best and the exact sampler's low level
        would round to zero).
    restarts : int, default 3
        Seeded random starts of the swap search per block size.
    seed : int, default 0
        The result is deterministic given it.

    Returns
    -------
    CyclicDesign
        Never worse than k-RR (``D = {0}`` is always a candidate).

    Examples
    --------
    >>> d = cyclic_design(7, 0.1)   # the Fano plane: a perfect difference set
    >>> d.block, round(d.r / d.bound, 12), d.gain_over_krr > 1.8
    (3, 1.0, True)
    """
    try:
        s = _check_s(n_categories)
    except InvalidParameterError:
        raise InvalidParameterError(
            f"n_categories must be an int >= 2 (the number of categories), got {n_categories!r}"
        ) from None
    if s > CYCLIC_MAX_CATEGORIES:
        raise InvalidParameterError(
            f"n_categories must be <= {CYCLIC_MAX_CATEGORIES} for a cyclic design, got {s}"
        )
    eps = _check_design_epsilon(epsilon)  # 1e-9 <= epsilon <= 12 (MAX_EPSILON)
    for name, value, low in (("restarts", restarts, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise InvalidParameterError(f"{name} must be an int >= {low}, got {value!r}")
    a = math.exp(eps)
    bounds = _bounds(s, a)
    krr_r = float(_r_of(np.ones(s - 1), s, 1, a))  # D = {0}: |D_hat| = 1
    best_r, best_d = krr_r, (0,)
    if s == 2 or a - 1.0 <= 0.0:  # two categories: every subset is k-RR or its mirror
        return CyclicDesign(s, eps, best_d, best_r, min(float(bounds.min()), best_r), krr_r)
    k = np.arange(s)
    omega = np.exp(-2j * np.pi * np.outer(k, k) / s)  # omega[j] = D_hat of {j}
    large = s > SWAP_FULL_MAX
    if s <= ALL_SIZES_MAX:
        sizes = list(range(2, s))
    else:
        n_sizes = SIZES_LARGE if large else SIZES_BEYOND
        by_bound = np.argsort(bounds, kind="stable") + 1
        sizes = [int(d) for d in by_bound if d > 1][:n_sizes]
    rng = np.random.default_rng(seed)
    max_sweeps = MAX_SWEEPS_LARGE if large else 4 * s
    for d in sizes:
        if bounds[d - 1] >= best_r:  # no subset of this size can beat the incumbent
            continue
        for _ in range(1 if large else int(restarts)):
            if not large:
                start = rng.choice(s, d, replace=False)
            else:  # the best of a few random subsets, as one start
                starts = [rng.choice(s, d, replace=False) for _ in range(RANDOM_STARTS)]
                hats = np.stack([omega[st].sum(axis=0) for st in starts])
                start = starts[int(np.argmin(_r_of(np.abs(hats[:, 1:]) ** 2, s, d, a)))]
            r, subset = _swap_search(s, d, a, start, omega, max_sweeps)
            if r < best_r * (1.0 - 1e-12):
                best_r, best_d = r, tuple(int(v) for v in subset)
    return CyclicDesign(s, eps, best_d, best_r, min(float(bounds.min()), best_r), krr_r)
