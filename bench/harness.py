"""What every benchmark scenario shares, in one public module: where things are, the one in-process
Spark session of a run, timing, running a job, and recording a scenario's result into the table.

Scenario modules (``bench.bench_sinks``, ``bench.bench_widen``, ``bench.latency``, ``bench.live``,
``bench.fleet``, ``bench.connect_leak``, ``bench.orchestration``) import from here and from
``tests_common`` (the support package the tests share), never from each other's private names nor
from :mod:`bench.run`, which imports them all: so the imports go one way.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
JARS_DIR = REPO / ".cache" / "jars"
RESULTS = REPO / "bench" / "results"
LATEST = RESULTS / "latest.json"

#: figure or ratio name -> (goal text, predicate on its value)
Goals = dict[str, tuple[str, Callable[[Any], bool]]]


def session(rows: int, master: str = "local[2]") -> Any:
    """The one session of the run (local[2] unless ``master``), with the Delta jars of ``.cache/jars``."""
    from spark_jobs.session import build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session("aretl-bench", master=master, jars_dir=str(JARS_DIR), conf={
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Delta log replay: its default of 50 tasks per table read is the fixed cost that dominated
        # every job at 100k rows (each history or table lookup replays the log)
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.driver.memory": "4g",
        # sized for the data: ~1 partition per 125k rows, at least the two cores' worth
        "spark.sql.shuffle.partitions": str(max(4, rows // 125_000)),
    })
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return round(time.perf_counter() - started, 3), value


def job(spark: Any, job_name: str, warehouse: str, **spec: Any) -> dict[str, Any]:
    """Run a job in ``spark`` as the entry point would; raise if it failed."""
    from spark_jobs.entry import run

    result: dict[str, Any] = run(spark, {"job": job_name, "warehouse": warehouse, **spec})
    if result["status"] != "success":
        raise RuntimeError(f"{job_name} failed: {result['error']}")
    return result


def start_consumer(spark: Any, warehouse: str, table: str, version: int) -> None:
    """Mark ``version`` as delivered, as a sync would, so the timed diff reads only the next change."""
    from spark_jobs.contract import Warehouse
    from spark_jobs.state import consumers

    consumers.commit(Warehouse(warehouse), table, "bench", version, "bench-setup")


def record(result: dict[str, Any], scenario: str, path: Path = LATEST) -> None:
    """Put ``result`` into the table at ``path`` as ``scenario`` of every repetition, keeping the
    other scenarios (a scenario run alone with ``--record``)."""
    report = json.loads(path.read_text())
    for run in report["runs"]:
        run["scenarios"][scenario] = result
    path.write_text(json.dumps(report, indent=2, default=str))


def verdicts(result: dict[str, Any], goals: Goals) -> list[str]:
    """One line per goal on the result's figures, and one per wrong result."""
    lines = [f"{name}: {result['figures'][name]} (goal {goal}): {'met' if ok(result['figures'][name]) else 'NOT met'}"
             for name, (goal, ok) in goals.items() if name in result["figures"]]
    lines += [f"WRONG RESULT: {name}" for name, ok in result["correct"].items() if not ok]
    return lines
