"""Pure numpy kernels of the mechanisms: numbers and arrays in, numbers and arrays out.

Each release kind is a kernel with three steps (:mod:`dpframe.core.executor`):
``plan_*(params)`` (what it charges and how it draws; no data), ``plan.check(exact)``
and ``plan.draw(exact, rng)``. No polars here, and nothing here charges an accountant.

* :mod:`~dpframe.mechanisms.discrete` -- exact integer samplers (discrete Laplace, ...);
* :mod:`~dpframe.mechanisms.laplace` -- grid Laplace;
* :mod:`~dpframe.mechanisms.gaussian` -- grid discrete Gaussian (rho-zCDP), its exact
  sampler and law;
* :mod:`~dpframe.mechanisms.bounded` -- truncated and BIT Laplace on a grid
  (:mod:`~dpframe.mechanisms.bounded_moments`: their bias, variance and MSE);
* :mod:`~dpframe.mechanisms.column` -- a column of statistics in one charge;
* :mod:`~dpframe.mechanisms.statistics` -- grouped statistics (``dpframe.agg``);
* :mod:`~dpframe.mechanisms.components`, :mod:`~dpframe.mechanisms.covariance`,
  :mod:`~dpframe.mechanisms.proportions`, :mod:`~dpframe.mechanisms.synthesis` --
  the multi-statistic releases of Liu (2019);
* :mod:`~dpframe.mechanisms.pram` -- PRAM: design, sampler, plan, estimate.

Importing this package imports numpy; ``import dpframe`` does not (it loads kernels on
first use).
"""

from dpframe.mechanisms.bounded import (
    BoundedCalibration,
    calibrate_bounded,
    sample_bit_laplace,
    sample_truncated_laplace,
    truncated_laplace_privacy_loss,
    truncated_laplace_scale,
)
from dpframe.mechanisms.gaussian import (
    GaussianCalibration,
    calibrate_gaussian,
    release_gaussian,
    sample_discrete_gaussian,
)
from dpframe.mechanisms.laplace import LaplaceCalibration, calibrate_laplace, release_laplace

__all__ = [
    "BoundedCalibration",
    "GaussianCalibration",
    "LaplaceCalibration",
    "calibrate_bounded",
    "calibrate_gaussian",
    "calibrate_laplace",
    "release_gaussian",
    "release_laplace",
    "sample_bit_laplace",
    "sample_discrete_gaussian",
    "sample_truncated_laplace",
    "truncated_laplace_privacy_loss",
    "truncated_laplace_scale",
]
