"""The compiled bounding kernel: its SipHash against CPython's, exact caps, uniform laws,
stability (a person's rows never change another's), and the same parts as the polars path."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
import sys
import warnings

import numpy as np
import polars as pl
import pytest
from scipy import stats

from dpframe.core.randomness import RandomSource
from dpframe.core.units import PrivacyUnit
from dpframe.engines import bounding_kernel as bk
from dpframe.engines import bounding_rule as rule
from dpframe.engines.bounding import bounded_grouped_parts

P_MIN = 1e-4  # a law test fails only if its p-value is below this
KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def _seeded(seed: int) -> RandomSource:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RandomSource(seed=seed)


def test_pair_hash_is_siphash13_as_cpython_computes_it():
    """CPython hashes bytes with SipHash-1-3; with PYTHONHASHSEED=0 its key is zero. Both
    message lengths: 8 bytes (codes in [0, 2**32)) and 16 (any other codes); the kernel's
    compiled copy and the rule's reference alike."""
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.integers(0, 2**32, 30), rng.integers(-(2**63), 2**63, 30)])
    g = np.concatenate([rng.integers(0, 2**32, 30), rng.integers(0, 2**40, 30)])
    p[30:33], g[30:33] = [2**32, -1, 5], [0, 3, 2**32]  # just outside 32 bits
    ours = bk.pair_hash((0, 0), p, g)
    data = [
        int(a).to_bytes(4, "little") + int(b).to_bytes(4, "little")
        if 0 <= a < 2**32 and 0 <= b < 2**32
        else int(a).to_bytes(8, "little", signed=True) + int(b).to_bytes(8, "little")
        for a, b in zip(p, g, strict=True)
    ]
    assert sum(len(d) == 8 for d in data) == 30
    ref = _cpython_siphash(data)
    # CPython maps a hash of -1 to -2; no such value among these
    assert [int(h) for h in ours] == ref
    # and the rule's numpy reference (which Spark runs) is the same SipHash
    assert [int(h) for h in rule.pair_hash((0, 0), p, g)] == ref


def _cpython_siphash(data: list[bytes]) -> list[int]:
    """CPython's hash of each message with PYTHONHASHSEED=0 (SipHash-1-3 under the zero
    key, as 64 unsigned bits); the test is skipped where CPython hashes otherwise."""
    code = (
        "import sys; print(sys.hash_info.algorithm); "
        "[print(hash(bytes.fromhex(x)) % 2**64) for x in sys.argv[1:]]"
    )
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code, *[d.hex() for d in data]],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    if out[0] != "siphash13":
        pytest.skip(f"this Python hashes with {out[0]}")
    return [int(v) for v in out[1:]]


def test_the_kernels_row_hash_is_the_rules_and_cpythons():
    """The row hash: SipHash-1-3 of 24 bytes (three little-endian 64-bit words); the
    kernel's copy bit-equal to the rule's reference, both to CPython's SipHash-1-3 (key
    zero with PYTHONHASHSEED=0)."""
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.integers(0, 2**40, 40), [-1, 2**63 - 1, 0]])
    g = np.concatenate([rng.integers(-(2**30), 2**30, 40), [0, -(2**63), 2**32]])
    pos = np.concatenate([rng.integers(0, 2**32 - 1, 40), [0, 1, 2**32 - 2]])
    for key in [(0, 0), (0x0123456789ABCDEF, 0xFEDCBA9876543210)]:
        assert np.array_equal(bk.row_hash(key, p, g, pos), rule.row_hash(key, p, g, pos))
    data = [
        b"".join(int(v).to_bytes(8, "little", signed=True) for v in t)
        for t in zip(p, g, pos, strict=True)
    ]
    ref = _cpython_siphash(data)
    assert [int(h) for h in bk.row_hash((0, 0), p, g, pos)] == ref
    assert [int(h) for h in rule.row_hash((0, 0), p, g, pos)] == ref


def _data(n=30_000, people=2_000, groups=25, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, people, n).astype(np.int64),
        rng.integers(0, groups, n).astype(np.int64),
        rng.uniform(-2, 12, n),
    )


def _bound(pid, gid, values, key, k, r, *ranges, seed=0, mark_kept=False):
    return bk.bounded_sums(
        pid,
        gid,
        values,
        key,
        k,
        r,
        *ranges,
        row_key=_row_key(seed),
        mark_kept=mark_kept,
    )


def _row_key(seed: int) -> tuple[int, int]:
    return rule.rule_key(np.random.default_rng(seed))


