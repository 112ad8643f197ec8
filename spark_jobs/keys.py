"""Primary-key checks: a key that is null or not unique makes every later diff and upsert ambiguous,
so a snapshot refuses such data before writing anything and says which key values are at fault."""

from __future__ import annotations

from spark_jobs.errors import ConfigError, DataQualityError

EXAMPLES = 5


def require_columns(columns: list[str], wanted: list[str], what: str) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise ConfigError(f"{what} {missing} not found; the columns are {columns}")


def check_primary_key(df, key: list[str], where: str) -> int:
    """Fail on null or duplicate keys in ``df``; return its row count.

    One aggregation (rows per key, then totals over the keys) returning one row: never the data
    itself, and one pass over it. Examples of the faulty keys are only looked up on failure.
    """
    from pyspark.sql import functions as F

    if not key:
        raise ConfigError(f"{where}: a primary_key is required")
    require_columns(df.columns, key, f"{where}: primary key column(s)")
    any_null = F.lit(False)
    for col in key:
        any_null = any_null | F.col(col).isNull()
    per_key = df.groupBy(*key).agg(F.count(F.lit(1)).alias("count"))
    totals = per_key.agg(F.sum("count").alias("rows"),
                         F.sum(F.when(any_null, F.col("count"))).alias("null_keys"),
                         F.sum(F.when(~any_null & (F.col("count") > 1), 1)).alias("dupes")).first()
    if totals["null_keys"]:
        sample = [r.asDict() for r in df.where(any_null).select(*df.columns).limit(EXAMPLES).collect()]
        raise DataQualityError(
            f"{where}: {totals['null_keys']} row(s) have a null primary key {key}; examples: {sample}. "
            "Nothing was written."
        )
    if totals["dupes"]:
        examples = per_key.where(~any_null & (F.col("count") > 1)).orderBy(F.desc("count")).limit(EXAMPLES).collect()
        described = ", ".join(
            f"{ {c: r[c] for c in key} } x{r['count']}" for r in examples
        )
        raise DataQualityError(
            f"{where}: duplicate primary key {key}: {described}. Nothing was written."
        )
    return int(totals["rows"] or 0)
