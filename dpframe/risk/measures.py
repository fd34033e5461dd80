"""The five DR-HA measures per cell (Liu & Zhao, Definitions 6-11), exact and as printed.

A frequency table ``counts`` (N, K) holds, for each non-empty quasi-identifier cell ``i``
(row), the number of records with each level ``k`` of the sensitive attribute Y (column;
the columns are the *declared* domain of Y, so columns of zeros are allowed). The table
is sanitized count by count, ``n~_ik = n_ik + e_ik`` with iid noise from the mechanism
(:mod:`dpframe.risk.noise`); a count is read as *present* when ``n~ >= 0.5``, which
happens independently for every count, with probability ``π(c) = 1 - a(c)``,
``a(c) = F(0.5 - c)`` (:func:`~dpframe.risk.noise.absent_probability`).

Measures (``measure=``)
-----------------------
``"local"`` (Definition 6)
    ``ρ_i = Σ_{k: n_ik > 0} π(n_ik) Π_{k' != k} a(n_ik')``: the probability that the
    sanitized cell is homogeneous in one of the levels the cell really holds. For a
    homogeneous cell this *is* the DR-HA; for a heterogeneous one it is the paper's
    conservative Scenario-8 convention (every record counts as disclosed when the
    cell turns homogeneous in one of its own levels), the right-hand side of eq. (6).
    ``scenario8="records"`` uses eq. (7) instead: each term is weighted by
    ``n_ik / n_i``, the share of the cell's records whose Y the attacker then gets right.
``"expected"`` (Definition 7)
    ``E[ρ(c)]`` over ``c ~ Multinomial(n_i, p̂_i)``, ``p̂_i = n_i / n_i`` (plug-in).
``"shrinkage"`` (Definition 8)
    ``E[ρ(c)]`` over ``p ~ Dirichlet(α)``, ``c | p ~ Multinomial(n_i, p)``, i.e. over the
    Dirichlet-multinomial ``(n_i, α)``.
``"marginal"`` (Definition 9)
    ``Σ_n f(n) ρ^e(n, p̂_i)`` over a cell-size model ``f`` (an object with ``support``,
    integers >= 1, and ``pmf``).
``"marginal_shrinkage"`` (Definition 10)
    ``Σ_n f(n) ρ^s(n; α)``: one value for a generic cell (every row of the result
    holds it).

Exact computation (``method="exact"``, the default)
---------------------------------------------------
The measures are expectations of ``Σ_k h(c_k) Π_{k' != k} a(c_k')`` with
``h(c) = π(c) 1(c >= 1)`` (times ``c / n`` for ``"records"``). Under a multinomial or a
Dirichlet-multinomial the levels can be drawn one after the other (``c_1 ~ Bin(n,
p_1)``, ``c_2 | c_1 ~ Bin(n - c_1, p_2 / (1 - p_1))``, ...; beta-binomials with the
remaining α for the Dirichlet-multinomial), so each focus level ``k`` costs a dynamic
programme over "records remaining": ``O(n)`` for K = 2 and ``O((K - 2) n²)`` per
focus level otherwise, vectorised over the ε grid, once per distinct sorted count
vector (or per distinct size, for the shrinkage measures). The marginal measures sum
over the size model's support, skipping its least likely sizes up to a total mass of
``1e-15`` (the risk lies in [0, 1], so the value moves by at most that much).

The paper's closed forms (``method="paper"``)
---------------------------------------------
Theorem 1 (Laplace, eqs. 13-17) and Theorem 3 (the Gaussians, eqs. 22-26, used for the
analytic Gaussian too, with its σ), with the corrections listed below. Each cell's
value is ``S hom(n) + 1(n >= 2) (1 - S) het(n)``, where ``S`` is the probability that
the original cell is homogeneous (1 or 0 for ``"local"``, ``Σ_k p̂_ik^n`` for the
plug-in, ``A(n) = Σ_k Γ(α.)Γ(α_k + n) / (Γ(α. + n)Γ(α_k))`` under the prior) and
``het(n)`` is the probability that a cell ``(n - 1, 1, 0, ...)`` turns homogeneous in
one of its two levels. ``het(n)`` bounds the exact value of any *two-level* cell of
size ``n``, but not of a cell that holds three or more levels (below).

Which values are exact
----------------------
:attr:`CellRisk.exact` is ``True`` where the value is the DR-HA itself, with no
Scenario-8 convention involved, i.e. where the computation puts no probability on a
heterogeneous original cell: ``"local"`` a homogeneous cell; ``"expected"`` a
homogeneous cell or ``n_i = 1``; ``"shrinkage"`` ``n_i = 1``; ``"marginal"`` a
homogeneous cell (or a size model with all mass at ``n = 1``); ``"marginal_shrinkage"``
a size model with all its mass at ``n = 1``. With ``scenario8="records"`` eq. (7)
defines the risk of every cell, so every exact-method value is exact. With
``method="paper"`` the other values are the paper's *claimed* upper bounds.

Errata (checked in ``tests/risk/test_measures.py``)
---------------------------------------------------
* Eqs. (13) and (22) apply the leading ``(1 - ½e^{-ε/2})^{K-1}`` (``(1 + erf(0.5 /
  (√2σ)))^{K-1} / 2^K``) to the Scenario-8 term too; it has the power ``K - 2`` only
  (supplement S1/S3; eqs. 14 and 23 are right). (S1), K = 2: that term's factor is ½,
  with no leading factor (as in S2).
* Corollary 4 eqs. (28), (30): ``4B(α1, α2)`` is left from K = 2 (and ``A_i`` already
  holds the ``1/B``): the general form divides by ``2^K``, power ``K - 1``.
* Corollaries 2 and 4 drop the Scenario-8 term from the shrinkage measures (19), (21),
  (28), (30): under a Dirichlet prior a cell of size >= 2 is heterogeneous with
  probability ``1 - A(n) > 0`` whatever the data, so the term stays.
* Scenario 8 "upper bound": for a cell holding three or more levels it is not one
  (ε → 0: 3/8 against 2/8 for three levels, K = 3).
* The marginal measures as printed, eqs. (16), (20), (25), (29) (and S4, S9), multiply
  each cell's expected DR-HA by ``f(n_i; β)`` at the cell's *own* size; Definition 9 is
  the expectation over ``n``, ``Σ_n f(n) ρ^e(n, p̂_i)``, which is what is computed here
  (``method="paper"`` too: the paper's per-``n`` cell expression inside that sum).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import MARGINAL_MEASURES as _MARGINAL
from dpframe.core.constraints import RISK_GAUSSIANS as GAUSSIANS
from dpframe.core.constraints import RISK_MEASURES as MEASURES
from dpframe.core.constraints import RISK_METHODS as METHODS
from dpframe.core.constraints import SCENARIO8, check
from dpframe.core.constraints import SHRINKAGE_MEASURES as _SHRINKAGE
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.risk.noise import (
    ZCDP,
    absent_probability,
    noise_scale,
    privacy_grid,
)

__all__ = ["MEASURES", "METHODS", "SCENARIO8", "CellRisk", "cell_risk"]

# The label of every DR-HA output: it describes the confidential data, and is not a release.
ASSESSMENT = "DR-HA of the confidential table: no budget spent, not for publication"


@dataclass(frozen=True, eq=False)
class CellRisk:
    """Per-cell DR-HA over an ε grid (an assessment of the confidential table).

    Attributes
    ----------
    values : numpy.ndarray
        (N, E): the risk of cell ``i`` at ``epsilon[e]`` (``"marginal_shrinkage"``: every
        row holds the generic-cell value).
    exact : numpy.ndarray
        (N,) bool: the value is the DR-HA itself, not a Scenario-8 convention or bound.
    sizes : numpy.ndarray
        (N,) int: the cell sizes ``n_i``.
    epsilon : numpy.ndarray
        (E,) the ε grid.
    measure, mechanism, delta, scenario8, method
        As passed to :func:`cell_risk`.
    assessment : str
        :data:`ASSESSMENT`: these values describe the confidential table; nothing was spent
        and they are not for publication.
    """

    values: np.ndarray
    exact: np.ndarray
    sizes: np.ndarray
    epsilon: np.ndarray
    measure: str
    mechanism: str
    delta: float | None
    scenario8: str
    method: str
    assessment: str = ASSESSMENT

    def average(self, weighted: bool) -> np.ndarray:
        """Average DR-HA over the cells (Definition 11), one value per ε.

        Parameters
        ----------
        weighted : bool
            ``False``: every cell weighs ``1/N``; ``True``: cell ``i`` weighs ``n_i / n``.

        Examples
        --------
        >>> r = cell_risk([[3, 0], [1, 1]], mechanism="laplace", epsilon=100.0)
        >>> r.average(False).tolist(), r.average(True).tolist()
        ([0.5], [0.6])
        """
        if weighted:
            w = self.sizes / self.sizes.sum()
            return w @ self.values
        return self.values.mean(axis=0)

    @property
    def all_exact(self) -> bool:
        """``True`` when every cell's value is exact (see :attr:`exact`)."""
        return bool(self.exact.all())


