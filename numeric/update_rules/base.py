"""The interface of an update rule: how the two runs step and how the carried estimate states
advance.

The protocol's iteration body (:func:`crosscurv.numeric.protocol.run_protocol`) is the same for
every rule: at ``theta_JC^k`` the loss, ``g_JC^k``, the recursive estimate and the products ``H_JC^k
[p, z, y, Delta]``; at ``theta_S^k`` the loss, ``g_S^k``, the measured gap and the record. What
differs between the paper's plain steps (:class:`crosscurv.numeric.update_rules.plain.PlainRule`)
and a block-separable optimizer (:class:`crosscurv.numeric.update_rules.optimizer.OptimizerRule`) is
what each hook below does with them.

The hooks are called in this order in iteration ``k < K`` (at ``k = K`` only :meth:`error_columns`
and :meth:`bound` are called: nothing is stepped):

1. :meth:`s_forcing` at ``theta_S^k`` with ``g_S^k``: the block-masked forcing ``M_S (.)``, the only
   use of the point's graph (released after it);
2. :meth:`s_step` with ``g_S^k`` and that forcing: parks ``theta_S^{k+1}``;
3. :meth:`jc_step` at ``theta_JC^k`` with ``g_JC^k``: parks ``theta_JC^{k+1}``;
4. :meth:`advance_z`, :meth:`advance_y`, :meth:`advance_delta` with each vector and its product
   ``H_JC^k v`` (the body has already used them for the estimates of ``k``): park ``z``, ``y``,
   ``w`` of ``k + 1``;
5. :meth:`error_columns` and :meth:`bound` for the record of ``k`` (``k >= 1``);
6. :meth:`carry`: the scalar states of ``k + 1`` (after the record, which reads those of ``k``).

Every vector lives in the run's store (:mod:`crosscurv.numeric.offload`) between uses: a hook
fetches what it reads and parks what it writes.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["UpdateRule"]


class UpdateRule:
    """An update rule of the protocol (module docstring); subclasses implement every hook.

    Attributes:
        carried: names of the vectors this rule carries in the store between iterations besides the
            protocol's own (checkpointed with them).
    """

    carried: tuple = ()

    def start(self, store, like: Mapping) -> None:
        """Park the rule's carried vectors of ``k = 0`` (``like``: the parameters)."""

    def s_forcing(self, ctx, k: int, at_s, gs: Mapping) -> dict:
        """The forcing of the carried states at ``theta_S^k``: ``M_S`` (``at_s.masked``) applied to
        the ``S`` run's step direction (``g_S^k = gs``); changes no state."""
        raise NotImplementedError

    def s_step(self, ctx, k: int, theta_s: Mapping, gs: Mapping, force: dict, meas: dict) -> None:
        """Step the ``S`` run from ``theta_s`` (``g_S^k = gs``, ``force`` from :meth:`s_forcing`)
        and park ``theta_S^{k+1}`` as ``"theta_s"``; what the record of ``k`` or :meth:`carry` needs
        goes into ``meas`` (no estimate state changes before the record)."""
        raise NotImplementedError

    def jc_step(self, ctx, k: int, at_j, theta_j: Mapping, gj: Mapping, meas: dict) -> None:
        """Step the JC run from ``theta_j`` (``g_JC^k = gj``) and park ``theta_JC^{k+1}`` as
        ``"theta_j"``."""
        raise NotImplementedError

    def advance_z(self, ctx, z: dict, Hz: dict, force: Mapping) -> None:
        """Park the cumulative state ``z`` of ``k + 1`` from ``z``, ``H_JC^k z`` and the forcing of
        ``theta_S^k`` (the caller's only reference to ``z``; ``Hz`` may be overwritten)."""
        raise NotImplementedError

    def advance_y(self, ctx, at_j, y: dict, Hy: dict) -> None:
        """Park the JC-only state ``y`` of ``k + 1`` from ``y``, ``H_JC^k y`` and the forcing at
        ``theta_JC^k`` (the caller's only reference to ``y``; ``Hy`` may be overwritten)."""
        raise NotImplementedError

    def advance_delta(self, ctx, at_j, delta: Mapping, Hdelta: dict, gs: Mapping, force: Mapping,
                      meas: dict) -> None:
        """Park the recursive term ``w`` of ``k + 1`` from ``Delta^k``, ``H_JC^k Delta^k`` and the
        forcing of ``theta_S^k`` (``Hdelta`` may be overwritten); ``g_S^k = gs`` for what the error
        estimates measure."""
        raise NotImplementedError

    def error_columns(self, ctx, record: dict, meas: dict) -> None:
        """The ``*_err`` and ``*_cert`` columns of the record of ``k``."""
        raise NotImplementedError

    def bound(self, est, lr: float) -> float:
        """The ``bound_bk`` column (Theorem 3's bound or its generalization) with the current
        constants."""
        raise NotImplementedError

    def carry(self, ctx, k: int, meas: dict) -> None:
        """Advance the scalar states of the estimates (``ctx.est``) from ``k`` to ``k + 1`` with
        what this iteration measured (``meas``)."""
        raise NotImplementedError
