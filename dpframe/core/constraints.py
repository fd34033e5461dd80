"""Every parameter constraint, declared once and shared by the functions and the spec.

:data:`PARAMETERS` maps a parameter name to its :class:`Constraint`. The public
functions check their arguments with :func:`check` (``check("epsilon", value)``); the
release spec's fields validate with the same constraints (:func:`spec_field`), so a
value that one accepts the other accepts too, with the same message. The option sets
(``NEIGHBOURS``, ``METHODS``, ...) are defined here and nowhere else.

Every failure raises :class:`~dpframe.errors.InvalidParameterError` naming the argument
and the fix; nothing is spent or written by a call that fails its checks.

Examples
--------
>>> from dpframe.core.constraints import check
>>> check("epsilon", 0.5)
0.5
>>> check("method", "bit")
'bit'
>>> check("delta", 1.0)
Traceback (most recent call last):
...
dpframe.errors.InvalidParameterError: delta must be in [0, 1), got 1.0
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any, Literal

from dpframe.core.advice import advise
from dpframe.errors import InvalidParameterError

__all__ = [
    "ACCOUNTINGS",
    "ALPHA_ESTIMATES",
    "AUTO",
    "AUTO_BOUNDS_BETA",
    "AUTO_BOUNDS_EXPONENTS",
    "AUTO_BOUNDS_SHARE",
    "CALIBRATIONS",
    "COLUMN_MECHANISMS",
    "COMPOSITIONS",
    "COMPRESSIONS",
    "DIAGONALS",
    "ENGINES",
    "INT64_MAX",
    "LEAST",
    "MARGINAL_MEASURES",
    "MEMBERSHIPS",
    "METHODS",
    "NEIGHBOURS",
    "NOISES",
    "NORMS",
    "NULLS",
    "PARAMETERS",
    "POLARS_ENGINES",
    "PRAM_DESIGNS",
    "PRAM_ESTIMATES",
    "PRIOR_FITS",
    "PRIOR_KINDS",
    "PRIVACY_MAX",
    "PRIVACY_MIN",
    "QUANTILE_MAX_BINS",
    "QUANTILE_STATISTICS",
    "REPAIRS",
    "RESERVED_PREFIX",
    "RISK_GAUSSIANS",
    "RISK_MEASURES",
    "RISK_MECHANISMS",
    "RISK_METHODS",
    "RISK_ZCDP",
    "SCENARIO8",
    "SHRINKAGE_MEASURES",
    "SIZE_MODELS",
    "STAIRCASE_METHODS",
    "STATISTICS",
    "STRATEGIES",
    "UNKNOWN_KEYS",
    "Compression",
    "Constraint",
    "check",
    "check_auto_bounds",
    "check_bound_or_auto",
    "check_bounds",
    "check_bounds_epsilon",
    "check_categories",
    "check_choice",
    "check_delta",
    "check_epsilon",
    "check_int",
    "check_key_name",
    "check_key_names",
    "check_number_array",
    "check_open_bounds",
    "check_positive",
    "check_privacy_amount",
    "check_quantile_targets",
    "check_real",
]

#: Neighbouring datasets: one record replaced (bounded DP) or added/removed (unbounded).
NEIGHBOURS = ("substitute", "add_remove")
#: How the rows of a column of statistics compose: disjoint groups, or the same records.
COMPOSITIONS = ("parallel", "sequential")
#: Bounded Laplace: condition the noise on the bounds, or clamp it to them.
METHODS = ("truncated", "bit")
#: ``"exact"``: the scale that makes truncation exactly epsilon-DP; ``"paper"``: Δ/ε.
CALIBRATIONS = ("exact", "paper")
#: How a proportion vector is made to sum to one.
STRATEGIES = ("rescale", "all_but_one", "universal_histogram")
#: Repair of a released covariance matrix to a positive semi-definite one.
REPAIRS = (None, "higham", "clip")
#: PRAM: the MI-optimal diagonal, or one constrained to q_k >= 1/S.
DIAGONALS = ("optimal", "dominant")
#: PRAM designs: ``"auto"`` (the default: the least estimator variance among k-RR, the
#: paper's design and the cyclic design when the release is for estimation; the paper's
#: design otherwise), the MI optimum within the
#: paper's family (keep k with q_k, else move uniformly), or over every epsilon-DP matrix
#: (staircase LP, docs/pram-design.md, 11), or the least estimator variance found (a local
#: optimum, docs/pram-design.md, 12)
PRAM_DESIGNS = ("auto", "paper", "global", "variance")
#: The noise of a grouped count or sum: Laplace (pure epsilon-DP) or the discrete Gaussian
#: (rho-zCDP, needs a zCDP budget).
NOISES = ("laplace", "gaussian")
#: Private key selection: truncated-geometric ("magic") selection of Desfontaines et al.
#: (the default: the highest release probability at equal (epsilon, delta)), or a count
#: plus discrete Laplace noise kept above a threshold.
KEY_SELECTION_METHODS = ("magic", "laplace")
#: The most persons a key may need before magic selection releases it surely (the length
#: of its exact table of release probabilities; more means epsilon / max_groups too small).
KEY_SELECTION_MAX_STEPS = 2**20
#: A release in a tight composition (``dpframe.core.composition``): the Laplace mechanism,
#: the discrete Laplace (on an integer grid), any pure epsilon-DP release, the Gaussian,
#: the discrete Gaussian, any (epsilon, delta)-DP release, any rho-zCDP release.
COMPOSED_MECHANISMS = (
    "laplace",
    "discrete_laplace",
    "pure",
    "gaussian",
    "discrete_gaussian",
    "approx",
    "zcdp",
)
#: How an accountant composes: epsilons and deltas add (``None``, ``"pure"``), rho-zCDP
#: (``"zcdp"``), or every release by its privacy-loss distribution (``"pld"``).
ACCOUNTINGS = (None, "pure", "zcdp", "pld")
#: Plan by accuracy (``budget=`` of :func:`dpframe.mechanisms.allocation.allocate`, a
#: release's or spec's ``budget``): the least total that meets every error95 target
#: (else a number: the total to split, the targets as weights).
LEAST = "least"
#: Parquet compressions (polars' own list).
#: Parquet codecs polars writes (not lzo: polars refuses it, after the charge if unchecked)
COMPRESSIONS = ("zstd", "lz4", "snappy", "gzip", "brotli", "uncompressed")
Compression = Literal["zstd", "lz4", "snappy", "gzip", "brotli", "uncompressed"]
#: What a grouped release does with records whose keys are not in the margins.
UNKNOWN_KEYS = ("error", "drop")
#: The PRAM priors that are not a given distribution.
PRIOR_KINDS = ("uniform", "dp")
#: The statistics of a grouped release (``dpframe.agg.<stat>``; a spec's ``stat``).
STATISTICS = (
    "count",
    "sum",
    "mean",
    "proportion",
    "var",
    "cov",
    "count_distinct",
    "quantile",
    "median",
)
#: The statistics released by selection among a grid of candidates (one column per q).
QUANTILE_STATISTICS = ("quantile", "median")
#: A column release's noise: ``"laplace"`` (unbounded), or bounded ``"truncated"`` / ``"bit"``.
COLUMN_MECHANISMS = ("laplace", "truncated", "bit")
#: What :func:`dpframe.pram.estimate` is given: released counts per category, or codes.
PRAM_ESTIMATES = ("counts", "codes")
#: The solution methods of PRAM's global design (the staircase LP).
STAIRCASE_METHODS = ("auto", "enumerate", "column-generation")
#: The norms a sensitivity is measured in: l1 (Laplace) or l2 (Gaussian).
NORMS = ("l1", "l2")
#: ``"public"``: a record's group cannot change between neighbours (the group sizes are
#: fixed); ``"private"``: under substitution a record may move to another group.
MEMBERSHIPS = ("public", "private")
#: The named ``nulls=`` policies (a mapping of fill values is the third).
NULLS = ("refuse", "drop")
#: The engines a release job runs on.
ENGINES = ("polars", "spark")
#: The engines of ``polars.LazyFrame.collect`` a query may ask for.
POLARS_ENGINES = ("auto", "in-memory", "streaming", "gpu")
#: DR-HA's noise mechanisms (:mod:`dpframe.risk`).
RISK_MECHANISMS = (
    "laplace",
    "gaussian",
    "gaussian_pdp",
    "analytic_gaussian",
    "discrete_gaussian",
)
#: DR-HA: the (epsilon, delta) Gaussians, which take a delta.
RISK_GAUSSIANS = ("gaussian", "gaussian_pdp", "analytic_gaussian")
#: DR-HA: the mechanisms whose privacy parameter is rho (zCDP) rather than epsilon.
RISK_ZCDP = ("discrete_gaussian",)
#: DR-HA's risk measures.
RISK_MEASURES = ("local", "expected", "shrinkage", "marginal", "marginal_shrinkage")
#: DR-HA: the measures that need a Dirichlet prior (``alpha=``).
SHRINKAGE_MEASURES = ("shrinkage", "marginal_shrinkage")
#: DR-HA: the measures that need a model of the cell sizes (``size_model=``).
MARGINAL_MEASURES = ("marginal", "marginal_shrinkage")
#: DR-HA's Scenario 8: the paper's conservative bound, or each record's exact probability.
SCENARIO8 = ("conservative", "records")
#: DR-HA: the closed form (``"exact"``) or the paper's printed one.
RISK_METHODS = ("exact", "paper")
#: How a Dirichlet prior is fitted: maximum likelihood or moments.
PRIOR_FITS = ("mle", "moments")
#: The models of DR-HA's cell sizes.
SIZE_MODELS = ("poisson", "negbin")
#: A DR-HA prior estimated from the table (empirical Bayes).
ALPHA_ESTIMATES = ("eb",)


# -- the primitive checks ------------------------------------------------------------------


def check_real(name: str, value: Any) -> float:
    """``value`` as a float if it is a finite real number (not a bool or a string)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidParameterError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    x = float(value)
    if math.isnan(x) or math.isinf(x):
        raise InvalidParameterError(f"{name} must be finite, got {x!r}")
    return x


