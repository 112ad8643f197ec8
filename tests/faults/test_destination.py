"""Destination faults: down for the whole run, restarted mid-delivery, a 5xx storm, 429 with
Retry-After. Retries are bounded and back off; a destination that never comes back fails the sync
with a retryable DestinationUnreachableError and the commit unchanged; every case ends with the
destination equal to the source and, seen from the destination, no record applied twice."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections import Counter

import psycopg2
import pytest

from tests_common.webhook_receiver import HttpDestination
from tests_common.pipeline import Pipeline
from tests_common.tcp_proxy import TcpProxy

ROWS = [(i, f"name-{i}", f"city-{i % 7}") for i in range(40)]
FAST_RETRIES = {"batch_size": 10, "max_attempts": 4, "backoff_initial": 0.1, "backoff_max": 2.0}


def as_rows(server):
    return [(r["id"], r["name"], r["city"]) for r in server.rows()]


def applied_once(server) -> bool:
    """Seen from the server: every key was applied by exactly one accepted request."""
    keys = [r["key"]["id"] for batch in server.batches for r in batch]
    return len(keys) == len(set(keys))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.fault("destination fault", "HTTP destination down for the whole run, back for the next")
def test_destination_down_for_the_whole_run(spark, warehouse, tmp_path):
    port = free_port()  # nothing listens there yet: every connection is refused
    url = f"http://127.0.0.1:{port}/batch"
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(ROWS)
    started = time.monotonic()
    error = p.sync_error(changes, {"type": "http", "url": url}, delivery=FAST_RETRIES)
    assert error["type"] == "DestinationUnreachableError", error
    assert (error["category"], error["retryable"]) == ("infrastructure", True)
    assert "still failing after 4 attempts" in error["message"] and "failed to connect" in error["message"]
    assert time.monotonic() - started < 120  # bounded: four attempts with backoff, then give up
    assert p.committed() is None and p.runs()[-1]["status"] == "failed"

    with HttpDestination(port=port) as server:  # the destination is back: the next run delivers it all
        result = p.sync(changes, {"type": "http", "url": url}, delivery=FAST_RETRIES)
        assert result["committed"] and p.committed() == 0
        assert as_rows(server) == ROWS and applied_once(server)


@pytest.mark.fault("destination fault", "HTTP 5xx storm and 429 with Retry-After")
def test_a_5xx_storm_and_429_with_retry_after(spark, warehouse, tmp_path, http_destination):
    server = http_destination
    server.respond_500(times=3)
    server.respond_429(times=1, retry_after=1)
    p = Pipeline(spark, warehouse, tmp_path)
    result = p.sync(p.step(ROWS), {"type": "http", "url": server.url}, delivery={**FAST_RETRIES, "max_attempts": 6})
    assert result["committed"] and as_rows(server) == ROWS and applied_once(server)
    statuses = [r.status for r in server.requests]
    assert statuses.count(500) == 3 and statuses.count(429) == 1
    limited = next(i for i, r in enumerate(server.requests) if r.status == 429)
    # The 429's batch waited the second it was told to before trying again.
    refused = server.requests[limited].json()["records"]
    retried = [r for r in server.requests[limited + 1:] if r.json()["records"] == refused]
    assert retried and retried[0].received_monotonic - server.requests[limited].received_monotonic >= 0.9
    assert result["stats"]["retried"] >= 4

    # A storm that does not end: bounded, then a retryable failure with nothing committed.
    server.respond_500(times=None)
    before = len(server.requests)
    error = p.sync_error(p.step([(0, "changed", "x"), *ROWS[1:]]), {"type": "http", "url": server.url},
                         delivery=FAST_RETRIES)
    assert error["type"] == "DestinationUnreachableError" and p.committed() == 0
    # Bounded per batch: the change set's partitions send side by side, so several batches may be
    # tried before the first gives up; none is tried more than max_attempts times, and one exactly.
    attempts = Counter(json.dumps(r.json()["records"], sort_keys=True) for r in server.requests[before:])
    assert max(attempts.values()) == FAST_RETRIES["max_attempts"], attempts.values()
    server.clear_faults()
    p.sync(p.diff("crm"), {"type": "http", "url": server.url})
    assert as_rows(server) == [(0, "changed", "x"), *ROWS[1:]]


PASSWORD_ENV = "ARETL_TEST_FAULTS_PG_PASSWORD"


@pytest.mark.fault("destination fault", "Postgres connection dropped mid-delivery (a restart, seen by the client)")
def test_postgres_restarted_mid_delivery(spark, warehouse, tmp_path, postgres_server, monkeypatch):
    """The shared Postgres stays up for everyone else: the sink reaches it through a proxy that drops
    every connection once some of the rows went through and refuses new ones for a second — what a
    client sees when the server restarts."""
    monkeypatch.setenv(PASSWORD_ENV, postgres_server.password)
    table = f"faults_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(**postgres_server.connect_kwargs())
    conn.autocommit = True
    rows = [(i, f"name-{i}", f"city-{i % 7}") for i in range(2000)]
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, city text)")
    proxy = TcpProxy(postgres_server.host, postgres_server.port, cut_after_bytes=30_000, down_for=1.0)
    try:
        destination = {"type": "postgres", "table": table,
                       "connection": {"conn_type": "postgres", "host": "127.0.0.1", "port": proxy.port,
                                      "login": postgres_server.user, "schema": postgres_server.dbname},
                       "secrets_env": {"password": PASSWORD_ENV}}
        p = Pipeline(spark, warehouse, tmp_path)
        result = p.sync(p.step(rows), destination, delivery={**FAST_RETRIES, "batch_size": 200, "max_attempts": 6})
        assert proxy.cuts == 1 and result["stats"]["retried"] > 0  # the cut landed mid-delivery
        assert result["committed"] and p.committed() == 0
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, name, city FROM {table} ORDER BY id")
            assert cur.fetchall() == rows  # primary key: a row applied twice would have failed or shown
    finally:
        proxy.close()
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()
