"""A PRAM release as a kernel plan: what it charges, how it checks, how it draws.

:func:`plan_pram` turns a PRAM column's parameters (categories, epsilon, a prior or a
matrix) into the plan the executor (:mod:`dpframe.core.executor`) runs:

* ``charges`` -- always derived from the matrix that will be sampled: the charge is
  ``charge_for(sampler.epsilon_actual, epsilon)``, where ``epsilon_actual`` is
  re-derived from the sampler's integers (:mod:`~dpframe.mechanisms.pram.sampling`).
  A design or matrix handed in (a :class:`PramDesign`, a dict read from a ledger or a
  file) is never trusted for its epsilon; a matrix whose epsilon exceeds the one asked
  for is refused.
* ``check(counts)`` -- the column's count per declared category (an engine computed
  them, refusing nulls and values outside the categories);
* ``draw(counts, rng)`` -- arms the release: returns the :class:`ArmedPram` that
  randomizes record batches (each batch with a freshly keyed generator). With
  ``prior="dp"`` this is where the DP histogram is drawn and the design chosen.

PRAM protects values, not presence: every plan requires substitute neighbours.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.pram.plan import plan_pram
>>> plan = plan_pram("region", ["N", "S", "E"], epsilon=1.0)
>>> plan.charges[0].epsilon, plan.charges[0].mechanism
(1.0, 'pram')
>>> armed = plan.draw(np.array([5, 3, 2]), np.random.default_rng(0))
>>> armed.randomize(np.array([0, 1, 2]), np.random.default_rng(1)).shape
(3,)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.core.accountant import Charge
from dpframe.core.budget import charge_for, split_epsilon
from dpframe.core.constraints import (
    check,
    check_categories,
    check_epsilon,
)
from dpframe.core.executor import summary_row
from dpframe.core.frozen import frozen_array
from dpframe.core.neighbours import require_substitute
from dpframe.core.units import RECORD, PrivacyUnit, per_row_epsilon, pram_rows
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.accuracy import pram_share_error
from dpframe.mechanisms.laplace import calibrate_laplace, release_laplace
from dpframe.mechanisms.pram.cyclic import CYCLIC_MAX_CATEGORIES, CyclicDesign, cyclic_design
from dpframe.mechanisms.pram.optimum import (
    MAX_EPSILON,
    PramDesign,
    _check_design_epsilon,
    dominance_cost,
    krr,
    mutual_information,
)
from dpframe.mechanisms.pram.optimum import design as paper_design
from dpframe.mechanisms.pram.sampling import (
    PramSampler,
    check_matrix,
    sampler,
    staircase_sampler,
)
from dpframe.mechanisms.pram.staircase import GlobalDesign, check_estimable, global_design

__all__ = [
    "ArmedPram",
    "DPPriorPramPlan",
    "PramPlan",
    "PriorPlan",
    "design_from_record",
    "design_record",
    "global_record",
    "plan_dp_prior",
    "plan_pram",
    "prior_weights",
]


# -- parameters ---------------------------------------------------------------------------


def prior_weights(prior: Any, cats: tuple[Any, ...]) -> np.ndarray:
    """A public prior (dict or array aligned with ``cats``) as probabilities."""
    if isinstance(prior, Mapping):
        unknown = [k for k in prior if k not in set(cats)]
        if unknown:
            raise InvalidParameterError(
                f"prior has keys that are not categories: {unknown[:5]}; the prior must be "
                "over the declared categories"
            )
        missing = [c for c in cats if c not in prior]
        if missing:
            raise InvalidParameterError(
                f"prior gives no weight for categories {missing[:5]}; give every category "
                "a weight (0 is allowed)"
            )
        values = [prior[c] for c in cats]
    else:
        values = prior
    try:  # numbers only: np.asarray would turn "0.5" into 0.5
        values = np.asarray(values)
        if values.dtype.kind not in "iuf":
            raise TypeError
        w = values.astype(np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            "prior must be 'uniform', 'dp', a dict {category: weight} or an array of "
            f"weights (numbers) aligned with categories; got {prior!r:.80}"
        ) from None
    if not isinstance(prior, Mapping) and w.shape != (len(cats),):
        raise InvalidParameterError(
            f"prior has shape {w.shape} but there are {len(cats)} categories; align the "
            "weights with categories= (or pass a dict)"
        )
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise InvalidParameterError(
            "prior weights must be finite, >= 0 and not all 0 (they are normalised to sum to 1)"
        )
    return w / w.sum()


# -- records (ledger entries and Parquet provenance) --------------------------------------


def design_record(d: PramDesign, cats: tuple[Any, ...], prior: str) -> dict[str, Any]:
    """The design as the ledger and the released file record it (for estimation)."""
    out = {
        "design": "paper",
        "categories": list(cats),
        "q": [float(v) for v in d.q],
        "bits": int(d.bits),
        "epsilon": float(d.epsilon),
        "epsilon_actual": float(d.epsilon_actual),
        "mutual_information": float(d.mutual_information),
        "diagonal": d.diagonal,
        "estimable_margin": float(d.estimable_margin),
        "estimable": bool(d.estimable),
        "prior": prior,
        "prior_p": [float(v) for v in d.p],
        "vertex_q": [float(v) for v in d.vertex_q],
    }
    if d.diagonal == "dominant":  # what q >= 1/S costs, for the record
        out["mutual_information_unconstrained"] = dominance_cost(d)["unconstrained"]
    return out


def design_from_record(d: Mapping[str, Any]) -> PramDesign:
    """Rebuild the design recorded in a ledger entry or Parquet provenance.

    The record keeps the sampled ``q`` exactly (``1 - c / 2**bits``), the prior and the
    categories, so a released file can be analysed with ``dpframe.pram.estimate``
    alone. The record's ``epsilon_actual`` is *not* read: the design's epsilon is
    derived again from ``q`` and ``bits``; nor is its ``estimable``: that is derived
    from ``q`` too (:attr:`PramDesign.estimable`).

    Examples
    --------
    >>> import os, tempfile, polars as pl, dpframe
    >>> path = os.path.join(tempfile.mkdtemp(), "released.parquet")
    >>> with dpframe.Accountant(epsilon=1.0):
    ...     query = pl.LazyFrame({"x": [0, 1, 2, 1]}).select(
    ...         pl.col("x").dp.pram(0.5, categories=[0, 1, 2])
    ...     )
    ...     _ = dpframe.sink_parquet(query, path)
    >>> entry = dpframe.read_provenance(path).entries[0]
    >>> design = dpframe.pram.design_from_dict(entry.details["design"])  # the file alone
    >>> design.matrix.shape
    (3, 3)
    """
    try:
        q = np.asarray(d["q"], dtype=np.float64)
        bits = int(d["bits"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidParameterError(f"a PRAM design record needs q and bits: {exc}") from None
    if q.ndim != 1 or q.size < 2 or not np.isfinite(q).all() or not 1 <= bits <= 62:
        raise InvalidParameterError("a PRAM design record needs a finite q of length >= 2")
    c = np.rint((1.0 - q) * float(1 << bits)).astype(np.int64)
    p = np.asarray(d.get("prior_p", np.full(q.size, 1.0 / q.size)), dtype=np.float64)
    vertex = np.asarray(d.get("vertex_q", q), dtype=np.float64)
    c, p, vertex = (frozen_array(a) for a in (c, p, vertex))
    levels, counts = np.unique(vertex, return_counts=True)
    return PramDesign(
        p=p,
        epsilon=float(d.get("epsilon", math.nan)),
        mutual_information=float(d.get("mutual_information", math.nan)),
        diagonal=str(d.get("diagonal", "optimal")),
        vertex_q=vertex,
        levels=tuple(float(v) for v in levels[::-1]),
        level_counts=tuple(int(k) for k in counts[::-1]),
        bits=bits,
        move_numerators=c,
        estimable_margin=float(d.get("estimable_margin", 0.0)),
    )


def _invertible(m: np.ndarray) -> bool:
    """Whether shares can be estimated from a release of ``m`` (:func:`check_estimable`)."""
    try:
        check_estimable(m)
    except InvalidParameterError:
        return False
    return True


def _plan_global(
    p: np.ndarray, epsilon: float, cats: tuple[Any, ...], estimable: bool | float, column: str
) -> tuple[GlobalDesign, PramSampler]:
    """The global MI optimum for ``p`` and its exact sampler; refused (before any charge)
    when ``estimable`` asks for an invertible matrix and the optimum is not one."""
    try:
        g = global_design(p, epsilon)
        sam = staircase_sampler(g.matrix, epsilon)
    except (RuntimeError, ValueError) as exc:  # a solver failure (an InvalidParameterError
        # is a ValueError too): refused here, before any charge
        raise InvalidParameterError(
            f"column {column!r}: design='global' could not be computed for this prior and "
            f"epsilon ({exc}); use design='paper'"
        ) from None
    if estimable is not False and not _invertible(sam.matrix):
        never = [cats[i] for i in g.unused]
        why = (
            f"it releases only {g.n_outputs} of the {len(cats)} categories (never "
            f"{never[:5]}{'...' if len(never) > 5 else ''})"
            if never
            else "its matrix is singular"
        )
        raise InvalidParameterError(
            f"column {column!r}: design='global' (the MI optimum over every epsilon-DP "
            f"matrix) cannot be inverted here: {why}, so category shares could not be "
            "estimated from the release. Pass estimable=False to release it anyway, or "
            "design='paper' (the paper's family, estimable by default)"
        )
    return g, sam


#: Largest S for design="variance": a local optimiser (2 s at S = 10, more than 30 s at
#: S = 20; benchmarks/bench_pram_variance.py)
VARIANCE_MAX_CATEGORIES = 12


@functools.lru_cache(maxsize=64)
def _cyclic_design(s: int, epsilon: float) -> CyclicDesign:
    """:func:`~dpframe.mechanisms.pram.cyclic.cyclic_design`, once per S and epsilon (it is
    deterministic and holds no arrays; a plan is often built twice, to summarize and to
    release)."""
    return cyclic_design(s, epsilon)


def _plan_variance(
    p: np.ndarray, epsilon: float, cats: tuple[Any, ...], column: str
) -> tuple[Any, PramSampler]:
    """The least-variance design found for ``p`` and its exact sampler (before any charge)."""
    from dpframe.mechanisms.pram.variance import variance_design, variance_sampler

    if len(cats) > VARIANCE_MAX_CATEGORIES:
        raise InvalidParameterError(
            f"column {column!r}: design='variance' is offered for at most "
            f"{VARIANCE_MAX_CATEGORIES} categories (a local optimiser; {len(cats)} would take "
            "minutes); use design='paper' or prior='uniform' (k-RR)"
        )
    try:
        d = variance_design(p, epsilon)
        sam = variance_sampler(d)
    except (RuntimeError, ArithmeticError, np.linalg.LinAlgError) as exc:  # before any charge
        raise InvalidParameterError(
            f"column {column!r}: design='variance' failed for this prior and epsilon ({exc}); "
            "use the default design='auto'"
        ) from None
    if not _invertible(sam.matrix):  # estimate() would refuse it: refuse it now, uncharged
        raise InvalidParameterError(
            f"column {column!r}: design='variance' gives a matrix too ill-conditioned to "
            f"estimate from at epsilon={epsilon!r}; use the default design='auto'"
        )
    return d, sam


def _auto_estimates(design: str, estimable: bool | float, diagonal: str) -> bool:
    """Whether ``design="auto"`` takes the estimation criterion (:func:`_plan_auto`): the
    release is for estimation (``estimable`` not False) and the paper's family is not
    asked for by its own constraint (``diagonal="dominant"``). Otherwise "auto" is the
    paper's design (k-RR for a uniform prior), the MI criterion."""
    return design == "auto" and estimable is not False and diagonal == "optimal"


