"""Exact integer samplers of PRAM matrices, and the certified epsilon of what they sample.

Floating point must not weaken the guarantee, so a PRAM matrix is sampled from integers:
a design of the paper's form (eq. 8) on the grid ``q_k = 1 - c_k / 2**b`` (one draw
``U`` uniform on ``[0, (S - 1) 2**b)`` per record: the low ``b`` bits decide whether the
record moves, the high part picks the target), any other matrix from an integer alias
table. :attr:`PramSampler.epsilon_actual` is derived from those integers -- the matrix
actually sampled -- every time a sampler is made; it is what a PRAM release is charged
(:mod:`dpframe.mechanisms.pram.plan`), so no object, dict or ledger record can claim a
smaller epsilon than its matrix has.

Examples
--------
>>> import numpy as np
>>> from dpframe.mechanisms.pram.sampling import PramSampler
>>> s = PramSampler("pram", 3, 3, np.array([1, 4, 7]))  # q = 7/8, 1/2, 1/8
>>> s.weights().tolist()  # rows sum to (S - 1) 2**b = 16
[[14, 1, 1], [4, 8, 4], [7, 7, 2]]
>>> round(s.epsilon_actual, 9) == round(float(np.log(8)), 9)  # column 1: 8 / 1
True
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dpframe.core.frozen import frozen_array
from dpframe.core.randomness import secure_generator
from dpframe.errors import InvalidDataError, InvalidParameterError

__all__ = [
    "PramSampler",
    "check_matrix",
    "randomize",
    "sampler",
    "staircase_sampler",
    "staircase_weights",
]

_ROW_SUM_TOL = 1e-12
_LOG_ERR = 3e-14  # bound on the float error of log(num) - log(den) for int64 ratios
_CHUNK = 1 << 15  # records per block in the samplers (scratch in cache, < malloc trim)


def _column_extremes(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return w.max(axis=0), w.min(axis=0)


# ---------------------------------------------------------------------------
# Dyadic rounding and the exact epsilon of a rounded matrix
# ---------------------------------------------------------------------------


def _pram_bits(s: int) -> int:
    """``b`` of the grid ``q = 1 - c / 2**b``; ``(S - 1) 2**b <= 2**62`` and ``b <= 52``."""
    return min(52, 62 - math.ceil(math.log2(max(s - 1, 1))))


def _log_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``log(num / den)`` for int64 arrays (inf where den == 0 < num, 0 where both 0)."""
    num_f = num.astype(np.float64)
    den_f = den.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0: set to 0 below
        out = np.log(num_f) - np.log(den_f)
    out[(num == 0) & (den == 0)] = 0.0
    out[(den == 0) & (num > 0)] = np.inf
    return out


def _pram_int_epsilon(c: np.ndarray, b: int, s: int) -> float:
    """Exact-ratio epsilon of the grid design (units ``1 / ((S-1) 2**b)``), as a float.

    Column ``j`` holds ``(S-1)(2**b - c_j)`` on the diagonal and ``c_k`` (``k != j``)
    elsewhere; the result is within ``_LOG_ERR`` of the exact log ratio.
    """
    diag = (s - 1) * ((1 << b) - c)
    if s == 2:
        others_max = c[::-1]
        others_min = c[::-1]
    else:
        o = np.argsort(c, kind="stable")
        lo1, lo2, hi1, hi2 = c[o[0]], c[o[1]], c[o[-1]], c[o[-2]]
        idx = np.arange(s)
        others_min = np.where(idx == o[0], lo2, lo1)
        others_max = np.where(idx == o[-1], hi2, hi1)
    hi = np.maximum(diag, others_max)
    lo = np.minimum(diag, others_min)
    return float(_log_ratio(hi, lo).max())


