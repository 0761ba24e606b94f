"""Shared scaffolding for the chat tests: a character-level tokenizer with a chat template (no download)."""

import pytest

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 ?.,!<>/"


@pytest.fixture(scope="module")
def char_tokenizer():
    """A fast tokenizer with one token per character in ``CHARS`` plus ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2.

    Returns ``(tokenizer, vocab_size)``; the tokenizer carries ``CHAT_TEMPLATE``. Skips the requesting tests when
    ``transformers``/``tokenizers`` are not installed.
    """
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for ch in CHARS:
        vocab.setdefault(ch, len(vocab))
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    # Splitting on the empty pattern isolates every character, so the word-level model sees one char per word.
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = tokenizers.decoders.Fuse()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast, len(vocab)