def check_number_array(name: str, value: Any) -> Any:
    """``value`` as a float64 numpy array if it is a number or an array of numbers -- not
    strings or booleans, which ``np.asarray(value, float)`` would convert (``"1"`` to 1.0).
    Finiteness and shape are the caller's to check.

    Examples
    --------
    >>> check_number_array("x", [1, 2.5]).tolist()
    [1.0, 2.5]
    """
    import numpy as np

    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf":
            raise TypeError
        return raw.astype(np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name} must be a number or an array of numbers, got {value!r:.80}"
        ) from None


def check_positive(name: str, value: Any) -> float:
    """A finite number > 0 (a sensitivity, a scale)."""
    x = check_real(name, value)
    if x <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {x!r}")
    return x


#: The range of every privacy amount -- an epsilon or a rho, of a budget (in memory or in
#: a ledger) or of a charge or release -- and of a delta other than 0. Below
#: ``PRIVACY_MIN`` a float is subnormal or nearly so (it loses its digits, and ``1 / x``
#: overflows); above ``PRIVACY_MAX`` a ledger cannot record it (the SQLite and PostgreSQL
#: schemas check ``<= 1e300``), and no release means anything there anyway.
PRIVACY_MIN = 1e-300
PRIVACY_MAX = 1e300


def check_privacy_amount(name: str, value: Any) -> float:
    """An epsilon or a rho: a finite number in [:data:`PRIVACY_MIN`, :data:`PRIVACY_MAX`].

    Examples
    --------
    >>> check_privacy_amount("rho", 0.5)
    0.5
    >>> check_privacy_amount("epsilon", 1e-320)
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: epsilon must be between 1e-300 and 1e+300, got 1e-320; ...
    """
    x = check_positive(name, value)
    if not PRIVACY_MIN <= x <= PRIVACY_MAX:
        raise InvalidParameterError(
            f"{name} must be between {PRIVACY_MIN:g} and {PRIVACY_MAX:g}, got {x!r}; "
            f"pass {name} in that range (dpframe's range of a privacy amount, for budgets "
            "and releases alike)"
        )
    return x


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A privacy parameter epsilon: finite, in [:data:`PRIVACY_MIN`, :data:`PRIVACY_MAX`]."""
    return check_privacy_amount(name, value)


def check_delta(value: Any, name: str = "delta") -> float:
    """A privacy parameter delta in [0, 1): 0, or at least :data:`PRIVACY_MIN`."""
    x = check_real(name, value)
    if not 0.0 <= x < 1.0:
        raise InvalidParameterError(f"{name} must be in [0, 1), got {x!r}")
    if 0.0 < x < PRIVACY_MIN:
        raise InvalidParameterError(
            f"{name} must be 0 or at least {PRIVACY_MIN:g}, got {x!r}; pass delta=0 or a "
            f"delta in [{PRIVACY_MIN:g}, 1)"
        )
    return x


def check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    """One of a fixed set of options."""
    if not any(value is c or (isinstance(value, str) and value == c) for c in choices):
        options = ", ".join(repr(c) for c in choices)
        raise InvalidParameterError(f"{name} must be one of {options}; got {value!r}")
    return value


def check_int(name: str, value: Any, minimum: int, why: str = "") -> int:
    """An integer ``>= minimum`` (``why`` explains the minimum in the message)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParameterError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}; "
            f"pass int({name})"
        )
    if int(value) < minimum:
        reason = f" ({why})" if why else ""
        raise InvalidParameterError(f"{name} must be >= {minimum}{reason}, got {value}")
    return int(value)


