"""The Salesforce emulator refuses what Salesforce refuses (each rule's documentation is named in
tests_common/emulators/salesforce/), so the salesforce destination cannot pass against a lenient fake."""

from __future__ import annotations

import csv
import io
import threading
import time

import pytest
import requests

from tests_common.emulators.salesforce import SalesforceApi

V = "/services/data/v60.0"


def session(api) -> dict[str, str]:
    response = requests.post(f"{api.login_url}/services/oauth2/token", timeout=10, data={
        "grant_type": "client_credentials", "client_id": "sf-client", "client_secret": "sf-secret"})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def upsert(api, records, auth, all_or_none=False, field="Customer_Id__c"):
    body = {"allOrNone": all_or_none, "records": [{"attributes": {"type": "Contact"}, **r} for r in records]}
    return requests.patch(f"{api.url}{V}/composite/sobjects/Contact/{field}", json=body, headers=auth, timeout=10)


@pytest.fixture
def sf(salesforce_api):
    return salesforce_api, session(salesforce_api)


def test_client_credentials_token_and_its_failures(salesforce_api):
    token_url = f"{salesforce_api.login_url}/services/oauth2/token"
    token = requests.post(token_url, timeout=10, auth=("sf-client", "sf-secret"),
                          data={"grant_type": "client_credentials"}).json()
    assert token["token_type"] == "Bearer" and token["instance_url"] == salesforce_api.url
    assert "expires_in" not in token, "Salesforce tells a client its session ended with a 401, not in advance"
    wrong = requests.post(token_url, timeout=10, data={
        "grant_type": "client_credentials", "client_id": "sf-client", "client_secret": "nope"})
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_client"
    grant = requests.post(token_url, timeout=10, data={"grant_type": "password"})
    assert grant.json()["error"] == "unsupported_grant_type"


def test_the_api_is_served_at_the_instance_url_the_token_names_not_at_the_login_url(sf):
    """OAuth 2.0 Client Credentials Flow: the token response's ``instance_url`` is where the org's API is."""
    api, auth = sf
    assert api.login_url != api.url, "two origins, as a login URL and an instance are"
    at_login = requests.get(f"{api.login_url}{V}/sobjects/Contact/describe", headers=auth, timeout=10)
    assert at_login.status_code == 404 and at_login.json()[0]["errorCode"] == "NOT_FOUND"
    assert requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth, timeout=10).status_code == 200
    no_token = requests.post(f"{api.url}/services/oauth2/token", timeout=10, data={
        "grant_type": "client_credentials", "client_id": "sf-client", "client_secret": "sf-secret"})
    assert no_token.status_code == 401, "the instance issues no token"


def test_logins_past_the_hourly_login_rate_are_refused():
    """Knowledge Article 000381578, "Login Rate Exceeded": 3,600 logins an hour per user."""
    with SalesforceApi() as api:
        api.add_client("sf-client", "sf-secret")
        api.login.login_limit = 2
        session(api), session(api)
        third = requests.post(f"{api.login_url}/services/oauth2/token", timeout=10, data={
            "grant_type": "client_credentials", "client_id": "sf-client", "client_secret": "sf-secret"})
        assert third.status_code == 400 and third.json()["error"] == "invalid_grant"
        assert "LOGIN_RATE_EXCEEDED" in third.json()["error_description"]


def test_a_missing_or_expired_session_is_invalid_session_id(sf):
    api, auth = sf
    assert requests.get(f"{api.url}{V}/sobjects/Contact/describe", timeout=10).status_code == 401
    assert requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth, timeout=10).status_code == 200
    api.expire_sessions()
    expired = requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth, timeout=10)
    assert expired.status_code == 401
    assert expired.json() == [{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]


def test_describe_names_fields_types_and_external_ids(sf):
    api, auth = sf
    fields = {f["name"]: f for f in requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth,
                                                  timeout=10).json()["fields"]}
    assert fields["Customer_Id__c"]["externalId"] is True and fields["Birthdate"]["type"] == "date"
    assert fields["LastName"]["nillable"] is False and fields["Id"]["createable"] is False
    missing = requests.get(f"{api.url}{V}/sobjects/Widget__c/describe", headers=auth, timeout=10)
    assert missing.status_code == 404 and missing.json()[0]["errorCode"] == "NOT_FOUND"


