"""The connection types this provider adds for sink destinations, so the Airflow UI offers a form
with the fields each sink reads (``connection-types`` in :mod:`airflow_reverse_etl.get_provider_info`).
Each is declared by its destination's record (:mod:`spark_jobs.contract.catalogue`), and its hook class
is made from the record here (:data:`HOOKS`: ``HttpDestinationHook``, ``KafkaDestinationHook``,
``HubSpotDestinationHook``, ``BrazeDestinationHook``):

* ``reverse_etl_http``: an HTTP API — base URL, basic auth or a bearer token, extra headers such as
  an API-key header (:mod:`spark_jobs.sinks.presets`, the ``http`` webhook);
* ``reverse_etl_kafka``: Kafka brokers — bootstrap servers, SASL username/password and mechanism,
  security protocol (:mod:`spark_jobs.sinks.kafka`);
* ``reverse_etl_hubspot``: a HubSpot private app's access token, and the API URL when it is not
  ``https://api.hubapi.com`` (:mod:`spark_jobs.sinks.saas.hubspot`);
* ``reverse_etl_braze``: a Braze instance's REST endpoint and a REST API key
  (:mod:`spark_jobs.sinks.saas.braze`).

Airflow's own ``http`` and ``kafka`` connections (from their providers) work too; these types exist
so that the provider is usable without those packages, with labels that say what each field is for.
The ``salesforce`` destination reads Airflow's own ``salesforce`` connection type (the Salesforce
provider's form: consumer key and secret, instance URL or domain, API version), which needs no hook
of its own here.
Spark connections are the apache-spark provider's ``spark`` and ``spark_connect`` types, which
:class:`~airflow_reverse_etl.hooks.spark_job.SparkJobHook` accepts as they are.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_reverse_etl.connections import destination_settings
from spark_jobs.contract.catalogue import CATALOGUE
from spark_jobs.contract.destination_record import ConnectionForm


class DestinationHook(BaseHook):
    """A sink destination's connection. :meth:`get_conn` returns what a sync job receives: the
    public settings for the spec and the secrets for the Spark process environment."""

    conn_name_attr = "destination_conn_id"
    default_conn_name: str

    def __init__(self, destination_conn_id: str | None = None) -> None:
        super().__init__()
        self.destination_conn_id = destination_conn_id or self.default_conn_name

    def get_conn(self) -> tuple[dict[str, Any], dict[str, str]]:
        return destination_settings(self.destination_conn_id)


def destination_hook(form: ConnectionForm) -> type[DestinationHook]:
    """The hook of a destination connection type, made from its record's form (``hook_class``)."""
    return type(form.hook_class, (DestinationHook,), {
        "__module__": __name__, "conn_type": form.conn_type, "hook_name": form.hook_name,
        "default_conn_name": f"{form.conn_type}_default",
        "__doc__": f"A {form.conn_type} connection (the {form.hook_name}), as a sync job receives it."})


#: The hook of each destination connection type, by class name (the provider info names them so).
HOOKS = {record.form.hook_class: destination_hook(record.form) for record in CATALOGUE if record.form is not None}
globals().update(HOOKS)
