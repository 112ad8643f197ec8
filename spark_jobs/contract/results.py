"""One result per job: what it returns to Airflow (the task's XCom) and to the lineage table.

Every result names the table versions it read and wrote (``inputs``/``outputs``: lists of
:func:`~spark_jobs.contract.layout.table_ref`); :meth:`~spark_jobs.contract.base.JobResult.to_dict`
is the JSON the entry point writes, in this field order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_jobs.contract.base import JobResult, omitted_when_none

Ref = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class SnapshotResult(JobResult):
    table: str
    uri: str
    version: int
    logical_date: str | None
    run_id: str | None
    primary_key: list[str]
    rows: int | None
    inserted: int
    updated: int
    deleted: int
    reused: bool
    read: str | None  # full_extract, change_data_feed, or None for a re-run that read nothing
    inputs: list[Ref]
    outputs: list[Ref]
    replayed: dict[str, int] | None = None  # on_past_date="rebuild": later date -> its new version
    # a Delta source replaced at its path since the last run: what that run read ({"table_id", "version"}),
    # the new table being read in full (spark_jobs.sources.change_feed.replaced)
    source_replaced: dict[str, Any] | None = omitted_when_none()


@dataclass(frozen=True, kw_only=True)
class BackfillResult(JobResult):
    table: str
    uri: str
    version: int
    versions: dict[str, int]  # logical date -> version
    reused: list[str]  # the dates that were already recorded
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class DiffResult(JobResult):
    table: str
    consumer: str
    primary_key: list[str]
    columns: list[str]
    from_version: int | None
    to_version: int
    full_resync: bool
    changes: str  # the change set, relative to the warehouse
    changes_uri: str
    counts: dict[str, int]  # insert, update, delete
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class SyncResult(JobResult):
    table: str
    consumer: str
    mode: str
    destination: dict[str, Any]  # without secrets_env
    from_version: int | None
    to_version: int
    dry_run: bool
    planned: dict[str, int]  # destination operation -> records
    resent: int  # records sent again from the reject ledger
    inputs: list[Ref]
    committed: bool
    # why nothing was sent: another run already delivered and committed this version (a cleared old task)
    already_delivered: str | None = omitted_when_none()
    plan: Ref | None = omitted_when_none()  # dry runs: where the operations were written
    stats: dict[str, Any]
    delivery_s: float | None = omitted_when_none()  # wall time of the delivery itself
    delivered_from: str | None = omitted_when_none()  # "driver" (a small change set) or "executors"
    # the destination's most frequent reasons for refusing records, values taken out: [{reason, count}]
    reject_reasons: list[dict[str, Any]] | None = omitted_when_none()
    outputs: list[Ref]
    run: dict[str, Any] | None = omitted_when_none()  # the run history row's outcome


@dataclass(frozen=True, kw_only=True)
class RestoreResult(JobResult):
    table: str
    uri: str
    version: int
    restored_version: int
    logical_date: str | None
    reused: bool
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class SavepointResult(JobResult):
    table: str
    version: int
    logical_date: str | None
    savepoint: str
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class HistoryResult(JobResult):
    table: str
    uri: str
    version: int
    rows: int
    versions: int  # snapshot versions the intervals were derived from
    primary_key: list[str]
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class MaintenanceResult(JobResult):
    table: str
    uri: str
    optimized: dict[str, Any] | None
    vacuumed: dict[str, Any] | None
    version: int
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class RetentionResult(JobResult):
    dry_run: bool
    deleted: dict[str, list[str]]  # change_sets, jobs, plans -> warehouse-relative paths (dry run: would be)
    inputs: list[Ref]
    outputs: list[Ref]


@dataclass(frozen=True, kw_only=True)
class WidenResult(JobResult):
    table: str
    uri: str
    version: int
    wide: str
    primary_key: list[str]
    sources: dict[str, dict[str, Any]]  # source -> {table, from_version, to_version}
    stats: dict[str, dict[str, int]]  # step part -> {source_rows, inserted, updated}
    inputs: list[Ref]
    outputs: list[Ref]
