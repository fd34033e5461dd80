"""The compiled step of the PRAM samplers: each record's released category from its draw.

:meth:`dpframe.mechanisms.pram.sampling.PramSampler.randomize` draws one integer ``U`` a
record (``Generator.integers``, unchanged) and then decides, from ``U``, the record's code
and the sampler's integers, what it releases: in numpy that is nine passes over the block
(shifts, masks, a gather, comparisons, the branch-free select), here one loop. The same
integer operations in the same order on the same ``U``: the released codes are equal bit
for bit (``tests/mechanisms/test_pram_sampling_kernel.py``), so using this loop changes
how fast a record is released, never what is released. Used by the streaming PRAM sink
of a large input (:meth:`dpframe.engines.polars.PolarsEngine.write_rowwise`), where the
nine passes cost about 9 ns a value (the draw itself about 3); numba compiles it on first
use (cached on disk); ``import dpframe`` does not import this module.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.pram.sampling_kernel import release_pram
>>> out = np.zeros(3, dtype=np.int64)
>>> u = np.array([0b1_11, 0b0_00, 0b1_00])  # bits = 2: U >> 2 picks, U & 3 decides
>>> release_pram(u, np.array([0, 1, 2]), np.array([4, 0, 1]), 2, out)
>>> out.tolist()  # record 0 moves (3 < 4) to 1 + (1 >= 0); record 1 stays; record 2 moves
[2, 1, 1]
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["load_kernels", "release_alias", "release_pram"]


@nb.njit(cache=True, nogil=True)
def release_pram(u, codes, table, bits, out):  # pragma: no cover - compiled
    """The paper's design: the record with code ``k`` moves iff ``U mod 2**bits <
    table[k]``, to ``hi + (hi >= k)`` with ``hi = U >> bits`` (uniform on the other
    categories); else it keeps ``k``."""
    mask = (np.int64(1) << bits) - 1
    for i in range(u.size):
        k = codes[i]
        hi = u[i] >> bits
        target = hi + (1 if hi >= k else 0)
        out[i] = target if (u[i] & mask) < table[k] else k


@nb.njit(cache=True, nogil=True)
def release_alias(u, codes, table, alias, n_categories, bits, out):  # pragma: no cover
    """An alias table: ``col = U >> bits`` picks a column; the record with code ``k``
    gets ``col`` iff ``U mod 2**bits < table[k, col]``, else ``alias[k, col]``."""
    mask = (np.int64(1) << bits) - 1
    for i in range(u.size):
        col = u[i] >> bits
        cell = codes[i] * n_categories + col
        out[i] = col if (u[i] & mask) < table[cell] else alias[cell]


def load_kernels() -> None:
    """Run both loops once (loads them from numba's cache, or compiles them), with the
    argument types :meth:`~dpframe.mechanisms.pram.sampling.PramSampler.randomize`
    passes (the sampler's frozen integers: read-only arrays)."""
    from dpframe.core.frozen import frozen_array

    one = np.zeros(1, dtype=np.int64)
    table = frozen_array([1], dtype=np.int64)  # a sampler's integers are frozen
    release_pram(one, one, table, 1, np.zeros(1, dtype=np.int64))
    release_alias(one, one, table, frozen_array([0], dtype=np.int64), 1, 1, one.copy())
