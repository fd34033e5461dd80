"""Compiled passes of the exact discrete Gaussian sampler, for large requests.

:func:`dpframe.mechanisms.gaussian.sample_discrete_gaussian` fills its output in blocks,
each from a batch of proposals (:mod:`dpframe.mechanisms.gaussian_batch`); from
:data:`~dpframe.mechanisms.gaussian._COMPILED_MIN` draws a call, each batch goes
through :func:`draw` here rather than the numpy passes (which need no compiling or
loading). Proposal ``j`` reads the uniform 64-bit words ``2j`` and ``2j + 1`` of a
buffer the caller drew with ``Generator.integers``, in five linear passes (numba loops,
and numpy's vectorised ``log`` and ``exp`` between them):

1. **The proposal** ``Y``, discrete Laplace of scale ``t``, from its first word: the
   sign is the word's top bit, the magnitude ``floor(A)`` with ``A = -t ln(U (1 + p) /
   2)``, ``p = exp(-1 / t)``, ``U`` the word's low 63 bits over ``2**63`` -- the inverse
   CDF of :mod:`dpframe.mechanisms.discrete` and its float pre-filter (its formulas in its
   order of operations, its constants passed at each call): the magnitude is taken only
   where ``A_f`` is farther than the proven bound ``delta`` from every integer.
2. **The acceptance** ``Bernoulli(exp(-gamma))``, ``gamma = a^2 / M``, from its second
   word: ``U'`` against the float ``exp(-gamma)`` by the sampler's own rule
   (:func:`~dpframe.mechanisms.gaussian_batch._decide`, compiled inline), decided only
   where the comparison is certain (the error bound is in
   :mod:`dpframe.mechanisms.gaussian`'s notes).
3. **The slots**: each slot, in order, takes the next accepted proposal.

The same words give the same draws and events as the numpy passes (the tests hold them
equal). Any other case is left to the caller as an **event** (the slot, its kind, the
word or the proposal), which it decides exactly with Python integers and ``decimal``,
continuing the same draw (never redrawing it: that would bias the law). So the kernel
only chooses *how* each decision is computed, never its outcome. numba compiles it on
first use (cached on disk); ``import dpframe`` does not import this module.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.gaussian import _params
>>> from dpframe.mechanisms.gaussian_kernel import draw
>>> out = np.zeros(3, dtype=np.int64)
>>> words = np.random.default_rng(0).integers(-(2**63), 2**63, 64, dtype=np.int64)
>>> events, floats = np.zeros((8, 4), dtype=np.int64), np.zeros((8, 2))
>>> draw(out, 0, words, _params(4, 1, 3), events, floats)[0]  # sigma = 2: three slots
3
"""

from __future__ import annotations

import numba as nb
import numpy as np

from dpframe.mechanisms.gaussian_batch import (
    _EXACT,
    _LAPLACE,
    _TWO_M63,
    Params,
    _decide,
    _exp_minus,
)

__all__ = ["draw"]

_LOW63 = np.int64(2**63 - 1)
#: The acceptance's rule (:func:`dpframe.mechanisms.gaussian_batch._decide`), compiled inline.
#: numba's disk cache keys on this file only: the tests hold the compiled draws equal to
#: the numpy passes', so a stale cache after an edit of ``_decide`` fails them.
_decide_scalar = nb.njit(inline="always", error_model="numpy")(_decide)


@nb.njit(cache=True, error_model="numpy")
def _uniforms(words, d, w):
    # W_f = (u * 2**-63) * d for each proposal's first word (discrete._magnitudes)
    for k in range(w.size):
        w[k] = float(words[2 * k] & _LOW63) * _TWO_M63 * d


