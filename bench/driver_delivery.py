"""Scenario 12: where a small change set is delivered faster — from the job's driver or from the
executors — measured to pick ``delivery.driver_max_records``'s default (issue 36).

For each change-set size, a change set of that many inserts (its own snapshot table, diffed once) is
synced repeatedly (``commit: false``, so each sync sends the same change set) with
``driver_max_records`` above the size (the driver delivers) and 0 (the executors do), into the
loopback HTTP test server (the JSON path every REST destination takes) and into SQLite (the embedded
default; a single writer), with the delivery settings a user gets by default. The figure is the sync
job's wall time as the caller sees it, median of ``--repeat``; both sides interleaved so that load
drifts hit them alike. Two sessions: the in-process local[2] session (what spark-submit runs) and a
session of a local Spark Connect server (the warm path), where the driver is the client process.

    python -m bench.driver_delivery --out .cache/bench/driver_delivery.json [--record]

``--record`` merges the result into ``bench/results/latest.json`` as ``scenarios["12"]`` (as scenario 7
does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.bench_sinks import REPO, sync  # sets the environment the Spark workers need

SIZES = (10, 100, 1_000, 3_000, 10_000, 30_000)
SIDES = {"driver": 10**9, "executors": 0}


def change_sets(spark, warehouse: str, sizes: tuple[int, ...]) -> dict[int, dict]:
    """A change set of N inserts per size: its own snapshot table of N rows, diffed for one consumer."""
    from spark_jobs.entry import run

    sets = {}
    for size in sizes:
        source = f"{warehouse}/../source-{size}"
        spark.range(size).selectExpr("id", "concat('name-', id) AS name", "concat('c', id, '@example.com') AS email",
                                     "concat('city-', id % 97) AS city", "id * 0.5 AS score") \
            .coalesce(1).write.mode("overwrite").parquet(source)
        for job, spec in (("snapshot", {"name": f"bench{size}", "primary_key": ["id"], "run_id": f"b{size}",
                                        "logical_date": "2026-01-01T00:00:00+00:00",
                                        "source": {"format": "parquet", "path": source}}),
                          ("diff", {"table": f"snapshots/bench{size}", "consumer": "bench"})):
            result = run(spark, {"job": job, "warehouse": warehouse, **spec})
            assert result["status"] == "success", result
        sets[size] = result
    return sets


def measure(spark, work: Path, sizes: tuple[int, ...], repeat: int) -> dict:
    from tests_common.webhook_receiver import HttpDestination

    warehouse = str(work / "warehouse")
    sets = change_sets(spark, warehouse, sizes)
    figures: dict[str, dict[str, dict[str, float]]] = {}
    with HttpDestination(history=False, keep_rows=False) as server:
        destinations = {"http": {"type": "http", "url": server.url},
                        "sqlite": {"type": "sqlite", "database": str(work / "crm.db"), "table": "t"}}
        for name, destination in destinations.items():
            for size in sizes:
                times: dict[str, list[float]] = {side: [] for side in SIDES}
                for k in range(repeat + 1):  # the first round warms the plan caches up: not counted
                    for side, threshold in SIDES.items():
                        seconds, result = sync(spark, warehouse, sets[size], destination,
                                               delivery={"driver_max_records": threshold})
                        assert result["delivered_from"] == side and result["stats"]["sent"] == size, result
                        if k:
                            times[side].append(seconds)
                figures.setdefault(name, {})[str(size)] = {side: round(statistics.median(t), 3)
                                                           for side, t in times.items()}
                print(f"  {name:<7} {size:>7,}: " + "  ".join(f"{side} {v:.3f}s" for side, v in
                                                               figures[name][str(size)].items()), flush=True)
    return figures


def crossover(figures: dict[str, dict[str, dict[str, float]]]) -> dict[str, int | None]:
    """Per destination: the largest size at which the driver was at least as fast, below the first
    size where the executors were faster (None: the executors were faster at every size)."""
    found: dict[str, int | None] = {}
    for name, by_size in figures.items():
        best = None
        for size, times in sorted(by_size.items(), key=lambda kv: int(kv[0])):
            if times["driver"] > times["executors"]:
                break
            best = int(size)
        found[name] = best
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / ".cache" / "bench" / "driver_delivery.json"))
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))

    from airflow_reverse_etl.hooks.spark_job import spark_jobs_archive
    from bench.harness import session
    from spark_jobs.session import connect_session
    from tests_common.spark_connect import own_server

    report: dict = {"measured": datetime.now(UTC).isoformat(timespec="seconds"), "sizes": list(sizes),
                    "repeat": args.repeat, "load": [round(x, 1) for x in os.getloadavg()]}
    work = Path(tempfile.mkdtemp(prefix="aretl-bench-driver-"))
    print("in-process local[2] session:", flush=True)
    spark = session(max(sizes))
    try:
        report["in_process"] = measure(spark, work / "in_process", sizes, args.repeat)
    finally:
        spark.stop()
    print("Spark Connect session:", flush=True)
    with own_server() as server, connect_session(server.url) as spark:
        spark.addArtifacts(spark_jobs_archive(), pyfile=True)
        report["connect"] = measure(spark, work / "connect", sizes, args.repeat)
    report["crossover"] = {mode: crossover(report[mode]) for mode in ("in_process", "connect")}
    print(json.dumps(report["crossover"]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    if args.record:
        from bench.harness import record

        record(report, "12")


if __name__ == "__main__":
    main()
