"""The polars engine's own queries (what the parity tests do not pin down alone)."""

from __future__ import annotations

import numpy as np
import polars as pl

from dpframe.engines.polars import PolarsEngine


def test_covariance_inputs_are_the_clipped_sample_covariance_exactly_symmetric():
    """Each pair's covariance is computed once and mirrored; the pairs are named by the
    columns' places, so names that would join into the same string stay apart."""
    rng = np.random.default_rng(3)
    names = ["a|b", "c", "a", "b|c"]  # "a|b" + "c" and "a" + "b|c" join alike
    data = rng.normal(2.0, 2.0, size=(500, len(names)))
    bounds = [(0.0, 5.0), (-1.0, 3.0), (0.0, 4.0), (1.0, 2.0)]
    frame = pl.LazyFrame({n: data[:, i] for i, n in enumerate(names)}).with_columns(
        pl.col("c").cast(pl.Float32)  # cast to float64 before clipping, as every column
    )
    got = PolarsEngine(frame).covariance_inputs(names, bounds)
    clipped = np.column_stack(
        [
            np.clip(frame.collect()[n].cast(pl.Float64).to_numpy(), lo, hi)
            for n, (lo, hi) in zip(names, bounds, strict=True)
        ]
    )
    np.testing.assert_allclose(got.cov, np.cov(clipped.T, ddof=1), rtol=1e-12, atol=1e-14)
    assert (got.cov == got.cov.T).all()
    assert got.rows == 500 and got.bad == dict.fromkeys(names, 0)
