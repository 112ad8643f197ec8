"""Consumer commit state: per (table, consumer) the last version a sink delivered completely.

This is the heart of the commit protocol: a diff reads changes in (committed, V]; only a sink that
finished delivering V moves ``committed`` to V. A failed or killed sync leaves it where it was, so the
next run resends everything not yet acknowledged.

``_system/consumers`` is append-only (see :mod:`spark_jobs.state.system_tables`): each commit appends one
row per (table, consumer) with ``seq``, that pair's commit sequence (1, 2, ...), and a unique
``commit_id``; the committed version of a pair is the one in its row with the highest ``seq``. Rows
an older release wrote (one per pair, updated in place, no ``seq``) count as sequence 0. To see the
current state as a table::

    SELECT table, consumer, max_by(committed_version, coalesce(seq, 0)) AS committed_version
    FROM delta.`<warehouse>/_system/consumers` GROUP BY table, consumer

A sync's commit is compare-and-set (:func:`require_position` before delivery, :func:`commit_from`
after it): it commits V only if the pair's newest commit is still the one the sync started from.
The append is a Delta idempotent write with ``txnAppId`` = the pair and ``txnVersion`` = the next
sequence, so of two commits that started from the same sequence Delta lets exactly one through: the
other is skipped (it started after the winner committed) or fails with a concurrent-transaction
conflict (it overlapped the winner). Either way the loser reads the winner's row back and fails with
:class:`~spark_jobs.errors.StaleCommitError`; the committed version never moves backwards. Delta
skips such a write without a word, so the sync looks for its own commit afterwards: each append
carries its ``commit_id`` as the commit's ``userMetadata``, found in the table's newest history
entries (one read of the log's last commits) and, failing that, by the row itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from spark_jobs.state import system_tables
from spark_jobs.contract import Warehouse
from spark_jobs.errors import AlreadyCommittedError, StaleCommitError
from spark_jobs.delta.lake import history

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

TABLE = "consumers"
DDL = ("table STRING, consumer STRING, committed_version BIGINT, committed_at TIMESTAMP, run_id STRING, "
       "seq BIGINT, commit_id STRING")


@dataclass(frozen=True)
class Position:
    """A (table, consumer)'s newest commit: the version (None: never committed) and its sequence."""
    table: str
    consumer: str
    version: int | None = None
    seq: int = 0
    run_id: str | None = None
    committed_at: datetime | None = None
    commit_id: str | None = None

    def describe(self) -> str:
        if self.version is None:
            return "nothing committed"
        return f"version {self.version} committed by run {self.run_id!r} at {self.committed_at}"


def latest(spark: SparkSession, wh: Warehouse, where: Column | None=None) -> DataFrame:
    """One row per (table, consumer) — its newest commit — among the rows matching ``where``."""
    from pyspark.sql import functions as F

    rows = system_tables.read(spark, wh.system(TABLE), DDL)
    if where is not None:
        rows = rows.where(where)
    # max of a struct compares field by field: the highest sequence wins (ties cannot happen for a
    # sync's commits; for unconditional ones the later commit wins).
    newest = F.max(F.struct(F.coalesce(F.col("seq"), F.lit(0)).alias("seq"), "committed_at", "committed_version",
                            "run_id", "commit_id")).alias("newest")
    return rows.groupBy("table", "consumer").agg(newest).select("table", "consumer", "newest.*")


def positions(spark: SparkSession, wh: Warehouse, where: Column | None) -> dict[tuple[str, str], Position]:
    return {(r["table"], r["consumer"]): Position(r["table"], r["consumer"], int(r["committed_version"]),
                                                  int(r["seq"]), r["run_id"], r["committed_at"], r["commit_id"])
            for r in latest(spark, wh, where).collect()}  # one row per tracked pair


def position(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str) -> Position:
    found = positions(spark, wh, _pair_filter([(table_rel, consumer)]))
    return found.get((table_rel, consumer), Position(table_rel, consumer))


def committed_version(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str) -> int | None:
    return position(spark, wh, table_rel, consumer).version


def committed_versions(spark: SparkSession, wh: Warehouse, consumer_prefix: str) -> dict[tuple[str, str], int]:
    """(table, consumer) -> committed version for every consumer whose name starts with the prefix:
    one read for a job that tracks several tables (a wide table's sources)."""
    from pyspark.sql import functions as F

    found = positions(spark, wh, F.col("consumer").startswith(consumer_prefix))
    return {pair: p.version for pair, p in found.items() if p.version is not None}


def commit(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str, version: int, run_id: str | None) -> None:
    commit_all(spark, wh, {(table_rel, consumer): version}, run_id)


def commit_all(spark: SparkSession, wh: Warehouse, versions: dict[tuple[str, str], int], run_id: str | None) -> None:
    """Commit several (table, consumer) versions in one transaction (one append), unconditionally:
    for jobs that guard their own progress, such as widen (the wide table's commits record what they
    merged)."""
    if not versions:
        return
    current = positions(spark, wh, _pair_filter(list(versions)))
    next_seq = {pair: (current[pair].seq if pair in current else 0) + 1 for pair in versions}
    _append(spark, wh, [(t, c, v, next_seq[(t, c)]) for (t, c), v in versions.items()], run_id)


