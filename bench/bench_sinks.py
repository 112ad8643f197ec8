"""Benchmark: the production sinks against references measured in the same run (scenario 4).

    .venv/bin/python bench/bench_sinks.py [--rows 1000000] [--only postgres,http,kafka]

or from the harness: ``python -m bench.run --scenarios 4`` calls :func:`sinks`.

The source is the harness's data (``bench/data.py``: N rows, 16 columns — ints, text, doubles, a
decimal, a boolean, two timestamps, a third of one column null). One change set of N inserts is
built once with the snapshot and diff jobs; then each destination is timed on its own:

* postgres: the sync job into the real test Postgres (``scripts/services/postgres.sh``), against a
  raw ``COPY`` of the same rows (the same CSV the sink writes, made before the clock starts, streamed
  by one psycopg2 connection into a table of the same shape and primary key) —
  goal: the sink at >= 50% of raw COPY's rows/s;
* http: the sync job against the loopback HTTP server of the tests (``tests_common/webhook_receiver.py``,
  which parses every batch and applies it record by record), concurrency 4, batches of 1,000 —
  goal >= 20k records/s;
* kafka: the sync job into a 3-partition topic of the real test broker (``scripts/services/kafka.sh``)
  — goal >= 100k messages/s.

Two rates per sink, named apart:

* ``*_job_*`` — the whole sync job: planning (from the diff's counts), reading the change set, the
  Python workers, delivery, the run history; Spark's fixed costs included;
* ``*_delivery_*`` — the delivery phase only (the job's ``delivery_s``: reading the operations,
  sending, acknowledgements), which is what grows with N.

A destination whose service cannot start is skipped: its figures are None and ``<sink>_skipped``
says why.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

from bench.harness import REPO, Goals

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))

PG_PASSWORD_ENV = "ARETL_BENCH_PG_PASSWORD"
PG_COLUMNS = ("id bigint PRIMARY KEY, account_id bigint, name text, email text, city text, country text, tier text, "
              "status text, score double precision, balance numeric(18,2), quantity integer, "
              "discount double precision, is_active boolean, created_at timestamptz, updated_at timestamptz, "
              "note text")

GOALS: Goals = {  # issue 14's goals
    "s4.postgres_job_vs_copy": (">= 0.5 of raw COPY's rows/s (whole job)", lambda r: r >= 0.5),
    "s4.postgres_delivery_vs_copy": (">= 0.5 of raw COPY's rows/s (delivery)", lambda r: r >= 0.5),
    "s4.http_job_records_per_s": (">= 50k records/s (whole job)", lambda r: r >= 50_000),
    "s4.http_delivery_records_per_s": (">= 50k records/s (delivery)", lambda r: r >= 50_000),
    "s4.kafka_job_messages_per_s": (">= 150k messages/s (whole job)", lambda r: r >= 150_000),
    "s4.kafka_delivery_messages_per_s": (">= 150k messages/s (delivery)", lambda r: r >= 150_000),
}


def build_changes(spark, warehouse: str, source: str) -> dict:
    """Snapshot ``source`` (Parquet) and diff it for a fresh consumer: a change set of N inserts."""
    from spark_jobs.entry import run

    for job, spec in (("snapshot", {"name": "bench", "primary_key": ["id"], "logical_date": "2026-01-01T00:00:00+00:00",
                                    "run_id": "bench", "source": {"format": "parquet", "path": source}}),
                      ("diff", {"table": "snapshots/bench", "consumer": "bench"})):
        result = run(spark, {"job": job, "warehouse": warehouse, **spec})
        assert result["status"] == "success", result
    return result


def sync(spark, warehouse: str, changes: dict, destination: dict, **options) -> tuple[float, dict]:
    """Run the sync job (no consumer commit, so each sink gets the same change set); (seconds, result)."""
    from spark_jobs.entry import run

    from spark_jobs.contract import change_set_fields

    spec = {"job": "sync", "warehouse": warehouse, **change_set_fields(changes), "destination": destination,
            "commit": False, **options}
    started = time.perf_counter()
    result = run(spark, spec)
    seconds = time.perf_counter() - started
    assert result["status"] == "success", result
    return seconds, result


def _rates(name: str, unit: str, rows: int, job_s: float, result: dict) -> dict:
    delivery_s = result.get("delivery_s")
    return {f"{name}_job_s": round(job_s, 3), f"{name}_delivery_s": delivery_s,
            f"{name}_job_{unit}_per_s": round(rows / job_s),
            f"{name}_delivery_{unit}_per_s": round(rows / delivery_s) if delivery_s else None}


def bench_postgres(spark, warehouse: str, changes: dict, rows: int, source: str) -> dict:
    import psycopg2
    import pyarrow.parquet as pq

    from spark_jobs.sinks.postgres_copy import copy_csv
    from tests_common.services import start_postgres

    info, _ = start_postgres()
    os.environ[PG_PASSWORD_ENV] = info.password
    table = f"bench_{uuid.uuid4().hex[:8]}"
    destination = {"type": "postgres", "table": table, "create_table": False,
                   "connection": {"host": info.host, "port": info.port, "login": info.user, "schema": info.dbname},
                   "secrets_env": {"password": PG_PASSWORD_ENV}}
    with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} ({PG_COLUMNS})")
        cur.execute(f"CREATE TABLE {table}_raw ({PG_COLUMNS})")
    try:
        job_s, result = sync(spark, warehouse, changes, destination)
        # The reference: the same rows as the same CSV, COPYed straight into a plain table.
        body = copy_csv(pq.read_table(source))
        started = time.perf_counter()
        with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
            cur.copy_expert(f"COPY {table}_raw FROM STDIN WITH (FORMAT csv)", io.BytesIO(body))
        copy_s = time.perf_counter() - started
        with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT (SELECT count(*) FROM {table}), (SELECT count(*) FROM {table}_raw), "
                        f"(SELECT count(*) FROM {table} s JOIN {table}_raw r USING (id) "
                        f" WHERE (s.*)::text IS DISTINCT FROM (r.*)::text)")
            sink_rows, raw_rows, differing = cur.fetchone()
    finally:
        with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}, {table}_raw")
    figures = {**_rates("postgres", "rows", rows, job_s, result), "postgres_copy_s": round(copy_s, 3),
               "postgres_copy_rows_per_s": round(rows / copy_s)}
    delivery = figures["postgres_delivery_rows_per_s"]
    return {"figures": figures,
            "ratios": {"s4.postgres_job_vs_copy": round(figures["postgres_job_rows_per_s"] * copy_s / rows, 3),
                       "s4.postgres_delivery_vs_copy": round(delivery * copy_s / rows, 3) if delivery else None},
            "correct": {"postgres": sink_rows == raw_rows == rows and differing == 0}}


def bench_http(spark, warehouse: str, changes: dict, rows: int, source: str) -> dict:
    from tests_common.webhook_receiver import HttpDestination

    with HttpDestination(history=False, keep_rows=False) as server:
        job_s, result = sync(spark, warehouse, changes, {"type": "http", "url": server.url},
                             delivery={"batch_size": 1000, "concurrency": 4})
        received = len(server.table)
    figures = _rates("http", "records", rows, job_s, result)
    return {"figures": figures,
            "ratios": {"s4.http_job_records_per_s": figures["http_job_records_per_s"],
                       "s4.http_delivery_records_per_s": figures["http_delivery_records_per_s"]},
            "correct": {"http": received == rows}}


def bench_kafka(spark, warehouse: str, changes: dict, rows: int, source: str) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    from tests_common.services import start_kafka

    info, _ = start_kafka()
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    job_s, result = sync(spark, warehouse, changes, {"type": "kafka", "topic": topic,
                                                     "bootstrap_servers": info.bootstrap_servers,
                                                     "create_topic": {"partitions": 3}})
    consumer = Consumer(info.config(**{"group.id": f"bench-{topic}"}))
    try:
        on_broker = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(3))
    finally:
        consumer.close()
    figures = _rates("kafka", "messages", rows, job_s, result)
    return {"figures": figures,
            "ratios": {"s4.kafka_job_messages_per_s": figures["kafka_job_messages_per_s"],
                       "s4.kafka_delivery_messages_per_s": figures["kafka_delivery_messages_per_s"]},
            "correct": {"kafka": on_broker == rows}}


BENCHES = {"postgres": bench_postgres, "http": bench_http, "kafka": bench_kafka}
#: Figures a skipped destination reports as None.
SKIPPED_FIGURES = {"postgres": "postgres_job_rows_per_s", "kafka": "kafka_job_messages_per_s"}


def sinks(spark, con, work: Path, rows: int, only: tuple[str, ...] = tuple(BENCHES)) -> dict:
    """Scenario 4 of ``bench.run``: {"figures", "ratios", "correct"} for each destination in ``only``.

    Uses the harness's source (``<work>/v1.parquet``, generated here when missing) and a fresh
    warehouse under ``work``. Postgres and Kafka are started (or found running) with the project's
    service scripts; a destination whose service fails to start is skipped with the reason."""
    from bench import data
    from tests_common.services import ServiceError

    work = Path(work)
    source = work / "v1.parquet"
    if not source.exists():
        work.mkdir(parents=True, exist_ok=True)
        data.generate(con, rows, str(source))
    warehouse = work / "s4-warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    started = time.perf_counter()
    changes = build_changes(spark, str(warehouse), str(source))
    report = {"figures": {"changes_s": round(time.perf_counter() - started, 3), "changes_rows": rows},
              "ratios": {}, "correct": {}}
    for name in only:
        try:
            part = BENCHES[name](spark, str(warehouse), changes, rows, str(source))
        except ServiceError as exc:
            reason = str(exc).strip().splitlines()[0]
            part = {"figures": {SKIPPED_FIGURES[name]: None, f"{name}_skipped": reason}, "ratios": {}, "correct": {}}
        for kind in ("figures", "ratios", "correct"):
            report[kind].update(part[kind])
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", default=",".join(BENCHES))
    parser.add_argument("--work", default=str(REPO / ".cache" / "bench"))
    args = parser.parse_args()

    from bench import data
    from bench.harness import session

    spark = session(args.rows)
    try:
        report = sinks(spark, data.connect(), Path(args.work) / f"n{args.rows}-s42", args.rows,
                       tuple(args.only.split(",")))
    finally:
        spark.stop()
    print(f"N = {args.rows:,} rows, load {[round(x, 1) for x in os.getloadavg()]}")
    for kind in ("figures", "ratios", "correct"):
        for name, value in report[kind].items():
            goal, met = GOALS.get(name, ("", None))
            verdict = "" if met is None else (" met" if value is not None and met(value) else " NOT met")
            print(f"  {name:<36} {value!s:<14} {goal}{verdict}")


if __name__ == "__main__":
    main()
