"""Provider settings from Airflow's configuration (``[reverse_etl]`` section, or the matching
``AIRFLOW__REVERSE_ETL__*`` environment variables)."""

from __future__ import annotations

import os


def _get(option: str) -> str | None:
    from airflow.configuration import conf

    return conf.get("reverse_etl", option, fallback=None) or None


def warehouse_uri(explicit: str | None = None) -> str:
    """The warehouse root: the operator's own setting, else ``[reverse_etl] warehouse``, else
    ``$AIRFLOW_HOME/reverse_etl_warehouse``."""
    if explicit:
        return explicit.rstrip("/")
    configured = _get("warehouse")
    if configured:
        return configured.rstrip("/")
    from airflow.configuration import AIRFLOW_HOME

    return os.path.join(AIRFLOW_HOME, "reverse_etl_warehouse")


def jars_dir() -> str | None:
    return _get("jars_dir")


def spark_history_url() -> str | None:
    """The Spark history server's base URL, for the operators' "Spark application" link."""
    return _get("spark_history_url")


def spark_connect_timeout() -> float:
    """How long (seconds) a job run as a Spark Connect client waits for a server that stopped
    answering before it fails with a retryable error: ``[reverse_etl] spark_connect_timeout``,
    default 60."""
    from spark_jobs.session import DEFAULT_SERVER_TIMEOUT_S

    configured = _get("spark_connect_timeout")
    return float(configured) if configured else DEFAULT_SERVER_TIMEOUT_S


def pool() -> str | None:
    """The Airflow pool the operators' tasks run in unless a task (or its DAG's ``default_args``)
    names one: ``[reverse_etl] pool``. Unset, they use Airflow's ``default_pool``. The pool must exist
    (``airflow pools set reverse_etl 4 "Spark jobs"``): Airflow never schedules a task whose pool is
    missing, it only logs a warning, which is why the option has no default name
    (docs/guides/clusters-and-object-stores.md says how to size it)."""
    return _get("pool")
