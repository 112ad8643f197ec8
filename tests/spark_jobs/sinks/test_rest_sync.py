"""The sync job's guarantees hold for the REST destination as for every sink, end to end in the
shared Spark session against a real API (tests_common/rest_api.py): a record the API refuses is in
the reject ledger with the API's own reason, the run history counts it, the next run sends it again
(its source row unchanged) and it leaves the ledger once the API takes it; a mirror sync's deletes
reach the API; a dry run plans and sends nothing; a DECIMAL key and value reach the API exactly."""

from __future__ import annotations

from decimal import Decimal

from tests_common.pipeline import Pipeline

SCHEMA = "id INT, email STRING, name STRING"
ROWS = [(1, "ann@example.com", "Ann"), (2, "bob@example.com", "Bob"), (3, "cid@example.com", "Cid")]


def contacts_destination(api):
    """Per-record upserts and deletes of the Contacts API (its contract: tests_common/rest_api.py)."""
    return {"type": "rest", "base_url": f"{api.url}/v1",
            "operations": {
                "upsert": {"method": "PUT", "url": "/contacts/{{ key.id }}", "per": "record",
                           "body": '{"email": {{ data.email }}, "name": {{ data.name }}}'},
                "delete": {"method": "DELETE", "url": "/contacts/{{ key.id }}", "per": "record",
                           "response": {"success": ["2xx", 404]}}},
            "response": {"error": "message"}}


def test_rejects_are_ledgered_with_the_apis_reason_resent_and_deletes_reach_the_api(spark, warehouse, tmp_path,
                                                                                  contacts_api):
    contacts_api.refuse_emails("bob@example.com")
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    destination = contacts_destination(contacts_api)

    first = p.sync(p.step(ROWS), destination, mode="mirror")
    assert (first["stats"]["sent"], first["stats"]["rejected"], first["committed"]) == (2, 1, True)
    [entry] = p.ledger()
    assert entry["key"] == '{"id":2}' and entry["sink"] == "rest"
    assert entry["error"] == "HTTP 422: email 'bob@example.com' is not a valid address"
    assert p.runs()[-1]["status"] == "success" and sorted(contacts_api.contacts) == ["1", "3"]

    contacts_api.refuse_emails()  # the API takes bob's address now; cid is deleted at the source
    second = p.sync(p.step(ROWS[:2]), destination, mode="mirror")
    assert (second["resent"], second["stats"]["sent"], second["stats"]["deleted"]) == (1, 2, 1)
    assert p.ledger() == [] and contacts_api.contacts == {
        "1": {"id": "1", "email": "ann@example.com", "name": "Ann"},
        "2": {"id": "2", "email": "bob@example.com", "name": "Bob"}}
    assert [r.method for r in contacts_api.requests].count("DELETE") == 1


def test_a_dry_run_plans_and_sends_nothing(spark, warehouse, tmp_path, contacts_api):
    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    result = p.sync(p.step(ROWS), contacts_destination(contacts_api), dry_run=True)
    assert result["dry_run"] and not result["committed"] and result["planned"] == {"upsert": 3}
    plan = spark.read.format("delta").load(result["plan"]["uri"])
    assert sorted(r["id"] for r in plan.collect()) == [1, 2, 3]
    assert contacts_api.requests == [] and p.committed() is None and p.runs()[-1]["status"] == "dry_run"


def test_decimal_keys_past_a_doubles_precision_reach_their_own_contacts_and_values_arrive_exact(
        spark, warehouse, tmp_path, contacts_api):
    """Spark writes the record's JSON (to_json), the sink reads it back by the fields' types: two keys one
    ten-thousandth apart (one double for both) are two contacts, and a DECIMAL(38,18) reaches the body
    with every digit. (The delete of such a key: tests/spark_jobs/sinks/test_rest_numbers.py.)"""
    near = [Decimal("1234567890123456.1234"), Decimal("1234567890123456.1235")]
    rows = [(near[0], Decimal("12345678901234567890.123456789012345678")), (near[1], Decimal("1E-18"))]
    p = Pipeline(spark, warehouse, tmp_path, schema="id DECIMAL(20,4), amount DECIMAL(38,18)")
    destination = {"type": "rest", "base_url": f"{contacts_api.url}/v1", "operations": {"upsert": {
        "method": "PUT", "url": "/contacts/{{ key.id }}", "per": "record", "body": '{"amount": {{ data.amount }}}'}}}
    result = p.sync(p.step(rows), destination)
    assert result["stats"]["sent"] == 2 and sorted(contacts_api.contacts) == [str(k) for k in near]
    assert sorted(r.body for r in contacts_api.requests) == [
        b'{"amount": 12345678901234567890.123456789012345678}', b'{"amount": 1E-18}']
