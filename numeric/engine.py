"""The engine of a run: how the gradient and the Hessian-vector products at a point are taken,
chosen once per run (recorded in the protocol's summary under ``"hvp"``).

* ``"graph"`` (:class:`crosscurv.numeric.point.PointCurvature`): the gradient is built
  once with ``create_graph=True`` and every product at that point is one
  backward pass through the retained graph; one graph is alive at a time;
* ``"termwise"`` (:class:`crosscurv.numeric.point.TermwisePoint`): for a task whose loss is
  a sum of terms (``Task.loss_terms``: the ``fl`` task's clients), the gradient and every
  product accumulated term by term by double backward, one term's graph alive at a time
  (the memory of one term's activations, at the price of repeating each term's forward
  and first backward per product);
* ``"batched"`` (:class:`crosscurv.numeric.point.BatchedPoint`): the gradient by one
  backward pass, the products at a point in one batched call of
  :func:`crosscurv.numeric.hvp.hvp_batch` (``chunk_size`` caps the batch).

``hvp_method`` ``"reverse"`` asks for the graph engine, ``"forward"`` / ``"rof"`` for the batched
one with that method, and ``"auto"`` (default) takes the termwise engine for a task with loss terms,
else has the meaning it has everywhere (:func:`crosscurv.numeric.hvp.resolve_method`): double
backward when one product works at ``theta^0`` (the graph engine), else forward-over-reverse
(batched).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .hvp import HVP_METHODS, grad, resolve_method
from .point import BatchedPoint, PointCurvature, TermwisePoint
from .protocol_checks import ProtocolError

__all__ = ["Engine", "choose_engine"]


@dataclass(frozen=True)
class Engine:
    """How the products at a point are taken (module docstring), chosen once per run.

    Attributes:
        name: ``"graph"``, ``"termwise"`` or ``"batched"``.
        method: the concrete HVP method (``"reverse"`` for the graph and termwise engines).
        chunk_size: at most this many products per batch (batched engine).
        terms: the task's loss terms (termwise engine), whose sum is the ``loss`` the points are
            asked for.
    """

    name: str
    method: str
    chunk_size: int | None = None
    terms: tuple = ()

    def point(self, loss, params: Mapping):
        """The :class:`crosscurv.numeric.point.Point` at ``params`` (the termwise engine sums its
        ``terms``, which add up to ``loss``)."""
        if self.name == "graph":
            return PointCurvature(loss, params)
        if self.name == "termwise":
            return TermwisePoint(self.terms, params)
        return BatchedPoint(loss, params, self.method, self.chunk_size)

    def gradient(self, loss, params: Mapping) -> dict:
        """``grad L(params)`` alone (no graph kept): term by term for the termwise engine, else one
        backward pass."""
        if self.name == "termwise":
            return TermwisePoint(self.terms, params).grad
        return grad(loss, params)[1]

    def describe(self) -> str:
        if self.name == "graph":
            return "one retained double-backward graph per point"
        if self.name == "termwise":
            return (f"double backward term by term, one of the loss's {len(self.terms)} terms' "
                    "graph at a time")
        return "batched products (crosscurv.numeric.hvp.hvp_batch)"


def choose_engine(task, hvp_method: str = "auto", chunk_size: int | None = None) -> Engine:
    """The engine for ``hvp_method`` (``"auto"``: the termwise engine for a task with loss terms if
    one product works at ``theta^0`` that way, else :func:`crosscurv.numeric.hvp.resolve_method` at
    ``theta^0``)."""
    if hvp_method not in HVP_METHODS:
        raise ProtocolError(f"unknown HVP method {hvp_method!r} (use {', '.join(HVP_METHODS)})")
    terms = tuple(getattr(task, "loss_terms", None) or ())
    if hvp_method == "auto" and len(terms) > 1:
        try:  # every term twice differentiable by double backward
            point = TermwisePoint(terms, task.params)
            point.hvp(point.grad)
            return Engine("termwise", "reverse", terms=terms)
        except Exception:  # some term has no double derivative: the engines below decide
            pass
    method = (resolve_method(task.loss, task.params, hvp_method) if hvp_method == "auto"
              else hvp_method)
    if method == "reverse" and (hvp_method == "auto" or chunk_size is None):
        try:  # the graph engine needs one double-backward product on a retained graph
            if hvp_method == "auto":
                point = PointCurvature(task.loss, task.params)
                point.hvp(point.grad)
            return Engine("graph", "reverse")
        except Exception:  # no double derivative through a retained graph
            method = "forward"
    return Engine("batched", method, chunk_size)
