"""What every panel provides to the runner (:mod:`.runner`), and the columns it records.

A panel trains its sequential and simultaneous practical implementations in lockstep (same
initialisation, same minibatch / client schedule) and is advanced one step at a time; ``step`` ``k``
is a minibatch step (``mlp``, ``lora``) or a communication round (``fl``). Everything random is
drawn from generators seeded by ``(seed, k, ...)``, so the state after step ``k`` is a function of
the state after step ``k - 1`` alone: a resumed run is bit for bit an uninterrupted one (on the CPU,
same thread count).
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["RECORD_FIELDS", "PROBE_FIELDS", "Panel", "seeded", "derive_seed"]

#: ``records.csv``: one row per step ``k`` (``nan`` = not measured at this step).
#:   ``loss_*``: mean training minibatch loss of the step (at the parameters before
#:   the update; for ``fl``: mean over the round's local steps); ``seq`` = the
#:   sequential practical implementation, ``sim`` = the simultaneous one, ``gs``
#:   = exact GS (``mlp`` only); ``eval_*``: training objective on the panel's
#:   evaluation set after step ``k`` (every ``eval_every`` steps); ``diff`` and
#:   ``eval_diff`` are sequential minus simultaneous.
RECORD_FIELDS = ("k", "epoch", "loss_seq", "loss_sim", "loss_gs", "diff", "eval_seq", "eval_sim",
                 "eval_gs", "eval_diff")

#: ``probes.csv``: the one-step criterion at the simultaneous run's state before step ``k``
#:   (:mod:`.criterion`): ``C_S = g^T M_S g``, ``C_opt = g^T J M_S d``, their
#:   estimates ``lr^2 C``, and the measured next-step differences
#:   ``L(seq step) - L(sim step)`` of the practical steps (``meas_seq``), of exact GS
#:   with the practical optimiser (``meas_gs``, ``mlp`` only) and of the exact
#:   plain-gradient GS and JC steps (``meas_plain``), all on the same minibatch; ``meas_plain_8``:
#:   the latter at ``lr / 8`` (is the criterion's sign right once the step is small?).
PROBE_FIELDS = ("k", "lr", "C_S", "C_opt", "est_plain", "est", "meas_seq", "meas_gs", "meas_plain",
                "meas_plain_8")


def derive_seed(*parts: int) -> int:
    """A deterministic 63-bit seed from integers (splitmix-style mixing)."""
    x = 0x9E3779B97F4A7C15
    for p in parts:
        x = (x ^ (int(p) + 0x9E3779B97F4A7C15 + (x << 6) + (x >> 2))) & 0xFFFFFFFFFFFFFFFF
        x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x & 0x7FFFFFFFFFFFFFFF


@contextlib.contextmanager
def seeded(seed: int):
    """Fork the CPU RNG and seed it; the global RNG is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class Panel:
    """Interface (see the module docstring).

    Attributes set by subclasses: ``name``, ``seq_label``, ``sim_label``, ``n_steps``,
    ``eval_every``, ``probe_every`` (0: no probes), ``step_unit`` ("step" or "round"), ``info``
    (JSON-able: data, model, optimiser, sizes). The sequential scheme of the criterion is the probe
    task's ``default_pattern``.
    """

    name = "panel"
    seq_label = "sequential"
    sim_label = "simultaneous"
    step_unit = "step"

    def step(self, k: int) -> dict:  # pragma: no cover - interface
        """Advance every run by step ``k`` (1-based); the ``records.csv`` row."""
        raise NotImplementedError

    def probe(self, k: int) -> dict:  # pragma: no cover - interface
        """The criterion at the simultaneous run's state before step ``k``; the ``probes.csv`` row.
        """
        raise NotImplementedError

    def state_dict(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:  # pragma: no cover - interface
        raise NotImplementedError
