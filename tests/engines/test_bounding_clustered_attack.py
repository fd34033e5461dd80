# ruff: noqa: F811  (the ``clustered`` fixture is imported from the clustered tests)
"""Adversarial inputs for the clustered path (:mod:`dpframe.engines.bounding_clustered`).

* Person and key codes at the edges of int64 (still their own codes): the bitset or the
  sums would reach past int64 -- the path gives up (no OverflowError escapes) and the
  partition path keeps what the polars-only path keeps.
* Rows exactly ``WINDOW`` apart, a person straddling every window boundary, batches of
  odd sizes, large ``max_groups``/``max_rows`` (the sort branches), odd key types: the
  clustered path, when it bounds, keeps what the partition and polars paths keep.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dpframe.engines import bounding_clustered as bc
from tests.engines.test_bounding_clustered import (  # noqa: F401 (clustered: a fixture)
    _parts,
    _records,
    clustered,
)


def _same_as_polars(lf: pl.LazyFrame, keys: list[str]) -> None:
    got = _parts(lf, keys, "xi")
    polars = _parts(lf, keys, "xi", kernel=False)
    assert got.drop("__bad__x").equals(polars.drop("__bad__x"))
    assert got["__bad__x"].sum() == polars["__bad__x"].sum()


@pytest.mark.parametrize(
    ("column", "shift"),
    [("pid", -(2**63)), ("pid", 2**63 - 1 - 2_000), ("g", -(2**63))],
)
def test_codes_at_the_edge_of_int64_give_up_without_overflow(column, shift, monkeypatch, clustered):
    monkeypatch.setattr(bc, "WINDOW", 64)
    monkeypatch.setattr(bc, "_BATCH", 256)
    lf = _records("sorted").with_columns(pl.col(column) + shift).lazy()
    _same_as_polars(lf, ["g"])
    assert clustered == [None]


@pytest.mark.parametrize("batch", [63, 64, 65, 129, 1000])
def test_a_person_at_every_window_boundary_and_odd_batches(batch, monkeypatch, clustered):
    """Each person's rows 64 apart exactly (the window), or straddling the batches."""
    monkeypatch.setattr(bc, "WINDOW", 64)
    monkeypatch.setattr(bc, "_BATCH", batch)
    n = 4_000
    rng = np.random.default_rng(batch)
    # persons in runs of 65 rows: the first and last row of a run 64 apart
    pid = np.arange(n) // 65
    frame = pl.DataFrame(
        {"pid": pid, "g": rng.integers(0, 5, n), "xi": rng.integers(-3, 12, n).astype(float)}
    )
    _same_as_polars(frame.lazy(), ["g"])
    _same_as_polars(frame.lazy(), [])
    assert clustered and all(c is not None for c in clustered)


def test_large_bounds_use_the_sort_branches(monkeypatch, clustered):
    """max_groups and max_rows over 16: the argsort branch of the kernel's choice."""
    from dpframe.core.units import PrivacyUnit
    from tests.engines import test_bounding_clustered as t

    monkeypatch.setattr(bc, "WINDOW", 64)
    monkeypatch.setattr(bc, "_BATCH", 256)
    monkeypatch.setattr(t, "UNIT", PrivacyUnit("pid", max_rows=17, max_groups=18))
    n = 6_000
    rng = np.random.default_rng(5)
    pid = np.sort(rng.integers(0, 40, n))
    frame = pl.DataFrame(
        {"pid": pid, "g": rng.integers(0, 40, n), "xi": rng.integers(-3, 12, n).astype(float)}
    )
    got = _parts(frame.lazy(), ["g"], "xi")
    assert got["__rows"].sum() < n  # the rule dropped rows
    _same_as_polars(frame.lazy(), ["g"])
    assert clustered and clustered[0] is not None
