"""A real S3-compatible HTTP server on 127.0.0.1 (moto's server) and a bucket on it, reached only
through the standard AWS environment variables, as on a real deployment: ``s3`` (one server per
module), ``s3_server`` (a server of the test's own, which it can stop and start again) and
``s3_ignoring_conditional_writes`` (a store that ignores ``If-None-Match``, as older S3-compatible
servers do)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests_common.paths import REPO

BUCKET = "lake"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory) -> Iterator[str]:
    """moto's S3 server in a process of its own: in a thread of the test process, a client in that
    process that holds the GIL while it waits on the server (delta-rs' listings do) waits for ever —
    the cluster test's reads stalled 180 s and failed that way."""
    import time
    import urllib.error
    import urllib.request

    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/", timeout=2).close()
                break
            except urllib.error.HTTPError:  # it answers
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def aws_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """The standard AWS environment of a process that reaches the test server: credentials, region,
    endpoint (what boto3, s3fs, delta-rs and Spark's S3A credential chain all read)."""
    import s3fs

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "aretl-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aretl-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """Credentials and endpoint only through the standard AWS environment, as on a real deployment.
    Yields a boto3 client; the bucket :data:`BUCKET` exists for the test and is emptied after it."""
    import boto3
    import s3fs

    aws_environment(monkeypatch, s3_endpoint)
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
    empty_bucket(client)
    s3fs.S3FileSystem.clear_instance_cache()


class MotoServer:
    """moto's S3 server on a fixed port, which a test can stop and start again (moto keeps the
    buckets in process memory, so the data survives the outage)."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self._server = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture
def s3_server(monkeypatch):
    import s3fs

    server = MotoServer()
    server.start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "aretl-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aretl-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # the client's own retries would only slow each poll down
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.makedirs(BUCKET, exist_ok=True)  # moto keeps its buckets per process, across servers
    yield server
    if fs.exists(f"{BUCKET}/warehouse"):
        fs.rm(f"{BUCKET}/warehouse", recursive=True)
    server.stop()
    s3fs.S3FileSystem.clear_instance_cache()


def server_ignoring_conditional_writes(port: int):  # type: ignore[no-untyped-def]  # moto is imported here
    """moto's S3 server behind a front that drops the conditional headers (``If-None-Match``,
    ``If-Match``) of every request: a store that accepts a second create of one key, as S3 did before
    August 2024 and some S3-compatible servers still do. (moto is imported only by the tests using it.)"""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class IgnoringConditions(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)

            def ignoring_conditions(environ, start_response):  # type: ignore[no-untyped-def]
                environ.pop("HTTP_IF_NONE_MATCH", None)
                environ.pop("HTTP_IF_MATCH", None)
                return app(environ, start_response)

            self._server = make_server(self._ip_address, self._port, ignoring_conditions, True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return IgnoringConditions(ip_address="127.0.0.1", port=port, verbose=False)


@pytest.fixture
def s3_ignoring_conditional_writes(monkeypatch):
    """A store that ignores conditional writes, with the bucket :data:`BUCKET`; yields its endpoint."""
    import boto3

    port = free_port()
    server = server_ignoring_conditional_writes(port)
    server.start()
    aws_environment(monkeypatch, f"http://127.0.0.1:{port}")
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield f"http://127.0.0.1:{port}"
    empty_bucket(client)
    server.stop()


#: Where ``scripts/fetch_jars.sh s3`` puts the S3A connector (hadoop-aws + the AWS SDK bundle).
S3A_JARS = REPO / ".cache" / "jars-s3"


def s3a_jars() -> Path:
    """The S3A connector's jars, fetched on first use (``scripts/fetch_jars.sh s3``: idempotent, a
    stamp check when they are there); the default set-up does not fetch them."""
    fetched = subprocess.run(["bash", str(REPO / "scripts" / "fetch_jars.sh"), "s3"], capture_output=True, text=True,
                             env={**os.environ, "PYTHON": sys.executable}, timeout=1200, stdin=subprocess.DEVNULL)
    if fetched.returncode != 0:
        pytest.fail(f"Could not fetch the S3A jars:\n{fetched.stdout}\n{fetched.stderr}", pytrace=False)
    return S3A_JARS


@dataclass(frozen=True)
class S3Lake:
    """A bucket on a real S3-compatible server and what Spark needs to reach it: the S3A jars on the
    driver's and executors' classpath, and the S3A settings a deployment keeps in
    ``spark-defaults.conf`` (endpoint, path-style addressing, the standard AWS credential chain) —
    no key among them. Processes of the test get the keys from the standard AWS environment; the
    cluster's executors (whose worker was started without them) from a credentials file whose *path*
    is all the configuration says."""

    endpoint: str
    spark_conf: dict[str, str]
    classpath: str

    def warehouse(self, name: str) -> str:
        return f"s3a://{BUCKET}/{name}"


@pytest.fixture(scope="module")
def s3_lake(s3_endpoint, tmp_path_factory) -> Iterator[S3Lake]:
    """The module's bucket :data:`BUCKET` on its moto server, reachable by every process the module
    starts (the AWS environment is set for the whole module), and by Spark (:class:`S3Lake`)."""
    import boto3

    credentials = tmp_path_factory.mktemp("aws") / "credentials"
    credentials.write_text("[default]\naws_access_key_id = aretl-test-key\naws_secret_access_key = aretl-test-secret\n")
    classpath = f"{s3a_jars()}/*"
    conf = {
        "spark.hadoop.fs.s3a.endpoint": s3_endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        "spark.executorEnv.AWS_SHARED_CREDENTIALS_FILE": str(credentials),
    }
    with pytest.MonkeyPatch.context() as monkeypatch:
        aws_environment(monkeypatch, s3_endpoint)
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield S3Lake(endpoint=s3_endpoint, spark_conf=conf, classpath=classpath)
        empty_bucket(client)  # moto keeps its buckets per process, across servers and modules


def empty_bucket(client) -> None:  # type: ignore[no-untyped-def]  # a boto3 client
    """Delete every object of :data:`BUCKET`, then the bucket."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


@pytest.fixture(scope="module")
def s3_connect_server(s3_lake):
    """A Spark Connect server of the module's own with the S3A connector on its classpath and the S3A
    settings of :class:`S3Lake` (the run's shared server has neither): the default set-up stays lean."""
    from tests_common.spark_connect import own_server

    with own_server(conf=s3_lake.spark_conf, classpath=s3_lake.classpath) as server:
        yield server
