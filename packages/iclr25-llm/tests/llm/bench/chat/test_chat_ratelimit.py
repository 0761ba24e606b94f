"""RateLimiter: simulated clock budgets, thread safety, one real-time check (acceptance 4)."""

import threading
import time

import pytest

from iclr25.llm.bench.chat import RateLimiter


class FakeClock:
    def __init__(self):
        self.t = 0.0
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            return self.t

    def sleep(self, d):
        with self.lock:
            self.t += d
        time.sleep(0)  # let other threads run


def test_120_requests_at_60_rpm_take_a_minute():
    clk = FakeClock()
    lim = RateLimiter(60, clock=clk, sleep=clk.sleep)
    stamps = []
    for _ in range(120):
        lim.acquire()
        stamps.append(clk())
    assert 59.0 <= stamps[-1] <= 61.0
    assert stamps[59] == 0.0  # one minute's budget is available at once (bucket starts full)


def test_token_budget():
    clk = FakeClock()
    lim = RateLimiter(tokens_per_minute=1000, clock=clk, sleep=clk.sleep)
    for _ in range(30):
        lim.acquire(100)  # 3000 tokens at 1000/min, 1000 available at once: 2 minutes
    assert 119.0 <= clk() <= 121.0


def test_threads_never_exceed_budget():
    clk = FakeClock()
    rpm = 60
    lim = RateLimiter(rpm, burst=5, clock=clk, sleep=clk.sleep)
    stamps, lock = [], threading.Lock()

    def worker():
        for _ in range(50):
            lim.acquire()
            with lock:
                stamps.append(clk())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stamps) == 400
    stamps.sort()
    # in [0, t]: at most burst + rate * t acquisitions (token bucket bound), for every t
    for k, t in enumerate(stamps):
        assert k + 1 <= 5 + rpm / 60.0 * t + 1e-6


def test_real_time_spacing():
    lim = RateLimiter(1200, burst=1)  # 20 per second, evenly spaced
    t0 = time.perf_counter()
    for _ in range(12):
        lim.acquire()
    assert time.perf_counter() - t0 >= 0.5


def test_bad_arguments():
    with pytest.raises(ValueError, match="requests_per_minute"):
        RateLimiter(0)
    with pytest.raises(ValueError, match="n_tokens"):
        RateLimiter(10).acquire(-1)
