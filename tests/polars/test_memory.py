"""dpframe.scan_frame: an in-memory frame as a source the runner checks without its data."""

from __future__ import annotations

import pickle

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.errors import InvalidParameterError
from dpframe.polars import memory
from dpframe.polars.memory import FrameSource, data_hidden, morsel_rows
from dpframe.polars.runner import inspect_plan

CATS = list(range(5))


def _frame(n: int = 2_000, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"c": rng.integers(0, 5, n), "r": rng.integers(0, 3, n)})


def test_the_inspection_never_pickles_the_data(monkeypatch):
    # frame.lazy(): polars writes the data into the serialized plan; scan_frame: the
    # runner writes a handle in the plan it checks (the check resolves it to an empty
    # source of the same schema, the run to the frame's copy)
    pickled: list[int] = []
    real = pl.DataFrame.__getstate__

    def spy(self):
        pickled.append(self.height)
        return real(self)

    monkeypatch.setattr(pl.DataFrame, "__getstate__", spy)
    acct = dpframe.Accountant(epsilon=10)
    q = dpframe.scan_frame(_frame(50_000)).select(
        pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct), "r"
    )
    inspect_plan(q, public=["r"])
    assert max(pickled, default=0) == 0  # no row of the frame is pickled


def test_a_source_refuses_plain_pickling_only_while_a_plan_is_inspected():
    source = FrameSource(_frame(10))
    with data_hidden(), pytest.raises(pickle.PicklingError):
        pickle.dumps(source)
    again = pickle.loads(pickle.dumps(source))
    assert again(None, None, None, None)[0].__next__().equals(_frame(10))


def test_plain_queries_give_what_frame_lazy_gives():
    df = _frame()
    other = pl.DataFrame({"r": [0, 1, 2], "name": ["a", "b", "c"]})
    for make in (
        lambda lf: lf.filter(pl.col("r") == 1).select("c"),
        lambda lf: lf.with_columns(d=pl.col("c") * 2).head(7),
        lambda lf: lf.join(other.lazy(), on="r").group_by("name").agg(pl.len()).sort("name"),
        lambda lf: lf.select(pl.len()),
    ):
        assert make(dpframe.scan_frame(df)).collect().equals(make(df.lazy()).collect())


def test_the_release_reads_the_frame_as_built_not_as_changed_later():
    df = _frame(1_000)
    acct = dpframe.Accountant(epsilon=10)
    q = dpframe.scan_frame(df).select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    df.extend(_frame(500, 1))  # in place: the caller's frame grows after the query is built
    df.insert_column(0, pl.Series("x", range(df.height)))
    out = dpframe.collect(q)
    assert out.height == 1_000 and out.columns == ["c"]
    assert acct.spent.epsilon == pytest.approx(1.0)


def test_a_seeded_release_is_the_one_frame_lazy_gives():
    df = _frame(3_000)

    def run(scan):
        acct = dpframe.Accountant(epsilon=10)
        rel = pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct, seed=7)
        return dpframe.collect(scan(df).select(rel, "r"), public=["r"])

    assert run(dpframe.scan_frame).equals(run(pl.DataFrame.lazy))


def test_sink_parquet_from_a_scanned_frame(tmp_path):
    acct = dpframe.Accountant(epsilon=10)
    q = dpframe.scan_frame(_frame()).select(
        pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct)
    )
    dpframe.sink_parquet(q, tmp_path / "out.parquet")
    assert pl.read_parquet(tmp_path / "out.parquet").height == 2_000
    assert acct.spent.epsilon == pytest.approx(1.0)


def test_a_look_alike_source_is_refused():
    class Imitation(FrameSource):  # same code, not dpframe's class: an unknown Python step
        __slots__ = ()

    df = _frame(100)
    lf = pl.LazyFrame._scan_python_function(schema=df.schema, scan_fn=Imitation(df))
    acct = dpframe.Accountant(epsilon=10)
    q = lf.select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    with pytest.raises(InvalidParameterError, match="Python step"):
        dpframe.collect(q)
    assert acct.ledger == ()


@pytest.mark.parametrize("given", [_frame(3).lazy(), {"c": [1]}, None, "survey.parquet"])
def test_scan_frame_takes_a_dataframe_only(given):
    with pytest.raises(InvalidParameterError, match="frame must be a polars DataFrame"):
        dpframe.scan_frame(given)


