"""iclr25.llm.arb — ARB-LLM: Alternating Refined Binarizations for Large Language Models.

Li et al., ICLR 2025, arXiv `2410.03129 <https://arxiv.org/abs/2410.03129>`_.

1-bit post-training quantization. BiLLM binarizes each weight group once (μ = mean,
α = mean|W − μ|, B = sign(W − μ)); ARB refines μ, α and B alternately until the error stops
falling; ARB-X fits μ/α to the output error ``tr(R S Rᵀ)`` with ``S = XᵀX/N``; ARB-RC replaces
the mean by row and column scales ``Ŵ = diag(α) B diag(β)``. The partition is BiLLM's (salient
columns by Hessian saliency at order 2, a magnitude split of the rest, optionally of the salient
columns too: the column-group bitmap) with GPTQ error feedback, layer by layer::

    W ─► 128-col blocks ─► salient cols (k search) + |w| split (81 quantiles) ─► binarize() per group
                                                                   │
                                       GPTQ feedback ◄── Ŵ_block ◄─┘      (layer-sequential calibration)
"""

from .binarize import METHODS, BinarizationResult, binarize, nearest_pair, output_error, sign
from .layer import BinarizedLinear
from .packed import PackedBinaryLinear, PackedBinaryWeight, pack_groups, packed_gemv
from .pipeline import ARBReport, arb_quantize_model, billm_quantize_model, pbllm_quantize_model
from .quantizer import ARBConfig, ARBQuantizer, BlockResult, LayerResult, block_bits, pbllm_quantize
from .search import threshold_search

__all__ = [
    "METHODS",
    "ARBConfig",
    "ARBQuantizer",
    "ARBReport",
    "BinarizationResult",
    "BinarizedLinear",
    "BlockResult",
    "LayerResult",
    "PackedBinaryLinear",
    "PackedBinaryWeight",
    "arb_quantize_model",
    "billm_quantize_model",
    "binarize",
    "block_bits",
    "nearest_pair",
    "output_error",
    "pack_groups",
    "packed_gemv",
    "pbllm_quantize",
    "pbllm_quantize_model",
    "sign",
    "threshold_search",
]
