"""One spec per job: its fields, their defaults, and the rules a valid spec follows."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from spark_jobs.contract.base import JobSpec
from spark_jobs.contract.catalogue import destination
from spark_jobs.contract.destinations import DeliveryPolicy, delivery_policy
from spark_jobs.contract.options import (
    Invalid,
    flag,
    fraction,
    integer,
    mapping,
    name_map,
    names,
    non_negative,
    one_of,
    option,
    optional,
    relative_path,
    path_name,
    required_names,
    resolved_at_run_time,
    required_text,
    text,
)
from spark_jobs.contract.key_types import check_key_types, ddl_types
from spark_jobs.contract.layout import history_rel, parse_logical_date, snapshot_rel, table_rel
from spark_jobs.contract.sources import source
from spark_jobs.errors import ConfigError
from spark_jobs.contract.wide_table import WideTable, parse as parse_wide_table

#: How a sink turns a change set into destination operations (see :mod:`spark_jobs.jobs.sync`).
SINK_MODES = ("upsert", "insert", "update", "mirror")
#: what a snapshot does with a logical date older than the newest recorded one: refuse it, or
#: rebuild the history forward from it (spark_jobs.jobs.rebuild)
PAST_DATE_POLICIES = ("refuse", "rebuild")
DEFAULT_RETAIN_HOURS = 168.0  # Delta's own default (delta.deletedFileRetentionDuration = 7 days)
DEFAULT_MARGIN_S = 300.0
#: How far after now a snapshot's logical date may lie by default: a day, for schedules in time zones
#: ahead of the machine's and clocks a little off.
DEFAULT_FUTURE_MARGIN_S = 86400.0
#: Consumed change sets a sync keeps per (consumer, table) by default, newest first: enough to look
#: at what the last syncs sent; the rest is deleted after each successful sync.
DEFAULT_KEEP_CHANGE_SETS = 3


def require_one_target(version: Any, target_logical_date: Any, where: str) -> None:
    """A restore or savepoint names its version one way: by number or by logical date."""
    if (version is None) == (target_logical_date is None):
        raise ConfigError(f"{where}: give exactly one of 'version' or 'target_logical_date' "
                          f"(got version={version!r}, target_logical_date={target_logical_date!r})")


def count(value: Any) -> int:
    """A whole number >= 0."""
    if integer(value) < 0:
        raise Invalid("a whole number >= 0")
    return integer(value)


#: The kinds of change a diff counts (its result's ``counts``).
CHANGE_KINDS = ("insert", "update", "delete")


def change_counts(value: Any) -> dict[str, int]:
    """``{insert|update|delete: rows}``, as a diff's result counts its change set."""
    value = mapping(value)
    unknown = sorted(set(value) - set(CHANGE_KINDS))
    if unknown:
        raise Invalid(f"counts per kind of change ({', '.join(CHANGE_KINDS)}), not {unknown}")
    return {kind: count(n) for kind, n in value.items()}


def renaming(value: Any) -> dict[str, str]:
    """``{old column: new column}``: names, each new name once."""
    given = mapping(value)
    if not all(isinstance(k, str) and k and isinstance(v, str) and v and k != v for k, v in given.items()):
        raise Invalid("a mapping of column names to different new column names")
    if len(set(given.values())) != len(given):
        raise Invalid("a mapping that renames each column to a distinct name")
    return given


def wide_table(value: Any) -> WideTable:
    return value if isinstance(value, WideTable) else parse_wide_table(value)


