"""The delivery core's rate limit, judged by when a real destination received the records.

One partition's change records go through :func:`~spark_jobs.sinks.core.deliver_partition` (the
executor's entry, here called in-process) with the real HTTP sink into the real HTTP test server, which
stamps each request on arrival. At ``rate`` records per second, with a bucket that starts empty, the
first ``n`` records cannot have arrived sooner than ``n / rate`` seconds after delivery started:
without the limiter the ten batches arrive within a few milliseconds, and every test here fails.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

from spark_jobs.sinks.base import SinkConfig
from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.sinks.core import deliver_partition
from spark_jobs.sinks.pacing import RateLimiter
from spark_jobs.sinks.presets import HttpSink

RATE = 100.0  # records per second
BATCH = 20
RECORDS = 200  # ten batches: at least 1.8 s after the first batch's 0.2 s


def change_records(n: int) -> pa.RecordBatch:
    """``n`` upserts shaped as the sync job hands them to a JSON sink (``with_json``)."""
    return pa.RecordBatch.from_pylist([
        {"_op": "upsert", "_change": "insert", "_key": str(i), "_key_json": json.dumps({"id": i}),
         "_data_json": json.dumps({"id": i, "name": f"n{i}"})} for i in range(n)
    ])


def deliver(server, concurrency: int) -> float:
    """Deliver :data:`RECORDS` records at :data:`RATE`; return the monotonic time delivery started."""
    config = SinkConfig(destination={"type": "http", "url": server.url}, key_fields=["id"],
                        fields=["id", "name"], mode="upsert")
    policy = DeliveryPolicy(batch_size=BATCH, rate_limit=RATE, concurrency=concurrency)
    started = time.monotonic()
    outcomes = list(deliver_partition([change_records(RECORDS)], lambda: HttpSink(config), policy, ["id"],
                                      ["id", "name"]))
    stats = json.loads(outcomes[-1].column("stats")[-1].as_py())
    assert stats["sent"] == RECORDS and stats["rejected"] == 0
    return started


def assert_never_ahead_of_the_rate(server, started: float) -> None:
    """Each request arrived no sooner than the records received so far allow at :data:`RATE`."""
    arrivals = sorted((r.received_monotonic, len(r.json()["records"])) for r in server.requests)
    received = 0
    for arrived, records in arrivals:
        received += records
        earliest = received / RATE
        assert arrived - started >= earliest, (
            f"{received} records had arrived {arrived - started:.3f}s after delivery started; at {RATE:.0f} "
            f"records/s that takes at least {earliest:.3f}s")
    assert received == RECORDS and len(server.rows()) == RECORDS


@pytest.mark.parametrize("concurrency", [1, 4], ids=["one-thread", "four-threads-share-the-bucket"])
def test_the_destination_never_receives_records_faster_than_the_rate(http_destination, concurrency):
    started = deliver(http_destination, concurrency)
    assert_never_ahead_of_the_rate(http_destination, started)
    took = max(r.received_monotonic for r in http_destination.requests) - started
    assert took < 2 * RECORDS / RATE + 1, f"{RECORDS} records took {took:.1f}s at {RATE:.0f}/s: throttled too hard"


def test_an_idle_spell_buys_at_most_one_second_of_records():
    """The bucket holds one second's worth: after a long pause, one second of records goes at once
    and the next ones wait their turn again."""
    limiter = RateLimiter(RATE)
    time.sleep(1.5)
    burst_started = time.monotonic()
    limiter.acquire(int(RATE))
    assert time.monotonic() - burst_started < 0.5  # a full bucket: no wait
    limiter.acquire(int(RATE / 2))
    assert time.monotonic() - burst_started >= 0.5  # the bucket was empty: half a second for half a second's worth
