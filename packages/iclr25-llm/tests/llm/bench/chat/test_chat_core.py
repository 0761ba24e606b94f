"""Data model, validation, offline responders, choice_probability, media codecs, registry (acceptance 9, bad input)."""

import math

import numpy as np
import pytest

from iclr25.llm.bench.chat import (
    AudioPart,
    CachedChatModel,
    ChatResponse,
    GenerationConfig,
    ImagePart,
    LogprobsUnavailable,
    Message,
    OfflineChatModel,
    OpenAIChatModel,
    TokenLogprob,
    UnsupportedModality,
    VideoPart,
    chat,
    choice_probability,
    load_chat_model,
    serve_openai,
    summarize_usage,
)
from iclr25.llm.bench.chat.media import decode_png, decode_wav, encode_png, encode_wav
from iclr25.llm.bench.chat.offline import echo, hashed, letter_guesser, scripted

DIST = {"Yes": 0.6, " yes": 0.1, "No": 0.3}
OPTS = {"yes": ["Yes", "yes"], "no": ["No", "no"]}


def test_choice_probability_sums_variants():
    top = [(t, math.log(p)) for t, p in DIST.items()]
    r = ChatResponse("Yes", logprobs=[TokenLogprob("Yes", math.log(0.6), top)])
    p = choice_probability(r, OPTS)
    assert p == pytest.approx({"yes": 0.7, "no": 0.3}, abs=1e-12)
    with pytest.raises(LogprobsUnavailable):
        choice_probability(ChatResponse("Yes"), OPTS)


def test_choice_probability_through_offline_and_http():
    m = OfflineChatModel(echo(), logprobs=DIST)
    cfg = GenerationConfig(max_tokens=1, logprobs=True, top_logprobs=5)
    direct = m.generate([[Message("user", "Yes")]], cfg)[0][0]
    assert choice_probability(direct, OPTS) == pytest.approx({"yes": 0.7, "no": 0.3})
    with serve_openai(m) as srv:
        r = OpenAIChatModel(srv.base_url, "j").generate([[Message("user", "Yes")]], cfg)[0][0]
    assert choice_probability(r, OPTS) == pytest.approx({"yes": 0.7, "no": 0.3})
    assert r.logprobs[0].token == "Yes"
    no_lp = OfflineChatModel(echo()).generate([[Message("user", "Yes")]])[0][0]
    with pytest.raises(LogprobsUnavailable):
        choice_probability(no_lp, OPTS)


def test_bad_input():
    m = OfflineChatModel(echo())
    assert m.generate([]) == []
    with pytest.raises(ValueError, match=r"conversations\[1\] is empty"):
        m.generate([[Message("user", "a")], []])
    with pytest.raises(ValueError, match=r"conversations\[2\]\[0\].role"):
        m.generate([[Message("user", "a")]] * 2 + [[Message("robot", "x")]])
    for kw, pat in (
        ({"max_tokens": 0}, "max_tokens"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0}, "top_p"),
    ):
        with pytest.raises(ValueError, match=pat):
            GenerationConfig(**kw)
    with pytest.raises(ValueError, match="1-D float"):
        AudioPart(np.zeros((2, 100), np.float32), 16000)
    with pytest.raises(ValueError, match="1-D float"):
        AudioPart(np.zeros(100, np.int16), 16000)
    with pytest.raises(ValueError, match="NaN or inf"):
        AudioPart(np.array([0.0, np.nan], np.float32), 16000)
    with pytest.raises(ValueError, match="uint8"):
        ImagePart(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="uint8"):
        ImagePart(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="fps"):
        VideoPart(np.zeros((2, 4, 4, 3), np.uint8), fps=0)
    with pytest.raises(UnsupportedModality, match="audio"):
        m.generate([[Message("user", [AudioPart(np.zeros(10, np.float32), 8000)])]])
    with pytest.raises(ValueError, match="log-prob"):
        m.generate([[Message("user", "a")]], GenerationConfig(logprobs=True))


