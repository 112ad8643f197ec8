"""Issue 44's repros: the SaaS presets against emulators as strict as the vendors (tests_common/emulators/),
driven in process as the sync job drives them (tests_common/saas_sync.py; no JVM). Each failed on 6b54192:

1. a Salesforce Number External ID is returned as a double (``5.0``, ``1.2345678E7``) and a text one
   matches in any case: a preset comparing the key's text misses both, so deletes were counted and not
   made, ``update`` sent nothing and ``insert`` overwrote;
2. HubSpot keeps emails in lower case and matches them case-insensitively: the same, for an email key
   with capitals;
3. a 429 or 5xx on a preset's first request (HubSpot's property read, Salesforce's describe, on the
   driver and on a worker; Braze's custom attributes read) failed the sync instead of being waited out;

and the smaller ones: Salesforce's API is at the token's ``instance_url``, its transient 403
``REQUEST_LIMIT_EXCEEDED`` is retried, HubSpot's DAILY 429 fails the sync at once naming it."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.errors import DestinationError, DestinationUnreachableError
from tests_common.emulators.hubspot import HubSpotApi
from tests_common.saas_sync import braze, change, hubspot, salesforce, sync

NUMBER_KEY = pa.schema([("Account_No__c", pa.int64()), ("LastName", pa.string())])
TEXT_KEY = pa.schema([("Customer_Id__c", pa.string()), ("LastName", pa.string())])
EMAIL_KEY = pa.schema([("email", pa.string()), ("firstname", pa.string())])
#: HubSpot's burst 429 (API usage guidelines); the emulator adds the X-HubSpot-RateLimit headers.
BURST_429 = {"status": "error", "message": "You have reached your ten_secondly_rolling limit.", "errorType":
             "RATE_LIMIT", "policyName": "TEN_SECONDLY_ROLLING", "category": "RATE_LIMITS"}


def test_a_number_external_id_is_matched_as_the_double_salesforce_returns(salesforce_api):
    api = salesforce_api
    api.define_field("Contact", "Account_No__c", "double", external_id=True)
    destination = salesforce(api, "Account_No__c")
    keys = (5, 12345678)
    sync(destination, NUMBER_KEY, [change("upsert", {"Account_No__c": n}, {"LastName": "x"}) for n in keys], "mirror")
    assert len(api.records("Contact")) == 2
    updated = sync(destination, NUMBER_KEY, [change("update", {"Account_No__c": 5}, {"LastName": "new"}, "update")],
                   "update")
    assert updated.stats["updated"] == 1 and api.find("Contact", "Account_No__c", 5)["LastName"] == "new"
    sync(destination, NUMBER_KEY, [change("insert", {"Account_No__c": 12345678}, {"LastName": "again"})], "insert")
    assert api.find("Contact", "Account_No__c", 12345678)["LastName"] == "x", "insert keeps a record that exists"
    gone = sync(destination, NUMBER_KEY, [change("delete", {"Account_No__c": n}) for n in keys], "mirror")
    assert gone.stats["deleted"] == 2 and api.records("Contact") == {}, "deletes reported are deletes made"


def test_a_text_external_id_held_in_another_case_is_matched(salesforce_api):
    api = salesforce_api
    api.seed("Contact", [{"Customer_Id__c": "ABC-1", "LastName": "x"}, {"Customer_Id__c": "XyZ", "LastName": "y"}])
    destination = salesforce(api)
    updated = sync(destination, TEXT_KEY, [change("update", {"Customer_Id__c": "xyz"}, {"LastName": "z"}, "update")],
                   "update")
    assert updated.stats["updated"] == 1 and api.find("Contact", "Customer_Id__c", "XYZ")["LastName"] == "z"
    gone = sync(destination, TEXT_KEY, [change("delete", {"Customer_Id__c": k}) for k in ("abc-1", "xYz")], "mirror")
    assert gone.stats["deleted"] == 2 and api.records("Contact") == {}


def test_an_email_key_with_capitals_is_matched_as_hubspot_matches_emails(hubspot_api):
    api = hubspot_api
    destination = hubspot(api)
    key = {"email": "Ada@Example.com"}
    sync(destination, EMAIL_KEY, [change("upsert", key, {"firstname": "Ada"})], "mirror")
    assert [p["email"] for p in api.objects("contacts").values()] == ["ada@example.com"]
    updated = sync(destination, EMAIL_KEY, [change("update", key, {"firstname": "Ada L."}, "update")], "update")
    assert updated.stats["updated"] == 1 and api.find("contacts", "email", "ada@example.com")["firstname"] == "Ada L."
    sync(destination, EMAIL_KEY, [change("insert", key, {"firstname": "Other"})], "insert")
    assert api.find("contacts", "email", "ada@example.com")["firstname"] == "Ada L.", "insert keeps what exists"
    gone = sync(destination, EMAIL_KEY, [change("delete", key)], "mirror")
    assert gone.stats["deleted"] == 1 and api.objects("contacts") == {}


def test_a_429_on_hubspots_first_request_is_waited_out_on_the_driver_and_on_a_worker():
    from spark_jobs.sinks.saas import hubspot as module

    with HubSpotApi(burst_window=0.2) as api:  # the window the 429 names: 200 ms
        waited_out_on_the_driver_and_on_a_worker(api, module)


def waited_out_on_the_driver_and_on_a_worker(api, module):
    destination = hubspot(api)
    api.respond(429, BURST_429, times=2, path="/crm/v3/properties/")
    done = sync(destination, EMAIL_KEY, [change("upsert", {"email": "a@x.io"}, {"firstname": "A"})], "upsert")
    assert done.stats["sent"] == 1 and len(api.requests_to("GET", "properties")) == 3
    module._PROPERTIES._entries.clear()  # a worker process of its own: it reads the properties again
    api.respond(503, {"status": "error", "message": "unavailable"}, times=1, path="/crm/v3/properties/")
    sink = destination.sink(destination.config("email", ["email", "firstname"], "upsert"))
    sink.open()
    sink.close()


def test_a_5xx_on_salesforces_describe_is_retried(salesforce_api):
    api = salesforce_api
    api.respond(503, [{"errorCode": "SERVER_UNAVAILABLE", "message": "try again"}], times=2, path="describe")
    done = sync(salesforce(api), TEXT_KEY, [change("upsert", {"Customer_Id__c": "c1"}, {"LastName": "x"})],
                "upsert")
    assert done.stats["sent"] == 1 and api.find("Contact", "Customer_Id__c", "c1")


def test_a_describe_that_keeps_failing_gives_up_after_the_policys_attempts_as_unreachable(salesforce_api):
    """The requests outside a batch are retried by the core's schedule too, and give up as it does:
    retryable, naming the attempts and the vendor's answer, with nothing sent."""
    api = salesforce_api
    api.respond(503, [{"errorCode": "SERVER_UNAVAILABLE", "message": "down for maintenance"}],
                {"Retry-After": "0"}, times=None, path="describe")
    attempts = DeliveryPolicy().max_attempts
    with pytest.raises(DestinationUnreachableError, match=f"still failing after {attempts} attempts.*maintenance"):
        sync(salesforce(api), TEXT_KEY, [change("upsert", {"Customer_Id__c": "c1"}, {"LastName": "x"})], "upsert")
    assert len(api.requests_to("GET", "describe")) == attempts and not api.requests_to("PATCH", "composite")


