"""Scenario 5, orchestration overhead: Snapshot -> Diff -> Sink(sqlite) on 1k rows through Airflow's
``dag.test`` with every job in a real spark-submit, as a scheduler would run it.

Per task: wall time minus the job's own ``duration_s`` (measured inside Spark by the entry point) is
what orchestration costs. To see what dominates it, the same spark-submit is also timed for an app
that only starts a Delta session and stops (JVM start, jar loading, PySpark start), and with no
extra jars; and the provider's import time is measured in a fresh interpreter.

Runs in its own process (``python -m bench.orchestration --out FILE``): Airflow reads its
configuration at import time, so the throw-away AIRFLOW_HOME is set before anything imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import Goals, airflow_environment, submit_noop

ROWS = 1000

GOALS: Goals = {"s5.overhead_per_task_s": ("<= 15 s per task", lambda r: r <= 15)}


DAG_FILE = """
import os

import pendulum
from airflow.sdk import DAG

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

with DAG(dag_id="bench_orchestration", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    snapshot = SnapshotOperator(task_id="snapshot", name="bench", primary_key="id",
                                source={"format": "parquet", "path": os.environ["ARETL_BENCH_SOURCE"]})
    diff = DiffOperator(task_id="diff", snapshot=snapshot.output, consumer="crm")
    sync = SinkOperator(task_id="sync", changes=diff.output, mode="upsert",
                        destination={"type": "sqlite", "database": os.environ["ARETL_BENCH_CRM"], "table": "contacts"})
"""


def build_dag(home: Path, source: str):
    """The DAG, loaded from a file in the DAGs folder: ``dag.test`` syncs that folder's bundle."""
    import importlib.util

    os.environ["ARETL_BENCH_SOURCE"], os.environ["ARETL_BENCH_CRM"] = source, str(home / "crm.db")
    path = home / "dags" / "bench_orchestration.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DAG_FILE)
    spec = importlib.util.spec_from_file_location("bench_orchestration_dag", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def _import_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", ("import airflow_reverse_etl.operators.sink, "
                    "airflow_reverse_etl.operators.snapshot, airflow_reverse_etl.operators.diff")], check=True)
    return round(time.perf_counter() - started, 2)


def measure(out: Path) -> dict:
    home = Path(tempfile.mkdtemp(prefix="aretl-bench-airflow-"))
    airflow_environment(home)
    from bench import data

    source = str(home / "source.parquet")
    data.generate(data.connect(), ROWS, source)

    from airflow.utils.db import initdb

    initdb()
    import pendulum

    dag = build_dag(home, source)
    started = time.perf_counter()
    run = dag.test(logical_date=pendulum.datetime(2026, 1, 1, tz="UTC"))
    dag_s = round(time.perf_counter() - started, 2)
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    results = {}
    for path in sorted((home / "warehouse" / "_system" / "jobs").glob("*/result.json")):
        result = json.loads(path.read_text())
        results[result["job"]] = result
    figures: dict = {"dag_wall_s": dag_s}
    overheads = []
    for task in ("snapshot", "diff", "sync"):
        ti = tis[task]
        wall = round((ti.end_date - ti.start_date).total_seconds(), 2)
        job_s = results[task]["duration_s"]
        figures[f"{task}_wall_s"], figures[f"{task}_job_s"] = wall, job_s
        figures[f"{task}_overhead_s"] = round(wall - job_s, 2)
        overheads.append(wall - job_s)
        if str(ti.state) != "success":
            raise RuntimeError(f"task {task} ended {ti.state}")
    out.write_text(json.dumps({"figures": figures}, indent=2))  # the DAG's figures survive a slow tail
    figures["submit_noop_s"] = submit_noop(home, jars=True)
    figures["submit_noop_without_jars_s"] = submit_noop(home, jars=False)
    figures["provider_import_s"] = _import_seconds()
    return {"figures": figures,
            "ratios": {"s5.overhead_per_task_s": round(max(overheads), 2)},
            "correct": {"all_tasks_succeeded": True}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = measure(Path(args.out))
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report["figures"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