def _plan_auto(
    p: np.ndarray, epsilon: float, estimable: bool | float, uniform: bool
) -> tuple[Any, PramSampler, dict[str, Any]]:
    """``design="auto"`` for a release that will be used for estimation: the candidate
    with the least estimation risk at the prior (``n E||p_hat - p||^2``,
    :func:`~dpframe.mechanisms.pram.variance.estimation_risk`), as sampled.

    The candidates are k-RR, the paper's estimable design (a non-uniform prior) and the
    cyclic design (:mod:`~dpframe.mechanisms.pram.cyclic`, for ``3 <= S <=
    CYCLIC_MAX_CATEGORIES`` when it is not k-RR itself and ``estimate`` accepts its
    sampled matrix). Each is built in at most about two
    seconds, deterministically. Ties go to k-RR, then the paper's design. Returns the
    design, its exact sampler and the selection as recorded (every candidate's risk).
    """
    from dpframe.mechanisms.pram.variance import estimation_risk

    s = p.size
    k = krr(s, epsilon)
    if not uniform:  # k-RR's matrix, recorded at the prior it was chosen for
        pv = frozen_array(p)
        k = dataclasses.replace(k, p=pv, mutual_information=mutual_information(pv, k.q))
    candidates: dict[str, tuple[Any, PramSampler]] = {"krr": (k, k.sampler)}
    if not uniform:
        d = paper_design(p, epsilon, estimable=estimable)
        candidates["paper"] = (d, d.sampler)
    if 3 <= s <= CYCLIC_MAX_CATEGORIES and epsilon <= MAX_EPSILON:
        c = _cyclic_design(s, epsilon)
        if c.block > 1:  # block 1 is k-RR
            c = dataclasses.replace(c, p=tuple(float(v) for v in p))
            sam = staircase_sampler(c.matrix, epsilon)
            if _invertible(sam.matrix):  # what estimate() accepts (cond < 1e9): at epsilon
                candidates["cyclic"] = (c, sam)  # near 1e-9 it may not be
    risks = {name: estimation_risk(p, sam.matrix) for name, (_, sam) in candidates.items()}
    chosen = min(risks, key=lambda name: risks[name])  # first of equals: k-RR, the paper's
    selection = {
        "rule": "auto: least n E|p_hat - p|^2 at the prior, as sampled",
        "chosen": chosen,
        "risks": {name: (r if math.isfinite(r) else None) for name, r in risks.items()},
    }
    design, sam = candidates[chosen]
    return design, sam, selection


