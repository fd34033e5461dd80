"""The bounded samplers' work does not depend on where the value lies (issue 31, item 2).

Reproduction: ``calibrate_bounded(1.0, 2.0, 0, 100).release([v])`` took a one-sided path
for ``v`` on a bound (median 44 µs against 53 µs at ``v = 50``) and a second rejection
round with probability 0.36 at ``v = 1``, never at ``v = 50``: one timing told a bound
from the middle 94.7 % of the time.

1. Structural, clock-free: with the same seed, a release at a bound, next to it, in the
   middle, on the other bound (and, for the samplers, outside the bounds) executes the
   same lines of ``dpframe.mechanisms`` in the same order and draws the same random
   words; so do vector releases whatever their values.
2. Timing: rounds of releases, each round one release per location in a random order
   (fixed seed), each timed with ``perf_counter_ns`` with the garbage collector off
   after a warm-up. For each pair of locations two classifiers are fitted on the first
   half of the rounds (the best threshold on a timing; "the faster of the round's two
   is this location") and scored on the second half: neither may beat chance by more
   than the binomial bound at ``ALPHA`` (Bonferroni over every comparison). Laplace and
   Gaussian releases are controls.
3. What may still depend on the value, the exact fallback, is counted at each location
   and stays within ``fallback_bound``.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import dpframe.mechanisms
from dpframe.mechanisms import discrete
from dpframe.mechanisms.bounded import (
    calibrate_bounded,
    sample_bit_laplace,
    sample_truncated_laplace,
)
from dpframe.mechanisms.discrete import sample_truncated_discrete_laplace
from dpframe.mechanisms.gaussian import calibrate_gaussian
from dpframe.mechanisms.laplace import calibrate_laplace

MECHANISMS = str(Path(dpframe.mechanisms.__file__).parent)

TRUNCATED = calibrate_bounded(1.0, 2.0, 0.0, 100.0)
BIT = calibrate_bounded(1.0, 2.0, 0.0, 100.0, method="bit")
NARROW = calibrate_bounded(1.0, 2.0, 0.0, 1.0)  # scale >> width
LAPLACE = calibrate_laplace(1.0, 2.0)  # controls: noise drawn without the value
GAUSSIAN = calibrate_gaussian(2.0, rho=0.5)

# location name -> value: on a bound, one unit (512 grid steps) inside, the middle
LOCATIONS = {"bound": 0.0, "near": 1.0, "middle": 50.0, "upper": 100.0}

Draw = Callable[[float, np.random.Generator], object]

SAMPLERS: dict[str, Draw] = {
    "truncated release": lambda v, rng: TRUNCATED.release(np.array([v]), rng),
    "bit release": lambda v, rng: BIT.release(np.array([v]), rng),
    "truncated release, scale >> width": lambda v, rng: NARROW.release(np.array([v / 100.0]), rng),
    "sample_truncated_laplace": lambda v, rng: sample_truncated_laplace(
        v, 2.0, 0.0, 100.0, rng=rng
    ),
    "sample_bit_laplace": lambda v, rng: sample_bit_laplace(v, 2.0, 0.0, 100.0, rng=rng),
    "sample_truncated_discrete_laplace": lambda v, rng: sample_truncated_discrete_laplace(
        -v, 100.0 - v, 1000, 1, rng=rng
    ),
    "laplace release": lambda v, rng: LAPLACE.release(np.array([v]), rng),
    "gaussian release": lambda v, rng: GAUSSIAN.release(np.array([v]), rng),
}

#: The samplers take any location: also one outside the bounds.
OUTSIDE = {"sample_truncated_laplace", "sample_bit_laplace", "sample_truncated_discrete_laplace"}


def locations(name: str) -> dict[str, float]:
    return {**LOCATIONS, "outside": -30.0} if name in OUTSIDE else LOCATIONS


# ---------------------------------------------------------------------------
# 1. The same lines and the same random words at every location
# ---------------------------------------------------------------------------


def trace(draw: Callable[[np.random.Generator], object]) -> tuple[list, dict]:
    """The (file, line) sequence run in dpframe.mechanisms, and the generator's end state."""
    lines: list[tuple[str, int]] = []

    def tracer(frame, event, arg):
        if not frame.f_code.co_filename.startswith(MECHANISMS):
            return None
        if event == "line":
            lines.append((Path(frame.f_code.co_filename).name, frame.f_lineno))
        return tracer

    rng = np.random.Generator(np.random.PCG64(7))
    sys.settrace(tracer)
    try:
        draw(rng)
    finally:
        sys.settrace(None)
    return lines, rng.bit_generator.state


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_every_location_runs_the_same_lines_and_draws_the_same_words(name):
    sampler = SAMPLERS[name]
    sampler(50.0, np.random.default_rng(0))  # fills the caches keyed by the scale
    runs = {where: trace(lambda rng, v=v: sampler(v, rng)) for where, v in locations(name).items()}
    lines, state = runs["middle"]
    assert lines
    for where, (other_lines, other_state) in runs.items():
        assert other_state == state, f"{name}: {where} draws another number of words"
        assert other_lines == lines, f"{name}: {where} takes another path than the middle"


