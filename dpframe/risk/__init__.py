"""Disclosure risk from homogeneity attack (DR-HA) in sanitized frequency tables.

Liu & Zhao (``drha-homogeneity-attack.txt``): after a frequency table over
quasi-identifier cells x sensitive attribute Y is sanitized (``n~ = n + e``), how likely
is a cell to *look* homogeneous in Y with a value its records really have, so that an
attacker who knows someone's quasi-identifiers learns their Y? DR-HA is an
*assessment*: it reads the confidential table, spends no budget, and its outputs are
for the data owner -- they are labelled so.

Layout (pure numpy kernels; polars adapters in :mod:`dpframe.risk.frame`):

* :mod:`dpframe.risk.noise` -- the count mechanisms (Laplace, Gaussian (ε, δ)-DP,
  Gaussian (ε, δ)-pDP, analytic Gaussian, and the discrete Gaussian of ρ-zCDP that
  dpframe releases counts with) and their noise CDFs;
* :mod:`dpframe.risk.measures` -- the five measures per cell (local, expected,
  shrinkage, marginal, marginal shrinkage), exact, plus the paper's closed forms;
* :mod:`dpframe.risk.priors` -- empirical-Bayes Dirichlet hyperparameters and
  zero-truncated cell-size models;
* :mod:`dpframe.risk.montecarlo` -- Monte-Carlo DR-HA for any count mechanism
  (:func:`simulate`);
* :mod:`dpframe.risk.choose` -- the largest ε whose DR-HA stays under a target, and
  the utility (TVD of low-order marginals) it leaves.

Examples
--------
>>> import polars as pl
>>> from dpframe import risk
>>> df = pl.DataFrame({"age": ["<40"] * 3 + ["50+"] * 2, "y": ["a", "a", "b", "b", "b"]})
>>> table = risk.drha(df, ["age"], "y", epsilon=[0.1, 100.0], levels=["a", "b"], weighted=False)
>>> table.select("epsilon", "risk").rows()[1]  # almost no noise: 1 of the 2 cells is homogeneous
(100.0, 0.5)
"""

from dpframe.risk import choose, frame, measures, montecarlo, noise, priors
from dpframe.risk.choose import EpsilonChoice, choose_epsilon, choose_rho, marginal_tvd
from dpframe.risk.frame import ASSESSMENT, CellTable, cell_table, drha, drha_cells, drha_expr
from dpframe.risk.measures import MEASURES, CellRisk, cell_risk
from dpframe.risk.montecarlo import Simulation, simulate
from dpframe.risk.noise import MECHANISMS, noise_scale, table_sensitivity
from dpframe.risk.priors import dirichlet_eb, fit_size_model

__all__ = [
    "ASSESSMENT",
    "MEASURES",
    "MECHANISMS",
    "CellRisk",
    "CellTable",
    "EpsilonChoice",
    "Simulation",
    "cell_risk",
    "cell_table",
    "choose",
    "choose_epsilon",
    "choose_rho",
    "dirichlet_eb",
    "drha",
    "drha_cells",
    "drha_expr",
    "fit_size_model",
    "frame",
    "marginal_tvd",
    "measures",
    "montecarlo",
    "noise",
    "noise_scale",
    "priors",
    "simulate",
    "table_sensitivity",
]
