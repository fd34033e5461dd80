"""PRAM microdata under a person unit: what the charge covers is checked on the pass that
randomizes, not only on an earlier read of a lazy input (the third attack: counted on one
read, randomized on another)."""

from __future__ import annotations

import polars as pl
import pytest

import dpframe
from dpframe.engines.polars import PolarsEngine
from dpframe.errors import InvalidDataError, PublishFailedError

COLUMNS = [{"column": "c", "epsilon": 1.0, "categories": ["a", "b"]}]


def _most_rows(path) -> int:
    return int(pl.read_parquet(path).group_by("pid").len()["len"].max())


def test_a_lazy_input_drawn_afresh_at_each_read_never_publishes_a_person_over_max_rows(
    tmp_path,
):
    # pid is drawn at each evaluation: two persons, or one person with both rows, 50/50
    # per read. Old: the check passed on one read and the file written from another held
    # one person with 2 rows, each at epsilon 1 -- a loss of 2, charged 1.
    lf = pl.LazyFrame({"c": ["a", "b"], "r": [0, 1]}).select(
        "c",
        pl.when(pl.int_range(pl.len()).shuffle() == 0).then(0).otherwise(pl.col("r")).alias("pid"),
    )
    outcomes = {"refused": 0, "caught after the charge": 0, "published": 0}
    for k in range(40):  # P(no post-charge catch in 40) = 0.75**40 < 1e-4
        out = tmp_path / f"m{k}.parquet"
        with dpframe.Accountant(epsilon=100) as acct:
            rel = dpframe.pram.release(lf, COLUMNS, unit="pid", max_rows=1, keep=["pid"])
            try:
                rel.write(out)
            except PublishFailedError as exc:
                assert "nothing was published" in str(exc) and "epsilon 1 is spent" in str(exc)
                assert not out.exists() and acct.spent.epsilon == 1.0
                outcomes["caught after the charge"] += 1
                continue
            except InvalidDataError:
                assert acct.ledger == () and not out.exists()
                outcomes["refused"] += 1
                continue
        assert _most_rows(out) <= 1, "a person's rows exceed what was charged"
        outcomes["published"] += 1
    assert outcomes["caught after the charge"] > 0, outcomes
    assert not list(tmp_path.glob("*.persons")), "a temporary file with person ids was left"


@pytest.mark.parametrize("keep", [["pid"], []], ids=["pid-kept", "pid-dropped"])
def test_an_input_file_rewritten_after_the_check_is_caught_before_publishing(
    tmp_path, monkeypatch, keep
):
    # several rows per person: max_rows = 2 holds when checked; the file is then rewritten
    # so that one person has 3 rows
    src = tmp_path / "in.parquet"
    pl.DataFrame({"c": ["a", "b", "a", "b"], "pid": [1, 1, 2, 2]}).write_parquet(src)
    real = PolarsEngine.category_counts

    def counts_then_rewrite(self, columns, per_person=None):
        out = real(self, columns, per_person)
        pl.DataFrame({"c": ["a", "b", "a", "b"], "pid": [1, 1, 1, 2]}).write_parquet(src)
        return out

    monkeypatch.setattr(PolarsEngine, "category_counts", counts_then_rewrite)
    out = tmp_path / "out.parquet"
    with dpframe.Accountant(epsilon=10) as acct:
        rel = dpframe.pram.release(pl.scan_parquet(src), COLUMNS, unit="pid", max_rows=2, keep=keep)
        with pytest.raises(PublishFailedError, match="has 3 rows, more than max_rows=2"):
            rel.write(out)
    assert acct.spent.epsilon == 1.0 and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


@pytest.mark.parametrize("keep", [["pid"], []], ids=["pid-kept", "pid-dropped"])
def test_a_person_release_writes_what_it_randomized(tmp_path, keep):
    out = tmp_path / "out.parquet"
    df = pl.DataFrame({"c": ["a", "b"] * 50, "pid": list(range(50)) * 2, "x": range(100)})
    with dpframe.Accountant(epsilon=10):
        dpframe.pram.release(df, COLUMNS, unit="pid", max_rows=2, keep=keep).write(out)
    written = pl.read_parquet(out)
    assert written.columns == ["c", *keep] and written.height == 100
    assert dpframe.read_provenance(out).epsilon == 1.0


def test_a_dp_prior_counts_each_person_s_rows_up_to_max_rows_on_its_own_read(tmp_path, monkeypatch):
    """``prior="dp"``: the persons' rows are checked on one read, the prior's histogram
    counted on another. Old: a file swapped between the two (200 persons of one row,
    then one person of 200 rows) put one person's 200 rows into the prior's histogram,
    charged for max_rows=1 (a loss of 2 x 200 / 2 = 200 times the prior's charge). The
    histogram now counts each person's first max_rows records of its own read."""
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    one_each = pl.DataFrame({"c": ["a"] * 200, "pid": list(range(200))})
    one_person = pl.DataFrame({"c": ["b"] * 200, "pid": [7] * 200})
    one_each.write_parquet(src)
    real_largest, real_counts = PolarsEngine.largest_person_rows, PolarsEngine.category_counts
    counted = []

    def largest_then_swap(self, person):
        rows = real_largest(self, person)
        one_person.write_parquet(src)
        return rows

    def counts_then_restore(self, columns, per_person=None):
        counts = real_counts(self, columns, per_person=per_person)
        one_each.write_parquet(src)
        counted.append(counts["c"])
        return counts

    monkeypatch.setattr(PolarsEngine, "largest_person_rows", largest_then_swap)
    monkeypatch.setattr(PolarsEngine, "category_counts", counts_then_restore)
    columns = [{**COLUMNS[0], "epsilon": 2.0, "prior": "dp"}]
    with dpframe.Accountant(epsilon=10):
        rel = dpframe.pram.release(pl.scan_parquet(src), columns, unit="pid", max_rows=1)
        rel.write(out)
    (counts,) = counted
    assert counts.rows() == [("b", 1)]  # pid 7's first row of the swapped read, only
    assert pl.read_parquet(out).height == 200  # the restored file, randomized
