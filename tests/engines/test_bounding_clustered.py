"""Person-level bounding of records clustered by person, in one read.

* Clustered == partitioned == polars: for persons whose rows lie near one another
  (sorted, shuffled within a few rows, a survey's households written region by region,
  ids whose low bits are all equal), the clustered path keeps the same rows as the
  partition paths and the polars-only path for the same key: counts bit for bit, sums of
  integer values too, real sums to 1e-12 relative -- across many windows (a small
  window and batch), with persons over ``max_groups`` and pairs over ``max_rows``.
* It gives up -- nothing released from it, the same keys left to the partition path --
  whenever a person is met again after being bounded (random order, a person's row at
  the very end, chunks), or a person's rows would pass the memory setting.
* A code outside the ranges read before the records (the input changed) is refused.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines import bounding_clustered as bc
from dpframe.engines.bounding import bounded_grouped_parts
from dpframe.engines.bounding_rule import RuleKeys
from dpframe.errors import InvalidDataError

UNIT = PrivacyUnit("pid", max_rows=2, max_groups=2)
MEMORY = 2**16  # the least memory setting


def _source(seed: int = 7) -> RandomSource:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RandomSource(seed=seed)


def _records(layout: str, n: int = 12_000, people: int = 2_000, seed: int = 0) -> pl.DataFrame:
    """Persons with a few groups near a home group (persons over max_groups, pairs over
    max_rows), integer values ``xi`` and real ones ``xr``; rows in ``layout``."""
    rng = np.random.default_rng(seed)
    if layout == "wide":  # more than _PROBES persons a window
        n, people = 2_500, 1_000
    pid = np.sort(rng.integers(0, people, n))
    if layout == "shuffled":  # each row moved by up to 40 places
        pid = pid[np.argsort(np.arange(n) + rng.integers(0, 40, n), kind="stable")]
    elif layout == "regions":  # five sorted streams (regions), their rows interleaved
        streams = [np.sort(pid[pid % 5 == r]) for r in range(5)]
        labels = rng.permutation(
            np.concatenate([np.full(s.size, r) for r, s in enumerate(streams)])
        )
        pid = np.empty(n, dtype=np.int64)
        for r, stream in enumerate(streams):
            pid[labels == r] = stream
    elif layout == "descending":  # each batch meets lower codes: the bitset grows down
        pid = pid[::-1] - people // 2
    elif layout == "random":
        pid = rng.permutation(pid)
    elif layout == "chunks":  # most persons in each of two halves, each half sorted
        pid = rng.permutation(pid)
        pid = np.concatenate([np.sort(pid[: n // 2]), np.sort(pid[n // 2 :])])
    elif layout == "last":  # sorted, but for one row of the first person at the end
        pid = np.concatenate([pid[1:], pid[:1]])
    g = (pid * 7 + np.minimum(rng.geometric(0.5, n) - 1, 4)) % 60
    frame = pl.DataFrame(
        {
            "pid": pid,
            "g": g,
            "xi": rng.integers(-3, 12, n).astype(float),
            "xr": rng.uniform(-2, 12, n),
        }
    )
    if layout == "wide":  # ids 1024 apart (still their own codes): the folded hash crowds
        frame = frame.with_columns(pl.col("pid") * 1024 + 7)
    return frame


def _parts(lf: pl.LazyFrame, keys: list[str], values: str, **kw) -> pl.DataFrame:
    """The parts under the least memory setting: past the batched path (the clustered
    path is tried only where the records would otherwise be spilled)."""
    kw.setdefault("memory", MEMORY)
    parts = {"s": pl.col(values), "q": pl.col(values) ** 2}
    bads = {"__bad__x": pl.col(values) > 10}
    out = bounded_grouped_parts(lf, UNIT, keys, parts, ["c"], bads, _source(), distinct=["d"], **kw)
    return out.sort(keys) if keys else out


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of 64 rows read in batches of 256: many windows, rows carried often."""
    monkeypatch.setattr(bc, "WINDOW", 64)
    monkeypatch.setattr(bc, "_BATCH", 256)


@pytest.fixture
def clustered(monkeypatch):
    """What each call of the clustered path returned (None: it gave up)."""
    found: list[bc.Clustered | None] = []
    real = bc.clustered_parts

    def spy(*args, **kwargs):
        found.append(real(*args, **kwargs))
        return found[-1]

    monkeypatch.setattr(bc, "clustered_parts", spy)
    return found


