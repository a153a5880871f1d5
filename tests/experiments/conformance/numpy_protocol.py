"""An outside implementation of the controlled protocol, in NumPy from the paper alone (no torch).

Reads a golden ``case.json`` (quadratic or quartic loss, float64, three blocks) and writes the
records (paper, Definitions 1-2, Theorems 1-3; the protocol's ``G``/``L`` of the golden README).
``bug=`` plants one mistake (:data:`BUGS`); ``hessian="fd"`` takes every Hessian from central
differences of the gradient (an honest implementation without second derivatives, about 1e-9
relative).
"""

from __future__ import annotations

import numpy as np

#: The planted mistakes: name -> what it does.
BUGS = {
    "sign_gap": "gap = loss_jc - loss_s",
    "delta_after_step": "recursive formed with the difference after the step (Delta^{k+1} for "
                        "Delta^k)",
    "no_cross_block": "z and y propagated with the block diagonal of H",
    "no_propagation": "z and y not propagated (z_{k+1} = z_k + eta^2 u_k)",
    "no_quadratic": "cumulative and jc_only without 1/2 z.H z",
    "transposed_pairs": "M_S over the pairs (j, i)",
    "all_pairs": "M_S over every pair i != j",
    "freshness_half": "eta^2/2 M_S g_S in place of eta^2 M_S g_S",
    "freshness_double": "2 eta^2 M_S g_S in place of eta^2 M_S g_S",
    "stale_gs": "the S step reuses the gradient of the start of the sweep (a JC step)",
}


def _arr(obj):
    if isinstance(obj, (int, float)):
        return float(obj)
    return np.asarray(obj["values"], dtype=np.float64).reshape(obj["shape"])


class NumpyProblem:
    """Quadratic / quartic losses of a golden case.json, with gradient, Hessian, third
    derivative."""

    def __init__(self, case: dict, hessian: str = "exact", fd_step: float = 1e-5):
        assert case["model"] in ("quadratic", "quartic")
        self.names = list(case["params"])
        sizes = [int(np.prod(case["params"][n]["shape"])) for n in self.names]
        off = np.cumsum([0] + sizes)
        pos = {n: np.arange(off[i], off[i + 1]) for i, n in enumerate(self.names)}
        self.blocks = [np.concatenate([pos[n] for n in b["params"]]) for b in case["blocks"]]
        self.x0 = np.concatenate([_arr(case["params"][n]).ravel() for n in self.names])
        self.p0 = np.concatenate(
            [_arr(case["power_iteration"]["start"][n]).ravel() for n in self.names]
        )
        d = case["data"]
        self.A, self.b = _arr(d["A"]), _arr(d["b"])
        self.W = _arr(d["W"]) if "W" in d else np.zeros((0, self.x0.size))
        self.gamma = float(d.get("gamma", 0.0))
        self.hessian, self.fd_step = hessian, fd_step

    def loss(self, x):
        return 0.5 * x @ self.A @ x - self.b @ x + 0.25 * self.gamma * np.sum((self.W @ x) ** 4)

    def grad(self, x):
        return self.A @ x - self.b + self.gamma * self.W.T @ ((self.W @ x) ** 3)

    def hess(self, x):
        if self.hessian == "fd":
            h = self.fd_step * max(1.0, float(np.linalg.norm(x)))
            cols = [(self.grad(x + h * e) - self.grad(x - h * e)) / (2 * h) for e in np.eye(x.size)]
            H = np.array(cols).T
            return 0.5 * (H + H.T)
        return self.A + 3 * self.gamma * self.W.T @ np.diag((self.W @ x) ** 2) @ self.W

    def third(self, x, a, b, c):
        """``D^3 L(x)[a, b, c] = 6 gamma sum_m (w_m.x)(w_m.a)(w_m.b)(w_m.c)``."""
        W = self.W
        return 6 * self.gamma * np.sum((W @ x) * (W @ a) * (W @ b) * (W @ c))

    # Definition 2 / Lemma 1
    def masked(self, H, pairs, v):
        out = np.zeros_like(v)
        for i, j in pairs:
            out[self.blocks[i]] += H[np.ix_(self.blocks[i], self.blocks[j])] @ v[self.blocks[j]]
        return out

    def block_diagonal(self, H):
        D = np.zeros_like(H)
        for b in self.blocks:
            D[np.ix_(b, b)] = H[np.ix_(b, b)]
        return D

    def step(self, x, pairs, order, lr):
        new = x.copy()
        for i in order:
            state = x.copy()
            for a, j in pairs:
                if a == i:
                    state[self.blocks[j]] = new[self.blocks[j]]
            new[self.blocks[i]] = x[self.blocks[i]] - lr * self.grad(state)[self.blocks[i]]
        return new

    def protocol(self, pairs, order, lr, K, bug=None):
        """``{column: values}`` of the records ``k = 1..K`` (without ``k``), with ``bug``
        planted."""
        assert bug is None or bug in BUGS, bug
        n = len(self.blocks)
        fpairs = {
            "transposed_pairs": [(j, i) for i, j in pairs],
            "all_pairs": [(i, j) for i in range(n) for j in range(n) if i != j],
        }.get(bug, pairs)
        f = {"freshness_half": 0.5, "freshness_double": 2.0}.get(bug, 1.0)
        xj, xs, p = self.x0.copy(), self.x0.copy(), self.p0.copy()
        z, y = np.zeros_like(xj), np.zeros_like(xj)
        G = L = 0.0
        unorms, w, q, rows = [], None, None, []
        for k in range(K + 1):
            gj, gs = self.grad(xj), self.grad(xs)
            G = max(G, np.linalg.norm(gj), np.linalg.norm(gs))
            Hj = self.hess(xj)
            L = max(L, abs(p @ Hj @ p))
            p = Hj @ p / np.linalg.norm(Hj @ p)
            d = xs - xj
            if k >= 1:
                bk = lr**2 * sum((1 + lr * L) ** (k - 1 - j) * un for j, un in enumerate(unorms))
                quad = 0.0 if bug == "no_quadratic" else 1.0
                gap = self.loss(xs) - self.loss(xj)
                rows.append(
                    {
                        "loss_jc": self.loss(xj),
                        "loss_s": self.loss(xs),
                        "gap": -gap if bug == "sign_gap" else gap,
                        "recursive": gj @ w + q,
                        "cumulative": gj @ z + quad * 0.5 * z @ Hj @ z,
                        "jc_only": gj @ y + quad * 0.5 * y @ Hj @ y,
                        "bound_bk": G * bk + 0.5 * L * bk**2,
                    }
                )
            if k == K:
                break
            u = f * self.masked(self.hess(xs), fpairs, gs)
            m = f * self.masked(Hj, fpairs, gj)
            unorms.append(np.linalg.norm(u))
            P = {"no_cross_block": self.block_diagonal(Hj), "no_propagation": 0 * Hj}.get(bug, Hj)
            z = z - lr * P @ z + lr**2 * u
            y = y - lr * P @ y + lr**2 * m
            xj_next = xj - lr * gj
            xs_next = (xs - lr * gs) if bug == "stale_gs" else self.step(xs, pairs, order, lr)
            dw = xs_next - xj_next if bug == "delta_after_step" else d
            w, q = dw - lr * Hj @ dw + lr**2 * u, 0.5 * dw @ Hj @ dw
            xj, xs = xj_next, xs_next
        out = {c: [r[c] for r in rows] for c in rows[0]}
        out["k"] = list(range(1, K + 1))
        return out


