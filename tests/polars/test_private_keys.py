"""Groups not known in advance (issue 35): private_keys=dpframe.select_keys(...).

The selection is a charged first pass (epsilon and delta) planned and shown before
anything is spent; the statistics are then computed over the keys it selects (with
public margins: every margin key plus the extra keys it selects). The audit: a person
holding keys nobody else holds makes them appear with at most the plan's probability,
and their statistics never appear otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import Accountant, InvalidParameterError
from dpframe.errors import BudgetExceededError, InvalidDataError, MissingMarginsError
from dpframe.jobs.checks import check
from dpframe.polars.private_keys import KeysPlan

#: z of a one-sided binomial bound (P(Z > 4) ~ 3e-5): the audits' fixed seeds pass it
Z = 4.0


def people(unique: int = 0) -> pl.DataFrame:
    """Three keys of 400, 100 and 60 persons and ``unique`` persons each
    holding their own key (``"secret0"``, ...), one row per person."""
    codes = ["A"] * 400 + ["B"] * 100 + ["C"] * 60 + [f"secret{i}" for i in range(unique)]
    return pl.DataFrame({"code": codes, "x": np.linspace(0.0, 1.0, len(codes))})


def persons(extra: bool) -> pl.DataFrame:
    """Person level: 200 persons in A and B (2 rows each), and, when ``extra``, one
    more person holding two keys nobody else has."""
    pid = [i for i in range(200) for _ in range(2)]
    code = ["A", "B"] * 200
    if extra:
        pid, code = [*pid, 999, 999], [*code, "secret0", "secret1"]
    return pl.DataFrame({"pid": pid, "code": code, "x": [1.0] * len(pid)})


def release(df: pl.DataFrame, acct: Accountant, *, seed: int | None = 1, **kw: object) -> object:
    sel = kw.pop("selection", dpframe.select_keys(epsilon=1.0, delta=1e-6))
    return dpframe.group_by(df, "code", private_keys=sel, accountant=acct, seed=seed, **kw).agg(
        dpframe.agg.count(epsilon=0.5), dpframe.agg.sum("x", lower=0, upper=1, epsilon=0.5)
    )


def binomial_high(p: float, n: int) -> float:
    return p + Z * math.sqrt(p * (1 - p) / n)


# -- (1) the audit ------------------------------------------------------------------------


@pytest.mark.parametrize("neighbours", ["add_remove", "substitute"])
def test_audit_record_level(neighbours: str) -> None:
    """D and D + one person with a key nobody else has: the key appears at most with the
    plan's probability for one person (delta / sides), and never with D."""
    delta, n = 0.05, 300
    sel = dpframe.select_keys(epsilon=1.0, delta=delta)
    seen = 0
    for seed in range(n):
        for unique in (0, 1):
            acct = Accountant(epsilon=2.0, delta=delta, neighbours=neighbours)
            rel = release(people(unique), acct, seed=seed, selection=sel)
            out = rel.collect()
            shown = set(out["code"].to_list())
            assert shown <= {"A", "B", "C", "secret0"}
            assert "A" in shown  # 400 persons: above the threshold
            if unique == 0:
                assert "secret0" not in shown
            seen += unique and "secret0" in shown
    plan = rel._keys_plan.kernel
    sides = 2 if neighbours == "substitute" else 1
    assert plan.max_groups == sides
    p = plan.probability_released(1)
    assert p <= delta / sides
    assert seen / n <= binomial_high(p, n)
    # the audit measures the planned law, not an empty one
    assert seen / n >= p - Z * math.sqrt(p * (1 - p) / n)


def test_audit_person_level_two_keys() -> None:
    """A person in max_groups = 2 keys nobody else holds: each of their keys has one
    distinct person, and the release shows either with probability <= delta."""
    delta = 0.05
    sel = dpframe.select_keys(epsilon=1.0, delta=delta)
    kw = {"unit": "pid", "max_rows": 2, "max_groups": 2, "selection": sel}
    acct = Accountant(epsilon=2.0, delta=delta, neighbours="add_remove")
    rel = release(persons(True), acct, **kw)
    (step,) = rel.prepare()
    assert isinstance(step.plan, KeysPlan)
    assert step.plan.kernel.max_groups == 2
    assert sorted(step.exact.tolist()) == [1, 1, 200, 200]  # distinct persons per key
    p = step.plan.kernel.probability_released(1)
    either = 1 - (1 - p) ** 2
    assert either <= delta
    # the kernel path with these very counts, over fixed seeds
    n, seen = 4000, 0
    for seed in range(n):
        mask = step.plan.draw(step.exact, np.random.default_rng(seed))
        seen += bool(mask[np.asarray(step.exact) == 1].any())
    assert seen / n <= binomial_high(either, n)
    # end to end: a few releases, the secret keys' statistics only where selected
    for seed in range(60):
        for extra in (False, True):
            acct = Accountant(epsilon=2.0, delta=delta, neighbours="add_remove")
            out = release(persons(extra), acct, seed=seed, **kw).collect()
            assert set(out["code"].to_list()) <= {"A", "B", "secret0", "secret1"}
            if not extra:
                assert set(out["code"].to_list()) <= {"A", "B"}


