"""The optimizer studies: LoRA+ step-size ratios, heavy ball and Adam with the optimizer-aware
estimates.

* :mod:`.plan` -- which runs each study makes and where they live;
* :mod:`.runner` -- runs them (``make optimizer-studies``) and writes ``reports/optimizers.md``;
* :mod:`.report` -- the report itself;
* :mod:`.orders` -- the observed orders of the optimizer generalizations.
"""
