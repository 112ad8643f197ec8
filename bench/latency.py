"""Scenario 7, latency: the 1k-row pipeline Snapshot -> Diff -> Sink(sqlite) through Airflow's
``dag.test`` for one logical date in both execution modes, and each job's time in a warm session.

- ``connect_dag_wall_s``: the DAG with the ``spark_default`` connection of type ``spark_connect``,
  pointing at a local Spark Connect server this script starts (``scripts/services/spark_connect.sh``;
  the server start is not in the figure, each job's session creation is).
- ``submit_dag_wall_s``: the same DAG with spark-submit (no connection: the default).
- ``warm_snapshot_s`` / ``warm_diff_s`` / ``warm_sync_s``: after the Connect DAG run, the same three
  jobs (the specs the operators wrote) in one already-open Spark Connect session — the warm path a
  user gets from a running server — for further logical dates whose source changes some rows, so the
  diff and the sync move real changes (the sync in ``mirror`` mode, so deletes reach the destination);
  the median of the first ``WARM_FIRST`` of them (dates 2-4, as since issue 11).
- ``warm_server_snapshot_s`` / ``warm_server_diff_s`` / ``warm_server_sync_s`` (issue 36): the median of
  dates 3-6, the server's steady state once every plan of the three jobs has run once.
- ``submit_noop_s``: a spark-submit that only starts a Delta session (scenario 5's reference). The
  machines change speed 2-3x from day to day, so the goals are ratios to it (``s7.*_vs_noop``).

After every run the SQLite destination must hold exactly the rows of the snapshot's source version
(``correct``); a mismatch is a WRONG RESULT in the table and voids the figure.

Each mode runs in its own child process (``--mode``): Airflow reads AIRFLOW_HOME at import time, and
each mode gets a fresh Airflow database, warehouse and destination. ``python -m bench.latency
--out FILE`` runs the whole scenario; ``--record`` also merges it into ``bench/results/latest.json``
as ``scenarios["7"]`` of every repetition, keeping the other scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path

from bench.harness import REPO, per_noop, record, verdicts

SERVER = REPO / "scripts" / "services" / "spark_connect.sh"
WARM_DATES = 5  # logical dates 2-6, after the DAG's date 1
WARM_FIRST = 3  # warm_*_s: dates 2-4; warm_server_*_s: dates 3-6
# 2% updates, 1% inserts, 1% deletes per warm logical date: 40 changed rows of 1k
WARM_MUTATION = (0.02, 0.01, 0.01)

GOALS = {  # figure -> (goal text, predicate), from issue 25 (issue 11's were 20, 60, 3, 2, 2 s)
    "connect_dag_wall_s": ("<= 10 s", lambda v: v <= 10),
    "submit_dag_wall_s": ("<= 40 s", lambda v: v <= 40),
    "warm_snapshot_s": ("<= 1.5 s", lambda v: v <= 1.5),
    "warm_diff_s": ("<= 1 s", lambda v: v <= 1),
    "warm_sync_s": ("<= 1 s", lambda v: v <= 1),
    # issue 36: ratios to submit_noop_s of the same run, which the machine's speed does not move
    "s7.connect_dag_vs_noop": ("<= 1.2x submit_noop_s", lambda r: r <= 1.2),
    "s7.warm_server_snapshot_vs_noop": ("<= 0.2x submit_noop_s", lambda r: r <= 0.2),
    "s7.warm_server_diff_vs_noop": ("<= 0.08x submit_noop_s", lambda r: r <= 0.08),
    "s7.warm_server_sync_vs_noop": ("<= 0.08x submit_noop_s", lambda r: r <= 0.08),
}


# ---------------------------------------------------------------- source data (pyarrow, 1k rows)
# bench.data makes the harness's data with DuckDB; this scenario needs only 1k rows and runs where the
# bench extra is not installed, so it builds rows of the same 16 columns in Python with the same
# arithmetic on the id (deterministic, no random generator).

CITIES = ["London", "Paris", "Berlin", "Madrid", "Rome", "Oslo", "Lisbon", "Vienna"]
COUNTRIES = ["GB", "FR", "DE", "ES", "IT", "NO", "PT", "AT"]


def _row(i: int, seed: int, version: int) -> dict:
    from datetime import datetime, timedelta
    from decimal import Decimal

    h = (i * 2654435761 + seed) % 1000003
    return {"id": i, "account_id": h % 50000, "name": f"name-{h}", "email": f"user{i}@example.com",
            "city": CITIES[h % 8], "country": COUNTRIES[h % 8],
            "tier": ["bronze", "silver", "gold", "platinum"][(h + version) % 4],
            "status": ["active", "dormant", "churned"][(h + version) % 3],
            "score": h % 10000 / 100.0 + version, "balance": Decimal(h * 7 % 100000000) / 100 + version,
            "quantity": h % 500 + version, "discount": h % 30 / 100.0, "is_active": h % 5 != 0,
            "created_at": datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=h % 31536000),
            "updated_at": datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=h % 86400 + version * 86400),
            "note": None if h % 3 == 0 else f"note {h % 997}"}


def _schema():
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("account_id", pa.int64()), ("name", pa.string()),
                      ("email", pa.string()), ("city", pa.string()), ("country", pa.string()),
                      ("tier", pa.string()), ("status", pa.string()), ("score", pa.float64()),
                      ("balance", pa.decimal128(18, 2)), ("quantity", pa.int32()), ("discount", pa.float64()),
                      ("is_active", pa.bool_()), ("created_at", pa.timestamp("us", tz="UTC")),
                      ("updated_at", pa.timestamp("us", tz="UTC")), ("note", pa.string())])


def write_source(rows: list[dict], path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows, schema=_schema()), path)


def read_source(path: str) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def mutate(rows: list[dict], seed: int, update: float, insert: float, delete: float) -> tuple[list[dict], dict]:
    """The next version: update / delete the rows a hash of the id picks, append new ids after the
    largest one; and the intended change counts."""
    def pick(i: int) -> float:
        return (i * 40503 + seed * 7919) % 1000000 / 1000000.0

    top = max(r["id"] for r in rows)
    kept = [r if pick(r["id"]) >= update else _row(r["id"], seed, 1)
            for r in rows if not update <= pick(r["id"]) < update + delete]
    added = [_row(i, seed, 0) for i in range(top + 1, top + 1 + int(len(rows) * insert))]
    counts = {"update": sum(pick(r["id"]) < update for r in rows), "insert": len(added),
              "delete": len(rows) - len(kept)}
    return kept + added, counts


def destination_matches(database: Path, source: str) -> bool:
    """Whether the SQLite table holds exactly the rows of the Parquet ``source`` (the snapshot's
    input). Values are compared as text after the sink's conversions: numbers, booleans and decimals
    as 6-decimal floats, timestamps as UTC ``YYYY-MM-DD HH:MM:SS`` (the machine runs in UTC)."""
    def norm(value):
        if value is None:
            return None
        if hasattr(value, "astimezone"):
            return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        text = str(value)
        if len(text) >= 19 and text[4] == "-" and text[10] in "T ":  # an ISO timestamp stored as text
            return text[:10] + " " + text[11:19]
        try:  # numbers, booleans (0/1) and decimals (stored as text) alike
            return f"{float(value):.6f}"
        except ValueError:
            return text

    names = _schema().names
    columns = ", ".join(f'"{c}"' for c in names)
    with sqlite3.connect(database) as conn:
        sent = {tuple(map(norm, row)) for row in conn.execute(f"SELECT {columns} FROM contacts")}
    expected = {tuple(norm(row[c]) for c in names) for row in read_source(source)}
    return sent == expected


# ---------------------------------------------------------------- child: one execution mode


def job_specs(warehouse: Path) -> dict[str, dict]:
    """The specs the operators wrote for the DAG run's jobs (job name -> spec)."""
    return {json.loads(p.read_text())["job"]: json.loads(p.read_text())
            for p in sorted((warehouse / "_system" / "jobs").glob("*/spec.json"))}


