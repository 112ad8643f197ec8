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

A task attempt killed outright (SIGKILL, a lost worker) cannot interrupt its own operations, and the
server keeps running what it was doing — a delivery, say — for minutes (a detached execution is only
reaped after ``spark.connect.execute.manager.detachedTimeout``). The retry would then send beside it,
and an older attempt's writes could land after newer ones. So each attempt's session is named after
the attempt (:class:`TaskAttempt`), and an attempt first attaches to the sessions of the attempts
before it, interrupts whatever they left running and releases them (:meth:`SparkConnectRunner.
stop_earlier_attempts`), before it runs its own job. Measured under load: the interrupt stops the
operation, but its Python workers may still send for a few seconds (branch `retry` has the test that
shows it); the retry re-sends the same change set, so the destination still converges.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# One job at a time may change this process's environment (an Airflow task runs one job; tests may
# run several in threads).
_environment_lock = threading.Lock()

# pyspark's addArtifacts(pyfile=True) calls importlib.invalidate_caches(), which makes an import
# running at the same time in another thread fail with a KeyError: one upload at a time per process.
_artifact_lock = threading.Lock()

#: what a Spark Connect client reports when its server is gone (killed, unreachable) or was
#: restarted under it (the session or operation it had is unknown to the new server)
_LOST_SERVER = re.compile(r"StatusCode\.UNAVAILABLE|failed to connect to all addresses|Connection refused|"
                          r"Socket closed|INVALID_HANDLE\.(?:SESSION|OPERATION)|NO_ACTIVE_SESSION")


def lost_server(error: dict[str, Any]) -> bool:
    """Whether a failed job's ``error`` is its Spark Connect server going away under it."""
    return bool(_LOST_SERVER.search(f"{error.get('type')}: {error.get('message')}"))


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


#: the namespace of the attempts' session ids (uuid5: the same attempt always names the same session)
_SESSION_NAMESPACE = uuid.UUID("6c1f7e0e-2b1a-4f55-9a35-0b7d0c3c9d21")


@dataclass(frozen=True)
class TaskAttempt:
    """One attempt of one task instance: ``task`` names the instance uniquely enough that two
    deployments sharing a server do not meet (the operators use dag, task, run, map index and the
    run's start time), ``try_number`` the attempt."""

    task: str
    try_number: int

    def session_id(self, try_number: int | None = None) -> str:
        """The Spark Connect session id of this attempt (or of attempt ``try_number`` of the task)."""
        return str(uuid.uuid5(_SESSION_NAMESPACE, f"{self.task}#{try_number or self.try_number}"))


class SparkConnectRunner:
    """Runs jobs on the Spark Connect server at ``url`` (``sc://host:port/;params``), for the task
    ``attempt`` when given (else in a session with a random id, which no later attempt can find).
    A server that stops answering fails the job after about ``timeout_s`` seconds."""

    def __init__(self, url: str, spark_conf: dict[str, Any] | None = None,
                 attempt: TaskAttempt | None = None, timeout_s: float | None = None) -> None:
        from spark_jobs.session import DEFAULT_SERVER_TIMEOUT_S

        self.url = url
        self.spark_conf = dict(spark_conf or {})
        self.attempt = attempt
        self.timeout_s = DEFAULT_SERVER_TIMEOUT_S if timeout_s is None else timeout_s
        self._session: SparkSession | None = None

    def run(self, spec: dict[str, Any], secrets: dict[str, str] | None, archive: str) -> dict[str, Any]:
        """Run the job ``spec`` names in a new session with ``archive`` (the zipped ``spark_jobs``)
        shipped to it; return the job's result dict (``status`` success or failed).

        Every failure ends as a failed result, never as a raised exception: one the job reports
        itself, or one of opening, preparing or closing its session (a server that is down or was
        lost mid-job, whose error then names the server), so the caller records it and raises its
        typed error."""
        from spark_jobs.entry import failure

        log.info("Running the %s job on the Spark Connect server %s", spec.get("job"), server_label(self.url))
        try:
            result = self._run_in_session(spec, secrets, archive)
        except Exception as exc:  # reported as the job's result, like a failure inside the job
            result = {"status": "failed", "job": spec.get("job"), "error": failure(exc, spec.get("warehouse"))}
        if result.get("status") != "success" and lost_server(result.get("error") or {}):
            result["error"] = self._naming_the_server(result["error"])
        return result

    def _run_in_session(self, spec: dict[str, Any], secrets: dict[str, str] | None,
                        archive: str) -> dict[str, Any]:
        from spark_jobs import entry
        from spark_jobs.session import connect_session

        self.stop_earlier_attempts()
        session_id = self.attempt.session_id() if self.attempt else None
        with connect_session(self.url, session_id, self.timeout_s) as spark:
            self._session = spark
            try:
                # asked before the job: a session whose server died during the job cannot answer
                where = entry.where(spark)
                with _artifact_lock:
                    spark.addArtifacts(archive, pyfile=True)
                for key, value in self.spark_conf.items():  # runtime settings only: the server fixed the rest
                    spark.conf.set(key, str(value))
                with environment(secrets or {}):
                    result = entry.run(spark, spec)
                return {**result, "spark": where}
            finally:
                self._session = None

    def _naming_the_server(self, error: dict[str, Any]) -> dict[str, Any]:
        """``error`` as the retryable infrastructure failure it is, its message naming the server."""
        message = (f"Lost the Spark Connect server {server_label(self.url)}: it stopped answering for "
                   f"{self.timeout_s:g} s, or restarted and no longer knows the job's session; a retry "
                   f"runs the job again once the server is back. {error.get('message')}")
        return {**error, "message": message, "category": "infrastructure", "retryable": True}

    def stop_earlier_attempts(self) -> None:
        """Interrupt what the task's earlier attempts left running on the server, and release their
        sessions. A session that was released already (the attempt ended on its own) or never
        opened has nothing running: the server refuses it or opens an empty one, both fine here."""
        from spark_jobs.session import connect_session

        if self.attempt is None:
            return
        for earlier in range(1, self.attempt.try_number):
            try:
                with connect_session(self.url, self.attempt.session_id(earlier), self.timeout_s) as left:
                    interrupted = left.interruptAll()
            except Exception as exc:  # a closed or expired session: nothing left to stop
                log.debug("Attempt %d's Spark Connect session: %s", earlier, exc)
                continue
            if interrupted:
                log.warning("Interrupted %d Spark operation(s) attempt %d left running on the server",
                            len(interrupted), earlier)

    def kill(self) -> None:
        """Interrupt the running job's Spark operations (the task was killed)."""
        session = self._session
        if session is not None:
            session.interruptAll()
