"""KV-cache calling convention shared by TinyLlama and Hugging Face causal LMs.

transformers 5.x renamed the cache argument and output field from ``past_key_values`` to
``cache`` (the old name still works there, with a FutureWarning, until its removal); TinyLlama
and transformers 4.x use ``past_key_values``. Callers ask the model which one it takes.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn

__all__ = ["cache_kwarg", "returned_cache"]


def cache_kwarg(model: nn.Module) -> str:
    """The keyword ``model.forward`` takes its KV cache under: ``"cache"`` or ``"past_key_values"``."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # builtins / C extensions without a signature
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The KV cache in a model output, under whichever name the model returned it."""
    fields = getattr(out, "keys", lambda: ())()
    return out["cache"] if "cache" in fields else out.past_key_values
