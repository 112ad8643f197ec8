"""Benchmark: three sources x N rows merged into one wide table, against DuckDB doing the same merge.

Scenario 3 of ``python -m bench.run`` (``wide``), or standalone:

    .venv/bin/python bench/bench_widen.py [--rows 1000000] [--change-fraction 0.001]

Each source is a snapshot Delta table (Change Data Feed on) providing two columns and the sequence
field of a wide table keyed by ``k``. Measured in the same run:

1. first run: the widen job merges the three 1M-row sources into an empty wide table; DuckDB computes
   the same partial update (per key and column, the non-null value with the highest sequence) from
   the same data as Parquet into a table;
2. change run: 0.1% of one source's rows change (a new snapshot version); the widen job merges just
   that version's changes; DuckDB applies the same changed rows to its table with the same rules.

Reports seconds and the ratios Spark/DuckDB (goal <= 3x on the first run) and change/first run, and
whether the Spark wide table equals DuckDB's after each run (an aggregate checksum on each side: the
count and the sum of an MD5 of every row, so nothing is collected).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import REPO, Goals

sys.path.insert(0, str(REPO))

SOURCES = {"s1": ("a1", "a2"), "s2": ("b1", "b2"), "s3": ("c1", "c2")}
WIDE = {
    "name": "bench",
    "primary_key": ["k"],
    "sequence_field": "seq",
    "sources": [{"name": name, "columns": [*cols, "seq"]} for name, cols in SOURCES.items()],
}


DUCK_TABLE = "s3_wide"
COLUMNS = ["k", *[c for cols in SOURCES.values() for c in cols], "seq"]  # every column is a long or a string

GOALS: Goals = {  # issue 25's goal on the first run, issue 36's on the change run (at 1M)
    "s3.first_vs_duckdb": ("<= 3x DuckDB", lambda r: r <= 3),
    "s3.change_vs_first": ("<= 0.25 of the first run", lambda r: r <= 0.25),
}


def timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:8.2f} s", flush=True)
    return round(seconds, 3), result


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
    con.execute(f"CREATE OR REPLACE TABLE {DUCK_TABLE} AS SELECT k, {picks}, max(seq) AS seq "
                f"FROM ({' UNION ALL '.join(unions)}) GROUP BY k")


def duck_change(con, name: str, parquet: str) -> None:
    a, b = SOURCES[name]
    w = DUCK_TABLE
    newer = f"c.seq >= {w}.seq OR {w}.seq IS NULL"
    sets = ", ".join(f"{col} = CASE WHEN {newer} THEN coalesce(c.{col}, {w}.{col}) "
                     f"ELSE coalesce({w}.{col}, c.{col}) END" for col in (a, b))
    con.execute(f"UPDATE {w} SET {sets}, seq = greatest({w}.seq, c.seq) "
                f"FROM read_parquet('{parquet}') AS c WHERE {w}.k = c.k")
    cols = ", ".join(f"c.{col}" if col in (a, b) else "NULL" for cs in SOURCES.values() for col in cs)
    con.execute(f"INSERT INTO {w} SELECT c.k, {cols}, c.seq FROM read_parquet('{parquet}') AS c "
                f"WHERE c.k NOT IN (SELECT k FROM {w})")


def _row_text(quote: str) -> str:
    """One row as text, the same in Spark SQL and DuckDB: longs and strings print alike, ``~`` for null."""
    return "concat_ws('|', " + ", ".join(f"coalesce(CAST({quote}{c}{quote} AS STRING), '~')"
                                         for c in COLUMNS) + ")"


def spark_checksum(spark, uri: str) -> tuple[int, int]:
    """(rows, sum of the first 60 bits of each row's MD5) of the wide table, computed by Spark."""
    from pyspark.sql import functions as F

    digest = F.expr(f"CAST(conv(substr(md5({_row_text('`')}), 1, 15), 16, 10) AS DECIMAL(38, 0))")
    row = spark.read.format("delta").load(uri).agg(F.count(F.lit(1)), F.sum(digest)).first()
    return int(row[0]), int(row[1] or 0)


def duck_checksum(con) -> tuple[int, int]:
    """The same checksum of DuckDB's table."""
    text = _row_text('"').replace("AS STRING", "AS VARCHAR")
    rows, total = con.execute(f"SELECT count(*), sum(('0x' || substr(md5({text}), 1, 15))::HUGEINT) "
                              f"FROM {DUCK_TABLE}").fetchone()
    return int(rows), int(total or 0)


def wide(spark, con, work: Path, rows: int, change_fraction: float = 0.001) -> dict:
    """Scenario 3 of the harness: first run and a change run of the widen job vs DuckDB, same data.

    ``spark`` and ``con`` are the harness's session and DuckDB connection; ``work`` gets a fresh
    warehouse and the Parquet copies DuckDB reads.
    """
    from spark_jobs.entry import run

    root = Path(work) / "s3"
    shutil.rmtree(root, ignore_errors=True)
    warehouse, parquet = str(root / "warehouse"), {}
    print(f"{rows:,} rows x {len(SOURCES)} sources; change run: {change_fraction:.2%} of one source", flush=True)
    for name in SOURCES:
        record_first(spark, warehouse, name, source_frame(spark, name, rows))
        parquet[name] = str(root / "parquet" / name)
        spark.read.format("delta").load(f"{warehouse}/snapshots/{name}").write.parquet(parquet[name])
        parquet[name] += "/*.parquet"

    def widen(run_id: str):
        result = run(spark, {"job": "widen", "warehouse": warehouse, "wide": WIDE, "run_id": run_id,
                             "logical_date": run_id})
        if result["status"] != "success":
            raise RuntimeError(f"widen failed: {result['error']}")
        return result

    uri = f"{warehouse}/wide/{WIDE['name']}"
    spark_first, first = timed("spark widen, first run", lambda: widen("first"))
    duck_first_s, _ = timed("duckdb partial-update merge, first run", lambda: duck_first(con, parquet))
    first_ok = spark_checksum(spark, uri) == duck_checksum(con) and duck_checksum(con)[0] == rows

    changed_parquet = str(root / "parquet" / "changed")
    source_frame(spark, "s1", rows, salt=1, fraction=change_fraction).write.parquet(changed_parquet)
    changed = spark.read.parquet(changed_parquet)
    n_changed = changed.count()
    record_change(spark, warehouse, "s1", changed)
    spark_change, second = timed(f"spark widen, change run ({n_changed:,} rows)", lambda: widen("change"))
    duck_change_s, _ = timed("duckdb partial-update merge, change run",
                             lambda: duck_change(con, "s1", f"{changed_parquet}/*.parquet"))
    change_ok = spark_checksum(spark, uri) == duck_checksum(con)
    con.execute(f"DROP TABLE {DUCK_TABLE}")
    return {
        "figures": {"first_s": spark_first, "first_duckdb_s": duck_first_s, "change_s": spark_change,
                    "change_duckdb_s": duck_change_s, "changed_rows": n_changed},
        "ratios": {"s3.first_vs_duckdb": round(spark_first / duck_first_s, 2),
                   "s3.change_vs_duckdb": round(spark_change / duck_change_s, 2),
                   "s3.change_vs_first": round(spark_change / spark_first, 2)},
        "correct": {"first_run": first_ok, "change_run": change_ok,
                    "change_stats": second["stats"]["full"]["updated"] == n_changed},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--change-fraction", type=float, default=0.001)
    args = parser.parse_args()

    from bench.data import connect
    from bench.harness import session

    spark = session(args.rows)
    work = Path(tempfile.mkdtemp(prefix="bench-widen-"))
    try:
        result = wide(spark, connect(), work, args.rows, args.change_fraction)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    for kind in ("figures", "ratios", "correct"):
        print(f"{kind}: {result[kind]}")
    return 0 if all(result["correct"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
