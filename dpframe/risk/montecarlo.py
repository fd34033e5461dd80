"""Monte-Carlo DR-HA: sanitize the frequency table many times and count the attacks that work.

This is the independent check of the closed forms in :mod:`dpframe.risk.measures`
(the paper's footnote 7 did the same), and the way to assess a mechanism or a
Scenario-8 convention that has no closed form.

Model (Liu & Zhao, Sec. 3): ``counts`` is an ``(N, K)`` table, a row per non-empty
quasi-identifier cell, a column per level of Y. Each count is sanitized as
``n~ = n + e`` with independent noise ``e`` (:func:`dpframe.risk.noise.sample_noise`)
and is *present* when ``n~ >= 0.5`` (it rounds to at least one record). Every
simulated cell falls in one of the paper's eight scenarios:

========  ==============================  =========================================
scenario  original cell                   sanitized cell
========  ==============================  =========================================
1         homogeneous, level k            homogeneous, level k (disclosure)
2         homogeneous, level k            homogeneous, another level
3         homogeneous                     heterogeneous (two or more levels present)
4         homogeneous                     empty
5         heterogeneous                   heterogeneous
6         heterogeneous                   empty
7         heterogeneous                   homogeneous, a level the cell did not hold
8         heterogeneous                   homogeneous, a level the cell held
========  ==============================  =========================================

A cell's DR-HA in one draw is 1 in Scenario 1. In Scenario 8 it is 1 with
``scenario8="conservative"`` (the paper's convention, Definition 6), or, with
``scenario8="records"``, the share ``n_k / n`` of the cell's records whose level is
the one that remains (eq. 7: the attacker is right about those records only). All
other scenarios disclose nothing. The per-cell mean over ``reps`` draws estimates the
local DR-HA (Definition 6) and its average over cells the average DR-HA (Definition 11).

The same standard noise draws serve every ε (common random numbers): each ε's
estimate is unbiased with the standard error reported, the estimates at different ε
are positively correlated, and the simulated curve is smooth in ε.

This module is an *assessment*: it reads the confidential table and releases
nothing, so it uses an ordinary (fast, seedable) numpy generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpframe.core.constraints import check
from dpframe.errors import InvalidParameterError
from dpframe.risk.measures import ASSESSMENT, _check_counts
from dpframe.risk.noise import ZCDP, noise_scale, privacy_grid, sample_noise

__all__ = ["Simulation", "simulate"]

# Elements of the (chunk, N, K) noise array drawn at once (~32 MB of float64).
_CHUNK_ELEMENTS = 1 << 22
# Rough costs on a slow core, for the progress decision only (ns per element).
_NS_PER_DRAW = 30.0
_NS_PER_EPSILON = 4.0
_PROGRESS_AFTER_SECONDS = 2.0


@dataclass(frozen=True)
class Simulation:
    """Monte-Carlo DR-HA of a table at each ε (an assessment: not for publication).

    Attributes
    ----------
    epsilon : numpy.ndarray, shape (E,)
    values : numpy.ndarray, shape (N, E)
        Per-cell mean DR-HA over the draws.
    se : numpy.ndarray, shape (N, E)
        Monte-Carlo standard error of each per-cell mean (sample s.d. / sqrt(reps);
        NaN when ``reps == 1``).
    scenario_share : numpy.ndarray, shape (E, 8)
        Share of (cell, draw) pairs in Scenarios 1-8; each row sums to 1.
    sizes : numpy.ndarray, shape (N,)
        Cell sizes ``n_i``.
    homogeneous : numpy.ndarray, shape (N,)
        Whether each original cell holds a single level of Y.
    reps, mechanism, delta, sensitivity, scenario8
        The settings of the run.
    """

    epsilon: np.ndarray
    values: np.ndarray
    se: np.ndarray
    scenario_share: np.ndarray
    sizes: np.ndarray
    homogeneous: np.ndarray
    reps: int
    mechanism: str
    delta: float | None
    sensitivity: float
    scenario8: str
    assessment: str = field(default=ASSESSMENT)

    def weights(self, weighted: bool = False) -> np.ndarray:
        """Cell weights of Definition 11: ``1/N``, or ``n_i / n`` when ``weighted``."""
        if weighted:
            return self.sizes / self.sizes.sum()
        return np.full(self.sizes.shape, 1.0 / self.sizes.size)

    def average(self, weighted: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Average DR-HA over cells and its Monte-Carlo standard error, each shape (E,).

        Cells are sanitized independently, so the per-cell means are independent and
        ``se(sum_i w_i v_i) = sqrt(sum_i w_i^2 se_i^2)``.
        """
        if not isinstance(weighted, bool | np.bool_):
            raise InvalidParameterError(f"weighted must be True or False, got {weighted!r}")
        w = self.weights(bool(weighted))
        mean = w @ self.values
        se = np.sqrt((w * w) @ (self.se * self.se))
        return mean, se