def require_position(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str, from_version: int | None,
                     to_version: int) -> Position:
    """The pair's position, provided a sync from ``from_version`` to ``to_version`` may commit over it;
    checked before delivery so that a stale sync fails before sending anything.

    A sync from version F commits only over F. A sync from nothing (the first one, or a full resync)
    commits over nothing or over any version up to its own target — never backwards. A sync whose
    target the pair has already committed (another run delivered it) raises
    :class:`~spark_jobs.errors.AlreadyCommittedError`, a stale commit with nothing left to send."""
    current = position(spark, wh, table_rel, consumer)
    if from_version is None:
        fits = current.version is None or current.version <= to_version
    else:
        fits = current.version == int(from_version)
    if not fits and current.version == to_version:
        raise AlreadyCommittedError(f"Consumer {consumer!r} of {table_rel} already has {current.describe()}: "
                                    "the version this sync would deliver. Nothing was sent.")
    if not fits:
        raise StaleCommitError(_stale_message(current, from_version, to_version, delivered=False))
    return current


def commit_from(spark: SparkSession, wh: Warehouse, expected: Position, version: int, run_id: str | None) -> None:
    """Commit ``version`` for the pair only if its newest commit is still ``expected``
    (compare-and-set), else raise :class:`StaleCommitError`."""
    seq = expected.seq + 1
    app_id = json.dumps([expected.table, expected.consumer])
    try:
        commit_id = _append(spark, wh, [(expected.table, expected.consumer, version, seq)], run_id, txn=(app_id, seq))
    except Exception as exc:
        if not system_tables.has_condition(exc, system_tables.CONCURRENT_TRANSACTION):
            raise
        commit_id = None
    # Delta skips an idempotent write silently when the sequence was taken before it started: read back.
    if commit_id is None or not (_in_recent_history(spark, wh, commit_id) or _landed(spark, wh, commit_id)):
        now = position(spark, wh, expected.table, expected.consumer)
        raise StaleCommitError(_stale_message(now, expected.version, version, delivered=True))


def _append(spark: SparkSession, wh: Warehouse, rows: list[tuple[str, str, int, int]], run_id: str | None,
            txn: tuple[str, int] | None = None) -> str:
    """Append the rows as one commit; returns the commit's id."""
    commit_id = uuid.uuid4().hex
    now = datetime.now(timezone.utc)
    frame = spark.createDataFrame([(t, c, int(v), now, run_id, seq, commit_id) for t, c, v, seq in rows], DDL)
    system_tables.append(frame, wh.system(TABLE), txn, user_metadata=json.dumps({"commit_id": commit_id}))
    return commit_id


#: How many of the table's newest commits :func:`_in_recent_history` looks at: more commits than this
#: since a sync's own (many consumers committing at once) make it look the row up instead.
RECENT_COMMITS = 20


def _in_recent_history(spark: SparkSession, wh: Warehouse, commit_id: str) -> bool:
    """Whether the commit of ``commit_id`` is among the table's newest commits: a read of the log's
    last commit files, where :func:`_landed` plans and runs a scan. False is no answer: the commit
    may be older than those."""
    return any(e["metadata"].get("commit_id") == commit_id for e in history(spark, wh.system(TABLE), RECENT_COMMITS))


def _landed(spark: SparkSession, wh: Warehouse, commit_id: str) -> bool:
    """Whether the row of ``commit_id`` is in the table. The transaction id lets at most one commit per
    (pair, sequence) through, so the sync's row being there means its compare-and-set won. A lookup by
    the unique id: the files' statistics on ``commit_id`` skip every file but the one appended, where
    reading the pair's position aggregates all of its rows."""
    from pyspark.sql import functions as F

    rows = system_tables.read(spark, wh.system(TABLE), DDL)
    return bool(rows.where(F.col("commit_id") == commit_id).select("commit_id").limit(1).collect())


def _pair_filter(pairs: list[tuple[str, str]]) -> Column:
    from functools import reduce

    from pyspark.sql import functions as F

    return reduce(lambda a, b: a | b, [(F.col("table") == t) & (F.col("consumer") == c) for t, c in pairs])


def _stale_message(current: Position, from_version: int | None, to_version: int, delivered: bool) -> str:
    start = "nothing committed" if from_version is None else f"version {from_version}"
    sent = ("It has already sent its changes; the destination converges with the next sync, which "
            f"starts from version {current.version}. " if delivered else "Nothing was sent. ")
    return (
        f"Consumer {current.consumer!r} of {current.table}: this sync of version {to_version} started from "
        f"{start}, but the consumer now has {current.describe()}. Committing would skip or undo that "
        f"commit, so this sync does not commit. {sent}If this is an old task re-run after newer ones, "
        "there is nothing to do: the newer runs delivered the changes. Otherwise run the diff again, so "
        "the sync starts from the committed version."
    )
