"""The package layout: the three layers sit at the repository's top level and install
under one import namespace, ``crosscurv``.

    crosscurv/    -> crosscurv              (the user-facing API, re-exported lazily; crosscurv.testing)
    theory/       -> crosscurv.theory       (SymPy; never imports torch)
    numeric/      -> crosscurv.numeric      (torch autograd)
    experiments/  -> crosscurv.experiments  (tasks, studies, reports, command line)

Everything else about the project is in pyproject.toml.
"""

from setuptools import find_packages, setup

LAYERS = ("theory", "numeric", "experiments")

setup(
    packages=["crosscurv", "crosscurv.testing"] + [f"crosscurv.{p}" for p in find_packages(include=[f"{layer}*" for layer in LAYERS])],
    package_dir={"crosscurv": "crosscurv", **{f"crosscurv.{layer}": layer for layer in LAYERS}},
)
