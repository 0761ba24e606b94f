import numpy as np
import pytest

from iclr25.llm.bench.chat.media import encode_png
from iclr25.llm.bench.videoniah import VideoDecodeError, load_video, sample_frames, sample_indices, synthetic_haystack


@pytest.mark.parametrize("source", ["texture", "shapes", "noise"])
def test_haystack_shape_and_determinism(source):
    a = synthetic_haystack(6, (16, 20), source=source, seed=2)
    b = synthetic_haystack(6, (16, 20), source=source, seed=2)
    assert a.shape == (6, 16, 20, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="T must be"):
        synthetic_haystack(1, (16, 16))


def test_load_npy_npz_folder(tmp_path):
    v = synthetic_haystack(5, (12, 10), source="noise", seed=0)
    np.save(tmp_path / "v.npy", v)
    np.savez(tmp_path / "v.npz", frames=v)
    d = tmp_path / "frames"
    d.mkdir()
    for i, f in enumerate(v):
        (d / f"{i:04d}.png").write_bytes(encode_png(f))
    for p in (tmp_path / "v.npy", tmp_path / "v.npz", d):
        np.testing.assert_array_equal(load_video(p), v)


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not an array")
    with pytest.raises(VideoDecodeError, match=r"bad\.npy"):
        load_video(bad)
    np.save(tmp_path / "wrong.npy", np.zeros((3, 4), np.float32))
    with pytest.raises(VideoDecodeError, match=r"wrong\.npy"):
        load_video(tmp_path / "wrong.npy")
    with pytest.raises(FileNotFoundError):
        load_video(tmp_path / "missing.npy")
    mp4 = tmp_path / "clip.mp4"
    mp4.write_bytes(b"\x00" * 32)
    try:
        import av  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install av"):
            load_video(mp4)
    else:
        with pytest.raises(VideoDecodeError, match=r"clip\.mp4"):
            load_video(mp4)


def test_sampling():
    idx = sample_indices(120, 16)
    np.testing.assert_array_equal(idx, np.unique(np.linspace(0, 119, 16).round().astype(int)))
    assert len(sample_indices(10, 9)) == 9  # duplicates from rounding are removed, order kept
    with pytest.warns(UserWarning, match="all 10"):
        assert len(sample_indices(10, 50)) == 10
    with pytest.raises(ValueError, match="k"):
        sample_indices(10, 0)
    np.testing.assert_array_equal(sample_indices(10, strategy="fps", fps=2.0, rate=1.0), [0, 2, 4, 6, 8])
    v = synthetic_haystack(8, (8, 8), source="noise")
    sub, ix = sample_frames(v, 3)
    np.testing.assert_array_equal(sub, v[ix])
