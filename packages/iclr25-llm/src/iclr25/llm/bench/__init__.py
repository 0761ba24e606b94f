"""iclr25.llm.bench — LLM benchmarks on one shared model-access layer.

``iclr25.llm.bench.chat`` is the layer every benchmark here uses to talk to a model under test or a
judge (a local Hugging Face model, an OpenAI-compatible server, or a deterministic offline model).
Subpackages are imported on first use.
"""

from iclr25.core.lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, ["chat", "videoniah"])