def check_bounds(
    lower: Any, upper: Any, names: tuple[str, str] = ("lower", "upper")
) -> tuple[float, float]:
    """Finite public bounds with ``lower < upper`` and a finite width."""
    lo, hi = check_real(names[0], lower), check_real(names[1], upper)
    if not lo < hi:
        raise InvalidParameterError(
            f"{names[0]} must be < {names[1]}, got {names[0]}={lo!r}, {names[1]}={hi!r}; "
            "pass the public bounds of the values in increasing order"
        )
    if math.isinf(hi - lo):
        raise InvalidParameterError(
            f"{names[1]} - {names[0]} overflows a float ({names[0]}={lo!r}, {names[1]}={hi!r}); "
            "rescale the values to narrower bounds"
        )
    return lo, hi


def check_open_bounds(
    lower: Any, upper: Any, names: tuple[str, str] = ("lower", "upper")
) -> tuple[float, float]:
    """Bounds of a bounded mechanism, either side possibly open: each a real number, or
    ``None`` (no bound on that side, the same as ``-inf`` / ``+inf``); ``lower < upper``
    and, when both are finite, a finite width.

    Examples
    --------
    >>> check_open_bounds(0, None)
    (0.0, inf)
    """
    out = []
    for name, value, open_end in zip(names, (lower, upper), (-math.inf, math.inf), strict=True):
        if value is None:
            out.append(open_end)
            continue
        if isinstance(value, bool) or not isinstance(value, Real):
            raise InvalidParameterError(
                f"{name} must be a real number or None, got {value!r} of type "
                f"{type(value).__name__}"
            )
        x = float(value)
        if math.isnan(x) or x == -open_end:
            raise InvalidParameterError(
                f"{name} must be a number, {open_end!r} or None; got {value!r}"
            )
        out.append(x)
    lo, hi = out
    if not lo < hi:
        raise InvalidParameterError(
            f"{names[0]} must be < {names[1]}, got {names[0]}={lo!r}, {names[1]}={hi!r}; "
            "pass the public bounds of the values in increasing order"
        )
    if math.isfinite(lo) and math.isfinite(hi) and math.isinf(hi - lo):
        raise InvalidParameterError(
            f"{names[1]} - {names[0]} overflows a float ({names[0]}={lo!r}, {names[1]}={hi!r}); "
            "rescale the values to narrower bounds"
        )
    return lo, hi