def variance_record(d: Any, sam: PramSampler, cats: tuple[Any, ...], prior: str) -> dict[str, Any]:
    """A least-variance design as the ledger and the released file record it."""
    from dpframe.mechanisms.pram.variance import estimation_risk

    m = sam.matrix
    return {
        "design": "variance",
        "categories": list(cats),
        "matrix": m.tolist(),
        "epsilon": float(d.epsilon),
        "epsilon_actual": float(sam.epsilon_actual),
        "risk": estimation_risk(d.p, m),  # n E||p_hat - p||^2 at the prior, as sampled
        "risk_krr": float(d.krr_risk),
        "risk_paper": float(d.paper_risk),
        "method": d.method,
        "mutual_information": float(mutual_information(d.p, m)),
        "prior": prior,
        "prior_p": [float(v) for v in d.p],
    }


def cyclic_record(
    c: CyclicDesign, sam: PramSampler, cats: tuple[Any, ...], prior: str
) -> dict[str, Any]:
    """A cyclic design as the ledger and the released file record it.

    ``matrix`` is the matrix actually sampled (from its integers); ``subset`` the offsets
    ``D`` (row ``i`` releases category ``i + D (mod S)`` with weight ``e^epsilon``).
    """
    from dpframe.mechanisms.pram.variance import estimation_risk

    m = sam.matrix
    p = np.full(len(cats), 1.0 / len(cats)) if c.p is None else np.asarray(c.p)
    return {
        "design": "cyclic",
        "categories": list(cats),
        "matrix": m.tolist(),
        "epsilon": float(c.epsilon),
        "epsilon_actual": float(sam.epsilon_actual),
        "subset": list(c.subset),
        "block": c.block,
        "risk_constant": float(c.r),  # n E|p_hat - p|^2 = risk_constant - |p|^2, any p
        "risk_constant_krr": float(c.krr_r),
        "risk_constant_bound": float(c.bound),  # no cyclic design does better
        "risk": estimation_risk(p, m),  # n E|p_hat - p|^2 at the prior, as sampled
        "mutual_information": float(mutual_information(p, m)),
        "prior": prior,
        "prior_p": [float(v) for v in p],
    }


