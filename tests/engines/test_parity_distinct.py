"""Spark and polars give the same distinct-persons release (issue 34): the same seed, the
same kept ``(person, group)`` pairs (the one bounding rule), so the same exact parts,
charges and released values; and the same refusal of a missing person id."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dpframe
from dpframe.errors import DPFrameError

pytestmark = pytest.mark.slow

MARGINS = pl.DataFrame({"g": ["a", "b", "c", "d"]})


def _visits() -> pl.DataFrame:
    n = 60
    return pl.DataFrame(
        {
            "g": [["a", "b", "c"][(i * 7) % 3 if i % 5 else 0] for i in range(n)],
            "pid": [i % 17 for i in range(n)],
        }
    )


def _release(frame, acct):
    return dpframe.group_by(
        frame, "g", margins=MARGINS, accountant=acct, seed=7, unit="pid", max_rows=2, max_groups=2
    ).agg(dpframe.agg.count(epsilon=0.5), dpframe.agg.count_distinct(epsilon=0.5))


def test_the_same_seeded_distinct_release_on_both_engines(spark):
    df = _visits()
    results = []
    for frame in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = dpframe.Accountant(epsilon=10)
        exact = _release(frame, acct).exact_aggregates()
        out = _release(frame, acct).collect()
        charges = [(e.mechanism, e.epsilon, e.scale) for e in acct.ledger]
        results.append((exact.sort("g"), out.sort("g"), charges))
    (exact_a, a, charges_a), (exact_b, b, charges_b) = results
    assert charges_a == charges_b and len(charges_a) == 2
    assert_frame_equal(exact_a, exact_b)
    assert exact_a["persons:persons"].to_list()[-1] == 0  # group d: nobody
    assert (exact_a["persons:persons"] < exact_a["count:n"]).any()
    assert_frame_equal(a, b)


def test_a_missing_person_id_is_refused_alike(spark):
    df = _visits().with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("pid")).alias("pid")
    )
    refusals = []
    for frame in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = dpframe.Accountant(epsilon=10)
        with pytest.raises(DPFrameError) as info:
            _release(frame, acct).collect()
        assert acct.ledger == ()
        refusals.append((type(info.value), str(info.value)))
    assert refusals[0] == refusals[1]
