"""Fault injection of the fake LLM server: which chat requests fail and how (scripted, by
rule, at random, over the server's own rate limit, no quota, a rejected key), which replies
are held back, and the record of every request with the fault it got.

``FaultInjection`` is a part of ``FakeLLMServer``: its knobs (``fault_rate``, ``rpm_limit``
...) are the server's attributes, set by its constructor and by tests, and its state is
guarded by the server's lock.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fake_llm_wire import rate_limit_headers


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: float | None = None  # seconds, for "429" (and any other status, if given)
    over_limit: bool = False          # refused by the server's own rate limiter


@dataclass
class Recorded:
    api: str           # "anthropic" | "openai" | "anthropic-batch" | "openai-batch" | "files"
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    fault: str | None = None
    at: float = field(default_factory=time.monotonic)
    held: bool = False  # held by hold_replies_after(): not answered before release


class FaultInjection:
    _lock: threading.Lock

    def _init_faults(self, seed: int) -> None:
        """The state of fault injection; the knobs (``burst`` ...) must be set already."""
        self._faults: deque[Fault] = deque()
        self._rng = random.Random(seed)
        self._bucket = self.burst
        self._bucket_at = time.monotonic()
        self._hold_after: int | None = None  # see hold_replies_after()
        self._let_through = 0
        self._released = threading.Event()

    # -- scripting ----------------------------------------------------------------------

    def enqueue(self, *faults: str | Fault) -> None:
        with self._lock:
            self._faults.extend(f if isinstance(f, Fault) else Fault(f) for f in faults)

    def hold_replies_after(self, n: int) -> None:
        """Answer the next ``n`` chat requests; hold later ones until release_replies()."""
        with self._lock:
            self._hold_after, self._let_through = n, 0
            self._released.clear()

    def release_replies(self) -> None:
        with self._lock:
            self._hold_after = None
            self._released.set()

    def set_rpm_limit(self, rpm: float) -> None:
        """Enforce ``rpm`` requests per minute from now on (the bucket keeps what it holds,
        up to the new size); the rate-limit headers say the new limit."""
        with self._lock:
            self._refill_bucket(time.monotonic())
            self.rpm_limit = rpm
            self.burst = rpm / 60.0 * self._burst_seconds
            self._bucket = min(self._bucket, self.burst)

    # -- decisions (called from handler threads) ----------------------------------------

    def _next_fault(self, api: str, user: str) -> Fault | None:
        if self.no_quota and api in ("anthropic", "openai"):
            return Fault("no_quota")
        if self.reject_key and api in ("anthropic", "openai"):
            return Fault("401")
        if self.fault_rule is not None and (kind := self.fault_rule(api, user)):
            return Fault(kind)
        with self._lock:
            if self._faults:
                return self._faults.popleft()
            if self.rpm_limit:
                rate = self.rpm_limit / 60.0
                self._refill_bucket(time.monotonic())
                if self._bucket < 1.0:
                    wait = max(1, int((1.0 - self._bucket) / rate + 0.999))
                    return Fault("429", retry_after=float(wait), over_limit=True)
                self._bucket -= 1.0
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return Fault(self._rng.choice(self.fault_kinds))
        return None

    def _refill_bucket(self, now: float) -> None:
        """Called with the lock held."""
        if self.rpm_limit:
            self._bucket = min(self.burst, self._bucket
                               + (now - self._bucket_at) * self.rpm_limit / 60.0)
        self._bucket_at = now

    def _rate_headers(self, api: str) -> dict[str, str]:
        """The rate-limit headers of ``api``'s wire format (see ``rate_limit_headers``)."""
        if not (self.rate_limit_headers and self.rpm_limit):
            return {}
        with self._lock:
            self._refill_bucket(time.monotonic())
            limit, remaining = self.rpm_limit, max(0, int(self._bucket))
            reset = max(0.0, (self.burst - self._bucket) / (limit / 60.0))
        return rate_limit_headers(api, limit, remaining, reset)

    def _should_hold(self) -> bool:
        with self._lock:
            if self._hold_after is None:
                return False
            if self._let_through < self._hold_after:
                self._let_through += 1
                return False
            return True