class _Source:  # a picklable Python scan (polars pickles it without cloudpickle)
    def __init__(self, df: pl.DataFrame) -> None:
        self.df = df

    def __call__(self, with_columns, predicate, n_rows, batch_size):
        return iter([self.df]), False


@pytest.mark.parametrize("name", [None, "dpframe.scan_frame", "a\nb", "x] SCAN"])
def test_another_python_scan_is_refused_whatever_it_is_named(name):
    df = _frame(100)
    lf = pl.LazyFrame._scan_python_function(
        schema=df.schema, scan_fn=_Source(df), explain_name=name
    )
    acct = dpframe.Accountant(epsilon=10)
    q = lf.select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    with pytest.raises(InvalidParameterError):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_a_frame_subclass_s_code_never_runs_in_the_query():
    # old: the source kept the subclass (clone keeps it) and called its select/slice in
    # the dry and the real pass -- where it could evaluate the release again, out of sight
    ran: list[str] = []

    class Evil(pl.DataFrame):
        def select(self, *a, **k):
            ran.append("select")
            return super().select(*a, **k)

        def slice(self, *a, **k):
            ran.append("slice")
            return super().slice(*a, **k)

    evil = Evil(_frame(500))
    acct = dpframe.Accountant(epsilon=10)
    q = dpframe.scan_frame(evil).select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    assert dpframe.collect(q).height == 500
    assert ran == []


def test_a_source_whose_frame_was_swapped_refuses_to_run():
    acct = dpframe.Accountant(epsilon=10)
    lf = dpframe.scan_frame(_frame(100))
    source = lf._ldf.visit().view_current_node().options[0]
    assert type(source) is FrameSource
    source._frame = _frame(100).lazy()  # anything but a plain DataFrame
    q = lf.select(pl.col("c").dp.pram(1.0, categories=CATS, accountant=acct))
    with pytest.raises(Exception, match="plain polars DataFrame"):
        dpframe.collect(q)
    assert acct.ledger == ()


def test_a_large_frame_is_read_in_one_morsel_per_thread():
    # polars asks for its own morsel (100,000 rows); each morsel costs a release a fresh
    # generator and a sampler call, so an in-memory frame is read in a share per thread
    df = _frame(1_000_000)
    batches, applied = FrameSource(df)(None, None, None, 100_000)
    parts = list(batches)
    assert not applied and 1 <= len(parts) <= pl.thread_pool_size()
    assert pl.concat(parts).equals(df)
    # a column selection and a row limit are read as asked
    limited = list(FrameSource(df)(["r"], None, 250_001, 100_000)[0])
    assert pl.concat(limited).equals(df.select("r").head(250_001))


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("batch", [None, 1, 100_000])
@pytest.mark.parametrize("row_bytes", [1, 8, 320, 1 << 27])
@pytest.mark.parametrize("height", [0, 1, 99_999, 1_000_000, 10**7, 3 * (1 << 23) + 1, 10**9])
def test_morsels_are_an_equal_share_per_thread_within_the_largest(
    height, threads, batch, row_bytes
):
    size = morsel_rows(height, batch, row_bytes=row_bytes, threads=threads)
    least = batch or memory._BATCH
    assert size >= least
    morsels = -(-height // size)
    if size > least:  # larger than polars asked: within the largest, whole rounds of threads
        most = max(1, memory._MORSEL_BYTES // row_bytes)
        assert size <= most
        rounds = -(-morsels // threads)
        assert rounds == -(-height // (threads * most))
        assert morsels > threads * (rounds - 1)  # no round of morsels left mostly idle


def test_a_wide_frame_is_read_in_morsels_within_the_largest_size():
    # each morsel's released columns and the dry pass's stand-ins are about its size
    wide = pl.DataFrame({f"c{i}": np.arange(400_000) for i in range(40)})
    parts = list(FrameSource(wide)(None, None, None, 1)[0])
    assert pl.concat(parts).equals(wide)
    assert max(p.estimated_size() for p in parts) <= memory._MORSEL_BYTES
    assert len(parts) >= wide.estimated_size() // memory._MORSEL_BYTES
