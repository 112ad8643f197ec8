"""The braze destination through the sync job (real Spark, the Braze emulator of
tests_common/emulators/braze.py): mirror mode in requests of 75 objects and 50 deletes with Braze's
value forms, a profile Braze refuses into the ledger with Braze's reason, update mode creating no
profile, a blocklisted attribute failing the sync before anything is sent, and a 429 waited out
until Braze's X-RateLimit-Reset."""

import datetime as dt
import json
from decimal import Decimal

import pytest

from tests_common.emulators.braze import BrazeApi
from tests_common.pipeline import Pipeline

SCHEMA = "id INT, name STRING, email STRING, born DATE, score DECIMAL(10,2), seen TIMESTAMP"
KEY_ENV = "ARETL_TEST_BRAZE_KEY"
MAPPING = {"id": "external_id", "name": "first_name", "email": "email", "born": "dob", "score": "score",
           "seen": "last_seen"}


def row(i, name="n", email=None):
    return (i, name, email or f"u{i}@example.com", dt.date(1990, 1, i % 28 + 1), Decimal("9.75"),
            dt.datetime(2026, 1, 1, 12, 30, tzinfo=dt.timezone.utc))


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "braze-sync-key")
    with BrazeApi() as api:
        api.add_key("braze-sync-key")
        yield api


def destination(api, **options):
    return {"type": "braze", "connection": {"host": api.url}, "secrets_env": {"password": KEY_ENV}, **options}


def test_mirror_tracks_75_at_a_time_and_deletes_50_at_a_time(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    first = p.sync(p.step([row(i) for i in range(1, 201)]), destination(api), mode="mirror", field_mapping=MAPPING)
    assert first["stats"]["sent"] == 200 and first["committed"]
    sizes = [len(json.loads(r.body)["attributes"]) for r in api.requests_to("POST", "/users/track$")]
    assert sum(sizes) == 200 and max(sizes) == 75, sizes  # local[2]: at most 2 partitions deliver
    assert api.users["2"] == {"external_id": "2", "first_name": "n", "email": "u2@example.com", "dob": "1990-01-03",
                              "score": 9.75, "last_seen": "2026-01-01T12:30:00.000Z"}

    second = p.sync(p.step([row(1, name="renamed"), *[row(i) for i in range(121, 201)]]), destination(api),
                    mode="mirror", field_mapping=MAPPING, allow_mass_delete=True)
    assert (second["stats"]["updated"], second["stats"]["deleted"]) == (1, 119)
    deletes = [len(json.loads(r.body)["external_ids"]) for r in api.requests_to("POST", "/users/delete$")]
    assert sum(deletes) == 119 and max(deletes) == 50, deletes
    assert len(api.users) == 81 and api.users["1"]["first_name"] == "renamed"


def test_a_profile_braze_refuses_goes_to_the_ledger_with_its_reason(spark, warehouse, tmp_path, api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    result = p.sync(p.step([row(1), row(2, email="no-at-sign")]), destination(api), field_mapping=MAPPING)
    assert (result["stats"]["sent"], result["stats"]["rejected"]) == (1, 1)
    [reject] = p.ledger()
    assert reject["error"] == "braze: 'email' is not valid" and json.loads(reject["key"]) == {"id": 2}
    fixed = p.sync(p.step([row(1), row(2)]), destination(api), field_mapping=MAPPING)
    assert fixed["stats"]["rejected"] == 0 and set(api.users) == {"1", "2"} and p.ledger() == []


def test_update_mode_creates_no_profile(spark, warehouse, tmp_path, api):
    api.seed({"1": {"first_name": "old"}})
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    p.sync(p.step([row(1), row(2)]), destination(api), mode="update", field_mapping=MAPPING)
    p.sync(p.step([row(1, name="new"), row(2, name="new")]), destination(api), mode="update", field_mapping=MAPPING)
    assert set(api.users) == {"1"} and api.users["1"]["first_name"] == "new"
    assert all(o["_update_existing_only"] for r in api.requests_to("POST", "/users/track$")
               for o in json.loads(r.body)["attributes"])


def test_a_blocklisted_attribute_fails_the_sync_before_anything_is_sent(spark, warehouse, tmp_path, api):
    api.define_attribute("score", "Number", blocklisted=True)
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    error = p.sync_error(p.step([row(1)]), destination(api), field_mapping=MAPPING)
    assert "blocklisted custom attributes ['score']" in error["message"]
    assert [r.path for r in api.requests] == ["/custom_attributes"] and p.committed() is None


def test_a_429_is_waited_out_until_the_window_resets(spark, warehouse, tmp_path, api):
    api.limits["/users/track"] = (1, 1.0)
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    result = p.sync(p.step([row(1), row(2), row(3)]), destination(api), field_mapping=MAPPING,
                    delivery={"batch_size": 1, "backoff_initial": 0.05})
    assert result["stats"]["sent"] == 3 and result["stats"]["retried"] >= 1 and len(api.users) == 3
    assert any(r.status == 429 for r in api.requests)
