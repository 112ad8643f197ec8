"""The Spark Connect execution mode's own guarantees, on a real local server started by
scripts/services/spark_connect.sh: the server runs Delta SQL with per-session commit metadata, two
concurrent sessions never see each other's settings, and executors import the job library from the
session's shipped artifact. (The demo DAG and the secrets test run in both modes in their modules.)"""

import contextlib
import subprocess
import threading
from pathlib import Path

from spark_jobs.lake import METADATA_CONF, commit_metadata, history, is_delta_table
from spark_jobs.session import connect_session, is_connect

REPO = Path(__file__).resolve().parents[1]


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
    reader = sessions["a"]
    for name in sessions:
        assert is_delta_table(reader, str(tmp_path / name))
        assert history(reader, str(tmp_path / name))[0]["metadata"] == {"writer": name}
    assert not is_delta_table(reader, str(tmp_path / "nothing"))
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
