"""A block-coordinate implementation written from the paper alone, in plain torch autograd.

It is what ``crosscurv.testing`` checks (``test_my_blocks.py``): three functions over a
``crosscurv.Task`` (``task.params``, ``task.loss``, ``task.blocks``) and a delay pattern
(``pattern.pairs``: block ``i`` uses the fresh block ``j`` for each ``(i, j)``).

* ``step``: Definition 2, ``theta_i^+ = theta_i - lr grad_i L(theta, fresh blocks of i moved)``;
* ``cross_curvature``: Theorem 1's ``C_S = sum_{(i,j) in S} g_i^T H_ij g_j``;
* ``protocol``: JC and S from ``task.params``; per iteration the measured gap, Theorem 2's recursive
  estimate (from the measured ``Delta^{k-1} = theta_S^{k-1} - theta_JC^{k-1}``) and Theorem 3's
  cumulative estimate (``z_k = (I - lr H_JC^{k-1}) z_{k-1} + lr^2 M_S g_S^{k-1}``,
  ``cumulative^k = g_JC^k . z_k + 1/2 z_k . H_JC^k z_k``).
"""

import torch


def _point(task, params):
    """``(L, g, hvp)`` at ``params``: the loss, the gradient and ``v -> H v`` (dicts by name)."""
    names = list(params)
    x = [params[n].detach().clone().requires_grad_(True) for n in names]
    loss = task.loss(dict(zip(names, x)))
    g = torch.autograd.grad(loss, x, create_graph=True)

    def hvp(v):
        hv = torch.autograd.grad(
            g, x, grad_outputs=[v[n] for n in names], retain_graph=True, allow_unused=True
        )
        return {n: torch.zeros_like(params[n]) if h is None else h for n, h in zip(names, hv)}

    return float(loss.detach()), {n: gi.detach() for n, gi in zip(names, g)}, hvp


def _blocks(task):
    return list(task.blocks.values())


def _dot(a, b):
    return sum(float((a[n] * b[n]).sum()) for n in a)


def _keep(v, names):
    """``v`` on the parameters ``names``, zero elsewhere."""
    return {n: t if n in names else torch.zeros_like(t) for n, t in v.items()}


def step(task, params, pattern, lr):
    """One iteration of the scheme of ``pattern`` (blocks in an order where fresh blocks come
    first)."""
    blocks = _blocks(task)
    moved = {}
    for i in pattern.order():
        point = dict(params)
        for j in pattern.fresh(i):
            point.update(moved[j])
        _, g, _ = _point(task, point)
        moved[i] = {n: params[n] - lr * g[n] for n in blocks[i]}
    return {n: t for block in moved.values() for n, t in block.items()}


def _freshness(task, hvp, g, pattern):
    """``M_S g``: block ``i`` gets ``sum_{(i,j) in S} H_ij g_j``."""
    blocks = _blocks(task)
    out = {n: torch.zeros_like(t) for n, t in g.items()}
    for i in range(len(blocks)):
        fresh = [n for j in pattern.fresh(i) for n in blocks[j]]
        if fresh:
            hv = hvp(_keep(g, fresh))
            out.update({n: hv[n] for n in blocks[i]})
    return out


def cross_curvature(task, params, pattern):
    """``C_S = g^T M_S g`` at ``params``."""
    _, g, hvp = _point(task, params)
    return _dot(g, _freshness(task, hvp, g, pattern))


def protocol(task, pattern, lr, iters):
    """The controlled protocol: ``{column: values}`` for ``k = 1..iters``."""
    from crosscurv.theory import jacobi

    jc = jacobi(task.n_blocks)
    theta_jc, theta_s = dict(task.params), dict(task.params)
    z = {n: torch.zeros_like(t) for n, t in theta_jc.items()}
    _, g_jc, hvp_jc = _point(task, theta_jc)
    records = {c: [] for c in ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative")}
    for k in range(1, iters + 1):
        _, g_s, hvp_s = _point(task, theta_s)
        u = _freshness(task, hvp_s, g_s, pattern)  # M_S g_S^{k-1}
        delta = {n: theta_s[n] - theta_jc[n] for n in theta_jc}  # Delta^{k-1}
        h_delta, h_z = hvp_jc(delta), hvp_jc(z)  # at theta_JC^{k-1}
        w = {n: delta[n] - lr * h_delta[n] + lr**2 * u[n] for n in delta}
        z = {n: z[n] - lr * h_z[n] + lr**2 * u[n] for n in z}
        quad_delta = 0.5 * _dot(delta, h_delta)
        theta_jc, theta_s = step(task, theta_jc, jc, lr), step(task, theta_s, pattern, lr)
        loss_jc, g_jc, hvp_jc = _point(task, theta_jc)
        loss_s = float(task.loss(theta_s))
        for c, v in (
            ("k", k),
            ("loss_jc", loss_jc),
            ("loss_s", loss_s),
            ("gap", loss_s - loss_jc),
            ("recursive", _dot(g_jc, w) + quad_delta),
            ("cumulative", _dot(g_jc, z) + 0.5 * _dot(z, hvp_jc(z))),
        ):
            records[c].append(v)
    return records