# --------------------------------------------------------------------------- validation


def _check_counts(counts: Any) -> np.ndarray:
    try:
        arr = np.asarray(counts)
    except (TypeError, ValueError):
        raise InvalidDataError(
            "counts must be a 2-d array of non-negative integer counts (cells x levels of Y)"
        ) from None
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise InvalidDataError(
            f"counts must hold non-negative integer counts, got dtype {arr.dtype}: "
            "pass a numeric (N, K) table of record counts"
        )
    if arr.ndim != 2:
        raise InvalidDataError(
            f"counts must be a 2-d table (cells x levels of Y), got shape {arr.shape}; "
            "for a single cell pass [[n_1, ..., n_K]]"
        )
    n_cells, n_levels = arr.shape
    if n_cells < 1:
        raise InvalidDataError("counts has no cells (rows): DR-HA needs at least one cell")
    if n_levels < 2:
        raise InvalidDataError(
            f"counts has K={n_levels} column(s): the sensitive attribute needs K >= 2 "
            "levels; declare its full domain (columns of zeros are allowed)"
        )
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all():
            raise InvalidDataError("counts holds NaN or infinite values: counts must be finite")
        if (arr != np.round(arr)).any():
            raise InvalidDataError(
                "counts holds non-integer values: DR-HA is defined on record counts"
            )
    if (arr < 0).any():
        raise InvalidDataError("counts holds negative values: record counts must be >= 0")
    out = arr.astype(np.int64)
    empty = np.flatnonzero(out.sum(axis=1) == 0)
    if empty.size:
        raise InvalidDataError(
            "empty cell: DR-HA is defined over non-empty cells; rows "
            f"{empty[:10].tolist()} of counts sum to 0 (drop them first)"
        )
    return out


