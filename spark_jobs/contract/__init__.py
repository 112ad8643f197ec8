"""The written contract between the Airflow operators and the Spark jobs: the only part of
:mod:`spark_jobs` the Airflow side imports (an import rule). Plain Python: it never imports pyspark
or airflow, so both sides (and DAG parsing) use it.

An operator builds a typed spec (checked at DAG parse time where its arguments are known), the hook
writes ``spec.to_dict()`` as ``spec.json``, the entry point reads it back with :func:`parse_spec`
and hands the job its spec; the job returns its result dataclass, whose ``to_dict()`` is the XCom.

A package rather than one module, one idea per module:

* :mod:`.base` — the run identity every spec carries and the JSON round trip;
* :mod:`.options` — the one way options are declared and checked (specs, wide tables, sink options);
* :mod:`.specs` — one spec per job, with its defaults and rules, and :func:`parse_spec`;
* :mod:`.sources` — what a snapshot may read: typed options per source format;
* :mod:`.results` — one result per job;
* :mod:`.layout` — the lake layout, the one place its paths are spelt (:class:`Warehouse`,
  :func:`table_rel`, :func:`table_ref`), the Delta session settings, and the values read from
  commit metadata (logical dates as instants, the metadata JSON, the dates a log records);
* :mod:`.system_tables` — the place and columns of each table under ``_system``;
* :mod:`.key_types` — the primary-key types the contract accepts, checked at DAG parse time;
* :mod:`.sink_options` — the base of every destination's typed options;
* :mod:`.destinations` — the options of the built-in destinations and the delivery policy;
* :mod:`.catalogue` — the built-in destinations, one record each (its shape: :mod:`.destination_record`),
  from which the registry, the entry points, lineage, the connection types and the catalogue page derive;
* :mod:`.rest` — what a REST destination may say (operations, response reading, auth), with the
  sandbox its templates run in (:mod:`.templating`), and the SaaS presets' options (:mod:`.saas`);
* :mod:`.wide_table` — the wide-table spec and its rules, which the widen job's spec carries and the
  planning helper checks at DAG parse time, with its sources (:mod:`.wide_sources`) and its aggregate
  functions (:mod:`.aggregates`).

Reading a Delta log or a small table from a driver is not the contract's: both sides do it through
:mod:`spark_jobs.lake_io`.
"""

from spark_jobs.contract.base import JobResult, JobSpec
from spark_jobs.contract.options import resolved_at_run_time
from spark_jobs.contract.layout import (
    DATAFRAME_DEBUGGING_OFF,
    DELTA_CONF,
    DELTA_PACKAGE,
    SPARK_PACKAGES,
    Warehouse,
    parse_commit_metadata,
    change_set_version,
    job_dir_started,
    parse_logical_date,
    table_ref,
    table_rel,
)
from spark_jobs.contract.results import (
    BackfillResult,
    DiffResult,
    HistoryResult,
    MaintenanceResult,
    RestoreResult,
    RetentionResult,
    SavepointResult,
    SyncResult,
    SnapshotResult,
    WidenResult,
)
from spark_jobs.contract.sources import DeltaSource, FileSource, JdbcSource, KafkaSource
from spark_jobs.contract.specs import (
    CHANGE_KINDS,
    PAST_DATE_POLICIES,
    SINK_MODES,
    SPECS,
    BackfillSpec,
    DiffSpec,
    HistorySpec,
    MaintenanceSpec,
    RestoreSpec,
    RetentionSpec,
    SavepointSpec,
    SyncSpec,
    SnapshotSpec,
    WidenSpec,
    change_set_fields,
    parse_spec,
    require_one_target,
)

__all__ = [
    "CHANGE_KINDS", "DATAFRAME_DEBUGGING_OFF", "DELTA_CONF", "DELTA_PACKAGE", "PAST_DATE_POLICIES", "SINK_MODES",
    "SPARK_PACKAGES", "SPECS",
    "BackfillResult", "BackfillSpec", "DiffResult", "DiffSpec", "HistoryResult", "HistorySpec", "JobResult",
    "DeltaSource", "FileSource", "JdbcSource",
    "JobSpec", "KafkaSource", "MaintenanceResult", "MaintenanceSpec", "RestoreResult", "RestoreSpec", "RetentionResult",
    "RetentionSpec", "SavepointResult", "SavepointSpec", "SyncResult", "SyncSpec", "SnapshotResult", "SnapshotSpec",
    "Warehouse", "WidenResult",
    "WidenSpec", "resolved_at_run_time", "change_set_fields", "change_set_version", "job_dir_started",
    "parse_commit_metadata", "parse_logical_date", "parse_spec", "require_one_target", "table_ref", "table_rel",
]
