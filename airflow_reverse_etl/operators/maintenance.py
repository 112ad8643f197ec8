"""TableMaintenanceOperator: OPTIMIZE with Z-ORDER BY, and a VACUUM that keeps protected versions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from airflow_reverse_etl.operators.base import ReverseEtlJobOperator
from spark_jobs.contract import MaintenanceSpec

if TYPE_CHECKING:
    from airflow.sdk import Context


class TableMaintenanceOperator(ReverseEtlJobOperator):
    """Compact (and Z-order) a table's files and vacuum the ones no version still needs.

    VACUUM never removes files of a savepointed version or of a version a consumer has not yet
    committed past: the retention used is stretched to reach back to the oldest of them.

    :param table: ``customers`` (= ``snapshots/customers``) or a warehouse-relative Delta table.
    :param zorder_by: columns to Z-order by (implies OPTIMIZE); data skipping on them gets sharper.
    :param optimize: compact without Z-ordering.
    :param vacuum: run VACUUM.
    :param retain_hours: the retention asked for (default 168, Delta's own default).

    Returns (XCom) ``{table, version, optimized: {...}, vacuumed: {retain_hours, files_deleted,
    savepoints, consumer_floor, ...}}``. Data does not change, so no outlet is declared.
    """

    job = MaintenanceSpec.job
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "table", "zorder_by")

    def __init__(self, *, table: str, zorder_by: list[str] | None = None, optimize: bool = MaintenanceSpec.optimize,
                 vacuum: bool = MaintenanceSpec.vacuum, retain_hours: float = MaintenanceSpec.retain_hours,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(MaintenanceSpec, table=table, zorder_by=zorder_by, optimize=optimize, vacuum=vacuum,
                                     retain_hours=retain_hours)
        self.table = table
        self.zorder_by = zorder_by
        self.optimize = optimize
        self.vacuum = vacuum
        self.retain_hours = retain_hours

    def build_spec(self, context: Context) -> tuple[MaintenanceSpec, dict[str, str]]:
        return MaintenanceSpec.of(table=self.table, zorder_by=self.zorder_by, optimize=self.optimize,
                                  vacuum=self.vacuum, retain_hours=self.retain_hours), {}

    def summarize(self, result: dict[str, Any]) -> str:
        parts = [f"maintenance {result['table']}"]
        if result.get("optimized"):
            o = result["optimized"]
            parts.append(f"optimize z-order {o['zorder_by']}: -{o['files_removed']} +{o['files_added']} files")
        if result.get("vacuumed"):
            v = result["vacuumed"]
            parts.append(f"vacuum {v['files_deleted']} files (retain {v['retain_hours']}h, "
                         f"savepoints {v['savepoints']}, consumer floor {v['consumer_floor']})")
        return "; ".join(parts)
