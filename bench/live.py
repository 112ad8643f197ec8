"""Scenario 8, live-sync latency: how fresh the destination is when a pipeline runs on its source's
commits (``dags/live_orders.py``: an ``AssetWatcher`` with ``DeltaCommitTrigger`` -> Snapshot (Change
Data Feed fast path) -> Diff -> Sink(SQLite, mirror)).

A real ``airflow standalone`` (scheduler, triggerer, LocalExecutor; :func:`tests_common.standalone.running_standalone`
with the settings below) runs the DAG; every job is a client of a Spark Connect server of its own
(:func:`tests_common.spark_connect.own_server`). Once the first run has carried the initial table, a
writer (delta-rs, in this process) commits ``CHANGED`` updated rows to the CDF-enabled source every
``EVERY`` seconds for ``DURATION`` seconds; commit *n* sets ``batch = n`` on its own range of keys, so
an observer polling the SQLite table sees the moment all of its rows arrived. Figures:

- ``live_p50_s`` / ``live_p95_s`` / ``live_max_s``: time from a commit's end to its rows in SQLite;
- ``live_runs``: DAG runs during the writing and until the last commit arrived (the first run excluded);
- ``live_lost``: commits whose rows never arrived (within ``SETTLE`` seconds of the last commit);
  ``live_duplicated``: destination rows beyond one per key; ``correct``: the destination equals the
  source at the end;
- where the seconds go, medians over the runs (``breakdown``): ``watch_s`` (commit -> asset event:
  the trigger's poll), ``schedule_s`` (asset event -> the run's first task starts, when no run was
  in progress), per task ``<task>_start_s`` (the previous task's end, or the run's start, to this
  one's start) and ``<task>_s`` (its duration), and each job's own ``<job>_job_s`` (result.json).

``python -m bench.live --out FILE [--record]`` (``--record`` merges it into
``bench/results/latest.json`` as ``scenarios["8"]``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DAG_ID = "live_orders"
ROWS, CHANGED, EVERY, DURATION, SETTLE = 2000, 100, 10.0, 180.0, 120.0
POLL_INTERVAL = 1.0
#: The benchmark's own instance: the scheduler looks for work every half second instead of every
#: second and heartbeats every second; the watcher polls every POLL_INTERVAL.
SETTINGS = {
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
    "ARETL_LIVE_POLL_INTERVAL": str(POLL_INTERVAL),
}
GOALS = {  # figure -> (goal text, predicate), from issue 26
    "live_p50_s": ("<= 20 s", lambda v: v <= 20),
    "live_p95_s": ("<= 40 s", lambda v: v <= 40),
    "live_lost": ("0", lambda v: v == 0),
    "live_duplicated": ("0", lambda v: v == 0),
}


# ---------------------------------------------------------------- the source and its writer (delta-rs)

def create_source(path: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(path, pa.table({"order_id": pa.array(range(ROWS), pa.int64()),
                                    "batch": pa.array([0] * ROWS, pa.int64()),
                                    "amount": pa.array([float(i) for i in range(ROWS)])}),
                    configuration={"delta.enableChangeDataFeed": "true"})


def commit_batch(path: str, batch: int) -> float:
    """Commit ``batch``: its own ``CHANGED`` keys get ``batch`` and a new amount. Returns when it
    ended (epoch seconds)."""
    from deltalake import DeltaTable

    low = (batch - 1) * CHANGED % ROWS
    DeltaTable(path).update(predicate=f"order_id >= {low} AND order_id < {low + CHANGED}",
                            updates={"batch": str(batch), "amount": "amount + 1"})
    return time.time()


class Observer(threading.Thread):
    """Polls the destination; ``seen[batch]`` is when all rows of ``batch`` were first there."""

    def __init__(self, database: Path) -> None:
        super().__init__(daemon=True)
        self.database, self.seen, self.stopped = database, {}, threading.Event()

    def counts(self) -> dict[int, int]:
        try:
            with sqlite3.connect(self.database, timeout=1) as conn:
                return dict(conn.execute("SELECT batch, count(*) FROM crm_orders GROUP BY batch").fetchall())
        except sqlite3.Error:  # not created yet, or locked by the sink's transaction: look again
            return {}

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            now = time.time()
            for batch, count in self.counts().items():
                if count >= CHANGED and batch not in self.seen:
                    self.seen[batch] = now


# ---------------------------------------------------------------- Airflow's view of the runs

def _epoch(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    """What the trigger's event carried (Airflow keeps it as the asset event's ``extra.payload``)."""
    return (event.get("extra") or {}).get("payload") or {}


def run_timeline(instance: Any, run: dict[str, Any]) -> dict[str, Any]:
    """One run's asset events (time, source version) and task start/end, as epoch seconds."""
    events = instance.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents")["asset_events"]
    tasks = instance.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]
    return {"run_id": run["dag_run_id"], "start": _epoch(run.get("start_date")), "state": run["state"],
            "events": [{"at": _epoch(e["timestamp"]), "version": _payload(e).get("source_version")} for e in events],
            "tasks": sorted(({"task": t["task_id"], "start": _epoch(t["start_date"]), "end": _epoch(t["end_date"])}
                             for t in tasks), key=lambda t: t["start"] or 0)}


