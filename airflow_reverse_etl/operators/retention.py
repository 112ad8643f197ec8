"""WarehouseRetentionOperator: delete consumed change sets, old job folders and old dry-run plans."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_reverse_etl.operators.base import ReverseEtlJobOperator
from spark_jobs.contract import RetentionSpec

if TYPE_CHECKING:
    from airflow.sdk import Context


class WarehouseRetentionOperator(ReverseEtlJobOperator):
    """Keep the warehouse from growing with every run (:mod:`spark_jobs.jobs.retention`).

    Every successful sync already prunes its own consumed change sets (``SinkOperator``'s
    ``keep_change_sets``); run this from a maintenance DAG for the rest, warehouse-wide.

    :param keep_change_sets: consumed change sets kept per consumer and table, newest first.
    :param job_days: delete ``_system/jobs/<id>`` folders (job specs and results) older than this.
    :param plan_days: delete dry-run plans last written longer ago than this.
    :param dry_run: only list what would be deleted (in the result).

    Returns (XCom) ``{dry_run, deleted: {change_sets, jobs, plans}}`` with warehouse-relative paths.
    No outlet: no table's data changes.
    """

    job = RetentionSpec.job

    def __init__(self, *, keep_change_sets: int = RetentionSpec.keep_change_sets,
                 job_days: float = RetentionSpec.job_days, plan_days: float = RetentionSpec.plan_days,
                 dry_run: bool = RetentionSpec.dry_run, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(RetentionSpec, keep_change_sets=keep_change_sets, job_days=job_days, plan_days=plan_days,
                          dry_run=dry_run)
        self.keep_change_sets = keep_change_sets
        self.job_days = job_days
        self.plan_days = plan_days
        # not self.dry_run: that name is BaseOperator.dry_run(), the method that renders templates
        self.list_only = dry_run

    def build_spec(self, context: Context) -> tuple[RetentionSpec, dict[str, str]]:
        return RetentionSpec.of(keep_change_sets=self.keep_change_sets, job_days=self.job_days,
                                plan_days=self.plan_days, dry_run=self.list_only), {}

    def summarize(self, result: dict[str, Any]) -> str:
        verb = "would delete" if result["dry_run"] else "deleted"
        counts = ", ".join(f"{len(paths)} {kind}" for kind, paths in result["deleted"].items())
        return f"retention {verb} {counts}"
