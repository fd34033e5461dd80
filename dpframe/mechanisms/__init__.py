"""Pure numpy kernels of the mechanisms: numbers and arrays in, numbers and arrays out.

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
from dpframe.mechanisms.laplace import LaplaceCalibration, calibrate_laplace, release_laplace

__all__ = [
    "BoundedCalibration",
    "LaplaceCalibration",
    "calibrate_bounded",
    "calibrate_laplace",
    "release_laplace",
    "sample_bit_laplace",
    "sample_truncated_laplace",
    "truncated_laplace_privacy_loss",
    "truncated_laplace_scale",
]
