"""The lake layout both sides agree on, and the values that cross the boundary in commit metadata.

Layout under one warehouse root (a local directory or any Hadoop URI such as ``s3a://bucket/wh``)::

    snapshots/<name>                 one Delta version per snapshot run, Change Data Feed on
    wide/<name>                      wide tables, same rules
    history/<name>                   SCD type-2 history of a snapshot
    changes/<consumer>/<table>/...   change sets written by diff jobs for sinks to read
    plans/<consumer>/<table>         operations a dry-run sync would have sent
    _system/<table>                  consumers, lineage, rejects, runs, savepoints: small Delta tables
                                     (:mod:`.system_tables` declares their columns)
    _system/jobs/<stamp>-<job>-<id>  the spec and result JSON of each job run
    _system/wide_index/<wide>/<src>  a wide table's reverse index of one left join
    _system/watchers/<table>.json    a live watcher's outstanding claim
    _system/code/<bundle>            cluster-mode driver bundles, one per content
    _system/storage/<probe>.json     what a probe of the warehouse's store found (conditional writes)

This module is the one place those paths are spelt (``tests/project/test_layout.py`` fails on a path
literal anywhere else in the two packages): everything else asks :class:`Warehouse` or the ``*_rel``
functions. Tables are named across the Airflow/Spark boundary by their path relative to the root
(``snapshots/customers``) so state survives moving the warehouse.

Every commit the jobs make carries JSON ``userMetadata`` with the Airflow logical date; both sides read
it from the commit files (:mod:`spark_jobs.lake_io.log`) through :func:`parse_commit_metadata` and compare dates
through :func:`parse_logical_date`, as instants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Iterable, Iterator

from spark_jobs.errors import ConfigError

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

#: Spark conf turning off pyspark's DataFrame debugging in the jobs' sessions. With it on (pyspark's
#: default) every DataFrame and Column call records its Python call site in the JVM — about four py4j
#: round trips per call — so that an analysis error can point at the user's line. The jobs build their
#: plans from the product's own code, whose errors the jobs report by name (spark_jobs.errors), so the
#: call site names a line of spark_jobs, not of the user; off, the tests' in-process jobs run ~12 %
#: faster (three test files, seven tests, one warm session: 196.5 -> 172.6 s). The hook sets it unless the
#: connection's conf says otherwise; the project's Spark Connect server sets it too.
DATAFRAME_DEBUGGING_OFF = {"spark.python.sql.dataFrameDebugging.enabled": "false"}

# The Maven coordinate matching delta-spark 4.4.0 on Spark 4.2; used with spark.jars.packages when no
# local jar directory is configured (clusters that resolve packages themselves).
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
# Spark's own Kafka data source at pyspark's version, for Kafka snapshot sources (spark_jobs.sources.upsert_kafka)
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
#: spark.jars.packages when no local jar directory is configured: what jars/pom.xml fetches otherwise
SPARK_PACKAGES = f"{DELTA_PACKAGE},{KAFKA_PACKAGE}"


#: The folders under the warehouse root (the module docstring).
SNAPSHOTS, WIDE, HISTORY, CHANGES, PLANS, SYSTEM = "snapshots", "wide", "history", "changes", "plans", "_system"


def snapshot_rel(name: str) -> str:
    """Where the snapshot ``name`` lives, relative to the warehouse."""
    return f"{SNAPSHOTS}/{name}"


def snapshot_name(rel: str) -> str | None:
    """The snapshot a warehouse-relative table is (``snapshots/customers`` -> ``customers``); None for
    any other table."""
    folder, sep, name = rel.strip("/").partition("/")
    return name if sep and folder == SNAPSHOTS and "/" not in name else None


def wide_rel(name: str) -> str:
    return f"{WIDE}/{name}"


def history_rel(name: str) -> str:
    return f"{HISTORY}/{name}"


def change_feed_rel(consumer: str, table_rel: str) -> str:
    """The folder of a consumer's change sets of a table (one sub-folder per diff); also the Asset a
    diff task declares."""
    return f"{CHANGES}/{consumer}/{table_rel}"


def plan_rel(consumer: str, table_rel: str) -> str:
    """The Delta table a dry-run sync of ``table_rel`` for ``consumer`` writes its operations to."""
    return f"{PLANS}/{consumer}/{table_rel}"


@dataclass(frozen=True)
class Warehouse:
    root: str

    def __post_init__(self) -> None:
        if not self.root:
            raise ConfigError("The spec names no warehouse root")
        object.__setattr__(self, "root", self.root.rstrip("/"))

    def uri(self, rel: str) -> str:
        return f"{self.root}/{rel.strip('/')}"

    def system(self, name: str) -> str:
        return self.uri(f"{SYSTEM}/{name}")

    def change_feed(self, consumer: str, table_rel: str) -> str:
        """The folder holding a consumer's change sets of a table, one sub-folder per diff."""
        return self.uri(change_feed_rel(consumer, table_rel))

    @property
    def plans(self) -> str:
        """The folder of every dry-run plan table."""
        return self.uri(PLANS)

    @property
    def jobs(self) -> str:
        """The folder of every job run's spec and result (:meth:`job_dir`)."""
        return self.system("jobs")

    def wide_index(self, wide: str, source: str) -> str:
        """The reverse index of wide table ``wide``'s left join ``source``."""
        return self.system(f"wide_index/{wide}/{source}")

    def watcher_claim(self, table_rel: str) -> str:
        """The claim file of the live watcher feeding the snapshot table ``table_rel``."""
        return self.system(f"watchers/{table_rel}.json")

    def driver_bundle(self, digest: str) -> str:
        """The cluster-mode driver bundle of content ``digest`` (one per content, shared by every run)."""
        return self.system(f"code/aretl-driver-{digest}.jar")

    def storage_probe(self, probe: str) -> str:
        """The file keeping what the probe ``probe`` of the warehouse's store found."""
        return self.system(f"storage/{probe}.json")

    def changes(self, consumer: str, table_rel: str, from_version: int | None, to_version: int) -> str:
        start = "full" if from_version is None else f"v{from_version}"
        return f"{self.change_feed(consumer, table_rel)}/{start}-v{to_version}"

    def job_dir(self, job: str, started: datetime, token: str) -> str:
        """``_system/jobs/<UTC stamp>-<job>-<token>``: the stamp says when, for retention."""
        return f"{self.jobs}/{started.astimezone(timezone.utc).strftime(JOB_STAMP)}-{job}-{token}"


