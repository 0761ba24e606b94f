"""The shared benchmark timer: call counts, per-call arithmetic on a scripted clock, sync, errors."""

import subprocess
import sys

import pytest
import torch

from iclr25.core.bench import Timing, speedup, synchronize, time_call


class ScriptedClock:
    """A clock that returns the given readings in order, so per-repeat times are known exactly."""

    def __init__(self, readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0)


def test_warmup_and_timed_calls_are_counted():
    calls = []
    t = time_call(lambda: calls.append(1), warmup=3, repeats=4, number=5)
    assert len(calls) == 3 + 4 * 5
    assert len(t.seconds) == 4 and all(s >= 0 for s in t.seconds)
    assert t.peak_mib is None


def test_per_call_seconds_median_and_min_from_a_scripted_clock():
    # repeats of 3 calls lasting 6, 3 and 12 clock units -> 2, 1, 4 per call
    clock = ScriptedClock([0.0, 6.0, 10.0, 13.0, 20.0, 32.0])
    t = time_call(lambda: None, warmup=0, repeats=3, number=3, clock=clock)
    assert t.seconds == (2.0, 1.0, 4.0)
    assert t.median == 2.0 and t.min == 1.0 and t.per_second == 0.5
    assert clock.readings == []  # exactly two readings per repeat, none during warm-up


def test_median_of_even_repeats_is_the_midpoint():
    assert Timing((1.0, 4.0, 2.0, 3.0)).median == 2.5


def test_speedup_is_the_ratio_of_medians():
    slow, fast = Timing((3.0, 4.0, 5.0)), Timing((1.0, 2.0, 9.0))
    assert speedup(slow, fast) == 2.0
    assert speedup(fast, slow) == 0.5


def test_speedup_rejects_zero_time_and_non_timings():
    with pytest.raises(ValueError, match="median time of 0"):
        speedup(Timing((1.0,)), Timing((0.0,)))
    with pytest.raises(TypeError, match="ours must be a Timing"):
        speedup(Timing((1.0,)), 0.5)


def test_zero_time_call_reports_infinite_rate():
    assert Timing((0.0,)).per_second == float("inf")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"warmup": -1}, "warmup must be an int >= 0"),
        ({"repeats": 0}, "repeats must be an int >= 1"),
        ({"number": 0}, "number must be an int >= 1"),
        ({"number": 2.0}, "number must be an int >= 1"),
        ({"repeats": True}, "repeats must be an int >= 1"),
        ({"device": "gpu0"}, "device must be a torch device or a string"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, match):
    calls = []
    with pytest.raises(ValueError, match=match):
        time_call(lambda: calls.append(1), **kwargs)
    assert calls == []  # rejected before any call


def test_non_callable_and_bad_device_type():
    with pytest.raises(TypeError, match="fn must be callable"):
        time_call(3)
    with pytest.raises(TypeError, match=r"device must be a torch\.device, a string or None"):
        synchronize(0)


def test_cpu_device_never_synchronises_cuda(monkeypatch):
    def boom(*_):
        raise AssertionError("synchronised CUDA for a CPU benchmark")

    monkeypatch.setattr(torch.cuda, "synchronize", boom)
    synchronize("cpu")
    synchronize(torch.device("cpu"))
    synchronize(None)
    t = time_call(lambda: None, device="cpu", memory=True)
    assert t.peak_mib is None


def test_cuda_device_synchronises_around_each_repeat(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda dev=None: events.append("sync"))
    time_call(lambda: events.append("call"), device="cuda", warmup=1, repeats=2, number=2)
    assert events == ["call", "sync", "call", "call", "sync", "sync", "call", "call", "sync"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_peak_memory_counts_the_timed_allocations():
    dev = torch.device("cuda")
    t = time_call(lambda: torch.empty(64 * 2**20, dtype=torch.uint8, device=dev), device=dev, memory=True)
    assert t.peak_mib is not None and t.peak_mib >= 64


def test_import_stays_torch_free():
    code = "import sys, iclr25.core.bench; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
