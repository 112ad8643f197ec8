"""SnapshotOperator: record a source as one new Delta version of ``snapshots/<name>``."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from airflow.sdk.exceptions import AirflowSkipException

from airflow_reverse_etl.connections import jdbc_source, kafka_source
from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.operators.base import DATE_ORDERED, ReverseEtlJobOperator, logical_date_of
from spark_jobs.contract import SnapshotSpec
from spark_jobs.contract.layout import snapshot_rel
from spark_jobs.errors import PastDateRefusedError

if TYPE_CHECKING:
    from airflow.sdk import Context

#: Where a templated ``on_past_date`` reads its value: a DAG param or a key of the run's conf.
_CONF_KEY = re.compile(r"""params\.(\w+)|params\[['"](\w+)['"]\]|dag_run\.conf(?:\.get\(|\[)['"](\w+)['"]""")


class SnapshotOperator(ReverseEtlJobOperator):
    """Read a source with Spark and record it as exactly one Delta version of a snapshot table.

    The commit carries the run's logical date and run id. Re-running a logical date that is already
    recorded returns that version without a second one. A date older than the newest recorded one is
    refused, unless ``on_past_date="rebuild"``. A null or duplicate primary key fails the task, naming
    example keys, and writes nothing.

    Backfill order: by default (:data:`~airflow_reverse_etl.operators.base.DATE_ORDERED`) the task
    ``depends_on_past`` with ``max_active_tis_per_dag=1``, so the runs that catchup or ``airflow
    backfill create`` start together record their dates one at a time, oldest first. A writer of the
    same table from elsewhere (another DAG) that commits meanwhile makes this run fail with the
    retryable ``ReverseEtlConcurrentWriteError``.

    :param name: snapshot name; the table is ``<warehouse>/snapshots/<name>``.
    :param source: ``{"format": "jdbc"|"delta"|"parquet"|"csv"|"kafka", ...}`` (see ``spark_jobs.sources.read``);
        for JDBC give ``table`` or ``query`` and ``source_conn_id``; for an upsert-kafka topic
        ``topic`` and ``value_schema`` (``spark_jobs.sources.upsert_kafka``: read on from recorded offsets).
    :param primary_key: key column(s).
    :param source_conn_id: Airflow connection of a JDBC source (postgres, mysql or jdbc), or of a Kafka
        source (a ``reverse_etl_kafka`` or ``kafka`` connection: brokers, SASL login, extras).
    :param allow_schema_evolution: add new source columns / null out dropped ones instead of failing.
    :param renames: ``{"old": "new"}`` source columns that were renamed: the table's column is renamed
        through Delta column mapping and keeps its history (no row changes, the diff sends nothing for
        it, SCD2 intervals stay open). Declarative: a rename already applied is a no-op.
    :param partition_by: column(s) to partition the table by, chosen when it is created (a later run
        whose partition_by differs is refused): each run's MERGE then reads and rewrites only the
        partitions its changes touch (``spark_jobs.delta.partitions``).
    :param on_past_date: ``"refuse"`` (default) or ``"rebuild"`` (templated, e.g. from the run's conf):
        record a date older than the newest recorded one by rebuilding forward — restore the table to
        the date before, record this date, replay the later dates from their own recorded versions,
        and move the consumers committed at a replayed date to its new version
        (:mod:`spark_jobs.jobs.rebuild`). The result's ``replayed`` maps those dates to their new versions.
    :param future_margin_s: how far after now a logical date may lie, in seconds (default a day).
        A date further ahead — a typo such as ``2206-01-03`` — fails before anything is written: once
        recorded it would refuse every real date as older than the newest.

    Returns (XCom) ``{table, uri, version, logical_date, run_id, rows, inserted, updated, deleted,
    primary_key, reused, replayed, inputs, outputs}``.

    A refused past date *skips* the task (and with it the run's diff and sync), with the reason and the
    command that rebuilds it in the log: a failed ``depends_on_past`` task would leave every later date
    of the same backfill waiting forever, and the backfill could never end (nor another start). The
    command names the DAG param or conf key ``on_past_date`` is templated from, when it is.
    """

    job = SnapshotSpec.job
    task_defaults = DATE_ORDERED
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "name", "source", "primary_key",
                                      "on_past_date")
    template_fields_renderers: ClassVar[dict[str, str]] = {"source": "json"}

    def __init__(self, *, name: str, source: dict[str, Any], primary_key: str | list[str],
                 source_conn_id: str | None = None, allow_schema_evolution: bool = SnapshotSpec.allow_schema_evolution,
                 renames: dict[str, str] | None = None, partition_by: str | list[str] | None = None,
                 on_past_date: str = SnapshotSpec.on_past_date,
                 future_margin_s: float = SnapshotSpec.future_margin_s, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(SnapshotSpec, name=name, source=with_format(source, source_conn_id),
                          primary_key=primary_key, allow_schema_evolution=allow_schema_evolution,
                          renames=renames or {}, partition_by=partition_by or [], on_past_date=on_past_date,
                          future_margin_s=future_margin_s)
        self.future_margin_s = future_margin_s
        self.name = name
        self.source = source
        self.primary_key = primary_key
        self.source_conn_id = source_conn_id
        self.allow_schema_evolution = allow_schema_evolution
        self.renames = dict(renames or {})
        self.partition_by = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
        self.on_past_date = on_past_date
        self._on_past_date_source = on_past_date  # before rendering: which conf key sets it
        self.declare_outlets(snapshot_rel(name))

    def snapshot_values(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The snapshot spec's fields (the source with its connection's settings) and the secrets."""
        source = dict(self.source)
        secrets: dict[str, str] = {}
        if self.source_conn_id and source.get("format") == "kafka":
            settings, secrets = kafka_source(self.source_conn_id)
            source = {**settings, **source}
        elif self.source_conn_id:
            settings, secrets = jdbc_source(self.source_conn_id)
            source = with_format({**settings, **source}, self.source_conn_id)
        return {"name": self.name, "source": source, "primary_key": self.primary_key,
                "allow_schema_evolution": self.allow_schema_evolution, "renames": self.renames,
                "partition_by": self.partition_by,
                "on_past_date": self.on_past_date, "future_margin_s": self.future_margin_s}, secrets

    def build_spec(self, context: Context) -> tuple[SnapshotSpec, dict[str, str]]:
        values, secrets = self.snapshot_values()
        return SnapshotSpec.of(**values), secrets

    def skip_if_expected(self, context: Context, error: ReverseEtlConfigError) -> None:
        if error.raised_as(PastDateRefusedError):
            reason = f"{error.error['message']} {self.rebuild_instructions(context)}"
            self.log.warning("Skipped, this date is refused: %s", reason)
            raise AirflowSkipException(reason) from None

    def rebuild_instructions(self, context: Context) -> str:
        """What to run to record this refused date after all, in Airflow terms."""
        dag_id, date = context["dag"].dag_id, context.get("ds") or logical_date_of(context)
        found = _CONF_KEY.search(str(self._on_past_date_source))
        if found is None:
            return (f"In Airflow: set on_past_date=\"rebuild\" on task {self.task_id} (or template it from a "
                    "DAG param) and run this date again.")
        conf = json.dumps({next(g for g in found.groups() if g): "rebuild"})
        return ("In Airflow, run the date again with the rebuild option (give the whole range to rebuild "
                f"several dates): airflow backfill create --dag-id {dag_id} --from-date {date} --to-date {date} "
                f"--reprocess-behavior completed --dag-run-conf '{conf}'")

    def event_counts(self, result: dict[str, Any]) -> dict[str, Any]:
        return {k: result[k] for k in ("rows", "inserted", "updated", "deleted")}

    def summarize(self, result: dict[str, Any]) -> str:
        verb = "reused" if result.get("reused") else "wrote"
        replayed = "".join(f", replayed {d} as v{v}" for d, v in (result.get("replayed") or {}).items())
        return (f"snapshot {result['table']} {verb} version {result['version']} for {result['logical_date']}: "
                f"{result.get('rows')} rows, +{result['inserted']} ~{result['updated']} -{result['deleted']}{replayed}")


def with_format(source: Any, source_conn_id: str | None) -> Any:
    """``source`` with its format: a source read through a connection that does not say is a JDBC one
    (the connection's database)."""
    if source_conn_id and isinstance(source, dict) and "format" not in source:
        return {"format": "jdbc", **source}
    return source
