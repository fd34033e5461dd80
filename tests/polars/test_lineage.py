"""The runner's lineage: what a query holding a release may let out, decided from its plan.

The reproductions of the third attack (each accepted and charged before, publishing raw
values or a private count), then a fuzz over random queries built around a release, whose
generator knows which of them are unsafe.
"""

from __future__ import annotations

import tempfile

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.errors import InvalidParameterError, LineageError

CATS = ["a", "b", "c"]


@pytest.fixture(scope="module", params=["lazy", "scan_frame"])
def records(request) -> pl.LazyFrame:
    """The records, as ``df.lazy()`` and as ``dpframe.scan_frame(df)``: every verdict of
    this file holds for both sources."""
    rng = np.random.default_rng(31)
    n = 600
    df = pl.DataFrame(
        {
            "c": rng.choice(CATS, n),
            "income": rng.integers(0, 200_000, n),
            "region": rng.choice(["N", "S", "E"], n),
        }
    )
    return df.lazy() if request.param == "lazy" else dpframe.scan_frame(df)


def _refused(q, acct, tmp_path=None, **kw) -> str:
    """The query is refused by the runner (collect and sink) with nothing charged."""
    with pytest.raises(InvalidParameterError) as info:
        dpframe.collect(q, **kw)
    if tmp_path is not None:
        with pytest.raises(InvalidParameterError):
            dpframe.sink_parquet(q, tmp_path / "out.parquet", **kw)
        assert not (tmp_path / "out.parquet").exists()
    assert acct.ledger == ()
    return str(info.value)


# -- the reproductions -------------------------------------------------------------------


def test_an_expression_that_recognises_the_stand_in_cannot_publish_the_raw_column(
    records, tmp_path
):
    # old: accepted, charged 0.01, and the raw column published on 100% of the rows
    acct = dpframe.Accountant(epsilon=5)
    x = pl.col("x")
    alt = [(x.shift(j) != x.shift(j + 1)).fill_null(True) for j in range(-12, 12)]
    q = records.with_columns(
        pl.col("c").dp.pram(0.01, categories=CATS, accountant=acct).alias("x")
    ).select(pl.when(pl.all_horizontal(alt)).then(x).otherwise(pl.col("c")).alias("c"))
    assert "selected or renamed" in _refused(q, acct, tmp_path)


def test_a_column_release_cannot_be_switched_for_its_input_by_a_when(records):
    acct = dpframe.Accountant(epsilon=5)
    stats = pl.LazyFrame({"v": np.arange(20.0)})
    x = pl.col("x")
    q = stats.with_columns(
        pl.col("v")
        .dp.laplace(epsilon=0.001, sensitivity=1, composition="parallel", accountant=acct)
        .alias("x")
    ).select(pl.when(x.diff() == 1).then(x).otherwise(pl.col("v")).alias("v"))
    _refused(q, acct)


@pytest.mark.parametrize("where", ["before", "after"])
def test_rows_selected_by_a_private_column_are_refused(records, tmp_path, where):
    # old: accepted, and the published row count was the exact count of income > 100k
    acct = dpframe.Accountant(epsilon=5)
    pram = pl.col("region").dp.pram(0.1, categories=["N", "S", "E"], accountant=acct)
    if where == "before":
        q = records.filter(pl.col("income") > 100_000).select(pram)
    else:  # written after the release: polars pushes it down
        q = records.select(pram, "income").filter(pl.col("income") > 100_000).select("region")
    message = _refused(q, acct, tmp_path)
    assert "['income']" in message and "how many records" in message


def test_rows_ordered_by_a_private_column_are_refused(records, tmp_path):
    # old: with public=["i"] the rows came out in raw order, and every raw value with them
    acct = dpframe.Accountant(epsilon=5)
    q = (
        records.with_row_index("i")
        .with_columns(pl.col("c").dp.pram(0.01, categories=CATS, accountant=acct).alias("p"))
        .sort("c", maintain_order=True)
        .select("i", "p")
    )
    message = _refused(q, acct, tmp_path, public=["i"])
    assert "orders rows by column(s) ['c']" in message


