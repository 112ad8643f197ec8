"""TableRestoreOperator: move a table back to the version of a logical date."""

from __future__ import annotations

from typing import Any

from airflow_reverse_etl.operators.table_version import TableVersionOperator
from spark_jobs.contract import RestoreSpec, resolved_at_run_time, table_rel


class TableRestoreOperator(TableVersionOperator):
    """Restore a table (``customers`` = ``snapshots/customers``) to the version of a logical date.

    The restore is one new Delta commit tagged with the target date, recorded in ``_system/lineage``;
    afterwards the later dates can be snapshotted again, in order (replay). Returns (XCom)
    ``{table, uri, version, restored_version, logical_date, reused, inputs, outputs}``.
    """

    job = RestoreSpec.job
    spec_class = RestoreSpec

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not resolved_at_run_time(self.table):
            self.declare_outlets(table_rel(self.table))

    def event_counts(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"restored_version": result["restored_version"]}

    def summarize(self, result: dict[str, Any]) -> str:
        return (f"restore {result['table']} to {result['logical_date']} (v{result['restored_version']}) "
                f"as version {result['version']}{' (already done)' if result['reused'] else ''}")
