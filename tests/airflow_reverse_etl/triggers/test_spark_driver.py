"""SparkDriverTrigger without a cluster: it serializes to what the triggerer rebuilds it from, and a
master that does not answer ends the wait with an error event naming it (after the timeout, not at
the first refused poll). Its run against a real master and driver is in
tests/integration/test_cluster_durable.py."""

from __future__ import annotations

import asyncio
import socket
import time

from airflow_reverse_etl.triggers.spark_driver import SparkDriverTrigger


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


DRIVER = {"driver_id": "driver-20261127000000-0000", "job_dir": "/tmp/nowhere", "rest_url": ""}


def test_it_serializes_to_what_rebuilds_it():
    trigger = SparkDriverTrigger(driver=DRIVER, poll_interval=2.0, unreachable_timeout=30.0)
    path, kwargs = trigger.serialize()
    assert path == "airflow_reverse_etl.triggers.spark_driver.SparkDriverTrigger"
    assert SparkDriverTrigger(**kwargs).serialize() == (path, kwargs)


def test_a_master_that_does_not_answer_ends_the_wait_with_an_error_naming_it():
    url = f"http://127.0.0.1:{closed_port()}"
    trigger = SparkDriverTrigger(driver={**DRIVER, "rest_url": url}, poll_interval=0.1, unreachable_timeout=1.0)

    async def first():
        async for event in trigger.run():
            return event.payload

    started = time.monotonic()
    payload = asyncio.run(asyncio.wait_for(first(), 30))
    assert time.monotonic() - started >= 1.0  # it kept asking until the timeout
    assert payload["result"] is None and payload["state"] is None
    assert url in payload["error"] and "did not answer" in payload["error"]
