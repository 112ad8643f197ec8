"""A source table that moves through snapshot -> diff -> sync, one logical date per step, for the sink
and sync tests: each test says what the source holds and what the destination must end up holding."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests_common.jobs import job, job_error, write_parquet

SCHEMA = "id INT, name STRING, city STRING"


class Pipeline:
    """One snapshot table and one consumer; :meth:`step` snapshots new source rows for the next day
    and returns the consumer's change set, :meth:`sync` delivers it."""

    def __init__(self, spark, warehouse: str, tmp_path, consumer: str = "crm", name: str = "customers",
                 schema: str = SCHEMA, key: tuple[str, ...] = ("id",)):
        self.spark, self.warehouse, self.consumer, self.name = spark, warehouse, consumer, name
        self.schema, self.key = schema, list(key)
        self.source = str(tmp_path / f"source-{name}")
        self.day = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        self.steps = 0

    def step(self, rows: list[tuple], **diff_options: Any) -> dict[str, Any]:
        write_parquet(self.spark, self.source, rows, self.schema)
        date = (self.day + dt.timedelta(days=self.steps)).isoformat()
        self.steps += 1
        job(self.spark, "snapshot", self.warehouse, name=self.name, primary_key=self.key,
            source={"format": "parquet", "path": self.source}, logical_date=date, run_id=f"run-{date}")
        return job(self.spark, "diff", self.warehouse, table=f"snapshots/{self.name}", consumer=self.consumer,
                   **diff_options)

    def diff(self, consumer: str, **diff_options: Any) -> dict[str, Any]:
        """Another consumer's change set of the same snapshot table."""
        return job(self.spark, "diff", self.warehouse, table=f"snapshots/{self.name}", consumer=consumer,
                   **diff_options)

    def spec(self, changes: dict[str, Any], destination: dict[str, Any], **options: Any) -> dict[str, Any]:
        from spark_jobs.contract import change_set_fields

        return {**change_set_fields(changes), "destination": destination, "run_id": f"sync-{self.steps}", **options}

    def sync(self, changes: dict[str, Any], destination: dict[str, Any], **options: Any) -> dict[str, Any]:
        return job(self.spark, "sync", self.warehouse, **self.spec(changes, destination, **options))

    def sync_error(self, changes: dict[str, Any], destination: dict[str, Any], **options: Any) -> dict[str, Any]:
        return job_error(self.spark, "sync", self.warehouse, **self.spec(changes, destination, **options))

    def committed(self) -> int | None:
        from spark_jobs.state.consumers import committed_version
        from spark_jobs.contract import Warehouse

        return committed_version(Warehouse(self.warehouse), f"snapshots/{self.name}", self.consumer)

    def system(self, table: str):
        return self.spark.read.format("delta").load(f"{self.warehouse}/_system/{table}")

    def ledger(self) -> list[dict[str, Any]]:
        return [r.asDict() for r in self.system("rejects").orderBy("key").collect()]

    def runs(self) -> list[dict[str, Any]]:
        return [r.asDict() for r in self.system("runs").orderBy("started_at").collect()]


def sync_killed_midway(pipeline: Pipeline, changes: dict[str, Any], destination: dict[str, Any],
                       delivered, total: int, timeout: float = 300, **options: Any) -> dict[str, Any]:
    """Start the sync delivering in the executors, and once the destination holds some but not all
    rows (``delivered()``), cancel its Spark job — the executors' Python workers are killed mid-batch,
    as when a task is killed. Returns the failed job result; asserts the kill really happened midway."""
    import threading
    import time

    from spark_jobs.entry import run

    spark = pipeline.spark
    outcome: dict[str, Any] = {}
    # the kill cancels Spark jobs: the executors must deliver, whatever the change set's size
    options["delivery"] = {**options.get("delivery", {}), "driver_max_records": 0}
    spec = {"job": "sync", "warehouse": pipeline.warehouse, **pipeline.spec(changes, destination, **options)}
    thread = threading.Thread(target=lambda: outcome.update(run(spark, spec)), daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and thread.is_alive():
        if 0 < delivered() < total:
            spark.sparkContext.cancelAllJobs()
            break
        time.sleep(0.05)
    thread.join(timeout)
    assert outcome.get("status") == "failed", f"the sync was not killed midway: {outcome}"
    assert 0 < delivered() < total, "the kill did not land midway"
    return outcome
