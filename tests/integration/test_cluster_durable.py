"""Jobs that survive their worker: cluster deploy mode on the real standalone cluster.

The job's driver runs on the cluster's worker, not in the task (:mod:`airflow_reverse_etl.hooks.
cluster_driver`). Each task attempt runs in a child process of its own (the worker) through Airflow's
task runner, the metadata database shared: the first by ``dag.test()``, the retry by scheduling the same
task instance of the same DAG run again (as the scheduler does after a lost worker; ``dag.test()``
would start a new DAG run). So the task state store the operator keeps the driver's submission id in
is Airflow's own.

- **A worker killed mid-job**: the first attempt's process is SIGKILLed while its driver runs on the
  cluster; the retry of the same task instance reattaches to that driver and takes its result. The
  master saw exactly one driver, the snapshot table has exactly one version with the source's rows.
- **Deferrable**: the task defers to :class:`SparkDriverTrigger` (the task instance is ``deferred``,
  holding no worker slot, while its driver runs on the cluster), the trigger polls the master and
  reads the result, the task resumes and succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark_submit  # cluster: from the spark_cluster fixture

DAG_FILE = '''
import os
import pendulum
from airflow.sdk import DAG
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

for dag_id, deferrable in (("durable_cluster", False), ("deferred_cluster", True)):
    with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        SnapshotOperator(task_id="snapshot", name=dag_id, primary_key="id", deferrable=deferrable,
                         poll_interval=1, retries=1,
                         source={"format": "csv", "path": os.environ["ARETL_TEST_SOURCE"],
                                 "schema": "id INT, name STRING"})
    globals()[dag_id] = dag
'''

RUN_DAG = """
import json, sys
from datetime import datetime
from airflow.dag_processing.dagbag import DagBag
from tests_common.demo import task_xcom
bag = DagBag(sys.argv[1])
assert not bag.import_errors, bag.import_errors
run = bag.dags[sys.argv[2]].test(logical_date=datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
[ti] = run.get_task_instances()
print("OUTCOME " + json.dumps({"state": str(ti.state), "try_number": ti.try_number,
                                "result": task_xcom(run, "snapshot")}, default=str))
"""

# The retry of the killed attempt: the same task instance of the same DAG run, scheduled again and run by
# Airflow's task runner, as dag.test() runs each task (dag.test() itself would start a new DAG run).
RETRY = """
import json, sys
from sqlalchemy import select
from airflow import settings
from airflow.dag_processing.dagbag import DagBag
from airflow.models.dagrun import DagRun
from airflow.sdk.definitions.dag import _run_task
from airflow.utils.state import TaskInstanceState
from tests_common.demo import task_xcom
dag = DagBag(sys.argv[1]).dags[sys.argv[2]]
session = settings.Session()
run = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id))
ti = run.get_task_instance("snapshot", session=session)
assert ti.state == TaskInstanceState.UP_FOR_RETRY, ti.state
ti.try_number += 1  # what the scheduler does when it schedules the retry
ti.state = TaskInstanceState.SCHEDULED
session.commit()
_run_task(ti=ti, task=dag.task_dict["snapshot"], run_triggerer=True)
session.expire_all()
ti = run.get_task_instance("snapshot", session=session)
print("OUTCOME " + json.dumps({"state": str(ti.state), "try_number": ti.try_number,
                                "result": task_xcom(run, "snapshot")}, default=str))
"""

ROWS = [(1, "ann"), (2, "bob"), (3, "cid")]


@pytest.fixture
def durable_env(airflow_db, spark_cluster, cluster_client, tmp_path):
    """The child processes' environment: the DAG file's folder, the cluster in cluster deploy mode as
    ``spark_default``, a local warehouse (every node of this one-machine cluster sees it)."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "durable_dags.py").write_text(DAG_FILE)
    source = tmp_path / "customers.csv"
    source.write_text("id,name\n" + "".join(f"{i},{n}\n" for i, n in ROWS))
    return {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "ARETL_TEST_SOURCE": str(source),
            "AIRFLOW__REVERSE_ETL__WAREHOUSE": str(tmp_path / "warehouse"),
            "AIRFLOW_CONN_SPARK_DEFAULT": spark_cluster.cluster_mode_connection()}


