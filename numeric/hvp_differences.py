"""Hessian-vector products by central differences of gradients, with autograd checked against them.

The engine for models without a usable double backward (a kernel with no second derivative, a custom
``torch.autograd.Function`` whose backward is not differentiable): products ``H(theta) v`` from
first derivatives only, beside the autograd engines of :mod:`crosscurv.numeric.hvp`. Parameter-space
vectors are dicts of float64 tensors keyed like the parameters (:mod:`crosscurv.numeric.tree`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from crosscurv.theory.errors import InputError

from . import tree
from .hvp import grad, hvp_batch

__all__ = ["CurvatureRoute"]


class CurvatureRoute:
    """How ``H(theta) v`` is computed for the step size and the freshness fit.

    Route ``"autograd"``: :func:`crosscurv.numeric.hvp.hvp_batch`. The first product is also taken
    by central differences; a product that raises, or disagrees by more than ``CHECK_RTOL``
    (relative), switches to route ``"central-differences"`` (first derivatives only):

        D(h) v = (grad L(theta + h v) - grad L(theta - h v)) / (2 h),

    in float64 at ``h = c max(||theta||, 1) / ||v||`` for ``c`` in :data:`LEVELS`; the product is
    the mean of the two consecutive values that agree best, its stated error twice their distance.

    Attributes: ``name`` (the route), ``reason`` (why autograd was left), ``max_rel_error`` (largest
    stated error bound), ``products`` (products taken with an error estimate), ``rough`` (products
    for the power iteration, central differences at the middle step only).
    """

    LEVELS = (1e-4, 3e-5, 1e-5)
    CHECK_RTOL = 1e-5

    def __init__(self, loss):
        self.loss = loss
        self.name = "autograd"
        self.reason = ""
        self.max_rel_error = 0.0
        self.products = 0
        self.rough = 0
        self._checked = False
        # a loss that states it has no second derivative
        if getattr(loss, "first_derivatives_only", None):
            self._leave(loss.first_derivatives_only)

    def batch(self, params: Mapping, vs: Sequence[Mapping]) -> list:
        """``[H(params) v for v in vs]`` (dicts keyed like ``params``)."""
        vs = list(vs)
        if self.name == "autograd":
            try:
                out = hvp_batch(self.loss, params, vs)
            except InputError:
                raise
            except Exception as exc:  # a kernel without second derivatives
                text = str(exc).strip().splitlines()
                self._leave(
                    f"autograd has no second derivative here ({type(exc).__name__}: "
                    f"{text[0] if text else ''})"
                )
            else:
                if not self._checked and vs:
                    self._checked = True
                    fd, fd_err = self._fd(params, vs[0])
                    diff = float(tree.norm(tree.sub(out[0], fd)))
                    scale = max(float(tree.norm(fd)), float(tree.norm(out[0])))
                    if diff > max(self.CHECK_RTOL, 10.0 * fd_err) * scale:
                        self._leave(
                            f"autograd's second derivative disagrees with differences of gradients "
                            f"(relative difference {diff / scale:.1e}: a backward that is not "
                            "differentiable, e.g. a custom autograd.Function)"
                        )
                if self.name == "autograd":
                    self.products += len(vs)
                    return out
        out = []
        for v in vs:
            hv, err = self._fd(params, v)
            self.products += 1
            self.max_rel_error = max(self.max_rel_error, err)
            out.append(hv)
        return out

    def _leave(self, reason: str) -> None:
        self.name = "central-differences"
        self.reason = reason

    def one(self, params: Mapping, v: Mapping, precise: bool = True) -> dict:
        """``H v``; ``precise=False`` (power iteration: a magnitude is enough) takes the
        central-differences route at the middle step only, without an error estimate (2 gradients,
        not 6)."""
        if not precise and self.name == "central-differences":
            self.rough += 1
            return self._fd(params, v, levels=self.LEVELS[1:2])[0]
        return self.batch(params, [v])[0]

    def _fd(
        self, params: Mapping, v: Mapping, levels: Sequence[float] | None = None
    ) -> tuple[dict, float]:
        """``D(h) v`` at the middle step of :attr:`LEVELS`, and its estimated relative error
        (``levels`` of one step: ``D`` there, error not estimated, 0)."""
        levels = self.LEVELS if levels is None else levels
        vn = float(tree.norm(v))
        if vn == 0.0:
            return {k: torch.zeros_like(t) for k, t in params.items()}, 0.0
        base = max(float(tree.norm(params)), 1.0) / vn
        ds = []
        for rel in levels:
            h = rel * base
            gp = grad(self.loss, tree.axpy(h, v, params))[1]
            gm = grad(self.loss, tree.axpy(-h, v, params))[1]
            ds.append(tree.scale(tree.sub(gp, gm), 1.0 / (2.0 * h)))
        if len(ds) == 1:
            return ds[0], 0.0
        # the consecutive pair that agrees best (a kink within the larger step spoils only the
        # pairs with it)
        diffs = [float(tree.norm(tree.sub(ds[i], ds[i + 1]))) for i in range(len(ds) - 1)]
        i = min(range(len(diffs)), key=diffs.__getitem__)
        hv = tree.scale(tree.add(ds[i], ds[i + 1]), 0.5)
        hn = float(tree.norm(hv))
        err = 2.0 * diffs[i]
        return hv, (err / hn if hn > 0 else 0.0)

    def describe(self) -> str:
        """One line: which route the curvature products took."""
        if self.name == "autograd":
            return ("curvature route: autograd Hessian-vector products (checked against "
                    "differences of gradients)")
        return (
            "curvature route: central differences of gradients in float64 (h = "
            f"{'/'.join(f'{c:g}' for c in self.LEVELS)} ||theta|| / ||v||; largest estimated "
            f"relative error of a product {self.max_rel_error:.1e}, {self.products} products, "
            f"{self.rough} more for the step size), because {self.reason}"
        )

    def to_dict(self) -> dict:
        return {
            "route": self.name,
            "reason": self.reason,
            "max_rel_error": self.max_rel_error,
            "products": self.products,
            "step_size_products": self.rough,
        }
