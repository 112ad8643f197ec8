"""Progress lines in the task log while a long Spark action runs on the driver's behalf.

The driver is blocked in the action while executors deliver, so a background thread reads Spark's
status tracker every few seconds and logs how many of the running stages' tasks are done, with the
records that represents (the planned total times the fraction done) and the rate so far. Executors
log their own per-partition lines too, but on a cluster those stay in the executors' logs: these
lines are the ones that reach the Airflow task log wherever Spark runs.

The stage counts come from where the session offers them: the status tracker of a classic session's
SparkContext, or the progress reports a Spark Connect server streams to a registered handler.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("airflow_reverse_etl.progress")


@contextlib.contextmanager
def reporting(spark: SparkSession, label: str, total_records: int, every: float = 10.0) -> Iterator[None]:
    running_stages, stop_watching = _watch_stages(spark)
    stop = threading.Event()
    started = time.monotonic()

    def report() -> None:
        while not stop.wait(every):
            stages = running_stages()
            tasks = sum(total for total, _ in stages)
            done = sum(completed for _, completed in stages)
            if not tasks:
                continue
            elapsed = time.monotonic() - started
            records = int(total_records * done / tasks)
            log.info("%s: %d/%d partitions done (~%d of %d records, %.0f records/s, %.0fs elapsed)",
                     label, done, tasks, records, total_records, records / max(elapsed, 1e-9), elapsed)

    thread = threading.Thread(target=report, name="aretl-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        stop_watching()
        log.info("%s: finished in %.1fs", label, time.monotonic() - started)


StageCounts = list[tuple[int, int]]  # (tasks, completed tasks) per running stage


def _watch_stages(spark: SparkSession) -> tuple[Callable[[], StageCounts], Callable[[], None]]:
    """(a function giving the running stages' task counts now, a function that stops watching)."""
    from spark_jobs.session import is_connect

    if not is_connect(spark):
        tracker = spark.sparkContext.statusTracker()

        def tracked() -> StageCounts:
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            return [(s.numTasks, s.numCompletedTasks) for s in stages if s]

        return tracked, lambda: None

    from pyspark.sql.connect.shell.progress import ProgressHandler, StageInfo

    latest: StageCounts = []

    class Handler(ProgressHandler):
        def __call__(self, stages: Iterable[StageInfo] | None, inflight_tasks: int, operation_id: str | None,
                     done: bool) -> None:
            latest[:] = [] if done else [(s.num_tasks, s.num_completed_tasks) for s in stages or () if not s.done]

    handler = Handler()
    spark.registerProgressHandler(handler)
    return (lambda: list(latest)), (lambda: spark.removeProgressHandler(handler))
