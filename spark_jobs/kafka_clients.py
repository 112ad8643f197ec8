"""Kafka client settings from a spec and its Airflow connection: one reading for the Kafka sink and
the Kafka source, so one connection serves both.

The connection's extras are librdkafka settings (``bootstrap.servers``, ``security.protocol``,
``sasl.mechanism``, ...; they travel as a secret), its host:port names the brokers when neither the
spec nor the extras do, and its login/password become ``sasl.username``/``sasl.password``.
:func:`client_config` gives those settings for confluent-kafka (the sink's producer, the source's
offset look-ups); :func:`spark_kafka_options` gives the same connection as the ``kafka.*`` options
of Spark's own Kafka data source, which runs the Java client.
"""

from __future__ import annotations

import logging
from typing import Any

from spark_jobs.errors import ConfigError

log = logging.getLogger(__name__)

#: The JAAS login module of each SASL mechanism whose credentials are a username and a password.
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka settings that the Java client spells and reads the same way.
SAME_IN_JAVA = ("bootstrap.servers", "security.protocol", "client.id", "ssl.endpoint.identification.algorithm")
#: librdkafka settings this module translates for the Java client (see spark_kafka_options).
TRANSLATED = ("sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location")


def brokers(host: str, port: int | None) -> str:
    """The bootstrap servers a connection names: its host with its port (default 9092), or its host
    as it is when it already lists ``host:port`` pairs (``b1:9092,b2:9092``) and no port is set."""
    if ":" in host and not port:
        return host
    return f"{host}:{port or 9092}"


def client_config(connection: dict[str, Any], extra: dict[str, Any], password: str | None,
                  bootstrap_servers: str | None, what: str) -> dict[str, Any]:
    """librdkafka settings: the connection's extras that are client settings (dotted names), the
    brokers (``bootstrap_servers`` from the spec first), and the login/password as SASL credentials.
    ``what`` ("destination", "source") names the spec part in the error when no brokers are known."""
    config = {k: v for k, v in extra.items() if "." in k}
    if bootstrap_servers:
        config["bootstrap.servers"] = bootstrap_servers
    elif "bootstrap.servers" not in config and connection.get("host"):
        config["bootstrap.servers"] = brokers(connection["host"], connection.get("port"))
    if "bootstrap.servers" not in config:
        raise ConfigError(f"The kafka {what} needs 'bootstrap_servers' or a connection naming the brokers")
    if connection.get("login"):
        config.setdefault("sasl.username", connection["login"])
        if password:
            config.setdefault("sasl.password", password)
    return config


def spark_kafka_options(config: dict[str, Any]) -> dict[str, str]:
    """The options of Spark's Kafka data source (``kafka.<Java client setting>``) for the librdkafka
    settings ``config``: SASL credentials become a JAAS line (PLAIN or SCRAM), a PEM CA file a PEM
    truststore. A setting the Java client spells differently is left out with a warning naming it
    (never its value); give the Java setting as the source option ``kafka.<name>`` instead."""
    options = {f"kafka.{k}": str(config[k]) for k in SAME_IN_JAVA if k in config}
    mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "")
    if mechanism:
        options["kafka.sasl.mechanism"] = mechanism
    if "sasl.username" in config:
        module = LOGIN_MODULES.get((mechanism or "PLAIN").upper())
        if module is None:
            raise ConfigError(f"The kafka source cannot log in with SASL mechanism {mechanism!r} from a username and "
                              f"password; it knows {sorted(LOGIN_MODULES)}. Give the Java client's own settings "
                              "as source options (kafka.sasl.jaas.config in a secret-free form, e.g. OAUTHBEARER).")
        options["kafka.sasl.jaas.config"] = (f"{module} required username={_jaas(config['sasl.username'])} "
                                             f"password={_jaas(config.get('sasl.password', ''))};")
    if "ssl.ca.location" in config:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(config["ssl.ca.location"])
    left_out = sorted(set(config) - set(SAME_IN_JAVA) - set(TRANSLATED))
    if left_out:
        log.warning("Kafka connection setting(s) %s have no known Java client equivalent and are not passed to "
                    "Spark's Kafka source; give them as source options 'kafka.<Java setting>'", left_out)
    return options


def _jaas(value: Any) -> str:
    """A JAAS option value: double-quoted, with backslashes and quotes escaped."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
