"""Multiple synthesis: ``m`` independent releases at ``epsilon / m`` each, and their
combination for inference (Liu 2017; Reiter 2003).

:func:`plan_multiple_synthesis` wraps any kernel plan (:mod:`dpframe.core.executor`):
the synthesis is charged ``m`` times what one release's plan charges -- computed from
the plans, never read from what a release returns -- and draws the plan ``m`` times.
:func:`combine_synthesis` is the combining rule.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.proportions import plan_proportions
>>> from dpframe.mechanisms.synthesis import multiple_synthesis
>>> ms = multiple_synthesis(
...     lambda e: plan_proportions(2, 400, e, method="bit"), [0.2, 0.8], 5, 1.0,
...     rng=np.random.default_rng(3))
>>> ms.epsilon_per_release, ms.epsilon_charged, ms.estimates().shape
(0.2, 1.0, (5, 2))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.budget import exact_sum, split_epsilon
from dpframe.core.constraints import check_epsilon, check_int, check_number_array
from dpframe.core.executor import MechanismPlan, summary_row
from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.components import as_generator, frozen

__all__ = [
    "CombinedEstimate",
    "SynthesisPlan",
    "SynthesisResult",
    "combine_synthesis",
    "multiple_synthesis",
    "plan_multiple_synthesis",
]


@dataclass(frozen=True)
class SynthesisResult:
    """``m`` independent releases, each at ``epsilon / m``.

    Attributes
    ----------
    releases : tuple
        The ``m`` draws of the plan, in order.
    epsilon_per_release : float
        Budget given to each release (``m`` of them add up to at most ``epsilon``).
    charged_per_release : tuple of float
        What each release is charged, from its plan's charges (never from its result).
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


@dataclass(frozen=True)
class SynthesisPlan:
    """``m`` draws of one kernel plan made at ``epsilon / m`` (sequential composition)."""

    plan: MechanismPlan
    m: int
    epsilon: float
    each: float

    @property
    def charges(self) -> tuple[Charge, ...]:
        out = []
        for i in range(self.m):
            for c in self.plan.charges:
                note = f"multiple synthesis, release {i + 1} of {self.m}"
                out.append(
                    Charge(
                        epsilon=c.epsilon,
                        delta=c.delta,
                        mechanism=c.mechanism,
                        columns=c.columns,
                        scale=c.scale,
                        composition="sequential",
                        note=f"{note}; {c.note}" if c.note else note,
                        details={**c.details, "synthesis": i + 1, "m": self.m},
                    )
                )
        return tuple(out)

    @property
    def charged_per_release(self) -> float:
        return float(exact_sum(c.epsilon for c in self.plan.charges))

    def summary(self) -> list[dict[str, Any]]:
        rows = []
        for r in self.plan.summary():
            note = f"x {self.m} releases" + (f"; {r['note']}" if r["note"] else "")
            rows.append(
                summary_row(
                    r["statistic"],
                    r["mechanism"],
                    float(exact_sum([r["epsilon"]] * self.m)),
                    delta=r["delta"],
                    sensitivity=r["sensitivity"],
                    scale=r["scale"],
                    error95=r["error95"],
                    note=note,
                )
            )
        return rows

    def check(self, exact: Any) -> None:
        self.plan.check(exact)

    def draw(self, exact: Any, rng: np.random.Generator) -> SynthesisResult:
        releases = tuple(self.plan.draw(exact, rng) for _ in range(self.m))
        each = self.charged_per_release
        return SynthesisResult(
            releases=releases,
            m=self.m,
            epsilon=self.epsilon,
            epsilon_per_release=self.each,
            charged_per_release=(each,) * self.m,
            epsilon_charged=float(exact_sum([each] * self.m)),
        )


def plan_multiple_synthesis(
    make_plan: Callable[[float], MechanismPlan], m: int, epsilon: float
) -> SynthesisPlan:
    """Plan ``m`` releases of ``make_plan(epsilon / m)`` (their decimal sum fits ``epsilon``).

    ``make_plan`` returns a kernel plan (e.g. ``lambda e: plan_proportions(k, n, e)``);
    what the synthesis charges comes from that plan's charges.
    """
    if not callable(make_plan):
        raise InvalidParameterError(
            f"make_plan must be a callable epsilon -> plan, got {type(make_plan).__name__}"
        )
    m = check_int("m", m, 2, "multiple synthesis combines at least two releases")
    eps = check_epsilon(epsilon)
    each = min(split_epsilon(eps, [1.0] * m))
    plan = make_plan(each)
    if not all(hasattr(plan, a) for a in ("charges", "check", "draw", "summary")):
        raise InvalidParameterError(
            "make_plan must return a kernel plan (with charges, summary, check and draw), "
            f"got {type(plan).__name__}"
        )
    return SynthesisPlan(plan, m, eps, each)


def multiple_synthesis(
    make_plan: Callable[[float], MechanismPlan],
    exact: Any,
    m: int,
    epsilon: float,
    *,
    rng: np.random.Generator | None = None,
) -> SynthesisResult:
    """Run ``m`` independent releases of ``exact`` at ``epsilon / m`` each (no accountant).

    Parameters
    ----------
    make_plan : callable ``epsilon -> plan``
        The release to repeat, as a kernel plan made at the budget it is given.
    exact : any
        The exact input of that plan.
    m : int
        Number of releases (``>= 2``).
    epsilon : float
        Total budget.
    rng : numpy.random.Generator, optional
        One stream for all the releases (their noise is independent); default secure.

    Returns
    -------
    SynthesisResult
    """
    plan = plan_multiple_synthesis(make_plan, m, epsilon)
    plan.check(exact)
    return plan.draw(exact, as_generator(rng))


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

    q = check_number_array("estimates", estimates)
    if q.ndim < 1 or q.shape[0] < 2 or not np.isfinite(q).all():
        raise InvalidParameterError(
            "estimates must be a finite array with m >= 2 releases on its first axis, got "
            f"shape {q.shape}"
        )
    m = q.shape[0]
    if within_variances is None:
        w = np.zeros(q.shape[1:])
    else:
        u = check_number_array("within_variances", within_variances)
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
        return float(a) if np.ndim(a) == 0 else frozen(a)

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
