"""Great Expectations checks of released tables (dpframe.jobs.checks).

Great Expectations is imported once per process (about 3-5 s, by the first check); each
check after that takes a fraction of a second.
"""

import json
import math
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from dpframe.errors import InvalidDataError, InvalidParameterError, MissingMarginsError
from dpframe.jobs.checks import (
    FINITE,
    CheckResult,
    check_release,
    expectations_for,
    load_suite,
    save_check,
)
from dpframe.jobs.spec import (
    CovarianceSpec,
    GroupedSpec,
    PramColumnSpec,
    PramSpec,
    ProportionsSpec,
    StatisticSpec,
)

# -- specs and passing tables --------------------------------------------------------------

MARGINS = pl.DataFrame({"region": ["N", "S", "E"]})


def grouped_spec(**kw):
    return GroupedSpec(
        name="by_region",
        kind="grouped",
        by=["region"],
        margins="region",
        statistics=[
            StatisticSpec(stat="count", epsilon=0.1),
            StatisticSpec(stat="sum", column="income", lower=0, upper=100, epsilon=0.1),
            StatisticSpec(stat="mean", column="income", lower=0, upper=100, epsilon=0.1),
            StatisticSpec(stat="proportion", column="owner", epsilon=0.1),
            StatisticSpec(stat="var", column="income", lower=0, upper=100, epsilon=0.1),
            StatisticSpec(
                stat="cov", x="a", y="b", lower=0, upper=1, lower_y=0, upper_y=2, epsilon=0.1
            ),
        ],
        **kw,
    )


def grouped_table(**columns):
    base = {
        "region": ["N", "S", "E"],
        "count": [10, 0, 3],  # counts are Int64
        "income_sum": [500.0, 0.0, 300.0],
        "income_mean": [50.0, 20.0, 100.0],
        "owner_proportion": [0.5, 0.0, 1.0],
        "income_var": [10.0, 0.0, 5.0],
        "a_b_var_a": [0.1, 0.0, 0.2],
        "a_b_var_b": [0.4, 0.3, 0.2],
        "a_b_cov": [0.2, 0.0, -0.1],
        # var_a = 0 in "S": the correlation is undefined there
        "a_b_corr": [1.0, None, -0.5],
    }
    base.update(columns)
    return pl.DataFrame(base, schema_overrides={"a_b_corr": pl.Float64})


PROPORTIONS = ProportionsSpec(
    name="shares", kind="proportions", column="vote", categories=["a", "b", "c", "d"], epsilon=1.0
)


def proportions_table(values=(0.1, 0.2, 0.3, 0.4), cats=("a", "b", "c", "d")):
    return pl.DataFrame({"vote": list(cats), "proportion": list(values)})


SEX = pl.Enum(["f", "m"])
PRAM = PramSpec(
    name="microdata",
    kind="pram",
    columns=[
        PramColumnSpec(column="region", epsilon=1.0, categories=["N", "S", "E"]),
        PramColumnSpec(column="sex", epsilon=1.0),  # categories from the Enum dtype
    ],
)


def pram_table(region=("N", "S", "E", "N")):
    return pl.DataFrame({"region": list(region), "sex": pl.Series(["f", "m", "f", "f"], dtype=SEX)})


COVARIANCE = CovarianceSpec(
    name="cov",
    kind="covariance",
    columns=["x", "y", "z"],
    bounds=[(0, 1), (0, 2), (-1, 1)],
    epsilon=1.0,
    n=100,
)


def cov_table(x=(0.08, 0.01, 0.0), y=(0.01, 0.3, 0.02), z=(0.0, 0.02, 0.2)):
    return pl.DataFrame({"column": ["x", "y", "z"], "x": list(x), "y": list(y), "z": list(z)})


def failed(result: CheckResult) -> str:
    assert isinstance(result, CheckResult)
    assert result.success is False, result.report()
    assert result.failures
    return "\n".join(result.failures)


# -- passing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "frame", "kw"),
    [
        (grouped_spec(), grouped_table(), {"margins": MARGINS}),
        (PRAM, pram_table(), {"input_rows": 4}),
        (PRAM, pram_table().lazy(), {"input_rows": 4}),
        (PROPORTIONS, proportions_table(), {}),
        (COVARIANCE, cov_table(), {}),
    ],
    ids=["grouped", "pram", "pram-lazy", "proportions", "covariance"],
)
def test_a_valid_release_passes(spec, frame, kw):
    res = check_release(spec, frame, **kw)
    assert res.success, res.report()
    assert res.failures == []
    assert res.n_expectations == len(expectations_for(spec, frame, **kw))
    assert res.n_expectations == sum(len(s["expectations"]) for s in res.suite["suites"].values())
    assert "passed" in res.report()
    json.dumps(res.suite, allow_nan=False)
    json.dumps(res.result, allow_nan=False)


