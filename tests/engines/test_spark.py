"""The Spark adapter against the polars path, on a local Spark (``local[2,2]``).

`make test` (and so CI) installs pyspark and sets DPFRAME_REQUIRE_SPARK=1, so these run
there; elsewhere they are skipped when pyspark is missing (the ``spark`` fixture in
tests/conftest.py).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.datasets import REGIONS, synthetic_survey
from dpframe.engines import spark as dps
from dpframe.errors import InvalidDataError, InvalidParameterError

from ..conftest import spark_available

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def survey():
    return synthetic_survey(20_000).with_columns(
        pl.col("region").cast(pl.String), pl.col("age_band").cast(pl.String)
    )


def _spark_spec(folder, rows: int, budget: float = 3.0, seed: int | None = None):
    """The release test spec with declared categories (Spark strings carry none) and a
    survey whose Enums are cast to strings (as Spark reads them)."""
    from ..jobs.conftest import write_spec

    spec_path = write_spec(folder, rows=rows, budget=budget)
    text = (
        spec_path.read_text()
        .replace(
            '{ column = "region", epsilon = 0.5 }',
            '{ column = "region", epsilon = 0.5, categories = '
            '["North", "South", "East", "West", "Centre", "Islands"] }',
        )
        .replace(
            '{ column = "age_band", epsilon = 0.5 }',
            '{ column = "age_band", epsilon = 0.5, categories = ["18-34", "35-54", "55+"] }',
        )
        .replace(
            'column = "age_band"\nepsilon = 0.2',
            'column = "age_band"\ncategories = ["18-34", "35-54", "55+"]\nepsilon = 0.2',
        )
    )
    if seed is not None:
        text = text.replace('ledger = "ledger.db"', f'ledger = "ledger.db"\nseed = {seed}')
    spec_path.write_text(text)
    survey = pl.read_parquet(folder / "survey.parquet").with_columns(
        pl.col("region").cast(pl.String), pl.col("age_band").cast(pl.String)
    )
    survey.write_parquet(folder / "survey.parquet")
    return spec_path


def _pram(sdf, columns, path, *, accountant, keep=(), seed=None):
    """PRAM of whole Spark columns, written to ``path``, read back by Spark."""
    rel = dpframe.pram.release(sdf, columns, keep=keep, accountant=accountant, seed=seed)
    written = rel.write(path)
    return sdf.sparkSession.read.parquet(written)


def _grouped(frame, by, stats, **kw):
    return dpframe.group_by(frame, by, **kw).agg(*stats)


def _stats():
    return [
        dpframe.agg.count(epsilon=0.3),
        dpframe.agg.mean("income", lower=0, upper=200_000, epsilon=0.3),
        dpframe.agg.var("trust", lower=0, upper=10, epsilon=0.2),
        dpframe.agg.cov(
            "satisfaction", "trust", lower_x=0, upper_x=10, lower_y=0, upper_y=10, epsilon=0.2
        ),
    ]


def test_spark_aggregates_equal_polars_and_seeded_releases_match(spark, survey):
    margins = pl.DataFrame({"region": list(REGIONS)})
    sdf = spark.createDataFrame(survey.to_arrow())
    with pytest.warns(dpframe.UnsafeSeedWarning):
        a = _grouped(
            sdf,
            "region",
            _stats(),
            margins=margins,
            accountant=dpframe.Accountant(epsilon=5),
            seed=11,
        )
        b = dpframe.group_by(
            survey.lazy(),
            "region",
            margins=margins,
            accountant=dpframe.Accountant(epsilon=5),
            seed=11,
        ).agg(*_stats())
    ea, eb = a.exact_aggregates().sort("region"), b.exact_aggregates().sort("region")
    assert ea.columns == eb.columns and ea.height == len(REGIONS)  # "Islands" is empty
    for c in ea.columns[1:]:
        np.testing.assert_allclose(ea[c].to_numpy(), eb[c].to_numpy(), rtol=1e-9)
    assert a.collect().sort("region").equals(b.collect().sort("region"))
    assert [e.epsilon for e in a.ledger] == [e.epsilon for e in b.ledger]


def test_bad_input_is_refused_before_any_charge(spark, survey):
    margins = pl.DataFrame({"region": list(REGIONS)})
    acct = dpframe.Accountant(epsilon=5)
    with_null = survey.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("region")).alias("region")
    )
    with pytest.raises(InvalidDataError, match="nulls"):
        _grouped(
            spark.createDataFrame(with_null.to_arrow()),
            "region",
            [dpframe.agg.count(epsilon=0.3)],
            margins=margins,
            accountant=acct,
        ).collect()
    with pytest.raises(InvalidParameterError, match="not in the data"):
        _grouped(
            spark.createDataFrame(survey.to_arrow()),
            "region",
            [dpframe.agg.mean("nope", lower=0, upper=1, epsilon=0.3)],
            margins=margins,
            accountant=acct,
        ).collect()
    assert acct.ledger == ()


def test_pram_through_map_in_arrow_keeps_the_k_rr_rate(spark, survey, tmp_path):
    acct = dpframe.Accountant(epsilon=5)
    sdf = spark.createDataFrame(survey.with_row_index("id").cast({"id": pl.Int64}).to_arrow())
    cols = [{"column": "region", "epsilon": 1.0, "categories": list(REGIONS)}]
    out = _pram(sdf, cols, str(tmp_path / "out"), accountant=acct, keep=["id"])
    assert [e.mechanism for e in acct.ledger] == ["pram"]  # charged once, before the job
    released = pl.from_arrow(out.toArrow()).sort("id")
    kept = (released["region"] == survey["region"]).to_numpy()
    q = math.e / (math.e + len(REGIONS) - 1)
    assert abs(kept.mean() - q) < 4.5 * math.sqrt(q * (1 - q) / kept.size)
    assert set(released["region"]) <= set(REGIONS)
    # the result is what was written: another action draws no fresh noise
    assert pl.from_arrow(out.toArrow()).sort("id").equals(released)
    with pytest.raises(InvalidParameterError, match="categories="):
        _pram(sdf, [{"column": "region", "epsilon": 1.0}], str(tmp_path / "b"), accountant=acct)
    with pytest.raises(InvalidParameterError, match="already exists"):
        _pram(sdf, cols, str(tmp_path / "out"), accountant=acct)
    assert len(acct.ledger) == 1


def test_proportions_and_covariance_match_polars_with_the_same_seed(spark, survey):
    sdf = spark.createDataFrame(survey.to_arrow())
    cats = ["18-34", "35-54", "55+"]
    bounds = [(0, 10), (0, 10)]

    def both(make, *args, seed, **kw):
        """The same release through Spark and polars, each on a fresh accountant."""
        kw = {"n": survey.height, **kw}
        with pytest.warns(dpframe.UnsafeSeedWarning):
            releases = [
                make(data, *args, accountant=dpframe.Accountant(epsilon=5), seed=seed, **kw)
                for data in (sdf, survey)
            ]
            return [(r.collect(), r.ledger) for r in releases]

    (a, a_ledger), (b, b_ledger) = both(
        dpframe.proportions, "age_band", seed=3, epsilon=0.5, categories=cats
    )
    assert a.equals(b)
    assert [e.epsilon for e in a_ledger] == [e.epsilon for e in b_ledger]
    (c, c_ledger), (d, d_ledger) = both(
        dpframe.covariance_matrix, ["satisfaction", "trust"], bounds, seed=4, epsilon=0.6
    )
    np.testing.assert_allclose(c["trust"].to_numpy(), d["trust"].to_numpy(), rtol=1e-9)
    assert [e.epsilon for e in c_ledger] == [e.epsilon for e in d_ledger]
    acct = dpframe.Accountant(epsilon=5)
    with pytest.raises(InvalidDataError, match="outside the declared categories"):
        dpframe.proportions(
            sdf, "age_band", epsilon=0.5, n=survey.height, categories=cats[:2], accountant=acct
        ).collect()
    assert acct.ledger == ()


def test_the_same_spec_through_polars_and_spark(spark, tmp_path):
    """Same plan, same ledger charges, same schemas; seeded noise equal value for value."""
    from dpframe.jobs import load_spec, plan, run

    results = {}
    for engine in ("polars", "spark"):
        folder = tmp_path / engine
        folder.mkdir()
        spec_path = _spark_spec(folder, rows=5000, budget=5.0, seed=7)
        spec = load_spec(spec_path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpframe.UnsafeSeedWarning)  # seeded on purpose
            results[engine] = (
                plan(spec),
                run(spec, engine=engine, spark=spark, progress=False),
            )
    (pa, ra), (ps, rs) = results["polars"], results["spark"]
    assert pa.rows.equals(ps.rows)
    assert [(e.mechanism, e.epsilon) for e in ra.entries] == [
        (e.mechanism, e.epsilon) for e in rs.entries
    ]
    # every release draws from its own seeded source, so the non-PRAM outputs are equal
    # value for value even though Spark's PRAM draws from executor entropy in between
    for name, key in (("by_region", ["region", "age_band"]), ("age_shares", None)):
        a, b = pl.read_parquet(ra.outputs[name]), pl.read_parquet(rs.outputs[name])
        assert a.schema == b.schema
        assert (a.sort(key) if key else a).equals(b.sort(key) if key else b), name
    a, b = pl.read_parquet(ra.outputs["scores_cov"]), pl.read_parquet(rs.outputs["scores_cov"])
    assert a.schema == b.schema  # a float matrix: Spark sums in another order
    for c in ("satisfaction", "trust"):
        np.testing.assert_allclose(a[c].to_numpy(), b[c].to_numpy(), rtol=1e-9)
    micro_a = pl.read_parquet(ra.outputs["microdata"])
    micro_b = pl.read_parquet(str(rs.outputs["microdata"] / "*.parquet"))
    assert micro_a.schema == micro_b.schema and micro_a.height == micro_b.height


def test_cli_release_with_the_spark_engine(spark, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from dpframe.cli import app

    spec_path = _spark_spec(tmp_path, rows=3000)
    counted = []  # planned on Spark once, then run: the input's rows counted once
    real_rows = dps.SparkEngine.rows
    monkeypatch.setattr(dps.SparkEngine, "rows", lambda self: counted.append(1) or real_rows(self))
    res = CliRunner().invoke(app, ["release", str(spec_path), "--engine", "spark"])
    assert res.exit_code == 0, res.output
    assert len(counted) == 1
    prov = dpframe.read_provenance(tmp_path / "released" / "microdata.parquet")
    assert [e.mechanism for e in prov.entries] == ["pram", "pram"]
    assert set(prov.pram_designs) == {"region", "age_band"}  # estimate() works from the file
    micro = pl.read_parquet(str(tmp_path / "released" / "microdata.parquet" / "*.parquet"))
    est = dpframe.pram.estimate(micro["age_band"], prov.pram_designs["age_band"])
    assert abs(est.p_hat.sum() - 1) < 1e-9
    res = CliRunner().invoke(app, ["release", str(spec_path), "--engine", "flink"])
    assert res.exit_code in (1, 2)


def test_pram_columns_are_charged_together_or_not_at_all(spark, survey, tmp_path):
    acct = dpframe.Accountant(epsilon=1.0)
    sdf = spark.createDataFrame(survey.to_arrow())
    cols = [
        {"column": "region", "epsilon": 0.6, "categories": list(REGIONS)},
        {"column": "age_band", "epsilon": 0.6, "categories": ["18-34", "35-54", "55+"]},
    ]
    with pytest.raises(dpframe.BudgetExceededError):
        _pram(sdf, cols, str(tmp_path / "out"), accountant=acct)  # 1.2 > 1: none charged
    assert acct.ledger == () and not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------
# PRAM on the executors: the mechanism's law, fresh noise per partition, one charge
# ---------------------------------------------------------------------------------------


def test_pram_through_map_in_arrow_keeps_the_likelihood_ratio_bound(spark, tmp_path):
    """P(Z = z | x) / P(Z = z | x') <= e^eps for all x, x', z, through mapInArrow.

    As the polars audit (tests/test_pram.py): 200k records of each of S = 4 categories,
    spread over 8 partitions; every log ratio of empirical frequencies is tested
    one-sidedly against eps at z = 4.5 standard errors (delta method), the bound must be
    attained within the same error, and every row of the empirical matrix must fit the
    design's exact matrix (chi-square, p > 1e-4).
    """
    from pyspark.sql import functions as sf
    from scipy import stats

    s, eps, per = 4, 1.0, 200_000
    cats = ["a", "b", "c", "d"]
    sdf = (
        spark.range(s * per, numPartitions=8)
        .withColumn(
            "x", sf.element_at(sf.array(*map(sf.lit, cats)), (sf.col("id") % s + 1).cast("int"))
        )
        .withColumn("truth", sf.col("x"))
    )
    acct = dpframe.Accountant(epsilon=eps)
    cols = [{"column": "x", "epsilon": eps, "categories": cats}]
    out = _pram(sdf, cols, str(tmp_path / "out"), accountant=acct, keep=["truth"])
    table = pl.from_arrow(out.groupBy("truth", "x").count().toArrow())
    counts = np.zeros((s, s))
    for t, z, k in table.iter_rows():
        counts[cats.index(t), cats.index(z)] = k
    assert (counts.sum(axis=1) == per).all()
    freq = counts / per
    worst = -np.inf
    for i in range(s):
        for j in range(s):
            if i != j:
                log_ratio = np.log(freq[i] / freq[j])
                se = np.sqrt((1 - freq[i]) / (per * freq[i]) + (1 - freq[j]) / (per * freq[j]))
                assert np.all(log_ratio - 4.5 * se <= eps), (i, j, log_ratio, se)
                worst = max(worst, float((log_ratio + 4.5 * se).max()))
    assert worst >= eps
    exact = dpframe.pram.krr(s, eps).matrix
    for i in range(s):
        assert stats.chisquare(counts[i], per * exact[i]).pvalue > 1e-4


def test_two_partitions_never_repeat_noise(spark, tmp_path):
    """8 partitions, 2 Arrow batches each, all holding the same records in the same order.

    A fixed or shared seed would give equal outputs position by position. Independent
    draws agree at a position with probability r = sum_z P(z | x)^2; every pair of
    partitions (and of the two batches of a partition) must agree at a rate within
    4.5 SE of r, and no two may be equal.
    """
    from pyspark.sql import functions as sf

    parts, m, s, eps = 8, 20_000, 4, 0.5
    cats = list(range(s))
    sdf = spark.range(parts * m, numPartitions=parts).withColumn(
        "x", (sf.col("id") % s).cast("long")
    )
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(m // 2))
    try:
        out = _pram(
            sdf,
            [{"column": "x", "epsilon": eps, "categories": cats}],
            str(tmp_path / "out"),
            accountant=dpframe.Accountant(epsilon=eps),
            keep=["id"],
        )
        z = pl.from_arrow(out.toArrow()).sort("id")["x"].to_numpy().reshape(parts * 2, m // 2)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    p = dpframe.pram.krr(s, eps).matrix[0]
    r = float((p**2).sum())
    se = math.sqrt(r * (1 - r) / (m // 2))
    rates = [float((z[a] == z[b]).mean()) for a in range(len(z)) for b in range(a + 1, len(z))]
    assert max(rates) < 1
    assert all(abs(rate - r) < 4.5 * se for rate in rates), (r, min(rates), max(rates))


def test_a_retried_task_is_charged_once_and_written_once(spark, tmp_path):
    """The first attempt of one task fails after PRAM randomized a batch; Spark retries it.

    The ledger holds one charge (made on the driver before the job), and the output holds
    each record once: the failed attempt's draws were never committed.
    """
    from pyspark import TaskContext

    n, cats = 40_000, ["a", "b", "c"]
    marker = tmp_path / "first-attempt-failed"
    base = spark.createDataFrame(
        pl.DataFrame({"id": range(n), "x": [cats[i % 3] for i in range(n)]}).to_arrow()
    ).repartition(4)

    def fail_once(batches):  # the second batch of partition 0 fails on the first attempt
        ctx = TaskContext.get()
        for i, batch in enumerate(batches):
            if i == 1 and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
                marker.touch()
                raise RuntimeError("injected failure of the first attempt")
            yield batch

    flaky = base.mapInArrow(fail_once, base.schema)
    acct = dpframe.Accountant(epsilon=1.0)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        out = _pram(
            flaky,
            [{"column": "x", "epsilon": 1.0, "categories": cats}],
            str(tmp_path / "out"),
            accountant=acct,
            keep=["id"],
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert marker.exists()  # the first attempt did fail
    released = pl.from_arrow(out.toArrow())
    assert released.height == n and released["id"].n_unique() == n
    assert [e.mechanism for e in acct.ledger] == ["pram"]


# ---------------------------------------------------------------------------------------
# The release runner on Spark: the Python API on a Spark DataFrame, and bad input
# ---------------------------------------------------------------------------------------


def _spec_dict(folder, budget: float = 3.0, seed: int | None = 5) -> dict:
    """A spec without an input path (the frame is passed in), for both engines."""
    import tomllib

    data = tomllib.loads(_spark_spec(folder, rows=2000, budget=budget).read_text())
    data.pop("input")
    if seed is None:
        data["privacy"].pop("seed", None)
    else:
        data["privacy"]["seed"] = seed
    return data


def test_the_python_api_on_a_spark_dataframe(spark, tmp_path):
    from dpframe.jobs import parse_spec, plan, run

    outputs = {}
    for engine in ("polars", "spark"):
        folder = tmp_path / engine
        folder.mkdir()
        data = _spec_dict(folder)
        survey = pl.read_parquet(folder / "survey.parquet")
        frame = spark.createDataFrame(survey.to_arrow()) if engine == "spark" else survey.lazy()
        spec = parse_spec(data, base=folder, frame=frame)
        the_plan = plan(spec)
        result = run(spec, progress=False)
        outputs[engine] = (the_plan, result)
    (pa, ra), (ps, rs) = outputs["polars"], outputs["spark"]
    assert pa.rows.equals(ps.rows) and pa.input_rows == ps.input_rows == 2000
    key = ["region", "age_band"]
    a, b = pl.read_parquet(ra.outputs["by_region"]), pl.read_parquet(rs.outputs["by_region"])
    assert a.sort(key).equals(b.sort(key))
    from dpframe.jobs.spec import SpecError

    with pytest.raises(SpecError, match="engine='spark'"):
        run(parse_spec(_spec_dict(tmp_path), base=tmp_path, frame=spark.range(3)), engine="polars")


def run_spark(spec):
    from dpframe.jobs import run

    return run(spec, engine="spark", progress=False)


def _ledger_untouched(folder) -> None:
    ledger = folder / "ledger.db"
    assert not ledger.exists() or dpframe.Accountant.open(ledger).ledger == ()
    released = folder / "released"
    assert not released.exists() or not any(released.iterdir())


def test_release_refuses_missing_columns_and_null_keys_before_any_charge(spark, tmp_path):
    from dpframe.jobs import parse_spec
    from dpframe.jobs.spec import SpecError

    data = _spec_dict(tmp_path, seed=None)
    survey = pl.read_parquet(tmp_path / "survey.parquet")
    no_income = spark.createDataFrame(survey.drop("income").to_arrow())
    with pytest.raises((SpecError, InvalidParameterError), match="income"):
        run_spark(parse_spec(data, base=tmp_path, frame=no_income))
    _ledger_untouched(tmp_path)
    null_key = survey.with_columns(
        pl.when(pl.int_range(pl.len()) == 7)
        .then(None)
        .otherwise(pl.col("age_band"))
        .alias("age_band")
    )
    with pytest.raises(InvalidDataError, match="null"):
        run_spark(parse_spec(data, base=tmp_path, frame=spark.createDataFrame(null_key.to_arrow())))
    _ledger_untouched(tmp_path)
    bad_category = survey.with_columns(
        pl.when(pl.int_range(pl.len()) == 9)
        .then(pl.lit("Atlantis"))
        .otherwise(pl.col("region"))
        .alias("region")
    )
    bad_frame = spark.createDataFrame(bad_category.to_arrow())
    with pytest.raises(InvalidDataError, match="not in margins"):  # the grouped release
        run_spark(parse_spec(data, base=tmp_path, frame=bad_frame))
    _ledger_untouched(tmp_path)
    only_pram = {**data, "release": [r for r in data["release"] if r["kind"] == "pram"]}
    with pytest.raises(InvalidDataError, match="Atlantis"):  # PRAM's preflight
        run_spark(parse_spec(only_pram, base=tmp_path, frame=bad_frame))
    _ledger_untouched(tmp_path)
    # a NaN in a covariance column (Spark's clipping would turn it into the upper bound)
    nan = survey.with_columns(
        pl.when(pl.int_range(pl.len()) == 11)
        .then(float("nan"))
        .otherwise(pl.col("satisfaction"))
        .alias("satisfaction")
    )
    only_cov = {**data, "release": [r for r in data["release"] if r["kind"] == "covariance"]}
    with pytest.raises(InvalidDataError, match="NaN"):
        run_spark(parse_spec(only_cov, base=tmp_path, frame=spark.createDataFrame(nan.to_arrow())))
    _ledger_untouched(tmp_path)
    # bad PRAM settings in a later release: found before the grouped release charges
    later = {**data, "release": [dict(r) for r in data["release"]]}
    pram_release = next(r for r in later["release"] if r["kind"] == "pram")
    pram_release["columns"] = [{**pram_release["columns"][0], "prior": {"North": 1.0, "Mars": 2.0}}]
    with pytest.raises(Exception, match="Mars"):
        run_spark(parse_spec(later, base=tmp_path, frame=spark.createDataFrame(survey.to_arrow())))
    _ledger_untouched(tmp_path)


def test_pram_alone_checks_the_data_before_the_charge_and_draws_afresh_each_run(
    spark, survey, tmp_path
):
    sdf = spark.createDataFrame(survey.with_row_index("id").cast({"id": pl.Int64}).to_arrow())
    acct = dpframe.Accountant(epsilon=5)
    with pytest.raises(InvalidDataError, match="outside the declared categories"):
        _pram(
            sdf,
            [{"column": "region", "epsilon": 1.0, "categories": ["North", "South"]}],
            str(tmp_path / "a"),
            accountant=acct,
        )
    with pytest.raises(InvalidDataError, match="cast the column"):
        _pram(
            sdf,
            [{"column": "region", "epsilon": 1.0, "categories": [1, 2]}],
            str(tmp_path / "a"),
            accountant=acct,
        )
    assert acct.ledger == () and not (tmp_path / "a").exists()
    # two runs on the same data: independent draws agree at rate sum_z P(z | x)^2
    cols = [{"column": "region", "epsilon": 0.5, "categories": list(REGIONS)}]
    runs = [
        pl.from_arrow(
            _pram(sdf, cols, str(tmp_path / f"r{i}"), accountant=acct, keep=["id"]).toArrow()
        ).sort("id")["region"]
        for i in range(2)
    ]
    p = dpframe.pram.krr(len(REGIONS), 0.5).matrix[0]
    r = float((p**2).sum())
    rate = float((runs[0] == runs[1]).mean())
    assert abs(rate - r) < 4.5 * math.sqrt(r * (1 - r) / survey.height), (rate, r)


def test_grouped_keys_that_do_not_survive_the_cast_are_refused(spark):
    sdf = spark.createDataFrame(pl.DataFrame({"k": [1.5, 1.0, 2.0, 2.7]}).to_arrow())
    acct = dpframe.Accountant(epsilon=1)
    with pytest.raises(InvalidDataError, match="margins' dtype"):
        _grouped(
            sdf,
            "k",
            [dpframe.agg.count(epsilon=0.5)],
            margins=pl.DataFrame({"k": [1, 2]}),
            accountant=acct,
        ).collect()
    assert acct.ledger == ()


def test_no_java_is_a_clear_error_before_any_charge(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from dpframe.cli import app
    from dpframe.jobs import load_spec

    if not spark_available():
        pytest.skip("pyspark is not installed")
    spec_path = _spark_spec(tmp_path, rows=500)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-java-here"))
    with pytest.raises(InvalidParameterError, match="Java"):
        dps.local_session()
    with pytest.raises(InvalidParameterError, match="Java"):
        run_spark(load_spec(spec_path))
    res = CliRunner().invoke(app, ["release", str(spec_path), "--engine", "spark"])
    assert res.exit_code == 2 and "Java" in res.output
    _ledger_untouched(tmp_path)


def test_enum_columns_of_the_file_declare_the_categories(spark, tmp_path):
    """A spec without categories runs on Spark when the Parquet file's Enums declare them
    (Spark reads them as strings; the categories come from the file's schema, as on polars).
    """
    from dpframe.jobs import load_spec

    from ..jobs.conftest import write_spec

    spec = load_spec(write_spec(tmp_path, rows=1500, budget=3.0))
    result = run_spark(spec)
    micro = pl.read_parquet(str(result.outputs["microdata"] / "*.parquet"))
    assert micro.height == 1500 and set(micro["region"]) <= set(REGIONS)
    shares = pl.read_parquet(result.outputs["age_shares"])
    assert shares["age_band"].to_list() == ["18-34", "35-54", "55+"]
    file_schema = pl.read_parquet(tmp_path / "survey.parquet").schema
    by_region = pl.read_parquet(result.outputs["by_region"])
    assert by_region.schema["region"] == file_schema["region"]
    assert shares.schema["age_band"] == file_schema["age_band"]  # Enum, as on polars


def test_great_expectations_imports_under_python_c_with_pyspark_installed():
    """pyspark without its Connect dependencies makes `import great_expectations` exit 0
    from `python -c` (it takes that for a doctest run); dpframe[spark] installs them."""
    import subprocess
    import sys

    if not spark_available():
        pytest.skip("pyspark is not installed")
    code = "import great_expectations; print('imported')"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "imported", res.stderr[-2000:]


def test_dp_prior_on_spark_matches_polars_and_feeds_pram(spark, survey, tmp_path):
    sdf = spark.createDataFrame(survey.to_arrow())
    cats = list(REGIONS)
    a_acct, b_acct = dpframe.Accountant(epsilon=2), dpframe.Accountant(epsilon=2)
    a = dpframe.pram.dp_prior(sdf, "region", 0.2, categories=cats, accountant=a_acct, seed=9)
    b = dpframe.pram.dp_prior(survey, "region", 0.2, categories=cats, accountant=b_acct, seed=9)
    assert a == b and list(a) == cats and math.isclose(sum(a.values()), 1.0)
    assert [(e.mechanism, e.epsilon) for e in a_acct.ledger] == [("pram_prior_histogram", 0.2)]
    cols = [{"column": "region", "epsilon": 0.8, "categories": cats, "prior": a}]
    out = _pram(sdf, cols, str(tmp_path / "out"), accountant=a_acct)
    assert out.count() == survey.height and a_acct.spent.epsilon == pytest.approx(1.0)
    with pytest.raises(InvalidParameterError, match="dp_prior"):
        _pram(sdf, [{**cols[0], "prior": "dp"}], str(tmp_path / "b"), accountant=a_acct)
    with pytest.raises(InvalidDataError, match="outside the declared categories"):
        dpframe.pram.dp_prior(sdf, "region", 0.2, categories=cats[:3], accountant=a_acct)
    assert a_acct.spent.epsilon == pytest.approx(1.0)  # refusals spend nothing


def test_pram_under_a_person_unit_on_spark_checks_each_persons_rows(spark, tmp_path):
    """The engines agree on the most rows a person has; a person with more than max_rows
    is refused before the charge, on Spark as on polars."""
    from dpframe.engines.polars import PolarsEngine
    from dpframe.engines.spark import SparkEngine

    people = pl.DataFrame({"pid": [1, 1, 2, 3, 3, 3], "c": ["a", "b", "a", "c", "c", "b"]})
    sdf = spark.createDataFrame(people.to_pandas())
    assert SparkEngine(sdf).largest_person_rows("pid") == 3
    assert PolarsEngine(people).largest_person_rows("pid") == 3
    cols = [{"column": "c", "epsilon": 1.0, "categories": ["a", "b", "c"]}]
    acct = dpframe.Accountant(epsilon=2.0, unit="pid", max_rows=2)
    with pytest.raises(InvalidDataError, match="more than max_rows=2"):
        dpframe.pram.release(sdf, cols, accountant=acct).write(tmp_path / "out")
    assert acct.ledger == () and not (tmp_path / "out").exists()
    nulls = spark.createDataFrame(
        people.with_columns(pid=pl.when(pl.col("pid") == 2).then(None).otherwise("pid")).to_pandas()
    )
    with pytest.raises(InvalidDataError, match="holds nulls"):
        SparkEngine(nulls).largest_person_rows("pid")
    acct = dpframe.Accountant(epsilon=2.0, unit="pid", max_rows=3)
    dpframe.pram.release(sdf, cols, accountant=acct).write(tmp_path / "ok")
    assert acct.ledger[0].details["rows_per_person"] == 3


def test_a_session_dpframe_starts_prints_no_spark_warnings_or_stage_bars(tmp_path):
    """`dpframe release --engine spark --no-progress` must print only dpframe's lines:
    Spark's startup WARNs, its "Setting default log level" note and its console stage
    bars are noise to a scheduler's log. (The JVM's own note on incubator modules stays.)"""
    import subprocess
    import sys

    if not spark_available():
        pytest.skip("pyspark is not installed: pip install -e '.[spark]' (make test does)")
    program = (
        "from dpframe.engines.spark import local_session\n"
        "s = local_session()\n"
        "print(s.range(200000).repartition(8).selectExpr('sum(id) as t').collect()[0].t)\n"
        "s.stop()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sum(range(200_000)))
    noise = [
        line
        for line in done.stderr.splitlines()
        if " WARN " in line or "log level" in line or "[Stage" in line or "log4j" in line
    ]
    assert not noise, done.stderr


def test_pram_on_spark_checks_each_persons_rows_on_what_it_randomized(spark, tmp_path, monkeypatch):
    """Spark evaluates a DataFrame afresh at every action: the rows per person counted
    before the charge need not be the rows the randomizing job reads. Here the count
    before the charge is made to see 2 rows a person (as an input that changes between
    reads would); the job's own rows hold a person with 3: nothing is published, and the
    error says the budget is spent."""
    from dpframe.engines.spark import SparkEngine
    from dpframe.errors import PublishFailedError

    monkeypatch.setattr(SparkEngine, "largest_person_rows", lambda self, person: 2)
    people = pl.DataFrame({"pid": [1, 1, 1, 2], "c": ["a", "b", "a", "c"]})
    sdf = spark.createDataFrame(people.to_pandas())
    cols = [{"column": "c", "epsilon": 1.0, "categories": ["a", "b", "c"]}]
    for keep in (["pid"], []):
        acct = dpframe.Accountant(epsilon=2.0, unit="pid", max_rows=2)
        out = tmp_path / f"out{len(keep)}"
        rel = dpframe.pram.release(sdf, cols, accountant=acct, keep=keep)
        with pytest.raises(PublishFailedError, match="has 3 rows, more than max_rows=2"):
            rel.write(out)
        assert acct.spent.epsilon == 1.0 and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_nan_person_ids_are_refused_on_spark_as_on_polars(spark, tmp_path):
    """Issue 31: NaN ids were one person on both engines (Spark groups NaN with NaN too),
    so adding one person with 3 NaN-id rows moved the pre-noise counts [2, 1] to [1, 2]
    under max_rows = max_groups = 1: an l1 change of 2 against a charged 1. Refused
    before any charge, for a grouped release and for PRAM microdata."""
    nan = float("nan")
    frame = pl.DataFrame(
        {"pid": [nan, 1.0, 2.0, nan, nan, nan], "g": ["a", "a", "b", "b", "b", "b"]}
    )
    sdf = spark.createDataFrame(frame.to_arrow())
    acct = dpframe.Accountant(epsilon=2.0, neighbours="add_remove")
    margins = pl.DataFrame({"g": ["a", "b"]})
    grouped = dpframe.group_by(
        sdf, "g", margins=margins, unit="pid", max_rows=1, max_groups=1, accountant=acct
    ).agg(dpframe.agg.count(epsilon=1.0))
    with pytest.raises(InvalidDataError, match="person column 'pid' holds nulls, NaN"):
        grouped.collect()
    acct = dpframe.Accountant(epsilon=2.0)
    cols = [{"column": "g", "epsilon": 1.0, "categories": ["a", "b"]}]
    rel = dpframe.pram.release(sdf, cols, unit="pid", max_rows=3, accountant=acct)
    with pytest.raises(InvalidDataError, match="person column 'pid' holds nulls, NaN"):
        rel.write(str(tmp_path / "out"))
    assert acct.ledger == () and not (tmp_path / "out").exists()


def test_an_interrupted_job_cancels_the_spark_jobs_still_running(spark):
    """A dpframe job replaces PySpark's Ctrl-C handler (which cancels running jobs) while
    it runs; on an interrupt the job asks the engine to stop its work: a Spark job still
    running (here one that would take minutes) is cancelled, not left writing."""
    import threading
    import time

    from dpframe.engines.spark import SparkEngine

    failed: list[BaseException] = []

    def long_job() -> None:
        slow = spark.range(0, 2_000, numPartitions=2).rdd.map(lambda x: time.sleep(0.5) or x)
        try:
            slow.count()  # 500 s of sleeping on 2 cores if nothing cancels it
        except Exception as exc:
            failed.append(exc)

    worker = threading.Thread(target=long_job)
    worker.start()
    while not spark.sparkContext.statusTracker().getActiveJobsIds():
        time.sleep(0.05)
    SparkEngine(spark.range(1)).cancel_work()
    worker.join(timeout=60)
    assert not worker.is_alive() and failed and "cancel" in str(failed[0]).lower()


def test_covariance_inputs_keep_the_pairs_apart(spark) -> None:
    """Each pair's covariance named by the columns' places: with names joined by ``|``
    every pair of these -- (0, 1), (1, 0), (2, 3), (3, 2) -- was named alike, and Spark
    read the first one's covariance for all (a symmetric mix-up: a wide pair's
    covariance released with a narrow pair's noise). As polars computes them."""
    from dpframe.engines.polars import PolarsEngine

    names = ["t|t|t|t|t|t", "t", "t|t", "t|t|t|t|t"]
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 100, 500)
    columns = [a, a + rng.normal(0, 5, 500), rng.uniform(0, 1, 500), rng.uniform(0, 1, 500)]
    frame = pl.DataFrame(dict(zip(names, columns, strict=True)))
    bounds = [(0, 100), (0, 100), (0, 1), (0, 1)]
    want = PolarsEngine(frame.lazy()).covariance_inputs(names, bounds)
    got = dps.SparkEngine(spark.createDataFrame(frame.to_arrow())).covariance_inputs(names, bounds)
    np.testing.assert_allclose(got.cov, want.cov, rtol=1e-9, atol=1e-12)
    assert abs(got.cov[2, 3]) < 0.02  # two independent uniforms, not the wide pair's
    assert got.rows == want.rows and got.bad == want.bad
