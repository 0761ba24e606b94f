"""Loopback HTTP: equivalence with direct calls, retries, timeouts, media transport (acceptance 1-3, 8)."""

import time

import numpy as np
import pytest

from iclr25.llm.bench.chat import (
    AudioPart,
    ChatRequestError,
    GenerationConfig,
    ImagePart,
    Message,
    OfflineChatModel,
    OpenAIChatModel,
    TextPart,
    TransportConfig,
    UnsupportedModality,
    serve_openai,
)
from iclr25.llm.bench.chat.offline import echo, hashed

CHOICES = [f"answer {k}" for k in range(17)]


def convs(n):
    return [[Message("system", "be brief"), Message("user", f"question number {i}?")] for i in range(n)]


def fast(**kw):
    base = dict(timeout_s=5.0, max_retries=3, backoff_initial_s=0.01, backoff_max_s=0.05, max_concurrency=8)
    base.update(kw)
    return TransportConfig(**base)


def test_loopback_equals_direct_in_order():
    model = OfflineChatModel(hashed(CHOICES, seed=3))
    cs = convs(64)
    direct = [r[0].text for r in model.generate(cs)]
    assert len(set(direct)) > 5  # the check below would be vacuous with constant answers
    with serve_openai(model) as srv:
        remote = OpenAIChatModel(srv.base_url, "offline", transport=fast(max_concurrency=8))
        got = remote.generate(cs)
        assert srv.request_count == 64
        assert remote.check() == ["offline"]
    assert [r[0].text for r in got] == direct
    assert all(r[0].finish_reason == "stop" and r[0].error is None for r in got)


def test_n_samples_over_http_match_direct():
    model = OfflineChatModel(hashed(CHOICES))
    cs, cfg = convs(4), GenerationConfig(n=3)
    direct = [[r.text for r in row] for row in model.generate(cs, cfg)]
    with serve_openai(model) as srv:
        got = OpenAIChatModel(srv.base_url, "m", transport=fast()).generate(cs, cfg)
        assert [[r.text for r in row] for row in got] == direct
        assert srv.request_count == 4
        # emulated n: one request per sample (seeds seed + i), results still [conv][sample]
        got = OpenAIChatModel(srv.base_url, "m", transport=fast(), native_n=False).generate(cs, cfg.replace(seed=5))
        assert srv.request_count == 4 + 12
        assert [[r.sample_index for r in row] for row in got] == [[0, 1, 2]] * 4


def test_retry_on_429_every_third():
    model = OfflineChatModel(hashed(CHOICES))
    cs = convs(30)
    direct = [r[0].text for r in model.generate(cs)]
    with serve_openai(model, fault_plan={"every": 3, "status": 429, "retry_after": 0}) as srv:
        got = OpenAIChatModel(srv.base_url, "m", transport=fast(max_retries=5)).generate(cs)
        assert all(r[0].finish_reason != "error" for r in got)
        assert [r[0].text for r in got] == direct
        assert srv.fault_count > 0
        assert srv.request_count == 30 + srv.fault_count


def test_400_is_not_retried():
    with serve_openai(OfflineChatModel(echo()), fault_plan={"status": 400}) as srv:
        got = OpenAIChatModel(srv.base_url, "m", transport=fast(max_retries=5)).generate(convs(5))
        assert srv.request_count == 5
    assert all(r[0].finish_reason == "error" and "HTTP 400" in r[0].error for r in got)


def test_503_exhausts_retries_record_and_raise():
    with serve_openai(OfflineChatModel(echo()), fault_plan={"first": 10, "status": 503}) as srv:
        client = OpenAIChatModel(srv.base_url, "m", transport=fast(max_retries=2, max_concurrency=1))
        got = client.generate(convs(2))  # 2 convs x 3 attempts = 6 requests, all inside the first 10
        assert srv.request_count == 6
        assert all(r[0].finish_reason == "error" and "503" in r[0].error for r in got)
    with serve_openai(OfflineChatModel(echo()), fault_plan={"first": 10, "status": 503}) as srv:
        client = OpenAIChatModel(srv.base_url, "m", transport=fast(max_retries=2, on_error="raise"))
        with pytest.raises(ChatRequestError, match="503"):
            client.generate(convs(2))


def test_retry_after_header_is_honoured_over_backoff():
    waits = []
    with serve_openai(OfflineChatModel(echo()), fault_plan={"first": 1, "status": 429, "retry_after": 7}) as srv:
        client = OpenAIChatModel(srv.base_url, "m", transport=fast(backoff_initial_s=100.0, backoff_max_s=100.0))
        client._sleep = waits.append
        assert client.generate(convs(1))[0][0].finish_reason == "stop"
    assert waits == [7.0]


