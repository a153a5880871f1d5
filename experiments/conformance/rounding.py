"""Measured rounding of each record column: what the comparison tolerances rest on.

    python -m crosscurv.experiments.conformance.rounding [--tasks mlp,fl,lora] [--presets
    smoke:10,default:3] [--no-golden] [--json] python -m crosscurv.experiments.conformance.rounding
    --load saved.json ...      # the table of saved --json outputs

A record column of a run (``crosscurv run``) is a floating-point result; two correct
implementations, or one implementation on two machines, agree only up to its rounding. This script
measures that rounding *per column* by running the same protocol
(:func:`crosscurv.numeric.protocol.run_protocol`, CPU, seed 0, reference: 1 thread) several ways
that are all correct and differ only in the order or precision of their floating-point operations,
and reporting how far their records part over the first ``K`` iterations:

* ``threads``: 2 intra-op threads instead of 1 (the order of the reductions);
* ``engine``: the other Hessian-vector-product engine (``--hvp forward`` instead of the retained
  graph, or the other way round): the same products in another order of operations;
* ``float64`` (float32 runs only): the run in float64, i.e. the float32 run's own error against a
  nearly exact one;
* ``numpy`` (golden quadratic only): ``examples/numpy_estimator.py``, an independent NumPy
  implementation (its gap is the float64 subtraction of the losses);

and, without a further run, the finding that is *not* rounding:

* ``subtraction``: ``gap`` computed as ``loss_s - loss_jc`` from the losses of the reference and of
  each variant, in their dtype (the definition's form, which the records of the first versions held;
  ``crosscurv run`` integrates the gradient along the segment instead), against the reference's
  ``gap``.  On smooth problems it differs by the losses' rounding; where the gradient has kinks
  along the segment (ReLU), by the quadrature error of the recorded gap, which its ``gap_err`` does
  not always bound.  It is shown, and left out of :func:`measured_rounding`.

Runs: the built-in tasks at each ``PRESET:K`` of ``--presets`` (float32, their default, and float64)
and the four golden cases of :mod:`crosscurv.experiments.conformance.golden` (float64, their own
``lr`` and ``K``, patterns ``gs`` and ``partial``).

A recorded ``gap`` is only known to within its error bound ``gap_err``, so the ``gap`` differences
are measured beyond the ``gap_err`` of both runs (``max(0, d_k - gap_err_r - gap_err_v)``;
``gap_err_v = 0`` for a subtraction), as :func:`crosscurv.numeric.record_comparison.compare_records`
allows them.

For a reference run ``r`` and a variant ``v`` of column ``c`` over ``k = 1..K`` (``d_k = |v_k -
r_k|``, ``scale_c`` the reference's largest ``|loss|``, for ``sharpness`` its largest
``|sharpness|``):

* ``rel`` = ``max d_k / |r_k|`` over the ``k`` where ``|r_k|`` is at least a tenth of the column's
  largest ``|r|``: the relative rounding of the values that are not near zero;
* ``beyond`` = ``max_k max(0, d_k - rel |r_k|) / scale_c``: what that relative part leaves over, in
  units of the loss (near a zero crossing of a signed column the difference is not relative to the
  value);
* ``abs`` = ``max_k d_k / scale_c`` (JSON only).

Every measured difference is then ``d_k <= rel |r_k| + beyond scale_c``; the largest ``rel`` and
``beyond`` over all runs and rounding variants of a dtype (:func:`measured_rounding`) are
:data:`crosscurv.numeric.record_comparison.MEASURED_ROUNDING`, and a safety factor times them (at
least eps) the tolerances (:data:`crosscurv.numeric.record_comparison.TOLERANCES`; the table shows
both). Runs that are bit for bit equal (two threads on a problem too small to split a reduction)
contribute zeros.  ``k`` is an integer and compared exactly. Prints Markdown (``--json``: every
comparison).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass

# as the command line does: idle OpenMP threads must not spin
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

from crosscurv.experiments.reports.numbers import number  # noqa: E402
from crosscurv.experiments.tasks import PRESETS as TASK_PRESETS  # noqa: E402
from crosscurv.theory.errors import InputError  # noqa: E402

__all__ = ["COLUMNS", "column_spread", "measure", "measure_emulated", "emulation_table",
           "RoundingOptions", "write_rounding"]

#: The value columns measured (``k`` is exact by construction).
COLUMNS = ("loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only", "bound_bk",
           "sharpness", "gap_err")
_LOSSES = ("loss_jc", "loss_s")


def _scale(ref: dict, column: str) -> float:
    src = ("sharpness",) if column == "sharpness" else _LOSSES
    s = max([abs(v) for c in src for v in ref[c] if math.isfinite(v)] + [0.0])
    return s if s > 0 else 1.0


def column_spread(ref: dict, var: dict, columns=COLUMNS) -> dict:
    """``{column: {"rel", "beyond", "abs"}}`` of a variant ``var`` against ``ref`` (module
    docstring).

    ``ref``, ``var``: ``{column: [float]}`` over the same ``k = 1..K``. A value that is finite in
    one and not the other gives ``inf``.
    """
    out = {}
    for c in columns:
        s = _scale(ref, c)
        pairs = list(zip(ref[c], var[c]))
        if any(math.isfinite(r) != math.isfinite(v) or (not math.isfinite(r) and not math.isnan(r)
                                                        and r != v)
               for r, v in pairs):
            out[c] = {"rel": math.inf, "beyond": math.inf, "abs": math.inf}
            continue
        # each gap is only known to within its recorded error bound (gap_err, when there is one)
        if c == "gap":
            slack = [sum(e for e in (er, ev) if math.isfinite(e)) for er, ev in zip(ref["gap_err"],
                                                                                    var["gap_err"])]
            pairs = [(r, r + math.copysign(max(0.0, abs(v - r) - e), v - r)) for (r, v), e in zip(
                pairs, slack)]
        pairs = [(r, v) for r, v in pairs if math.isfinite(r)]
        top = max([abs(r) for r, _ in pairs] + [0.0])
        rel = max([abs(v - r) / abs(r) for r, v in pairs if r != 0 and abs(r) >= 0.1 * top] + [0.0])
        beyond = max([max(0.0, abs(v - r) - rel * abs(r)) / s for r, v in pairs] + [0.0])
        out[c] = {"rel": rel, "beyond": beyond, "abs": max([abs(v - r) / s for r, v in pairs] + [
            0.0])}
    return out


def _run(build, dtype, threads: int, hvp: str) -> tuple[dict, str]:
    """Records ``{column: [float]}`` of one run and the HVP engine used."""
    from crosscurv.numeric.protocol import run_protocol
    from crosscurv.numeric.records import records_columns

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        task, pattern, lr, iters, *extra = build(dtype)
        res = run_protocol(task, pattern, lr, iters, out_dir=None, seed=0, hvp_method=hvp,
                           threads=threads, **(extra[0] if extra else {}))
    finally:
        torch.set_num_threads(old)
    if res.status != "complete":
        raise RuntimeError(f"{task.name}: {res.message}")
    return records_columns(res.records), res.summary["hvp"]["used"]


def _subtracted(records: dict, dtype) -> dict:
    """``records`` with ``gap`` replaced by ``loss_s - loss_jc`` computed in ``dtype`` (the recorded
    losses are values of that dtype) and no error bound (``gap_err`` 0: a subtraction has no
    quadrature error)."""
    gap = [float(torch.tensor(a, dtype=dtype) - torch.tensor(b, dtype=dtype))
           for a, b in zip(records["loss_s"], records["loss_jc"])]
    return dict(records, gap=gap, gap_err=[0.0] * len(gap))


def _builtin(name: str, preset: str, iters: int | None):
    from crosscurv.experiments.tasks import build_task

    def build(dtype):
        task, s = build_task(name, preset, device="cpu", dtype=dtype, seed=0)
        return task, s["pattern"], s["lr"], iters or s["iters"]

    return build


def _golden(name: str, label: str):
    from crosscurv.experiments.conformance.golden import build_case, case_task

    def build(dtype):
        case = build_case(name)
        task = case_task(case)
        if dtype != torch.float64:
            task = task.to(dtype=dtype)
        return task, case.patterns[label], case.lr, case.iters, {"optimizer": case.optimizer,
                                                                 "block_lr": case.block_lr}

    return build


def _numpy_records(name: str, label: str, ref: dict) -> dict | None:
    """The records of ``examples/numpy_estimator.py`` (an independent NumPy implementation of the
    quadratic case, no torch) for golden ``name``/``label``; ``None`` for other cases or without the
    example.

    It writes the eight columns; ``sharpness`` is taken from ``ref`` (not measured) and ``gap_err``
    is 0 (its gap is a float64 subtraction)."""
    import importlib.util
    import tempfile

    from crosscurv.experiments.conformance.golden import write_golden

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "examples", "numpy_estimator.py")
    if name != "quadratic" or not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("crosscurv_numpy_estimator", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with tempfile.TemporaryDirectory() as tmp:
        write_golden(tmp, [name])
        rows = mod.run(os.path.join(tmp, name), label)
    out = {c: [float(r[c]) for r in rows] for c in rows[0]}
    out.update(sharpness=list(ref["sharpness"]), gap_err=[0.0] * len(rows))
    return out


#: ``--presets`` default: the smoke presets over 10 iterations and the default presets over 3.
PRESETS = (("smoke", 10), ("default", 3))
_ZERO = {"rel": 0.0, "beyond": 0.0, "abs": 0.0}


def measure(tasks=("mlp", "fl", "lora"), presets=PRESETS, golden=True, log=None,
            dtypes=("float32", "float64")) -> list[dict]:
    """Every comparison of the module docstring: a list of ``{"run", "dtype", "variant", "K",
    "spread"}``.

    Args:
        tasks: built-in tasks, each run at every ``(preset, K)`` of ``presets``
            (``K`` ``None``: the preset's) in each of ``dtypes``.
        golden: also the golden cases (float64; ``gs`` and ``partial``), and
            ``examples/numpy_estimator.py`` on the quadratic one (variant ``numpy``); ``True`` for
            every case, or a sequence of case names.  Only when ``dtypes`` has float64.
        log: receives a line per run. dtypes: the dtypes measured (``"float32"``, ``"float64"``).
    """
    wanted = tuple(d for d in ("float32", "float64") if d in dtypes)
    runs = [(f"{t} {p}", _builtin(t, p, k), wanted, None) for p, k in presets for t in tasks]
    if golden and "float64" in wanted:
        from crosscurv.experiments.conformance.golden import CASES

        names = list(CASES) if golden is True else list(golden)
        runs += [(f"golden {n} {lab}", _golden(n, lab), ("float64",), (n, lab))
                 for n in names for lab in ("gs", "partial")]
    out = []
    for label, build, dtypes, gold in runs:
        for dt_name in dtypes:
            dt = getattr(torch, dt_name)
            t0 = time.perf_counter()
            ref, used = _run(build, dt, 1, "auto")
            other = "forward" if used == "reverse" else "reverse"
            variants = {"threads": (dt, 2, "auto"), "engine": (dt, 1, other)}
            if dt_name == "float32":
                variants["float64"] = (torch.float64, 1, "auto")
            subs = [column_spread(ref, _subtracted(ref, dt), ("gap",))]
            row = {"run": label, "dtype": dt_name, "K": len(ref["k"])}
            for vname, (vdt, th, hvp) in variants.items():
                var, _ = _run(build, vdt, th, hvp)
                out.append({**row, "variant": vname, "engine": f"{used} vs {other}" if vname
                            == "engine" else used,
                            "spread": column_spread(ref, var)})
                subs.append(column_spread(ref, _subtracted(var, vdt), ("gap",)))
            if gold is not None:
                mine = _numpy_records(*gold, ref)
                if mine is not None:
                    spread = column_spread(ref, mine, COLUMNS[:-2])
                    spread.update(sharpness=dict(_ZERO), gap_err=dict(_ZERO))
                    out.append({**row, "variant": "numpy", "engine": "examples/numpy_estimator.py",
                                "spread": spread})
            spread = {c: dict(_ZERO) for c in COLUMNS}
            spread["gap"] = {key: max(x["gap"][key] for x in subs) for key in ("rel", "beyond",
                                                                               "abs")}
            out.append({**row, "variant": "subtraction", "engine": used, "spread": spread})
            if log:
                log(f"{label} {dt_name}: {time.perf_counter() - t0:.1f} s")
    return out


#: Variants whose differences are rounding and set the tolerances (``subtraction`` is reported, not
#: used: module docstring and :data:`crosscurv.numeric.record_comparison.MEASURED_ROUNDING`).
ROUNDING_VARIANTS = ("threads", "engine", "float64", "numpy")


#: Variants that do not measure a column's rounding: ``gap_err`` is ``|trapezoid - Simpson| + 4 eps
#: |...|`` with ``eps`` of the run's own dtype (:mod:`crosscurv.numeric.gap`), so a float64 run's
#: bound is another quantity, about 2^-29 times the float32 one's rounding part, not that bound
#: computed more exactly.
NOT_ROUNDING = {"gap_err": ("float64",)}


def _rounding_rows(results: list[dict], dt: str, column: str) -> list[dict]:
    return [r["spread"][column] for r in results if r["dtype"] == dt and r[
        "variant"] in ROUNDING_VARIANTS
            and r["variant"] not in NOT_ROUNDING.get(column, ())]


def measured_rounding(results: list[dict]) -> dict:
    """``{dtype: {column: (rel, beyond)}}``: the largest over the :data:`ROUNDING_VARIANTS`
    comparisons (less :data:`NOT_ROUNDING`)."""
    out = {}
    for dt in ("float32", "float64"):
        if any(r["dtype"] == dt and r["variant"] in ROUNDING_VARIANTS for r in results):
            out[dt] = {}
            for c in COLUMNS:
                rows = _rounding_rows(results, dt, c)
                out[dt][c] = (max([x["rel"] for x in rows] + [0.0]), max([x["beyond"]
                                                                          for x in rows] + [0.0]))
    return out


def measured_abs(results: list[dict]) -> dict:
    """``{dtype: {column: abs}}``: the largest ``abs`` (``max_k d_k / scale``) over the comparisons
    of
    :func:`measured_rounding`: every measured difference is at most ``abs scale``."""
    out = {}
    for dt in ("float32", "float64"):
        if any(r["dtype"] == dt and r["variant"] in ROUNDING_VARIANTS for r in results):
            out[dt] = {c: max([x.get("abs", math.inf) for x in _rounding_rows(results, dt, c)] + [
                0.0])
                       for c in COLUMNS}
    return out


def covers(stated: tuple, measured: tuple, measured_abs_: float) -> bool:
    """Whether a stated rounding ``(rel, beyond)``
    (:func:`crosscurv.numeric.record_comparison.stated_rounding`) bounds every measured difference
    ``d_k``: each part at least the measured one, or the stated ``beyond`` alone at least the
    largest ``d_k / scale`` (a column whose differences are below the stated absolute part, whatever
    their ratio to a value near zero)."""
    return (stated[0] >= measured[0] and stated[1] >= measured[1]) or stated[1] >= measured_abs_


def _fmt(x: float) -> str:
    return "0" if x == 0 else number(x, ".1e")


def table(results: list[dict]) -> str:
    """Markdown per dtype: per column the largest ``rel`` / ``beyond`` of each variant, the measured
    rounding (:func:`measured_rounding`), the tolerance it gives and the one in force
    (:data:`crosscurv.numeric.record_comparison.TOLERANCES`)."""
    from crosscurv.numeric.record_comparison import TOLERANCES, tolerance_from_rounding

    meas = measured_rounding(results)
    lines = []
    for dt in ("float32", "float64"):
        rs = [r for r in results if r["dtype"] == dt]
        if not rs:
            continue
        variants = list(dict.fromkeys(r["variant"] for r in rs))
        runs = list(dict.fromkeys(f"{r['run']} (K={r['K']})" for r in rs))
        lines.append(f"**{dt}** runs: {', '.join(runs)}. Each cell: largest `rel` / `beyond`.")
        lines.append("")
        lines.append("| column | " + " | ".join(variants)
                     + " | measured (" + ", ".join(v for v in variants if v in ROUNDING_VARIANTS)
                     + ") | tolerance from it: rtol / atol_rel | in force |")
        lines.append("|---" * (len(variants) + 4) + "|")
        for c in COLUMNS:
            cells = []
            for v in variants:
                sub = [r["spread"][c] for r in rs if r["variant"] == v]
                cells.append(f"{_fmt(max(x['rel'] for x in sub))} / "
                             f"{_fmt(max(x['beyond'] for x in sub))}")
            m = meas[dt][c]
            t = tolerance_from_rounding(dt, m)
            cur = TOLERANCES[dt][c]
            cells += [f"{_fmt(m[0])} / {_fmt(m[1])}", f"{_fmt(t[0])} / {_fmt(t[1])}",
                      f"{_fmt(cur[0])} / {_fmt(cur[1])}"]
            lines.append(f"| `{c}` | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _source_digest() -> str:
    """A digest of the sources whose numbers a measurement measures (the protocol's layer and the
    tasks), so cached measurements of other code are measured afresh."""
    from .emulation import file_digest

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = sorted(os.path.join(d, f) for layer in ("numeric", "experiments/tasks")
                   for d, _, fs in os.walk(os.path.join(root, layer)) for f in fs if f.endswith(
                   ".py"))
    return file_digest(*paths)


def measure_emulated(child_args: list, names, cache: str | None, log=None,
                     cached_only: bool = False) -> dict:
    """``{emulation: comparisons}``: :func:`measure` with ``child_args`` (this command's measuring
    options) in a subprocess under each emulation ``names`` of :data:`.emulation.EMULATIONS`, each
    kept in ``cache`` (``cached_only``: measure nothing, return the emulations found in ``cache``).
    """
    from .emulation import cached, lookup, run_under

    out, src = {}, _source_digest()
    for name in names:
        key = {"what": "rounding", "emulation": name, "args": list(child_args), "source": src,
               "torch": torch.__version__}
        if cached_only:
            got = lookup(cache, key)
            if got is not None:
                out[name] = got
            continue

        def compute(name=name):
            t0 = time.perf_counter()
            proc = run_under(name, ["-m", "crosscurv.experiments.conformance.rounding", *child_args,
                                    "--json"])
            if proc.returncode != 0:
                tail = proc.stderr.strip().splitlines()
                raise RuntimeError(f"rounding under {name} exited {proc.returncode}: "
                                   f"{tail[-1] if tail else ''}")
            if log:
                log(f"{name}: {time.perf_counter() - t0:.0f} s")
            return json.loads(proc.stdout)

        out[name] = cached(cache, key, compute)
    return out


def emulation_table(by_emulation: dict) -> str:
    """Markdown per dtype: per column the measured rounding (:func:`measured_rounding`) under each
    emulation, their largest, and :data:`crosscurv.numeric.record_comparison.MEASURED_ROUNDING` with
    whether it covers it."""
    from crosscurv.numeric.record_comparison import stated_rounding

    per = {name: measured_rounding(res) for name, res in by_emulation.items()}
    per_abs = {name: measured_abs(res) for name, res in by_emulation.items()}
    lines = []
    for dt in ("float32", "float64"):
        names = [n for n in per if dt in per[n]]
        if not names:
            continue
        lines += [f"**{dt}**: measured `rel` / `beyond` under each emulation, their largest, and "
                  f"the stated `MEASURED_ROUNDING` with the dtype's eps as its floor (covers: "
                  f"every stated part at least the largest measured one, or every measured "
                  f"difference within the stated absolute part: "
                  f"`crosscurv.experiments.conformance.rounding.covers`).", "",
                  "| column | " + " | ".join(names) + " | largest | stated | covers |",
                  "|---" * (len(names) + 4) + "|"]
        for c in COLUMNS:
            vals = [per[n][dt][c] for n in names]
            top = (max(v[0] for v in vals), max(v[1] for v in vals))
            st = stated_rounding(dt, c)
            ok = covers(st, top, max(per_abs[n][dt][c] for n in names))
            lines.append(f"| `{c}` | " + " | ".join(f"{_fmt(v[0])} / {_fmt(v[1])}" for v in vals)
                         + f" | {_fmt(top[0])} / {_fmt(top[1])} | {_fmt(st[0])} / {_fmt(st[1])} | "
                         + ("yes" if ok else "**no**") + " |")
        lines.append("")
    return "\n".join(lines)


def _presets(text: str) -> tuple:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, k = part.partition(":")
        if name not in TASK_PRESETS or (k and not k.isdigit()):
            raise InputError(f"bad --presets entry {part!r} (PRESET[:K], PRESET in "
                             f"{', '.join(TASK_PRESETS)})")
        out.append((name, int(k) if k else None))
    return tuple(out)


def _table_rows(section: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and the body rows of the first Markdown table in ``section``."""
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")]
            for ln in section.splitlines() if ln.startswith("|")]
    return (rows[0], rows[2:]) if len(rows) > 2 else ([], [])


