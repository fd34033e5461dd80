"""The polars side of PRAM: `.dp.pram`, its runners, priors, and estimation from frames."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe import pram
from dpframe.engines.polars import Codebook
from dpframe.errors import (
    BudgetExceededError,
    InvalidDataError,
    InvalidParameterError,
    NoAccountantError,
    ReleaseNotArmedError,
    UnsafeSeedWarning,
)

CATS = ["north", "south", "east", "west", "islands"]
CATS_I = [0, 1, 2, 3, 4]


def _frame(n: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    s = rng.choice(CATS, size=n, p=[0.4, 0.3, 0.2, 0.09, 0.01])
    return pl.DataFrame({"s": s, "i": rng.integers(0, 5, size=n)}).with_columns(
        pl.col("s").cast(pl.Enum(CATS)).alias("e"),
        pl.col("s").cast(pl.Categorical).alias("cat"),
    )


def _entries(acct: dpframe.Accountant) -> list[tuple[str, tuple[str, ...], float]]:
    return [(e.mechanism, e.columns, e.epsilon) for e in acct.ledger]


# -- charging -------------------------------------------------------------------------


def test_plain_collect_refuses_and_charges_nothing():
    df = _frame(100)
    with dpframe.Accountant(epsilon=1.0) as acct:
        q = df.lazy().with_columns(pl.col("e").dp.pram(0.5))
        with pytest.raises(ReleaseNotArmedError, match=r"dpframe\.collect"):
            q.collect()
        with pytest.raises(ReleaseNotArmedError):
            df.with_columns(pl.col("e").dp.pram(0.5))  # eager: runs at once, unarmed
    assert acct.ledger == ()


def test_charged_once_per_run_however_polars_splits_the_work():
    df = _frame(1_000_000)  # ten streaming morsels or more
    with dpframe.Accountant(epsilon=2.0) as acct:
        q = df.lazy().select(pl.col("e").dp.pram(0.5))
        out = dpframe.collect(q, engine="streaming")
        assert _entries(acct) == [("pram", ("e",), 0.5)]
        out2 = q.dpf.collect()  # running it again is a new release, charged again
        assert [e[2] for e in _entries(acct)] == [0.5, 0.5]
    assert out.height == out2.height == df.height
    assert not out["e"].equals(out2["e"])


def test_several_columns_compose_sequentially():
    df = _frame(1000)
    with dpframe.Accountant(epsilon=2.0) as acct:
        dpframe.collect(
            df.lazy().select(
                pl.col("e").dp.pram(0.5),
                pl.col("i").dp.pram(0.7, categories=[0, 1, 2, 3, 4]),
            )
        )
    assert sorted(e[2] for e in _entries(acct)) == [0.5, 0.7]
    assert acct.spent.epsilon == pytest.approx(1.2)


def test_budget_exceeded_before_anything_is_drawn():
    df = _frame(1000)
    with dpframe.Accountant(epsilon=1.0) as acct:
        q = df.lazy().select(pl.col("e").dp.pram(1.5))
        with pytest.raises(BudgetExceededError):
            dpframe.collect(q)
    assert acct.ledger == ()


def test_no_accountant_and_add_remove():
    df = _frame(10)
    q = df.lazy().select(pl.col("e").dp.pram(0.5))
    with pytest.raises(NoAccountantError, match="accountant"):
        dpframe.collect(q)
    acct = dpframe.Accountant(epsilon=1.0, neighbours="add_remove")
    with acct, pytest.raises(InvalidParameterError, match="presence"):
        pl.col("e").dp.pram(0.5)
    acct = dpframe.Accountant(epsilon=1.0, neighbours="add_remove")
    with pytest.raises(InvalidParameterError, match="add/remove"):
        dpframe.pram.dp_prior(df, "e", 0.1, accountant=acct)


def test_runners_cannot_nest():
    from dpframe.polars.runner import Run, _running

    with _running(Run()), pytest.raises(InvalidParameterError, match="nested"):
        dpframe.collect(pl.LazyFrame({"a": [1]}))
    lf = pl.LazyFrame({"a": [1]})
    assert dpframe.collect(lf, public=["a"]).height == 1  # the lock was released


# -- dtypes and input checks --------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "kwargs"),
    [
        ("s", {"categories": CATS}),
        ("e", {}),
        ("cat", {"categories": CATS}),
        ("i", {"categories": [0, 1, 2, 3, 4]}),
    ],
)
def test_dtypes_are_kept_and_values_stay_in_the_domain(column, kwargs):
    df = _frame(5000)
    with dpframe.Accountant(epsilon=1.0):
        out = df.dpf.select(pl.col(column).dp.pram(1.0, **kwargs))
    assert out.schema[column] == df.schema[column]
    domain = {str(c) for c in kwargs.get("categories", CATS)}
    assert set(out[column].cast(pl.String).unique()) <= domain


def test_integer_categories_need_not_be_contiguous():
    df = pl.DataFrame({"code": [10, 20, 30, 20] * 250})
    with dpframe.Accountant(epsilon=3.0):
        out = df.dpf.select(pl.col("code").dp.pram(3.0, categories=[30, 10, 20]))
    assert set(out["code"].unique()) <= {10, 20, 30}
    acct = dpframe.Accountant(epsilon=1.0)
    with acct, pytest.raises(InvalidDataError, match=r"outside the declared categories.*\[40\]"):
        pl.DataFrame({"code": [10, 40]}).dpf.select(
            pl.col("code").dp.pram(1.0, categories=[10, 20])
        )


def test_nulls_unknown_values_and_missing_categories_raise_before_charging():
    with dpframe.Accountant(epsilon=5.0) as acct:
        with pytest.raises(InvalidDataError, match="null"):
            pl.DataFrame({"s": ["north", None]}).dpf.select(
                pl.col("s").dp.pram(1.0, categories=CATS)
            )
        with pytest.raises(InvalidDataError, match=r"outside the declared categories.*'mars'"):
            pl.DataFrame({"s": ["north", "mars"]}).dpf.select(
                pl.col("s").dp.pram(1.0, categories=CATS)
            )
        with pytest.raises(InvalidParameterError, match=r"categories=.*never takes them"):
            pl.DataFrame({"s": ["north"]}).dpf.select(pl.col("s").dp.pram(1.0))
        with pytest.raises(InvalidParameterError, match="Enum with categories"):
            _frame(10).dpf.select(pl.col("e").dp.pram(1.0, categories=["north", "south"]))
        with pytest.raises(InvalidDataError, match="dtype"):
            pl.DataFrame({"x": [1.5]}).dpf.select(pl.col("x").dp.pram(1.0, categories=[1, 2]))
    assert acct.ledger == ()


@pytest.mark.parametrize("dtype", [pl.Int8, pl.Int16, pl.Int64, pl.UInt8, pl.UInt64])
def test_integer_codes_of_categories_zero_to_s_are_range_checked_in_any_dtype(dtype):
    # categories 0..S-1 are their own codes: one range check, values read as unsigned
    book = Codebook(tuple(range(5)))
    good = pl.Series("c", [0, 4, 2, 3], dtype=dtype)
    codes = book.encode(good, "c")
    assert codes.dtype == np.int64 and codes.tolist() == [0, 4, 2, 3]
    back = book.decode(codes, good)
    assert back.dtype == dtype and back.name == "c" and back.equals(good)
    info = np.iinfo(np.dtype(str(dtype).lower()))
    for bad in {5, info.max} | ({-1, info.min} if info.min < 0 else set()):
        s = pl.Series("c", [0, bad, 1], dtype=dtype)
        with pytest.raises(InvalidDataError, match=rf"'c' has values outside .*\[{bad}\]"):
            book.encode(s, "c")
    with pytest.raises(InvalidDataError, match="null"):
        book.encode(pl.Series("c", [0, None], dtype=dtype), "c")


@pytest.mark.parametrize(
    ("values", "dtype", "cats"),
    [
        ([30, 10, 20, 10], pl.Int32, (20, 30, 10)),
        ([1, 2, 3], pl.Int64, (1, 2, 3)),  # a range, not from 0: a lookup
        (["b", "c", "a"], pl.String, ("a", "b", "c")),
        (["b", "c", "a"], pl.Categorical, ("a", "b", "c")),
        (["b", "c", "a"], pl.Enum(["a", "b", "c"]), ("a", "b", "c")),
        (["b", "c", "a"], pl.Enum(["c", "a", "b"]), ("a", "b", "c")),  # the Enum's own order
    ],
)
def test_a_codebook_encodes_in_the_categories_order_and_decodes_back(values, dtype, cats):
    book = Codebook(cats)
    s = pl.Series("v", values, dtype=dtype)
    codes = book.encode(s, "v")
    assert codes.dtype == np.int64
    assert codes.tolist() == [cats.index(v) for v in values]
    for _ in range(2):  # the second decode reuses the lookup built by the first
        back = book.decode(codes[::-1], s)
        assert back.dtype == dtype and back.name == "v"
        assert back.to_list() == values[::-1]
    unknown = pl.Series("v", [*values, 99 if isinstance(values[0], int) else "zz"])
    with pytest.raises(InvalidDataError, match="outside the declared categories"):
        book.encode(unknown.cast(pl.String if dtype == pl.Categorical else unknown.dtype), "v")


def test_a_column_s_categories_are_checked_once_not_per_morsel(monkeypatch):
    # the categories' fit to the dtype and their lookups depend on the dtype only: built
    # on the first morsel, reused by the others and by the real pass
    import dpframe.polars.pram as pram_module

    calls: list[int] = []
    real = pram_module.check_categories_fit

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(pram_module, "check_categories_fit", counted)
    df = _frame(350_000)  # polars' own morsels of 100,000 rows: four in each pass
    for column, kwargs in [("s", {"categories": CATS}), ("e", {}), ("i", {"categories": CATS_I})]:
        calls.clear()
        with dpframe.Accountant(epsilon=1.0):
            rel = pl.col(column).dp.pram(1.0, **kwargs)
            out = dpframe.collect(df.lazy().select(rel), engine="streaming")
        assert out.height == df.height and out.schema == df.select(column).schema
        assert len(calls) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": 1.0, "categories": ["a"]}, "at least 2"),
        ({"epsilon": 1.0, "categories": ["a", "a"]}, "distinct"),
        ({"epsilon": 1.0, "categories": ["a", 1]}, "all strings or all integers"),
        ({"epsilon": 1.0, "categories": ["a", None]}, "all strings or all integers"),
        ({"epsilon": 1.0, "categories": "ab"}, "list"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "prior": [1.0]}, "shape"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "prior": [1.0, -1.0]}, ">= 0"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "prior": {"a": 1.0}}, "no weight"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "prior": {"a": 1, "b": 1, "c": 1}}, "not"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "prior": "census"}, "prior"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "diagonal": "big"}, "diagonal"),
        ({"epsilon": 1.0, "categories": ["a", "b"], "prior": "dp", "prior_share": 1.0}, "share"),
        ({"epsilon": None, "categories": ["a", "b"]}, "epsilon is required"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, match):
    eps = kwargs.pop("epsilon")
    with dpframe.Accountant(epsilon=1.0), pytest.raises(InvalidParameterError, match=match):
        pl.col("c").dp.pram(eps, **kwargs)


# -- the randomization ----------------------------------------------------------------


def test_keep_rate_is_k_rr_and_morsels_get_independent_noise():
    n, s, eps = 1_000_000, len(CATS), 1.0
    df = pl.DataFrame({"e": ["north"] * n}, schema={"e": pl.Enum(CATS)})
    with dpframe.Accountant(epsilon=eps):
        out = dpframe.collect(df.lazy().select(pl.col("e").dp.pram(eps)), engine="streaming")
    kept = (out["e"] == "north").to_numpy()
    q = math.exp(eps) / (math.exp(eps) + s - 1)
    se = math.sqrt(q * (1 - q) / n)
    assert abs(kept.mean() - q) < 4.5 * se
    # a fixed seed per morsel would repeat the same pattern in every block of 100k rows
    blocks = kept[: 10 * 50_000].reshape(10, 50_000)
    agree = (blocks[1:] == blocks[:-1]).mean(axis=1)
    expected = q * q + (1 - q) * (1 - q)
    assert np.all(np.abs(agree - expected) < 4.5 * math.sqrt(expected * (1 - expected) / 50_000))
    # moved records spread uniformly over the other categories (chi-square, alpha 1e-4)
    moved = out["e"].filter(out["e"] != "north").value_counts()
    counts = np.array(sorted(moved["count"].to_list()))
    exp = counts.sum() / (s - 1)
    chi2 = float(((counts - exp) ** 2 / exp).sum())
    assert chi2 < 21.1  # chi-square(3) upper 1e-4 quantile


def test_public_prior_and_dominant_diagonal():
    prior = {"north": 0.4, "south": 0.3, "east": 0.2, "west": 0.09, "islands": 0.01}
    with dpframe.Accountant(epsilon=3.0) as acct:
        dpframe.collect(_frame(1000).lazy().select(pl.col("e").dp.pram(2.0, prior=prior)))
        d_opt = dpframe.last_run().designs["e"]
        dpframe.collect(_frame(1000).lazy().select(pl.col("e").dp.pram(0.5, diagonal="dominant")))
        d_dom = dpframe.last_run().designs["e"]
    ref = pram.design(np.array(list(prior.values())), 2.0)
    np.testing.assert_array_equal(d_opt.q, ref.q)
    assert np.all(d_dom.q >= 1 / len(CATS))
    assert acct.spent.epsilon == pytest.approx(2.5)


def test_user_matrix_is_checked_and_its_epsilon_charged():
    m = np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.25, 0.25, 0.5]])
    actual = pram.check_matrix(m)  # log(0.6 / 0.2) = log 3
    df = pl.DataFrame({"x": [0, 1, 2] * 100})
    with dpframe.Accountant(epsilon=2.0) as acct:
        dpframe.collect(df.lazy().select(pl.col("x").dp.pram(matrix=m, categories=[0, 1, 2])))
    assert acct.ledger[0].epsilon == pytest.approx(actual, abs=1e-8)
    assert acct.ledger[0].epsilon >= actual
    with dpframe.Accountant(epsilon=2.0):
        with pytest.raises(InvalidParameterError, match="more than epsilon"):
            pl.col("x").dp.pram(1.0, matrix=m)
        with pytest.raises(InvalidParameterError, match="not differentially private"):
            pl.col("x").dp.pram(matrix=[[1.0, 0.0], [0.5, 0.5]])
        with pytest.raises(InvalidParameterError, match="sum to 1"):
            pl.col("x").dp.pram(matrix=[[0.9, 0.2], [0.5, 0.5]])
        with pytest.raises(InvalidParameterError, match="not both"):
            pl.col("x").dp.pram(matrix=m, prior=[1, 1, 1])
        with pytest.raises(InvalidParameterError, match="3x3"):
            pl.col("x").dp.pram(matrix=m, categories=[0, 1])


def test_seeded_runs_repeat_and_warn():
    df = _frame(1000)
    outs = []
    for _ in range(2):
        with dpframe.Accountant(epsilon=1.0):
            with pytest.warns(UnsafeSeedWarning):
                expr = pl.col("e").dp.pram(1.0, seed=7)
            outs.append(dpframe.collect(df.lazy().select(expr), engine="in-memory"))
    assert outs[0].equals(outs[1])


def test_a_release_inside_group_by_agg_is_refused_before_the_charge():
    # a release inside an aggregation is evaluated per group, and its output would leave
    # through explode(): the lineage admits a release only as a selected column's whole
    # expression (old: accepted, each group randomized under one charge)
    df = _frame(2_000)
    with dpframe.Accountant(epsilon=1.0) as acct:
        q = df.lazy().group_by("i").agg(pl.col("e").dp.pram(1.0)).explode("e")
        with pytest.raises(dpframe.LineageError, match="whole expression"):
            dpframe.collect(q, public=["i"])
    assert acct.ledger == ()


# -- DP prior ---------------------------------------------------------------------------


def test_dp_prior_streams_and_charges():
    df = _frame(10_000)
    with dpframe.Accountant(epsilon=1.0) as acct:
        p = pram.dp_prior(df.lazy(), "s", 0.5, categories=CATS)
    assert list(p) == CATS
    assert sum(p.values()) == pytest.approx(1.0)
    assert _entries(acct) == [("pram_prior_histogram", ("s",), 0.5)]
    # noise on counts of 10k records at scale 2/0.5 = 4: shares within a few 1e-3
    assert p["north"] == pytest.approx(0.4, abs=0.03)
    with dpframe.Accountant(epsilon=1.0) as acct:
        with pytest.raises(InvalidDataError, match="null"):
            pram.dp_prior(pl.DataFrame({"s": ["north", None]}), "s", 0.5, categories=CATS)
        with pytest.raises(InvalidDataError, match="outside"):
            pram.dp_prior(pl.DataFrame({"s": ["mars"]}), "s", 0.5, categories=CATS)
    assert acct.ledger == ()


def test_prior_dp_in_the_expression_spends_its_share():
    df = _frame(20_000)
    with dpframe.Accountant(epsilon=1.0) as acct:
        df.dpf.select(pl.col("e").dp.pram(1.0, prior="dp", prior_share=0.25))
    assert [(e.mechanism, e.epsilon) for e in acct.ledger] == [
        ("pram_prior_histogram", 0.25),
        ("pram", 0.75),
    ]
    assert dpframe.last_run().designs["e"].epsilon == pytest.approx(0.75)


# -- Parquet and estimation ---------------------------------------------------------------


def test_sink_parquet_writes_ledger_and_design_and_is_atomic(tmp_path):
    df = _frame(50_000)
    path = tmp_path / "released.parquet"
    with dpframe.Accountant(epsilon=2.0):
        dpframe.sink_parquet(df.lazy().select("i", pl.col("e").dp.pram(1.5)), path, public=["i"])
    prov = dpframe.read_provenance(path)
    assert prov.epsilon == pytest.approx(1.5)
    released = pl.read_parquet(path)
    est = pram.estimate(released["e"], prov.pram_designs["e"])
    truth = np.array([0.4, 0.3, 0.2, 0.09, 0.01])
    assert np.all(np.abs(est.p_hat - truth) < 4.5 * np.sqrt(np.diag(est.covariance)) + 0.01)
    # a failure part-way (a null far into the file) leaves no output
    big = _frame(300_000)
    bad = pl.concat([big, big.head(1).with_columns(pl.lit(None, dtype=pl.Enum(CATS)).alias("e"))])
    target = tmp_path / "bad.parquet"
    with dpframe.Accountant(epsilon=2.0) as acct:
        q = bad.lazy().select(pl.col("e").dp.pram(1.0))
        with pytest.raises(InvalidDataError, match="null"):
            dpframe.sink_parquet(q, target)  # the dry pass finds it: nothing charged
        assert acct.ledger == ()  # there is no way round the dry pass
    assert not target.exists()
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []


def test_estimate_grouped_matches_per_group_estimates():
    df = _frame(30_000, seed=3)
    with dpframe.Accountant(epsilon=2.0):
        out = df.dpf.with_columns(pl.col("e").dp.pram(2.0), public=["s", "i", "cat"])
    d = dpframe.last_run().designs["e"]
    table = pram.estimate_grouped(out, "e", "i", d)
    assert table.columns == ["i", "category", "n", "count", "p_hat", "se", "p_simplex"]
    assert table.height == 5 * len(CATS)
    one = pram.estimate(out.filter(pl.col("i") == 2)["e"], d)
    got = table.filter(pl.col("i") == 2)["p_hat"].to_numpy()
    np.testing.assert_allclose(got, one.p_hat)
    with pytest.raises(InvalidParameterError, match="not in the frame"):
        pram.estimate_grouped(out, "e", "nope", d)


def test_design_round_trips_through_the_ledger():
    with dpframe.Accountant(epsilon=1.0) as acct:
        dpframe.collect(_frame(100).lazy().select(pl.col("e").dp.pram(1.0, prior=[5, 4, 3, 2, 1])))
    rec = acct.ledger[0].details["design"]
    d = pram.design_from_dict(rec)
    ref = dpframe.last_run().designs["e"]
    np.testing.assert_array_equal(d.q, ref.q)
    np.testing.assert_array_equal(d.move_numerators, ref.move_numerators)
    assert rec["categories"] == CATS


def test_import_dpframe_stays_light():
    import subprocess
    import sys

    heavy = ("scipy", "pandas", "great_expectations", "pyspark", "matplotlib", "pyarrow")
    code = f"import sys, dpframe; print([m for m in {heavy!r} if m in sys.modules])"
    with warnings.catch_warnings():
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "[]", res.stderr


def test_end_to_end_likelihood_ratio_audit():
    """Through .dp.pram and a runner, P(Z = z | x) / P(Z = z | x') <= e^eps for all x, x', z.

    400k records in each of S = 4 categories are randomized; for every pair of inputs and
    every output the log ratio of the empirical frequencies is tested one-sidedly against
    eps at z = 4.5 standard errors (delta method). The worst ratio must also come close to
    e^eps (the design uses its budget), within the same error.
    """
    s, eps, per = 4, 1.0, 400_000
    codes = np.repeat(np.arange(s), per)
    with dpframe.Accountant(epsilon=eps):
        out = dpframe.collect(
            pl.LazyFrame({"x": codes}).select(pl.col("x").dp.pram(eps, categories=[0, 1, 2, 3]))
        )
    z = out["x"].to_numpy().reshape(s, per)
    freq = np.stack([np.bincount(z[i], minlength=s) / per for i in range(s)])  # P(z | x)
    worst = -np.inf
    for i in range(s):
        for j in range(s):
            if i == j:
                continue
            log_ratio = np.log(freq[i] / freq[j])
            se = np.sqrt((1 - freq[i]) / (per * freq[i]) + (1 - freq[j]) / (per * freq[j]))
            assert np.all(log_ratio - 4.5 * se <= eps), (i, j, log_ratio, se)
            worst = max(worst, float((log_ratio + 4.5 * se).max()))
    assert worst >= eps  # k-RR's ratio e^eps is attained (not a needlessly noisy design)


def test_summarize_lists_pram_releases_without_spending():
    acct = dpframe.Accountant(epsilon=2.0)
    expr = pl.col("e").dp.pram(0.5, accountant=acct, categories=CATS)
    table = dpframe.summarize(acct)
    assert table.select("statistic", "mechanism", "epsilon").rows() == [("e", "pram", 0.5)]
    assert acct.ledger == ()
    del expr


def test_matrix_charge_never_below_its_certified_epsilon():
    m = np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]])  # form (8): log 3
    actual = pram.sampler(m).epsilon_actual  # certified bound, a hair above log 3
    with dpframe.Accountant(epsilon=2.0) as acct:
        dpframe.collect(
            pl.LazyFrame({"x": [0, 1, 2]}).select(
                pl.col("x").dp.pram(math.log(3), matrix=m, categories=[0, 1, 2])
            )
        )
    assert acct.ledger[0].epsilon >= actual


def test_dominant_design_records_its_mutual_information_cost():
    prior = [0.6871, 0.2992, 0.0001, 0.0136, 0.0]
    with dpframe.Accountant(epsilon=1.0) as acct:
        dpframe.collect(
            _frame(100).lazy().select(pl.col("e").dp.pram(0.5, prior=prior, diagonal="dominant"))
        )
    rec = acct.ledger[0].details["design"]
    free = pram.design(np.array(prior) / sum(prior), 0.5)
    assert rec["mutual_information_unconstrained"] == pytest.approx(free.mutual_information)
    assert rec["mutual_information"] < rec["mutual_information_unconstrained"]


def test_dp_prior_noise_has_the_histograms_sensitivity_two():
    """The prior's counts get discrete Laplace noise of scale 2 / eps (one record moves two
    counts under substitute neighbours), not 1 / eps: checked on the noise's variance."""
    from dpframe.mechanisms.discrete import discrete_laplace_variance
    from dpframe.mechanisms.pram.plan import plan_dp_prior

    c, eps, reps = 10**6, 0.5, 2000
    rng = np.random.default_rng(5)
    plan = plan_dp_prior("c", ["a", "b"], eps)
    p0 = np.array([plan.draw(np.array([c, c]), rng)[0] for _ in range(reps)])
    # p0 = (c + e0) / (2c + e0 + e1) ~ 1/2 + (e0 - e1) / (4c): Var(e) ~ 8 c^2 Var(p0)
    var_e = 8 * c * c * p0.var(ddof=1)
    expected = discrete_laplace_variance(2 / eps)
    # relative SE of a sample variance: sqrt((kurtosis - 1) / reps), kurtosis of e0 - e1 < 6
    assert abs(var_e / expected - 1) < 4.5 * math.sqrt(5 / reps)
    assert var_e > 2 * discrete_laplace_variance(1 / eps)  # sensitivity 1 would be 4x smaller


