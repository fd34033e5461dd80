"""Release jobs: a TOML spec -> plan -> run (check, charge, sanitize, write) -> check -> publish.

The Python API mirrors the ``dpframe`` command (``plan``, ``release``, ``check``)::

    from dpframe.jobs import check, load_spec, plan, run

    spec = load_spec("release.toml")
    print(plan(spec).rows)      # nothing spent
    result = run(spec)          # checked, charged once, sanitized, checked, published
    check(spec)                 # validate the published outputs again
    check_folder("released")    # ... or the published folder on its own (no spec, no input)
    run = published_run("released")   # one run: run.path("by_region"), run.manifest

(``docs/release-python.md`` runs it end to end.) ``run(spec, engine="spark")`` runs the
same spec on Apache Spark.

* :mod:`~dpframe.jobs.spec` -- the spec, validated;
* :mod:`~dpframe.jobs.kinds` -- the release kinds, in one registry;
* :mod:`~dpframe.jobs.planning` -- what a spec will spend, without spending;
* :mod:`~dpframe.jobs.job` -- the job loop, for both engines;
* :mod:`~dpframe.jobs.checks` -- each release's suite (declared by its kind) validated with
  Great Expectations;
* :mod:`~dpframe.jobs.publish` -- whole runs published at once, and read as one.
"""

from dpframe.jobs.job import CheckFailedError, JobResult, check, check_folder, run
from dpframe.jobs.planning import JobPlan, plan
from dpframe.jobs.publish import PublishedRun, published_run
from dpframe.jobs.spec import Spec, SpecError, load_spec, parse_spec

__all__ = [
    "CheckFailedError",
    "JobPlan",
    "JobResult",
    "PublishedRun",
    "Spec",
    "SpecError",
    "check",
    "check_folder",
    "load_spec",
    "parse_spec",
    "plan",
    "published_run",
    "run",
]
