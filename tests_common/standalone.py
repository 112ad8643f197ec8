"""A real ``airflow standalone`` (scheduler, API server, dag processor, triggerer; LocalExecutor) for
the tests that must show the product under Airflow's own scheduler, not only ``dag.test()``.

:func:`airflow_standalone` starts it once per test session in a throw-away ``AIRFLOW_HOME`` (and
stops it as soon as its last user is done: :func:`pytest_runtest_teardown`); a fixture that only
writes under its home asks for :func:`airflow_standalone_starting` and works while it boots. With:

- the metadata database: a Postgres database of its own on the test server (:func:`airflow_standalone`
  says why not SQLite; :func:`running_standalone` alone, as bench/live.py uses it, keeps SQLite in
  the home);
- the API server (UI and REST API) on a free port of 127.0.0.1;
- the repository's ``dags/`` folder, example DAGs off, new DAGs paused (backfills run regardless),
  each file parsed once: the files do not change during a run, and re-parsing them every 30 s (the
  default) takes a core from the tests running beside the instance;
- auth: the simple auth manager with ``simple_auth_manager_all_admins``: every request is an admin,
  so the REST API needs no token and a headless browser opens the UI without logging in;
- the project's connections as ``AIRFLOW_CONN_*``: ``spark_default`` is the Spark Connect server of
  :mod:`tests_common.spark_connect` (no JVM per task: jobs are clients of one server);
- the reverse-ETL warehouse and the demo DAG's files under the home (:attr:`AirflowStandalone.warehouse`,
  :attr:`AirflowStandalone.demo_dir`);
- the operators' pool (``[reverse_etl] pool = reverse_etl``, 4 slots, as many as the instance's
  parallelism), created as a deployment creates it (through the REST API).

The :class:`AirflowStandalone` it yields runs the ``airflow`` CLI against that instance
(:meth:`~AirflowStandalone.cli`, :meth:`~AirflowStandalone.backfill`, :meth:`~AirflowStandalone.clear`)
and calls its REST API (:meth:`~AirflowStandalone.api`, :meth:`~AirflowStandalone.unpause`,
:meth:`~AirflowStandalone.wait_for_runs`). The instance's log is ``<home>/standalone.log``.

Registered for every test module in tests/conftest.py (``pytest_plugins``), not imported; a test
using it is marked ``standalone`` (and so ``slow``) by :mod:`tests_common.markers`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

from tests_common.paths import REPO
from tests_common.spark_connect import free_port

START_TIMEOUT = 300.0
#: the operators' pool of the tests' instance (``[reverse_etl] pool``), created when it starts
POOL = "reverse_etl"
FINISHED = ("success", "failed")


class StandaloneError(RuntimeError):
    """The instance did not start, a CLI command failed, or runs did not finish in time; the
    message carries what the instance logged last."""


@dataclass
class AirflowStandalone:
    home: Path
    url: str  # http://127.0.0.1:<port>, the UI; the REST API is under /api/v2
    env: dict[str, str] = field(repr=False)  # the environment of the instance and of its CLI
    process: subprocess.Popen = field(repr=False)
    #: triggerers started by :meth:`start_triggerer`, each in a process group of its own
    triggerers: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @property
    def log_file(self) -> Path:
        return self.home / "standalone.log"

    @property
    def warehouse(self) -> Path:
        return Path(self.env["AIRFLOW__REVERSE_ETL__WAREHOUSE"])

    @property
    def demo_dir(self) -> Path:
        return Path(self.env["ARETL_DEMO_DIR"])

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    # -- the airflow CLI ------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 300) -> str:
        """Run ``airflow <args>`` against this instance; return its stdout, raise on failure."""
        proc = subprocess.run([str(Path(sys.executable).with_name("airflow")), *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise StandaloneError(f"airflow {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def backfill(self, dag_id: str, from_date: str, to_date: str, *options: str) -> str:
        """``airflow backfill create`` with the DAG's default settings plus ``options``, once the
        DAG's previous backfill is complete (Airflow refuses a second one while one runs)."""
        self.wait_for_backfills(dag_id)
        return self.cli("backfill", "create", "--dag-id", dag_id, "--from-date", from_date, "--to-date", to_date,
                        *options)

    def wait_for_backfills(self, dag_id: str, timeout: float = 120) -> None:
        """Until every backfill of the DAG is complete.

        The scheduler marks a backfill complete once none of its runs is queued or running, but looks
        only every 30 s (a fixed timer of Airflow 3.3's scheduler loop): a test waiting for it waited
        15 s on average per backfill, doing nothing. So once that same condition holds — no run of the
        DAG between the backfill's dates is queued or running — the backfill is ended here through the
        REST API (``PUT /backfills/{id}/cancel``, which then has no run left to stop: it only sets
        ``completed_at``, as the scheduler would)."""
        deadline = time.monotonic() + timeout
        while running := [b for b in self.api("GET", f"/backfills?dag_id={dag_id}")["backfills"]
                          if b.get("completed_at") is None]:
            for backfill in running:
                if self._runs_finished(dag_id, backfill["from_date"][:10], backfill["to_date"][:10]):
                    with contextlib.suppress(StandaloneError):  # 409: the scheduler marked it meanwhile
                        self.api("PUT", f"/backfills/{backfill['id']}/cancel")
            if time.monotonic() > deadline:
                raise StandaloneError(f"A backfill of {dag_id} still runs after {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(1)

    def _runs_finished(self, dag_id: str, from_date: str, to_date: str) -> bool:
        """Whether every run of the DAG with a logical date from ``from_date`` to ``to_date`` (``YYYY-MM-DD``)
        has finished: the scheduler's condition for a backfill of those dates to be complete."""
        return all(run["state"] in FINISHED for run in self.dag_runs(dag_id)
                   if from_date <= (run.get("logical_date") or "")[:10] <= to_date)

    def clear(self, dag_id: str, start_date: str, end_date: str, *options: str) -> str:
        """``airflow tasks clear`` of the runs between the dates (all tasks unless ``-t regex``)."""
        return self.cli("tasks", "clear", dag_id, "--start-date", start_date, "--end-date", end_date, "--yes",
                        *options)

    def unpause(self, dag_id: str) -> None:
        """Unpause the DAG through the REST API (``PATCH /dags/{dag_id}``, what the UI's toggle does):
        the same row as ``airflow dags unpause`` sets, without a CLI process (seconds of Airflow imports)."""
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    # -- the REST API ---------------------------------------------------------------------------
    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call ``/api/v2<path>``; return the decoded JSON (None for an empty answer)."""
        request = urllib.request.Request(f"{self.url}/api/v2{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise StandaloneError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
        return json.loads(payload) if payload else None

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's runs, oldest logical date first."""
        return self.api("GET", f"/dags/{dag_id}/dagRuns?order_by=logical_date&limit=100")["dag_runs"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """task id -> state of one run."""
        instances = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in instances}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The text of one task attempt's log, as the UI shows it."""
        log = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}")
        content = log.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(" ".join(str(e[k]) for k in ("event", "reason") if k in e) for e in content)

    def extra_links(self, dag_id: str, run_id: str, task_id: str) -> dict[str, str | None]:
        """name -> URL of a task's extra links, as the UI shows them."""
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/links")["extra_links"]

    def openlineage_events(self) -> list[dict[str, Any]]:
        """Every OpenLineage event the instance's tasks emitted so far."""
        path = self.home / "openlineage.jsonl"
        text = path.read_text() if path.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> dict[str, Any]:
        """Wait until the dag processor has parsed ``dag_id``; return it as the API shows it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.api("GET", f"/dags/{dag_id}")
            except StandaloneError:
                if time.monotonic() > deadline:
                    raise StandaloneError(f"DAG {dag_id} not parsed in {timeout:.0f}s:\n{self.log_tail()}") from None
                time.sleep(1)

    def wait_for_runs(self, dag_id: str, logical_dates: Iterable[str], timeout: float = 900,
                      since: str | None = None) -> dict[str, str]:
        """Wait until the runs of ``logical_dates`` (``YYYY-MM-DD``) have finished (success or failed),
        each after ``since`` (an ISO time: a cleared run counts once it ran again); return date -> state."""
        wanted = list(logical_dates)
        deadline = time.monotonic() + timeout
        while True:
            runs = {run["logical_date"][:10]: run for run in self.dag_runs(dag_id) if run.get("logical_date")}
            states = {date: runs[date]["state"] if date in runs else None for date in wanted}
            done = all(
                state in FINISHED and (since is None or (runs[date].get("end_date") or "") > since)
                for date, state in states.items())
            if done:
                return states
            if time.monotonic() > deadline:
                raise StandaloneError(f"Runs of {dag_id} not finished in {timeout:.0f}s: {states}\n{self.log_tail()}")
            time.sleep(1)

    def delete_runs(self, dag_id: str) -> None:
        """Delete every run of the DAG (a test starting from no history)."""
        for run in self.dag_runs(dag_id):
            self.api("DELETE", f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}")

    def stop_triggerer(self) -> None:
        """Kill the instance's triggerer (the process and its children, SIGKILL: no clean shutdown)."""
        import psutil

        def command(process: psutil.Process) -> list[str]:
            try:
                return process.cmdline()
            except psutil.Error:  # gone, or a zombie (a finished task process not reaped yet)
                return []

        old = [p for p in psutil.Process(self.process.pid).children(recursive=True) if command(p)[-1:] == ["triggerer"]]
        if not old:
            raise StandaloneError(f"No triggerer runs under the instance:\n{self.log_tail()}")
        victims = list({q.pid: q for p in old for q in [p, *p.children(recursive=True)]}.values())
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.kill()
        psutil.wait_procs(victims, timeout=10)

    def start_triggerer(self) -> None:
        """Start a triggerer for the instance (:meth:`stop` stops it too); its log is
        ``<home>/triggerer.log``."""
        with open(self.home / "triggerer.log", "ab") as log:
            self.triggerers.append(subprocess.Popen(
                [str(Path(sys.executable).with_name("airflow")), "triggerer"], env=self.env, cwd=self.home,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))

    def reparse(self, dag_id: str) -> None:
        """Ask the dag processor to parse the DAG's file now (the instance parses each file once: an
        Asset watcher is registered only when its DAG is parsed unpaused)."""
        token = self.api("GET", f"/dags/{dag_id}/details")["file_token"]
        self.api("PUT", f"/parseDagFile/{token}")

    def stop(self) -> None:
        """Stop every process of the instance (its process group, and those of the triggerers
        started later), TERM first, then KILL."""
        for process in [*self.triggerers, self.process]:
            _stop_group(process)