def test_collections_upsert_creates_then_updates_on_the_external_id(sf):
    api, auth = sf
    first = upsert(api, [{"Customer_Id__c": "c1", "LastName": "Lovelace", "Birthdate": "1815-12-10"},
                         {"Customer_Id__c": "c2", "LastName": "Hopper", "Lifetime_Value__c": 12.5}], auth)
    assert first.status_code == 200
    assert [(r["success"], r["created"]) for r in first.json()] == [(True, True), (True, True)]
    second = upsert(api, [{"Customer_Id__c": "c1", "FirstName": "Ada", "Birthdate": None}], auth)
    assert second.json()[0]["created"] is False and second.json()[0]["id"] == first.json()[0]["id"]
    stored = api.find("Contact", "Customer_Id__c", "c1")
    assert stored["FirstName"] == "Ada" and stored["LastName"] == "Lovelace" and stored["Birthdate"] is None
    assert stored["HasOptedOutOfEmail"] is False


def test_more_than_200_records_is_refused_whole(sf):
    api, auth = sf
    response = upsert(api, [{"Customer_Id__c": f"c{i}", "LastName": "x"} for i in range(201)], auth)
    assert response.status_code == 400 and response.json()[0]["errorCode"] == "EXCEEDED_ID_LIMIT"
    assert api.records("Contact") == {}


def test_a_record_without_its_type_is_refused(sf):
    api, auth = sf
    body = {"records": [{"Customer_Id__c": "c1", "LastName": "x"}]}
    response = requests.patch(f"{api.url}{V}/composite/sobjects/Contact/Customer_Id__c", json=body, headers=auth,
                              timeout=10)
    assert response.status_code == 400 and response.json()[0]["message"] == "Must send a concrete entity type."


def test_an_unknown_field_fails_the_whole_request_naming_it(sf):
    api, auth = sf
    response = upsert(api, [{"Customer_Id__c": "c1", "LastName": "x"},
                            {"Customer_Id__c": "c2", "LastName": "y", "Shoe_Size__c": 44}], auth)
    assert response.status_code == 400
    assert response.json() == [{"message": "No such column 'Shoe_Size__c' on sobject of type Contact",
                                "errorCode": "INVALID_FIELD"}]
    assert api.records("Contact") == {}


@pytest.mark.parametrize("field, value", [
    ("Lifetime_Value__c", "12.50"), ("Birthdate", "10/12/1815"), ("Birthdate", 1815),
    ("HasOptedOutOfEmail", "true"), ("Signed_Up_At__c", "2024-01-31"), ("LastName", 42),
])
def test_a_value_of_the_wrong_json_type_is_a_parser_error(sf, field, value):
    api, auth = sf
    response = upsert(api, [{"Customer_Id__c": "c1", "LastName": "x", field: value}], auth)
    assert response.status_code == 400 and response.json()[0]["errorCode"] == "JSON_PARSER_ERROR", response.text


def test_per_record_errors_in_salesforce_shape_and_the_rest_saved(sf):
    api, auth = sf
    api.reject("Contact", lambda r: r.get("LastName") == "Blocked", "Blocked contacts are not allowed", ["LastName"])
    response = upsert(api, [
        {"Customer_Id__c": "ok", "LastName": "Fine"},
        {"Customer_Id__c": "nolast", "FirstName": "No last name"},
        {"Customer_Id__c": "mail", "LastName": "x", "Email": "not-an-email"},
        {"Customer_Id__c": "long", "LastName": "x" * 81},
        {"Customer_Id__c": "pick", "LastName": "x", "LeadSource": "Carrier pigeon"},
        {"Customer_Id__c": "rule", "LastName": "Blocked"},
        {"Customer_Id__c": "ok", "LastName": "Twice"},
        {"LastName": "No key"},
    ], auth)
    assert response.status_code == 200
    results = response.json()
    assert results[0]["success"] is True
    codes = [r["errors"][0]["statusCode"] for r in results[1:]]
    assert codes == ["REQUIRED_FIELD_MISSING", "INVALID_EMAIL_ADDRESS", "STRING_TOO_LONG",
                     "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", "FIELD_CUSTOM_VALIDATION_EXCEPTION",
                     "DUPLICATE_EXTERNAL_ID", "MISSING_ARGUMENT"]
    assert results[1]["errors"][0] == {"statusCode": "REQUIRED_FIELD_MISSING", "fields": ["LastName"],
                                       "message": "Required fields are missing: [LastName]"}
    assert all(r["success"] is False and "id" not in r for r in results[1:])
    assert [r["Customer_Id__c"] for r in api.records("Contact").values()] == ["ok"]


