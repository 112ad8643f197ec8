"""The references the project's path is measured against, on the same two Parquet versions.

Both compute the change set of a full extract the plain way: a full outer join on the primary key with
a hash of each row's values, keeping inserted, deleted and changed rows, written out as Parquet (the
project writes its change set as a Delta table, so the work compared is the same).
"""

from __future__ import annotations

from bench.data import COLUMNS

KEY = "id"
VALUES = [c for c in COLUMNS if c != KEY]


def duckdb_diff(con, before: str, after: str, out: str) -> dict[str, int]:
    """DuckDB, the single-machine reference."""
    hashed = ", ".join(VALUES)
    con.execute(f"""COPY (
        SELECT coalesce(b.id, a.id) AS id,
               CASE WHEN a.id IS NULL THEN 'insert' WHEN b.id IS NULL THEN 'delete' ELSE 'update' END AS _change_type,
               {", ".join(f"coalesce(b.{c}, a.{c}) AS {c}" for c in VALUES)}
        FROM (SELECT *, hash({hashed}) AS _h FROM read_parquet('{before}')) a
        FULL OUTER JOIN (SELECT *, hash({hashed}) AS _h FROM read_parquet('{after}')) b ON a.id = b.id
        WHERE a.id IS NULL OR b.id IS NULL OR a._h <> b._h
    ) TO '{out}' (FORMAT parquet)""")
    rows = con.execute(f"SELECT _change_type, count(*) FROM read_parquet('{out}') GROUP BY 1").fetchall()
    return _counts(dict(rows))


def spark_join_diff(spark, before: str, after: str, out: str) -> dict[str, int]:
    """The same join in plain Spark (no Delta, no snapshot): what Spark itself costs here."""
    from pyspark.sql import functions as F

    def hashed(path):
        df = spark.read.parquet(path)
        return df.select(KEY, F.xxhash64(*VALUES).alias("_h"), F.struct(*VALUES).alias("row"))

    a, b = hashed(before).alias("a"), hashed(after).alias("b")
    change = (F.when(F.col("a.id").isNull(), "insert").when(F.col("b.id").isNull(), "delete")
              .otherwise("update"))
    diff = (a.join(b, F.col("a.id") == F.col("b.id"), "full_outer")
            .where(F.col("a.id").isNull() | F.col("b.id").isNull() | (F.col("a._h") != F.col("b._h")))
            .select(F.coalesce("b.id", "a.id").alias("id"), change.alias("_change_type"),
                    F.coalesce("b.row", "a.row").alias("row")))
    diff.write.mode("overwrite").parquet(out)
    rows = spark.read.parquet(out).groupBy("_change_type").count().collect()
    return _counts({r["_change_type"]: r["count"] for r in rows})


def _counts(by_type: dict[str, int]) -> dict[str, int]:
    return {t: int(by_type.get(t, 0)) for t in ("insert", "update", "delete")}
