"""Scenario 9, a fleet: N pipelines of the demo's shape on one ``airflow standalone`` (LocalExecutor) and
one Spark Connect server, each backfilled over 3 dates at once, as a data team would run them.

The pipelines are ``bench/fleet_dags.py`` (own snapshot table, consumer and SQLite destination, 2k rows,
data from ``bench/fleet_data.py``). The script starts the server and the instance
(:func:`tests_common.standalone.running_standalone`), unpauses every DAG, starts all the backfills at
once and waits for every run. The instance's metadata database is the project's Postgres (a database
of its own, ``airflow_fleet``, made anew): on SQLite, even with a 60 s busy timeout, six
``airflow backfill create`` calls at once against a busy scheduler failed with "database is locked"
(SQLite refuses a reader's upgrade to a writer at once, whatever the timeout, to avoid a deadlock).
Figures:

- ``fleet_n``, ``fleet_wall_s`` (first backfill created -> last run finished),
  ``fleet_pipeline_dates_per_min`` (N x 3 / wall minutes);
- ``fleet_failed_tasks``, ``fleet_retries`` (task attempts beyond the first);
- ``fleet_correct``: every destination equals its pipeline's last day;
- per task, the median duration (``<task>_median_s``), as the API reports it.

``python -m bench.fleet --n 6 --out FILE [--record]`` (``--record`` merges it into
``bench/results/latest.json`` as ``scenarios["9"]``; N = 20 is the larger run on this machine, 50 a
documented option for bigger ones).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import REPO, Goals, record

DATES = ("2026-01-01", "2026-01-03")  # the backfill's range: three dates
TASKS = ("extract", "snapshot", "diff", "sync")
TIMEOUT = 3600.0

GOALS: Goals = {  # issue 25's goal
    "fleet_pipeline_dates_per_min": (">= 12 pipeline-dates per minute on 2 cores", lambda r: r >= 12),
    "fleet_failed_tasks": ("0", lambda r: r == 0),
}


def _backfill_all(instance: Any, dag_ids: list[str]) -> None:
    """Every pipeline's backfill, started at once (one CLI process each, as a script would)."""
    with ThreadPoolExecutor(max_workers=len(dag_ids)) as pool:
        list(pool.map(lambda d: instance.backfill(d, *DATES, "--reprocess-behavior", "failed"), dag_ids))


def _task_figures(instance: Any, dag_ids: list[str]) -> dict[str, Any]:
    durations: dict[str, list[float]] = {task: [] for task in TASKS}
    failed = retries = 0
    for dag_id in dag_ids:
        for run in instance.dag_runs(dag_id):
            path = f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances"
            for ti in instance.api("GET", path)["task_instances"]:
                failed += ti["state"] == "failed"
                retries += max(0, int(ti["try_number"] or 1) - 1)
                if ti.get("duration") is not None:
                    durations[ti["task_id"]].append(float(ti["duration"]))
    medians = {f"{task}_median_s": round(statistics.median(v), 2) for task, v in durations.items() if v}
    return {"fleet_failed_tasks": failed, "fleet_retries": retries, **medians}


def _correct(fleet_dir: Path, dag_ids: list[str]) -> bool:
    from bench.fleet_data import DAYS, rows_on

    for dag_id in dag_ids:
        with sqlite3.connect(fleet_dir / dag_id / "crm.db") as conn:
            got = sorted(conn.execute("SELECT customer_id, name, email, city, tier FROM contacts").fetchall())
        if got != sorted(rows_on(dag_id, DAYS[-1])):
            return False
    return True


def _metadata_database(stack: ExitStack) -> str:
    """A new, empty Postgres database for the instance's metadata (SQLAlchemy URL); the project's
    server is started if it is not running, and stopped afterwards in that case."""
    from tests_common.services import fresh_database, run_service_script, start_postgres

    pg, already = start_postgres()
    if not already:
        stack.callback(run_service_script, "postgres", "stop", 120)
    return fresh_database(pg, "airflow_fleet")


def measure(work: Path, n: int) -> dict[str, Any]:
    from tests_common.spark_connect import own_server
    from tests_common.standalone import running_standalone

    shutil.rmtree(work, ignore_errors=True)
    dags, fleet_dir, home = work / "dags", work / "fleet", work / "airflow"
    for folder in (dags, fleet_dir, home):
        folder.mkdir(parents=True)
    shutil.copy(REPO / "bench" / "fleet_dags.py", dags / "fleet_dags.py")
    settings = {"AIRFLOW__CORE__DAGS_FOLDER": str(dags), "ARETL_FLEET_N": str(n), "ARETL_FLEET_DIR": str(fleet_dir)}
    dag_ids = [f"fleet_{i:02d}" for i in range(n)]
    with ExitStack() as stack:
        settings["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = _metadata_database(stack)
        server = stack.enter_context(own_server())
        instance = stack.enter_context(running_standalone(home, {"spark_default": server.airflow_connection()},
                                                          settings))
        for dag_id in dag_ids:
            instance.wait_for_dag(dag_id)
            instance.unpause(dag_id)
        started = time.monotonic()
        _backfill_all(instance, dag_ids)
        states = {d: instance.wait_for_runs(d, ["2026-01-01", "2026-01-02", "2026-01-03"], timeout=TIMEOUT)
                  for d in dag_ids}
        wall = time.monotonic() - started
        figures = {"fleet_n": n, "fleet_wall_s": round(wall, 1),
                   "fleet_pipeline_dates_per_min": round(3 * n / (wall / 60), 2),
                   **_task_figures(instance, dag_ids), "fleet_correct": _correct(fleet_dir, dag_ids)}
        return {"figures": figures, "run_states": states, "correct": {"fleet_correct": figures["fleet_correct"]}}
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6, help="pipelines (default 6)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--record", action="store_true",
                        help="also merge the result into bench/results/latest.json as scenarios['9']")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    load = [round(x, 1) for x in os.getloadavg()]
    result = measure(out.parent / "fleet", args.n)
    result["load_avg"] = {"start": load, "end": [round(x, 1) for x in os.getloadavg()]}
    out.write_text(json.dumps(result, indent=2))
    if args.record:
        record(result, "9")
    print(json.dumps(result["figures"], indent=2))
    return 0 if result["figures"]["fleet_correct"] and not result["figures"]["fleet_failed_tasks"] else 1


if __name__ == "__main__":
    sys.exit(main())
