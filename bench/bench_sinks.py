"""Benchmark: the production sinks against a reference measured in the same run.

    .venv/bin/python bench/bench_sinks.py [--rows 200000] [--only postgres,http,kafka]

One change set of N inserted rows (id, name, email, city, score, updated_at) is built once with the
snapshot and diff jobs; then, each timed on its own:

* postgres: the sync job into the real test Postgres (scripts/services/postgres.sh), against a raw
  ``COPY`` of the same rows (formatted the same way, streamed by psycopg2 into a plain table) —
  goal: the sink at >= 50% of raw COPY's rows/s;
* http: the sync job against the loopback HTTP server of the tests (tests/support/http_server.py),
  concurrency 4, batches of 1,000 — goal >= 20k records/s;
* kafka: the sync job into a 3-partition topic of the real test broker (scripts/services/kafka.sh)
  — goal >= 100k messages/s.

Sink figures are for the whole sync job (reading the change set, Python workers, delivery, the
consumer commit and run history), so they include Spark's fixed costs of a few seconds.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<48} {seconds:8.2f} s", flush=True)
    return seconds, result


def build_changes(spark, warehouse: str, rows: int) -> dict:
    from pyspark.sql import functions as F

    from spark_jobs.entry import run

    source = f"{warehouse}/source"
    (spark.range(rows).select(
        F.col("id").cast("int").alias("id"),
        F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
        F.concat(F.lit("user"), F.col("id").cast("string"), F.lit("@example.com")).alias("email"),
        F.concat(F.lit("city-"), (F.col("id") % 100).cast("string")).alias("city"),
        (F.col("id") % 1000 / 10).cast("double").alias("score"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("updated_at"),
    ).write.mode("overwrite").parquet(source))
    for job, spec in (("snapshot", {"name": "bench", "primary_key": ["id"], "logical_date": "2026-01-01T00:00:00+00:00",
                                    "run_id": "bench", "source": {"format": "parquet", "path": source}}),
                      ("diff", {"table": "snapshots/bench", "consumer": "bench"})):
        result = run(spark, {"job": job, "warehouse": warehouse, **spec})
        assert result["status"] == "success", result
    return result


def sync(spark, warehouse: str, changes: dict, destination: dict, **options) -> dict:
    from spark_jobs.entry import run

    spec = {"job": "sync", "warehouse": warehouse, "changes": changes["changes"], "table": changes["table"],
            "consumer": changes["consumer"], "primary_key": changes["primary_key"],
            "to_version": changes["to_version"], "destination": destination, "commit": False, **options}
    result = run(spark, spec)
    assert result["status"] == "success", result
    return result


def bench_postgres(spark, warehouse, changes, rows):
    import psycopg2

    from spark_jobs.sinks.postgres import _copy_text
    from tests.support.services import start_postgres

    info, _ = start_postgres()
    os.environ["ARETL_BENCH_PG_PASSWORD"] = info.password
    table = f"bench_{uuid.uuid4().hex[:8]}"
    columns = "id int PRIMARY KEY, name text, email text, city text, score double precision, updated_at timestamptz"
    destination = {"type": "postgres", "table": table, "create_table": False,
                   "connection": {"host": info.host, "port": info.port, "login": info.user, "schema": info.dbname},
                   "secrets_env": {"password": "ARETL_BENCH_PG_PASSWORD"}}
    with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} ({columns})")
        cur.execute(f"CREATE TABLE {table}_raw ({columns})")
    sink_s, _ = timed(f"postgres sink, {rows} rows", lambda: sync(spark, warehouse, changes, destination))

    # The reference: the same rows, formatted the same way, COPYed straight into a plain table.
    data = spark.read.format("delta").load(f"{warehouse}/{changes['changes']}").drop(
        "_change_type", "_commit_version", "_commit_timestamp").collect()
    text = "".join("\t".join(_copy_text(v) for v in row) + "\n" for row in data)
    copy_s, _ = timed(f"raw COPY of the same {rows} rows", lambda: _copy(info, f"{table}_raw", text))
    with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT (SELECT count(*) FROM {table}), (SELECT count(*) FROM {table}_raw)")
        assert cur.fetchone() == (rows, rows)
        cur.execute(f"DROP TABLE {table}, {table}_raw")
    print(f"  postgres sink {rows / sink_s:,.0f} rows/s; raw COPY {rows / copy_s:,.0f} rows/s; "
          f"ratio {copy_s / sink_s:.0%} (goal >= 50%)")


def _copy(info, table, text):
    import psycopg2

    with psycopg2.connect(**info.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.copy_expert(f"COPY {table} FROM STDIN", io.StringIO(text))


def bench_http(spark, warehouse, changes, rows):
    from tests.support.http_server import HttpDestination

    with HttpDestination() as server:
        seconds, _ = timed(f"http sink, {rows} records", lambda: sync(
            spark, warehouse, changes, {"type": "http", "url": server.url},
            delivery={"batch_size": 1000, "concurrency": 4}))
        assert len(server.table) == rows
    print(f"  http sink {rows / seconds:,.0f} records/s (goal >= 20k/s)")


def bench_kafka(spark, warehouse, changes, rows):
    from tests.support.services import start_kafka

    info, _ = start_kafka()
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    seconds, _ = timed(f"kafka sink, {rows} messages", lambda: sync(
        spark, warehouse, changes, {"type": "kafka", "topic": topic, "bootstrap_servers": info.bootstrap_servers,
                                    "create_topic": {"partitions": 3}}))
    print(f"  kafka sink {rows / seconds:,.0f} messages/s (goal >= 100k/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--only", default="postgres,http,kafka")
    args = parser.parse_args()

    from spark_jobs.session import build_session

    spark = build_session("bench-sinks", master="local[2]", jars_dir=str(REPO / ".cache" / "jars"),
                          conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
                                "spark.databricks.delta.snapshotPartitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    warehouse = tempfile.mkdtemp(prefix="aretl-bench-sinks-")
    _, changes = timed(f"snapshot + diff of {args.rows} rows", lambda: build_changes(spark, warehouse, args.rows))
    for name in args.only.split(","):
        {"postgres": bench_postgres, "http": bench_http, "kafka": bench_kafka}[name](spark, warehouse, changes, args.rows)
    spark.stop()


if __name__ == "__main__":
    main()