# ---------------------------------------------------------------------------------------
# Charges that must not be skipped, doubled or made before a refusal
# ---------------------------------------------------------------------------------------


def test_one_expression_at_two_places_of_a_plan_is_refused_before_any_charge():
    """concat of two queries using the same expression would randomize the first rows
    twice, independently, under one charge (a true cost of 2 epsilon)."""
    lf = _frame(2_000).lazy()
    acct = dpframe.Accountant(epsilon=5.0)
    e = pl.col("e").dp.pram(1.0, categories=CATS, accountant=acct)
    with pytest.raises(InvalidParameterError, match="more than one place"):
        dpframe.collect(pl.concat([lf.head(500).with_columns(e), lf.with_columns(e)]))
    no_cse = pl.QueryOptFlags(comm_subexpr_elim=False)
    with pytest.raises(InvalidParameterError, match="more than one place"):
        dpframe.collect(lf.select(e.alias("a"), e.alias("b")), optimizations=no_cse)
    assert acct.ledger == ()
    other = pl.col("e").dp.pram(1.0, categories=CATS, accountant=acct)
    out = dpframe.collect(lf.select(e.alias("a"), other.alias("b")))  # two releases: fine
    assert out.shape == (2_000, 2) and acct.spent.epsilon == pytest.approx(2.0)