def _round_pram(
    q: np.ndarray, epsilon: float, *, at_least_uniform: bool = False
) -> tuple[np.ndarray, int, float]:
    """Integers ``c`` with ``q_k ~ 1 - c_k / 2**b`` whose exact ε is <= ``epsilon``.

    First ``q`` is rounded towards ``1/S`` coordinate-wise; if the rounded matrix is not
    certified ``epsilon``-DP, ``q`` is mixed with the uniform design, ``(1-t) q + t/S``
    (every column ratio moves strictly towards 1), with ``t`` doubling from ``2**-50``.
    Returns ``(c, b, eps_upper)``, ``eps_upper`` a certified upper bound.
    """
    s = q.size
    b = _pram_bits(s)
    scale = float(1 << b)
    t = 0.0
    while True:
        qt = (1.0 - t) * q + t / s
        x = (1.0 - qt) * scale
        c = np.where(qt > 1.0 / s, np.ceil(x), np.where(qt < 1.0 / s, np.floor(x), np.rint(x)))
        c = np.clip(c, 1, scale - 1).astype(np.int64)
        if at_least_uniform:  # keep q = 1 - c / 2**b >= 1/S exactly: c <= 2**b (S-1) / S
            c = np.minimum(c, ((s - 1) << b) // s)
        eps = _pram_int_epsilon(c, b, s) + _LOG_ERR
        if eps <= epsilon:
            return c, b, eps
        t = 2.0**-50 if t == 0 else 2 * t
        if t > 1:  # only when epsilon is within the float error of 0
            raise RuntimeError("could not round the PRAM design to a DP grid")


def check_matrix(matrix: npt.ArrayLike) -> float:
    """Validate a PRAM matrix and return its exact privacy level ``ε``.

    Parameters
    ----------
    matrix : array_like, shape (S, S)
        Row ``i`` = true category, column ``j`` = released category. Finite,
        non-negative, every row summing to 1 within ``1e-12``, ``S >= 2``.

    Returns
    -------
    float
        ``max_j log(max_i M_ij / min_i M_ij)``: ``inf`` if a column holds both a zero
        and a non-zero entry, ``0`` for a column of zeros.

    Raises
    ------
    InvalidParameterError
        Naming the problem (shape, non-finite or negative entries, a row sum).

    Examples
    --------
    >>> m = np.array([[0.75, 0.25], [0.25, 0.75]])
    >>> round(check_matrix(m), 6) == round(math.log(3), 6)
    True
    >>> check_matrix([[1.0, 0.0], [0.5, 0.5]])
    inf
    """
    try:
        m = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"matrix must be a numeric S x S array: {exc}") from None
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise InvalidParameterError(f"matrix must be square (S x S), got shape {m.shape}")
    if m.shape[0] < 2:
        raise InvalidParameterError(f"matrix must have S >= 2 categories, got S = {m.shape[0]}")
    if not np.isfinite(m).all():
        raise InvalidParameterError("matrix entries must be finite (no NaN or infinity)")
    if (m < 0).any():
        i, j = np.argwhere(m < 0)[0]
        raise InvalidParameterError(f"matrix entries must be >= 0; M[{i}, {j}] = {m[i, j]!r}")
    sums = m.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > _ROW_SUM_TOL)
    if bad.size:
        raise InvalidParameterError(
            f"matrix rows must sum to 1 (within {_ROW_SUM_TOL:g}); row {bad[0]} sums to "
            f"{sums[bad[0]]!r}"
        )
    hi, lo = m.max(axis=0), m.min(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(hi == 0, 0.0, np.log(hi) - np.log(lo))
    return float(ratios.max())


def _check_codes(codes: Any, s: int, name: str = "codes") -> np.ndarray:
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise InvalidDataError(
            f"{name} must be integer category codes in [0, {s}), got dtype {arr.dtype}"
        )
    if arr.size and (arr.min() < 0 or arr.max() >= s):
        raise InvalidDataError(
            f"{name} must lie in [0, {s}) (S = {s} categories); got values in "
            f"[{arr.min()}, {arr.max()}]"
        )
    return arr


def _validate_rng(rng: Any) -> np.random.Generator:
    if rng is None:
        return secure_generator()
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(f"rng must be a numpy.random.Generator, got {type(rng)!r}")
    return rng


# ---------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PramSampler:
    """An exact integer sampler for one PRAM matrix (build once, use per batch).

    ``kind="pram"``: matrix of form (8) on the grid ``q_k = 1 - c_k / 2**bits``; one
    draw ``U`` uniform on ``[0, (S - 1) 2**bits)`` per record, ``U mod 2**bits < c_k``
    moves the record to ``U >> bits`` (shifted past ``k``). ``kind="alias"``: any
    matrix, rows rounded to integers summing to ``S 2**bits`` and sampled with an
    integer alias table (one draw: ``U >> bits`` picks a column, the low bits decide
    between it and its alias).

    ``epsilon_actual`` is a certified upper bound on the exact ``ε`` of the rounded
    matrix that is actually sampled; :attr:`matrix` is that matrix (as floats).
    """

    kind: str
    n_categories: int
    bits: int
    table: np.ndarray  # pram: c (S,); alias: thresholds (S, S)
    alias: np.ndarray | None = None

    def __post_init__(self) -> None:
        """Check the integers and derive the certified epsilon from them (never given)."""
        if self.kind not in ("pram", "alias"):
            raise InvalidParameterError(f"kind must be 'pram' or 'alias', got {self.kind!r}")
        s, b = self.n_categories, self.bits
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 2:
            raise InvalidParameterError(f"n_categories must be an int >= 2, got {s!r}")
        if isinstance(b, bool) or not isinstance(b, int | np.integer) or not 1 <= b <= 62:
            raise InvalidParameterError(f"bits must be an int in [1, 62], got {b!r}")
        unit = 1 << int(b)
        table = np.array(self.table, dtype=np.int64)
        shape = (s,) if self.kind == "pram" else (s, s)
        if table.shape != shape or (table < 0).any() or (table > unit).any():
            raise InvalidParameterError(
                f"table must be {shape} integers in [0, 2**bits] for a {self.kind!r} sampler"
            )
        if self.kind == "pram" and (s - 1) << int(b) > 2**62:
            raise InvalidParameterError("bits too large for S: (S - 1) 2**bits must be <= 2**62")
        object.__setattr__(self, "table", frozen_array(table))
        object.__setattr__(self, "n_categories", int(s))
        object.__setattr__(self, "bits", int(b))
        if self.kind == "alias":
            alias = np.array(self.alias, dtype=np.int64)
            if alias.shape != (s, s) or (alias < 0).any() or (alias >= s).any():
                raise InvalidParameterError("alias must be (S, S) integers in [0, S)")
            if s << int(b) > 2**62:
                raise InvalidParameterError("bits too large for S: S 2**bits must be <= 2**62")
            object.__setattr__(self, "alias", frozen_array(alias))
        elif self.alias is not None:
            raise InvalidParameterError("a 'pram' sampler has no alias table")
        object.__setattr__(self, "_epsilon", self._derive_epsilon())

    def __deepcopy__(self, memo: dict[int, Any]) -> PramSampler:
        """A new sampler from copies of the integers, its epsilon derived again (a copy
        never carries over a derived value the integers may no longer support)."""
        alias = None if self.alias is None else np.array(self.alias)
        return PramSampler(self.kind, self.n_categories, self.bits, np.array(self.table), alias)

    def _derive_epsilon(self) -> float:
        s, b = self.n_categories, self.bits
        if self.kind == "pram":
            eps = _pram_int_epsilon(self.table, b, s)
        else:
            eps = float(_log_ratio(*_column_extremes(self.weights())).max())
        return eps + _LOG_ERR if math.isfinite(eps) and eps > 0 else eps

    @property
    def epsilon_actual(self) -> float:
        """Certified upper bound on the exact epsilon of the matrix this sampler draws.

        Derived from the sampler's own integers (``max_j log(max_i M_ij / min_i M_ij)``
        plus the float allowance ``3e-14``), never taken from an argument: an object
        cannot claim a smaller epsilon than the matrix it samples.
        """
        return self._epsilon  # type: ignore[attr-defined]

    def weights(self) -> np.ndarray:
        """The sampled matrix as exact integers, rows summing to a common total.

        ``pram``: ``(S - 1) 2**b`` per row (diagonal ``(S-1)(2**b - c_k)``, elsewhere
        ``c_k``); ``alias``: ``S 2**b`` per row, rebuilt from the alias table.
        """
        s, b = self.n_categories, self.bits
        if self.kind == "pram":
            c = self.table
            out = np.repeat(c[:, None], s, axis=1)
            out[np.arange(s), np.arange(s)] = (s - 1) * ((1 << b) - c)
            return out
        unit = 1 << b
        out = np.zeros((s, s), dtype=np.int64)
        rows = np.repeat(np.arange(s), s)
        np.add.at(out, (rows, np.tile(np.arange(s), s)), self.table.ravel())
        np.add.at(out, (rows, self.alias.ravel()), unit - self.table.ravel())
        return out

    @property
    def matrix(self) -> np.ndarray:
        """The rounded matrix that is sampled (float approximation of exact rationals)."""
        s = self.n_categories
        if self.kind == "pram":
            move = self.table.astype(np.float64) / float(1 << self.bits)
            return _pram_matrix(1.0 - move)
        k = float(1 << self.bits)
        out = np.zeros((s, s))
        rows = np.repeat(np.arange(s), s)
        cols = np.tile(np.arange(s), s)
        out[rows, cols] += self.table.ravel() / (s * k)
        np.add.at(out, (rows, self.alias.ravel()), (k - self.table.ravel()) / (s * k))
        return out

    def randomize(
        self, codes: npt.ArrayLike, rng: np.random.Generator | None = None, compiled: bool = False
    ):
        """Release ``codes`` (any integer array of categories); same shape and dtype.

        ``compiled``: each block's released codes decided from its draws by the compiled
        loop (:mod:`dpframe.mechanisms.pram.sampling_kernel`: the same integer operations,
        the same codes bit for bit, one pass instead of nine; worth its loading -- numba,
        about 0.3 s a process -- on tens of millions of records); for int64 codes (other
        dtypes take the numpy passes).

        The dtype is kept when it can hold ``S - 1``; otherwise (e.g. ``uint8`` codes
        with ``S > 256``) the result gets the smallest integer dtype holding both.
        Works in blocks of ``_CHUNK`` records written straight into the result, with
        scratch buffers allocated once per call: a call allocates its result, the
        scratch and one draw array per block (small enough for malloc to reuse, so no
        page faults per block). Codes are range-checked block by block; a bad one
        raises :func:`_check_codes`'s error for the whole input (the generator may
        have been advanced by the blocks before it, nothing else).
        """
        s = self.n_categories
        arr = np.asarray(codes)
        if arr.dtype.kind not in "iu":
            _check_codes(arr, s)  # raises
        try:
            gen = _validate_rng(rng)
        except InvalidParameterError:
            _check_codes(arr, s)  # bad codes are reported first
            raise
        dtype = arr.dtype
        if np.iinfo(dtype).max < s - 1:
            dtype = np.promote_types(dtype, np.min_scalar_type(s - 1))
        flat = arr.ravel()
        n = flat.size
        out = np.empty(n, dtype=dtype)
        m = min(n, _CHUNK)
        grid = self.kind == "pram"
        compiled = compiled and dtype == np.int64
        work = [] if compiled else [np.empty(m, np.int64) for _ in range(2 if grid else 3)]
        if not compiled:
            work.append(np.empty(m, np.bool_))
        # the compiled loop reads writable int64 codes (its one signature): always copied
        c64 = None if arr.dtype == np.int64 and not compiled else np.empty(m, np.int64)
        run = self._pram_block if grid else self._alias_block
        if compiled:
            run = self._compiled_block
        signed = arr.dtype.kind == "i"
        for start in range(0, n, _CHUNK):
            c = flat[start : start + _CHUNK]
            k = c.size
            if (signed and c.min() < 0) or c.max() >= s:
                _check_codes(arr, s)  # raises, naming the range of the whole input
            if c64 is not None:
                c = c64[:k]
                np.copyto(c, flat[start : start + k], casting="unsafe")  # in [0, S)
            run(c, gen, out[start : start + k], [w[:k] for w in work])
        return out.reshape(arr.shape)

    def _pram_block(
        self, c: np.ndarray, rng: np.random.Generator, out: np.ndarray, work: list[np.ndarray]
    ) -> None:
        """Release int64 codes ``c`` in ``[0, S)`` into ``out``; ``work``: 2 int64, 1 bool.

        ``U`` uniform on ``[0, (S-1) 2**b)`` is ``hi 2**b + low`` with ``hi`` uniform on
        ``[0, S-1)`` and ``low`` on ``[0, 2**b)``, independent. The record moves iff
        ``low < c_k`` (probability ``c_k / 2**b``), to ``hi + (hi >= k)``: uniform on the
        other ``S - 1`` categories. Every step is an exact integer operation.
        """
        s, b = self.n_categories, self.bits
        hi, ck, move = work
        u = rng.integers(0, (s - 1) << b, size=c.size, dtype=np.int64)
        np.right_shift(u, b, out=hi)
        np.bitwise_and(u, (1 << b) - 1, out=u)  # low
        np.take(self.table, c, out=ck, mode="clip")  # c in [0, S): clip never acts
        np.less(u, ck, out=move)
        np.greater_equal(hi, c, out=u)  # u is free: 0/1 skip over the record's own k
        np.add(hi, u, out=hi)  # target
        # out = move ? target : c, as c + move * (target - c) (no branch, no temporary)
        np.subtract(hi, c, out=hi)
        np.multiply(hi, move, out=hi)
        np.add(hi, c, out=out, casting="unsafe")  # values in [0, S) fit out's dtype

    def _compiled_block(
        self, c: np.ndarray, rng: np.random.Generator, out: np.ndarray, work: list[np.ndarray]
    ) -> None:
        """:meth:`_pram_block` or :meth:`_alias_block` (by the sampler's kind): the same
        draw, then the compiled loop on it (``c`` writable int64, ``out`` int64)."""
        from dpframe.mechanisms.pram.sampling_kernel import release_alias, release_pram

        s, b = self.n_categories, self.bits
        if self.kind == "pram":
            u = rng.integers(0, (s - 1) << b, size=c.size, dtype=np.int64)
            release_pram(u, c, self.table, b, out)
        else:
            u = rng.integers(0, s << b, size=c.size, dtype=np.int64)
            table, alias = self.table.reshape(-1), cast(np.ndarray, self.alias).reshape(-1)
            release_alias(u, c, table, alias, s, b, out)

    def _alias_block(
        self, c: np.ndarray, rng: np.random.Generator, out: np.ndarray, work: list[np.ndarray]
    ) -> None:
        """Alias-sample int64 codes ``c`` into ``out``; ``work``: 3 int64, 1 bool.

        ``U`` uniform on ``[0, S 2**b)``: ``col = U >> b`` is a uniform column, and the
        record gets ``col`` iff ``U mod 2**b < thr[k, col]``, else ``alias[k, col]``.
        """
        s, b = self.n_categories, self.bits
        col, cell, t, keep = work
        u = rng.integers(0, s << b, size=c.size, dtype=np.int64)
        np.right_shift(u, b, out=col)
        np.bitwise_and(u, (1 << b) - 1, out=u)  # low
        np.multiply(c, s, out=cell)
        np.add(cell, col, out=cell)  # k * S + col, in [0, S^2): clip never acts
        np.take(self.table.ravel(), cell, out=t, mode="clip")
        np.less(u, t, out=keep)
        np.take(self.alias.ravel(), cell, out=t, mode="clip")
        # out = keep ? col : alias, as alias + keep * (col - alias)
        np.subtract(col, t, out=col)
        np.multiply(col, keep, out=col)
        np.add(col, t, out=out, casting="unsafe")  # values in [0, S) fit out's dtype


def _pram_matrix(q: np.ndarray) -> np.ndarray:
    s = q.size
    m = np.repeat(((1.0 - q) / (s - 1))[:, None], s, axis=1)
    m[np.arange(s), np.arange(s)] = q
    return m


def _alias_sampler(m: np.ndarray) -> PramSampler:
    """Round rows to integers summing to ``S 2**k`` (zeros kept, positives >= 1); alias."""
    s = m.shape[0]
    k = 62 - math.ceil(math.log2(s))
    big = s << k
    rows = m / m.sum(axis=1, keepdims=True)
    n = np.floor(rows * float(big)).astype(np.int64)
    n[(rows > 0) & (n == 0)] = 1
    top = np.argmax(n, axis=1)
    n[np.arange(s), top] += big - n.sum(axis=1)
    thr, alias = _build_alias(n, 1 << k)
    return PramSampler("alias", s, k, thr, alias)


def _build_alias(weights: np.ndarray, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer Vose alias tables, all rows in lockstep (``weights`` rows sum to S*unit).

    Column ``j`` of row ``i`` is output when ``V < thr[i, j]`` (``V`` uniform on
    ``[0, unit)``) and ``alias[i, j]`` otherwise; exact in integers.
    """
    rows, s = weights.shape
    w = weights.copy()
    thr = np.full((rows, s), unit, dtype=np.int64)
    alias = np.tile(np.arange(s, dtype=np.int64), (rows, 1))
    small = w < unit
    order = np.argsort(~small, axis=1, kind="stable")  # small columns first
    ns = small.sum(axis=1)  # small stack occupies order[:, :ns], top at ns - 1
    lp = ns.copy()  # large stack occupies order[:, lp:], next large at lp
    r_all = np.arange(rows)
    while True:
        act = (ns > 0) & (lp < s)
        if not act.any():
            break
        r = r_all[act]
        sm = order[r, ns[r] - 1]
        lg = order[r, lp[r]]
        thr[r, sm] = w[r, sm]
        alias[r, sm] = lg
        w[r, lg] -= unit - w[r, sm]
        demoted = w[r, lg] < unit
        order[r[demoted], ns[r[demoted]] - 1] = lg[demoted]  # the large one becomes small
        lp[r[demoted]] += 1
        ns[r[~demoted]] -= 1
    return thr, alias


def sampler(design_or_matrix: Any) -> PramSampler:
    """The exact sampler of a design or of a user matrix (validated by :func:`check_matrix`).

    A matrix of PRAM form (8) (equal off-diagonal entries in each row) gets the fast
    grid sampler, rounded so that its exact ``ε`` does not exceed the matrix's own plus
    ``3e-14`` (the allowance the certificate makes for float logarithms); any other
    matrix gets the alias sampler. Either way ``epsilon_actual`` is a certified upper
    bound on the exact ``ε`` of the rounded matrix that is sampled (it exceeds the
    input's by about ``3e-14``).

    Examples
    --------
    >>> sam = sampler(np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]]))
    >>> sam.kind, round(sam.epsilon_actual, 6) == round(math.log(7), 6)
    ('alias', True)
    """
    if isinstance(design_or_matrix, PramSampler):
        return design_or_matrix
    own = getattr(design_or_matrix, "sampler", None)  # a PramDesign: the sampler of its grid
    if isinstance(own, PramSampler):
        return own
    m = np.asarray(design_or_matrix, dtype=np.float64)
    eps = check_matrix(m)
    s = m.shape[0]
    off = m[~np.eye(s, dtype=bool)].reshape(s, s - 1)
    q = np.diag(m).copy()
    if 0 < eps < math.inf and (off == off[:, :1]).all() and ((q > 0) & (q < 1)).all():
        try:
            c, b, _ = _round_pram(q, eps + _LOG_ERR)
        except RuntimeError:  # pragma: no cover - only for eps near the float floor
            return _alias_sampler(m)
        return PramSampler("pram", s, b, c)
    return _alias_sampler(m)


def randomize(
    codes: npt.ArrayLike,
    design_or_matrix: Any,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Post-randomize category codes, each record independently.

    Parameters
    ----------
    codes : array_like of int
        True categories in ``[0, S)``; any shape.
    design_or_matrix : PramDesign, PramSampler or array_like (S, S)
        What to apply. Build a :func:`sampler` once when calling this per batch with
        a general matrix (its alias table costs ``O(S^2)``).
    rng : numpy.random.Generator, optional
        Default :func:`dpframe.core.randomness.secure_generator`. Only ``Generator.integers``
        is used.

    Returns
    -------
    ndarray
        Released codes, same shape as ``codes``; same dtype, unless that dtype cannot
        hold ``S - 1`` (e.g. ``uint8`` with ``S = 300``): then the smallest integer dtype
        that can.

    Examples
    --------
    >>> from dpframe.mechanisms.pram import design
    >>> d = design(np.full(4, 0.25), 1.0)
    >>> z = randomize(np.zeros(10_000, dtype=np.int64), d, np.random.default_rng(1))
    >>> bool(abs((z == 0).mean() - d.q[0]) < 0.02)
    True
    """
    return sampler(design_or_matrix).randomize(codes, rng)


