"""Release jobs: a TOML spec -> plan -> release (sanitize, Parquet) -> check (GE suite).

The Python API mirrors the ``dpframe`` command (``plan``, ``release``, ``check``):

>>> from dpframe.release import load_spec, plan, release, check  # doctest: +SKIP
>>> spec = load_spec("release.toml")                             # doctest: +SKIP
>>> print(plan(spec).rows)                                       # doctest: +SKIP
>>> result = release(spec)                                       # doctest: +SKIP
"""

from dpframe.release.plan import Plan, plan
from dpframe.release.run import CheckFailedError, ReleaseResult, check, release
from dpframe.release.spec import Spec, SpecError, load_spec, parse_spec

__all__ = [
    "CheckFailedError",
    "Plan",
    "ReleaseResult",
    "Spec",
    "SpecError",
    "check",
    "load_spec",
    "parse_spec",
    "plan",
    "release",
]