def test_values_ordered_by_a_private_column_inside_an_expression_are_refused(records):
    acct = dpframe.Accountant(epsilon=5)
    q = records.with_row_index("i").select(
        pl.col("c").dp.pram(0.5, categories=CATS, accountant=acct),
        pl.col("i").sort_by("income"),
    )
    assert "['income']" in _refused(q, acct, public=["i"])


@pytest.mark.parametrize(
    "make",
    [
        lambda lf: lf.select(pl.col("c").shift(1).fill_null("a")),
        lambda lf: lf.select(pl.col("c").sort()),
        lambda lf: lf.select(pl.col("c").first().over("region")),
        lambda lf: pl.concat([lf, lf]),
        lambda lf: lf.join(pl.LazyFrame({"region": ["N", "N"]}), on="region"),
        lambda lf: lf.group_by("region").agg(pl.col("c").first()),
    ],
    ids=["shift", "sort", "window", "concat-self", "join-fanout", "group_by"],
)
def test_a_row_wise_release_of_a_value_another_row_may_repeat_is_refused(records, make):
    acct = dpframe.Accountant(epsilon=5)
    q = make(records).select(pl.col("c").dp.pram(0.5, categories=CATS, accountant=acct))
    with pytest.raises(InvalidParameterError):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_what_the_lineage_admits(records):
    acct = dpframe.Accountant(epsilon=5)
    pram = pl.col("c").str.to_uppercase().dp.pram(0.5, categories=["A", "B", "C"], accountant=acct)
    q = (
        records.with_row_index("i")
        .filter(pl.col("region") == "N")  # a public column: its count is published anyway
        .head(100)
        .with_columns(pram.alias("p"))
        .sort("i")
        .select("i", "region", pl.col("p").alias("released"))
    )
    out = dpframe.collect(q, public=["i", "region"])
    assert out.columns == ["i", "region", "released"]
    assert set(out["region"]) == {"N"} and out.height == min(
        100, records.filter(pl.col("region") == "N").collect().height
    )
    assert acct.spent.epsilon == pytest.approx(0.5)


def test_a_column_release_of_grouped_statistics_over_public_keys(records):
    acct = dpframe.Accountant(epsilon=5)
    counts = records.group_by("region").agg(pl.len().cast(pl.Float64).alias("n"))
    noisy = pl.col("n").dp.laplace(
        epsilon=0.5, sensitivity=1, composition="parallel", accountant=acct
    )
    with pytest.raises(LineageError, match="'region'"):  # the keys are data too
        dpframe.collect(counts.select("region", noisy))
    out = dpframe.collect(counts.select("region", noisy), public=["region"])
    assert out.height == 3 and acct.spent.epsilon == pytest.approx(0.5)


# -- the fuzz -------------------------------------------------------------------------


def _derive(kind: str) -> tuple[pl.Expr, bool]:
    """A column computed from ``c``, and whether it is row-wise (aligned)."""
    c = pl.col("c")
    return {
        "when": (pl.when(pl.col("income") > 150_000).then(pl.lit("a")).otherwise(c), True),
        "cast": (c.cast(pl.Categorical).cast(pl.String), True),
        "struct": (pl.struct(c, pl.col("income")).struct.field("c"), True),
        "shift": (c.shift(1).fill_null("a"), False),
        "over": (c.first().over("region"), False),
        "sorted": (c.sort(), False),
    }[kind]


