"""The distributed path: the demo DAG, unchanged but for its sync delivering above the driver-side
threshold, on a real Spark standalone cluster.

A master and one worker run on 127.0.0.1 (``scripts/services/spark_cluster.sh``). The only differences
from a local run are the ``spark_default`` connection (``AIRFLOW_CONN_SPARK_DEFAULT``) and the client's
``spark-defaults.conf``. Executors use a Python that does not have this project installed, so the sync
can only deliver if ``spark_jobs`` and its sinks were shipped with ``--py-files``; the event log shows
which master ran each application and that the sync's tasks (the sink's ``mapPartitions`` delivery
among them) ran in executor processes, not in the driver.

The destination must hold what a local run of the demo produces: the source of that day, mapped
through the DAG's field mapping (mirror mode makes the CRM equal to the source).

One logical date: what the cluster changes (where each job runs, what it ships, how its result comes
back) every job of one run shows; the later dates' updates and deletes are the same code on other
data, which tests/system/test_demo_dag.py runs through. A second date would cost three more cold
spark-submits (about a minute) and prove nothing new here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pendulum
import pytest
from demo_customers import SOURCE_BY_DAY
from tests_common.demo import task_xcom
from tests_common.paths import REPO

pytestmark = pytest.mark.spark_submit  # cluster: from the spark_cluster fixture

DAYS = ["2026-01-01"]  # five inserts, delivered by the sink in the executors (driver_max_records=0)


def load_demo(demo_dir: Path, monkeypatch):
    """dags/reverse_etl_demo.py with its paths under ``demo_dir`` (it reads ARETL_DEMO_DIR): the module
    (for its data) and the DAG as Airflow's DagBag loads it."""
    from airflow.models.dagbag import DagBag

    monkeypatch.setenv("ARETL_DEMO_DIR", str(demo_dir))
    spec = importlib.util.spec_from_file_location("reverse_etl_demo_data", REPO / "dags" / "reverse_etl_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = DagBag(dag_folder=str(REPO / "dags")).get_dag("reverse_etl_demo")
    return module, dag


def crm_rows(database: str) -> list[tuple]:
    with sqlite3.connect(database) as conn:
        return conn.execute("SELECT contact_id, full_name, email, city, segment, source FROM crm_contacts "
                            "ORDER BY contact_id").fetchall()


def expected_crm(demo, day: str) -> list[tuple]:
    return [(key, *values, "lake") for key, values in sorted(SOURCE_BY_DAY[day].items())]


def test_executor_python_lacks_the_project(cluster_client):
    """The premise of the shipping check: without --py-files, executors cannot import spark_jobs."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import pyspark, tenacity\ntry:\n import spark_jobs\nexcept ModuleNotFoundError:\n print('absent')"
    out = subprocess.run([str(cluster_client.executor_python), "-c", probe], env=env, cwd="/",
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "absent", out
    assert cluster_client.executor_python_launches() == 1


@pytest.mark.timeout(1200)  # 3 spark-submits on a shared 2-core machine
def test_demo_dag_runs_unchanged_on_a_standalone_cluster(airflow_db, spark_cluster, cluster_client,
                                                          tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_cluster.master_url)
    warehouse = tmp_path / "warehouse"
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__WAREHOUSE", str(warehouse))
    demo, dag = load_demo(tmp_path / "demo", monkeypatch)
    sync = dag.get_task("sync_crm")  # five records would go from the driver: the executors must send them here
    sync.delivery = {**(sync.delivery or {}), "driver_max_records": 0}

    syncs = []
    for day in DAYS:
        run = dag.test(logical_date=pendulum.parse(day))
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        assert set(states.values()) == {"success"}, f"{day}: {states}"
        assert crm_rows(demo.CRM_DATABASE) == expected_crm(demo, day), day
        syncs.append(task_xcom(run, "sync_crm"))

    # Client deploy mode on the standalone master; each result came back through the warehouse.
    for result in syncs:
        assert result["spark"] == {"master": spark_cluster.master_url, "deploy_mode": "client",
                                   "application_id": result["spark"]["application_id"],
                                   "ui_url": result["spark"]["ui_url"]}  # the driver UI, for the extra link
        assert result["job_dir"].startswith(f"{warehouse}/_system/jobs/")
        on_disk = json.loads(Path(result["job_dir"], "result.json").read_text())
        assert on_disk["spark"] == result["spark"] and on_disk["stats"] == result["stats"]
    assert [s["stats"]["sent"] for s in syncs] == [5]

    # Every job of the run was an application of this master, shipping spark_jobs with --py-files.
    apps = cluster_client.applications()
    assert len(apps) == 3 * len(DAYS), [a["name"] for a in apps]
    for app in apps:
        assert app["properties"]["spark.master"] == spark_cluster.master_url, app["name"]
        assert app["properties"]["spark.submit.pyFiles"].endswith(".zip"), app["name"]
    # The sink ran in executors: every task of the sync applications ran on a non-driver executor.
    sync_apps = [a for a in apps if a["id"] in {s["spark"]["application_id"] for s in syncs}]
    assert len(sync_apps) == len(DAYS)
    for app in sync_apps:
        assert app["task_executors"] and "driver" not in app["task_executors"], app["task_executors"]
    # ...and their Python workers were started through the executor Python that lacks this project.
    assert cluster_client.executor_python_launches() >= len(DAYS)