# -- (2) charged before drawn, (3) a delta budget needed ------------------------------------


def test_charged_before_drawn_with_epsilon_and_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: KeysPlan, exact: object, rng: object) -> object:
        raise RuntimeError("draw failed")

    monkeypatch.setattr(KeysPlan, "draw", broken)
    acct = Accountant(epsilon=2.0, delta=1e-5)
    with pytest.raises(RuntimeError, match="draw failed"):
        release(people(), acct).collect()
    (entry,) = acct.ledger
    assert entry.mechanism == "key_selection:magic"
    assert (entry.epsilon, entry.delta) == (1.0, 1e-6)
    assert acct.spent.epsilon == 1.0 and acct.spent.delta == 1e-6


def test_ledger_records_counts_never_keys() -> None:
    acct = Accountant(epsilon=2.0, delta=1e-5)
    rel = release(people(1), acct)
    out = rel.collect()
    first, *stats = rel.ledger
    assert first.mechanism == "key_selection:magic" and first.delta == 1e-6
    assert first.details["threshold"] == rel._keys_plan.kernel.threshold
    assert all(e.details["keys_selected"] == out.height for e in stats)
    assert "secret0" not in repr([(e, e.details) for e in rel.ledger])


def test_refused_without_a_delta_budget() -> None:
    acct = Accountant(epsilon=5.0)
    with pytest.raises(BudgetExceededError, match=r"delta.*Accountant\(epsilon=\.\.\., delta"):
        release(people(), acct).collect()
    assert acct.spent.epsilon == 0 and not acct.ledger


def test_zcdp_budget_refuses_the_delta_charge() -> None:
    """Decided: a zCDP budget cannot pay for (epsilon, delta) charges; refused first."""
    acct = Accountant(rho=1.0, delta=1e-6)
    with pytest.raises(InvalidParameterError, match="open an \\(epsilon, delta\\) budget"):
        release(people(), acct).collect()
    assert acct.spent.rho == 0 and not acct.ledger


def test_without_margins_or_private_keys_names_both() -> None:
    with pytest.raises(MissingMarginsError, match=r"private_keys=dpframe\.select_keys"):
        dpframe.group_by(people(), "code")


def test_bad_selection_refused() -> None:
    with pytest.raises(InvalidParameterError, match="delta"):
        dpframe.select_keys(epsilon=1.0, delta=0.0)
    with pytest.raises(InvalidParameterError, match="method"):
        dpframe.select_keys(epsilon=1.0, delta=1e-6, method="gauss")
    with pytest.raises(InvalidParameterError, match="private_keys must be"):
        dpframe.group_by(people(), "code", private_keys={"epsilon": 1.0})
    with pytest.raises(InvalidParameterError, match="sizes"):
        dpframe.group_by(
            people(),
            "code",
            margins=pl.DataFrame({"code": ["A"], "n": [400]}),
            sizes="n",
            private_keys=dpframe.select_keys(epsilon=1.0, delta=1e-6),
        )


def test_a_null_key_is_refused_without_its_values() -> None:
    df = pl.DataFrame({"code": ["A"] * 50 + [None, "secretkey"], "x": [0.5] * 52})
    acct = Accountant(epsilon=2.0, delta=1e-5)
    with pytest.raises(InvalidDataError) as err:
        release(df, acct).collect()
    assert "secretkey" not in str(err.value) and acct.spent.epsilon == 0
    # dropped by the nulls policy: the key is then a candidate like any other
    out = release(df, acct, nulls="drop").collect()
    assert "secretkey" not in out["code"].to_list()


# -- (4) hybrid, (5) summarize, (6) keys above the threshold ----------------------------------


