"""The salesforce destination through the sync job (real Spark, the Salesforce emulator of
tests_common/emulators/salesforce.py): mirror mode over sObject Collections with Salesforce's types,
deletes found by External ID; a large batch through Bulk API 2.0 with its failed records into the
ledger with Salesforce's own reason; a session that ended renewed; a mapping Salesforce cannot take
failing before anything is sent; insert and update keeping to their records; a dry run sending nothing."""

import datetime as dt
import json
from decimal import Decimal

import pytest

from tests_common.emulators.salesforce import SalesforceApi
from tests_common.pipeline import Pipeline

SCHEMA = "id INT, name STRING, email STRING, born DATE, value DECIMAL(12,2), opted_out BOOLEAN, seen TIMESTAMP"
EXTRA_ENV = "ARETL_TEST_SALESFORCE_EXTRA"
MAPPING = {"id": "Customer_Id__c", "name": "LastName", "email": "Email", "born": "Birthdate",
           "value": "Lifetime_Value__c", "opted_out": "HasOptedOutOfEmail", "seen": "Signed_Up_At__c"}


def row(i, name="n", email=None):
    return (i, name, email or f"u{i}@example.com", dt.date(1990, 1, i % 28 + 1), Decimal("1234.50"), i % 2 == 0,
            dt.datetime(2026, 1, 1, 12, 30, 15, 250000, tzinfo=dt.timezone.utc))


@pytest.fixture
def api(monkeypatch):
    with SalesforceApi() as api:
        api.add_client("sync-app", "sync-secret")
        api.processing_delay = 0.05
        monkeypatch.setenv(EXTRA_ENV, json.dumps({"consumer_key": "sync-app", "consumer_secret": "sync-secret",
                                                  "instance_url": api.login_url}))
        yield api


def destination(**options):
    return {"type": "salesforce", "object": "Contact", "external_id_field": "Customer_Id__c",
            "connection": {"conn_type": "salesforce"}, "secrets_env": {"extra": EXTRA_ENV}, "bulk_poll_interval": 0.05,
            **options}


def contacts(api):
    return {r["Customer_Id__c"]: r for r in api.records("Contact").values()}


def test_mirror_with_salesforce_types_and_deletes_by_external_id(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    first = p.sync(p.step([row(1), row(2), row(3)]), destination(), mode="mirror", field_mapping=MAPPING)
    assert first["stats"]["sent"] == 3 and first["committed"]
    assert contacts(api)["2"].items() >= {"Birthdate": "1990-01-03", "Lifetime_Value__c": 1234.5, "LastName": "n",
                                          "HasOptedOutOfEmail": True,
                                          "Signed_Up_At__c": "2026-01-01T12:30:15.250Z"}.items()
    upserts = api.requests_to("PATCH", "composite/sobjects/Contact/Customer_Id__c$")
    assert {r["attributes"]["type"] for u in upserts for r in json.loads(u.body)["records"]} == {"Contact"}

    api.expire_sessions()  # the org's session timeout: the next request gets a 401 and signs in again
    second = p.sync(p.step([row(1, name="renamed"), row(3)]), destination(), mode="mirror", field_mapping=MAPPING)
    assert (second["stats"]["updated"], second["stats"]["deleted"]) == (1, 1) and set(contacts(api)) == {"1", "3"}
    assert contacts(api)["1"]["LastName"] == "renamed"
    [lookup] = api.requests_to("GET", "/query$")
    assert "WHERE Customer_Id__c IN ('2')" in lookup.arg("q")
    assert any(r.status == 401 for r in api.requests) and len(api.login.requests_to("POST", "oauth2/token")) >= 2
    calls = [r for r in api.requests if "oauth2" not in r.path]
    assert not any("sync-secret" in json.dumps(r.headers) or b"sync-secret" in r.body for r in calls), \
        "the connected app's secret goes to the token endpoint only, never as a header of the API's requests"


def test_a_large_batch_goes_through_bulk_api_2_and_its_failures_reach_the_ledger(spark, warehouse, tmp_path, api):
    api.reject("Contact", lambda r: r.get("LastName") == "blocked", "Blocked by a validation rule", ["LastName"])
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    rows = [row(i, name="blocked" if i == 4 else "n") for i in range(1, 9)]
    one_batch = {"max_in_flight": 1}  # one delivering partition: the 8 records are one batch, over the threshold
    result = p.sync(p.step(rows), destination(bulk_threshold=5), mode="mirror", field_mapping=MAPPING,
                    delivery=one_batch)
    assert (result["stats"]["sent"], result["stats"]["rejected"]) == (7, 1) and len(api.jobs) == 1
    [job] = api.jobs.values()
    assert job.operation == "upsert" and job.external_id_field == "Customer_Id__c"
    [reject] = p.ledger()
    assert reject["error"] == ("salesforce: FIELD_CUSTOM_VALIDATION_EXCEPTION:Blocked by a validation rule:LastName --")
    assert b"#N/A" not in job.data and b"2026-01-01T12:30:15.250Z" in job.data

    deleted = p.sync(p.step([row(1), row(2)]), destination(bulk_threshold=5), mode="mirror", field_mapping=MAPPING,
                     delivery=one_batch, allow_mass_delete=True)
    assert deleted["stats"]["deleted"] == 6 and set(contacts(api)) == {"1", "2"}
    assert [j.operation for j in api.jobs.values()] == ["upsert", "delete"]


@pytest.mark.parametrize("mapping, says", [
    ({**MAPPING, "name": "Full_Name__c"}, "no field ['Full_Name__c']"),
    ({k: v for k, v in MAPPING.items() if k != "name"}, "required fields ['LastName'] are not mapped"),
    ({**MAPPING, "id": "Email", "email": "Customer_Id__c"}, "key must be that one field"),
])
def test_a_mapping_salesforce_cannot_take_fails_before_anything_is_sent(spark, warehouse, tmp_path, api, mapping,
                                                                          says):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    error = p.sync_error(p.step([row(1)]), destination(), field_mapping=mapping)
    assert says in error["message"]
    assert not [r for r in api.requests if r.method in ("PATCH", "DELETE", "PUT")] and p.committed() is None


def test_insert_keeps_existing_records(spark, warehouse, tmp_path, api):
    api.seed("Contact", [{"Customer_Id__c": "1", "LastName": "kept as it is"}])
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    inserted = p.sync(p.step([row(1), row(2)]), destination(), mode="insert", field_mapping=MAPPING)
    assert inserted["stats"]["sent"] == 2 and contacts(api)["1"]["LastName"] == "kept as it is"
    assert set(contacts(api)) == {"1", "2"}


def test_update_changes_existing_records_and_creates_none(spark, warehouse, tmp_path, api):
    api.seed("Contact", [{"Customer_Id__c": "1", "LastName": "old"}])
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    p.sync(p.step([row(1), row(2)]), destination(), mode="update", field_mapping=MAPPING)
    updated = p.sync(p.step([row(1, name="new"), row(2, name="new")]), destination(), mode="update",
                     field_mapping=MAPPING)
    assert updated["stats"]["updated"] == 2 and set(contacts(api)) == {"1"}
    assert contacts(api)["1"]["LastName"] == "new"


def test_a_dry_run_sends_nothing(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    result = p.sync(p.step([row(1)]), destination(), field_mapping=MAPPING, dry_run=True)
    assert result["dry_run"] and api.request_count == 0
