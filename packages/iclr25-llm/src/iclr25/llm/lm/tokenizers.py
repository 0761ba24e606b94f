"""Byte-level tokenizers: raw bytes and a deterministic pure-Python byte-level BPE.

Both map text to a 1-D ``torch.long`` tensor and back, and both round-trip every UTF-8 string
(``decode(encode(s)) == s``), because every id ultimately stands for a byte sequence.
"""

from __future__ import annotations

import heapq
import itertools
import json
import operator
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import torch

__all__ = ["PRETOKENIZE_PATTERN", "BPETokenizer", "ByteTokenizer", "check_ids"]

# GPT-2's pre-split restricted to ASCII classes, so it needs only the standard ``re`` module; every
# character falls into exactly one alternative, hence the pieces concatenate back to the input.
PRETOKENIZE_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+"""
_PRETOKENIZE = re.compile(PRETOKENIZE_PATTERN)


def check_ids(ids, vocab_size: int, name: str = "ids") -> torch.Tensor:
    """Validate token ids: integers in ``[0, vocab_size)``; return them as a ``torch.long`` tensor.

    Parameters
    ----------
    ids : tensor or sequence of int
        Token ids of any shape.
    vocab_size : int
        Size of the vocabulary; the largest valid id is ``vocab_size - 1``.
    name : str
        Argument name used in error messages.

    Raises
    ------
    ValueError
        If the ids are not integers or fall outside ``[0, vocab_size - 1]``.
    """
    if not isinstance(ids, torch.Tensor):
        try:
            ids = torch.as_tensor(ids)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"{name} must be integer token ids in [0, {vocab_size - 1}]; got {ids!r}") from exc
        if ids.numel() == 0:  # torch.as_tensor([]) is float32, but an empty sequence holds no bad id
            ids = ids.long()
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(
            f"{name} must be integer token ids in [0, {vocab_size - 1}] (max id {vocab_size - 1}); "
            f"got dtype {ids.dtype}"
        )
    if ids.numel():
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= vocab_size:
            raise ValueError(
                f"{name} must lie in [0, {vocab_size - 1}] (max id {vocab_size - 1}); got min {lo}, max {hi}"
            )
    return ids.long()


def _as_text(text: str | bytes, name: str = "text") -> str:
    if isinstance(text, bytes):
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name} bytes must be valid UTF-8: {exc}") from exc
    if not isinstance(text, str):
        raise TypeError(f"{name} must be str or bytes; got {type(text).__name__}")
    return text


class ByteTokenizer:
    """Bytes as tokens: ids 0..255 are the UTF-8 bytes, plus optional specials.

    Parameters
    ----------
    add_bos, add_eos : bool
        Prepend BOS (id 256) / append EOS (id 257) in :meth:`encode`. When either is set the
        vocabulary also holds PAD (258) and ``vocab_size`` is 259, otherwise 256.
    """

    BOS = 256
    EOS = 257
    PAD = 258

    def __init__(self, add_bos: bool = False, add_eos: bool = False) -> None:
        self.add_bos = bool(add_bos)
        self.add_eos = bool(add_eos)

    @property
    def vocab_size(self) -> int:
        """256 without specials, 259 with them."""
        return 259 if (self.add_bos or self.add_eos) else 256

    def encode(self, text: str | bytes) -> torch.Tensor:
        """Encode text (UTF-8) or raw bytes to a ``(n,)`` long tensor of ids."""
        if isinstance(text, str):
            data = text.encode("utf-8")
        elif isinstance(text, bytes | bytearray):
            data = bytes(text)
        else:
            raise TypeError(f"text must be str or bytes; got {type(text).__name__}")
        ids = torch.frombuffer(bytearray(data), dtype=torch.uint8).long() if data else torch.empty(0, dtype=torch.long)
        parts = []
        if self.add_bos:
            parts.append(torch.tensor([self.BOS]))
        parts.append(ids)
        if self.add_eos:
            parts.append(torch.tensor([self.EOS]))
        return torch.cat(parts) if len(parts) > 1 else ids

    def decode_bytes(self, ids) -> bytes:
        """Ids to raw bytes; special ids are dropped."""
        ids = check_ids(ids, self.vocab_size).flatten()
        return bytes(ids[ids < 256].to(torch.uint8).tolist())

    def decode(self, ids) -> str:
        """Ids (any shape, flattened) to text; invalid UTF-8 becomes U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_bytes(self, i: int) -> bytes:
        """The bytes one id stands for (empty for specials)."""
        check_ids([i], self.vocab_size, "i")
        return bytes([i]) if i < 256 else b""

    def __repr__(self) -> str:
        return f"ByteTokenizer(add_bos={self.add_bos}, add_eos={self.add_eos})"