def _rule_rows(pid, gid, key, k, r, seed):
    """The rows the rule keeps, by the rule's numpy reference (the polars-only path's
    functions): each person's k pairs of smallest (priority, group), then, for the kept
    pairs over r rows, each pair's rows in file order, the rule's positions (the r
    smallest row priorities under the row key)."""
    n = pid.size
    order = np.lexsort((np.arange(n), gid, pid))  # by pair, each pair's rows in file order
    p, g = pid[order], gid[order]
    start = np.flatnonzero(np.concatenate(([True], (p[1:] != p[:-1]) | (g[1:] != g[:-1]))))
    lens = np.diff(np.concatenate((start, [n])))
    keep_pair = rule.kept_pairs(p[start], g[start], key, k)
    pair_of_row = np.repeat(np.arange(start.size), lens)
    keep = keep_pair[pair_of_row]
    big = keep_pair & (lens > r)
    on = big[pair_of_row]
    keep[on] = rule.kept_positions(p[start][big], g[start][big], lens[big], r, _row_key(seed))
    mask = np.zeros(n, dtype=bool)
    mask[order[keep]] = True
    return mask


@pytest.mark.parametrize(("k", "r"), [(1, 1), (3, 2), (2, 12), (40, 1)])
def test_caps_hold_exactly_and_sums_are_the_kept_rows(k, r):
    pid, gid, x = _data()
    kept, sums, pairs, group_row, marks = _bound(pid, gid, x[None, :], KEY, k, r, mark_kept=True)
    assert set(np.unique(marks)) <= {bk.DROPPED, bk.KEPT}
    df = pl.DataFrame({"pid": pid, "g": gid, "x": x, "m": marks})
    on = df.filter(pl.col("m") == bk.KEPT)
    assert on.group_by("pid").agg(pl.col("g").n_unique())["g"].max() <= k
    assert on.group_by("pid", "g").len()["len"].max() <= r
    per = on.group_by("g").agg(pl.len(), pl.col("x").sum(), pl.col("pid").n_unique())
    per = per.sort("g")
    g = per["g"].to_numpy()
    assert kept[g].tolist() == per["len"].to_list()
    assert np.allclose(sums[g, 0], per["x"].to_numpy())
    assert pairs[g].tolist() == per["pid"].to_list()  # the kept pairs: distinct persons
    assert kept.sum() == on.height
    # each group's row is a row of that group (its keys' values); -1 for no row
    assert (gid[group_row] == np.arange(group_row.size)).all()
    # a person keeps min(k, its groups) groups and min(r, rows) rows of each
    want = df.group_by("pid", "g").len().with_columns(pl.col("len").clip(upper_bound=r))
    got = on.group_by("pid", "g").len()
    joined = want.join(got, on=["pid", "g"], how="left").fill_null(0)
    assert (
        joined.filter(pl.col("len_right") > 0)["len_right"]
        == joined.filter(pl.col("len_right") > 0)["len"]
    ).all()
    groups = joined.group_by("pid").agg(pl.len(), (pl.col("len_right") > 0).sum().alias("on"))
    assert (groups["on"] == groups["len"].clip(upper_bound=k)).all()


@pytest.mark.parametrize(
    ("k", "r", "people"), [(1, 1, 5_000), (3, 2, 5_000), (2, 3, 5_000), (2, 20, 800)]
)
def test_the_kernel_keeps_the_rows_the_rule_keeps(k, r, people):
    """The compiled kernel against the rule's numpy reference, row for row, with many
    oversized pairs spread over many buckets and the input cut into pieces: the same
    key and generator keep the same rows (the oversized pairs' rows included, chosen by
    insertion for a small max_rows, by a sort above 16)."""
    rng = np.random.default_rng(8)
    n = 60_000
    pid = rng.integers(0, people, n)
    gid = (pid * 7 + np.minimum(rng.geometric(0.5, n) - 1, 4)) % 50  # a few groups each
    want = _rule_rows(pid, gid, KEY, k, r, seed=3)
    assert want.sum() < n
    cuts = [0, 7, 7, 20_000, 41_234, n]
    pieces = [slice(a, b) for a, b in itertools.pairwise(cuts)]
    for args in (
        (pid, gid, np.zeros((0, n))),
        (
            [pid[s] for s in pieces],
            [gid[s] for s in pieces],
            [np.zeros((0, s.stop - s.start)) for s in pieces],
        ),
    ):
        marks = _bound(*args, KEY, k, r, seed=3, mark_kept=True)[4]
        assert np.array_equal(marks == bk.KEPT, want)


