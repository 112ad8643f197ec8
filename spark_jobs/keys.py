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

    Two aggregations, each returning a handful of rows: never the data itself.
    """
    from pyspark.sql import functions as F

    if not key:
        raise ConfigError(f"{where}: a primary_key is required")
    require_columns(df.columns, key, f"{where}: primary key column(s)")
    any_null = F.lit(False)
    for col in key:
        any_null = any_null | F.col(col).isNull()
    totals = df.agg(F.count(F.lit(1)).alias("rows"), F.sum(any_null.cast("long")).alias("null_keys")).first()
    if totals["null_keys"]:
        sample = [r.asDict() for r in df.where(any_null).select(*df.columns).limit(EXAMPLES).collect()]
        raise DataQualityError(
            f"{where}: {totals['null_keys']} row(s) have a null primary key {key}; examples: {sample}. "
            "Nothing was written."
        )
    dupes = df.groupBy(*key).count().where("count > 1")
    examples = dupes.orderBy(F.desc("count")).limit(EXAMPLES).collect()
    if examples:
        described = ", ".join(
            f"{ {c: r[c] for c in key} } x{r['count']}" for r in examples
        )
        raise DataQualityError(
            f"{where}: duplicate primary key {key}: {described}. Nothing was written."
        )
    return int(totals["rows"])
