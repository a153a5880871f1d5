"""``momentum``: heavy ball (``torch.optim.SGD(momentum=beta)``, dampening 0, no Nesterov): buffer
``m' = beta m + g``, ``phi(g, m) = beta m + g``; ``J_phi = I``."""

from __future__ import annotations


def symbols(pairs, triples) -> tuple[list, list]:
    """The coefficient ``beta`` and the buffer vector ``m``."""
    return ["beta"], ["m"]


def attach(opt, x: dict, pairs, triples) -> None:
    opt.beta = x["beta"]
    opt.buffer = list(opt.model.vectors["m"])


def direction(opt, i: int, fresh: dict, buffer=None) -> dict:
    """``{a: g~_a + m_a beta}`` (``buffer``: the ``S`` trajectory's own buffer in the recursions).
    """
    buf = opt.buffer if buffer is None else buffer
    return {a: fresh[a] + buf[a] * opt.beta for a in opt.model.blocks[i]}


def jacobian(opt, a: int, b: int):
    m = opt.model
    return m.one if a == b else m.zero
