"""Person-level bounding out of core, and the rule's step 4 that makes it exact.

* Partitioned == streamed == in memory: the records bounded in parts of persons spilled
  to disk, or read in batches (integer codes), keep
  the same rows as the in-memory kernel for the same key -- the counts equal bit for
  bit; the sums too where the values are integers (float additions of integers below
  2**53 are exact in any order), else equal to 1e-12 relative (the order of additions is
  the only difference) -- for several numbers of parts, person-id orders (sorted, random,
  repeated across the chunks of a Parquet file), int and string persons, and keys.
* Locality: a person's kept rows do not change when another person's rows are added or
  removed (brute force, the kernel and the rule's numpy reference).
* Uniformity: the kept subset of an oversized pair is uniform over the keys (chi-square,
  P_MIN the chance of a false failure). (The row hash against CPython's SipHash:
  ``test_bounding_kernel.py``.)
* The temporary files are removed on success and on failure; a bad memory setting is
  refused before anything is read or written.

Records clustered by person are bounded in one read
(:mod:`dpframe.engines.bounding_clustered`); here that path is switched off, so that
sorted inputs go through the partitions too (the clustered path is held equal to these in
``test_bounding_clustered.py``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines import bounding_kernel as bk
from dpframe.engines import bounding_rule as rule
from dpframe.engines import bounding_spill as spill
from dpframe.engines.bounding import bounded_frame, bounded_grouped_parts
from dpframe.errors import InvalidParameterError

P_MIN = 1e-4  # a law test fails only if its p-value is below this


@pytest.fixture(autouse=True)
def partitions_only(monkeypatch):
    """The clustered path gives up at once: every input is bounded by partition."""
    monkeypatch.setattr(
        "dpframe.engines.bounding_clustered.clustered_parts", lambda *args, **kwargs: None
    )


def _source(seed: int = 7) -> RandomSource:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RandomSource(seed=seed)


def _records(order: str, n: int = 24_000, people: int = 1_500, seed: int = 0) -> pl.DataFrame:
    """Persons with a few groups near a home group (many pairs over max_rows), integer
    values ``xi`` and real ones ``xr``, a string key with nulls; rows in ``order``."""
    rng = np.random.default_rng(seed)
    pid = rng.integers(0, people, n)
    g = (pid * 7 + np.minimum(rng.geometric(0.5, n) - 1, 4)) % 60
    frame = pl.DataFrame(
        {
            "pid": pid,
            "g": g,
            "s": pl.Series(rng.choice(["a", "b", "c", None], n)),
            "xi": rng.integers(-3, 12, n).astype(float),
            "xr": rng.uniform(-2, 12, n),
        }
    )
    if order == "sorted":
        return frame.sort("pid", maintain_order=True)
    if order == "chunks":  # ten chunks, each holding rows of every person, sorted within
        chunk = pl.Series(rng.integers(0, 10, n))
        return frame.with_columns(chunk.alias("c")).sort("c", "pid").drop("c")
    return frame


def _parts(lf: pl.LazyFrame, keys: list[str], memory: int | None, values: str) -> pl.DataFrame:
    unit = PrivacyUnit("pid", max_rows=2, max_groups=2)
    parts = {"s": pl.col(values), "q": pl.col(values) ** 2}
    bads = {"__bad__x": pl.col(values) > 10}
    out = bounded_grouped_parts(
        lf, unit, keys, parts, ["c"], bads, _source(), distinct=["d"], memory=memory
    )
    return out.sort(keys, nulls_last=True) if keys else out


def _memory(rows: int, parts: int) -> int:
    """A memory setting that cuts ``rows`` records of the parts above into ``parts``."""
    return math.ceil(rows * spill.record_bytes(2, 1) / parts)


@pytest.fixture
def counted(monkeypatch):
    """The number of parts the kernel bounded (by :func:`bounding_spill._bound_part`)."""
    calls: list[int] = []
    real = spill._bound_part

    def bound_part(part, *args):
        calls.append(part.height)
        return real(part, *args)

    monkeypatch.setattr(spill, "_bound_part", bound_part)
    return calls


@pytest.mark.parametrize("order", ["sorted", "random", "chunks"])
@pytest.mark.parametrize("person", ["int", "str"])
@pytest.mark.parametrize("keys", [["g"], ["s"], ["g", "s"], []])
def test_partitioned_keeps_what_memory_keeps(order, person, keys, counted, tmp_path):
    frame = _records(order)
    if person == "str":
        frame = frame.with_columns(pl.format("id{}", pl.col("pid")).alias("pid"))
    path = tmp_path / "records.parquet"
    frame.write_parquet(path, row_group_size=2_000)  # the input read in chunks
    lf = pl.scan_parquet(path)
    whole = _parts(lf, keys, None, "xi")
    assert counted == []  # in memory: no part
    assert whole["__rows"].sum() < frame.height  # something was dropped: the rule ran
    streamed = person == "int" and len(keys) <= 1 and "s" not in keys  # integer codes
    for parts in (2, 3, 7):
        counted.clear()
        memory = _memory(frame.height, parts)
        got = _parts(lf, keys, memory, "xi")
        if streamed and frame.height * spill.streamed_bytes(2) <= memory:
            assert counted == []  # one streaming pass, in batches: no part
        else:
            assert 2 <= len(counted) <= parts and sum(counted) == frame.height
        assert got.equals(whole)  # integer values: the sums are exact in any order
    real = _parts(lf, keys, None, "xr")
    got = _parts(lf, keys, _memory(frame.height, 5), "xr")
    exact = [c for c in got.columns if c not in ("s", "q")]
    assert got.select(exact).equals(real.select(exact))
    for c in ("s", "q"):
        assert np.allclose(got[c].to_numpy(), real[c].to_numpy(), rtol=1e-12, atol=0), c


PERSONS = {
    "sparse": lambda pid: pl.Series(pid * 10**12),  # spans more than 4 * rows: ranks
    "categorical": lambda pid: pl.Series([f"p{v}" for v in pid], dtype=pl.Categorical),
    "enum": lambda pid: pl.Series(
        [f"p{v}" for v in pid], dtype=pl.Enum([f"p{v}" for v in range(800)][::-1])
    ),
    "u64": lambda pid: pl.Series(pid.astype(np.uint64) * np.uint64(2**54)),
    "i8": lambda pid: pl.Series((pid % 120).astype(np.int8)),
}


@pytest.mark.parametrize("person", sorted(PERSONS))
def test_partitioned_codes_are_the_rules_for_ranked_and_value_coded_columns(person, counted):
    """Persons and keys whose codes are ranks or their values (sparse integers,
    categoricals, enums, 64-bit unsigned, booleans, dates): the codes computed from the
    distinct values are those of the records."""
    import datetime as dt

    rng = np.random.default_rng(3)
    n = 8_000
    pid = rng.integers(0, 800, n)
    frame = pl.DataFrame(
        {
            "pid": PERSONS[person](pid),
            "b": rng.integers(0, 2, n).astype(bool),
            "d": [dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in pid % 9],
            "u": pl.Series(rng.integers(0, 5, n).astype(np.uint64) * np.uint64(2**60)),
            "x": rng.integers(0, 5, n).astype(float),
        }
    )
    unit = PrivacyUnit("pid", max_rows=1, max_groups=1)
    for keys in (["b"], ["u"], ["b", "d"]):
        args = (frame.lazy(), unit, keys, {"s": pl.col("x")}, ["c"], {})
        whole = bounded_grouped_parts(*args, _source())
        counted.clear()
        got = bounded_grouped_parts(*args, _source(), memory=_memory(n, 4))
        assert len(counted) >= 2
        assert got.sort(keys).equals(whole.sort(keys))


def _kernel_marks(pid: np.ndarray, gid: np.ndarray, k: int, r: int) -> np.ndarray:
    key, rows_key = (1, 2), (3, 4)
    return bk.bounded_sums(
        pid, gid, np.zeros((0, pid.size)), key, k, r, row_key=rows_key, mark_kept=True
    )[4]


def _rule_marks(pid: np.ndarray, gid: np.ndarray, k: int, r: int) -> np.ndarray:
    frame = pl.DataFrame({"pid": pid, "g": gid}).with_row_index("rid")
    unit = PrivacyUnit("pid", max_rows=r, max_groups=k)
    kept = bounded_frame(frame.lazy(), unit, ["g"], _source()).collect()["rid"]
    marks = np.zeros(pid.size, dtype=np.uint8)
    marks[kept.to_numpy()] = 1
    return marks


@pytest.mark.parametrize("marks", [_kernel_marks, _rule_marks])
def test_a_persons_kept_rows_do_not_depend_on_other_persons(marks):
    """Brute force: for every person of a small file, removing them (or adding a new
    person's rows anywhere) leaves every other person's kept rows as they were -- no
    global permutation, no count of oversized rows elsewhere."""
    rng = np.random.default_rng(11)
    n, people = 400, 12
    pid = rng.integers(0, people, n)
    gid = (pid + rng.integers(0, 3, n)) % 5  # pairs of many rows: step 4 decides
    k, r = 2, 3
    base = marks(pid, gid, k, r)
    assert 0 < base.sum() < n
    for gone in range(people):
        stay = pid != gone
        assert np.array_equal(marks(pid[stay], gid[stay], k, r), base[stay]), gone
    extra = rng.integers(0, n, 50)  # 50 rows of person 99, spread over the file
    pid2 = np.insert(pid, extra, 99)
    gid2 = np.insert(gid, extra, rng.integers(0, 5, 50))
    old = pid2 != 99
    assert np.array_equal(marks(pid2, gid2, k, r)[old], base)


def test_the_kept_subset_of_an_oversized_pair_is_uniform_over_keys():
    """One pair of 5 rows keeping 2: each of the 10 subsets with probability 1/10 over
    8,000 row keys (the rule's reference), and over 8,000 persons under one key (the
    kernel); and each position kept with probability 2/5."""
    n, r, trials = 5, 2, 8_000
    subsets = {c: j for j, c in enumerate(itertools.combinations(range(n), r))}
    rng = np.random.default_rng(2024)
    words = rng.integers(0, 2**63, size=(trials, 2))
    counts = np.zeros(len(subsets), dtype=np.int64)
    one = (np.array([42]), np.array([7]), np.array([n]))
    for k0, k1 in words:
        mask = rule.kept_positions(*one, r, (int(k0), int(k1)))
        counts[subsets[tuple(np.flatnonzero(mask))]] += 1
    assert stats.chisquare(counts).pvalue > P_MIN
    pid = np.repeat(np.arange(trials), n)
    marks = _kernel_marks(pid, np.zeros(pid.size, np.int64), 1, r).reshape(trials, n) > 0
    assert (marks.sum(axis=1) == r).all()
    codes = marks @ (1 << np.arange(n))
    cells = np.unique(codes, return_counts=True)[1]
    assert cells.size == len(subsets) and stats.chisquare(cells).pvalue > P_MIN
    assert stats.chisquare(marks.sum(axis=0)).pvalue > P_MIN  # each position 2/5


def test_row_priorities_break_ties_by_position_and_refuse_huge_positions():
    z = np.zeros(3, np.int64)
    prio = rule.row_priority((5, 6), z, z, np.arange(3))
    assert len(set(prio.tolist())) == 3
    with pytest.raises(ValueError, match="position"):
        rule.row_priority((5, 6), z[:1], z[:1], np.array([2**32 - 1]))


def _leftovers(folder: Path) -> list[Path]:
    return sorted(folder.glob("dpframe-bounding-*"))


def test_temporary_files_are_removed_on_success_and_failure(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    frame = _records("random", n=6_000)
    seen: list[Path] = []
    real = spill._bound_part

    def watch(part, *args):
        seen.extend(_leftovers(tmp_path))  # the spill exists while the parts are bounded
        return real(part, *args)

    monkeypatch.setattr(spill, "_bound_part", watch)
    _parts(frame.lazy(), ["g"], _memory(frame.height, 3), "xi")
    assert seen and _leftovers(tmp_path) == []
    seen.clear()  # up to RESCAN_PARTS parts: each read by a pass of its own, nothing written
    _parts(frame.lazy(), ["g"], _memory(frame.height, spill.RESCAN_PARTS), "xi")
    assert seen == [] and list(tmp_path.iterdir()) == []

    def fail(part, *args):
        raise RuntimeError("killed in the middle")

    monkeypatch.setattr(spill, "_bound_part", fail)
    with pytest.raises(RuntimeError, match="killed"):
        _parts(frame.lazy(), ["g"], _memory(frame.height, 3), "xi")
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("memory", "variable", "match"),
    [
        (0, None, "bounding_memory must be >= 65536"),
        (1.5, None, "bounding_memory must be an integer"),
        ("1g", None, "bounding_memory must be an integer"),
        (True, None, "bounding_memory must be an integer"),
        (None, "lots", "DPFRAME_BOUNDING_MEMORY must be a number of bytes"),
        (None, "100", "bounding_memory must be >= 65536"),
    ],
)
def test_a_bad_memory_setting_is_refused_before_anything_is_read(
    memory, variable, match, monkeypatch, tmp_path
):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if variable is not None:
        monkeypatch.setenv(spill.MEMORY_VARIABLE, variable)

    def never(*args, **kwargs):
        raise AssertionError("the records were read")

    lf = pl.LazyFrame({"pid": [1, 2], "g": [0, 1], "x": [1.0, 2.0]})
    monkeypatch.setattr(pl.LazyFrame, "collect", never)
    unit = PrivacyUnit("pid", max_rows=1, max_groups=1)
    with pytest.raises(InvalidParameterError, match=match):
        bounded_grouped_parts(lf, unit, ["g"], {}, ["c"], {}, _source(), memory=memory)
    assert list(tmp_path.iterdir()) == []


def test_the_memory_setting_from_the_environment(monkeypatch):
    monkeypatch.delenv(spill.MEMORY_VARIABLE, raising=False)
    assert spill.bounding_memory() == spill.BOUNDING_MEMORY
    monkeypatch.setenv(spill.MEMORY_VARIABLE, " 1048576 ")
    assert spill.bounding_memory() == 2**20
    assert spill.bounding_memory(2**17) == 2**17  # an argument wins
    assert spill.partitions(10**8, 1, 1, spill.BOUNDING_MEMORY) > 1
    assert spill.partitions(10**5, 1, 1, spill.BOUNDING_MEMORY) == 1


def test_a_killed_process_s_spill_folder_is_removed_by_the_next_spill(tmp_path):
    # old: a spill folder left by a SIGKILL (confidential person, group and value rows)
    # stayed in the temporary folder for ever
    import os
    import subprocess
    import sys

    from dpframe.engines.bounding_spill import _SPILL_PREFIX, remove_stale_spills

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = tmp_path / f"{_SPILL_PREFIX}{int(gone.stdout)}-abc"
    (dead / "00000000").mkdir(parents=True)
    (dead / "00000000" / "0.ipc").write_bytes(b"records")
    live = tmp_path / f"{_SPILL_PREFIX}{os.getppid()}-def"  # a running process's: kept
    live.mkdir()
    mine = tmp_path / f"{_SPILL_PREFIX}{os.getpid()}-ghi"
    mine.mkdir()
    other = tmp_path / "dpframe-bounding-notapid-x"
    other.mkdir()
    assert remove_stale_spills(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and live.exists() and mine.exists() and other.exists()


STREAMED_COLUMNS = {
    "i32-key": lambda f: f.with_columns(pl.col("g").cast(pl.Int32) - 30),
    "u8-person": lambda f: f.with_columns((pl.col("pid") % 200).cast(pl.UInt8)),
    "bool-person": lambda f: f.with_columns(pl.col("pid") % 2 == 0),
    "date-person": lambda f: f.with_columns(pl.col("pid").cast(pl.Int32).cast(pl.Date)),
    # keys read back from their physical codes: an enum's categories (the demo's region)
    "enum-key": lambda f: f.with_columns(
        pl.format("k{}", pl.col("g")).cast(pl.Enum([f"k{j}" for j in range(59, -1, -1)]))
    ),
    "bool-key": lambda f: f.with_columns(pl.col("g") % 3 == 0),
    "datetime-key": lambda f: f.with_columns(pl.col("g").cast(pl.Datetime("us", "Europe/Paris"))),
}


@pytest.mark.parametrize("column", sorted(STREAMED_COLUMNS))
@pytest.mark.parametrize("keys", [["g"], []])
def test_records_read_in_batches_keep_what_memory_keeps(column, keys, monkeypatch):
    """Integer-coded persons and keys past the memory setting are read in batches of the
    streaming engine (each placed in its bucket as it arrives), in one part: the same
    rows and sums as in memory, the key's values read back from its codes (its dtype),
    the bad values counted over every batch."""
    from dpframe.engines import bounding_kernel as bk

    monkeypatch.setattr("dpframe.engines.bounding._BATCH", 1_000)  # many batches
    frame = STREAMED_COLUMNS[column](_records("random"))
    lf = frame.lazy()
    whole = _parts(lf, keys, None, "xi")
    assert bounding_spill_streamable(lf, keys)
    batches = []
    add = bk.StreamedRecords.add
    monkeypatch.setattr(
        bk.StreamedRecords, "add", lambda self, *a: [batches.append(1), add(self, *a)]
    )
    got = _parts(lf, keys, _memory(frame.height, 2), "xi")
    assert len(batches) >= frame.height // 1_000  # read in batches, not spilled
    assert got.schema == whole.schema
    assert got.equals(whole)
    assert got["__bad__x"].sum() == (frame["xi"] > 10).sum() > 0


def bounding_spill_streamable(lf: pl.LazyFrame, keys: list[str]) -> bool:
    return spill.streamable(lf.collect_schema(), "pid", keys)


def test_records_that_change_between_the_two_reads_are_refused():
    """The batched path reads the persons twice (their buckets, then the records): a
    person moved to another bucket between the reads is refused, not bounded."""
    from dpframe.errors import InvalidDataError

    calls = []

    def moving(s: pl.Series) -> pl.Series:
        calls.append(s.len())
        return s if len(calls) == 1 else s + 4_000 * (s % 2 == 0).cast(pl.Int64)

    frame = _records("random").select("pid", "g", "xi")
    lf = frame.lazy().with_columns(pl.col("pid").map_batches(moving, return_dtype=pl.Int64))
    with pytest.raises(InvalidDataError, match="changed between two reads"):
        _parts(lf, ["g"], _memory(frame.height, 2), "xi")