@dataclass(frozen=True, kw_only=True)
class SnapshotSpec(JobSpec):
    """Record ``source`` as one new version of ``snapshots/<name>`` (:mod:`spark_jobs.jobs.snapshot`)."""

    job: ClassVar[str] = "snapshot"
    runner: ClassVar[str] = "spark_jobs.jobs.snapshot:run_snapshot"
    name: str = option("", path_name)
    source: dict[str, Any] = option(check=source, doc="what to read (:mod:`spark_jobs.contract.sources`)")
    primary_key: list[str] = option(check=required_names, factory=list)
    allow_schema_evolution: bool = option(False, flag)
    renames: dict[str, str] = option(check=renaming, factory=dict)  # spark_jobs.delta.renames
    partition_by: list[str] = option(check=names, factory=list)  # spark_jobs.delta.partitions
    on_past_date: str = option("refuse", one_of(*PAST_DATE_POLICIES))  # spark_jobs.jobs.rebuild
    # how far after now a logical date may lie: a typo such as 2206-01-03, once recorded, would refuse
    # every real date as older than the newest
    future_margin_s: float = option(DEFAULT_FUTURE_MARGIN_S, non_negative)

    @property
    def rel(self) -> str:
        return snapshot_rel(self.name)

    def validate(self) -> None:
        key = self.source.get("key") if self.source.get("format") == "kafka" else None
        if key and names(key) != self.primary_key:
            raise ConfigError(f"Snapshot {self.name}: the kafka source's key {names(key)} must be the primary key "
                              f"{self.primary_key} (each message's key is the row's primary key)")
        _check_declared_key_types(self.name, self.source, self.primary_key)

    @classmethod
    def check_static(cls, **values: Any) -> None:
        """The field checks, and the key's types where the source declares them (an upsert-kafka
        source's ``value_schema``): the one source whose key types are known when the DAG is parsed."""
        super().check_static(**values)
        source, key = values.get("source"), values.get("primary_key")
        if isinstance(source, dict) and key is not None and not resolved_at_run_time([source, key]):
            _check_declared_key_types(str(values.get("name")), source, names(key))


def _check_declared_key_types(name: str, source: dict[str, Any], key: list[str]) -> None:
    """Refuse a key type an upsert-kafka source's ``value_schema`` declares (other sources' types are
    known once they are read: the snapshot job refuses them then, before writing)."""
    if source.get("format") == "kafka":
        declared = ddl_types(str(source.get("value_schema") or "")) or {}
        check_key_types(declared, key, f"Snapshot {name}: kafka source {source.get('topic')!r}")


@dataclass(frozen=True, kw_only=True)
class BackfillSpec(SnapshotSpec):
    """One snapshot per logical date, in date order, in one application (:mod:`spark_jobs.jobs.backfill`)."""

    job: ClassVar[str] = "backfill"
    runner: ClassVar[str] = "spark_jobs.jobs.backfill:run_backfill"
    logical_dates: list[str] = option(check=lambda v: [text(d) for d in required_list(v)], factory=list)

    def snapshots(self) -> list[SnapshotSpec]:
        """The snapshot run of each date, oldest first; each has its own run id."""
        own = {f.name: getattr(self, f.name) for f in fields(SnapshotSpec)}
        return [SnapshotSpec(**{**own, "logical_date": date, "run_id": f"{self.run_id}#{date}"})
                for date in sorted(self.logical_dates, key=parse_logical_date)]


@dataclass(frozen=True, kw_only=True)
class DiffSpec(JobSpec):
    """The net change set of ``table`` since ``consumer``'s committed version (:mod:`spark_jobs.jobs.diff`)."""

    job: ClassVar[str] = "diff"
    runner: ClassVar[str] = "spark_jobs.jobs.diff:run_diff"
    table: str = option("", relative_path)
    consumer: str = option("", path_name)
    to_version: int | None = option(None, optional(integer))
    primary_key: list[str] = option(check=names, factory=list)  # default: the one the table records
    columns: list[str] = option(check=names, factory=list)  # default: all
    full_resync: bool = option(False, flag)


