"""Attacks on the private-keys release reading its input once (9cdc17a): the statistics'
exact parts are taken in the selection's read and stashed (``_first_read``) for the
statistics' pass.

What must hold: no key that is not selected (nor its values) reaches the output, the
exact aggregates, the accuracy table, the summary, the repr or the ledger; the stash is
taken once and never outlives a collect; the statistics are computed from the very read
(and, at person level, the very bounding) the selection counted; every refusal still
comes before anything is charged; the charges and their scales are those of the same
statistics over public margins.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidParameterError
from dpframe.errors import BudgetExceededError, InvalidDataError
from dpframe.polars.grouped import GroupedRelease

A = dpframe.agg
SECRET = "zz_secret_key"

pytestmark = pytest.mark.filterwarnings("ignore::dpframe.errors.UnsafeSeedWarning")


def _records(secrets: int = 3) -> pl.DataFrame:
    """Keys of 300, 200 and 90 records (one per person) and ``secrets`` keys of one
    record each, named ``zz_secret_key0``, ...; x in [-1, 3], y in [0, 5]."""
    rng = np.random.default_rng(0)
    codes = ["A"] * 300 + ["B"] * 200 + ["C"] * 90 + [f"{SECRET}{i}" for i in range(secrets)]
    n = len(codes)
    return pl.DataFrame(
        {
            "code": codes,
            "x": rng.uniform(-1.0, 3.0, n),
            "y": rng.uniform(0.0, 5.0, n),
            "b": rng.integers(0, 2, n).astype(bool),
            "pid": np.arange(n),
        }
    )


def _stats() -> list:
    return [
        A.count(epsilon=0.5),
        A.sum("x", lower=0, upper=2, epsilon=0.5),
        A.mean("y", lower=0, upper=4, epsilon=0.5),
        A.var("x", lower=0, upper=2, epsilon=0.5),
        A.cov("x", "y", lower_x=0, upper_x=2, lower_y=0, upper_y=4, epsilon=0.5),
        A.proportion("b", epsilon=0.5),
    ]


def _release(df, acct, *, stats=None, seed=1, **kw) -> GroupedRelease:
    sel = dpframe.select_keys(epsilon=1.0, delta=1e-6)
    grouping = dpframe.group_by(df, "code", private_keys=sel, accountant=acct, seed=seed, **kw)
    return grouping.agg(*(stats or _stats()))


def _spy_exact_inputs(monkeypatch) -> list[dict]:
    """The statistics' exact inputs each time a grouped release computes them."""
    seen: list[dict] = []
    real = GroupedRelease._exact_inputs

    def spy(self):
        out = real(self)
        seen.append({k: np.array(v, copy=True) for k, v in out[0].items()})
        return out

    monkeypatch.setattr(GroupedRelease, "_exact_inputs", spy)
    return seen


def _usual(df, keys: pl.DataFrame, acct, *, stats=None, **kw) -> GroupedRelease:
    """The same statistics over public margins ``keys`` (records of other keys dropped)."""
    return dpframe.group_by(
        df, "code", margins=keys, unknown_keys="drop", accountant=acct, **kw
    ).agg(*(stats or _stats()))


# -- (1) the keys not selected -----------------------------------------------------------


def test_keys_not_selected_reach_nothing_public_or_exact() -> None:
    df = _records(secrets=3)
    acct = Accountant(epsilon=50.0, delta=1e-3)
    rel = _release(df, acct)
    (step,) = rel.prepare()
    assert step.exact.size == 6  # A, B, C and three secrets are candidates
    assert rel._first_read is not None  # the stash: every present key, until the draw
    assert set(rel._first_read[0]["code"].to_list()) >= {f"{SECRET}{i}" for i in range(3)}
    out = rel.collect()
    assert rel._first_read is None  # taken by the statistics' pass, never kept after
    assert rel._candidates is None
    assert out["code"].to_list() == ["A", "B", "C"]  # a one-record key: about delta
    exact = rel.exact_aggregates()
    assert exact["code"].to_list() == ["A", "B", "C"]
    assert rel.accuracy()["code"].to_list() == ["A", "B", "C"]
    public = [
        repr(rel),
        repr(rel.summarize().to_dicts()),
        repr(rel.grouping),
        rel._repr_html_(),
        repr([(e, e.details) for e in rel.ledger]),
        repr(rel.facts()),
        repr(rel.to_spec()),
        repr(rel.drawn_rows()),
    ]
    assert not any(SECRET in text for text in public)
    assert rel._first_read is None  # nothing above read the data into the stash again


