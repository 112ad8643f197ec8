"""Run a :mod:`spark_jobs` job in the task process as a client of a Spark Connect server.

The Connect counterpart of spark-submit: no JVM in the Airflow worker, no process start. Each job gets
a fresh session of the server (its own SQL settings, temporary views and commit metadata; stopped
afterwards) to which the ``spark_jobs`` package is shipped as a Python artifact — what ``--py-files``
does for spark-submit — so executor-side code (sinks in ``mapInArrow``) imports the same modules as
the driver-side code running here. The job is :func:`spark_jobs.entry.run`, the same function the
spark-submit bootstrap calls, so the result (and the task's XCom) has the same shape.

pyspark is imported only when a job runs: ``airflow_reverse_etl`` imports no pyspark at import time.

Secrets (environment variable -> value, as the operators produce them) are put into this process's
environment for the duration of the job and restored afterwards. With spark-submit they are the
environment of the driver process, and the job library reads them from the driver's environment; with
Connect the driver-side code *is* this process, so the same contract holds with no change to the job
code and no new way for a secret to travel (an explicit mapping would have to be threaded through
every job that reads one). They never reach argv, the spec, the result or the log; the task process
already holds them, having read them from its Airflow connections.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any, Iterator
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

# One job at a time may change this process's environment (an Airflow task runs one job; tests may
# run several in threads).
_environment_lock = threading.Lock()


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block; restore what was there before."""
    if not values:
        yield
        return
    with _environment_lock:
        before = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def server_label(url: str) -> str:
    """``sc://host:port`` without the parameters (a token may be one): safe to log."""
    return f"sc://{urlsplit(url.replace('sc://', 'http://', 1)).netloc}"


class SparkConnectRunner:
    """Runs jobs on the Spark Connect server at ``url`` (``sc://host:port/;params``)."""

    def __init__(self, url: str, spark_conf: dict[str, Any] | None = None) -> None:
        self.url = url
        self.spark_conf = dict(spark_conf or {})
        self._session = None

    def run(self, spec: dict[str, Any], secrets: dict[str, str] | None, archive: str) -> dict[str, Any]:
        """Run the job ``spec`` names in a new session with ``archive`` (the zipped ``spark_jobs``)
        shipped to it; return the job's result dict (``status`` success or failed)."""
        from spark_jobs import entry
        from spark_jobs.session import connect_session

        log.info("Running the %s job on the Spark Connect server %s", spec.get("job"), server_label(self.url))
        with connect_session(self.url) as spark:
            self._session = spark
            try:
                spark.addArtifacts(archive, pyfile=True)
                for key, value in self.spark_conf.items():  # runtime settings only: the server fixed the rest
                    spark.conf.set(key, str(value))
                with environment(secrets or {}):
                    result = entry.run(spark, spec)
                result["spark"] = entry.where(spark)
                return result
            finally:
                self._session = None

    def kill(self) -> None:
        """Interrupt the running job's Spark operations (the task was killed)."""
        session = self._session
        if session is not None:
            session.interruptAll()
