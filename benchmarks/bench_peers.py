"""Hessian-vector products against the peers: per product and per protocol point, in gradients.

The same function ``L(theta)`` of each built-in task (``mlp``, ``fl``, ``lora``
at ``--preset``), differentiated by crosscurv and by each peer through the
peer's public API, in one process, interleaved repeat by repeat (so machine
load hits every variant alike), single-threaded CPU time
(``time.process_time``), medians of ``--repeats``; every figure is reported as
a ratio to one gradient of the same run (:func:`crosscurv.numeric.hvp.grad`, one
backward pass).

Columns, per peer and task:

* ``gradient``: ``grad L(theta)`` the peer's way;
* ``product``: one full product ``H v`` as a user of the API pays it once the
  peer holds whatever it keeps per point (PyHessian's and BackPACK's retained
  gradient graph, curvlinops' operator, crosscurv's :class:`crosscurv.numeric.point.PointCurvature`);
* ``JC point``: what the protocol takes at ``theta_JC^k`` (:mod:`crosscurv.numeric.protocol`):
  the gradient, four full products ``H [p, z, y, Delta]`` and ``M_S g``;
* ``S point``: what it takes at ``theta_S^k``: the gradient and ``M_S g``.

``M_S v`` (Lemma 1) keeps the Hessian blocks ``H_ij`` with ``j in S(i)``.
crosscurv takes it by :class:`crosscurv.numeric.curvature.MaskedProductPlan` (one
product per fresh block ``j``, seeded by ``v_j`` and differentiating only the
rows that read it).  A peer offers only full products ``H u``, so it takes the
same plan's products as full products of zero-padded directions, keeping the
rows (``len(plan.products)`` of them: 7 on the 8-block MLP under GS, 1 on the
2-block tasks).

Peers (the optional ``bench`` extra: ``pip install -c constraints.txt -e '.[bench]'``):

* PyHessian (``pyhessian.hessian``): the gradient by ``loss.backward(create_graph=True)``
  into ``.grad``, each product ``torch.autograd.grad(gradsH, params, v)`` on that graph;
* curvlinops (``HessianLinearOperator``): each product from scratch by
  forward-over-reverse ``jvp(jacrev(L))``, several products vmapped in one
  ``H @ M`` call; the gradient by ``gradient_and_loss()``;
* BackPACK (``backpack.hessianfree.hvp.hessian_vector_product`` with
  ``grad_params``: the gradient built once per point with ``create_graph=True``,
  each product by the R-operator, two backward passes through it).  BackPACK's
  second-order *extensions* (``HMP``, ``DiagHessian``...) give only the
  diagonal blocks ``H_ii`` and need supported layers: they cannot give ``H v``
  or ``M_S v`` (reported);
* ``torch.func``: the gradient by ``grad_and_value``, products by
  ``jvp(grad(L))``, all the products of a point in one ``vmap``;
* hessian-eigenthings (``HessianOperator``, method ``"autograd"``): each
  ``matvec`` builds the gradient graph again (flat vectors); the gradient by
  ``torch.autograd.grad``.

Peers that need an ``nn.Module`` get a module whose parameters are the task's
and whose ``forward`` returns the task's loss (the input is a one-element
placeholder and the criterion the identity), so every peer differentiates
exactly the function crosscurv does.  A peer that is not installed, or fails
on a model, is listed as "not supported" with its error, never silently left
out.  The ``agrees`` column is the largest relative difference of the peer's
``H v`` and ``M_S g`` from crosscurv's (float32).

Run::

    python benchmarks/bench_peers.py [--tasks mlp,fl,lora] [--preset default] [--repeats 5]
        [--threads 1] [--json FILE]

Reports, never asserts (exit code 0).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

PEERS = ("crosscurv", "PyHessian", "curvlinops", "BackPACK", "torch.func", "hessian-eigenthings")
MEASURES = ("gradient", "product", "JC point", "S point")
#: full products the protocol takes at theta_JC^k: H [p, z, y, Delta]
FULL_PRODUCTS = 4


# -- the task's loss as a module ---------------------------------------------------------
class LossModule(nn.Module):
    """``forward(x) = L(theta)`` at this module's parameters (``x`` is ignored), shape ``(1,)``."""

    def __init__(self, task):
        super().__init__()
        self.keys = list(task.params)
        self._loss = task.loss
        self.ps = nn.ParameterList([nn.Parameter(task.params[k].detach().clone()) for k in self.keys])

    def forward(self, x):
        return self._loss(dict(zip(self.keys, self.ps))).reshape(1)


