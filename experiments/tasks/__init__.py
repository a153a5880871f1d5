"""The paper's three controlled studies as built-in tasks, with presets (paper, Sec. 5, App. E).

``build_task(name, preset)`` returns a :class:`crosscurv.numeric.Task` and the preset's ``settings``
(learning rate, ``K``, pattern, dtype, sizes). Tasks, blocks in GS order: ``mlp`` (8-layer ReLU MLP
on MNIST, ``layer1 .. layer8``), ``fl`` (federated CIFAR ResNet-18, 3 clients: ``personal`` then
``shared``), ``lora`` (T5 with LoRA on q/v, sentiment: ``B`` then ``A``). Presets: ``smoke``
(seconds, tests), ``default`` (CPU, ``K = 500``, below the edge of stability), ``edge`` (past it),
``paper`` (the paper's sizes, for a GPU). Data and parameters are the same bits on every CPU for a
``seed`` (:mod:`crosscurv.numeric.portable_random`); the seed selects the data subset too.
"""

from __future__ import annotations

from crosscurv.lazy import lazy_exports

__all__ = ["TASKS", "PRESETS", "TaskSpec", "UnknownTaskError", "build_task", "preset_settings"]


# the names above on first use: the tasks from crosscurv.experiments.tasks.builtin (which imports
# torch), the preset names and their error from .names (which does not), so that checking a --preset
# or a submodule that needs no torch (crosscurv.experiments.tasks.errors) does not import torch
# through this package
__getattr__, __dir__ = lazy_exports(__name__, {**dict.fromkeys(__all__, f"{__name__}.builtin"),
                                               **dict.fromkeys(("PRESETS", "UnknownTaskError"),
                                                               f"{__name__}.names")})
