"""SnapshotHistoryOperator: the SCD type-2 history of a snapshot, from its Delta versions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from airflow_reverse_etl.operators.base import ReverseEtlJobOperator
from spark_jobs.contract import HistorySpec, resolved_at_run_time

if TYPE_CHECKING:
    from airflow.sdk import Context


class SnapshotHistoryOperator(ReverseEtlJobOperator):
    """Rewrite ``history/<name>`` with one row per key per validity interval (``valid_from``,
    ``valid_to``, ``is_current``), dbt-snapshot style: hard deletes close the interval.

    :param table: the snapshot (``customers``) or a warehouse-relative Delta table.
    :param name: history table name (default: the snapshot's name).
    :param primary_key: default: the key recorded in the snapshot's commits.

    Returns (XCom) ``{table, uri, version, rows, versions, primary_key, inputs, outputs}``.
    """

    job = HistorySpec.job
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "table", "name")

    def __init__(self, *, table: str, name: str | None = None, primary_key: list[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(HistorySpec, table=table, name=name, primary_key=primary_key)
        self.table = table
        self.name = name
        self.primary_key = primary_key
        if not resolved_at_run_time([table, name]):
            self.declare_outlets(HistorySpec.of(table=table, name=name).rel)

    def build_spec(self, context: Context) -> tuple[HistorySpec, dict[str, str]]:
        return HistorySpec.of(table=self.table, name=self.name, primary_key=self.primary_key), {}

    def event_counts(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"rows": result["rows"]}

    def summarize(self, result: dict[str, Any]) -> str:
        return (f"history {result['table']} version {result['version']}: {result['rows']} interval rows "
                f"from {result['versions']} snapshot versions")
