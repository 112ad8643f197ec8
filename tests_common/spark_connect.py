"""A real Spark Connect server (with Delta) on 127.0.0.1 for the tests that run jobs over Spark Connect.

:func:`spark_connect_server` starts it on first use with ``scripts/services/spark_connect.sh`` on the
port ``ARETL_TEST_SPARK_CONNECT_PORT`` names (``scripts/test.sh`` picks one, so that it can stop the
server when pytest dies first; otherwise :func:`pytest_configure` picks a free one), reusing a server
already running there. The server belongs to the run, not to a process of it: under pytest-xdist
every worker uses the one server (the script's start lock lets only the first worker start it; the
controller chose the port before the workers were spawned, so they inherit it), and the run's main
process (the controller, or the only process without xdist) stops it in :func:`pytest_unconfigure`,
after every worker is done, if it was not running when the run began.
:func:`connect_session` opens a new client session of it per test (its own settings and views);
:func:`spark_default_on_connect` points Airflow's ``spark_default`` connection at it, so a DAG under
test runs every job as a Connect client of the one warm server instead of a cold spark-submit JVM each.

Registered for every test module in tests/conftest.py (``pytest_plugins``), not imported.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests_common.spark_conf import LONG_LIVED_JVM_CONF, TEST_SPARK_CONF

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "services" / "spark_connect.sh"
PORT_ENV = "ARETL_TEST_SPARK_CONNECT_PORT"


@dataclass(frozen=True)
class SparkConnectServer:
    url: str  # sc://127.0.0.1:<port>
    port: int
    log_file: Path
    event_log_dir: Path  # the server's Spark event logs (the secrets test searches them)

    def pid(self) -> int:
        """The server JVM's process id (the script's pid file)."""
        return int((self.log_file.parent / "server.pid").read_text())

    def footprint(self) -> "Footprint":
        """The server's Python worker processes (children of its JVM) and memory, now."""
        import psutil

        jvm = psutil.Process(self.pid())
        workers = [p for p in jvm.children(recursive=True) if _is_python_worker(p)]
        jvm_rss = jvm.memory_info().rss
        return Footprint(python_workers=len(workers), jvm_rss_mib=round(jvm_rss / 2**20, 1),
                         total_rss_mib=round((jvm_rss + sum(_rss(p) for p in workers)) / 2**20, 1),
                         jvm_threads=jvm.num_threads())

    def airflow_connection(self) -> str:
        """The server as an Airflow connection of the apache-spark provider's ``spark_connect`` type,
        in the JSON form of an ``AIRFLOW_CONN_<ID>`` environment variable."""
        return f'{{"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": {self.port}}}'


@dataclass(frozen=True)
class Footprint:
    python_workers: int  # pyspark.daemon / pyspark.worker processes under the server's JVM
    jvm_rss_mib: float
    total_rss_mib: float  # the JVM and its Python workers
    jvm_threads: int


def _is_python_worker(process) -> bool:
    try:
        return any(arg.startswith("pyspark.") for arg in process.cmdline())
    except Exception:  # it exited while we looked
        return False


def _rss(process) -> int:
    try:
        return process.memory_info().rss
    except Exception:  # it exited while we looked
        return 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _state_dir(port: int) -> Path:
    return Path(os.environ.get("ARETL_SPARK_CONNECT_DIR") or REPO / ".cache" / "services" / f"spark-connect-{port}")


def _script(command: str, port: int, timeout: float, conf: dict[str, str] | None = None,
            classpath: str | None = None) -> subprocess.CompletedProcess:
    events = _state_dir(port) / "events"
    events.mkdir(parents=True, exist_ok=True)  # Spark wants the event log directory to exist
    env = {**os.environ, "PYTHON": sys.executable, PORT_ENV: str(port),
           # a test-sized server: small shuffles, a modest heap (the machine is shared)
           "ARETL_SPARK_CONNECT_MASTER": "local[2]", "ARETL_SPARK_CONNECT_DRIVER_MEMORY": "1g",
           "ARETL_SPARK_CONNECT_CLASSPATH": classpath or "",
           "ARETL_SPARK_CONNECT_CONF": " ".join(f"{key}={value}" for key, value in {
               **TEST_SPARK_CONF, **LONG_LIVED_JVM_CONF, "spark.sql.session.timeZone": "UTC",
               "spark.eventLog.enabled": "true",
               "spark.eventLog.dir": f"file:{events}", "spark.eventLog.compress": "false", **(conf or {})}.items())}
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


_was_running = pytest.StashKey[bool]()


def _is_main_process(config: pytest.Config) -> bool:
    """The xdist controller, or the only process of a run without xdist (workers have ``workerinput``)."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if _is_main_process(config):
        os.environ.setdefault(PORT_ENV, str(free_port()))  # before xdist spawns the workers: they inherit it
        config.stash[_was_running] = _script("status", int(os.environ[PORT_ENV]), 60).returncode == 0


def pytest_unconfigure(config: pytest.Config) -> None:
    if _is_main_process(config) and not config.stash.get(_was_running, True):
        port = int(os.environ[PORT_ENV])
        if _script("status", port, 60).returncode == 0:  # a test started it
            stop_server(port)


def start_server(port: int, conf: dict[str, str] | None = None, classpath: str | None = None) -> SparkConnectServer:
    """Start the script's server on ``port`` (or find it running there), with extra Spark settings
    ``conf`` and driver ``classpath`` (the object-store tests' S3A connector)."""
    started = _script("start", port, 240, conf, classpath)
    if started.returncode != 0:
        raise RuntimeError(f"Could not start the Spark Connect server:\n{started.stderr}")
    state_dir = _state_dir(port)
    return SparkConnectServer(url=started.stdout.strip(), port=port, log_file=state_dir / "server.log",
                              event_log_dir=state_dir / "events")


def stop_server(port: int) -> None:
    _script("stop", port, 120)
    shutil.rmtree(_state_dir(port) / "events", ignore_errors=True)  # tens of MB per run; the log stays


@contextlib.contextmanager
def own_server(conf: dict[str, str] | None = None, classpath: str | None = None) -> Iterator[SparkConnectServer]:
    """A server of its own on a free port, for a test that kills it, a benchmark that measures it or
    tests that need other jars (the run's server is shared); stopped afterwards, whatever the block
    did to it."""
    port = free_port()
    try:
        yield start_server(port, conf, classpath)
    finally:
        stop_server(port)


@pytest.fixture(scope="session")
def spark_connect_server():
    """The run's Spark Connect server, started on first use (stopped by :func:`pytest_unconfigure`)."""
    try:
        return start_server(int(os.environ[PORT_ENV]))
    except RuntimeError as exc:
        # a server that started too slowly must not outlive the run: pytest_unconfigure stops it
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def connect_session(spark_connect_server):
    """A new Spark Connect session for one test, stopped afterwards."""
    from spark_jobs.session import connect_session as new_session

    with new_session(spark_connect_server.url) as session:
        yield session


@pytest.fixture
def spark_default_on_connect(spark_connect_server, monkeypatch) -> SparkConnectServer:
    """Make ``spark_default`` (the connection the operators use unless told otherwise) this session's
    Spark Connect server, for this test and the processes it starts (``AIRFLOW_CONN_SPARK_DEFAULT``).

    The DAG-level tests that check what a DAG does, not how spark-submit runs it, use it: a job then
    costs its data on a warm server (seconds) instead of a cold JVM per job (11-20 s before any work)."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_connect_server.airflow_connection())
    return spark_connect_server