def _end_of(line: dict[str, Any], task: str) -> float:
    return next((t["end"] for t in line["tasks"] if t["task"] == task and t["end"]), 0.0)


def breakdown(timelines: list[dict[str, Any]], commits: dict[int, float], versions: dict[int, int],
              jobs: dict[str, list[float]]) -> dict[str, float]:
    """Medians of where a run's seconds go (see the module docstring). ``watch_s`` counts from the
    commit, or from the end of the previous run's snapshot when the commit came while that run had
    yet to record (the watcher fires once that run's claim is carried)."""
    parts: dict[str, list[float]] = {"watch_s": [], "schedule_s": []}
    previous_end = previous_snapshot = 0.0
    for line in timelines:
        first = min((e["at"] for e in line["events"]), default=None)
        for event in line["events"]:
            batch = versions.get(event["version"])
            if batch in commits:
                parts["watch_s"].append(event["at"] - max(commits[batch], previous_snapshot))
        tasks = [t for t in line["tasks"] if t["start"] and t["end"]]
        if first and tasks and first > previous_end:  # not waiting for the run before it
            parts["schedule_s"].append(tasks[0]["start"] - first)
        mark = line["start"]
        for task in tasks:
            parts.setdefault(f"{task['task']}_start_s", []).append(task["start"] - (mark or task["start"]))
            parts.setdefault(f"{task['task']}_s", []).append(task["end"] - task["start"])
            mark = task["end"]
        previous_end = max([previous_end] + [t["end"] for t in tasks])
        previous_snapshot = _end_of(line, "snapshot_orders") or previous_snapshot
    parts.update({f"{job}_job_s": seconds for job, seconds in jobs.items()})
    return {name: round(statistics.median(values), 2) for name, values in parts.items() if values}


def job_durations(warehouse: Path) -> dict[str, list[float]]:
    durations: dict[str, list[float]] = {}
    for result in sorted((warehouse / "_system" / "jobs").glob("*/result.json")):
        report = json.loads(result.read_text())
        durations.setdefault(report["job"], []).append(float(report["duration_s"]))
    return durations


# ---------------------------------------------------------------- a run that finds nothing new

NOOP_REPEATS = 3


def noop_runs(url: str, warehouse: Path) -> dict[str, float]:
    """What a run that finds nothing new costs warm over Connect (medians of ``NOOP_REPEATS``): the
    three jobs of the DAG's last run again, in one open session, for new run instants while the source
    is idle — the snapshot records its empty commit, the diff and the sync move nothing."""
    from airflow_reverse_etl.hooks.spark_job import spark_jobs_archive
    from bench.latency import job_specs
    from spark_jobs.contract import change_set_fields
    from spark_jobs.entry import run
    from spark_jobs.session import connect_session

    specs = job_specs(warehouse)
    times: dict[str, list[float]] = {"snapshot": [], "diff": [], "sync": []}
    with connect_session(url) as spark:
        spark.addArtifacts(spark_jobs_archive(), pyfile=True)
        spark.range(1).count()

        def timed(job: str, spec: dict[str, Any]) -> dict[str, Any]:
            started = time.perf_counter()
            result = run(spark, spec)
            times[job].append(time.perf_counter() - started)
            if result["status"] != "success":
                raise RuntimeError(f"no-op {job} failed: {result['error']}")
            return result

        for k in range(NOOP_REPEATS):
            when = {"logical_date": datetime.now(UTC).isoformat(), "run_id": f"noop-{k}"}
            snap = timed("snapshot", {**specs["snapshot"], **when})
            diff = timed("diff", {**specs["diff"], "to_version": snap["version"], **when})
            if any(diff["counts"].values()):
                raise RuntimeError(f"a no-op run found changes: {diff['counts']}")
            timed("sync", {**specs["sync"], **when, **change_set_fields(diff)})
    medians = {f"live_noop_{job}_s": round(statistics.median(t), 2) for job, t in times.items()}
    medians["live_noop_run_s"] = round(sum(medians.values()), 2)
    return medians


# ---------------------------------------------------------------- the scenario

