import io
import os
import random

import numpy as np
import pytest
import torch

from iclr25.core.device import DeviceUnavailableError, cpu_threads, parse_device, resolve_device
from iclr25.core.progress import progress, progress_enabled
from iclr25.core.seed import seed_everything, torch_generator


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("auto", ("auto", None)),
        ("cpu", ("cpu", None)),
        ("cuda", ("cuda", None)),
        ("cuda:3", ("cuda", 3)),
        (" CPU ", ("cpu", None)),
    ],
)
def test_parse_device_accepts(spec, expected):
    assert parse_device(spec) == expected


@pytest.mark.parametrize("spec", ["gpu", "cuda:", "cuda:-1", "cpu:0", "", "tpu"])
def test_parse_device_rejects_with_the_accepted_forms(spec):
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        parse_device(spec)


def test_cpu_threads_sets_and_restores_even_on_error():
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    with cpu_threads(target):
        assert torch.get_num_threads() == target
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="boom"), cpu_threads(target, device="cpu"):
        assert torch.get_num_threads() == target
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_cpu_threads_leaves_accelerator_work_alone_and_checks_n():
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    with cpu_threads(target, device=torch.device("cuda")):  # only the device type is read: no GPU needed
        assert torch.get_num_threads() == before
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n must be a positive int"), cpu_threads(bad):
            pass


def test_parse_device_type_error():
    with pytest.raises(TypeError, match="device must be a string"):
        parse_device(0)


def test_resolve_cpu_and_auto():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is absent")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(DeviceUnavailableError, match="CUDA is not available"):
        resolve_device("cuda:0")


@pytest.mark.gpu
def test_cuda_index_out_of_range():
    with pytest.raises(DeviceUnavailableError, match="only"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


def test_cuda_index_checked_against_the_visible_devices(monkeypatch):
    # a CPU-only stand-in for the gpu test above: two visible devices, the current one is 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("auto").type == "cuda"
    with pytest.raises(DeviceUnavailableError, match=r"'cuda:2'.*only 2 CUDA device"):
        resolve_device("cuda:2")


def _draw():
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_seed_everything_repeats_all_three_generators():
    seed_everything(123)
    first = _draw()
    seed_everything(123)
    assert _draw() == first
    seed_everything(124)
    assert _draw() != first


@pytest.mark.parametrize(("seed", "exc"), [(-1, ValueError), (2**32, ValueError), (1.5, TypeError), (True, TypeError)])
def test_seed_everything_rejects(seed, exc):
    with pytest.raises(exc, match="seed"):
        seed_everything(seed)


def test_deterministic_flag_sets_torch_mode(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    benchmark = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = True
        seed_everything(0, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.backends.cudnn.benchmark
        # without it, deterministic mode makes cuBLAS matmuls raise on CUDA
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] in (":4096:8", ":16:8")
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark = benchmark


def test_torch_generator_is_independent_of_global_state():
    a = torch.rand(3, generator=torch_generator(7))
    torch.manual_seed(999)
    b = torch.rand(3, generator=torch_generator(7))
    assert torch.equal(a, b)


@pytest.mark.parametrize(("seed", "exc"), [(-1, ValueError), (2**64, ValueError), (1.5, TypeError), (True, TypeError)])
def test_torch_generator_rejects(seed, exc):
    with pytest.raises(exc, match="seed"):
        torch_generator(seed)


def test_torch_generator_accepts_numpy_ints():
    expected = torch.rand(2, generator=torch_generator(5))
    assert torch.equal(torch.rand(2, generator=torch_generator(np.int64(5))), expected)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(("flag", "shown"), [(None, True), ("0", True), ("false", True), ("1", False), ("yes", False)])
def test_progress_draws_a_bar_on_a_terminal_unless_silenced(monkeypatch, flag, shown):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    if flag is None:
        monkeypatch.delenv("ICLR25_NO_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("ICLR25_NO_PROGRESS", flag)
    assert progress_enabled() is shown
    assert list(progress(range(5), desc="steps", file=terminal)) == [0, 1, 2, 3, 4]
    assert ("steps" in terminal.getvalue()) is shown


def test_progress_is_a_passthrough_when_disabled(monkeypatch):
    monkeypatch.setenv("ICLR25_NO_PROGRESS", "1")
    assert not progress_enabled()
    assert list(progress(range(4), desc="x")) == [0, 1, 2, 3]


def test_progress_disabled_without_tty(monkeypatch):
    monkeypatch.delenv("ICLR25_NO_PROGRESS", raising=False)
    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))  # noqa: SIM115 - closed by gc
    assert not progress_enabled()


def test_compute_dtype_lifts_half_precision_and_keeps_float64():
    from iclr25.core.device import compute_dtype

    assert compute_dtype() == torch.float32
    assert compute_dtype(torch.zeros(1, dtype=torch.bfloat16), torch.float16) == torch.float32
    assert compute_dtype(torch.zeros(1, dtype=torch.int64)) == torch.float32
    assert compute_dtype(torch.zeros(1), torch.zeros(1, dtype=torch.float64)) == torch.float64
    assert compute_dtype(torch.float64, torch.bfloat16) == torch.float64
