"""Jobs that survive their worker: cluster deploy mode on the real standalone cluster.

The job's driver runs on the cluster's worker, not in the task (:mod:`airflow_reverse_etl.hooks.
cluster_driver`). Each task attempt runs in a child process of its own (the worker) through Airflow's
task runner, the metadata database shared: the first by ``dag.test()``, the retry by scheduling the same
task instance of the same DAG run again (as the scheduler does after a lost worker; ``dag.test()``
would start a new DAG run). So the task state store the operator keeps the driver's submission id in
is Airflow's own.

One driver, one scenario: a cluster-mode driver of this snapshot runs ~40-60 s here, and the cluster's
two cores run one at a time, so each scenario of its own would cost one more. Three attempts of one
task instance take turns at that driver, each the moment the one before is lost (their processes start
together and wait, parsed, for their turn):

- **A worker killed mid-job**: the first attempt (durable, not deferrable: Airflow's
  ``ResumableJobMixin`` submits the driver and keeps its id in the task state store) is SIGKILLed while
  its driver runs on the cluster; the retry reattaches to that driver ("Reconnecting to existing job")
  and polls it — and is killed in turn.
- **Deferrable**: the third attempt runs with ``[operators] default_deferrable`` on (a deployment that
  turned it on; the DAG leaves ``deferrable`` to that default), so it reattaches by deferring to
  :class:`SparkDriverTrigger` on the kept driver: the task instance is ``deferred``, holding no worker
  slot, while that driver runs on the cluster; the trigger polls the master and reads the result, the
  task resumes and succeeds.
- **After the end**: a fourth attempt, deferrable, of a task instance whose driver has finished (its
  worker lost after the job ended) takes that driver's result instead of running the job again.

The master saw exactly one driver, the snapshot table has exactly one version with the source's rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark_submit  # cluster: from the spark_cluster fixture

DAG_FILE = '''
import os
import pendulum
from airflow.sdk import DAG
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

with DAG("durable_cluster", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    SnapshotOperator(task_id="snapshot", name="durable_cluster", primary_key="id", poll_interval=0.5, retries=3,
                     source={"format": "csv", "path": os.environ["ARETL_TEST_SOURCE"],
                             "schema": "id INT, name STRING"})
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

# A retry of the killed attempt: the same task instance of the same DAG run, scheduled again and run by
# Airflow's task runner, as dag.test() runs each task (dag.test() itself would start a new DAG run). The
# process starts (imports, parses the DAG) beside the first attempt and waits for a line on its stdin:
# the retry then begins the moment the attempt before it is lost, while their driver surely still runs.
RETRY = """
import json, os, sys
from sqlalchemy import select
from airflow import settings
from airflow.dag_processing.dagbag import DagBag
from airflow.models.dagrun import DagRun
from airflow.sdk.definitions.dag import _run_task
from airflow.utils.state import TaskInstanceState
from tests_common.demo import task_xcom
dag = DagBag(sys.argv[1]).dags[sys.argv[2]]
deferrable = os.environ["AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"] == "True"
assert dag.task_dict["snapshot"].deferrable == deferrable  # [operators] default_deferrable of this process
print("PARSED", flush=True)
sys.stdin.readline()
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