@dataclass(frozen=True, kw_only=True)
class SyncSpec(JobSpec):
    """Deliver a change set to ``destination``, then commit the consumer (:mod:`spark_jobs.jobs.sync`)."""

    job: ClassVar[str] = "sync"
    runner: ClassVar[str] = "spark_jobs.jobs.sync:run_sync"
    changes: str = option("", relative_path)
    table: str = option("", relative_path)
    consumer: str = option("", path_name)
    primary_key: list[str] = option(check=required_names, factory=list)
    from_version: int | None = option(None, optional(integer))
    to_version: int = option(None, integer)
    # the diff's counts of the rows of change set ``counted_changes`` at its Delta version
    # ``counted_version``: a sync of that very change set version plans from them instead of counting
    # the rows again (the operator passes them on from the diff's result, see change_set_fields)
    counts: dict[str, int] = option(check=change_counts, factory=dict)
    counted_changes: str | None = option(None, optional(text))
    counted_version: int | None = option(None, optional(integer))
    destination: dict[str, Any] = option(check=destination, factory=dict)  # a built-in sink's options checked
    mode: str = option("upsert", one_of(*SINK_MODES))
    field_mapping: dict[str, str] = option(check=name_map, factory=dict)
    constants: dict[str, Any] = option(check=mapping, factory=dict)
    max_delete_fraction: float = option(0.5, fraction)
    allow_mass_delete: bool = option(False, flag)
    max_reject_fraction: float | None = option(None, optional(fraction))
    dry_run: bool = option(False, flag)
    delivery: DeliveryPolicy = option(check=delivery_policy, factory=DeliveryPolicy)
    commit: bool = option(True, flag)  # False: deliver without moving the consumer (benchmarks)
    # consumed change sets of this (consumer, table) kept after a successful sync, newest first
    keep_change_sets: int = option(DEFAULT_KEEP_CHANGE_SETS, count)

    def validate(self) -> None:
        _check_distinct_fields(list(self.field_mapping.values()), self.constants)

    def destination_fields(self, columns: list[str]) -> dict[str, str]:
        """``{change-set column: destination field}`` of the columns a sync sends (``columns``: the
        change set's data columns). With a ``field_mapping`` only the mapped columns go, plus the
        key under its mapped name or its own; without one every column goes under its own name."""
        mapping = dict(self.field_mapping) if self.field_mapping else {c: c for c in columns}
        unknown = [c for c in mapping if c not in columns]
        if unknown:
            raise ConfigError(f"field_mapping names source column(s) {unknown} that the change set lacks; "
                              f"its columns are {columns}")
        for k in self.primary_key:
            mapping.setdefault(k, k)
        _check_distinct_fields(list(mapping.values()), self.constants)
        return mapping


def _check_distinct_fields(targets: list[str], constants: dict[str, Any]) -> None:
    """Each destination field gets one value: from one column, or from one constant."""
    clashes = sorted({t for t in targets if targets.count(t) > 1} | (set(constants) & set(targets)))
    if clashes:
        raise ConfigError(f"Destination field(s) {clashes} are mapped more than once (field_mapping/constants)")


def change_set_fields(diff_result: dict[str, Any]) -> dict[str, Any]:
    """The :class:`SyncSpec` fields that a diff's result (its XCom) gives: the change set, its table,
    consumer, key and versions, and the diff's counts of its rows with the change set's version they
    are true of."""
    outputs = diff_result.get("outputs") or []  # the change set, at the version the diff wrote
    return {"changes": diff_result["changes"], "table": diff_result["table"], "consumer": diff_result["consumer"],
            "primary_key": diff_result["primary_key"], "from_version": diff_result.get("from_version"),
            "to_version": diff_result["to_version"], "counts": diff_result.get("counts") or {},
            "counted_changes": diff_result["changes"],
            "counted_version": outputs[0].get("version") if len(outputs) == 1 else None}


@dataclass(frozen=True, kw_only=True)
class _TableVersionSpec(JobSpec):
    """A job on one version of one table, named by ``version`` or ``target_logical_date``."""

    table: str = option("", lambda v: table_rel(required_text(v)))
    version: int | None = option(None, optional(integer))
    target_logical_date: str | None = option(None, optional(text))

    def validate(self) -> None:
        require_one_target(self.version, self.target_logical_date, f"{self.job} of {self.table}")


@dataclass(frozen=True, kw_only=True)
class RestoreSpec(_TableVersionSpec):
    """Restore ``table`` to a recorded version (:mod:`spark_jobs.jobs.restore`)."""

    job: ClassVar[str] = "restore"
    runner: ClassVar[str] = "spark_jobs.jobs.restore:run_restore"


@dataclass(frozen=True, kw_only=True)
class SavepointSpec(_TableVersionSpec):
    """Protect a version of ``table`` from VACUUM (:mod:`spark_jobs.jobs.savepoints`)."""

    job: ClassVar[str] = "savepoint"
    runner: ClassVar[str] = "spark_jobs.jobs.savepoints:run_savepoint"
    savepoint_name: str | None = option(None, optional(path_name))  # default: v<version>


