"""What only the PostgreSQL ledger has: a URL, a server, schemas (issue 14).

The properties both stores share are in tests/core/test_stores.py.
"""

from __future__ import annotations

import uuid

import pytest

import dpframe
from dpframe.core.accountant import Accountant
from dpframe.core.postgres import redact
from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    LedgerIntegrityError,
    LedgerUnavailableError,
)


def test_a_password_never_reaches_a_message():
    assert redact("postgresql://job:s3cret@db.example:5432/ledger") == (
        "postgresql://job:***@db.example:5432/ledger"
    )
    assert redact("postgresql://job@db/ledger") == "postgresql://job@db/ledger"


def test_an_unreachable_server_charges_nothing_and_says_so():
    with pytest.raises(
        LedgerUnavailableError, match=r"(?s)could not be reached.*nothing was charged"
    ):
        Accountant.open("postgresql://nobody:pw@127.0.0.1:1/ledger", epsilon=1.0)


def test_a_database_without_a_ledger_needs_a_budget(postgres_url):
    with pytest.raises(LedgerIntegrityError, match="epsilon"):
        Accountant.open(postgres_url)
    acct = Accountant.open(postgres_url, epsilon=2.0, neighbours="add_remove")
    assert acct.location == postgres_url and acct.path is None
    assert Accountant.open(postgres_url).neighbours == "add_remove"


def test_truncating_the_entries_is_refused(postgres_url):
    import psycopg

    acct = Accountant.open(postgres_url, epsilon=1.0)
    acct.spend(0.5, mechanism="laplace")
    with (
        psycopg.connect(postgres_url, autocommit=True) as con,
        pytest.raises(psycopg.Error, match="append-only"),
    ):
        con.execute("TRUNCATE dpframe_entries")
    assert Accountant.open(postgres_url).spent.epsilon == 0.5


def test_one_database_holds_a_ledger_per_schema(postgres_url):
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute("CREATE SCHEMA survey_a")
        con.execute("CREATE SCHEMA survey_b")
    a = Accountant.open(f"{postgres_url}?schema=survey_a", epsilon=1.0)
    b = Accountant.open(f"{postgres_url}?schema=survey_b", epsilon=3.0)
    a.spend(1.0, mechanism="laplace")
    b.spend(2.0, mechanism="laplace")
    assert (a.remaining.epsilon, b.remaining.epsilon) == (0.0, 1.0)
    with pytest.raises(dpframe.BudgetExceededError):
        a.spend(0.1, mechanism="laplace")


def test_one_url_names_one_ledger_whichever_role_connects(postgres_url):
    """Found in review (an overspend): tables were named unqualified and resolved through
    the connecting role's ``search_path`` (default ``"$user", public``), so a job role with
    a schema of its own found no ledger and silently created a second one there: 2.0 of a
    1.0 budget released from one database. Now the URL names the schema (default
    ``public``) and every transaction pins it."""
    import psycopg

    owner = Accountant.open(postgres_url, epsilon=1.0)
    role = f"job_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")  # its own, first on its path
        con.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"
        )
    as_job = postgres_url.replace("://postgres@", f"://{role}@")
    job = Accountant.open(as_job, epsilon=1.0)  # a job always passes the spec's budget
    job.spend(1.0, mechanism="laplace")
    with pytest.raises(BudgetExceededError):
        owner.spend(1.0, mechanism="laplace")  # before: a fresh 1.0 budget in its schema
    with psycopg.connect(postgres_url, autocommit=True) as con:
        assert con.execute(f"SELECT to_regclass('{role}.dpframe_header')").fetchone()[0] is None
    with pytest.raises(dpframe.InvalidParameterError, match="does not exist"):
        Accountant.open(f"{postgres_url}?schema=nowhere", epsilon=1.0)


def test_a_valid_ledger_is_reported_tampered_under_extra_float_digits_0(postgres_url):
    """Attack (availability): amounts are DOUBLE PRECISION read back as text in the
    session's format. With ``extra_float_digits = 0`` (a database/role setting, the
    pre-PG12 default) 0.1234567890123456 reads back as 0.123456789012346, the hash chain
    no longer matches, and a perfectly valid ledger is refused for everyone as "edited
    ... Restore the ledger from a backup" (the same happens to a reservation stored as
    ``_at_least``'s 17-digit float, which then holds less than planned).

    Correct: the store reads exactly what it wrote, whatever the session settings.
    """
    import psycopg

    db = postgres_url.rsplit("/", 1)[1]
    acct = Accountant.open(postgres_url, epsilon=1.0)
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute(f"ALTER DATABASE {db} SET extra_float_digits = 0")
    acct.spend(0.1234567890123456, mechanism="laplace")
    assert Accountant.open(postgres_url).spent.epsilon == 0.1234567890123456


def test_a_password_given_as_a_uri_parameter_reaches_location(postgres_url):
    """Attack (credential leak): ``redact`` removes only ``user:password@``; libpq also
    takes ``?password=...`` (documented URI parameter). That URL's password is then in
    ``Accountant.location``, ``dpframe ledger show`` and every error message.

    Correct: no part of the password appears anywhere dpframe prints.
    """
    acct = Accountant.open(f"{postgres_url}?password=s3cret-pw", epsilon=1.0)
    assert "s3cret-pw" not in acct.location


