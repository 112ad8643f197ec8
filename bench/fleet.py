"""Scenario 9, a fleet: N pipelines of the demo's shape on one ``airflow standalone`` (LocalExecutor) and
one Spark Connect server, each backfilled over 3 dates at once, as a data team would run them; then the
same DAGs with every task a no-op, on the same instance, for Airflow's own floor on this machine.

The pipelines are ``bench/fleet_dags.py`` (own snapshot table, consumer and SQLite destination, 2k rows,
data from ``bench/fleet_data.py``; the no-op twins ``noop_NN`` have the same four tasks and task
settings). The script starts the server and the instance
(:func:`tests_common.standalone.running_standalone`), creates the operators' pool (``[reverse_etl]
pool = reverse_etl``, :data:`POOL_SLOTS` slots: the Connect server's 2 cores plus one, so one job's
driver-side bookkeeping overlaps another's Spark work), unpauses every DAG, starts all the no-op
backfills at once and waits for them, then all the fleet's. The instance's metadata database is the
project's Postgres (a database of its own, ``airflow_fleet``, made anew): on SQLite, even with a 60 s
busy timeout, six ``airflow backfill create`` calls at once against a busy scheduler failed with
"database is locked" (SQLite refuses a reader's upgrade to a writer at once, whatever the timeout, to
avoid a deadlock). Figures:

- ``fleet_n``, ``fleet_wall_s`` (first backfill created -> last run finished),
  ``fleet_pipeline_dates_per_min`` (N x 3 / wall minutes);
- ``fleet_noop_wall_s``, ``fleet_noop_pipeline_dates_per_min``: the same for the no-op DAGs, and
  ``fleet_vs_noop``, the no-op throughput over the fleet's (what the Spark work costs on top of
  Airflow's own per-task floor);
- ``fleet_failed_tasks``, ``fleet_retries`` (task attempts beyond the first);
- ``fleet_correct``: every destination equals its pipeline's last day;
- ``fleet_pool_slots``, ``fleet_pool_max_running`` and ``fleet_pool_max_waiting``: the pool's size, and
  the most Spark jobs running and waiting for a slot at once (sampled every second): the fleet
  queues in Airflow, the server never runs more than the pool allows (``fleet_pool_overrun`` ≤ 0);
- per task, the median duration (``<task>_median_s``), as the API reports it.

``python -m bench.fleet --n 20 --out FILE [--record]`` (``--record`` merges it into
``bench/results/latest.json`` as ``scenarios["9"]``; N = 20 is the run on this machine, 50 a
documented option for bigger ones).
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
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

#: the operators' pool in the scenario (``[reverse_etl] pool``) and its default size (``--pool-slots``)
POOL, POOL_SLOTS = "reverse_etl", 3

GOALS: Goals = {  # issue 25's goal, and issue 35's: twenty pipelines, all green, within 3x Airflow's floor
    "fleet_pipeline_dates_per_min": (">= 12 pipeline-dates per minute on 2 cores", lambda r: r >= 12),
    "fleet_failed_tasks": ("0", lambda r: r == 0),
    "fleet_retries": ("0", lambda r: r == 0),
    "fleet_vs_noop": ("<= 3 (no-op throughput / fleet throughput, same DAG shapes, same run)", lambda r: r <= 3),
    "fleet_pool_overrun": ("<= 0: the pool bounds the jobs on the server (most running - slots)", lambda r: r <= 0),
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


class PoolWatch:
    """Samples the pool every second while the fleet runs: the most task slots running and waiting
    (queued or scheduled) at once."""

    def __init__(self, instance: Any) -> None:
        self.instance, self.max_running, self.max_waiting = instance, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            pool = self.instance.api("GET", f"/pools/{POOL}")
            self.max_running = max(self.max_running, int(pool["running_slots"]))
            self.max_waiting = max(self.max_waiting, int(pool["queued_slots"]) + int(pool["scheduled_slots"]))

    def __enter__(self) -> PoolWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_all(instance: Any, dag_ids: list[str]) -> tuple[float, dict[str, Any]]:
    """Backfill every DAG at once and wait for all their runs: (wall seconds, run states)."""
    started = time.monotonic()
    _backfill_all(instance, dag_ids)
    states = {d: instance.wait_for_runs(d, ["2026-01-01", "2026-01-02", "2026-01-03"], timeout=TIMEOUT)
              for d in dag_ids}
    return time.monotonic() - started, states


def _per_min(n: int, wall: float) -> float:
    return round(3 * n / (wall / 60), 2)


def measure(work: Path, n: int, pool_slots: int = POOL_SLOTS) -> dict[str, Any]:
    from tests_common.spark_connect import own_server
    from tests_common.standalone import running_standalone

    shutil.rmtree(work, ignore_errors=True)
    dags, fleet_dir, home = work / "dags", work / "fleet", work / "airflow"
    for folder in (dags, fleet_dir, home):
        folder.mkdir(parents=True)
    shutil.copy(REPO / "bench" / "fleet_dags.py", dags / "fleet_dags.py")
    settings = {"AIRFLOW__CORE__DAGS_FOLDER": str(dags), "ARETL_FLEET_N": str(n), "ARETL_FLEET_NOOP_N": str(n),
                "ARETL_FLEET_DIR": str(fleet_dir), "AIRFLOW__REVERSE_ETL__POOL": POOL}
    dag_ids, noop_ids = [f"fleet_{i:02d}" for i in range(n)], [f"noop_{i:02d}" for i in range(n)]
    with ExitStack() as stack:
        settings["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = _metadata_database(stack)
        server = stack.enter_context(own_server())
        instance = stack.enter_context(running_standalone(home, {"spark_default": server.airflow_connection()},
                                                          settings))
        instance.cli("pools", "set", POOL, str(pool_slots), "Reverse-ETL Spark jobs (bench scenario 9)")
        for dag_id in itertools.chain(noop_ids, dag_ids):
            instance.wait_for_dag(dag_id)
            instance.unpause(dag_id)
        noop_wall, noop_states = _run_all(instance, noop_ids)
        with PoolWatch(instance) as pool:
            wall, states = _run_all(instance, dag_ids)
        fleet_rate, noop_rate = _per_min(n, wall), _per_min(n, noop_wall)
        figures = {"fleet_n": n, "fleet_wall_s": round(wall, 1), "fleet_pipeline_dates_per_min": fleet_rate,
                   "fleet_noop_wall_s": round(noop_wall, 1), "fleet_noop_pipeline_dates_per_min": noop_rate,
                   "fleet_vs_noop": round(noop_rate / fleet_rate, 2),
                   "fleet_pool_slots": pool_slots, "fleet_pool_max_running": pool.max_running,
                   "fleet_pool_overrun": pool.max_running - pool_slots, "fleet_pool_max_waiting": pool.max_waiting,
                   **_task_figures(instance, dag_ids), "fleet_correct": _correct(fleet_dir, dag_ids)}
        return {"figures": figures, "run_states": states, "noop_run_states": noop_states,
                "correct": {"fleet_correct": figures["fleet_correct"]}}
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="pipelines (default 20; 50 for a bigger machine)")
    parser.add_argument("--pool-slots", type=int, default=POOL_SLOTS,
                        help=f"slots of the operators' pool (default {POOL_SLOTS}: the server's 2 cores + 1)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--record", action="store_true",
                        help="also merge the result into bench/results/latest.json as scenarios['9']")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    load = [round(x, 1) for x in os.getloadavg()]
    result = measure(out.parent / "fleet", args.n, args.pool_slots)
    result["load_avg"] = {"start": load, "end": [round(x, 1) for x in os.getloadavg()]}
    out.write_text(json.dumps(result, indent=2))
    if args.record:
        record(result, "9")
    print(json.dumps(result["figures"], indent=2))
    figures = result["figures"]
    return 0 if figures["fleet_correct"] and not figures["fleet_failed_tasks"] and not figures["fleet_retries"] else 1


if __name__ == "__main__":
    sys.exit(main())
