import json
import math
import os
import stat

import numpy as np
import pytest
import torch

from iclr25.core.io import (
    atomic_open,
    atomic_write_text,
    ensure_writable_dir,
    load_json,
    load_safetensors,
    save_json,
    save_safetensors,
    to_jsonable,
)


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "results.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["results.json"]


def test_failed_write_of_a_new_file_leaves_nothing(tmp_path):
    with pytest.raises(TypeError, match="cannot convert"):
        save_json(tmp_path / "results.json", {"ok": 1, "bad": object()})
    with pytest.raises(RuntimeError), atomic_open(tmp_path / "model.bin", "wb") as handle:
        handle.write(b"half")
        raise RuntimeError("crash mid-write")
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_atomic_write_gives_the_permissions_of_a_plain_write(tmp_path):
    old_umask = os.umask(0o027)
    try:
        (tmp_path / "plain.txt").write_text("x")
        written = atomic_write_text(tmp_path / "atomic.txt", "x")
    finally:
        os.umask(old_umask)
    # mkstemp's 0600 must not leak into results.json: same bits as open() under this umask
    assert stat.S_IMODE(written.stat().st_mode) == stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == 0o640
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    kept.chmod(0o604)
    save_json(kept, {"new": True})
    assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and load_json(kept) == {"new": True}


def test_atomic_open_mode_checked(tmp_path):
    with pytest.raises(ValueError, match="mode"), atomic_open(tmp_path / "x", mode="a"):
        pass


def test_json_roundtrip_of_numpy_torch_and_nonfinite(tmp_path):
    doc = {"a": np.float32(1.5), "b": torch.tensor([1, 2]), "c": (1, 2), "d": math.nan, "e": -math.inf, "p": tmp_path}
    save_json(tmp_path / "r.json", doc)
    back = load_json(tmp_path / "r.json")
    assert back == {"a": 1.5, "b": [1, 2], "c": [1, 2], "d": "nan", "e": "-inf", "p": str(tmp_path)}
    json.loads((tmp_path / "r.json").read_text())  # strict JSON


def test_to_jsonable_rejects_unknown_objects():
    with pytest.raises(TypeError, match="object"):
        to_jsonable(object())


def test_safetensors_roundtrip(tmp_path):
    tensors = {"w": torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), "i": torch.arange(5)}
    save_safetensors(tensors, tmp_path / "m.safetensors", metadata={"paper": "x"})
    back = load_safetensors(tmp_path / "m.safetensors")
    assert set(back) == {"w", "i"}
    assert torch.equal(back["w"], tensors["w"]) and torch.equal(back["i"], tensors["i"])


def test_save_safetensors_type_error(tmp_path):
    with pytest.raises(TypeError, match="mapping"):
        save_safetensors([torch.zeros(1)], tmp_path / "x")


def test_ensure_writable_dir(tmp_path):
    assert ensure_writable_dir(tmp_path / "new" / "deeper").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        ensure_writable_dir(blocker)
    with pytest.raises(PermissionError, match="not writable"):
        ensure_writable_dir(blocker / "sub")
