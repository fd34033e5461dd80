"""Pure numpy kernels of the mechanisms: numbers and arrays in, numbers and arrays out."""

from dpframe.mechanisms.laplace import LaplaceCalibration, calibrate_laplace, release_laplace

__all__ = ["LaplaceCalibration", "calibrate_laplace", "release_laplace"]
