"""The guide's worked example, dags/reverse_etl_rest_api.py, end to end through Airflow (dag.test, jobs on
the Spark Connect server) against the real "Contacts API" (tests_common/rest_api.py, OAuth2 and a rate
limit) and a real SMTP server: day 1 delivers all but the customer whose email the API refuses, which
goes to the reject ledger with the API's reason and makes the SmtpNotifier send the data team an email
with the counts, the grouped reason and the syncs page — not the customer's data; day 2 (the email
corrected, a customer deleted) leaves the API equal to the source and the ledger empty. Neither the
client secret nor a token the API issued is left, in any of its wire forms (percent-encoded, JSON-escaped,
base64 of basic auth's ``client:secret``), in a task log, an XCom, the warehouse or the Airflow home."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import pendulum

from tests_common.paths import REPO
from tests_common.secrets import assert_nowhere, encodings, warehouse_places

CLIENT_ID, CLIENT_SECRET = "aretl-example-client", "cs-5b1e0c9d7a"


def load_dag(monkeypatch, tmp_path):
    monkeypatch.setenv("ARETL_REST_DEMO_DIR", str(tmp_path / "rest_demo"))
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__WAREHOUSE", str(tmp_path / "warehouse"))
    spec = importlib.util.spec_from_file_location("reverse_etl_rest_api_under_test",
                                                  REPO / "dags" / "reverse_etl_rest_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected(rows: dict) -> dict:
    return {str(key): {"id": str(key), "name": name, "email": email, "city": city}
            for key, (name, email, city) in rows.items()}


def test_the_example_dag_syncs_to_an_api_without_a_preset_and_alerts_on_rejects(
        airflow_db, monkeypatch, tmp_path, spark, spark_default_on_connect, contacts_api, smtp_server, caplog,
        capfd):
    contacts_api.rate_limit = 25  # what the DAG's requests_per_second=20 stays under
    contacts_api.require("oauth2", CLIENT_SECRET, CLIENT_ID)
    monkeypatch.setenv("AIRFLOW_CONN_CONTACTS_API", json.dumps(
        {"conn_type": "http", "host": contacts_api.url, "login": CLIENT_ID, "password": CLIENT_SECRET}))
    caplog.set_level(logging.DEBUG)
    example = load_dag(monkeypatch, tmp_path)

    day1 = example.dag.test(logical_date=pendulum.parse("2026-01-01"))
    assert {str(ti.state) for ti in day1.get_task_instances()} == {"success"}
    assert contacts_api.contacts == expected({k: v for k, v in example.DAY_1.items() if k != 3})
    sync = next(ti for ti in day1.get_task_instances() if ti.task_id == "sync_contacts").xcom_pull(
        task_ids="sync_contacts")
    assert sync["stats"]["rejected"] == 1 and sync["reject_reasons"] == [
        {"reason": "HTTP 422: email '…' is not a valid address", "count": 1}]
    [mail] = smtp_server.messages
    assert mail["Subject"] == "1 customers refused by Contacts API" and mail["To"] == "data-team@example.com"
    body = smtp_server.text(mail)
    assert ("1 of 4 records (25.0%) of snapshots/customers (version 0) were rejected by rest "
            "(consumer contacts_api);") in body
    assert "1 × HTTP 422: email '…' is not a valid address" in body
    assert "Syncs page: http://localhost:8080/plugin/reverse-etl" in body
    assert "navy.mil" not in body and "Grace" not in body  # counts and reasons, never the record's data

    day2 = example.dag.test(logical_date=pendulum.parse("2026-01-02"))
    assert {str(ti.state) for ti in day2.get_task_instances()} == {"success"}
    assert contacts_api.contacts == expected(example.DAY_2)
    assert len(smtp_server.messages) == 1  # nothing refused: no alert
    ledger = spark.read.format("delta").load(str(tmp_path / "warehouse" / "_system" / "rejects"))
    assert ledger.where("consumer = 'contacts_api'").count() == 0
    assert {r.header("Idempotency-Key") is not None for r in contacts_api.requests} == {True}

    # one token per process (the task process delivered these few records: below driver_max_records)
    assert len(contacts_api.token_requests) == 1 and sync["delivered_from"] == "driver"
    issued = contacts_api.tokens.issued()
    out, err = capfd.readouterr()
    places = {"task logs": caplog.text + out + err, "xcom": json.dumps(sync, default=str),
              "Spark Connect server log": spark_default_on_connect.log_file.read_text(errors="replace"),
              **warehouse_places(spark, tmp_path / "warehouse"),
              **{str(path): path.read_bytes().decode("latin-1") for path in Path(airflow_db).rglob("*")
                 if path.is_file()}}
    assert_nowhere(encodings(CLIENT_SECRET, CLIENT_ID).union(*(encodings(token) for token in issued)), places)
