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