@pytest.mark.parametrize("layout", ["sorted", "descending", "shuffled", "regions"])
@pytest.mark.parametrize("keys", [["g"], []])
def test_clustered_keeps_what_the_partitions_keep(
    layout, keys, small_windows, clustered, monkeypatch
):
    frame = _records(layout)
    lf = frame.lazy()
    scratches = []
    fit = bc._Scratch.fit
    monkeypatch.setattr(
        bc._Scratch, "fit", lambda self, rows: [scratches.append(self), fit(self, rows)]
    )
    got = _parts(lf, keys, "xi")
    assert clustered and clustered[-1] is not None  # the clustered path bounded it
    assert scratches[-1].meta[2] == 0  # the folded hash did not crowd
    assert got["__rows"].sum() < frame.height  # something was dropped: the rule ran
    polars = _parts(lf, keys, "xi", kernel=False)
    real = _parts(lf, keys, "xr")
    monkeypatch.setattr(bc, "clustered_parts", lambda *a, **k: None)  # the partitions
    partitioned = _parts(lf, keys, "xi")  # in parts
    in_memory = _parts(lf, keys, "xi", memory=2**30)
    for other in (partitioned, in_memory):
        assert got.equals(other)  # integer values: the sums are exact in any order
    # the polars path puts the bad count on another group (the driver sums them)
    assert got.drop("__bad__x").equals(polars.drop("__bad__x"))
    assert got["__bad__x"].sum() == polars["__bad__x"].sum() > 0
    polars = _parts(lf, keys, "xr", kernel=False)
    exact = [c for c in got.columns if c not in ("s", "q", "__bad__x")]
    assert real.select(exact).equals(polars.select(exact))
    for c in ("s", "q"):
        assert np.allclose(real[c].to_numpy(), polars[c].to_numpy(), rtol=1e-12, atol=0), c


@pytest.mark.parametrize("layout", ["random", "chunks", "last"])
def test_a_person_met_again_gives_up_and_leaves_the_same_keys(layout, small_windows, clustered):
    """A person met again after being bounded: the clustered path gives up (None) and
    the partition path bounds the records with the same keys (the result equals the
    polars path's under the same seed)."""
    lf = _records(layout).lazy()
    got = _parts(lf, ["g"], "xi")
    assert clustered == [None]
    polars = _parts(lf, ["g"], "xi", kernel=False)
    assert got.drop("__bad__x").equals(polars.drop("__bad__x"))


def test_codes_spread_past_the_ranking_threshold_give_up(small_windows, clustered):
    """A late batch whose person codes stretch the span to the rule's threshold (the codes
    would be ranks, not the values): the path gives up and the partition path ranks."""
    frame = _records("sorted")
    n = frame.height
    far = pl.Series("pid", [4 * n + 2**20] * 3)  # one person, far above the others
    frame = pl.concat([frame, frame.head(3).with_columns(far)])
    lf = frame.lazy()
    got = _parts(lf, ["g"], "xi")
    assert clustered == [None]
    polars = _parts(lf, ["g"], "xi", kernel=False)
    assert got.drop("__bad__x").equals(polars.drop("__bad__x"))


def test_a_missing_person_midway_is_refused_as_by_the_partitions(small_windows, clustered):
    from dpframe.errors import InvalidDataError

    frame = _records("sorted").with_row_index()
    frame = frame.with_columns(
        pl.when(pl.col("index") == 5_000).then(None).otherwise(pl.col("pid")).alias("pid")
    ).drop("index")
    with pytest.raises(InvalidDataError, match="pid"):
        _parts(frame.lazy(), ["g"], "xi")
    assert clustered == [None]


def test_nothing_is_drawn_when_the_probe_fails(small_windows):
    keys = RuleKeys(np.random.default_rng(3))
    lf = _records("random").lazy()
    out = bc.clustered_parts(lf, "pid", ["g"], [pl.col("xi")], [], 12_000, (2, 2), keys, 2**24)
    assert out is None and keys._keys is None  # the probe saw the disorder first


def test_a_person_longer_than_the_memory_setting_gives_up(small_windows):
    n = 5_000
    pid = np.concatenate([np.arange(100), np.full(n, 100), np.arange(101, 200)])
    lf = pl.LazyFrame({"pid": pid, "g": pid % 3, "x": np.ones(pid.size)})
    keys = RuleKeys(np.random.default_rng(3))
    args = ("pid", ["g"], [pl.col("x")], [], pid.size, (2, 2), keys)
    assert bc.clustered_parts(lf, *args, 2**20) is not None  # room for the long person
    assert bc.clustered_parts(lf, *args, 2**16) is None  # no room: give up


def test_the_demo_survey_is_bounded_in_one_read(clustered):
    """The example survey's households (consecutive respondents of one region, regions
    interleaved) are near one another: bounded by the clustered path, default window."""
    from dpframe.datasets import synthetic_survey

    lf = synthetic_survey(150_000).lazy()
    unit = PrivacyUnit("household", max_rows=3, max_groups=1)
    parts = {"s": pl.col("income")}
    out = bounded_grouped_parts(lf, unit, ["region"], parts, ["c"], {}, memory=MEMORY)
    assert clustered and clustered[-1] is not None
    assert 0 < out["c"].sum() < 150_000


