"""The hubspot destination through the sync job (real Spark, the HubSpot emulator of
tests_common/emulators/hubspot.py): every mode HubSpot supports with its conversions, 100 inputs a
request, a record HubSpot refuses into the ledger with HubSpot's reason and sent again, a mapped
property HubSpot lacks failing the sync before anything is sent, a dry run sending nothing, and the
burst limit's 429 waited out."""

import datetime as dt
import json
from decimal import Decimal

import pytest

from tests_common.emulators.hubspot import HubSpotApi
from tests_common.pipeline import Pipeline

SCHEMA = "id INT, name STRING, email STRING, born DATE, score DECIMAL(10,2), vip BOOLEAN, seen TIMESTAMP"
TOKEN_ENV = "ARETL_TEST_HUBSPOT_TOKEN"
MAPPING = {"id": "customer_id", "name": "lastname", "email": "email", "born": "born", "score": "score",
           "vip": "vip", "seen": "seen"}


def row(i, name="n", email=None, score="1.50"):
    return (i, name, email or f"u{i}@example.com", dt.date(1990, 1, i % 28 + 1), Decimal(score), i % 2 == 0,
            dt.datetime(2026, 1, 1, 12, 30, tzinfo=dt.timezone.utc))


def prepared(api):
    api.add_token("pat-sync")
    api.define_property("contacts", "customer_id", unique=True)
    for name, kind in (("born", "date"), ("score", "number"), ("vip", "bool"), ("seen", "datetime")):
        api.define_property("contacts", name, kind)
    return api


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "pat-sync")
    with prepared(HubSpotApi()) as api:
        yield api


def destination(api, **options):
    return {"type": "hubspot", "id_property": "customer_id", "connection": {"host": api.url},
            "secrets_env": {"password": TOKEN_ENV}, **options}


def by_key(api):
    return {p["customer_id"]: p for p in api.objects("contacts").values()}


def test_mirror_upserts_in_batches_of_100_converts_values_and_archives_deletes(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    first = p.sync(p.step([row(i) for i in range(1, 251)]), destination(api), mode="mirror", field_mapping=MAPPING)
    assert first["stats"]["sent"] == 250 and first["committed"]
    upserts = api.requests_to("POST", "batch/upsert$")
    sizes = [len(json.loads(r.body)["inputs"]) for r in upserts]
    assert sum(sizes) == 250 and max(sizes) == 100, sizes  # local[2]: at most 2 partitions deliver
    assert all(i["objectWriteTraceId"] and i["idProperty"] == "customer_id" for r in upserts
               for i in json.loads(r.body)["inputs"])
    stored = by_key(api)["2"]
    assert stored["born"] == str(int(dt.datetime(1990, 1, 3, tzinfo=dt.timezone.utc).timestamp() * 1000))
    assert (stored["score"], stored["vip"], stored["lastname"]) == ("1.50", "true", "n")
    assert stored["seen"] == str(int(dt.datetime(2026, 1, 1, 12, 30, tzinfo=dt.timezone.utc).timestamp() * 1000))

    second = p.sync(p.step([row(1, name="renamed"), *[row(i) for i in range(3, 251)]]), destination(api),
                    mode="mirror", field_mapping=MAPPING)
    assert (second["stats"]["updated"], second["stats"]["deleted"]) == (1, 1)
    assert "2" not in by_key(api) and by_key(api)["1"]["lastname"] == "renamed" and len(by_key(api)) == 249
    [read] = api.requests_to("POST", "batch/read$")
    assert json.loads(read.body)["idProperty"] == "customer_id", "archive needs HubSpot's ids: read by the key first"


def test_a_record_hubspot_refuses_goes_to_the_ledger_with_its_reason_and_is_sent_again(spark, warehouse, tmp_path,
                                                                                          api):
    api.reject(lambda props: props.get("lastname") == "blocked", "lastname 'blocked' is not allowed here")
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    result = p.sync(p.step([row(1), row(2, name="blocked"), row(3, email="not-an-email")]), destination(api),
                    field_mapping=MAPPING)
    assert (result["stats"]["sent"], result["stats"]["rejected"]) == (1, 2) and result["committed"]
    reasons = {json.loads(r["key"])["id"]: r["error"] for r in p.ledger()}
    assert "lastname 'blocked' is not allowed here" in reasons[2] and "VALIDATION_ERROR" in reasons[2]
    assert "Email address not-an-email is invalid" in reasons[3]
    api._rules.clear()  # the HubSpot-side rule is lifted; the email stays invalid
    again = p.sync(p.step([row(1), row(2, name="blocked"), row(3, email="not-an-email")]), destination(api),
                   field_mapping=MAPPING)
    assert again["resent"] == 2 and again["stats"]["sent"] == 1 and again["stats"]["rejected"] == 1
    assert set(by_key(api)) == {"1", "2"}


def test_a_mapped_property_hubspot_lacks_fails_the_sync_before_anything_is_sent(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    error = p.sync_error(p.step([row(1)]), destination(api), field_mapping={**MAPPING, "name": "full_name"})
    assert "no property ['full_name']" in error["message"] and "Nothing was sent" in error["message"]
    assert [r.method for r in api.requests] == ["GET"] and p.committed() is None


def test_a_dry_run_sends_nothing(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    result = p.sync(p.step([row(1), row(2)]), destination(api), field_mapping=MAPPING, dry_run=True)
    assert result["dry_run"] and result["planned"] == {"upsert": 2} and api.request_count == 0


def test_the_burst_limit_429_is_waited_out(spark, warehouse, tmp_path, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "pat-sync")
    with prepared(HubSpotApi(burst_limit=3, burst_window=1.0)) as api:
        p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
        result = p.sync(p.step([row(i) for i in range(1, 6)]), destination(api), field_mapping=MAPPING,
                        delivery={"batch_size": 1, "backoff_initial": 0.05})
        assert result["stats"]["sent"] == 5 and result["stats"]["retried"] >= 1
        assert any(r.status == 429 for r in api.requests) and len(by_key(api)) == 5
