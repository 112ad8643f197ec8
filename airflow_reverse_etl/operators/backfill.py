"""SnapshotBackfillOperator: snapshot a source for a range of logical dates in one Spark job."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from spark_jobs.contract import BackfillSpec

if TYPE_CHECKING:
    from airflow.sdk import Context


class SnapshotBackfillOperator(SnapshotOperator):
    """Record one snapshot version per logical date, in date order, in one Spark application.

    Same parameters as :class:`.SnapshotOperator`, plus ``logical_dates`` (ISO timestamps, templated;
    an upstream task's output works too). Dates already recorded are reused, so a re-run adds
    nothing; a date older than the newest recorded one is refused as for a single snapshot. Give a
    Delta source ``"as_of_logical_date": True`` to read it as it was on each date.

    Returns (XCom) ``{table, uri, version, versions: {date: version}, reused: [dates], inputs, outputs}``.
    """

    job = BackfillSpec.job
    template_fields: Sequence[str] = (*SnapshotOperator.template_fields, "logical_dates")

    def __init__(self, *, logical_dates: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(BackfillSpec, logical_dates=logical_dates)
        self.logical_dates = logical_dates

    def build_spec(self, context: Context) -> tuple[BackfillSpec, dict[str, str]]:
        values, secrets = self.snapshot_values()
        return BackfillSpec.of(**values, logical_dates=[str(d) for d in self.logical_dates]), secrets

    def event_counts(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"dates": len(result["versions"]), "reused": len(result["reused"])}

    def summarize(self, result: dict[str, Any]) -> str:
        versions = ", ".join(f"{d[:10]}=v{v}" for d, v in result["versions"].items())
        return f"backfill {result['table']}: {versions} ({len(result['reused'])} already recorded)"
