"""Session-scoped pytest fixtures for the real local services, and a Kafka read-back helper.

``postgres_server`` and ``kafka_broker`` run ``scripts/services/{postgres,kafka}.sh start`` once per
test session (installing/fetching on a new machine), yield how to connect, and stop the service at
the end of the session, unless it was already running before the session (then it is left as it
was found) or ``ARETL_TEST_KEEP_SERVICES=1`` is set (keeps it up for the next run). Nothing is
skipped: if a service cannot start, the fixture fails with the script's output.

tests/conftest.py registers them (``pytest_plugins``): a test asks for them by name, and gets the
``postgres``/``kafka`` marker from :mod:`tests_common.markers`.

Ports and the password come from the same variables the scripts read (ARETL_TEST_PG_PORT,
ARETL_TEST_PG_PASSWORD, ARETL_TEST_KAFKA_PORT, ...), so a test and the script always agree.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests_common.paths import REPO

__all__ = [
    "REPO_ROOT",
    "KafkaInfo",
    "KafkaMessage",
    "PostgresInfo",
    "ServiceError",
    "kafka_broker",
    "postgres_server",
    "read_topic",
    "run_service_script",
]

REPO_ROOT = REPO
SCRIPTS = REPO_ROOT / "scripts" / "services"
START_TIMEOUT = float(os.environ.get("ARETL_TEST_SERVICE_TIMEOUT", "900"))  # a cold install included


class ServiceError(RuntimeError):
    """A service script failed; the message carries its output."""


def run_service_script(name: str, action: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess:
    """Run scripts/services/<name>.sh <action>; raise ServiceError (with its output) if it fails.
    ``status`` returning 3 (not running) is not a failure."""
    script = SCRIPTS / f"{name}.sh"
    env = dict(os.environ)
    env.setdefault("PYTHON", _python_for_scripts())
    try:
        proc = subprocess.run(
            ["bash", str(script), action],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        raise ServiceError(
            f"{script.name} {action} did not finish in {timeout:.0f}s\n"
            f"--- stdout ---\n{_text(e.stdout)}\n--- stderr ---\n{_text(e.stderr)}"
        ) from None
    ok = proc.returncode == 0 or (action == "status" and proc.returncode == 3)
    if not ok:
        raise ServiceError(
            f"{script.name} {action} failed with exit code {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc


def _text(b: Any) -> str:
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else str(b)


def _python_for_scripts() -> str:
    """The interpreter running the tests has confluent-kafka; let kafka.sh use it for its check."""
    import sys

    return sys.executable


def _keep_services() -> bool:
    return os.environ.get("ARETL_TEST_KEEP_SERVICES", "").lower() in ("1", "true", "yes")


def _running(name: str) -> bool:
    return run_service_script(name, "status", timeout=60).returncode == 0


# --------------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PostgresInfo:
    host: str
    port: int
    user: str
    password: str  # test-only
    dbname: str

    @property
    def dsn(self) -> str:
        """libpq key/value DSN (psycopg2.connect(info.dsn), psycopg.connect(info.dsn))."""
        return f"host={self.host} port={self.port} dbname={self.dbname} user={self.user} password={self.password}"

    @property
    def url(self) -> str:
        """postgresql:// URL (SQLAlchemy: replace the scheme with postgresql+psycopg2://)."""
        from urllib.parse import quote

        return f"postgresql://{quote(self.user)}:{quote(self.password, safe='')}@{self.host}:{self.port}/{self.dbname}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.dbname}"

    def connect_kwargs(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
                "dbname": self.dbname}


def fresh_database(pg: PostgresInfo, name: str) -> str:
    """A new, empty database ``name`` on ``pg`` (dropped first if it exists, sessions and all); its
    SQLAlchemy URL, as Airflow's ``sql_alchemy_conn`` takes it."""
    drop_database(pg, name)
    _administer(pg, f'CREATE DATABASE "{name}"')
    return pg.url.replace("postgresql://", "postgresql+psycopg2://").rsplit("/", 1)[0] + f"/{name}"


def drop_database(pg: PostgresInfo, name: str) -> None:
    """Drop database ``name`` on ``pg`` if it exists, closing its sessions."""
    _administer(pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _administer(pg: PostgresInfo, statement: str) -> None:
    import psycopg2

    conn = psycopg2.connect(**pg.connect_kwargs())
    conn.autocommit = True  # CREATE/DROP DATABASE run outside a transaction
    try:
        with conn.cursor() as cursor:
            cursor.execute(statement)
    finally:
        conn.close()


def _parse_pg_dsn(stdout: str) -> PostgresInfo:
    m = re.search(r"^host=(\S+) port=(\d+) dbname=(\S+) user=(\S+)$", stdout, re.M)
    if not m:
        raise ServiceError(f"postgres.sh printed no DSN line:\n{stdout}")
    host, port, dbname, user = m.groups()
    password = os.environ.get("ARETL_TEST_PG_PASSWORD") or _made_password(stdout)
    return PostgresInfo(host=host, port=int(port), user=user, password=password, dbname=dbname)


def _made_password(stdout: str) -> str:
    """The password postgres.sh made for its cluster, from the file its ``passfile=`` line names."""
    m = re.search(r"^passfile=(.+)$", stdout, re.M)
    if not m:
        raise ServiceError(f"postgres.sh printed no passfile line and ARETL_TEST_PG_PASSWORD is unset:\n{stdout}")
    return Path(m.group(1)).read_text().strip()


def start_postgres() -> tuple[PostgresInfo, bool]:
    """Start (or find running) the test PostgreSQL. Returns (info, was_already_running)."""
    already = _running("postgres")
    proc = run_service_script("postgres", "start")
    return _parse_pg_dsn(proc.stdout), already


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresInfo]:
    """The test PostgreSQL server (superuser ``aretl``, database ``aretl``) for the whole session."""
    info, already = start_postgres()
    try:
        yield info
    finally:
        if not already and not _keep_services():
            run_service_script("postgres", "stop", timeout=120)


