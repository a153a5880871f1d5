"""The paper's three controlled studies as built-in tasks, with presets (paper, Sec. 5, App. E).

``build_task(name, preset)`` returns a :class:`crosscurv.numeric.Task` plus the
``settings`` of the preset (learning rate, iterations ``K``, pattern spec,
dtype and every size), which run summaries record.

Tasks (block order = the order GS updates them under the default pattern ``gs``):

* ``mlp``: 8-layer ReLU MLP on fixed MNIST examples; one block per affine
  layer ``layer1 .. layer8``, GS from input to output.
* ``fl``: federated CIFAR ResNet-18, 3 fully participating clients with their
  own personal parameters (stem, stages 1-2) and one shared copy of the rest
  (stages 3-4, classifier); objective = uniform mean of the client
  objectives; blocks ``personal`` (all clients') then ``shared``.
* ``lora``: T5 with LoRA on the q/v projections; text-to-text sentiment;
  blocks ``B`` (all ``lora_B``) then ``A`` (all ``lora_A``).

Presets:

* ``smoke``: seconds per task on a laptop CPU (tiny widths, few examples, K=5);
  the test suite builds these.
* ``default``: the CPU main job (``make report``): real bundled data, sizes
  reduced where needed, ``K = 500``, and a learning rate that keeps each task below the
  edge of stability (the rule next to the presets below).
* ``edge``: the ``default`` sizes at the learning rates that drive FL and LoRA past the edge of
  stability (``eta * lambda_max > 2``): the edge-of-stability study.
* ``paper``: the paper's sizes and ``K = 500``, meant for a GPU.

All data and parameters are created on ``device`` with ``dtype`` and are
deterministic for ``seed`` (initialisation happens on the CPU under a forked,
seeded RNG, so the global RNG is untouched and CPU/GPU runs start from the
same point up to the dtype cast).  They are the same bits on every CPU:
normals are drawn in float64 and rounded (:mod:`crosscurv.numeric.portable_random`, named
in ``info["init"]``), uniforms (the ResNet's default initialisation) and data
subsets (NumPy permutations) are serial; the ``lora`` task also records the
digest of its frozen T5 weights (``info["frozen_sha256"]``).  The seed also selects the data subset:
``seed = 0`` keeps the evenly spaced class-balanced selection (the bundled
CIFAR-10 images in file order), another seed draws a seeded class-balanced
subset (CIFAR-10: a seeded order, so the client shards change), so a study
over seeds varies initialisation and data together.
"""

from __future__ import annotations

from crosscurv.lazy import lazy_exports

__all__ = ["TASKS", "PRESETS", "TaskSpec", "UnknownTaskError", "build_task", "preset_settings"]


# the names above on first use: the tasks from crosscurv.experiments.tasks.builtin (which imports torch), the
# preset names and their error from .names (which does not), so that checking a --preset or a submodule that
# needs no torch (crosscurv.experiments.tasks.errors) does not import torch through this package
__getattr__, __dir__ = lazy_exports(__name__, {**dict.fromkeys(__all__, f"{__name__}.builtin"),
                                               **dict.fromkeys(("PRESETS", "UnknownTaskError"), f"{__name__}.names")})
