"""One sync as its run-history row (:mod:`spark_jobs.state.runs`) tells it.

The row is written once, at the end, failed runs included, with as much as the run got to know. So
the run's state is filled in as the sync goes, each field by the one step that learns it: the plan
(``planned``, ``resent``: :mod:`spark_jobs.jobs.sync_plan`), the delivery (``stats``:
:mod:`spark_jobs.jobs.sync`) and the commit (``committed``: :mod:`spark_jobs.jobs.sync_commit`).
A run that fails in between records the fields set so far and the defaults of the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from spark_jobs.contract import SyncSpec
from spark_jobs.sinks.base import Sink
from spark_jobs.state import runs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class SyncRun:
    """One sync and what its run-history row says of it (the module docstring)."""

    spark: SparkSession
    spec: SyncSpec
    sink_cls: type[Sink]
    label: str
    started_at: datetime
    planned: dict[str, int] = field(default_factory=dict)
    resent: int = 0
    stats: dict[str, Any] | None = None
    committed: bool = False

    @property
    def sink_name(self) -> str:
        return str(self.sink_cls.name or self.spec.destination.get("type"))

    def record(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Append the run's row to the run history; return it."""
        return runs.record(self.spec.lake, self.spec, sink=self.sink_name, destination=self.label,
                           status=status, started_at=self.started_at, error=error, planned=self.planned,
                           stats=self.stats, resent=self.resent, committed=self.committed)
