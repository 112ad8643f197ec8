"""A real Spark standalone cluster (master + one worker on 127.0.0.1) for the ``cluster`` tests.

The session fixture :func:`spark_cluster` starts it with ``scripts/services/spark_cluster.sh`` (or
reuses one that is already running, e.g. started by CI) and stops it at the end if it started it.

:func:`cluster_client` gives a test what a machine that submits to such a cluster has: a
``SPARK_CONF_DIR`` whose ``spark-defaults.conf`` holds the cluster's client settings. Two of them make
the test honest about code shipping and about where the code ran:

* ``spark.pyspark.python`` is an *executor Python* that sees pyspark and the Spark-side dependencies
  (tenacity, requests, ...) but **not** this project's packages — like a worker node on which only
  Spark is installed. So ``spark_jobs`` (and the sinks) import on executors only if the application
  shipped them with ``--py-files``. The driver keeps the Airflow worker's Python.
* an event log directory, so a test can read which master the application ran on and which executors
  ran its tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests_common.paths import REPO
from tests_common.spark_submit import SUBMIT_DEFAULTS, write_spark_defaults

SCRIPT = REPO / "scripts" / "services" / "spark_cluster.sh"


@dataclass(frozen=True)
class SparkCluster:
    master_url: str
    state_dir: Path  # logs, pid files, the worker's work dir (one directory per application)

    @property
    def rest_port(self) -> int:
        """The master's REST submission server (drivers in cluster deploy mode)."""
        return int(os.environ.get("ARETL_SPARK_MASTER_REST_PORT", "56066"))

    def state(self) -> dict:
        """The master's state as its web UI's JSON shows it: workers, applications, drivers."""
        import urllib.request

        port = os.environ.get("ARETL_SPARK_MASTER_UI_PORT", "58080")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=30) as response:
            return json.loads(response.read())

    def cluster_mode_connection(self) -> str:
        """The cluster as a ``spark`` connection running jobs in cluster deploy mode (JSON form of an
        ``AIRFLOW_CONN_<ID>`` variable)."""
        host, port = self.master_url.rsplit(":", 1)
        return json.dumps({"conn_type": "spark", "host": host, "port": int(port),
                           "extra": {"deploy-mode": "cluster", "rest-port": self.rest_port}})


def _script(command: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def spark_cluster():
    """Start (or reuse) the standalone master + worker; stop them afterwards if this session started them."""
    already_running = _script("status", 60).returncode == 0
    started = _script("start", 240)
    if started.returncode != 0:
        pytest.fail(f"Could not start the Spark standalone cluster:\n{started.stderr}", pytrace=False)
    state_dir = Path(os.environ.get("ARETL_SPARK_DIR", REPO / ".cache" / "services" / "spark"))
    try:
        yield SparkCluster(master_url=started.stdout.strip(), state_dir=state_dir)
    finally:
        if not already_running:
            _script("stop", 120)


def executor_python(directory: Path) -> Path:
    """A Python launcher that sees this interpreter's site-packages *without* running their ``.pth``
    files (``-S``): the editable install of this project is a ``.pth`` hook, so ``spark_jobs`` is not
    importable through it, while pyspark, tenacity and the other installed libraries are. PySpark puts
    the shipped ``--py-files`` on ``PYTHONPATH`` first; the libraries come after them."""
    site_packages = sysconfig.get_paths()["purelib"]
    launcher = directory / "executor-python"
    launcher.write_text(
        "#!/bin/sh\n"
        "# Executor Python of a worker that has pyspark and libraries, but not airflow-reverse-etl.\n"
        "# Each start leaves its pid in executor-python.launches, so a test can see it was used.\n"
        f'echo $$ >> "{directory}/executor-python.launches"\n'
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site_packages}"\n'
        f'exec "{sys.executable}" -S "$@"\n'
    )
    launcher.chmod(0o755)
    return launcher


@dataclass(frozen=True)
class ClusterClient:
    conf_dir: Path
    event_log_dir: Path
    executor_python: Path

    def configure(self, settings: dict[str, str]) -> None:
        """Add ``settings`` to the client's ``spark-defaults.conf`` (a test's own client settings, such
        as the object-store tests' S3A connector and endpoint)."""
        with (self.conf_dir / "spark-defaults.conf").open("a") as defaults:
            defaults.writelines(f"{key} {value}\n" for key, value in settings.items())

    def executor_python_launches(self) -> int:
        """How many Python processes the executors started through :attr:`executor_python`."""
        launches = self.executor_python.parent / "executor-python.launches"
        return len(launches.read_text().split()) if launches.exists() else 0

    def applications(self) -> list[dict]:
        """Per finished application: its id, name, Spark properties and the executor of each task."""
        apps = []
        for log in sorted(self.event_log_dir.iterdir()):
            if log.suffix == ".inprogress":  # an application still running (or killed)
                continue
            app = {"file": log.name, "properties": {}, "task_executors": [], "task_hosts": set()}
            for line in log.read_text().splitlines():
                event = json.loads(line)
                kind = event.get("Event")
                if kind == "SparkListenerApplicationStart":
                    app["id"], app["name"] = event.get("App ID"), event.get("App Name")
                elif kind == "SparkListenerEnvironmentUpdate":
                    app["properties"] = dict(event.get("Spark Properties") or {})
                elif kind == "SparkListenerTaskEnd":
                    app["task_executors"].append(event["Task Info"]["Executor ID"])
                    app["task_hosts"].add(event["Task Info"]["Host"])
            apps.append(app)
        return apps


@pytest.fixture
def cluster_client(spark_cluster, tmp_path, monkeypatch) -> ClusterClient:
    """Client-side configuration for submitting to :func:`spark_cluster`, through ``SPARK_CONF_DIR``
    (the environment the hook passes to spark-submit), plus an event log to inspect afterwards; the
    test-sized settings of every spark-submit in the tests (:data:`SUBMIT_DEFAULTS`) included."""
    conf_dir, events = tmp_path / "spark-conf", tmp_path / "spark-events"
    conf_dir.mkdir()
    events.mkdir()
    launcher = executor_python(conf_dir)
    defaults = {
        **SUBMIT_DEFAULTS,
        "spark.pyspark.python": str(launcher),
        "spark.pyspark.driver.python": sys.executable,
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.rolling.enabled": "false",  # one plain JSON-lines file per application
        "spark.eventLog.compress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    write_spark_defaults(conf_dir, defaults)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    return ClusterClient(conf_dir=conf_dir, event_log_dir=events, executor_python=launcher)
