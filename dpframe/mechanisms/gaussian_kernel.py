"""Compiled kernel of the exact discrete Gaussian sampler: one loop, two words a proposal.

:func:`dpframe.mechanisms.gaussian.sample_discrete_gaussian` fills its output in blocks
with :func:`draw`, a numba loop over the block's slots that runs Canonne, Kamath &
Steinke's Algorithm 3 for each slot until a proposal is accepted, reading uniform 64-bit
words from a buffer the caller drew with ``Generator.integers``:

1. **The proposal** ``Y``, discrete Laplace of scale ``t``, from one word: its sign is
   the word's top bit, its magnitude ``floor(A)`` with ``A = -t ln(U (1 + p) / 2)``,
   ``p = exp(-1 / t)``, ``U`` the word's low 63 bits over ``2**63`` -- the inverse CDF of
   :mod:`dpframe.mechanisms.discrete`, with its float pre-filter (the same formulas and
   error bound ``delta``, whose constants the caller passes from that module): the
   magnitude is taken only where ``A_f`` is farther than ``delta`` from every integer.
2. **The acceptance** ``Bernoulli(exp(-gamma))``, ``gamma = a^2 / M``, from one word:
   :func:`accept_word` compares the word's ``U'`` with the float ``exp(-gamma)`` and
   decides only where the comparison is certain (the bound is in
   :mod:`dpframe.mechanisms.gaussian`'s notes).

Any other case is left to the caller as an **event** (the slot, its kind, the word or
the proposal), which it decides exactly with Python integers and ``decimal``, continuing
the same draw (never redrawing it: that would bias the law):

* :data:`LAPLACE` -- the magnitude is not certain from the word (or ``U = 0``);
* :data:`ACCEPT` -- the acceptance is not certain from the word;
* :data:`EXACT` -- ``|Y| d t`` would overflow int64: the acceptance in Python integers.

The kernel only chooses *how* each decision is computed, never its outcome: every
outcome it takes is the exact one. numba compiles it on first use (cached on disk);
``import dpframe`` does not import this module.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.gaussian_kernel import ACCEPT, accept_words
>>> status = accept_words(np.array([0.0, 3.0]), np.array([2**62, 2**62]), 1.0, 1e-12)
>>> status.tolist()  # exp(0) = 1 > 1/2: accept; exp(-9) < 1/2: reject
[1, 0]
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

__all__ = ["ACCEPT", "EXACT", "LAPLACE", "accept_words", "draw"]

#: Event kinds (column 1 of the event table; a proposal's status is 0 rejected, 1
#: accepted, or its event).
LAPLACE = 2
ACCEPT = 3
EXACT = 4
#: An acceptance whose float ``gamma`` exceeds this is a certain rejection unless
#: ``U' = 0`` (``exp(-699) < 2**-1008``); below it ``exp(-gamma)`` is a normal float.
GAMMA_CLAMP = 700.0

#: Proposals per pass of the kernel's loops.
_CHUNK = 256
_LOW63 = np.int64(2**63 - 1)
_TWO63 = 2.0**63
_TWO_M63 = 2.0**-63


@nb.njit(inline="always", error_model="numpy")
def _gamma(a_float, big_m_float):
    # gamma = a^2 / M in float: a relative error below 5.01 * 2**-53 (gaussian's notes)
    return a_float * a_float / big_m_float


@nb.njit(inline="always", error_model="numpy")
def _accept(g, u2, margin):
    # 1: U' < exp(-gamma) is certain; 0: U' >= exp(-gamma) is certain; ACCEPT: neither.
    # U' lies in [u2, u2 + 1) / 2**63; see dpframe.mechanisms.gaussian's notes. No branch
    # on the outcome (selects only).
    x = math.exp(-min(g, GAMMA_CLAMP)) * _TWO63
    uf = float(u2)
    yes = uf + 1.0 < x * (1.0 - margin)
    no = (uf > x * (1.0 + margin)) | ((g > GAMMA_CLAMP) & (u2 != 0))
    return np.int64(1) if yes else (np.int64(0) if no else np.int64(ACCEPT))


@nb.njit(cache=True, error_model="numpy")
def _accept_words(a_float, words, big_m_float, margin):
    out = np.empty(a_float.size, dtype=np.int8)
    for i in range(a_float.size):
        out[i] = _accept(_gamma(a_float[i], big_m_float), words[i] & _LOW63, margin)
    return out


def accept_words(
    a_float: np.ndarray, words: np.ndarray, big_m_float: float, margin: float
) -> np.ndarray:
    """The acceptance's status for each ``(a, word)``: 1 accept, 0 reject, :data:`ACCEPT`
    not certain.

    Parameters
    ----------
    a_float : numpy.ndarray of float64
        The correctly rounded ``a``.
    words : numpy.ndarray of int64
        One uniform word each (its low 63 bits are ``U'``).
    big_m_float : float
        The correctly rounded ``M``.
    margin : float
        The relative margin beyond which the float comparison is certain.

    Returns
    -------
    numpy.ndarray of int8

    Examples
    --------
    >>> accept_words(np.array([1.0]), np.array([0]), 1.0, 1e-12).tolist()  # U' < 2**-63
    [1]
    """
    return _accept_words(a_float, words, big_m_float, margin)


@nb.njit(cache=True, error_model="numpy")
def _draw(out, start, words, t, dt, n, limit, d, k1, k2, big_m_float, margin, events, floats):
    # Proposal j takes words 2j and 2j + 1. Proposals go in chunks of _CHUNK through three
    # loops -- the proposals (log), the acceptances (exp), the slots -- so that each loop
    # keeps many draws in flight; only the rare events branch.
    inv = float(t)
    a_ = np.empty(_CHUNK)
    slack_ = np.empty(_CHUNK)
    g_ = np.empty(_CHUNK)
    y_ = np.empty(_CHUNK, dtype=np.int64)
    status_ = np.empty(_CHUNK, dtype=np.int64)
    count = 0
    i = start
    j = 0
    while i < out.size and count < events.shape[0]:
        chunk = min(_CHUNK, (words.size - j) // 2)
        if chunk == 0:
            break
        for k in range(chunk):
            w = words[j + 2 * k]
            # discrete._prefilter, symmetric, scalar scale t / 1, beta = 0 (U = 0: a = inf
            # and slack = -inf, never certain)
            x = float(w & _LOW63) * _TWO_M63
            a = -math.log(x * d) * inv
            m = np.int64(min(a, 2.0**62))
            slack = 0.5 - (((1.0 / x) * (1.02 * _TWO_M63) + k1) * inv + k2 * a)
            certain = abs((a - m) - 0.5) < slack
            sign = w >> 63  # 0 or -1
            fits = m <= limit  # |Y| d t - n inside int64
            a_[k], slack_[k], y_[k] = a, slack, (m ^ sign) - sign
            g_[k] = _gamma(float((m if fits else 0) * dt - n), big_m_float)
            status_[k] = 0 if certain and fits else (EXACT if certain else LAPLACE)
        for k in range(chunk):
            u2 = words[j + 2 * k + 1] & _LOW63
            status = _accept(g_[k], u2, margin)
            status_[k] = status if status_[k] == 0 else status_[k]
        used = chunk
        for k in range(chunk):
            status = status_[k]
            if status > 1:
                w = words[j + 2 * k]
                events[count, 0], events[count, 1] = i, status
                events[count, 2] = w if status == LAPLACE else y_[k]
                events[count, 3] = words[j + 2 * k + 1] & _LOW63
                floats[count, 0], floats[count, 1] = a_[k], slack_[k]
                count += 1
                i += 1
            else:
                out[i] = y_[k]
                i += status
            if i == out.size or count == events.shape[0]:
                used = k + 1
                break
        j += 2 * used
    return i, j, count


def draw(
    out: np.ndarray,
    start: int,
    words: np.ndarray,
    params: tuple[int, int, int, int, float, float, float, float, float],
    events: np.ndarray,
    floats: np.ndarray,
) -> tuple[int, int, int]:
    """Fill ``out[start:]`` with accepted draws from ``words``, leaving events to the caller.

    Parameters
    ----------
    out : numpy.ndarray of int64
        The slots to fill; a slot with an event is skipped (left for the caller).
    start : int
        The first slot.
    words : numpy.ndarray of int64
        Uniform words; a proposal takes one, its acceptance one more.
    params : tuple
        ``(t, d t, n, limit, d_laplace, K_1, K_2, float(M), margin)``: the proposal's
        scale, ``sigma^2 = n / d``, the largest ``|Y|`` with ``|Y| d t`` in int64, the
        pre-filter's constants (:mod:`dpframe.mechanisms.discrete`), ``M = 2 n d t^2`` and
        the acceptance's margin.
    events : numpy.ndarray of int64, shape (k, 4)
        Filled with ``(slot, kind, the proposal's word (LAPLACE) or Y, U')`` per event.
    floats : numpy.ndarray of float64, shape (k, 2)
        Filled with the pre-filter's ``(A_f, slack)`` of a :data:`LAPLACE` event.

    Returns
    -------
    tuple of int
        The next slot to fill, the words used, the events written. It stops early when
        the words or the event table run out.

    Examples
    --------
    >>> out = np.zeros(3, dtype=np.int64)
    >>> words = np.random.default_rng(0).integers(-(2**63), 2**63, 64, dtype=np.int64)
    >>> params = (2, 2, 1, 2**61, 0.8032653298563167, 2.0**-49, 2.0**-45, 8.0, 1e-12)
    >>> ev, fl = np.zeros((8, 4), dtype=np.int64), np.zeros((8, 2))
    >>> draw(out, 0, words, params, ev, fl)[0]
    3
    """
    t, dt, n, limit, d, k1, k2, big_m_float, margin = params
    i, pos, count = _draw(
        out, start, words, t, dt, n, limit, d, k1, k2, big_m_float, margin, events, floats
    )
    return int(i), int(pos), int(count)