def test_offline_responders_and_limits():
    conv = [Message("user", "Q: pick one.\nA. red\nB. blue\nC. green")]
    assert OfflineChatModel(letter_guesser(0)).generate([conv] * 1, GenerationConfig(n=8))[0][0].text in "ABC"
    s = scripted([(r"capital of (\w+)", lambda mt, c: f"capital-of-{mt.group(1)}"), ("hello", "hi")], default="?")
    m = OfflineChatModel(s)
    assert chat(m, "what is the capital of France") == "capital-of-France"
    assert chat(m, "hello there") == "hi" and chat(m, "zzz") == "?"
    e = OfflineChatModel(echo())
    r = e.generate([[Message("user", "one two three four five")]], GenerationConfig(max_tokens=2, stop=("five",)))
    assert r[0][0].text == "one two" and r[0][0].finish_reason == "length"
    assert chat(e, "alpha beta STOP gamma", stop=["STOP"]) == "alpha beta "
    h = OfflineChatModel(hashed(["x", "y", "z"]))
    a = h.generate([[Message("user", "q")]], GenerationConfig(n=12))[0]
    assert len({r.text for r in a}) > 1 and [r.sample_index for r in a] == list(range(12))
    assert [r.text for r in a] == [r.text for r in h.generate([[Message("user", "q")]], GenerationConfig(n=12))[0]]
    u = summarize_usage(h.generate([[Message("user", "q w")]] * 3))
    assert u["responses"] == 3 and u["prompt_tokens"] == 6 and u["errors"] == 0


def test_media_codecs():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (9, 13, 3), dtype=np.uint8)
    assert np.array_equal(decode_png(encode_png(img)), img)
    x = (0.9 * np.sin(np.linspace(0, 50, 4000))).astype(np.float32)
    y, sr = decode_wav(encode_wav(x, 8000))
    assert sr == 8000 and np.max(np.abs(y - x)) <= 1.0 / 32767 + 1e-6


def test_png_filters_decode():
    # rows filtered with Sub/Up/Average/Paeth (as other encoders write them) decode to the same pixels
    import struct
    import zlib

    from iclr25.llm.bench.chat.media import _PNG_SIG, _chunk

    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    h, w = 5, 4
    flat = img.reshape(h, w * 3).astype(np.int32)
    raw = []
    for y in range(h):
        ft = y % 5
        prev = flat[y - 1] if y else np.zeros(w * 3, np.int32)
        line = np.zeros(w * 3, np.int32)
        for x_ in range(w * 3):
            a = flat[y, x_ - 3] if x_ >= 3 else 0
            b = prev[x_]
            c = prev[x_ - 3] if x_ >= 3 else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            paeth = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            pred = [0, a, b, (a + b) // 2, paeth][ft]
            line[x_] = (flat[y, x_] - pred) & 0xFF
        raw.append(bytes([ft]) + line.astype(np.uint8).tobytes())
    png = (
        _PNG_SIG
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", zlib.compress(b"".join(raw)))
        + _chunk(b"IEND", b"")
    )
    assert np.array_equal(decode_png(png), img)


def test_load_chat_model_and_protocol(tmp_path):
    from iclr25.llm.bench.chat import ChatModel

    m = load_chat_model("offline:hashed", choices=["p", "q"])
    assert isinstance(m, ChatModel) and m.name == "offline:hashed"
    assert chat(m, "hello") in ("p", "q")
    assert isinstance(CachedChatModel(m, tmp_path / "c.sqlite"), ChatModel)
    o = load_chat_model("openai:http://127.0.0.1:9/v1#judge")
    assert o.base_url == "http://127.0.0.1:9/v1" and o.model == "judge"
    with pytest.raises(ValueError, match="unknown backend"):
        load_chat_model("nope:x")
    with pytest.raises(ValueError, match="<base_url>#<model>"):
        load_chat_model("openai:http://x/v1")
