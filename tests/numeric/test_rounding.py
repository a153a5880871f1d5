"""The rounding of a loss difference without torch: the same spacing as ``torch.finfo`` gives."""

import math
import subprocess
import sys

import pytest
import torch
from crosscurv.numeric.rounding import DIFFERENCE_ULPS, difference_error, ulp


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_ulp_is_torchs_spacing(dtype):
    info = torch.finfo(dtype)
    for x in (0.0, 1e-40, 1e-30, 3e-5, 0.3, 1.0, 7.5, -2.0, 6e4):
        _, e = math.frexp(max(abs(x), info.smallest_normal))
        want = info.eps * 2.0 ** (e - 1)
        assert ulp(x, dtype) == want == ulp(x, str(dtype).replace("torch.", "")), (dtype, x)
    assert ulp(math.inf, dtype) == math.inf and math.isinf(ulp(math.nan, dtype))
    x = torch.tensor(1.0, dtype=dtype)  # the next number above 1 is one spacing away
    assert float(torch.nextafter(x, torch.tensor(2.0, dtype=dtype)) - x) == ulp(1.0, dtype)


def test_difference_error_is_ulps_of_the_larger_loss_and_rejects_other_dtypes():
    assert difference_error(-3.0, 0.5, "float32") == DIFFERENCE_ULPS * ulp(3.0, "float32")
    with pytest.raises(ValueError, match="not a floating-point dtype"):
        ulp(1.0, "int64")


def test_importing_it_does_not_import_torch():
    code = "import sys, crosscurv.numeric.rounding; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
