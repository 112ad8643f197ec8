"""Errors that say whether to retry: the job result's category and retryable flag (a duplicate key is
data, permanent; a real Delta commit conflict becomes a retryable ConcurrentWriteError naming the
table), the provider exception each one becomes (configuration and data errors are
AirflowFailExceptions), and a duplicate-key snapshot task failing with one through spark-submit."""

from __future__ import annotations

import threading
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_reverse_etl.exceptions import (
    ReverseEtlConcurrentWriteError,
    ReverseEtlConfigError,
    ReverseEtlDataError,
    ReverseEtlDefectError,
    ReverseEtlInfrastructureError,
    job_failure,
)
from spark_jobs.entry import failure
from spark_jobs.errors import ConcurrentWriteError, DestinationUnreachableError, RetryableError
from tests_common.jobs import job, job_error, write_parquet

SCHEMA = "id INT, v STRING"


@pytest.mark.parametrize("category, cls, retried", [
    ("config", ReverseEtlConfigError, False),
    ("data", ReverseEtlDataError, False),
    ("infrastructure", ReverseEtlInfrastructureError, True),
    ("conflict", ReverseEtlConcurrentWriteError, True),
    ("defect", ReverseEtlDefectError, False),
    (None, ReverseEtlInfrastructureError, True),  # unclassified: retried, as Airflow always did
])
def test_each_category_becomes_its_provider_exception(category, cls, retried):
    error = {"type": "X", "message": "what went wrong", "category": category}
    exc = job_failure("snapshot", error)
    assert type(exc) is cls and exc.error == error
    assert str(exc).startswith("snapshot job failed: X: what went wrong")
    assert ("This is a defect of airflow-reverse-etl" in str(exc)) is (cls is ReverseEtlDefectError)
    assert isinstance(exc, AirflowFailException) is not retried


def test_retryable_errors_report_their_category():
    unreachable = failure(DestinationUnreachableError("Postgres at db:5432 refused the connection"), None)
    assert unreachable == {"type": "DestinationUnreachableError", "category": "infrastructure", "retryable": True,
                           "message": "Postgres at db:5432 refused the connection"}
    assert failure(RetryableError("broker busy"), None)["retryable"] is True
    try:
        {}["missing"]
    except KeyError as exc:  # a bug of the job's own code: reported with its traceback, never retried
        bug = failure(exc, None)
    assert (bug["category"], bug["retryable"], bug["condition"]) == ("defect", False, "KeyError")
    assert "KeyError" in bug["traceback"]
    try:
        raise RuntimeError("something nobody catalogued")
    except RuntimeError as exc:  # unexplained: retried, as Airflow would
        unknown = failure(exc, None)
    assert unknown["category"] == "infrastructure" and unknown["retryable"] and "RuntimeError" in unknown["traceback"]


def test_a_spark_connect_conflict_is_recognised_by_its_error_class():
    """Spark Connect hands the client the error class and message, not the delta.exceptions class."""
    message = ("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Transaction conflict detected. a concurrent MERGE added "
               "data to table delta.`file:/lake/wh/snapshots/customers` committed at version 7.\nMore text")
    conflict = ConcurrentWriteError.from_delta(RuntimeError(message), "file:///lake/wh/")
    assert str(conflict).startswith("Another run is writing snapshots/customers at the same time; "
                                    "retry after it finishes.")
    assert ConcurrentWriteError.from_delta(RuntimeError("java.util.ConcurrentModificationException")) is None


def test_a_duplicate_key_is_a_permanent_data_error(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a"), (1, "b")], SCHEMA)
    error = job_error(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                      source={"format": "parquet", "path": src}, logical_date="2026-01-01", run_id="r")
    assert (error["type"], error["category"], error["retryable"]) == ("DataQualityError", "data", False)
    assert "traceback" not in error


def test_a_delta_commit_conflict_is_a_retryable_error_naming_the_table(spark, warehouse, tmp_path):
    """Two writers really meet: a MERGE whose source is slow (a UDF that sleeps, after signalling that
    the MERGE's transaction is reading) and a DELETE committed meanwhile on the same table."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    src = str(tmp_path / "src")
    write_parquet(spark, src, [(i, "a") for i in range(10)], SCHEMA)
    job(spark, "snapshot", warehouse, name="customers", primary_key=["id"], source={"format": "parquet", "path": src},
        logical_date="2026-01-01", run_id="r1")
    uri = f"{warehouse}/snapshots/customers"
    started = tmp_path / "merge-started"

    def slow(value):
        started.touch()
        time.sleep(0.4)
        return value

    source = spark.range(10).coalesce(1).select(F.udf(slow, "long")("id").cast("int").alias("id"),
                                                F.lit("b").alias("v"))
    merge = (DeltaTable.forPath(spark, uri).alias("t").merge(source.alias("s"), "t.id = s.id")
             .whenMatchedUpdate(set={"v": "s.v"}))
    raised: list[BaseException] = []

    def run_merge():
        try:
            merge.execute()
        except Exception as exc:  # the conflict, examined below
            raised.append(exc)

    merging = threading.Thread(target=run_merge)
    merging.start()
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id = 3")  # commits while the MERGE is still reading
    merging.join()

    assert raised, "the MERGE committed despite the concurrent DELETE"
    error = failure(raised[0], warehouse)
    assert (error["type"], error["category"], error["retryable"]) == ("ConcurrentWriteError", "conflict", True)
    assert error["message"].startswith("Another run is writing snapshots/customers at the same time; retry after "
                                       "it finishes."), error["message"]
    assert "traceback" not in error
    assert isinstance(job_failure("snapshot", error), ReverseEtlConcurrentWriteError)


@pytest.mark.spark_submit
def test_a_duplicate_key_snapshot_task_fails_without_retrying(spark, warehouse, tmp_path):
    """Through the operator, the hook and a real spark-submit: the task raises an AirflowFailException,
    which Airflow's task runner fails at once instead of using the task's retries."""
    import pendulum
    from airflow.sdk import DAG

    from airflow_reverse_etl.operators.snapshot import SnapshotOperator

    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a"), (1, "b")], SCHEMA)
    with DAG("duplicate_key_snapshot", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        task = SnapshotOperator(task_id="snapshot", name="customers", primary_key=["id"], warehouse=warehouse,
                                source={"format": "parquet", "path": src}, retries=3)
    with pytest.raises(ReverseEtlDataError, match=r"snapshot job failed: DataQualityError: .*duplicate primary key"):
        task.execute({"run_id": "r1", "logical_date": pendulum.datetime(2026, 1, 2, tz="UTC")})