def test_timeout_yields_error_quickly():
    with serve_openai(OfflineChatModel(echo()), fault_plan={"delay_s": 2.0}) as srv:
        client = OpenAIChatModel(srv.base_url, "m", transport=fast(timeout_s=0.3, max_retries=1))
        t0 = time.perf_counter()
        r = client.generate(convs(1))[0][0]
        elapsed = time.perf_counter() - t0
    assert r.finish_reason == "error" and "timeout" in r.error
    assert elapsed < 1.5


def test_malformed_json_is_an_error_quoting_the_body():
    with serve_openai(OfflineChatModel(echo()), fault_plan={"malformed": True}) as srv:
        r = OpenAIChatModel(srv.base_url, "m", transport=fast()).generate(convs(1))[0][0]
        assert srv.request_count == 1
    assert r.finish_reason == "error" and "not json: injected fault" in r.error


def test_connection_refused_is_recorded():
    srv = serve_openai(OfflineChatModel(echo()))
    url = srv.base_url
    srv.close()
    client = OpenAIChatModel(url, "m", transport=fast(max_retries=1, timeout_s=1.0))
    r = client.generate(convs(1))[0][0]
    assert r.finish_reason == "error" and "connection" in r.error
    with pytest.raises(ConnectionError, match="cannot reach"):
        client.check()


def _dominant_hz(x, sr):
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    k = int(np.argmax(spec))
    # parabolic interpolation of the log-magnitude peak: sub-bin frequency
    a, b, c = np.log(spec[k - 1 : k + 2] + 1e-12)
    return (k + 0.5 * (a - c) / (a - 2 * b + c)) * sr / len(x)


def test_audio_and_image_transport():
    seen = {}

    def responder(conv, cfg, i):
        for p in conv[-1].parts:
            if isinstance(p, AudioPart):
                x, sr = p.array()
                seen["hz"], seen["sr"] = _dominant_hz(x, sr), sr
            if isinstance(p, ImagePart):
                seen["img"] = p.array()
        return "ok"

    sr = 16000
    t = np.arange(sr) / sr
    audio = (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    img = np.random.default_rng(0).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    model = OfflineChatModel(responder, modalities=("text", "image", "audio"))
    with serve_openai(model) as srv:
        for fmt in ("input_audio", "audio_url"):
            client = OpenAIChatModel(srv.base_url, "m", transport=fast(), audio_format=fmt)
            msg = Message("user", [TextPart("what pitch?"), AudioPart(audio, sr), ImagePart(img)])
            assert client.generate([[msg]])[0][0].text == "ok"
            assert seen["sr"] == sr and abs(seen["hz"] - 440.0) < 1.0
            assert seen["img"].dtype == np.uint8 and np.array_equal(seen["img"], img)


def test_unsupported_modality_raises_before_any_request():
    with serve_openai(OfflineChatModel(echo())) as srv:
        client = OpenAIChatModel(srv.base_url, "m", transport=fast())
        text_only = OpenAIChatModel(
            srv.base_url, "m", transport=fast(), capabilities=OfflineChatModel(echo()).capabilities()
        )
        img = ImagePart(np.zeros((2, 2, 3), np.uint8))
        with pytest.raises(UnsupportedModality, match="image"):
            text_only.generate([[Message("user", "hi")], [Message("user", [img])]])
        assert srv.request_count == 0
        # the server-side model refuses too: a 400, not retried
        r = client.generate([[Message("user", [img])]])[0][0]
        assert r.finish_reason == "error" and "400" in r.error and srv.request_count == 1


def test_non_loopback_bind_needs_opt_in():
    with pytest.raises(PermissionError, match="allow_non_loopback"):
        serve_openai(OfflineChatModel(echo()), host="0.0.0.0")


def test_api_key_sent_but_never_in_repr_or_results(monkeypatch):
    seen = {}
    model = OfflineChatModel(echo())
    with serve_openai(model) as srv:
        client = OpenAIChatModel(srv.base_url, "m", api_key="sk-secret-123", transport=fast())
        seen["h"] = client._headers()
        r = client.generate(convs(1))[0][0]
    assert seen["h"]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in repr(client) and "sk-secret" not in str(r.to_dict())


@pytest.mark.parametrize("field", [{"max_tokens": 0}, {"max_completion_tokens": 0}, {"n": 0}])
def test_zero_max_tokens_or_n_is_a_400_not_the_default(field):
    import json
    import urllib.error
    import urllib.request

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **field}
    with serve_openai(OfflineChatModel(echo())) as srv:
        req = urllib.request.Request(
            srv.base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)  # answered with 256 tokens / 1 sample before
    assert err.value.code == 400
    expected = "n must be an int >= 1" if "n" in field else "max_tokens must be a positive int"
    assert expected in err.value.read().decode()


def test_generation_config_rejects_bools_for_counts():
    for kw in ({"max_tokens": True}, {"n": True}, {"top_logprobs": True}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            GenerationConfig(**kw)
