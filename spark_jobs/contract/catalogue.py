"""The built-in destinations, one record each (:class:`~.destination_record.BuiltInDestination`): the one
place a built-in destination is declared. Everything else is derived from :data:`CATALOGUE` — the
options checked at DAG parse time (:data:`BUILT_IN`, :func:`destination`), the sink registry and
setup.cfg's entry points (held to the records by tests/project/test_sink_registry.py), the lineage
names (:mod:`airflow_reverse_etl.lineage`), the connection types of the provider info and their hooks
(:mod:`airflow_reverse_etl.get_provider_info`, :mod:`airflow_reverse_etl.hooks.destination`), and the
catalogue page (docs/reference/destinations.md, through docs/_ext/destinations_catalogue.py).

The ``http`` webhook is data only: its requests are :func:`http_requests` of its options.
"""

from __future__ import annotations

import json
from typing import Any

from spark_jobs.contract.destination_record import (
    BuiltInDestination,
    ConnectionForm,
    http_name,
    kafka_name,
    postgres_name,
    saas_name,
    sqlite_name,
    table_name,
)
from spark_jobs.contract.destinations import (
    DeltaOptions,
    HttpOptions,
    KafkaOptions,
    PostgresOptions,
    SqliteOptions,
)
from spark_jobs.contract.options import mapping
from spark_jobs.contract.rest import REST_OPERATIONS, RestOperation, RestOptions, RestResponse, connection_url
from spark_jobs.contract.saas import (
    BrazeOptions,
    HubSpotOptions,
    SalesforceOptions,
    api_url,
    hubspot_api_url,
    salesforce_login_url,
)
from spark_jobs.contract.sink_options import SinkOptions
from spark_jobs.errors import ConfigError

ALL_MODES = "all four"
KEYED = ("the sync's key, as the column's type gives it; a key that differs only in case or in leading zeros is "
         "another key")


def http_requests(options: HttpOptions, connection: dict[str, Any]) -> RestOptions:
    """The ``http`` webhook's requests: one POST (``method``) of ``{"records": [{"op", "change", "key",
    "data"}]}`` per batch for every operation, per-record errors read from the body's first list under
    ``record_errors``."""
    url = options.url or connection_url(connection, options.endpoint)
    if not url:
        raise ConfigError("The http destination needs 'url', or 'endpoint' with an HTTP connection")
    fields = [options.record_errors] if isinstance(options.record_errors, str) else options.record_errors
    # JMESPath quoted identifiers; the list holds the failures (or a result per record): a record it does not
    # name was applied, as the 2xx says
    response = RestResponse(records=[json.dumps(f) for f in fields], records_listed="failed", error=None)
    batch = RestOperation(method=options.method, url=url, per="batch", body='{"records": {{ records }}}')
    return RestOptions(operations=dict.fromkeys(REST_OPERATIONS, batch), headers=options.headers,
                       timeout=options.timeout, verify=options.verify, response=response)


HTTP_FORM = ConnectionForm(
    "reverse_etl_http", "Reverse ETL HTTP destination", "HttpDestinationHook",
    relabeling={"host": "Base URL or host", "schema": "Scheme (http or https)", "login": "Username (basic auth)",
                "password": "Password or bearer token"},
    placeholders={"host": "https://api.example.com", "schema": "https"},
    conn_fields={
        "auth_type": {"label": "Auth type",
                      "description": "basic: username and password; bearer: the password is sent as a bearer token",
                      "schema": {"type": ["string", "null"], "enum": ["basic", "bearer", None], "default": "basic"}},
        "headers": {"label": "Headers",
                    "description": "Headers sent with every request, such as an API-key header (kept secret)",
                    "schema": {"type": ["object", "null"]}}})