def _rel_part(cell: str) -> float:
    """The ``rel`` of a ``rel / beyond`` cell."""
    try:
        return float(cell.split("/")[0])
    except ValueError:
        return float("nan")


def findings(text: str) -> list[str]:
    """At most five lines read off a rendered report: per dtype, how many columns the stated
    rounding covers under every emulation and the largest measured ``rel``; which variant differs
    most."""
    out = []
    per_emulation = text.split("## Per emulation", 1)[-1].split("## Per variant", 1)[0]
    for part in per_emulation.split("**")[1::2]:  # the dtype names in bold, each before its table
        section = per_emulation.split(f"**{part}**", 1)[1]
        head, body = _table_rows(section)
        if not body or "covers" not in head:
            continue
        n_emu = head.index("largest") - 1
        yes = sum(r[head.index("covers")] == "yes" for r in body)
        top = sorted(body, key=lambda r: -_rel_part(r[head.index("largest")]))[:3]
        out.append(f"- {part}: the stated `MEASURED_ROUNDING` covers {yes} of {len(body)} columns "
                   f"under {n_emu} kernel settings; largest `rel`: "
                   + ", ".join(f"{r[0].strip('`')} {r[head.index('largest')].split(' /')[0]}"
                               for r in top) + ".")
    variants = text.split("## Per variant", 1)[-1]
    head, body = _table_rows(variants)
    names = [h for h in ("threads", "engine", "float64", "subtraction") if h in head]
    if body and names:
        most: dict = {}
        for r in body:
            rel = {n: _rel_part(r[head.index(n)]) for n in names}
            if max(rel.values()) > 0:
                worst = max(rel, key=rel.get)
                most[worst] = most.get(worst, 0) + 1
        out.append("- The variant that differs most, per column: "
                   + ", ".join(f"{n} in {k}" for n, k in sorted(most.items(), key=lambda x: -x[1]))
                   + f" of {len(body)} columns.")
    return out[:5] or ["- Nothing measured yet."]


