"""The verdict of a comparison with a reference: agree or disagree, its exit code, its last lines.

Shared by :class:`crosscurv.numeric.record_comparison.RecordsComparison` (records) and
:class:`crosscurv.numeric.one_step_comparison.OneStepComparison` (one-step quantities): a
comparison agrees when it found no first disagreement (``first is None``).  Torch-free.
"""

from __future__ import annotations

__all__ = ["ComparisonVerdict"]


class ComparisonVerdict:
    """Mixin of a comparison dataclass with the attributes ``first`` (the first disagreement, or
    ``None``), ``notes`` and ``diagnoses`` (sentences) and a method ``summary()`` (one line)."""

    @property
    def ok(self) -> bool:
        return self.first is None

    @property
    def exit_code(self) -> int:
        """``validate-records``' verdict: 0 agree, 1 disagree."""
        return 0 if self.ok else 1

    def verdict_lines(self) -> list:
        """The notes, the diagnoses and the verdict, one line each: ``note: ...``, ``diagnosis:
        ...``, then ``OK: <summary>`` or ``DISAGREE: <summary>``."""
        lines = ["note: " + n for n in self.notes]
        lines += ["diagnosis: " + d for d in self.diagnoses]
        lines.append(("OK: " if self.ok else "DISAGREE: ") + self.summary())
        return lines
