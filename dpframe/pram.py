"""PRAM under ε-differential privacy on polars columns (Ayed, Battiston & Camerlenghi).

Each record's category is kept with probability ``q_k`` and otherwise moved to one of
the other ``S - 1`` categories, uniformly (paper eq. 8). The public functions:

* :func:`apply` -- the expression behind ``pl.col(c).dp.pram(epsilon, ...)``: a
  row-wise release, run by :func:`dpframe.collect` / :func:`dpframe.sink_parquet`
  (see :mod:`dpframe.rowwise` for how it is charged);
* :func:`design` -- the MI-optimal ``q`` for a prior ``p`` (:func:`krr` for a uniform
  prior: symmetric k-ary randomized response);
* :func:`dp_prior` -- a DP histogram of a column, to use as a public prior;
* :func:`estimate` / :func:`estimate_grouped` -- unbiased frequencies from a released
  column (or counts), with covariance and a simplex-projected version.

The kernels (pure numpy) live in :mod:`dpframe.mechanisms.pram`; the maths, the
corrected Proposition 3.2 and the departures from the paper are in
``docs/pram-design.md``; the user guide is ``docs/pram.md``.

Examples
--------
>>> import numpy as np
>>> from dpframe import pram
>>> d = pram.design([0.5, 0.3, 0.2], epsilon=1.0)
>>> d.matrix.shape, bool(d.epsilon_actual <= 1.0)
((3, 3), True)
"""

from __future__ import annotations

import math
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from dpframe.core.accountant import Accountant, Charge, LedgerEntry, current_accountant
from dpframe.core.constraints import check_choice, check_epsilon
from dpframe.core.randomness import RandomSource, as_source
from dpframe.errors import (
    InvalidDataError,
    InvalidParameterError,
    NoAccountantError,
)
from dpframe.mechanisms.pram import (
    DIAGONALS,
    PramDesign,
    PramEstimate,
    PramSampler,
    _check_design_epsilon,
    check_matrix,
    design,
    krr,
    mutual_information,
    project_simplex,
    randomize,
    sampler,
    vertex_families,
)
from dpframe.mechanisms.pram import estimate as _estimate_counts
from dpframe.rowwise import require_run

__all__ = [
    "PramDesign",
    "PramEstimate",
    "PramRelease",
    "PramSampler",
    "apply",
    "check_matrix",
    "design",
    "design_from_dict",
    "dominance_cost",
    "dp_prior",
    "dp_prior_from_counts",
    "estimate",
    "estimate_grouped",
    "krr",
    "mutual_information",
    "project_simplex",
    "randomize",
    "sampler",
    "vertex_families",
]

PRIOR_KINDS = ("uniform", "dp")
_RELEASES: weakref.WeakSet[PramRelease] = weakref.WeakSet()


# ---------------------------------------------------------------------------
# Categories and priors (public inputs, validated at build time)
# ---------------------------------------------------------------------------


def _check_categories(categories: Any) -> tuple[Any, ...] | None:
    if categories is None:
        return None
    if isinstance(categories, str | bytes) or not isinstance(categories, Sequence | pl.Series):
        if isinstance(categories, np.ndarray):
            categories = categories.tolist()
        else:
            raise InvalidParameterError(
                "categories must be a list of the column's possible values (strings or "
                f"integers), got {type(categories).__name__}"
            )
    cats = tuple(categories.to_list() if isinstance(categories, pl.Series) else categories)
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
    if len(set(cats)) != len(cats):
        dup = sorted({c for c in cats if cats.count(c) > 1})[:5]
        raise InvalidParameterError(f"categories must be distinct; repeated: {dup}")
    return cats


def _is_int(c: Any) -> bool:
    return isinstance(c, int | np.integer) and not isinstance(c, bool)


def _prior_weights(prior: Any, cats: tuple[Any, ...]) -> np.ndarray:
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
        w = np.array([prior[c] for c in cats], dtype=np.float64)
    else:
        try:
            w = np.asarray(prior, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                "prior must be 'uniform', 'dp', a dict {category: weight} or an array of "
                f"weights aligned with categories; got {prior!r:.80}"
            ) from None
        if w.shape != (len(cats),):
            raise InvalidParameterError(
                f"prior has shape {w.shape} but there are {len(cats)} categories; align the "
                "weights with categories= (or pass a dict)"
            )
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise InvalidParameterError(
            "prior weights must be finite, >= 0 and not all 0 (they are normalised to sum to 1)"
        )
    return w / w.sum()


