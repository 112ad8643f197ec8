"""How fast one delivering partition may send: records per second and requests per second.

The delivery core (:mod:`spark_jobs.sinks.core`) gives each delivering partition its share of the
sync-wide limits (:func:`spark_jobs.jobs.delivery.resolve`); the classes here keep one share, for all
the partition's threads.

* :class:`RateLimiter`, a token bucket: ``rate_limit`` records per second, and ``requests_per_second``
  when the destination's window is unknown (a bucket of one request: even spacing).
* :class:`RequestWindow`, when the destination documents the rolling window it counts requests over
  (``requests_window``, HubSpot's 10 s): a window's whole allowance may go at once. Evenly spaced
  requests waste the window's head — the first requests of a sync wait their turn although the API
  would take them — which costs a whole window's time over a sync (issue 34's whole-job figure).

Example::

    >>> window = RequestWindow(rate=4.75, window=10.0)  # one partition's share of 95 per 10 s
    >>> window.limit
    47
    >>> with window.slot():  # hold one of the 47 while the request is out
    ...     pass
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from contextlib import AbstractContextManager, contextmanager
from typing import Callable, Iterator

from spark_jobs.contract.destinations import DeliveryPolicy


class RateLimiter:
    """Token bucket shared by a partition's threads: on average at most ``rate`` records (or requests)
    per second.

    The bucket starts empty and holds at most ``burst`` tokens (default: one second's worth), so the
    limit holds from the first batch and an idle spell does not buy a burst bigger than that. A
    bucket of requests holds one (``burst=1``): without a known window, a second's worth saved up could
    be added to some window's whole allowance (at 95 % of 100 per 10 s, 104.5 requests in a window,
    and a 429 that costs the window's 10 s)."""

    def __init__(self, rate: float, burst: float | None = None):
        if rate <= 0:
            raise ValueError(f"rate_limit must be positive, got {rate}")
        self.rate = float(rate)
        self.burst = self.rate if burst is None else float(burst)
        self.tokens = 0.0
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self, n: int) -> None:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate) - n
            self.last = now
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait:
            time.sleep(wait)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """One request's turn (the bucket needs no word when it is answered)."""
        self.acquire(1)
        yield


class RequestWindow:
    """At most ``limit`` = ⌊``rate`` × ``window``⌋ requests of this partition in any rolling ``window``
    seconds, shared by its threads.

    A request holds a slot from before it is sent until ``window`` seconds after its answer: the
    destination counted it on arrival, which lies between the two, so it has left the destination's
    window when the slot frees — exact whatever the latency, with no margin to guess. Over a long
    sync that is ``rate`` requests per second; a sync shorter than a few windows gains up to a window's
    allowance. A share under one request per window gets one slot and a window of ``1 / rate``."""

    def __init__(self, rate: float, window: float):
        if rate <= 0 or window <= 0:
            raise ValueError(f"requests_per_second and requests_window must be positive, got {rate}, {window}")
        self.limit = max(1, math.floor(rate * window + 1e-9))
        self.window = max(window, self.limit / rate)
        self.freed: deque[float] = deque()  # when each answered request leaves the window, in order
        self.sending = 0
        self.changed = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Wait for a free slot, hold it while the request is out, free it a window after the answer."""
        with self.changed:
            while (wait := self._wait()) is not None:
                self.changed.wait(wait or None)
            self.sending += 1
        try:
            yield
        finally:
            with self.changed:
                self.sending -= 1
                self.freed.append(time.monotonic() + self.window)
                self.changed.notify_all()

    def _wait(self) -> float | None:
        """None: a slot is free; else seconds until one may be (0: until a request is answered)."""
        now = time.monotonic()
        while self.freed and self.freed[0] <= now:
            self.freed.popleft()
        if self.sending + len(self.freed) < self.limit:
            return None
        return self.freed[0] - now if self.freed else 0.0


def request_pacer(policy: DeliveryPolicy) -> Callable[[], AbstractContextManager[None]] | None:
    """The slot of one request under the partition's resolved ``policy`` (None: no limit)."""
    if not policy.requests_per_second:
        return None
    if policy.requests_window:
        return RequestWindow(policy.requests_per_second, policy.requests_window).slot
    return RateLimiter(policy.requests_per_second, burst=1).slot
