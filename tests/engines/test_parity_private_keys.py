"""Spark and polars give the same release with keys selected privately (issue 35): the
same seed, the same candidate counts (distinct persons after the one bounding rule), so
the same keys selected, charges and released values."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dpframe

pytestmark = pytest.mark.slow


def _visits() -> pl.DataFrame:
    g = ["a"] * 80 + ["b"] * 40 + ["rare"]
    return pl.DataFrame({"g": g, "pid": [i % 50 for i in range(len(g))]})


def _release(frame, acct, **unit):
    return dpframe.group_by(
        frame,
        "g",
        margins=pl.DataFrame({"g": ["z"]}),
        private_keys=dpframe.select_keys(epsilon=1.0, delta=0.05),
        accountant=acct,
        seed=7,
        **unit,
    ).agg(dpframe.agg.count(epsilon=0.5))


@pytest.mark.parametrize("unit", [{}, {"unit": "pid", "max_rows": 2, "max_groups": 2}])
def test_the_same_seeded_selection_on_both_engines(spark, unit):
    df = _visits()
    results = []
    for frame in (df.lazy(), spark.createDataFrame(df.to_arrow())):
        acct = dpframe.Accountant(epsilon=10, delta=0.1)
        rel = _release(frame, acct, **unit)
        (step,) = rel.prepare()
        counts = step.exact.tolist()
        out = rel.collect()
        charges = [(e.mechanism, e.epsilon, e.delta) for e in acct.ledger]
        results.append((counts, out, charges))
    (counts_a, a, charges_a), (counts_b, b, charges_b) = results
    assert counts_a == counts_b and charges_a == charges_b
    assert a["g"].to_list()[0] == "z"
    assert_frame_equal(a, b)
