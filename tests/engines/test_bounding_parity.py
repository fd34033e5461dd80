"""Three engines, one bounding rule: the same records under the same key keep the same rows.

The rule (:mod:`dpframe.engines.bounding_rule`) is executed by the compiled kernel, the
polars-only path and Spark. Each run below gives every engine the same records and a
source seeded alike (so the same key), and compares the *sets of kept row identities*:
persons with more groups than ``max_groups`` and more rows than ``max_rows``, identical
rows, a tie of two pairs' 32 random bits (broken by the group code), int and string
person ids, int, string and two keys, at several bounds.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines import bounding_kernel as bk
from dpframe.engines import bounding_rule as rule
from dpframe.engines.bounding import bounded_frame, bounded_grouped_parts

SEED = 11
SETTINGS = [(1, 1), (2, 3), (3, 2)]  # (max_rows, max_groups)
LAYOUTS = [("int", ["g"]), ("str", ["s"]), ("str", ["g", "s"]), ("int", [])]


def _source() -> RandomSource:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RandomSource(seed=SEED)


def _tie() -> tuple[int, int, int]:
    """A person code and two group codes whose pairs' 32 random bits tie under the key
    the seeded source gives (a birthday search over group codes)."""
    key = rule.rule_key(_source().generator())
    person = 3
    groups = np.arange(2**18, dtype=np.int64)
    prio = rule.pair_priority(key, np.full(groups.size, person), groups)
    order = np.argsort(prio, kind="stable")
    same = np.flatnonzero(prio[order][1:] == prio[order][:-1])
    a, b = sorted(int(x) for x in order[[same[0], same[0] + 1]])
    return person, a, b


def _frame(pid: np.ndarray, g: np.ndarray, person_dtype: str) -> pl.DataFrame:
    s = np.array(["x", "y", "zz", "é"])[g % 4]  # a string key (its codes: lexical ranks)
    frame = pl.DataFrame({"pid": pid, "g": g, "s": s, "v": np.arange(pid.size) % 5})
    if person_dtype == "str":  # zero-padded: the lexical rank is the number
        frame = frame.with_columns(pl.format("p{}", pl.col("pid").cast(pl.String).str.zfill(3)))
    return frame.with_row_index("rid").with_columns(pl.col("rid").cast(pl.Int64))


def _records(person_dtype: str) -> pl.DataFrame:
    """About 300 records of 40 persons: many groups and many rows a pair, and identical
    records (the same person, keys and value)."""
    rng = np.random.default_rng(5)
    n = 260
    pid = np.concatenate([rng.integers(0, 40, n), np.full(12, 7), np.full(8, 9)])
    g = np.concatenate([rng.integers(0, 6, n), np.full(12, 2), np.repeat([0, 1], 4)])
    pid, g = np.concatenate([pid, pid[:5]]), np.concatenate([g, g[:5]])
    return _frame(pid, g, person_dtype)


def _tied_records(person_dtype: str) -> pl.DataFrame:
    """Person 3 in groups ``a`` and ``b``, whose pairs' random bits tie, and in group 0
    (3 rows each); person 4 in the same groups (no tie); persons 0, 1, 2 in group 0 (so
    that a string person's code, its rank, is its number)."""
    person, a, b = _tie()
    pid = np.concatenate([np.repeat([person, 4], 9), [0, 1, 2]])
    g = np.concatenate([np.tile(np.repeat([a, b, 0], 3), 2), [0, 0, 0]])
    return _frame(pid, g, person_dtype)


def _unit(max_rows: int, max_groups: int) -> PrivacyUnit:
    return PrivacyUnit("pid", max_rows=max_rows, max_groups=max_groups)


def _parts_rows(frame: pl.DataFrame, unit: PrivacyUnit, keys: list[str], kernel: bool) -> set[int]:
    """The rows a grouped release's parts are made of: one indicator sum a record."""
    values = {f"i{j}": (pl.col("rid") == j).cast(pl.Float64) for j in frame["rid"]}
    out = bounded_grouped_parts(frame.lazy(), unit, keys, values, [], {}, _source(), kernel=kernel)
    return {j for j in frame["rid"] if out[f"i{j}"].sum() == 1}


def _polars_rows(frame: pl.DataFrame, unit: PrivacyUnit, keys: list[str]) -> set[int]:
    return set(bounded_frame(frame.lazy(), unit, keys, _source()).collect()["rid"].to_list())


def _check_caps(frame: pl.DataFrame, kept: set[int], unit: PrivacyUnit, keys: list[str]) -> None:
    rows = frame.filter(pl.col("rid").is_in(sorted(kept)))
    if keys:
        assert (
            rows.group_by("pid").agg(pl.struct(keys).n_unique())[keys[0]].max() <= unit.max_groups
        )
    assert rows.group_by(["pid", *keys]).len()["len"].max() <= unit.max_rows


@pytest.mark.parametrize(("person", "keys"), LAYOUTS)
def test_kernel_and_polars_only_path_keep_the_same_rows(person, keys):
    frame = _records(person)
    for max_rows, max_groups in SETTINGS:
        unit = _unit(max_rows, max_groups)
        kernel = _parts_rows(frame, unit, keys, kernel=True)
        assert kernel == _parts_rows(frame, unit, keys, kernel=False)
        assert kernel == _polars_rows(frame, unit, keys)
        _check_caps(frame, kernel, unit, keys)
        assert len(kernel) < frame.height  # something was dropped: the choice was tested


@pytest.mark.parametrize("person_dtype", ["int", "str"])
def test_a_tie_of_the_random_bits_goes_to_the_smaller_group_code(person_dtype):
    person, a, b = _tie()
    frame = _tied_records(person_dtype)
    key = rule.rule_key(_source().generator())
    prio = rule.pair_priority(key, np.full(3, person), np.array([a, b, 0]))
    assert prio[0] == prio[1] and a < b
    for k in (1, 2):
        unit = _unit(3, k)
        kept = _polars_rows(frame, unit, ["g"])
        assert kept == _parts_rows(frame, unit, ["g"], kernel=True)
        assert kept == _parts_rows(frame, unit, ["g"], kernel=False)
        mine = frame.filter(pl.col("rid").is_in(sorted(kept)) & (pl.col("rid") < 9))
        groups = set(mine["g"].to_list())
        # the rule: the k first by (random bits, group code)
        want = sorted([(int(prio[0]), a), (int(prio[1]), b), (int(prio[2]), 0)])[:k]
        assert groups == {code for _, code in want}
        if prio[2] > prio[0]:  # the tie decides: a (the smaller code) before b
            assert (a in groups) and (k == 2 or b not in groups)


def _spark_rows(spark, frame: pl.DataFrame, unit: PrivacyUnit, keys: list[str]) -> set[int]:
    from dpframe.engines.spark import SparkEngine

    eng = SparkEngine(spark.createDataFrame(frame.to_arrow())).bounded(unit, keys, _source())
    got = set(pl.from_arrow(eng.frame.toArrow())["rid"].to_list())  # type: ignore[index]
    # the choices are made once: every action on the result sees the same rows
    assert got == set(pl.from_arrow(eng.frame.toArrow())["rid"].to_list())  # type: ignore[index]
    return got


@pytest.mark.slow
@pytest.mark.parametrize(("person", "keys"), [LAYOUTS[0], LAYOUTS[2], LAYOUTS[3]])
def test_spark_keeps_the_same_rows_as_polars(spark, person, keys):
    frame = _records(person)
    for max_rows, max_groups in SETTINGS:
        unit = _unit(max_rows, max_groups)
        assert _spark_rows(spark, frame, unit, keys) == _polars_rows(frame, unit, keys)
    if keys == ["g"]:  # and a tie, broken by the group code as on polars
        tied = _tied_records(person)
        for k in (1, 2):
            assert _spark_rows(spark, tied, _unit(3, k), keys) == _polars_rows(
                tied, _unit(3, k), keys
            )


def test_the_kernels_hash_is_the_rules_bit_for_bit():
    """The kernel re-expresses the rule's SipHash in numba: the same 64 bits on many
    pairs of codes, both message lengths and their edges, many keys."""
    rng = np.random.default_rng(3)
    n = 200_000
    edges = np.array([0, 1, 2**31, 2**32 - 1, 2**32, -1, -(2**63), 2**63 - 1], dtype=np.int64)
    p = np.concatenate([rng.integers(0, 2**32, n), rng.integers(-(2**63), 2**63, n), edges])
    g = np.concatenate([rng.integers(0, 2**32, n), rng.integers(-(2**40), 2**40, n), edges[::-1]])
    for _ in range(5):
        key = (int(rng.integers(0, 2**63)) * 2 + 1, int(rng.integers(0, 2**63)))
        assert np.array_equal(bk.pair_hash(key, p, g), rule.pair_hash(key, p, g))


@pytest.mark.slow
def test_spark_caps_hold_on_an_input_that_changes_between_reads(spark):
    """Spark reads its input again at every evaluation (and the bounding's plan reads it
    twice: to count the pairs and to keep their rows). An input that differs between
    reads (here a random half of the records) must still give at most ``max_rows`` rows a
    pair and ``max_groups`` groups a person: the cap is applied where the rows are kept."""
    import os

    from pyspark.sql import functions as sf
    from pyspark.sql.types import BooleanType

    from dpframe.engines.spark import SparkEngine

    people = 300
    frame = _frame(np.repeat(np.arange(people), 8), np.tile(np.repeat([0, 1], 4), people), "int")
    coin = sf.udf(lambda: os.urandom(1)[0] < 128, BooleanType()).asNondeterministic()
    sdf = spark.createDataFrame(frame.to_arrow()).filter(coin())
    unit = _unit(2, 1)
    out = pl.from_arrow(SparkEngine(sdf).bounded(unit, ["g"], _source()).frame.toArrow())
    assert out.group_by("pid", "g").len()["len"].max() <= 2  # type: ignore[union-attr]
    assert out.group_by("pid").agg(pl.col("g").n_unique())["g"].max() <= 1  # type: ignore[union-attr]
