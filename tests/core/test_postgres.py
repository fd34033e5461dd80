"""What only the PostgreSQL ledger has: a URL, a server, schemas (issue 14).

The properties both stores share are in tests/core/test_stores.py.
"""

from __future__ import annotations

import pytest

import dpframe
from dpframe.core.accountant import Accountant
from dpframe.core.postgres import redact
from dpframe.errors import LedgerIntegrityError, LedgerUnavailableError


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
    a = Accountant.open(f"{postgres_url}?options=-csearch_path%3Dsurvey_a", epsilon=1.0)
    b = Accountant.open(f"{postgres_url}?options=-csearch_path%3Dsurvey_b", epsilon=3.0)
    a.spend(1.0, mechanism="laplace")
    b.spend(2.0, mechanism="laplace")
    assert (a.remaining.epsilon, b.remaining.epsilon) == (0.0, 1.0)
    with pytest.raises(dpframe.BudgetExceededError):
        a.spend(0.1, mechanism="laplace")
