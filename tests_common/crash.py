"""Kill a job process at a named point (:mod:`spark_jobs.crashpoints`) and check it really died there.

The job runs in a fresh Python process against the test's warehouse, in one of the two ways a task
runs it, and is SIGKILLed at the point:

* as a Spark driver with its own local JVM (``connect_url=None``): the kill takes the process and its
  JVM down together, as when a spark-submit task's container is killed;
* as a Spark Connect client of the test server (``connect_url``), the way the hook's Connect mode
  runs it (:class:`~airflow_reverse_etl.hooks.spark_connect_runner.SparkConnectRunner`): the
  crash points sit in this driver-side Python, between Spark operations, so the client dies with no
  operation in flight and leaves the lake exactly as the spark-submit kill does — for a few seconds
  of process start instead of a JVM's twenty.

The caller then re-runs the same spec in the test session: that is the plain re-run that must converge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable

from spark_jobs.crashpoints import ENV


def killed_at(point: str, spec: dict[str, Any], tmp_path, connect_url: str | None = None,
              timeout: float = 600) -> None:
    """Run ``spec`` in a child process armed to die at ``point``; assert it was SIGKILLed."""
    spec_file = tmp_path / f"crash-{point}.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, ENV: point}
    proc = subprocess.run([sys.executable, "-m", "tests_common.crash", str(spec_file), *filter(None, [connect_url])],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, (
        f"the job was not killed at {point} (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def killed_when(spec: dict[str, Any], tmp_path, condition: Callable[[], bool], connect_url: str | None = None,
                timeout: float = 600) -> float:
    """Run ``spec`` in a child process (as :func:`killed_at` does) and SIGKILL it as soon as ``condition()``
    holds (polled), wherever the job is then; return the time.time() at which the process was dead."""
    spec_file = tmp_path / "killed-midway.json"
    spec_file.write_text(json.dumps(spec))
    proc = subprocess.Popen([sys.executable, "-m", "tests_common.crash", str(spec_file), *filter(None, [connect_url])],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the job ended before the condition held:\n{proc.stdout.read()[-4000:]}"
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    return time.time()


def _run_with_local_spark(spec: dict[str, Any]) -> dict[str, Any]:
    from spark_jobs.entry import run
    from spark_jobs.session import build_session
    from tests_common.paths import JARS_DIR
    from tests_common.spark_conf import SHORT_LIVED_JVM_CONF, TEST_SPARK_CONF

    spark = build_session("aretl-crash", master="local[1]", jars_dir=str(JARS_DIR),
                          conf={**TEST_SPARK_CONF, **SHORT_LIVED_JVM_CONF, "spark.ui.enabled": "false",
                                "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    return run(spark, spec)


def _run_as_connect_client(spec: dict[str, Any], url: str) -> dict[str, Any]:
    from airflow_reverse_etl.hooks.spark_connect_runner import SparkConnectRunner
    from airflow_reverse_etl.hooks.spark_job import spark_jobs_archive

    return SparkConnectRunner(url, {"spark.sql.session.timeZone": "UTC"}).run(spec, None, spark_jobs_archive())


if __name__ == "__main__":
    job_spec = json.loads(open(sys.argv[1]).read())
    result = _run_as_connect_client(job_spec, sys.argv[2]) if len(sys.argv) > 2 else _run_with_local_spark(job_spec)
    print(json.dumps(result, default=str))  # reached only when the point was never hit
