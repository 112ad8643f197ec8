"""The Braze emulator refuses what Braze refuses (each rule's documentation is named in
tests_common/emulators/braze.py), so the braze destination cannot pass against a lenient fake."""

from __future__ import annotations

import pytest
import requests

from tests_common.emulators.braze import BrazeApi

AUTH = {"Authorization": "Bearer braze-test-key"}


def track(api, attributes, headers=AUTH, **arrays):
    return requests.post(f"{api.url}/users/track", json={"attributes": attributes, **arrays}, headers=headers,
                         timeout=10)


def delete(api, body, headers=AUTH):
    return requests.post(f"{api.url}/users/delete", json=body, headers=headers, timeout=10)


def test_track_creates_and_updates_profiles_and_null_removes(braze_api):
    first = track(braze_api, [{"external_id": "u1", "first_name": "Ada", "plan": "pro", "orders": 3},
                              {"external_id": "u2", "dob": "1906-12-09"}])
    assert first.status_code == 201 and first.json() == {"message": "success", "attributes_processed": 2}
    track(braze_api, [{"external_id": "u1", "plan": None, "vip": True, "email": "ada@example.com"}])
    assert braze_api.users["u1"] == {"external_id": "u1", "first_name": "Ada", "orders": 3, "vip": True,
                                     "email": "ada@example.com"}, "email identifies a user and is a profile field"


def test_more_than_75_objects_is_a_fatal_error(braze_api):
    response = track(braze_api, [{"external_id": f"u{i}"} for i in range(70)],
                     events=[{"external_id": "u1", "name": "e", "time": "2024-01-01T00:00:00Z"}] * 6)
    assert response.status_code == 400 and response.json()["message"] == "Max Input Length Exceeded"
    assert braze_api.users == {}
    assert track(braze_api, [{"external_id": f"u{i}"} for i in range(75)]).status_code == 201


def test_an_invalid_object_is_a_non_fatal_error_and_the_others_are_processed(braze_api):
    response = track(braze_api, [{"external_id": "u1", "first_name": "Ada"}, {"first_name": "nobody"},
                                 {"external_id": "u3", "dob": "09/12/1906"}, {"external_id": "u4", "gender": "X"},
                                 {"external_id": "u5", "tags": [["a"], ["b"]]},
                                 {"external_id": "u6", "email_subscribe": "yes please"}])
    assert response.status_code == 201
    body = response.json()
    assert body["message"] == "success" and body["attributes_processed"] == 1
    assert [(e["input_array"], e["index"]) for e in body["errors"]] == [("attributes", i) for i in range(1, 6)]
    assert "is required" in body["errors"][0]["type"] and body["errors"][1]["type"] == "'dob' is not valid"
    assert list(braze_api.users) == ["u1"]


def test_when_nothing_is_valid_the_error_is_fatal(braze_api):
    response = track(braze_api, [{"first_name": "nobody"}])
    assert response.status_code == 400
    assert response.json()["message"].startswith("Valid data must be provided")


def test_arrays_are_sets_of_at_most_25(braze_api):
    track(braze_api, [{"external_id": "u1", "tags": ["a", "a", "b"] + [str(i) for i in range(40)]}])
    tags = braze_api.users["u1"]["tags"]
    assert tags[:2] == ["a", "b"] and len(tags) == 25


def test_a_blocklisted_custom_attribute_is_dropped_silently(braze_api):
    braze_api.define_attribute("ssn", blocklisted=True)
    assert track(braze_api, [{"external_id": "u1", "ssn": "123", "plan": "pro"}]).status_code == 201
    assert braze_api.users["u1"] == {"external_id": "u1", "plan": "pro"}


def test_custom_attributes_are_listed_50_a_page_with_a_link_header(braze_api):
    for i in range(60):
        braze_api.define_attribute(f"attr_{i:02d}", "Number", blocklisted=i == 3)
    first = requests.get(f"{braze_api.url}/custom_attributes", headers=AUTH, timeout=10)
    page = first.json()["attributes"]
    assert len(page) == 50 and page[3] == {"name": "attr_03", "data_type": "Number", "description": "",
                                           "array_length": None, "status": "Blocklisted", "tag_names": []}
    assert first.links["next"]["url"].endswith("cursor=50")
    rest = requests.get(first.links["next"]["url"], headers=AUTH, timeout=10)
    assert len(rest.json()["attributes"]) == 10 and "next" not in rest.links


def test_delete_takes_at_most_50_external_ids(braze_api):
    braze_api.seed({"u1": {"plan": "pro"}, "u2": {}})
    done = delete(braze_api, {"external_ids": ["u1", "never-existed"]})
    assert done.status_code == 201 and done.json() == {"deleted": 2, "message": "success"}
    assert list(braze_api.users) == ["u2"]
    too_many = delete(braze_api, {"external_ids": [f"u{i}" for i in range(51)]})
    assert too_many.status_code == 400 and "max number of external_ids" in too_many.json()["message"]
    mixed = delete(braze_api, {"external_ids": ["u2"], "braze_ids": ["b1"]})
    assert mixed.status_code == 400 and list(braze_api.users) == ["u2"]


@pytest.mark.parametrize("endpoint", ["track", "delete"])
def test_an_unknown_key_is_401(braze_api, endpoint):
    bad = {"Authorization": "Bearer wrong"}
    response = track(braze_api, [{"external_id": "u1"}], headers=bad) if endpoint == "track" else \
        delete(braze_api, {"external_ids": ["u1"]}, headers=bad)
    assert response.status_code == 401 and response.json() == {"message": "Invalid API key"}


def test_rate_limit_headers_and_429():
    with BrazeApi() as api:
        api.add_key("k")
        api.limits["/users/track"] = (2, 60.0)
        answers = [track(api, [{"external_id": "u"}], headers={"Authorization": "Bearer k"}) for _ in range(3)]
        assert [a.status_code for a in answers] == [201, 201, 429]
        assert answers[0].headers["X-RateLimit-Limit"] == "2"
        assert [a.headers["X-RateLimit-Remaining"] for a in answers] == ["1", "0", "0"]
        assert int(answers[0].headers["X-RateLimit-Reset"]) > 0


def test_every_endpoint_is_rate_limited_in_its_own_window():
    """API rate limits, "Rate limits by request type": /users/track and /users/delete have their own
    limits; every other endpoint, GET /custom_attributes included, shares one hourly pool."""
    with BrazeApi() as api:
        api.add_key("k")
        api.limits[None] = (1, 3600.0)
        auth = {"Authorization": "Bearer k"}
        listed = [requests.get(f"{api.url}/custom_attributes", headers=auth, timeout=10) for _ in range(2)]
        assert [a.status_code for a in listed] == [200, 429]
        assert listed[1].headers["X-RateLimit-Limit"] == "1" and listed[1].headers["X-RateLimit-Remaining"] == "0"
        assert track(api, [{"external_id": "u"}], headers=auth).status_code == 201, "its own window"
