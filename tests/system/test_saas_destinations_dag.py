"""The SaaS destinations DAG (dags/saas_destinations.py) end to end through Airflow (dag.test), every job
on the Spark Connect server, against the Salesforce, HubSpot and Braze emulators: two logical dates
mirror the demo's customers into the three — inserts, updates and a delete, each value in its vendor's
form — each destination committing its own consumer; and no secret of the three connections is left in
the XComs, the task logs, the warehouse's files and rows, or the Connect server's log."""

import json
import logging
import uuid
from pathlib import Path

import pendulum
from demo_customers import SOURCE_BY_DAY

from tests_common.emulators.braze import BrazeApi
from tests_common.emulators.hubspot import HubSpotApi
from airflow_reverse_etl.ui import page, summary
from airflow_reverse_etl.ui.app import table_rows
from tests_common.demo import load_demo
from tests_common.emulators.salesforce import SalesforceApi

DAYS = ["2026-01-01", "2026-01-02"]
SYNCS = ("sync_salesforce", "sync_hubspot", "sync_braze")


def emulators(monkeypatch, secrets):
    """The three emulators, set up as the DAG's docstring asks of the real services, and the Airflow
    connections that point at them."""
    salesforce, hubspot, braze = SalesforceApi().start(), HubSpotApi().start(), BrazeApi().start()
    salesforce.add_client("saas-dag-app", secrets["salesforce"])
    salesforce.define_field("Contact", "Tier__c", length=40)
    hubspot.add_token(secrets["hubspot"])
    hubspot.define_property("contacts", "customer_id", unique=True)
    hubspot.define_property("contacts", "tier", "enumeration", options=("gold", "silver", "bronze"))
    braze.add_key(secrets["braze"])
    connections = {
        "SALESFORCE_CRM": {"conn_type": "salesforce", "extra": {
            "consumer_key": "saas-dag-app", "consumer_secret": secrets["salesforce"],
            "instance_url": salesforce.login_url}},
        "HUBSPOT_CRM": {"conn_type": "reverse_etl_hubspot", "host": hubspot.url, "password": secrets["hubspot"]},
        "BRAZE_CRM": {"conn_type": "reverse_etl_braze", "host": braze.url, "password": secrets["braze"]},
    }
    for name, connection in connections.items():
        monkeypatch.setenv(f"AIRFLOW_CONN_{name}", json.dumps(connection))
    return salesforce, hubspot, braze


def held(salesforce, hubspot, braze):
    """What each destination holds, as (name, email, city, tier) by customer id."""
    return (
        {r["Customer_Id__c"]: (r["LastName"], r["Email"], r["MailingCity"], r["Tier__c"])
         for r in salesforce.records("Contact").values()},
        {p["customer_id"]: (p["lastname"], p["email"], p["city"], p["tier"])
         for p in hubspot.objects("contacts").values()},
        {u["external_id"]: (u["last_name"], u["email"], u["home_city"], u["tier"]) for u in braze.users.values()},
    )


def test_the_demo_customers_reach_salesforce_hubspot_and_braze_and_no_secret_is_left_behind(
        airflow_db, monkeypatch, tmp_path, spark_default_on_connect, caplog, capfd):
    secrets = {name: f"{name}-secret-{uuid.uuid4().hex}" for name in ("salesforce", "hubspot", "braze")}
    salesforce, hubspot, braze = apis = emulators(monkeypatch, secrets)
    caplog.set_level(logging.DEBUG)
    xcoms = []
    try:
        dag = load_demo(monkeypatch, tmp_path, "saas_destinations.py").dag
        for day in DAYS:
            run = dag.test(logical_date=pendulum.parse(day))
            states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
            assert set(states.values()) == {"success"}, states
            expected = {str(k): v for k, v in SOURCE_BY_DAY[day].items()}
            assert held(*apis) == (expected, expected, expected), day
            synced = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in run.get_task_instances()
                      if ti.task_id in SYNCS}
            xcoms.append(synced)
            assert all(x["committed"] for x in synced.values())
    finally:
        for api in apis:
            api.stop()
    # day 2: one customer added, two changed, one deleted — at each destination
    assert {name: (x["stats"]["inserted"], x["stats"]["updated"], x["stats"]["deleted"])
            for name, x in xcoms[1].items()} == dict.fromkeys(SYNCS, (1, 2, 1))
    assert hubspot.requests_to("POST", "batch/archive$") and braze.requests_to("POST", "/users/delete$")
    assert salesforce.requests_to("DELETE", "composite/sobjects$")

    # the syncs page (what Airflow's Reverse ETL view renders) shows the three, two green runs each
    runs = table_rows(str(tmp_path / "warehouse" / "_system" / "runs"), summary.RUN_COLUMNS)
    syncs = {s.destination: s for s in summary.summarise(runs, [])}
    assert set(syncs) == {"salesforce:Contact", "hubspot:contacts", "braze"}
    assert all((s.runs, s.failed, s.totals["deleted"]) == (2, 0, 1) for s in syncs.values())
    assert all(name in page.render(str(tmp_path / "warehouse"), list(syncs.values()), []) for name in syncs)

    out, err = capfd.readouterr()
    places = {"task logs": caplog.text + out + err, "xcom": json.dumps(xcoms, default=str),
              "Spark Connect server log": spark_default_on_connect.log_file.read_text(errors="replace")}
    warehouse = tmp_path / "warehouse"
    for path in warehouse.rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_bytes().decode("latin-1")
    assert any(p.endswith("spec.json") for p in places), "the job specs were searched"
    for secret_name, secret in secrets.items():
        leaks = [place for place, text in places.items() if secret in text]
        assert not leaks, f"the {secret_name} secret was found in {leaks}"
    assert {p.name for p in Path(warehouse, "_system").iterdir()} >= {"runs", "consumers"}
