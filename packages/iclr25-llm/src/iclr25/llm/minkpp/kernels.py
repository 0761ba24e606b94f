"""Triton kernel: fused log-softmax statistics over the vocabulary in one streaming pass.

One program per (batch · position) row walks the vocabulary in blocks and keeps four running
scalars relative to the running maximum ``m``: ``Z = Σ e^{z−m}``, ``A = Σ e^{z−m}(z−m)`` and
``B = Σ e^{z−m}(z−m)²``. When the maximum grows by ``d = m_old − m_new ≤ 0`` they rescale as
``Z ← e^d Z``, ``A ← e^d (A + dZ)``, ``B ← e^d (B + 2dA + d²Z)`` (the online-softmax update extended
to the first two moments). At the end, with ``c = z − m``, ``log p = c − log Z``, so

    ell = z_target − m − log Z,   mu = A/Z − log Z,   var = B/Z − (A/Z)²

(the variance of ``log p`` equals the variance of the logits under ``p``). The ``(rows, V)``
log-probability tensor is never written. Forward only.

Import guarded: without Triton the kernel is not defined and :func:`token_stats_triton` raises
``RuntimeError``. Set ``TRITON_INTERPRET=1`` before importing this module to run the kernel on CPU
tensors (slow; used by the tests).
"""

from __future__ import annotations

import torch

from iclr25.core.triton import triton_available

__all__ = ["token_stats_triton"]

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _token_stats_kernel(
        z_ptr, t_ptr, ell_ptr, mu_ptr, var_ptr, V, T, stride_outer, stride_inner, BLOCK_V: tl.constexpr
    ):
        row = tl.program_id(0).to(tl.int64)
        base = z_ptr + (row // T) * stride_outer + (row % T) * stride_inner
        cols = tl.arange(0, BLOCK_V)
        m = -float("inf")
        Z = 0.0
        A = 0.0
        B = 0.0
        for start in range(0, V, BLOCK_V):
            idx = start + cols
            z = tl.load(base + idx, mask=idx < V, other=-float("inf")).to(tl.float32)
            bm = tl.max(z, axis=0)
            m_new = tl.maximum(m, bm)
            # All-(-inf) prefix: keep the shift finite so no inf − inf appears.
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            live = z != -float("inf")
            c = tl.where(live, z - m_safe, 0.0)
            e = tl.where(live, tl.exp(c), 0.0)
            # e^d is already 0 in fp32 at d = −256, so the clamp changes nothing but keeps d·d·Z and 2·d·A
            # finite when the old maximum is ~1e20 below the new one (a block of finfo.min masks before
            # the real maximum): the old sums then vanish instead of becoming 0 · inf = NaN.
            d = tl.maximum(tl.where(m == -float("inf"), 0.0, m - m_safe), -256.0)
            alpha = tl.where(m == -float("inf"), 0.0, tl.exp(d))
            B = alpha * (B + 2.0 * d * A + d * d * Z) + tl.sum(e * c * c, axis=0)
            A = alpha * (A + d * Z) + tl.sum(e * c, axis=0)
            Z = alpha * Z + tl.sum(e, axis=0)
            m = m_new
        log_z = tl.log(Z)
        a = A / Z
        tgt = tl.load(t_ptr + row)
        zt = tl.load(base + tgt).to(tl.float32)
        tl.store(ell_ptr + row, zt - m - log_z)
        tl.store(mu_ptr + row, a - log_z)
        tl.store(var_ptr + row, tl.maximum(B / Z - a * a, 0.0))


def token_stats_triton(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused ``(ell, mu, var)``; same contract as :func:`.reference.token_stats_reference`.

    Parameters
    ----------
    logits : (..., V) float tensor (fp32, fp16 or bf16; accumulated in fp32)
    targets : (...) integer tensor

    Returns
    -------
    ell, mu, var : (...) float32 tensors
    """
    if not triton_available():
        raise RuntimeError("triton is not installed (pip install 'iclr25-core[triton]')")
    V = logits.shape[-1]
    lead = logits.shape[:-1]
    # Rows are addressed as (outer, inner) with two strides, so the shifted view logits[:, :-1] of a
    # (B, T, V) tensor is read in place: flattening it to (B·(T−1), V) would copy all of it.
    inner = lead[-1] if lead else 1
    if logits.numel() == 0:
        return tuple(torch.empty(lead, device=logits.device, dtype=torch.float32) for _ in range(3))
    z = logits.reshape(-1, inner, V)
    if z.stride(-1) != 1:
        z = z.contiguous()
    t = targets.reshape(-1).to(device=z.device, dtype=torch.int64).contiguous()
    rows = z.shape[0] * inner
    out = [torch.empty(rows, device=z.device, dtype=torch.float32) for _ in range(3)]
    block = min(4096, triton.next_power_of_2(V))
    _token_stats_kernel[(rows,)](z, t, *out, V, inner, z.stride(0), z.stride(1), BLOCK_V=block)
    return tuple(o.reshape(lead) for o in out)
