"""128-bit person ids and keys (issue 32): the bounding kernel codes them by their rank, in
the values' own order, so a release on ids beyond int64 is the release on the same ids
shifted into int64 (same codes, same random choices under one seed)."""

from __future__ import annotations

import polars as pl
import pytest

import dpframe


def _visits(ids: pl.Series) -> pl.DataFrame:
    n = ids.len()
    return pl.DataFrame(
        {"pid": ids, "ward": (["a", "b", "c"] * n)[:n], "days": [float(i % 7) for i in range(n)]}
    )


@pytest.mark.parametrize(
    "dtype", [pl.Int128, pl.UInt128] if hasattr(pl, "UInt128") else [pl.Int128]
)
def test_person_ids_beyond_int64_release_as_the_same_ids_within_it(dtype):
    base = [i // 3 for i in range(60)]  # 20 persons, 3 rows each
    wide = pl.Series("pid", [2**70 + i for i in base], dtype=dtype)
    narrow = pl.Series("pid", base, dtype=pl.Int64)
    wards = pl.DataFrame({"ward": ["a", "b", "c"]})
    out = []
    for ids in (wide, narrow):
        with dpframe.Accountant(epsilon=2.0, unit="pid", max_rows=1, max_groups=2) as acct:
            release = dpframe.group_by(_visits(ids), "ward", margins=wards, seed=7).agg(
                dpframe.agg.count(epsilon=1.0),
                dpframe.agg.sum("days", lower=0, upper=7, epsilon=1.0),
            )
            out.append(release.collect())
        assert acct.spent.epsilon == 2.0
    assert out[0].equals(out[1])


def test_keys_beyond_int64_are_released_with_their_values():
    keys = pl.Series("k", [2**70, 2**70 + 1, -(2**70)], dtype=pl.Int128)
    frame = pl.DataFrame({"k": pl.concat([keys, keys]), "pid": [0, 1, 2, 3, 4, 5]})
    with dpframe.Accountant(epsilon=1.0, unit="pid", max_rows=1, max_groups=1):
        out = dpframe.group_by(frame, "k", margins=pl.DataFrame({"k": keys}), seed=1).agg(
            dpframe.agg.count(epsilon=1.0)
        )
        table = out.collect()
    assert table["k"].dtype == pl.Int128
    assert sorted(table["k"].to_list()) == sorted(keys.to_list())
