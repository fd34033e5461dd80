"""Multi-statistic releases of the bounded-Laplace paper (Liu 2019, Section 4).

Pure numpy kernels, no polars:

* :func:`release_covariance_matrix` -- Simulation study 1: a ``p x p`` sample covariance
  matrix, variances first, then each covariance inside the interval implied by the
  *sanitized* variances; optional repair to a positive semi-definite matrix
  (:func:`nearest_correlation`, Higham 2002; or :func:`clip_correlation`).
* :func:`release_proportions` -- Simulation study 2: a vector of ``K`` proportions kept
  in ``[0, 1]`` and summing to 1, by rescaling, by "all but one" (Remark 1) or by a
  modified universal histogram (Hay et al. 2010; :func:`consistent_tree`,
  :func:`project_to_simplex`).
* :func:`multiple_synthesis` and :func:`combine_synthesis` -- ``m`` independent releases
  at ``epsilon / m`` each and the combining rule for inference from them.

Every release returns a frozen dataclass carrying the released values *and* the privacy
facts (:class:`StatisticCharge`, one per ledger entry), and accepts ``charge=``, a
callable that receives the :class:`~dpframe.core.accountant.Charge` list *before any noise is
drawn* (e.g. ``charge=accountant.spend_all``).

Privacy accounting. The noise is the grid mechanism of
:mod:`dpframe.mechanisms.bounded` (step ``g``, noise ``P(Z = z) ∝ exp(-gamma |z|)``).
For one component whose grid index can move by ``d`` steps, the worst-case loss is
``f(d) = d gamma`` (BIT) or ``f(d) = grid_truncated_privacy_loss(gamma, d, width)``
(truncation): both are concave and non-decreasing in ``d`` with ``f(0) = 0``. When one
record changes at most ``k`` components of a vector, each by at most ``D`` steps, and
all of them together by at most ``T = floor(l1 / g) + k`` steps (``l1`` the vector's
l1 sensitivity; rounding to the grid adds at most one step per changed component),
the components' losses add up and, by Jensen's inequality,

    loss <= sum_j f(d_j) <= k f(min(D, T / k)).

``calibration="exact"`` picks the largest ``gamma`` with ``k f(min(D, T/k)) <= epsilon``.
When ``T / k >= D`` (substitution: two components change) this is the rule "each
component at ``epsilon / k`` with its own sensitivity"; when ``T / k < D`` (add/remove:
all ``K`` proportions change, by ``2/n`` in total) it is tighter. Truncation's ``f`` is
not linear in ``d``, which is why the sum runs over components and not over the l1 norm
alone. ``calibration="paper"`` uses the paper's scale ``lambda = l1 / epsilon`` on the
grid (the BIT calibration) and, for truncation, charges the bound above, which exceeds
``epsilon``. See ``docs/releases.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral, Real
from typing import Any

import numpy as np

from dpframe.core import sensitivity as _sens
from dpframe.core.accountant import Charge
from dpframe.core.constraints import NEIGHBOURS, check_choice, check_epsilon
from dpframe.core.randomness import secure_generator
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.bounded import (
    CALIBRATIONS,
    METHODS,
    BoundedCalibration,
    component_loss,
    solve_gamma,
)

__all__ = [
    "REPAIRS",
    "STRATEGIES",
    "CombinedEstimate",
    "CovarianceRelease",
    "MultipleSynthesis",
    "ProportionsRelease",
    "StatisticCharge",
    "clip_correlation",
    "combine_synthesis",
    "consistent_tree",
    "multiple_synthesis",
    "nearest_correlation",
    "project_to_simplex",
    "release_covariance_matrix",
    "release_proportions",
]

STRATEGIES = ("rescale", "all_but_one", "universal_histogram")
REPAIRS = (None, "higham", "clip")
#: Eigenvalue floor of ``repair="clip"`` (relative to a unit diagonal).
CLIP_FLOOR = 1e-8
GRID_STEPS = 1024  # default grid: min(sensitivity, width) / 1024, rounded down to 2**k

ChargeHook = Callable[[list[Charge]], Any]


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class StatisticCharge:
    """The privacy facts of one sanitized statistic (one ledger entry).

    A statistic may be a vector (the proportions, or one level of a universal
    histogram): ``components`` entries, each with sensitivity
    ``component_sensitivity``, of which one record changes at most ``max_changed``,
    by ``sensitivity`` (l1) in total.

    Attributes
    ----------
    name : str
        What was released, e.g. ``"S[0,1]"``, ``"p"``, ``"level 2"``.
    epsilon : float
        Budget allotted to this statistic.
    epsilon_charged : float
        What the ledger must be charged: ``epsilon``, or the true worst-case loss
        (rounded up to 9 decimals) when it is larger (truncation with
        ``calibration="paper"``).
    privacy_loss : float
        The computed worst-case loss bound (``<= epsilon_charged``).
    sensitivity, component_sensitivity : float
        l1 sensitivity of the whole statistic and of each component.
    components, max_changed : int
        Number of components, and how many one record can change.
    scheme : str
        ``"single"`` (a scalar), ``"per-component"`` (each changed component is
        ``epsilon / max_changed``-DP at its own sensitivity) or ``"joint"`` (the
        concave bound ``k f(T/k)`` of the module docstring).
    scale : float or None
        The Laplace scale, ``None`` if it depends on bounds known only after earlier
        statistics are released (then see the release's ``scales``).
    lower, upper : float
        The widest public bounds of a component.
    granularity : float
        Grid step of the release.
    note : str
        How the loss is bounded, in words.
    """

    name: str
    epsilon: float
    epsilon_charged: float
    privacy_loss: float
    sensitivity: float
    component_sensitivity: float
    components: int
    max_changed: int
    scheme: str
    scale: float | None
    lower: float
    upper: float
    granularity: float
    method: str
    calibration: str
    note: str = ""

    def to_charge(self) -> Charge:
        """This statistic as an :class:`~dpframe.core.accountant.Charge` (sequential)."""
        return Charge(
            epsilon=self.epsilon_charged,
            mechanism=f"{self.method}_laplace",
            columns=(self.name,),
            scale=self.scale,
            composition="sequential",
            note=self.note,
            details={
                "calibration": self.calibration,
                "epsilon_allotted": self.epsilon,
                "privacy_loss": self.privacy_loss,
                "sensitivity": self.sensitivity,
                "component_sensitivity": self.component_sensitivity,
                "components": self.components,
                "max_changed": self.max_changed,
                "scheme": self.scheme,
                "lower": self.lower,
                "upper": self.upper,
                "granularity": self.granularity,
            },
        )


def _ledger(charges: Sequence[StatisticCharge]) -> list[Charge]:
    return [c.to_charge() for c in charges]


def _total(values: Sequence[float]) -> float:
    """Exact decimal sum (as the accountant adds), returned as a float."""
    return float(sum((Fraction(repr(float(v))) for v in values), Fraction(0)))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class CovarianceRelease:
    """A sanitized covariance matrix and its privacy facts.

    Attributes
    ----------
    values : ndarray, shape (p, p)
        The released matrix (repaired if ``repair`` was given).
    sanitized : ndarray, shape (p, p)
        The element-wise sanitized matrix ``S*`` before any repair.
    epsilon, epsilon_charged : float
        Budget asked for, and the total to charge (sum of ``charges``).
    charges : tuple of StatisticCharge
        One per statistic: the ``p`` variances, then the covariances ``S[j,k]``,
        ``j < k``, row by row.
    epsilons, scales, sensitivities, lower, upper : ndarray, shape (p, p)
        Per statistic: budget allotted, Laplace scale actually used (``nan`` where a
        covariance was released without noise), l1 sensitivity, and the bounds used
        (for a covariance, ``-+sqrt(S*_jj S*_kk)``).
    degenerate : tuple of (int, int)
        Covariances released as 0 without noise because their interval was
        degenerate (a sanitized variance of 0, or an interval narrower than the grid).
    repaired : bool
        True if the repair changed the matrix.
    """

    values: np.ndarray
    sanitized: np.ndarray
    n: int
    epsilon: float
    epsilon_charged: float
    charges: tuple[StatisticCharge, ...]
    epsilons: np.ndarray
    scales: np.ndarray
    sensitivities: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    method: str
    calibration: str
    neighbours: str
    repair: str | None
    degenerate: tuple[tuple[int, int], ...]
    repaired: bool
    notes: tuple[str, ...] = ()

    @property
    def correlation(self) -> np.ndarray:
        """The correlation matrix implied by ``values`` (0 off the diagonal of a zero variance)."""
        return _correlation(self.values)

    def ledger_charges(self) -> list[Charge]:
        """The charges to record, one per statistic."""
        return _ledger(self.charges)


@dataclass(frozen=True)
class ProportionsRelease:
    """A sanitized vector of proportions (in ``[0, 1]``, summing to 1) and its privacy facts.

    Attributes
    ----------
    values : ndarray, shape (K,)
        The released proportions, in the input's category order.
    sanitized : ndarray, shape (K,)
        The noisy values before post-processing: ``q*`` before rescaling; for
        ``"all_but_one"`` the released values (the last one computed); for
        ``"universal_histogram"`` the noisy leaves.
    epsilon, epsilon_charged : float
        Budget asked for, and the total to charge (sum of ``charges``).
    charges : tuple of StatisticCharge
        ``"rescale"`` and ``"all_but_one"``: one (the vector); ``"universal_histogram"``:
        one per level of the tree (each level is a partition of the records).
    scales : ndarray, shape (K,)
        Laplace scale of each category's own noisy value (``nan`` for the one computed
        last, or one released without noise).
    order : tuple of int or None
        ``"all_but_one"``: the order of sanitization (last: computed); universal
        histogram: the categories in leaf order.
    tree, noisy_tree : tuple of ndarray or None
        Universal histogram only: the released consistent tree (level 0 is the root,
        ``[1.0]``) and the noisy levels 1..L.
    degenerate : bool
        ``"rescale"``: every ``q*`` was 0 and the uniform vector was released;
        ``"all_but_one"``: some component had no room left and was released as 0.
    """

    values: np.ndarray
    sanitized: np.ndarray
    n: int
    strategy: str
    epsilon: float
    epsilon_charged: float
    charges: tuple[StatisticCharge, ...]
    scales: np.ndarray
    granularity: float
    method: str
    calibration: str
    neighbours: str
    order: tuple[int, ...] | None
    tree: tuple[np.ndarray, ...] | None = None
    noisy_tree: tuple[np.ndarray, ...] | None = None
    degenerate: bool = False
    notes: tuple[str, ...] = ()

    def ledger_charges(self) -> list[Charge]:
        """The charges to record, one per sanitized statistic."""
        return _ledger(self.charges)


@dataclass(frozen=True)
class MultipleSynthesis:
    """``m`` independent releases, each at ``epsilon / m``.

    Attributes
    ----------
    releases : tuple
        What the ``release`` callable returned, in order.
    epsilon_per_release : float
        Budget given to each release (``m`` of them add up to at most ``epsilon``).
    charged_per_release : tuple of float
        Each release's ``epsilon_charged`` (or ``epsilon_per_release`` if it reports none).
    epsilon_charged : float
        Their sum (sequential composition): the total to charge.
    """

    releases: tuple[Any, ...]
    m: int
    epsilon: float
    epsilon_per_release: float
    charged_per_release: tuple[float, ...]
    epsilon_charged: float

    def estimates(self, extract: Callable[[Any], Any] | None = None) -> np.ndarray:
        """Stack the releases' values (``r.values``, or ``extract(r)``) along a first axis."""
        get = extract or (lambda r: getattr(r, "values", r))
        return np.stack([np.asarray(get(r), dtype=np.float64) for r in self.releases])