def test_all_or_none_rolls_every_record_back(sf):
    api, auth = sf
    response = upsert(api, [{"Customer_Id__c": "a", "LastName": "x"}, {"Customer_Id__c": "b"}], auth,
                      all_or_none=True)
    results = response.json()
    assert results[0]["errors"][0]["statusCode"] == "ALL_OR_NONE_OPERATION_ROLLED_BACK"
    assert results[1]["errors"][0]["statusCode"] == "REQUIRED_FIELD_MISSING"
    assert api.records("Contact") == {}


def test_upsert_needs_an_external_id_field_in_the_uri(sf):
    api, auth = sf
    response = upsert(api, [{"LastName": "x"}], auth, field="LastName")
    assert response.status_code == 404 and response.json()[0]["errorCode"] == "NOT_FOUND"


def test_collections_delete_takes_record_ids_with_per_record_results(sf):
    api, auth = sf
    ids = api.seed("Contact", [{"Customer_Id__c": "a", "LastName": "x"}, {"Customer_Id__c": "b", "LastName": "y"}])
    url = f"{api.url}{V}/composite/sobjects"
    response = requests.delete(url, params={"ids": f"{ids[0]},b,003000000000ZZZAAA"}, headers=auth, timeout=10)
    results = response.json()
    assert results[0] == {"id": ids[0], "success": True, "errors": []}
    assert results[1]["errors"][0]["statusCode"] == "MALFORMED_ID", "an external id is not a record id"
    assert results[2]["errors"][0]["statusCode"] == "INVALID_CROSS_REFERENCE_KEY"
    again = requests.delete(url, params={"ids": ids[0]}, headers=auth, timeout=10).json()
    assert again[0]["errors"][0]["statusCode"] == "ENTITY_IS_DELETED"
    assert list(api.records("Contact")) == [ids[1]]
    too_many = requests.delete(url, params={"ids": ",".join([ids[1]] * 201)}, headers=auth, timeout=10)
    assert too_many.status_code == 400 and too_many.json()[0]["errorCode"] == "EXCEEDED_ID_LIMIT"


def test_soql_finds_ids_by_external_id_and_skips_deleted_records(sf):
    api, auth = sf
    ids = api.seed("Contact", [{"Customer_Id__c": c, "LastName": "x"} for c in ("a", "b'q", "c")])
    requests.delete(f"{api.url}{V}/composite/sobjects", params={"ids": ids[2]}, headers=auth, timeout=10)
    soql = "SELECT Id, Customer_Id__c FROM Contact WHERE Customer_Id__c IN ('a', 'b\\'q', 'c', 'zzz')"
    body = requests.get(f"{api.url}{V}/query", params={"q": soql}, headers=auth, timeout=10).json()
    assert body["done"] is True and body["totalSize"] == 2
    assert {(r["Id"], r["Customer_Id__c"]) for r in body["records"]} == {(ids[0], "a"), (ids[1], "b'q")}
    assert body["records"][0]["attributes"]["type"] == "Contact"


@pytest.mark.parametrize("soql, code", [
    ("SELEKT Id FROM Contact", "MALFORMED_QUERY"),
    ("SELECT Id FROM Widget__c", "INVALID_TYPE"),
    ("SELECT Nope__c FROM Contact", "INVALID_FIELD"),
    ("SELECT Id FROM Contact WHERE Customer_Id__c IN (a, b)", "MALFORMED_QUERY"),
])
def test_soql_errors(sf, soql, code):
    api, auth = sf
    response = requests.get(f"{api.url}{V}/query", params={"q": soql}, headers=auth, timeout=10)
    assert response.status_code == 400 and response.json()[0]["errorCode"] == code


def test_soql_pages_past_2000_records(sf):
    api, auth = sf
    api.seed("Contact", [{"Customer_Id__c": str(i), "LastName": "x"} for i in range(2001)])
    first = requests.get(f"{api.url}{V}/query", params={"q": "SELECT Id FROM Contact"}, headers=auth, timeout=10).json()
    assert first["done"] is False and len(first["records"]) == 2000 and first["totalSize"] == 2001
    rest = requests.get(api.url + first["nextRecordsUrl"], headers=auth, timeout=10).json()
    assert rest["done"] is True and len(rest["records"]) == 1


def test_the_daily_api_allocation_and_the_usage_header():
    with SalesforceApi(daily_limit=2) as api:
        api.add_client("sf-client", "sf-secret")
        auth = session(api)
        answers = [requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth, timeout=10) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 403]
        assert answers[0].headers["Sforce-Limit-Info"] == "api-usage=1/2"
        assert answers[2].json() == [{"message": "TotalRequests Limit exceeded.",
                                      "errorCode": "REQUEST_LIMIT_EXCEEDED"}]