def test_the_statistics_are_those_of_the_selected_keys_over_public_margins(
    monkeypatch,
) -> None:
    """The stash's parts (every present key) joined onto the keys selected: exactly the
    usual release's exact inputs over those keys as public margins."""
    seen = _spy_exact_inputs(monkeypatch)
    df = _records(secrets=2)
    acct = Accountant(epsilon=100.0, delta=1e-3)
    rel = _release(df, acct)
    out = rel.collect()
    keys = out.select("code")
    (stashed,) = seen
    usual = _usual(df, keys, acct)
    fresh = usual._exact_inputs()[0]
    assert stashed.keys() == fresh.keys()
    for name in fresh:
        np.testing.assert_array_equal(stashed[name], fresh[name], err_msg=name)
    assert not any(k.startswith("__keys__") for k in stashed)  # the selection's counts
    # and the read after the release (a new read, the stash gone) agrees too
    assert rel.exact_aggregates().equals(usual.exact_aggregates())


def test_hybrid_margins_the_margin_keys_first_absent_ones_from_zero(monkeypatch) -> None:
    seen = _spy_exact_inputs(monkeypatch)
    df = _records(secrets=2)
    acct = Accountant(epsilon=100.0, delta=1e-3)
    margins = pl.DataFrame({"code": ["B", "Z"]})  # Z: nobody
    rel = _release(df, acct, margins=margins)
    out = rel.collect()
    assert out["code"].to_list()[:2] == ["B", "Z"]
    assert set(out["code"].to_list()[2:]) == {"A", "C"}
    usual = _usual(df, out.select("code"), acct)
    fresh = usual._exact_inputs()[0]
    for name in fresh:
        np.testing.assert_array_equal(seen[0][name], fresh[name], err_msg=name)
    assert seen[0]["count:n"][1] == 0 and seen[0]["x_sum:sum"][1] == 0.0  # Z: from 0
    assert np.isnan(seen[0]["x_var:n"][1]) or seen[0]["x_var:n"][1] == 0.0


# -- (2) the stash: taken once, from this read -------------------------------------------


def test_exact_aggregates_before_the_draw_refuses_and_leaves_the_stash() -> None:
    acct = Accountant(epsilon=50.0, delta=1e-3)
    rel = _release(_records(), acct)
    rel.prepare()
    stash = rel._first_read
    with pytest.raises(InvalidParameterError, match="not drawn yet"):
        rel.exact_aggregates()
    assert rel._first_read is stash  # not taken by a refused call
    rel.summarize()
    repr(rel)
    assert rel._first_read is stash and acct.spent.epsilon == 0
    assert rel.prepare() is rel.prepare()  # the same steps, no second read
    assert rel._first_read is stash


def test_collect_twice_charges_once_and_reads_no_stash_again() -> None:
    acct = Accountant(epsilon=50.0, delta=1e-3)
    rel = _release(_records(), acct)
    first = rel.collect()
    spent = acct.spent
    assert rel.collect() is first
    assert acct.spent == spent
    assert acct.ledger[0].mechanism == "key_selection:magic"
    assert len(acct.ledger) == 1 + len(_stats())
    assert rel._first_read is None


def test_the_statistics_come_from_the_selections_read_not_a_later_one(
    tmp_path, monkeypatch
) -> None:
    """A file rewritten between prepare() (the selection's read) and the draw: the
    statistics are the first version's (the keys were selected on it), never a mix."""
    seen = _spy_exact_inputs(monkeypatch)
    path = tmp_path / "records.parquet"
    old = _records(secrets=0)
    old.write_parquet(path)
    acct = Accountant(epsilon=100.0, delta=1e-3)
    rel = _release(pl.scan_parquet(path), acct)
    rel.prepare()
    new = old.with_columns(pl.col("x") + 100.0, pl.lit(True).alias("b"))
    new.write_parquet(path)
    out = rel.collect()
    usual_old = _usual(old, out.select("code"), Accountant(epsilon=100.0))._exact_inputs()[0]
    for name, values in usual_old.items():
        np.testing.assert_array_equal(seen[0][name], values, err_msg=name)