def _run_dag(home: Path, source: str) -> dict:
    from airflow.utils.db import initdb

    from bench.orchestration import build_dag

    initdb()
    import pendulum

    dag = build_dag(home, source)
    started = time.perf_counter()
    run = dag.test(logical_date=pendulum.datetime(2026, 1, 1, tz="UTC"))
    wall = round(time.perf_counter() - started, 2)
    failed = {ti.task_id: str(ti.state) for ti in run.get_task_instances() if str(ti.state) != "success"}
    if failed:
        raise RuntimeError(f"DAG tasks did not succeed: {failed}")
    results = {json.loads(p.read_text())["job"]: json.loads(p.read_text())
               for p in (home / "warehouse" / "_system" / "jobs").glob("*/result.json")}
    return {"wall_s": wall, "job_s": {job: r["duration_s"] for job, r in results.items()},
            "correct": destination_matches(home / "crm.db", source)}


def _warm(url: str, home: Path, source: str) -> dict:
    """The three jobs again in one open Connect session, for WARM_DATES new logical dates."""
    from airflow_reverse_etl.hooks.spark_job import spark_jobs_archive
    from spark_jobs.contract import change_set_fields
    from spark_jobs.entry import run
    from spark_jobs.session import connect_session

    specs = job_specs(home / "warehouse")
    times: dict[str, list[float]] = {"snapshot": [], "diff": [], "sync": []}
    correct, changed = [], []
    rows = read_source(source)
    with connect_session(url) as spark:
        spark.addArtifacts(spark_jobs_archive(), pyfile=True)
        spark.range(1).count()  # the session is warm: artifacts uploaded, first plan compiled

        def timed(job: str, spec: dict) -> dict:
            started = time.perf_counter()
            result = run(spark, spec)
            times[job].append(round(time.perf_counter() - started, 3))
            if result["status"] != "success":
                raise RuntimeError(f"warm {job} failed: {result['error']}")
            return result

        for k in range(WARM_DATES):
            version = str(home / f"source-v{k + 2}.parquet")
            rows, counts = mutate(rows, 100 + k, *WARM_MUTATION)
            write_source(rows, version)
            day = f"2026-01-{k + 2:02d}T00:00:00+00:00"  # as the operators write it
            snap = timed("snapshot", {**specs["snapshot"], "source": {"format": "parquet", "path": version},
                                      "logical_date": day, "run_id": f"warm-{day}"})
            diff = timed("diff", {**specs["diff"], "to_version": snap["version"],
                                  "logical_date": day, "run_id": f"warm-{day}"})
            # mirror, not the DAG's upsert: these dates delete rows, and the destination must
            # equal the snapshot afterwards (the DAG's first date only inserts, where both agree)
            timed("sync", {**specs["sync"], "mode": "mirror", "logical_date": day, "run_id": f"warm-{day}",
                           **change_set_fields(diff)})
            changed.append(diff["counts"])
            correct.append(diff["counts"] == counts and destination_matches(home / "crm.db", version))
    return {"times": times, "changed": changed, "correct": all(correct)}