def test_proportions_from_an_enum_and_within_tolerance():
    spec = ProportionsSpec(name="p", kind="proportions", column="v", epsilon=1.0, tolerance=1e-6)
    frame = pl.DataFrame(
        {"v": pl.Series(["x", "y"], dtype=pl.Enum(["x", "y"])), "proportion": [0.5, 0.5000001]}
    )
    assert check_release(spec, frame).success


def test_rounding_does_not_fail_cauchy_schwarz():
    # a perfect correlation computed as sqrt(a) sqrt(b): one ulp above sqrt(a b)
    a, b = 0.211, 0.438
    c = math.sqrt(a) * math.sqrt(b)
    assert c > math.sqrt(a * b)
    frame = cov_table(x=(a, c, 0.0), y=(c, b, 0.0), z=(0.0, 0.0, 0.2))
    assert check_release(COVARIANCE, frame).success


# -- failing: each names the column and the value --------------------------------------------


def test_a_proportion_above_one():
    text = failed(check_release(PROPORTIONS, proportions_table((0.1, 1.2, 0.3, 0.4))))
    assert "proportion: 1 of 4 values outside [0, 1], e.g. 1.2 (category 'b')" in text


def test_proportions_summing_to_0_9():
    text = failed(check_release(PROPORTIONS, proportions_table((0.1, 0.2, 0.3, 0.3))))
    assert "proportion: sum is 0.9, expected 1 within 1e-09" in text


def test_proportions_with_an_undeclared_category():
    frame = proportions_table(cats=("a", "b", "c", "x"))
    text = failed(check_release(PROPORTIONS, frame))
    assert "vote" in text and "missing ['d']" in text and "unexpected ['x']" in text


def test_covariance_matrix_beyond_cauchy_schwarz():
    frame = cov_table(x=(0.08, 0.5, 0.0), y=(0.5, 0.3, 0.02))
    text = failed(check_release(COVARIANCE, frame))
    assert "Cauchy-Schwarz" in text
    assert "|cov(x, y)| = |0.5| > sqrt(cov(x, x) cov(y, y)) = 0.1549193338" in text


def test_covariance_matrix_not_symmetric():
    text = failed(check_release(COVARIANCE, cov_table(x=(0.08, 0.02, 0.0))))
    assert "not symmetric" in text and "cov(x, y): 0.01 vs 0.02" in text


def test_covariance_matrix_negative_and_too_large_variance():
    text = failed(check_release(COVARIANCE, cov_table(z=(0.0, 0.02, -0.2))))
    assert "diagonal (variances): 1 of 3 values below 0, e.g. -0.2 (variable 'z')" in text
    text = failed(check_release(COVARIANCE, cov_table(x=(0.8, 0.01, 0.0))))
    # n R^2 / (4 (n - 1)) = 100 / 396 for x in [0, 1]
    assert "e.g. 0.8 > 0.2525252525 (variable 'x')" in text


def test_covariance_matrix_with_a_null():
    text = failed(check_release(COVARIANCE, cov_table(y=(0.01, 0.3, None))))
    assert "y: 1 of 3 values are null or NaN, e.g. at row 'z'" in text


def test_grouped_covariance_beyond_cauchy_schwarz():
    text = failed(
        check_release(grouped_spec(), grouped_table(a_b_cov=[0.21, 0.0, -0.1]), margins=MARGINS)
    )
    assert "a_b_cov: 1 of 3 groups beyond Cauchy-Schwarz" in text
    assert "|0.21| > sqrt(a_b_var_a * a_b_var_b) = 0.2 (region='N')" in text


def test_grouped_negative_variance_and_mean_out_of_bounds():
    frame = grouped_table(income_var=[10.0, -0.5, 5.0], income_mean=[50.0, 120.0, 100.0])
    text = failed(check_release(grouped_spec(), frame, margins=MARGINS))
    assert (
        "income_var: 1 of 3 values outside [0, 5000] or not finite, e.g. -0.5 (region='S')" in text
    )
    assert (
        "income_mean: 1 of 3 values outside [0, 100] or not finite, e.g. 120 (region='S')" in text
    )


