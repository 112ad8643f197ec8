"""Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point."""


def get_provider_info():
    return {
        "package-name": "airflow-reverse-etl",
        "name": "Reverse ETL (Spark + Delta Lake)",
        "description": "Snapshot tables into Delta Lake with PySpark, diff snapshots, build wide tables "
        "and sync the changes to downstream systems.",
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
                    "airflow_reverse_etl.operators.widen",
                ],
            }
        ],
        "sensors": [
            {"integration-name": "Reverse ETL", "python-modules": ["airflow_reverse_etl.sensors.snapshot"]}
        ],
        "triggers": [
            {"integration-name": "Reverse ETL", "python-modules": ["airflow_reverse_etl.triggers.delta_version"]}
        ],
        "hooks": [
            {"integration-name": "Reverse ETL", "python-modules": ["airflow_reverse_etl.hooks.spark_job"]}
        ],
        "connection-types": [],
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
                },
            }
        },
    }