@dataclass(frozen=True)
class CombinedEstimate:
    """Inference combined over ``m`` releases (:func:`combine_synthesis`).

    Arrays have the shape of one estimate (floats for scalars).
    """

    estimate: Any
    between: Any
    within: Any
    total_variance: Any
    df: Any
    lower: Any
    upper: Any
    level: float
    m: int


# ------------------------------------------------------------------------ validation


def _rng(rng: Any) -> np.random.Generator:
    if rng is None:
        return secure_generator()
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng must be a numpy.random.Generator or None (secure), got {type(rng).__name__}; "
            "pass e.g. dpframe.RandomSource(seed).generator() for a reproducible run"
        )
    return rng


def _int(name: str, value: Any, minimum: int, why: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParameterError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}; "
            f"pass int({name})"
        )
    if int(value) < minimum:
        raise InvalidParameterError(f"{name} must be >= {minimum} ({why}), got {value}")
    return int(value)


def _array(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be an array of numbers: {exc}") from None
    if a.ndim != ndim:
        shape = "a vector" if ndim == 1 else "a square matrix"
        raise InvalidParameterError(f"{name} must be {shape}, got an array of shape {a.shape}")
    if not np.isfinite(a).all():
        raise InvalidParameterError(f"{name} must be finite (no NaN or infinity)")
    return a


def _symmetric(name: str, value: Any) -> np.ndarray:
    a = _array(name, value, 2)
    if a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise InvalidParameterError(f"{name} must be a non-empty square matrix, got {a.shape}")
    scale = max(1.0, float(np.abs(a).max()))
    if np.abs(a - a.T).max() > 1e-12 * scale:
        raise InvalidParameterError(f"{name} must be symmetric; pass (a + a.T) / 2")
    return 0.5 * (a + a.T)


def _check_weights(name: str, w: np.ndarray) -> np.ndarray:
    if not np.isfinite(w).all() or (w <= 0).any():
        raise InvalidParameterError(
            f"{name} must hold finite weights > 0 (every statistic needs some budget)"
        )
    return w


def _split_epsilon(epsilon: float, weights: Sequence[float] | np.ndarray) -> list[float]:
    """``epsilon * w_i / sum(w)``, nudged down so their exact decimal sum is <= ``epsilon``.

    The accountant adds charges as the decimals they print as; this guarantees the
    shares fit the total exactly.
    """
    w = np.asarray(weights, dtype=np.float64)
    out = [float(x) for x in epsilon * (w / w.sum())]
    budget = Fraction(repr(float(epsilon)))
    while sum((Fraction(repr(x)) for x in out), Fraction(0)) > budget:
        i = max(range(len(out)), key=out.__getitem__)
        out[i] = math.nextafter(out[i], 0.0)
    return out


# ----------------------------------------------------------------------- calibration


def _pow2_floor(x: float) -> float:
    return math.ldexp(1.0, math.floor(math.log2(x)))


def _grid_width(lower: float, upper: float, g: float) -> int:
    return math.floor(upper / g) - math.ceil(lower / g)


def _choose_granularity(delta: float, lower: float, upper: float, eps: float, k: int) -> float:
    """``min(delta, upper - lower) / 1024`` as a power of two, coarser if epsilon is tiny."""
    g = _pow2_floor(min(delta, upper - lower) / GRID_STEPS)
    while eps / (k * (math.floor(delta / g) + 1)) < 2.0**-16 and (upper - lower) / g >= 64:
        g *= 2.0
    return g


@dataclass(frozen=True)
class _Plan:
    """Calibration of a group of components sharing a budget (see the module docstring)."""

    method: str
    calibration: str
    epsilon: float  # budget of the group
    component_sensitivity: float
    l1: float
    components: int
    k: int  # components one record can change
    lower: float  # widest public bounds of a component
    upper: float
    granularity: float

    @property
    def d_units(self) -> int:
        return math.floor(self.component_sensitivity / self.granularity) + 1

    @property
    def t_units(self) -> int:
        return math.floor(self.l1 / self.granularity) + self.k

    @property
    def d_star(self) -> float:
        return float(min(self.d_units, self.t_units / self.k))

    @property
    def per_component(self) -> bool:
        return self.d_star >= self.d_units

    @property
    def width_max(self) -> int:
        return _grid_width(self.lower, self.upper, self.granularity)

    @property
    def fixed_gamma(self) -> bool:
        """True if the scale does not depend on the (post-processed) bounds."""
        return self.method == "bit" or self.calibration == "paper" or not self.per_component

    def gamma(self, width: int) -> Fraction:
        target = self.epsilon / self.k
        if self.method == "bit" or self.calibration == "paper":
            # the paper's lambda = l1 / epsilon on the grid (= BIT's exact calibration)
            return solve_gamma("bit", target, self.d_star, math.inf)
        if self.per_component:  # each changed component eps/k-DP for its own width
            return solve_gamma("truncated", target, self.d_star, float(width))
        # joint bound: one gamma for the widest interval (the loss grows with the width)
        return solve_gamma("truncated", target, self.d_star, float(self.width_max))

    @property
    def privacy_loss(self) -> float:
        """Worst case over the possible bounds (the widest): ``k f(d*)``."""
        w = self.width_max
        return self.k * component_loss(self.method, float(self.gamma(w)), self.d_star, w)

    @property
    def epsilon_charged(self) -> float:
        loss = self.privacy_loss
        if loss <= self.epsilon:
            return self.epsilon
        return math.ceil(loss * 1e9) / 1e9

    @property
    def scheme(self) -> str:
        if self.components == 1:
            return "single"
        return "per-component" if self.per_component else "joint"

    def calibrate(self, lower: float, upper: float) -> BoundedCalibration | None:
        """The grid mechanism for one component with bounds inside the widest ones.

        ``None`` if ``[lower, upper]`` holds fewer than two grid points (degenerate).
        """
        g = self.granularity
        width = _grid_width(lower, upper, g)
        if width < 1:
            return None
        gamma = self.gamma(width)
        return BoundedCalibration(
            method=self.method,
            calibration=self.calibration,
            epsilon=self.epsilon / self.k,
            sensitivity=self.component_sensitivity,
            lower=float(lower),
            upper=float(upper),
            granularity=g,
            sensitivity_units=self.d_units,
            gamma=gamma,
            privacy_loss=component_loss(self.method, float(gamma), self.d_units, width),
            extra={"scheme": self.scheme, "max_changed": self.k},
        )

    def charge(self, name: str, note: str, bounds_fixed: bool = True) -> StatisticCharge:
        """The ledger facts; the scale is known up front unless it follows later bounds."""
        known = bounds_fixed or self.fixed_gamma
        return StatisticCharge(
            name=name,
            epsilon=self.epsilon,
            epsilon_charged=self.epsilon_charged,
            privacy_loss=self.privacy_loss,
            sensitivity=self.l1,
            component_sensitivity=self.component_sensitivity,
            components=self.components,
            max_changed=self.k,
            scheme=self.scheme,
            scale=float(self.granularity / self.gamma(self.width_max)) if known else None,
            lower=self.lower,
            upper=self.upper,
            granularity=self.granularity,
            method=self.method,
            calibration=self.calibration,
            note=note,
        )


def _plan(
    method: str,
    calibration: str,
    epsilon: float,
    component_sensitivity: float,
    l1: float,
    components: int,
    k: int,
    lower: float,
    upper: float,
    granularity: float | None = None,
) -> _Plan:
    g = (
        _choose_granularity(component_sensitivity, lower, upper, epsilon, k)
        if granularity is None
        else granularity
    )
    plan = _Plan(
        method, calibration, epsilon, component_sensitivity, l1, components, k, lower, upper, g
    )
    if plan.width_max < 1:
        raise InvalidParameterError(
            f"granularity={g!r} leaves fewer than two grid points in [{lower}, {upper}]; "
            "pass a finer granularity"
        )
    plan.gamma(plan.width_max)  # raises now, before any noise, if epsilon is too small
    return plan


# ------------------------------------------------------------- correlation matrices


def _psd_part(a: np.ndarray) -> np.ndarray:
    """Projection onto the positive semi-definite cone (Frobenius norm)."""
    w, v = np.linalg.eigh(0.5 * (a + a.T))
    x = (v * np.maximum(w, 0.0)) @ v.T
    return 0.5 * (x + x.T)


def _unit_diagonal(x: np.ndarray) -> np.ndarray:
    """``D^-1/2 X D^-1/2``: keeps a PSD matrix PSD and makes its diagonal exactly 1."""
    d = np.sqrt(np.clip(np.diag(x), 0.0, None))
    d = np.where(d > 0, d, 1.0)
    out = x / np.outer(d, d)
    out = 0.5 * (out + out.T)
    np.fill_diagonal(out, 1.0)
    return out


def nearest_correlation(a: Any, *, tol: float = 1e-10, max_iter: int = 10_000) -> np.ndarray:
    """Nearest correlation matrix in the Frobenius norm (Higham 2002).

    Alternating projections onto the positive semi-definite cone and onto the
    matrices with unit diagonal, with Dykstra's correction on the first (unit weights).

    Parameters
    ----------
    a : array_like, shape (p, p)
        Symmetric matrix (typically a correlation matrix that is not PSD).
    tol : float
        Stop when the iterates move by less than ``tol`` (relative, Frobenius).
    max_iter : int
        Iteration cap; the result is a valid correlation matrix either way.

    Returns
    -------
    ndarray
        Symmetric, positive semi-definite, with unit diagonal: the last PSD iterate
        rescaled to unit diagonal (a change of the order of ``tol``).

    Examples
    --------
    >>> a = np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]])
    >>> bool(np.linalg.eigvalsh(a).min() < 0)
    True
    >>> c = nearest_correlation(a)
    >>> bool(np.linalg.eigvalsh(c).min() > -1e-12), np.allclose(np.diag(c), 1)
    (True, True)
    """
    y = _symmetric("a", a)
    tol = float(tol)
    if not tol > 0:
        raise InvalidParameterError(f"tol must be > 0, got {tol!r}")
    max_iter = _int("max_iter", max_iter, 1, "at least one projection")
    correction = np.zeros_like(y)
    x = y
    for _ in range(max_iter):
        r = y - correction
        x_new = _psd_part(r)
        correction = x_new - r
        y_new = x_new.copy()
        np.fill_diagonal(y_new, 1.0)
        norm_y = max(np.linalg.norm(y_new), 1e-300)
        done = (
            np.linalg.norm(x_new - x) <= tol * max(np.linalg.norm(x_new), 1e-300)
            and np.linalg.norm(y_new - y) <= tol * norm_y
            and np.linalg.norm(y_new - x_new) <= tol * norm_y
        )
        x, y = x_new, y_new
        if done:
            break
    return _unit_diagonal(x)


def clip_correlation(a: Any, floor: float = CLIP_FLOOR) -> np.ndarray:
    """Eigenvalue clipping at ``floor``, then rescaling to unit diagonal.

    Cheaper than :func:`nearest_correlation` and positive definite, but not the
    nearest correlation matrix.

    Examples
    --------
    >>> a = np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]])
    >>> c = clip_correlation(a)
    >>> bool(np.linalg.eigvalsh(c).min() > 0), np.allclose(np.diag(c), 1)
    (True, True)
    """
    x = _symmetric("a", a)
    fl = float(floor)
    if not fl > 0 or not math.isfinite(fl):
        raise InvalidParameterError(f"floor must be a finite number > 0, got {floor!r}")
    w, v = np.linalg.eigh(x)
    return _unit_diagonal((v * np.maximum(w, fl)) @ v.T)


def _correlation(s: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.clip(np.diag(s), 0.0, None))
    pos = d > 0
    c = np.zeros_like(s)
    c[np.ix_(pos, pos)] = s[np.ix_(pos, pos)] / np.outer(d[pos], d[pos])
    c = np.clip(c, -1.0, 1.0)
    np.fill_diagonal(c, 1.0)
    return c


# --------------------------------------------------------------- covariance matrix


def _bounds(bounds: Any, p: int) -> list[tuple[float, float]]:
    try:
        items = list(bounds)
    except TypeError:
        raise InvalidParameterError(
            f"bounds must be a sequence of p = {p} pairs (lower, upper), got {bounds!r}"
        ) from None
    if len(items) != p:
        raise InvalidParameterError(
            f"bounds must hold one (lower, upper) pair per column of cov (p = {p}), "
            f"got {len(items)}"
        )
    out = []
    for j, pair in enumerate(items):
        try:
            lo, hi = pair
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"bounds[{j}] must be a pair (lower, upper), got {pair!r}"
            ) from None
        for what, v in (("lower", lo), ("upper", hi)):
            if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(float(v)):
                raise InvalidParameterError(
                    f"bounds[{j}] {what} must be a finite number, got {v!r}"
                )
        if not float(lo) < float(hi):
            raise InvalidParameterError(
                f"bounds[{j}] must satisfy lower < upper, got ({lo!r}, {hi!r}); pass the "
                "public bounds of column j in increasing order"
            )
        out.append((float(lo), float(hi)))
    return out