@dataclass(frozen=True, kw_only=True)
class HistorySpec(JobSpec):
    """Rewrite ``history/<name>`` from the versions of ``table`` (:mod:`spark_jobs.jobs.history`)."""

    job: ClassVar[str] = "history"
    runner: ClassVar[str] = "spark_jobs.jobs.history:run_history"
    table: str = option("", lambda v: table_rel(required_text(v)))
    name: str | None = option(None, optional(path_name))  # default: the table's own name
    primary_key: list[str] = option(check=names, factory=list)  # default: the one the table records

    @property
    def rel(self) -> str:
        return history_rel(self.name or self.table.rsplit("/", 1)[-1])


@dataclass(frozen=True, kw_only=True)
class MaintenanceSpec(JobSpec):
    """OPTIMIZE / Z-ORDER and a VACUUM that keeps protected versions (:mod:`spark_jobs.jobs.maintenance`)."""

    job: ClassVar[str] = "maintenance"
    runner: ClassVar[str] = "spark_jobs.jobs.maintenance:run_maintenance"
    table: str = option("", lambda v: table_rel(required_text(v)))
    zorder_by: list[str] = option(check=names, factory=list)  # implies optimize
    optimize: bool = option(False, flag)
    vacuum: bool = option(True, flag)
    retain_hours: float = option(DEFAULT_RETAIN_HOURS, non_negative)
    margin_s: float = option(DEFAULT_MARGIN_S, non_negative)


@dataclass(frozen=True, kw_only=True)
class RetentionSpec(JobSpec):
    """Delete what the warehouse no longer needs (:mod:`spark_jobs.jobs.retention`): change sets every
    consumer has committed past (but the newest ``keep_change_sets`` of each), ``_system/jobs``
    folders older than ``job_days`` and dry-run plans older than ``plan_days``. ``dry_run`` lists
    what would go and deletes nothing."""

    job: ClassVar[str] = "retention"
    runner: ClassVar[str] = "spark_jobs.jobs.retention:run_retention"
    keep_change_sets: int = option(DEFAULT_KEEP_CHANGE_SETS, count)
    job_days: float = option(30.0, non_negative)
    plan_days: float = option(7.0, non_negative)
    dry_run: bool = option(False, flag)


@dataclass(frozen=True, kw_only=True)
class WidenSpec(JobSpec):
    """Merge some sources of a wide table (:mod:`spark_jobs.jobs.widen`); ``wide`` follows
    :mod:`spark_jobs.contract.wide_table`, ``versions`` pins sources to exact versions."""

    job: ClassVar[str] = "widen"
    runner: ClassVar[str] = "spark_jobs.jobs.widen:run_widen"
    wide: WideTable = option(None, wide_table)
    sources: list[str] = option(check=names, factory=list)  # default: all, full joins first
    versions: dict[str, int] = option(check=lambda v: {k: integer(n) for k, n in mapping(v).items()},
                                      factory=dict)

    def validate(self) -> None:
        step = [self.wide.source(name).name for name in self.sources] or [s.name for s in self.wide.sources]
        stray = sorted(set(self.versions) - set(step))
        if stray:
            raise ConfigError(f"Wide table {self.wide.name}: versions given for {stray}, which this step does "
                              f"not merge (it merges {step})")


def required_list(value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple)) or not value:
        raise Invalid("a non-empty list")
    return list(value)


SPECS: dict[str, type[JobSpec]] = {cls.job: cls for cls in (
    SnapshotSpec, BackfillSpec, DiffSpec, SyncSpec, RestoreSpec, SavepointSpec, HistorySpec, MaintenanceSpec,
    RetentionSpec, WidenSpec)}


def parse_spec(data: dict[str, Any]) -> JobSpec:
    """The typed spec of the job ``data`` names; every problem is a :class:`ConfigError`."""
    job = data.get("job") if isinstance(data, dict) else None
    if job not in SPECS:
        raise ConfigError(f"Unknown job {job!r}; jobs: {sorted(SPECS)}")
    return SPECS[job].from_dict(data)