class Identity(nn.Module):
    """Criterion ``(prediction, target) -> prediction.sum()``; ``reduction`` as curvlinops expects."""

    reduction = "mean"

    def forward(self, prediction, target):
        return prediction.sum()


def _as_list(keys, v):
    return [v[k] for k in keys]


def _as_dict(keys, seq):
    return {k: t.detach() for k, t in zip(keys, seq)}


def _padded(v, cols):
    """``v`` on the keys ``cols``, zero elsewhere (a peer's full product of ``P_C v``)."""
    cols = set(cols)
    return {k: (t if k in cols else torch.zeros_like(t)) for k, t in v.items()}


# -- the peers ---------------------------------------------------------------------------------
class Peer:
    """Adapter: ``state()`` (what the peer keeps per point), ``gradient(state)``, ``hvp(state, v)``,
    ``products(state, vs)`` (several), ``masked(state, plan, g)``, ``point(plan, vs)`` / ``s_point(plan)``."""

    name = "peer"

    def __init__(self, task):
        self.task = task
        self.keys = list(task.params)

    def state(self):
        return None

    def gradient(self, state):  # pragma: no cover - interface
        raise NotImplementedError

    def hvp(self, state, v):  # pragma: no cover - interface
        raise NotImplementedError

    def products(self, state, vs):
        return [self.hvp(state, v) for v in vs]

    def masked(self, state, plan, g):
        return plan.assemble(g, self.products(state, [_padded(g, cols) for cols, _ in plan.products]))

    def point(self, plan, vs):
        s = self.state()
        g = self.gradient(s)
        out = self.products(s, vs)
        return g, out, self.masked(s, plan, g)

    def s_point(self, plan):
        s = self.state()
        g = self.gradient(s)
        return g, self.masked(s, plan, g)


class Crosscurv(Peer):
    name = "crosscurv"

    def state(self):
        from crosscurv.numeric.point import PointCurvature

        return PointCurvature(self.task.loss, self.task.params)

    def gradient(self, state):
        return state.grad

    def hvp(self, state, v):
        return state.hvp(v)

    def masked(self, state, plan, g):
        return state.masked(plan, g)


class PyHessianPeer(Peer):
    name = "PyHessian"

    def __init__(self, task):
        super().__init__(task)
        from pyhessian import hessian
        from pyhessian.utils import hessian_vector_product

        self._hessian, self._hv = hessian, hessian_vector_product
        self.module = LossModule(task)
        self.data = (torch.zeros(1, 1), torch.zeros(1))

    def state(self):
        self.module.zero_grad(set_to_none=True)
        return self._hessian(self.module, Identity(), data=self.data, cuda=False)

    def gradient(self, state):
        return _as_dict(self.keys, state.gradsH)

    def hvp(self, state, v):
        return _as_dict(self.keys, self._hv(state.gradsH, state.params, _as_list(self.keys, v)))


class CurvlinopsPeer(Peer):
    name = "curvlinops"

    def __init__(self, task):
        super().__init__(task)
        from curvlinops import HessianLinearOperator

        self.module = LossModule(task)
        params = list(self.module.ps)
        self.op = HessianLinearOperator(self.module, Identity(), params, [(torch.zeros(1, 1), torch.zeros(1))],
                                        check_deterministic=False)

    def gradient(self, state):
        g, _ = self.op.gradient_and_loss()
        return _as_dict(self.keys, g)

    def hvp(self, state, v):
        return _as_dict(self.keys, self.op @ _as_list(self.keys, v))

    def products(self, state, vs):
        if not vs:
            return []
        mat = [torch.stack([v[k] for v in vs], dim=-1) for k in self.keys]  # [*shape, K]
        out = self.op @ mat
        return [{k: out[i][..., j] for i, k in enumerate(self.keys)} for j in range(len(vs))]


class BackpackPeer(Peer):
    name = "BackPACK"

    def __init__(self, task):
        super().__init__(task)
        from backpack.hessianfree.hvp import hessian_vector_product

        self._hvp = hessian_vector_product
        self.module = LossModule(task)
        self.params = list(self.module.ps)

    def state(self):
        loss = self.module(None).sum()
        g = torch.autograd.grad(loss, self.params, create_graph=True)
        return loss, g

    def gradient(self, state):
        return _as_dict(self.keys, state[1])

    def hvp(self, state, v):
        loss, g = state
        return _as_dict(self.keys, self._hvp(loss, self.params, _as_list(self.keys, v), grad_params=g))