def child(mode: str, url: str | None, out: Path) -> None:
    from bench.harness import airflow_environment, submit_noop
    from bench.orchestration import ROWS

    home = Path(tempfile.mkdtemp(prefix=f"aretl-bench-latency-{mode}-"))
    airflow_environment(home)
    if mode == "connect":
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
            {"conn_type": "spark_connect", "host": url.rsplit(":", 1)[0], "port": int(url.rsplit(":", 1)[1])})
    source = str(home / "source.parquet")
    write_source([_row(i, 42, 0) for i in range(1, ROWS + 1)], source)
    report = {"dag": _run_dag(home, source)}
    out.write_text(json.dumps(report))  # the DAG's figure survives a failing tail
    if mode == "connect":
        report["warm"] = _warm(url, home, source)
    else:
        report["submit_noop_s"] = submit_noop(home, jars=True)
    out.write_text(json.dumps(report, indent=2))


# ---------------------------------------------------------------- parent: the scenario


def _server(command: str, port: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "ARETL_TEST_SPARK_CONNECT_PORT": str(port),
           # sized like the test server and the bench's local[2] sessions (the machine has 2 cores)
           "ARETL_SPARK_CONNECT_MASTER": "local[2]",
           "ARETL_SPARK_CONNECT_CONF": "spark.sql.shuffle.partitions=4 spark.default.parallelism=4 "
                                       "spark.sql.session.timeZone=UTC spark.databricks.delta.snapshotPartitions=2"}
    return subprocess.run(["bash", str(SERVER), command], env=env, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=300)


def _run_child(mode: str, url: str | None, work: Path) -> dict:
    out = work / f"latency-{mode}.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "bench.latency", "--mode", mode, "--out", str(out)]
    subprocess.run(argv + (["--url", url] if url else []), check=True, cwd=REPO)
    return json.loads(out.read_text())


def measure(work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = _server("start", port)
    if started.returncode != 0:
        _server("stop", port)
        raise RuntimeError(f"could not start the Spark Connect server:\n{started.stderr}")
    try:
        connect = _run_child("connect", started.stdout.strip(), work)
    finally:
        _server("stop", port)
    submit = _run_child("submit", None, work)
    warm = connect["warm"]
    figures = {"connect_dag_wall_s": connect["dag"]["wall_s"], "submit_dag_wall_s": submit["dag"]["wall_s"]}
    figures.update({f"warm_{job}_s": statistics.median(t[:WARM_FIRST]) for job, t in warm["times"].items()})
    figures.update({f"warm_server_{job}_s": statistics.median(t[1:]) for job, t in warm["times"].items()})
    noop = figures["submit_noop_s"] = submit["submit_noop_s"]
    for mode, report in (("connect", connect), ("submit", submit)):
        figures.update({f"{mode}_{job}_job_s": s for job, s in sorted(report["dag"]["job_s"].items())})
    figures.update({f"warm_{job}_runs_s": t for job, t in warm["times"].items()})
    figures["warm_changes"] = warm["changed"]
    ratios = {"s7.connect_dag_vs_noop": per_noop(figures["connect_dag_wall_s"], noop),
              "s7.submit_dag_vs_noop": per_noop(figures["submit_dag_wall_s"], noop),
              **{f"s7.warm_server_{job}_vs_noop": per_noop(figures[f"warm_server_{job}_s"], noop)
                 for job in warm["times"]}}
    return {"figures": figures, "ratios": ratios,
            "correct": {"connect_dag": connect["dag"]["correct"], "submit_dag": submit["dag"]["correct"],
                        "warm_runs": warm["correct"]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=("connect", "submit"), help="(internal) run one mode in this process")
    parser.add_argument("--url", help="(internal) the Spark Connect server of --mode connect")
    parser.add_argument("--record", action="store_true",
                        help="also merge the result into bench/results/latest.json as scenarios['7']")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.mode:
        child(args.mode, args.url, out)
        return 0
    load = [round(x, 1) for x in os.getloadavg()]
    result = measure(out.parent)
    result["figures"]["load_avg_at_start"] = load
    out.write_text(json.dumps(result, indent=2))
    if args.record:
        record(result, "7")
    print(json.dumps(result, indent=2))
    print("\n".join(verdicts(result, GOALS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