VECTORS = {  # a vector release: every value on a bound, all in the middle, spread, mixed
    "bound": np.zeros(100),
    "middle": np.full(100, 50.0),
    "spread": np.linspace(0.0, 100.0, 100),
    "mixed": np.r_[np.zeros(50), np.full(50, 100.0)],
}


@pytest.mark.parametrize("cal", [TRUNCATED, BIT, NARROW], ids=["truncated", "bit", "narrow"])
@pytest.mark.parametrize("size", [3, 100, 2000])
def test_vector_releases_run_the_same_lines_wherever_the_values_lie(cal, size):
    cal.release(np.full(size, cal.upper / 2), np.random.default_rng(0))  # fills the caches
    runs = {
        where: trace(lambda rng, x=x: cal.release(np.resize(x, size) * cal.upper / 100.0, rng))
        for where, x in VECTORS.items()
    }
    lines, state = runs["middle"]
    for where, (other_lines, other_state) in runs.items():
        assert other_state == state, where
        assert other_lines == lines, where


# ---------------------------------------------------------------------------
# 2. No threshold on the time tells two locations apart
# ---------------------------------------------------------------------------

REPEATS = 1000  # rounds of timed one-value releases (one per location) per sampler
VECTOR_REPEATS = 600  # rounds of timed releases of VECTOR_SIZE values per placement
# Small enough that the CPU's own data-dependent time per float operation (a fraction of
# a nanosecond a value, seen with 4096 values even in BIT, whose code never reads the
# value before the clamp) stays far below the noise; any per-value path or lookup the
# sampler took would cost far more.
VECTOR_SIZE = 256
ALPHA = 1e-6  # family-wise false-alarm rate of the whole test (Bonferroni)


def timings(
    sampler: Callable[[object, np.random.Generator], object],
    where: dict[str, object],
    seed: int,
    rounds: int = REPEATS,
) -> dict[str, np.ndarray]:
    """Wall times (ns) of ``rounds`` rounds; each round releases at every location once,
    in a fresh random order. ``out[k][r]`` is location ``k``'s time in round ``r``."""
    shuffle = np.random.default_rng(seed)
    values = list(where.values())
    rng = np.random.default_rng(seed + 1)
    for v in values * 20:  # warm up every path
        sampler(v, rng)
    out = np.zeros((len(values), rounds), dtype=np.int64)
    clock = time.perf_counter_ns
    enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            for i in shuffle.permutation(len(values)).tolist():
                v = values[i]
                start = clock()
                sampler(v, rng)
                out[i, r] = clock() - start
    finally:
        if enabled:
            gc.enable()
    return dict(zip(where, out, strict=True))