#: The most bins (candidates - 1) a quantile's grid may have: a grouped release holds a
#: (groups, bins) histogram, and each selection flips a coin per candidate.
QUANTILE_MAX_BINS = 2**20


def check_quantile_targets(value: Any, name: str = "q") -> tuple[float, ...]:
    """Quantile targets: a number or a non-empty sequence of numbers, each strictly
    inside (0, 1), strictly increasing (each released once, in order).

    Examples
    --------
    >>> check_quantile_targets([0.25, 0.5, 0.75])
    (0.25, 0.5, 0.75)
    >>> check_quantile_targets(0.5)
    (0.5,)
    >>> check_quantile_targets([0.5, 0.25])
    Traceback (most recent call last):
    ...
    dpframe.errors.InvalidParameterError: q must be strictly increasing, got [0.5, 0.25]; ...
    """
    if isinstance(value, Real):
        items: list[Any] = [value]
    elif hasattr(value, "tolist"):  # a numpy array or scalar
        listed = value.tolist()
        items = listed if isinstance(listed, list) else [listed]
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = list(value)
    else:
        raise InvalidParameterError(
            f"{name} must be a number or a list of numbers in (0, 1), got {value!r:.80}"
        )
    if not items:
        raise InvalidParameterError(f"{name} must name at least one quantile, got {value!r}")
    qs = [check_real(name, v) for v in items]
    outside = [v for v in qs if not 0.0 < v < 1.0]
    if outside:
        raise InvalidParameterError(
            f"{name} must hold numbers strictly between 0 and 1 (0.5 is the median), got "
            f"{outside[:3]}; for the smallest or largest value use a bound, not a quantile"
        )
    if any(b <= a for a, b in itertools.pairwise(qs)):
        raise InvalidParameterError(
            f"{name} must be strictly increasing, got {qs}; list each quantile once, "
            "in increasing order"
        )
    return tuple(qs)


