"""Running an example DAG with Airflow's OpenLineage listener on, as a user enables it: a child
process (the listener and its configuration are set up when Airflow starts, so not in a test worker
that already imported Airflow) with the file transport, whose events the test reads back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RUN_DAG = """
import json, sys
from datetime import datetime
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(sys.argv[1])
assert not bag.import_errors, bag.import_errors
run = bag.dags[sys.argv[2]].test(logical_date=datetime.fromisoformat(sys.argv[3]), run_conf=json.loads(sys.argv[4]))
print("STATES " + json.dumps({ti.task_id: str(ti.state) for ti in run.get_task_instances()}))
"""


def run_dag_with_openlineage(dag_file: Path, dag_id: str, logical_date: str, events_file: Path,
                             conf: dict[str, Any] | None = None) -> dict[str, str]:
    """``dag.test()`` of one logical date in a child process; returns task id -> state."""
    env = {**os.environ,
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events_file),
                                                         "append": True}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "aretl-test",
           # the jobs run as Spark Connect clients inside the task process: emit from a thread rather
           # than a fork of a process holding live gRPC threads (docs/concepts/versions.md, OpenLineage)
           "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True"}
    proc = subprocess.run([sys.executable, "-c", RUN_DAG, str(dag_file), dag_id, logical_date,
                           json.dumps(conf or {})], env=env, capture_output=True, text=True, timeout=800)
    states = [line for line in proc.stdout.splitlines() if line.startswith("STATES ")]
    assert states, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(states[0][7:])


def completed_events(events_file: Path) -> dict[str, dict[str, Any]]:
    """Task name (``dag.task``) -> its last COMPLETE event."""
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    return {e["job"]["name"]: e for e in events if e["eventType"] == "COMPLETE"}
