"""PRAM under ε-differential privacy: design, exact sampling, the release plan, estimation.

The mechanism (Ayed, Battiston & Camerlenghi, eq. 8): a record whose category is ``k``
keeps it with probability ``q_k`` and otherwise moves to one of the other ``S - 1``
categories, chosen uniformly. Records are randomized independently, so under substitute
neighbours the release is ``ε``-DP iff every column of the matrix satisfies
``max_i M_ij <= e^ε min_i M_ij`` (paper eq. 10). PRAM protects values, not presence.

* :mod:`~dpframe.mechanisms.pram.optimum` -- the MI-optimal ``q`` within the paper's
  family (exact branch and bound; ``docs/pram-design.md``);
* :mod:`~dpframe.mechanisms.pram.staircase` -- the MI optimum over *every* ``ε``-DP
  matrix (a staircase linear program with a certified dual bound), its output labels;
* :mod:`~dpframe.mechanisms.pram.sampling` -- exact integer samplers, and the epsilon of
  the matrix actually sampled, derived from its integers;
* :mod:`~dpframe.mechanisms.pram.plan` -- a PRAM release as a kernel plan (charge,
  check, draw);
* :mod:`~dpframe.mechanisms.pram.estimation` -- unbiased frequencies from released data.
"""

from dpframe.core.constraints import DIAGONALS
from dpframe.mechanisms.pram.cyclic import CyclicDesign, cyclic_design
from dpframe.mechanisms.pram.estimation import KINDS, PramEstimate, estimate, project_simplex
from dpframe.mechanisms.pram.optimum import (
    ESTIMABLE_MARGIN,
    MAX_EPSILON,
    MI_RTOL,
    MIN_EPSILON,
    SINGULAR_RTOL,
    PramDesign,
    design,
    dominance_cost,
    estimability_cost,
    krr,
    mutual_information,
    vertex_families,
)
from dpframe.mechanisms.pram.sampling import (
    PramSampler,
    check_matrix,
    randomize,
    sampler,
    staircase_sampler,
)
from dpframe.mechanisms.pram.staircase import (
    GlobalDesign,
    check_estimable,
    global_design,
    output_labels,
)

__all__ = [
    "DIAGONALS",
    "ESTIMABLE_MARGIN",
    "KINDS",
    "MAX_EPSILON",
    "MIN_EPSILON",
    "MI_RTOL",
    "SINGULAR_RTOL",
    "CyclicDesign",
    "GlobalDesign",
    "PramDesign",
    "PramEstimate",
    "PramSampler",
    "check_estimable",
    "check_matrix",
    "cyclic_design",
    "design",
    "dominance_cost",
    "estimability_cost",
    "estimate",
    "global_design",
    "krr",
    "mutual_information",
    "output_labels",
    "project_simplex",
    "randomize",
    "sampler",
    "staircase_sampler",
    "vertex_families",
]
