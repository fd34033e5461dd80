"""dpframe.release_keys: keys not known in advance, selected privately, as a frame.

* an empirical audit on neighbouring data sets: one person holding keys nobody else has
  (record level; person level with max_groups = 2 of 3 such keys) -- each such key is
  released with frequency within a binomial bound of the plan's probability for a key of
  one person, which is at most its share of delta; no statistic of an unselected key
  appears in the grouped release that uses the selection as its margins;
* charged (epsilon and delta) before it draws; refused, spending nothing, without a delta
  budget, and on a null key; the summary states the selection before anything is spent.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.core.units import PrivacyUnit
from dpframe.errors import BudgetExceededError, InvalidDataError, InvalidParameterError

COMMON = {"A": 400, "B": 250, "C": 120}


def frame_with(extra: dict[str, list[int]] | None = None) -> pl.DataFrame:
    """Records of persons 0.. in the common keys (one row each), plus ``extra``: key ->
    the person ids holding it."""
    codes, pids = [], []
    pid = 0
    for code, n in COMMON.items():
        codes += [code] * n
        pids += list(range(pid, pid + n))
        pid += n
    for code, who in (extra or {}).items():
        codes += [code] * len(who)
        pids += who
    return pl.DataFrame({"code": codes, "pid": pids, "x": np.ones(len(codes))})


def upper(p: float, n: int) -> float:
    """A 4-standard-error upper bound on a binomial frequency."""
    return p + 4 * math.sqrt(p * (1 - p) / n)


def test_common_keys_are_released_and_a_unique_key_at_most_delta_record_level():
    runs, delta = 600, 0.1
    data = frame_with({"secret": [10_000]})  # one record nobody else shares
    seen = 0
    for seed in range(runs):
        with dpframe.Accountant(epsilon=1.0, delta=delta, neighbours="add_remove"):
            release = dpframe.release_keys(data, "code", epsilon=1.0, delta=delta, seed=seed)
            keys = release.collect()["code"].to_list()
        assert {"A", "B", "C"} <= set(keys)  # far above the threshold
        seen += "secret" in keys
    p1 = release.plan.kernel.probability_released(1)
    assert p1 <= delta  # a key of one person: at most delta
    assert seen / runs <= upper(p1, runs)
    assert seen > 0  # delta = 0.1: the audit can see it happen


def test_unique_keys_of_one_person_at_most_their_share_of_delta_person_level():
    # one person holds 3 keys nobody else has; bounded to max_groups = 2, at most 2 of
    # them can appear, each with the probability of a key of one person at delta / 2
    runs, delta = 400, 0.2
    data = frame_with({"s1": [10_000], "s2": [10_000], "s3": [10_000]})
    unit = PrivacyUnit("pid", max_rows=1, max_groups=2)
    counts = {"s1": 0, "s2": 0, "s3": 0}
    for seed in range(runs):
        with dpframe.Accountant(epsilon=1.0, delta=delta, neighbours="add_remove"):
            release = dpframe.release_keys(
                data, "code", epsilon=1.0, delta=delta, unit=unit, seed=seed
            )
            keys = set(release.collect()["code"].to_list())
        assert {"A", "B", "C"} <= keys
        assert len(keys & set(counts)) <= 2  # never more than max_groups of one person
        for k in counts:
            counts[k] += k in keys
    selection = release.plan.kernel
    assert selection.max_groups == 2
    p1 = selection.probability_released(1)
    assert p1 <= delta / 2
    for k, c in counts.items():
        assert c / runs <= upper(p1, runs), (k, c)
    assert sum(counts.values()) > 0


def test_an_unselected_key_leaves_no_statistic():
    data = frame_with({"secret": [10_000]})
    with dpframe.Accountant(epsilon=2.0, delta=1e-6, neighbours="add_remove"):
        keys = dpframe.release_keys(data, "code", epsilon=1.0, delta=1e-6, seed=1).collect()
        table = (
            dpframe.group_by(data, "code", margins=keys, unknown_keys="drop", seed=2)
            .agg(dpframe.agg.count(epsilon=1.0))
            .collect()
        )
    assert keys["code"].to_list() == ["A", "B", "C"]
    assert table["code"].to_list() == ["A", "B", "C"]


def test_charged_epsilon_and_delta_before_it_draws(monkeypatch):
    from dpframe.polars.private_keys import KeysPlan as KeySelection

    data = frame_with()
    with dpframe.Accountant(epsilon=1.0, delta=1e-5, neighbours="add_remove") as acct:
        real = KeySelection.draw
        spent = []

        def draw(self, exact, rng):
            spent.append((acct.spent.epsilon, acct.spent.delta))
            raise RuntimeError("the draw fails after the charge")

        monkeypatch.setattr(KeySelection, "draw", draw)
        release = dpframe.release_keys(data, "code", epsilon=0.5, delta=1e-6)
        with pytest.raises(RuntimeError):
            release.collect()
        assert spent == [(0.5, 1e-6)]
        (entry,) = acct.ledger
        assert entry.mechanism == "key_selection:magic"
        assert (entry.epsilon, entry.delta) == (0.5, 1e-6)
        assert entry.details["max_groups"] == 1
        monkeypatch.setattr(KeySelection, "draw", real)


def test_refused_without_a_delta_budget_spending_nothing():
    data = frame_with()
    with dpframe.Accountant(epsilon=1.0) as acct:
        with pytest.raises(BudgetExceededError, match="delta"):
            dpframe.release_keys(data, "code", epsilon=0.5, delta=1e-6).collect()
        assert acct.spent.epsilon == 0 and not acct.ledger


def test_a_null_key_is_refused_before_any_charge():
    data = frame_with().with_columns(
        pl.when(pl.col("pid") == 3).then(None).otherwise(pl.col("code")).alias("code")
    )
    with dpframe.Accountant(epsilon=1.0, delta=1e-5) as acct:
        with pytest.raises(InvalidDataError, match="keys: column 'code'"):
            dpframe.release_keys(data, "code", epsilon=0.5, delta=1e-6).collect()
        assert not acct.ledger


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0, "delta": 1e-6}, "epsilon"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"epsilon": 1.0, "delta": 1e-6, "method": "gumbel"}, "method"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        dpframe.release_keys(frame_with(), "code", **kwargs)


def test_a_missing_key_column_is_named():
    with pytest.raises(InvalidParameterError, match="keys: column"):
        dpframe.release_keys(frame_with(), "nope", epsilon=1.0, delta=1e-6)


def test_the_summary_states_the_selection_before_anything_is_spent():
    with dpframe.Accountant(epsilon=1.0, delta=1e-5) as acct:  # substitute: 2 keys
        release = dpframe.release_keys(frame_with(), "code", epsilon=1.0, delta=1e-6)
        row = release.summarize().row(0, named=True)
        assert acct.spent.epsilon == 0
    assert row["mechanism"] == "key_selection:magic"
    assert row["epsilon"] == 1.0 and row["delta"] == 1e-6
    assert row["sensitivity"] == 2.0
    assert release.plan.kernel.max_groups == 2


@pytest.mark.slow
@pytest.mark.parametrize("person", [False, True])
def test_spark_selects_the_same_keys(spark, person):
    """Both engines count the same distinct persons per key (the person-level bounding
    rule is one): the same seed selects the same keys."""
    data = frame_with({"s1": [10_000], "s2": [10_000, 10_001], "s3": [10_000]})
    unit = PrivacyUnit("pid", max_rows=1, max_groups=2) if person else None
    selected = []
    for source in (data.lazy(), spark.createDataFrame(data.to_arrow())):
        with dpframe.Accountant(epsilon=1.0, delta=0.3, neighbours="add_remove") as acct:
            keys = dpframe.release_keys(
                source, "code", epsilon=1.0, delta=0.3, unit=unit, seed=7
            ).collect()
            selected.append((keys["code"].to_list(), [e.details for e in acct.ledger]))
    assert selected[0] == selected[1]
    assert {"A", "B", "C"} <= set(selected[0][0])