def test_prior_dp_provenance_holds_the_whole_epsilon(tmp_path):
    path = tmp_path / "out.parquet"
    with dpframe.Accountant(epsilon=1.0) as acct:
        q = _frame(3_000).lazy().select(pl.col("e").dp.pram(1.0, prior="dp", prior_share=0.7))
        dpframe.sink_parquet(q, path)
    assert acct.spent.epsilon <= 1.0  # the split fits a budget of exactly epsilon
    prov = dpframe.read_provenance(path)
    assert [e.mechanism for e in prov.entries] == ["pram_prior_histogram", "pram"]
    assert prov.epsilon == pytest.approx(1.0) and acct.spent.epsilon == pytest.approx(1.0)


def test_prior_dp_failures_spend_nothing():
    acct = dpframe.Accountant(epsilon=20.0)
    with pytest.raises(InvalidParameterError, match="<= 12"):  # PRAM's share too large
        pl.col("e").dp.pram(15.0, prior="dp", categories=CATS, accountant=acct)
    grouped = (
        _frame(1_000)
        .lazy()
        .group_by("i")
        .agg(pl.col("e").dp.pram(1.0, prior="dp", categories=CATS, accountant=acct))
    )
    with pytest.raises(InvalidParameterError, match="whole expression of a selected column"):
        dpframe.collect(grouped, public=["i"])
    assert acct.ledger == ()


