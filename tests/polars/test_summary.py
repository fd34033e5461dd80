"""``summarize()``: the neighbour relation, the unit and the error under the other
relation, from the plans alone (issue 32)."""

from __future__ import annotations

import polars as pl
import pytest

import dpframe

PEOPLE = pl.DataFrame(
    {
        "pid": [1, 1, 2, 3, 3, 3],
        "region": ["N", "S", "S", "N", "N", "S"],
        "income": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "tenure": ["own", "rent", "own", "own", "rent", "rent"],
    }
)
REGIONS = pl.DataFrame({"region": ["N", "S"]})


def _grouped(neighbours: str, **kwargs) -> pl.DataFrame:
    acct = dpframe.Accountant(epsilon=5.0, neighbours=neighbours)
    release = dpframe.group_by(PEOPLE, "region", margins=REGIONS, accountant=acct, **kwargs).agg(
        dpframe.agg.count(epsilon=0.5),
        dpframe.agg.sum("income", lower=0, upper=10, epsilon=0.5),
        dpframe.agg.mean("income", lower=0, upper=10, epsilon=0.5),
    )
    out = release.summarize()
    assert acct.ledger == ()
    return out


@pytest.mark.parametrize("unit", [{}, {"unit": "pid", "max_rows": 2, "max_groups": 2}])
def test_the_summary_names_its_relation_and_the_error_under_the_other(unit):
    sub, add = _grouped("substitute", **unit), _grouped("add_remove", **unit)
    assert sub["neighbours"].unique().to_list() == ["substitute"]
    assert add["neighbours"].unique().to_list() == ["add_remove"]
    # each one's error under the other relation is the other's own plan, number for number
    assert sub["error95_other"].to_list() == add["error95"].to_list()
    assert add["error95_other"].to_list() == sub["error95"].to_list()
    # a Laplace count: substitution changes two groups, add/remove one -- twice the
    # sensitivity and the scale (the count MAE 4.72 against 2.35)
    count, other = sub.row(0, named=True), add.row(0, named=True)
    assert (count["sensitivity"], count["scale"]) == (2 * other["sensitivity"], 2 * other["scale"])
    assert count["error95"] > count["error95_other"]
    assert count["other"] == f"add_remove: error95 {count['error95_other']:.4g}"
    # a ratio's error depends on the data: the other relation's scale is shown instead
    mean = sub.row(2, named=True)
    assert mean["error95_other"] is None and mean["other"].startswith("add_remove: scale ")


def test_the_summary_shows_the_unit_and_its_bounds():
    sub = _grouped("substitute", unit="pid", max_rows=2, max_groups=3)
    assert set(sub["unit"]) == {'person "pid" (at most 2 rows in each of at most 3 groups)'}
    assert set(_grouped("substitute")["unit"]) == {"record (one row is one person)"}


def test_what_cannot_be_made_under_the_other_relation_says_why():
    acct = dpframe.Accountant(epsilon=5.0)
    with acct:
        pram = dpframe.pram.release(
            PEOPLE, [{"column": "tenure", "epsilon": 1.0, "categories": ["own", "rent"]}]
        ).summarize()
        sized = dpframe.group_by(
            PEOPLE, "region", margins=REGIONS.with_columns(n=pl.lit(3)), sizes="n"
        ).agg(dpframe.agg.mean("income", lower=0, upper=10, epsilon=0.5))
        props = dpframe.proportions(PEOPLE, "region", epsilon=0.5, n=6, categories=["N", "S"])
        expression = pl.col("income").dp.laplace(
            epsilon=0.5, sensitivity=1.0, composition="parallel"
        )
        pending = dpframe.summarize(acct)
    assert pram["other"].to_list() == ["add_remove: n/a (PRAM protects values, not presence)"]
    assert pram["error95_other"].to_list() == [None]
    assert sized.summarize()["other"].to_list() == [
        "add_remove: n/a (group sizes are public only under substitute)"
    ]
    assert props.summarize()["other"].unique().to_list() == [
        "add_remove: n/a (the dataset size is public only under substitute)"
    ]
    assert expression is not None
    assert pending["neighbours"].to_list() == ["substitute"]
    assert pending["other"].to_list() == [
        "add_remove: n/a (the sensitivity is given by the caller)"
    ]
    assert acct.ledger == ()


def test_a_release_the_other_relation_cannot_plan_still_summarizes():
    """The comparison never refuses the release itself: whatever keeps the other
    relation's plan from being made is said in ``other``."""
    from dpframe.errors import InvalidParameterError
    from dpframe.polars.release import other_relation

    def refuse(neighbours):
        raise InvalidParameterError("sensitivity=2e+300 is too large for the output grid")

    errors, said = other_relation("add_remove", refuse, 2)
    assert errors == [None, None]
    assert (
        said
        == ["substitute: n/a (not plannable: sensitivity=2e+300 is too large for the output grid)"]
        * 2
    )
