"""What the view shows, as plain data: the syncs per consumer and destination with their counts by
operation and outcome per logical day, and the pending rejects.

A *sync* is one consumer of one table feeding one destination; its runs are the rows of
``_system/runs``. Counts are what reached the destination (inserted, updated, deleted) and what it
refused (rejected), bucketed by the run's logical date (the date a backfill or a catch-up run is
for, so a backfill lands on the days it fills, not the day it ran). Dry runs deliver nothing and are
counted apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from spark_jobs.contract.system_tables import REJECTS, RUNS

#: the columns of ``_system/runs`` the view shows (not the planned counts and outcomes per operation)
RUN_COLUMNS = RUNS.select(
    "run_id", "dag_id", "task_id", "logical_date", "table", "consumer", "sink", "destination", "mode", "dry_run",
    "status", "error", "from_version", "to_version", "committed", "started_at", "finished_at", "duration_s",
    "resent", "sent", "inserted", "updated", "deleted", "rejected", "retried",
)
REJECT_COLUMNS = REJECTS.columns
#: what a run did at the destination, stacked in this order in the chart
OPERATIONS = ("inserted", "updated", "deleted")
OUTCOMES = ("rejected",)
#: statuses of a run that did not deliver what it planned
FAILED = frozenset({"failed", "refused", "too_many_rejects"})
#: the chart shows at most this many of the latest logical days
MAX_DAYS = 30


@dataclass
class Day:
    """One logical day of a sync: its runs and what they delivered and had refused."""

    day: str
    runs: int = 0
    failed: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    rejected: int = 0


@dataclass
class Sync:
    """One consumer of one table feeding one destination."""

    table: str
    consumer: str
    destination: str
    runs: int = 0
    failed: int = 0
    dry_runs: int = 0
    pending_rejects: int = 0
    last_run: dict[str, Any] | None = None
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPERATIONS + OUTCOMES, 0))
    days: list[Day] = field(default_factory=list)
    recent_runs: list[dict[str, Any]] = field(default_factory=list)


def _day(run: dict[str, Any]) -> str:
    """The run's logical day (``YYYY-MM-DD``); a run without one counts on the day it started."""
    logical = run.get("logical_date")
    if logical:
        return str(logical)[:10]
    started = run.get("started_at")
    return started.date().isoformat() if isinstance(started, datetime) else "unknown"


def _started(run: dict[str, Any]) -> str:
    return str(run.get("started_at") or "")


def summarise(runs: list[dict[str, Any]], rejects: list[dict[str, Any]], recent: int = 10) -> list[Sync]:
    """The syncs found in ``runs`` (rows of RUN_COLUMNS), ordered by table, consumer and destination,
    each with its pending rejects counted from ``rejects`` (rows of REJECT_COLUMNS)."""
    pending: dict[tuple[str, str], int] = defaultdict(int)
    for entry in rejects:
        pending[(entry["table"], entry["consumer"])] += 1
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        grouped[(run["table"] or "", run["consumer"] or "", run["destination"] or "")].append(run)

    syncs = []
    for (table, consumer, destination), its_runs in sorted(grouped.items()):
        its_runs.sort(key=_started)
        sync = Sync(table, consumer, destination, pending_rejects=pending.get((table, consumer), 0),
                    last_run=its_runs[-1], recent_runs=its_runs[-recent:][::-1])
        days: dict[str, Day] = {}
        for run in its_runs:
            if run.get("dry_run"):
                sync.dry_runs += 1
                continue
            day = days.setdefault(_day(run), Day(_day(run)))
            failed = run.get("status") in FAILED
            sync.runs += 1
            day.runs += 1
            sync.failed += failed
            day.failed += failed
            for count in OPERATIONS + OUTCOMES:
                value = int(run.get(count) or 0)
                sync.totals[count] += value
                setattr(day, count, getattr(day, count) + value)
        sync.days = [days[d] for d in sorted(days)][-MAX_DAYS:]
        syncs.append(sync)
    return syncs


def pending_rejects(rejects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rejects, most recently refused first."""
    return sorted(rejects, key=lambda entry: (str(entry.get("last_seen") or ""), entry.get("key") or ""), reverse=True)


def as_json(value: Any) -> Any:
    """``value`` (a Sync, rows, ...) as JSON-ready data: timestamps become ISO strings."""
    if isinstance(value, Sync):
        value = asdict(value)
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