def test_a_matrix_of_the_wrong_size_for_the_enum_is_refused_before_the_charge():
    acct = dpframe.Accountant(epsilon=5.0)
    m = pram.krr(3, 1.0).matrix  # three categories; the Enum has five
    q = _frame(100).lazy().select(pl.col("e").dp.pram(1.0, matrix=m, accountant=acct))
    with pytest.raises(InvalidParameterError, match="one row per category"):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_estimate_from_the_provenance_of_a_matrix_release(tmp_path):
    m = pram.krr(len(CATS), 1.5).matrix
    path = tmp_path / "m.parquet"
    with dpframe.Accountant(epsilon=2.0):
        dpframe.sink_parquet(_frame(20_000).lazy().select(pl.col("e").dp.pram(1.5, matrix=m)), path)
    record = dpframe.read_provenance(path).pram_designs["e"]
    est = pram.estimate(pl.read_parquet(path)["e"], record)
    assert est.p_hat.shape == (len(CATS),) and abs(est.p_hat.sum() - 1) < 1e-9


@pytest.mark.parametrize(
    "prior",
    [
        {"a": "0.5", "b": 0.25, "c": 0.25},
        ["1", "1", "1"],
        [True, False, True],
        {"a": None, "b": 1, "c": 1},
    ],
)
def test_prior_weights_must_be_numbers(prior):
    # old: "0.5" was taken as 0.5 and the column released
    from dpframe.mechanisms.pram.plan import prior_weights

    with pytest.raises(InvalidParameterError, match="weights \\(numbers\\)"):
        prior_weights(prior, ("a", "b", "c"))