# ---------------------------------------------------------------------------
# Staircase channels (the global MI optimum): exact integers, epsilon kept
# ---------------------------------------------------------------------------

#: How far below ``epsilon`` the exact log-ratio of a rounded staircase column is kept, so
#: that the certificate (the float log ratio plus ``_LOG_ERR``) stays within ``epsilon``.
_STAIRCASE_SLACK = 1e-13
#: Relative tolerance for an entry to count as its column's low or high level.
_LEVEL_TOL = 1e-7


def _exp_floor(epsilon: float) -> tuple[int, int]:
    """``num / den <= exp(epsilon)`` (rationals, 45 correct digits), from ``decimal``."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        ctx.rounding = decimal.ROUND_FLOOR
        value = Decimal(epsilon).exp()  # correctly rounded: widen by one ulp
        value -= Decimal(1).scaleb(value.adjusted() - ctx.prec + 1)
    num, den = value.as_integer_ratio()
    return num, den


def staircase_weights(channel: npt.ArrayLike, epsilon: float) -> tuple[np.ndarray, int]:
    """Exact integers for an ``epsilon``-DP staircase channel: ``(weights, bits)``.

    ``channel`` is ``S x S`` (row = true category, column = released one), each used
    column ``theta_j`` or ``theta_j e^epsilon`` in every row (a staircase column; unused
    columns all 0), rows summing to 1 up to the solver's tolerance. The integers have
    rows summing to ``S 2**bits`` exactly and every column ratio at most ``exp(epsilon -
    1e-13)`` *exactly*: the low level ``L_j = floor(theta_j T (1 - delta))``, the high
    ``H_j = floor(L_j e^(epsilon - 1e-13))`` (exact rational bound), and each row's
    remainder ``r_i`` added to one used column, which keeps its ratio because
    ``(a + r_i) / (b + r_k) <= max(a / b, r_i / r_k)`` and ``delta`` (doubling from
    ``2**-40``) is chosen so that ``max r / min r <= exp(epsilon - 1e-13)``.

    Examples
    --------
    >>> e = math.exp(1.0)
    >>> c = np.array([[e, 1.0], [1.0, e]]) / (1 + e)  # binary randomized response
    >>> w, bits = staircase_weights(c, 1.0)
    >>> bool((w.sum(axis=1) == 2 << bits).all())
    True
    >>> float(np.log(w.max(axis=0) / w.min(axis=0)).max()) <= 1.0
    True
    """
    m = np.asarray(channel, dtype=np.float64)
    s = m.shape[0]
    if m.ndim != 2 or m.shape != (s, s) or not np.isfinite(m).all() or (m < 0).any():
        raise InvalidParameterError("a staircase channel must be a finite S x S matrix >= 0")
    eps_inner = float(epsilon) - _STAIRCASE_SLACK
    if not eps_inner > 0:
        raise InvalidParameterError(f"epsilon must exceed 1e-13, got {epsilon!r}")
    hi, lo = m.max(axis=0), m.min(axis=0)
    used = np.flatnonzero(hi > 0)
    if (lo[used] <= 0).any():
        raise InvalidParameterError("a staircase column holds both a zero and a non-zero entry")
    theta = lo[used]
    up = m[:, used] > theta * math.exp(epsilon / 2)
    level = np.where(up, theta * math.exp(epsilon), theta)
    if (np.abs(m[:, used] - level) > _LEVEL_TOL * level).any():
        raise InvalidParameterError(
            "not a staircase channel: every entry of a column must be its minimum or "
            "e^epsilon times it"
        )
    bits = 62 - math.ceil(math.log2(s))
    total = s << bits
    num, den = _exp_floor(eps_inner)
    delta = 2.0**-40
    while delta < 0.5:
        low = [math.floor(float(t) * total * (1.0 - delta)) for t in theta]
        # columns without a high entry keep their low level (L e^eps may not fit int64)
        high = [
            (v * num) // den if col_up else v for v, col_up in zip(low, up.any(axis=0), strict=True)
        ]
        w = np.where(up, np.array(high, dtype=np.int64), np.array(low, dtype=np.int64))
        rest = total - w.sum(axis=1)
        r_min, r_max = int(rest.min()), int(rest.max())
        if r_min >= 1 and r_max * den <= r_min * num:
            out = np.zeros((s, s), dtype=np.int64)
            out[:, used] = w
            out[:, used[int(np.argmax(low))]] += rest
            return out, bits
        delta *= 2.0
    raise InvalidParameterError(  # only for channels far from row-stochastic
        "could not round the staircase channel to exact integers: its rows do not sum to 1"
    )


def staircase_sampler(channel: npt.ArrayLike, epsilon: float) -> PramSampler:
    """The exact alias sampler of an ``epsilon``-DP staircase channel (see
    :func:`staircase_weights`); its certified ``epsilon_actual`` is at most ``epsilon``.

    Examples
    --------
    >>> e = math.exp(0.5)
    >>> c = np.array([[e, 1.0], [1.0, e]]) / (1 + e)
    >>> staircase_sampler(c, 0.5).epsilon_actual <= 0.5
    True
    """
    weights, bits = staircase_weights(channel, epsilon)
    thr, alias = _build_alias(weights, 1 << bits)
    out = PramSampler("alias", weights.shape[0], bits, thr, alias)
    if out.epsilon_actual > epsilon:  # pragma: no cover - the rounding above prevents it
        raise RuntimeError(f"staircase rounding gave epsilon {out.epsilon_actual!r} > {epsilon!r}")
    return out
