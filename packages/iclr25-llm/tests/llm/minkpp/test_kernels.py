"""The fused Triton kernel against the plain-torch reference (interpreter on CPU, real kernel on CUDA)."""

import pytest
import torch

from iclr25.core.triton import triton_available
from iclr25.llm.minkpp import token_stats
from iclr25.llm.minkpp.reference import token_stats_reference

pytestmark = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(2, 16, 1000, generator=g)
    logits[0, 3, 10:] = -float("inf")  # a masked vocabulary row
    logits[1, 5, 7] = 60.0  # a near-degenerate row
    targets = torch.randint(0, 1000, (2, 16), generator=g)
    targets[0, 3] = 4
    return logits.to(device), targets.to(device)


def _check(device):
    logits, targets = _inputs(device)
    got = token_stats(logits, targets, backend="triton")
    ref = token_stats(logits, targets, backend="reference")
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # The raw variance too (before the sigma floor hides small differences).
    from iclr25.llm.minkpp.kernels import token_stats_triton

    raw = token_stats_triton(logits, targets)
    for a, b in zip(raw, token_stats_reference(logits, targets), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.triton
def test_kernel_matches_reference_interpreter():
    _check("cpu")


def _multi_block_inputs():
    # V = 9000 > 4096 (the kernel's largest block): three blocks per row, so the online rescaling
    # of Z, A and B between blocks is exercised (at V = 1000 the whole row fits in one block).
    V = 9000
    g = torch.Generator().manual_seed(1)
    logits = 2 * torch.randn(6, V, generator=g)
    logits[1] += torch.linspace(-6.0, 6.0, V)  # maximum grows block by block: every step rescales
    logits[2] += torch.linspace(6.0, -6.0, V)  # maximum in the first block: later shifts are 0
    logits[3, :4096] = -float("inf")  # an all-masked first block, then a finite maximum
    logits[4, :5000] = -float("inf")  # masked first block and a partly masked second one
    logits[4, 8999] = 40.0  # near-degenerate, its mass in the last block
    logits[5, 5000] = 40.0  # near-degenerate, its mass in the middle block
    targets = torch.randint(0, V, (6,), generator=g)
    targets[3:5] = 8000  # finite logits
    return logits, targets


def _check_multi_block(device):
    from iclr25.llm.minkpp.kernels import token_stats_triton

    logits, targets = _multi_block_inputs()
    got = [t.cpu() for t in token_stats_triton(logits.to(device), targets.to(device))]
    ref = token_stats_reference(logits, targets)
    for a, b, name in zip(got, ref, ("ell", "mu", "var"), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.triton
def test_kernel_online_rescaling_across_vocabulary_blocks_interpreter():
    _check_multi_block("cpu")


def _check_strided_views(device):
    # The scorer passes logits[:, :-1] of a (B, T, V) tensor: rows that cannot be flattened without a
    # copy, which the kernel reads in place through two strides. Also a transposed (T, B, V) view and
    # 1-D / empty inputs.
    from iclr25.llm.minkpp.kernels import token_stats_triton

    logits, targets = _inputs()
    for z, t in (
        (logits[:, :-1], targets[:, 1:]),
        (logits.transpose(0, 1), targets.transpose(0, 1)),
        (logits[1, 2], targets[1, 2]),
        (logits[:, :0], targets[:, :0]),
    ):
        got = [g.cpu() for g in token_stats_triton(z.to(device), t.to(device))]
        ref = token_stats_reference(z, t)
        for a, b, name in zip(got, ref, ("ell", "mu", "var"), strict=True):
            assert a.shape == b.shape == z.shape[:-1], name
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.triton
def test_kernel_reads_strided_views_in_place_interpreter():
    _check_strided_views("cpu")


@pytest.mark.triton
def test_kernel_finfo_min_masked_block_before_the_maximum_interpreter():
    # A first vocabulary block of finfo.min masks (or any logit ~1e20 below the row maximum) makes the
    # rescale d = m_old − m_new so large that d·d·Z and 2·d·A overflow while e^d underflows: the old
    # kernel returned mu = NaN and var = 0 (sigma silently floored at 1e-6); the reference is finite.
    from iclr25.llm.minkpp.kernels import token_stats_triton

    g = torch.Generator().manual_seed(2)
    V = 4100  # > 4096: two vocabulary blocks
    logits = torch.randn(3, V, generator=g)
    logits[0, :4096] = torch.finfo(torch.float32).min
    logits[1, :4096] -= 1e20
    logits[2, :4096] = torch.finfo(torch.float32).min
    logits[2, 4096] = -float("inf")
    targets = torch.tensor([4097, 4099, 4098])
    for z in (logits, logits.bfloat16().masked_fill(logits == torch.finfo(torch.float32).min, -3e38)):
        got = token_stats_triton(z, targets)
        ref = token_stats_reference(z, targets)
        for a, b, name in zip(got, ref, ("ell", "mu", "var"), strict=True):
            assert torch.isfinite(b).all(), name
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)
    sigma = token_stats(logits, targets, backend="triton")[2]
    torch.testing.assert_close(sigma, token_stats(logits, targets, backend="reference")[2], atol=1e-5, rtol=1e-5)


@pytest.mark.triton
def test_op_refuses_targets_of_another_shape_interpreter():
    # TOKEN_STATS called directly (bypassing token_stats' checks) with targets not of logits.shape[:-1]:
    # the kernel read one target per row past the end of targets (a segfault under the interpreter).
    from iclr25.core.triton import BackendUnavailableError
    from iclr25.llm.minkpp.scores import TOKEN_STATS

    logits = torch.randn(3, 4, 33)
    for targets in (torch.zeros(3, dtype=torch.long), torch.zeros(4, dtype=torch.long), torch.zeros(3, 1).long()):
        with pytest.raises(BackendUnavailableError, match="targets of shape"):
            TOKEN_STATS(logits, targets, backend="triton")


@pytest.mark.gpu
def test_kernel_matches_reference_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _check("cuda")
    _check_multi_block("cuda")
    _check_strided_views("cuda")


@pytest.mark.triton
def test_kernel_copies_logits_whose_vocabulary_axis_is_strided_interpreter():
    # A (B, T, V) view of a (B, V, T) tensor has vocabulary stride T: the kernel walks each row with
    # unit stride, so such logits must be made contiguous first, and the statistics must not change.
    from iclr25.llm.minkpp.kernels import token_stats_triton

    g = torch.Generator().manual_seed(3)
    base = 3 * torch.randn(2, 50, 6, generator=g)
    logits = base.transpose(1, 2)
    assert logits.stride(-1) != 1
    targets = torch.randint(0, 50, (2, 6), generator=g)
    got = token_stats_triton(logits, targets)
    ref = token_stats_reference(logits.contiguous(), targets)
    for a, b, name in zip(got, ref, ("ell", "mu", "var"), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)


def test_kernel_entry_point_refuses_to_run_without_triton(monkeypatch):
    from iclr25.llm.minkpp import kernels

    monkeypatch.setattr(kernels, "triton_available", lambda: False)
    with pytest.raises(RuntimeError, match="triton is not installed"):
        kernels.token_stats_triton(torch.zeros(2, 5), torch.zeros(2, dtype=torch.long))


@pytest.mark.triton
def test_op_refuses_grad_and_float64_logits_for_the_kernel_interpreter():
    # The kernel is forward-only and fp32/fp16/bf16 only: an explicit request refuses; auto falls back.
    from iclr25.core.triton import BackendUnavailableError
    from iclr25.llm.minkpp.scores import TOKEN_STATS

    g = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 11, generator=g)
    targets = torch.randint(0, 11, (3,), generator=g)
    with pytest.raises(BackendUnavailableError, match="forward-only; logits require grad"):
        TOKEN_STATS(logits.clone().requires_grad_(), targets, backend="triton")
    with pytest.raises(BackendUnavailableError, match=r"fp32/fp16/bf16 logits, got torch\.float64"):
        TOKEN_STATS(logits.double(), targets, backend="triton")
    with torch.no_grad():  # without autograd recording, a leaf that requires grad is fine
        got = TOKEN_STATS(logits.clone().requires_grad_(), targets, backend="triton")
    for a, b in zip(got, token_stats_reference(logits, targets), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