def test_marks_land_on_their_rows_whatever_the_pieces():
    """The records are partitioned by person in runs of pieces and the marks put back on
    their rows by replaying the scatter: cutting the input into pieces (empty ones too)
    changes nothing."""
    pid, gid, x = _data(40_000, people=3_000, groups=7)
    one = _bound(pid, gid, x[None, :], KEY, 2, 1, mark_kept=True)
    assert (one[4] == bk.DROPPED).sum() > 100  # the replay has work to do
    cuts = [0, 5, 5, 9_000, 9_001, 20_000, 33_333, 40_000]
    pieces = [slice(a, b) for a, b in itertools.pairwise(cuts)]
    many = _bound(
        [pid[s] for s in pieces],
        [gid[s] for s in pieces],
        [x[None, s] for s in pieces],
        KEY,
        2,
        1,
        mark_kept=True,
    )
    for a, b in zip(one[:3], many[:3], strict=True):
        assert np.allclose(a, b)
    assert np.array_equal(one[4], many[4])
    assert (gid[many[3]] == np.arange(7)).all()


def test_stability_a_person_changes_only_their_own_pairs():
    """The property the sensitivities rest on: adding a person (any rows) leaves every
    other person's kept pairs, and the number of rows each keeps, as they were (same
    key; *which* rows of a pair over max_rows is a uniform draw, the same law)."""
    pid, gid, x = _data(5_000, people=300)

    def kept_pairs(p, g, v):
        marks = _bound(p, g, v[None, :], KEY, 2, 1, mark_kept=True)[4]
        df = pl.DataFrame({"p": p, "g": g, "m": marks}).filter(pl.col("m") == bk.KEPT)
        return df.filter(pl.col("p") != 10_000).group_by("p", "g").len().sort("p", "g")

    rng = np.random.default_rng(9)
    extra = rng.integers(0, 25, 40)  # a person with 40 rows in many groups
    pid2 = np.concatenate([pid[:100], np.full(40, 10_000), pid[100:]])
    gid2 = np.concatenate([gid[:100], extra, gid[100:]])
    x2 = np.concatenate([x[:100], np.zeros(40), x[100:]])
    assert kept_pairs(pid, gid, x).equals(kept_pairs(pid2, gid2, x2))


def test_groups_chosen_uniformly_and_independently_of_file_order():
    people, m = 6_000, 4
    pid = np.repeat(np.arange(people), m)
    gid = np.tile(np.arange(m), people)
    for order in (np.arange(pid.size), np.random.default_rng(3).permutation(pid.size)):
        kept = _bound(pid[order], gid[order], np.zeros((0, pid.size)), KEY, 1, 1)[0]
        assert kept.sum() == people
        assert stats.chisquare(kept).pvalue > P_MIN
    # two of four: each of the 6 pairs of groups equally likely
    marks = _bound(pid, gid, np.zeros((0, pid.size)), (5, 6), 2, 1, mark_kept=True)[4]
    chosen = marks.reshape(people, m) > 0
    assert (chosen.sum(axis=1) == 2).all()
    code = chosen @ (1 << np.arange(m))
    counts = np.unique(code, return_counts=True)[1]
    assert counts.size == 6 and stats.chisquare(counts).pvalue > P_MIN


def _positions(people: int, m: int, groups: int, shuffle: bool) -> pl.DataFrame:
    j = np.tile(np.arange(m), people)
    df = pl.DataFrame({"pid": np.repeat(np.arange(people), m), "j": j, "g": j % groups})
    return df.sample(fraction=1.0, shuffle=True, seed=5) if shuffle else df


@pytest.mark.parametrize("shuffle", [False, True])
def test_rows_and_groups_uniform_through_the_release_path(shuffle):
    """3 groups of 3 rows, keep 2 groups x 1 row: each of the 9 positions with probability
    2/9, whatever the file order (the oversized pairs' rows: the row priorities)."""
    people = 3_000
    df = _positions(people, 9, 3, shuffle)
    values = {f"at{j}": (pl.col("j") == j).cast(pl.Float64) for j in range(9)}
    unit = PrivacyUnit("pid", max_rows=1, max_groups=2)
    out = bounded_grouped_parts(df.lazy(), unit, ["g"], values, ["n"], {}, _seeded(1))
    assert out["n"].sum() == 2 * people and out.height == 3
    per = np.array([out[f"at{j}"].sum() for j in range(9)])
    assert per.sum() == 2 * people
    assert stats.chisquare(per).pvalue > P_MIN


