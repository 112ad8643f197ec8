"""The rate-limit windows the test APIs count requests in (:mod:`tests_common.http_server`): a rolling
window (HubSpot's TEN_SECONDLY_ROLLING and daily limit, Salesforce's rolling 24 hours, the Contacts
API's second) and a fixed one (Braze's, which resets at the epoch second ``X-RateLimit-Reset`` names).
Refused requests use up nothing. The server's request threads share a window: every method holds its
lock."""

from __future__ import annotations

import threading
from collections import deque


class RollingWindow:
    """At most ``limit`` admitted requests in any ``seconds`` long window ending now."""

    def __init__(self, limit: int, seconds: float):
        self.limit, self.seconds = limit, seconds
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def admit(self, now: float) -> bool:
        with self._lock:
            while self._times and self._times[0] <= now - self.seconds:
                self._times.popleft()
            if len(self._times) >= self.limit:
                return False
            self._times.append(now)
            return True

    def remaining(self, now: float) -> int:
        with self._lock:
            return max(0, self.limit - sum(1 for t in self._times if t > now - self.seconds))

    def retry_after(self, now: float) -> float:
        """Seconds until the oldest admitted request leaves the window."""
        with self._lock:
            return max(0.0, self._times[0] + self.seconds - now) if self._times else 0.0


class FixedWindow:
    """At most ``limit`` requests per window of ``seconds`` starting at multiples of it."""

    def __init__(self, limit: int, seconds: float):
        self.limit, self.seconds = limit, seconds
        self._start = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def admit(self, now: float) -> bool:
        with self._lock:
            start = now - now % self.seconds
            if start != self._start:
                self._start, self._count = start, 0
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def remaining(self, now: float) -> int:
        with self._lock:
            return self.limit - self._count if now - now % self.seconds == self._start else self.limit

    def reset_at(self, now: float) -> float:
        return now - now % self.seconds + self.seconds