def _weights_matrix(split: Any, p: int) -> np.ndarray:
    m = p + p * (p - 1) // 2
    if split is None:
        return np.ones((p, p))
    a = np.asarray(split, dtype=np.float64)
    if a.ndim == 1 and a.shape == (m,):
        w = np.zeros((p, p))
        w[np.diag_indices(p)] = a[:p]
        iu = np.triu_indices(p, 1)
        w[iu] = a[p:]
        w = w + np.triu(w, 1).T
    elif a.shape == (p, p):
        w = _symmetric("split", a)
    else:
        raise InvalidParameterError(
            f"split must be a symmetric ({p}, {p}) matrix of weights or a vector of the "
            f"{m} weights (variances, then S[j,k] for j < k row by row); got shape {a.shape}"
        )
    return _check_weights("split", w)


def release_covariance_matrix(
    cov: Any,
    n: int,
    bounds: Sequence[tuple[float, float]],
    epsilon: float,
    *,
    method: str = "truncated",
    calibration: str = "exact",
    neighbours: str = "substitute",
    repair: str | None = None,
    split: Any = None,
    rng: np.random.Generator | None = None,
    charge: ChargeHook | None = None,
) -> CovarianceRelease:
    """Release a sample covariance matrix with bounded Laplace noise (Simulation study 1).

    Each variance ``S_jj`` is released in ``[0, n R_j**2 / (4 (n - 1))]`` with
    sensitivity :func:`dpframe.core.sensitivity.variance` (``R_j**2 / n``); then each
    covariance ``S_jk`` in ``[-sqrt(S*_jj S*_kk), +sqrt(S*_jj S*_kk)]``, bounds computed
    from the *sanitized* variances (post-processing: public), with sensitivity
    :func:`dpframe.core.sensitivity.covariance` (``R_j R_k / n``). The ``p + p (p - 1) / 2``
    statistics are of the same records, so their budgets add (sequential composition):
    ``epsilon`` is split equally, or in proportion to ``split``.

    Parameters
    ----------
    cov : array_like, shape (p, p)
        Symmetric sample covariance matrix (divisor ``n - 1``) of data whose column
        ``j`` lies in ``bounds[j]``. Entries outside their bounds are clipped.
    n : int
        Number of records (public, ``>= 2``).
    bounds : sequence of (float, float)
        Public bounds ``(lower_j, upper_j)`` of each column.
    epsilon : float
        Total budget.
    method : {"truncated", "bit"}
    calibration : {"exact", "paper"}
        ``"exact"``: each statistic is exactly ``epsilon_jk``-DP. ``"paper"``: the
        paper's ``lambda = Delta / epsilon_jk``; truncation is then charged its true
        (larger) loss, at the widest possible bounds.
    neighbours : {"substitute", "add_remove"}
        Neighbour relation (the sensitivities are the same under both).
    repair : {None, "higham", "clip"}
        Make the released matrix positive semi-definite: the correlation matrix
        implied by ``S*`` is replaced by its nearest correlation matrix
        (:func:`nearest_correlation`) or eigenvalue-clipped
        (:func:`clip_correlation`), then rescaled by the sanitized standard
        deviations. Post-processing: free; the diagonal is kept.
    split : array_like, optional
        Positive weights: a symmetric ``(p, p)`` matrix, or a vector of the variances'
        weights followed by those of ``S[j,k]``, ``j < k``, row by row.
    rng : numpy.random.Generator, optional
        Default :func:`dpframe.core.randomness.secure_generator`.
    charge : callable, optional
        Called with the list of :class:`~dpframe.core.accountant.Charge` before any noise is
        drawn (e.g. ``accountant.spend_all``); if it raises, nothing is released.

    Returns
    -------
    CovarianceRelease

    Notes
    -----
    A covariance whose interval is degenerate (a sanitized variance of 0, or an
    interval holding a single grid point) is released as 0 without noise and listed
    in ``degenerate``; its budget is still charged, because whether it happens is
    known only after the variances are drawn.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> r = release_covariance_matrix([[1.0, 0.5], [0.5, 2.0]], 500, [(-3, 3), (-4.5, 4.5)],
    ...                               1.0, rng=rng)
    >>> r.epsilon_charged <= 1.0, len(r.charges)
    (True, 3)
    >>> bool(abs(r.values[0, 1]) <= np.sqrt(r.values[0, 0] * r.values[1, 1]))
    True
    """
    eps = check_epsilon(epsilon)
    check_choice("method", method, METHODS)
    check_choice("calibration", calibration, CALIBRATIONS)
    check_choice("neighbours", neighbours, NEIGHBOURS)
    if repair not in REPAIRS:
        raise InvalidParameterError(f"repair must be None, 'higham' or 'clip'; got {repair!r}")
    s = _symmetric("cov", cov)
    p = s.shape[0]
    bnds = _bounds(bounds, p)
    widths = [hi - lo for lo, hi in bnds]
    n = _int("n", n, 2, "the sample covariance (divisor n - 1) needs two records")
    weights = _weights_matrix(split, p)
    pairs = [(j, j) for j in range(p)] + [(j, k) for j in range(p) for k in range(j + 1, p)]
    shares = _split_epsilon(eps, [weights[j, k] for j, k in pairs])

    vmax = [n * w * w / (4.0 * (n - 1)) for w in widths]
    plans: dict[tuple[int, int], _Plan] = {}
    for (j, k), e in zip(pairs, shares, strict=True):
        if j == k:
            lo_j, hi_j = bnds[j]
            delta = _sens.variance(lo_j, hi_j, n, neighbours)
            lo, hi = 0.0, vmax[j]
        else:
            delta = _sens.covariance(*bnds[j], *bnds[k], n, neighbours)
            hi = math.sqrt(vmax[j] * vmax[k])
            lo = -hi
        plans[j, k] = _plan(method, calibration, e, delta, delta, 1, 1, lo, hi)
    charges = tuple(
        plans[j, k].charge(
            f"S[{j},{k}]",
            "variance: bounds [0, n R^2 / (4 (n - 1))]"
            if j == k
            else "covariance: bounds -+sqrt(S*_jj S*_kk) from the sanitized variances"
            + ("" if plans[j, k].fixed_gamma else "; scale calibrated to those bounds"),
            bounds_fixed=j == k,
        )
        for j, k in pairs
    )
    if charge is not None:
        charge(_ledger(charges))
    gen = _rng(rng)

    out = np.zeros((p, p))
    eps_m, scale_m, sens_m, lo_m, hi_m = (np.zeros((p, p)) for _ in range(5))
    for j in range(p):
        cal = plans[j, j].calibrate(0.0, vmax[j])
        assert cal is not None  # the widest bounds hold >= 2 grid points (checked by _plan)
        out[j, j] = cal.release(np.array([s[j, j]]), gen)[0]
        eps_m[j, j], scale_m[j, j], sens_m[j, j] = plans[j, j].epsilon, cal.scale, cal.sensitivity
        lo_m[j, j], hi_m[j, j] = 0.0, vmax[j]
    degenerate = []
    notes = []
    for j, k in pairs[p:]:
        plan = plans[j, k]
        c = math.sqrt(out[j, j] * out[k, k])
        cal = plan.calibrate(-c, c)
        if cal is None:
            value, scale = 0.0, math.nan
            degenerate.append((j, k))
            why = (
                "a sanitized variance is 0"
                if c == 0
                else f"the interval [-{c:.3g}, {c:.3g}] holds a single grid point"
            )
            notes.append(
                f"S[{j},{k}]: {why}; released 0 without noise (its epsilon "
                f"{plan.epsilon:g} is charged all the same)"
            )
        else:
            value, scale = cal.release(np.array([s[j, k]]), gen)[0], cal.scale
        out[j, k] = out[k, j] = value
        for arr, v in (
            (eps_m, plan.epsilon),
            (scale_m, scale),
            (sens_m, plan.component_sensitivity),
            (lo_m, -c),
            (hi_m, c),
        ):
            arr[j, k] = arr[k, j] = v

    values, repaired = out, False
    if repair is not None and p > 1:
        corr = _correlation(out)
        fixed = nearest_correlation(corr) if repair == "higham" else clip_correlation(corr)
        sd = np.sqrt(np.diag(out))
        values = fixed * np.outer(sd, sd)
        np.fill_diagonal(values, np.diag(out))
        repaired = not np.allclose(values, out, rtol=0.0, atol=1e-12 * max(1.0, sd.max() ** 2))
        if not repaired:
            values = out
    return CovarianceRelease(
        values=_frozen(values),
        sanitized=_frozen(out),
        n=n,
        epsilon=eps,
        epsilon_charged=_total([c.epsilon_charged for c in charges]),
        charges=charges,
        epsilons=_frozen(eps_m),
        scales=_frozen(scale_m),
        sensitivities=_frozen(sens_m),
        lower=_frozen(lo_m),
        upper=_frozen(hi_m),
        method=method,
        calibration=calibration,
        neighbours=neighbours,
        repair=repair,
        degenerate=tuple(degenerate),
        repaired=repaired,
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------- proportions


def project_to_simplex(v: Any) -> np.ndarray:
    """Euclidean projection onto the probability simplex along the last axis.

    The sort-based algorithm of Duchi et al. (2008): ``w = max(v - theta, 0)`` with the
    ``theta`` that makes ``w`` sum to 1.

    Examples
    --------
    >>> project_to_simplex([0.6, 0.5, -0.1])
    array([0.55, 0.45, 0.  ])
    """
    x = np.asarray(v, dtype=np.float64)
    if x.ndim < 1 or x.shape[-1] < 1 or not np.isfinite(x).all():
        raise InvalidParameterError(
            "v must be a finite non-empty array (projected on its last axis)"
        )
    u = -np.sort(-x, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    j = np.arange(1, x.shape[-1] + 1)
    rho = np.sum(u - css / j > 0, axis=-1, keepdims=True)  # the condition holds for 1..rho
    theta = np.take_along_axis(css, rho - 1, axis=-1) / rho
    return np.maximum(x - theta, 0.0)


def consistent_tree(noisy: Sequence[Any], root: float = 1.0) -> list[np.ndarray]:
    """Hay et al. (2010) constrained inference on a binary tree with a fixed root.

    Parameters
    ----------
    noisy : sequence of array_like
        The noisy levels 1..L of a complete binary tree: ``noisy[l - 1]`` has ``2**l``
        nodes on its last axis, node ``i`` being the parent of ``2i`` and ``2i + 1`` of
        the next level (leading axes are a batch).
    root : float
        The root's known value (1 for proportions); it is not estimated.

    Returns
    -------
    list of ndarray
        Levels 1..L, consistent (each node is the sum of its children, level 1 sums
        to ``root``): the least-squares estimate ``argmin sum (h - noisy)**2`` over
        consistent trees (Hay et al. Theorem 3, the root fixed). Bottom-up, a node of
        height ``t`` (leaves: 1) gets ``z = (2**t - 2**(t-1)) / (2**t - 1) * noisy +
        (2**(t-1) - 1) / (2**t - 1) * sum(z of children)``; top-down, each child gets
        ``z + (parent - sum of z of the siblings) / 2``, ``parent`` the corrected value.

    Examples
    --------
    >>> levels = consistent_tree([[0.35, 0.55], [0.1, 0.2, 0.3, 0.4]])
    >>> [np.round(x, 4).tolist() for x in levels]
    [[0.3667, 0.6333], [0.1333, 0.2333, 0.2667, 0.3667]]
    """
    levels = [np.asarray(x, dtype=np.float64) for x in noisy]
    if not levels:
        raise InvalidParameterError("noisy must hold at least one level")
    for i, x in enumerate(levels, start=1):
        if x.ndim < 1 or x.shape[-1] != 2**i or not np.isfinite(x).all():
            raise InvalidParameterError(
                f"noisy[{i - 1}] must hold 2**{i} = {2**i} finite nodes on its last axis, "
                f"got shape {x.shape}"
            )
    depth = len(levels)
    z = [np.empty(0)] * depth
    z[-1] = levels[-1]
    for i in range(depth - 2, -1, -1):
        t = depth - i  # height of level i + 1 (the leaves have height 1)
        kids = z[i + 1].reshape(*z[i + 1].shape[:-1], -1, 2).sum(axis=-1)
        z[i] = ((2**t - 2 ** (t - 1)) * levels[i] + (2 ** (t - 1) - 1) * kids) / (2**t - 1)
    out = []
    parent = np.full((*levels[0].shape[:-1], 1), float(root))
    for zi in z:
        pairs = zi.reshape(*zi.shape[:-1], -1, 2)
        fixed = pairs + ((parent - pairs.sum(axis=-1)) / 2.0)[..., None]
        parent = fixed.reshape(zi.shape)
        out.append(parent)
    return out


def _proportions(p: Any) -> np.ndarray:
    x = _array("p", p, 1)
    if x.size < 2:
        raise InvalidParameterError(f"p must hold K >= 2 proportions, got {x.size}")
    if (x < -1e-12).any() or (x > 1 + 1e-12).any():
        raise InvalidParameterError("p must hold proportions in [0, 1]")
    if abs(x.sum() - 1.0) > 1e-9 * x.size:
        raise InvalidParameterError(
            f"p must sum to 1 (category proportions of the same records), sums to {x.sum()!r}"
        )
    return np.clip(x, 0.0, 1.0)


def _order(order: Any, k: int, strategy: str) -> tuple[int, ...]:
    if order is None:
        return tuple(range(k))
    if strategy == "rescale":
        raise InvalidParameterError(
            "order applies to strategy='all_but_one' (the one computed last) and "
            "'universal_histogram' (the leaf order); omit it for 'rescale'"
        )
    if isinstance(order, Integral) and not isinstance(order, bool):
        if strategy != "all_but_one":
            raise InvalidParameterError(
                "order must be a permutation of range(K) (the leaf order) for "
                "strategy='universal_histogram'"
            )
        last = int(order)
        if not 0 <= last < k:
            raise InvalidParameterError(f"order must be a category index in [0, {k}), got {last}")
        return (*(i for i in range(k) if i != last), last)
    try:
        seq = tuple(order)
    except TypeError:
        raise InvalidParameterError(
            f"order must be None, an int or a permutation of range({k}), got {order!r}"
        ) from None
    if any(isinstance(i, bool) or not isinstance(i, Integral) for i in seq) or sorted(
        int(i) for i in seq
    ) != list(range(k)):
        raise InvalidParameterError(f"order must be a permutation of range({k}), got {order!r}")
    return tuple(int(i) for i in seq)


def _check_granularity(granularity: Any) -> float | None:
    if granularity is None:
        return None
    if isinstance(granularity, bool) or not isinstance(granularity, Real):
        raise InvalidParameterError(f"granularity must be a number, got {granularity!r}")
    g = float(granularity)
    if not (0 < g <= 1) or math.frexp(g)[0] != 0.5:
        raise InvalidParameterError(
            f"granularity must be a power of two in (0, 1], got {granularity!r}"
        )
    return g


def release_proportions(
    p: Any,
    n: int,
    epsilon: float,
    *,
    strategy: str = "rescale",
    method: str = "truncated",
    calibration: str = "exact",
    neighbours: str = "substitute",
    order: Any = None,
    granularity: float | None = None,
    rng: np.random.Generator | None = None,
    charge: ChargeHook | None = None,
) -> ProportionsRelease:
    """Release ``K`` proportions in ``[0, 1]`` that sum to 1 (Simulation study 2).

    One record changes the vector by at most ``2/n`` in l1
    (:func:`dpframe.core.sensitivity.histogram_proportions`, both relations; the paper used
    ``1/n``) and each proportion by at most ``1/n``
    (:func:`dpframe.core.sensitivity.proportion`). Under ``"substitute"`` it changes 2
    components; under ``"add_remove"`` all ``K``. The calibration covers both (module
    docstring): under substitution each proportion is ``epsilon/2``-DP at ``1/n``; under
    add/remove the concave bound ``K f(min(D, T/K))`` uses the total ``2/n``.

    Parameters
    ----------
    p : array_like, shape (K,)
        The sample proportions (``K >= 2``, each in ``[0, 1]``, summing to 1).
    n : int
        Number of records (public, ``>= 1``).
    epsilon : float
        Total budget.
    strategy : {"rescale", "all_but_one", "universal_histogram"}
        ``"rescale"``: sanitize each proportion in ``[0, 1]``, divide by the sum (the
        uniform vector if the sum is 0). ``"all_but_one"``: sanitize ``K - 1``
        proportions in turn, ``q_i`` in ``[0, 1 - (sum of those released before)]``
        (Remark 1), the last is ``1 - sum``. ``"universal_histogram"``: a binary tree
        over the ``K`` categories (``K`` a power of 2), root fixed at 1, each of the
        ``log2 K`` levels sanitized at ``epsilon / log2 K``, then
        :func:`consistent_tree` and :func:`project_to_simplex` on the leaves.
    method : {"truncated", "bit"}
    calibration : {"exact", "paper"}
        ``"paper"``: the scale ``2 / (n epsilon_level)`` (the paper's rule with the
        corrected sensitivity); truncation is then charged its true loss.
    neighbours : {"substitute", "add_remove"}
    order : int or sequence of int, optional
        ``"all_but_one"``: the category computed last (an int; the paper: ``0``, its
        ``p_1``) or the full order of sanitization. ``"universal_histogram"``: the
        categories in leaf order (siblings are ``order[0:2]``, ``order[2:4]``, ...).
    granularity : float, optional
        Grid step, a power of two; default ``min(1/n, 1) / 1024`` rounded down.
    rng : numpy.random.Generator, optional
        Default :func:`dpframe.core.randomness.secure_generator`.
    charge : callable, optional
        Called with the list of :class:`~dpframe.core.accountant.Charge` before any noise is
        drawn (e.g. ``accountant.spend_all``).

    Returns
    -------
    ProportionsRelease

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> r = release_proportions([0.1, 0.2, 0.3, 0.4], 500, 1.0, strategy="all_but_one",
    ...                         order=0, rng=rng)
    >>> bool(r.values.min() >= 0 and abs(r.values.sum() - 1) < 1e-12), r.epsilon_charged
    (True, 1.0)
    """
    eps = check_epsilon(epsilon)
    check_choice("strategy", strategy, STRATEGIES)
    check_choice("method", method, METHODS)
    check_choice("calibration", calibration, CALIBRATIONS)
    check_choice("neighbours", neighbours, NEIGHBOURS)
    x = _proportions(p)
    k_cat = x.size
    l1 = _sens.histogram_proportions(n, neighbours)
    delta = _sens.proportion(n, neighbours)
    n = int(n)
    g_user = _check_granularity(granularity)
    perm = _order(order, k_cat, strategy)
    sub = neighbours == "substitute"

    if strategy == "universal_histogram":
        depth = k_cat.bit_length() - 1
        if 2**depth != k_cat:
            raise InvalidParameterError(
                f"strategy='universal_histogram' needs K a power of 2 (a complete binary "
                f"tree), got K = {k_cat}; pad p with zero categories or use 'rescale'"
            )
        level_eps = _split_epsilon(eps, [1.0] * depth)
        groups = [(level_eps[i], 2 ** (i + 1)) for i in range(depth)]
    elif strategy == "all_but_one":
        groups = [(eps, k_cat - 1)]
    else:
        groups = [(eps, k_cat)]
    ks = [min(2, size) if sub else size for _, size in groups]
    g = g_user
    if g is None:
        g = min(
            _choose_granularity(delta, 0.0, 1.0, e, kk)
            for (e, _), kk in zip(groups, ks, strict=True)
        )
    plans = [
        _plan(method, calibration, e, delta, l1, size, kk, 0.0, 1.0, g)
        for (e, size), kk in zip(groups, ks, strict=True)
    ]
    how = (
        "substitution changes 2 components by 1/n each"
        if sub
        else "add/remove changes every component, by 2/n in total"
    )
    if strategy == "universal_histogram":
        charges = tuple(
            plan.charge(f"level {i + 1}", f"tree level {i + 1} ({2 ** (i + 1)} nodes): {how}")
            for i, plan in enumerate(plans)
        )
    elif strategy == "all_but_one":
        charges = (
            plans[0].charge(
                "p",
                f"K - 1 = {k_cat - 1} proportions in turn, bounds tightened by those "
                f"released before: {how}",
                bounds_fixed=False,
            ),
        )
    else:
        charges = (plans[0].charge("p", f"K = {k_cat} proportions in [0, 1]: {how}"),)
    if charge is not None:
        charge(_ledger(charges))
    gen = _rng(rng)

    common = {
        "n": n,
        "strategy": strategy,
        "epsilon": eps,
        "epsilon_charged": _total([c.epsilon_charged for c in charges]),
        "charges": charges,
        "granularity": g,
        "method": method,
        "calibration": calibration,
        "neighbours": neighbours,
    }
    if strategy == "rescale":
        cal = plans[0].calibrate(0.0, 1.0)
        assert cal is not None
        q = cal.release(x, gen)
        total = q.sum()
        degenerate = bool(total == 0)
        values = np.full(k_cat, 1.0 / k_cat) if degenerate else q / total
        notes = ("every sanitized proportion was 0: released the uniform vector",) * degenerate
        return ProportionsRelease(
            values=_frozen(values),
            sanitized=_frozen(q),
            scales=_frozen(np.full(k_cat, cal.scale)),
            order=None,
            degenerate=bool(degenerate),
            notes=notes,
            **common,
        )
    if strategy == "all_but_one":
        return _all_but_one(x, plans[0], perm, gen, common)
    return _universal_histogram(x, plans, perm, gen, common)


def _all_but_one(
    x: np.ndarray, plan: _Plan, perm: tuple[int, ...], gen: np.random.Generator, common: dict
) -> ProportionsRelease:
    k_cat = x.size
    values = np.zeros(k_cat)
    scales = np.full(k_cat, math.nan)
    room = 1.0  # a multiple of the grid step: every released value is one
    notes = []
    for i in perm[:-1]:
        cal = plan.calibrate(0.0, room)
        if cal is None:  # no room left: the interval [0, 0]
            notes.append(f"p[{i}]: nothing left of the total, released 0 without noise")
            continue
        values[i] = cal.release(np.array([x[i]]), gen)[0]
        scales[i] = cal.scale
        room -= values[i]
    values[perm[-1]] = room
    return ProportionsRelease(
        values=_frozen(values),
        sanitized=_frozen(values),
        scales=_frozen(scales),
        order=perm,
        degenerate=bool(notes),
        notes=tuple(notes),
        **common,
    )


def _universal_histogram(
    x: np.ndarray,
    plans: list[_Plan],
    perm: tuple[int, ...],
    gen: np.random.Generator,
    common: dict,
) -> ProportionsRelease:
    leaves = x[list(perm)]
    true_levels = [leaves]
    while true_levels[0].size > 2:
        true_levels.insert(0, true_levels[0].reshape(-1, 2).sum(axis=1))
    noisy = []
    level_scales = []
    for plan, level in zip(plans, true_levels, strict=True):
        cal = plan.calibrate(0.0, 1.0)
        assert cal is not None
        noisy.append(cal.release(level, gen))
        level_scales.append(cal.scale)
    fitted = consistent_tree(noisy, root=1.0)
    projected = project_to_simplex(fitted[-1])
    notes = []
    if (fitted[-1] < 0).any() or (fitted[-1] > 1).any():
        notes.append(
            "the least-squares leaves left [0, 1]; projected onto the simplex (Duchi et al. 2008)"
        )
    tree = [projected]
    while tree[0].size > 1:
        tree.insert(0, tree[0].reshape(-1, 2).sum(axis=1))
    tree[0] = np.ones(1)
    values = np.empty_like(x)
    values[list(perm)] = projected
    raw = np.empty_like(x)
    raw[list(perm)] = noisy[-1]
    return ProportionsRelease(
        values=_frozen(values),
        sanitized=_frozen(raw),
        scales=_frozen(np.full(x.size, level_scales[-1])),
        order=perm,
        tree=tuple(_frozen(t) for t in tree),
        noisy_tree=tuple(_frozen(t) for t in noisy),
        notes=tuple(notes),
        **common,
    )


# ---------------------------------------------------------------- multiple synthesis


def multiple_synthesis(
    release: Callable[[float, np.random.Generator], Any],
    m: int,
    epsilon: float,
    *,
    rng: np.random.Generator | None = None,
) -> MultipleSynthesis:
    """Run ``m`` independent releases at ``epsilon / m`` each (sequential composition).

    Parameters
    ----------
    release : callable ``(epsilon, rng) -> result``
        One release at the budget it is given, drawing from ``rng``. If its result has
        ``epsilon`` it must not exceed the budget given; if it has ``epsilon_charged``
        that is what is counted (e.g. truncation at the paper's scale charges more).
    m : int
        Number of releases (``>= 2``).
    epsilon : float
        Total budget.
    rng : numpy.random.Generator, optional
        Passed to every release (one stream: the releases' noise is independent).

    Returns
    -------
    MultipleSynthesis

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> ms = multiple_synthesis(
    ...     lambda e, g: release_proportions([0.2, 0.8], 400, e, method="bit", rng=g),
    ...     5, 1.0, rng=rng)
    >>> ms.epsilon_per_release, ms.epsilon_charged, ms.estimates().shape
    (0.2, 1.0, (5, 2))
    """
    if not callable(release):
        raise InvalidParameterError(
            f"release must be a callable (epsilon, rng) -> result, got {type(release).__name__}"
        )
    m = _int("m", m, 2, "multiple synthesis combines at least two releases")
    eps = check_epsilon(epsilon)
    each = min(_split_epsilon(eps, [1.0] * m))
    gen = _rng(rng)
    results = []
    charged = []
    for i in range(m):
        r = release(each, gen)
        used = getattr(r, "epsilon", None)
        if isinstance(used, Real) and float(used) > each:
            raise InvalidParameterError(
                f"release #{i} used epsilon={used!r}, more than the {each!r} it was given; "
                "pass the epsilon argument through to the release"
            )
        got = getattr(r, "epsilon_charged", each)
        charged.append(float(got) if isinstance(got, Real) else each)
        results.append(r)
    return MultipleSynthesis(
        releases=tuple(results),
        m=m,
        epsilon=eps,
        epsilon_per_release=each,
        charged_per_release=tuple(charged),
        epsilon_charged=_total(charged),
    )


def combine_synthesis(
    estimates: Any, within_variances: Any = None, level: float = 0.95
) -> CombinedEstimate:
    """Combine ``m`` releases of an estimate: point estimate, variance and t interval.

    With ``q_l = q_hat + e_l`` (the same sample estimate plus independent sanitization
    noise of variance ``sigma**2``), ``q_bar - Q = (q_hat - Q) + mean(e)`` has variance
    ``W + sigma**2 / m``. So ``q_bar`` = mean of the estimates, ``B`` = their sample
    variance (estimates ``sigma**2``), ``W_bar`` = mean within (sampling) variance,
    ``T = W_bar + B / m``, and a t reference with Satterthwaite's
    ``nu = (m - 1) (1 + m W_bar / B)**2`` degrees of freedom (``W_bar`` taken as known,
    ``B`` with ``m - 1``). This is the rule Liu (2017) uses for DP multiple synthesis
    (Reiter's 2003 rule for partially synthetic data).

    Parameters
    ----------
    estimates : array_like, shape (m, ...)
        The ``m >= 2`` released estimates (first axis); further axes are estimated
        separately.
    within_variances : array_like, shape (m, ...), optional
        Each release's estimate of the sampling variance of its estimate. Omitted:
        ``W_bar = 0``, and the interval is for the sample value ``q_hat``, not for a
        population parameter.
    level : float
        Confidence level in (0, 1).

    Returns
    -------
    CombinedEstimate
        ``df`` is ``inf`` (normal reference) where ``B = 0``.

    Examples
    --------
    >>> c = combine_synthesis([0.50, 0.54, 0.46, 0.52, 0.48], [0.001] * 5)
    >>> round(c.estimate, 3), round(c.between, 4), round(c.total_variance, 4)
    (0.5, 0.001, 0.0012)
    >>> round(c.df, 2)
    144.0
    """
    from scipy import stats

    q = np.asarray(estimates, dtype=np.float64)
    if q.ndim < 1 or q.shape[0] < 2 or not np.isfinite(q).all():
        raise InvalidParameterError(
            "estimates must be a finite array with m >= 2 releases on its first axis, got "
            f"shape {q.shape}"
        )
    m = q.shape[0]
    if within_variances is None:
        w = np.zeros(q.shape[1:])
    else:
        u = np.asarray(within_variances, dtype=np.float64)
        if u.shape != q.shape or not np.isfinite(u).all() or (u < 0).any():
            raise InvalidParameterError(
                f"within_variances must be finite, >= 0 and shaped like estimates {q.shape}, "
                f"got shape {u.shape}"
            )
        w = u.mean(axis=0)
    lev = float(level) if isinstance(level, Real) and not isinstance(level, bool) else math.nan
    if not 0.0 < lev < 1.0:
        raise InvalidParameterError(f"level must be a number in (0, 1), got {level!r}")
    qbar = q.mean(axis=0)
    b = q.var(axis=0, ddof=1)
    t_var = w + b / m
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(b > 0, (m - 1) * (1.0 + m * w / np.where(b > 0, b, 1.0)) ** 2, np.inf)
    half = stats.t.ppf(0.5 + lev / 2.0, df) * np.sqrt(t_var)

    def out(a: np.ndarray) -> Any:
        return float(a) if np.ndim(a) == 0 else _frozen(a)

    return CombinedEstimate(
        estimate=out(qbar),
        between=out(b),
        within=out(w),
        total_variance=out(t_var),
        df=out(df),
        lower=out(qbar - half),
        upper=out(qbar + half),
        level=lev,
        m=m,
    )
