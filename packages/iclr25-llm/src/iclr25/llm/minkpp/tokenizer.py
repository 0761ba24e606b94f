"""A word-level tokenizer: regex words and punctuation, the most frequent words, and ``<unk>``.

Next to the toolkit's byte and BPE tokenizers (:mod:`iclr25.llm.lm.tokenizers`) it gives small LMs
a per-token difficulty profile closer to that of real LLM tokenizers (most tokens are whole
words), which is the regime Min-K%++ targets. Encoding is lossy: whitespace is dropped and rare
words become ``<unk>``; :meth:`WordTokenizer.decode` joins tokens with single spaces.

Pieces are runs of letters, runs of digits, or single punctuation characters; an apostrophe is
punctuation, so contractions split (``"cat's"`` -> ``cat ' s``). This is the method note's
"regex words/punctuation" tokenizer: on the reproduction's 4 held-out plays, a top-2000 vocabulary
fitted on the 33 training plays leaves 13.8 % ``<unk>`` (note: 13.7 %), whereas keeping
contractions whole (``[A-Za-z]+(?:'[A-Za-z]+)*``, an earlier version) leaves 14.8 %.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import torch

from iclr25.core.io import atomic_open

from .scores import _is_int

__all__ = ["WORD_PATTERN", "WordTokenizer"]

WORD_PATTERN = r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]"
_WORD = re.compile(WORD_PATTERN)
UNK = "<unk>"


class WordTokenizer:
    """Word-level tokenizer with a fixed vocabulary; id 0 is ``<unk>``.

    Parameters
    ----------
    vocab : sequence of str
        Known tokens in id order starting at id 1 (``<unk>`` is prepended).
    lowercase : bool
        Lowercase text before splitting.

    Examples
    --------
    >>> tok = WordTokenizer.train(["to be, or not to be"], vocab_size=5)
    >>> tok.decode(tok.encode("to be or not"))
    'to be <unk> not'
    """

    def __init__(self, vocab: Sequence[str], lowercase: bool = False) -> None:
        # A single str would become a vocabulary of its letters, as in train().
        if isinstance(vocab, (str, bytes)):
            raise TypeError(f"vocab must be a sequence of str tokens; got a single {vocab!r:.40}")
        vocab = list(vocab)
        bad = [w for w in vocab if not isinstance(w, str)]
        if bad:
            raise TypeError(f"vocab must hold str tokens; got {type(bad[0]).__name__} {bad[0]!r}")
        if len(set(vocab)) != len(vocab) or UNK in vocab:
            raise ValueError("vocab must hold distinct tokens and must not contain '<unk>'")
        self.itos = [UNK, *vocab]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.lowercase = bool(lowercase)

    @classmethod
    def train(
        cls, texts: Iterable[str] | Mapping[str, str], vocab_size: int = 2001, lowercase: bool = False
    ) -> WordTokenizer:
        """Keep the ``vocab_size − 1`` most frequent tokens of ``texts`` (ties broken alphabetically).

        Parameters
        ----------
        texts : iterable of str, or a mapping name -> str (its values are the texts, as in
            :func:`~iclr25.llm.minkpp.sample_passages`)
        vocab_size : int >= 2
            Total ids including ``<unk>`` (default: top-2000 words + ``<unk>``).
        lowercase : bool
        """
        if not _is_int(vocab_size) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int >= 2; got {vocab_size!r}")
        vocab_size = int(vocab_size)
        # Iterating a single str would count its characters, a vocabulary of letters.
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"texts must be an iterable of str (e.g. a list of documents); got a single {texts!r:.40}")
        # Iterating a mapping yields its keys: the {title: text} dicts of shakespeare() and
        # split_documents() gave a vocabulary of document titles.
        if isinstance(texts, Mapping):
            texts = texts.values()
        counts: Counter[str] = Counter()
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must hold str; got {type(t).__name__}")
            counts.update(_WORD.findall(t.lower() if lowercase else t))
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls([w for w, _ in ranked[: vocab_size - 1]], lowercase=lowercase)

    @property
    def vocab_size(self) -> int:
        """Number of ids, ``<unk>`` included."""
        return len(self.itos)

    def tokenize(self, text: str) -> list[str]:
        """The regex pieces of ``text`` (before vocabulary lookup)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        return _WORD.findall(text.lower() if self.lowercase else text)

    def encode(self, text: str) -> torch.Tensor:
        """``(n,)`` long tensor of ids; unknown pieces map to 0."""
        return torch.tensor([self.stoi.get(w, 0) for w in self.tokenize(text)], dtype=torch.long)

    def decode(self, ids) -> str:
        """Tokens joined by single spaces."""
        ids = [int(i) for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids)]
        # A negative id would index from the end of the vocabulary (a wrong word, no error).
        bad = [i for i in ids if not 0 <= i < len(self.itos)]
        if bad:
            raise ValueError(f"ids must lie in [0, {len(self.itos)}); got {bad[:5]}")
        return " ".join(self.itos[i] for i in ids)

    def unk_rate(self, text: str) -> float:
        """Fraction of pieces of ``text`` that map to ``<unk>``."""
        ids = self.encode(text)
        return float((ids == 0).float().mean()) if ids.numel() else 0.0

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vocabulary as JSON (atomically: an error mid-write leaves any old file intact)."""
        with atomic_open(path, "w") as fh:
            json.dump({"vocab": self.itos[1:], "lowercase": self.lowercase}, fh)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WordTokenizer:
        """Read a vocabulary written by :meth:`save`."""
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
        return cls(d["vocab"], lowercase=d.get("lowercase", False))

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase})"