def test_salesforce_calls_go_to_the_instance_url_the_token_names(salesforce_api):
    api = salesforce_api
    sync(salesforce(api), TEXT_KEY, [change("upsert", {"Customer_Id__c": "c1"}, {"LastName": "x"})], "upsert")
    assert api.login.requests_to("POST", "oauth2/token") and not api.login.requests_to("GET", "describe")
    assert api.requests_to("PATCH", "composite/sobjects") and api.find("Contact", "Customer_Id__c", "c1")


def test_a_transient_403_request_limit_exceeded_is_retried(salesforce_api):
    """Concurrent long-running requests: a 403 REQUEST_LIMIT_EXCEEDED that passes as they end."""
    api = salesforce_api
    api.respond(403, [{"message": "ConcurrentPerOrgLongTxn Limit exceeded.", "errorCode": "REQUEST_LIMIT_EXCEEDED"}],
                times=2, path="composite/sobjects")
    done = sync(salesforce(api), TEXT_KEY, [change("upsert", {"Customer_Id__c": "c1"}, {"LastName": "x"})],
                "upsert")
    assert done.stats["sent"] == 1 and done.stats["retried"] >= 1


def test_salesforces_daily_allocation_used_up_fails_the_sync_naming_it(salesforce_api):
    api = salesforce_api
    api.daily_limit = 1  # the describe of prepare uses it up
    with pytest.raises(DestinationError, match="TotalRequests Limit exceeded") as failure:
        sync(salesforce(api), TEXT_KEY, [change("upsert", {"Customer_Id__c": "c1"}, {"LastName": "x"})], "upsert")
    assert not isinstance(failure.value, DestinationUnreachableError)


def test_hubspots_daily_limit_fails_the_sync_at_once_naming_it():
    with HubSpotApi(daily_limit=2) as api:  # the property read and one batch
        destination = hubspot(api)
        started = time.monotonic()
        with pytest.raises(DestinationError, match="daily") as failure:
            sync(destination, EMAIL_KEY, [change("upsert", {"email": f"u{i}@x.io"}, {"firstname": "u"})
                                          for i in range(150)], "upsert")
        assert time.monotonic() - started < 5, "the daily limit lasts until midnight: not waited for"
        assert "midnight" in str(failure.value) and len(api.objects("contacts")) == 100


def test_a_429_on_brazes_custom_attributes_read_is_waited_out(braze_api):
    """Braze's read before a sync (GET /custom_attributes) is rate limited like every endpoint; its 429 is
    waited out until X-RateLimit-Reset, as a write's is."""
    api = braze_api
    api.limits[None] = (250_000, 1.0)  # the shared pool's window: a second here, so its reset is near
    api.respond(429, {"message": "Rate limit exceeded"}, times=1, path="custom_attributes")
    schema = pa.schema([("external_id", pa.string()), ("plan", pa.string())])
    done = sync(braze(api), schema, [change("upsert", {"external_id": "u1"}, {"plan": "pro"})], "upsert")
    assert done.stats["sent"] == 1 and api.users["u1"]["plan"] == "pro"
    assert [r.status for r in api.requests_to("GET", "custom_attributes")] == [429, 200]
