"""One-step comparison: do a user's one-step quantities agree with a golden case's
``one_step.json``?

The quantities at ``theta^0`` with step ``eta`` (Theorem 1): ``c_ij = g_i^T H_ij g_j``, ``C_cross``,
``gHg``, ``||g||^2``, the losses, the gradient and ``theta_JC^1``, and per pattern label ``C_S``,
``eta2_estimate = eta^2 C_S``, ``c3``, ``eta3_estimate``, ``L(theta_S^1)``, ``gap_1`` and
``theta_S^1``; the user's file holds any subset. A value agrees when ``|theirs - expected| <= rtol *
scale``, ``scale`` the largest ``|value|`` of the expected quantities of its family
(:data:`FAMILIES`). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from .comparison_verdict import ComparisonVerdict
from .records import RecordsError

__all__ = ["FAMILIES", "RTOL", "OneStepComparison", "compare_one_step"]

#: ``{quantity: family}``; per-pattern quantities under ``patterns.<label>``.
FAMILIES = {**dict.fromkeys(("loss_0", "loss_jc_1", "loss_s_1", "gap_1"), "loss"),
            **dict.fromkeys(("theta_jc_1", "theta_s_1"), "theta"), "grad_0": "grad",
            **dict.fromkeys(("grad_norm2", "c", "C_cross", "gHg", "C_S"), "curvature"),
            **dict.fromkeys(("eta2_estimate", "eta3_estimate"), "estimate"), "c3": "c3"}
_TOP = ("loss_0", "grad_0", "grad_norm2", "c", "C_cross", "gHg", "loss_jc_1", "theta_jc_1")
_PER_PATTERN = ("C_S", "eta2_estimate", "c3", "eta3_estimate", "loss_s_1", "gap_1", "theta_s_1")
#: Relative tolerance (times the family's scale) per family.
RTOL = {"loss": 1e-13, "theta": 1e-13, "grad": 1e-13, "curvature": 1e-12, "estimate": 1e-12,
        "c3": 1e-10}


def _flat(obj, where: str) -> list:
    """A number, a nested list, ``{"shape", "values"}`` or ``{name: tensor}`` as a flat list of
    floats."""
    if isinstance(obj, bool):
        raise RecordsError(f"their one-step results: {where} is not a number ({obj!r})")
    if isinstance(obj, (int, float)):
        return [float(obj)]
    if isinstance(obj, Mapping):
        if "values" in obj:
            return _flat(obj["values"], where)
        return [v for k in sorted(obj) for v in _flat(obj[k], f"{where}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [v for x in obj for v in _flat(x, where)]
    raise RecordsError(
        f"their one-step results: {where} is not a number or array ({type(obj).__name__})"
    )


@dataclass
class OneStepComparison(ComparisonVerdict):
    """Outcome of :func:`compare_one_step`: ``rows`` ``(quantity, theirs, expected, |diff|,
    allowed)`` per compared value (arrays by their largest difference), ``first`` disagreeing row or
    ``None``, and ``diagnoses``, ``notes`` (sentences).
    """

    rows: list
    first: tuple | None
    diagnoses: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    where: str = "one_step.json"

    def summary(self) -> str:
        if self.ok:
            return f"all {len(self.rows)} one-step quantities agree"
        q, t, r, d, a = self.first
        return (f"first disagreement: {q}: theirs {t!r}, expected {r!r} "
                f"(|diff| {d:.3e} > allowed {a:.3e})")

    def text(self) -> str:
        from tabulate import tabulate

        rows = [[q, t, r, d, a, "ok" if d <= a else "DIFFERS"] for q, t, r, d, a in self.rows]
        table = tabulate(rows, headers=["quantity", "theirs", "expected", "|diff|", "allowed", ""],
                         tablefmt="github", floatfmt=".6g")
        return "\n".join([table, ""] + self.verdict_lines())

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "diagnoses": list(self.diagnoses),
            "notes": list(self.notes),
            "quantities": [
                dict(zip(("quantity", "theirs", "expected", "diff", "allowed"), r))
                for r in self.rows
            ],
        }


def _scales(expected: Mapping) -> dict:
    vals: dict = {}
    for q in _TOP:
        if q in expected:
            vals.setdefault(FAMILIES[q], []).extend(abs(v) for v in _flat(expected[q], q))
    for pat in (expected.get("patterns") or {}).values():
        for q in _PER_PATTERN:
            if q in pat:
                vals.setdefault(FAMILIES[q], []).extend(abs(v) for v in _flat(pat[q], q))
    return {f: (max(v) if v and max(v) > 0 else 1.0) for f, v in vals.items()}


def compare_one_step(
    theirs: Mapping, expected: Mapping, rtol: float | None = None
) -> OneStepComparison:
    """Compare ``theirs`` (laid out like ``one_step.json``, any subset) with ``expected``. Raises
    ``RecordsError``: nothing comparable, an unknown pattern label, a value that is not a number, an
    array of another size.
    """
    scales = _scales(expected)
    rows, notes, pairs = [], [], []
    for q in theirs:
        if q == "patterns" or q in _TOP:
            continue
        notes.append(f"{q} not compared (not a one-step quantity)")
    for q in _TOP:
        if q in theirs and q in expected:
            pairs.append((q, q, theirs[q], expected[q]))
    pats = theirs.get("patterns") or {}
    if not isinstance(pats, Mapping):
        raise RecordsError(
            "their one-step results: patterns must be an object {label: {quantity: value}}"
        )
    for label, pat in pats.items():
        if label not in expected.get("patterns", {}):
            raise RecordsError(
                f"their one-step results: pattern {label!r} is not in the case "
                f"(labels: {', '.join(expected.get('patterns', {}))})"
            )
        for q in pat:
            if q in _PER_PATTERN and q in expected["patterns"][label]:
                pairs.append((f"patterns.{label}.{q}", q, pat[q], expected["patterns"][label][q]))
            elif q not in ("spec",):
                notes.append(
                    f"patterns.{label}.{q} not compared (not a one-step quantity of this case)"
                )
    if not pairs:
        raise RecordsError(
            "their one-step results hold no quantity of one_step.json (c, C_cross, "
            "patterns.<label>.C_S, eta2_estimate, ...)"
        )
    first = None
    for name, q, t, r in pairs:
        tv, rv = _flat(t, name), _flat(r, name)
        if len(tv) != len(rv):
            raise RecordsError(
                f"their one-step results: {name} has {len(tv)} values, the case {len(rv)}"
            )
        allowed = (RTOL[FAMILIES[q]] if rtol is None else rtol) * scales.get(FAMILIES[q], 1.0)
        worst = max(
            range(len(tv)), key=lambda i: abs(tv[i] - rv[i]) if math.isfinite(tv[i]) else math.inf
        )
        d = abs(tv[worst] - rv[worst]) if math.isfinite(tv[worst]) else math.inf
        row = (name, tv[worst], rv[worst], d, allowed)
        rows.append(row)
        if d > allowed and first is None:
            first = row
    comp = OneStepComparison(rows, first, notes=notes)
    if first is not None:
        comp.diagnoses = _diagnose(theirs, expected, [r for r in rows if r[3] > r[4]])
    return comp


def _candidates(expected: Mapping, label: str | None, q: str) -> list:
    """``(mistake, value)`` of the likely mistakes for quantity ``q`` (of pattern ``label``)."""
    lr = float(expected["lr"])
    cross = float(expected.get("C_cross", math.nan))
    pat = expected["patterns"].get(label, {}) if label else {}
    cs = float(pat.get("C_S", math.nan))
    out = []
    if q == "C_S":
        out += [
            ("C_S summed over all pairs i != j (C_cross) instead of the pairs of S (Theorem 1: "
             "C_S = sum_{(i,j) in S} c_ij)", cross),
            (
                "C_S halved (Corollary 1's eta^2/2 C_cross counts each pair of full GS twice; "
                "C_S = sum_{(i,j) in S} c_ij counts it once)",
                cs / 2,
            ),
            ("C_S doubled", 2 * cs),
        ]
    if q == "eta2_estimate":
        out += [
            (
                "eta^2/2 C_S instead of eta^2 C_S (Theorem 1: L_S - L_JC = eta^2 C_S; the "
                "eta^2/2 of Corollary 1 multiplies C_cross = 2 sum_{i<j} c_ij)",
                lr * lr * cs / 2,
            ),
            ("2 eta^2 C_S instead of eta^2 C_S (Theorem 1)", 2 * lr * lr * cs),
            ("eta^2 C_cross (all pairs) instead of eta^2 C_S (Theorem 1)", lr * lr * cross),
            ("eta C_S instead of eta^2 C_S (Theorem 1)", lr * cs),
        ]
    if q == "eta3_estimate" and "c3" in pat:
        c3 = float(pat["c3"])
        out += [("eta^2 C_S - eta^3 c3: the sign of the eta^3 term", lr * lr * cs - lr**3 * c3),
                ("the eta^2 estimate without its eta^3 term", lr * lr * cs),
                ("eta^2/2 C_S + eta^3 c3 (Theorem 1 has eta^2 C_S)", lr * lr * cs / 2 + lr**3 * c3)]
    if q == "gap_1" and "loss_s_1" in pat:
        out.append(
            ("gap_1 = loss_jc_1 - loss_s_1: the opposite sign convention (gap = L_S - L_JC)",
             float(expected["loss_jc_1"]) - float(pat["loss_s_1"]))
        )
    if q == "C_cross" and "c" in expected:
        c = expected["c"]
        out.append(
            ("C_cross = sum_{i<j} c_ij (half; C_cross = 2 sum_{i<j} c_ij, eq. cross_curvature)",
             cross / 2)
        )
        out.append(
            ("C_cross = sum_ij c_ij (with the diagonal: that is g^T H g)",
             sum(sum(row) for row in c))
        )
    return out


def _diagnose(theirs: Mapping, expected: Mapping, bad: list) -> list:
    out = []
    for name, t, r, d, allowed in bad:
        parts = name.split(".")
        label, q = (parts[1], parts[2]) if parts[0] == "patterns" else (None, parts[0])
        if q in ("c",) and "c" in theirs:
            tc, rc = _flat(theirs["c"], "c"), _flat(expected["c"], "c")
            n = int(round(math.sqrt(len(rc))))
            if all(abs(tc[i * n + i]) <= allowed for i in range(n)) and any(
                rc[i * n + i] for i in range(n)
            ):
                out.append(
                    "c has a zero diagonal: c_ii = g_i^T H_ii g_i belongs to the table (Theorem 1)"
                )
                continue
        tv = _flat(theirs["patterns"][label][q] if label else theirs[q], name)
        if len(tv) == 1:
            named = [
                m
                for m, v in _candidates(expected, label, q)
                if math.isfinite(v) and abs(tv[0] - v) <= max(allowed, 1e-6 * abs(v))
            ]
            if named:
                out.append(f"{name}: " + "; or ".join(named))
                continue
        rel = d / max(abs(r), 1e-300)
        if rel <= 1e-4:
            out.append(
                f"{name} differs by {rel:.1e} relative: a precision difference, not a formula "
                "(finite differences or float32?); compare with --rtol "
                f"{10.0 ** math.ceil(math.log10(2 * rel)):g}"
            )
        elif abs(t + r) <= allowed:
            out.append(f"{name} has the opposite sign of the expected value")
    return out
