"""Edge cases of the fused soft-VI Triton kernel against the reference (TRITON_INTERPRET=1 on CPU)."""

import numpy as np
import pytest
import torch

from iclr25.core.testing import Fp32ScalarLauncher
from iclr25.core.triton import BackendUnavailableError
from iclr25.rl.aihf import batched_soft_vi
from iclr25.rl.aihf.reference import batched_soft_vi_reference


def _P(S, A, dtype, seed=0):
    P = torch.rand(S, A, S, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return P / P.sum(-1, keepdim=True)


# the interpreter warns about the log 0, inf - inf and 0 * inf it evaluates (as the reference does)
_INF_WARNINGS = pytest.mark.filterwarnings("ignore:(invalid value|divide by zero) encountered:RuntimeWarning")


@_INF_WARNINGS
@pytest.mark.triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("iters", [1, 3])
def test_triton_state_with_all_rewards_minus_inf(dtype, iters):
    """torch.logsumexp of a row of -inf is -inf; the kernel used to return NaN (and spread it)."""
    P = _P(5, 3, dtype)
    r = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(1), dtype=dtype)
    r[0, 1, :] = -torch.inf  # a state where every action is forbidden
    r[1, 2, :] = torch.inf
    ref = batched_soft_vi(P, r, 0.9, 0.5, iters, backend="reference")
    out = batched_soft_vi(P, r, 0.9, 0.5, iters, backend="triton")
    assert not out.isnan().any()
    torch.testing.assert_close(out, ref)


@pytest.mark.triton
def test_triton_float64_scalars_are_not_rounded_to_fp32(monkeypatch):
    """gamma and temp must reach a float64 kernel in float64, also where Python floats become fp32 (CUDA)."""
    from iclr25.rl.aihf import kernels

    monkeypatch.setattr(kernels, "_soft_vi_kernel", Fp32ScalarLauncher(kernels._soft_vi_kernel))
    P = _P(5, 3, torch.float64)
    r = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ref = batched_soft_vi(P, r, 0.9, 0.3, 30, backend="reference")
    out = batched_soft_vi(P, r, 0.9, 0.3, 30, backend="triton")
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


@_INF_WARNINGS
@pytest.mark.triton
@pytest.mark.parametrize(("S", "A"), [(0, 2), (3, 0)])
def test_triton_empty_state_or_action_space(S, A):
    P, r = torch.zeros(S, A, S), torch.zeros(2, S, A)
    ref = batched_soft_vi(P, r, 0.9, 0.5, 2, backend="reference")  # (2, 0), or -inf for A = 0
    torch.testing.assert_close(batched_soft_vi(P, r, 0.9, 0.5, 2, backend="triton"), ref)


@pytest.mark.triton
def test_triton_refuses_rewards_that_require_grad():
    """The kernel has no backward: it must not silently detach; auto keeps the differentiable reference."""
    P = _P(4, 2, torch.float64)
    r = torch.randn(1, 4, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(BackendUnavailableError, match="requires grad"):
        batched_soft_vi(P, r, 0.9, 0.5, 3, backend="triton")
    assert batched_soft_vi.select(P, r, 0.9, 0.5, 3).name == "reference"
    batched_soft_vi(P, r, 0.9, 0.5, 3).sum().backward()
    assert r.grad is not None
    with torch.no_grad():
        torch.testing.assert_close(
            batched_soft_vi(P, r, 0.9, 0.5, 3, backend="triton"), batched_soft_vi_reference(P, r, 0.9, 0.5, 3)
        )


@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=pytest.mark.triton)])
def test_non_integer_iters_is_refused_by_name(backend):
    """The kernel used to truncate iters=2.5 to 2 backups silently."""
    P = _P(4, 2, torch.float32)
    with pytest.raises(TypeError, match="iters must be an int"):
        batched_soft_vi(P, torch.zeros(1, 4, 2), 0.9, 0.5, 2.5, backend=backend)


@pytest.mark.triton
@pytest.mark.parametrize(
    ("P", "r", "why"),
    [
        (np.zeros((4, 2, 4)), np.zeros((1, 4, 2)), "the kernel needs torch tensors"),
        (_P(4, 2, torch.float16), torch.zeros(1, 4, 2, dtype=torch.float16), "float32/float64, got torch.float16"),
        (_P(65, 2, torch.float32), torch.zeros(1, 65, 2), "S <= 64 and A <= 8, got S=65, A=2"),
        (_P(4, 9, torch.float32), torch.zeros(1, 4, 9), "S <= 64 and A <= 8, got S=4, A=9"),
    ],
)
def test_triton_backend_names_the_limit_it_cannot_meet(P, r, why):
    with pytest.raises(BackendUnavailableError, match=why):
        batched_soft_vi(P, r, 0.9, 0.5, 3, backend="triton")
    if isinstance(r, torch.Tensor) and r.dtype != torch.float16:
        # auto falls back to the reference, which runs any size: V after 3 backups from 0 with r = 0 is
        # T·log A·(1 + γ + γ²) in every state, since each backup adds T·log A to a constant V
        V = batched_soft_vi(P, r, 0.9, 0.5, 3)
        A = r.shape[2]
        torch.testing.assert_close(V, torch.full_like(V, 0.5 * np.log(A) * (1 + 0.9 + 0.81)))
