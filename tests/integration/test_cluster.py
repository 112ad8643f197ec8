"""The distributed path's premise: the standalone cluster's executors run a Python without this project.

A master and one worker run on 127.0.0.1 (``scripts/services/spark_cluster.sh``). Executors use a
Python that does not have this project installed, so a job's executor-side code (the sink's delivery
among it) can only run if ``spark_jobs`` was shipped with ``--py-files``. The demo DAG itself runs on
this cluster, its warehouse on S3, in ``tests/integration/test_object_store_spark.py`` (one run of the
cold spark-submits proves both: where each job runs, what it ships, how its result comes back).
"""

from __future__ import annotations

import os
import subprocess

import pytest

pytestmark = pytest.mark.spark_submit  # cluster: from the spark_cluster fixture


def test_executor_python_lacks_the_project(cluster_client):
    """The premise of the shipping check: without --py-files, executors cannot import spark_jobs."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import pyspark, tenacity\ntry:\n import spark_jobs\nexcept ModuleNotFoundError:\n print('absent')"
    out = subprocess.run([str(cluster_client.executor_python), "-c", probe], env=env, cwd="/",
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "absent", out
    assert cluster_client.executor_python_launches() == 1
