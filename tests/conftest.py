import os
import sys
import warnings

import pytest

from dpframe.errors import UnsafeSeedWarning

# `make test` (and so CI) sets this: the Spark tests then fail, not skip, without pyspark.
SPARK_REQUIRED = os.environ.get("DPFRAME_REQUIRE_SPARK") == "1"


#: The files that take longest (worker-seconds of a ``make test`` run with
#: ``--durations=0``: 227, 108, 88, 78, 66, 50, 42, 40 of about 1,270), run first. ``make
#: test`` hands whole files to its two workers (``--dist loadfile``) in collection order:
#: a long file begun last would keep one worker busy while the other has nothing left.
HEAVY_FIRST = (
    "tests/test_benchmarks.py",
    "tests/jobs/test_run.py",
    "tests/engines/test_spark.py",
    "tests/jobs/test_doctored.py",
    "tests/test_docs.py",
    "tests/jobs/test_checker.py",
    "tests/test_mypy_plugin.py",
    "tests/core/test_stores.py",
)


def pytest_collection_modifyitems(config, items):
    """The :data:`HEAVY_FIRST` files first, in that order; the others as collected."""
    rank = {f: i for i, f in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(autouse=True)
def _quiet_seed_warning():
    """Tests seed their noise on purpose; the warning is tested in test_random.py."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSeedWarning)
        yield


def spark_available() -> bool:
    """pyspark is importable (required, not optional, where ``SPARK_REQUIRED``)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        if SPARK_REQUIRED:
            raise
        return False
    return True


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run: 2 cores, each task tried up to twice.

    ``local[2,2]`` is ``local[2]`` with Spark's task retry enabled (local mode gives a
    failed task no second attempt otherwise), so a test can fail a first attempt.
    """
    if not spark_available():
        pytest.skip("pyspark is not installed: pip install -e '.[spark]' (make test does)")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors run this interpreter
    from pyspark.sql import SparkSession

    # a session a job made first (local_session(): local[2], no retry) would be returned by
    # getOrCreate below, and the retry tests would fail depending on the test order
    existing = SparkSession.getActiveSession()
    if existing is not None and existing.sparkContext.master != "local[2,2]":
        existing.stop()
    session = (
        SparkSession.builder.master("local[2,2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the run (see tests/postgres_server.py)."""
    from tests import postgres_server as pg

    reason = pg.missing_reason()
    if reason is not None:
        if pg.REQUIRED:
            pytest.fail(f"DPFRAME_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    with pg.server() as base:
        yield base


@pytest.fixture
def postgres_url(postgres_server):
    """The URL of a fresh, empty database on the test server."""
    from tests import postgres_server as pg

    return pg.new_database(postgres_server)