def global_record(
    g: GlobalDesign, sam: PramSampler, cats: tuple[Any, ...], prior: str
) -> dict[str, Any]:
    """A global design as the ledger and the released file record it.

    ``matrix`` is the matrix actually sampled (from its integers); ``labels`` the
    category each of the optimum's outputs is released as, ``never_released`` the
    categories no output is labelled with; ``mutual_information`` is the sampled
    matrix's, ``upper_bound`` the certificate that no epsilon-DP matrix does better.
    """
    m = sam.matrix
    mi = mutual_information(g.p, m)
    bound = float(g.upper_bound) if math.isfinite(g.upper_bound) else None
    return {
        "design": "global",
        "categories": list(cats),
        "matrix": m.tolist(),
        "epsilon": float(g.epsilon),
        "epsilon_actual": float(sam.epsilon_actual),
        "mutual_information": float(mi),
        "upper_bound": bound,  # None: no finite certificate was found
        "gap": None if bound is None else max(bound - mi, 0.0),
        "method": g.method,
        "labels": [cats[int(i)] for i in g.labels],
        "never_released": [cats[int(i)] for i in g.unused],
        "estimable": _invertible(m),
        "prior": prior,
        "prior_p": [float(v) for v in g.p],
    }


def plan_record(
    design: Any,
    sam: PramSampler,
    cats: tuple[Any, ...],
    prior: str,
    selection: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of any design (``None``: a user matrix), with ``design="auto"``'s
    ``selection`` when it chose."""
    if isinstance(design, GlobalDesign):
        out = global_record(design, sam, cats, prior)
    elif isinstance(design, CyclicDesign):
        out = cyclic_record(design, sam, cats, prior)
    elif design is None:
        out = {"categories": list(cats), "matrix": sam.matrix.tolist()}
    elif isinstance(design, PramDesign):
        out = design_record(design, cats, prior)
    else:
        out = variance_record(design, sam, cats, prior)
    if selection is not None:
        out["selection"] = dict(selection)
    return out


# -- the plans ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmedPram:
    """A charged PRAM column, ready to randomize record batches.

    ``randomize`` maps category codes to released codes; call it once per batch with a
    freshly keyed generator (never a fixed seed per batch: batches would repeat noise).
    """

    column: str
    categories: tuple[Any, ...]
    sampler: PramSampler
    design: PramDesign | None
    record: dict[str, Any]

    def __post_init__(self) -> None:
        if len(self.categories) != self.sampler.n_categories:
            raise InvalidParameterError(
                f"column {self.column!r}: {len(self.categories)} categories but the sampler "
                f"has S = {self.sampler.n_categories}"
            )
        if len(set(self.categories)) != len(self.categories):
            raise InvalidParameterError(f"column {self.column!r}: categories must be distinct")

    def randomize(
        self, codes: np.ndarray, rng: np.random.Generator, compiled: bool = False
    ) -> np.ndarray:
        return self.sampler.randomize(codes, rng, compiled=compiled)


def _check_counts(exact: Any, categories: tuple[Any, ...], column: str) -> None:
    if exact is None:
        return
    counts = np.asarray(exact)
    if counts.shape != (len(categories),) or counts.dtype.kind not in "iu" or (counts < 0).any():
        raise InvalidDataError(
            f"column {column!r}: expected one count >= 0 per declared category "
            f"({len(categories)}), got {counts!r:.80}"
        )


def _per(plan: Any) -> str:
    """The summary's note on a person unit: how the charge splits over a person's rows."""
    if plan.unit is None:
        return ""
    return (
        f"; up to {plan.rows} rows a person ({plan.unit!r}), each randomized at epsilon/{plan.rows}"
    )


@dataclass(frozen=True)
class PramPlan:
    """PRAM of one column with a matrix fixed before any data (uniform/public prior, matrix)."""

    column: str
    categories: tuple[Any, ...]
    epsilon: float  # asked for
    sampler: PramSampler
    #: PramDesign, GlobalDesign or VarianceDesign; None for a user matrix
    design: Any
    prior: str  # "uniform", "public" or "matrix"
    details: dict[str, Any] = field(default_factory=dict)
    #: how many of one person's rows are randomized, at most (1: one row is one person)
    rows: int = 1
    #: the person column (``None``: one row is one person)
    unit: str | None = None
    #: how design="auto" chose (every candidate's risk); ``None``: the design was asked for
    selection: dict[str, Any] | None = None

    @property
    def epsilon_charged(self) -> float:
        """The charge: the epsilon asked for, or ``rows`` times the sampled matrix's own
        if larger (:func:`dpframe.core.units.pram_rows`)."""
        return charge_for(self.rows * Fraction(self.sampler.epsilon_actual), self.epsilon)

    def record(self) -> dict[str, Any]:
        """The design (or matrix) as recorded for estimation."""
        return plan_record(self.design, self.sampler, self.categories, self.prior, self.selection)

    @property
    def charges(self) -> tuple[Charge, ...]:
        details = {
            "categories": len(self.categories),
            "prior": self.prior,
            "epsilon_actual": self.sampler.epsilon_actual,
            "sampler": self.sampler.kind,
            "neighbours": "substitute",
            **self.details,
        }
        if self.unit is not None:
            details["rows_per_person"] = self.rows
        key = "design" if self.design is not None else "matrix"
        details[key] = self.record() if key == "design" else self.record()["matrix"]
        return (
            Charge(
                epsilon=self.epsilon_charged,
                mechanism="pram",
                columns=(self.column,),
                composition="parallel",
                details=details,
                unit=self.unit,
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        m = self.sampler.matrix
        keep = np.diag(m)
        note = f"S={len(self.categories)}, keep probability {keep.min():.3g}-{keep.max():.3g}"
        if isinstance(self.design, PramDesign):
            estimable = self.design.estimable  # closed form, O(S)
        else:  # a global design or a user matrix: its conditioning
            estimable = m.shape[0] > 400 or _invertible(m)
        rec = self.record()
        if rec.get("design") == "cyclic":
            note += (
                f"; cyclic design (each record released as one of {rec['block']} categories "
                f"with weight e^epsilon; n E|p_hat - p|^2 = {rec['risk_constant']:.3g} - "
                f"|p|^2 at every p, k-RR {rec['risk_constant_krr']:.3g} - |p|^2)"
            )
        if rec.get("design") == "variance":
            note += (
                f"; least estimator variance found (n E|p_hat - p|^2 = {rec['risk']:.3g} at "
                f"the prior; k-RR {rec['risk_krr']:.3g}, the paper's design "
                f"{rec['risk_paper']:.3g})"
            )
        if self.selection is not None:
            risks = ", ".join(
                f"{name} {'inf' if r is None else format(r, '.3g')}"
                for name, r in self.selection["risks"].items()
            )
            note += (
                f"; design='auto' chose {self.selection['chosen']} (least n E|p_hat - p|^2 "
                f"at the prior: {risks})"
            )
        if isinstance(self.design, GlobalDesign):
            gap = self.record()["gap"]  # of the matrix actually sampled
            within = "no certified bound" if gap is None else f"MI within {gap:.2g} nats of "
            note += (
                f"; global MI optimum ({self.design.n_outputs} outputs, "
                f"{within}{'' if gap is None else 'the certified bound'})"
            )
        c = pram_share_error(m) if estimable else None  # data-free: worst over every mix
        if not estimable:
            note += "; shares NOT estimable from the release (singular matrix)"
        if c is not None:
            note += f"; estimated shares: 95% error <= {1.96 * c:.3g}/sqrt(n) for n records"
        return [summary_row(self.column, "pram", self.epsilon_charged, note=note + _per(self))]

    def check(self, exact: Any) -> None:
        _check_counts(exact, self.categories, self.column)

    def draw(self, exact: Any, rng: np.random.Generator) -> ArmedPram:
        return ArmedPram(self.column, self.categories, self.sampler, self.design, self.record())


@dataclass(frozen=True)
class PriorPlan:
    """A DP histogram of a column's categories, normalised into a prior (``dp_prior``).

    Discrete Laplace noise on each count (l1 sensitivity 2 under substitute neighbours:
    one record moves one count down and another up), clipped at 0 and normalised:
    post-processing. ``draw`` returns the prior as an array aligned with the categories.
    """

    column: str
    categories: tuple[Any, ...]
    epsilon: float
    note: str = "DP histogram of the column, used only to choose the PRAM matrix"
    details: dict[str, Any] = field(default_factory=dict)
    #: a person's rows, at most: a person moves up to this many records (sensitivity 2 rows)
    rows: int = 1
    unit: str | None = None

    @property
    def sensitivity(self) -> float:
        """l1 sensitivity of the histogram under substitution: ``2 * rows``."""
        return 2.0 * self.rows

    @property
    def _calibration(self) -> Any:
        return calibrate_laplace(
            self.epsilon, self.sensitivity, granularity=1.0, values_on_grid=True
        )

    @property
    def charges(self) -> tuple[Charge, ...]:
        cal = self._calibration
        return (
            Charge(
                epsilon=charge_for(cal.privacy_loss, self.epsilon),
                mechanism="pram_prior_histogram",
                columns=(self.column,),
                scale=cal.scale,
                composition="parallel",
                note=self.note,
                details={
                    "categories": len(self.categories),
                    "sensitivity": 2 * self.rows,
                    "neighbours": "substitute",
                    **self.details,
                },
                unit=self.unit,
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        cal = self._calibration
        return [
            summary_row(
                self.column,
                "pram_prior_histogram",
                self.charges[0].epsilon,
                sensitivity=self.sensitivity,
                scale=cal.scale,
                error95=cal.error(0.95),
                note=self.note,
            )
        ]

    def check(self, exact: Any) -> None:
        _check_counts(exact, self.categories, self.column)
        if exact is None:
            raise InvalidDataError(f"column {self.column!r}: the DP prior needs the counts")

    def draw(self, exact: Any, rng: np.random.Generator) -> np.ndarray:
        counts = np.asarray(exact, dtype=np.float64)
        noisy = np.clip(release_laplace(counts, self._calibration, rng), 0.0, None)
        total = noisy.sum()
        return noisy / total if total > 0 else np.full(counts.size, 1.0 / counts.size)


@dataclass(frozen=True)
class DPPriorPramPlan:
    """PRAM with ``prior="dp"``: a DP histogram first (its share of epsilon), then the
    MI-optimal design for it with the rest. Both are charged together, before either
    is drawn; ``draw(counts, rng)`` draws the histogram and builds the design."""

    column: str
    categories: tuple[Any, ...]
    epsilon: float
    prior_share: float
    diagonal: str
    details: dict[str, Any] = field(default_factory=dict)
    rows: int = 1
    unit: str | None = None
    #: the ``estimable=`` of :func:`~dpframe.mechanisms.pram.optimum.design`
    estimable: bool | float = True
    #: ``"auto"``, ``"paper"`` or ``"global"`` (then ``estimable`` is False: checked by
    #: plan_pram)
    design: str = "auto"

    @property
    def split(self) -> tuple[float, float]:
        """Epsilon of the histogram and of PRAM; their exact decimal sum is <= epsilon."""
        eps_prior, eps_pram = split_epsilon(self.epsilon, [self.prior_share, 1 - self.prior_share])
        return eps_prior, eps_pram

    @property
    def prior_plan(self) -> PriorPlan:
        return PriorPlan(
            self.column,
            self.categories,
            self.split[0],
            details={"share": self.prior_share},
            rows=self.rows,
            unit=self.unit,
        )

    @property
    def row_epsilon(self) -> float:
        """The design's epsilon: PRAM's share over a person's rows."""
        return per_row_epsilon(self.split[1], self.rows)

    @property
    def charges(self) -> tuple[Charge, ...]:
        return (
            *self.prior_plan.charges,
            Charge(
                epsilon=self.split[1],
                mechanism="pram",
                columns=(self.column,),
                composition="parallel",
                note="design chosen for the DP prior; recorded with the released file",
                details={
                    "categories": len(self.categories),
                    "prior": "dp",
                    "neighbours": "substitute",
                    **({"rows_per_person": self.rows} if self.unit is not None else {}),
                    **self.details,
                },
                unit=self.unit,
            ),
        )

    def summary(self) -> list[dict[str, Any]]:
        note = f"S={len(self.categories)}, design chosen for the DP prior" + _per(self)
        return [
            *self.prior_plan.summary(),
            summary_row(self.column, "pram", self.split[1], note=note),
        ]

    def check(self, exact: Any) -> None:
        self.prior_plan.check(exact)

    def draw(self, exact: Any, rng: np.random.Generator) -> ArmedPram:
        p = self.prior_plan.draw(exact, rng)
        fallback = None
        if self.design == "global":  # after the charge: nothing may fail from here on
            try:
                g = global_design(p, self.row_epsilon)
                sam = staircase_sampler(g.matrix, self.row_epsilon)
            except Exception as exc:
                fallback = f"design='global' failed for the DP prior ({exc}); paper's design used"
            else:
                record = global_record(g, sam, self.categories, "dp")
                return ArmedPram(self.column, self.categories, sam, None, record)
        if _auto_estimates(self.design, self.estimable, self.diagonal):
            try:  # after the charge: any failure falls back to the paper's design
                des, sam, selection = _plan_auto(p, self.row_epsilon, self.estimable, False)
                if sam.epsilon_actual > self.row_epsilon:
                    raise AssertionError("a sampled matrix exceeds its epsilon")
            except Exception as exc:
                fallback = f"design='auto' failed for the DP prior ({exc}); paper's design used"
            else:
                record = plan_record(des, sam, self.categories, "dp", selection)
                return ArmedPram(self.column, self.categories, sam, des, record)
        try:  # after the charge: the paper's design, else k-RR (which cannot fail here)
            d = paper_design(p, self.row_epsilon, diagonal=self.diagonal, estimable=self.estimable)
            if d.epsilon_actual > self.row_epsilon:  # design() certifies it; never trust
                raise AssertionError("a PRAM design exceeds its epsilon")
        except Exception as exc:
            fallback = f"the paper's design failed for the DP prior ({exc}); k-RR used"
            d = krr(len(self.categories), self.row_epsilon)
        record = design_record(d, self.categories, "dp")
        if fallback is not None:
            record["fallback"] = fallback
        return ArmedPram(self.column, self.categories, d.sampler, d, record)


def _check_dp_prior_split(plan: DPPriorPramPlan) -> None:
    """Refuse, at planning (so before any entry point charges), a ``prior="dp"`` split
    whose draw could not run: the histogram's share must be calibratable (its discrete
    Laplace grid holds at most ``2**31`` units: epsilon at most 4 for a sensitivity of 2
    rows, more for more rows; at least about ``2e-9``), and the design's share, over a
    person's rows, within ``[1e-9, 12]`` (:func:`_check_design_epsilon`). Everything the
    draw does after the charge then has a fallback that cannot fail (k-RR)."""
    eps_prior, eps_pram = plan.split
    what = (
        f"column {plan.column!r}: prior='dp' splits epsilon={plan.epsilon!r} into "
        f"{eps_prior!r} for the DP prior (prior_share={plan.prior_share!r}) and "
        f"{eps_pram!r} for the design"
    )
    try:
        plan.prior_plan.charges  # noqa: B018 -- the calibration, built now or never
    except InvalidParameterError as exc:
        raise InvalidParameterError(
            f"{what}; the prior's share cannot be calibrated ({exc}): change prior_share "
            "or epsilon, or release a DP prior first (dpframe.pram.dp_prior) and pass it as "
            "prior= (nothing was charged)"
        ) from None
    try:
        _check_design_epsilon(plan.row_epsilon)
    except InvalidParameterError as exc:
        per = f" over {plan.rows} rows a person" if plan.rows > 1 else ""
        raise InvalidParameterError(
            f"{what}{per}, a design epsilon of {plan.row_epsilon!r}: {exc} (nothing was charged)"
        ) from None


def plan_pram(
    column: str,
    categories: Any,
    epsilon: float | None = None,
    *,
    prior: Any = "uniform",
    matrix: Any = None,
    diagonal: str = "optimal",
    prior_share: float = 0.1,
    neighbours: str = "substitute",
    details: Mapping[str, Any] | None = None,
    unit: PrivacyUnit = RECORD,
    estimable: bool | float = True,
    design: str = "auto",
) -> PramPlan | DPPriorPramPlan:
    """Plan PRAM of one column (see the module docstring); nothing is read or drawn.

    Parameters are those of ``.dp.pram``; ``categories`` must be given (an adapter takes
    them from an Enum dtype). A public prior's keys name the categories too. Under a
    person ``unit`` the release is charged ``epsilon`` for up to ``max_rows`` rows a
    person, each row randomized at ``epsilon / max_rows``
    (:func:`dpframe.core.units.pram_rows`); the caller checks that no person has more.
    ``estimable`` is :func:`~dpframe.mechanisms.pram.optimum.design`'s (a prior's
    design; k-RR and a given matrix are what they are). ``design="global"`` takes the
    MI optimum over every epsilon-DP matrix (:mod:`~dpframe.mechanisms.pram.staircase`)
    for the prior (``"uniform"`` included) instead of the paper's family; with
    ``estimable`` it must be invertible, which is checked here, before any charge
    (with ``prior="dp"`` it cannot be: pass ``estimable=False``). ``design="auto"``
    (the default) is :func:`_plan_auto` when the release is for estimation (``estimable``
    not False, ``diagonal="optimal"``; with ``prior="dp"`` after the DP prior is drawn,
    falling back to the paper's design if it fails), else the paper's design (k-RR for a
    uniform prior).
    """
    require_substitute(neighbours, "pram", argument="neighbours")
    rows, person = pram_rows(unit), unit.person
    cats = check_categories(categories)
    if cats is None and isinstance(prior, Mapping):
        cats = check_categories(list(prior))
    if cats is None:
        raise InvalidParameterError(
            f"column {column!r}: pass categories=[...] (every possible value, in a fixed "
            "order). dpframe never takes them from the data, because which values occur "
            "is itself private. An Enum column carries its own."
        )
    check("diagonal", diagonal)
    estimable = check("estimable", estimable)
    design = check("design", design)
    if design == "variance" and isinstance(prior, str) and prior == "dp":
        raise InvalidParameterError(
            "design='variance' with prior='dp' is not offered: its optimiser would run after "
            "the DP prior is charged; release dpframe.pram.dp_prior first and pass it as prior="
        )
    if design not in ("auto", "paper") and matrix is not None:
        raise InvalidParameterError(f"pass either matrix= or design={design!r}, not both")
    if design == "global":
        if diagonal != "optimal":
            raise InvalidParameterError(
                f"diagonal={diagonal!r} constrains the paper's family; design='global' "
                "optimises over every epsilon-DP matrix: leave diagonal='optimal'"
            )
        if isinstance(prior, str) and prior == "dp" and estimable is not False:
            raise InvalidParameterError(
                "design='global' with prior='dp' needs estimable=False: the design is "
                "chosen after the DP prior is drawn (and charged), when it could no longer "
                "be refused for not being invertible"
            )
    extra = dict(details or {})
    if matrix is not None:
        if not (isinstance(prior, str) and prior == "uniform"):
            raise InvalidParameterError(
                "pass either matrix= or prior=, not both: a given matrix fixes q"
            )
        if not isinstance(matrix, PramDesign | PramSampler):
            check_matrix(matrix)
        sam = sampler(matrix)  # its epsilon is derived from the integers it samples
        if sam.n_categories != len(cats):
            raise InvalidParameterError(
                f"matrix= is {sam.n_categories}x{sam.n_categories} but column {column!r} has "
                f"{len(cats)} categories (from its Enum or categories=): give one row per "
                "category"
            )
        actual = sam.epsilon_actual
        if not math.isfinite(actual):
            raise InvalidParameterError(
                "matrix is not differentially private for any epsilon: a column holds both "
                "a zero and a non-zero entry"
            )
        loss = rows * Fraction(actual)
        if epsilon is None:
            eps = charge_for(loss, 1e-9)  # the matrix's own, rounded up (>= 1e-9)
        else:
            eps = check_epsilon(epsilon)
            if loss > Fraction(eps) * (1 + Fraction(1, 10**12)):
                per = f" times {rows} rows a person" if rows > 1 else ""
                raise InvalidParameterError(
                    f"matrix gives epsilon = {actual:.12g} (max over columns of log(max_i "
                    f"M_ij / min_i M_ij), of the matrix actually sampled){per}, more than "
                    f"epsilon={epsilon!r}; raise epsilon or flatten the matrix"
                )
        des = matrix if isinstance(matrix, PramDesign) else None
        label = "matrix"
        return PramPlan(column, cats, eps, sam, des, label, extra, rows, person)
    if epsilon is None:
        raise InvalidParameterError("epsilon is required (unless matrix= is given)")
    eps = check_epsilon(epsilon)
    if isinstance(prior, str):
        check("prior", prior)
        if prior == "dp":
            if not (isinstance(prior_share, float | int) and 0 < prior_share < 1):
                raise InvalidParameterError(
                    f"prior_share must be a number in (0, 1), got {prior_share!r}"
                )
            plan = DPPriorPramPlan(
                column,
                cats,
                eps,
                float(prior_share),
                diagonal,
                extra,
                rows,
                person,
                estimable,
                design,
            )
            _check_dp_prior_split(plan)  # an impossible split fails now, on every entry point
            return plan
        row_eps = per_row_epsilon(eps, rows)
        if design == "paper" or (
            design == "auto"
            and not (_auto_estimates(design, estimable, diagonal) and row_eps <= MAX_EPSILON)
        ):
            d = krr(len(cats), row_eps)
            return PramPlan(column, cats, eps, d.sampler, d, "uniform", extra, rows, person)
    row_eps = per_row_epsilon(eps, rows)
    if row_eps > MAX_EPSILON:
        _check_design_epsilon(row_eps)  # raises, naming k-RR and matrix= as the ways out
    label = "uniform" if isinstance(prior, str) else "public"
    p = (
        np.full(len(cats), 1.0 / len(cats))
        if isinstance(prior, str)
        else prior_weights(prior, cats)
    )
    if _auto_estimates(design, estimable, diagonal):
        des, sam, selection = _plan_auto(p, row_eps, estimable, isinstance(prior, str))
        return PramPlan(column, cats, eps, sam, des, label, extra, rows, person, selection)
    if design == "global":
        g, sam = _plan_global(p, row_eps, cats, estimable, column)
        return PramPlan(column, cats, eps, sam, g, label, extra, rows, person)
    if design == "variance":
        if diagonal != "optimal":
            raise InvalidParameterError(
                f"diagonal={diagonal!r} constrains the paper's family; design='variance' "
                "searches every epsilon-DP matrix: leave diagonal='optimal'"
            )
        v, sam = _plan_variance(p, row_eps, cats, column)
        return PramPlan(column, cats, eps, sam, v, label, extra, rows, person)
    d = paper_design(p, row_eps, diagonal=diagonal, estimable=estimable)
    return PramPlan(column, cats, eps, d.sampler, d, label, extra, rows, person)


def plan_dp_prior(
    column: str, categories: Any, epsilon: float, *, neighbours: str = "substitute"
) -> PriorPlan:
    """Plan a DP prior of a column (``dpframe.pram.dp_prior``): substitute neighbours only."""
    require_substitute(neighbours, "pram", argument="neighbours")
    cats = check_categories(categories)
    if cats is None:
        raise InvalidParameterError(
            f"column {column!r}: pass categories=[...]; they are never taken from the data"
        )
    return PriorPlan(
        column,
        cats,
        check_epsilon(epsilon),
        note="DP estimate of the column's category distribution (a publishable prior)",
    )
