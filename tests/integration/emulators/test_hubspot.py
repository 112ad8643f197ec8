"""The HubSpot emulator refuses what HubSpot refuses (each rule's documentation is named in
tests_common/emulators/hubspot.py), so the hubspot destination cannot pass against a lenient fake."""

from __future__ import annotations

import time

import pytest
import requests

from tests_common.emulators.hubspot import HubSpotApi

AUTH = {"Authorization": "Bearer pat-test"}


def upsert(api, inputs, object_type="contacts", headers=AUTH):
    return requests.post(f"{api.url}/crm/v3/objects/{object_type}/batch/upsert", json={"inputs": inputs},
                         headers=headers, timeout=10)


def contact(email, **properties):
    return {"idProperty": "email", "id": email, "properties": properties}


def test_upsert_creates_then_updates_by_the_unique_property(hubspot_api):
    first = upsert(hubspot_api, [contact("ada@example.com", firstname="Ada"), contact("bob@example.com")])
    assert first.status_code == 200 and first.json()["status"] == "COMPLETE"
    assert [r["new"] for r in first.json()["results"]] == [True, True]
    again = upsert(hubspot_api, [contact("ada@example.com", firstname="Ada L.", lastname="Lovelace")])
    assert again.json()["results"][0]["new"] is False
    assert again.json()["results"][0]["id"] == first.json()["results"][0]["id"]
    stored = hubspot_api.find("contacts", "email", "ada@example.com")
    assert stored["firstname"] == "Ada L." and stored["lastname"] == "Lovelace"
    assert len(hubspot_api.objects("contacts")) == 2


def test_values_are_stored_as_strings_and_empty_string_clears(hubspot_api):
    hubspot_api.define_property("contacts", "orders", "number")
    hubspot_api.define_property("contacts", "vip", "bool")
    upsert(hubspot_api, [contact("a@x.io", orders=3, vip=True, city="Paris")])
    assert hubspot_api.find("contacts", "email", "a@x.io").items() >= {"orders": "3", "vip": "true",
                                                                         "city": "Paris"}.items()
    upsert(hubspot_api, [contact("a@x.io", city="")])
    assert "city" not in hubspot_api.find("contacts", "email", "a@x.io")


def test_more_than_100_inputs_is_refused_whole(hubspot_api):
    response = upsert(hubspot_api, [contact(f"u{i}@x.io") for i in range(101)])
    assert response.status_code == 400
    assert response.json()["category"] == "VALIDATION_ERROR" and "100" in response.json()["message"]
    assert hubspot_api.objects("contacts") == {}
    assert upsert(hubspot_api, [contact(f"u{i}@x.io") for i in range(100)]).status_code == 200


def test_duplicate_ids_in_one_batch_are_refused(hubspot_api):
    response = upsert(hubspot_api, [contact("a@x.io"), contact("a@x.io")])
    assert response.status_code == 400 and "Duplicate IDs" in response.json()["message"]


def test_an_unknown_property_fails_the_whole_batch_naming_it(hubspot_api):
    response = upsert(hubspot_api, [contact("a@x.io", firstname="A"), contact("b@x.io", shoe_size="44")])
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == "error" and body["category"] == "VALIDATION_ERROR"
    assert "PROPERTY_DOESNT_EXIST" in body["message"] and "shoe_size" in body["message"]
    assert hubspot_api.objects("contacts") == {}, "nothing of a refused batch is applied"


def test_with_object_write_trace_ids_a_partial_failure_is_a_207(hubspot_api):
    inputs = [dict(contact("a@x.io", firstname="A"), objectWriteTraceId="0"),
              dict(contact("b@x.io", lifecyclestage="unicorn"), objectWriteTraceId="1"),
              dict(contact("c@x.io"), objectWriteTraceId="2")]
    response = upsert(hubspot_api, inputs)
    assert response.status_code == 207
    body = response.json()
    assert body["numErrors"] == 1 and len(body["results"]) == 2
    assert body["errors"][0]["context"] == {"objectWriteTraceId": ["1"]}
    assert "allowed options" in body["errors"][0]["message"]
    assert {p["email"] for p in hubspot_api.objects("contacts").values()} == {"a@x.io", "c@x.io"}


