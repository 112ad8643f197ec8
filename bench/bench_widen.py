"""Benchmark: three sources x N rows merged into one wide table, against DuckDB doing the same merge.

    .venv/bin/python bench/bench_widen.py [--rows 1000000] [--change-fraction 0.001]

Each source is a snapshot Delta table (Change Data Feed on) providing two columns and the sequence
field of a wide table keyed by ``k``. Measured in the same run:

1. first run: the widen job merges the three 1M-row sources into an empty wide table; DuckDB computes
   the same partial update (per key and column, the non-null value with the highest sequence) from
   the same data as Parquet into a table;
2. change run: 0.1% of one source's rows change (a new snapshot version); the widen job merges just
   that version's changes; DuckDB applies the same changed rows to its table with the same rules.

Prints seconds and the ratios Spark/DuckDB (goal <= 3x on the first run) and change/first run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SOURCES = {"s1": ("a1", "a2"), "s2": ("b1", "b2"), "s3": ("c1", "c2")}
WIDE = {
    "name": "bench",
    "primary_key": ["k"],
    "sequence_field": "seq",
    "sources": [{"name": name, "columns": [*cols, "seq"]} for name, cols in SOURCES.items()],
}


def timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:8.2f} s", flush=True)
    return seconds, result


def source_frame(spark, name: str, rows: int, salt: int = 0, fraction: float = 1.0):
    """Rows of one source: a long and a string column per source, seq = 100 (+1 for changed rows)."""
    from pyspark.sql import functions as F

    a, b = SOURCES[name]
    df = spark.range(rows).withColumnRenamed("id", "k")
    if fraction < 1.0:  # the changed rows: every (1/fraction)-th key
        df = df.where(F.col("k") % int(round(1 / fraction)) == 0)
    return df.select(
        "k",
        (F.col("k") * 7 + salt).alias(a),
        F.concat(F.lit(f"{name}-"), (F.col("k") + salt).cast("string")).alias(b),
        F.lit(100 + salt).cast("long").alias("seq"),
    )


def record_first(spark, warehouse: str, name: str, df) -> None:
    (df.write.format("delta").option("delta.enableChangeDataFeed", "true")
     .option("delta.enableDeletionVectors", "true").save(f"{warehouse}/snapshots/{name}"))


def record_change(spark, warehouse: str, name: str, changed) -> None:
    """A new snapshot version in which only ``changed`` rows differ (what the snapshot job's MERGE
    commits when 0.1% of the source changed)."""
    from delta.tables import DeltaTable

    cols = [c for c in changed.columns if c != "k"]
    (DeltaTable.forPath(spark, f"{warehouse}/snapshots/{name}").alias("t")
     .merge(changed.alias("s"), "t.k = s.k")
     .whenMatchedUpdate(set={c: f"s.{c}" for c in cols}).execute())


def duck_first(con, parquet: dict[str, str]) -> None:
    unions = []
    for name, (a, b) in SOURCES.items():
        cols = []
        for other, (oa, ob) in SOURCES.items():
            cols += [a if other == name else f"NULL::BIGINT AS {oa}", b if other == name else f"NULL::VARCHAR AS {ob}"]
        unions.append(f"SELECT k, seq, {', '.join(cols)} FROM read_parquet('{parquet[name]}')")
    picks = ", ".join(f"arg_max({c}, seq) FILTER (WHERE {c} IS NOT NULL) AS {c}"
                      for cols in SOURCES.values() for c in cols)
    con.execute(f"CREATE OR REPLACE TABLE wide AS SELECT k, {picks}, max(seq) AS seq "
                f"FROM ({' UNION ALL '.join(unions)}) GROUP BY k")


def duck_change(con, name: str, parquet: str) -> None:
    a, b = SOURCES[name]
    newer = "c.seq >= wide.seq OR wide.seq IS NULL"
    sets = ", ".join(f"{col} = CASE WHEN {newer} THEN coalesce(c.{col}, wide.{col}) "
                     f"ELSE coalesce(wide.{col}, c.{col}) END" for col in (a, b))
    con.execute(f"UPDATE wide SET {sets}, seq = greatest(wide.seq, c.seq) "
                f"FROM read_parquet('{parquet}') AS c WHERE wide.k = c.k")
    cols = ", ".join(f"c.{col}" if col in (a, b) else "NULL" for cs in SOURCES.values() for col in cs)
    con.execute(f"INSERT INTO wide SELECT c.k, {cols}, c.seq FROM read_parquet('{parquet}') AS c "
                f"WHERE c.k NOT IN (SELECT k FROM wide)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--change-fraction", type=float, default=0.001)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    import duckdb

    from spark_jobs.entry import run
    from spark_jobs.session import build_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session("bench-widen", master=args.master, jars_dir=str(REPO / ".cache" / "jars"),
                          conf={"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
                                "spark.driver.memory": "3g"})
    spark.sparkContext.setLogLevel("ERROR")
    root = tempfile.mkdtemp(prefix="bench-widen-")
    warehouse, parquet = f"{root}/warehouse", {}
    try:
        print(f"{args.rows:,} rows x {len(SOURCES)} sources; change run: {args.change_fraction:.2%} of one source")
        for name in SOURCES:
            df = source_frame(spark, name, args.rows)
            record_first(spark, warehouse, name, df)
            parquet[name] = f"{root}/parquet/{name}"
            spark.read.format("delta").load(f"{warehouse}/snapshots/{name}").write.parquet(parquet[name])
            parquet[name] += "/*.parquet"

        def widen(run_id: str):
            result = run(spark, {"job": "widen", "warehouse": warehouse, "wide": WIDE, "run_id": run_id,
                                 "logical_date": run_id})
            assert result["status"] == "success", result.get("error")
            return result

        spark_first, first = timed("spark widen, first run", lambda: widen("first"))
        con = duckdb.connect(f"{root}/duck.db")
        duck_first_s, _ = timed("duckdb partial-update merge, first run", lambda: duck_first(con, parquet))
        wide_rows = spark.read.format("delta").load(f"{warehouse}/wide/bench").count()
        assert wide_rows == args.rows == con.execute("SELECT count(*) FROM wide").fetchone()[0]

        changed = source_frame(spark, "s1", args.rows, salt=1, fraction=args.change_fraction)
        changed_parquet = f"{root}/parquet/changed"
        changed.write.parquet(changed_parquet)
        changed = spark.read.parquet(changed_parquet)
        n_changed = changed.count()
        record_change(spark, warehouse, "s1", changed)
        spark_change, second = timed(f"spark widen, change run ({n_changed:,} rows)", lambda: widen("change"))
        duck_change_s, _ = timed("duckdb partial-update merge, change run",
                                 lambda: duck_change(con, "s1", f"{changed_parquet}/*.parquet"))
        assert second["stats"]["full"]["updated"] == n_changed, second["stats"]
        sample = spark.read.format("delta").load(f"{warehouse}/wide/bench").where("k = 0").first()
        assert (sample["a1"], sample["seq"]) == (1, 101)
        assert con.execute("SELECT a1, seq FROM wide WHERE k = 0").fetchone() == (1, 101)

        print(f"\nratio spark/duckdb, first run:   {spark_first / duck_first_s:6.1f}x  (goal <= 3x)")
        print(f"ratio spark/duckdb, change run:  {spark_change / duck_change_s:6.1f}x")
        print(f"ratio change run / first run:    {spark_change / spark_first:6.2f}   (goal: far below 1)")
        print(f"first run stats: {first['stats']}; change run stats: {second['stats']}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