def test_keep_as_one_name_is_one_column(tmp_path):
    # old: keep="region" was read as the columns r, e, g, i, o, n
    lf = pl.LazyFrame({"c": ["a", "b"] * 50, "region": ["N", "S"] * 50})
    with dpframe.Accountant(epsilon=1.0):
        spec = [{"column": "c", "epsilon": 0.5, "categories": ["a", "b"]}]
        rel = dpframe.pram.release(lf, spec, keep="region")
        rel.write(tmp_path / "out.parquet")
    assert pl.read_parquet(tmp_path / "out.parquet").columns == ["c", "region"]
    with pytest.raises(InvalidParameterError, match="keep must be a list of column names"):
        dpframe.pram.release(lf, spec, keep=[1])


def test_estimable_reaches_the_design_from_every_entry_point(tmp_path):
    """`.dp.pram`, `pram.release` and the spec's column take `estimable=`; the default
    design is invertible where the plain optimum is not (p = (0.9, 0.05, 0.05), eps 1:
    two categories at q = 1/3)."""
    prior = {"a": 0.9, "b": 0.05, "c": 0.05}
    df = pl.DataFrame({"c": ["a", "b", "c"] * 50})
    with dpframe.Accountant(epsilon=10):
        for estimable in (True, False):
            q = df.lazy().with_columns(pl.col("c").dp.pram(1.0, prior=prior, estimable=estimable))
            dpframe.collect(q)
            design = dpframe.last_run().entries[0].details["design"]
            assert design["estimable"] is estimable
        release = dpframe.pram.release(
            df, [{"column": "c", "epsilon": 1.0, "prior": prior, "categories": list(prior)}]
        )
        assert [p.design.estimable for p in release.plans()] == [True]
    from dpframe.jobs.spec import PramColumnSpec

    assert PramColumnSpec(column="c", epsilon=1.0).estimable is True
    assert PramColumnSpec(column="c", epsilon=1.0, estimable=0.2).estimable == 0.2
    with pytest.raises(ValueError, match="estimable"):
        PramColumnSpec(column="c", epsilon=1.0, estimable="yes")


