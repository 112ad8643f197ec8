"""Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point: the same keys
as the official providers' (generated there from their ``provider.yaml``), ``state`` and ``lifecycle``
among them. ``tests/airflow_reverse_etl/test_get_provider_info.py`` holds it against the code: every
operator, sensor, trigger and hook module and every extra link of the package is declared and
imports, every connection type names its hook, and the configuration section declares exactly the
options the code reads."""

from typing import Any

from spark_jobs.contract.catalogue import CATALOGUE
from spark_jobs.contract.destination_record import ConnectionForm

#: The module the destination connection types' hook classes are made in, one per type.
HOOKS_MODULE = "airflow_reverse_etl.hooks.destination"


def connection_type(form: ConnectionForm) -> dict[str, Any]:
    """A destination connection type as current providers declare one: the form's extra fields
    (``conn-fields``, stored under their own names in the connection's extras, which is where the sinks
    read them) and the standard fields' labels, from the destination's record."""
    declared: dict[str, Any] = {
        "hook-class-name": f"{HOOKS_MODULE}.{form.hook_class}", "hook-name": form.hook_name,
        "connection-type": form.conn_type,
        "ui-field-behaviour": {"hidden-fields": list(form.hidden_fields), "relabeling": dict(form.relabeling),
                               "placeholders": dict(form.placeholders)}}
    if form.conn_fields:
        declared["conn-fields"] = form.conn_fields
    return declared


#: The destination connection types (:mod:`airflow_reverse_etl.hooks.destination`), from the records of
#: the built-in destinations (:mod:`spark_jobs.contract.catalogue`).
CONNECTION_TYPES = [connection_type(record.form) for record in CATALOGUE if record.form is not None]


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-reverse-etl",
        "name": "Reverse ETL (Spark + Delta Lake)",
        "description": "Snapshot tables into Delta Lake with PySpark, diff snapshots, build wide tables "
        "and sync the changes to downstream systems.",
        "state": "ready",
        # AIP-95: a new provider starts in incubation, before it graduates to production
        "lifecycle": "incubation",
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "Reverse ETL",
                "external-doc-url": "https://github.com/airflow-reverse-etl/airflow-reverse-etl",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Reverse ETL",
                "python-modules": [
                    "airflow_reverse_etl.operators.snapshot",
                    "airflow_reverse_etl.operators.diff",
                    "airflow_reverse_etl.operators.sink",
                    "airflow_reverse_etl.operators.backfill",
                    "airflow_reverse_etl.operators.history",
                    "airflow_reverse_etl.operators.restore",
                    "airflow_reverse_etl.operators.savepoint",
                    "airflow_reverse_etl.operators.maintenance",
                    "airflow_reverse_etl.operators.retention",
                    "airflow_reverse_etl.operators.widen",
                ],
            }
        ],
        "sensors": [
            {"integration-name": "Reverse ETL", "python-modules": ["airflow_reverse_etl.sensors.snapshot"]}
        ],
        "triggers": [
            {"integration-name": "Reverse ETL", "python-modules": ["airflow_reverse_etl.triggers.delta_version",
                                                                   "airflow_reverse_etl.triggers.delta_commit",
                                                                   "airflow_reverse_etl.triggers.spark_driver"]}
        ],
        "hooks": [
            {"integration-name": "Reverse ETL", "python-modules": ["airflow_reverse_etl.hooks.spark_job",
                                                                   "airflow_reverse_etl.hooks.destination"]}
        ],
        "extra-links": [
            "airflow_reverse_etl.links.SparkApplicationLink",
            "airflow_reverse_etl.links.JobResultLink",
            "airflow_reverse_etl.links.JobSpecLink",
        ],
        "connection-types": CONNECTION_TYPES,
        "plugins": [{"name": "reverse_etl", "plugin-class": "airflow_reverse_etl.ui.plugin.ReverseEtlUiPlugin"}],
        "config": {
            "reverse_etl": {
                "description": "Where the lake lives and how Spark jobs are launched.",
                "options": {
                    "warehouse": {
                        "description": "Root of the warehouse (local path or Hadoop URI such as s3a://bucket/wh). "
                        "Default: $AIRFLOW_HOME/reverse_etl_warehouse.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3a://lake/warehouse",
                        "default": None,
                    },
                    "jars_dir": {
                        "description": "Directory of the Delta/JDBC jars (scripts/fetch_jars.sh). When unset, "
                        "jobs ask Spark to resolve the Delta package (spark.jars.packages).",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/opt/airflow/jars",
                        "default": None,
                    },
                    "spark_history_url": {
                        "description": "Base URL of the Spark history server; the operators' \"Spark "
                        "application\" link points there (else at the driver UI the job reported, if any).",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "http://spark-history:18080",
                        "default": None,
                    },
                    "pool": {
                        "description": "Airflow pool of the reverse-ETL operators' tasks, unless a task or "
                        "its DAG's default_args names one; it must exist (airflow pools set). Size it to the "
                        "Spark side: the jobs that may run at once on the cluster or Connect server, so that a "
                        "fleet of pipelines queues in Airflow instead of overloading Spark. Unset: "
                        "default_pool.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "reverse_etl",
                        "default": None,
                    },
                    "spark_connect_timeout": {
                        "description": "Seconds a job run as a Spark Connect client keeps retrying a server "
                        "that stopped answering (killed, restarting) before it fails with a retryable error "
                        "naming the server.",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "120",
                        "default": "60",
                    },
                },
            }
        },
    }
