"""Adversarial inputs of the compiled pass over dense keys (:mod:`dpframe.engines.dense_parts`).

Each test gives the pass (forced on by ``DENSE_ROWS = 0``) an input at an edge -- keys
whose combinations overflow int64, grids whose bins per unit overflow float64, values at
the grid's edges -- and checks it against the polars query or ``Grid.cell_index``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dpframe.engines import dense_parts as dp
from dpframe.engines.polars import PolarsEngine
from dpframe.mechanisms.statistics import count

KEYS = pl.Enum(["a", "b"])


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(dp, "DENSE_ROWS", 0)


def test_key_combinations_past_int64_are_left_to_polars(forced):
    """Four enums of 65535 categories: 65536**4 == 2**64 groups, which ``np.prod`` in
    int64 wrapped to 0 -- the layout passed the slot bound with empty arrays and the
    compiled loop wrote out of bounds (a segfault). Such keys are too many: polars."""
    big = pl.Enum([str(i) for i in range(65535)])
    keys = [f"k{i}" for i in range(4)]
    schema = pl.Schema(dict.fromkeys(keys, big))
    parts = count(epsilon=1.0).parts(False)
    assert dp.dense_layout(schema, keys, parts, keys) is None
    assert dp.dense_layout(schema, keys[:1], parts, keys[:1]) is not None
    rng = np.random.default_rng(0)
    frame = pl.DataFrame(
        {k: pl.Series(rng.integers(0, 65535, 50).astype(str), dtype=big) for k in keys}
    )
    out = PolarsEngine(frame).grouped_parts(keys, parts, keys)
    assert int(out["__rows"].sum()) == 50
