"""Estimating the true category distribution from PRAM'd records.

Released counts are multinomial with probabilities ``M^T p``; ``p_hat = (M^T)^{-1}
m_hat`` is unbiased with covariance ``A (diag(pi) - pi pi^T) A^T / n``, ``A =
(M^T)^{-1}``, ``pi = M^T p``, and a Euclidean projection onto the simplex (Duchi et al.
2008) gives a proper distribution. Post-processing: it costs no privacy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import PRAM_ESTIMATES as KINDS
from dpframe.core.constraints import check
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.pram.optimum import SINGULAR_RTOL, PramDesign, _PramInverse
from dpframe.mechanisms.pram.sampling import _check_codes, check_matrix

__all__ = ["KINDS", "PramEstimate", "estimate", "project_simplex"]

#: What :func:`estimate` is given: released counts per category, or released codes.


@dataclass(frozen=True, eq=False)
class PramEstimate:
    """Frequency estimate from a PRAM release.

    Attributes
    ----------
    p_hat : ndarray
        Unbiased estimate ``(M^T)^{-1} m_hat`` (may leave the simplex).
    covariance : ndarray
        Unbiased estimate of ``Cov(p_hat)``: ``A (diag(m_hat) - m_hat m_hat^T) A^T /
        (n - 1)``.
    p_simplex : ndarray
        Euclidean projection of ``p_hat`` onto the probability simplex (biased).
    counts : ndarray
        Released counts per category.
    n : int
    """

    p_hat: np.ndarray
    covariance: np.ndarray
    p_simplex: np.ndarray
    counts: np.ndarray
    n: int

    @property
    def standard_errors(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))


def estimate(
    released: npt.ArrayLike, design: PramDesign | npt.ArrayLike, *, kind: str = "counts"
) -> PramEstimate:
    """Estimate the true category distribution from a PRAM release.

    Parameters
    ----------
    released : array_like of int
        ``kind="counts"``: released count per category (length ``S``);
        ``kind="codes"``: the released codes themselves.
    design : PramDesign or array_like (S, S)
        The design that was sampled (its rounded matrix is used), or a matrix.
    kind : {"counts", "codes"}

    Returns
    -------
    PramEstimate

    Raises
    ------
    InvalidParameterError
        If ``p`` cannot be estimated from a release of this design: its matrix is
        singular, or so nearly (to a relative ``1e-9``) that the estimate would be
        numerically meaningless. A design with two or more categories at ``q = 1/S`` is
        one (:attr:`PramDesign.estimable` is False; ``design(..., estimable=True)``,
        the default, never makes one). The message names the categories and the fix.

    Examples
    --------
    >>> from dpframe.mechanisms.pram import design, randomize
    >>> d = design(np.array([0.5, 0.3, 0.2]), 2.0)
    >>> rng = np.random.default_rng(0)
    >>> z = randomize(rng.choice(3, size=20_000, p=[0.5, 0.3, 0.2]), d, rng)
    >>> est = estimate(z, d, kind="codes")
    >>> bool(np.all(np.abs(est.p_hat - [0.5, 0.3, 0.2]) < 4 * est.standard_errors))
    True
    """
    check("pram_estimate", kind, name="kind")
    if isinstance(design, PramDesign):
        s = design.n_categories
        inv: Any = _PramInverse(design.q)
    else:
        check_matrix(design)
        mat = np.asarray(design, dtype=np.float64)
        s = mat.shape[0]
        cond = float(np.linalg.cond(mat))
        if not cond < 1.0 / SINGULAR_RTOL:  # inf or nan too
            raise InvalidParameterError(
                f"matrix is singular (condition number {cond:.3g} >= 1e9): p cannot be "
                "estimated from data released with it. Merge the categories whose rows are "
                "(nearly) equal and estimate their total, or release with a design made "
                "with dpframe.pram.design(..., estimable=True) (the default)"
            )
        inv = _DenseInverse(np.linalg.inv(mat.T))
    if kind == "codes":
        counts = np.bincount(_check_codes(released, s, "released").ravel(), minlength=s)
    else:
        counts = np.asarray(released)
        if counts.dtype.kind not in "iuf" or counts.shape != (s,):
            raise InvalidDataError(
                f"released counts must be a length-{s} vector of counts, got shape "
                f"{counts.shape}; for released category codes pass kind='codes'"
            )
        if not np.isfinite(counts).all() or (counts < 0).any():
            raise InvalidDataError("released counts must be finite and >= 0")
        if counts.dtype.kind == "f" and not np.array_equal(counts, np.rint(counts)):
            raise InvalidDataError("released counts must be whole numbers")
        counts = counts.astype(np.int64)
    n = int(counts.sum())
    if n < 2:
        raise InvalidDataError(f"need at least 2 released records, got {n}")
    m_hat = counts / n
    p_hat = inv.solve(m_hat)
    cov = inv.sandwich(m_hat) / (n - 1)
    return PramEstimate(p_hat, cov, project_simplex(p_hat), counts, n)


class _DenseInverse:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def solve(self, m: np.ndarray) -> np.ndarray:
        return self.a @ m

    def sandwich(self, pi: np.ndarray) -> np.ndarray:
        ap = self.a @ pi
        return (self.a * pi) @ self.a.T - np.outer(ap, ap)


def project_simplex(v: npt.ArrayLike) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al. 2008, Fig. 1).

    Examples
    --------
    >>> project_simplex([0.6, 0.5, -0.1]).round(3)
    array([0.55, 0.45, 0.  ])
    """
    x = np.asarray(v, dtype=np.float64)
    if x.ndim != 1 or not x.size or not np.isfinite(x).all():
        raise InvalidParameterError(
            "project_simplex needs a non-empty 1-d vector of finite numbers"
        )
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1.0
    ks = np.arange(1, x.size + 1)
    rho = np.flatnonzero(u - css / ks > 0)[-1]
    theta = css[rho] / (rho + 1)
    return np.maximum(x - theta, 0.0)
