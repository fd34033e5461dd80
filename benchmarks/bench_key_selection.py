"""Private key selection over 1e6 keys against a numpy float baseline, in the same run.

Times ``KeySelectionPlan.draw`` (``dpframe.mechanisms.key_selection``; exact: one
integer word per key for ``"magic"``, exact discrete Laplace for ``"laplace"``) on 1e6
keys whose person counts follow a heavy tail (most keys rare, a few large), against the
float mechanisms numpy gives directly (not safe for differential privacy):
``rng.random(n) < pi[counts]`` for magic selection and ``counts + rng.laplace(...) >=
threshold`` for Laplace thresholding, both on PCG64, then dpframe on its secure
generator (AES-128-CTR), which a release uses. Also the time to plan (magic: building
the exact table of ``pi``). The two are run alternately; the best of ``--repeats`` runs
(default 5; ``--quick``: 2) of each is printed with the ratio dpframe/numpy.

Timings on a shared machine are noisy: read the ratios. Nothing here asserts a timing.

Run from the repository root::

    python benchmarks/bench_key_selection.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from bench_discrete_laplace import best_pair  # the scripts' shared timing loop

from dpframe.core.randomness import secure_generator
from dpframe.mechanisms.key_selection import plan_key_selection

KEYS = 1_000_000
EPSILON, DELTA = 1.0, 1e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats")
    parser.add_argument("--repeats", type=int, default=None, help="repeats per timing")
    args = parser.parse_args()
    repeats = args.repeats or (2 if args.quick else 5)
    print(
        f"bench_key_selection: numpy {np.__version__}, python {platform.python_version()}, "
        f"cpu_count={os.cpu_count()}, keys={KEYS:,}, epsilon={EPSILON}, delta={DELTA:g}, "
        f"best of {repeats}"
    )
    pcg = np.random.default_rng(0)
    secure = secure_generator()
    counts = np.minimum(pcg.zipf(1.5, size=KEYS), 10**9).astype(np.int64)

    print(f"\n{'method, source':>24}  {'dpframe s':>9}  {'numpy s':>8}  {'ratio':>6}  released")
    for method in ("magic", "laplace"):
        t = time.perf_counter()
        plan = plan_key_selection(EPSILON, DELTA, method=method)
        planned = time.perf_counter() - t
        if method == "magic":
            pi = np.array([plan.probability_released(k) for k in range(plan.threshold + 1)])

            def baseline(pi: np.ndarray = pi) -> object:
                return pcg.random(KEYS) < pi[np.minimum(counts, pi.shape[0] - 1)]

        else:
            scale = 1.0 / EPSILON

            def baseline(threshold: int = plan.threshold, scale: float = scale) -> object:
                return counts + pcg.laplace(scale=scale, size=KEYS) >= threshold

        for label, rng in (("PCG64", pcg), ("secure", secure)):
            t_ours, t_numpy = best_pair(
                lambda plan=plan, rng=rng: plan.draw(counts, rng), baseline, repeats
            )
            released = int(plan.draw(counts, rng).sum())
            print(
                f"{method + ', ' + label:>24}  {t_ours:>9.4f}  {t_numpy:>8.4f}  "
                f"{t_ours / t_numpy:>6.2f}  {released:,}"
            )
        print(f"{'plan ' + method:>24}  {planned:>9.4f}  (threshold {plan.threshold})")


if __name__ == "__main__":
    main()
