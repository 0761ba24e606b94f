"""Usability regressions: everyday calls that used to crash deep inside, or silently did the wrong thing."""

import copy
import datetime

import numpy as np
import pytest

from iclr25.llm.bench.chat import (
    AudioPart,
    CachedChatModel,
    GenerationConfig,
    Message,
    OfflineChatModel,
    OpenAIChatModel,
    TransportConfig,
    VideoPart,
    cache_key,
    chat,
    serve_openai,
)
from iclr25.llm.bench.chat.offline import echo, hashed


def _roles(conv, config, i):
    return " | ".join(f"{m.role}:{m.content}" for m in conv)


def test_chat_system_applies_to_a_conversation_prompt():
    m = OfflineChatModel(_roles)
    assert chat(m, "hi", system="S") == "system:S | user:hi"
    # used to drop system= silently when the prompt was a conversation
    assert chat(m, [Message("user", "hi")], system="S") == "system:S | user:hi"
    assert chat(m, [{"role": "user", "content": "hi"}], system="S") == "system:S | user:hi"
    assert chat(m, [Message("user", "hi")]) == "user:hi"
    with pytest.raises(ValueError, match="system"):
        chat(m, [Message("system", "T"), Message("user", "hi")], system="S")


def test_generate_accepts_config_none(tmp_path):
    conv = [[Message("user", "a b")]]
    off = OfflineChatModel(hashed(["x", "y"]))
    ref = off.generate(conv)[0][0].text
    assert off.generate(conv, None)[0][0].text == ref
    assert CachedChatModel(off, tmp_path / "c.sqlite").generate(conv, config=None)[0][0].text == ref
    with serve_openai(off) as srv:
        assert OpenAIChatModel(srv.base_url, "m").generate(conv, None)[0][0].text == ref


def test_cache_key_equal_for_equal_configs(tmp_path):
    m = OfflineChatModel(hashed(["x", "y", "z"]))
    conv = [Message("user", "q")]
    a, b = GenerationConfig(temperature=1, top_p=1), GenerationConfig(temperature=1.0, top_p=1.0)
    assert a == b and cache_key(m, conv, a, 0) == cache_key(m, conv, b, 0)
    CachedChatModel(m, tmp_path / "k.sqlite").generate([conv], a)
    assert CachedChatModel(m, tmp_path / "k.sqlite").generate([conv], b)[0][0].cached


def test_argument_errors_name_the_argument(tmp_path):
    for kw in ({"timeout_s": "3"}, {"timeout_s": None}, {"backoff_initial_s": None}, {"requests_per_minute": "60"}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            TransportConfig(**kw)
    m = OfflineChatModel(echo())
    with pytest.raises(ValueError, match="expiry"):
        CachedChatModel(m, tmp_path / "e.sqlite", expiry="10")
    assert CachedChatModel(m, tmp_path / "e.sqlite", expiry=datetime.timedelta(seconds=5)).expiry == 5
    with pytest.raises(ValueError, match="directory"):
        CachedChatModel(m, tmp_path)
    with pytest.raises(TypeError, match="inner"):
        CachedChatModel("offline:echo", tmp_path / "i.sqlite")
    with pytest.raises(ValueError, match="max_video_frames"):
        OpenAIChatModel("http://127.0.0.1:9/v1", "m", max_video_frames=0)  # used to send no frames at all


def test_non_json_scopes_are_rejected(tmp_path):
    # str() of an object/set differs between processes: the cache would never hit after a restart
    m = OfflineChatModel(echo())
    for bad in (object(), {"tags": {"a", "b"}}):
        with pytest.raises(TypeError, match="scopes"):
            CachedChatModel(m, tmp_path / "s.sqlite", scopes=bad)
    assert CachedChatModel(m, tmp_path / "s.sqlite", scopes={"run": [1, "v2"]}).scopes == {"run": [1, "v2"]}


def test_media_parts_accept_numpy_scalars():
    x = np.zeros(8, np.float32)
    a = AudioPart(x, np.int64(16000))
    assert a.sample_rate == 16000 and type(a.sample_rate) is int
    m = OfflineChatModel(echo(), modalities=("text", "audio", "video"))
    cfg = GenerationConfig()
    assert cache_key(m, [Message("user", [a])], cfg, 0) == cache_key(
        m, [Message("user", [AudioPart(x, 16000)])], cfg, 0
    )
    v = VideoPart(np.zeros((2, 2, 2, 3), np.uint8), fps=np.float32(2.5))
    assert v.fps == 2.5 and type(v.fps) is float
    assert VideoPart(np.zeros((2, 2, 2, 3), np.uint8), fps=30).fps == 30  # python numbers are kept as given
    with pytest.raises(ValueError, match=r"sample_rate.*float"):
        AudioPart(x, 16000.0)


# -- HFChatModel ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2(char_tokenizer):
    """A tiny GPT-2 (learned absolute positions: 64) with a character tokenizer and a chat template."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.set_num_threads(1)
    fast, vocab_size = char_tokenizer
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=64, pad_token_id=0, eos_token_id=1
    )
    return transformers.GPT2LMHeadModel(cfg).eval(), fast


def test_hf_context_edge_and_overflow_error(gpt2):
    from iclr25.llm.bench.chat import HFChatModel

    model, tok = gpt2
    hf = HFChatModel(model, tok, device="cpu", batch_size=2)
    hf._eos = set()  # decode to max_tokens whatever this random model predicts
    full = [Message("user", "x" * 46)]
    assert len(hf.prompt_ids(full)) == 64 == hf.capabilities().context_tokens
    # a prompt that exactly fills the context still gives one token (a judge's max_tokens=1 read-out)
    r = hf.generate([[Message("user", "hi")], full], GenerationConfig(max_tokens=1, logprobs=True, top_logprobs=2))
    assert r[1][0].usage == type(r[1][0].usage)(64, 1) and len(r[1][0].logprobs) == 1
    # prompt + max_tokens = context + 1: the last token is never fed back, so it fits
    r = hf.generate([[Message("user", "x" * 30)]], GenerationConfig(max_tokens=17))
    assert r[0][0].usage.prompt_tokens == 48
    # beyond: a clear error naming the conversation, not an IndexError deep in the embedding
    with pytest.raises(ValueError, match=r"conversations\[1\] has 118 prompt tokens.*context is 64"):
        hf.generate([[Message("user", "hi")], [Message("user", "x" * 100)]], GenerationConfig(max_tokens=3))
    with pytest.raises(ValueError, match=r"conversations\[0\].*max_tokens=18"):
        hf.generate([[Message("user", "x" * 30)]], GenerationConfig(max_tokens=18))


def test_hf_generate_config_none_and_dtype_name(gpt2, monkeypatch):
    import torch

    from iclr25.llm.bench.chat import HFChatModel

    model, tok = gpt2
    hf = HFChatModel(model, tok, device="cpu")
    seen = []

    def spy(rows, config):
        seen.append(config)
        raise KeyError("stop here")

    monkeypatch.setattr(hf, "_batch", spy)
    with pytest.raises(KeyError, match="stop here"):
        hf.generate([[Message("user", "hi")]], None)
    assert seen == [GenerationConfig()]  # None means the default config
    # a dtype name works for a model object as it does for a path (used to fail: "Invalid device string")
    assert HFChatModel(copy.deepcopy(model), tok, device="cpu", dtype="bfloat16").model.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dtype"):
        HFChatModel(copy.deepcopy(model), tok, device="cpu", dtype="float33")
