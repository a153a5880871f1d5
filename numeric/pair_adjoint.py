"""Every delay pattern's JC-only prediction at the last iteration ``K`` only, by an adjoint sweep:
``N + 1`` Hessian-vector products per iteration instead of the ``N^2`` of
:func:`crosscurv.numeric.pair_records.pair_run`.

The per-pair state of :mod:`crosscurv.numeric.pair_records` at ``K`` is ``u_ij^K = eta^2 sum_m
Phi_{K,m+1} P_i H_m E_j g_m`` with ``Phi_{K,m+1} = (I - eta H_{K-1}) ... (I - eta H_{m+1})``, so its
linear term is a sum of bilinear forms against one adjoint vector::

    l_ij^K = g_K . u_ij^K = eta^2 sum_{m < K} (P_i lambda_{m+1}) . H_m (E_j g_m),
    lambda_K = g_K,   lambda_m = (I - eta H_m) lambda_{m+1},

(``H_m, g_m`` at ``theta_JC^m``; ``H`` symmetric). A sweep from ``K`` down to 0 gathers every
``l_ij^K`` with one batched backward per iteration for the ``N`` columns ``E_j g_m`` and ``lambda``:
``N + 1`` products, and the JC iterates are recomputed from ``ceil(sqrt(K + 1))`` stored ones
and each segment between two stored iterates recomputed once (memory: ``2 sqrt(K)`` parameter
vectors; one more gradient per iteration).

What it leaves out: the quadratic term ``1/2 s^T Q^K s`` (``Q_pq = u_p . H_K u_q``) of the
prediction, second order in the states ``u = O(eta^2)``, the order the prediction's own error (the
embedded pair, :mod:`crosscurv.numeric.pattern_search_certify`) measures; the certification of a
search carries each named pattern's state and uses its full prediction. And every ``k < K``: the
records' rows before ``K`` are NaN. Measured against the full prediction on the search study's
problems: ``reports/advise/search.md``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from crosscurv.theory.pattern_spaces import pair_list

from .hvp import grad
from .pair_records import PairRecords, _block_dots, _grad_and_products, _layout

__all__ = ["pair_adjoint"]


def _gradient(loss, theta: dict, layout: list) -> tuple[float, torch.Tensor]:
    """``(L(theta), flat gradient)`` without a graph (:func:`crosscurv.numeric.hvp.grad`)."""
    value, g = grad(loss, theta)
    return float(value), torch.cat([g[k].reshape(-1) for k, *_ in layout])


def _step(theta: dict, g: torch.Tensor, layout: list, lr: float) -> dict:
    """``theta - eta g`` (``g`` flat)."""
    return {k: theta[k] - lr * g[a:b].view(shape) for k, a, b, shape in layout}


def _columns(g: torch.Tensor, span: list, extra: torch.Tensor | None = None) -> torch.Tensor:
    """The rows ``E_j g`` (``j = 0..N-1``), then ``extra`` when given: ``(N [+ 1], D)``."""
    V = torch.zeros((len(span) + (extra is not None), g.numel()), dtype=g.dtype, device=g.device)
    for j, (a, b) in enumerate(span):
        V[j, a:b] = g[a:b]
    if extra is not None:
        V[-1] = extra
    return V


#: the state file of a final-only search's run, in the search's folder
STATE_FILE = "pair_adjoint_state.pt"


def _forward(task, lr: float, iters: int, layout: list, seg: int, progress) -> dict:
    """The JC run: ``{"stored": {m: theta^m} (every seg-th), "theta_K", "K", "losses", "status",
    "message"}`` (``K`` the last finite ``k``)."""
    theta = {k: task.params[k].detach().clone() for k, *_ in layout}
    st = {"stored": {0: theta}, "losses": [], "status": "complete", "message": "", "K": 0,
          "theta_K": theta}
    for k in range(iters + 1):
        value, g = _gradient(task.loss, theta, layout)
        if not math.isfinite(value):
            st["status"], st["message"] = "diverged", f"diverged at k={k}: loss_jc = {value}"
            break
        if k:
            st["losses"].append(value)
            if progress is not None:
                progress(k, 2 * iters)
        st["K"], st["theta_K"] = k, theta
        if k < iters:
            theta = _step(theta, g, layout, lr)
            if (k + 1) % seg == 0:
                st["stored"][k + 1] = theta
    return st


def pair_adjoint(task, lr: float, iters: int, *,
                 progress: Callable[[int, int], None] | None = None,
                 state_path: str | None = None, resume: bool = False,
                 checkpoint_every: int | None = None) -> PairRecords:
    """Run JC from ``task.params`` for ``iters`` steps and gather the per-pair linear terms ``l^K``
    and curvatures ``c^K`` at the last ``K`` by the adjoint sweep (module docstring).

    Args:
        state_path: a file (``DIR/pair_adjoint_state.pt``) that receives the run's state (the
            stored iterates, the losses, ``lambda`` and the sums so far) between segments of the
            sweep, every ``checkpoint_every`` sweep iterations (default: at most once a minute),
            so that a killed run continues from there; ``None``: nothing saved.
        resume: continue the run saved in ``state_path`` (same task, ``theta^0``, ``lr`` and
            ``iters``: the adjoint starts at ``K``, so a run is not extended): the records are
            those of an uninterrupted run.

    Returns:
        :class:`PairRecords` with ``final_only=True``: ``loss_jc`` at every ``k``; ``linear`` and
        ``pair_curvature`` NaN before row ``K - 1``; ``gram`` zero at ``K`` (not gathered), NaN
        before. A non-finite JC loss stops the run (status ``"diverged"``) and ``K`` is the last
        finite ``k``. ``progress(j, 2 K)`` after each forward iteration and each of the sweep's.

    Raises:
        AdviceError: ``resume`` without a saved state, or one of another run.
    """
    import json
    import time

    from .pair_records import _load_state, _run_settings
    from .protocol import CHECKPOINT_SECONDS
    from .records import atomic_torch_save

    layout, span, _ = _layout(task)
    n, pairs = task.n_blocks, pair_list(task.n_blocks)
    seg = max(1, math.ceil(math.sqrt(iters + 1)))
    now = _run_settings(task, lr, iters)
    if resume:
        st = _load_state(state_path, now, STATE_FILE, extendable=False)
        dev = task.params[layout[0][0]].device
        st["stored"] = {m: {k: v.to(dev) for k, v in th.items()} for m, th in st["stored"].items()}
        st.update(lam=st["lam"].to(dev), acc=st["acc"].numpy(), curv=st["curv"].numpy())
    else:
        st = _forward(task, lr, iters, layout, seg, progress)
        st["settings"] = json.dumps(now)
    K, P = st["K"], len(pairs)
    linear, curv = np.full((max(K, 1), P), np.nan), np.full((max(K, 1), P), np.nan)
    gram = np.full((max(K, 1), P, P), np.nan)
    pi, pj = [i for i, _ in pairs], [j for _, j in pairs]
    if K and not resume:  # lambda_K = g_K and Theorem 1's c_ij = g_i . H_ij g_j at theta^K
        _, gK, hv = _grad_and_products(task.loss, st["theta_K"], layout,
                                       lambda g: _columns(g, span))
        st.update(lam=gK.clone(), acc=np.zeros((n, n)), curv=_block_dots(gK, hv, span)[pi, pj],
                  base=((K - 1) // seg) * seg, done=0)
        del hv
    st.pop("theta_K", None)
    last_save, since = time.perf_counter(), 0
    while K and st["base"] >= 0:  # segments, last first
        base = st["base"]
        seg_thetas = [st["stored"][base]]
        for _ in range(base + 1, min(base + seg, K)):  # theta^m of the segment, recomputed
            th = seg_thetas[-1]
            seg_thetas.append(_step(th, _gradient(task.loss, th, layout)[1], layout, lr))
        for m in range(len(seg_thetas) - 1 + base, base - 1, -1):
            lam = st["lam"]
            _, g, hv = _grad_and_products(task.loss, seg_thetas[m - base], layout,
                                          lambda g, lam=lam: _columns(g, span, lam))
            st["acc"] += _block_dots(lam, hv[:n], span)
            st["lam"] = lam - lr * hv[n]
            del hv
            st["done"] += 1
            since += 1
            if progress is not None:
                progress(iters + st["done"], 2 * iters)
        st["base"] = base - seg
        if state_path is not None and st["base"] >= 0 and (
                since >= checkpoint_every if checkpoint_every else
                time.perf_counter() - last_save >= CHECKPOINT_SECONDS):
            atomic_torch_save({**st, "acc": torch.from_numpy(st["acc"]),
                               "curv": torch.from_numpy(np.asarray(st["curv"]))}, state_path)
            last_save, since = time.perf_counter(), 0
    if K:
        linear[K - 1] = lr * lr * np.asarray(st["acc"])[pi, pj]
        curv[K - 1] = np.asarray(st["curv"])
        gram[K - 1] = 0.0
    losses = np.array(st["losses"], dtype=np.float64)
    return PairRecords(n, lr, losses, linear[:K], gram[:K], curv[:K], st["status"], st["message"],
                       pairs, final_only=True)