@pytest.mark.parametrize("value, accepted", [
    ("2024-02-29", True), (1709164800000, True), ("1709164800000", True),
    (1709207999000, False), ("29/02/2024", False), ("2024-02-30", False),
])
def test_date_properties_take_iso_dates_or_midnight_utc_millis(hubspot_api, value, accepted):
    hubspot_api.define_property("contacts", "signup_day", "date")
    response = upsert(hubspot_api, [contact("a@x.io", signup_day=value)])
    assert (response.status_code == 200) is accepted, response.text
    if accepted:
        assert hubspot_api.find("contacts", "email", "a@x.io")["signup_day"] == "1709164800000"
    elif value == 1709207999000:
        assert "not midnight!" in response.json()["message"]


@pytest.mark.parametrize("prop, kind, value", [
    ("orders", "number", "many"), ("vip", "bool", "yes"), ("orders", "number", True),
    ("lifecyclestage", None, "unicorn"), ("email_address_2", None, "x"), ("createdate", None, "2024-01-01"),
    ("firstname", None, None), ("firstname", None, {"nested": 1}),
])
def test_values_hubspot_refuses(hubspot_api, prop, kind, value):
    if kind:
        hubspot_api.define_property("contacts", prop, kind)
    response = upsert(hubspot_api, [contact("a@x.io", **{prop: value})])
    assert response.status_code == 400 and response.json()["category"] == "VALIDATION_ERROR", response.text


def test_an_invalid_email_as_the_id_is_refused(hubspot_api):
    assert upsert(hubspot_api, [contact("not-an-email")]).status_code == 400


def test_id_property_must_have_unique_values(hubspot_api):
    response = upsert(hubspot_api, [{"idProperty": "firstname", "id": "Ada", "properties": {}}])
    assert response.status_code == 400 and "unique" in response.json()["message"]
    hubspot_api.define_property("contacts", "customer_id", unique=True)
    assert upsert(hubspot_api, [{"idProperty": "customer_id", "id": "7", "properties": {}}]).status_code == 200


def test_batch_read_by_id_property_reports_the_missing_in_a_207(hubspot_api):
    [ada] = hubspot_api.seed("contacts", [{"email": "ada@x.io", "firstname": "Ada"}])
    response = requests.post(f"{hubspot_api.url}/crm/v3/objects/contacts/batch/read", headers=AUTH, timeout=10,
                             json={"idProperty": "email", "inputs": [{"id": "ada@x.io"}, {"id": "zed@x.io"}],
                                   "properties": ["firstname"]})
    assert response.status_code == 207
    body = response.json()
    assert [r["id"] for r in body["results"]] == [ada]
    assert body["results"][0]["properties"]["email"] == "ada@x.io"
    assert body["errors"][0]["category"] == "OBJECT_NOT_FOUND" and body["errors"][0]["context"]["ids"] == ["zed@x.io"]


def test_archive_takes_record_ids_only_and_is_idempotent(hubspot_api):
    ids = hubspot_api.seed("contacts", [{"email": "a@x.io"}, {"email": "b@x.io"}])
    url = f"{hubspot_api.url}/crm/v3/objects/contacts/batch/archive"
    by_email = requests.post(url, json={"inputs": [{"id": "a@x.io"}]}, headers=AUTH, timeout=10)
    assert by_email.status_code == 400, "archive does not take an idProperty value"
    done = requests.post(url, json={"inputs": [{"id": ids[0]}, {"id": "999999"}]}, headers=AUTH, timeout=10)
    assert done.status_code == 204 and done.content == b""
    assert list(hubspot_api.objects("contacts")) == [ids[1]]
    assert requests.post(url, json={"inputs": [{"id": ids[0]}]}, headers=AUTH, timeout=10).status_code == 204
    too_many = requests.post(url, json={"inputs": [{"id": str(i)} for i in range(101)]}, headers=AUTH, timeout=10)
    assert too_many.status_code == 400


