"""The connection types this provider adds for sink destinations, so the Airflow UI offers a form
with the fields each sink reads (``connection-types`` in :mod:`airflow_reverse_etl.get_provider_info`).

* ``reverse_etl_http``: an HTTP API — base URL, basic auth or a bearer token, extra headers such as
  an API-key header (:mod:`spark_jobs.sinks.http`);
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


class HttpDestinationHook(DestinationHook):
    default_conn_name = "reverse_etl_http_default"
    conn_type = "reverse_etl_http"
    hook_name = "Reverse ETL HTTP destination"


class KafkaDestinationHook(DestinationHook):
    default_conn_name = "reverse_etl_kafka_default"
    conn_type = "reverse_etl_kafka"
    hook_name = "Reverse ETL Kafka destination"


class HubSpotDestinationHook(DestinationHook):
    default_conn_name = "reverse_etl_hubspot_default"
    conn_type = "reverse_etl_hubspot"
    hook_name = "Reverse ETL HubSpot destination"


class BrazeDestinationHook(DestinationHook):
    default_conn_name = "reverse_etl_braze_default"
    conn_type = "reverse_etl_braze"
    hook_name = "Reverse ETL Braze destination"