def test_a_password_never_reaches_an_error_message():
    """Attack (credential leak): messages embed the driver's error text, and libpq
    echoes URI fragments: a password with a stray ``%`` (``s3c%zzret``) comes back as
    ``invalid percent-encoded token: "s3c%zzret"``, and ``?password=`` is not redacted.

    Correct: neither password appears in the message.
    """
    for url, secret in [
        ("postgresql://job:s3c%zzret@127.0.0.1:1/ledger", "s3c%zzret"),
        ("postgresql://job@127.0.0.1:1/ledger?password=pw-in-query", "pw-in-query"),
    ]:
        with pytest.raises(DPFrameError) as err:
            Accountant.open(url, epsilon=1.0)
        assert secret not in str(err.value)


def _recommended_grants() -> list[str]:
    """The GRANT statements docs/ledger.md recommends for a job's role."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "ledger.md").read_text()
    block = text.split("```sql", 1)[1].split("```", 1)[0]
    grants = [line.split("--")[0].strip() for line in block.splitlines()]
    return [g for g in grants if g.startswith("GRANT ")]


def test_the_recommended_grants_cannot_brick_the_ledger(postgres_url):
    """Issue 31: a role with exactly the grants docs/ledger.md recommended (UPDATE on
    ``dpframe_issued``) ran ``UPDATE dpframe_issued SET issued = issued + 5``: the ledger
    then held fewer entries than it had issued, and refused every charge for good.

    Now the server keeps the count (a trigger run as the tables' owner) and a job's role
    needs no right to change it, nor to change or remove an entry: with the recommended
    grants a job charges, and every statement that would break the ledger is refused.
    """
    import psycopg

    owner = Accountant.open(postgres_url, epsilon=1.0)
    owner.spend(0.25, mechanism="laplace")
    role = f"job_{uuid.uuid4().hex[:8]}"
    grants = _recommended_grants()
    assert grants
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        for g in grants:
            con.execute(g.replace("dpframe_job", role))
    as_job = postgres_url.replace("://postgres@", f"://{role}@")
    job = Accountant.open(as_job, epsilon=1.0)
    with job.reserve(dpframe.Budget(0.5)):
        job.spend(0.25, mechanism="laplace")  # a job charges with these grants
    hashes = [e.hash for e in job.ledger]
    entry = (
        "INSERT INTO dpframe_entries (seq, id, release, time, mechanism, columns, epsilon, "
        "delta, scale, composition, note, details, hash) VALUES ({seq}, 'x', 'x', 't', "
        "'laplace', '[]', 0, 0, NULL, 'sequential', '', '{{}}', 'h')"
    )
    breaking = [
        "UPDATE dpframe_issued SET issued = issued + 5",
        "UPDATE dpframe_issued SET issued = 0",
        "DELETE FROM dpframe_issued",
        "DELETE FROM dpframe_entries WHERE seq = 2",
        "UPDATE dpframe_entries SET epsilon = 0 WHERE seq = 1",
        "TRUNCATE dpframe_entries",
        "DELETE FROM dpframe_header",
        "DROP TRIGGER entries_are_counted ON dpframe_entries",
        "DROP TABLE dpframe_entries",
        entry.format(seq=9),  # out of sequence: the count would not match the entries
        # the count trigger runs as the owner: it must not count in the job's own table
        (
            "CREATE TEMP TABLE dpframe_issued (singleton INTEGER, issued BIGINT)",
            "INSERT INTO dpframe_issued VALUES (1, 8)",
            entry.format(seq=9),
        ),
    ]
    for statements in breaking:
        with psycopg.connect(as_job, autocommit=True) as con:
            *setup, statement = statements if isinstance(statements, tuple) else (statements,)
            for s in setup:
                con.execute(s)
            with pytest.raises(psycopg.Error):
                con.execute(statement)
    again = Accountant.open(postgres_url)  # still verifies, and still charges
    assert [e.hash for e in again.ledger] == hashes and again.spent.epsilon == 0.5
    job.spend(0.25, mechanism="laplace")
    assert Accountant.open(as_job).spent.epsilon == 0.75
    # what it can do by hand: append the next entry with a hash that does not chain --
    # lowering nothing; the ledger names it and charges nothing until the owner removes it
    with psycopg.connect(as_job, autocommit=True) as con:
        con.execute(entry.format(seq=4))
    with pytest.raises(LedgerIntegrityError, match=r"entry 4 \(id 'x'\) does not match"):
        Accountant.open(postgres_url)
    with pytest.raises(LedgerIntegrityError):
        job.spend(0.1, mechanism="laplace")


def test_a_ledger_of_an_older_version_gets_the_server_kept_count_from_its_owner(postgres_url):
    """A ledger made before the server counted its entries (no ``entries_are_counted``)
    still counts them (the accountant updates the count) until its owner opens it: the
    count is then kept by the server, and a job with the recommended grants charges."""
    import psycopg

    Accountant.open(postgres_url, epsilon=1.0)
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute("DROP TRIGGER entries_are_counted ON dpframe_entries")
        con.execute("DROP FUNCTION dpframe_count_issued")
    role = f"job_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        for g in _recommended_grants():
            con.execute(g.replace("dpframe_job", role))
    as_job = postgres_url.replace("://postgres@", f"://{role}@")
    job = Accountant.open(as_job)  # not the owner: nothing added
    with pytest.raises(LedgerUnavailableError, match="permission denied"):
        job.spend(0.25, mechanism="laplace")  # the older count needs UPDATE: refused
    owner = Accountant.open(postgres_url)
    owner.spend(0.25, mechanism="laplace")
    job.spend(0.25, mechanism="laplace")
    with psycopg.connect(postgres_url, autocommit=True) as con:
        assert con.execute("SELECT issued FROM dpframe_issued").fetchone()[0] == 2
    assert Accountant.open(postgres_url).spent.epsilon == 0.5
