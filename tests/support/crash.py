"""Kill a job process at a named point (:mod:`spark_jobs.crashpoints`) and check it really died there.

The job runs in a fresh Python process with its own local Spark (a SIGKILL takes the process and its
JVM down together, as when a task's container is killed), against the test's warehouse. The caller
then re-runs the same spec in the test session: that is the plain re-run that must converge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from spark_jobs.crashpoints import ENV


def killed_at(point: str, spec: dict[str, Any], tmp_path, timeout: float = 600) -> None:
    """Run ``spec`` in a child process armed to die at ``point``; assert it was SIGKILLed."""
    spec_file = tmp_path / f"crash-{point}.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, ENV: point}
    proc = subprocess.run([sys.executable, "-m", "tests.support.crash", str(spec_file)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, (
        f"the job was not killed at {point} (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def _child(spec_file: str) -> None:
    from spark_jobs.entry import run
    from spark_jobs.session import build_session
    from tests.support.paths import JARS_DIR

    spark = build_session("aretl-crash", master="local[1]", jars_dir=str(JARS_DIR),
                          conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    result = run(spark, json.loads(open(spec_file).read()))
    print(json.dumps(result, default=str))  # reached only when the point was never hit


if __name__ == "__main__":
    _child(sys.argv[1])
