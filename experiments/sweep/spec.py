"""The grid of a sweep: which ``crosscurv run`` settings to combine.

A :class:`SweepSpec` holds one list per axis (tasks, presets, learning rates, seeds, patterns; an
axis left out holds one ``None``, the run's default) and the scalars every run shares (``iters``,
``dtype``), from flags (:func:`spec_from_args`) or a TOML file (:func:`spec_from_toml`; flags
replace the same axis)::

    task = ["mlp", "fl"]          # built-in names, module:factory or file.py:factory
    lr = [0.01, 0.02, 0.05]       # omitted: each preset's learning rate
    seed = "0-4"                  # a list of integers or an inclusive range "A-B"

Bad grids raise :class:`SweepError` (one line, exit 2).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from crosscurv.theory.errors import InputError, SweepError

__all__ = ["SweepError", "SweepSpec", "AXES", "SCALARS", "parse_seeds", "read_toml",
           "spec_from_toml", "spec_from_mapping", "axis_values"]

#: list-valued axes of the grid, in expansion order
AXES = ("task", "preset", "lr", "seed", "pattern")
#: settings shared by every run of a sweep
SCALARS = ("iters", "dtype")



@dataclass(frozen=True)
class SweepSpec:
    """A grid of ``crosscurv run`` settings.

    Attributes:
        task: task specs (built-in name, ``module:factory`` or ``file.py:factory``).
        preset: preset names, or ``(None,)`` for each run's default.
        lr: learning rates ``eta > 0``, or ``(None,)`` for the preset's.
        seed: integer seeds.
        pattern: delay-pattern specs (``crosscurv run --pattern`` syntax), or
            ``(None,)`` for the task's default.
        iters: ``K`` for every run, or ``None`` for the preset's.
        dtype: ``"float32"`` / ``"float64"`` for every run, or ``None``.
    """

    task: tuple = ()
    preset: tuple = (None,)
    lr: tuple = (None,)
    seed: tuple = (0,)
    pattern: tuple = (None,)
    iters: int | None = None
    dtype: str | None = None

    def __post_init__(self):
        validate(self)

    @property
    def size(self) -> int:
        """Number of grid points (runs)."""
        return math.prod(len(getattr(self, a)) for a in AXES)

    def to_dict(self) -> dict:
        """JSON-able form (``sweep.json``)."""
        out = {a: list(getattr(self, a)) for a in AXES}
        out.update({s: getattr(self, s) for s in SCALARS})
        return out



def _as_axis(name: str, value) -> tuple:
    if isinstance(value, (list, tuple)):
        vals = tuple(value)
    else:
        vals = (value,)
    if name == "seed":
        out = []
        for v in vals:
            out.extend(parse_seeds(v) if isinstance(v, str) else [v])
        vals = tuple(out)
    return vals


_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")


def parse_seeds(text: str) -> list[int]:
    """``"3"`` -> ``[3]``; ``"0-4"`` -> ``[0, 1, 2, 3, 4]`` (inclusive); :class:`SweepError`
    otherwise.
    """
    s = str(text).strip()
    m = _RANGE.match(s)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        if b < a:
            raise SweepError(f"seed range {s!r} is empty (use A-B with A <= B)")
        return list(range(a, b + 1))
    try:
        return [int(s)]
    except ValueError:
        raise SweepError(f"seed must be an integer or a range A-B, got {s!r}") from None


def _dups(values: Sequence) -> list:
    seen, dup = set(), []
    for v in values:
        if v in seen and v not in dup:
            dup.append(v)
        seen.add(v)
    return dup


def validate(spec: SweepSpec) -> None:
    """Check every axis; raise :class:`SweepError` naming the first problem."""
    for a in AXES:
        vals = getattr(spec, a)
        if not isinstance(vals, tuple) or not vals:
            raise SweepError(f"the grid needs at least one {a}" if a == "task"
                             else f"axis {a} is empty")
        dup = _dups(vals)
        if dup:
            raise SweepError(f"axis {a} repeats {dup[0]!r}")
    for t in spec.task:
        if not isinstance(t, str) or not t.strip():
            raise SweepError(f"task must be a non-empty string, got {t!r}")
        if ":" not in t:
            from crosscurv.experiments.tasks.names import TASK_NAMES as names

            if t not in names:
                raise SweepError(f"unknown task {t!r} (built-in: {', '.join(names)}; or "
                                 "module:factory)")
    for axis in ("preset", "lr", "seed", "pattern"):
        for value in getattr(spec, axis):
            if value is not None or axis == "seed":
                _check(axis, value)
    _check("iters", spec.iters)
    _check("dtype", spec.dtype)


def _check(setting: str, value) -> None:
    """The run's own check of one setting (:func:`crosscurv.experiments.runs.check_setting`), as a
    SweepError."""
    from crosscurv.experiments.runs import check_setting

    try:
        check_setting(setting, value)
    except InputError as exc:
        raise SweepError(str(exc)) from None


def spec_from_mapping(data: dict, where: str = "grid") -> SweepSpec:
    """A spec from a mapping with keys of :data:`AXES` and :data:`SCALARS` (TOML table)."""
    unknown = sorted(set(data) - set(AXES) - set(SCALARS))
    if unknown:
        raise SweepError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(AXES + SCALARS)})")
    kw: dict[str, Any] = {}
    for a in AXES:
        if a in data:
            v = data[a]
            if isinstance(v, dict):
                raise SweepError(f"{where}: {a} must be a value or a list, not a table")
            if a == "lr":
                v = [float(x) if isinstance(x, int) and not isinstance(x, bool) else x
                     for x in (v if isinstance(v, list) else [v])]
            kw[a] = _as_axis(a, v)
    for s in SCALARS:
        if s in data:
            kw[s] = data[s]
    return SweepSpec(**kw)


def read_toml(path: str) -> dict:
    """The raw table of a grid file (keys checked by :func:`spec_from_mapping`)."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise SweepError(f"grid file {path} does not exist") from None
    except IsADirectoryError:
        raise SweepError(f"grid file {path} is a directory") from None
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"grid file {path} is not valid TOML: {exc}") from None
    return data


def spec_from_toml(path: str) -> SweepSpec:
    """Read a grid from a TOML file (see the module docstring for the keys)."""
    return spec_from_mapping(read_toml(path), where=path)


def axis_values(name: str, texts: Iterable[str] | None):
    """Command-line strings of one axis as values (``None`` when the flag was not given)."""
    if texts is None:
        return None
    texts = list(texts)
    if name == "lr":
        out = []
        for t in texts:
            try:
                out.append(float(t))
            except ValueError:
                raise SweepError(f"learning rate must be a number, got {t!r}") from None
        return tuple(out)
    if name == "seed":
        return _as_axis("seed", texts)
    return tuple(texts)