# -- design="global" ----------------------------------------------------------------------


def test_global_design_end_to_end_is_charged_once_and_releases_only_its_labels(tmp_path):
    df = _frame(20_000)
    path = str(tmp_path / "global.parquet")
    with dpframe.Accountant(epsilon=2.0) as acct:
        q = df.lazy().select(pl.col("e").dp.pram(0.1, design="global", estimable=False))
        dpframe.sink_parquet(q, path)
    assert _entries(acct) == [("pram", ("e",), 0.1)]
    record = dpframe.read_provenance(path).entries[-1].details["design"]
    assert record["design"] == "global" and record["never_released"]
    released = set(pl.read_parquet(path)["e"].cast(pl.String))
    assert released <= set(record["labels"])
    assert not released & set(record["never_released"])
    # estimation refuses, naming the design and the categories it never releases
    with pytest.raises(InvalidParameterError, match=r"design='global'.*never releases"):
        pram.estimate(pl.read_parquet(path)["e"], record)


def test_global_design_invertible_estimates_within_their_errors(tmp_path):
    df = _frame(40_000, seed=3)
    prior = dict(zip(CATS, [0.4, 0.3, 0.2, 0.09, 0.01], strict=True))
    path = str(tmp_path / "global.parquet")
    with dpframe.Accountant(epsilon=4.0):
        q = df.lazy().select(pl.col("e").dp.pram(2.0, prior=prior, design="global"))
        dpframe.sink_parquet(q, path)
    record = dpframe.read_provenance(path).entries[-1].details["design"]
    assert record["estimable"] and not record["never_released"]
    est = pram.estimate(pl.read_parquet(path)["e"], record)
    truth = df["e"].value_counts().sort("e")["count"].to_numpy() / df.height
    # the estimator is unbiased: each share within 4 standard errors (fixed seeds)
    assert (np.abs(est.p_hat - truth) < 4 * est.standard_errors).all()