def test_grouped_correlation_outside_minus_one_one():
    text = failed(
        check_release(grouped_spec(), grouped_table(a_b_corr=[1.5, None, -0.5]), margins=MARGINS)
    )
    assert "a_b_corr: 1 of 3 values outside [-1, 1], e.g. 1.5 (region='N')" in text


def test_a_negative_count_fails_only_when_nonnegative():
    frame = grouped_table(count=[10, -1, 3])
    text = failed(check_release(grouped_spec(), frame, margins=MARGINS))
    assert "count: 1 of 3 values below 0 or not finite, e.g. -1 (region='S')" in text
    # without the clamp at 0, a negative noisy count is a valid release (and so is the sum)
    loose = check_release(grouped_spec(nonnegative=False), frame, margins=MARGINS)
    assert loose.success, loose.report()


def test_a_null_statistic_fails_but_a_null_correlation_does_not():
    frame = grouped_table(income_mean=[50.0, None, 100.0])
    text = failed(check_release(grouped_spec(), frame, margins=MARGINS))
    assert "income_mean: 1 of 3 values are null or NaN, e.g. at region='S'" in text
    assert "corr" not in text


def test_a_missing_key_row_and_wrong_row_count():
    frame = grouped_table().filter(pl.col("region") != "E")
    text = failed(check_release(grouped_spec(), frame, margins=MARGINS))
    assert "row count is 2, expected 3 (one row per public key of the margins)" in text
    assert "keys: 1 of 3 public keys not released exactly once, e.g. 0 rows (region='E')" in text


def test_a_repeated_key_with_the_right_row_count():
    frame = pl.concat([grouped_table().head(2), grouped_table().head(1)])
    text = failed(check_release(grouped_spec(), frame, margins=MARGINS))
    assert "row count" not in text
    assert "2 rows (region='N')" in text and "0 rows (region='E')" in text


def test_an_unknown_key_and_a_missing_column():
    frame = grouped_table(region=["N", "S", "W"]).drop("income_sum")
    text = failed(check_release(grouped_spec(), frame, margins=MARGINS))
    assert "region: 1 of 3 values not among the margins' keys, e.g. 'W'" in text
    assert "columns: missing ['income_sum']" in text
    assert "could not be checked" not in text  # the missing column is reported once


def test_public_sizes_allow_nulls_only_in_too_small_groups():
    margins = MARGINS.with_columns(n=pl.Series([10, 0, 1]))
    # S has size 0 (no mean, no proportion, no variance); E has size 1 (no variance)
    frame = grouped_table(
        income_mean=[50.0, None, 3.0],
        owner_proportion=[0.5, None, 1.0],
        income_var=[1.0, None, None],
        a_b_var_a=[0.1, None, None],
        a_b_var_b=[0.4, None, None],
        a_b_cov=[0.2, None, None],
        a_b_corr=[1.0, None, None],
    )
    assert check_release(grouped_spec(), frame, margins=margins, sizes="n").success
    bad = frame.with_columns(pl.Series("owner_proportion", [None, None, 1.0]))
    text = failed(check_release(grouped_spec(), bad, margins=margins, sizes="n"))
    assert "owner_proportion: 1 of" in text and "size 10 (region='N')" in text
    # without public sizes every null (but a correlation's) fails
    assert not check_release(grouped_spec(), frame, margins=margins).success


def test_a_pram_value_outside_its_categories_a_null_and_the_row_count():
    text = failed(check_release(PRAM, pram_table(region=("N", "X", "E", None)), input_rows=5))
    assert "region: 1 of 4 distinct values outside the declared categories" in text
    assert "'X' in 1 row(s)" in text
    assert "region: 1 of 4 distinct values are null" in text
    assert "region: row count is 4, expected 5 (the input's rows)" in text


def test_pram_value_counts_from_the_engine_replace_reading_the_table():
    """Spark counts the values; the table then gives only the dtypes (it is not read)."""
    counts = {
        "region": pl.DataFrame({"value": ["N", "X", None], "rows": [2, 1, 1]}),
        "sex": pl.DataFrame({"value": pl.Series(["f", "m"], dtype=SEX), "rows": [3, 1]}),
    }
    schema_only = pram_table().clear()
    text = failed(check_release(PRAM, schema_only, input_rows=5, value_counts=counts))
    assert "'X' in 1 row(s)" in text and "region: 1 of 3 distinct values are null" in text
    assert "region: row count is 4, expected 5 (the input's rows)" in text
    good = {"region": counts["region"].head(1).with_columns(rows=pl.lit(4)), "sex": counts["sex"]}
    assert check_release(PRAM, schema_only, input_rows=4, value_counts=good).success


