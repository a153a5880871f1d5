"""The paper's Figure 1 (motivation study) with the practical implementations of its appendix.

Three panels, each training a *sequential* and a *simultaneous* practical implementation side by
side from the same initialisation on the same minibatch schedule (paper, Introduction and appendix
"Experiments Details"):

* ``mlp`` (:mod:`.mlp`): 8-layer ReLU MLP on MNIST; JC back-propagation
  against the paper's "GS-like" in-place back-propagation (updated weights
  in the backward recursion, original forward states and residual), and
  exact GS (output to input) as a third curve;
* ``fl`` (:mod:`.fl`): federated CIFAR ResNet-18; FedSim (joint local
  updates) against FedAlt (personal epoch, then shared epoch);
* ``lora`` (:mod:`.lora`): T5 + LoRA; simultaneous factor updates against
  alternating ``B`` then ``A`` with a fresh forward pass.

:mod:`.runner` streams the per-step records and resumes; :mod:`.criterion`
evaluates the one-step cross-curvature criterion along the runs;
:mod:`.verdicts` runs ``validate-step`` on deterministic versions of each
practical step; :mod:`.figure` and :mod:`.report` write Figure 1 and
``reports/motivation.md``.
"""

PANELS = ("mlp", "fl", "lora")

__all__ = ["PANELS"]
