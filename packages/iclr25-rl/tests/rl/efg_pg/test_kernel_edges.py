"""Edge cases of the fused QFR step kernel against the reference (TRITON_INTERPRET=1 on CPU)."""

import numpy as np
import pytest
import torch

from iclr25.core.testing import Fp32ScalarLauncher
from iclr25.core.triton import BackendUnavailableError
from iclr25.rl.efg_pg import omd_step


def _inputs(n=9, a=4, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    nact = torch.randint(1, a + 1, (n,), generator=gen)
    mask = torch.arange(a)[None, :] < nact[:, None]
    ref = torch.rand(n, a, generator=gen, dtype=dtype) * mask
    ref = ref / ref.sum(1, keepdim=True)
    g = torch.randn(n, a, generator=gen, dtype=dtype) * 3
    div = 1 + torch.rand(n, generator=gen, dtype=dtype)
    return ref, g, div, mask


@pytest.mark.triton
@pytest.mark.parametrize("which", ["g", "divisor", "mask"])
def test_triton_broadcasts_like_the_reference(which):
    """A (1, A) g or mask, or a (1,) divisor, broadcasts in the reference; the kernel read past its end."""
    ref, g, div, mask = _inputs()
    mask = torch.ones_like(mask) if which == "mask" else mask
    args = {"g": g, "divisor": div, "mask": mask}
    args[which] = args[which][:1]
    want = omd_step(ref, args["g"], args["divisor"], args["mask"], 0.5, 0.05, backend="reference")
    got = omd_step(ref, args["g"], args["divisor"], args["mask"], 0.5, 0.05, backend="triton")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.triton
def test_triton_float64_log_floor_is_the_references():
    """A zero-probability action is floored at finfo(float64).tiny in the reference (the kernel used 1e-300)."""
    ref = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    g = torch.tensor([[0.0, 708.0]], dtype=torch.float64)  # eta * g ~ -log(tiny): both actions matter
    div, mask = torch.ones(1, dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool)
    want = omd_step(ref, g, div, mask, 1.0, 0.0, backend="reference")
    torch.testing.assert_close(omd_step(ref, g, div, mask, 1.0, 0.0, backend="triton"), want, rtol=0, atol=1e-12)


@pytest.mark.triton
@pytest.mark.parametrize("zero_entry", [False, True])
def test_triton_float64_scalars_are_not_rounded_to_fp32(monkeypatch, zero_entry):
    """eta, gamma and the log floor must reach a float64 kernel in float64, also on CUDA (fp32 Python floats)."""
    from iclr25.rl.efg_pg import kernels

    monkeypatch.setattr(kernels, "_omd_step_kernel", Fp32ScalarLauncher(kernels._omd_step_kernel))
    ref, g, div, mask = _inputs(seed=1)
    if zero_entry:  # 1e-300 as fp32 is 0: log 0 = -inf would zero the action for good
        ref = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
        g = torch.tensor([[0.0, 708.0]], dtype=torch.float64)
        div, mask = torch.ones(1, dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool)
    want = omd_step(ref, g, div, mask, 0.1 if not zero_entry else 1.0, 1e-3, backend="reference")
    got = omd_step(ref, g, div, mask, 0.1 if not zero_entry else 1.0, 1e-3, backend="triton")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.triton
@pytest.mark.parametrize("which", [0, 1, 2])
def test_triton_refuses_inputs_that_require_grad(which):
    """The kernel has no backward: it must not silently detach; auto keeps the differentiable reference."""
    args = list(_inputs())
    args[which] = args[which].clone().requires_grad_()
    with pytest.raises(BackendUnavailableError, match="requires grad"):
        omd_step(*args, 0.5, 0.05, backend="triton")
    assert omd_step.select(*args, 0.5, 0.05).name == "reference"
    with torch.no_grad():
        assert omd_step.select(*args, 0.5, 0.05, backend="triton").name == "triton"


def _mixed(ref_dtype, fb_dtype, which, seed=2):
    """fp64-exact inputs, then ref in ref_dtype and the feedback named by which in fb_dtype."""
    ref, g, div, mask = _inputs(dtype=torch.float32, seed=seed)
    ref, g, div = ref.to(ref_dtype), g.double(), div.double()
    g = g.to(fb_dtype) if which in ("g", "both") else g.to(ref_dtype)
    div = div.to(fb_dtype) if which in ("divisor", "both") else div.to(ref_dtype)
    return ref, g, div, mask


@pytest.mark.parametrize("regularizer", ["entropy", "euclidean"])
@pytest.mark.parametrize("which", ["g", "divisor", "both"])
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_reference_returns_ref_dtype_with_float64_feedback(regularizer, which, kind):
    """fp32 ref with fp64 g or divisor returned fp64 from the reference, fp32 from the kernel."""
    from iclr25.rl.efg_pg.reference import omd_step_reference

    ref, g, div, mask = _mixed(torch.float32, torch.float64, which)
    exact = omd_step_reference(ref.double(), g.double(), div.double(), mask, 0.5, 0.05, regularizer)
    if kind == "numpy":
        out = omd_step_reference(ref.numpy(), g.numpy(), div.numpy(), mask.numpy(), 0.5, 0.05, regularizer)
        assert out.dtype == np.float32
        out = torch.from_numpy(out)
    else:
        out = omd_step(ref, g, div, mask, 0.5, 0.05, regularizer=regularizer, backend="reference")
    assert out.dtype == torch.float32
    # computed in fp64, rounded once at the end
    torch.testing.assert_close(out.double(), exact, rtol=0, atol=torch.finfo(torch.float32).eps)


@pytest.mark.triton
@pytest.mark.parametrize("which", ["g", "divisor", "both"])
@pytest.mark.parametrize(("ref_dtype", "fb_dtype"), [(torch.float32, torch.float64), (torch.float64, torch.float32)])
def test_triton_and_reference_agree_on_mixed_dtypes(which, ref_dtype, fb_dtype):
    """Both backends return ref's dtype; values differ only by where the fp32 rounding happens."""
    ref, g, div, mask = _mixed(ref_dtype, fb_dtype, which)
    want = omd_step(ref, g, div, mask, 0.5, 0.05, backend="reference")
    got = omd_step(ref, g, div, mask, 0.5, 0.05, backend="triton")
    assert want.dtype == got.dtype == ref_dtype
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