def test_an_api_version_without_the_resource_is_not_found(sf):
    api, auth = sf
    old = requests.patch(f"{api.url}/services/data/v45.0/composite/sobjects/Contact/Customer_Id__c",
                         json={"records": []}, headers=auth, timeout=10)
    assert old.status_code == 404, "sObject Collections upsert exists from API 46.0"


# -- Bulk API 2.0 ---------------------------------------------------------------------------------------------
def bulk_job(api, auth, operation="upsert", data=None, **options):
    job = requests.post(f"{api.url}{V}/jobs/ingest", headers=auth, timeout=10, json={
        "object": "Contact", "operation": operation, "contentType": "CSV", "lineEnding": "LF", **options})
    assert job.status_code == 200, job.text
    job_id = job.json()["id"]
    assert job.json()["state"] == "Open"
    if data is not None:
        upload = requests.put(f"{api.url}{V}/jobs/ingest/{job_id}/batches", data=data.encode(), timeout=10,
                              headers={**auth, "Content-Type": "text/csv"})
        assert upload.status_code == 201, upload.text
        closed = requests.patch(f"{api.url}{V}/jobs/ingest/{job_id}", json={"state": "UploadComplete"}, headers=auth,
                                timeout=10)
        assert closed.json()["state"] == "UploadComplete"
    return job_id


def wait_done(api, auth, job_id):
    states = []
    for _ in range(100):
        info = requests.get(f"{api.url}{V}/jobs/ingest/{job_id}", headers=auth, timeout=10).json()
        states.append(info["state"])
        if info["state"] in ("JobComplete", "Failed", "Aborted"):
            return info, states
        time.sleep(0.05)
    raise AssertionError(states)


def results(api, auth, job_id, kind):
    text = requests.get(f"{api.url}{V}/jobs/ingest/{job_id}/{kind}/", headers=auth, timeout=10).text
    return list(csv.DictReader(io.StringIO(text)))


def test_bulk_upsert_job_with_failed_records_and_their_reasons(sf):
    api, auth = sf
    api.seed("Contact", [{"Customer_Id__c": "c1", "LastName": "Old", "Phone": "555"}])
    data = ("Customer_Id__c,LastName,Phone,Birthdate,HasOptedOutOfEmail\n"
            "c1,Lovelace,,1815-12-10,true\n"          # empty Phone: unchanged
            "c2,Hopper,#N/A,1906-12-09,false\n"
            "c3,,555,1900-01-01,false\n"              # no LastName on create
            "c4,Turing,1,12/06/1912,false\n")         # a date Salesforce cannot read
    job_id = bulk_job(api, auth, data=data, externalIdFieldName="Customer_Id__c")
    info, states = wait_done(api, auth, job_id)
    assert info["state"] == "JobComplete" and "InProgress" in states
    assert info["numberRecordsProcessed"] == 4 and info["numberRecordsFailed"] == 2
    c1 = api.find("Contact", "Customer_Id__c", "c1")
    assert c1["LastName"] == "Lovelace" and c1["Phone"] == "555" and c1["HasOptedOutOfEmail"] is True
    assert api.find("Contact", "Customer_Id__c", "c2")["Phone"] is None
    failed = {r["Customer_Id__c"]: r["sf__Error"] for r in results(api, auth, job_id, "failedResults")}
    assert failed["c3"] == "REQUIRED_FIELD_MISSING:Required fields are missing: [LastName]:LastName --"
    assert failed["c4"].startswith("INVALID_TYPE_ON_FIELD_IN_RECORD:Birthdate")
    succeeded = results(api, auth, job_id, "successfulResults")
    assert sorted((r["Customer_Id__c"], r["sf__Created"]) for r in succeeded) == [("c1", "false"), ("c2", "true")]


def test_bulk_delete_job_takes_record_ids(sf):
    api, auth = sf
    ids = api.seed("Contact", [{"Customer_Id__c": "a", "LastName": "x"}, {"Customer_Id__c": "b", "LastName": "y"}])
    job_id = bulk_job(api, auth, operation="delete", data=f"Id\n{ids[0]}\n003000000000QQQAAA\n")
    info, _ = wait_done(api, auth, job_id)
    assert info["numberRecordsFailed"] == 1 and list(api.records("Contact")) == [ids[1]]
    [failed] = results(api, auth, job_id, "failedResults")
    assert failed["sf__Error"].startswith("INVALID_CROSS_REFERENCE_KEY")