def test_a_refused_charge_of_the_selection_keeps_the_read_whole_for_a_retry(
    monkeypatch,
) -> None:
    """The selection refused by the budget (nothing charged): the steps and the stash
    stay those of one read; drawn later against another budget (as a job does), the
    statistics are that read's, the selection charged once."""
    seen = _spy_exact_inputs(monkeypatch)
    df = _records(secrets=2)
    small = Accountant(epsilon=0.5, delta=1e-5)  # the selection alone costs 1.0
    rel = _release(df, small)
    for _ in range(2):
        with pytest.raises(BudgetExceededError):
            rel.collect()
        assert small.spent.epsilon == 0 and not small.ledger
        assert rel._first_read is not None and rel._selected is None
    steps = rel.prepare()
    big = Accountant(epsilon=100.0, delta=1e-3)
    run = rel.draw(steps, big, note="retry")
    out = rel.finish(run.outputs, run.entries)
    assert rel._first_read is None
    assert [e.mechanism for e in big.ledger].count("key_selection:magic") == 1
    usual = _usual(df, out.select("code"), big)._exact_inputs()[0]
    for name, values in usual.items():
        np.testing.assert_array_equal(seen[0][name], values, err_msg=name)


def test_statistics_refused_by_the_budget_after_the_selection_do_not_charge_it_again() -> None:
    acct = Accountant(epsilon=1.2, delta=1e-5)  # the selection (1.0) fits, not the rest
    rel = _release(_records(), acct, stats=[A.count(epsilon=0.5), A.count(epsilon=0.5, name="n2")])
    for _ in range(2):
        with pytest.raises(BudgetExceededError):
            rel.collect()
        assert acct.spent.epsilon == 1.0 and len(acct.ledger) == 1
        assert rel._first_read is None  # taken by the statistics' pass, not kept


def test_a_median_reads_again_and_stashes_nothing(monkeypatch) -> None:
    seen = _spy_exact_inputs(monkeypatch)
    df = _records(secrets=1)
    acct = Accountant(epsilon=50.0, delta=1e-3)
    stats = [A.median("x", lower=0, upper=2, epsilon=0.5), A.count(epsilon=0.5)]
    rel = _release(df, acct, stats=stats)
    rel.prepare()
    assert rel._first_read is None
    out = rel.collect()
    usual = _usual(df, out.select("code"), acct, stats=stats)._exact_inputs()[0]
    for name, values in usual.items():
        np.testing.assert_array_equal(seen[0][name], values, err_msg=name)


# -- (3) refusals, before anything is charged ------------------------------------------


def _with(df: pl.DataFrame, column: str, row: int, value) -> pl.DataFrame:
    at = pl.int_range(pl.len()) == row
    return df.with_columns(pl.when(at).then(value).otherwise(pl.col(column)).alias(column))


@pytest.mark.parametrize(
    ("column", "value", "nulls"),
    [
        ("x", None, "refuse"),
        ("x", float("nan"), "refuse"),
        ("x", float("inf"), "refuse"),
        ("x", float("inf"), "drop"),
        ("x", float("-inf"), {"x": 0.0}),
        ("y", None, "refuse"),  # a column of one statistic only
        ("code", None, "refuse"),
    ],
)
def test_a_bad_value_in_a_secret_key_refused_before_any_charge(column, value, nulls) -> None:
    df = _records(secrets=3)
    bad = _with(df, column, df.height - 1, pl.lit(value, dtype=df.schema[column]))
    acct = Accountant(epsilon=50.0, delta=1e-3)
    rel = _release(bad, acct, nulls=nulls)
    with pytest.raises(InvalidDataError) as err:
        rel.collect()
    assert SECRET not in str(err.value)
    assert acct.spent.epsilon == 0 and acct.spent.delta == 0 and not acct.ledger
    assert rel._first_read is None  # the refused read is never stashed


@pytest.mark.parametrize("nulls", ["drop", {"x": 1.5, "code": "A"}])
def test_the_nulls_policy_applies_to_the_stashed_parts(monkeypatch, nulls) -> None:
    seen = _spy_exact_inputs(monkeypatch)
    df = _records(secrets=1)
    df = _with(df, "x", 3, pl.lit(None, dtype=pl.Float64))
    df = _with(df, "x", 400, pl.lit(float("nan")))
    if isinstance(nulls, dict):
        df = _with(df, "code", 10, pl.lit(None, dtype=pl.String))
    acct = Accountant(epsilon=100.0, delta=1e-3)
    out = _release(df, acct, nulls=nulls).collect()
    usual = _usual(df, out.select("code"), acct, nulls=nulls)._exact_inputs()[0]
    for name, values in usual.items():
        np.testing.assert_array_equal(seen[0][name], values, err_msg=name)
    if nulls == "drop":
        assert seen[0]["count:n"][0] == 299  # A lost the record with a null x
    else:
        assert seen[0]["count:n"][0] == 300  # the null key filled into A, x filled


