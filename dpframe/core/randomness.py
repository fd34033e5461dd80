"""The random source of every mechanism: cryptographically secure unless seeded.

By default each call of :meth:`RandomSource.generator` returns a numpy
:class:`~numpy.random.Generator` over ``randomgen.AESCounter`` (AES-128 in counter
mode, hardware-accelerated where the CPU has AES-NI) keyed afresh with 128 bits from
``os.urandom``. AES-CTR with a secret key is a cryptographically secure generator, and
it runs at numpy speed (see ``benchmarks/bench_random.py``).

A polars UDF that runs once per streaming morsel must call ``generator()`` inside the
function, once per call: each call gets an independent key, so no two morsels repeat
noise.

With ``seed=`` the keys are derived deterministically from the seed (each
``generator()`` call takes the next child of a :class:`numpy.random.SeedSequence`), so a
run can be reproduced. **A seeded source is not safe for publication**: anyone who
knows or guesses the seed can subtract the noise. It exists for tests and research, and
using it emits :class:`~dpframe.errors.UnsafeSeedWarning`.

Mechanisms draw integers (``Generator.integers``) wherever an exact discrete sampler
needs them; see :mod:`dpframe.mechanisms.discrete`.
"""

from __future__ import annotations

import os
import threading
import warnings
from numbers import Integral
from typing import TYPE_CHECKING

from dpframe.errors import InvalidParameterError, UnsafeSeedWarning

if TYPE_CHECKING:  # numpy is imported on first use: `import dpframe` stays fast
    import numpy as np

__all__ = ["RandomSource", "as_source", "derived_source", "secure_generator"]


def _aes_generator(key: int) -> np.random.Generator:
    import numpy as np
    from randomgen import AESCounter

    return np.random.Generator(AESCounter(key=key))


def secure_generator() -> np.random.Generator:
    """A fresh generator over AES-128-CTR keyed with 128 bits of OS entropy.

    Examples
    --------
    >>> from dpframe.core.randomness import secure_generator
    >>> x = secure_generator().integers(0, 10, size=3)
    """
    return _aes_generator(int.from_bytes(os.urandom(16), "little"))


class RandomSource:
    """Where a release draws its noise from.

    Parameters
    ----------
    seed : int or None, default None
        ``None`` (the default) gives a cryptographically secure source keyed from
        OS entropy at every :meth:`generator` call. An integer makes the sequence of
        generators reproducible -- **unsafe for publication** (tests and research only).

    Examples
    --------
    >>> from dpframe.core.randomness import RandomSource
    >>> rng = RandomSource().generator()
    >>> rng.integers(0, 2**32, size=2).shape
    (2,)
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral)):
            raise InvalidParameterError(
                f"seed must be None (secure, the default) or an int, got {seed!r}"
            )
        if seed is not None and seed < 0:
            raise InvalidParameterError(f"seed must be a non-negative int, got {seed!r}")
        self._seed = None if seed is None else int(seed)
        self._lock = threading.Lock()
        if seed is None:
            self._seq = None
        else:
            import numpy as np

            self._seq = np.random.SeedSequence(self._seed)
        if seed is not None:
            warnings.warn(
                f"dpframe random source seeded with seed={seed}: the noise is reproducible "
                "and therefore NOT safe for publication; omit seed= for a real release",
                UnsafeSeedWarning,
                stacklevel=2,
            )

    @property
    def seeded(self) -> bool:
        """True if this source was given a seed (reproducible, unsafe to publish)."""
        return self._seed is not None

    def generator(self) -> np.random.Generator:
        """A new, independent generator; call once per release or per polars batch."""
        if self._seq is None:
            return secure_generator()
        with self._lock:
            (child,) = self._seq.spawn(1)
        key = int.from_bytes(child.generate_state(4, "uint32").tobytes(), "little")
        return _aes_generator(key)

    def spawn(self) -> RandomSource:
        """An independent source of its own: secure if this one is; seeded, the next
        child of this one's sequence (so parts made in a fixed order -- the columns of a
        release -- draw the same whatever order they are later run in).

        Examples
        --------
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     a, b = RandomSource(3), RandomSource(3)
        >>> first = a.spawn().generator().integers(0, 10**9)
        >>> bool(first == b.spawn().generator().integers(0, 10**9))
        True
        """
        child = RandomSource.__new__(RandomSource)
        child._seed, child._lock = self._seed, threading.Lock()
        if self._seq is None:
            child._seq = None
        else:
            with self._lock:
                (child._seq,) = self._seq.spawn(1)
        return child

    def __repr__(self) -> str:
        return "RandomSource(secure)" if self._seed is None else f"RandomSource(seed={self._seed})"


def as_source(random: RandomSource | int | None) -> RandomSource:
    """Accept a RandomSource, a seed, or None (secure) wherever a mechanism takes ``seed=``."""
    if isinstance(random, RandomSource):
        return random
    return RandomSource(random)


def derived_source(seed: int | None, label: str) -> RandomSource:
    """The random source of one part of a seeded job (``None``: secure, the default).

    Each part (a release of a spec) gets a source of its own, derived from the job's seed
    and its label, so what one part draws does not depend on the others: a seeded spec
    gives the same noise for a release whichever engine runs it.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     a = derived_source(7, "by_region").generator().integers(0, 10**9)
    ...     b = derived_source(7, "by_region").generator().integers(0, 10**9)
    >>> bool(a == b), derived_source(None, "x").seeded
    (True, False)
    """
    if seed is None:
        return RandomSource()
    import hashlib

    digest = hashlib.sha256(f"dpframe-release/{seed}/{label}".encode()).digest()
    return RandomSource(int.from_bytes(digest[:8], "big"))