class MlpProblem(NumpyProblem):
    """The golden tiny MLP (tanh 3-4-3-2, mean softmax cross-entropy): gradient by hand-written
    back-propagation, every Hessian from central differences of it (no second derivative here)."""

    def __init__(self, case: dict, fd_step: float = 1e-5):
        assert case["model"] == "mlp"
        self.names = list(case["params"])
        self.shapes = [tuple(case["params"][n]["shape"]) for n in self.names]
        sizes = [int(np.prod(sh)) for sh in self.shapes]
        self.off = np.cumsum([0] + sizes)
        pos = {n: np.arange(self.off[i], self.off[i + 1]) for i, n in enumerate(self.names)}
        self.blocks = [np.concatenate([pos[n] for n in b["params"]]) for b in case["blocks"]]
        self.x0 = np.concatenate([_arr(case["params"][n]).ravel() for n in self.names])
        self.p0 = np.concatenate(
            [_arr(case["power_iteration"]["start"][n]).ravel() for n in self.names])
        self.X, self.Y = _arr(case["data"]["X"]), _arr(case["data"]["Y"])
        self.hessian, self.fd_step = "fd", fd_step

    def _unflat(self, x):
        return {n: x[self.off[i]:self.off[i + 1]].reshape(self.shapes[i])
                for i, n in enumerate(self.names)}

    def _forward(self, x):
        p = self._unflat(x)
        h1 = np.tanh(self.X @ p["W1"].T + p["b1"])
        h2 = np.tanh(h1 @ p["W2"].T + p["b2"])
        return p, h1, h2, h2 @ p["W3"].T + p["b3"]

    def loss(self, x):
        z = self._forward(x)[3]
        m = z.max(axis=1, keepdims=True)
        lse = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
        return float(np.mean(lse - (z * self.Y).sum(axis=1)))

    def grad(self, x):
        p, h1, h2, z = self._forward(x)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        dz = (e / e.sum(axis=1, keepdims=True) - self.Y) / len(self.X)
        da2 = (dz @ p["W3"]) * (1 - h2**2)
        da1 = (da2 @ p["W2"]) * (1 - h1**2)
        g = {"W3": dz.T @ h2, "b3": dz.sum(0), "W2": da2.T @ h1, "b2": da2.sum(0),
             "W1": da1.T @ self.X, "b1": da1.sum(0)}
        return np.concatenate([g[n].ravel() for n in self.names])


def problem(case: dict, hessian: str = "exact", fd_step: float = 1e-5) -> NumpyProblem:
    """The NumPy problem of a golden case (the MLP takes its Hessians from differences always)."""
    if case["model"] == "mlp":
        return MlpProblem(case, fd_step)
    return NumpyProblem(case, hessian, fd_step)


def pattern(case, label):
    """``(pairs, order)`` of a pattern of ``case.json``, 0-based."""
    pat = case["patterns"][label]
    names = [b["name"] for b in case["blocks"]]
    return [(i - 1, j - 1) for i, j in pat["pairs"]], [names.index(n) for n in pat["order"]]