def _stop_group(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def standalone_env(home: Path, port: int, connections: dict[str, str]) -> dict[str, str]:
    """The environment of the instance: everything it needs in variables, no airflow.cfg edits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),  # standalone runs `airflow`
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        # the scheduler, the API server, task processes and our CLI calls share one SQLite file: a writer
        # waits up to 60 s for the lock (sqlite3's default is 5 s, which a busy scheduler exceeded: a
        # `backfill create` failed with "database is locked")
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db?timeout=60",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",  # two shared cores: a few task processes at once
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        # a triggerer started after one was killed takes over its triggers only once the dead one's last
        # heartbeat is older than the threshold (default 30 s, heartbeats every 5 s): 10 s, every 2 s
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "3600",
        "AIRFLOW__REVERSE_ETL__JARS_DIR": os.environ.get("AIRFLOW__REVERSE_ETL__JARS_DIR", ""),
        "AIRFLOW__REVERSE_ETL__WAREHOUSE": str(home / "warehouse"),
        "ARETL_DEMO_DIR": str(home / "demo"),
        # OpenLineage on, as a user enables it: the events go to a file the tests read (openlineage_events)
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(home / "openlineage.jsonl"),
                                                      "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "aretl-standalone",
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",  # Connect clients hold gRPC threads: no fork
        "ARETL_LIVE_POLL_INTERVAL": "1",  # dags/live_orders.py: its watcher polls every second
    })
    env.update({f"AIRFLOW_CONN_{conn_id.upper()}": value for conn_id, value in connections.items()})
    return env


def wait_until_healthy(instance: AirflowStandalone, timeout: float) -> None:
    """Until the API server answers and the scheduler, dag processor and triggerer heartbeat."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if instance.process.poll() is not None:
            raise StandaloneError(f"airflow standalone exited ({instance.process.returncode}):\n{instance.log_tail()}")
        try:
            last = instance.api("GET", "/monitor/health")
            parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
            if all((last.get(part) or {}).get("status") == "healthy" for part in parts):
                return
        except (OSError, StandaloneError) as exc:
            last = exc
        time.sleep(1)
    raise StandaloneError(f"airflow standalone not healthy in {timeout:.0f}s ({last}):\n{instance.log_tail()}")


_last_user = pytest.StashKey[pytest.Item]()
_running = pytest.StashKey[AirflowStandalone]()
#: the fixtures whose users share the instance (their marker and xdist group come from this too:
#: :mod:`tests_common.markers`, :mod:`tests_common.parallel`)
FIXTURES = ("airflow_standalone", "airflow_standalone_starting")


def pytest_collection_finish(session: pytest.Session) -> None:
    users = [item for item in session.items if set(FIXTURES) & set(getattr(item, "fixturenames", ()))]
    if users:
        session.config.stash[_last_user] = users[-1]


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of the test's fixtures
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Stop the instance once the last test that uses it is done, not at the end of the session: idle,
    it still parses DAGs and heartbeats, on the cores every later test needs. No later test can ask
    for it: the last user in collection order is the last to run (under xdist, the ``standalone``
    group of :mod:`tests_common.parallel` runs on one worker, in collection order)."""
    if item.config.stash.get(_last_user, None) is item and _running in item.config.stash:
        item.config.stash[_running].stop()


@contextlib.contextmanager
def started_standalone(home: Path, connections: dict[str, str],
                       settings: dict[str, str] | None = None) -> Iterator[AirflowStandalone]:
    """``airflow standalone`` in ``home`` until the block ends, its processes started but not yet
    healthy when the block starts (:func:`wait_until_healthy`): work that needs only its home can
    go on while it boots."""
    env = {**standalone_env(home, free_port(), connections), **(settings or {})}
    with open(home / "standalone.log", "ab") as log:
        process = subprocess.Popen([str(Path(sys.executable).with_name("airflow")), "standalone"], env=env, cwd=home,
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)  # its own process group: stopped as a whole
    instance = AirflowStandalone(home=home, url=env["AIRFLOW__API__BASE_URL"], env=env, process=process)
    try:
        yield instance
    finally:
        instance.stop()


@contextlib.contextmanager
def running_standalone(home: Path, connections: dict[str, str],
                       settings: dict[str, str] | None = None) -> Iterator[AirflowStandalone]:
    """``airflow standalone`` in ``home`` until the block ends, healthy when the block starts; the
    live-sync and fleet benchmarks (bench/live.py, bench/fleet.py, which tune the scheduler with
    ``settings``: more environment variables) start it here."""
    with started_standalone(home, connections, settings) as instance:
        wait_until_healthy(instance, START_TIMEOUT)
        yield instance


@pytest.fixture(scope="session")
def airflow_standalone_starting(request, tmp_path_factory, spark_connect_server,
                                postgres_server) -> Iterator[AirflowStandalone]:
    """The session's ``airflow standalone`` as soon as its processes are started, not yet healthy: for
    a fixture that writes under its home (the warehouse its API server reads) while it boots — its
    start-up (database tables, four Airflow processes importing, the DAG files parsed) is ~25 s that
    Spark work can overlap. A test drives the instance through :func:`airflow_standalone`.

    Its metadata is a Postgres database of its own. Not SQLite: under a loaded CI machine an ``airflow
    backfill create`` against the busy scheduler failed with "database is locked" despite the 60 s busy
    timeout (SQLite refuses a reader's upgrade to a writer at once rather than wait), as six at once did
    in the fleet benchmark."""
    from tests_common.services import drop_database, fresh_database

    home = tmp_path_factory.mktemp("airflow-standalone")
    database = f"airflow_{os.getpid()}"  # of this session's worker: sessions side by side share the server
    settings = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": fresh_database(postgres_server, database),
                "AIRFLOW__REVERSE_ETL__POOL": POOL}
    try:
        with started_standalone(home, {"spark_default": spark_connect_server.airflow_connection()},
                                settings) as instance:
            request.config.stash[_running] = instance
            yield instance
    finally:
        drop_database(postgres_server, database)


@pytest.fixture(scope="session")
def airflow_standalone(airflow_standalone_starting) -> AirflowStandalone:
    """A running ``airflow standalone`` until its last user is done (see the module's docstring)."""
    instance = airflow_standalone_starting
    wait_until_healthy(instance, START_TIMEOUT)
    # as a deployment does: the operators' pool ([reverse_etl] pool), sized to the parallelism
    # (through the REST API, as `airflow pools set` would, without a CLI process)
    instance.api("POST", "/pools", {"name": POOL, "slots": 4, "description": "Reverse-ETL Spark jobs"})
    return instance
