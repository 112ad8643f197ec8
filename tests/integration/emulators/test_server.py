"""The test server's faults (tests_common/http_server.py) as an emulator sees them, and the rate-limit windows
(tests_common/rate_windows.py)."""

from __future__ import annotations

import pytest
import requests

from tests_common.rate_windows import FixedWindow, RollingWindow

AUTH = {"Authorization": "Bearer pat-test"}
UPSERT = "/crm/v3/objects/contacts/batch/upsert"


def post(api):
    return requests.post(api.url + UPSERT, json={"inputs": []}, headers=AUTH, timeout=5)


def test_canned_replies_are_consumed_in_order_after_authentication(hubspot_api):
    hubspot_api.respond(503, {"status": "error", "message": "down"}, headers={"Retry-After": "1"}, times=2)
    unauthenticated = requests.post(hubspot_api.url + UPSERT, json={"inputs": []}, timeout=5)
    assert unauthenticated.status_code == 401, "a refused request uses up no fault"
    answers = [post(hubspot_api) for _ in range(3)]
    assert [a.status_code for a in answers] == [503, 503, 200]
    assert answers[0].headers["Retry-After"] == "1"


def test_a_permanent_fault_stays_until_cleared(hubspot_api):
    hubspot_api.respond(500, {"message": "boom"}, times=None, path="upsert")
    assert [post(hubspot_api).status_code for _ in range(3)] == [500] * 3
    hubspot_api.clear_faults()
    assert post(hubspot_api).status_code == 200


def test_a_hang_drops_the_connection(hubspot_api):
    hubspot_api.hang(0.3)
    with pytest.raises(requests.ConnectionError):
        post(hubspot_api)
    assert post(hubspot_api).status_code == 200
    assert hubspot_api.wait_for_requests(2)[0].status is None


def test_rolling_window_admits_limit_per_window():
    window = RollingWindow(2, 10.0)
    assert [window.admit(t) for t in (0.0, 1.0, 2.0, 10.5, 11.5)] == [True, True, False, True, True]
    assert window.remaining(11.5) == 0 and window.retry_after(11.5) == pytest.approx(9.0)


def test_fixed_window_resets_at_its_boundary():
    window = FixedWindow(2, 3.0)
    assert [window.admit(t) for t in (0.5, 1.0, 2.9, 3.0)] == [True, True, False, True]
    assert window.reset_at(3.0) == 6.0 and window.remaining(3.5) == 1