def test_variance_design_end_to_end_estimates_within_their_errors(tmp_path):
    df = _frame(40_000, seed=5)
    prior = dict(zip(CATS, [0.4, 0.3, 0.2, 0.09, 0.01], strict=True))
    path = str(tmp_path / "variance.parquet")
    with dpframe.Accountant(epsilon=2.0) as acct:
        q = df.lazy().select(pl.col("e").dp.pram(0.5, prior=prior, design="variance"))
        dpframe.sink_parquet(q, path)
    assert _entries(acct) == [("pram", ("e",), 0.5)]
    record = dpframe.read_provenance(path).entries[-1].details["design"]
    assert record["design"] == "variance"
    est = pram.estimate(pl.read_parquet(path)["e"], record)
    truth = df["e"].value_counts().sort("e")["count"].to_numpy() / df.height
    assert (np.abs(est.p_hat - truth) < 4 * est.standard_errors).all()
    # the estimator's variance at the prior is what the design minimised: n tr(Cov)
    assert est.covariance.trace() * df.height == pytest.approx(record["risk"], rel=0.1)


# -- design="auto" (the default) ------------------------------------------------------------


def test_default_design_for_a_public_prior_is_chosen_for_estimation_and_recorded(tmp_path):
    df = _frame(40_000, seed=7)
    prior = dict(zip(CATS, [0.4, 0.3, 0.2, 0.09, 0.01], strict=True))
    path = str(tmp_path / "auto.parquet")
    with dpframe.Accountant(epsilon=1.0) as acct:
        q = df.lazy().select(pl.col("e").dp.pram(0.3, prior=prior))
        dpframe.sink_parquet(q, path)
    assert _entries(acct) == [("pram", ("e",), 0.3)]
    record = dpframe.read_provenance(path).entries[-1].details["design"]
    sel = record["selection"]
    assert set(sel["risks"]) >= {"krr", "paper"}
    assert sel["risks"][sel["chosen"]] == min(r for r in sel["risks"].values() if r is not None)
    est = pram.estimate(pl.read_parquet(path)["e"], record)
    truth = df["e"].value_counts().sort("e")["count"].to_numpy() / df.height
    assert (np.abs(est.p_hat - truth) < 4 * est.standard_errors).all()
    # the same choice through pram.release (the runner a spec's PRAM columns use)
    with dpframe.Accountant(epsilon=1.0) as acct2:
        pram.release(df.select("e"), [{"column": "e", "epsilon": 0.3, "prior": prior}]).collect()
    again = acct2.ledger[-1].details["design"]["selection"]
    assert again["chosen"] == sel["chosen"] and again["risks"] == sel["risks"]