def design_from_dict(d: Mapping[str, Any]) -> PramDesign:
    """Rebuild the design recorded in a ledger entry or Parquet provenance.

    The ledger keeps the sampled ``q`` exactly (``1 - c / 2**bits``), the prior and the
    categories, so a released file can be analysed with :func:`estimate` alone.
    """
    q = np.asarray(d["q"], dtype=np.float64)
    bits = int(d["bits"])
    c = np.rint((1.0 - q) * float(1 << bits)).astype(np.int64)
    p = np.asarray(d.get("prior_p", np.full(q.size, 1.0 / q.size)), dtype=np.float64)
    vertex = np.asarray(d.get("vertex_q", q), dtype=np.float64)
    for arr in (q, c, p, vertex):
        arr.setflags(write=False)
    levels, counts = np.unique(vertex, return_counts=True)
    return PramDesign(
        p=p,
        epsilon=float(d["epsilon"]),
        q=q,
        mutual_information=float(d.get("mutual_information", float("nan"))),
        epsilon_actual=float(d["epsilon_actual"]),
        diagonal=str(d.get("diagonal", "optimal")),
        vertex_q=vertex,
        levels=tuple(float(v) for v in levels[::-1]),
        level_counts=tuple(int(k) for k in counts[::-1]),
        bits=bits,
        move_numerators=c,
    )


def _design_dict(d: PramDesign, cats: tuple[Any, ...], prior: str) -> dict[str, Any]:
    out = {
        "categories": list(cats),
        "q": [float(v) for v in d.q],
        "bits": int(d.bits),
        "epsilon": float(d.epsilon),
        "epsilon_actual": float(d.epsilon_actual),
        "mutual_information": float(d.mutual_information),
        "diagonal": d.diagonal,
        "prior": prior,
        "prior_p": [float(v) for v in d.p],
        "vertex_q": [float(v) for v in d.vertex_q],
    }
    if d.diagonal == "dominant":  # what q >= 1/S costs, for the record
        out["mutual_information_unconstrained"] = dominance_cost(d)["unconstrained"]
    return out


def dominance_cost(d: PramDesign) -> dict[str, float]:
    """Mutual information of a design next to the unconstrained optimum for its prior.

    For a ``diagonal="dominant"`` design this is what ``q >= 1/S`` costs.

    Examples
    --------
    >>> p = np.array([0.6871, 0.2992, 0.0001, 0.0136, 0.0]); p /= p.sum()
    >>> cost = dominance_cost(design(p, 0.5, diagonal="dominant"))
    >>> round(cost["unconstrained"], 5), round(cost["this"], 5), round(cost["share_lost"], 3)
    (0.01382, 0.01251, 0.094)
    """
    free = design(d.p, d.epsilon) if d.epsilon <= 12 else krr(d.q.size, d.epsilon)
    this, best = float(d.mutual_information), float(free.mutual_information)
    return {"this": this, "unconstrained": best, "share_lost": 1 - this / best if best else 0.0}


# ---------------------------------------------------------------------------
# The row-wise release
# ---------------------------------------------------------------------------


