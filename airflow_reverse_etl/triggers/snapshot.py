"""DeltaVersionTrigger: poll a Delta table's log in the triggerer until a version appears."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_reverse_etl.triggers.delta_log import find_version


class DeltaVersionTrigger(BaseTrigger):
    """Fire once ``uri`` has a version for ``logical_date`` (or a version >= ``min_version``).

    Each poll lists ``_delta_log`` and reads a few commit headers through fsspec in a worker thread,
    so the triggerer's event loop never blocks and no Spark is started. Past ``deadline`` (epoch
    seconds) it fires a ``timeout`` event that says what it waited for.
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
        polls = 0
        while True:
            polls += 1
            try:
                found = await asyncio.to_thread(find_version, self.uri, self.logical_date, self.min_version)
            except Exception as exc:  # unreadable log: report it instead of polling forever
                yield TriggerEvent({"status": "error", "message": f"Waiting for {self.describe()}: "
                                                                  f"{type(exc).__name__}: {exc}"})
                return
            if found:
                yield TriggerEvent({"status": "found", "uri": self.uri, **found})
                return
            if self.deadline is not None and time.time() >= self.deadline:
                yield TriggerEvent({"status": "timeout", "message": f"Timed out after {polls} polls waiting "
                                                                    f"for {self.describe()}"})
                return
            self.log.info("Waiting for %s (poll %d)", self.describe(), polls)
            pause = self.poll_interval if self.deadline is None else min(self.poll_interval,
                                                                          max(self.deadline - time.time(), 0))
            await asyncio.sleep(pause)
