"""The Spark Connect execution mode's own guarantees, on a real local server started by
scripts/services/spark_connect.sh: the server runs Delta SQL with per-session commit metadata, two
concurrent sessions never see each other's settings, executors import the job library from the
session's shipped artifact, a long-lived server keeps no Python process per job, a job whose server is
killed fails in bounded time with its typed, retryable error (and its retry converges once the server
is back), and two jobs may start at once in one process. (The demo DAG and the secrets test run in
both modes in their modules.)"""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from airflow_reverse_etl.exceptions import ReverseEtlInfrastructureError
from airflow_reverse_etl.hooks.spark_job import SparkJobHook
from spark_jobs.contract import parse_spec
from spark_jobs.delta.lake import METADATA_CONF, commit_metadata, history, is_delta_table
from spark_jobs.session import connect_session, is_connect
from tests_common.connect_pipeline import ConnectPipeline, http_destination_spec
from tests_common.spark_connect import own_server, start_server
from tests_common.paths import REPO



def test_the_script_reports_the_running_server(spark_connect_server):
    env = {"ARETL_TEST_SPARK_CONNECT_PORT": str(spark_connect_server.port), "PATH": "/usr/bin:/bin"}
    status = subprocess.run(["bash", str(REPO / "scripts" / "services" / "spark_connect.sh"), "status"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and status.stdout.strip() == spark_connect_server.url


def test_concurrent_sessions_do_not_see_each_others_commit_metadata(spark_connect_server, tmp_path):
    with contextlib.ExitStack() as stack:
        sessions = {name: stack.enter_context(connect_session(spark_connect_server.url)) for name in ("a", "b")}
        _write_concurrently(sessions, tmp_path)


def _write_concurrently(sessions: dict, tmp_path: Path) -> None:
    assert all(is_connect(s) for s in sessions.values())
    inside = threading.Barrier(2)
    seen: dict[str, str | None] = {}
    errors: list[BaseException] = []

    def write(name: str) -> None:
        spark = sessions[name]
        try:
            with commit_metadata(spark, {"writer": name}):
                inside.wait(timeout=60)  # both sessions have their metadata set now
                spark.range(3).write.format("delta").save(str(tmp_path / name))
                seen[name] = spark.conf.get(METADATA_CONF, None)
                inside.wait(timeout=60)  # neither unsets it before the other has written and looked
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            inside.abort()

    threads = [threading.Thread(target=write, args=(name,)) for name in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert seen == {"a": '{"writer": "a"}', "b": '{"writer": "b"}'}
    for name in sessions:
        assert is_delta_table(str(tmp_path / name))
        assert history(str(tmp_path / name))[0]["metadata"] == {"writer": name}
    assert not is_delta_table(str(tmp_path / "nothing"))
    assert all(s.conf.get(METADATA_CONF, None) is None for s in sessions.values())


def test_executors_import_the_shipped_job_library(connect_session):
    from airflow_reverse_etl.hooks.spark_job import spark_jobs_archive

    connect_session.addArtifacts(spark_jobs_archive(), pyfile=True)

    def origin(batches):
        import pyarrow as pa

        import spark_jobs.sinks.core

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"file": [spark_jobs.sinks.core.__file__] * batch.num_rows})

    files = {r["file"] for r in connect_session.range(2).mapInArrow(origin, "file STRING").collect()}
    assert files and all(Path(spark_jobs_archive()).name in f for f in files), files


def test_a_long_lived_server_keeps_no_python_process_per_job(spark_connect_server, http_destination, tmp_path):
    # Spark 4.2 keeps a Python worker factory per Connect session (SPARK-54055): with its daemon, every
    # session that ran Python left a pyspark.daemon process behind (one more per sync, for good).
    # Three syncs of one change set (the last commits it): each a session whose executors run Python, so
    # three daemons left behind, before; a snapshot and a diff per sync would add no such session.
    pipeline = ConnectPipeline(spark_connect_server.url, tmp_path, http_destination_spec(http_destination))
    changes = pipeline.changes(range(1, 11))
    for attempt in range(3):
        pipeline.ok({**pipeline.sync_spec(changes), "run_id": f"sync-{attempt}", "commit": attempt == 2})
    assert sorted(row["id"] for row in http_destination.rows()) == list(range(1, 11))
    # at most the two task slots of the server's local[2] (another test's sync may be running)
    assert spark_connect_server.footprint().python_workers <= 2


def test_a_job_whose_server_is_killed_fails_in_bounded_time_and_its_retry_converges(
        spark_connect_server, http_destination, tmp_path, monkeypatch):
    """The sync on a server of its own, killed mid-delivery; its change set is made on the run's warm
    server (the same warehouse), so the server killed runs the sync alone."""
    timeout_s = 10
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__SPARK_CONNECT_TIMEOUT", str(timeout_s))
    with own_server() as server:
        monkeypatch.setenv("AIRFLOW_CONN_ARETL_KILLED_CONNECT", server.airflow_connection())
        pipeline = ConnectPipeline(spark_connect_server.url, tmp_path, http_destination_spec(http_destination))
        spec = parse_spec({"warehouse": pipeline.warehouse, **pipeline.sync_spec(pipeline.changes(range(1, 51)))})
        hook = SparkJobHook(conn_id="aretl_killed_connect", warehouse=pipeline.warehouse)
        http_destination.hold_until_concurrent(1000, timeout=60)  # the sync's first batch waits here
        with ThreadPoolExecutor(1) as pool:
            sync = pool.submit(hook.run_job, spec)
            _wait_for(lambda: http_destination.requests or sync.done(), 120)
            os.kill(server.pid(), signal.SIGKILL)
            killed = time.monotonic()
            with pytest.raises(ReverseEtlInfrastructureError) as failure:
                sync.result(timeout=120)
            failed_after = time.monotonic() - killed
        assert failed_after <= timeout_s + 15, failed_after
        assert f"Lost the Spark Connect server {server.url}" in str(failure.value)
        results = [json.loads(p.read_text()) for p in Path(pipeline.warehouse, "_system", "jobs").glob("*/result.json")]
        lost = [r for r in results if r["job"] == "sync"]
        assert len(lost) == 1 and lost[0]["status"] == "failed", lost
        assert lost[0]["error"]["category"] == "infrastructure" and lost[0]["error"]["retryable"]

        http_destination.open_gate()  # the killed attempt's batch is held there until it opens
        http_destination.reset()  # that batch may or may not have landed
        start_server(server.port)
        assert hook.run_job(spec)["status"] == "success"
        assert sorted(row["id"] for row in http_destination.rows()) == list(range(1, 51))


def test_two_jobs_at_once_in_one_process_both_succeed(spark_connect_server, tmp_path):
    """Both succeed, and the process is back in classic mode afterwards: each job's session once
    saved and restored pyspark's process-wide Connect switch itself, so two in threads could leave it
    on, breaking every later classic session of the process."""
    mode_before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    pipelines = [ConnectPipeline(spark_connect_server.url, tmp_path / name, {}) for name in ("a", "b")]
    with ThreadPoolExecutor(len(pipelines)) as pool:
        diffs = list(pool.map(lambda p: p.changes(range(1, 4)), pipelines))
    assert [d["counts"]["insert"] for d in diffs] == [3, 3], diffs
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") == mode_before


def _wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