class PramRelease:
    """The callable polars runs for ``.dp.pram`` (built by :func:`apply`).

    Per call (one streaming morsel, or the whole column with ``prior="dp"``): check that
    a dpframe runner is running, encode the values as category codes (nulls and unknown
    values raise before anything is charged), charge the accountant once per run, then
    randomize with a freshly keyed generator.
    """

    def __init__(
        self,
        *,
        epsilon: float | None,
        categories: tuple[Any, ...] | None,
        prior: Any,
        matrix: Any,
        diagonal: str,
        prior_share: float,
        accountant: Accountant | None,
        random: RandomSource,
        column: str | None,
    ) -> None:
        self.id = uuid.uuid4().hex
        self.column = column
        if categories is None and isinstance(prior, Mapping):
            categories = _check_categories(list(prior))  # a public prior names them
        self.categories = categories
        self.diagonal = check_choice("diagonal", diagonal, DIAGONALS)
        self.accountant = accountant
        self.random = random
        self._lock = threading.Lock()
        self._cache: dict[tuple[Any, ...], tuple[PramSampler, PramDesign | None]] = {}
        self.matrix = None
        if matrix is not None:
            if not (isinstance(prior, str) and prior == "uniform"):
                raise InvalidParameterError(
                    "pass either matrix= or prior=, not both: a given matrix fixes q"
                )
            m = np.asarray(matrix, dtype=np.float64) if not isinstance(matrix, PramDesign) else None
            actual = check_matrix(m) if m is not None else matrix.epsilon_actual
            if not math.isfinite(actual):
                raise InvalidParameterError(
                    "matrix is not differentially private for any epsilon: a column holds "
                    "both a zero and a non-zero entry"
                )
            self.matrix = matrix
            self.matrix_sampler = sampler(matrix)
            actual = self.matrix_sampler.epsilon_actual
            charged = math.ceil(actual * 1e9) / 1e9 if actual > 0 else 1e-9  # rounded up
            if epsilon is None:
                epsilon = charged
            elif actual > check_epsilon(epsilon) * (1 + 1e-12):
                raise InvalidParameterError(
                    f"matrix gives epsilon = {actual:.12g} (max over columns of log(max_i "
                    f"M_ij / min_i M_ij)), more than epsilon={epsilon!r}; raise epsilon or "
                    "flatten the matrix"
                )
            elif actual > epsilon:  # within the certificate's float allowance: charge it
                epsilon = charged
            if categories is not None and len(categories) != self.matrix_sampler.n_categories:
                raise InvalidParameterError(
                    f"matrix is {self.matrix_sampler.n_categories}x"
                    f"{self.matrix_sampler.n_categories} but categories lists "
                    f"{len(categories)} values"
                )
        if epsilon is None:
            raise InvalidParameterError("epsilon is required (unless matrix= is given)")
        self.epsilon = check_epsilon(epsilon)
        if isinstance(prior, str):
            check_choice("prior", prior, PRIOR_KINDS)
        self.prior = prior
        if not (isinstance(prior_share, float | int) and 0 < prior_share < 1):
            raise InvalidParameterError(
                f"prior_share must be a number in (0, 1), got {prior_share!r}"
            )
        self.prior_share = float(prior_share)
        if accountant is not None and accountant.neighbours == "add_remove":
            raise InvalidParameterError(_ADD_REMOVE)
        if categories is not None and prior != "dp":
            self._sampler_for(categories)  # validate the prior and design now
        if isinstance(prior, str) and prior == "dp":  # the design is made after the charge
            _check_design_epsilon(self._dp_split()[1])
        _RELEASES.add(self)

    def summary(self) -> dict[str, Any]:
        """What one run of this release costs and does, without reading data."""
        info: dict[str, Any] = {
            "release": self.id,
            "column": self.column,
            "mechanism": "pram",
            "composition": "parallel",
            "epsilon": self.epsilon,
            "delta": 0.0,
            "sensitivity": None,
            "scale": None,
            "error95": None,
        }
        return info

    def _dp_split(self) -> tuple[float, float]:
        """``prior="dp"``: epsilon for the histogram and for PRAM, summing to at most epsilon."""
        from dpframe.releases import _split_epsilon

        eps_prior, eps_pram = _split_epsilon(
            self.epsilon, [self.prior_share, 1.0 - self.prior_share]
        )
        return eps_prior, eps_pram

    @property
    def row_wise(self) -> bool:
        """False only for ``prior="dp"``, which needs the whole column at once."""
        return not (isinstance(self.prior, str) and self.prior == "dp")

    def _prior_label(self) -> str:
        if self.matrix is not None:
            return "matrix"
        return self.prior if isinstance(self.prior, str) else "public"

    def _sampler_for(
        self, cats: tuple[Any, ...], p: np.ndarray | None = None, epsilon: float | None = None
    ) -> tuple[PramSampler, PramDesign | None]:
        key = cats if p is None else None
        if key is not None and key in self._cache:
            return self._cache[key]
        eps = self.epsilon if epsilon is None else epsilon
        if self.matrix is not None:
            if len(cats) != self.matrix_sampler.n_categories:
                raise InvalidParameterError(
                    f"matrix= is {self.matrix_sampler.n_categories}x"
                    f"{self.matrix_sampler.n_categories} but the column has {len(cats)} "
                    "categories (from its Enum or categories=): give one row per category"
                )
            out: tuple[PramSampler, PramDesign | None] = (self.matrix_sampler, None)
        elif p is None and isinstance(self.prior, str) and self.prior == "uniform":
            d = krr(len(cats), eps)
            out = (d.sampler, d)
        else:
            pv = _prior_weights(self.prior, cats) if p is None else p
            d = design(pv, eps, diagonal=self.diagonal)
            out = (d.sampler, d)
        if key is not None:
            self._cache[key] = out
        return out

    # -- encoding ------------------------------------------------------------------

    def _categories_of(self, s: pl.Series, name: str) -> tuple[Any, ...]:
        return _categories_of(s, name, self.categories)

    def encode(self, s: pl.Series, name: str) -> tuple[tuple[Any, ...], np.ndarray]:
        """Category codes of ``s`` (``int64``) and the categories, or a clear error."""
        return _encode(s, name, self.categories)

    @staticmethod
    def _int_codes(values: np.ndarray, cats: tuple[Any, ...], name: str) -> np.ndarray:
        arr = np.asarray(cats, dtype=np.int64)
        v = values.astype(np.int64, copy=False)
        if np.array_equal(arr, np.arange(arr.size)):
            bad = (v < 0) | (v >= arr.size)
            codes = v
        else:
            order = np.argsort(arr, kind="stable")
            srt = arr[order]
            pos = np.clip(np.searchsorted(srt, v), 0, srt.size - 1)
            bad = srt[pos] != v
            codes = order[pos]
        if bad.any():
            raise InvalidDataError(
                f"column {name!r} has values outside the declared categories, e.g. "
                f"{np.unique(v[bad])[:5].tolist()}; add them to categories= or recode them"
            )
        return codes

    @staticmethod
    def decode(codes: np.ndarray, cats: tuple[Any, ...], like: pl.Series) -> pl.Series:
        """Codes back to values with ``like``'s dtype and name."""
        dtype = like.dtype
        if dtype.is_integer():
            values = np.asarray(cats, dtype=np.int64)[codes]
            return pl.Series(like.name, values).cast(dtype)
        lookup = pl.Series(like.name, list(cats), dtype=pl.String)
        if isinstance(dtype, pl.Enum) or dtype != pl.String:
            lookup = lookup.cast(dtype)
        return lookup.gather(codes)

    # -- evaluation --------------------------------------------------------------------

    def __call__(self, s: pl.Series) -> pl.Series:
        name = self.column or s.name
        run = require_run(f".dp.pram on column {name!r}")
        if self.accountant is None:
            raise NoAccountantError(
                f".dp.pram on column {name!r} was built with no accountant, so it cannot be "
                "charged: build it inside `with accountant:` or pass accountant=..."
            )
        if self.accountant.neighbours == "add_remove":
            raise InvalidParameterError(_ADD_REMOVE)
        calls = run.called(self.id)
        cats, codes = self.encode(s, name)
        if not self.row_wise and calls > 1:  # found by the dry pass, before any charge
            raise InvalidParameterError(
                f'.dp.pram(prior="dp") on column {name!r} was evaluated more than once in '
                "one run (polars split the column, e.g. in group_by().agg()); use "
                "dpframe.pram.dp_prior(...) and pass the result as a public prior"
            )
        if self.row_wise:
            sam, des = self._sampler_for(cats)  # a bad prior or matrix fails in the dry pass
        if run.validating:
            return s
        if self.row_wise:
            run.charge_once(self.id, lambda: self._charge(name, cats, sam, des))
            self._record(run, name, cats, sam, des)
            out = sam.randomize(codes, self.random.generator())
            return self.decode(out, cats, s)
        return self._dp_prior_release(run, name, cats, codes, s)

    def _record(
        self, run: Any, name: str, cats: tuple[Any, ...], sam: PramSampler, des: Any
    ) -> None:
        if name in run.records:
            return
        run.designs[name] = des
        if des is not None:
            run.records[name] = _design_dict(des, cats, self._prior_label())
        else:
            run.records[name] = {"categories": list(cats), "matrix": sam.matrix.tolist()}

    def _charge(self, name: str, cats: tuple[Any, ...], sam: PramSampler, des: Any) -> Any:
        return self.accountant.spend_all([self.charge_request(name, cats, sam, des)])[0]

    def charge_request(
        self, name: str, cats: tuple[Any, ...], sam: PramSampler, des: Any
    ) -> Charge:
        """What one run of this release costs, as a :class:`Charge` (for atomic charging)."""
        details = {
            "categories": len(cats),
            "prior": self._prior_label(),
            "epsilon_actual": sam.epsilon_actual,
            "sampler": sam.kind,
            "neighbours": self.accountant.neighbours,
            "seeded": self.random.seeded,
        }
        if des is not None:
            details["design"] = _design_dict(des, cats, self._prior_label())
        else:
            details["matrix"] = sam.matrix.tolist()
        return Charge(
            epsilon=self.epsilon,
            delta=0.0,
            mechanism="pram",
            columns=(name,),
            scale=None,
            composition="parallel",
            details=details,
        )

    def _dp_prior_release(
        self, run: Any, name: str, cats: tuple[Any, ...], codes: np.ndarray, s: pl.Series
    ) -> pl.Series:
        eps_prior, eps_pram = self._dp_split()

        def charge() -> list[LedgerEntry]:
            base = {"categories": len(cats), "neighbours": self.accountant.neighbours}
            return self.accountant.spend_all(
                [
                    _histogram_charge(
                        name,
                        len(cats),
                        eps_prior,
                        self.accountant.neighbours,
                        share=self.prior_share,
                    ),
                    Charge(
                        epsilon=eps_pram,
                        delta=0.0,
                        mechanism="pram",
                        columns=(name,),
                        scale=None,
                        composition="parallel",
                        note="design in the run's designs (dpframe.last_run())",
                        details={**base, "prior": "dp", "seeded": self.random.seeded},
                    ),
                ]
            )

        run.charge_once(self.id, charge)
        rng = self.random.generator()
        counts = np.bincount(codes, minlength=len(cats))
        p = _noisy_prior(counts, eps_prior, rng)
        sam, des = self._sampler_for(cats, p=p, epsilon=eps_pram)
        self._record(run, name, cats, sam, des)
        out = sam.randomize(codes, rng)
        return self.decode(out, cats, s)