def _same(a: pl.DataFrame, b: pl.DataFrame, keys: list[str]) -> None:
    if keys:
        a, b = a.sort(keys, nulls_last=True), b.sort(keys, nulls_last=True)
    assert a.columns == b.columns and a.height == b.height
    assert a.schema == b.schema
    for c in a.columns:
        if c.startswith("__bad__"):  # all rows' count, put on whichever group is first
            assert a[c].sum() == b[c].sum(), c
        elif c in keys:
            assert a[c].to_list() == b[c].to_list(), c
        else:
            assert np.allclose(a[c].to_numpy(), b[c].to_numpy()), c


KEY_COLUMNS = {
    "s": pl.Series(["a", "b", None, "c", "b", "a"] * 50),
    "cat": pl.Series(["u", "v", "w", "u", "v", "u"] * 50, dtype=pl.Categorical),
    "enum": pl.Series(["x", "y", "x", "y", "x", "x"] * 50, dtype=pl.Enum(["y", "x"])),
    "b": pl.Series([True, False, None, True, True, False] * 50),
    "d": pl.Series([dt.date(2020, 1, i) for i in (1, 2, 3, 1, 2, 9)] * 50),
    "i8": pl.Series([-3, 5, -3, 7, None, 5] * 50, dtype=pl.Int8),
    "u64": pl.Series([2**64 - 1, 0, 2**63, 1, 0, 2**64 - 1] * 50, dtype=pl.UInt64),
    "f": pl.Series([0.5, 1.5, 0.5, 2.5, 1.5, 0.5] * 50),  # not encodable: the polars path
    "wide": pl.Series([0, 2**31, -(2**30), 7, 2**31, 0] * 50),  # sparse: dense ranks
}


@pytest.mark.parametrize(
    "keys",
    [["s"], ["cat"], ["enum"], ["b"], ["d"], ["i8"], ["u64"], ["f"], ["wide"], ["s", "b", "i8"]],
)
@pytest.mark.parametrize("person", ["int", "str", "sparse"])
def test_kernel_and_polars_paths_agree_when_nothing_is_dropped(keys, person):
    n = 300
    rng = np.random.default_rng(1)
    people = rng.integers(0, 40, n)
    pids = {
        "int": pl.Series(people),
        "str": pl.Series([f"p{p}" for p in people]),
        "sparse": pl.Series(people * 10**15),  # spans more than 2**36: the polars path
    }
    df = pl.DataFrame({"pid": pids[person], **KEY_COLUMNS, "x": rng.uniform(0, 10, n)})
    unit = PrivacyUnit("pid", max_rows=n, max_groups=n)
    values = {"s_x": pl.col("x"), "sq": pl.col("x") ** 2}
    bads = {"__bad__x": pl.col("x") > 5}  # any row-level flag: both paths count all rows
    args = (df.lazy(), unit, keys, values, ["c"], bads, _seeded(2))
    fast = bounded_grouped_parts(*args)
    slow = bounded_grouped_parts(*args, kernel=False)
    _same(fast, slow, keys)
    assert fast["__bad__x"].sum() == (df["x"] > 5).sum()


def test_caps_through_the_release_path_with_string_keys_and_nulls():
    rng = np.random.default_rng(4)
    n = 20_000
    df = pl.DataFrame(
        {
            "pid": rng.integers(0, 500, n).astype(str),
            "g": pl.Series(rng.choice(["a", "b", "c", "d", None], n)),
            "h": rng.integers(0, 3, n),
        }
    )
    unit = PrivacyUnit("pid", max_rows=2, max_groups=3)
    out = bounded_grouped_parts(df.lazy(), unit, ["g", "h"], {}, ["c"], {}, _seeded(3))
    # every person keeps at most 3 pairs of at most 2 rows, and exactly min(n_pair, 2)
    # rows of each kept pair: at most 6 rows a person, at least min(groups, 3) rows
    pairs = df.group_by("pid", "g", "h").len()
    per = pairs.group_by("pid").agg(pl.len().alias("k"))
    assert out["c"].sum() <= 6 * per.height
    assert out["c"].sum() >= per["k"].clip(upper_bound=3).sum()
    assert out.height == pairs.select("g", "h").unique().height


def test_empty_frame():
    df = pl.DataFrame({"pid": pl.Series([], dtype=pl.Int64), "g": pl.Series([], dtype=pl.Utf8)})
    unit = PrivacyUnit("pid", max_rows=1, max_groups=1)
    out = bounded_grouped_parts(df.lazy(), unit, ["g"], {}, ["c"], {}, _seeded(1))
    assert out.height == 0
    out = bounded_grouped_parts(df.lazy(), unit, [], {}, ["c"], {}, _seeded(1))
    assert out["c"].to_list() == [0.0]


