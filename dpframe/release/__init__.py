"""Release jobs: a TOML spec -> plan -> release (sanitize, Parquet) -> check (GE suite).

The Python API mirrors the ``dpframe`` command (``plan``, ``release``, ``check``)::

    from dpframe.release import check, load_spec, plan, release

    spec = load_spec("release.toml")
    print(plan(spec).rows)      # nothing spent
    result = release(spec)      # charged, sanitized, checked, published
    check(spec)                 # validate the published outputs again

(``docs/release-python.md`` runs it end to end.)
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
