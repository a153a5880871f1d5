"""The parts of each estimate of a golden run and of its variants: ``<case>/<label>/terms.csv``.

With ``Delta^k = theta_S^k - theta_JC^k``, ``g^k = grad L(theta_JC^k)``, ``H^k`` the dense float64
Hessian at ``theta_JC^k``, ``D^k`` its block diagonal, ``u_X^k = M_X(theta_S^k) g_S^k`` for the
pairs ``X`` of the pattern (``S``), of its transpose (``T``) and of all ordered pairs (``all``), and
``m_X^k = M_X(theta_JC^k) g^k``, row ``k = 1..K`` holds

* ``rec_prop = g^k . (I - eta H^{k-1}) Delta^{k-1}``, ``rec_lin = g^k . Delta^{k-1}``,
  ``rec_quad = 1/2 Delta^{k-1} . H^{k-1} Delta^{k-1}``, ``rec_fresh_X = eta^2 g^k . u_X^{k-1}``
  (``recursive = rec_prop + rec_quad + rec_fresh_S``); ``rec_prop_now``, ``rec_quad_now`` with
  ``Delta^k`` in place of ``Delta^{k-1}``;
* ``cum_lin_V = g^k . z_V^k``, ``cum_quad_V = 1/2 z_V^k . H^k z_V^k``
  (``cumulative = cum_lin_S + cum_quad_S``) for ``V`` in ``S``, ``T``, ``all``
  (``z_{k+1} = (I - eta H^k) z_k + eta^2 u_V^k``), ``diag`` (``D^k`` for ``H^k``, forcing
  ``u_S``) and ``none`` (``z_{k+1} = z_k + eta^2 u_S^k``), ``z_0 = 0``;
* ``jco_lin_V``, ``jco_quad_V``: the same forced by ``m_V`` (``jc_only = jco_lin_S + jco_quad_S``);
* ``bnd_G_X = G b_X^k``, ``bnd_L_X = L/2 (b_X^k)^2``,
  ``b_X^k = eta^2 sum_{j<k} (1 + eta L)^{k-1-j} ||u_X^j||`` (``bound_bk = bnd_G_S + bnd_L_S``).

:mod:`crosscurv.numeric.formula_variants` reads these columns (without torch).
"""

from __future__ import annotations

import torch

from crosscurv.numeric.formula_variants import (PAIR_SETS as _PAIRS, PROPAGATIONS as _PROPAGATIONS,
                                                TERM_COLUMNS)
from crosscurv.numeric.steps import scheme_step

__all__ = ["TERM_COLUMNS", "formula_terms"]


def _flat(task):
    names = list(task.params)
    shapes = [task.params[n].shape for n in names]
    sizes = [task.params[n].numel() for n in names]
    offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    pos = {n: torch.arange(offsets[i], offsets[i + 1]) for i, n in enumerate(names)}
    blocks = [torch.cat([pos[n] for n in task.blocks[b]]) for b in task.block_names]

    def unflat(x):
        return {n: x[offsets[i] : offsets[i + 1]].reshape(shapes[i]) for i, n in enumerate(names)}

    def flat(d):
        return torch.cat([d[n].detach().reshape(-1).to(torch.float64) for n in names])

    return flat, unflat, blocks


def _masked(H, blocks, pairs, v):
    """``(M_X v)_i = sum_{j: (i, j) in X} H_ij v_j``."""
    out = torch.zeros_like(v)
    for i, j in sorted(pairs):
        out[blocks[i]] += H[blocks[i]][:, blocks[j]] @ v[blocks[j]]
    return out


def _block_diagonal(H, blocks):
    D = torch.zeros_like(H)
    for b in blocks:
        D[b.unsqueeze(1), b] = H[b][:, b]
    return D


def formula_terms(task, pattern, lr: float, iters: int, p0) -> list[dict]:
    """The rows ``k = 1..iters`` of ``terms.csv`` (module docstring) for a plain run of ``task``.

    Args:
        task: a float64 :class:`crosscurv.numeric.Task` with few parameters (dense Hessians).
        pattern: the :class:`crosscurv.theory.patterns.DelayPattern` of the run.
        lr, iters: ``eta`` and ``K``.
        p0: the power-iteration start ``{name: tensor}`` of the run.

    Returns:
        ``[{"k": k, column: float, ...}]`` with the columns of :data:`TERM_COLUMNS`.
    """
    flat, unflat, blocks = _flat(task)
    n = len(blocks)
    pairs = {
        "S": set(pattern.pairs),
        "T": {(j, i) for i, j in pattern.pairs},
        "all": {(i, j) for i in range(n) for j in range(n) if i != j},
    }

    def grad(x):
        x = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(task.loss(unflat(x)), x)
        return g.detach()

    def hess(x):
        return torch.autograd.functional.hessian(lambda v: task.loss(unflat(v)), x.detach())

    xj = flat(task.params)
    xs = xj.clone()
    p = flat(p0)
    z = {v: torch.zeros_like(xj) for v in _PROPAGATIONS}
    y = {v: torch.zeros_like(xj) for v in _PROPAGATIONS}
    unorms = {x: [] for x in _PAIRS}
    G = L = 0.0
    prev = None
    rows = []
    for k in range(iters + 1):
        gj, gs, Hj = grad(xj), grad(xs), hess(xj)
        G = max(G, float(gj.norm()), float(gs.norm()))
        Hp = Hj @ p
        L = max(L, abs(float(p @ Hp)))
        p = Hp / Hp.norm()
        d = xs - xj
        if k >= 1:
            d0, H0, u0 = prev
            row = {
                "k": k,
                "rec_prop": float(gj @ (d0 - lr * (H0 @ d0))),
                "rec_lin": float(gj @ d0),
                "rec_quad": float(0.5 * d0 @ (H0 @ d0)),
            }
            row.update({f"rec_fresh_{x}": float(lr**2 * (gj @ u0[x])) for x in _PAIRS})
            row["rec_prop_now"] = float(gj @ (d - lr * (H0 @ d)))
            row["rec_quad_now"] = float(0.5 * d @ (H0 @ d))
            for name, vecs in (("cum", z), ("jco", y)):
                for v in _PROPAGATIONS:
                    row[f"{name}_lin_{v}"] = float(gj @ vecs[v])
                    row[f"{name}_quad_{v}"] = float(0.5 * vecs[v] @ (Hj @ vecs[v]))
            for x in _PAIRS:
                b = lr**2 * sum((1 + lr * L) ** (k - 1 - j) * un for j, un in enumerate(unorms[x]))
                row[f"bnd_G_{x}"], row[f"bnd_L_{x}"] = G * b, 0.5 * L * b * b
            rows.append(row)
        if k == iters:
            break
        Hs = hess(xs)
        u = {x: _masked(Hs, blocks, pairs[x], gs) for x in _PAIRS}
        m = {x: _masked(Hj, blocks, pairs[x], gj) for x in _PAIRS}
        D = _block_diagonal(Hj, blocks)
        for vecs, force in ((z, u), (y, m)):
            for x in _PAIRS:
                vecs[x] = vecs[x] - lr * (Hj @ vecs[x]) + lr**2 * force[x]
            vecs["diag"] = vecs["diag"] - lr * (D @ vecs["diag"]) + lr**2 * force["S"]
            vecs["none"] = vecs["none"] + lr**2 * force["S"]
        for x in _PAIRS:
            unorms[x].append(float(u[x].norm()))
        prev = (d, Hj, u)
        with torch.no_grad():
            xs = flat(scheme_step(task, unflat(xs), pattern, lr))
        xj = xj - lr * gj
    return rows