@pytest.mark.parametrize("data, message", [
    ("Customer_Id__c,Shoe_Size__c\nc1,44\n", "InvalidBatch : Field name not found : Shoe_Size__c"),
    ("Customer_Id__c,LastName\r\nc1,x\r\n", "LineEnding is invalid on user data. Current LineEnding setting is LF"),
    ("LastName\nx\n", "Field name not provided: Customer_Id__c"),
])
def test_a_bulk_job_whose_data_salesforce_cannot_take_fails(sf, data, message):
    api, auth = sf
    job_id = bulk_job(api, auth, data=data, externalIdFieldName="Customer_Id__c")
    info, _ = wait_done(api, auth, job_id)
    assert info["state"] == "Failed" and message in info["errorMessage"]
    assert api.records("Contact") == {}


def test_bulk_job_rules(sf):
    api, auth = sf
    no_ext = requests.post(f"{api.url}{V}/jobs/ingest", headers=auth, timeout=10,
                           json={"object": "Contact", "operation": "upsert"})
    assert no_ext.status_code == 400 and no_ext.json()[0]["errorCode"] == "INVALIDJOB"
    job_id = bulk_job(api, auth, data="Customer_Id__c,LastName\nc1,x\n", externalIdFieldName="Customer_Id__c")
    again = requests.put(f"{api.url}{V}/jobs/ingest/{job_id}/batches", data=b"Customer_Id__c,LastName\nc2,y\n",
                         headers={**auth, "Content-Type": "text/csv"}, timeout=10)
    assert again.status_code == 409, "job data is uploaded once, while the job is Open"
    early = requests.get(f"{api.url}{V}/jobs/ingest/{job_id}/failedResults/", headers=auth, timeout=10)
    assert early.status_code == 400, "no results before the job is done"
    wait_done(api, auth, job_id)
    assert requests.delete(f"{api.url}{V}/jobs/ingest/{job_id}", headers=auth, timeout=10).status_code == 204
    gone = requests.get(f"{api.url}{V}/jobs/ingest/{job_id}", headers=auth, timeout=10)
    assert gone.status_code == 404


def query(api, auth, soql):
    return requests.get(f"{api.url}{V}/query", params={"q": soql}, headers=auth, timeout=10)


def test_number_fields_are_stored_and_returned_as_doubles(sf):
    """Knowledge Article 000221617: custom Number fields are stored as doubles; the API returns 12345678 as
    1.2345678E7 (and 1234567 as 1234567.0). A double cannot hold 2^53 + 1."""
    api, auth = sf
    api.define_field("Contact", "Account_No__c", "double", external_id=True)
    upsert(api, [{"Account_No__c": n, "LastName": "x"} for n in (5, 12345678, 2 ** 53 + 1)], auth,
           field="Account_No__c")
    text = query(api, auth, "SELECT Account_No__c FROM Contact WHERE Account_No__c IN (5, 12345678)").text
    assert '"Account_No__c": 5.0' in text and '"Account_No__c": 1.2345678E7' in text
    assert api.find("Contact", "Account_No__c", 2 ** 53)["Account_No__c"] == 2.0 ** 53, "stored as a double"
    again = upsert(api, [{"Account_No__c": 2 ** 53, "LastName": "y"}], auth, field="Account_No__c")
    assert again.json()[0]["created"] is False, "2^53 and 2^53 + 1 are one double: one record"


def test_soql_compares_by_type_and_text_case_insensitively(sf):
    """SOQL Comparison Operators: "Comparisons on strings are case-sensitive for unique case-sensitive fields.
    For all other fields, comparisons are case-insensitive"; fieldExpression: a value of the field's type,
    numbers without quotes."""
    api, auth = sf
    api.define_field("Contact", "Account_No__c", "double", external_id=True)
    api.define_field("Contact", "Code__c", external_id=True, case_sensitive=True)
    api.seed("Contact", [{"Customer_Id__c": "Ab-1", "Account_No__c": 7, "Code__c": "Xy", "LastName": "x"}])
    assert query(api, auth, "SELECT Id FROM Contact WHERE Customer_Id__c IN ('aB-1')").json()["totalSize"] == 1
    assert query(api, auth, "SELECT Id FROM Contact WHERE Code__c IN ('xy')").json()["totalSize"] == 0
    assert query(api, auth, "SELECT Id FROM Contact WHERE Code__c IN ('Xy')").json()["totalSize"] == 1
    assert query(api, auth, "SELECT Id FROM Contact WHERE Account_No__c IN (7.0)").json()["totalSize"] == 1
    quoted = query(api, auth, "SELECT Id FROM Contact WHERE Account_No__c IN ('7')")
    assert quoted.status_code == 400 and quoted.json()[0]["errorCode"] == "INVALID_QUERY_FILTER_OPERATOR"
    assert "must be of type double and should not be enclosed in quotes" in quoted.json()[0]["message"]
    bare = query(api, auth, "SELECT Id FROM Contact WHERE Customer_Id__c IN (7)")
    assert bare.status_code == 400 and "must be of type string and should be enclosed in quotes" in bare.text