def test_a_code_outside_the_ranges_read_before_is_refused(monkeypatch):
    """The input changed between the aggregation of the codes' ranges and the read of
    the records: a person code outside the range is refused, not bounded."""
    real = bc._bound_window

    def moved(p, *args):
        p = p.copy()
        p[-1] = 10**6  # past every person code read before
        return real(p, *args)

    monkeypatch.setattr(bc, "_bound_window", moved)
    lf = _records("sorted").lazy()
    with pytest.raises(InvalidDataError, match="changed between two reads"):
        _parts(lf, ["g"], "xi")


def test_the_kernel_refuses_a_group_outside_the_range_and_a_person_met_again():
    scratch = bc._Scratch()
    p = np.array([1, 1, 2, 3], dtype=np.int64)
    scratch.fit(p.size)
    acc = (np.zeros(3, np.int64), np.zeros((3, 1)), np.zeros(3, np.int64))
    keys = np.arange(4, dtype=np.uint64)
    vals = np.ones((1, 4))
    spec = np.array([1, 3, 0, 2, 1, 1], dtype=np.int64)
    g = np.array([0, 0, 5, 1], dtype=np.int64)  # group 5 outside [0, 2]
    seen = np.zeros(1, dtype=np.uint64)
    status, _ = bc._bound_window(p, g, vals, 4, spec, keys, seen, acc, scratch.arrays())
    assert status == bc._OUTSIDE
    seen = np.zeros(1, dtype=np.uint64)
    g = np.zeros(4, dtype=np.int64)
    status, rest = bc._bound_window(p, g, vals, 2, spec, keys, seen, acc, scratch.arrays())
    assert status == 0 and rest.tolist() == [2, 3]  # persons 2 and 3 left open
    status, _ = bc._bound_window(
        p[:2], g[:2], vals[:, :2], 2, spec, keys, seen, acc, scratch.arrays()
    )
    assert status == bc._NOT_CLUSTERED  # person 1 bounded already


def test_ids_that_crowd_the_folded_hash_keep_the_same_rows(small_windows, monkeypatch):
    """Person ids 1024 apart (still their own codes) all fold onto one slot: the table
    switches to the multiplicative hash, before anything is bounded, and keeps the rows
    the in-memory kernel keeps."""
    frame = _records("wide")
    scratches = []
    fit = bc._Scratch.fit
    monkeypatch.setattr(
        bc._Scratch, "fit", lambda self, rows: [scratches.append(self), fit(self, rows)]
    )
    keys = RuleKeys(_source().generator())
    values = [pl.col("xi"), pl.col("xi") ** 2]
    flags = [pl.col("xi") > 10]
    out = bc.clustered_parts(
        frame.lazy(), "pid", ["g"], values, flags, frame.height, (2, 2), keys, 2**22
    )
    assert out is not None and scratches[-1].meta[2] == 1  # crowded, then the other hash
    monkeypatch.setattr(bc, "clustered_parts", lambda *a, **k: None)
    whole = _parts(frame.lazy(), ["g"], "xi", memory=2**30)
    groups = out.first + np.flatnonzero(out.kept)
    assert whole["g"].to_list() == groups.tolist()
    assert whole["__rows"].to_list() == out.kept[out.kept > 0].tolist()
    assert whole["d"].to_list() == out.persons[out.kept > 0].tolist()
    assert whole["s"].to_list() == out.sums[out.kept > 0, 0].tolist()
    assert whole["__bad__x"].sum() == out.flags[0]


def test_the_folded_hash_crowds_on_equal_low_bits_and_the_other_hash_takes_over():
    scratch = bc._Scratch()
    p = np.arange(200, dtype=np.int64) << 32
    scratch.fit(p.size)
    assert bc._within(p, 10, scratch.table, scratch.meta) == bc._CROWDED
    scratch.meta[2] = 1
    assert bc._within(p, 10, scratch.table, scratch.meta) == 1


@pytest.mark.parametrize("values", [0, 1, 3])
def test_any_number_of_summed_columns(values, small_windows, clustered):
    """Counts alone, one summed column (passed as a view), several (stacked)."""
    lf = _records("shuffled").lazy()
    parts = {f"v{j}": pl.col("xi") + j for j in range(values)}
    run = [
        bounded_grouped_parts(lf, UNIT, ["g"], parts, ["c"], {}, _source(), memory=MEMORY, kernel=k)
        for k in (True, False)
    ]
    assert clustered and clustered[-1] is not None
    assert run[0].sort("g").equals(run[1].sort("g"))
