"""The kernels of other CPUs, emulated on this one, and a cache for measurements made under them.

:data:`EMULATIONS` are the environment settings of ``make test-portable`` (the Makefile's
``PORTABLE_ENVS``), with this CPU's own kernels first: each makes ATen, MKL or OpenBLAS dispatch to
the kernels another x86-64 CPU would use (or OpenMP use two threads).  :func:`run_under` runs a
command in a subprocess under one of them; :func:`cached` keeps a JSON-able result on disk by a key,
so that a long measurement (``make portability``, ``make rounding``) resumes where it stopped and
measures afresh what changed (the key names everything the result depends on).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

__all__ = ["EMULATIONS", "NO_AVX2", "environment", "run_under", "cached", "lookup", "file_digest",
           "tolerance_digest"]

#: name -> environment: this CPU's own kernels, no AVX2 (ATen's scalar kernels, MKL's compatible
#: path), MKL's AVX2 and AVX paths with ATen's AVX2 kernels, OpenBLAS's Haswell kernels, and two
#: OpenMP threads.
EMULATIONS = {
    "this CPU": {},
    "MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default": {"MKL_CBWR": "COMPATIBLE",
                                                        "ATEN_CPU_CAPABILITY": "default"},
    "MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2": {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
    "MKL_CBWR=AVX ATEN_CPU_CAPABILITY=avx2": {"MKL_CBWR": "AVX", "ATEN_CPU_CAPABILITY": "avx2"},
    "OPENBLAS_CORETYPE=Haswell": {"OPENBLAS_CORETYPE": "Haswell"},
    "OMP_NUM_THREADS=2": {"OMP_NUM_THREADS": "2"},
}

#: The emulation whose kernels differ most from an AVX2 CPU's.
NO_AVX2 = "MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default"

#: Variables of :data:`EMULATIONS` cleared before one is applied, so that the caller's own settings
#: of them do not leak into another emulation (``OMP_NUM_THREADS`` is set to 1 unless the emulation
#: sets it).
_CLEARED = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE")


def environment(name: str) -> dict:
    """The full environment of a subprocess under emulation ``name`` (a key of :data:`EMULATIONS`).
    """
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["OMP_NUM_THREADS"] = "1"
    env.update(EMULATIONS[name])
    return env


def run_under(name: str, args: list, timeout: float = 7200) -> subprocess.CompletedProcess:
    """``python ARGS...`` (this interpreter) under emulation ``name``, in the current folder; output
    captured."""
    return subprocess.run([sys.executable, *args], env=environment(name), capture_output=True,
                          text=True, timeout=timeout)


def file_digest(*paths: str) -> str:
    """A short digest of the contents of ``paths`` (missing files count as empty)."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.encode())
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()[:16]


def tolerance_digest() -> str:
    """A short digest of the comparison tolerances in force (a verdict depends on them)."""
    from crosscurv.numeric.record_comparison import TOLERANCES

    return hashlib.sha256(json.dumps(TOLERANCES, sort_keys=True).encode()).hexdigest()[:16]


def _path(cache: str, key: dict) -> str:
    return os.path.join(cache, hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[
        :24] + ".json")


def lookup(cache: str | None, key: dict):
    """The value :func:`cached` keeps under ``key``, or ``None`` when there is none."""
    if cache is None or not os.path.isfile(_path(cache, key)):
        return None
    with open(_path(cache, key), encoding="utf-8") as fh:
        return json.load(fh)["value"]


def cached(cache: str | None, key: dict, compute):
    """``compute()`` (a JSON-able value), kept in folder ``cache`` under ``key`` and reused from
    there.

    ``cache`` ``None``: always computed. A value is written only once ``compute`` returned, so an
    interrupted measurement leaves nothing half-written.
    """
    if cache is None:
        return compute()
    path = _path(cache, key)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)["value"]
    value = compute()
    os.makedirs(cache, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump({"key": key, "value": value}, fh)
    os.replace(path + ".tmp", path)
    return value
