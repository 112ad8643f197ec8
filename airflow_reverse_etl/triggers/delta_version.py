"""DeltaVersionTrigger: poll a Delta table's log in the triggerer until a version appears."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_reverse_etl.delta_log import find_version
from airflow_reverse_etl.exceptions import ReverseEtlError, ReverseEtlInfrastructureError

#: While storage is unavailable, polls back off exponentially up to this many poll intervals.
MAX_BACKOFF_POLLS = 8


class DeltaVersionTrigger(BaseTrigger):
    """Fire once ``uri`` has a version for ``logical_date`` (or a version >= ``min_version``).

    Each poll lists ``_delta_log`` and reads a few commit headers through fsspec in a worker thread,
    so the triggerer's event loop never blocks and no Spark is started. Past ``deadline`` (epoch
    seconds) it fires a ``timeout`` event that says what it waited for.

    A storage outage (connection refused or reset, timeouts, 5xx or throttling) does not end the wait:
    it is logged and the next poll backs off (doubling, at most ``MAX_BACKOFF_POLLS`` intervals), still
    bounded by ``deadline``. A problem waiting cannot fix (access denied, not a Delta table, a corrupt
    log) fires an ``error`` event naming the table, with the error's ``category``.
    """

    def __init__(self, uri: str, logical_date: str | None = None, min_version: int | None = None,
                 poll_interval: float = 30.0, deadline: float | None = None) -> None:
        super().__init__()
        self.uri = uri
        self.logical_date = logical_date
        self.min_version = min_version
        self.poll_interval = poll_interval
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "uri": self.uri, "logical_date": self.logical_date, "min_version": self.min_version,
            "poll_interval": self.poll_interval, "deadline": self.deadline,
        })

    def describe(self) -> str:
        wanted = (f"a version >= {self.min_version}" if self.min_version is not None
                  else f"a version for logical date {self.logical_date}")
        return f"Delta table {self.uri} to have {wanted}"

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = failures = 0
        outage: ReverseEtlInfrastructureError | None = None
        while True:
            polls += 1
            try:
                found = await asyncio.to_thread(find_version, self.uri, self.logical_date, self.min_version)
                failures, outage = 0, None
            except ReverseEtlInfrastructureError as exc:
                failures, outage, found = failures + 1, exc, None
                self.log.warning("Poll %d: %s; still waiting for %s", polls, exc, self.describe())
            except Exception as exc:  # waiting will not fix it: say so instead of polling until the deadline
                category = exc.category if isinstance(exc, ReverseEtlError) else None
                yield TriggerEvent({"status": "error", "category": category,
                                    "message": f"Waiting for {self.describe()}: {type(exc).__name__}: {exc}"})
                return
            if found:
                yield TriggerEvent({"status": "found", "uri": self.uri, **found})
                return
            if self.deadline is not None and time.time() >= self.deadline:
                cause = f" (the storage was unavailable: {outage})" if outage else ""
                yield TriggerEvent({"status": "timeout", "message": f"Timed out after {polls} polls waiting "
                                                                    f"for {self.describe()}{cause}"})
                return
            if not outage:
                self.log.info("Waiting for %s (poll %d)", self.describe(), polls)
            await asyncio.sleep(self._pause(failures))

    def _pause(self, failures: int) -> float:
        """The poll interval, doubled for each poll in a row that found the storage unavailable."""
        pause: float = self.poll_interval * min(2 ** max(failures - 1, 0), MAX_BACKOFF_POLLS)
        return pause if self.deadline is None else min(pause, max(self.deadline - time.time(), 0))