def _check_rng(rng: Any) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int) and not isinstance(rng, bool):
        return np.random.default_rng(rng)
    raise InvalidParameterError(
        f"rng must be a numpy Generator, an integer seed or None, got {type(rng).__name__}"
    )


def _check_reps(reps: Any, name: str = "reps", minimum: int = 1) -> int:
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {reps!r}")
    return int(reps)


def _progress_bar(show: bool, total: int, description: str):  # pragma: no cover - UI
    from contextlib import nullcontext

    if not show:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def simulate(
    counts: npt.ArrayLike,
    *,
    mechanism: str,
    epsilon: npt.ArrayLike | None = None,
    delta: float | None = None,
    sensitivity: float = 1.0,
    reps: int = 1000,
    rng: np.random.Generator | int | None = None,
    scenario8: str = "conservative",
    progress: bool | None = None,
    rho: npt.ArrayLike | None = None,
) -> Simulation:
    """Monte-Carlo local DR-HA of every cell of ``counts`` at each ε.

    Parameters
    ----------
    counts : array_like, shape (N, K)
        Non-negative whole numbers; a row per non-empty quasi-identifier cell, a column
        per level of Y (``K >= 2``; a level no record holds is still a column).
    mechanism : {"laplace", "gaussian", "gaussian_pdp", "analytic_gaussian"}
    epsilon : float or array_like
        Privacy parameter(s) (see :func:`dpframe.risk.noise.noise_scale`).
    delta : float, optional
        For the Gaussian mechanisms.
    sensitivity : float, default 1.0
        Of the table (the paper uses 1).
    reps : int, default 1000
        Sanitized copies of the table per ε.
    rng : numpy.random.Generator or int, optional
        Source of the noise; a fresh ``numpy.random.default_rng()`` by default (this is
        an assessment, not a release).
    scenario8 : {"conservative", "records"}
        How a heterogeneous cell that turns homogeneous in a level it held counts: as a
        disclosure of the whole cell, or of the share of its records with that level.
    progress : bool, optional
        Show a ``rich`` progress bar (on stderr). ``None`` shows it when the run is
        estimated to take more than about 2 s. It never changes the result.
    rho : float or array_like, optional
        The ρ grid of ``mechanism="discrete_gaussian"`` (in place of ``epsilon``). Its
        noise is drawn exactly (integer ``N_Z(0, σ²)``, the release's law), afresh for
        each ρ (no common random numbers), and a count is present when ``n + Z >= 1``.

    Returns
    -------
    Simulation

    Examples
    --------
    >>> import numpy as np
    >>> sim = simulate([[3, 0], [2, 1]], mechanism="laplace", epsilon=[0.1, 10.0],
    ...                reps=2000, rng=np.random.default_rng(1))
    >>> sim.values.shape, sim.scenario_share.sum(axis=1).round(12).tolist()
    ((2, 2), [1.0, 1.0])
    >>> mean, se = sim.average()
    >>> bool(np.all(se < 0.02))
    True
    """
    table = _check_counts(counts)
    eps = privacy_grid(mechanism, epsilon, rho)
    scales = noise_scale(mechanism, eps, delta, sensitivity)
    n_reps = _check_reps(reps)
    check("scenario8", scenario8)
    if progress not in (None, True, False):
        raise InvalidParameterError(f"progress must be True, False or None, got {progress!r}")
    gen = _check_rng(rng)

    n_cells, n_levels = table.shape
    n_eps = eps.size
    sizes = table.sum(axis=1)
    held = table > 0  # (N, K)
    homogeneous = held.sum(axis=1) == 1
    records = scenario8 == "records"
    # level-major layout so each level's slice of a noise chunk is contiguous
    thresholds = [(0.5 - table[:, k].astype(np.float64)) for k in range(n_levels)]
    held_k = [held[:, k] for k in range(n_levels)]
    share_k = [table[:, k] / sizes for k in range(n_levels)]

    chunk = max(1, min(n_reps, _CHUNK_ELEMENTS // (n_cells * n_levels)))
    n_chunks = math.ceil(n_reps / chunk)
    estimate = n_reps * n_cells * n_levels * (_NS_PER_DRAW + n_eps * _NS_PER_EPSILON) * 1e-9
    show = bool(progress) if progress is not None else estimate > _PROGRESS_AFTER_SECONDS

    total = np.zeros((n_eps, n_cells))
    total_sq = np.zeros((n_eps, n_cells))
    scen = np.zeros((n_eps, 8), dtype=np.int64)
    hom_idx = np.flatnonzero(homogeneous)
    het_idx = np.flatnonzero(~homogeneous)

    with _progress_bar(show, n_chunks * n_eps, "DR-HA Monte Carlo") as bar:
        task = None
        if bar is not None:  # pragma: no cover - UI
            task = bar.add_task(
                f"DR-HA Monte Carlo ({n_reps} reps x {n_eps} eps)", total=n_chunks * n_eps
            )
        done = 0
        while done < n_reps:
            c = min(chunk, n_reps - done)
            discrete = mechanism in ZCDP
            z = None if discrete else sample_noise(mechanism, 1.0, (n_levels, c, n_cells), gen)
            for e in range(n_eps):
                s = scales[e]
                if discrete:  # integer noise: z in count units, s = 1
                    z = sample_noise(mechanism, s, (n_levels, c, n_cells), gen)
                    s = 1.0
                n_present = np.zeros((c, n_cells), dtype=np.int16)
                n_held = np.zeros((c, n_cells), dtype=np.int16)
                kept_share = np.zeros((c, n_cells)) if records else None
                for k in range(n_levels):
                    # present <=> n + s z >= 0.5 <=> z >= (0.5 - n) / s  (s > 0)
                    present = z[k] >= thresholds[k] / s
                    n_present += present
                    n_held += present & held_k[k]
                    if kept_share is not None:
                        kept_share += present * share_k[k]
                one = n_present == 1
                disclosed = one & (n_held == 1)  # Scenario 1 or 8
                n_disclosed = np.count_nonzero(disclosed, axis=0)
                n_one = np.count_nonzero(one, axis=0)
                n_empty = np.count_nonzero(n_present == 0, axis=0)
                n_many = c - n_one - n_empty
                if kept_share is None:
                    total[e] += n_disclosed
                    total_sq[e] += n_disclosed
                else:
                    value = np.where(one, kept_share, 0.0)
                    total[e] += value.sum(axis=0)
                    total_sq[e] += (value * value).sum(axis=0)
                missed = n_one - n_disclosed
                scen[e] += [
                    n_disclosed[hom_idx].sum(),  # 1
                    missed[hom_idx].sum(),  # 2
                    n_many[hom_idx].sum(),  # 3
                    n_empty[hom_idx].sum(),  # 4
                    n_many[het_idx].sum(),  # 5
                    n_empty[het_idx].sum(),  # 6
                    missed[het_idx].sum(),  # 7
                    n_disclosed[het_idx].sum(),  # 8
                ]
                if bar is not None:  # pragma: no cover - UI
                    bar.advance(task)
            done += c

    mean = (total / n_reps).T  # (N, E)
    if n_reps > 1:
        var = np.maximum(total_sq.T - n_reps * mean * mean, 0.0) / (n_reps - 1)
        se = np.sqrt(var / n_reps)
    else:
        se = np.full(mean.shape, np.nan)
    share = scen / float(n_reps * n_cells)
    return Simulation(
        epsilon=eps.copy(),
        values=mean,
        se=se,
        scenario_share=share,
        sizes=sizes,
        homogeneous=homogeneous,
        reps=n_reps,
        mechanism=mechanism,
        delta=None if mechanism == "laplace" or mechanism in ZCDP else float(delta),  # type: ignore[arg-type]
        sensitivity=float(sensitivity),
        scenario8=scenario8,
    )