def test_schema_refusals_before_any_read_or_charge() -> None:
    acct = Accountant(epsilon=50.0, delta=1e-3)
    df = _records()
    with pytest.raises(InvalidParameterError, match="not in the data"):
        _release(df, acct, stats=[A.sum("nope", lower=0, upper=1, epsilon=0.5)]).collect()
    with pytest.raises(InvalidDataError, match="numeric"):
        _release(df, acct, stats=[A.sum("code", lower=0, upper=1, epsilon=0.5)]).collect()
    with pytest.raises(InvalidParameterError, match="dtype"):  # a margin key of another type
        _release(df, acct, margins=pl.DataFrame({"code": [1]})).collect()
    assert acct.spent.epsilon == 0 and not acct.ledger


def test_a_statistic_named_like_the_selections_part() -> None:
    """``count_distinct(name="__keys__")``'s part would be named like the selection's
    persons (``"__keys__:persons"``), one read asking both: a statistic's name may not
    start with ``__`` (dpframe's own names), refused before anything is read or spent."""
    with pytest.raises(InvalidParameterError, match="'__keys__' starts with '__'"):
        A.count_distinct(name="__keys__", epsilon=0.5)


# -- (4) person level: one bounding for both ---------------------------------------------


def _two_keys_each(persons: int = 300) -> pl.DataFrame:
    """Each person holds one record in A and one in B (x: their id), so that at
    max_groups=1 the bounding keeps one key per person at random."""
    pid = np.repeat(np.arange(persons), 2)
    code = ["A", "B"] * persons
    return pl.DataFrame({"pid": pid, "code": code, "x": pid.astype(np.float64)})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_person_level_the_statistics_see_the_persons_the_selection_counted(
    monkeypatch, seed
) -> None:
    seen = _spy_exact_inputs(monkeypatch)
    df = _two_keys_each()
    acct = Accountant(epsilon=100.0, delta=1e-3, unit="pid", max_rows=1, max_groups=1)
    stats = [
        A.count(epsilon=0.5),
        A.count_distinct(epsilon=0.5),
        A.sum("x", lower=0, upper=300, epsilon=0.5),
    ]
    rel = _release(df, acct, stats=stats, seed=seed)
    (step,) = rel.prepare()
    chosen = step.exact.tolist()
    assert sum(chosen) == 300 and 0 < chosen[0] < 300  # each person in one key only
    out = rel.collect()
    assert out["code"].to_list() == ["A", "B"]
    (exact,) = seen
    assert exact["count:n"].tolist() == chosen  # the very rows the selection counted
    assert exact["persons:persons"].tolist() == chosen
    # each person's x counted once, in one of the keys: the bounding shared, not redrawn
    assert exact["x_sum:sum"].sum() == pytest.approx(float(np.arange(300).sum()))


def test_person_level_charges_and_scales_as_over_public_margins() -> None:
    df = _two_keys_each()
    kw = {"unit": "pid", "max_rows": 1, "max_groups": 1}
    stats = [
        A.count(epsilon=0.5),
        A.sum("x", lower=0, upper=300, epsilon=0.5),
        A.mean("x", lower=0, upper=300, epsilon=0.5),
    ]
    acct = Accountant(epsilon=100.0, delta=1e-3, **kw)
    rel = _release(df, acct, stats=stats)
    out = rel.collect()
    selection, *entries = rel.ledger
    assert selection.mechanism == "key_selection:magic"
    usual_acct = Accountant(epsilon=100.0, **kw)
    usual = _usual(df, out.select("code"), usual_acct, stats=stats, seed=1)
    usual.collect()

    def charged(ledger):
        return [(e.mechanism, e.columns, e.epsilon, e.delta, e.scale) for e in ledger]

    assert charged(entries) == charged(usual.ledger)
    assert all(e.scale is not None and e.scale > 0 for e in entries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [p.summary() for p in rel._plans_of()] == [p.summary() for p in usual._plans_of()]
