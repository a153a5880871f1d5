"""The second-order ("freshness") term of a step, fitted by cross-Hessian products (Lemma 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from .. import tree
from ..hvp import grad
from ..hvp_differences import CurvatureRoute
from ..steps import block_keys
from ..task import Task
from .inputs import UserStep, call_step

__all__ = ["FreshnessFit", "freshness_fit", "scale_blocks"]


@dataclass
class FreshnessFit:
    """The step's second-order term fitted by cross-Hessian products (Lemma 1).

    A scheme satisfies ``theta^{k+1} = theta - eta g + eta^2 F + O(eta^3)``, ``F_i = sum_{j in S(i)}
    H_ij g_j``. The user's ``F`` (Richardson extrapolation of ``(U(theta, eta) - theta + eta g) /
    eta^2`` at the two smallest step sizes) is fitted block by block over all states as ``F_i ~
    sum_{j != i} a_ij H_ij g_j``: ``coef[i][j] = a_ij`` (``None`` on the diagonal and where ``H_ij
    g_j`` vanishes), ``residual[i] = ||F_i - sum_j a_ij H_ij g_j|| / scale_i``, ``tol``: how close
    to an integer a coefficient must be to be read as one.
    """

    coef: list
    residual: list
    block_names: list
    tol: float = 0.05

    def rounded(self) -> dict:
        """``{(i, j): r}`` with ``r`` in ``{-1, 0, 1}`` where ``a_ij`` is that close to it, else
        ``None``."""
        out = {}
        for i, row in enumerate(self.coef):
            for j, a in enumerate(row):
                if a is None:
                    continue
                r = round(a)
                out[(i, j)] = int(r) if r in (-1, 0, 1) and abs(a - r) <= self.tol else None
        return out

    @property
    def is_pattern_form(self) -> bool:
        """Residuals small and every determined coefficient is 0 or 1."""
        return all(r <= self.tol for r in self.residual) and all(
            v in (0, 1) for v in self.rounded().values()
        )

    @property
    def is_sign_flipped(self) -> bool:
        """Residuals small, coefficients in ``{-1, 0}``, at least one ``-1``."""
        vals = list(self.rounded().values())
        return (
            all(r <= self.tol for r in self.residual)
            and all(v in (-1, 0) for v in vals)
            and -1 in vals
        )

    def inferred_pairs(self, value: int = 1) -> list:
        """Pairs ``(i, j)`` whose coefficient rounds to ``value``."""
        return sorted(p for p, v in self.rounded().items() if v == value)

    def table(self, fmt: str = "github") -> str:
        from tabulate import tabulate

        names = self.block_names
        rows = []
        for i, row in enumerate(self.coef):
            rows.append(
                [f"{names[i]} (i={i + 1})"]
                + ["" if a is None else f"{a:+.4f}" for a in row]
                + [f"{self.residual[i]:.2e}"]
            )
        head = (
            ["block i \\ fresh j"]
            + [f"{n} (j={j + 1})" for j, n in enumerate(names)]
            + ["residual"]
        )
        return tabulate(rows, headers=head, tablefmt=fmt, disable_numparse=True)

    def to_dict(self) -> dict:
        return {
            "coef": self.coef,
            "residual": self.residual,
            "block_names": self.block_names,
            "tol": self.tol,
        }


def freshness_fit(user: UserStep, states: Sequence[Mapping], eta: float, tol: float = 0.05,
                  factors: Sequence[float] | None = None,
                  route: CurvatureRoute | None = None) -> FreshnessFit:
    """Fit the step's ``eta^2`` term by ``a_ij f_i H_ij (f_j g_j)`` at ``eta`` and ``2 eta``
    (:class:`FreshnessFit`); ``factors``: ``f_i`` per block (default 1); ``route``: how the
    curvature products are taken.
    """
    task = user.task
    route = CurvatureRoute(task.loss) if route is None else route
    fac = [1.0] * task.n_blocks if factors is None else [float(f) for f in factors]
    keys = block_keys(task)
    n = task.n_blocks
    # per block i: rows of design (list over states of [ (u_j)_i ]) and targets
    design = [[[] for _ in range(n)] for _ in range(n)]
    target = [[] for _ in range(n)]
    for st in states:
        _, g = grad(task.loss, st)
        fg = scale_blocks(task, g, fac)
        f = {}
        for h in (2.0 * eta, eta):
            u = call_step(user.step, st, h, user.name)
            jc = tree.axpy(-h, fg, st)
            f[h] = tree.scale(tree.sub(u, jc), 1.0 / h**2)
        fr = tree.sub(tree.scale(f[eta], 2.0), f[2.0 * eta])  # Richardson: O(eta) error removed
        cols = route.batch(st, [tree.restrict(fg, ks) for ks in keys])
        for i in range(n):
            target[i].append(torch.cat([fr[k].reshape(-1) for k in keys[i]]))
            for j in range(n):
                design[i][j].append(fac[i] * torch.cat([cols[j][k].reshape(-1) for k in keys[i]]))
    coef = [[None] * n for _ in range(n)]
    resid = []
    for i in range(n):
        y = torch.cat(target[i]).to(torch.float64).cpu()
        others = [j for j in range(n) if j != i]
        xs = {j: torch.cat(design[i][j]).to(torch.float64).cpu() for j in others}
        scale = max([float(y.norm())] + [float(x.norm()) for x in xs.values()] + [1e-300])
        live = [j for j in others if float(xs[j].norm()) > 1e-9 * scale]
        if live:
            X = torch.stack([xs[j] for j in live], dim=1)
            sol = torch.linalg.lstsq(X, y.unsqueeze(1), driver="gelsd").solution.squeeze(1)
            fitted = X @ sol
            for j, a in zip(live, sol.tolist()):
                coef[i][j] = float(a)
        else:
            fitted = torch.zeros_like(y)
        resid.append(float((y - fitted).norm()) / scale)
    return FreshnessFit(coef, resid, task.block_names, tol)


def scale_blocks(task: Task, v: Mapping, factors: Sequence[float]) -> dict:
    """``f_i v_i`` block by block (``v`` keyed like the parameters)."""
    out = {}
    for b, f in zip(task.block_names, factors):
        for k in task.blocks[b]:
            out[k] = v[k] if f == 1.0 else v[k] * f
    return out
