"""Run history ``<warehouse>/_system/runs``: one row per sync run, whatever its outcome.

What a team asks after the fact — how much did last night's sync send, how much was refused, how
long did it take, which versions did it cover, did it commit — answered from one small Delta table,
including for runs that failed (``status = 'failed'`` with the error) and dry runs.

Each row is one blind append (:mod:`spark_jobs.state.system_tables`): no read, no existence check, no
conflict with other tasks appending at once.
"""

from __future__ import annotations

from typing import Any

from spark_jobs.state import system_tables
from spark_jobs.contract import Warehouse
from spark_jobs.contract.system_tables import RUNS


def record(wh: Warehouse, row: dict[str, Any]) -> None:
    """Append a run's row (the columns of :data:`~spark_jobs.contract.system_tables.RUNS`, its
    ``outcomes`` a dict; :meth:`spark_jobs.jobs.sync_report.SyncReport.row` builds it)."""
    system_tables.record(wh, RUNS, {**row, "outcomes": list(row["outcomes"].items())})  # Arrow maps: pairs