def _check_alpha(alpha: Any, n_levels: int, measure: str) -> np.ndarray | None:
    if measure not in _SHRINKAGE:
        if alpha is not None:
            raise InvalidParameterError(
                f"alpha is only used by the shrinkage measures; measure={measure!r} "
                "ignores it: pass alpha=None"
            )
        return None
    if alpha is None:
        raise InvalidParameterError(
            f"measure={measure!r} needs alpha=: the K Dirichlet hyperparameters (> 0), "
            "e.g. from dpframe.risk.priors.dirichlet_eb"
        )
    try:
        a = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"alpha must be K numbers > 0, got {alpha!r}") from None
    if a.shape != (n_levels,):
        raise InvalidParameterError(
            f"alpha must have one value per level of Y (K={n_levels}), got shape {a.shape}"
        )
    if not np.isfinite(a).all() or (a <= 0).any():
        raise InvalidParameterError(f"alpha must be finite and > 0, got {a.tolist()}")
    return a


def _check_size_model(size_model: Any, measure: str) -> tuple[np.ndarray, np.ndarray] | None:
    if measure not in _MARGINAL:
        if size_model is not None:
            raise InvalidParameterError(
                f"size_model is only used by the marginal measures; measure={measure!r} "
                "ignores it: pass size_model=None"
            )
        return None
    if size_model is None:
        raise InvalidParameterError(
            f"measure={measure!r} needs size_model=: an object with .support (cell sizes "
            ">= 1) and .pmf, e.g. from dpframe.risk.priors.fit_size_model"
        )
    if not (hasattr(size_model, "support") and hasattr(size_model, "pmf")):
        raise InvalidParameterError(
            "size_model must have .support (cell sizes >= 1) and .pmf (summing to 1), "
            f"got {type(size_model).__name__}"
        )
    try:
        support = np.asarray(size_model.support, dtype=np.float64)
        pmf = np.asarray(size_model.pmf, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError("size_model.support and .pmf must be numeric") from None
    if support.ndim != 1 or pmf.shape != support.shape or support.size == 0:
        raise InvalidParameterError(
            "size_model.support and .pmf must be 1-d arrays of the same, non-zero length; "
            f"got shapes {support.shape} and {pmf.shape}"
        )
    if not np.isfinite(support).all() or (support != np.round(support)).any():
        raise InvalidParameterError("size_model.support must hold integer cell sizes")
    if (support < 1).any():
        raise InvalidParameterError(
            "size_model.support must hold cell sizes >= 1 (DR-HA is defined over non-empty "
            "cells): use a zero-truncated size model"
        )
    if np.unique(support).size != support.size:
        raise InvalidParameterError("size_model.support holds repeated sizes")
    if not np.isfinite(pmf).all() or (pmf < 0).any():
        raise InvalidParameterError("size_model.pmf must be finite and >= 0")
    if abs(pmf.sum() - 1.0) > 1e-6:
        raise InvalidParameterError(
            f"size_model.pmf must sum to 1 (got {pmf.sum():.9g}): renormalise the "
            "(truncated) size distribution"
        )
    keep = pmf > 0
    return support[keep].astype(np.int64), pmf[keep]


# --------------------------------------------------------------------------- exact kernel


def _tables(mechanism: str, scale: np.ndarray, cmax: int) -> tuple[np.ndarray, np.ndarray]:
    """``a(c)`` and ``h(c) = π(c) 1(c >= 1)`` for ``c = 0..cmax``, each (cmax + 1, E).

    ``π(c) = 1 - F(0.5 - c) = F(c - 0.5)`` (symmetric noise), taken from the CDF directly
    so that it keeps its precision where it is small.
    """
    c = np.arange(cmax + 1, dtype=np.float64)[:, None]
    absent = absent_probability(mechanism, c, scale[None, :])
    present = absent_probability(mechanism, 1.0 - c, scale[None, :])
    present[0] = 0.0
    return absent, present


def _cond_pmf(law: str, c: np.ndarray, r: Any, w: np.ndarray, w_after: np.ndarray) -> np.ndarray:
    """``P(c_j = c | r records remain)`` for the level drawn next.

    Multinomial: ``Bin(r, w / (w + w_after))``; Dirichlet-multinomial:
    ``BetaBin(r, w, w_after)`` (``w_after``: the weights of the levels drawn later).
    """
    from scipy.stats import betabinom, binom

    if law == "multinomial":
        return binom.pmf(c, r, w / (w + w_after))
    return betabinom.pmf(c, r, w, w_after)


def _expected_terms(
    n: int, weights: np.ndarray, law: str, absent: np.ndarray, h: np.ndarray
) -> np.ndarray:
    """``Σ_k E[h(c_k) Π_{j != k} a(c_j)]`` for ``c ~ law(n, weights[m])``, shape (M, E).

    ``weights`` (M, K') > 0: multinomial probabilities (any positive scale) or Dirichlet
    hyperparameters. ``absent`` and ``h`` are tables over ``c = 0..n`` (at least).
    Levels are drawn focus first; the last one takes the records that remain, so the
    DP runs over "records remaining" for the K' - 2 levels in between.
    """
    m, k_eff = weights.shape
    a = absent[: n + 1]
    hh = h[: n + 1]
    if k_eff == 1:
        return np.repeat(hh[n][None, :], m, axis=0)
    c = np.arange(n + 1)
    out = np.zeros((m, a.shape[1]))
    for k in range(k_eff):
        order = [k, *[j for j in range(k_eff) if j != k]]
        w = weights[:, order]
        after = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]  # Σ_{l >= j}
        after = np.concatenate([after[:, 1:], np.zeros((m, 1))], axis=1)  # Σ_{l > j}
        v = a[None]  # last level: c = r, value a(r)
        for pos in range(k_eff - 2, 0, -1):
            t = _cond_pmf(
                law,
                c[None, None, :],
                c[None, :, None],
                w[:, pos, None, None],
                after[:, pos, None, None],
            )  # (M, r, c)
            vn = np.empty((m, n + 1, a.shape[1]))
            for r in range(n + 1):
                prod = a[: r + 1] * v[:, r::-1]  # c -> a(c) v(r - c)
                if prod.shape[0] == 1:
                    vn[:, r] = t[:, r, : r + 1] @ prod[0]
                else:
                    vn[:, r] = np.einsum("mc,mce->me", t[:, r, : r + 1], prod)
            v = vn
        t0 = _cond_pmf(law, c[None, :], n, w[:, 0, None], after[:, 0, None])  # (M, c)
        prod = hh * v[:, ::-1]  # c -> h(c) v(n - c)
        if prod.shape[0] == 1:
            out += t0 @ prod[0]
        else:
            out += np.einsum("mc,mce->me", t0, prod)
    return out