def destination_state(database: Path) -> tuple[dict[int, tuple[int, float]], int]:
    """The destination's rows by key, and how many rows it holds beyond one per key."""
    with sqlite3.connect(database) as conn:
        rows = conn.execute("SELECT order_id, batch, amount FROM crm_orders").fetchall()
    return {int(k): (int(b), float(a)) for k, b, a in rows}, len(rows) - len({r[0] for r in rows})


def source_state(path: str) -> dict[int, tuple[int, float]]:
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table().to_pylist()
    return {int(r["order_id"]): (int(r["batch"]), float(r["amount"])) for r in table}


def wait_until(predicate: Any, timeout: float, what: str, instance: Any) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout:.0f}s:\n{instance.log_tail()}")
        time.sleep(0.5)


def write_commits(source: str, duration: float, every: float) -> tuple[dict[int, float], dict[int, int]]:
    """Commit a batch every ``every`` seconds for ``duration``; batch -> end time, version -> batch."""
    from deltalake import DeltaTable

    commits: dict[int, float] = {}
    versions: dict[int, int] = {}
    started = time.monotonic()
    for batch in range(1, int(duration // every) + 1):
        time.sleep(max(0.0, started + (batch - 1) * every - time.monotonic()))
        commits[batch] = commit_batch(source, batch)
        versions[DeltaTable(source).version()] = batch
    return commits, versions


def measure(work: Path, duration: float, every: float) -> dict[str, Any]:
    from tests_common.spark_connect import own_server
    from tests_common.standalone import running_standalone

    work.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        server = stack.enter_context(own_server())
        home = work / "airflow"
        home.mkdir(exist_ok=True)
        source, database = str(work / "source" / "orders"), work / "crm.db"
        settings = {**SETTINGS, "ARETL_LIVE_SOURCE": source, "ARETL_LIVE_CRM": str(database)}
        instance = stack.enter_context(running_standalone(home, {"spark_default": server.airflow_connection()},
                                                          settings))
        create_source(source)
        instance.wait_for_dag(DAG_ID)
        instance.unpause(DAG_ID)
        instance.reparse(DAG_ID)
        observer = Observer(database)
        observer.start()
        wait_until(lambda: 0 in observer.seen, 300, "the initial table in the destination", instance)
        runs_before = len(instance.dag_runs(DAG_ID))
        commits, versions = write_commits(source, duration, every)
        wait_until(lambda: all(b in observer.seen for b in commits), SETTLE, "every commit in the destination",
                   instance)
        observer.stopped.set()
        result = report(instance, source, database, observer, commits, versions, runs_before)
        result["figures"].update(noop_runs(server.url, instance.warehouse))
        return result
    raise AssertionError("unreachable")


def report(instance: Any, source: str, database: Path, observer: Observer, commits: dict[int, float],
           versions: dict[int, int], runs_before: int) -> dict[str, Any]:
    runs = sorted(instance.dag_runs(DAG_ID), key=lambda r: r.get("run_after") or "")
    latencies = sorted(observer.seen[b] - t for b, t in commits.items() if b in observer.seen)
    rows, duplicated = destination_state(database)
    timelines = [run_timeline(instance, run) for run in runs[1:]]
    figures = {
        "live_p50_s": round(statistics.median(latencies), 2),
        "live_p95_s": round(latencies[math.ceil(0.95 * len(latencies)) - 1], 2),  # nearest rank
        "live_max_s": round(latencies[-1], 2),
        "live_runs": len(runs) - runs_before,
        "live_lost": sum(1 for b in commits if b not in observer.seen),
        "live_duplicated": duplicated,
        "live_commits": len(commits),
        "live_poll_interval_s": POLL_INTERVAL,
    }
    return {"figures": figures,
            "breakdown": breakdown(timelines, commits, versions, job_durations(instance.warehouse)),
            "latencies_s": [round(v, 2) for v in latencies],
            "commits": commits, "versions": versions, "timelines": timelines,
            "run_states": [r["state"] for r in runs],
            "correct": {"destination_equals_source": rows == source_state(source)}}


def main() -> int:
    from bench.harness import record, verdicts

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--duration", type=float, default=DURATION, help="seconds of writing (default 180)")
    parser.add_argument("--every", type=float, default=EVERY, help="seconds between commits (default 10)")
    parser.add_argument("--record", action="store_true",
                        help="also merge the result into bench/results/latest.json as scenarios['8']")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    load = [round(x, 1) for x in os.getloadavg()]
    result = measure(out.parent / "live", args.duration, args.every)
    result["load_avg"] = {"start": load, "end": [round(x, 1) for x in os.getloadavg()]}
    out.write_text(json.dumps(result, indent=2))
    if args.record:
        record(result, "8")
    print(json.dumps(result, indent=2))
    print("\n".join(verdicts(result, GOALS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
