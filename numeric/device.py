"""Device and dtype selection: one code path for CUDA and CPU.

Every other function in :mod:`numeric` follows the device and dtype of the parameters it is given.
"""

from __future__ import annotations

import torch

from crosscurv.theory.errors import DeviceError

__all__ = ["DeviceError", "resolve_device", "resolve_dtype", "DTYPES"]


#: Accepted ``--dtype`` values.
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_device(spec="auto") -> torch.device:
    """A ``--device`` value as a :class:`torch.device`: ``"auto"``/``None`` (CUDA when available,
    else CPU), ``"cpu"``, ``"cuda[:N]"`` or a device. Raises :class:`DeviceError` (one line).
    """
    if spec is None:
        spec = "auto"
    if isinstance(spec, torch.device):
        spec = str(spec)
    if not isinstance(spec, str):
        raise DeviceError(f"device must be a string (auto, cpu, cuda, cuda:N), got {spec!r}")
    s = spec.strip().lower()
    if s == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if s == "cpu":
        return torch.device("cpu")
    kind, sep, index = s.partition(":")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"device {spec!r} requested but CUDA is not available here (use "
                              "auto or cpu)")
        if not sep:
            return torch.device("cuda")
        if not index.isdigit():
            raise DeviceError(f"bad CUDA device {spec!r} (use cuda or cuda:N)")
        n = torch.cuda.device_count()
        if int(index) >= n:
            raise DeviceError(f"device {spec!r} does not exist: {n} CUDA device(s) visible")
        return torch.device("cuda", int(index))
    raise DeviceError(f"unknown device {spec!r} (use auto, cpu, cuda or cuda:N)")


def resolve_dtype(spec) -> torch.dtype:
    """A ``--dtype`` value (``"float32"``, ``"float64"`` or such a torch dtype) as a torch dtype;
    :class:`DeviceError` otherwise.
    """
    if isinstance(spec, torch.dtype):
        if spec in DTYPES.values():
            return spec
        raise DeviceError(f"unsupported dtype {spec} (use float32 or float64)")
    if isinstance(spec, str) and spec.strip().lower() in DTYPES:
        return DTYPES[spec.strip().lower()]
    raise DeviceError(f"unknown dtype {spec!r} (use float32 or float64)")
