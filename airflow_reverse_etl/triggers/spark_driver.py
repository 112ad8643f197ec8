"""SparkDriverTrigger: waits in the triggerer for a job's driver running in cluster deploy mode on a Spark
standalone cluster, then reads the job's result, so a deferrable operator holds no worker slot while the
job runs (:mod:`airflow_reverse_etl.hooks.cluster_driver`).

It polls the master's REST submission server for the driver's state (a thread per poll: the REST call
and the result read block) and, once the driver left the active states, reads ``result.json`` from the
job directory. The event carries the driver, its final state and the result (None when the driver
wrote none); the operator's ``execute_complete`` turns a failed job into its typed error. A master
that stops answering is asked again at every poll for ``unreachable_timeout`` seconds before the
trigger gives up with an error event (the driver may still run: the retry reattaches to it).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_reverse_etl.hooks.cluster_driver import ACTIVE, ClusterDriver, driver_state


class SparkDriverTrigger(BaseTrigger):
    """Fires once the cluster-mode driver ``driver`` (``ClusterDriver.to_json()``) has ended.

    :param poll_interval: seconds between two looks at the driver's state.
    :param unreachable_timeout: seconds a master may not answer before the trigger fails.
    """

    def __init__(self, driver: dict[str, str], poll_interval: float = 5.0, unreachable_timeout: float = 300.0):
        super().__init__()
        self.driver = driver
        self.poll_interval = poll_interval
        self.unreachable_timeout = unreachable_timeout

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__name__}",
                {"driver": self.driver, "poll_interval": self.poll_interval,
                 "unreachable_timeout": self.unreachable_timeout})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        driver = ClusterDriver.from_json(self.driver)
        try:
            state = await self._wait(driver)
        except OSError as exc:
            yield TriggerEvent({"driver": self.driver, "state": None, "result": None,
                                "error": f"The Spark master at {driver.rest_url} did not answer for "
                                         f"{self.unreachable_timeout:g} s: {exc}"})
            return
        from airflow_reverse_etl.hooks.spark_job import SparkJobHook

        result = await asyncio.to_thread(SparkJobHook._read_result, driver.result_uri)
        yield TriggerEvent({"driver": self.driver, "state": state, "result": result})

    async def _wait(self, driver: ClusterDriver) -> str:
        """Poll until the driver left the active states; its final state."""
        answered = time.monotonic()
        while True:
            try:
                state = await asyncio.to_thread(driver_state, driver)
                answered = time.monotonic()
            except OSError as exc:  # urllib's URLError is an OSError
                if time.monotonic() - answered > self.unreachable_timeout:
                    raise
                self.log.warning("The Spark master did not answer for driver %s: %s", driver.driver_id, exc)
                state = "UNKNOWN"
            if state not in ACTIVE:
                self.log.info("Driver %s ended: %s", driver.driver_id, state)
                return state
            await asyncio.sleep(self.poll_interval)
