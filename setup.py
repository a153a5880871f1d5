"""The package layout: the three layers sit at the repository's top level and install under one
import namespace, ``crosscurv``.

    crosscurv/    -> crosscurv              (the user-facing API, re-exported lazily;
    crosscurv.testing) theory/       -> crosscurv.theory       (SymPy; never imports torch) numeric/
    -> crosscurv.numeric      (torch autograd) experiments/  -> crosscurv.experiments  (tasks,
    studies, reports, command line)

Everything else about the project is in pyproject.toml.
"""

import os

from setuptools import find_packages, setup

LAYERS = ("theory", "numeric", "experiments")

# a build writes its egg-info into build/, not the repository root: a stale one there (from an
# older build) shadows the installed entry points, the pytest11 plugin among them, for
# importlib.metadata.entry_points() run from the root (pytest -p crosscurv without autoload)
os.makedirs("build", exist_ok=True)

setup(
    options={"egg_info": {"egg_base": "build"}},
    packages=["crosscurv", "crosscurv.testing"] + [f"crosscurv.{p}" for p in find_packages(include=[
    f"{layer}*" for layer in LAYERS])],
    package_dir={"crosscurv": "crosscurv", **{f"crosscurv.{layer}": layer for layer in LAYERS}},
)