def test_properties_are_listed_with_types_and_uniqueness(hubspot_api):
    response = requests.get(f"{hubspot_api.url}/crm/v3/properties/contacts", headers=AUTH, timeout=10)
    props = {p["name"]: p for p in response.json()["results"]}
    assert props["email"]["hasUniqueValue"] is False, "contacts are found by email, yet it is not marked unique"
    assert props["firstname"]["type"] == "string"
    assert props["createdate"]["modificationMetadata"]["readOnlyValue"] is True
    unknown = requests.get(f"{hubspot_api.url}/crm/v3/properties/widgets", headers=AUTH, timeout=10)
    assert unknown.status_code == 400


def test_authentication_failures(hubspot_api):
    missing = upsert(hubspot_api, [contact("a@x.io")], headers={})
    assert missing.status_code == 401 and missing.json()["category"] == "INVALID_AUTHENTICATION"
    hubspot_api.add_token("oauth-token")
    hubspot_api.expire_token("oauth-token")
    expired = upsert(hubspot_api, [contact("a@x.io")], headers={"Authorization": "Bearer oauth-token"})
    assert expired.status_code == 401 and expired.json()["category"] == "EXPIRED_AUTHENTICATION"
    assert "expired" in expired.json()["message"]
    hubspot_api.add_token("read-only", scopes=["crm.objects.contacts.read"])
    forbidden = upsert(hubspot_api, [contact("a@x.io")], headers={"Authorization": "Bearer read-only"})
    assert forbidden.status_code == 403 and forbidden.json()["category"] == "MISSING_SCOPES"
    assert hubspot_api.objects("contacts") == {}


