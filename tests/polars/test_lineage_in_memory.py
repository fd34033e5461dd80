"""The lineage check of queries over in-memory frames: the plan is checked without its data.

The runner serializes the query's plan (the only way polars shows the Python objects in
it) and checks a shadow of it; the shadow's frames are empty, so the check never decodes
the data, and its verdict is the one the data would get: it reads the columns from the
plan's declared schema.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.io.plugins import register_io_source

import dpframe
from dpframe.errors import InvalidParameterError, LineageError
from dpframe.polars.lineage import _shadow
from dpframe.polars.runner import inspect_plan

CATS = ["a", "b", "c"]


def _frame(n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "c": rng.choice(CATS, n),
            "e": pl.Series(rng.choice(CATS, n), dtype=pl.Enum(CATS)),
            "k": pl.Series(rng.choice(CATS, n), dtype=pl.Categorical),
            "t": pl.Series(rng.integers(0, 10**9, n) * 10**6, dtype=pl.Datetime("us", "UTC")),
            "income": rng.integers(0, 1000, n),
            "s": [{"k": int(v)} for v in rng.integers(0, 3, n)],
            "l": [[int(v)] * 2 for v in rng.integers(0, 3, n)],
        }
    )


def test_the_checked_plan_holds_no_data():
    # old: the shadow carried every in-memory frame's bytes (and decoded them again)
    a, b = _frame(500, 1), _frame(300, 2)
    queries = [
        a.lazy().select("c", "income"),
        pl.concat([a.lazy(), b.lazy()]).join(b.lazy(), on="income").select("c", "s"),
        a.lazy().join(a.lazy(), on="c", how="semi").with_columns(pl.col("l").list.len()),
    ]
    for q in queries:
        shadow = _shadow(q.serialize(), 2**62, frozenset())
        assert shadow.collect_schema() == q.collect_schema()
        assert shadow.collect().height == 0
        assert q.collect().height > 0


def _verdict(q, **kw) -> str:
    """What the plan's inspection says of the query (nothing is read or charged)."""
    acct = dpframe.Accountant(epsilon=10)
    try:
        inspect_plan(q(acct), **kw)
    except InvalidParameterError as exc:
        return f"refused: {type(exc).__name__}: {str(exc).split(':')[0]}"
    return "admitted"


def _queries(df: pl.DataFrame, scan=pl.DataFrame.lazy) -> dict:
    lf = scan(df)

    def pram(col: str, acct: dpframe.Accountant) -> pl.Expr:
        return pl.col(col).dp.pram(1.0, categories=CATS, accountant=acct)

    return {
        "pram": lambda a: lf.select(pram("c", a)),
        "pram of an enum": lambda a: lf.select(pram("e", a)),
        "pram of a categorical": lambda a: lf.select(pram("k", a)),
        "with a struct field": lambda a: lf.select(pram("c", a), pl.col("s").struct.field("k")),
        "filtered by a list": lambda a: lf.filter(pl.col("l").list.len() > 1).select(pram("c", a)),
        "filtered by a struct": lambda a: lf.filter(pl.col("s").struct.field("k") > 0).select(
            pram("c", a)
        ),
        "sorted": lambda a: lf.sort("income").select(pram("c", a)),
        "public income": lambda a: lf.select(pram("c", a), "income"),
        "self join": lambda a: lf.join(lf, on="income").select(pram("c", a)),
    }


def test_the_verdict_is_the_same_whatever_the_in_memory_data():
    # the same queries over a frame, another frame of the same schema and an empty one
    frames = [_frame(400, 3), _frame(7, 4), _frame(400, 3).clear()]
    verdicts = [
        {
            name: _verdict(q, public=["income"] if "income" in name else None)
            for name, q in _queries(df).items()
        }
        for df in frames
    ]
    assert verdicts[0] == verdicts[1] == verdicts[2]
    first = verdicts[0]
    admitted = ("pram", "pram of an enum", "pram of a categorical", "public income")
    assert {first[name] for name in admitted} == {"admitted"}
    for refused in ("with a struct field", "filtered by a list", "filtered by a struct"):
        assert first[refused].startswith("refused: LineageError"), refused
    assert first["sorted"].startswith("refused: LineageError")
    assert first["self join"].startswith("refused: LineageError")


def test_scan_frame_gets_the_verdict_frame_lazy_gets():
    df = _frame(300, 9)
    verdicts = [
        {
            name: _verdict(q, public=["income"] if "income" in name else None)
            for name, q in _queries(df, scan).items()
        }
        for scan in (pl.DataFrame.lazy, dpframe.scan_frame)
    ]
    assert verdicts[0] == verdicts[1]


def test_a_plan_mixing_in_memory_and_file_scans(tmp_path):
    path = tmp_path / "records.parquet"
    disk = _frame(200, 5)
    disk.write_parquet(path)
    memory = _frame(200, 6).with_columns(pl.col("income").alias("id"))
    acct = dpframe.Accountant(epsilon=10)

    def pram(col: str) -> pl.Expr:
        return pl.col(col).dp.pram(1.0, categories=CATS, accountant=acct)

    scan = pl.scan_parquet(path)
    # each part keeps its own rows: a release of the file's column next to a public
    # column of the in-memory frame runs, on the real data of both
    side_by_side = pl.concat([scan.select("c"), memory.lazy().select("id")], how="horizontal")
    out = dpframe.collect(side_by_side.select(pram("c"), "id"), public=["id"])
    assert out["id"].to_list() == memory["id"].to_list()
    assert set(out["c"]) <= set(CATS) and out.height == 200
    assert acct.spent.epsilon == pytest.approx(1.0)
    # a concat of the two may repeat a record; a join too: refused before anything is read
    both = pl.concat([scan.select("c"), memory.lazy().select("c")])
    joined = scan.join(memory.lazy(), on="income").select(pram("c"))
    for q in (both.select(pram("c")), joined):
        with pytest.raises(InvalidParameterError, match="row by row"):
            dpframe.collect(q)
    assert acct.spent.epsilon == pytest.approx(1.0)


def test_a_python_scan_is_refused():
    df = _frame(50, 7)

    def source(with_columns, predicate, n_rows, batch_size):
        yield df

    lf = register_io_source(source, schema=df.schema)
    acct = dpframe.Accountant(epsilon=10)
    q = lf.select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    with pytest.raises(InvalidParameterError, match="Python step"):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_an_in_memory_frame_the_plan_cannot_carry_is_refused():
    df = pl.DataFrame({"c": ["a", "b"], "o": pl.Series([object(), object()], dtype=pl.Object)})
    acct = dpframe.Accountant(epsilon=10)
    q = df.lazy().select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    with pytest.raises(InvalidParameterError, match="cannot be inspected"):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_a_frame_written_in_many_chunks_is_read_to_its_schema(monkeypatch):
    # polars may cut a frame's bytes into chunks: the schema is read across them
    monkeypatch.setenv("POLARS_SERIALIZE_LAZYFRAME_MAX_BYTE_SLICE_LEN", "3")
    df = _frame(40, 8)
    shadow = _shadow(df.lazy().serialize(), 2**62, frozenset())
    assert shadow.collect_schema() == df.schema
    assert shadow.collect().height == 0
    assert _verdict(_queries(df)["pram of an enum"]) == "admitted"


def test_a_plan_the_check_cannot_read_is_refused():
    # fail closed: a serialized plan cut anywhere (in its data or its nodes) is refused
    serialized = _frame(40, 9).lazy().select("c").serialize()
    for cut in (len(serialized) // 3, len(serialized) - 5):
        with pytest.raises(LineageError):
            _shadow(serialized[:cut], 2**62, frozenset())
