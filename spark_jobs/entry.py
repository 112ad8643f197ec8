"""The spark-submit application: ``entry.py --spec URI --result URI``.

Reads the job spec (JSON), parses it into the job's typed spec (:mod:`spark_jobs.contract`), runs the
job it names and writes the job result (JSON) next to it. A job that
fails writes a result too, with ``status: failed`` and the error, so the Airflow task can show the
real cause instead of a JVM stack trace; the process then exits non-zero.

:func:`run` is where a job's result, error and log lines leave it, in both execution modes: they are
redacted of every secret the job knows there (:mod:`spark_jobs.redaction`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from spark_jobs.contract import JobResult, JobSpec


def load_job(name: str) -> Callable[[SparkSession, JobSpec], JobResult]:
    """The function running job ``name``: the one its spec names (:attr:`JobSpec.runner
    <spark_jobs.contract.JobSpec.runner>`, one spec per job in :data:`spark_jobs.contract.SPECS`)."""
    from spark_jobs.contract import SPECS

    module, _, func = SPECS[name].runner.partition(":")
    runner: Callable[[SparkSession, JobSpec], JobResult] = getattr(importlib.import_module(module), func)
    return runner


def run(spark: SparkSession, spec_json: dict[str, Any]) -> dict[str, Any]:
    """Parse the spec and run its job in an existing session (classic or Spark Connect); the result
    always has a ``status``. The result, and every line logged meanwhile, hold no secret the job knows."""
    from spark_jobs.redaction import redacted, redacting_logs

    with redacting_logs():
        result: dict[str, Any] = redacted(_run(spark, spec_json))
    return result


def _run(spark: SparkSession, spec_json: dict[str, Any]) -> dict[str, Any]:
    from spark_jobs.contract import parse_spec
    from spark_jobs.delta.object_store import require_conditional_writes
    from spark_jobs.state.lineage import record_run
    from spark_jobs.session import running_in

    started = time.monotonic()
    try:
        spec = parse_spec(spec_json)
        require_conditional_writes(spec.warehouse)  # before anything is written (a store unsafe to commit on)
        with running_in(spark):
            result = with_column_lineage(spark, spec, load_job(spec.job)(spark, spec))
            # after success only: a failed job leaves no lineage row
            record_run(spec, result, time.monotonic() - started)
        result["status"] = "success"
    except Exception as exc:
        result = {"status": "failed", "error": failure(exc, spec_json.get("warehouse"))}
    result["job"] = spec_json.get("job")
    result["duration_s"] = round(time.monotonic() - started, 3)
    return result


def with_column_lineage(spark: SparkSession, spec: JobSpec, result: JobResult) -> dict[str, Any]:
    """The result as a dict, with its column lineage. Deriving it runs after the job's commits, so a
    failure to (a schema that cannot be read any more) is logged and leaves the lineage out rather than
    failing a job whose work is done."""
    from dataclasses import replace

    from spark_jobs.column_lineage import column_lineage

    try:
        return replace(result, column_lineage=column_lineage(spark, spec, result.to_dict())).to_dict()
    except Exception:
        logging.getLogger(__name__).warning("No column lineage for this %s job", spec.job, exc_info=True)
        return result.to_dict()


def where(spark: SparkSession) -> dict[str, Any]:
    """Where the job ran, so the task's XCom and log point at the Spark application (and its UI):
    read from the session's configuration, which classic and Spark Connect sessions both answer. A
    Connect session also names its ``session_id``: the server's UI and history server show the
    session's SQL statements and jobs under ``/connect/session/?id=<session_id>``."""
    session_id = getattr(spark, "session_id", None)  # only Spark Connect sessions have one
    return {"master": spark.conf.get("spark.master", None), "application_id": spark.conf.get("spark.app.id", None),
            "deploy_mode": spark.conf.get("spark.submit.deployMode", "client"),
            "ui_url": connect_ui_url(spark, session_id) if session_id else driver_ui_url(spark),
            **({"session_id": session_id} if session_id else {})}


def driver_ui_url(spark: SparkSession) -> str | None:
    """The driver's web UI, when it runs one."""
    return spark.sparkContext.uiWebUrl


def connect_ui_url(spark: SparkSession, session_id: str) -> str | None:
    """The Spark Connect server's UI page of this session (its statements, their jobs and SQL plans),
    when the server runs a UI. A client cannot see the port the UI bound, only the configured one, so
    it is exact when the server was started with an explicit ``spark.ui.port`` (as
    ``scripts/services/spark_connect.sh`` does); None when the UI is off."""
    if str(spark.conf.get("spark.ui.enabled", "true")).lower() != "true":  # pyspark types get() as optional
        return None
    host = spark.conf.get("spark.driver.host", "127.0.0.1")
    port = spark.conf.get("spark.ui.port", "4040")
    return f"http://{host}:{port}/connect/session/?id={session_id}"


def failure(exc: Exception, warehouse: str | None) -> dict[str, Any]:
    """The result's ``error``: what failed, and whether the Airflow task should be retried. An error
    the job explains carries no traceback. Any other exception is looked up in the catalogue of
    Spark, Delta, JVM and Python failures (:mod:`spark_jobs.error_conditions`), which gives its
    category and the ``condition`` it matched on (SQL the product generated and Spark refused is a
    ``defect``, never retried); one the catalogue does not know counts as infrastructure and is
    retried, as Airflow would treat it. Both keep the traceback for the task log. Redacted of every
    secret the job knows (the Spark Connect runner reports its own failures with it too)."""
    from spark_jobs.redaction import redacted

    error: dict[str, Any] = redacted(_failure(exc, warehouse))
    return error


def _failure(exc: Exception, warehouse: str | None) -> dict[str, Any]:
    from spark_jobs.error_conditions import classify
    from spark_jobs.errors import explain

    explained = explain(exc, warehouse)
    if explained is not None:
        return {"type": type(explained).__name__, "message": str(explained), "category": explained.category,
                "retryable": explained.retryable}
    known = classify(exc)
    classified = ({"category": "infrastructure", "retryable": True} if known is None else
                  {"category": known.category, "retryable": known.retryable, "condition": known.found})
    return {"type": type(exc).__name__, "message": str(exc), **classified, "traceback": traceback.format_exc(limit=20)}


def main(argv: list[str] | None = None, ship: str | None = None) -> int:
    """Run the job of ``--spec`` in a new classic session, write ``--result``. ``ship``: a zip of the
    ``spark_jobs`` package the executors do not have yet (cluster deploy mode runs from such a bundle,
    :mod:`airflow_reverse_etl.hooks.cluster_driver`), handed to them as ``--py-files`` would."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True, help="URI of the job spec JSON")
    parser.add_argument("--result", required=True, help="URI to write the job result JSON to")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from spark_jobs.delta.fs import read_text, write_text
    from spark_jobs.session import build_session

    spark = build_session()
    spark.sparkContext.setLogLevel("WARN")
    if ship:
        spark.sparkContext.addPyFile(ship)
    spec = json.loads(read_text(spark, args.spec))
    result = run(spark, spec)
    result["spark"] = where(spark)
    write_text(spark, args.result, json.dumps(result, default=str, indent=2))
    print(f"airflow-reverse-etl: job {result['job']} {result['status']} in {result['duration_s']}s")
    spark.stop()
    return 0 if result["status"] == "success" else 2


if __name__ == "__main__":
    sys.exit(main())