@nb.njit(cache=True, error_model="numpy")
def _proposals(words, log_w, t, k1, k2, limit, dt, n, big_m_float, g, y, status, a_, slack_):
    # discrete._prefilter (symmetric, scalar scale t / 1, beta = 0), in its order of
    # operations; U = 0 gives a = inf and slack = -inf: never certain. Then gamma_f.
    inv = float(t)
    for k in range(log_w.size):
        w = words[2 * k]
        x = float(w & _LOW63) * _TWO_M63
        a = log_w[k] * -inv
        m = np.int64(min(a, 2.0**62))
        slack = 0.5 - (((1.0 / x) * (1.02 * _TWO_M63) + k1) * inv + k2 * a)
        certain = abs((a - m) - 0.5) < slack
        sign = w >> 63  # 0 or -1
        fits = m <= limit  # |Y| d t - n inside int64
        a_float = float((m if fits else 0) * dt - n)
        g[k] = a_float * a_float / big_m_float
        y[k] = (m ^ sign) - sign
        status[k] = 0 if certain and fits else (_EXACT if certain else _LAPLACE)
        a_[k], slack_[k] = a, slack


@nb.njit(cache=True, error_model="numpy")
def _settle(words, g, e, y, status, a_, slack_, margin, out, start, events, floats):
    # Each slot in order takes the next accepted proposal; an event takes its slot
    # (gaussian_batch._settle's rule, fused with the acceptances).
    i = start
    count = 0
    used = 0
    for k in range(g.size):
        if i == out.size or count == events.shape[0]:
            break
        used = k + 1
        u2 = words[2 * k + 1] & _LOW63
        s = _decide_scalar(e[k], u2, margin)
        s = s if status[k] == 0 else status[k]
        if s > 1:
            events[count, 0], events[count, 1] = i, s
            events[count, 2] = words[2 * k] if s == _LAPLACE else y[k]
            events[count, 3] = u2
            floats[count, 0], floats[count, 1] = a_[k], slack_[k]
            count += 1
            i += 1
        else:
            out[i] = y[k]
            i += s
    return i, 2 * used, count


def draw(
    out: np.ndarray,
    start: int,
    words: np.ndarray,
    params: Params,
    events: np.ndarray,
    floats: np.ndarray,
) -> tuple[int, int, int]:
    """Fill ``out[start:]`` from a batch of proposals, two words each, leaving events.

    Parameters
    ----------
    out : numpy.ndarray of int64
        The slots to fill; a slot with an event is skipped (left for the caller).
    start : int
        The first slot.
    words : numpy.ndarray of int64
        Uniform words, an even number: proposal ``j`` reads words ``2j`` and ``2j + 1``.
    params : tuple
        ``(t, d t, n, limit, d_laplace, K_1, K_2, float(M), margin)``
        (:func:`dpframe.mechanisms.gaussian._params`).
    events : numpy.ndarray of int64, shape (k, 4)
        Filled with ``(slot, kind, the proposal's word (LAPLACE) or Y, U')`` per event.
    floats : numpy.ndarray of float64, shape (k, 2)
        Filled with the pre-filter's ``(A_f, slack)`` per event.

    Returns
    -------
    tuple of int
        The next slot to fill, the words used, the events written (it stops early when
        ``out`` or ``events`` is full): the same as
        :func:`dpframe.mechanisms.gaussian_batch._draw_numpy` from the same words.

    Examples
    --------
    >>> from dpframe.mechanisms.gaussian import _params
    >>> out = np.zeros(2, dtype=np.int64)
    >>> words = np.random.default_rng(1).integers(-(2**63), 2**63, 40, dtype=np.int64)
    >>> events, floats = np.zeros((8, 4), dtype=np.int64), np.zeros((8, 2))
    >>> slot, used, count = draw(out, 0, words, _params(4, 1, 3), events, floats)
    >>> slot, count
    (2, 0)
    """
    t, dt, n, limit, d, k1, k2, big_m_float, margin = params
    count = words.size // 2
    w = np.empty(count)
    _uniforms(words, d, w)
    with np.errstate(divide="ignore"):  # U = 0: log(0) = -inf, never certain
        log_w = np.log(w, out=w)
    g, a, slack = np.empty(count), np.empty(count), np.empty(count)
    y, status = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
    _proposals(words, log_w, t, k1, k2, limit, dt, n, big_m_float, g, y, status, a, slack)
    e = _exp_minus(g)
    i, used, k = _settle(words, g, e, y, status, a, slack, margin, out, start, events, floats)
    return int(i), int(used), int(k)
