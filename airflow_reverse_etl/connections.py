"""Turning Airflow connections into job-spec settings plus secrets.

The public parts of a connection (host, port, login, schema, extras) go into the spec; the password
goes into an environment variable of the spark-submit process, and the spec only names that variable.
Each secret is masked in the task log in every form the job may write it in — percent-encoded, JSON-
escaped, base64 of ``login:password`` (:func:`spark_jobs.redaction.wire_forms`) — not only as it is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from spark_jobs.kafka_clients import brokers  # import-safe: no pyspark
from spark_jobs.redaction import secret_values, wire_forms  # import-safe: plain Python

if TYPE_CHECKING:
    from airflow.sdk import Connection

JDBC_SCHEMES = {"postgres": ("postgresql", "org.postgresql.Driver"), "mysql": ("mysql", "com.mysql.cj.jdbc.Driver")}


def _connection(conn_id: str) -> Connection:
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id)


def mask_wire_forms(value: Any, login: str | None = None) -> None:
    """Have Airflow mask every secret in ``value`` (a password, a connection's extras) in each form it
    takes on the wire, beside the forms Airflow masks itself."""
    from airflow.sdk.log import mask_secret

    for secret in secret_values(value):
        for form in wire_forms(secret, login):
            mask_secret(form)


def secret_env(role: str) -> str:
    return f"ARETL_SECRET_{role.upper()}_PASSWORD"


def jdbc_source(conn_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """JDBC source settings from a postgres/mysql connection (or a ``jdbc`` connection whose host is
    the full JDBC URL)."""
    conn = _connection(conn_id)
    extra = conn.extra_dejson
    if conn.conn_type == "jdbc" or (conn.host or "").startswith("jdbc:"):
        url, driver = conn.host, extra.get("driver_class")
    elif conn.conn_type in JDBC_SCHEMES:
        scheme, driver = JDBC_SCHEMES[conn.conn_type]
        port = f":{conn.port}" if conn.port else ""
        url = f"jdbc:{scheme}://{conn.host}{port}/{conn.schema or ''}"
    else:
        raise ReverseEtlConfigError(
            f"Connection {conn_id!r} of type {conn.conn_type!r} cannot be used as a JDBC source")
    settings: dict[str, Any] = {"url": url, "user": conn.login, "driver": driver}
    secrets = {}
    if conn.password:
        settings["password_env"] = secret_env("source")
        secrets[settings["password_env"]] = conn.password
        mask_wire_forms(conn.password, conn.login)
    return settings, secrets


def destination_settings(conn_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A destination's ``connection`` block (public fields) and its secrets (:func:`connection_settings`)."""
    return connection_settings(conn_id, "destination")


def kafka_source(conn_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A Kafka source's settings from a Kafka connection, read as the Kafka sink reads its own
    (:mod:`spark_jobs.kafka_clients`): the connection block and secrets, plus the brokers in the
    open (``bootstrap_servers``, from the extras or host:port) so that the snapshot can name its source."""
    settings, secrets = connection_settings(conn_id, "source")
    conn = _connection(conn_id)
    servers = conn.extra_dejson.get("bootstrap.servers") or (brokers(conn.host, conn.port) if conn.host else None)
    if servers:
        settings["bootstrap_servers"] = servers
    return settings, secrets


def connection_settings(conn_id: str, role: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A connection's public fields (``connection``) and its secrets for a ``role`` ("destination",
    "source").

    The password is a secret, and so are the extras: they carry API tokens and auth headers (HTTP),
    SASL settings (Kafka) or TLS key paths, so they travel as JSON in an environment variable and the
    spec only lists their names (``extra_keys``), for the record."""
    conn = _connection(conn_id)
    extra = conn.extra_dejson
    public = {"conn_type": conn.conn_type, "host": conn.host, "port": conn.port, "login": conn.login,
              "schema": conn.schema, "extra_keys": sorted(extra)}
    secrets = {}
    secrets_env = {}
    if conn.password:
        secrets_env["password"] = secret_env(role)
        secrets[secrets_env["password"]] = conn.password
        mask_wire_forms(conn.password, conn.login)
    if extra:
        secrets_env["extra"] = f"ARETL_SECRET_{role.upper()}_EXTRA"
        secrets[secrets_env["extra"]] = json.dumps(extra)
        mask_wire_forms(extra)
    return {"connection": public, "secrets_env": secrets_env}, secrets


#: Extras that say where a connection points, never a credential: Kafka's brokers, a Salesforce org's URL.
ADDRESS_EXTRAS = ("bootstrap.servers", "instance_url", "domain")


def connection_address(conn_id: str) -> dict[str, Any]:
    """Where a connection points (host, port, schema and the :data:`ADDRESS_EXTRAS`), to name the
    destination in lineage; nothing secret."""
    conn = _connection(conn_id)
    extra = conn.extra_dejson
    return {"host": conn.host, "port": conn.port, "schema": conn.schema,
            "extra": {k: extra[k] for k in ADDRESS_EXTRAS if extra.get(k)}}
