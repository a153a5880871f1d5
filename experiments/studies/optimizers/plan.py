"""The optimizer studies as data: which runs answer which question (:data:`STUDIES`) and where they
live.

:mod:`crosscurv.experiments.studies.optimizers.runner` performs the runs,
:mod:`crosscurv.experiments.studies.optimizers.report` reports them; both read this plan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["ITERS", "SEEDS", "RUNS_DIR", "StudyVariant", "OptimizerStudy", "SGD", "STUDIES",
           "run_dir"]

#: The default number of iterations (the default presets run 300-500; these studies need many runs).
ITERS = 40
SEEDS = (0, 1, 2)
RUNS_DIR = os.path.join("reports", "optimizers", "runs")


@dataclass(frozen=True)
class StudyVariant:
    """One ``crosscurv run`` configuration of a task (``label`` names its folder)."""

    label: str
    optimizer: str = "sgd"
    block_lr: str | None = None
    lr: float | None = None  # None: the preset's

    def flags(self) -> list[str]:
        out = []
        if self.optimizer != "sgd":
            out += ["--optimizer", self.optimizer]
        if self.block_lr:
            out += ["--block-lr", self.block_lr]
        if self.lr is not None:
            out += ["--lr", repr(self.lr)]
        return out


@dataclass(frozen=True)
class OptimizerStudy:
    """One optimizer study: a question about ``task`` answered by comparing its variants with the
    first (the baseline)."""

    name: str
    task: str
    title: str
    question: str
    variants: tuple = field(default_factory=tuple)

    @property
    def baseline(self) -> StudyVariant:
        return self.variants[0]


SGD = StudyVariant("sgd")
STUDIES = (
    OptimizerStudy("lora_lrplus", "lora", "LoRA+ step-size ratios on lora",
          "eta_B / eta_A in {1, 4, 16} (eta_A = the default preset's lr, --block-lr B=4 / B=16)",
                   (SGD, StudyVariant("block-lr-B4", block_lr="B=4"),
           StudyVariant("block-lr-B16", block_lr="B=16"))),
    OptimizerStudy("fl_momentum", "fl", "Heavy ball on fl",
          "torch.optim.SGD(momentum=0.9) on both runs, the default preset's lr (--optimizer "
          "momentum:0.9)",
                   (SGD, StudyVariant("momentum-0.9", optimizer="momentum:0.9"))),
    OptimizerStudy("lora_adam", "lora", "Adam on lora",
                   "torch.optim.Adam (0.9, 0.999, 1e-8) on both runs at lr 1e-3 (--optimizer adam "
          "--lr 0.001)",
                   (SGD, StudyVariant("adam-lr1e-3", optimizer="adam", lr=1e-3))),
)


def run_dir(root: str, task: str, variant: StudyVariant, seed: int) -> str:
    """``root/<task>/<variant label>/seed<s>``: where one run of a study lives."""
    return os.path.join(root, task, variant.label, f"seed{seed}")
