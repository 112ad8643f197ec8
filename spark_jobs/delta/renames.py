"""Column renames that keep a column's history, through Delta column mapping.

Without this, a source column renamed from ``name`` to ``full_name`` reaches a snapshot as a drop
plus an add: with ``allow_schema_evolution`` the old column turns null in every row and the new one
is filled, so the Change Data Feed updates every row, every consumer resends its whole table and
the SCD2 history closes every interval. A rename is a metadata change: with
``delta.columnMapping.mode = name`` Delta's ``ALTER TABLE … RENAME COLUMN`` renames the column in
the schema only, the data files keep their physical column, and the rows are untouched.

The user says which columns were renamed (``renames={"name": "full_name"}`` on the snapshot).
Renames are not detected: a column that vanished and one that appeared with the same type may as
well be a drop and an unrelated add (``phone`` gone, ``mobile`` new), and guessing wrongly would
silently re-label data; the values cannot tell either, since a renamed column may change values in
the same run. The option is declarative and idempotent: a rename already applied (the table has the
new name and not the old one) is a no-op, so it may stay in the DAG for good.

A run that renames makes its rename commits (the column mapping upgrade the first time, then one
``RENAME COLUMN`` per column) before its snapshot commit. They carry ``{"job": "rename", "run_id",
"renames"}`` and no logical date, so they are not recorded snapshots and add no Change Data Feed
rows. Delta refuses to read the Change Data Feed across a rename, so readers of a range that spans
rename commits read the range in pieces between them, each piece renamed to the head's names
(:func:`feed_ranges`, :func:`spark_jobs.delta.change_sets.read_changes`); time-travel readers rename an old
version's columns with :func:`names_at_head`.

A restore (the restore job, or a rebuild's restore of its base) to a version before a rename brings
the old names back with the old schema: the next snapshot run with the same ``renames`` renames them
again. Readers follow that too: :func:`names_at_head` maps a name across a restore through the
version it restored (recorded as ``restored_version`` in the restore's commit), and a restore commit
starts a Change Data Feed piece of its own. A rebuild replays later dates from their old versions
under the head's names (:mod:`spark_jobs.jobs.rebuild`).

Consumers that name a snapshot's columns by hand (a wide table's spec) name its current columns: a
spec still naming a renamed column fails naming the new name (:func:`renamed_columns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.errors import ConcurrentWriteError, ConfigError
from spark_jobs.delta.expressions import quoted
from spark_jobs.delta.lake import commit_metadata, delta_path, history
from spark_jobs.delta.rows import one_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The ``job`` of the commits a rename makes.
RENAME_JOB = "rename"


def pending_renames(renames: dict[str, str], table: list[str], source: list[str], where: str) -> dict[str, str]:
    """The renames of ``renames`` the table (columns ``table``) still needs, given the source's columns;
    a rename that cannot apply is a :class:`ConfigError` naming it, raised before anything is written."""
    pending = {}
    for old, new in renames.items():
        if new in table and old not in table:
            continue  # applied by an earlier run
        if old not in table:
            raise ConfigError(f"{where}: renames {old!r} -> {new!r}, but the table has no column {old!r} "
                              f"(its columns are {table}).")
        if new in table:
            raise ConfigError(f"{where}: renames {old!r} -> {new!r}, but the table has both columns; "
                              "drop the rename from the options.")
        if new not in source or old in source:
            raise ConfigError(f"{where}: renames {old!r} -> {new!r}, but the source has "
                              f"{'both columns' if new in source else f'no column {new!r}'} "
                              f"(its columns are {source}). Nothing was written.")
        pending[old] = new
    return pending


def apply_renames(spark: SparkSession, uri: str, renames: dict[str, str], run_id: str | None, base: int) -> int:
    """Rename the columns of the Delta table at ``uri`` (version ``base``) as one commit each, turning
    column mapping on first when it is off; returns the new head version. A commit by another run
    meanwhile is a :class:`ConcurrentWriteError` (ALTER TABLE commits are not idempotent writes, so
    they are checked after the fact: every commit since ``base`` must be this run's)."""
    table = delta_path(uri)
    detail = one_row(spark.sql(f"DESCRIBE DETAIL {table}").select("properties"))
    with commit_metadata(spark, {"job": RENAME_JOB, "run_id": run_id, "renames": {}}):
        if (detail["properties"] or {}).get("delta.columnMapping.mode") != "name":
            spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    for old, new in renames.items():
        with commit_metadata(spark, {"job": RENAME_JOB, "run_id": run_id, "renames": {old: new}}):
            spark.sql(f"ALTER TABLE {table} RENAME COLUMN {quoted(old)} TO {quoted(new)}")
    newer = [e for e in history(uri, 20) if e["version"] > base]
    others = [e for e in newer if e["metadata"].get("run_id") != run_id]
    if others:
        raise ConcurrentWriteError(
            f"Another run committed version {others[-1]['version']} of {uri} while this run was renaming "
            f"columns {renames} on top of version {base}; retry after it finishes (the renames already made "
            "are kept and not made again).")
    version: int = max(e["version"] for e in newer)
    return version


def is_rename(entry: dict[str, Any]) -> bool:
    """Whether the history entry is one of a rename's commits (no rows, no Change Data Feed)."""
    job: str | None = entry["metadata"].get("job")
    return job == RENAME_JOB


def restored_version(entry: dict[str, Any]) -> int | None:
    """The version a RESTORE commit (this project's, which record it) brought back; None for others."""
    restored = entry["metadata"].get("restored_version")
    return int(restored) if entry.get("operation") == "RESTORE" and restored is not None else None


def names_at_head(entries: list[dict[str, Any]], version: int, head: int | None = None) -> dict[str, str]:
    """``{name at version: name at head}`` for the columns renamed after ``version`` up to ``head``
    (default: the newest of ``entries``, the table's history). A restore in between resets the names
    to those of the version it restored, mapped from ``version``'s forward or backward."""
    steps = [e for e in entries if e["version"] > version and (head is None or e["version"] <= head)
             and (is_rename(e) or restored_version(e) is not None)]
    current: dict[str, str] = {}  # name at version -> its name after the commits seen so far
    for entry in sorted(steps, key=lambda e: e["version"]):
        restored = restored_version(entry)
        if restored is not None:
            if restored >= version:
                current = names_at_head(entries, version, restored)
            else:
                current = {new: old for old, new in names_at_head(entries, restored, version).items()}
            continue
        renamed = entry["metadata"].get("renames") or {}
        carried = set(current.values())  # names that are already some original column's
        for original, name in current.items():
            current[original] = renamed.get(name, name)
        current.update({old: new for old, new in renamed.items() if old not in carried})
    return {old: new for old, new in current.items() if old != new}


def to_head_names(frame: DataFrame, entries: list[dict[str, Any]], version: int, head: int | None = None) -> DataFrame:
    """``frame``, read at ``version``, with its renamed columns under their names at ``head`` (default:
    the newest of ``entries``)."""
    renamed = {old: new for old, new in names_at_head(entries, version, head).items() if old in frame.columns}
    return frame.withColumnsRenamed(renamed) if renamed else frame


def feed_ranges(entries: list[dict[str, Any]], start: int, end: int) -> list[tuple[int, int]]:
    """Versions [start, end] as the ranges whose Change Data Feed Delta reads in one piece: without
    the rename commits (they change no row) and with each restore starting a piece of its own (it may
    bring back names of an older schema)."""
    renames = {e["version"] for e in entries if is_rename(e) and start <= e["version"] <= end}
    restores = {e["version"] for e in entries if e.get("operation") == "RESTORE" and start < e["version"] <= end}
    ranges, low = [], start
    for version in sorted(renames | restores):
        if low <= version - 1:
            ranges.append((low, version - 1))
        low = version + 1 if version in renames else version
    if low <= end:
        ranges.append((low, end))
    return ranges


def renamed_columns(entries: list[dict[str, Any]], names: list[str], version: int) -> dict[str, tuple[str, int]]:
    """``{name: (its name at version, the version that renamed it)}`` for those of ``names`` a rename
    commit up to ``version`` renamed (a name renamed twice: its last name)."""
    found = {}
    for entry in sorted((e for e in entries if is_rename(e) and e["version"] <= version), key=lambda e: e["version"]):
        for old in entry["metadata"].get("renames") or {}:
            if old in names and old not in found:
                found[old] = (names_at_head(entries, entry["version"] - 1, version).get(old, old), entry["version"])
    return {old: (new, at) for old, (new, at) in found.items() if new != old}
