"""Validate real training code: an ``nn.Module`` and a ``torch.optim`` training step as a user step.

:func:`step_from_training_code` turns training code that updates a module in place
(``zero_grad``, ``backward``, ``optimizer.step()``; several optimizers, param groups, peft
adapters) into a step ``step(params, lr) -> new params`` (docs/validation.md).  Each call
restores the module (the blocks' parameters from ``params``, every other parameter, buffer,
``requires_grad`` flag and ``.grad`` as at construction), builds the optimizers afresh with each
param group's ``lr`` set to ``lr * f_b``, runs ``train_step(model, optimizers)`` and returns
copies of the blocks' parameters.  The task's loss is ``objective(model)`` with ``theta``
substituted by ``torch.func.functional_call``.  Dropout must be off.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Callable, Mapping, Sequence

import torch

from .validation.inputs import UserStep, ValidationInputError, declared_pattern
from .task import Task

__all__ = ["step_from_training_code", "block_names_from_patterns"]


def _matcher(pattern: str) -> Callable[[str], bool]:
    if pattern.startswith("re:"):
        try:
            rx = re.compile(pattern[3:])
        except re.error as exc:
            raise ValidationInputError(f"bad block regex {pattern[3:]!r}: {exc}") from None
        return lambda n: rx.search(n) is not None
    return lambda n: fnmatch.fnmatchcase(n, pattern)


def block_names_from_patterns(names: Sequence[str], blocks: Mapping) -> dict:
    """``{block: [parameter names]}`` from ``{block: pattern or [patterns]}``.

    A pattern is an ``fnmatch`` glob on the parameter name (``"*lora_A*"``, ``"encoder.*"``) or a
    regular expression after ``"re:"`` (searched). A parameter goes to the first block (in the
    mapping's order) with a matching pattern; parameters no block matches are held fixed.

    Raises:
        ValidationInputError: a block that matches no parameter, or no blocks.
    """
    if not isinstance(blocks, Mapping) or not blocks:
        raise ValidationInputError("blocks must be a non-empty mapping {block name: pattern(s)} "
                                   "or 'param_groups'")
    rules = []
    for b, pats in blocks.items():
        pats = [pats] if isinstance(pats, str) else list(pats)
        if not pats or not all(isinstance(p, str) for p in pats):
            raise ValidationInputError(f"block {b!r}: patterns must be strings")
        rules.append((str(b), [_matcher(p) for p in pats], pats))
    out = {b: [] for b, _, _ in rules}
    for n in names:
        for b, ms, _ in rules:
            if any(m(n) for m in ms):
                out[b].append(n)
                break
    empty = [f"{b} ({', '.join(p)})" for b, _, p in rules if not out[b]]
    if empty:
        raise ValidationInputError("block patterns match no parameter: " + "; ".join(empty))
    return out


def _as_list(opts) -> list:
    if isinstance(opts, torch.optim.Optimizer):
        return [opts]
    if isinstance(opts, Mapping):
        opts = list(opts.values())
    if isinstance(opts, (list, tuple)) and opts and all(isinstance(o, torch.optim.Optimizer)
                                                        for o in opts):
        return list(opts)
    raise ValidationInputError(
        "optimizers(model) must return a torch.optim.Optimizer, or a list, tuple or dict of "
        f"them; got {type(opts).__name__}"
    )


def _group_blocks(model: torch.nn.Module, optimizers: Callable) -> dict:
    """``{block: [names]}`` with one block per param group, in the order the optimizers list them.
    """
    ids = {id(p): n for n, p in model.named_parameters()}
    out: dict = {}
    for opt in _as_list(optimizers(model)):
        for g in opt.param_groups:
            name = str(g.get("name") or f"group{len(out) + 1}")
            if name in out:
                raise ValidationInputError(f"two param groups are named {name!r}")
            names = [ids[id(p)] for p in g["params"] if id(p) in ids]
            if names:
                out[name] = names
    if not out:
        raise ValidationInputError("the optimizers' param groups hold no parameter of the model")
    return out


def step_from_training_code(
    model: torch.nn.Module,
    train_step: Callable,
    objective: Callable[[torch.nn.Module], torch.Tensor],
    blocks: Mapping | str,
    *,
    optimizers: Callable,
    lr_factors: Mapping | None = None,
    pattern=None,
    name: str = "training step",
) -> UserStep:
    """A :class:`~crosscurv.numeric.validation.UserStep` running ordinary training code (module
    docstring).

    Args:
        model: the ``nn.Module`` (peft-wrapped included); converted to float64 in place. train_step:
        ``train_step(model, optimizers)``: the user's update,
            ``optimizers`` being what ``optimizers(model)`` returned.
        objective: ``objective(model) -> 0-dim tensor``: the loss the step
            minimises, computed from the module (the task's ``L``).
        blocks: ``{block: pattern or [patterns]}`` (:func:`block_names_from_patterns`)
            or ``"param_groups"``: one block per param group of the optimizers (named by the group's
            ``"name"`` entry, else ``group1``, ``group2``...).
        optimizers: ``optimizers(model)`` -> a ``torch.optim.Optimizer`` or a
            list/tuple/dict of them, built with any ``lr`` (it is set on each call).
        lr_factors: ``{block: f}``: the param groups of block ``b`` get
            ``lr * f`` (default 1).
        pattern: the declared delay pattern (``"jc"``, ``"gs:B,A"``, ...). name: label for reports.

    Returns:
        a :class:`UserStep` (what a ``validate-step`` factory may return).

    Raises:
        ValidationInputError: one line: bad blocks, optimizers or factors.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValidationInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(train_step) or not callable(objective) or not callable(optimizers):
        raise ValidationInputError("train_step, objective and optimizers must be callables")
    if any(t.is_floating_point() and t.dtype != torch.float64 for t in list(model.parameters())
           + list(model.buffers())):
        model.to(torch.float64)
    named = dict(model.named_parameters())
    if isinstance(blocks, str):
        if blocks != "param_groups":
            raise ValidationInputError("blocks must be a mapping of name patterns or "
                                       f"'param_groups', got {blocks!r}")
        groups = _group_blocks(model, optimizers)
    else:
        groups = block_names_from_patterns(list(named), blocks)
    block_of = {n: b for b, ns in groups.items() for n in ns}
    factors = {b: 1.0 for b in groups}
    for b, f in (lr_factors or {}).items():
        if b not in groups:
            raise ValidationInputError(f"lr_factors names unknown block {b!r}; blocks are "
                                       f"{', '.join(groups)}")
        f = float(f)
        if not f > 0:
            raise ValidationInputError(f"lr_factors[{b!r}] must be > 0, got {f}")
        factors[b] = f

    ids = {id(p): n for n, p in named.items()}
    saved = {n: p.detach().clone() for n, p in named.items()}
    flags = {n: p.requires_grad for n, p in named.items()}
    buffers = dict(model.named_buffers())
    saved_buffers = {n: b.detach().clone() for n, b in buffers.items()}
    wrapper = _Objective(model, objective)
    params = {n: saved[n].clone() for n in block_of}

    def loss(p):
        return torch.func.functional_call(wrapper, {"model." + k: v for k, v in p.items()}, (),
                                          strict=False)

    task = Task(params, loss, {b: list(ns) for b, ns in groups.items()},
                name=f"{type(model).__name__} ({name})")

    def step(theta, lr):
        with torch.no_grad():
            for n, p in named.items():
                p.copy_(theta[n] if n in theta else saved[n])
            for n, b in buffers.items():
                b.copy_(saved_buffers[n])
        for n, p in named.items():
            p.requires_grad_(flags[n])
            p.grad = None
        built = optimizers(model)
        for opt in _as_list(built):
            for g in opt.param_groups:
                bs = {block_of[ids[id(q)]] for q in g["params"] if ids.get(id(q)) in block_of}
                fs = {factors[b] for b in bs}
                if len(fs) > 1:
                    raise ValidationInputError(
                        f"a param group spans blocks {', '.join(sorted(bs))} with different "
                        "lr_factors")
                g["lr"] = lr * (fs.pop() if fs else 1.0)
        train_step(model, built)
        return {n: named[n].detach().clone() for n in block_of}

    return UserStep(task, step, declared_pattern(task, pattern), name)


class _Objective(torch.nn.Module):
    """``forward() = objective(model)``, so ``functional_call`` can substitute the model's
    parameters.
    """

    def __init__(self, model: torch.nn.Module, objective: Callable):
        super().__init__()
        self.model = model
        self._objective = objective

    def forward(self):
        return self._objective(self.model)
