"""The Delta primitives every job shares: commit metadata, history, system tables, write-conflict retries.

The lake layout itself (which table lives where) is part of the contract with Airflow:
:mod:`spark_jobs.contract.layout`.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from spark_jobs import lake_io
from spark_jobs.errors import ConfigError, CorruptTableError, is_write_conflict
from spark_jobs.delta.key_pruning import listed_keys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"

# Snapshot and wide tables record every change so diffs are reads of the Change Data Feed, and use
# deletion vectors so a MERGE that touches few rows of a big table does not rewrite whole files (a
# small snapshot table's MERGE rewrites them all the same: REWRITE_BELOW_ROWS).
TABLE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "true",
}


#: The operations of the maintenance job's commits: they reorganise or delete files and change no row
#: (Delta writes them with ``dataChange`` false; their Change Data Feed is empty).
KEEPING_ROWS = ("OPTIMIZE", "VACUUM START", "VACUUM END")


@contextlib.contextmanager
def commit_metadata(spark: SparkSession, metadata: dict[str, Any]) -> Iterator[None]:
    """Attach ``metadata`` (JSON) to the Delta commits made inside the block.

    The logical date and run id travel in each commit's ``userMetadata`` so that a version can be
    mapped back to the Airflow run that wrote it without any side table.
    """
    spark.conf.set(METADATA_CONF, json.dumps(metadata, sort_keys=True, default=str))
    try:
        yield
    finally:
        spark.conf.unset(METADATA_CONF)


#: Delta's idempotent-write settings: a commit made while they are set records (app id, version) in
#: the table's log, and Delta refuses it when that app id already recorded a version >= this one.
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
#: The app id under which snapshot and widen runs claim the next version of the table they write.
WRITER_APP_ID = "airflow-reverse-etl/writer"


@contextlib.contextmanager
def on_top_of(spark: SparkSession, base_version: int) -> Iterator[None]:
    """Let the Delta commits made inside the block land only directly on top of ``base_version``, the
    version the job read when it computed what to write.

    A job that compares a source with the table (a snapshot's diff, a wide table's fold) and then
    writes the difference must not commit over a version it did not read: the difference would be
    applied to other data (issue 15 §7.1: a run tagged a head another run had just written). Delta's
    own conflict detection does not see this when the other commit landed before this one's MERGE
    started, nor for metadata-only or blind-append commits. So every such write is a Delta idempotent
    write claiming version ``base_version + 1`` under one app id: of two runs that read the same
    version exactly one commits; the other fails with a concurrent-transaction conflict or is skipped,
    which :func:`committed_since` tells. Only one commit may be made inside the block."""
    spark.conf.set(TXN_APP_ID_CONF, WRITER_APP_ID)
    spark.conf.set(TXN_VERSION_CONF, str(int(base_version) + 1))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID_CONF)
        spark.conf.unset(TXN_VERSION_CONF)


def committed_since(uri: str, base_version: int, run_id: str | None,
                    what: str) -> dict[str, Any] | None:
    """The history entry this run (``run_id``) committed after ``base_version``, None if nothing was
    committed since; a commit by another run since ``base_version`` raises
    :class:`~spark_jobs.errors.ConcurrentWriteError` (this run's write, made :func:`on_top_of`
    ``base_version``, was refused or skipped)."""
    from spark_jobs.errors import ConcurrentWriteError

    newer = [e for e in history(uri, 20) if e["version"] > base_version]
    own = next((e for e in newer if e["metadata"].get("run_id") == run_id), None)
    others = [e for e in newer if e["metadata"].get("run_id") != run_id and e["metadata"].get("job")]
    if own is None and others:
        other = others[-1]
        raise ConcurrentWriteError(
            f"Another run ({other['metadata'].get('job')} {other['metadata'].get('run_id')!r}, logical date "
            f"{other['metadata'].get('logical_date')}) committed version {other['version']} of {what} while this "
            f"run was writing changes computed against version {base_version}; nothing of this run was "
            f"committed. Retry after it finishes (a retry starts from the new version).")
    return own


def own_commit(uri: str, metadata: dict[str, Any], base: int) -> dict[str, Any]:
    """The commit this run just made on top of version ``base``; another run's commit in its place is a
    :class:`~spark_jobs.errors.ConcurrentWriteError`."""
    own = committed_since(uri, base, metadata["run_id"], f"table {uri}")
    if own is None:
        raise RuntimeError(f"The commit of run {metadata['run_id']} is not in the last 20 versions of {uri}")
    return own


def own_commit_or_empty(spark: SparkSession, uri: str, metadata: dict[str, Any], base: int) -> dict[str, Any]:
    """The history entry of this run's commit on top of ``base``, run inside
    :func:`on_top_of` ``base`` after the MERGE (or instead of it)."""
    own = committed_since(uri, base, metadata["run_id"], f"table {uri}")
    if own is not None:
        return own
    # Nothing changed, and the MERGE committed nothing (or was skipped). Record the logical date all
    # the same with an empty append: every run is one version, and its Change Data Feed is empty.
    # Unlike a metadata-only commit (ALTER TABLE), an append is an idempotent write that honours
    # on_top_of, so it cannot tag a head another run wrote since this one compared (§7.1).
    spark.read.format("delta").load(uri).limit(0).write.format("delta").mode("append").save(uri)
    return own_commit(uri, metadata, base)


def delta_path(uri: str) -> str:
    """The SQL identifier of the Delta table at ``uri`` (``delta.`uri` ``). Every Delta operation goes
    through SQL or the DataFrame API: they work both in a classic session and over Spark Connect,
    where the Python ``DeltaTable`` API needs a server plugin that is not published for Spark 4.2."""
    return "delta.`" + uri.replace("`", "``") + "`"


def is_delta_table(uri: str) -> bool:
    """Whether ``uri`` holds a Delta table: its ``_delta_log`` has a commit (a listing on the driver)."""
    return lake_io.head_version(uri) is not None


def damaged_log(uri: str, what: str) -> CorruptTableError:
    return CorruptTableError(
        f"The Delta log of {uri} is damaged: {what}. Nothing was written or sent. Restore the table's _delta_log "
        "from a backup; if the damaged file is the newest commit and losing that version is acceptable, delete it (and "
        "its .crc), which returns the table to the version before, and re-run the run that wrote it.")


def table_history(uri: str, limit: int | None = None) -> list[dict[str, Any]] | None:
    """The table's commits, newest first (:func:`spark_jobs.lake_io.table_history`, read
    from the commit files on the driver), or None when ``uri`` holds no Delta table: the existence check
    and the history in one read of the table's log. A job reads a table's history once and passes the
    entries on. A damaged commit file is a :class:`~spark_jobs.errors.CorruptTableError` naming it."""
    try:
        return lake_io.table_history(uri, limit)
    except lake_io.DamagedCommit as exc:
        raise damaged_log(uri, str(exc)) from exc


def table_id(uri: str) -> str | None:
    """The id of the Delta table at ``uri`` (:func:`spark_jobs.lake_io.table_id`: one
    listing and the first lines of one file), None when there is none: which table a snapshot read, so
    that a table replaced at the same path is told from the one recorded."""
    try:
        return lake_io.table_id(uri)
    except lake_io.DamagedCommit as exc:
        raise damaged_log(uri, str(exc)) from exc


def history(uri: str, limit: int | None = None) -> list[dict[str, Any]]:
    """:func:`table_history` of a table that must exist: none at ``uri`` is a
    :class:`~spark_jobs.errors.ConfigError`."""
    entries = table_history(uri, limit)
    if entries is None:
        raise ConfigError(f"There is no Delta table at {uri}")
    return entries


def require_intact(entries: list[dict[str, Any]] | None, uri: str) -> list[dict[str, Any]] | None:
    """``entries`` (a table's history) of a table only the jobs write, refused when a version has no
    commit information: every commit the jobs make carries it, so its commit file was emptied or cut
    before it (Delta reads an empty commit file as a version that changed nothing). Writing on top
    would bury the damage; a diff or a wide table's fold would silently skip the version's changes,
    and a sync would deliver nothing and commit."""
    broken = [e["version"] for e in entries or [] if not e.get("operation")]
    if broken:
        raise damaged_log(uri, f"version(s) {broken} have no commit information (an empty or cut commit file)")
    return entries


def latest_version(uri: str) -> int:
    version: int = history(uri, 1)[0]["version"]
    return version


def commit_info(uri: str, version: int, entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The history entry of ``version`` (among ``entries``, the table's history if already read); a
    version that does not exist is a :class:`ConfigError`."""
    entries = history(uri) if entries is None else entries
    for entry in entries:
        if entry["version"] == version:
            return entry
    raise ConfigError(f"Delta table {uri} has no version {version} (latest is {entries[0]['version']})")


# System tables are written by many tasks at once (every sink commits to _system/consumers); Delta's
# optimistic concurrency rejects the loser of a race, which simply tries again.
retry_on_conflict = retry(
    retry=retry_if_exception(is_write_conflict),
    wait=wait_random_exponential(multiplier=0.2, max=5),
    stop=stop_after_attempt(8),
    reraise=True,
)


def ensure_system_table(spark: SparkSession, uri: str, ddl: str) -> None:
    """Create a system table with ``ddl`` (column list) if it does not exist yet."""
    retry_on_conflict(
        lambda: spark.sql(f"CREATE TABLE IF NOT EXISTS {delta_path(uri)} ({ddl}) USING delta")
    )()


#: Whether a MERGE first copies its source: Delta does unless the source reads Delta tables only,
#: because its passes (find the touched files, then write) must see the same rows.
MATERIALIZE_SOURCE_CONF = "spark.databricks.delta.merge.materializeSource"
#: Delta's schema evolution for MERGE: assignments to columns the table lacks add them.
AUTO_MERGE_CONF = "spark.databricks.delta.schema.autoMerge.enabled"
#: Whether a MERGE on a table with deletion vectors writes them (Delta's default) or rewrites the
#: files it touches, as on a table without the feature.
PERSISTENT_DV_CONF = "spark.databricks.delta.merge.deletionVectors.persistent"
#: A table recorded with fewer rows has the files its MERGEs touch rewritten instead of deletion
#: vectors written. Writing vectors is a few more Spark jobs per MERGE (the touched rows' positions,
#: the vector files), a fixed cost that pays only when the touched files are large; the table keeps
#: the feature, and its readers read either. Measured (1 % of rows changed, local[2], best of two):
#: 1k rows 3.0 s rewritten / 4.2 s with vectors, 30k 3.2 / 4.1, 100k 3.6 / 3.7, 300k 4.9 / 4.3,
#: 1M 10.7 / 6.5; a warm 1k-row snapshot over Spark Connect 7.7 -> 5.2 s (29 -> 21 Spark jobs).
REWRITE_BELOW_ROWS = 100_000


def merge_into(spark: SparkSession, uri: str, source: DataFrame, on: str, *clauses: str, checkpointed: bool = False,
               key: Sequence[str] = (), target_rows: int | None = None, matching: DataFrame | None = None) -> None:
    """``MERGE INTO`` the Delta table at ``uri`` (alias ``t``) from the frame ``source`` (alias ``s``)
    with the ``WHEN ...`` ``clauses`` in order. The frame is a temporary view of this session for
    the statement's duration (a unique name: jobs may merge from several threads).

    ``key``: the columns ``on`` matches by equality. A source of few rows then also lists their keys
    in the ON clause, so that the target's rows are filtered before the join
    (:mod:`spark_jobs.delta.key_pruning`); ``matching``: the source's rows that can match a target row,
    when the caller knows the others cannot (keys the table lacks), whose keys alone are listed.

    ``checkpointed``: ``source`` is a local checkpoint (``localCheckpoint(eager=True)``), rows
    already computed with no lineage left to re-run, so every pass of the MERGE reads the same rows
    (or fails if the blocks are lost, never sees other ones). Delta's own copy of the source is then
    a second materialization of the same rows, and is skipped.

    ``target_rows``: the table's row count, when the caller knows it; under
    :data:`REWRITE_BELOW_ROWS` the MERGE rewrites the files it touches instead of writing deletion
    vectors."""
    import uuid

    listed = listed_keys(source if matching is None else matching, key) if key else None
    if listed is not None:
        on = f"{on} AND {listed}"
    view = f"aretl_merge_source_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    settings = {MATERIALIZE_SOURCE_CONF: "none"} if checkpointed else {}
    if target_rows is not None and target_rows < REWRITE_BELOW_ROWS:
        settings[PERSISTENT_DV_CONF] = "false"
    try:
        with session_conf(spark, settings):
            spark.sql(f"MERGE INTO {delta_path(uri)} AS t USING {view} AS s ON {on} " + " ".join(clauses))
    finally:
        spark.catalog.dropTempView(view)


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` set in the session for the block; afterwards each is what it was before (unset if
    it was), so a value the user's session or server configured outlives the job's statements."""
    previous = {name: spark.conf.get(name, None) for name in settings}
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, earlier)


def assignments(values: dict[str, str]) -> str:
    """SQL ``target = expression, ...`` for a MERGE's ``UPDATE SET``."""
    return ", ".join(f"{target} = {expression}" for target, expression in values.items())


def insert_values(values: dict[str, str]) -> str:
    """SQL ``(target, ...) VALUES (expression, ...)`` for a MERGE's ``INSERT``."""
    return f"({', '.join(values)}) VALUES ({', '.join(values.values())})"
