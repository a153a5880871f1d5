"""``adam``: ``torch.optim.Adam`` (bias-corrected) as plain SymPy expressions.

Adam's direction is not polynomial in the gradient, so it is not a ring element of the
:class:`~crosscurv.theory.block_model.BlockModel`; :func:`adam_direction` and :func:`adam_jacobian`
give one coordinate's ``phi`` and ``d phi / d gamma`` (:mod:`.one_step` checks the one-step gap with
them).
"""

from __future__ import annotations

import sympy

__all__ = ["adam_direction", "adam_jacobian"]

def adam_direction(gamma, m, v, beta1, beta2, eps, c1, c2):
    """``torch.optim.Adam``'s direction for one coordinate with gradient ``gamma``: ``m' = beta1 m +
    (1 - beta1) gamma``, ``v' = beta2 v + (1 - beta2) gamma^2``, ``phi = (m' / c1) / (sqrt(v' / c2)
    + eps)``, ``c1 = 1 - beta1^t``, ``c2 = 1 - beta2^t``.
    """
    m_new = beta1 * m + (1 - beta1) * gamma
    v_new = beta2 * v + (1 - beta2) * gamma**2
    return (m_new / c1) / (sympy.sqrt(v_new / c2) + eps)


def adam_jacobian(gamma, m, v, beta1, beta2, eps, c1, c2):
    """``d phi / d gamma`` of :func:`adam_direction` (diagonal): with ``r = sqrt(v'/c2)``, ``D = r +
    eps``, ``J = (1 - beta1) / (c1 D) - (m'/c1) (1 - beta2) gamma / (c2 r D^2)``.
    """
    m_new = beta1 * m + (1 - beta1) * gamma
    v_new = beta2 * v + (1 - beta2) * gamma**2
    r = sympy.sqrt(v_new / c2)
    D = r + eps
    return (1 - beta1) / (c1 * D) - (m_new / c1) * (1 - beta2) * gamma / (c2 * r * D**2)
