"""Primary-key checks: a key that is null or not unique makes every later diff and upsert ambiguous,
so a snapshot refuses such data before writing anything and says which key values are at fault."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.errors import ConfigError, DataQualityError
from spark_jobs.delta.rows import one_row

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row

EXAMPLES = 5


def require_columns(columns: list[str], wanted: list[str], what: str) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise ConfigError(f"{what} {missing} not found; the columns are {columns}")


def any_null(key: list[str]) -> Column:
    """Spark column: some part of the key is null."""
    from pyspark.sql import functions as F

    condition = F.lit(False)
    for col in key:
        condition = condition | F.col(col).isNull()
    return condition


def check_key_counts(per_key: DataFrame, key: list[str], where: str, *, what: str = "row(s)", **totals: Column) -> Row:
    """Fail if ``per_key`` (one row per key value with ``count``, its rows once written) holds a null
    or duplicate key; return the totals row, with the extra aggregates ``totals`` asked for.

    One aggregation returning one row: never the data itself. A null key is reported by its columns
    and a count only: the rest of such a row may be personal data, and the message lands in the
    task's log and XCom. A duplicate key is named by its values (up to five of them), the one thing
    a user needs to find it.
    """
    from pyspark.sql import functions as F

    null = any_null(key)
    row = one_row(per_key.agg(*[agg.alias(name) for name, agg in totals.items()],
                              F.sum(F.when(null & (F.col("count") > 0), F.col("count"))).alias("null_keys"),
                              F.sum(F.when(~null & (F.col("count") > 1), 1)).alias("dupes")))
    if row["null_keys"]:
        raise DataQualityError(f"{where}: {row['null_keys']} {what} have a null primary key {key} (a null in "
                               "at least one key column). Nothing was written.")
    if row["dupes"]:
        examples = per_key.where(~null & (F.col("count") > 1)).orderBy(F.desc("count")).limit(EXAMPLES).collect()
        described = ", ".join(f"{ {c: r[c] for c in key} } x{r['count']}" for r in examples)
        raise DataQualityError(f"{where}: duplicate primary key {key}: {described}. Nothing was written.")
    return row


def check_primary_key(df: DataFrame, key: list[str], where: str) -> int:
    """Fail on null or duplicate keys in ``df``; return its row count (one pass over the data)."""
    from pyspark.sql import functions as F

    if not key:
        raise ConfigError(f"{where}: a primary_key is required")
    require_columns(df.columns, key, f"{where}: primary key column(s)")
    per_key = df.groupBy(*key).agg(F.count(F.lit(1)).alias("count"))
    totals = check_key_counts(per_key, key, where, rows=F.sum("count"))
    return int(totals["rows"] or 0)