def test_a_missing_pram_column_is_reported_once():
    res = check_release(PRAM, pram_table().drop("region"), input_rows=4)
    assert failed(res) == "region: column is missing from the released table"


def test_report_lists_every_failure():
    res = check_release(PROPORTIONS, proportions_table((0.1, 1.2, 0.3, None)))
    report = res.report()
    assert report.startswith("check of release 'shares' (proportions): FAILED, 3 of 8")
    assert all(f"  - {f}" in report for f in res.failures)


# -- bad arguments -------------------------------------------------------------------------


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(MissingMarginsError, match="margins="):
        check_release(grouped_spec(), grouped_table())
    with pytest.raises(InvalidParameterError, match="no key column"):
        expectations_for(grouped_spec(), grouped_table(), margins=pl.DataFrame({"x": [1]}))
    spec = PramSpec(name="m", kind="pram", columns=[PramColumnSpec(column="r", epsilon=1)])
    with pytest.raises(InvalidParameterError, match="declared categories"):
        expectations_for(spec, pl.DataFrame({"r": ["a"]}))
    with pytest.raises(InvalidParameterError, match="release spec"):
        expectations_for({"kind": "pram"}, pl.DataFrame())
    with pytest.raises(InvalidParameterError, match="input_rows"):
        expectations_for(PRAM, pram_table(), input_rows=-1)


def test_expectations_are_plain_data():
    exps = expectations_for(grouped_spec(), grouped_table(), margins=MARGINS)
    json.dumps(exps)
    tables = {"main", "keys", "pairs", "types", "integers", "correlations"}
    assert {e["table"] for e in exps} == tables
    assert all(e["type"].startswith("expect_") for e in exps)
    between = {
        e["kwargs"]["column"]: (e["kwargs"].get("min_value"), e["kwargs"].get("max_value"))
        for e in exps
        if e["type"] == "expect_column_values_to_be_between" and e["table"] == "main"
    }
    assert between["income_mean"] == (0, 100)
    assert between["owner_proportion"] == (0.0, 1.0)
    # a variance: at most R^2 / 2 (the largest sample variance in [0, 100], n >= 2);
    # a sum: finite (+-FINITE refuses infinities)
    assert between["income_var"] == (0.0, 5000.0)
    assert between["income_sum"] == (0.0, FINITE)
    not_null = {e["kwargs"]["column"] for e in exps if e["type"].endswith("not_be_null")}
    assert "a_b_corr" not in not_null and "a_b_cov" in not_null


# -- saving and reloading ------------------------------------------------------------------


def test_save_and_reload_round_trip(tmp_path):
    res = check_release(PROPORTIONS, proportions_table((0.1, float("inf"), 0.3, None)))
    paths = save_check(res, tmp_path)
    assert [p.name for p in paths] == [
        "shares.suite.json",
        "shares.validation.json",
        "main.parquet",
        "main.suite.json",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "shares.checks",
        "shares.suite.json",
        "shares.validation.json",
    ]  # no temporary file left behind
    assert sorted(p.name for p in (tmp_path / "shares.checks").iterdir()) == [
        "main.parquet",
        "main.suite.json",
    ]
    doc = load_suite(paths[0])
    assert doc == res.suite
    assert doc["n_expectations"] == res.n_expectations
    validation = json.loads(paths[1].read_text())  # strict JSON: inf saved as a string
    assert validation["success"] is False
    assert validation["failures"] == res.failures


def test_reload_detects_a_dropped_expectation(tmp_path):
    res = check_release(PROPORTIONS, proportions_table())
    path = save_check(res, tmp_path)[0]
    doc = json.loads(path.read_text())
    # a custom expectation whose class is not imported: GE drops it silently on load
    doc["suites"]["main"]["expectations"].append(
        {"type": "expect_column_values_to_be_dp_bounded", "kwargs": {"column": "x"}, "meta": {}}
    )
    doc["n_expectations"] += 1
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidDataError, match="expect_column_values_to_be_dp_bounded"):
        load_suite(path)
    # an edited file whose count no longer matches
    doc["suites"]["main"]["expectations"].pop()
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidDataError, match="edited or truncated"):
        load_suite(path)


