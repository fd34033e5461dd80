"""Which data values a release can take: every value known and finite.

One rule for every column a release reads -- a statistic's values, group keys, margins,
person identifiers, PRAM and proportions columns, covariance columns: a **null**, a
**NaN** or an **infinity** (``+inf``, ``-inf``) is *missing or not finite*, and such a
value is refused *before* anything is charged. Clipping would quietly turn ``+inf`` into
the upper bound (and Spark orders NaN above every number), a null has no value to
release, NaN is no group (it compares unequal to itself), and NaN is no person: grouping
every NaN identifier into one "person" would bound many people as one, and adding one
person could then move a grouped count by more than its sensitivity.

Where a release states a ``nulls=`` policy (grouped releases: drop or fill the records
with a null or NaN in a key or a statistic's column; :mod:`dpframe.core.missing`) the
policy runs first; what remains is refused. A person identifier is never dropped or
filled: a missing identifier is refused under every policy (:func:`missing_id_error`).

Each engine counts the bad values its own way (polars: ``is_null | is_nan |
is_infinite``; Spark: ``isNull | isnan | abs == inf``), over *all* the input rows (not
only the rows a person keeps), and hands the counts to :func:`refuse_bad_values` (values
and keys) or :func:`refuse_missing_ids` (person identifiers), so both engines refuse the
same data with the same message.

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

from dpframe.core.advice import advise
from dpframe.errors import InvalidDataError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BAD_VALUES",
    "check_finite",
    "missing_id_error",
    "refuse_bad_values",
    "refuse_missing_ids",
]

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
    drop, fill = advise(
        python=f"nulls='drop'|nulls={{{first!r}: ...}}",
        spec=f'nulls = "drop" on the release|nulls = {{ {first} = ... }}',
    ).split("|")
    raise InvalidDataError(
        f"{'column' if one else 'columns'} {listed} {'has' if one else 'have'} {BAD_VALUES} "
        f"value(s). A grouped release can drop the records with a null or NaN "
        f"({drop}) or fill them ({fill}); otherwise fill or drop "
        "them before the release. Infinities are always refused (nothing was charged)"
    )


def check_finite(values: np.ndarray, name: str = "values") -> None:
    """Refuse NaN and infinities in an array of exact statistics (nulls never reach numpy)."""
    import numpy as np

    bad = ~np.isfinite(values)
    if bad.any():
        refuse_bad_values({name: int(bad.sum())})


def missing_id_error(person: str) -> InvalidDataError:
    """The error of a person column holding a null, a NaN or an infinity (the same for
    every engine and every release). It gives no count: how many records lack an
    identifier is data."""
    return InvalidDataError(
        f"person column {person!r} holds nulls, NaN or infinite values: every record must "
        "belong to one known person (NaN identifiers are not one person, and a missing "
        "identifier is never dropped or filled by nulls=); fix or drop those records "
        "before the release (nothing was charged)"
    )


def refuse_missing_ids(person: str, count: int) -> None:
    """Raise :func:`missing_id_error` if ``count`` (the person column's null, NaN or
    infinite values, or the distinct such identifiers) is not 0."""
    if count:
        raise missing_id_error(person)
