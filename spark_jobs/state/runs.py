"""Run history ``<warehouse>/_system/runs``: one row per sync run, whatever its outcome.

What a team asks after the fact — how much did last night's sync send, how much was refused, how
long did it take, which versions did it cover, did it commit — answered from one small Delta table,
including for runs that failed (``status = 'failed'`` with the error) and dry runs.

Each row is one blind append (:mod:`spark_jobs.state.system_tables`): no read, no existence check, no
conflict with other tasks appending at once.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from spark_jobs.state import system_tables
from spark_jobs.contract import SyncSpec, Warehouse
from spark_jobs.contract.system_tables import RUNS

PLANNED = re.findall(r"planned_(\w+)", RUNS.ddl)  # the destination operations counted before delivery


def record(wh: Warehouse, spec: SyncSpec, *, sink: str, destination: str, status: str,
           started_at: datetime, planned: dict[str, int] | None = None, stats: dict[str, Any] | None = None,
           resent: int = 0, committed: bool = False, error: str | None = None) -> dict[str, Any]:
    """Append the run's row and return it (the sync result carries the same figures)."""
    finished = datetime.now(timezone.utc)
    planned = planned or {}
    stats = stats or {}
    outcomes = {k: int(v) for k, v in (stats.get("outcomes") or {}).items()}
    row: dict[str, Any] = {
        "run_id": spec.run_id, "dag_id": spec.dag_id, "task_id": spec.task_id,
        "logical_date": spec.logical_date, "table": spec.table, "consumer": spec.consumer,
        "sink": sink, "destination": destination, "mode": spec.mode,
        "dry_run": spec.dry_run, "status": status, "error": error,
        "from_version": spec.from_version, "to_version": spec.to_version,
        "committed": committed, "started_at": started_at, "finished_at": finished,
        "duration_s": round((finished - started_at).total_seconds(), 3),
        **{f"planned_{op}": int(planned.get(op, 0)) for op in PLANNED},
        "resent": int(resent),
        **{name: int(stats.get(name, 0)) for name in ("sent", "inserted", "updated", "deleted", "rejected", "retried")},
        "outcomes": outcomes,
    }
    system_tables.record(wh, RUNS, {**row, "outcomes": list(outcomes.items())})  # Arrow maps: pairs
    return row
