"""The batches of the exact discrete Gaussian sampler: the acceptance rule and the numpy passes.

:func:`dpframe.mechanisms.gaussian.sample_discrete_gaussian` fills its output in blocks,
each from a batch of proposals that take two uniform 64-bit words each: proposal ``j``
takes word ``2j`` for the discrete Laplace proposal ``Y`` (the inverse CDF and float
pre-filter of :mod:`dpframe.mechanisms.discrete`) and word ``2j + 1`` for its
acceptance (:func:`_decide`, whose error bound is in
:mod:`dpframe.mechanisms.gaussian`'s notes); each slot, in order, takes the next
accepted proposal. A batch runs either the numpy passes here (:func:`_draw_numpy`) or
the compiled ones of :mod:`dpframe.mechanisms.gaussian_kernel`, which import the rule
and constants from here and compute the same floats in the same order: the same words
give the same draws and events on both.

What a batch cannot decide with certainty it leaves as an **event** (the slot, its kind,
the word or the proposal) for the sampler to decide exactly, continuing the same draw.
This module imports no numba.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.gaussian import _params
>>> out = np.zeros(2, dtype=np.int64)
>>> words = np.random.default_rng(1).integers(-(2**63), 2**63, 40, dtype=np.int64)
>>> events, floats = np.zeros((8, 4), dtype=np.int64), np.zeros((8, 2))
>>> slot, used, count = _draw_numpy(out, 0, words, _params(4, 1, 3), events, floats)
>>> slot, count
(2, 0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpframe.mechanisms.discrete import _LOW_BITS, _apply_sign, _prefilter

__all__: list[str] = []

#: A proposal's status: 0 rejected, 1 accepted, or an event, decided exactly in Python:
#: the magnitude is not certain from the word (or ``U = 0``) ...
_LAPLACE = 2
#: ... the acceptance is not certain from the word ...
_ACCEPT = 3
#: ... ``|Y| d t`` would overflow int64 (the acceptance in Python integers).
_EXACT = 4
#: An acceptance whose float ``gamma`` exceeds this is a certain rejection unless
#: ``U' = 0`` (``exp(-699) < 2**-1008``); below it ``exp(-gamma)`` is a normal float.
_GAMMA_CLAMP = 700.0
_TWO63 = 2.0**63
_TWO_M63 = 2.0**-63
#: ``(t, d t, n, limit, d_laplace, K_1, K_2, float(M), margin)``: see :func:`_params`.
Params = tuple[int, int, int, int, float, float, float, float, float]


def _decide(e: Any, u2: Any, margin: float) -> Any:
    """The acceptance's status: 1 if ``U' < exp(-gamma)`` is certain, 0 if ``U' >=
    exp(-gamma)`` is, :data:`_ACCEPT` if neither (the module notes' comparisons).

    ``e = exp_f(-min(gamma_f, _GAMMA_CLAMP))``, ``U'`` in ``[u2, u2 + 1) / 2**63``.
    Written once for numpy arrays and numba scalars alike (the compiled passes inline
    it): arithmetic only, no branch.
    """
    x = e * _TWO63
    uf = u2 * 1.0
    yes = uf + 1.0 < x * (1.0 - margin)
    no = uf > x * (1.0 + margin)
    return _ACCEPT - (_ACCEPT - 1) * yes - _ACCEPT * no  # yes and no never both hold


def _exp_minus(g: np.ndarray) -> np.ndarray:
    """``exp(-min(g, _GAMMA_CLAMP))`` by numpy's vectorised ``exp`` (both passes' exp)."""
    e = np.minimum(g, _GAMMA_CLAMP)
    np.negative(e, out=e)
    return np.exp(e, out=e)


def _settle(
    status: np.ndarray,
    y: np.ndarray,
    words: np.ndarray,
    a: np.ndarray,
    slack: np.ndarray,
    out: np.ndarray,
    start: int,
    events: np.ndarray,
    floats: np.ndarray,
) -> tuple[int, int, int]:
    """Give each slot from ``start``, in order, the next proposal that is accepted or an
    event (written to ``events``); stop when ``out`` or ``events`` is full. Returns the
    next slot, the words used and the events written."""
    fills = np.flatnonzero(status >= 1)
    room, cap = out.size - start, events.shape[0]
    take = min(room, fills.size)
    is_event = status[fills[:take]] > 1
    at = np.flatnonzero(is_event)
    if at.size >= cap:
        take = int(at[cap - 1]) + 1
        is_event, at = is_event[:take], at[:cap]
    fills = fills[:take]
    if room == 0:
        used = 0
    elif take == room or at.size == cap:
        used = int(fills[-1]) + 1
    else:
        used = status.size
    slots = start + np.arange(take)
    out[slots[~is_event]] = y[fills[~is_event]]
    ev = fills[is_event]
    k = ev.size
    kinds = status[ev]
    events[:k, 0], events[:k, 1] = slots[is_event], kinds
    events[:k, 2] = np.where(kinds == _LAPLACE, words[2 * ev], y[ev])
    events[:k, 3] = words[2 * ev + 1] & _LOW_BITS
    floats[:k, 0], floats[:k, 1] = a[ev], slack[ev]
    return start + take, 2 * used, k


def _numpy_proposals(words: np.ndarray, params: Params) -> tuple[np.ndarray, ...]:
    """The proposals of a batch by numpy passes: ``(Y, gamma_f, status, A_f, slack)``.

    Proposal ``j`` takes word ``2j``: the discrete Laplace's inverse CDF and its
    pre-filter (:func:`~dpframe.mechanisms.discrete._prefilter` itself). ``status`` is 0,
    :data:`_EXACT` or :data:`_LAPLACE`. The compiled passes
    (:mod:`dpframe.mechanisms.gaussian_kernel`) compute the same floats in the same
    order: the same words give the same proposals (tested).
    """
    t, dt, n, limit, d, k1, _, big_m_float, _ = params
    first = words[0 : words.size // 2 * 2 : 2]
    x = (first & _LOW_BITS).astype(np.float64)
    x *= _TWO_M63
    a, m, slack, certain = _prefilter(x, float(t), d, None, k1)
    fits = m <= limit  # |Y| d t - n inside int64
    a_float = (np.where(fits, m, 0) * dt - n).astype(np.float64)  # (m of U = 0: unused)
    g = a_float * a_float / big_m_float
    status = np.where(certain, np.where(fits, 0, _EXACT), _LAPLACE)
    return _apply_sign(m, first), g, status, a, slack


def _draw_numpy(
    out: np.ndarray,
    start: int,
    words: np.ndarray,
    params: Params,
    events: np.ndarray,
    floats: np.ndarray,
) -> tuple[int, int, int]:
    """Fill ``out[start:]`` from a batch of proposals, two words each, leaving events.

    The numpy passes: the proposals (:func:`_numpy_proposals`), the acceptances
    (:func:`_decide` on word ``2j + 1``), the slots (:func:`_settle`). Returns the next
    slot, the words used and the events written, as the compiled passes
    (:func:`dpframe.mechanisms.gaussian_kernel.draw`) do from the same words.
    """
    y, g, status, a, slack = _numpy_proposals(words, params)
    decided = _decide(_exp_minus(g), words[1 : g.size * 2 : 2] & _LOW_BITS, params[-1])
    status = np.where(status == 0, decided, status)
    return _settle(status, y, words, a, slack, out, start, events, floats)
