"""Arrays nobody can write to again: what a plan samples from, once it is built.

``arr.setflags(write=False)`` is a request, not a guarantee: anyone holding the array can
call ``setflags(write=True)`` and change it (the third attack zeroed a PRAM design's
sampler table after planning, and every record was released unchanged under a charge of
0.1). An array whose memory is an immutable ``bytes`` object cannot be made writeable:
numpy refuses ``setflags(write=True)`` on it.

Examples
--------
>>> import numpy as np
>>> from dpframe.core.frozen import frozen_array
>>> a = frozen_array(np.arange(3))
>>> try:
...     a.setflags(write=True)
... except ValueError:
...     print("stays read-only")
stays read-only
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["frozen_array"]


def frozen_array(values: Any, dtype: Any = None) -> np.ndarray:
    """A copy of ``values`` in memory that cannot be written, nor made writeable again.

    Numeric and boolean dtypes only (an object array could hold mutable objects).
    """
    arr = np.ascontiguousarray(values, dtype=dtype)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"frozen_array holds numbers only, got dtype {arr.dtype}")
    out = np.frombuffer(arr.tobytes(), dtype=arr.dtype).reshape(arr.shape)
    return out
