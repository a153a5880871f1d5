"""A user's own estimator in plain NumPy, checked against crosscurv's golden records.

This is what an implementation of the paper's per-iteration estimates in another framework looks
like: it reads a golden *quadratic* case written by ``crosscurv golden --out DIR`` (``L(x) = 1/2 x^T
A x - b^T x``, so the gradient is ``A x - b`` and the Hessian is ``A`` everywhere), runs the
controlled protocol (JC and the pattern-``S`` trajectories), and writes the records CSV. Then::

    python examples/numpy_estimator.py DIR/quadratic gs mine.csv
    crosscurv validate-records mine.csv --reference DIR/quadratic/gs

``bug=`` reproduces classic mistakes, each caught by ``validate-records`` with its diagnosis:

* ``"k_from_zero"``: rows numbered ``k = 0..K-1`` (``enumerate`` without
  ``start=1``) -- every column looks shifted by one iteration;
* ``"lagged_cumulative"``: the cumulative estimate logged before ``z`` is
  advanced, so its row ``k`` holds iteration ``k - 1``;
* ``"sign_gap"``: ``gap = loss_jc - loss_s`` (the opposite sign convention);
* ``"swapped"``: the recursive and cumulative columns written in each
  other's place.

No torch is imported.
"""

from __future__ import annotations

import csv
import json
import os
import sys

import numpy as np

COLUMNS = ("k", "loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "bound_bk")
BUGS = (None, "k_from_zero", "lagged_cumulative", "sign_gap", "swapped")


def _arr(obj):
    return np.asarray(obj["values"], dtype=np.float64).reshape(obj["shape"])


def load_quadratic(case_dir: str):
    with open(os.path.join(case_dir, "case.json"), encoding="utf-8") as fh:
        case = json.load(fh)
    if case["model"] != "quadratic":
        raise ValueError(f"{case_dir} is a {case['model']} case; this example handles the "
                         "quadratic one")
    names = list(case["params"])
    sizes = [int(np.prod(case["params"][n]["shape"])) for n in names]
    x0 = np.concatenate([_arr(case["params"][n]).ravel() for n in names])
    p0 = np.concatenate([_arr(case["power_iteration"]["start"][n]).ravel() for n in names])
    blocks = []  # index arrays of each block in x
    offsets = np.cumsum([0] + sizes)
    pos = {n: np.arange(offsets[i], offsets[i + 1]) for i, n in enumerate(names)}
    for b in case["blocks"]:
        blocks.append(np.concatenate([pos[n] for n in b["params"]]))
    return case, _arr(case["data"]["A"]), _arr(case["data"]["b"]), x0, p0, blocks


def pattern_step(A, b, x, blocks, pairs, order, lr):
    """Exact step of a pattern: block i's gradient at the state where exactly its fresh blocks are
    new.
    """
    new = x.copy()
    for i in order:
        state = x.copy()
        for (a, j) in pairs:
            if a == i:
                state[blocks[j]] = new[blocks[j]]
        new[blocks[i]] = x[blocks[i]] - lr * (A @ state - b)[blocks[i]]
    return new


def masked(A, blocks, pairs, v):
    """``M_S v``: ``(M_S v)_i = sum_{j in S(i)} A_ij v_j``."""
    out = np.zeros_like(v)
    for (i, j) in pairs:
        out[blocks[i]] += A[np.ix_(blocks[i], blocks[j])] @ v[blocks[j]]
    return out


def run(case_dir: str, label: str, bug: str | None = None) -> list[dict]:
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r} (choose from {BUGS})")
    case, A, b, x0, p, blocks = load_quadratic(case_dir)
    pat = case["patterns"][label]
    pairs = [(i - 1, j - 1) for i, j in pat["pairs"]]
    names = [blk["name"] for blk in case["blocks"]]
    order = [names.index(n) for n in pat["order"]]
    lr, K = float(case["lr"]), int(case["iters"])

    def loss(x):
        return 0.5 * x @ A @ x - b @ x

    xj, xs = x0.copy(), x0.copy()
    z, y = np.zeros_like(x0), np.zeros_like(x0)
    G = L = 0.0
    unorms, w, q = [], None, None
    rows = []
    for k in range(K + 1):
        gj, gs = A @ xj - b, A @ xs - b
        G = max(G, np.linalg.norm(gj), np.linalg.norm(gs))
        L = max(L, abs(p @ A @ p))
        p = A @ p / np.linalg.norm(A @ p)
        d = xs - xj
        if k >= 1:
            bk = lr**2 * sum((1 + lr * L) ** (k - 1 - j) * un for j, un in enumerate(unorms))
            rows.append({
                "k": k, "loss_jc": loss(xj), "loss_s": loss(xs), "gap": loss(xs) - loss(xj),
                "recursive": gj @ w + q,
                "cumulative": gj @ z + 0.5 * z @ A @ z,
                "jc_only": gj @ y + 0.5 * y @ A @ y,
                "bound_bk": G * bk + 0.5 * L * bk**2,
            })
        if k == K:
            break
        u = masked(A, blocks, pairs, gs)
        unorms.append(np.linalg.norm(u))
        w, q = d - lr * A @ d + lr**2 * u, 0.5 * d @ A @ d
        z = z - lr * A @ z + lr**2 * u
        y = y - lr * A @ y + lr**2 * masked(A, blocks, pairs, gj)
        xj = xj - lr * gj
        xs = pattern_step(A, b, xs, blocks, pairs, order, lr)
    if bug == "k_from_zero":
        for n, r in enumerate(rows):
            r["k"] = n
    elif bug == "lagged_cumulative":  # row k shows the value of iteration k-1 (row 1 shows 0)
        prev = [0.0] + [r["cumulative"] for r in rows[:-1]]
        for r, v in zip(rows, prev):
            r["cumulative"] = v
    elif bug == "sign_gap":
        for r in rows:
            r["gap"] = r["loss_jc"] - r["loss_s"]
    elif bug == "swapped":
        for r in rows:
            r["recursive"], r["cumulative"] = r["cumulative"], r["recursive"]
    return rows


def write_csv(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([int(r["k"])] + [repr(float(r[c])) for c in COLUMNS[1:]])


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: python examples/numpy_estimator.py CASE_DIR LABEL OUT.csv [BUG]")
    write_csv(run(sys.argv[1], sys.argv[2], sys.argv[4] if len(sys.argv) == 5 else None), sys.argv[
        3])
