"""Shared fixtures: one local SparkSession with Delta for the whole run, a fresh warehouse per test,
and an isolated Airflow home (SQLite metadata DB) created once."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import pytest

# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after pytest has
# closed the streams its handlers write to: a "--- Logging error ---" traceback after every green run.
logging.getLogger("py4j.clientserver").setLevel(logging.WARNING)

# Session fixtures of the real services, available to every test module.
pytest_plugins = ["tests.support.spark_connect"]

REPO = Path(__file__).resolve().parents[1]
JARS_DIR = REPO / ".cache" / "jars"

# Airflow reads its configuration at import time: point it at a throw-away home before any import.
_AIRFLOW_HOME = tempfile.mkdtemp(prefix="aretl-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _AIRFLOW_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__REVERSE_ETL__JARS_DIR", str(JARS_DIR))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # tests talk to loopback only
# Python workers must import test-only sinks (tests.fault_sinks) by reference, like the driver.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """One local[2] session for all in-process tests: Spark start-up costs seconds, not milliseconds."""
    from spark_jobs.session import build_session

    session = build_session(
        "aretl-tests",
        master="local[2]",
        jars_dir=str(JARS_DIR),
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.driver.memory": "2g",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path) -> str:
    path = tmp_path / "warehouse"
    path.mkdir()
    return str(path)


@pytest.fixture(scope="session")
def airflow_db():
    """Create the Airflow metadata DB (SQLite) once for tests that run DAGs."""
    from airflow.utils.db import initdb

    initdb()
    return os.environ["AIRFLOW_HOME"]