#: Column names dpframe uses for its own work start with this (or hold a ``:``).
RESERVED_PREFIX = "__"


def reads_as_pattern(name: str) -> bool:
    """Whether polars' ``pl.col`` reads ``name`` as a pattern, not as a name: ``^...$`` is
    a regular expression, ``*`` every column (a release of it would read other columns).

    Examples
    --------
    >>> reads_as_pattern("^a$"), reads_as_pattern("*"), reads_as_pattern("a^b$")
    (True, True, False)
    """
    return name == "*" or (name.startswith("^") and name.endswith("$"))


def refuse_pattern_name(name: str, what: str) -> None:
    """Refuse a column name polars reads as a pattern (:func:`reads_as_pattern`)."""
    if reads_as_pattern(name):
        rename = advise(
            python=f"rename it, e.g. frame.rename({{{name!r}: 'x'}})",
            spec="rename the column in the input file and in the spec",
        )
        raise InvalidParameterError(
            f"{what}: column {name!r} is read by polars as a pattern (^...$ a regular "
            f"expression, * every column), not as a name: it would read other columns; "
            f"{rename}"
        )


def check_key_name(name: Any, what: str = "keys") -> str:
    """A group key's column name: a non-empty string, not one of dpframe's own (starting
    with ``__``, or holding ``:``, the names of the exact parts), not a pattern."""
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(f"{what} must be column names, got {name!r}")
    refuse_pattern_name(name, what)
    if name.startswith(RESERVED_PREFIX) or ":" in name:
        rename = advise(
            python=f"rename it, e.g. frame.rename({{{name!r}: 'key'}}) and the same in the margins",
            spec="rename the column in the input file, in the margins and in the spec",
        )
        raise InvalidParameterError(
            f"{what}: column {name!r} has a name dpframe keeps for its own columns (starting "
            f"with {RESERVED_PREFIX!r} or holding ':'); {rename}"
        )
    return name


def check_key_names(keys: Any, what: str = "keys") -> list[str]:
    """Group keys' column names: each as :func:`check_key_name` takes it, none twice.

    Examples
    --------
    >>> check_key_names(["region", "year"])
    ['region', 'year']
    """
    names = [check_key_name(k, what) for k in keys]
    repeated = sorted({k for k in names if names.count(k) > 1})
    if repeated:
        raise InvalidParameterError(
            f"{what} names column(s) {repeated} more than once; list each key column once"
        )
    return names


