"""Per-pair quantities along one JC run, from which every delay pattern's JC-only prediction is a
sum.

The JC-only estimate of :mod:`crosscurv.numeric.advice` for a pattern ``S`` is (paper, Lemma 3 /
Theorem 3 with ``M_S g`` on the JC trajectory)::

    y_0 = 0,   y_{k+1} = (I - eta H_k) y_k + eta^2 M_S g_k,     estimate_S^k = g_k . y_k + 1/2 y_k .
    H_k y_k,

with ``H_k, g_k`` at ``theta_JC^k``. ``M_S g = sum_{(i,j) in S} P_i H E_j g`` (row block ``i`` of
the Hessian column of block ``j``, Lemma 1), and the recursion is linear in its forcing, so ``y_k =
sum_{(i,j) in S} u_ij^k`` with one state per ordered pair of blocks::

    u_ij^0 = 0,   u_ij^{k+1} = (I - eta H_k) u_ij^k + eta^2 P_i H E_j g_k
             (u_ij^K = eta^2 sum_m Phi_{K,m+1} P_i H_ij^m g_j^m).

For a pattern's 0/1 vector ``s`` over the ``P = N(N-1)`` pairs the estimate is therefore::

    estimate_S^k = s . l^k + 1/2 s^T Q^k s,   l_p^k = g_k . u_p^k,   Q_pq^k = u_p^k . H_k u_q^k,

and the one-step term of Theorem 1, ``eta^2 C_S = eta^2 sum_{(i,j) in S} c_ij`` with ``c_ij^k = g_i
. H_ij g_j`` at ``theta_JC^k``. :class:`PairRecords` holds ``l^k``, ``Q^k``, ``c^k`` for ``k =
1..K``: ``O(K P^2)`` numbers that predict every pattern at every ``k``.

Cost per JC iteration: one gradient with its graph and one batched backward through it for ``N + P =
N^2`` directions (the ``N`` columns ``E_j g`` and the ``P`` states), i.e. ``N^2`` Hessian-vector
products that a batched double backward evaluates together, plus the Gram matrix ``U (H U)^T``
(``P^2`` dots). It grows with the number of blocks, not with the number of patterns. Memory: ``2
N^2`` parameter-sized vectors.

Vectors: the states are stacked per parameter, ``{name: (P, *shape)}`` in the task's dtype; ``l``,
``Q``, ``c`` are float64 (the dots accumulate per parameter in the task's dtype and sum in float64).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from crosscurv.theory.pattern_spaces import pair_list

from .records import atomic_torch_save
from .steps import block_keys

__all__ = ["PairRecords", "pair_run", "predict", "finite_pairs"]


@dataclass
class PairRecords:
    """What :func:`pair_run` gathers at ``k = 1..K`` (row ``k - 1``).

    Attributes:
        n_blocks: ``N``; ``pairs``: ``pair_list(N)`` (0-based ``(i, j)``, the columns).
        lr: ``eta``.
        loss_jc: ``(K,)`` ``L(theta_JC^k)``.
        linear: ``(K, P)`` ``l_p^k = g_k . u_p^k``.
        gram: ``(K, P, P)`` ``Q^k`` (symmetrised).
        pair_curvature: ``(K, P)`` ``c_ij^k = g_i . H_ij g_j`` (Theorem 1's terms).
        status: ``"complete"`` or ``"diverged"``; ``message``.
        final_only: the rows before ``K`` are NaN and ``gram`` is zero at ``K`` (gathered by
            :func:`crosscurv.numeric.pair_adjoint.pair_adjoint`: predictions at ``K`` only,
            without the quadratic term).
    """

    n_blocks: int
    lr: float
    loss_jc: np.ndarray
    linear: np.ndarray
    gram: np.ndarray
    pair_curvature: np.ndarray
    status: str = "complete"
    message: str = ""
    pairs: list = field(default_factory=list)
    final_only: bool = False

    @property
    def iters(self) -> int:
        """The last ``k`` recorded."""
        return int(self.loss_jc.shape[0])

    def predict(self, members, k: int) -> np.ndarray:
        """JC-only predictions at ``k`` (``1 <= k <= iters``) of pattern rows ``members`` (``bool
        (n, P)``); final-only records: ``k = K`` only."""
        self._check_k(k)
        return predict(members, self.linear[k - 1], self.gram[k - 1])

    def _check_k(self, k: int) -> None:
        if self.final_only and k != self.iters:
            from crosscurv.theory.errors import AdviceError

            raise AdviceError(f"these records hold K = {self.iters} only (a final-only search), "
                              f"not k = {k}")

    def one_step(self, members, k: int) -> np.ndarray:
        """``eta^2 C_S`` at ``theta_JC^k`` of pattern rows ``members`` (Theorem 1)."""
        self._check_k(k)
        return self.lr**2 * (np.asarray(members, dtype=np.float64) @ self.pair_curvature[k - 1])


def finite_pairs(linear: np.ndarray, gram: np.ndarray) -> tuple:
    """``(linear, gram, bad)``: the pairs whose ``l_p`` or a ``Q`` entry is not finite (``bad``,
    ``bool (P,)``; their JC-only states overflowed) zeroed out, so that the patterns without them
    keep finite predictions; a pattern holding a bad pair predicts ``+inf``."""
    bad = ~np.isfinite(linear) | ~np.isfinite(gram).all(axis=0) | ~np.isfinite(gram).all(axis=1)
    if not bad.any():
        return linear, gram, bad
    lin = np.where(bad, 0.0, linear)
    q = np.where(bad[:, None] | bad[None, :], 0.0, gram)
    return lin, q, bad


def predict(members, linear: np.ndarray, gram: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """``s . l + 1/2 s^T Q s`` for every row ``s`` of ``members`` (``bool (n, P)``), float64
    ``(n,)``; ``+inf`` for a pattern holding a pair whose quantities are not finite."""
    m = np.atleast_2d(np.asarray(members))
    linear, gram, bad = finite_pairs(np.asarray(linear), np.asarray(gram))
    out = np.empty(m.shape[0], dtype=np.float64)
    q = torch.from_numpy(np.ascontiguousarray(gram, dtype=np.float64))
    lin = torch.from_numpy(np.ascontiguousarray(linear, dtype=np.float64))
    for a in range(0, m.shape[0], chunk):
        s = torch.from_numpy(m[a : a + chunk].astype(np.float64))
        out[a : a + chunk] = (s @ lin + 0.5 * ((s @ q) * s).sum(dim=1)).numpy()
    if bad.any():
        out[m[:, bad].any(axis=1)] = np.inf
    return out


def _block_dots(left: torch.Tensor, hcol: torch.Tensor, span: list) -> np.ndarray:
    """``B_ij = left_i . (H E_j g)_i`` from the columns ``hcol`` (rows ``H E_j g``): ``(N, N)``
    float64, per-block dots in the task's dtype."""
    return torch.stack([hcol[:, a:b] @ left[a:b] for a, b in span]).double().cpu().numpy()


def _grad_and_products(
    loss, theta: dict, layout: list, directions: Callable[[torch.Tensor], torch.Tensor]
):
    """``(value, g, H V)`` at ``theta``, flat: one gradient with its graph, then ``H`` times the
    rows of ``V = directions(g)`` (``(m, D)``) by one batched backward through it (one backward per
    row if the loss cannot be batched). ``layout``: ``[(name, start, stop, shape)]``, the flat
    coordinates of each parameter."""
    names = [k for k, *_ in layout]
    p = {k: theta[k].detach().requires_grad_(True) for k in names}
    with torch.enable_grad():
        value = loss(p)
        gs = torch.autograd.grad(value, [p[k] for k in names], create_graph=True, allow_unused=True)
        g = torch.cat(
            [
                (gk.detach() if gk is not None else torch.zeros_like(p[k])).reshape(-1)
                for k, gk in zip(names, gs)
            ]
        )
        V = directions(g)
        m = V.shape[0]
        live = [(r, gk) for r, gk in enumerate(gs) if gk is not None and gk.requires_grad]
        hv = None
        if live and m:
            outs = [gk for _, gk in live]
            gos = [V[:, layout[r][1] : layout[r][2]].reshape(m, *layout[r][3]) for r, _ in live]
            inputs = [p[k] for k in names]
            try:
                hs = torch.autograd.grad(
                    outs,
                    inputs,
                    grad_outputs=gos,
                    allow_unused=True,
                    is_grads_batched=True,
                    retain_graph=True,
                )
                if all(h is not None for h in hs):  # one copy into the flat layout
                    hv = torch.cat([h.reshape(m, -1) for h in hs], dim=1)
                else:
                    hv = torch.zeros_like(V)
                    for (k, a, b, _), h in zip(layout, hs):
                        if h is not None:
                            hv[:, a:b] = h.reshape(m, -1)
            except RuntimeError:  # no batched backward for this loss: one direction at a time
                hv = torch.zeros_like(V)
                for r in range(m):
                    hs = torch.autograd.grad(
                        outs,
                        inputs,
                        grad_outputs=[go[r] for go in gos],
                        allow_unused=True,
                        retain_graph=True,
                    )
                    for (k, a, b, _), h in zip(layout, hs):
                        if h is not None:
                            hv[r, a:b] = h.reshape(-1)
    if hv is None:
        hv = torch.zeros_like(V)
    return value.detach(), g, hv


#: the state file of a JC run with per-pair states, in a search's folder
STATE_FILE = "pair_state.pt"


def _run_settings(task, lr: float, iters: int) -> dict:
    from .protocol import theta_digest

    return {"task": task.name, "blocks": list(task.block_names), "n_params": task.num_params(),
            "dtype": str(task.dtype).replace("torch.", ""), "lr": float(lr), "iters": int(iters),
            "theta0_sha256": theta_digest(task.params)}


def _load_state(path: str, now: dict, name: str = STATE_FILE, extendable: bool = True) -> dict:
    """The saved state of ``path`` (a ``name`` file) after checking it continues the run ``now``
    describes (same settings but ``iters``, which may grow, not shrink; the same ``iters`` where
    the run is not ``extendable``)."""
    import json

    from crosscurv.theory.errors import AdviceError

    if not os.path.exists(path):
        raise AdviceError(f"nothing to resume: {os.path.dirname(path) or '.'} has no {name}")
    st = torch.load(path, map_location="cpu", weights_only=True)
    saved = json.loads(st["settings"])
    for key in sorted(set(saved) | set(now)):
        if key != "iters" and saved.get(key) != now.get(key):
            a, b = json.dumps(saved.get(key))[:60], json.dumps(now.get(key))[:60]
            raise AdviceError(f"cannot resume {path}: setting {key} differs (saved {a}, now {b})")
    if not extendable and now["iters"] != saved["iters"]:
        raise AdviceError(f"cannot resume {path} with {now['iters']} iterations: the run was set "
                          f"to {saved['iters']} (a final-only run predicts at its own K)")
    if now["iters"] < saved["iters"]:
        raise AdviceError(f"cannot resume {path} with {now['iters']} iterations: the run was set "
                          f"to {saved['iters']} (a run can be extended, not shortened)")
    return st


def _layout(task) -> tuple[list, list, int]:
    """``(layout, span, D)``: ``layout`` ``[(name, start, stop, shape)]`` the flat coordinates of
    each parameter, block by block; ``span[i]`` block ``i``'s ``[start, stop)``; ``D`` in all."""
    layout, span, at = [], [], 0
    for ks in block_keys(task):
        start = at
        for k in ks:
            v = task.params[k]
            layout.append((k, at, at + v.numel(), tuple(v.shape)))
            at += v.numel()
        span.append((start, at))
    return layout, span, at


class _PairState:
    """The JC run's state at the top of iteration ``k``: ``theta``, the directions ``V`` (rows
    ``0..N-1`` the columns ``E_j g``, refilled each iteration; rows ``N..`` the states ``U``,
    updated in place) and the records before ``k``."""

    def __init__(self, task, lr: float):
        self.layout, self.span, dim = _layout(task)
        self.n, self.pairs, self.lr = task.n_blocks, pair_list(task.n_blocks), lr
        like = task.params[self.layout[0][0]]
        self.theta = {k: task.params[k].detach().clone() for k, *_ in self.layout}
        self.V = torch.zeros((self.n + len(self.pairs), dim), dtype=like.dtype, device=like.device)
        self.U = self.V[self.n:]
        self.lin, self.gram, self.curv, self.losses = [], [], [], []
        self.k, self.status, self.message = 0, "complete", ""
        self.pi = torch.tensor([i for i, _ in self.pairs], dtype=torch.long)
        self.pj = torch.tensor([j for _, j in self.pairs], dtype=torch.long)
        # the pairs (i, .) are rows rows_of[i] of U, reading the columns js_of[i]
        self.rows_of = [[p for p, (i, _) in enumerate(self.pairs) if i == b] for b in range(self.n)]
        self.js_of = [[j for i, j in self.pairs if i == b] for b in range(self.n)]

    def directions(self, g: torch.Tensor, k: int) -> torch.Tensor:
        for j, (a, b) in enumerate(self.span):
            self.V[j, a:b] = g[a:b]  # E_j g
        return self.V if k else self.V[: self.n]  # at k = 0 every state is zero: H u_p = 0

    def record(self, value, g: torch.Tensor, hcol: torch.Tensor, hu: torch.Tensor) -> None:
        """``L``, ``l = U g``, ``Q = sym(U H U^T)`` and ``c_ij = g_i . (H E_j g)_i`` at ``k``."""
        self.losses.append(float(value))
        self.lin.append((self.U @ g).double().cpu().numpy())
        q = (self.U @ hu.T).double()
        self.gram.append((0.5 * (q + q.T)).cpu().numpy())
        self.curv.append(_block_dots(g, hcol, self.span)[self.pi.numpy(), self.pj.numpy()])

    def advance(self, k: int, g: torch.Tensor, hcol: torch.Tensor, hu: torch.Tensor) -> None:
        """``u_p <- u_p - eta H u_p + eta^2 P_i H E_j g``, ``theta <- theta - eta g``."""
        if k:  # at k = 0, U = 0 and H U = 0
            self.U.add_(hu, alpha=-self.lr)
        lr2 = self.lr * self.lr
        for i, (a, b) in enumerate(self.span):
            if self.rows_of[i]:
                r0, r1 = self.rows_of[i][0], self.rows_of[i][-1] + 1
                self.U[r0:r1, a:b].add_(hcol[self.js_of[i], a:b], alpha=lr2)
        g_of = {name: g[a:b].view(shape) for name, a, b, shape in self.layout}
        self.theta = {name: self.theta[name] - self.lr * g_of[name] for name in self.theta}

    def save(self, path: str, settings: str) -> None:
        P = len(self.pairs)
        atomic_torch_save({
            "k": self.k, "theta": self.theta, "U": self.U.clone(),
            "losses": torch.tensor(self.losses, dtype=torch.float64),
            "linear": torch.from_numpy(np.array(self.lin, dtype=np.float64).reshape(-1, P)),
            "gram": torch.from_numpy(np.array(self.gram, dtype=np.float64).reshape(-1, P, P)),
            "curv": torch.from_numpy(np.array(self.curv, dtype=np.float64).reshape(-1, P)),
            "status": self.status, "message": self.message, "settings": settings,
        }, path)

    def load(self, saved: dict) -> None:
        self.k, self.status, self.message = int(saved["k"]), saved["status"], saved["message"]
        dev = self.V.device
        self.theta = {name: saved["theta"][name].to(dev) for name in self.theta}
        self.U.copy_(saved["U"])
        self.losses = saved["losses"].tolist()
        self.lin, self.gram, self.curv = (list(saved[key].numpy())
                                          for key in ("linear", "gram", "curv"))

    def records(self) -> PairRecords:
        K, P = len(self.losses), len(self.pairs)
        return PairRecords(
            self.n, self.lr, np.array(self.losses, dtype=np.float64),
            np.array(self.lin, dtype=np.float64).reshape(K, P),
            np.array(self.gram, dtype=np.float64).reshape(K, P, P),
            np.array(self.curv, dtype=np.float64).reshape(K, P),
            self.status, self.message, self.pairs,
        )


def pair_run(
    task,
    lr: float,
    iters: int,
    *,
    progress: Callable[[int, int], None] | None = None,
    state_path: str | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
) -> PairRecords:
    """Run JC from ``task.params`` for ``iters`` steps and gather :class:`PairRecords` (module
    docstring).

    A non-finite JC loss stops the run (status ``"diverged"``, the records up to the last finite
    ``k``).

    Args:
        state_path: a file (``DIR/pair_state.pt``) that receives the run's state (``theta^k``, the
            states ``u_p^k`` and the records before ``k``) every ``checkpoint_every`` iterations
            (default: at most once a minute) and at the end, so that a killed or shorter run can
            be continued; ``None``: nothing saved.
        resume: continue the run saved in ``state_path`` (same task, ``theta^0``, ``lr``; ``iters``
            at least the saved one) up to ``iters``: the records are those of an uninterrupted run.

    Raises:
        AdviceError: ``resume`` without a saved state, or one of another run.
    """
    import time

    from .protocol import CHECKPOINT_SECONDS

    now = _run_settings(task, lr, iters)
    st = _PairState(task, lr)
    if resume:
        st.load(_load_state(state_path, now))
    start, settings, last_save = st.k, json.dumps(now), time.perf_counter()
    for k in range(start, iters + 1):
        if st.status != "complete":
            break  # a saved run that diverged stays so
        st.k = k
        if state_path is not None and k > start:  # the state at the top of iteration k
            due = (k % checkpoint_every == 0) if checkpoint_every else (
                time.perf_counter() - last_save >= CHECKPOINT_SECONDS
            )
            if due or k == iters:
                st.save(state_path, settings)
                last_save = time.perf_counter()
        value, g, hv = _grad_and_products(
            task.loss, st.theta, st.layout, lambda g, k=k: st.directions(g, k)
        )
        if not math.isfinite(float(value)):
            st.status, st.message = "diverged", f"diverged at k={k}: loss_jc = {float(value)}"
            if state_path is not None:
                st.save(state_path, settings)
            break
        hcol, hu = hv[: st.n], hv[st.n:]  # H E_j g (j = 0..N-1), H u_p
        if k >= 1:
            st.record(value, g, hcol, hu)
            if progress is not None:
                progress(k, iters)
        if k < iters:
            st.advance(k, g, hcol, hu)
        del hv, hcol, hu
    return st.records()
