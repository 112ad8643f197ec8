"""HTTP sink against a real local HTTP server (tests_common/webhook_receiver.py): batches, auth header
from the connection's (secret) extras, 429 with Retry-After, 500 then success, per-record errors
into the ledger and their retry next run, a hung server, concurrency, and a resend after a kill."""

import json

import pytest

from tests_common.pipeline import Pipeline, sync_killed_midway

EXTRA_ENV = "ARETL_TEST_SINK_HTTP_EXTRA"
ROWS = [(1, "ann", "oslo"), (2, "bob", "lima"), (3, "cid", "rome")]


def destination(server, **options):
    """Settings as SinkOperator builds them from an Airflow HTTP connection (extras as a secret)."""
    return {"type": "http", "endpoint": "/batch",
            "connection": {"conn_type": "http", "host": server.host, "port": server.port, "schema": "http"},
            "secrets_env": {"extra": EXTRA_ENV}, **options}


@pytest.fixture
def server(http_destination, monkeypatch):
    monkeypatch.setenv(EXTRA_ENV, json.dumps({"Authorization": "Bearer test-token"}))
    http_destination.require("bearer", "test-token")
    return http_destination


def as_rows(server):
    return [(r["id"], r["name"], r["city"]) for r in server.rows()]


def test_upsert_mirror_and_mapping_with_auth_from_the_connection(spark, warehouse, tmp_path, server):
    p = Pipeline(spark, warehouse, tmp_path)
    first = p.sync(p.step(ROWS), destination(server), constants={"source": "lake"})
    assert first["stats"]["sent"] == 3 and first["committed"]
    assert server.table[1] == {"id": 1, "name": "ann", "city": "oslo", "source": "lake"}
    assert all(r.header("Authorization") == "Bearer test-token" for r in server.requests)
    body = server.requests[0].json()["records"][0]
    assert set(body) == {"op", "change", "key", "data"} and (body["op"], body["change"]) == ("upsert", "insert")
    assert "id" in body["key"]

    second = p.sync(p.step([(1, "ann", "nice"), (3, "cid", "rome"), (4, "dan", "kyiv")]), destination(server),
                    mode="mirror", field_mapping={"id": "id", "city": "city"})
    assert (second["stats"]["updated"], second["stats"]["deleted"], second["stats"]["inserted"]) == (1, 1, 1)
    assert server.table == {1: {"id": 1, "city": "nice"}, 3: {"id": 3, "name": "cid", "city": "rome", "source": "lake"},
                            4: {"id": 4, "city": "kyiv"}}


def test_429_waits_as_long_as_retry_after_says(spark, warehouse, tmp_path, server):
    server.respond_429(times=1, retry_after=2)
    p = Pipeline(spark, warehouse, tmp_path)
    result = p.sync(p.step(ROWS), destination(server), delivery={"batch_size": 10, "backoff_initial": 0.01})
    [refused] = [r for r in server.requests if r.status == 429]
    keys = [record["key"] for record in refused.json()["records"]]
    [resent] = [r for r in server.requests if r.status == 200 and [x["key"] for x in r.json()["records"]] == keys]
    assert resent.received_monotonic - refused.received_monotonic >= 2.0
    assert result["stats"]["retried"] == len(keys) and result["stats"]["sent"] == 3
    assert as_rows(server) == ROWS


def test_a_500_is_retried_then_succeeds(spark, warehouse, tmp_path, server):
    server.respond_500(times=2)
    p = Pipeline(spark, warehouse, tmp_path)
    result = p.sync(p.step(ROWS), destination(server), delivery={"backoff_initial": 0.05})
    assert [r.status for r in server.requests].count(500) == 2
    assert result["stats"]["rejected"] == 0 and as_rows(server) == ROWS and p.committed() == 0


