"""Parameter checks shared by the public functions (each raises InvalidParameterError)."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

from dpframe.errors import InvalidParameterError

NEIGHBOURS = ("substitute", "add_remove")
COMPOSITIONS = ("parallel", "sequential")


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite real number, else raise."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidParameterError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    x = float(value)
    if math.isnan(x) or math.isinf(x):
        raise InvalidParameterError(f"{name} must be finite, got {x!r}")
    return x


def check_positive(name: str, value: Any) -> float:
    """A finite number > 0 (epsilon, sensitivity, scale)."""
    x = check_real(name, value)
    if x <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {x!r}")
    return x


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A privacy parameter epsilon: finite and > 0."""
    return check_positive(name, value)


def check_delta(value: Any, name: str = "delta") -> float:
    """A privacy parameter delta in [0, 1)."""
    x = check_real(name, value)
    if not 0.0 <= x < 1.0:
        raise InvalidParameterError(f"{name} must be in [0, 1), got {x!r}")
    return x


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise InvalidParameterError(f"{name} must be one of {options}; got {value!r}")
    return value
