"""Every user-facing object prints short (one line, no ``<object at 0x...>``) and shows
in a notebook (``_repr_html_``), without reading data or spending budget."""

from __future__ import annotations

import warnings

import polars as pl
import pytest

import dpframe
from dpframe.errors import UnsafeSeedWarning


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    warnings.simplefilter("ignore", UnsafeSeedWarning)
    folder = tmp_path_factory.mktemp("reprs")
    people = pl.DataFrame(
        {"region": ["N", "S", "N"] * 20, "income": [1.0, 2.0, 3.0] * 20, "age": [4.0] * 60}
    )
    regions = pl.DataFrame({"region": ["N", "S"]})
    acct = dpframe.Accountant.open(folder / "ledger.db", epsilon=5.0)
    with acct:
        grouping = dpframe.group_by(people, "region", margins=regions, seed=1)
        release = grouping.agg(dpframe.agg.mean("income", lower=0, upper=5, epsilon=1.0))
        table = release.collect()
        column = pl.col("income").dp.laplace(epsilon=0.5, sensitivity=1, composition="parallel")
        stats = pl.DataFrame({"income": [1.0, 2.0]}).with_columns(column)
        cov = dpframe.covariance_matrix(
            people, ["income", "age"], [(0, 5), (0, 9)], epsilon=0.5, n=60
        )
        props = dpframe.proportions(people, "region", epsilon=0.5, n=60, categories=["N", "S"])
    path = folder / "release.parquet"
    dpframe.write_parquet(table, path, ledger=release)
    from dpframe.polars.column import ColumnRelease

    col_release = ColumnRelease(
        mechanism="laplace",
        epsilon=0.5,
        composition="parallel",
        public_groups=False,
        sensitivity=1.0,
        accountant=acct,
        random=dpframe.RandomSource(),
        column="income",
    )
    assert stats.height == 2
    return {
        "Accountant": acct,
        "LedgerEntry": acct.ledger[0],
        "Budget": acct.spent,
        "GroupBy": grouping,
        "GroupedRelease": release,
        "CovarianceMatrixRelease": cov,
        "ProportionsRelease": props,
        "ColumnRelease": col_release,
        "Provenance": dpframe.read_provenance(path),
        "RandomSource": dpframe.RandomSource(),
    }


NOTEBOOK = [
    "Accountant",
    "LedgerEntry",
    "GroupBy",
    "GroupedRelease",
    "CovarianceMatrixRelease",
    "ProportionsRelease",
    "Provenance",
]


@pytest.mark.parametrize(
    "name",
    [
        "Accountant",
        "LedgerEntry",
        "Budget",
        "GroupBy",
        "GroupedRelease",
        "CovarianceMatrixRelease",
        "ProportionsRelease",
        "ColumnRelease",
        "Provenance",
        "RandomSource",
    ],
)
def test_a_short_repr(objects, name):
    text = repr(objects[name])
    assert text.startswith(name)
    assert "\n" not in text and "object at 0x" not in text
    assert len(text) <= 160, text


@pytest.mark.parametrize("name", NOTEBOOK)
def test_an_html_repr(objects, name):
    acct = objects["Accountant"]
    before = acct.spent
    page = objects[name]._repr_html_()
    assert page.startswith("<") and "</" in page and "object at 0x" not in page
    assert acct.spent == before


@pytest.mark.parametrize("name", ["GroupedRelease", "CovarianceMatrixRelease", "Accountant"])
def test_a_summary_prints_every_column_and_row(objects, name):
    """polars' default width hid ``sensitivity`` and ``scale`` (issue 32)."""
    summary = dpframe.summarize(objects[name])
    with pl.Config(tbl_cols=4, tbl_rows=2, tbl_width_chars=60):  # whatever the user set
        for text in (repr(summary), str(summary)):
            header = next(line for line in text.splitlines() if "statistic" in line)
            assert all(f" {c} " in header for c in summary.columns), header
            assert "…" not in text
        assert "…" in repr(pl.DataFrame(summary))  # a plain frame still obeys the config
    assert isinstance(summary, pl.DataFrame)
