"""The toy problems: the error-scaling study's instances, the golden cases' and the tests' losses.

:mod:`.toys` (the losses written once), :mod:`.problem` (a float64 task, its start and curvature
scale), :mod:`.curvature_scale`, :mod:`.quartic` (random quartics with exact ``mpmath``
calculus), :mod:`.networks` and :mod:`.cubic_guard` (the ``eta^3`` non-degeneracy guard).
"""

from .cubic_guard import CubicGuard, c3_terms, guard_cubic, tilt_weights
from .tilt import tilt_task
from .curvature_scale import curvature_scale, dense_derivatives, grid_start
from .networks import bilinear_problem, mnist_mlp_problem, relu_kink_radius, tanh_mlp_problem
from .problem import Problem
from .quartic import QuarticPolynomial, quartic_problem

__all__ = [
    "Problem",
    "QuarticPolynomial",
    "quartic_problem",
    "tanh_mlp_problem",
    "bilinear_problem",
    "mnist_mlp_problem",
    "curvature_scale",
    "grid_start",
    "dense_derivatives",
    "tilt_task",
    "c3_terms",
    "tilt_weights",
    "CubicGuard",
    "guard_cubic",
    "relu_kink_radius",
]
