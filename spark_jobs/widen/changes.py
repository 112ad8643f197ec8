"""Reading a source table's changes between two exact versions (an :class:`Input` of a step).

Every widen step consumes a table's Change Data Feed over (merged, target]: the versions since the
last one it merged, up to the version its upstream task produced. The first time (nothing merged yet)
the whole target version counts as inserts, in the same CDF shape, so callers handle one shape.
The feed itself is read by :func:`spark_jobs.delta.change_sets.read_changes`, the one reader of a table's changes
between versions: across a source snapshot's column rename it reads the pieces Delta allows, under
the target version's names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_jobs.delta.change_sets import as_inserts
from spark_jobs.delta.change_sets import read_changes as read_feed
from spark_jobs.errors import ConfigError
from spark_jobs.delta.lake import commit_info, history, latest_version, require_intact, table_history
from spark_jobs.delta.renames import restored_version
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROW_TYPES = ("insert", "update_postimage", "delete")  # the preimage of an update is not a write


@dataclass
class Input:
    """One table a step reads, between the version it last merged and the version it merges now."""
    rel: str
    uri: str
    consumer: str
    from_version: int | None
    to_version: int

    @property
    def advances(self) -> bool:
        return self.from_version is None or self.to_version > self.from_version


def unmerged_changes(spark: SparkSession, uri: str, from_version: int | None, to_version: int) -> DataFrame | None:
    """CDF rows of ``uri`` in (from_version, to_version], or ``None`` when there is nothing new."""
    if from_version is not None and from_version >= to_version:
        return None
    if from_version is None:
        table = read_table(spark, uri, to_version)
        return as_inserts(table, to_version, commit_info(uri, to_version)["timestamp"])
    return read_feed(spark, uri, from_version + 1, to_version, _history_since(uri, from_version + 1))


def _history_since(uri: str, since: int) -> list[dict[str, Any]]:
    """The table's commits from version ``since`` on: what splitting and naming its feed needs (rename
    and restore commits), without reading the whole log every run. A restore among them to a version
    before ``since`` maps names through older commits, so then the whole history. A damaged commit
    among them is refused: the feed would skip its changes."""
    entries = history(uri, latest_version(uri) - since + 1)
    require_intact(entries, uri)
    if any(restored is not None and restored < since for restored in map(restored_version, entries)):
        return history(uri)
    return entries


def require_table(uri: str, rel: str, what: str) -> int:
    """The table's latest version (existence and version in one read of its log)."""
    newest = table_history(uri, 1)
    if newest is None:
        raise ConfigError(f"{what}: table {rel} does not exist at {uri}; run its snapshot first")
    version: int = newest[0]["version"]
    return version