def test_hybrid_every_margin_key_and_only_selected_extras() -> None:
    margins = pl.DataFrame({"code": ["B", "Z"]})  # Z: absent from the data, released at 0
    for seed in range(8):
        acct = Accountant(epsilon=2.0, delta=1e-5)
        rel = release(people(3), acct, seed=seed, margins=margins)
        out = rel.collect()
        codes = out["code"].to_list()
        assert codes[:2] == ["B", "Z"]  # every margin key, first, in the margins' order
        assert "A" in codes  # 400 persons: selected
        assert set(codes[2:]) <= {"A", "C", "secret0", "secret1", "secret2"}
        assert check(rel).success  # keys: exactly the margins' and the selected ones
    doctored = pl.concat([out, out.head(1).with_columns(code=pl.lit("secret9"))])
    assert not check(rel, doctored).success
    (step,) = release(people(3), Accountant(epsilon=2, delta=1e-5), margins=margins).prepare()
    assert step.exact.size == 5  # candidates: A, C and the secrets; never a margin key


def test_summarize_shows_the_selection_before_anything_is_spent() -> None:
    acct = Accountant(epsilon=2.0, delta=1e-5)
    rel = release(people(), acct)
    plan = rel.summarize()
    row = plan.filter(pl.col("statistic") == "keys").row(0, named=True)
    kernel = rel._keys_plan.kernel
    assert (row["mechanism"], row["epsilon"], row["delta"]) == ("key_selection:magic", 1.0, 1e-6)
    assert f"threshold {kernel.threshold} persons" in row["note"]
    assert f"1: {kernel.probability_released(1):.3g}" in row["note"]
    assert plan["statistic"].to_list() == ["keys", "count", "x_sum"]
    assert rel.epsilon == 2.0
    assert acct.spent.epsilon == 0 and not acct.ledger


def test_keys_above_the_threshold_released_with_the_usual_statistics() -> None:
    acct = Accountant(epsilon=4.0, delta=1e-5)
    rel = release(people(), acct)
    threshold = rel._keys_plan.kernel.threshold
    assert threshold <= 60  # A, B and C each hold more persons: released surely
    out = rel.collect()
    assert out["code"].to_list() == ["A", "B", "C"]
    usual = dpframe.group_by(
        people(), "code", margins=pl.DataFrame({"code": ["A", "B", "C"]}), accountant=acct
    ).agg(dpframe.agg.count(epsilon=0.5), dpframe.agg.sum("x", lower=0, upper=1, epsilon=0.5))
    assert rel.exact_aggregates().equals(usual.exact_aggregates())
    assert [p.summary() for p in rel._plans_of()] == [p.summary() for p in usual._plans_of()]


def test_namespace_and_auto_bounds() -> None:
    acct = Accountant(epsilon=2.0, delta=1e-5)
    sel = dpframe.select_keys(epsilon=1.0, delta=1e-6)
    grouping = people().lazy().dp.group_by("code", private_keys=sel, accountant=acct)
    assert "private" in repr(grouping)
    with pytest.raises(InvalidParameterError, match="private_keys"):
        grouping.agg(dpframe.agg.sum("x", lower=0, upper="auto", epsilon=1.0))


@pytest.mark.parametrize("unit", [None, "pid"])
def test_the_selection_and_the_statistics_are_one_read(monkeypatch, unit) -> None:
    """The statistics' parts are taken in the selection's read (one evaluation of the
    input for both, a person's rows chosen once); a median's cells, counted per released
    key, need a second read."""
    from dpframe.engines.polars import PolarsEngine

    reads: list[str] = []
    for name in ("grouped_parts", "grouped_parts_and_histograms", "bounded_grouped_parts"):
        real = getattr(PolarsEngine, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            reads.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(PolarsEngine, name, counted)
    df = persons(extra=False)
    kw = {} if unit is None else {"unit": "pid", "max_rows": 2, "max_groups": 2}
    acct = Accountant(epsilon=5.0, delta=1e-5, **kw)
    out = release(df, acct).collect()
    assert sorted(out["code"].to_list()) == ["A", "B"]  # 200 persons each: selected
    assert reads == ["grouped_parts" if unit is None else "bounded_grouped_parts"]
    reads.clear()
    with_median = dpframe.group_by(
        df, "code", private_keys=dpframe.select_keys(epsilon=1.0, delta=1e-6), accountant=acct,
        seed=1,
    ).agg(dpframe.agg.median("x", lower=0, upper=2, epsilon=0.5))  # fmt: skip
    with_median.collect()
    assert len(reads) >= 2  # the keys, then the median's cells over the keys released
