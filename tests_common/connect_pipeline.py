"""Snapshot -> diff -> sync of a small Parquet source into the test HTTP destination, every job run as
an Airflow task runs it over Spark Connect (:class:`SparkConnectRunner`: a new session per job, the job
library shipped to it). The client process starts no Spark of its own: the source is written with
pyarrow. For the tests and the benchmark of a long-lived server (``bench/connect_leak.py``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from airflow_reverse_etl.hooks.spark_connect_runner import SparkConnectRunner
from spark_jobs.contract import change_set_fields

DAY = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def http_destination_spec(server) -> dict[str, Any]:
    """The sync spec's ``destination`` for an unauthenticated :class:`HttpDestination`."""
    return {"type": "http", "endpoint": "/batch",
            "connection": {"conn_type": "http", "host": server.host, "port": server.port, "schema": "http"}}


class ConnectPipeline:
    """One snapshot table and one consumer of it on the server at ``url``; each :meth:`round` is one
    logical date: a new source version, its snapshot, the consumer's diff and the sync."""

    def __init__(self, url: str, work: Path, destination: dict[str, Any], timeout_s: float | None = None,
                 warehouse: str | None = None, name: str = "customers"):
        self.url, self.destination, self.timeout_s, self.name = url, destination, timeout_s, name
        work.mkdir(parents=True, exist_ok=True)
        self.warehouse = warehouse or str(work / "warehouse")
        self.source = str(work / "source.parquet")
        self.rounds = 0

    def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Run one job as a task would; its result (``status`` success or failed)."""
        from airflow_reverse_etl.hooks.spark_job import spark_jobs_archive

        runner = SparkConnectRunner(self.url, timeout_s=self.timeout_s)
        return runner.run({"warehouse": self.warehouse, **spec}, None, spark_jobs_archive())

    def ok(self, spec: dict[str, Any]) -> dict[str, Any]:
        result = self.run(spec)
        assert result["status"] == "success", result.get("error")
        return result

    def changes(self, ids: range) -> dict[str, Any]:
        """Write the source with rows ``ids`` (names change every round), snapshot it for the next
        logical date and return the consumer's change set."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        date = (DAY + dt.timedelta(days=self.rounds)).isoformat()
        pq.write_table(pa.table({"id": pa.array(ids, pa.int32()),
                                 "name": [f"name-{i}-{self.rounds}" for i in ids]}), self.source)
        self.rounds += 1
        self.ok({"job": "snapshot", "name": self.name, "primary_key": ["id"], "logical_date": date,
                 "run_id": f"run-{date}", "source": {"format": "parquet", "path": self.source}})
        return self.ok({"job": "diff", "table": f"snapshots/{self.name}", "consumer": "crm"})

    def sync_spec(self, changes: dict[str, Any]) -> dict[str, Any]:
        """The sync delivers in the server's executors (``driver_max_records: 0``), whatever the size:
        what its users measure is the server's side — its Python workers, its loss mid-delivery."""
        return {"job": "sync", **change_set_fields(changes), "destination": self.destination,
                "run_id": f"sync-{self.rounds}", "delivery": {"driver_max_records": 0}}

    def round(self, ids: range) -> list[dict[str, Any]]:
        """One logical date end to end (three jobs, the sync's Python workers on the server)."""
        changes = self.changes(ids)
        return [changes, self.ok(self.sync_spec(changes))]
