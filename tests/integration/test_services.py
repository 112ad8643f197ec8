"""The test infrastructure itself works: real PostgreSQL, real Kafka, and the HTTP destination (the
webhook receiver on the one test HTTP server) with each of its fault modes."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict

import pytest
import requests

from tests_common.webhook_receiver import HttpDestination
from tests_common.services import read_topic, run_service_script


# ------------------------------------------------------------------------------------------------
# PostgreSQL
# ------------------------------------------------------------------------------------------------
def test_postgres_accepts_password_login_and_queries(postgres_server):
    import psycopg2

    info = postgres_server
    assert info.host == "127.0.0.1" and info.user == "aretl" and info.dbname == "aretl"
    table = f"infra_check_{uuid.uuid4().hex[:8]}"
    with psycopg2.connect(info.dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_user, current_database(), current_setting('fsync'), "
                    "current_setting('synchronous_commit'), current_setting('full_page_writes')")
        assert cur.fetchone() == ("aretl", "aretl", "off", "off", "off")
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text)")
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, f"n{i}") for i in range(10)])
        cur.execute(f"SELECT count(*), max(name) FROM {table}")
        assert cur.fetchone() == (10, "n9")
        cur.execute(f"DROP TABLE {table}")
    conn.close()


def test_postgres_rejects_a_wrong_password(postgres_server):
    import psycopg2

    kwargs = {**postgres_server.connect_kwargs(), "password": "not-the-password"}
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(**kwargs)


def test_postgres_start_is_idempotent_and_status_prints_no_password(postgres_server):
    again = run_service_script("postgres", "start", timeout=60)
    assert f"port={postgres_server.port}" in again.stdout
    status = run_service_script("postgres", "status", timeout=60)
    assert status.returncode == 0
    for out in (again.stdout + again.stderr, status.stdout + status.stderr):
        assert postgres_server.password not in out


# ------------------------------------------------------------------------------------------------
# Kafka
# ------------------------------------------------------------------------------------------------
def test_kafka_keyed_messages_round_trip_and_keys_stick_to_partitions(kafka_broker):
    from confluent_kafka import Producer

    topic = f"infra-check-{uuid.uuid4().hex[:8]}"
    producer = Producer(kafka_broker.config(**{"enable.idempotence": True, "linger.ms": 5}))
    errors = []
    sent = [(f"key-{i % 17}", {"seq": i, "key": f"key-{i % 17}"}) for i in range(100)]
    for key, value in sent:
        producer.produce(topic, key=key.encode(), value=json.dumps(value).encode(),
                         on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []

    messages = read_topic(kafka_broker, topic, timeout=30)
    assert len(messages) == 100
    assert sorted(m.json()["seq"] for m in messages) == list(range(100))
    partitions_by_key = defaultdict(set)
    for m in messages:
        assert m.json()["key"] == m.key.decode()
        partitions_by_key[m.key].add(m.partition)
    assert len(partitions_by_key) == 17
    assert all(len(ps) == 1 for ps in partitions_by_key.values()), partitions_by_key
    assert len({m.partition for m in messages}) > 1  # num.partitions=4: keys spread out
    # within a key, order is kept
    for key in partitions_by_key:
        seqs = [m.json()["seq"] for m in messages if m.key == key]
        assert seqs == sorted(seqs)


def test_read_topic_on_an_empty_topic_returns_nothing(kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"infra-empty-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka_broker.config())
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    assert read_topic(kafka_broker, topic, timeout=20) == []


# ------------------------------------------------------------------------------------------------
# HTTP destination
# ------------------------------------------------------------------------------------------------
def _batch(*records):
    return {"records": list(records)}


def up(i, **data):
    return {"op": "upsert", "key": {"id": i}, "data": {"id": i, **data}}


def rm(i):
    return {"op": "delete", "key": {"id": i}}


def test_http_upserts_and_deletes_into_the_table(http_destination):
    srv = http_destination
    r = requests.post(srv.url, json=_batch(up(1, name="a"), up(2, name="b"), up(3, name="c")), timeout=5)
    assert r.status_code == 200
    assert r.json()["ok"] == 3 and r.json()["errors"] == 0
    assert [x["id"] for x in r.json()["results"]] == [1, 2, 3]
    r = requests.post(srv.url, json=_batch(up(2, name="B"), rm(3), rm(99)), timeout=5)
    assert r.status_code == 200 and r.json()["errors"] == 0
    assert srv.table == {1: {"id": 1, "name": "a"}, 2: {"id": 2, "name": "B"}}
    assert srv.rows() == [{"id": 1, "name": "a"}, {"id": 2, "name": "B"}]
    assert srv.request_count == 2 and len(srv.batches) == 2
    req = srv.requests[0]
    assert req.method == "POST" and req.path == "/batch"
    assert req.header("content-type") == "application/json"
    assert req.status == 200 and req.reply["errors"] == 0 and len(req.json()["records"]) == 3
    assert requests.get(srv.base_url + "/health", timeout=5).json() == {"ok": True}


def test_http_composite_key(http_destination):
    srv = http_destination
    srv.key_fields = ("tenant", "id")
    rec = {"op": "upsert", "key": {"tenant": "t1", "id": 7}, "data": {"name": "x"}}
    r = requests.post(srv.url, json=_batch(rec), timeout=5)
    assert r.json()["results"][0]["id"] == {"tenant": "t1", "id": 7}
    assert srv.table == {("t1", 7): {"tenant": "t1", "id": 7, "name": "x"}}


def test_http_rejects_malformed_batches(http_destination):
    srv = http_destination
    assert requests.post(srv.url, data=b"not json", timeout=5).status_code == 400
    assert requests.post(srv.url, json={"rows": []}, timeout=5).status_code == 400
    assert requests.post(srv.url, json=_batch({"op": "merge", "key": {"id": 1}}), timeout=5).status_code == 400
    assert srv.table == {} and [r.status for r in srv.requests] == [400] * 3


def test_http_429_with_retry_after_n_times(http_destination):
    srv = http_destination
    srv.respond_429(times=2, retry_after=3)
    codes = []
    for _ in range(3):
        r = requests.post(srv.url, json=_batch(up(1, v=1)), timeout=5)
        codes.append((r.status_code, r.headers.get("Retry-After")))
    assert codes == [(429, "3"), (429, "3"), (200, None)]
    assert srv.table == {1: {"id": 1, "v": 1}}
    assert [r.status for r in srv.requests] == [429, 429, 200]
    assert len(srv.batches) == 1  # rejected requests applied nothing


def test_http_500_n_times_then_faults_queue_in_order(http_destination):
    srv = http_destination
    srv.respond_500(times=2)
    srv.respond_429(times=1, retry_after=None)
    responses = [requests.post(srv.url, json=_batch(up(1)), timeout=5) for _ in range(4)]
    assert [r.status_code for r in responses] == [500, 500, 429, 200]
    assert "Retry-After" not in responses[2].headers
    assert [r.status for r in srv.requests] == [500, 500, 429, 200]
    times = srv.request_times()
    assert times == sorted(times) and len(times) == 4


def test_http_per_record_errors(http_destination):
    srv = http_destination
    srv.reject_records(lambda rec: rec["key"]["id"] % 2 == 0, error="invalid email")
    srv.reject_records(lambda rec: rec["data"]["name"] == "transient", error="try later", times=1, retryable=True)
    r = requests.post(srv.url, json=_batch(*[up(i, name="n") for i in range(1, 6)], up(7, name="transient")),
                      timeout=5)
    body = r.json()
    assert r.status_code == 200 and body["ok"] == 3 and body["errors"] == 3
    errs = {x["id"]: (x["error"], x["retryable"]) for x in body["results"] if x["status"] == "error"}
    assert errs == {2: ("invalid email", False), 4: ("invalid email", False), 7: ("try later", True)}
    assert sorted(srv.table) == [1, 3, 5]
    # the one-shot rule is used up: a retry of record 7 now succeeds
    r = requests.post(srv.url, json=_batch(up(7, name="transient")), timeout=5)
    assert r.json()["errors"] == 0 and 7 in srv.table
    assert [(r.status, r.reply["errors"]) for r in srv.requests] == [(200, 3), (200, 0)]


def test_http_hang_longer_than_client_timeout(http_destination):
    srv = http_destination
    srv.hang(times=1, seconds=2)
    t0 = time.monotonic()
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(srv.url, json=_batch(up(1)), timeout=0.5)
    assert time.monotonic() - t0 < 1.5
    r = requests.post(srv.url, json=_batch(up(2)), timeout=5)  # the next one is served at once
    assert r.status_code == 200
    srv.wait_for_requests(2, timeout=10)
    assert [r.status for r in srv.requests] == [None, 200]
    assert srv.table == {2: {"id": 2}}  # the hung batch was dropped, not applied


def test_http_hang_then_apply(http_destination):
    srv = http_destination
    srv.hang(times=1, seconds=1, then="apply")
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(srv.url, json=_batch(up(1, v="late")), timeout=0.3)
    srv.wait_for_requests(1, timeout=10)
    assert srv.table == {1: {"id": 1, "v": "late"}}  # the server did it although the client gave up


def test_http_bearer_token_required(http_destination):
    srv = http_destination
    srv.require("bearer", "s3cret")
    srv.respond_500(times=1)
    r = requests.post(srv.url, json=_batch(up(1)), timeout=5)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    r = requests.post(srv.url, json=_batch(up(1)), headers={"Authorization": "Bearer wrong"}, timeout=5)
    assert r.status_code == 401
    # refused requests did not use up the queued 500
    ok_headers = {"Authorization": "Bearer s3cret"}
    assert requests.post(srv.url, json=_batch(up(1)), headers=ok_headers, timeout=5).status_code == 500
    assert requests.post(srv.url, json=_batch(up(1)), headers=ok_headers, timeout=5).status_code == 200
    assert srv.requests[-1].header("Authorization") == "Bearer s3cret"
    assert list(srv.table) == [1]


def test_http_basic_auth_required(http_destination):
    srv = http_destination
    srv.require("basic", "pw", "svc")
    assert requests.post(srv.url, json=_batch(up(1)), auth=("svc", "nope"), timeout=5).status_code == 401
    assert requests.post(srv.url, json=_batch(up(1)), auth=("svc", "pw"), timeout=5).status_code == 200
    srv.require("none")
    assert requests.post(srv.url, json=_batch(up(2)), timeout=5).status_code == 200


def test_http_concurrent_clients_and_keep_alive(http_destination):
    srv = http_destination
    errors = []

    def client(worker):
        with requests.Session() as s:
            for j in range(20):
                i = worker * 100 + j
                r = s.post(srv.url, json=_batch(up(i, w=worker)), timeout=5)
                if r.status_code != 200:
                    errors.append(r.status_code)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and srv.request_count == 80 and len(srv.table) == 80


def test_http_server_stops_cleanly_even_with_a_hung_request():
    with HttpDestination() as srv:
        srv.hang(times=None, seconds=30)
        t = threading.Thread(
            target=lambda: pytest.raises(requests.exceptions.RequestException,
                                         requests.post, srv.url, json=_batch(up(1)), timeout=10)
        )
        t.start()
        deadline = time.monotonic() + 5
        while srv.request_count == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        url = srv.url
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 3
    t.join(5)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(url, json=_batch(up(1)), timeout=2)
