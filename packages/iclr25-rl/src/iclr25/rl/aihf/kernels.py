"""Fused logsumexp-Bellman Triton kernel for batched tabular soft value iteration.

Only imported when :func:`iclr25.core.triton.triton_available` is true. One program owns one reward
hypothesis b and runs every backup in registers: the (S, A, S') transition tile is loaded once,
Q = r + γ·P·V and the log-sum-exp over actions are fused, and the new V (indexed by s) is moved to the
s' layout with a one-hot reduction instead of a global-memory round trip. Matches
:func:`~iclr25.rl.aihf.reference.batched_soft_vi_reference`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["batched_soft_vi_triton"]


@triton.jit
def _soft_vi_kernel(p_ptr, r_ptr, v_ptr, c_ptr, S, A, iters, BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr):
    b = tl.program_id(0)
    gamma = tl.load(c_ptr)  # in r's dtype: a Python float argument reaches a GPU kernel as fp32
    temp = tl.load(c_ptr + 1)
    s = tl.arange(0, BLOCK_S)
    a = tl.arange(0, BLOCK_A)
    t = tl.arange(0, BLOCK_S)
    s3 = s[:, None, None]
    a3 = a[None, :, None]
    t3 = t[None, None, :]
    ok3 = (s3 < S) & (a3 < A) & (t3 < S)
    P = tl.load(p_ptr + (s3 * A + a3) * S + t3, mask=ok3, other=0.0)
    ok2 = (s[:, None] < S) & (a[None, :] < A)
    r = tl.load(r_ptr + b * S * A + s[:, None] * A + a[None, :], mask=ok2, other=0.0)
    eye = s[:, None] == t[None, :]
    v_t = tl.zeros([BLOCK_S], dtype=r.dtype)  # V(s') = 0, in the s' layout
    v_s = tl.zeros([BLOCK_S], dtype=r.dtype)
    for _ in range(iters):
        q = r + gamma * tl.sum(P * v_t[None, None, :], axis=2)
        z = tl.where(ok2, q / temp, float("-inf"))
        m = tl.max(z, axis=1)
        # as torch.logsumexp: an infinite max is replaced by 0, so a row of -inf gives -inf, not NaN
        m = tl.where((s < S) & (tl.abs(m) != float("inf")), m, 0.0)
        # padding rows (s >= S) sum to 0; log(1) keeps them finite before they are zeroed
        tot = tl.where(s < S, tl.sum(tl.exp(z - m[:, None]), axis=1), 1.0)
        v_s = tl.where(s < S, temp * (m + tl.log(tot)), 0.0)
        # select, not multiply: 0 * (-inf) off the diagonal would be NaN
        v_t = tl.sum(tl.where(eye, v_s[:, None], 0.0), axis=0)
    tl.store(v_ptr + b * S + s, v_s, mask=s < S)


def batched_soft_vi_triton(P: torch.Tensor, r: torch.Tensor, gamma: float, temp: float, iters: int) -> torch.Tensor:
    """Triton version of :func:`~iclr25.rl.aihf.reference.batched_soft_vi_reference`; returns V (B, S)."""
    B, S, A = r.shape
    P = P.contiguous().to(r.dtype)
    r = r.contiguous()
    V = torch.empty(B, S, dtype=r.dtype, device=r.device)
    consts = torch.tensor([float(gamma), float(temp)], dtype=r.dtype, device=r.device)
    # next_power_of_2(0) is 0, and a block needs at least one lane (S = 0 or A = 0 is legal)
    bs, ba = max(triton.next_power_of_2(S), 1), max(triton.next_power_of_2(A), 1)
    _soft_vi_kernel[(B,)](P, r, V, consts, S, A, int(iters), BLOCK_S=bs, BLOCK_A=ba)
    return V