class TorchFuncPeer(Peer):
    name = "torch.func"

    def __init__(self, task):
        super().__init__(task)
        self.loss, self.p = task.loss, {k: v.detach() for k, v in task.params.items()}

    def gradient(self, state):
        g, _ = torch.func.grad_and_value(self.loss)(self.p)
        return g

    def hvp(self, state, v):
        return torch.func.jvp(torch.func.grad(self.loss), (self.p,), (v,))[1]

    def products(self, state, vs):
        if not vs:
            return []
        stacked = {k: torch.stack([v[k] for v in vs]) for k in self.keys}
        out = torch.func.vmap(lambda v: torch.func.jvp(torch.func.grad(self.loss), (self.p,), (v,))[1])(stacked)
        return [{k: out[k][j] for k in self.keys} for j in range(len(vs))]

    def point(self, plan, vs):  # one vmap for all the point's products, as a torch.func user would batch them
        g = self.gradient(None)
        dirs = list(vs) + [_padded(g, cols) for cols, _ in plan.products]
        out = self.products(None, dirs)
        return g, out[: len(vs)], plan.assemble(g, out[len(vs):])


class EigenthingsPeer(Peer):
    name = "hessian-eigenthings"

    def __init__(self, task):
        super().__init__(task)
        from hessian_eigenthings.operators import HessianOperator

        self.module = LossModule(task)
        self.params = list(self.module.ps)
        self.batch = (torch.zeros(1, 1), torch.zeros(1))
        self.op = HessianOperator(self.module, [self.batch], lambda model, batch: model(batch[0]).sum(),
                                  full_dataset=True, method="autograd")
        self.shapes = [p.shape for p in self.params]
        self.sizes = [p.numel() for p in self.params]

    def gradient(self, state):
        return _as_dict(self.keys, torch.autograd.grad(self.module(self.batch[0]).sum(), self.params))

    def hvp(self, state, v):
        flat = torch.cat([v[k].reshape(-1) for k in self.keys])
        out = self.op.matvec(flat)
        return {k: t.reshape(s) for k, t, s in zip(self.keys, torch.split(out, self.sizes), self.shapes)}


ADAPTERS = {
    "crosscurv": Crosscurv,
    "PyHessian": PyHessianPeer,
    "curvlinops": CurvlinopsPeer,
    "BackPACK": BackpackPeer,
    "torch.func": TorchFuncPeer,
    "hessian-eigenthings": EigenthingsPeer,
}


# -- measurement -------------------------------------------------------------------------------
def _reldiff(a: dict, b: dict) -> float:
    num = max(float((a[k].reshape(b[k].shape) - b[k]).abs().max()) for k in b)
    den = max(float(b[k].abs().max()) for k in b)
    return num / den if den else num


def _why(exc: BaseException) -> str:
    line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {line[:110]}"