def _merge_word(word: tuple[int, ...], pair: tuple[int, int], new_id: int) -> tuple[int, ...]:
    out = []
    i, n = 0, len(word)
    a, b = pair
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


class BPETokenizer:
    """Byte-level BPE: 256 byte symbols plus learned merges (new id ``256 + rank``).

    Create one with :meth:`train` or :meth:`load`. Encoding pre-splits text with
    :data:`PRETOKENIZE_PATTERN`, then applies merges in rank order inside each piece.

    Parameters
    ----------
    merges : sequence of (int, int)
        The merge table in rank order; merge ``r`` creates id ``256 + r``.
    """

    def __init__(self, merges: Sequence[tuple[int, int]]) -> None:
        if isinstance(merges, str | bytes) or not isinstance(merges, Iterable):
            raise ValueError(f"merges must be a sequence of (int, int) pairs; got {type(merges).__name__}")
        vocab: list[bytes] = [bytes([i]) for i in range(256)]
        checked: list[tuple[int, ...]] = []
        for r, m in enumerate(merges):
            try:  # operator.index accepts integers only: a float or a string is a malformed table
                pair = tuple(operator.index(x) for x in m)
            except TypeError:
                pair = ()
            if len(pair) != 2 or not all(0 <= x < 256 + r for x in pair):
                raise ValueError(f"merges[{r}] must be a pair of ids < {256 + r}; got {m!r}")
            checked.append(pair)
            vocab.append(vocab[pair[0]] + vocab[pair[1]])
        merges = checked
        self.merges: list[tuple[int, int]] = merges  # type: ignore[assignment]
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.vocab = vocab
        self._cache: dict[str, tuple[int, ...]] = {}

    @property
    def vocab_size(self) -> int:
        """``256 + len(merges)``."""
        return 256 + len(self.merges)

    @classmethod
    def train(
        cls,
        texts: Iterable[str] | Mapping[str, str] | str | bytes,
        vocab_size: int = 512,
        min_frequency: int = 2,
        seed: int = 0,
    ) -> BPETokenizer:
        """Learn merges until ``vocab_size`` ids exist or no pair occurs ``min_frequency`` times.

        Pairs are counted on the table of distinct pre-split pieces weighted by frequency (not on
        the raw stream), and updated incrementally after each merge, so 256 merges over 5 MB of
        text take seconds. Ties in pair frequency go to the lexicographically smallest pair of
        ids, so the result is a pure function of the input.

        Parameters
        ----------
        texts : str, bytes, iterable of str, or mapping
            Training text(s); for a mapping such as ``{title: text}`` (what
            :func:`~iclr25.llm.lm.data.shakespeare` returns) the values are the texts.
        vocab_size : int
            Target vocabulary size, at least 256.
        min_frequency : int
            Stop when the most frequent pair occurs fewer times than this.
        seed : int
            Accepted for API symmetry; training is deterministic and does not use randomness.
        """
        if not isinstance(vocab_size, int) or vocab_size < 256:
            raise ValueError(f"vocab_size must be an int >= 256; got {vocab_size!r}")
        if not isinstance(min_frequency, int) or min_frequency < 1:
            raise ValueError(f"min_frequency must be an int >= 1; got {min_frequency!r}")
        if isinstance(texts, str | bytes):
            texts = [texts]
        elif isinstance(texts, Mapping):  # iterating a dict would train on its keys (the titles)
            texts = texts.values()
        counts: Counter[str] = Counter()
        for t in texts:
            counts.update(_PRETOKENIZE.findall(_as_text(t, "texts")))
        if not counts:
            raise ValueError("texts is empty: BPE training needs at least one non-empty text")
        words = [tuple(w.encode("utf-8")) for w in counts]
        freqs = list(counts.values())
        pair_counts: defaultdict[tuple[int, int], int] = defaultdict(int)
        where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
        for wi, (w, f) in enumerate(zip(words, freqs, strict=True)):
            for p in itertools.pairwise(w):
                pair_counts[p] += f
                where[p].add(wi)
        # max-heap of (-count, a, b) with lazy invalidation: stale entries are skipped on pop, so
        # ties resolve to the smallest (a, b) and each merge costs only the words it touches
        heap = [(-c, a, b) for (a, b), c in pair_counts.items()]
        heapq.heapify(heap)
        merges: list[tuple[int, int]] = []
        while 256 + len(merges) < vocab_size and heap:
            neg, a, b = heapq.heappop(heap)
            best = (a, b)
            if pair_counts.get(best, 0) != -neg:
                continue
            if -neg < min_frequency:
                break
            new_id = 256 + len(merges)
            merges.append(best)
            touched: set[tuple[int, int]] = set()
            for wi in sorted(where.pop(best, ())):
                w, f = words[wi], freqs[wi]
                nw = _merge_word(w, best, new_id)
                words[wi] = nw
                # only pairs next to a merge site change; pairs new to this word all contain new_id
                before = Counter(itertools.pairwise(w))
                after = Counter(itertools.pairwise(nw))
                for p, c in before.items():
                    d = after.get(p, 0) - c
                    if d:
                        pair_counts[p] += d * f
                        touched.add(p)
                for p, c in after.items():
                    if p not in before:
                        pair_counts[p] += c * f
                        where[p].add(wi)
                        touched.add(p)
            pair_counts.pop(best, None)
            touched.discard(best)
            for p in touched:
                c = pair_counts.get(p, 0)
                if c > 0:
                    heapq.heappush(heap, (-c, p[0], p[1]))
                else:
                    pair_counts.pop(p, None)
        return cls(merges)

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        hit = self._cache.get(piece)
        if hit is not None:
            return hit
        word = tuple(piece.encode("utf-8"))
        while len(word) > 1:
            ranked = [(self.ranks.get(p, -1), p) for p in itertools.pairwise(word)]
            ranked = [rp for rp in ranked if rp[0] >= 0]
            if not ranked:
                break
            r, p = min(ranked)
            word = _merge_word(word, p, 256 + r)
        if len(self._cache) < 200_000:
            self._cache[piece] = word
        return word

    def encode(self, text: str | bytes) -> torch.Tensor:
        """Encode text to a ``(n,)`` long tensor of ids in ``[0, vocab_size)``."""
        text = _as_text(text)
        out: list[int] = []
        for piece in _PRETOKENIZE.findall(text):
            out.extend(self._encode_piece(piece))
        return torch.tensor(out, dtype=torch.long)

    def decode_bytes(self, ids) -> bytes:
        """Ids (any shape, flattened) to the bytes they stand for."""
        ids = check_ids(ids, self.vocab_size).flatten().tolist()
        return b"".join(self.vocab[i] for i in ids)

    def decode(self, ids) -> str:
        """Ids to text; invalid UTF-8 (a partial character) becomes U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_bytes(self, i: int) -> bytes:
        """The bytes one id stands for."""
        check_ids([i], self.vocab_size, "i")
        return self.vocab[i]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the merge table as JSON (``{"type": "byte-bpe", "merges": [[a, b], ...]}``)."""
        from iclr25.core.io import atomic_write_text

        doc = {
            "type": "byte-bpe",
            "version": 1,
            "pattern": PRETOKENIZE_PATTERN,
            "merges": [list(m) for m in self.merges],
        }
        atomic_write_text(path, json.dumps(doc))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BPETokenizer:
        """Read a table written by :meth:`save`."""
        with open(path, encoding="utf-8") as fh:
            try:
                doc = json.load(fh)
            except ValueError as exc:  # JSONDecodeError or UnicodeDecodeError
                raise ValueError(f"{path} is not a byte-bpe tokenizer file (not UTF-8 JSON: {exc})") from exc
        if not isinstance(doc, dict) or doc.get("type") != "byte-bpe" or "merges" not in doc:
            raise ValueError(f"{path} is not a byte-bpe tokenizer file (expected type 'byte-bpe' with 'merges')")
        if doc.get("pattern", PRETOKENIZE_PATTERN) != PRETOKENIZE_PATTERN:
            raise ValueError(f"{path} was trained with a different pre-split pattern: {doc['pattern']!r}")
        if not isinstance(doc["merges"], list):
            raise ValueError(f"{path}: 'merges' must be a list of [a, b] id pairs; got {type(doc['merges']).__name__}")
        try:
            return cls(doc["merges"])
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"