def test_default_design_with_many_categories_is_cyclic_and_estimates_within_errors(tmp_path):
    cats = [f"r{i:02d}" for i in range(16)]
    rng = np.random.default_rng(11)
    w = rng.dirichlet(np.ones(16))
    df = pl.DataFrame({"r": rng.choice(cats, size=60_000, p=w)}).with_columns(
        pl.col("r").cast(pl.Enum(cats))
    )
    path = str(tmp_path / "cyclic.parquet")
    with dpframe.Accountant(epsilon=1.0) as acct:
        dpframe.sink_parquet(df.lazy().select(pl.col("r").dp.pram(0.3)), path)
    assert _entries(acct) == [("pram", ("r",), 0.3)]
    record = dpframe.read_provenance(path).entries[-1].details["design"]
    assert record["design"] == "cyclic" and record["selection"]["chosen"] == "cyclic"
    released = pl.read_parquet(path)["r"]
    assert set(released.cast(pl.String)) <= set(cats)
    est = pram.estimate(released, record)
    truth = df["r"].value_counts().sort("r")["count"].to_numpy() / df.height
    assert (np.abs(est.p_hat - truth) < 4 * est.standard_errors).all()
    # n tr Cov = r - |p|^2 at the true shares (the estimator's own covariance)
    assert est.covariance.trace() * df.height == pytest.approx(
        record["risk_constant"] - truth @ truth, rel=0.05
    )