def bench_task(name: str, preset: str, repeats: int, peers=PEERS, seed: int = 0) -> dict:
    """Time every peer on task ``name`` (module docstring); returns medians in gradients and notes."""
    from crosscurv.experiments.tasks.loading import load_task
    from crosscurv.numeric.curvature import masked_product_plan
    from crosscurv.numeric.hvp import grad
    from crosscurv.theory.patterns import parse_pattern

    task, settings = load_task(name, preset, device=torch.device("cpu"))
    pattern = parse_pattern(str(settings.get("pattern") or task.default_pattern), task.n_blocks, task.block_names)
    plan = masked_product_plan(task, pattern, "auto")
    gen = torch.Generator().manual_seed(seed)
    vs = [{k: torch.randn(t.shape, generator=gen, dtype=t.dtype) for k, t in task.params.items()}
          for _ in range(FULL_PRODUCTS)]
    v = vs[0]

    # references: crosscurv's H v and M_S g at theta^0
    ref_point = ADAPTERS["crosscurv"](task)
    st = ref_point.state()
    ref_g, ref_hv = st.grad, st.hvp(v)
    ref_m = st.masked(plan, ref_g)
    del st

    adapters, unsupported, agrees = {}, {}, {}
    for peer in peers:
        try:
            a = ADAPTERS[peer](task)
            s = a.state()
            hv = a.hvp(s, v)
            m = a.masked(s, plan, a.gradient(s))
            agrees[peer] = max(_reldiff(hv, ref_hv), _reldiff(m, ref_m))
            adapters[peer] = a
            del s
        except ImportError as exc:
            unsupported[peer] = f"not installed ({_why(exc)})"
        except Exception as exc:  # the peer cannot take this model: reported, not skipped
            unsupported[peer] = _why(exc)
    if "BackPACK" in adapters or "BackPACK" in unsupported:
        unsupported["BackPACK extensions (HMP, DiagHessian)"] = (
            "block-diagonal curvature only (H_ii of supported layers): no H v or M_S v, whose blocks H_ij cross layers")

    held = {}  # the per-point state a product is timed on, built once per peer

    def product_of(peer, a):
        def product():
            a.hvp(held[peer], v)
        return product

    jobs = [("unit", "gradient", lambda: grad(task.loss, task.params))]
    for peer, a in adapters.items():
        held[peer] = a.state()
        jobs += [
            (peer, "gradient", lambda a=a: a.gradient(a.state())),
            (peer, "product", product_of(peer, a)),
            (peer, "JC point", lambda a=a: a.point(plan, vs)),
            (peer, "S point", lambda a=a: a.s_point(plan)),
        ]
    for _, _, fn in jobs:  # warm-up
        fn()
    times = {(peer, what): [] for peer, what, _ in jobs}
    for _ in range(repeats):
        for peer, what, fn in jobs:
            gc.collect()
            t0 = time.process_time()
            fn()
            times[(peer, what)].append(time.process_time() - t0)
    held.clear()
    med = {key: statistics.median(t) for key, t in times.items()}
    unit = med[("unit", "gradient")]
    rows = {peer: {what: med[(peer, what)] / unit for what in MEASURES} for peer in adapters}
    return {
        "task": name,
        "preset": preset,
        "n_params": task.num_params(),
        "n_blocks": task.n_blocks,
        "pattern": pattern.name,
        "masked_form": plan.form,
        "masked_products": len(plan.products),
        "gradient_ms": unit * 1e3,
        "rows": rows,
        "agrees": agrees,
        "unsupported": unsupported,
    }


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("torch", "pyhessian", "curvlinops-for-pytorch", "backpack-for-pytorch", "hessian-eigenthings"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="mlp,fl,lora")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of: " + ", ".join(PEERS))
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in peers if p not in ADAPTERS]
    if unknown:
        ap.error(f"unknown peers {unknown} (choose from {', '.join(PEERS)})")
    torch.set_num_threads(args.threads)
    from crosscurv.numeric.threads import caller_chooses
    caller_chooses()  # the API calls below keep this count
    # PyHessian's documented call, loss.backward(create_graph=True), makes torch warn about .grad cycles
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    versions = _versions()
    print(f"{args.threads} thread(s), CPU time (process_time), medians of {args.repeats}, float32, "
          f"load average {os.getloadavg()[0]:.1f}; " + ", ".join(f"{k} {v or 'missing'}" for k, v in versions.items()))
    results = []
    for name in args.tasks.split(","):
        r = bench_task(name.strip(), args.preset, args.repeats, peers)
        results.append(r)
        print(f"\n{r['task']} ({r['preset']}, {r['n_params']:,} parameters, {r['n_blocks']} blocks, pattern "
              f"{r['pattern']}; M_S v: {r['masked_products']} product(s) by fresh {r['masked_form'].split('_')[1]}); "
              f"one gradient {r['gradient_ms']:.1f} ms; in gradients:")
        print("| peer | gradient | product | JC point | S point | JC point / crosscurv's | agrees |")
        print("|---|---|---|---|---|---|---|")
        base = r["rows"].get("crosscurv", {}).get("JC point")
        for peer, row in r["rows"].items():
            rel = f"{row['JC point'] / base:.2f}x" if base else ""
            print(f"| {peer} | {row['gradient']:.2f} | {row['product']:.2f} | {row['JC point']:.2f} | "
                  f"{row['S point']:.2f} | {rel} | {r['agrees'][peer]:.1e} |")
        for peer, why in r["unsupported"].items():
            print(f"| {peer} | not supported: {why} | | | | | |")
        sys.stdout.flush()
    if args.json:
        meta = {"threads": args.threads, "repeats": args.repeats, "versions": versions,
                "load_average": os.getloadavg()[0]}
        Path(args.json).write_text(json.dumps({**meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