KAFKA_FORM = ConnectionForm(
    "reverse_etl_kafka", "Reverse ETL Kafka destination", "KafkaDestinationHook", hidden_fields=("schema",),
    relabeling={"host": "Bootstrap servers", "login": "SASL username", "password": "SASL password"},
    placeholders={"host": "broker1:9092,broker2:9092", "port": "9092 (when the host has no port)"},
    conn_fields={
        "security.protocol": {"label": "Security protocol", "schema": {
            "type": ["string", "null"], "enum": ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", None]}},
        "sasl.mechanism": {"label": "SASL mechanism", "schema": {
            "type": ["string", "null"], "enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", None]}}})
HUBSPOT_FORM = ConnectionForm(
    "reverse_etl_hubspot", "Reverse ETL HubSpot destination", "HubSpotDestinationHook",
    hidden_fields=("schema", "port", "login", "extra"),
    relabeling={"host": f"API URL (leave empty for {hubspot_api_url({})})", "password": "Private app access token"},
    placeholders={"host": hubspot_api_url({})})
BRAZE_FORM = ConnectionForm(
    "reverse_etl_braze", "Reverse ETL Braze destination", "BrazeDestinationHook",
    hidden_fields=("schema", "port", "login", "extra"),
    relabeling={"host": "REST endpoint", "password": "REST API key"},
    placeholders={"host": "https://rest.iad-01.braze.com"})

SQLITE = BuiltInDestination(
    "sqlite", SqliteOptions, "spark_jobs.sinks.sqlite:SqliteSink", (), sqlite_name,
    ({"database": "/data/crm.db", "table": "contacts"}, {}),
    "a table of a local SQLite file", ALL_MODES, "one transaction per batch (500); one writer",
    f"by primary key: {KEYED} (SQLite compares text case-sensitively)")

POSTGRES = BuiltInDestination(
    "postgres", PostgresOptions, "spark_jobs.sinks.postgres:PostgresSink", ("postgres",), postgres_name,
    ({"table": "sales.contacts"}, {"host": "db", "port": 5432, "schema": "crm"}),
    "a Postgres table", ALL_MODES, "COPY per batch (20,000)",
    f"by primary key (`ON CONFLICT`): {KEYED}")

REST = BuiltInDestination(
    "rest", RestOptions, "spark_jobs.sinks.rest:RestSink", ("reverse_etl_http", "http"), http_name,
    ({"base_url": "https://api.example.com/v2", "operations": {}}, {}),
    "any JSON API, described by configuration", "the operations it declares",
    "`batch_size` per request; `delivery.requests_per_second`, `max_in_flight`",
    "by the API: the key is placed in the URL or body by the templates (`{{ key.<field> }}`) and the API "
    "matches it by its own rules")

HTTP = BuiltInDestination(
    "http", HttpOptions, "spark_jobs.sinks.presets:HttpSink", ("reverse_etl_http", "http"), http_name,
    ({"endpoint": "/v1/contacts/batch"}, {"host": "https://crm.example.com"}),
    "an HTTP endpoint, `{\"records\": [...]}` (data only: a preset of `rest`)",
    f"{ALL_MODES} (the operation is in the body)", "one POST per batch (500)",
    "by the receiver: each record carries its `key` object as the sync's key columns give it (JSON numbers and "
    "text as they are)", form=HTTP_FORM, rest=http_requests, capabilities={"wants_json": True,
                                                                            "paces_requests": True})

KAFKA = BuiltInDestination(
    "kafka", KafkaOptions, "spark_jobs.sinks.kafka:KafkaSink", ("reverse_etl_kafka", "kafka"), kafka_name,
    ({"topic": "customers"}, {"host": "broker1:9092"}),
    "an upsert topic", f"{ALL_MODES} (which changes are published)", "producer batches",
    "by the message key, the sync's key as JSON: a consumer compacts on its bytes, so `{\"id\":1}` and "
    "`{\"id\":\"1\"}` are two keys", form=KAFKA_FORM)

DELTA = BuiltInDestination(
    "delta", DeltaOptions, "spark_jobs.sinks.delta:DeltaSink", (), table_name,
    ({"path": "s3a://serving/customers"}, {}),
    "a Delta or Parquet table", ALL_MODES, "one MERGE per sync",
    f"by primary key (the MERGE's condition): {KEYED}")

SALESFORCE = BuiltInDestination(
    "salesforce", SalesforceOptions, "spark_jobs.sinks.saas.salesforce:SalesforceSink", ("salesforce",),
    saas_name("salesforce", lambda conn: salesforce_login_url(conn.get("extra") or {}), lambda d: str(d["object"])),
    ({"object": "Contact"}, {"extra": {"instance_url": "https://acme.my.salesforce.com"}}),
    "an sObject (Contact, Account, a custom object)", ALL_MODES,
    "200 records (sObject Collections); Bulk API 2.0 from `bulk_threshold`; the org's daily API allocation",
    "by `external_id_field`, as Salesforce compares it: a **Number** External ID by value (Salesforce stores "
    "a double: a key past 2^53, or with more digits than a double keeps, is rejected for its record); a "
    "**Text** or **Email** one case-insensitively unless the field is case-sensitive, so keys that differ "
    "only in case are one record (`DUPLICATE_EXTERNAL_ID` for the second of a request); leading zeros kept "
    "in a Text field")

HUBSPOT = BuiltInDestination(
    "hubspot", HubSpotOptions, "spark_jobs.sinks.saas.hubspot:HubSpotSink", ("reverse_etl_hubspot",),
    saas_name("hubspot", hubspot_api_url, lambda d: str(d.get("object_type") or "contacts")),
    ({"object_type": "contacts"}, {}),
    "a CRM object type (contacts, companies, deals, custom)", ALL_MODES,
    "100 records; `burst_limit` requests per 10 s; the daily limit",
    "by `id_property`, as HubSpot compares it: a contact's **email** case-insensitively (HubSpot keeps it in "
    "lower case: `Ada@Example.com` is held as `ada@example.com`, and keys that differ only in case are one "
    "contact) and by its secondary emails (`hs_additional_emails`); any other unique property by its exact "
    "text (a number key as its decimal digits)", form=HUBSPOT_FORM)

BRAZE = BuiltInDestination(
    "braze", BrazeOptions, "spark_jobs.sinks.saas.braze:BrazeSink", ("reverse_etl_braze",),
    saas_name("braze", api_url, lambda d: "users"),
    ({}, {"host": "https://rest.iad-01.braze.com"}),
    "user profiles", "upsert, update, mirror", "75 profiles (`/users/track`), 50 deletes (`/users/delete`)",
    "by `external_id`, the key's text as sent (a number as its decimal digits): `Ann` and `ann` are two users",
    form=BRAZE_FORM)

CATALOGUE: tuple[BuiltInDestination, ...] = (SQLITE, POSTGRES, REST, HTTP, KAFKA, DELTA, SALESFORCE, HUBSPOT, BRAZE)

#: The options of each built-in sink, by the name it is registered under.
BUILT_IN: dict[str, type[SinkOptions]] = {record.name: record.options for record in CATALOGUE}


def built_in(name: str) -> BuiltInDestination | None:
    """The record of the built-in destination ``name`` (None: a third-party sink)."""
    return next((record for record in CATALOGUE if record.name == name), None)


def destination(value: Any) -> dict[str, Any]:
    """A destination dict; a built-in sink's options are checked (:data:`BUILT_IN`), a third-party
    sink's when the sink is built. The dict is kept as given: the sink parses it again."""
    given = mapping(value)
    sink = given.get("type")
    if isinstance(sink, str) and sink in BUILT_IN:
        BUILT_IN[sink].parse(given, sink)
    return given
