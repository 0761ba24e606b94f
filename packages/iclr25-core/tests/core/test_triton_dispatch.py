"""The dispatch helper, and a tiny Triton kernel checked against its torch reference.

The iclr25.core.testing plugin sets TRITON_INTERPRET=1 on machines without CUDA before this
module is imported, so the @triton.jit kernel below runs in Triton's CPU interpreter.
"""

import pytest
import torch

from iclr25.core.triton import (
    Backend,
    BackendOp,
    BackendUnavailableError,
    interpret_mode,
    triton_available,
    triton_reasons,
)


def scaled_add_reference(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y


if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + alpha * y, mask=mask)

    def scaled_add_triton(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        _scaled_add_kernel[(triton.cdiv(n, 16),)](x, y, out, n, alpha, BLOCK=16)
        return out

else:  # pragma: no cover - triton is a torch dependency on Linux

    def scaled_add_triton(x, y, alpha):
        raise AssertionError("never selected without triton")


def _float32_only(x, y, alpha):
    return [] if x.dtype == torch.float32 else [f"only float32 is supported, got {x.dtype}"]


OP = BackendOp(
    "scaled_add",
    [
        Backend("triton", scaled_add_triton, supports=_float32_only, uses_triton=True),
        Backend("reference", scaled_add_reference),
    ],
)


@pytest.mark.triton
def test_kernel_matches_reference_in_interpreter():
    if torch.cuda.is_available():
        pytest.skip("interpreter check is for CPU-only machines; the gpu test covers CUDA")
    assert interpret_mode(), "the iclr25.core.testing plugin should have set TRITON_INTERPRET=1"
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(37, generator=gen), torch.randn(37, generator=gen)  # 37: a ragged last block
    ran = []

    def spy(*args):  # proves the kernel, not the reference, produced the result
        ran.append(True)
        return scaled_add_triton(*args)

    op = BackendOp(OP.name, [Backend("triton", spy, supports=_float32_only, uses_triton=True), OP.backends[1]])
    got = op(x, y, 0.5, backend="triton")
    assert ran == [True]
    torch.testing.assert_close(got, scaled_add_reference(x, y, 0.5), rtol=0, atol=1e-6)


@pytest.mark.gpu
def test_kernel_matches_reference_on_cuda():
    gen = torch.Generator(device="cuda").manual_seed(0)
    x, y = torch.randn(1000, device="cuda", generator=gen), torch.randn(1000, device="cuda", generator=gen)
    assert OP.select(x, y, 0.5).name == "triton"
    torch.testing.assert_close(OP(x, y, 0.5), scaled_add_reference(x, y, 0.5))


def test_auto_never_picks_the_interpreter_on_cpu():
    x = torch.zeros(4)
    assert OP.select(x, x, 1.0).name == "reference"
    assert torch.equal(OP(x + 1, x + 2, 0.5), torch.full((4,), 2.0))


def test_call_runs_the_selected_backend_with_the_arguments():
    calls = []

    def positive_only(x, **kwargs):
        return [] if x > 0 else ["x <= 0"]

    op = BackendOp(
        "pick",
        [
            Backend("fast", lambda *a, **k: calls.append(("fast", a, k)), supports=positive_only),
            Backend("slow", lambda *a, **k: calls.append(("slow", a, k))),
        ],
    )
    op(1, scale=2)
    op(-1, scale=3)
    op(1, scale=4, backend="slow")
    assert calls == [("fast", (1,), {"scale": 2}), ("slow", (-1,), {"scale": 3}), ("slow", (1,), {"scale": 4})]
    with pytest.raises(BackendUnavailableError, match="backend 'fast' cannot run this input: x <= 0"):
        op(-1, backend="fast")
    assert op.names == ("fast", "slow") and "pick" in repr(op)


def test_explicit_backend_that_refuses_lists_reasons():
    x = torch.zeros(4, dtype=torch.float64)
    if triton_available() and interpret_mode():
        with pytest.raises(BackendUnavailableError, match="only float32"):
            OP(x, x, 1.0, backend="triton")
    else:
        with pytest.raises(BackendUnavailableError, match="triton"):
            OP(x, x, 1.0, backend="triton")


def test_unknown_backend_and_bad_construction():
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="'auto' or one of"):
        OP(x, x, 1.0, backend="cuda")
    with pytest.raises(ValueError, match="at least one"):
        BackendOp("empty", [])
    with pytest.raises(ValueError, match="unique"):
        BackendOp("dup", [Backend("a", abs), Backend("a", abs)])


def test_auto_with_no_acceptable_backend():
    op = BackendOp("never", [Backend("a", abs, supports=lambda *a: ["nope"])])
    with pytest.raises(BackendUnavailableError, match="a: nope"):
        op(1)


def test_triton_reasons_for_cpu_tensors_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    reasons = triton_reasons(torch.zeros(1))
    assert reasons and ("CUDA" in reasons[0] or "not installed" in reasons[0])
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    if triton_available():
        assert triton_reasons(torch.zeros(1)) == []
        assert "auto never picks" in triton_reasons(torch.zeros(1), allow_interpreter=False)[0]


def test_fp32_scalar_launcher_rounds_only_python_floats():
    from iclr25.core.testing import Fp32ScalarLauncher

    seen = {}

    class Kernel:
        def __getitem__(self, grid):
            def run(*args, **kwargs):
                seen.update(grid=grid, args=args, kwargs=kwargs)

            return run

    t = torch.zeros(1)
    Fp32ScalarLauncher(Kernel())[(3,)](0.1, 7, t, True, BLOCK=0.1)
    assert seen["grid"] == (3,)
    assert seen["args"][0] == float(torch.tensor(0.1, dtype=torch.float32)) != 0.1  # fp32, as on a GPU
    assert seen["args"][1:3] == (7, t) and seen["args"][3] is True  # ints, tensors, bools untouched
    assert seen["kwargs"] == {"BLOCK": 0.1}  # constexpr keywords pass as given