def attempt(env: dict[str, str], dag_id: str, script: str = RUN_DAG) -> subprocess.Popen:
    """A task attempt in a process of its own (the worker): by default the DAG run's first."""
    dag_file = Path(env["AIRFLOW__CORE__DAGS_FOLDER"]) / "durable_dags.py"
    return subprocess.Popen([sys.executable, "-c", script, str(dag_file), dag_id], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def outcome(proc: subprocess.Popen) -> tuple[dict, str]:
    out, _ = proc.communicate(timeout=600)
    lines = [line for line in out.splitlines() if line.startswith("OUTCOME ")]
    assert lines, out[-6000:]
    return json.loads(lines[-1][8:]), out


def drivers(cluster) -> dict[str, str]:
    state = cluster.state()
    return {d["id"]: d["state"] for d in state.get("activedrivers", []) + state.get("completeddrivers", [])}


def wait_until(condition, timeout: float, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        assert proc.poll() is None, f"the attempt ended before {what}:\n{proc.stdout.read()[-4000:]}"
        time.sleep(0.25)
    raise AssertionError(f"no {what} within {timeout:.0f}s")


def kept_driver(dag_id: str) -> bool:
    """Whether the task's attempt has kept its driver's id in Airflow's task state store."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(TaskStateStoreModel).filter_by(dag_id=dag_id, key="spark_driver").count() > 0


def lost_worker(dag_id: str) -> None:
    """What Airflow's scheduler does with a task instance whose worker stopped heartbeating: it fails
    the attempt and, with retries left, marks it up for retry."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id=dag_id, task_id="snapshot").one()
        assert ti.state == TaskInstanceState.RUNNING, ti.state
        ti.state = TaskInstanceState.UP_FOR_RETRY


def snapshot_versions(warehouse: Path, name: str) -> tuple[list[int], list[tuple]]:
    """The snapshot table's versions and rows (read by delta-rs's SQL engine: its pyarrow reader refuses
    the deletion vectors Spark's tables have)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(warehouse / "snapshots" / name))
    versions = sorted(int(entry["version"]) for entry in table.history())
    data = pa.table(QueryBuilder().register("t", table).execute("SELECT id, name FROM t").read_all())
    return versions, sorted((r["id"], r["name"]) for r in data.to_pylist())


@pytest.mark.timeout(900)
def test_a_retry_after_a_killed_worker_reattaches_to_the_running_driver(durable_env, spark_cluster):
    before = drivers(spark_cluster)
    first = attempt(durable_env, "durable_cluster")
    running = wait_until(lambda: kept_driver("durable_cluster") and [
        d for d, s in drivers(spark_cluster).items() if d not in before and s == "RUNNING"],
        300, "driver running on the cluster, its id in the task state store", first)
    first.send_signal(signal.SIGKILL)  # the worker is gone mid-job; the driver runs on
    first.wait()
    lost_worker("durable_cluster")

    retry, log = outcome(attempt(durable_env, "durable_cluster", RETRY))

    # the retry found the driver running (or, on a slow machine, finished): either way it took it
    assert "Reconnecting to existing job" in log or "Job already completed successfully" in log, log[-4000:]
    assert "Submitted the snapshot job" not in log
    assert (retry["state"], retry["try_number"]) == ("success", 2)
    assert retry["result"]["spark"]["deploy_mode"] == "cluster"
    new = {d: s for d, s in drivers(spark_cluster).items() if d not in before}
    assert new == {running[0]: "FINISHED"}  # one driver: the retry took the first attempt's
    versions, rows = snapshot_versions(Path(durable_env["AIRFLOW__REVERSE_ETL__WAREHOUSE"]), "durable_cluster")
    assert versions == [0] and rows == ROWS
    assert retry["result"]["outputs"][0]["version"] == 0


@pytest.mark.timeout(900)
def test_a_deferrable_task_frees_its_slot_while_the_driver_runs(durable_env, spark_cluster):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    def deferred_while_running():
        with create_session() as session:
            ti = session.query(TaskInstance).filter_by(dag_id="deferred_cluster", task_id="snapshot").one_or_none()
            state = None if ti is None else str(ti.state)
        running = [d for d, s in drivers(spark_cluster).items() if d not in before and s == "RUNNING"]
        return state == "deferred" and running

    before = drivers(spark_cluster)
    proc = attempt(durable_env, "deferred_cluster")
    wait_until(deferred_while_running, 300, "deferred task instance while its driver runs", proc)

    result, log = outcome(proc)

    assert (result["state"], result["try_number"]) == ("success", 1), log[-4000:]
    assert result["result"]["spark"]["deploy_mode"] == "cluster"
    versions, rows = snapshot_versions(Path(durable_env["AIRFLOW__REVERSE_ETL__WAREHOUSE"]), "deferred_cluster")
    assert versions == [0] and rows == ROWS


@pytest.mark.timeout(600)
def test_on_kill_kills_the_driver_on_the_cluster(durable_env, spark_cluster, monkeypatch):
    """A task marked failed or cleared while its driver runs: on_kill asks the master to kill it."""
    from airflow_reverse_etl.hooks.cluster_driver import driver_state
    from airflow_reverse_etl.hooks.spark_job import SparkJobHook
    from spark_jobs.contract import parse_spec

    for name in ("AIRFLOW_CONN_SPARK_DEFAULT", "AIRFLOW__REVERSE_ETL__WAREHOUSE"):
        monkeypatch.setenv(name, durable_env[name])
    spec = parse_spec({"job": "snapshot", "name": "killed", "primary_key": ["id"], "run_id": "r1",
                       "logical_date": "2026-01-01T00:00:00+00:00",
                       "source": {"format": "csv", "path": durable_env["ARETL_TEST_SOURCE"],
                                  "schema": "id INT, name STRING"}})
    hook = SparkJobHook()
    driver = hook.submit_driver(spec)
    deadline = time.monotonic() + 300
    while driver_state(driver) != "RUNNING":
        assert time.monotonic() < deadline, driver_state(driver)
        time.sleep(0.25)

    hook.on_kill()

    while driver_state(driver) == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.25)
    assert driver_state(driver) == "KILLED"
    assert not (Path(driver.job_dir) / "result.json").exists()