def test_per_record_errors_go_to_the_ledger_and_are_retried_next_run(spark, warehouse, tmp_path, server):
    server.reject_records(lambda r: r["key"]["id"] == 2, error="email address invalid", times=2)
    p = Pipeline(spark, warehouse, tmp_path)
    first = p.sync(p.step(ROWS), destination(server))
    assert first["stats"]["rejected"] == 1 and as_rows(server) == [ROWS[0], ROWS[2]]
    [entry] = p.ledger()
    assert entry["key"] == '{"id":2}' and "email address invalid" in entry["error"]

    second = p.sync(p.step(ROWS), destination(server))  # source unchanged: only the ledger re-sends
    assert second["resent"] == 1 and second["stats"]["rejected"] == 1
    assert p.ledger()[0]["attempts"] == 2

    third = p.sync(p.step(ROWS), destination(server))  # the server accepts it now
    assert third["resent"] == 1 and third["stats"]["sent"] == 1
    assert p.ledger() == [] and as_rows(server) == ROWS


def test_a_hung_server_times_out_cleanly(spark, warehouse, tmp_path, server):
    server.hang(times=None, seconds=30)
    p = Pipeline(spark, warehouse, tmp_path)
    error = p.sync_error(p.step(ROWS), destination(server, timeout=1),
                         delivery={"max_attempts": 2, "backoff_initial": 0.1, "backoff_max": 0.2})
    assert error["type"] == "DestinationUnreachableError" and error["retryable"]
    assert "still failing after 2 attempts" in error["message"] and "timed out after 1.0s" in error["message"]
    # The client gave up on its own timeout: the second attempt of a batch came long before the
    # server would have answered (30 s), and nothing was applied or committed.
    first = server.requests[0]
    again = [r for r in server.requests[1:] if r.json()["records"] == first.json()["records"]]
    assert again and again[0].received_monotonic - first.received_monotonic < 10
    assert p.committed() is None and server.rows() == []
    assert p.runs()[-1]["status"] == "failed"


def test_concurrency_keeps_several_batches_in_flight(spark, warehouse, tmp_path, server):
    rows = [(i, f"n{i}", "x") for i in range(16)]
    # The server holds requests until three are open at once. Spark runs at most two partitions at a
    # time here (local[2]), so only batches sent concurrently from inside one partition open the gate;
    # without that the gate gives up after its timeout and max_in_flight stays at 2. Judged from the
    # server's side, so a slow, loaded machine delays the test but cannot fail it.
    server.hold_until_concurrent(3, timeout=30)
    p = Pipeline(spark, warehouse, tmp_path)
    result = p.sync(p.step(rows), destination(server, timeout=60), delivery={"batch_size": 2, "concurrency": 4})
    assert server.max_in_flight >= 3
    assert result["stats"]["batches"] == 8 and len(server.requests) == 8 and as_rows(server) == rows


def test_resend_after_a_kill_midway(spark, warehouse, tmp_path, server):
    rows = [(i, f"name-{i}", f"city-{i % 5}") for i in range(1500)]
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(rows)
    sync_killed_midway(p, changes, destination(server), lambda: len(server.table), len(rows),
                       delivery={"batch_size": 50, "rate_limit": 300})
    assert p.committed() is None
    result = p.sync(changes, destination(server))
    assert result["committed"] and as_rows(server) == rows


def test_a_connection_closed_after_the_request_says_the_batch_may_have_been_applied(spark, warehouse, tmp_path,
                                                                                     server):
    """A server that reads the whole batch and then closes the connection without answering may have
    applied it: the error says so (not "failed to connect"), and the retry resends it by key."""
    server.hang(times=None, seconds=0.05)  # read, then drop the connection unanswered
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(ROWS)
    error = p.sync_error(changes, destination(server), delivery={"max_attempts": 2, "backoff_initial": 0.1})
    assert error["type"] == "DestinationUnreachableError", error
    assert "lost its connection after sending the batch" in error["message"], error["message"]
    assert "failed to connect" not in error["message"]
    server.clear_faults()
    assert p.sync(changes, destination(server))["committed"] and as_rows(server) == ROWS
