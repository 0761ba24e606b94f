"""CachedChatModel: hits over HTTP, key contents, modes, expiry, corruption, errors, processes (acceptance 5)."""

import json
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from iclr25.llm.bench.chat import (
    AudioPart,
    CachedChatModel,
    GenerationConfig,
    Message,
    OfflineChatModel,
    OpenAIChatModel,
    TextPart,
    TransportConfig,
    serve_openai,
)
from iclr25.llm.bench.chat.offline import hashed

CHOICES = [f"c{k}" for k in range(11)]


def convs(n, tag="q"):
    return [[Message("user", f"{tag} {i}")] for i in range(n)]


class Counting:
    """An offline model that counts the conversations it is asked for."""

    def __init__(self, fail=False):
        self.inner = OfflineChatModel(hashed(CHOICES), modalities=("text", "audio"))
        self.name, self.calls, self.fail = "counting", 0, fail

    def capabilities(self):
        return self.inner.capabilities()

    def cache_identity(self):
        return {"backend": "counting"}

    def generate(self, conversations, config=None, *, progress=False):
        config = config or GenerationConfig()
        self.calls += len(conversations)
        out = self.inner.generate(conversations, config)
        if self.fail:
            out = [[r.replace(finish_reason="error", error="boom", text="") for r in row] for row in out]
        return out


def rows(path):
    with sqlite3.connect(path) as con:
        return con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def test_second_run_makes_no_http_requests(tmp_path):
    with serve_openai(OfflineChatModel(hashed(CHOICES))) as srv:
        tr = TransportConfig(max_concurrency=4, timeout_s=5)
        cached = CachedChatModel(OpenAIChatModel(srv.base_url, "m", transport=tr), tmp_path / "c.sqlite")
        first = cached.generate(convs(20))
        assert srv.request_count == 20 and not any(r[0].cached for r in first)
        second = cached.generate(convs(20))
        assert srv.request_count == 20
        assert all(r[0].cached for r in second)
        assert [r[0].text for r in second] == [r[0].text for r in first]
        # transport changes (timeout, concurrency) keep the keys: still no requests
        tr2 = TransportConfig(max_concurrency=1, timeout_s=9)
        again = CachedChatModel(OpenAIChatModel(srv.base_url, "m", transport=tr2), tmp_path / "c.sqlite")
        assert all(r[0].cached for r in again.generate(convs(20))) and srv.request_count == 20


def test_key_contents(tmp_path):
    model = Counting()
    c = CachedChatModel(model, tmp_path / "k.sqlite")
    base = GenerationConfig()
    k0 = c.key(convs(1)[0], base, 0)
    assert c.key(convs(1)[0], base.replace(temperature=0.7), 0) != k0
    assert c.key(convs(1)[0], base, 1) != k0
    assert c.key(convs(1)[0], base.replace(n=4), 0) == k0  # the sample index identifies a sample
    sr = 16000
    t = np.arange(sr) / sr
    a1 = Message("user", [TextPart("pitch?"), AudioPart(np.sin(2 * np.pi * 440 * t).astype(np.float32), sr)])
    a2 = Message("user", [TextPart("pitch?"), AudioPart(np.sin(2 * np.pi * 441 * t).astype(np.float32), sr)])
    assert c.key([a1], base, 0) != c.key([a2], base, 0)
    assert CachedChatModel(model, tmp_path / "k.sqlite", scopes={"run": 2}).key(convs(1)[0], base, 0) != k0
    c.generate([[a1]])
    assert model.calls == 1
    c.generate([[a1]])
    c.generate([[a2]])
    assert model.calls == 2


def test_n3_stores_three_and_reuses(tmp_path):
    model = Counting()
    c = CachedChatModel(model, tmp_path / "n.sqlite")
    out = c.generate(convs(1), GenerationConfig(n=3))
    assert rows(tmp_path / "n.sqlite") == 3 and len(c) == 3
    again = c.generate(convs(1), GenerationConfig(n=3))
    assert model.calls == 1 and [r.text for r in again[0]] == [r.text for r in out[0]]
    assert [r.sample_index for r in again[0]] == [0, 1, 2]