def render(text: str) -> str:
    """The report with :func:`findings` after its title."""
    from crosscurv.experiments.reports.opening import with_findings

    return with_findings(text, findings(text))


@dataclass(frozen=True)
class RoundingOptions:
    """What :func:`write_rounding` measures: the command-line flags of the same names
    (:func:`crosscurv.experiments.cli.scripts.rounding`); ``argv`` is the command the output names.
    """

    tasks: str = "mlp,fl,lora"
    presets: str = "smoke:10,default:3"
    no_golden: bool = False
    json: bool = False
    load: tuple | None = None
    dtypes: tuple = ("float32", "float64")
    emulate: bool = False
    cache: str = os.path.join("build", "rounding")
    out: str | None = None
    cached_only: bool = False
    argv: tuple = ()


def write_rounding(a: RoundingOptions) -> int:
    """Measure (or load) the rounding of every record column and print or write its table (module
    docstring); returns 0.

    Raises:
        crosscurv.theory.errors.InputError: a bad ``presets`` entry or dtype.
    """
    dtypes = tuple(a.dtypes)
    if not dtypes or any(d not in ("float32", "float64") for d in dtypes):
        raise InputError(f"bad --dtypes {','.join(dtypes)!r} (float32, float64)")
    t0 = time.perf_counter()
    argv_text = " ".join(a.argv)
    if a.emulate:
        from .emulation import EMULATIONS

        child = ["--tasks", a.tasks, "--presets", a.presets, "--dtypes", ",".join(dtypes)] + (
            ["--no-golden"] if a.no_golden else [])
        by = measure_emulated(child, list(EMULATIONS), a.cache,
                              log=lambda m: print(f"rounding: {m}", file=sys.stderr, flush=True),
                              cached_only=a.cached_only)
        missing = [n for n in EMULATIONS if n not in by]
        argv_text = " ".join(x for x in argv_text.split(" ") if x != "--cached-only")
        res = [dict(r, emulation=n) for n, rs in by.items() for r in rs]
        if a.json:
            print(json.dumps(res, indent=1))
            return 0
        text = "\n".join([
            "# Measured rounding of the record columns", "",
            f"Generated by `python -m crosscurv.experiments.conformance.rounding {argv_text}` "
            f"(`make rounding`): torch {torch.__version__}. The protocol run several ways that "
            f"differ only in the order or precision of their floating-point operations (the "
            f"module's docstring), under each emulated instruction set; `MEASURED_ROUNDING` "
            f"(`crosscurv.numeric.record_comparison`) states the largest, rounded up.", "",
            "## Per emulation", "", emulation_table(by)]
            + (["Not measured (the measurement was stopped before them; `make rounding` "
                "measures them): "
                f"{', '.join(missing)}. The stated values cover the measured emulations only.", ""]
               if missing else [])
                         + ["## Per variant, over every emulation measured", "", table(res)])
        if a.out:
            os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
            with open(a.out, "w", encoding="utf-8") as fh:
                fh.write(render(text))
            print(a.out)
        else:
            print(text)
        return 0
    if a.load:
        res = []
        for f in a.load:
            with open(f, encoding="utf-8") as fh:
                res += json.load(fh)
    else:
        tasks = tuple(t.strip() for t in a.tasks.split(",") if t.strip())
        res = measure(tasks, _presets(a.presets), not a.no_golden,
                      log=lambda m: print(f"rounding: {m}", file=sys.stderr, flush=True),
                      dtypes=dtypes)
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(table(res))
        print(f"`python -m crosscurv.experiments.conformance.rounding {' '.join(a.argv)}`: "
              f"torch {torch.__version__}, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from crosscurv.experiments.cli.scripts import rounding

    sys.exit(rounding())