def _categories_of(s: pl.Series, name: str, categories: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The categories of column ``name``: its Enum's, or ``categories`` (checked against it)."""
    if isinstance(s.dtype, pl.Enum):
        own = tuple(s.dtype.categories.to_list())
        if categories is not None and set(own) != set(categories):
            raise InvalidParameterError(
                f"column {name!r} is an Enum with categories {list(own)[:8]}, which differ "
                f"from categories={list(categories)[:8]}; pass the same set, or omit "
                "categories= to use the Enum's"
            )
        return categories or own
    if categories is None:
        raise InvalidParameterError(
            f"column {name!r} has dtype {s.dtype}: pass categories=[...] (every possible "
            "value, in a fixed order). dpframe never takes them from the data, because "
            "which values occur is itself private. An Enum column carries its own."
        )
    return categories


def _encode(
    s: pl.Series, name: str, categories: tuple[Any, ...] | None
) -> tuple[tuple[Any, ...], np.ndarray]:
    """Category codes of ``s`` (``int64``) and the categories, or a clear error."""
    cats = _categories_of(s, name, categories)
    if s.null_count():
        raise InvalidDataError(
            f"column {name!r} has {s.null_count()} null value(s) in this batch; PRAM "
            "needs a category for every record: fill them with a declared category "
            "(e.g. .fill_null('unknown') and list 'unknown' in categories=) or drop them"
        )
    dtype = s.dtype
    str_cats = all(isinstance(c, str) for c in cats)
    if dtype.is_integer():
        if str_cats:
            raise InvalidDataError(
                f"column {name!r} holds integers but categories are strings: pass integer "
                "categories=, or cast the column to String"
            )
        return cats, PramRelease._int_codes(s.to_numpy(), cats, name)
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum | pl.Categorical):
        if not str_cats:
            raise InvalidDataError(
                f"column {name!r} holds strings but categories are integers: pass string "
                "categories=, or cast the column to an integer type"
            )
        enum = pl.Enum(list(cats))
        if isinstance(dtype, pl.Enum) and tuple(dtype.categories.to_list()) == cats:
            coded = s
        else:
            src = s if dtype == pl.String else s.cast(pl.String)
            coded = src.cast(enum, strict=False)
            if coded.null_count():
                bad = src.filter(coded.is_null()).unique().head(5).to_list()
                raise InvalidDataError(
                    f"column {name!r} has values outside the declared categories, e.g. "
                    f"{bad}; add them to categories= or recode them before PRAM"
                )
        return cats, coded.to_physical().to_numpy().astype(np.int64, copy=False)
    raise InvalidDataError(
        f"column {name!r} has dtype {dtype}; PRAM needs a categorical column: Enum, "
        "Categorical, String or integer"
    )


