"""The protocol's measured gap (crosscurv.numeric.gap): the segment integral only where it can
matter.
"""

from __future__ import annotations

import math

import crosscurv.numeric.gap
from crosscurv.numeric.gap import difference_error, plain_suffices
from crosscurv.numeric.protocol import run_protocol
from tests.numeric.cases import relu_mlp


def test_the_segment_is_computed_exactly_where_the_plain_difference_does_not_suffice(monkeypatch):
    calls = []
    interior = crosscurv.numeric.gap.SegmentGap.interior
    monkeypatch.setattr(crosscurv.numeric.gap.SegmentGap, "interior", lambda self,
                        *a: (calls.append(1), interior(self, *a))[1])
    res = run_protocol(relu_mlp(), "gs", 0.2, 25)
    needed = [not plain_suffices(r["loss_s"], r["loss_jc"], "float32") for r in res.records]
    assert len(calls) == sum(needed)
    assert 0 < sum(needed) < len(res.records)  # both kinds of iteration occur in this run
    for r, seg in zip(res.records, needed):
        d, err = r["loss_s"] - r["loss_jc"], difference_error(r["loss_s"], r["loss_jc"], "float32")
        if not seg:
            assert (r["gap"], r["gap_err"]) == (d, err) and err <= 2.0 ** -10 * abs(r["gap"])
        assert math.isfinite(r["gap_err"]) and abs(r["gap"] - d) <= r["gap_err"] + err


def test_a_segment_outside_the_loss_domain_falls_back_to_the_plain_difference(monkeypatch):
    """Where the loss raises inside the segment between the two runs (points neither run visits,
    as a Cholesky factor of a matrix not positive definite there), the record keeps the plain
    difference with its rounding instead of stopping the run; other errors still propagate."""
    import pytest
    import torch

    def raises(self, *a):
        raise torch.linalg.LinAlgError("linalg.cholesky: the input is not positive-definite")

    monkeypatch.setattr(crosscurv.numeric.gap.SegmentGap, "interior", raises)
    res = run_protocol(relu_mlp(), "gs", 0.2, 25)
    assert res.status == "complete" and len(res.records) == 25
    for r in res.records:
        d, err = r["loss_s"] - r["loss_jc"], difference_error(r["loss_s"], r["loss_jc"], "float32")
        assert (r["gap"], r["gap_err"]) == (d, err)

    def bug(self, *a):
        raise KeyError("a bug, not a domain")

    monkeypatch.setattr(crosscurv.numeric.gap.SegmentGap, "interior", bug)
    with pytest.raises(KeyError):
        run_protocol(relu_mlp(), "gs", 0.2, 25)