def test_out_of_range_codes_are_refused_not_written():
    pid = np.array([0, 1, 5], dtype=np.int64)
    with pytest.raises(ValueError, match="outside"):
        _bound(pid, np.zeros(3, np.int64), np.zeros((0, 3)), KEY, 1, 1, (0, 2), (0, 0))


def test_group_codes_follow_the_values_order_not_the_file_order():
    """The kernel breaks a tie of priorities (probability 2**-32) by group code: the codes
    must order the values the same way whatever else is in the data -- strings
    lexically, whatever order they were first seen in (the categorical cache's)."""
    from dpframe.engines.bounding_rule import _column_codes as _codes
    from dpframe.engines.bounding_rule import _dense, _group_codes

    pl.Series(["zz", "yy", "b"], dtype=pl.Categorical)  # fill the cache in another order
    for values in (["b", "a", "c", "a", None], ["c", None, "a", "b", "b"]):
        for dtype in (pl.String, pl.Categorical):
            codes = _codes(pl.Series(values, dtype=dtype))
            want = [None if v is None else sorted({"a", "b", "c"}).index(v) for v in values]
            assert codes.to_list() == want
    enum = pl.Series(["x", "y", "x"], dtype=pl.Enum(["y", "x"]))
    assert _codes(enum).to_list() == [1, 0, 1]  # the declared order
    # sparse codes are compressed to dense ranks, in the same order
    gid = _dense(pl.Series([2**40, 0, -(2**35), 0]), 2**20)
    assert gid.to_list() == [2, 1, 0, 1]
    gid = _group_codes([pl.Series([1, 0, None]), pl.Series([2**30, 0, 5])], 3)
    assert gid.rank("dense").to_list() == [2, 1, 3]  # a null key last
    # codes that would overflow 62 bits in mixed radix: ranks of the keys, same order
    wide = [pl.Series([2**62, -(2**62), 0, 2**62]), pl.Series([1, 2**40, -5, 0])]
    gid = _group_codes(wide, 4)
    assert gid.to_list() == [3, 0, 1, 2]  # lexicographic: (-2**62, .) < (0, .) < (2**62, 0)


def test_sums_do_not_depend_on_marking_the_kept_rows():
    pid, gid, x = _data()
    a = _bound(pid, gid, x[None, :], KEY, 2, 3)
    b = _bound(pid, gid, x[None, :], KEY, 2, 3, mark_kept=True)
    for u, v in zip(a[:4], b[:4], strict=True):
        assert np.array_equal(u, v)
    assert a[4] is None and b[4].size == pid.size


def test_column_names_of_the_input_never_meet_the_kernels_own():
    """The kernel reads the person, the keys and derived columns in one query; input
    columns named like its internal ones change nothing."""
    rng = np.random.default_rng(6)
    n = 400
    df = pl.DataFrame(
        {
            "keys": rng.integers(0, 30, n),  # the person
            "v0": rng.choice(["a", "b", "c"], n),  # a key
            "b0": rng.integers(0, 3, n),  # a key
            "__value0": rng.uniform(0, 5, n),  # the summed column
        }
    )
    unit = PrivacyUnit("keys", max_rows=n, max_groups=n)
    values = {"s": pl.col("__value0")}
    bads = {"__bad__x": pl.col("__value0") > 4}
    args = (df.lazy(), unit, ["v0", "b0"], values, ["c"], bads, _seeded(4))
    fast = bounded_grouped_parts(*args)
    _same(fast, bounded_grouped_parts(*args, kernel=False), ["v0", "b0"])
    assert fast["s"].sum() == pytest.approx(df["__value0"].sum())


def test_no_compiled_function_builds_an_array_from_a_constant_list():
    """numba's rewrite of ``np.array([a, b, ...])`` inside a compiled function once named
    two variables alike while compiling the parallel partition on a fresh machine (CI:
    ``key already in dictionary: '$np_g_var.1'``, not reproduced here): no ``@njit`` body
    of the package builds one; the callers pass such arrays in."""
    import ast
    from pathlib import Path

    import dpframe

    found = []
    for path in Path(dpframe.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            if not any("jit" in ast.unparse(d) for d in fn.decorator_list):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and ast.unparse(node.func) in ("np.array", "np.asarray", "numpy.array")
                    and node.args
                    and isinstance(node.args[0], ast.List | ast.Tuple)
                ):
                    found.append(f"{path.name}:{node.lineno} in {fn.name}")
    assert not found
    assert any("jit" in p.read_text() for p in Path(dpframe.__file__).parent.rglob("*kernel.py"))
