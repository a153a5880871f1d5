"""The problem instance of the error-scaling study and the property tests.

A :class:`Problem` is a float64 :class:`crosscurv.numeric.Task` whose ``params`` are the
common starting point ``theta^0``, with the instance's curvature scale, from
which the step-size grid ``eta0 * 2^-k`` is derived (never drawn).  The
families that build them live beside this module (:mod:`.quartic`,
:mod:`.networks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from crosscurv.numeric import tree
from crosscurv.numeric.task import Task

from .curvature_scale import curvature_scale, flat_order, grid_start
from .tilt import tilt_task

if TYPE_CHECKING:
    from .quartic import QuarticPolynomial


DTYPE = torch.float64


@dataclass
class Problem:
    """One problem instance.

    Attributes:
        task: float64 task; ``task.params`` is the common start ``theta^0``.
        family: ``"quartic"``, ``"tanh_mlp"``, ``"bilinear"`` or ``"mnist_mlp"``.
        scale: curvature scale ``lam`` at ``theta^0`` (:func:`curvature_scale`).
        poly: the polynomial for the exact ``mpmath`` path (quartic family only).
        info: sizes and seed, for reports.
        extras: non-JSON data some diagnostics need (the MNIST MLP's inputs).
    """

    task: Task
    family: str
    scale: float
    poly: "QuarticPolynomial | None" = None
    info: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict, repr=False)

    @property
    def params(self) -> dict:
        return self.task.params

    def eta0(self, factor: float = 1.0 / 16) -> float:
        """Largest power of two ``<= factor / scale`` (:func:`grid_start`)."""
        return grid_start(self.scale, factor)

    def tilted(self, sigma: float, u: dict) -> "Problem":
        """The same instance plus the cubic tilt ``sigma/6 (u.(theta - theta^0))^3``
        (:func:`tilt_task`).

        For the quartic family the tilt becomes part of the polynomial, so the exact ``mpmath`` path
        sees it too.
        """
        info = dict(self.info, tilt_sigma=float(sigma))
        if self.poly is not None:
            uf = tree.flatten({n: u[n] for n in flat_order(self.task)}).numpy()
            poly = self.poly.tilted(sigma, uf)
            task = poly.task(self.task.name)
        else:
            poly = None
            task = tilt_task(self.task, sigma, u)
        return Problem(task, self.family, curvature_scale(task), poly, info)
