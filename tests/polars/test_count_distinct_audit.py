"""A privacy audit of ``dpframe.agg.count_distinct`` on neighbouring data sets (issue 34).

The two data sets differ by one person with several rows in several groups (more of
both than the caps), under add/remove (the person is there or not) and substitution (the
person is replaced by another with rows in other groups). For each of several bounding
keys -- the same key on both sides, as the key is drawn independently of the data, so
the release's law is a mixture over keys and a bound for every key bounds the mixture --
the real pipeline gives the exact parts (``exact_aggregates``) and the real plan its
noise: integer Laplace of scale ``t`` in every group. The law of the released vector is
then known exactly (:func:`dpframe.mechanisms.discrete.discrete_laplace_pmf`, a product
over the groups), and the privacy loss ``log P(y | D) - log P(y | D')`` is computed
exactly, per group on every output value in a window that holds its maximum (the loss
of a product law is the sum over the groups; each group's is largest, and constant, in
the tails). Its largest value must not pass the charged epsilon, and it reaches the
calibrated epsilon where the changed person moves the vector by its full sensitivity.
The same for the joint release with a count of rows (the clamp of the distinct count to
the count is post-processing of the pair).
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import dpframe
from dpframe.mechanisms.discrete import discrete_laplace_pmf

GROUPS = pl.DataFrame({"g": [0, 1, 2, 3, 4]})
OTHERS = {1: [0, 0, 1, 2, 2], 2: [1, 3, 3, 3], 3: [0, 4, 4], 4: [2, 2, 2, 2, 3]}
CHANGED = {9: [0, 0, 0, 1, 2, 2, 3]}  # 7 rows in 4 groups
REPLACEMENT = {9: [4, 4, 1]}  # (substitution) rows in 2 groups, one shared


def people(rows: dict[int, list[int]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "pid": [p for p, gs in rows.items() for _ in gs],
            "g": [g for gs in rows.values() for g in gs],
        }
    )


def release(frame: pl.DataFrame, neighbours: str, seed: int, with_count: bool):
    stats = [dpframe.agg.count_distinct(epsilon=0.7)]
    if with_count:
        stats.append(dpframe.agg.count(epsilon=0.4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        acct = dpframe.Accountant(epsilon=5.0, neighbours=neighbours)
        return dpframe.group_by(
            frame,
            "g",
            margins=GROUPS,
            accountant=acct,
            seed=seed,
            unit="pid",
            max_rows=2,
            max_groups=2,
        ).agg(*stats)


def largest_loss(a: np.ndarray, b: np.ndarray, scale: float) -> float:
    """The largest ``log P(y | a) - log P(y | b)`` over every output vector ``y``, for
    independent discrete Laplace noise of ``scale`` added to each entry of ``a`` / ``b``
    (integers): the sum over entries of each entry's largest loss, computed on every
    ``y`` from 30 scales below to 30 above the two values (the loss is monotone beyond)."""
    total = 0.0
    for x, y in zip(a.astype(np.int64), b.astype(np.int64), strict=True):
        reach = int(30 * scale) + 1
        outputs = np.arange(min(x, y) - reach, max(x, y) + reach + 1)
        log_a = np.log(discrete_laplace_pmf(outputs - x, scale))
        log_b = np.log(discrete_laplace_pmf(outputs - y, scale))
        total += float(np.max(log_a - log_b))
    return total


@pytest.mark.parametrize("with_count", [False, True], ids=["persons", "persons+count"])
@pytest.mark.parametrize("neighbours", ["add_remove", "substitute"])
def test_the_exact_privacy_loss_is_at_most_the_charged_epsilon(neighbours, with_count):
    d = people({**OTHERS, **CHANGED})
    d_prime = people(OTHERS if neighbours == "add_remove" else {**OTHERS, **REPLACEMENT})
    charged = 0.7 + (0.4 if with_count else 0.0)
    losses = []
    for seed in range(6):  # six bounding keys
        one, two = (
            release(d, neighbours, seed, with_count),
            release(d_prime, neighbours, seed, with_count),
        )
        exact_one, exact_two = one.exact_aggregates(), two.exact_aggregates()
        loss = 0.0
        for plan in one._plans:  # the real plans: their noise scale in grid steps (1)
            cal_scale = plan.scale
            part = plan.statistic.parts(False)[0].name
            loss += largest_loss(exact_one[part].to_numpy(), exact_two[part].to_numpy(), cal_scale)
        losses.append(loss)
        assert loss <= charged * (1 + 1e-9), (seed, loss, charged)
    # the person keeps 2 of their 4 groups whatever the key: the distinct vector moves by
    # its full l1 sensitivity (add/remove: 2) for every key, so the loss is the calibrated
    # epsilon of the distinct count (a dyadic epsilon at most 0.7, within 2**-20)
    distinct = one._plans[0]
    if neighbours == "add_remove":
        assert min(losses) >= distinct.epsilon - 2**-20 - 1e-9
    assert max(losses) >= distinct.epsilon - 2**-20 - 1e-9


def test_the_audit_sees_a_loss_above_epsilon_without_the_bounding():
    """The audit is not blind: with max_groups = 1 charged but the person's 4 groups all
    counted (no bounding), the loss of the same neighbours is 4 times the epsilon."""
    d, d_prime = people({**OTHERS, **CHANGED}), people(OTHERS)
    count = lambda f: f.group_by("g").agg(pl.col("pid").n_unique().alias("n"))  # noqa: E731
    a = GROUPS.join(count(d), on="g", how="left").fill_null(0)["n"].to_numpy()
    b = GROUPS.join(count(d_prime), on="g", how="left").fill_null(0)["n"].to_numpy()
    scale = 1 / 0.5  # sensitivity 1 (max_groups = 1, add/remove) at epsilon 0.5
    assert largest_loss(a, b, scale) == pytest.approx(4 * 0.5)
