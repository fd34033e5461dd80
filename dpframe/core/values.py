"""Which data values a release can take: every value known and finite.

A null, a NaN or an infinity in a column that is released (or that a released statistic
is computed from) is refused *before* anything is charged: clipping would quietly turn
``+inf`` into the upper bound (and Spark orders NaN above every number), and a null has
no value to release. Each engine counts the bad values its own way (polars: ``is_null |
is_nan | is_infinite``; Spark: ``isNull | isnan | abs == inf``) and hands the counts to
:func:`refuse_bad_values`, so both engines refuse the same data with the same message.

Examples
--------
>>> from dpframe.core.values import refuse_bad_values
>>> refuse_bad_values({"income": 0, "age": 0})
>>> refuse_bad_values({"income": 2})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpframe.errors.InvalidDataError: column 'income' (2) has null, NaN or infinite value(s). ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dpframe.errors import InvalidDataError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BAD_VALUES", "check_finite", "refuse_bad_values"]

#: What counts as a bad value in a released (or source) column.
BAD_VALUES = "null, NaN or infinite"


def refuse_bad_values(counts: Mapping[str, int]) -> None:
    """Raise :class:`InvalidDataError` naming every column with bad values, if any.

    ``counts`` maps each column to its number of null, NaN or infinite values.
    """
    bad = {c: int(n) for c, n in counts.items() if n}
    if not bad:
        return
    listed = ", ".join(f"{c!r} ({n})" for c, n in bad.items())
    first = next(iter(bad))
    one = len(bad) == 1
    raise InvalidDataError(
        f"{'column' if one else 'columns'} {listed} {'has' if one else 'have'} {BAD_VALUES} "
        f"value(s). A grouped release can drop the records with a null or NaN "
        f"(nulls='drop') or fill them (nulls={{{first!r}: ...}}); otherwise fill or drop "
        "them before the release. Infinities are always refused (nothing was charged)"
    )


def check_finite(values: np.ndarray, name: str = "values") -> None:
    """Refuse NaN and infinities in an array of exact statistics (nulls never reach numpy)."""
    import numpy as np

    bad = ~np.isfinite(values)
    if bad.any():
        refuse_bad_values({name: int(bad.sum())})
