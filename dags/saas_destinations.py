"""SaaS destinations: the demo's customers (``demo_customers.py``) synced to Salesforce, HubSpot and
Braze, the three as parallel syncs of one daily snapshot::

    extract_customers -> snapshot_customers -> diff_salesforce -> sync_salesforce
                                            -> diff_hubspot    -> sync_hubspot
                                            -> diff_braze      -> sync_braze

Each destination is a consumer of the snapshot with its own diff (what it has not committed yet) and
its own sync in ``mirror`` mode, so a customer deleted from the application is deleted there too. A
record one of them refuses goes to the reject ledger with the vendor's reason and is sent again on
the next run; the other destinations are not held up.

What each destination needs (the built-in destinations check it before sending anything):

* Salesforce — connection ``salesforce_crm`` of Airflow's ``salesforce`` type with the extras
  ``consumer_key``, ``consumer_secret`` (a connected app with the client credentials flow) and
  ``instance_url`` (the org's My Domain URL); on Contact, a text field ``Customer_Id__c`` marked
  External ID and a text field ``Tier__c``.
* HubSpot — connection ``hubspot_crm`` whose password is a private app token (scopes
  ``crm.objects.contacts.read``/``write``, ``crm.schemas.contacts.read``); contact properties
  ``customer_id`` (unique values) and ``tier``.
* Braze — connection ``braze_crm``: host, the instance's REST endpoint; password, a REST API key with
  ``users.track``, ``users.delete`` and ``custom_attributes.get``.

Paths follow ``ARETL_DEMO_DIR`` like the demo (``<demo dir>/saas/source/<ds>/customers.csv``).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, task
from demo_customers import SCHEMA, write_extract

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

SOURCE_DIR = os.path.join(os.environ.get("ARETL_DEMO_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "demo"), "saas", "source")

#: Per destination: the destination, its Airflow connection and the mapping of the lake's columns to
#: the destination's fields (the key column mapped to the field records are matched on).
DESTINATIONS = {
    # [START saas_destinations]
    "salesforce": {
        "destination": {"type": "salesforce", "object": "Contact", "external_id_field": "Customer_Id__c"},
        "destination_conn_id": "salesforce_crm",
        "field_mapping": {"customer_id": "Customer_Id__c", "name": "LastName", "email": "Email",
                          "city": "MailingCity", "tier": "Tier__c"},
    },
    "hubspot": {
        "destination": {"type": "hubspot", "object_type": "contacts", "id_property": "customer_id"},
        "destination_conn_id": "hubspot_crm",
        "field_mapping": {"customer_id": "customer_id", "name": "lastname", "email": "email", "city": "city",
                          "tier": "tier"},
    },
    "braze": {
        "destination": {"type": "braze"},
        "destination_conn_id": "braze_crm",
        "field_mapping": {"customer_id": "external_id", "name": "last_name", "email": "email",
                          "city": "home_city", "tier": "tier"},
    },
    # [END saas_destinations]
}

with DAG(
    dag_id="saas_destinations",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 1, 3, tz="UTC"),
    catchup=False,
    tags=["reverse-etl", "demo", "saas"],
    doc_md=__doc__,
) as dag:

    @task
    def extract_customers(ds: str | None = None) -> str:
        """Write the application's customers table as it looks on this logical date."""
        return write_extract(ds, os.path.join(SOURCE_DIR, str(ds), "customers.csv"), "saas_destinations")

    snapshot = SnapshotOperator(
        task_id="snapshot_customers",
        name="saas_customers",
        source={"format": "csv", "path": os.path.join(SOURCE_DIR, "{{ ds }}", "customers.csv"), "schema": SCHEMA},
        primary_key="customer_id",
    )
    extract_customers() >> snapshot
    for name, settings in DESTINATIONS.items():
        diff = DiffOperator(task_id=f"diff_{name}", snapshot=snapshot.output, consumer=name)
        SinkOperator(task_id=f"sync_{name}", changes=diff.output, mode="mirror", **settings)