#: The largest integer a key, a category or a public size may hold: dpframe's kernels
#: and polars' joins work on 64-bit signed integers.
INT64_MAX = 2**63 - 1


# -- categories -----


def _is_int(c: Any) -> bool:
    return isinstance(c, Integral) and not isinstance(c, bool)


def check_categories(categories: Any) -> tuple[Any, ...] | None:
    """A column's declared categories: 2+ distinct strings, or 2+ distinct integers."""
    if categories is None:
        return None
    if hasattr(categories, "to_list") and not isinstance(categories, str):
        categories = categories.to_list()  # a polars Series
    elif hasattr(categories, "tolist") and not isinstance(categories, str):
        categories = categories.tolist()  # a numpy array
    if isinstance(categories, str | bytes) or not isinstance(categories, Sequence):
        raise InvalidParameterError(
            "categories must be a list of the column's possible values (strings or "
            f"integers), got {type(categories).__name__}"
        )
    cats = tuple(categories)
    if len(cats) < 2:
        raise InvalidParameterError(f"categories must list at least 2 values, got {len(cats)}")
    kinds = {
        "str" if isinstance(c, str) else "int" if _is_int(c) else type(c).__name__ for c in cats
    }
    if kinds - {"str", "int"} or len(kinds) > 1:
        raise InvalidParameterError(
            "categories must be all strings or all integers (no None, floats or mixtures); "
            f"got types {sorted(kinds)}"
        )
    if kinds == {"int"}:
        cats = tuple(int(c) for c in cats)
        wide = [c for c in cats if not -INT64_MAX - 1 <= c <= INT64_MAX]
        if wide:
            raise InvalidParameterError(
                f"categories must be 64-bit integers (between -2**63 and 2**63 - 1); "
                f"{wide[:3]} lie outside: recode the column (e.g. to strings or small codes)"
            )
    if len(set(cats)) != len(cats):
        dup = sorted({c for c in cats if cats.count(c) > 1})[:5]
        raise InvalidParameterError(f"categories must be distinct; repeated: {dup}")
    return cats


# -- the table --------------------------------------------------------------------------


@dataclass(frozen=True)
class Constraint:
    """One parameter's rule: ``validate(name, value)`` returns the value or raises."""

    description: str
    validate: Callable[[str, Any], Any]


def _options(choices: tuple[Any, ...]) -> Constraint:
    return Constraint(
        "one of " + ", ".join(repr(c) for c in choices),
        lambda name, value: check_choice(name, value, choices),
    )


def _integer(minimum: int, why: str) -> Constraint:
    return Constraint(
        f"an integer >= {minimum}", lambda name, value: check_int(name, value, minimum, why)
    )


def _at_most(name: str, value: int, maximum: int) -> int:
    if value > maximum:
        raise InvalidParameterError(
            f"{name} must be at most {maximum}, got {value}; choose a coarser grid "
            "(fewer bins, a larger resolution)"
        )
    return value


def _within(name: str, value: float, lowest: float, highest: float) -> float:
    if not lowest <= value <= highest:
        raise InvalidParameterError(f"{name} must be in [{lowest:g}, {highest:g}], got {value!r}")
    return value


def _seed(name: str, value: Any) -> int | None:
    if value is None:
        return None
    return check_int(name, value, 0, "a seed is a non-negative int; None is secure")


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidParameterError(
            f"{name} must be True or False, got {value!r} ({type(value).__name__})"
        )
    return value


