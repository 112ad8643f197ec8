"""Partitioned snapshot tables: the layout rules, and the partition predicate that lets a MERGE prune.

``partition_by=["region"]`` writes the snapshot table partitioned by those columns (Delta keeps one
directory of files per value). Each later run's MERGE matches the changed rows only against the
partitions where their current rows live: the ON clause gets a literal predicate on the partition
columns (``t.region IN ('eu')`` in effect), which Delta uses to skip the other partitions' files
before it joins. A change confined to one partition then reads and rewrites only that partition's
files, whether it comes from a full extract or from a source's Change Data Feed. Rows a run inserts
need no predicate (no current row to match); a row moving to another partition is matched in the one
it leaves.

Partition columns are chosen once, when the table is created: re-partitioning rewrites every file,
so a spec whose ``partition_by`` differs from the table's is refused (record into a new table). They
must be low-cardinality columns of a type whose values are exact as SQL literals (strings, whole
numbers, decimals, dates, booleans: :func:`spark_jobs.delta.literals.has_literal`), each written as a
literal of the column's own type; past
:data:`MAX_PRUNED_PARTITIONS` touched partitions the predicate is left out, as it would cost more to
plan than it saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.errors import ConfigError
from spark_jobs.delta.lake import delta_path
from spark_jobs.delta.literals import LITERAL_TYPES, column, has_literal, literal
from spark_jobs.delta.rows import one_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: The Spark types a partition column may have (and every ``decimal(p,s)``): its values are written
#: into MERGE predicates.
PARTITION_TYPES = (*LITERAL_TYPES, "decimal(p,s)")
#: Past this many touched partitions a MERGE goes without the partition predicate.
MAX_PRUNED_PARTITIONS = 1000


def check_new_layout(schema: StructType, partition_by: list[str], where: str) -> None:
    """Before the first write: the partition columns exist in the extract, with a usable type."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    missing = [c for c in partition_by if c not in types]
    if missing:
        raise ConfigError(f"{where}: partition_by column(s) {missing} are not in the source (its columns are "
                          f"{list(types)}). Nothing was written.")
    odd = {c: types[c] for c in partition_by if not has_literal(types[c])}
    if odd:
        raise ConfigError(f"{where}: partition_by column(s) {odd} have types a table cannot be partitioned by "
                          f"here; use columns of type {', '.join(PARTITION_TYPES)}. Nothing was written.")


def check_layout(spark: SparkSession, uri: str, partition_by: list[str], where: str) -> None:
    """An existing table is partitioned by exactly ``partition_by``."""
    actual = list(one_row(spark.sql(f"DESCRIBE DETAIL {delta_path(uri)}").select("partitionColumns"))[0] or [])
    if actual != list(partition_by):
        raise ConfigError(f"{where}: the table is partitioned by {actual}, the spec says partition_by="
                          f"{list(partition_by)}. Partitioning is chosen when the table is created; write "
                          "into a new table (a new name) to change it. Nothing was written.")


def touched_predicate(frame: DataFrame, partition_by: list[str], alias: str = "t") -> str | None:
    """SQL on the target ``alias``: its rows in the partitions ``frame`` (columns ``partition_by``, one
    row per current row a change matches) names; None when there are too many to be worth it."""
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    values = frame.select(*partition_by).distinct().limit(MAX_PRUNED_PARTITIONS + 1).collect()
    if len(values) > MAX_PRUNED_PARTITIONS:
        return None
    if not values:
        return "FALSE"  # every change is an insert: no current row to match
    target = {c: column(alias, c) for c in partition_by}
    terms = [" AND ".join(f"{target[c]} IS NULL" if row[c] is None else f"{target[c]} = {literal(row[c], types[c])}"
                          for c in partition_by) for row in values]
    return "(" + " OR ".join(f"({term})" for term in terms) + ")"


def pruned(on: str, frame: DataFrame, partition_by: list[str], alias: str = "t") -> str:
    """A MERGE's ON clause ``on`` restricted to the partitions :func:`touched_predicate` finds for
    ``frame``'s rows (``on`` as it is when they are too many to be worth it)."""
    predicate = touched_predicate(frame, partition_by, alias)
    return on if predicate is None else f"{on} AND {predicate}"