def _h_for(h: np.ndarray, n: int, records: bool) -> np.ndarray:
    if not records:
        return h
    return h[: n + 1] * (np.arange(n + 1) / n)[:, None]


def _plugin_batch(
    n: int, patterns: np.ndarray, absent: np.ndarray, h: np.ndarray, records: bool
) -> np.ndarray:
    """Expected DR-HA at size ``n`` for plug-in patterns (M, K) sorted descending."""
    n_levels = patterns.shape[1]
    hn = _h_for(h, n, records)
    out = np.empty((patterns.shape[0], absent.shape[1]))
    nonzero = (patterns > 0).sum(axis=1)
    for k_eff in np.unique(nonzero):
        sel = nonzero == k_eff
        # levels with p = 0 stay at 0: each contributes the factor a(0)
        vals = _expected_terms(
            n, patterns[sel, :k_eff].astype(np.float64), "multinomial", absent, hn
        )
        out[sel] = vals * absent[0] ** (n_levels - k_eff)
    return out


def _exact_local(counts: np.ndarray, mechanism: str, scale: np.ndarray, records: bool):
    """``Σ_{k: n_k > 0} π(n_k) Π_{k' != k} a(n_k')`` (times ``n_k / n``), per row."""
    patterns, inv = np.unique(-np.sort(-counts, axis=1), axis=0, return_inverse=True)
    uniq, pos = np.unique(patterns, return_inverse=True)
    pos = pos.reshape(patterns.shape)
    u = uniq.astype(np.float64)[:, None]
    a_u = absent_probability(mechanism, u, scale[None, :])
    p_u = absent_probability(mechanism, 1.0 - u, scale[None, :])
    p_u[uniq == 0] = 0.0
    n_levels = patterns.shape[1]
    sizes = patterns.sum(axis=1)
    # prod_before[k] = Π_{j < k} a(n_j), built level by level; then sweep back
    before = [np.ones((patterns.shape[0], scale.size))]
    for k in range(n_levels - 1):
        before.append(before[-1] * a_u[pos[:, k]])
    out = np.zeros_like(before[0])
    after = np.ones_like(out)
    for k in range(n_levels - 1, -1, -1):
        term = p_u[pos[:, k]] * before[k] * after
        if records:
            term *= (patterns[:, k] / sizes)[:, None]
        out += term
        after = after * a_u[pos[:, k]]
    return out[inv.ravel()]