class Attempt:
    """A task attempt in a process of its own (the worker), its output collected as it comes: by
    default the DAG run's first; with :data:`RETRY`, a retry that waits for :meth:`go`."""

    def __init__(self, env: dict[str, str], script: str = RUN_DAG, deferrable: bool = False):
        dag_file = Path(env["AIRFLOW__CORE__DAGS_FOLDER"]) / "durable_dags.py"
        env = {**env, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": str(deferrable), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-c", script, str(dag_file), "durable_cluster"], env=env,
                                     text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def go(self) -> None:
        """Let the waiting retry begin: the scheduler schedules it."""
        wait_until(lambda: self.logged("PARSED"), 120, "retry parsed its DAG", self)
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """The worker is gone mid-job (SIGKILL); the driver runs on."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.reader.join(30)

    def outcome(self) -> dict:
        self.proc.wait(timeout=600)
        self.reader.join(30)
        lines = [line for line in self.lines if line.startswith("OUTCOME ")]
        assert lines, self.log[-6000:]
        return json.loads(lines[-1][8:])


@pytest.fixture
def start_attempt(durable_env):
    """Start attempts in the test's environment; what still runs at the end (a failed test's waiting
    retries) is killed."""
    started: list[Attempt] = []

    def start(script: str = RUN_DAG, deferrable: bool = False) -> Attempt:
        started.append(Attempt(durable_env, script, deferrable))
        return started[-1]

    yield start
    for attempt in started:
        if attempt.proc.poll() is None:
            attempt.kill()


def drivers(cluster) -> dict[str, str]:
    state = cluster.state()
    return {d["id"]: d["state"] for d in state.get("activedrivers", []) + state.get("completeddrivers", [])}


def wait_until(condition, timeout: float, what: str, attempt: Attempt):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        assert attempt.proc.poll() is None, f"the attempt ended before {what}:\n{attempt.log[-4000:]}"
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout:.0f}s")


def kept_driver() -> bool:
    """Whether the task's attempt has kept its driver's id in Airflow's task state store."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(TaskStateStoreModel).filter_by(dag_id="durable_cluster", key="spark_driver").count() > 0


def task_state() -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id="durable_cluster", task_id="snapshot").one_or_none()
        return None if ti is None else str(ti.state)


def lost_worker(state: str = "running") -> None:
    """What Airflow's scheduler does with a task instance whose worker stopped heartbeating: it fails
    the attempt and, with retries left, marks it up for retry. (``state``: the one the attempt left.)"""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id="durable_cluster", task_id="snapshot").one()
        assert ti.state == state, ti.state
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
def test_retries_after_killed_workers_reattach_to_the_running_driver_the_deferred_one_holding_no_slot(
        durable_env, start_attempt, spark_cluster):
    before = drivers(spark_cluster)

    def new_drivers(state: str | None = None) -> list[str]:
        return [d for d, s in drivers(spark_cluster).items() if d not in before and state in (None, s)]

    first = start_attempt()
    polling = start_attempt(RETRY)  # these start now and wait for their turn
    deferred = start_attempt(RETRY, deferrable=True)
    after_the_end = start_attempt(RETRY, deferrable=True)
    running = wait_until(lambda: kept_driver() and new_drivers("RUNNING"),
                         300, "driver running on the cluster, its id in the task state store", first)
    first.kill()
    lost_worker()

    polling.go()
    wait_until(lambda: polling.logged("Reconnecting to existing job"), 120, "retry reattached", polling)
    polling.kill()
    lost_worker()
    assert new_drivers("RUNNING") == running, "the driver ended before the last retry began"

    deferred.go()  # holds no worker slot while the first attempt's driver runs:
    wait_until(lambda: task_state() == "deferred" and new_drivers("RUNNING") == running, 120,
               "deferred task instance while its driver runs", deferred)
    result = deferred.outcome()

    assert "Submitted the snapshot job" not in polling.log + deferred.log  # no retry submitted anew
    assert deferred.logged("Deferring to the driver an earlier attempt submitted"), deferred.log[-4000:]
    assert (result["state"], result["try_number"]) == ("success", 3), deferred.log[-4000:]
    assert result["result"]["spark"]["deploy_mode"] == "cluster"
    new = {d: s for d, s in drivers(spark_cluster).items() if d not in before}
    assert new == {running[0]: "FINISHED"}  # one driver: the retries took the first attempt's
    versions, rows = snapshot_versions(Path(durable_env["AIRFLOW__REVERSE_ETL__WAREHOUSE"]), "durable_cluster")
    assert versions == [0] and rows == ROWS
    assert result["result"]["outputs"][0]["version"] == 0

    # A worker lost after the driver finished, before its task was recorded a success (here: the success
    # undone): a deferrable retry takes the finished driver's result instead of running the job again.
    lost_worker("success")
    after_the_end.go()
    taken = after_the_end.outcome()
    assert after_the_end.logged("Taking the result of the driver an earlier attempt submitted"), \
        after_the_end.log[-4000:]
    assert (taken["state"], taken["try_number"]) == ("success", 4) and taken["result"] == result["result"]
    assert {d: s for d, s in drivers(spark_cluster).items() if d not in before} == {running[0]: "FINISHED"}


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
