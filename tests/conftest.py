"""Test session set-up: the environment every test and every Spark worker sees, and the fixture
plugins. Fixtures live in the :mod:`tests_common` package and are registered here, never imported
into test modules; :mod:`tests_common.markers` marks each test from the fixtures it uses."""

from __future__ import annotations

import logging
import os
import sys
import tempfile

from tests_common.paths import JARS_DIR, REPO

# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after pytest has
# closed the streams its handlers write to: a "--- Logging error ---" traceback after every green run.
logging.getLogger("py4j.clientserver").setLevel(logging.WARNING)

# Airflow reads its configuration at import time: point it at a throw-away home before any import.
# A pytest-xdist worker inherits the controller's environment, home included; each worker gets its
# own (its own SQLite metadata database: two processes migrating and writing one file collide).
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix=f"aretl-airflow-home-{_XDIST_WORKER}-")
else:
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="aretl-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__REVERSE_ETL__JARS_DIR", str(JARS_DIR))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # tests talk to loopback only
# The example DAGs import the module beside them (dags/demo_customers.py), as Airflow's DagBag lets them.
sys.path.insert(0, str(REPO / "dags"))
# Python workers must import test-only sinks (tests_common.fault_sinks) by reference, like the driver.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

pytest_plugins = [
    "tests_common.markers",
    "tests_common.parallel",
    "tests_common.spark_session",
    "tests_common.airflow_db",
    "tests_common.services",
    "tests_common.postgres_table",
    "tests_common.webhook_receiver",
    "tests_common.emulators.salesforce",
    "tests_common.emulators.hubspot",
    "tests_common.emulators.braze",
    "tests_common.rest_api",
    "tests_common.fault_api",
    "tests_common.smtp_server",
    "tests_common.spark_submit",
    "tests_common.spark_cluster",
    "tests_common.object_store",
    "tests_common.spark_connect",
    "tests_common.standalone",
    "tests_common.fault_matrix",
    "tests_common.browser",
]
