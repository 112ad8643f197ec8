"""Progress lines in the task log while a long Spark action runs on the driver's behalf.

The driver is blocked in the action while executors deliver, so a background thread reads Spark's
status tracker every few seconds and logs how many of the running stages' tasks are done, with the
records that represents (the planned total times the fraction done) and the rate so far. Executors
log their own per-partition lines too, but on a cluster those stay in the executors' logs: these
lines are the ones that reach the Airflow task log wherever Spark runs.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Iterator

log = logging.getLogger("airflow_reverse_etl.progress")


@contextlib.contextmanager
def reporting(spark, label: str, total_records: int, every: float = 10.0) -> Iterator[None]:
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    started = time.monotonic()

    def report() -> None:
        while not stop.wait(every):
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            tasks = sum(s.numTasks for s in stages if s)
            done = sum(s.numCompletedTasks for s in stages if s)
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
        log.info("%s: finished in %.1fs", label, time.monotonic() - started)