def _estimable(name: str, value: Any) -> bool | float:
    """PRAM ``estimable=``: True (the default margin), False (none), or a margin in (0, 1]."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Real) and not isinstance(value, bool):
        x = float(value)
        if 0.0 < x <= 1.0:
            return x
    raise InvalidParameterError(
        f"{name} must be True, False or a margin in (0, 1] (a share of k-RR's distance "
        f"from the uniform row), got {value!r}"
    )


# -- private bounds (lower="auto" / upper="auto", issue 34) ------------------------------

#: the word that asks for a bound found privately by a first pass
AUTO = "auto"
#: the share of a statistic's epsilon its bounds pass takes unless ``bounds_epsilon=``
AUTO_BOUNDS_SHARE = 0.2
#: the pass's bin edges: 0 and +-2**k for every integer k in this range (inclusive)
AUTO_BOUNDS_EXPONENTS = (-10, 40)
#: the chance that any bin empty in the data is taken for a bin of the data (the noisy
#: count threshold of a bounds pass is set by it, over all its bins)
AUTO_BOUNDS_BETA = 0.05


def check_bound_or_auto(name: str, value: Any) -> float | None:
    """A public bound (a finite number), or ``None`` for ``"auto"`` (found privately);
    any other string is refused by name.

    Examples
    --------
    >>> check_bound_or_auto("upper", "auto") is None, check_bound_or_auto("upper", 3)
    (True, 3.0)
    """
    if isinstance(value, str):
        if value == AUTO:
            return None
        raise InvalidParameterError(
            f"{name} must be a real number or {AUTO!r} (found privately by a first pass), "
            f"got {value!r}"
        )
    return check_real(name, value)


def check_auto_bounds(
    lower: Any, upper: Any, names: tuple[str, str] = ("lower", "upper")
) -> tuple[float | None, float | None]:
    """Bounds each a finite number or ``"auto"`` (``None`` here); two numbers are checked
    as :func:`check_bounds` checks them.

    Examples
    --------
    >>> check_auto_bounds(0, "auto")
    (0.0, None)
    """
    lo, hi = check_bound_or_auto(names[0], lower), check_bound_or_auto(names[1], upper)
    if lo is not None and hi is not None:
        return check_bounds(lo, hi, names)
    return lo, hi


def _bound_or_auto(name: str, value: Any) -> float | str:
    """A spec's bound: a finite number, or ``"auto"`` kept as written."""
    return AUTO if check_bound_or_auto(name, value) is None else check_real(name, value)


def check_bounds_epsilon(value: Any, epsilon: float) -> float | None:
    """A bounds pass's own epsilon: ``None`` (the default share), else in (0, epsilon)."""
    if value is None:
        return None
    x = check_epsilon(value, "bounds_epsilon")
    if not x < epsilon:
        raise InvalidParameterError(
            f"bounds_epsilon must be below the statistic's epsilon ({epsilon!r}: it is the "
            f"total, the bounds pass's share included), got {x!r}"
        )
    return x


def _allocation_budget(name: str, value: Any) -> float | str:
    """A plan-by-accuracy budget: ``"least"`` or a privacy amount (the total to split)."""
    if isinstance(value, str):
        if value == LEAST:
            return value
        raise InvalidParameterError(
            f"{name} must be {LEAST!r} (the least total meeting every error95) or a number "
            f"(the total to split, the targets as weights), got {value!r}"
        )
    return check_privacy_amount(name, value)