def held_out_accuracy(a: np.ndarray, b: np.ndarray) -> tuple[float, float, int]:
    """Two classifiers fitted on the first half of the rounds, scored on the second half.

    ``threshold``: ``time <= c`` means ``a`` (or ``b``), ``c`` and the direction chosen to
    maximise the training accuracy; it labels each test timing alone. ``paired``: within
    a round, the faster of the two timings is ``a`` (or ``b``, whichever the training
    rounds favour). Under "the location does not change the time", each test label is
    right with probability 1/2 whatever the machine's load does, because the order
    within a round is random: the paired score is Binomial(n, 1/2) / n exactly; the
    threshold score is ``(n_same + 2 Binomial(n_diff, 1/2)) / 2n``, where ``n_diff <= n``
    rounds have exactly one timing below ``c`` (the others score 1 of 2 whatever the
    labels), no more spread about 1/2. Returns both accuracies and ``n``, the number of
    test rounds.
    """
    h = a.size // 2
    train_a, train_b, test_a, test_b = a[:h], b[:h], a[h:], b[h:]
    cuts = np.unique(np.concatenate([train_a, train_b]))
    below_a = np.searchsorted(np.sort(train_a), cuts, side="right")
    below_b = np.searchsorted(np.sort(train_b), cuts, side="right")
    score = below_a - below_b  # training accuracy of "<= c means a", minus 1/2, times 2h
    i = int(np.argmax(np.abs(score)))
    cut, a_is_fast = cuts[i], score[i] >= 0
    right = np.sum((test_a <= cut) == a_is_fast) + np.sum((test_b <= cut) != a_is_fast)
    threshold = float(right) / (2 * test_a.size)
    a_faster = np.mean(train_a < train_b) >= 0.5
    paired = float(np.mean((test_a < test_b) if a_faster else (test_b < test_a)))
    return threshold, paired, test_a.size


def comparisons() -> int:
    """The number of pairs compared by the timing tests (for Bonferroni)."""
    pairs = sum(len(locations(n)) * (len(locations(n)) - 1) // 2 for n in SAMPLERS)
    return pairs + 3 * len(VECTORS) * (len(VECTORS) - 1) // 2


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_no_threshold_on_the_time_tells_the_locations_apart(name):
    assert_indistinguishable(name, timings(SAMPLERS[name], locations(name), seed=31))


@pytest.mark.parametrize("cal", [TRUNCATED, BIT, NARROW], ids=["truncated", "bit", "narrow"])
def test_no_threshold_on_the_time_tells_vector_placements_apart(cal):
    # 256 values all on a bound, all in the middle, spread, half on each bound
    where = {k: np.resize(x, VECTOR_SIZE) * cal.upper / 100.0 for k, x in VECTORS.items()}
    times = timings(lambda x, rng: cal.release(x, rng), where, 32, VECTOR_REPEATS)
    assert_indistinguishable(f"{cal.method}, width {cal.upper}", times)


def assert_indistinguishable(name: str, times: dict[str, np.ndarray]) -> None:
    """Every pair of locations: both held-out accuracies within the chance bound."""
    alpha = ALPHA / (2 * comparisons())
    failures = []
    names = list(times)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            threshold, paired, n = held_out_accuracy(times[first], times[second])
            # chance: Binomial(n, 1/2) right of n rounds; beyond its 1 - alpha quantile
            bound = stats.binom.ppf(1 - alpha, n, 0.5) / n
            if max(threshold, paired) > bound:
                medians = (np.median(times[first]) / 1e3, np.median(times[second]) / 1e3)
                failures.append(
                    f"{first} vs {second}: accuracy {threshold:.3f} (threshold), "
                    f"{paired:.3f} (paired) > {bound:.3f} "
                    f"(medians {medians[0]:.1f} / {medians[1]:.1f} µs)"
                )
    assert not failures, f"{name}: " + "; ".join(failures)


# ---------------------------------------------------------------------------
# 3. What may still depend on the value: the exact fallback, within its bound
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "s", "width"), [(2**30, 1, 2 * 10**9), (2**31, 3, 10**5), (1000, 1, 10**4)]
)
def test_fallback_rate_is_within_its_bound_at_every_location(t, s, width, monkeypatch):
    # At scale 2**30 the fallback is common enough to count (about 1 draw in 2,000); its
    # rate must stay below fallback_bound at a bound, next to it and in the middle.
    calls = []
    real = discrete._exact_two_sided
    monkeypatch.setattr(
        discrete, "_exact_two_sided", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    n = 100_000
    bound = discrete.fallback_bound(s / t)
    limit = stats.binom.ppf(1 - 1e-7, n, bound)
    rng = np.random.default_rng(41)
    counts = {}
    for where, lo in (("bound", 0), ("near", -(width // 1000)), ("middle", -(width // 2))):
        calls.clear()
        z = sample_truncated_discrete_laplace(lo, lo + width, t, s, size=n, rng=rng)
        assert z.min() >= lo and z.max() <= lo + width
        counts[where] = len(calls)
        assert counts[where] <= limit, (where, counts[where], bound * n)
    if s / t < 1e-6:  # the fallback runs and is counted
        assert min(counts.values()) > 0, counts