def _random_query(rng: np.random.Generator, lf: pl.LazyFrame, acct):
    """A random query around one PRAM release and what is known of it.

    Returns ``(query, public, unsafe, plain)``: ``unsafe`` when some output is neither
    the release's own output nor public, or some row selection or order depends on a
    column that is not published as it is, or the release's input may repeat a record;
    ``plain`` when it is certainly safe and uses only steps the lineage follows.
    """
    unsafe, plain = False, True
    has_index = bool(rng.integers(2))
    q = lf.with_row_index("i") if has_index else lf
    keys: list[str] = []  # columns rows are selected or ordered by
    aligned = True
    source = "c"
    for _ in range(rng.integers(0, 3)):  # before the release
        step = rng.choice(["filter", "sort", "head", "derive", "join", "sample"])
        if step == "filter":
            col = str(rng.choice(["income", "region"] + (["i"] if has_index else [])))
            q = q.filter(pl.col(col) > (0 if col != "region" else pl.lit("E")))
            keys.append(col)
        elif step == "sort":
            col = str(rng.choice(["income", "region", "c"] + (["i"] if has_index else [])))
            q = q.sort(col, maintain_order=True)
            keys.append(col)
        elif step == "head":
            q = q.head(int(rng.integers(50, 500)))
        elif step == "derive":
            kind = str(rng.choice(["when", "cast", "struct", "shift", "over", "sorted"]))
            expr, row_wise = _derive(kind)
            q = q.with_columns(expr.alias("d"))
            source, aligned = "d", aligned and row_wise
            if kind in ("over", "sorted"):
                keys.append("region" if kind == "over" else "c")
                plain = False
        elif step == "join":
            fan = bool(rng.integers(2))
            look = pl.LazyFrame({"region": ["N", "S", "E"] + (["N"] if fan else [])})
            q = q.join(look, on="region", how="left", validate="m:m" if fan else "m:1")
            aligned = aligned and not fan
            plain = False  # the lookup's own key column is not published
        else:  # sample: a row selection that reads no column, but polars draws it
            q = q.select(pl.all().sample(n=100, seed=int(rng.integers(1000))))
            plain = False
    if not aligned:
        unsafe = True
    pram = pl.col(source).dp.pram(0.5, categories=CATS, accountant=acct).alias("p")
    q = q.with_columns(pram)
    for _ in range(rng.integers(0, 3)):  # after the release
        step = rng.choice(["filter", "sort", "head"])
        col = str(rng.choice(["income", "region", "p"] + (["i"] if has_index else [])))
        if step == "filter":
            q = q.filter(pl.col(col) != pl.lit("zz") if col in ("region", "p") else pl.col(col) > 0)
            keys.append(col)
        elif step == "sort":
            q = q.sort(col, maintain_order=True)
            keys.append(col)
        else:
            q = q.head(int(rng.integers(50, 500)))
    outputs: dict[str, tuple[pl.Expr, str]] = {"p": (pl.col("p"), "release")}
    choices = {
        "p2": (pl.col("p").alias("p2"), "release"),
        "mixed": (
            pl.when(pl.col("income") > 1).then(pl.col("p")).otherwise(pl.col("c")).alias("mixed"),
            "computed",
        ),
        "region": (pl.col("region"), "raw"),
        "income": (pl.col("income"), "raw"),
        "c": (pl.col("c"), "raw"),
        "pcast": (pl.col("p").cast(pl.Categorical).alias("pcast"), "computed"),
    }
    if has_index:
        choices["i"] = (pl.col("i"), "raw")
    for name in rng.choice(sorted(choices), size=int(rng.integers(0, 3)), replace=False):
        outputs[str(name)] = choices[str(name)]
    public = [n for n, (_, kind) in outputs.items() if kind != "release" and rng.random() < 0.5]
    for name, (_, kind) in outputs.items():
        if kind != "release" and name not in public:
            unsafe = True
        if kind == "computed":
            plain = False
    published_raw = {n for n, (_, kind) in outputs.items() if kind == "raw" and n in public}
    for col in keys:
        if col == "p":
            plain = False  # post-processing of the release itself: refused, not unsafe
        elif col != "i" and col not in published_raw:
            unsafe = True
    q = q.select([e for e, _ in outputs.values()])
    return q, public, unsafe, plain and not unsafe


def test_fuzz_only_release_outputs_and_public_columns_leave(records):
    rng = np.random.default_rng(20261127)
    counts = {"unsafe": 0, "plain": 0}
    for k in range(200):
        acct = dpframe.Accountant(epsilon=1000)
        q, public, unsafe, plain = _random_query(rng, records, acct)
        try:
            dpframe.collect(q, public=public)
            accepted = True
        except InvalidParameterError:
            accepted = False
        context = f"query {k}: {q.explain(optimized=False)}\npublic={public}"
        if unsafe:
            counts["unsafe"] += 1
            assert not accepted, "an unsafe query was released\n" + context
            assert acct.ledger == (), context
        if plain:
            counts["plain"] += 1
            assert accepted, "a safe query was refused\n" + context
    # the fuzz reaches both kinds often enough to mean something
    assert counts["unsafe"] >= 50 and counts["plain"] >= 20, counts


