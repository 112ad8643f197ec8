"""What a sync reports of itself: its run-history row (:mod:`spark_jobs.state.runs`) and its result
(:class:`~spark_jobs.contract.SyncResult`, the task's XCom), built from the same figures in one place,
with the destination's most frequent reasons for refusing records (:func:`top_reasons`) and the rules
that fail a sync with too many of them (:meth:`SyncReport.finish`, :func:`refused_whole`).

A :class:`SyncReport` holds what is known before anything happens (the spec, the sink, the start);
each step of the sync returns what it learnt — the plan (:class:`~spark_jobs.jobs.sync_plan.SyncPlan`),
the delivery (:class:`~spark_jobs.jobs.delivery.Delivered`), whether the consumer was committed — and
the report is asked once, at the end, with whatever the run got to: a run that failed in between is
recorded with the figures of the steps it finished and the defaults of the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from spark_jobs.contract import SyncResult, SyncSpec
from spark_jobs.contract.destinations import destination_label
from spark_jobs.contract.results import Ref
from spark_jobs.contract.system_tables import RUNS
from spark_jobs.errors import DestinationError
from spark_jobs.sinks.base import Sink
from spark_jobs.sinks.core import Stats
from spark_jobs.state import runs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.jobs.delivery import Delivered
    from spark_jobs.jobs.sync_plan import SyncPlan

#: The run-history row's fields a sync result carries as its ``run``.
RUN_FIELDS = ("status", "started_at", "finished_at", "duration_s", "outcomes")
#: The destination operations the run history counts before delivery (its ``planned_<op>`` columns).
PLANNED = re.findall(r"planned_(\w+)", RUNS.ddl)
#: The delivery figures the run history keeps (:class:`~spark_jobs.sinks.core.Stats`).
DELIVERED = ("sent", "inserted", "updated", "deleted", "rejected", "retried")
#: What makes two refusals of one kind read differently — a quoted value, an address, a number (an
#: HTTP status aside) — replaced, so that their reasons group and the group's text holds no record's data.
_RECORD_VALUES = ((r"'[^']*'", "'…'"), (r'"[^"]*"', '"…"'), (r"[^\s@]+@[^\s@]+", "…@…"),
                  (r"(?<!HTTP )\b\d+(\.\d+)?\b", "N"))
#: Reasons a sync result lists (the most frequent first).
TOP_REASONS = 5


def top_reasons(refused: DataFrame) -> list[dict[str, Any]]:
    """The most frequent reasons the destination gave, grouped with the records' values taken out
    (:data:`_RECORD_VALUES`): ``[{"reason": "HTTP 422: email '…' is not a valid address", "count": 40}]``.
    One aggregation in Spark; only :data:`TOP_REASONS` rows reach the driver."""
    from pyspark.sql import functions as F

    reason = F.col("error")
    for pattern, replacement in _RECORD_VALUES:
        reason = F.regexp_replace(reason, pattern, replacement)
    grouped = refused.groupBy(reason.alias("reason")).count().orderBy(F.desc("count"), "reason")
    return [{"reason": row["reason"], "count": int(row["count"])} for row in grouped.limit(TOP_REASONS).collect()]


def refused_whole(plan: SyncPlan, delivered: Delivered) -> bool:
    """Whether the destination refused the change set whole (:mod:`spark_jobs.jobs.sync`): records of
    it sent and refused — not only records the sink could not send as they are (``stats.unsent``) —,
    none of anything delivered, and ``max_reject_fraction`` below 1. Such a sync commits nothing."""
    stats, fraction = delivered.stats, plan.spec.max_reject_fraction
    accepts_all = fraction is not None and fraction >= 1
    return plan.records > plan.resent and stats.rejected > stats.unsent and stats.sent == 0 and not accepts_all


@dataclass(frozen=True)
class SyncReport:
    """One sync's report (the module docstring)."""

    spec: SyncSpec
    sink_cls: type[Sink]
    label: str  # the destination, as the run history and messages name it
    started_at: datetime

    @classmethod
    def start(cls, spec: SyncSpec, sink_cls: type[Sink]) -> SyncReport:
        return cls(spec, sink_cls, destination_label(spec.destination), datetime.now(timezone.utc))

    @property
    def sink_name(self) -> str:
        return str(self.sink_cls.name or self.spec.destination.get("type"))

    def row(self, status: str, plan: SyncPlan | None = None, delivered: Delivered | None = None,
            committed: bool = False, error: str | None = None) -> dict[str, Any]:
        """The run's run-history row, from what the steps it got to returned (the defaults for the others)."""
        spec, finished = self.spec, datetime.now(timezone.utc)
        planned = plan.planned if plan else {}
        stats = delivered.stats.__dict__ if delivered else {}
        return {
            "run_id": spec.run_id, "dag_id": spec.dag_id, "task_id": spec.task_id,
            "logical_date": spec.logical_date, "table": spec.table, "consumer": spec.consumer,
            "sink": self.sink_name, "destination": self.label, "mode": spec.mode,
            "dry_run": spec.dry_run, "status": status, "error": error,
            "from_version": spec.from_version, "to_version": spec.to_version,
            "committed": committed, "started_at": self.started_at, "finished_at": finished,
            "duration_s": round((finished - self.started_at).total_seconds(), 3),
            **{f"planned_{op}": int(planned.get(op, 0)) for op in PLANNED},
            "resent": int(plan.resent if plan else 0),
            **{name: int(stats.get(name, 0)) for name in DELIVERED},
            "outcomes": {k: int(v) for k, v in (stats.get("outcomes") or {}).items()},
        }

    def record(self, status: str, plan: SyncPlan | None = None, delivered: Delivered | None = None,
               committed: bool = False, error: str | None = None) -> dict[str, Any]:
        """Append the run's row to the run history; return it."""
        row = self.row(status, plan, delivered, committed, error)
        runs.record(self.spec.lake, row)
        return row

    def dry_run(self, plan: SyncPlan, written: Ref) -> SyncResult:
        """The result of a dry run, whose operations went to ``written`` instead of the destination."""
        return self.result(self.record("dry_run", plan), plan, dry_run=True, plan=written, outputs=[written])

    def finish(self, plan: SyncPlan | None, delivered: Delivered | None, committed: bool,
               failure: Exception | None = None) -> SyncResult:
        """Record the run and return its result. A run that failed (``failure``) is recorded with what
        its steps returned before it and the failure is raised again; a change set refused whole
        (nothing committed) or more rejects than ``max_reject_fraction`` allows (what was delivered
        committed) fail the task after the run is recorded."""
        if failure is not None:
            self.record("failed", plan, delivered, committed, f"{type(failure).__name__}: {failure}"[:4000])
            raise failure
        assert plan is not None and delivered is not None, "a sync that did not fail has planned and delivered"
        spec, stats = self.spec, delivered.stats
        fraction, total, rejected = spec.max_reject_fraction, plan.records, stats.rejected
        refused = refused_whole(plan, delivered)
        too_many = not refused and fraction is not None and rejected > fraction * total
        row = self.row("refused" if refused else "too_many_rejects" if too_many else "success", plan, delivered,
                       committed)
        reasons = top_reasons(delivered.refused) if rejected else None
        result = self.result(row, plan, committed=committed, stats=stats.__dict__, delivery_s=delivered.seconds,
                             delivered_from=delivered.where, reject_reasons=reasons,
                             outputs=[{"name": self.label, "uri": None, "version": None}])
        runs.record(spec.lake, row)
        said = "; ".join(f"{r['reason']} ({r['count']})" for r in reasons or [])
        if refused:
            raise DestinationError(
                f"{self.label} refused this change set whole: {rejected} of its {total} records rejected, none "
                "delivered (a wrong configuration, credential or API looks like this). Nothing was committed: the "
                f"consumer stays at version {spec.from_version}, the records are in _system/rejects with the "
                "destination's reasons, and a re-run of this task once the cause is fixed sends the same change set "
                f"again (max_reject_fraction=1 would accept it). Most frequent reasons: {said}")
        if too_many:
            raise DestinationError(
                f"{rejected} of {total} records ({rejected / total:.1%}) were rejected by {self.label}, more than "
                f"max_reject_fraction={fraction:g}. The {stats.sent} delivered records are committed (version "
                f"{spec.to_version}); the rejected ones are in _system/rejects with their errors and will be sent "
                f"again on the next run. Most frequent reasons: {said}")
        return result

    def result(self, row: dict[str, Any], sync_plan: SyncPlan | None = None, **outcome: Any) -> SyncResult:
        """The sync's result: what every result says (the spec's table, consumer, mode, destination
        without its secrets, versions), the plan's figures, ``outcome`` (committed, stats, ...) and
        the run-history ``row``'s outcome."""
        spec = self.spec
        defaults: dict[str, Any] = {"dry_run": False, "committed": False, "stats": Stats().__dict__, "outputs": []}
        return SyncResult(
            table=spec.table, consumer=spec.consumer, mode=spec.mode,
            destination={k: v for k, v in spec.destination.items() if k != "secrets_env"},
            from_version=spec.from_version, to_version=spec.to_version,
            planned=sync_plan.planned if sync_plan else {}, resent=sync_plan.resent if sync_plan else 0,
            inputs=sync_plan.inputs if sync_plan else [], run={k: row[k] for k in RUN_FIELDS},
            **{**defaults, **outcome})