PARAMETERS: Mapping[str, Constraint] = MappingProxyType(
    {
        "epsilon": Constraint(
            f"a number in [{PRIVACY_MIN:g}, {PRIVACY_MAX:g}]", lambda n, v: check_epsilon(v, n)
        ),
        "delta": Constraint("a number in [0, 1)", lambda n, v: check_delta(v, n)),
        "sensitivity": Constraint("a finite number > 0", check_positive),
        "scale": Constraint("a finite number > 0", check_positive),
        "bound": Constraint("a finite number", check_real),
        "bound_or_auto": Constraint(f"a finite number or {AUTO!r}", _bound_or_auto),
        "proportions_n": _integer(1, "the public dataset size"),
        "covariance_n": _integer(2, "the public dataset size of a sample covariance"),
        "seed": Constraint("None (secure) or an int >= 0", _seed),
        "max_rows": _integer(1, "a person keeps at least one row per group"),
        # person-level bounding's memory on the polars engine, in bytes (the records it
        # holds at once; more are partitioned by person and spilled to disk)
        "bounding_memory": _integer(
            2**16, "64 KiB at least: smaller parts only multiply the passes"
        ),
        "max_groups": _integer(1, "a person keeps at least one group"),
        "bins": Constraint(
            f"an integer in [1, {QUANTILE_MAX_BINS}]",
            lambda n, v: _at_most(
                n, check_int(n, v, 1, "a grid has at least one bin"), QUANTILE_MAX_BINS
            ),
        ),
        "resolution": Constraint("a finite number > 0", check_positive),
        "q": Constraint(
            "a number or increasing numbers in (0, 1)", lambda n, v: check_quantile_targets(v, n)
        ),
        "rho": Constraint(f"a number in [{PRIVACY_MIN:g}, {PRIVACY_MAX:g}]", check_privacy_amount),
        "sigma": Constraint("a finite number > 0", check_positive),
        "error95": Constraint("a finite number > 0", check_positive),
        "allocation_share": Constraint(
            "a number in [0.0001, 0.9999] (a share of the release-wide budget)",
            lambda n, v: _within(n, check_real(n, v), 1e-4, 0.9999),
        ),
        "allocation_budget": Constraint(
            f"{LEAST!r} or a number in [{PRIVACY_MIN:g}, {PRIVACY_MAX:g}]", _allocation_budget
        ),
        "mechanism": _options(NOISES),
        "composed_mechanism": _options(COMPOSED_MECHANISMS),
        "composition_tolerance": Constraint(
            "a number in [1e-9, 0.5]", lambda n, v: _within(n, check_real(n, v), 1e-9, 0.5)
        ),
        "sensitivity_steps": _integer(1, "the sensitivity in steps of the integer grid"),
        "neighbours": _options(NEIGHBOURS),
        "composition": _options(COMPOSITIONS),
        "method": _options(METHODS),
        "key_selection_method": _options(KEY_SELECTION_METHODS),
        "calibration": _options(CALIBRATIONS),
        "strategy": _options(STRATEGIES),
        "repair": _options(REPAIRS),
        "diagonal": _options(DIAGONALS),
        "design": _options(PRAM_DESIGNS),
        "estimable": Constraint("True, False or a margin in (0, 1]", _estimable),
        "unknown_keys": _options(UNKNOWN_KEYS),
        "nonnegative": Constraint("True or False", _flag),
        "compression": _options(COMPRESSIONS),
        "accounting": _options(ACCOUNTINGS),
        "prior": _options(PRIOR_KINDS),
        "stat": _options(STATISTICS),
        "column_mechanism": _options(COLUMN_MECHANISMS),
        "pram_estimate": _options(PRAM_ESTIMATES),
        "staircase_method": _options(STAIRCASE_METHODS),
        "norm": _options(NORMS),
        "membership": _options(MEMBERSHIPS),
        "engine": _options(ENGINES),
        "polars_engine": _options(POLARS_ENGINES),
        "risk_mechanism": _options(RISK_MECHANISMS),
        "risk_measure": _options(RISK_MEASURES),
        "scenario8": _options(SCENARIO8),
        "risk_method": _options(RISK_METHODS),
        "prior_fit": _options(PRIOR_FITS),
        "size_model": _options(SIZE_MODELS),
        "alpha_estimate": _options(ALPHA_ESTIMATES),
    }
)


def check(parameter: str, value: Any, *, name: str | None = None) -> Any:
    """Check ``value`` against the constraint of ``parameter`` (``name`` for messages).

    Examples
    --------
    >>> check("bound", 3, name="upper_y")
    3.0
    """
    return PARAMETERS[parameter].validate(name or parameter, value)


def spec_field(parameter: str, *, optional: bool = False) -> Callable[[Any, Any], Any]:
    """A before-validator for the release spec's field of this parameter.

    The spec (pydantic) reports the :class:`~dpframe.errors.InvalidParameterError` (a
    ``ValueError``) at the field's location; the value is checked exactly as the
    Python function would check it (no silent coercion of strings to numbers), and named
    as the field is (the Python argument of the same name): the same sentence.
    ``optional``: ``None`` (the field left out) passes.
    """

    def validate(value: Any, info: Any) -> Any:
        if optional and value is None:
            return None
        return check(parameter, value, name=getattr(info, "field_name", None))

    return validate
