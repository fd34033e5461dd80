"""The compiled loops of :mod:`dpframe.engines.dense_parts`: one batch of records added
into dense per-group arrays (numba, cached on disk: compiled once per environment).

A batch is added part by part, each a tight loop over its records into the batch's own
sums (four lanes; only the groups the batch meets are touched, then folded into the
totals with Neumaier's compensation and reset): the error of a total is that of one
batch's plain sums, not of all the records'. About 10 ns a record on the demo's
``by_region`` (six sums, three columns checked, a histogram of 2001 cells), on one core:
polars decodes the next batch on the others meanwhile.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["AT_LEAST", "PRODUCT", "SUM", "accumulate", "load_kernels"]

#: The ops of the summed parts: a clipped value, the product of two, a record at or above
#: an edge (unclipped).
SUM, PRODUCT, AT_LEAST = 0, 1, 2


@nb.njit(inline="always")
def _clip(x: float, lo: float, hi: float) -> float:
    """``x`` clipped to ``[lo, hi]``; NaN stays NaN (as polars' ``clip``)."""
    if x != x:
        return x
    return min(max(x, lo), hi)


@nb.njit(inline="always")
def _add_clipped(group, n, x, lo, hi, lanes):
    """Each record's ``x`` clipped to ``[lo, hi]`` into its group's sum, four lanes
    (consecutive records of one group add into different lanes: no add waits for the
    last)."""
    a0, a1, a2, a3 = lanes[0], lanes[1], lanes[2], lanes[3]
    whole = n - n % 4
    for i in range(0, whole, 4):
        a0[group[i]] += _clip(x[i], lo, hi)
        a1[group[i + 1]] += _clip(x[i + 1], lo, hi)
        a2[group[i + 2]] += _clip(x[i + 2], lo, hi)
        a3[group[i + 3]] += _clip(x[i + 3], lo, hi)
    for i in range(whole, n):
        a0[group[i]] += _clip(x[i], lo, hi)


@nb.njit(inline="always")
def _add_products(group, n, x, y, b, lanes):
    """Each record's clipped ``x`` times its clipped ``y`` (bounds ``b``: x's, then y's)
    into its group's sum, four lanes."""
    a0, a1, a2, a3 = lanes[0], lanes[1], lanes[2], lanes[3]
    lo, hi, ylo, yhi = b[0], b[1], b[2], b[3]
    whole = n - n % 4
    for i in range(0, whole, 4):
        a0[group[i]] += _clip(x[i], lo, hi) * _clip(y[i], ylo, yhi)
        a1[group[i + 1]] += _clip(x[i + 1], lo, hi) * _clip(y[i + 1], ylo, yhi)
        a2[group[i + 2]] += _clip(x[i + 2], lo, hi) * _clip(y[i + 2], ylo, yhi)
        a3[group[i + 3]] += _clip(x[i + 3], lo, hi) * _clip(y[i + 3], ylo, yhi)
    for i in range(whole, n):
        a0[group[i]] += _clip(x[i], lo, hi) * _clip(y[i], ylo, yhi)


@nb.njit(inline="always")
def _add_at_least(group, n, x, lo, lanes):
    """1.0 for each record whose ``x`` is at least ``lo`` (unclipped) into its group's
    sum, four lanes."""
    a0, a1, a2, a3 = lanes[0], lanes[1], lanes[2], lanes[3]
    whole = n - n % 4
    for i in range(0, whole, 4):
        a0[group[i]] += 1.0 if x[i] >= lo else 0.0
        a1[group[i + 1]] += 1.0 if x[i + 1] >= lo else 0.0
        a2[group[i + 2]] += 1.0 if x[i + 2] >= lo else 0.0
        a3[group[i + 3]] += 1.0 if x[i + 3] >= lo else 0.0
    for i in range(whole, n):
        a0[group[i]] += 1.0 if x[i] >= lo else 0.0


@nb.njit(inline="always")
def _cell(x: float, edges: np.ndarray, walk: bool, scale: float) -> int:
    """The cell of ``x`` (not NaN) on the grid ``edges``: cell ``2k`` holds ``e_k``, cell
    ``2k + 1`` the values strictly between ``e_k`` and ``e_{k+1}``, values clipped to the
    grid (:meth:`dpframe.mechanisms.quantile.Grid.cell_index`), by comparisons only: the
    bin guessed from the position (``scale``: bins per unit), then moved to the ``k``
    with ``e_k <= x < e_{k+1}`` (the last bin holds ``e_B`` too)."""
    bins = edges.size - 1
    lo, hi = edges[0], edges[bins]
    x = min(max(x, lo), hi)
    if walk:
        pos = (x - lo) * scale  # NaN where scale is infinite and x == lo
        k = int(min(pos, bins - 1.0)) if pos > 0.0 else 0
        while k > 0 and x < edges[k]:
            k -= 1
        while k < bins - 1 and x >= edges[k + 1]:
            k += 1
    else:  # edges far from equal steps: the edges at or below x, less one
        k = min(np.searchsorted(edges, x, side="right") - 1, bins - 1)
    return 2 * k + (1 if x != edges[k] else 0) + (1 if x == hi else 0)


@nb.njit(cache=True, nogil=True)
def accumulate(
    group, n, values, ops, operands, bounds, hist_column, edges, walk,
    rows, sums, spare, bad, hist, batch_rows, batch_sums, touched,
):  # fmt: skip
    """Add the first ``n`` records of a batch: each record's group (``group``), its values
    (``values``: a row per source column), into ``rows``, ``sums`` (compensated by
    ``spare``), ``bad`` (values not finite) and ``hist`` (the cells of column
    ``hist_column``, if >= 0). ``batch_rows``, ``batch_sums`` (4 lanes x parts x groups:
    consecutive records of one group add into different lanes, so no add waits for the
    last) and ``touched`` are scratch, zero on entry and on return."""
    met = 0
    for i in range(n):
        g = group[i]
        if batch_rows[g] == 0:
            touched[met] = g
            met += 1
        batch_rows[g] += 1
    for c in range(values.shape[0]):
        x = values[c]
        finite = True
        for i in range(n):  # no branch: vectorized
            finite &= np.isfinite(x[i])
        if not finite:
            for i in range(n):
                if not np.isfinite(x[i]):
                    bad[group[i], c] += 1
    for p in range(ops.size):
        x = values[operands[p, 0]]
        lanes = batch_sums[:, p]
        if ops[p] == AT_LEAST:
            _add_at_least(group, n, x, bounds[p, 0], lanes)
        elif ops[p] == SUM:
            _add_clipped(group, n, x, bounds[p, 0], bounds[p, 1], lanes)
        else:
            _add_products(group, n, x, values[operands[p, 1]], bounds[p], lanes)
    if hist_column >= 0:
        x = values[hist_column]
        scale = (edges.size - 1) / (edges[-1] - edges[0])
        for i in range(n):
            if x[i] == x[i]:  # NaN is in no cell (its bad count refuses the release)
                hist[group[i], _cell(x[i], edges, walk, scale)] += 1
    for j in range(met):  # the batch's groups folded into the totals, its scratch reset
        g = touched[j]
        rows[g] += batch_rows[g]
        batch_rows[g] = 0
        for p in range(ops.size):
            v = 0.0
            for lane in range(4):
                v += batch_sums[lane, p, g]
                batch_sums[lane, p, g] = 0.0
            s = sums[g, p]
            t = s + v
            if abs(s) >= abs(v):
                spare[g, p] += (s - t) + v
            else:
                spare[g, p] += (v - t) + s
            sums[g, p] = t


def load_kernels() -> None:
    """Run the loop once on one record (loads it from numba's cache, or compiles it)."""
    one = np.zeros(1, np.int64)
    accumulate(
        one, 1, np.zeros((1, 1)), np.array([PRODUCT]), np.zeros((1, 2), np.int64),
        np.array([[0.0, 1.0, 0.0, 1.0]]), 0, np.array([0.0, 1.0]), True,
        np.zeros(1, np.int64), np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1), np.int64),
        np.zeros((1, 3), np.int64), np.zeros(1, np.int64), np.zeros((4, 1, 1)),
        np.zeros(1, np.int64),
    )  # fmt: skip