def test_data_docs(tmp_path):
    res = check_release(COVARIANCE, cov_table(z=(0.0, 0.02, -0.2)))
    paths = save_check(res, tmp_path, data_docs=True)
    index = paths[-1]
    assert index == tmp_path / "data_docs" / "cov" / "index.html"
    pages = sorted(p.relative_to(index.parent).parts[0] for p in index.parent.rglob("*.html"))
    assert "validations" in pages and "expectations" in pages
    save_check(res, tmp_path, data_docs=True)  # rebuilding replaces the site
    assert sorted(p.name for p in (tmp_path / "data_docs").iterdir()) == ["cov"]


def test_import_dpframe_does_not_import_great_expectations():
    code = textwrap.dedent(
        """
        import sys
        import polars as pl
        import dpframe
        from dpframe.jobs import checks
        from dpframe.jobs.spec import ProportionsSpec
        spec = ProportionsSpec(name="s", kind="proportions", column="v", categories=["a", "b"],
                               epsilon=1.0)
        checks.expectations_for(spec, pl.DataFrame({"v": ["a", "b"], "proportion": [0.5, 0.5]}))
        print([m for m in ("great_expectations", "pandas") if m in sys.modules])
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


#: every column a grouped check's derived tables hold beside the keys
DERIVED = ["statistic", "value", "fraction", "persons", "rows", "of", "excess", "corr"]
DERIVED += ["expected", "off", "cov", "bound", "bound_of", "next", "next_value"]
DERIVED += ["size", "size_over"]


def test_keys_named_as_the_derived_tables_columns_are_checked_as_any_keys():
    """Keys named as every column of the derived tables (counts' integers, distinct
    persons within counts, correlations, Cauchy-Schwarz, quantiles in order, nulls by
    public size, keys released once): a valid table passes, a doctored one fails naming
    its group. Each of these tables failed with a duplicate column, after the charge."""
    stats = [
        *grouped_spec().statistics,
        StatisticSpec(stat="count_distinct", name="people", epsilon=0.1),
        StatisticSpec(
            stat="quantile", column="income", q=[0.25, 0.75], lower=0, upper=100, epsilon=0.1
        ),
    ]
    spec = grouped_spec().model_copy(update={"by": DERIVED, "statistics": stats})
    groups = {k: ["N", "S", "E"] for k in DERIVED}
    margins = pl.DataFrame(groups).with_columns(n=pl.Series([10, 0, 1]))
    frame = grouped_table(
        people=[4, 0, 1], income_q25=[10.0, 50.0, 3.0], income_q75=[60.0, 50.0, 3.0]
    ).drop("region")
    frame = pl.DataFrame(groups).hstack(frame)
    # S has size 0 (no mean, no proportion, no variance); E has size 1 (no variance)
    frame = frame.with_columns(
        *[
            pl.when(pl.col("value") == "S").then(None).otherwise(pl.col(c)).alias(c)
            for c in ["income_mean", "owner_proportion"]
        ],
        *[
            pl.when(pl.col("value") == "N").then(pl.col(c)).otherwise(None).alias(c)
            for c in ["income_var", "a_b_var_a", "a_b_var_b", "a_b_cov", "a_b_corr"]
        ],
    )
    ok = check_release(spec, frame, margins=margins, sizes="n")
    assert ok.success, ok.report()
    bad = frame.with_columns(
        count=pl.Series([10, 0, 0]),  # fewer rows than persons in E
        people=pl.Series([4, 0, 2]),
        income_q25=pl.Series([70.0, 50.0, 3.0]),  # above the next quantile in N
        a_b_cov=pl.Series([0.21, None, None]),  # beyond Cauchy-Schwarz in N
        income_mean=pl.Series([None, None, 3.0]),  # null where the size is 10
    )
    text = failed(check_release(spec, bad, margins=margins, sizes="n"))
    where = ", ".join(f"{k}={{!r}}" for k in DERIVED)
    for message, group in [
        ("people: 1 of 3 groups above the released count of rows", "E"),
        ("income_q25: 1 of 3 groups above the next quantile", "N"),
        ("a_b_cov: 1 of 3 groups beyond Cauchy-Schwarz", "N"),
        ("income_mean: 1 of", "N"),
    ]:
        assert message in text, text
        assert where.format(*[group] * len(DERIVED)) in text, text
