"""What a release does with missing values (null or NaN): the ``nulls=`` policy.

One rule, used by the Python API and the release spec alike:

* ``"refuse"`` (the default): a missing value in a column the release reads is refused
  before anything is charged, naming every such column at once;
* ``"drop"``: each record with a missing value in a column the release reads (a key or
  a statistic's column) is left out before anything is aggregated. Whether a record is
  left out depends on that record alone, so one changed record still changes at most
  one record of what is aggregated -- but the number of records that remain is then
  data. So ``"drop"`` is refused with public group sizes (``sizes=``): the sizes
  declared are those of all records, not of the records kept. Group sizes are then
  released with noise, as without ``sizes=``. Under ``"substitute"`` neighbours a
  changed record may become a dropped one (or the reverse): what is aggregated then
  differs by one added or removed record, whose sensitivities never exceed the
  substitute ones dpframe uses for grouped counts and sums of private groups;
* ``{column: value}``: each missing value of those columns is replaced by ``value``
  (a finite number, or a string for a text column) before anything else -- a public
  rule applied record by record, so nothing about the privacy changes; clipping to the
  statistic's bounds still follows. Other columns refuse missing values.

Infinities are never "missing": they are refused under every policy (clipping would
quietly turn ``+inf`` into the upper bound).

Examples
--------
>>> check_nulls("drop", public_sizes=False)
MissingValues(policy='drop', fill={})
>>> check_nulls({"income": 0}, public_sizes=True).fill
{'income': 0.0}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from dpframe.core.constraints import NULLS
from dpframe.errors import InvalidParameterError

__all__ = ["NULLS", "MissingValues", "as_written", "check_nulls"]


@dataclass(frozen=True)
class MissingValues:
    """A checked ``nulls=`` policy: ``"refuse"``, ``"drop"`` or ``"fill"`` (with ``fill``)."""

    policy: str = "refuse"
    fill: dict[str, float | str] = field(default_factory=dict)

    @property
    def note(self) -> str | None:
        """What a plan says of it (``None`` for the default)."""
        if self.policy == "drop":
            return "records with a missing value are dropped (the number kept is data)"
        if self.policy == "fill":
            return "missing values filled: " + ", ".join(f"{k}={v!r}" for k, v in self.fill.items())
        return None


def as_written(value: Any) -> str | dict[str, float | str]:
    """``nulls=`` checked (without public sizes) and given back as written: a policy's
    name or the mapping of fill values (the release spec's field)."""
    checked = check_nulls(value, public_sizes=False)
    return dict(checked.fill) if checked.policy == "fill" else checked.policy


def _fill_value(column: str, value: Any) -> float | str:
    if isinstance(value, str):
        return value
    if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise InvalidParameterError(
        f"nulls: the fill value of column {column!r} must be a finite number (or a string for "
        f"a text column), got {value!r}"
    )


def check_nulls(value: Any, *, public_sizes: bool) -> MissingValues:
    """The policy ``value`` names, checked (``public_sizes``: the release declares its
    group sizes, which ``"drop"`` would make false).

    Raises
    ------
    InvalidParameterError
        For anything but ``"refuse"``, ``"drop"`` or a non-empty mapping of column names
        to finite numbers or strings; for ``"drop"`` with public sizes.
    """
    if isinstance(value, MissingValues):
        value = value.fill or value.policy
    if isinstance(value, str):
        if value not in NULLS:
            raise InvalidParameterError(
                f"nulls must be 'refuse', 'drop' or a mapping {{column: fill value}}, got {value!r}"
            )
        if value == "drop" and public_sizes:
            raise InvalidParameterError(
                "nulls='drop' with public sizes: dropping records changes the group sizes, "
                "so the sizes declared (sizes=) would no longer be those of the records "
                "aggregated. Drop sizes= (the sizes are then released with noise), or fill "
                "the missing values (nulls={column: value})"
            )
        return MissingValues(value)
    if isinstance(value, Mapping):
        if not value:
            raise InvalidParameterError(
                "nulls: the mapping of fill values is empty; give {column: value}, or "
                "nulls='refuse'"
            )
        bad = [k for k in value if not isinstance(k, str) or not k]
        if bad:
            raise InvalidParameterError(f"nulls: the columns to fill must be names, got {bad}")
        return MissingValues("fill", {k: _fill_value(k, v) for k, v in value.items()})
    raise InvalidParameterError(
        f"nulls must be 'refuse', 'drop' or a mapping {{column: fill value}}, got "
        f"{type(value).__name__} {value!r}"
    )