# --------------------------------------------------------------------------------------------------
# Kafka
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KafkaInfo:
    bootstrap_servers: str

    def config(self, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka config dict with bootstrap.servers set."""
        return {"bootstrap.servers": self.bootstrap_servers, **extra}


def start_kafka() -> tuple[KafkaInfo, bool]:
    """Start (or find running) the test Kafka broker. Returns (info, was_already_running)."""
    already = _running("kafka")
    proc = run_service_script("kafka", "start")
    m = re.search(r"^bootstrap\.servers=(\S+)$", proc.stdout, re.M)
    if not m:
        raise ServiceError(f"kafka.sh printed no bootstrap.servers line:\n{proc.stdout}\n{proc.stderr}")
    return KafkaInfo(m.group(1)), already


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaInfo]:
    """The test Kafka broker (single node, KRaft, 4 partitions per auto-created topic) for the whole
    session. Topics do not survive a broker stop; use unique topic names per test."""
    info, already = start_kafka()
    try:
        yield info
    finally:
        if not already and not _keep_services():
            run_service_script("kafka", "stop", timeout=120)


@dataclass(frozen=True)
class KafkaMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int | None

    def json(self) -> Any:
        import json

        return None if self.value is None else json.loads(self.value)


def _watermarks(consumer, partition, deadline: float) -> tuple[int, int]:
    """A partition's (low, high) watermarks. A topic created a moment ago may not have its partition
    leaders elected yet: the broker answers NOT_LEADER_FOR_PARTITION (or LEADER_NOT_AVAILABLE), which
    is retried until ``deadline`` (a monotonic time)."""
    from confluent_kafka import KafkaError, KafkaException

    electing = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=max(1.0, deadline - time.monotonic()),
                                                  cached=False)
        except KafkaException as exc:
            if exc.args[0].code() not in electing or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def read_topic(bootstrap_servers: str | KafkaInfo, topic: str, timeout: float = 30.0) -> list[KafkaMessage]:
    """Everything in `topic` right now: each partition from its low to its high watermark (the high
    watermarks are taken first; messages produced meanwhile may or may not be included).
    Returns messages ordered by (partition, offset). Raises if the topic does not exist, or if the
    messages cannot all be read within `timeout` seconds. Uses no consumer group offsets (nothing is
    committed). With transactional producers, aborted records and markers leave offset gaps: this
    reads with isolation.level=read_committed and stops at each partition's end."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    if isinstance(bootstrap_servers, KafkaInfo):
        bootstrap_servers = bootstrap_servers.bootstrap_servers
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"aretl-test-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        deadline = time.monotonic() + timeout
        md = consumer.list_topics(topic, timeout=max(1.0, deadline - time.monotonic()))
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            raise KafkaException(tmd.error if tmd is not None and tmd.error else f"no topic {topic!r}")
        ends: dict[int, int] = {}
        starts: dict[int, int] = {}
        for p in sorted(tmd.partitions):
            low, high = _watermarks(consumer, TopicPartition(topic, p), deadline)
            if high > low:
                starts[p], ends[p] = low, high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in ends])
        out: list[KafkaMessage] = []
        pending = set(ends)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"read_topic({topic!r}): partitions {sorted(pending)} not read to the end "
                                   f"in {timeout}s ({len(out)} messages so far)")
            msg = consumer.poll(min(left, 1.0))
            if msg is None:
                continue
            p = msg.partition()
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    # at the end of what is there: with read_committed this may be before `high`
                    # only if the rest are aborted/control records, which are never delivered.
                    if p in pending and msg.offset() >= ends[p]:
                        pending.discard(p)
                    continue
                raise KafkaException(msg.error())
            if p not in ends or msg.offset() >= ends[p]:
                continue
            out.append(
                KafkaMessage(
                    topic=msg.topic(),
                    partition=p,
                    offset=msg.offset(),
                    key=msg.key(),
                    value=msg.value(),
                    headers=tuple(msg.headers() or ()),
                    timestamp_ms=msg.timestamp()[1] if msg.timestamp()[0] else None,
                )
            )
            if msg.offset() >= ends[p] - 1:
                pending.discard(p)
        out.sort(key=lambda m: (m.partition, m.offset))
        return out
    finally:
        consumer.close()
