"""The three studies' models (plain torch.nn, transformers + peft for T5/LoRA)."""

from .mlp import MLP, PAPER_WIDTHS, mlp_blocks
from .resnet import FederatedResNet18, PersonalNet, SharedNet

__all__ = ["MLP", "PAPER_WIDTHS", "mlp_blocks", "FederatedResNet18", "PersonalNet", "SharedNet"]
