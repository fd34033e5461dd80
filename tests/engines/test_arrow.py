"""PRAM over Arrow record batches (the step Spark's mapInArrow and polars share)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from dpframe.engines.arrow import pram_record_batch
from dpframe.errors import InvalidDataError, InvalidParameterError
from dpframe.mechanisms.pram.plan import ArmedPram
from dpframe.pram import design, krr


def PramColumn(column, categories, sampler):  # noqa: N802 - reads as the thing it builds
    """A charged PRAM column (what the executor hands an engine)."""
    return ArmedPram(column, tuple(categories), sampler, None, {})


CATS = ("N", "S", "E", "W")


def test_types_are_kept_and_other_columns_pass_through():
    n = 1000
    rng = np.random.default_rng(0)
    batch = pa.record_batch(
        {
            "s": pa.array(rng.choice(CATS, n)),
            "d": pa.array(rng.choice(CATS, n)).dictionary_encode(),
            "i": pa.array(rng.integers(10, 14, n), type=pa.int32()),
            "x": pa.array(np.arange(n)),
        }
    )
    cols = [
        PramColumn("s", CATS, krr(4, 1.0).sampler),
        PramColumn("d", CATS, krr(4, 1.0).sampler),
        PramColumn("i", (10, 11, 12, 13), krr(4, 1.0).sampler),
    ]
    out = pram_record_batch(batch, cols)
    assert out.schema == batch.schema
    assert out["x"].equals(batch["x"])
    assert set(out["s"].to_pylist()) <= set(CATS)
    assert set(out["d"].dictionary_decode().to_pylist()) <= set(CATS)
    assert set(out["i"].to_pylist()) <= {10, 11, 12, 13}


def test_keep_rate_and_fresh_noise_per_batch():
    n, eps = 200_000, 1.0
    batch = pa.record_batch({"s": pa.array(["N"] * n)})
    col = PramColumn("s", CATS, krr(4, eps).sampler)
    a = np.array(pram_record_batch(batch, [col])["s"].to_pylist()) == "N"
    b = np.array(pram_record_batch(batch, [col])["s"].to_pylist()) == "N"
    q = math.exp(eps) / (math.exp(eps) + 3)
    se = math.sqrt(q * (1 - q) / n)
    assert abs(a.mean() - q) < 4.5 * se and abs(b.mean() - q) < 4.5 * se
    agree = (a == b).mean()  # independent draws: P(agree) = q^2 + (1-q)^2
    expected = q * q + (1 - q) * (1 - q)
    assert abs(agree - expected) < 4.5 * math.sqrt(expected * (1 - expected) / n)


def test_likelihood_ratio_of_a_public_prior_design_is_bounded():
    eps, per = 1.0, 200_000
    d = design(np.array([0.6, 0.25, 0.1, 0.05]), eps)
    col = PramColumn("s", CATS, d.sampler)
    freq = []
    for c in CATS:
        out = pram_record_batch(pa.record_batch({"s": pa.array([c] * per)}), [col])
        z = np.array(out["s"].to_pylist())
        freq.append(np.array([(z == k).mean() for k in CATS]))
    freq = np.array(freq)
    for i in range(4):
        for j in range(4):
            if i != j:
                se = np.sqrt((1 - freq[i]) / (per * freq[i]) + (1 - freq[j]) / (per * freq[j]))
                assert np.all(np.log(freq[i] / freq[j]) - 4.5 * se <= eps)


def test_bad_input_is_refused_before_anything_is_drawn():
    col = PramColumn("s", CATS, krr(4, 1.0).sampler)
    with pytest.raises(InvalidDataError, match="null"):
        pram_record_batch(pa.record_batch({"s": pa.array(["N", None])}), [col])
    with pytest.raises(InvalidDataError, match=r"outside the declared categories.*'Z'"):
        pram_record_batch(pa.record_batch({"s": pa.array(["N", "Z"])}), [col])
    with pytest.raises(InvalidParameterError, match="not in the batch"):
        pram_record_batch(pa.record_batch({"t": pa.array(["N"])}), [col])
    with pytest.raises(InvalidParameterError, match="categories"):
        PramColumn("s", ("N", "S"), krr(4, 1.0).sampler)
    with pytest.raises(InvalidDataError, match="do not fit"):
        pram_record_batch(pa.record_batch({"s": pa.array([1.5, 2.5])}), [col])