def _exact_expected(counts: np.ndarray, mechanism: str, scale: np.ndarray, records: bool):
    sizes = counts.sum(axis=1)
    patterns, inv = np.unique(-np.sort(-counts, axis=1), axis=0, return_inverse=True)
    inv = inv.ravel()
    absent, h = _tables(mechanism, scale, int(sizes.max()))
    p_sizes = patterns.sum(axis=1)
    vals = np.empty((patterns.shape[0], scale.size))
    for n in np.unique(p_sizes):
        sel = p_sizes == n
        vals[sel] = _plugin_batch(int(n), patterns[sel], absent, h, records)
    return vals[inv]


def _exact_shrinkage_by_size(
    sizes: np.ndarray, alpha: np.ndarray, mechanism: str, scale: np.ndarray, records: bool
) -> dict[int, np.ndarray]:
    absent, h = _tables(mechanism, scale, int(sizes.max()))
    return {
        int(n): _expected_terms(
            int(n), alpha[None, :], "dirichlet", absent, _h_for(h, int(n), records)
        )[0]
        for n in np.unique(sizes)
    }


#: Size-model tail mass the exact marginal measures may skip (the risk is in [0, 1], so the
#: value moves by at most this much).
_TAIL = 1e-15


def _trim(support: np.ndarray, pmf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the least likely sizes whose total mass is <= ``_TAIL``."""
    order = np.argsort(pmf, kind="stable")
    drop = np.cumsum(pmf[order]) <= _TAIL
    keep = np.sort(order[~drop])
    return support[keep], pmf[keep]


def _exact_marginal(
    counts: np.ndarray,
    support: np.ndarray,
    pmf: np.ndarray,
    mechanism: str,
    scale: np.ndarray,
    records: bool,
) -> np.ndarray:
    support, pmf = _trim(support, pmf)
    srt = -np.sort(-counts, axis=1)
    g = np.gcd.reduce(srt, axis=1)
    patterns, inv = np.unique(srt // g[:, None], axis=0, return_inverse=True)
    absent, h = _tables(mechanism, scale, int(support.max()))
    vals = np.zeros((patterns.shape[0], scale.size))
    for n, f in zip(support, pmf, strict=True):
        vals += f * _plugin_batch(int(n), patterns, absent, h, records)
    return vals[inv.ravel()]


# --------------------------------------------------------------------------- paper forms


def _paper_hom_het(
    mechanism: str, scale: np.ndarray, n: np.ndarray, n_levels: int
) -> tuple[np.ndarray, np.ndarray]:
    """The paper's Scenario-1 and Scenario-8 cell terms at sizes ``n`` (len(n), E).

    Laplace (Theorem 1, ``ε`` read as ``1 / b``, ``b`` the scale)::

        hom(n) = (1 - ½e^{-ε/2})^{K-1} (1 - ½e^{(0.5-n)ε})
        het(n) = (1 - ½e^{-ε/2})^{K-2} ½ (e^{-ε/2} + e^{(1.5-n)ε} - e^{(1-n)ε})

    Gaussians (Theorem 3, with ``s = √2 σ``)::

        hom(n) = (1 + erf(0.5/s))^{K-1} (1 + erf((n - 0.5)/s)) / 2^K
        het(n) = (1 + erf(0.5/s))^{K-2} E(n) / 2^K
        E(n)   = (1 - erf((1.5-n)/s))(1 + erf(-0.5/s)) + (1 + erf((1.5-n)/s))(1 + erf(0.5/s))

    ``het(n) = 0`` for ``n = 1`` (the paper's ``1(n >= 2)``). ``1 ± erf`` is evaluated
    as ``erfc(∓ ·)``.
    """
    from scipy.special import erfc

    nn = n.astype(np.float64)[:, None]
    k = n_levels
    if mechanism == "laplace":
        t = 1.0 / scale[None, :]
        l0 = 1.0 - 0.5 * np.exp(-0.5 * t)
        hom = l0 ** (k - 1) * (1.0 - 0.5 * np.exp((0.5 - nn) * t))
        with np.errstate(over="ignore", invalid="ignore"):  # n = 1 overflows; masked below
            het = (
                l0 ** (k - 2)
                * 0.5
                * (np.exp(-0.5 * t) + np.exp((1.5 - nn) * t) - np.exp((1.0 - nn) * t))
            )
    else:
        s = np.sqrt(2.0) * scale[None, :]
        g0 = erfc(-0.5 / s)  # 1 + erf(0.5/s)
        hom = g0 ** (k - 1) * erfc(-(nn - 0.5) / s) / 2.0**k
        e_n = erfc((1.5 - nn) / s) * erfc(0.5 / s) + erfc(-(1.5 - nn) / s) * g0
        het = g0 ** (k - 2) * e_n / 2.0**k
    het = np.where(nn >= 2, het, 0.0)
    return hom, het


def _homogeneity_dm(n: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``A(n) = Σ_k Γ(α.)Γ(α_k + n) / (Γ(α. + n)Γ(α_k))``: P(cell homogeneous) a priori."""
    from scipy.special import gammaln

    a0 = alpha.sum()
    nn = n.astype(np.float64)[:, None]
    logs = gammaln(a0) + gammaln(alpha[None, :] + nn) - gammaln(a0 + nn) - gammaln(alpha)
    return np.exp(logs).sum(axis=1)


def _homogeneity_plugin(counts: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``Σ_k p̂_k^n`` for each cell's ``p̂`` and each size in ``n``: (N, len(n))."""
    p = counts / counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        logp = np.log(p)  # -inf for p = 0 -> p^n = 0 (n >= 1)
    return np.exp(logp[:, :, None] * n.astype(np.float64)[None, None, :]).sum(axis=1)


def _paper(
    counts: np.ndarray,
    measure: str,
    mechanism: str,
    scale: np.ndarray,
    alpha: np.ndarray | None,
    sm: tuple[np.ndarray, np.ndarray] | None,
) -> np.ndarray:
    n_cells, k = counts.shape
    sizes = counts.sum(axis=1)
    if measure in ("local", "expected", "shrinkage"):
        hom, het = _paper_hom_het(mechanism, scale, sizes, k)
        if measure == "local":
            s = (((counts > 0).sum(axis=1)) == 1).astype(np.float64)
        elif measure == "expected":
            p = counts / sizes[:, None]
            s = (p ** sizes[:, None]).sum(axis=1)
        else:
            s = _homogeneity_dm(sizes, alpha)
        s = np.clip(s, 0.0, 1.0)[:, None]
        return s * hom + (1.0 - s) * het
    support, pmf = sm
    hom, het = _paper_hom_het(mechanism, scale, support, k)  # (S, E)
    if measure == "marginal":
        s = np.clip(_homogeneity_plugin(counts, support), 0.0, 1.0)  # (N, S)
        return (s * pmf) @ hom + ((1.0 - s) * pmf) @ het
    s = np.clip(_homogeneity_dm(support, alpha), 0.0, 1.0)  # (S,)
    value = (s * pmf) @ hom + ((1.0 - s) * pmf) @ het  # (E,)
    return np.repeat(value[None, :], n_cells, axis=0)


# --------------------------------------------------------------------------- entry point


def cell_risk(
    counts: npt.ArrayLike,
    *,
    mechanism: str,
    epsilon: npt.ArrayLike | None = None,
    delta: float | None = None,
    sensitivity: float = 1.0,
    measure: str = "local",
    alpha: npt.ArrayLike | None = None,
    size_model: Any = None,
    scenario8: str = "conservative",
    method: str = "exact",
    rho: npt.ArrayLike | None = None,
) -> CellRisk:
    """DR-HA of every cell of a frequency table after count sanitization, per ε.

    Parameters
    ----------
    counts : array_like, (N, K)
        Non-negative integer counts (whole-number floats are accepted): row ``i`` a
        non-empty quasi-identifier cell, column ``k`` level ``k`` of Y (K >= 2, from the
        declared domain: columns of zeros are fine).
    mechanism : {"laplace", "gaussian", "gaussian_pdp", "analytic_gaussian", \
"discrete_gaussian"}
        How each count is sanitized (:mod:`dpframe.risk.noise`).
    epsilon : float or array_like
        The ε grid (> 0; below 1 for ``"gaussian"``); not for ``"discrete_gaussian"``.
    delta : float, optional
        For the Gaussians, in (0, 1); ``None`` for Laplace.
    sensitivity : float, default 1.0
        Of the table (l1 for Laplace, l2 for the Gaussians); the paper uses 1.
    measure : {"local", "expected", "shrinkage", "marginal", "marginal_shrinkage"}
        Definitions 6-10 (see the module docstring).
    alpha : array_like, (K,), optional
        Dirichlet hyperparameters (> 0); required by the shrinkage measures, refused
        by the others.
    size_model : object, optional
        Cell-size distribution with ``support`` (ints >= 1) and ``pmf`` (sums to 1);
        required by the marginal measures, refused by the others. The marginal measures
        follow Definitions 9-10 (``Σ_n f(n) ρ(n)``), not the printed eqs. (16), (20),
        (25), (29), which weigh each cell by ``f(n_i)`` at its own size (an erratum).
    scenario8 : {"conservative", "records"}
        A heterogeneous cell that turns homogeneous in one of its own levels counts as
        disclosed in full (eq. 6, the paper's convention) or for the share ``n_ik / n_i``
        of its records that the attacker then gets right (eq. 7).
    method : {"exact", "paper"}
        Exact expectations, or the paper's closed forms (Theorems 1 and 3, corrected;
        only with ``scenario8="conservative"``, not for the discrete Gaussian).
    rho : float or array_like, optional
        The ρ (zCDP) grid of ``"discrete_gaussian"``, in place of ``epsilon``; the
        result's ``epsilon`` attribute then holds these ρ.

    Returns
    -------
    CellRisk
        ``values`` (N, E), ``exact`` (N,), ``sizes``, ``epsilon`` and the settings.

    Raises
    ------
    InvalidDataError
        ``counts`` is not a 2-d table of non-negative integers with K >= 2 columns and
        no empty row.
    InvalidParameterError
        An unknown ``measure`` / ``mechanism`` / ``scenario8`` / ``method``, bad
        privacy parameters, or a missing / superfluous ``alpha`` or ``size_model``.

    Examples
    --------
    >>> r = cell_risk([[3, 0], [1, 1]], mechanism="laplace", epsilon=[0.1, 100.0])
    >>> r.values.round(4).tolist()
    [[0.3202, 1.0], [0.4988, 0.0]]
    >>> r.exact.tolist()
    [True, False]
    >>> cell_risk([[3, 0], [1, 1]], mechanism="laplace", epsilon=0.1,
    ...           scenario8="records").all_exact
    True
    """
    check("risk_measure", measure, name="measure")
    check("risk_mechanism", mechanism, name="mechanism")
    check("scenario8", scenario8)
    check("risk_method", method, name="method")
    if method == "paper" and scenario8 == "records":
        raise InvalidParameterError(
            "method='paper' has no closed form for scenario8='records' (eq. 7): use "
            "method='exact', or scenario8='conservative' for the paper's bound"
        )
    if method == "paper" and mechanism in ZCDP:
        raise InvalidParameterError(
            "method='paper' has closed forms for the continuous noises only; the discrete "
            "Gaussian's risk is exact with method='exact'"
        )
    table = _check_counts(counts)
    eps = privacy_grid(mechanism, epsilon, rho)
    scale = np.atleast_1d(noise_scale(mechanism, eps, delta, sensitivity)).astype(np.float64)
    a = _check_alpha(alpha, table.shape[1], measure)
    sm = _check_size_model(size_model, measure)
    records = scenario8 == "records"

    sizes = table.sum(axis=1)
    homogeneous = (table > 0).sum(axis=1) == 1
    only_one = sm is not None and bool((sm[0] == 1).all())
    if records and method == "exact":
        exact = np.ones(sizes.shape, dtype=bool)
    elif measure == "local":
        exact = homogeneous
    elif measure == "expected":
        exact = homogeneous | (sizes == 1)
    elif measure == "shrinkage":
        exact = sizes == 1
    elif measure == "marginal":
        exact = homogeneous | only_one
    else:
        exact = np.full(sizes.shape, only_one)

    if method == "paper":
        values = _paper(table, measure, mechanism, scale, a, sm)
    elif measure == "local":
        values = _exact_local(table, mechanism, scale, records)
    elif measure == "expected":
        values = _exact_expected(table, mechanism, scale, records)
    elif measure == "shrinkage":
        by_size = _exact_shrinkage_by_size(sizes, a, mechanism, scale, records)
        values = np.stack([by_size[int(n)] for n in sizes])
    elif measure == "marginal":
        values = _exact_marginal(table, sm[0], sm[1], mechanism, scale, records)
    else:
        support, pmf = _trim(*sm)
        by_size = _exact_shrinkage_by_size(support, a, mechanism, scale, records)
        value = sum(f * by_size[int(n)] for n, f in zip(support, pmf, strict=True))
        values = np.repeat(np.asarray(value)[None, :], table.shape[0], axis=0)

    values = np.clip(values, 0.0, 1.0)
    for arr in (values, exact, sizes, eps):
        arr.setflags(write=False)
    return CellRisk(
        values=values,
        exact=exact,
        sizes=sizes,
        epsilon=eps,
        measure=measure,
        mechanism=mechanism,
        delta=None if mechanism not in GAUSSIANS else float(delta),  # type: ignore[arg-type]
        scenario8=scenario8,
        method=method,
    )
