"""How accurate a released statistic is, from released values and public parameters only.

A plan's ``error95`` (``summarize()``) is known before any data when the noise is added
to the statistic itself. It is not for a *ratio* of noisy sums and a noisy count (a
grouped mean, proportion, variance or covariance with private group sizes): the
statistic's error then depends on the group's size, which is private. After the
release, though, the noisy count is a released (charged) value, and the error can be
estimated from it. Every function here is **post-processing**: it takes noisy values that
were drawn and charged, and public parameters (bounds, noise scales, public sizes) --
never an exact aggregate -- so its output costs no budget and may be published with the
release.

The maths (``docs/grouped.md``, "Accuracy after the release"):

* :func:`laplace_sum_quantile` -- the quantile of ``|c_1 Z_1 + ... + c_k Z_k|`` for
  independent Laplace ``Z_i``, in closed form (partial fractions of the characteristic
  function ``prod 1 / (1 + a_i^2 u^2)``);
* :func:`ratio_error` -- a ratio ``clip(S~ / max(N~, 1), lower, upper)``: for ``N~ >= 1``,
  ``S~ / N~ - mu = (Z_S - mu Z_N) / N~`` *exactly* (``S = n mu``), so the half-width is
  the quantile of ``|Z_S - mu Z_N|`` over the released ``N~``, with ``mu`` replaced by
  the released ratio (the only approximation);
* :func:`moment_error` -- a variance or covariance from noisy sums and a noisy count
  (the delta method: the first-order error is a linear combination of the Laplace
  noises, whose quantile is exact);
* :func:`pram_share_error` -- PRAM: the largest standard error of an estimated category
  share, per record, over every category mix (data-free).

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.accuracy import laplace_sum_quantile, ratio_error
>>> round(float(laplace_sum_quantile([1.0])), 4)  # one Laplace(1): ln 20
2.9957
>>> ratio_error(np.array([500.0, 0.0]), np.array([0.4, 1.0]), 2.0, 2.0, 0.0, 1.0).round(4)
array([0.0127, 1.    ])
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import check_real
from dpframe.errors import InvalidParameterError

__all__ = [
    "check_level",
    "laplace_sum_quantile",
    "level_label",
    "moment_error",
    "moment_threshold",
    "pram_share_error",
    "ratio_error",
    "ratio_threshold",
]

#: Scales closer than this ratio are moved apart (upwards: a conservative change of at
#: most ``0.1%`` per equal scale) so that the partial fractions stay well conditioned.
_SEPARATION = 1.001
#: Bisection steps of :func:`laplace_sum_quantile` (relative precision ``2**-60``).
_STEPS = 60
#: PRAM: the largest number of categories whose matrix is inverted for the bound.
_PRAM_MAX_CATEGORIES = 400


def check_level(level: object) -> float:
    """A coverage level in ``(0, 1)`` (e.g. ``0.95``)."""
    x = check_real("level", level)
    if not 0.0 < x < 1.0:
        raise InvalidParameterError(f"level must be in (0, 1), e.g. 0.95; got {x!r}")
    return x


def level_label(level: float) -> str:
    """The suffix of an error column at ``level``: ``"error95"`` for 0.95.

    Examples
    --------
    >>> level_label(0.95), level_label(0.975)
    ('error95', 'error97.5')
    """
    return f"error{round(100 * check_level(level), 6):g}"


def laplace_sum_quantile(scales: npt.ArrayLike, level: float = 0.95) -> np.ndarray:
    """Half-width ``t`` with ``P(|Z_1 + ... + Z_k| <= t) = level``, ``Z_i`` independent
    Laplace with the given scales (zero scales are left out).

    Parameters
    ----------
    scales : array_like, shape (..., k)
        The scales ``a_i = |c_i| b_i`` of the terms, one row per case (e.g. per group).
    level : float
        In ``(0, 1)``.

    Returns
    -------
    numpy.ndarray, shape (...)

    Notes
    -----
    The characteristic function ``prod_i 1 / (1 + a_i^2 u^2)`` splits into partial
    fractions ``sum_i w_i / (1 + a_i^2 u^2)``, ``w_i = prod_{j != i} a_i^2 / (a_i^2 -
    a_j^2)``, so ``P(|X| > t) = sum_i w_i exp(-t / a_i)``, solved for ``t`` by bisection.
    Scales within 0.1% of each other are first moved apart (upwards), which keeps the
    weights bounded; that can only widen the interval, by at most 0.1% per equal scale.

    Examples
    --------
    >>> float(laplace_sum_quantile([2.0, 0.0]).round(4))  # 2 ln 20
    5.9915
    >>> float(laplace_sum_quantile([1.0, 1.0]).round(3))  # e^-t (1 + t/2) = 0.05 (t = 4.11)
    4.115
    """
    level = check_level(level)
    a = np.abs(np.asarray(scales, dtype=np.float64))
    if a.ndim == 0:
        a = a.reshape(1)
    shape = a.shape[:-1]
    a = np.sort(a.reshape(-1, a.shape[-1]), axis=1)
    out = np.full(a.shape[0], np.nan)
    bad = ~np.isfinite(a).all(axis=1)
    out[bad & ~np.isnan(a).any(axis=1)] = np.inf
    rows = ~bad
    if rows.any():
        out[rows] = _quantile(a[rows], level)
    return out.reshape(shape)


def _quantile(a: np.ndarray, level: float) -> np.ndarray:
    """:func:`laplace_sum_quantile` for finite, sorted (ascending) scales."""
    k = a.shape[1]
    for i in range(1, k):  # distinct scales (zeros stay zero)
        a[:, i] = np.where(a[:, i] > 0, np.maximum(a[:, i], a[:, i - 1] * _SEPARATION), 0.0)
    positive = a > 0
    weights = np.zeros_like(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(k):
            w = np.ones(a.shape[0])
            for j in range(k):
                if j != i:
                    aj = np.where(positive[:, j], a[:, j], 0.0)
                    w *= a[:, i] ** 2 / (a[:, i] ** 2 - aj**2)
            weights[:, i] = np.where(positive[:, i], w, 0.0)
        safe = np.where(positive, a, 1.0)

        def tail(t: np.ndarray) -> np.ndarray:
            return (weights * np.exp(-t[:, None] / safe)).sum(axis=1)

        # union bound: P(|X| > t) <= k' exp(-t / sum a), so the root is below `high`
        terms = positive.sum(axis=1)
        high = a.sum(axis=1) * np.log(np.maximum(terms, 1) / (1.0 - level))
        low = np.zeros_like(high)
        for _ in range(_STEPS):
            mid = 0.5 * (low + high)
            above = tail(mid) > 1.0 - level
            low = np.where(above, mid, low)
            high = np.where(above, high, mid)
    return np.where(terms > 0, high, 0.0)


def ratio_error(
    noisy_n: npt.ArrayLike,
    estimate: npt.ArrayLike,
    sum_scale: float,
    count_scale: float,
    lower: float,
    upper: float,
    level: float = 0.95,
) -> np.ndarray:
    """Half-width of a released ratio ``clip(S~ / max(N~, 1), lower, upper)``, per group.

    ``S~ = S + Z_S`` and ``N~ = n + Z_N`` with independent Laplace noise of scales
    ``sum_scale`` and ``count_scale``; ``S`` is a sum of ``n`` values in the bounds, with
    mean ``mu``. For ``N~ >= 1``::

        S~ / N~ - mu = (Z_S - mu Z_N) / N~          (exactly)

    so ``P(|S~ / N~ - mu| <= q / N~) = P(|Z_S - mu Z_N| <= q)``: the half-width is the
    ``level`` quantile ``q`` of ``|Z_S - mu Z_N|`` (:func:`laplace_sum_quantile`) over the
    *released* ``N~``, with ``mu`` replaced by the released ratio ``estimate``. Clipping
    to the bounds only moves the ratio towards ``mu`` (which is in the bounds). The
    result is capped at ``upper - lower``, which no error can exceed; where ``N~ < 1`` it
    is ``upper - lower`` (the ratio divided by 1 is noise).

    Examples
    --------
    >>> import numpy as np
    >>> ratio_error(np.array([1000.0]), np.array([0.5]), 2.0, 2.0, 0.0, 1.0).round(5)
    array([0.00655])
    """
    level = check_level(level)
    n = np.asarray(noisy_n, dtype=np.float64)
    mu = np.asarray(estimate, dtype=np.float64)
    scales = np.stack(np.broadcast_arrays(np.full_like(mu, sum_scale), mu * count_scale), -1)
    q = laplace_sum_quantile(scales, level)
    width = upper - lower
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.minimum(q / np.maximum(n, 1.0), width)
    return np.where(n >= 1.0, h, width)


def ratio_threshold(
    sum_scale: float, count_scale: float, lower: float, upper: float, level: float = 0.95
) -> float:
    """The noisy count at or below which a ratio is uninformative (data-free).

    ``q* / (upper - lower)``, ``q*`` the ``level`` quantile of ``|Z_S - c Z_N|`` at the
    least favourable mean ``c = max(|lower|, |upper|)``: at a noisy count ``N~ <= `` this,
    the ratio's half-width (:func:`ratio_error`) can reach the whole range ``[lower,
    upper]`` (for some true mean in the bounds), so the released ratio says nothing the
    bounds do not. Above it, the half-width is below the range whatever the released
    ratio: the flag and the half-width agree.

    Examples
    --------
    >>> round(ratio_threshold(2.0, 2.0, 0.0, 1.0), 2)  # |Z_S - Z_N|, both Laplace(2)
    8.23
    """
    level = check_level(level)
    c = max(abs(lower), abs(upper))
    q = float(laplace_sum_quantile([sum_scale, c * count_scale], level))
    return q / (upper - lower)


def moment_error(
    noisy_n: npt.ArrayLike,
    coefficients: npt.ArrayLike,
    scales: npt.ArrayLike,
    cap: npt.ArrayLike,
    level: float = 0.95,
) -> np.ndarray:
    """Half-width of a variance or covariance from noisy sums and a noisy count.

    The released moment is ``f(S~_1, ..., N~)`` with ``N' = max(N~, 2)``; to first order
    (the delta method) its error is ``sum_i c_i Z_i / (N' - 1)``: for a variance
    ``V = (S2 - S1^2 / n) / (n - 1)`` of values with mean ``m``,
    ``(Z_2 - 2 m Z_1 + (m^2 - V) Z_N) / (n - 1)``; for a covariance,
    ``(Z_xy - m_y Z_x - m_x Z_y + (m_x m_y - C) Z_N) / (n - 1)`` -- with ``m``, ``V``, ``C``
    taken from the released values. The quantile of the combination is exact
    (:func:`laplace_sum_quantile`); the linearisation drops terms of relative size
    ``1 / (epsilon n)``, so it holds for groups far above :func:`moment_threshold`.

    Parameters
    ----------
    noisy_n : array_like, shape (g,)
        The released noisy count of each group.
    coefficients : array_like, shape (g, k)
        ``c_i`` for each group (from released values).
    scales : array_like, shape (k,)
        The Laplace scale ``b_i`` of each noisy part.
    cap : array_like, shape (g,)
        The width of the range the moment is released in (no error exceeds it); it is
        the half-width where ``N~ < 2``.

    Examples
    --------
    >>> import numpy as np
    >>> moment_error([1000.0, 1.0], [[1.0, 1.0, 0.0]] * 2, [2.0, 2.0, 2.0], [0.5, 0.5]).round(5)
    array([0.00824, 0.5    ])
    """
    level = check_level(level)
    n = np.asarray(noisy_n, dtype=np.float64)
    c = np.asarray(coefficients, dtype=np.float64) * np.asarray(scales, dtype=np.float64)
    q = laplace_sum_quantile(c, level)
    cap = np.broadcast_to(np.asarray(cap, dtype=np.float64), n.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.minimum(q / (np.maximum(n, 2.0) - 1.0), cap)
    return np.where(n >= 2.0, h, cap)


def moment_threshold(
    worst: npt.ArrayLike, scales: npt.ArrayLike, width: float, level: float = 0.95
) -> float:
    """The noisy count at or below which a moment is uninformative (data-free).

    ``worst`` are the largest ``|c_i|`` the bounds allow (:func:`moment_error`);
    ``width * n / (n - 1)`` is the width of the moment's range at size ``n`` (for a
    variance ``width = R^2 / 4``, Liu 2019, Table 1; for a covariance ``R_x R_y / 2``).
    The half-width at the least favourable coefficients, ``q* / (N~ - 1)``, reaches the
    range where ``N~ <= q* / width``.

    Examples
    --------
    >>> round(moment_threshold([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], 0.25, 0.95), 1)
    39.8
    """
    level = check_level(level)
    c = np.asarray(worst, dtype=np.float64) * np.asarray(scales, dtype=np.float64)
    return float(laplace_sum_quantile(c, level)) / width


def pram_share_error(matrix: npt.ArrayLike) -> float | None:
    """The largest standard error of an estimated share, times ``sqrt(n)``, over every
    category and every mix of categories (data-free).

    ``M[i, j]`` is the probability that a record of category ``i`` is released as ``j``.
    From ``n`` released records the unbiased shares ``p_hat = A lambda_hat``, ``A =
    (M^T)^{-1}`` (:func:`dpframe.pram.estimate`), have, for the records' own categories
    (the randomization is the only randomness)::

        n Var(p_hat_k) = sum_i p_i (G_ki - [k = i]),   G = (A * A) M^T

    (``sum_j A_kj M_ij = [k = i]``). It is linear in the true shares ``p``, so its
    largest value over all ``p`` is at a vertex: ``max_i (G_ki - [k = i])``. The result
    ``c`` bounds every share's standard error by ``c / sqrt(n)``; a 95% half-width is
    about ``1.96 c / sqrt(n)`` for large ``n`` (normal approximation). ``None`` above
    400 categories (the inversion would be slow) or for a singular matrix.

    Examples
    --------
    >>> import numpy as np
    >>> e = np.exp(1.0)
    >>> rr = np.array([[e, 1.0], [1.0, e]]) / (e + 1)  # randomized response, epsilon = 1
    >>> round(pram_share_error(rr), 4)  # sqrt(e) / (e - 1)
    0.9595
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] > _PRAM_MAX_CATEGORIES:
        return None
    try:
        a = np.linalg.inv(m.T)
    except np.linalg.LinAlgError:
        return None
    g = (a * a) @ m.T - np.eye(m.shape[0])
    worst = float(g.max())
    return math.sqrt(max(worst, 0.0)) if math.isfinite(worst) else None
