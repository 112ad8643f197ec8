"""Sync to any REST API: customers mirrored into "Contacts API", an API with no preset, by configuration.

The worked example of the guide "Sync to any REST API" (docs/guides/rest-api.md), where every option
is explained. The API (its contract: tests_common/rest_api.py) takes one contact per request —
``PUT /v1/contacts/{id}`` to create or replace, ``DELETE /v1/contacts/{id}`` to remove — answers 422
with a ``message`` for a contact it refuses, 429 with ``Retry-After`` over its rate limit, and wants an
OAuth2 client-credentials token. Each run:

    extract_customers -> snapshot_customers -> diff_customers -> sync_contacts

Connections (Airflow's, secrets never in the DAG): ``contacts_api`` — an HTTP connection whose host is
the API's base URL, login the OAuth2 client id, password the client secret; ``smtp_default`` — the
SMTP server the reject alerts go through. Paths follow ``ARETL_REST_DEMO_DIR``.

Day 1 has a customer whose email the API refuses ("grace.hopper(at)navy.mil"): the sync succeeds,
that record goes to the reject ledger with the API's reason, and the data team gets an email. Day 2
corrects it (and moves, adds and deletes customers): the record is delivered and leaves the ledger.
"""

from __future__ import annotations

import csv
import os

import pendulum
from airflow.providers.smtp.notifications.smtp import SmtpNotifier
from airflow.sdk import DAG, task

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

DEMO_DIR = os.environ.get("ARETL_REST_DEMO_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "rest_demo")
COLUMNS = ["customer_id", "name", "email", "city"]
SCHEMA = "customer_id INT, name STRING, email STRING, city STRING"
DAY_1 = {1: ("Ada Lovelace", "ada@example.com", "London"),
         2: ("Alan Turing", "alan@example.com", "Manchester"),
         3: ("Grace Hopper", "grace.hopper(at)navy.mil", "Arlington"),
         4: ("Edsger Dijkstra", "edsger@example.com", "Eindhoven")}
DAY_2 = {**{k: v for k, v in DAY_1.items() if k != 4},
         2: ("Alan Turing", "alan@example.com", "Wilmslow"),
         3: ("Grace Hopper", "grace.hopper@navy.mil", "Arlington"),
         5: ("Barbara Liskov", "barbara@example.com", "Boston")}
SOURCE_BY_DAY = {"2026-01-01": DAY_1, "2026-01-02": DAY_2}

# [START rest_destination]
CONTACTS_API = {
    "type": "rest",
    # base_url: omitted, the connection's host is the base URL (https://api.example.com/v1 in production)
    "auth": {"type": "oauth2_client_credentials", "token_url": "/oauth/token", "scope": "contacts.write"},
    "operations": {
        "upsert": {"method": "PUT", "url": "/v1/contacts/{{ key.customer_id }}", "per": "record",
                   "body": '{"name": {{ data.name }}, "email": {{ data.email }}, "city": {{ data.city }}}'},
        "delete": {"method": "DELETE", "url": "/v1/contacts/{{ key.customer_id }}", "per": "record",
                   "response": {"success": ["2xx", 404]}},  # already gone counts as deleted
    },
    "response": {"error": "message"},  # a refused contact's reason, for the reject ledger
    "idempotency_header": "Idempotency-Key",
}
# [END rest_destination]

with DAG(
    dag_id="reverse_etl_rest_api",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 1, 2, tz="UTC"),
    catchup=False,
    tags=["reverse-etl", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def extract_customers(ds: str | None = None) -> str:
        """Write the customers table as it looks on this logical date (the newest day up to it)."""
        rows = SOURCE_BY_DAY[max(d for d in SOURCE_BY_DAY if ds is not None and d <= ds)]
        path = os.path.join(DEMO_DIR, "source", str(ds), "customers.csv")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", newline="") as handle:
            csv.writer(handle).writerows([COLUMNS, *((key, *values) for key, values in sorted(rows.items()))])
        return path

    snapshot = SnapshotOperator(
        task_id="snapshot_customers",
        name="customers",
        source={"format": "csv", "path": os.path.join(DEMO_DIR, "source", "{{ ds }}", "customers.csv"),
                "schema": SCHEMA},
        primary_key="customer_id",
    )
    diff = DiffOperator(task_id="diff_customers", snapshot=snapshot.output, consumer="contacts_api")
    # [START sync_task]
    sync = SinkOperator(
        task_id="sync_contacts",
        changes=diff.output,
        destination=CONTACTS_API,
        destination_conn_id="contacts_api",
        mode="mirror",  # upserts and deletes: the API ends up holding the source's customers
        concurrency=4,  # requests in flight at once (one record each)...
        delivery={"requests_per_second": 20, "max_in_flight": 4},  # ...within the API's 25 requests/s
        max_reject_fraction=0.5,  # more refused than that fails the task (after committing the rest)
        on_rejects_callback=SmtpNotifier(
            to="data-team@example.com",
            subject="{{ rejects.count }} customers refused by Contacts API",
            html_content="<pre>{{ rejects.message }}</pre>",
        ),
    )
    # [END sync_task]
    extract_customers() >> snapshot