def test_the_burst_limit_answers_429_with_the_rate_limit_headers():
    with HubSpotApi(burst_limit=3, burst_window=1.0) as api:
        api.add_token("pat-test")
        answers = [upsert(api, [contact(f"u{i}@x.io")]) for i in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert [a.headers["X-HubSpot-RateLimit-Remaining"] for a in answers] == ["2", "1", "0", "0"]
        assert answers[0].headers["X-HubSpot-RateLimit-Max"] == "3"
        assert answers[0].headers["X-HubSpot-RateLimit-Interval-Milliseconds"] == "1000"
        assert "X-HubSpot-RateLimit-Daily-Remaining" in answers[0].headers
        limited = answers[3].json()
        assert limited["errorType"] == "RATE_LIMIT" and limited["policyName"] == "TEN_SECONDLY_ROLLING"
        assert "Retry-After" not in answers[3].headers, "HubSpot documents no Retry-After"
        assert len(api.objects("contacts")) == 3, "a refused request applies nothing"
        time.sleep(1.05)
        assert upsert(api, [contact("late@x.io")]).status_code == 200


def test_the_daily_limit_is_a_429_with_policy_daily():
    with HubSpotApi(daily_limit=2) as api:
        api.add_token("pat-test")
        codes = [upsert(api, [contact(f"u{i}@x.io")]).status_code for i in range(3)]
        assert codes == [200, 200, 429]
        assert api.requests[-1].reply["policyName"] == "DAILY"


def read(api, ids, id_property="email", properties=("email",)):
    return requests.post(f"{api.url}/crm/v3/objects/contacts/batch/read", headers=AUTH, timeout=10,
                         json={"idProperty": id_property, "inputs": [{"id": i} for i in ids],
                               "properties": list(properties)})


def test_emails_are_stored_in_lower_case_and_matched_case_insensitively(hubspot_api):
    """HubSpot de-duplicates contacts by email address (contacts API: "all contacts in HubSpot are
    de-duplicated by email address"), case-insensitively, and keeps the address in lower case."""
    first = upsert(hubspot_api, [contact("Ada@Example.COM", firstname="Ada")]).json()["results"][0]
    assert first["properties"]["email"] == "ada@example.com"
    again = upsert(hubspot_api, [contact("ADA@example.com", lastname="Lovelace")]).json()["results"][0]
    assert again["new"] is False and again["id"] == first["id"]
    found = read(hubspot_api, ["aDa@ExAmPlE.com"])
    assert found.status_code == 200 and [r["id"] for r in found.json()["results"]] == [first["id"]]
    assert found.json()["results"][0]["properties"]["email"] == "ada@example.com", "the stored form, not the asked"
    twice = upsert(hubspot_api, [contact("bo@x.io"), contact("BO@x.io")])
    assert twice.status_code == 400 and "Duplicate IDs" in twice.json()["message"], "one contact, twice"


def test_a_read_by_email_finds_a_contact_by_its_secondary_emails_too(hubspot_api):
    """A contact's secondary addresses are its ``hs_additional_emails``; HubSpot finds the contact by
    them when asked by email (a search by email matches them: HubSpot community, "Search for a contact by
    email address"; stricter here: the batch read by ``idProperty: email`` matches them too)."""
    [ada] = hubspot_api.seed("contacts", [{"email": "ada@x.io", "hs_additional_emails": "Lovelace@x.io;al@y.io"}])
    found = read(hubspot_api, ["lovelace@X.io", "al@y.io"], properties=("email", "hs_additional_emails"))
    assert found.status_code == 200 and [r["id"] for r in found.json()["results"]] == [ada, ada]
    assert {r["properties"]["email"] for r in found.json()["results"]} == {"ada@x.io"}
    assert found.json()["results"][0]["properties"]["hs_additional_emails"] == "lovelace@x.io;al@y.io"


def test_batch_results_come_in_no_guaranteed_order(hubspot_api):
    """The batch endpoints promise no order for ``results`` (a client matches them by their values)."""
    emails = [f"u{i:02d}@x.io" for i in range(20)]
    written = upsert(hubspot_api, [contact(e) for e in emails]).json()["results"]
    assert sorted(r["properties"]["email"] for r in written) == emails
    assert [r["properties"]["email"] for r in written] != emails
    found = [r["properties"]["email"] for r in read(hubspot_api, emails).json()["results"]]
    assert sorted(found) == emails and found != emails


def test_every_endpoint_counts_against_the_burst_limit():
    """API usage guidelines: the limits apply to every request of the app — reads and property reads
    as well as writes — each answer with the X-HubSpot-RateLimit headers."""
    with HubSpotApi(burst_limit=3, burst_window=60.0) as api:
        api.add_token("pat-test")
        answers = [requests.get(f"{api.url}/crm/v3/properties/contacts", headers=AUTH, timeout=10),
                   read(api, ["a@x.io"]),
                   requests.post(f"{api.url}/crm/v3/objects/contacts/batch/archive", headers=AUTH, timeout=10,
                                 json={"inputs": [{"id": "1"}]}),
                   requests.get(f"{api.url}/crm/v3/properties/contacts", headers=AUTH, timeout=10),
                   read(api, ["a@x.io"])]
        assert [a.status_code for a in answers] == [200, 207, 204, 429, 429]
        assert {a.json()["policyName"] for a in answers[3:]} == {"TEN_SECONDLY_ROLLING"}
        assert all("X-HubSpot-RateLimit-Remaining" in a.headers for a in answers)


def test_the_daily_limit_is_told_apart_from_the_burst_limit_on_every_endpoint():
    """API usage guidelines: a 429 names its policy; DAILY lasts until midnight (the account's time zone),
    TEN_SECONDLY_ROLLING a few seconds. The daily headers say how much of the day is left."""
    with HubSpotApi(daily_limit=1) as api:
        api.add_token("pat-test")
        assert requests.get(f"{api.url}/crm/v3/properties/contacts", headers=AUTH, timeout=10).status_code == 200
        refused = read(api, ["a@x.io"])
        assert refused.status_code == 429 and refused.json()["policyName"] == "DAILY"
        assert refused.headers["X-HubSpot-RateLimit-Daily-Remaining"] == "0"
