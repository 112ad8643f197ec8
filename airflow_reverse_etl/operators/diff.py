"""DiffOperator: the net change set of a snapshot since a consumer's committed version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from airflow.sdk.exceptions import AirflowSkipException

from airflow_reverse_etl import config
from airflow_reverse_etl.exceptions import ReverseEtlConfigError, spec_validation
from airflow_reverse_etl.lineage import table_asset
from airflow_reverse_etl.operators.base import DATE_ORDERED, ReverseEtlJobOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from spark_jobs.contract import DiffSpec, resolved_at_run_time, table_rel
from spark_jobs.contract.layout import change_feed_rel, snapshot_rel
from spark_jobs.errors import AlreadyDeliveredError

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk import Asset


def table_and_version(table: str | dict[str, Any]) -> tuple[str, int | None]:
    """Accept an upstream job result (XCom: exact table and version) or a table name (latest).

    A bare name such as ``customers`` means ``snapshots/customers``.
    """
    if isinstance(table, dict):
        return table["table"], table.get("version")
    return table_rel(table), None


def known_table(snapshot: Any) -> str | None:
    """The snapshot table a diff reads, when the DAG file already says it: a table name, or the
    output of a SnapshotOperator whose name is not templated."""
    if isinstance(snapshot, str):
        return None if resolved_at_run_time(snapshot) else table_rel(snapshot)
    upstream = getattr(snapshot, "operator", None)
    if isinstance(upstream, SnapshotOperator) and not resolved_at_run_time(upstream.name):
        return snapshot_rel(upstream.name)
    return None


class DiffOperator(ReverseEtlJobOperator):
    """Compute what changed for ``consumer`` between its committed version and the snapshot version.

    :param snapshot: the upstream ``SnapshotOperator``'s output (``snap.output``) — the diff then reads
        exactly the version that task wrote — or a table name, meaning its latest version.
    :param consumer: who consumes the changes (one committed version per table and consumer).
    :param columns: only changes in these columns count; the change set carries key + these columns.
    :param full_resync: send the whole table version, ignoring the committed version.

    Outlet: the Asset ``<warehouse>/changes/<consumer>/<table>`` (when the DAG file names the table);
    its event carries the snapshot version covered and the insert/update/delete counts.

    Returns (XCom) ``{table, consumer, from_version, to_version, changes, counts, primary_key, ...}``
    where ``changes`` is the change set's location in the warehouse (never the data itself).

    A consumer that already committed a newer version than the snapshot's (a re-run of an older
    logical date after later runs delivered, e.g. a cleared middle date of a backfill) has nothing to
    receive: the task is skipped, and with it the sync, and the run succeeds with nothing sent.

    Backfill order: by default the task ``depends_on_past`` with ``wait_for_downstream`` and
    ``max_active_tis_per_dag=1`` (:data:`~airflow_reverse_etl.operators.base.DATE_ORDERED`), so the
    diff of date D starts only after the diff *and the sync* of the previous date succeeded: it reads
    the consumer's position that sync committed.
    """

    job = DiffSpec.job
    task_defaults: ClassVar[dict[str, Any]] = {**DATE_ORDERED, "wait_for_downstream": True}
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "snapshot", "consumer", "columns")

    def __init__(self, *, snapshot: str | dict[str, Any], consumer: str, columns: list[str] | None = None,
                 full_resync: bool = DiffSpec.full_resync, primary_key: list[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(DiffSpec, consumer=consumer, columns=columns, full_resync=full_resync,
                          primary_key=primary_key)
        self.snapshot = snapshot
        self.consumer = consumer
        self.columns = columns
        self.full_resync = full_resync
        self.primary_key = primary_key
        with spec_validation():
            table = known_table(snapshot)
        if table:
            self.declare_outlets(change_feed_rel(consumer, table))

    def build_spec(self, context: Context) -> tuple[DiffSpec, dict[str, str]]:
        table, version = table_and_version(self.snapshot)
        return DiffSpec.of(table=table, to_version=version, consumer=self.consumer, columns=self.columns,
                           full_resync=self.full_resync, primary_key=self.primary_key), {}

    def skip_if_expected(self, context: Context, error: ReverseEtlConfigError) -> None:
        if error.raised_as(AlreadyDeliveredError):
            raise AirflowSkipException(error.error["message"]) from None

    def written_assets(self, result: dict[str, Any]) -> list[tuple[Asset, dict[str, Any]]]:
        feed = f"{config.warehouse_uri(self.warehouse)}/{change_feed_rel(result['consumer'], result['table'])}"
        metadata = {"version": result["to_version"], "from_version": result["from_version"], **result["counts"]}
        return [(table_asset(feed), metadata)]

    def summarize(self, result: dict[str, Any]) -> str:
        c = result["counts"]
        since = "full" if result["from_version"] is None else f"v{result['from_version']}"
        return (f"diff {result['table']} {since}..v{result['to_version']} for {result['consumer']}: "
                f"+{c['insert']} ~{c['update']} -{c['delete']}")
