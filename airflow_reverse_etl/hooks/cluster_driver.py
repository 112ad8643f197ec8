"""A job's driver in cluster deploy mode on a Spark standalone cluster: submitted to the master, run on a
worker, found again by its submission id.

In client mode (the default) the driver is a child of the Airflow task: a worker restart or a deploy
ends it, and the retry runs the job again from scratch. In cluster deploy mode the master starts the
driver on a worker and supervises it; the task only holds its submission id (``driver-...``), which
the operators keep in Airflow's task state store (:class:`~airflow.sdk.ResumableJobMixin`, as the
apache-spark provider's ``SparkSubmitOperator`` does), so a retry after a lost worker reattaches to the
running driver and takes its result, and a deferrable task frees its worker slot while a trigger polls
the driver (:class:`~airflow_reverse_etl.triggers.spark_driver.SparkDriverTrigger`). The result
travels as in client mode: ``result.json`` in the job's directory of the warehouse.

Spark refuses cluster deploy mode for Python applications on a standalone master ("not supported for
python applications on standalone clusters"), so the job is submitted the way the master launches any
JVM driver: the application is a *driver bundle* — the ``spark_jobs`` package zipped with a
``__main__.py``, kept in the warehouse (``_system/code/``) where every node reads it, as the jar the
master hands to the worker — and the main class is pyspark's own ``PythonRunner``, which the worker
runs with the bundle's local copy (``{{USER_JAR}}``, substituted by the worker) as both the program
(Python runs a zip's ``__main__.py``) and its import path. The driver then ships the same bundle to
its executors (:func:`spark_jobs.entry.main`'s ``ship``). What the nodes need is what client mode
needs, plus the Delta jars and Python at the same paths as the Airflow worker's (one image, as in
``docker/``).

What stays with client mode: secrets. A cluster-mode driver does not inherit the task's environment
(the submission carries only a neutral environment, see :data:`SUBMIT_ENVIRONMENT`), so a job that
needs a password is refused in cluster mode with a configuration error.

The master's REST submission server (``spark.master.rest.enabled``, port 6066 unless the connection's
``rest-port`` extra says otherwise) answers the status of a submission id and kills it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import sys
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from spark_jobs.contract import Warehouse

log = logging.getLogger(__name__)

#: pyspark's runner of a Python driver program, launched by the worker like any JVM main class.
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
#: The worker substitutes the local copy of the application jar (here: the driver bundle) for this.
USER_JAR = "{{USER_JAR}}"
#: Driver states of a submission that is still alive (the master's ``DriverState``; UNKNOWN while the
#: master recovers), and the one of a driver that exited cleanly.
ACTIVE = frozenset({"SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"})
FINISHED = "FINISHED"
#: What the master answers for an id it does not know (restarted without recovery): nothing to reattach to.
NOT_FOUND = "NOT_FOUND"
#: Environment variables the submission carries (spark-submit's legacy gateway sends its whole
#: environment to the master, which hands it to the driver): the ones Spark and Python need to start,
#: never the task's secrets or cloud credentials (the nodes have their own).
SUBMIT_ENVIRONMENT = ("PATH", "JAVA_HOME", "LANG", "LC_ALL", "TZ", "HOME")

_MAIN = b'''"""Cluster deploy mode's driver program: python <this bundle> --spec URI --result URI."""
import sys

from spark_jobs.entry import main

sys.exit(main(sys.argv[1:], ship=sys.argv[0]))
'''


@dataclass(frozen=True)
class ClusterDriver:
    """A submitted driver: its submission id, the job directory its result goes to, and the master's
    REST server that knows it. What the task state store and the trigger keep (``to_json()``)."""

    driver_id: str
    job_dir: str
    rest_url: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ClusterDriver:
        return cls(**{key: str(data[key]) for key in ("driver_id", "job_dir", "rest_url")})

    @property
    def result_uri(self) -> str:
        return f"{self.job_dir}/result.json"


@cache
def _bundle(archive: str) -> tuple[str, bytes]:
    """(content hash, bytes) of the driver bundle: the zipped ``spark_jobs`` plus ``__main__.py``."""
    out = io.BytesIO()
    with zipfile.ZipFile(archive) as package, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for item in package.infolist():
            bundle.writestr(item, package.read(item))
        bundle.writestr("__main__.py", _MAIN)
    data = out.getvalue()
    return hashlib.sha1(data).hexdigest()[:12], data


def driver_bundle(warehouse: str, archive: str) -> str:
    """The URI of the driver bundle built from ``archive`` (the zipped ``spark_jobs``) in the
    warehouse, written there once per content."""
    import fsspec

    digest, data = _bundle(archive)
    uri = Warehouse(warehouse).driver_bundle(digest)
    fs, path = fsspec.core.url_to_fs(uri)
    if not fs.exists(path):
        fs.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        fs.pipe_file(partial, data)
        fs.mv(partial, path)
    return uri


def submit_environment() -> dict[str, str]:
    """The spark-submit environment of a cluster-mode submission (:data:`SUBMIT_ENVIRONMENT`, and
    Spark's own ``SPARK_*`` settings such as ``SPARK_CONF_DIR``), with this Python's ``bin`` first on
    ``PATH``, where pip puts pyspark's ``spark-submit``."""
    env = {key: value for key, value in os.environ.items()
           if key in SUBMIT_ENVIRONMENT or key.startswith("SPARK_")}
    env["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(sys.executable), env.get("PATH")]))
    return env


def _rest(url: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def driver_state(driver: ClusterDriver) -> str:
    """The master's state of the driver (``SUBMITTED``, ``RUNNING``, ``FINISHED``, ``FAILED``,
    ``KILLED``, ``ERROR``, ...), or :data:`NOT_FOUND` when the master does not know the id."""
    answer = _rest(f"{driver.rest_url}/v1/submissions/status/{driver.driver_id}")
    if not answer.get("success"):
        return NOT_FOUND
    return str(answer.get("driverState") or "UNKNOWN")


def wait_for_driver(driver: ClusterDriver, poll_interval: float = 1.0) -> str:
    """Poll the driver until it leaves the active states; its final state. A master that does not
    answer a poll (restarting, briefly unreachable) is asked again, up to ten polls in a row."""
    missed = 0
    while True:
        try:
            state = driver_state(driver)
            missed = 0
        except OSError as exc:  # urllib's URLError is one
            missed += 1
            if missed > 10:
                raise
            log.warning("The Spark master did not answer for driver %s: %s", driver.driver_id, exc)
            state = "UNKNOWN"
        if state not in ACTIVE:
            log.info("Driver %s ended: %s", driver.driver_id, state)
            return state
        time.sleep(poll_interval)


def kill_driver(driver: ClusterDriver) -> None:
    """Ask the master to kill the driver (the task was killed): its executors go with it."""
    answer = _rest(f"{driver.rest_url}/v1/submissions/kill/{driver.driver_id}", method="POST")
    log.info("Kill of driver %s: %s", driver.driver_id, answer.get("message") or answer.get("success"))
