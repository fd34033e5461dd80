"""`.dp.laplace` on a column of statistics: charged once, noised once, refused uncharged."""

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import (
    Accountant,
    BudgetExceededError,
    InvalidDataError,
    InvalidParameterError,
    NoAccountantError,
    ReleaseReuseError,
)


def stats_frame(n=3):
    return pl.DataFrame({"m": np.linspace(1.0, 2.0, n)})


def laplace(**kw):
    args = {"epsilon": 0.6, "sensitivity": 0.1, "composition": "parallel"} | kw
    return pl.col("m").dp.laplace(**args)


def test_second_release_over_budget_draws_no_noise(monkeypatch):
    acct = Accountant(epsilon=1.0)
    draws = []
    import dpframe.mechanisms.laplace as lap

    real = lap.sample_discrete_laplace
    monkeypatch.setattr(
        lap, "sample_discrete_laplace", lambda *a, **k: draws.append(1) or real(*a, **k)
    )
    with acct:
        stats_frame().with_columns(laplace())
        assert len(draws) == 1
        with pytest.raises(BudgetExceededError):
            stats_frame().with_columns(laplace())
    assert len(draws) == 1  # the refused release drew nothing
    assert acct.remaining.epsilon == pytest.approx(0.4, abs=0)
    assert len(acct.ledger) == 1


def test_lazy_recollect_returns_identical_values_with_one_entry():
    acct = Accountant(epsilon=1.0)
    with acct:
        lf = stats_frame(1000).lazy().with_columns(laplace())
    first = lf.collect()
    second = lf.collect()
    third = lf.collect(engine="streaming")
    assert first.equals(second) and first.equals(third)
    assert len(acct.ledger) == 1
    assert acct.ledger[0].columns == ("m",)


def test_streaming_over_many_morsels_is_one_call_one_entry():
    acct = Accountant(epsilon=1.0)
    n = 1_000_000  # ten morsels' worth of statistics
    with acct:
        lf = pl.LazyFrame({"m": np.zeros(n)}).with_columns(laplace())
    out = lf.collect(engine="streaming")
    assert out.height == n and len(acct.ledger) == 1
    # noise is independent across rows: sample variance near the theoretical one
    cal = acct.ledger[0]
    assert out["m"].std() == pytest.approx(np.sqrt(2) * cal.scale, rel=0.01)


def test_changed_input_refuses_fresh_noise():
    acct = Accountant(epsilon=5.0)
    with acct:
        expr = laplace()
    stats_frame(3).with_columns(expr)
    with pytest.raises(ReleaseReuseError, match="already been released"):
        stats_frame(4).with_columns(expr)
    assert len(acct.ledger) == 1


def test_per_group_evaluation_inside_agg_is_refused():
    acct = Accountant(epsilon=5.0)
    df = pl.DataFrame({"g": [1, 1, 2, 2], "x": [1.0, 2.0, 3.0, 4.0]})
    with acct, pytest.raises(ReleaseReuseError, match="group_by"):
        df.group_by("g").agg(
            pl.col("x").mean().dp.laplace(epsilon=1.0, sensitivity=1.0, composition="parallel")
        )
    assert len(acct.ledger) <= 1  # at most the first group's evaluation was charged


def test_no_accountant_refuses_to_run():
    assert dpframe.current_accountant() is None
    with pytest.raises(NoAccountantError, match="accountant"):
        stats_frame().with_columns(laplace())


def test_explicit_accountant_and_binding_at_build_time():
    acct = Accountant(epsilon=1.0)
    expr = laplace(accountant=acct)
    stats_frame().with_columns(expr)
    assert acct.spent.epsilon == 0.6
    other = Accountant(epsilon=1.0)
    with other:
        lf = stats_frame().lazy().with_columns(laplace())
    lf.collect()  # collected outside the block: still charged to `other`
    assert other.spent.epsilon == 0.6


