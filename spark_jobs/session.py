"""The one place that builds a SparkSession with Delta Lake.

Under spark-submit the master, jars and confs come from the command line (the Airflow hook sets them);
this module only makes sure the Delta extension and catalog are on, which every job needs. Tests and
benchmarks build an in-process session through :func:`build_session` with the jars fetched by
``scripts/fetch_jars.sh``. Importing this module does not import pyspark.
"""

from __future__ import annotations

import contextlib
import contextvars
import glob
import os
import threading
from typing import TYPE_CHECKING, Iterator

from spark_jobs.contract import DELTA_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import RetryPolicy


def local_jars(jars_dir: str | None) -> list[str]:
    """The jar files in ``jars_dir`` (as fetched by scripts/fetch_jars.sh), sorted for stable argv.

    Import-safe (no pyspark): the Airflow hook lists the same jars for spark-submit's ``--jars``."""
    if not jars_dir:
        return []
    jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
    if not jars:
        raise FileNotFoundError(
            f"No jars in {jars_dir!r}: run scripts/fetch_jars.sh (or `make setup`) to fetch the Delta jars"
        )
    return jars


def build_session(
    app_name: str | None = None,
    master: str | None = None,
    jars_dir: str | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create a SparkSession with Delta enabled.

    ``app_name``/``master``/``jars_dir`` are for in-process use (tests, benchmarks); under spark-submit
    leave them unset so the command line decides (``--name`` is the Airflow ``dag.task``).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if app_name:
        builder = builder.appName(app_name)
    if master:
        builder = builder.master(master)
    jars = local_jars(jars_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in {**DELTA_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# pyspark tells Connect from classic per process by this variable: while it is set, functions such as
# F.col build Connect columns (and a classic session cannot be created).
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


#: How long a Spark Connect client keeps retrying a server that stopped answering before the job
#: fails (seconds); the Airflow side passes ``[reverse_etl] spark_connect_timeout``.
DEFAULT_SERVER_TIMEOUT_S = 60.0
#: The longest wait between two retries (ms): a server that is back is found within this.
_MAX_BACKOFF_MS = 5000
#: How long stopping a session may retry (s): releasing a dead server's session must not double the
#: time a failed job takes; a session that is not released expires on the server by itself.
_STOP_TIMEOUT_S = 5.0


@contextlib.contextmanager
def connect_session(url: str, session_id: str | None = None,
                    timeout_s: float = DEFAULT_SERVER_TIMEOUT_S) -> Iterator[SparkSession]:
    """A new Spark Connect session of the server at ``url`` (``sc://host:port``) for the block,
    stopped (released on the server) afterwards, with Delta's exception classes registered. The
    server must have the Delta extension and catalog on (scripts/services/spark_connect.sh starts one).
    ``session_id`` (a UUID) names the server session instead of a random one: attaching to a session
    another client opened, or opening one a later client can find.

    A server that stops answering (killed, restarting, unreachable) fails the session's calls after
    about ``timeout_s`` seconds of retries (:func:`bounded_retries`), not after pyspark's default of
    more than ten minutes, during which the caller would hang.

    pyspark switches the whole process to Connect mode when it creates the session; the switch is
    undone when the block ends, so a process may use classic sessions before and after (the test
    suite does). Inside the block, the process must not use a classic session."""
    import delta.connect.exceptions  # noqa: F401  (registers the conversion of Delta's errors)
    from pyspark.sql import SparkSession

    with _connect_mode.held():
        session = SparkSession.builder.remote(with_session_id(url, session_id) if session_id else url).create()
        session.client.set_retry_policies(bounded_retries(timeout_s))
        try:
            yield session
        finally:
            session.client.set_retry_policies(bounded_retries(_STOP_TIMEOUT_S))
            session.stop()  # best effort: pyspark logs a release that failed and closes the channel


class _ConnectModeSwitch:
    """pyspark's process-wide Connect switch (an environment variable), on while any Connect session
    of this process is open and back as it was when the last one closes. Each session saving and
    restoring the variable itself let two jobs in threads leave it on for good (the second saved the
    first's "on" and restored it last), after which every classic session of the process failed with
    JVM_ATTRIBUTE_NOT_SUPPORTED."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._before: str | None = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._before = os.environ.get(_CONNECT_MODE)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    if self._before is None:
                        os.environ.pop(_CONNECT_MODE, None)
                    else:
                        os.environ[_CONNECT_MODE] = self._before


_connect_mode = _ConnectModeSwitch()


def bounded_retries(timeout_s: float) -> list[RetryPolicy]:
    """pyspark's retry policy for a Spark Connect client (retry what the server reports as
    unavailable, backing off), with as many retries as fit in ``timeout_s`` seconds counting the
    largest jitter. pyspark's default retries 15 times up to a minute apart: a client whose server
    was killed mid-job waits more than ten minutes before it fails."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    policy = DefaultPolicy(max_backoff=_MAX_BACKOFF_MS)
    waited_ms, wait_ms, retries = 0.0, float(policy.initial_backoff), 0
    while True:
        worst = wait_ms + (policy.jitter if wait_ms >= policy.min_jitter_threshold else 0)
        if waited_ms + worst > timeout_s * 1000:
            break
        waited_ms, retries = waited_ms + worst, retries + 1
        wait_ms = min(float(_MAX_BACKOFF_MS), wait_ms * policy.backoff_multiplier)
    policy.max_retries = retries
    return [policy]


def with_session_id(url: str, session_id: str) -> str:
    """``url`` with the ``session_id`` parameter (``sc://host:port/;session_id=...``)."""
    return f"{url};session_id={session_id}" if "/;" in url else f"{url.rstrip('/')}/;session_id={session_id}"


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, RDDs or py4j behind it)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


_job_session: contextvars.ContextVar[SparkSession | None] = contextvars.ContextVar("aretl_job_session", default=None)


@contextlib.contextmanager
def running_in(spark: SparkSession) -> Iterator[None]:
    """Make ``spark`` the session :func:`current_session` returns in this thread while a job runs."""
    token = _job_session.set(spark)
    try:
        yield
    finally:
        _job_session.reset(token)


def current_session() -> SparkSession:
    """The session of the job running in this thread, for driver-side code that is not handed one
    (a sink's prepare/count). Outside a job (in-process tests): the classic get-or-create."""
    spark = _job_session.get()
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()