_ADD_REMOVE = (
    "PRAM protects the values of records, not their presence: it is not differentially "
    "private under add/remove neighbours. Use an accountant with neighbours='substitute'."
)


def _histogram_charge(
    column: str, n_categories: int, epsilon: float, neighbours: str, **details: Any
) -> Charge:
    """The charge of a DP histogram of a column's categories (see :func:`_noisy_prior`)."""
    return Charge(
        epsilon=epsilon,
        delta=0.0,
        mechanism="pram_prior_histogram",
        columns=(column,),
        scale=None,
        composition="parallel",
        note="DP histogram of the column, used only to choose the PRAM matrix",
        details={
            "categories": n_categories,
            "sensitivity": 2,
            "neighbours": neighbours,
            **details,
        },
    )


def _noisy_prior(counts: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """A DP prior from exact category counts: discrete Laplace noise, clipped, normalised.

    Under substitute neighbours one record moves one count down and another up, so the
    histogram's l1 sensitivity is 2. Clipping at 0 and normalising are post-processing.
    """
    from dpframe.mechanisms.laplace import calibrate_laplace, release_laplace

    cal = calibrate_laplace(epsilon, 2.0, granularity=1.0, values_on_grid=True)
    noisy = np.clip(release_laplace(counts.astype(np.float64), cal, rng), 0.0, None)
    total = noisy.sum()
    return noisy / total if total > 0 else np.full(counts.size, 1.0 / counts.size)


def apply(
    expr: pl.Expr | str,
    epsilon: float | None = None,
    *,
    categories: Sequence[Any] | None = None,
    prior: str | Mapping[Any, float] | Sequence[float] | np.ndarray = "uniform",
    matrix: Any = None,
    diagonal: str = "optimal",
    prior_share: float = 0.1,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> pl.Expr:
    """Post-randomize a categorical column under ``epsilon``-DP (``.dp.pram``).

    Parameters
    ----------
    expr : polars.Expr or str
        The categorical column: Enum, Categorical, String or integer.
    epsilon : float
        Privacy cost (> 0), charged once per run (see :mod:`dpframe.rowwise`). Optional
        with ``matrix=``: then the matrix's own epsilon is charged.
    categories : list of str or int, optional
        Every possible value, in a fixed order. Required unless the column is an Enum
        (whose categories are used) or ``prior`` is a dict (whose keys are). Never taken
        from the data: the set of values present is itself private.
    prior : "uniform", "dp", dict or array, default "uniform"
        The category distribution ``p`` the matrix is optimised for. ``"uniform"``
        gives symmetric k-ary randomized response (safe: uses nothing about the data).
        A dict ``{category: weight}`` or an array aligned with ``categories`` is a
        *public* prior (e.g. last census). ``"dp"`` spends ``prior_share * epsilon`` on
        a DP histogram of the column and optimises for it with the rest; it needs the
        whole column in memory (for large data use :func:`dp_prior` and pass the result).
    matrix : array_like (S, S) or PramDesign, optional
        Use this row-stochastic matrix instead (row = true, column = released); it is
        checked, and its actual epsilon reported and charged.
    diagonal : {"optimal", "dominant"}, default "optimal"
        ``"dominant"`` forces ``q_k >= 1/S``: every record is at least as likely to keep
        its value as to take any particular other one (costs mutual information: compare
        ``design(p, eps).mutual_information`` for both).
    prior_share : float, default 0.1
        Share of ``epsilon`` spent on the DP histogram when ``prior="dp"``.
    accountant : Accountant, optional
        Default: the innermost ``with accountant:`` block at build time. Must use
        ``neighbours="substitute"``.
    seed : int or RandomSource, optional
        Reproducible randomization for tests -- **unsafe for publication**.

    Returns
    -------
    polars.Expr
        The released column, same dtype and name.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> lf = pl.LazyFrame({"tenure": ["own", "rent", "rent", "other"]})
    >>> with dpframe.Accountant(epsilon=2.0) as acct:
    ...     q = lf.with_columns(
    ...         pl.col("tenure").dp.pram(1.0, categories=["own", "rent", "other"])
    ...     )
    ...     out = dpframe.collect(q)
    >>> set(out["tenure"]) <= {"own", "rent", "other"}, acct.spent.epsilon
    (True, 1.0)
    """
    if isinstance(expr, str):
        expr = pl.col(expr)
    if not isinstance(expr, pl.Expr):
        raise InvalidParameterError(
            f"expr must be a polars expression or a column name, got {type(expr).__name__}"
        )
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"accountant must be a dpframe.Accountant, got {type(accountant).__name__}"
        )
    try:
        column = expr.meta.output_name()
    except pl.exceptions.ComputeError:
        column = None
    release = PramRelease(
        epsilon=epsilon,
        categories=_check_categories(categories),
        prior=prior,
        matrix=matrix,
        diagonal=diagonal,
        prior_share=prior_share,
        accountant=accountant or current_accountant(),
        random=as_source(seed),
        column=column,
    )
    out = expr.map_batches(release, return_dtype=pl.dtype_of(expr), is_elementwise=release.row_wise)
    return out.alias(column) if column else out


# ---------------------------------------------------------------------------
# A DP prior, streamed
# ---------------------------------------------------------------------------


def dp_prior(
    frame: pl.DataFrame | pl.LazyFrame,
    column: str,
    epsilon: float,
    *,
    categories: Sequence[Any] | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> dict[Any, float]:
    """A DP estimate of a column's category distribution, to use as a public prior.

    Counts each declared category with native polars (streaming), charges ``epsilon``
    (discrete Laplace, l1 sensitivity 2 under substitute neighbours), clips at 0 and
    normalises. The result may be published and passed as ``prior=`` to ``.dp.pram``
    and to :func:`design`; the total cost is this ``epsilon`` plus PRAM's.

    Examples
    --------
    >>> import polars as pl, dpframe
    >>> df = pl.DataFrame({"c": ["a"] * 70 + ["b"] * 30})
    >>> with dpframe.Accountant(epsilon=1.0) as acct:
    ...     p = dpframe.pram.dp_prior(df, "c", 0.2, categories=["a", "b", "z"])
    >>> sorted(p), round(sum(p.values()), 9), acct.spent.epsilon
    (['a', 'b', 'z'], 1.0, 0.2)
    """
    eps, acct = _prior_budget(epsilon, accountant)  # before reading anything
    lf = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    if not isinstance(lf, pl.LazyFrame):
        raise InvalidParameterError(f"frame must be a polars frame, got {type(frame).__name__}")
    if column not in lf.collect_schema():
        raise InvalidParameterError(f"column {column!r} is not in the frame")
    counts = lf.group_by(column).agg(pl.len().alias("n")).collect(engine="streaming")
    return dp_prior_from_counts(
        counts, column, eps, categories=categories, accountant=acct, seed=seed
    )


def _prior_budget(epsilon: float, accountant: Accountant | None) -> tuple[float, Accountant]:
    """The DP prior's epsilon and accountant, checked (substitute neighbours only)."""
    eps = check_epsilon(epsilon)
    acct = accountant or current_accountant()
    if acct is None:
        raise NoAccountantError("dp_prior needs an accountant: pass accountant= or use `with`")
    if acct.neighbours == "add_remove":
        raise InvalidParameterError(
            "dp_prior is for PRAM, which needs neighbours='substitute' (" + _ADD_REMOVE + ")"
        )
    return eps, acct


def dp_prior_from_counts(
    counts: pl.DataFrame,
    column: str,
    epsilon: float,
    *,
    categories: Sequence[Any] | None = None,
    accountant: Accountant | None = None,
    seed: int | RandomSource | None = None,
) -> dict[Any, float]:
    """:func:`dp_prior` from the exact count of each value, however an engine computed them.

    ``counts`` has the column ``column`` (its values, with the data's dtype) and ``n``
    (how many records hold each). Values outside the declared categories and nulls are
    refused before the charge; declared categories absent from ``counts`` count 0.
    """
    eps, acct = _prior_budget(epsilon, accountant)
    # nulls and values outside the categories are refused here, before the charge
    cats, codes = _encode(counts[column], column, _check_categories(categories))
    exact = np.zeros(len(cats), dtype=np.int64)
    np.add.at(exact, codes, counts["n"].to_numpy().astype(np.int64))
    acct.spend_all([_histogram_charge(column, len(cats), eps, acct.neighbours)])
    p = _noisy_prior(exact, eps, as_source(seed).generator())
    return {c: float(v) for c, v in zip(cats, p, strict=True)}


# ---------------------------------------------------------------------------
# Estimation
# ---------------------------------------------------------------------------


def _as_design(design_like: Any) -> Any:
    if isinstance(design_like, PramDesign):
        return design_like
    if isinstance(design_like, Mapping) and "q" in design_like:
        return design_from_dict(design_like)
    if isinstance(design_like, Mapping) and "matrix" in design_like:  # a matrix= record
        return np.asarray(design_like["matrix"], dtype=np.float64)
    return design_like  # a matrix; validated by the kernel


def estimate(
    released: pl.Series | Sequence[int] | np.ndarray,
    design: PramDesign | Mapping[str, Any] | np.ndarray,
    *,
    categories: Sequence[Any] | None = None,
) -> PramEstimate:
    """Estimate the true category distribution from a PRAM release.

    Parameters
    ----------
    released : polars.Series or array_like
        The released column (a Series of values; ``categories`` or an Enum dtype gives
        their order), or released counts per category (length ``S`` numpy/list).
    design : PramDesign, dict or array_like (S, S)
        The design that was sampled: a :class:`PramDesign`, the ``"design"`` dict of the
        ledger entry / provenance, or the matrix.
    categories : list, optional
        Category order of a released Series (default: its Enum categories, or the
        design dict's ``"categories"``).

    Returns
    -------
    PramEstimate
        ``p_hat`` = ``(M^T)^{-1} m_hat`` (unbiased), its estimated ``covariance``,
        ``p_simplex`` (projected onto the simplex), ``counts``, ``n``.

    Examples
    --------
    >>> import numpy as np
    >>> d = design([0.6, 0.3, 0.1], 2.0)
    >>> expected = np.rint(10_000 * d.matrix.T @ [0.6, 0.3, 0.1])  # released counts
    >>> est = estimate(expected, d)
    >>> est.p_hat.round(2).tolist(), bool(abs(est.p_simplex.sum() - 1) < 1e-12)
    ([0.6, 0.3, 0.1], True)
    """
    if isinstance(released, pl.Series):
        cats = categories
        if cats is None and isinstance(design, Mapping):
            cats = design.get("categories")
        cats_t, codes = _encode(released, released.name, _check_categories(cats))
        counts = np.bincount(codes, minlength=len(cats_t))
        return _estimate_counts(counts, _as_design(design), kind="counts")
    return _estimate_counts(np.asarray(released), _as_design(design), kind="counts")


def estimate_grouped(
    frame: pl.DataFrame | pl.LazyFrame,
    column: str,
    by: str | Sequence[str],
    design: PramDesign | Mapping[str, Any] | np.ndarray,
    *,
    categories: Sequence[Any] | None = None,
) -> pl.DataFrame:
    """Per-group frequency estimates of a PRAM'd column (a cross-tabulation).

    For each group of ``by`` (columns that were *not* randomized), the released counts
    of ``column`` give ``p_hat = (M^T)^{-1} m_hat`` within the group, with standard
    errors and the simplex projection. Groups are those present in the released frame.

    Returns
    -------
    polars.DataFrame
        Columns ``by..., category, n, count, p_hat, se, p_simplex``.

    Examples
    --------
    >>> import polars as pl
    >>> d = krr(2, 2.0)
    >>> rel = pl.DataFrame({"g": ["x"] * 4 + ["y"] * 4, "c": list("aababbba")})
    >>> estimate_grouped(rel, "c", "g", d, categories=["a", "b"]).columns
    ['g', 'category', 'n', 'count', 'p_hat', 'se', 'p_simplex']
    """
    keys = [by] if isinstance(by, str) else list(by)
    df = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    if not isinstance(df, pl.DataFrame):
        raise InvalidParameterError(f"frame must be a polars frame, got {type(frame).__name__}")
    missing = [c for c in [column, *keys] if c not in df.columns]
    if missing:
        raise InvalidParameterError(f"columns {missing} are not in the frame")
    cats = categories
    if cats is None and isinstance(design, Mapping):
        cats = design.get("categories")
    if cats is None and isinstance(df.schema[column], pl.Enum):
        cats = df.schema[column].categories.to_list()
    if cats is None:
        raise InvalidParameterError("pass categories= (the order the design uses)")
    rows = []
    for key, part in df.group_by(keys, maintain_order=True):
        est = estimate(part[column], design, categories=cats)
        se = est.standard_errors
        for i, c in enumerate(cats):
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "category": c,
                    "n": est.n,
                    "count": int(est.counts[i]),
                    "p_hat": float(est.p_hat[i]),
                    "se": float(se[i]),
                    "p_simplex": float(est.p_simplex[i]),
                }
            )
    return pl.DataFrame(rows)