def test_parallel_scale_doubles_under_substitute_unless_groups_public():
    sub, addrem = Accountant(epsilon=9.0), Accountant(epsilon=9.0, neighbours="add_remove")
    stats_frame().with_columns(laplace(epsilon=1.0, sensitivity=1.0, accountant=sub))
    stats_frame().with_columns(
        laplace(epsilon=1.0, sensitivity=1.0, accountant=sub, public_groups=True)
    )
    stats_frame().with_columns(laplace(epsilon=1.0, sensitivity=1.0, accountant=addrem))
    scales = [e.scale for e in sub.ledger] + [addrem.ledger[0].scale]
    assert scales[0] == pytest.approx(2.0, rel=2e-3)
    assert scales[1] == pytest.approx(1.0, rel=2e-3)
    assert scales[2] == pytest.approx(1.0, rel=2e-3)


def test_sequential_sensitivities_add_up():
    acct = Accountant(epsilon=1.0)
    stats_frame(4).with_columns(
        laplace(epsilon=1.0, sensitivity=0.5, composition="sequential", accountant=acct)
    )
    entry = acct.ledger[0]
    assert entry.composition == "sequential" and entry.epsilon == 1.0
    assert entry.scale == pytest.approx(4 * 0.5 / 1.0, rel=2e-3)


def test_seeded_release_is_reproducible():
    outs = []
    for _ in range(2):
        acct = Accountant(epsilon=1.0)
        outs.append(stats_frame().with_columns(laplace(accountant=acct, seed=3)))
    assert outs[0].equals(outs[1])


def test_noise_is_unbiased_with_the_calibrated_variance():
    """Mean and variance of 2e5 released values against the theory (5 SE)."""
    acct = Accountant(epsilon=1.0)
    n = 200_000
    out = pl.DataFrame({"m": np.full(n, 10.0)}).with_columns(
        laplace(epsilon=1.0, sensitivity=1.0, accountant=acct, public_groups=True)
    )
    b = acct.ledger[0].scale
    noise = out["m"].to_numpy() - 10.0
    var = 2 * b * b  # Laplace variance; the grid's differs by < 0.1%
    assert abs(noise.mean()) < 5 * np.sqrt(var / n)
    kurt_se = np.sqrt((24 * b**4 - var**2) / n)  # SE of the sample variance (4th moment 24b^4)
    assert abs(noise.var() - var) < 5 * kurt_se + 2e-3 * var


def test_summary_lists_pending_without_spending():
    acct = Accountant(epsilon=1.0)
    with acct:  # pending while the expressions exist
        exprs = [laplace(epsilon=0.2), laplace(epsilon=0.3, composition="sequential")]
    plan = dpframe.summarize(acct).sort("epsilon")
    assert plan.height == 2 and acct.spent.epsilon == 0
    assert plan["scale"][0] == pytest.approx(2 * 0.1 / 0.2, rel=2e-3)
    assert plan["error95"][0] == pytest.approx(np.log(20) * 2 * 0.1 / 0.2, rel=5e-3)
    assert plan["scale"][1] is None  # depends on the row count
    stats_frame().with_columns(exprs[0])
    assert dpframe.summarize(acct).height == 1  # collected: no longer pending


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"sensitivity": float("nan")}, "sensitivity"),
        ({"sensitivity": float("inf")}, "sensitivity"),
        ({"composition": "both"}, "composition"),
        ({"granularity": 0.3}, "granularity"),
        ({"public_groups": "yes"}, "public_groups"),
    ],
)
def test_bad_parameters_are_named(kw, name):
    with pytest.raises(InvalidParameterError, match=name):
        laplace(accountant=Accountant(epsilon=1.0), **kw)


def test_composition_has_no_default():
    with pytest.raises(TypeError, match="composition"):
        pl.col("m").dp.laplace(epsilon=1.0, sensitivity=1.0)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (pl.Series("m", ["a", "b"]), "numeric"),
        (pl.Series("m", [1.0, None]), "null"),
        (pl.Series("m", [1.0, float("nan")]), "NaN"),
        (pl.Series("m", [1.0, float("inf")]), "infinite"),
    ],
)
def test_bad_data_refused_before_charging(values, match):
    acct = Accountant(epsilon=1.0)
    with pytest.raises(InvalidDataError, match=match):
        pl.DataFrame([values]).with_columns(laplace(accountant=acct))
    assert acct.ledger == ()