def test_an_external_id_matches_case_insensitively_unless_the_field_is_case_sensitive(sf):
    """A text External ID is unique and case-insensitive unless set case-sensitive (Describe's
    caseSensitive); an Email one never is case-sensitive."""
    api, auth = sf
    first = upsert(api, [{"Customer_Id__c": "ABC", "LastName": "x"}], auth).json()[0]
    same = upsert(api, [{"Customer_Id__c": "abc", "LastName": "y"}], auth).json()[0]
    assert same["created"] is False and same["id"] == first["id"]
    duplicate = upsert(api, [{"Customer_Id__c": "q", "LastName": "x"}, {"Customer_Id__c": "Q", "LastName": "y"}], auth)
    assert duplicate.json()[1]["errors"][0]["statusCode"] == "DUPLICATE_EXTERNAL_ID"
    api.define_field("Contact", "Code__c", external_id=True, case_sensitive=True)
    upsert(api, [{"Code__c": "K", "LastName": "x"}, {"Code__c": "k", "LastName": "y"}], auth, field="Code__c")
    assert len([r for r in api.records("Contact").values() if r.get("Code__c")]) == 2
    described = requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth, timeout=10).json()["fields"]
    assert {f["name"]: f["caseSensitive"] for f in described}["Code__c"] is True


def test_query_results_come_in_no_guaranteed_order(sf):
    """Without ORDER BY the Query resource promises no order (this emulator shuffles, seeded)."""
    api, auth = sf
    api.seed("Contact", [{"Customer_Id__c": f"c{i:02d}", "LastName": "x"} for i in range(20)])
    found = [r["Customer_Id__c"] for r in query(api, auth, "SELECT Customer_Id__c FROM Contact").json()["records"]]
    assert sorted(found) == [f"c{i:02d}" for i in range(20)] and found != sorted(found)


def test_concurrent_long_running_requests_are_a_transient_403():
    """API Request Limits and Allocations, Concurrent API Request Limits: past the long-running requests an
    org may have at once, 403 REQUEST_LIMIT_EXCEEDED "ConcurrentPerOrgLongTxn Limit exceeded." until they end."""
    with SalesforceApi() as api:
        api.add_client("sf-client", "sf-secret")
        auth = session(api)
        api.concurrent_limit, api.long_seconds = 1, 0.2
        api.hang(1.0, path="describe", then="apply")  # one request that runs long
        slow = threading.Thread(target=requests.get, args=(f"{api.url}{V}/sobjects/Contact/describe",),
                                kwargs={"headers": auth, "timeout": 10})
        slow.start()
        time.sleep(0.5)
        busy = query(api, auth, "SELECT Id FROM Contact")
        assert busy.status_code == 403
        assert busy.json() == [{"message": "ConcurrentPerOrgLongTxn Limit exceeded.",
                                "errorCode": "REQUEST_LIMIT_EXCEEDED"}]
        slow.join()
        assert query(api, auth, "SELECT Id FROM Contact").status_code == 200


def test_every_endpoint_counts_against_the_daily_allocation():
    """API Request Limits and Allocations: every API request counts — describe, query, writes, Bulk jobs."""
    with SalesforceApi(daily_limit=3) as api:
        api.add_client("sf-client", "sf-secret")
        auth = session(api)
        answers = [requests.get(f"{api.url}{V}/sobjects/Contact/describe", headers=auth, timeout=10),
                   query(api, auth, "SELECT Id FROM Contact"),
                   requests.post(f"{api.url}{V}/jobs/ingest", headers=auth, timeout=10, json={
                       "object": "Contact", "operation": "delete"}),
                   query(api, auth, "SELECT Id FROM Contact")]
        assert [a.status_code for a in answers] == [200, 200, 200, 403]
        assert answers[3].headers["Sforce-Limit-Info"] == "api-usage=3/3"