# -- the review's breaks of the first lineage (names re-derived, regex, double reads) -----


def _review_queries(acct):
    pram = lambda col, cats=("a", "b"): pl.col(col).dp.pram(  # noqa: E731
        1.0, categories=list(cats), accountant=acct
    )
    n = 40
    lf = pl.LazyFrame({"c": ["a", "b"] * (n // 2), "income": list(range(n))})
    small = pl.LazyFrame({"c": ["a", "b", "a", "b"], "income": [11, 22, 33, 44]})
    # polars names when/then after its then-branch: a walk that names it otherwise
    # took this for a filter on the row index
    yield (
        "when-named-by-then",
        lf.with_row_index("i")
        .with_columns(pl.when(pl.col("income") > 30).then(pl.col("i")).otherwise(None))
        .filter(pl.col("i").is_not_null())
        .select(pram("c")),
        [],
    )
    yield (
        "when-overwrites-release",
        small.with_columns(pram("c").alias("p"))
        .with_columns(pl.col("p").alias("q"))
        .with_columns(
            pl.when(pl.col("c").is_not_null())
            .then(pl.col("income").cast(pl.String).alias("p"))
            .otherwise(pl.col("income").cast(pl.String))
        )
        .select("q", "p"),
        [],
    )
    yield (
        "struct-field-named",
        small.with_columns(pram("c").alias("p"))
        .with_columns(
            pl.col("p").alias("q"), pl.struct(p=pl.col("income").cast(pl.String)).alias("s")
        )
        .with_columns(pl.col("s").struct.field("p"))
        .select("q", "p"),
        [],
    )
    import polars.selectors as cs

    yield (
        "rust-regex-selector",
        lf.rename({"c": "cc"})
        .with_row_index("i")
        .with_columns(cs.matches("^[[:alpha:]]$") + pl.when(pl.col("income") > 30).then(0))
        .filter(pl.col("i").is_not_null())
        .select(pram("cc")),
        [],
    )
    a = pl.LazyFrame({"c": ["a", "b", "b", "b"]}).with_row_index("i")
    b = a.sort("i", descending=True).select(pl.col("c").alias("c2"))
    yield "hconcat-two-row-maps", pl.concat([a, b], how="horizontal").select(
        "i", pl.concat_str(["c", "c2"]).dp.pram(1.0, categories=["aa", "ab", "ba", "bb"],
                                                accountant=acct).alias("p")
    ), ["i"]  # fmt: skip
    d1 = pl.LazyFrame({"c": ["a", "b"], "x": ["a", "a"]})
    d2 = pl.LazyFrame({"c": ["b", "a", "b"]}).select(
        pl.col("c").alias("x"), pl.col("c").first().alias("c")
    )
    yield "diagonal-concat", pl.concat([d1, d2], how="diagonal").select(pram("c")), []
    six = pl.LazyFrame({"c": ["b", "a", "a", "a", "a", "a"]}).with_row_index("i")
    yield (
        "replace-by-a-column",
        six.select((pl.col("i") * 0).replace_strict(pl.col("i"), pl.col("c")).alias("c")).select(
            pram("c")
        ),
        [],
    )
    yield (
        "is-in-a-column",
        six.select(
            pl.when((pl.col("i") * 0).is_in(pl.when(pl.col("c") == "b").then(pl.col("i"))))
            .then(pl.lit("b"))
            .otherwise(pl.lit("a"))
            .dp.pram(1.0, categories=["a", "b"], accountant=acct)
            .alias("c")
        ),
        [],
    )
    diag = pl.LazyFrame({"c": ["a", "b", "a"], "diag": ["hiv", "flu", "hiv"]})
    yield (
        "join-keeps-the-right-order",
        diag.with_row_index("i")
        .with_columns(pram("c").alias("p"))
        .join(pl.LazyFrame({"diag": ["flu", "hiv"]}), on="diag", how="left", maintain_order="right")
        .select("i", "p"),
        ["i"],
    )
    yield (
        "top-k-by-a-private-column",
        lf.with_row_index("i").select(
            pram("c").alias("p"),
            pl.col("i").top_k_by("income", n).alias("richest"),
        ),
        ["richest"],
    )
    yield (
        "group-by-dynamic",
        pl.LazyFrame({"t": [1, 2, 15], "x": [1.0] * 3})
        .group_by_dynamic("t", every="10i")
        .agg(pl.col("x").sum().alias("s"))
        .select(
            pl.col("s").dp.laplace(
                epsilon=1.0, sensitivity=1.0, composition="parallel", accountant=acct
            )
        ),
        [],
    )
    two = tempfile.mkdtemp()
    pl.DataFrame({"c": ["a", "b"]}).write_parquet(f"{two}/a.parquet")
    yield (
        "one-file-twice",
        pl.scan_parquet([f"{two}/a.parquet", f"{two}/./a.parquet"]).select(pram("c")),
        [],
    )
    yield (
        "a-glob-and-its-file",
        pl.concat(
            [pl.scan_parquet(f"{two}/*.parquet"), pl.scan_parquet(f"{two}/a.parquet")]
        ).select(pram("c")),
        [],
    )
    df = pl.DataFrame({"c": ["a", "b"]})
    yield "a-frame-and-its-clone", pl.concat([df.lazy(), df.clone().lazy()]).select(pram("c")), []


def test_the_review_s_breaks_are_refused():
    acct = dpframe.Accountant(epsilon=1000)
    names = []
    for name, q, public in _review_queries(acct):
        names.append(name)
        with pytest.raises(LineageError):
            dpframe.collect(q, public=public)
        assert acct.ledger == (), name
    assert len(names) == 14


def test_a_run_over_the_budget_is_refused_before_the_data_is_read(records):
    # the review read four incomes exactly, charging nothing: a refusal for bad data
    # (value outside the categories) or for the budget told the data apart
    acct = dpframe.Accountant(epsilon=1.0)
    for threshold in (0, 10**9):
        bad = pl.when(pl.col("income") > threshold).then(pl.lit("zz")).otherwise(pl.col("c"))
        q = records.select(bad.dp.pram(1e6, categories=CATS, accountant=acct).alias("c"))
        with pytest.raises(dpframe.BudgetExceededError, match="nothing was read"):
            dpframe.collect(q)
    assert acct.ledger == ()


# -- the second review's breaks (stand-in dtypes, joins, row counts, cross-row functions) ---


def _second_review_queries(acct):
    lap = lambda e: e.dp.laplace(  # noqa: E731
        epsilon=1.0, sensitivity=1.0, composition="parallel", accountant=acct
    )
    pram = lambda e: e.dp.pram(1.0, categories=["a", "b"], accountant=acct)  # noqa: E731
    lf = pl.LazyFrame(
        {
            "c": ["a", "b", "a", "b"],
            "secret": ["s1", "s2", "s3", "s4"],
            "income": [11.0, 220.0, 330.0, 44.0],
        }
    )
    # a selector by dtype resolved against a stand-in of another dtype than the release's
    yield (
        "dtype-selector-pram",
        lf.with_columns(pram(pl.col("c")).alias("p"))
        .with_columns(pl.col(pl.String).exclude("c", "secret").str.slice(0, 0) + pl.col("secret"))
        .select("p"),
        [],
    )
    yield (
        "dtype-selector-laplace",
        lf.with_columns(lap(pl.col("income")).alias("n"))
        .with_columns(pl.col(pl.Float64).exclude("income") * 0 + pl.col("income"))
        .select("n"),
        [],
    )
    # the number of rows set by private values
    yield "arg-where", lf.select(lap(pl.arg_where(pl.col("income") > 100).cast(pl.Float64))), []
    rich = pl.when(pl.col("income") > 100).then(pl.lit("x,x")).otherwise(pl.lit("x"))
    yield (
        "explode-expression",
        lf.select(lap(rich.str.split(",").explode().str.len_chars().cast(pl.Float64))),
        [],
    )
    yield (
        "explode-frame",
        lf.select(rich.str.split(",").alias("l"))
        .explode("l")
        .select(lap(pl.col("l").str.len_chars().cast(pl.Float64))),
        [],
    )
    yield (
        "int-range-to-a-value",
        lf.select(lap(pl.int_range(0, pl.col("income").cast(pl.Int64).last()).cast(pl.Float64))),
        [],
    )
    # a join's clashing names mapped to the wrong side
    indexed = lf.with_row_index("i")
    left = indexed.select("i", pl.col("secret").alias("p"))
    right = indexed.select("i", pram(pl.col("c")).alias("p"))
    yield "join-clash", left.join(right, on="i").select("p"), []
    # ordering inside an aggregation, then exploded
    yield (
        "top-k-by-in-an-aggregation",
        indexed.group_by((pl.col("i") * 0).alias("g"))
        .agg(pl.col("income").top_k_by("income", k=4).alias("x"))
        .explode("x")
        .select(lap(pl.col("x"))),
        [],
    )
    # whitelisted functions that read other rows
    own = pl.when(pl.col("i") == 0).then(pl.col("c")).otherwise(pl.lit("a"))
    yield (
        "to-physical",
        indexed.select(
            pram(
                pl.when(own.cast(pl.Categorical).to_physical() == 0)
                .then(pl.lit("a"))
                .otherwise(pl.lit("b"))
            ).alias("phys")
        ),
        [],
    )
    yield (
        "strptime-inferred",
        indexed.select(
            pram(
                pl.when(own.str.to_date(strict=False).is_null())
                .then(pl.lit("b"))
                .otherwise(pl.lit("a"))
            ).alias("date")
        ),
        [],
    )
    one = tempfile.mkdtemp()
    pl.DataFrame({"c": ["a", "b"]}).write_parquet(f"{one}/a.parquet")
    yield (
        "file-uri-and-path",
        pl.concat(
            [pl.scan_parquet(f"file://{one}/a.parquet"), pl.scan_parquet(f"{one}/a.parquet")]
        ).select(pram(pl.col("c"))),
        [],
    )


def test_the_second_review_s_breaks_are_refused():
    acct = dpframe.Accountant(epsilon=1000)
    names = []
    for name, q, public in _second_review_queries(acct):
        names.append(name)
        with pytest.raises(InvalidParameterError):
            dpframe.collect(q, public=public)
        assert acct.ledger == (), name
    assert len(names) == 11


@pytest.mark.parametrize("how", ["matrix", "zcdp", "two-accountants", "paper"])
def test_every_budget_refusal_comes_before_the_data_is_read(records, how):
    # a refusal for the budget (or the accountants) after the dry pass would answer, for
    # free, whether the data passed the dry pass's checks
    from dpframe import pram as pram_module

    bad = pl.when(pl.col("income") > 0).then(pl.lit("zz")).otherwise(pl.col("c"))
    if how == "matrix":
        acct = dpframe.Accountant(epsilon=1.0)
        d = pram_module.design(np.full(3, 1 / 3), 5.0)
        q = records.select(bad.dp.pram(matrix=d, categories=CATS, accountant=acct).alias("c"))
        error = dpframe.BudgetExceededError
    elif how == "zcdp":
        acct = dpframe.Accountant(rho=0.01, delta=1e-6)
        q = records.select(bad.dp.pram(1.0, categories=CATS, accountant=acct).alias("c"))
        error = dpframe.BudgetExceededError
    elif how == "two-accountants":
        acct, other = dpframe.Accountant(epsilon=100), dpframe.Accountant(epsilon=100)
        q = records.select(
            bad.dp.pram(1.0, categories=CATS, accountant=acct).alias("c"),
            pl.col("region").dp.pram(1.0, categories=["N", "S", "E"], accountant=other),
        )
        error = InvalidParameterError
    else:
        acct = dpframe.Accountant(epsilon=1.0)
        q = records.select(
            pl.col("income").dp.truncated_laplace(
                epsilon=0.9,
                lower=0,
                upper=100,
                sensitivity=10.0,
                composition="parallel",
                calibration="paper",
                accountant=acct,
            )
        )  # fmt: skip  (charged its true loss, about 1.5, not the 0.9 asked)
        error = dpframe.BudgetExceededError
    with pytest.raises(error, match=r"(?i)nothing was read"):
        dpframe.collect(q)
    assert acct.ledger == ()


# -- the third review's breaks -------------------------------------------------------------


@pytest.mark.parametrize("how", ["gaussian-rho", "gaussian-on-pure", "row-params", "sequential"])
def test_the_budget_check_prices_every_release_before_the_data_is_read(how):
    # each was a free oracle: bad data (a NaN) refused by the dry pass, good data by the
    # budget or the accountant after it
    lf = pl.LazyFrame({"income": [12_000.0, 55_000.0]}).with_row_index("i")
    x = pl.when(pl.col("income") > 0).then(pl.lit(float("nan"))).otherwise(pl.col("income"))
    kw = {"composition": "parallel", "calibration": "paper"}
    if how == "gaussian-rho":
        acct = dpframe.Accountant(rho=0.01, delta=1e-6)
        e = x.dp.gaussian(sensitivity=1.0, rho=5.0, composition="parallel", accountant=acct)
    elif how == "gaussian-on-pure":
        acct = dpframe.Accountant(epsilon=1000)
        e = x.dp.gaussian(sensitivity=1.0, rho=0.1, composition="parallel", accountant=acct)
    elif how == "row-params":  # the paper calibration's loss, up to twice the epsilon asked
        acct = dpframe.Accountant(epsilon=1.2)
        e = x.dp.truncated_laplace(1.0, pl.lit(0.0), 1e6, 2.0, accountant=acct, **kw)
    else:
        acct = dpframe.Accountant(epsilon=1.2)
        e = x.dp.truncated_laplace(
            1.0, 0.0, 1e6, 2.0, accountant=acct, **{**kw, "composition": "sequential"}
        )
    with pytest.raises(dpframe.DPFrameError, match="before the data is read"):
        dpframe.collect(lf.select(e.alias("r")))
    assert acct.ledger == ()


def test_a_group_s_size_is_not_a_public_key():
    # which groups leave was decided by their exact sizes, next to a noisy count of them
    lf = pl.LazyFrame({"g": ["A", "A", "B"]})
    acct = dpframe.Accountant(epsilon=10)
    noisy = pl.col("n").dp.laplace(
        epsilon=1.0, sensitivity=2.0, composition="parallel", accountant=acct
    )
    counts = lf.group_by("g").agg(pl.len().cast(pl.Float64).alias("n"))
    with pytest.raises(LineageError, match="a group's size"):
        dpframe.collect(counts.filter(pl.col("n") >= 2).select("g", noisy), public=["g"])
    windowed = (
        lf.filter(pl.len().over("g") >= 2).group_by("g").agg(pl.len().cast(pl.Float64).alias("n"))
    )
    with pytest.raises(LineageError, match="a group's size"):
        dpframe.collect(windowed.select("g", noisy), public=["g"])
    assert acct.ledger == ()


def test_a_column_published_for_other_rows_does_not_make_a_key_public(tmp_path):
    # record 0's income, published from another branch, let a sort over all incomes pass
    f = tmp_path / "x.parquet"
    pl.DataFrame({"c": ["a", "b", "a"], "income": [10, 50, 30]}).write_parquet(f)
    s = pl.scan_parquet(f)
    acct = dpframe.Accountant(epsilon=10)
    richest = (
        s.with_row_index("i")
        .sort("income", descending=True)
        .head(1)
        .select("i", pl.col("c").dp.pram(1.0, categories=["a", "b"], accountant=acct))
    )
    q = pl.concat([richest, s.select("income").head(1)], how="horizontal")
    with pytest.raises(LineageError, match="orders rows by column"):
        dpframe.collect(q, public=["i", "income"])
    assert acct.ledger == ()
    # published in the frame the sort ordered, the same key is public
    ok = (
        s.with_row_index("i")
        .sort("income")
        .select("i", "income", pl.col("c").dp.pram(1.0, categories=["a", "b"], accountant=acct))
    )
    assert dpframe.collect(ok, public=["i", "income"]).height == 3