def test_modes(tmp_path):
    p = tmp_path / "m.sqlite"
    ro_model = Counting()
    ro = CachedChatModel(ro_model, p, mode="readonly")
    ro.generate(convs(3))
    assert list(tmp_path.iterdir()) == [] and len(ro) == 0  # readonly creates no file, table or WAL
    ro.generate(convs(3))
    assert ro_model.calls == 6
    rw_model = Counting()
    CachedChatModel(rw_model, p).generate(convs(3))
    assert rows(p) == 3
    before = sqlite3.connect(p).execute("SELECT created FROM responses ORDER BY key").fetchall()
    ref_model = Counting()
    out = CachedChatModel(ref_model, p, mode="refresh").generate(convs(3))
    assert ref_model.calls == 3 and not any(r[0].cached for r in out)
    after = sqlite3.connect(p).execute("SELECT created FROM responses ORDER BY key").fetchall()
    assert all(a[0] > b[0] for a, b in zip(after, before, strict=True))
    ro2 = CachedChatModel(ro_model, p, mode="readonly")
    assert all(r[0].cached for r in ro2.generate(convs(3)))
    out = ro2.generate(convs(2, tag="new"))  # misses go to the model and are not stored
    assert not any(r[0].cached for r in out) and rows(p) == 3 and len(ro2) == 3
    ro2.close()


def test_expiry_and_corruption(tmp_path):
    p = tmp_path / "e.sqlite"
    model = Counting()
    c = CachedChatModel(model, p, expiry=0.05)
    c.generate(convs(2))
    time.sleep(0.1)
    c.generate(convs(2))
    assert model.calls == 4  # expired rows are misses
    model = Counting()
    p = tmp_path / "corrupt.sqlite"
    c2 = CachedChatModel(model, p)
    c2.generate(convs(2))
    k = c2.key(convs(2)[0], GenerationConfig(), 0)
    with sqlite3.connect(p) as con:
        con.execute("UPDATE responses SET value='{not json' WHERE key=?", (k,))
    out = c2.generate(convs(2))
    assert model.calls == 2 + 1 and not out[0][0].cached and out[1][0].cached
    value = sqlite3.connect(p).execute("SELECT value FROM responses WHERE key=?", (k,)).fetchone()[0]
    assert json.loads(value)["text"] == out[0][0].text  # rewritten


def test_errors_are_not_cached(tmp_path):
    p = tmp_path / "err.sqlite"
    model = Counting(fail=True)
    c = CachedChatModel(model, p)
    assert c.generate(convs(2))[0][0].finish_reason == "error"
    c.generate(convs(2))
    assert model.calls == 4 and rows(p) == 0


_WRITER = """
import sys
from iclr25.llm.bench.chat import CachedChatModel, Message, OfflineChatModel
from iclr25.llm.bench.chat.offline import hashed
m = CachedChatModel(OfflineChatModel(hashed([f"c{k}" for k in range(11)])), sys.argv[1])
for i in range(int(sys.argv[3])):
    m.generate([[Message("user", f"{sys.argv[2]}-{i} {j}")] for j in range(3)])
"""


def test_two_processes_write_concurrently(tmp_path):
    p = str(tmp_path / "mp.sqlite")
    CachedChatModel(OfflineChatModel(hashed(CHOICES)), p)  # create the table first
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, p, tag, "15"]) for tag in ("a", "b")]
    assert [pr.wait(120) for pr in procs] == [0, 0]
    con = sqlite3.connect(p)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    values = [json.loads(v) for (v,) in con.execute("SELECT value FROM responses")]
    assert len(values) == 2 * 15 * 3 and all(v["text"] in CHOICES for v in values)


def test_bad_mode(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        CachedChatModel(Counting(), tmp_path / "x.sqlite", mode="write")
