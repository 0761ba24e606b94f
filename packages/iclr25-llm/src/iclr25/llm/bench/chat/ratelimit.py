"""Client-side rate limiting: thread-safe token buckets for requests and tokens per minute."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """Blocks callers so that requests and tokens stay within per-minute budgets.

    Each budget is a token bucket refilled continuously at ``rate / 60`` per second. The bucket holds at
    most ``burst`` requests (default: one minute's budget, the window servers usually enforce) and
    starts full; a smaller ``burst`` spreads requests evenly (``burst=1``: one every ``60 / rpm`` s).

    Parameters
    ----------
    requests_per_minute, tokens_per_minute : budgets (None = unlimited).
    burst : bucket capacity in requests (tokens scale with it: ``tokens_per_minute * burst / rpm``,
        or one minute's tokens when rpm is unset).
    clock, sleep : injectable time source and sleep (tests use a simulated clock).
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for k, v in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if v is not None and not v > 0:
                raise ValueError(f"{k} must be > 0 or None, got {v!r}")
        if burst is not None and not burst >= 1:
            raise ValueError(f"burst must be >= 1 request or None, got {burst!r}")
        self.requests_per_minute, self.tokens_per_minute = requests_per_minute, tokens_per_minute
        frac = 1.0 if burst is None or requests_per_minute is None else burst / requests_per_minute
        self._req_cap = None if requests_per_minute is None else requests_per_minute * frac
        self._tok_cap = None if tokens_per_minute is None else tokens_per_minute * frac
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._req, self._tok = self._req_cap, self._tok_cap
        self._last = clock()

    def _refill(self, now: float) -> None:
        dt = max(0.0, now - self._last)
        self._last = now
        if self._req is not None:
            self._req = min(self._req_cap, self._req + dt * self.requests_per_minute / 60.0)
        if self._tok is not None:
            self._tok = min(self._tok_cap, self._tok + dt * self.tokens_per_minute / 60.0)

    def acquire(self, n_tokens: int = 0) -> float:
        """Wait until one request (and ``n_tokens`` tokens) fit the budgets; returns the time waited (s).

        A single request larger than the token bucket is capped at the bucket size, so it waits for a full
        bucket instead of forever.
        """
        if n_tokens < 0:
            raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
        waited = 0.0
        while True:
            with self._lock:
                self._refill(self._clock())
                need_tok = 0.0 if self._tok is None else min(float(n_tokens), self._tok_cap)
                wait = 0.0
                if self._req is not None and self._req < 1.0:
                    wait = max(wait, (1.0 - self._req) * 60.0 / self.requests_per_minute)
                if self._tok is not None and self._tok < need_tok:
                    wait = max(wait, (need_tok - self._tok) * 60.0 / self.tokens_per_minute)
                if wait <= 0.0:
                    if self._req is not None:
                        self._req -= 1.0
                    if self._tok is not None:
                        self._tok -= need_tok
                    return waited
            # sleep outside the lock so other threads can refill/check; a tiny floor avoids float stalls
            self._sleep(max(wait, 1e-6))
            waited += wait