JOB_STAMP = "%Y%m%dT%H%M%S"


def change_set_version(folder_name: str) -> int | None:
    """The snapshot version a change set folder (``full-v3``, ``v3-v5``) leads to; None for others."""
    _, sep, version = folder_name.rpartition("-v")
    return int(version) if sep and version.isdigit() else None


def job_dir_started(folder_name: str) -> datetime | None:
    """When the job of a ``_system/jobs`` folder started, from its name; None for other names."""
    try:
        return datetime.strptime(folder_name.split("-", 1)[0], JOB_STAMP).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def path_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be one part of a path under the warehouse, or None when it can.

    Snapshot, wide-table, history, consumer and savepoint names become folders: ``..`` would write
    outside the warehouse (a consumer ``../../escaped``), ``.`` or an empty name onto the folder
    above (a snapshot ``..`` made the warehouse root a Delta table). Quotes, spaces and dots inside a
    name are fine."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if name in (".", ".."):
        return f"is {name!r}, which names the folder it is in or the one above, not a folder of its own"
    odd = sorted({c for c in name if c in "/\\" or ord(c) < 32 or ord(c) == 127})
    if odd:
        return f"holds {''.join(odd)!r} (path separators and control characters are not allowed)"
    return None


def relative_path_problem(path: Any) -> str | None:
    """Why ``path`` (``snapshots/customers``, a change set's folder) cannot name a place under the
    warehouse, or None: every part of it must be a name (:func:`path_name_problem`)."""
    if not isinstance(path, str) or not path.strip("/"):
        return "is empty"
    for part in path.strip("/").split("/"):
        problem = path_name_problem(part)
        if problem:
            return f"has a part that {problem}"
    return None


def table_rel(table: str | None) -> str:
    """A table named across the boundary: a bare name means ``snapshots/<name>``."""
    if not table:
        raise ConfigError("The spec names no 'table'")
    rel = table.strip("/") if "/" in table else snapshot_rel(table)
    problem = relative_path_problem(rel)
    if problem:
        raise ConfigError(f"Table {table!r} {problem}: tables are named by their path under the warehouse")
    return rel


def table_ref(wh: Warehouse, rel: str, version: int | None) -> dict[str, Any]:
    """How a job result names a table version: relative name, full URI and Delta version."""
    return {"name": rel, "uri": wh.uri(rel), "version": version}


def parse_logical_date(value: str | date | datetime) -> datetime:
    """A logical date as an instant (aware, UTC when no zone is given).

    Users and Airflow spell one instant many ways (``2026-01-02``, ``...T00:00:00Z``, ``+00:00``,
    ``01:00:00+01:00``); dates are only ever compared through this function, never as text.
    """
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        try:
            parsed = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise ConfigError(f"Logical date {value!r} is not an ISO date or timestamp "
                              "(such as 2026-01-02 or 2026-01-02T00:00:00+00:00)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def parse_commit_metadata(raw: str | None) -> dict[str, Any]:
    """A commit's ``userMetadata`` as a dict: the jobs' JSON, or ``{"text": raw}`` for anything
    another writer left there (never an error: foreign commits are simply not ours)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"text": raw}
    return value if isinstance(value, dict) else {"text": raw}


def walk_recorded(entries: Iterable[dict[str, Any]]) -> Iterator[tuple[str, datetime, dict[str, Any]]]:
    """(logical date, parsed, entry) of the commits on the table's line of history, newest first.

    ``entries`` are commits newest first, each with ``version`` and parsed ``metadata``; a restore to
    D, or a rebuild from D, hides the older commits tagged with dates after D. Lazy, so a caller
    looking for one date stops reading the log as soon as it passes it. Both sides read a log with it:
    the jobs (:mod:`spark_jobs.delta.timetravel`) and the Airflow sensor and trigger.
    """
    cutoff: datetime | None = None
    for entry in entries:
        date = entry["metadata"].get("logical_date")
        if not date:
            continue
        when = parse_logical_date(date)
        if cutoff is not None and when > cutoff:
            continue
        yield date, when, entry
        if entry["metadata"].get("job") == "restore" or "rebuild" in entry["metadata"]:
            cutoff = when if cutoff is None else min(cutoff, when)
