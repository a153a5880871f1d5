"""Device and dtype resolution: CUDA when present, else CPU; one-line errors."""

import pytest
import torch

from crosscurv.numeric.device import DeviceError, resolve_device, resolve_dtype
from crosscurv.theory.errors import InputError


def test_auto_follows_cuda_availability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_explicit_devices(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match="does not exist: 2 CUDA"):
        resolve_device("cuda:2")
    with pytest.raises(DeviceError, match="bad CUDA device"):
        resolve_device("cuda:x")


def test_cuda_without_cuda_is_one_line_input_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError) as err:
        resolve_device("cuda")
    assert "CUDA is not available" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("bad", ["tpu", "", "gpu0", 3])
def test_unknown_devices(bad):
    with pytest.raises(DeviceError):
        resolve_device(bad)


def test_dtypes():
    assert resolve_dtype("float32") is torch.float32
    assert resolve_dtype("float64") is torch.float64
    assert resolve_dtype("Float64") is torch.float64
    assert resolve_dtype(torch.float32) is torch.float32
    for bad in ("float16", "double", "", None, torch.bfloat16):
        with pytest.raises(DeviceError) as err:
            resolve_dtype(bad)
        assert "\n" not in str(err.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_products_on_cuda_match_cpu(dtype):
    """Same code path on the GPU: gradient, HVP (both methods, batched), M_S v, c_ij, a step, D^3L.
    """
    from crosscurv.numeric import tree
    from crosscurv.numeric.curvature import cross_curvature_table, masked_product
    from crosscurv.numeric.hvp import grad, hvp, hvp_batch
    from crosscurv.numeric.steps import scheme_step
    from crosscurv.numeric.third import third_derivative
    from crosscurv.theory.patterns import gauss_seidel
    from tests.numeric.cases import CASES, patterns_for, random_direction, relerr

    dev = resolve_device("auto")
    assert dev.type == "cuda"
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    for name, build in CASES.items():
        cpu, gpu = build(dtype=dtype), build(dtype=dtype, device=dev)
        assert gpu.device.type == "cuda"
        v = random_direction(cpu.params, 3)
        vg = {k: t.to(dev) for k, t in v.items()}
        def back(d):
            return tree.flatten({k: t.cpu() for k, t in d.items()})

        assert relerr(back(grad(gpu.loss, gpu.params)[1]), tree.flatten(grad(cpu.loss, cpu.params)[
            1])) < tol
        ref = tree.flatten(hvp(cpu.loss, cpu.params, v))
        for method in ("forward", "reverse"):
            assert relerr(back(hvp(gpu.loss, gpu.params, vg, method)), ref) < tol
            outs = hvp_batch(gpu.loss, gpu.params, [vg, tree.scale(vg, 2.0)], method)
            assert relerr(back(outs[1]), 2 * ref) < tol
        for pname, pat in patterns_for(cpu.n_blocks).items():
            a = tree.flatten(masked_product(cpu, cpu.params, pat, v))
            b = back(masked_product(gpu, gpu.params, pat, vg))
            assert (relerr(b, a) < tol) if a.norm() > 0 else b.norm() == 0, pname
            a = tree.flatten(scheme_step(cpu, cpu.params, pat, 0.1))
            b = back(scheme_step(gpu, gpu.params, pat, 0.1))
            assert relerr(b, a) < tol, pname
        tc, tg = cross_curvature_table(cpu), cross_curvature_table(gpu)
        assert relerr(tg.c, tc.c) < tol and tg.C_S(gauss_seidel(cpu.n_blocks)) == pytest.approx(
            tc.C_S(gauss_seidel(cpu.n_blocks)), rel=tol
        )
        t3c = third_derivative(cpu.loss, cpu.params, v, v, v)
        t3g = third_derivative(gpu.loss, gpu.params, vg, vg, vg)
        assert float(t3g) == pytest.approx(float(t3c), rel=tol)
