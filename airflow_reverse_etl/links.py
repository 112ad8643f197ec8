"""Extra links of the reverse-ETL operators: the Spark application and the job's spec/result files.

Airflow 3 computes each link on the worker when the task finishes and stores it as an XCom under the
link's ``xcom_key``; the UI shows that stored value. The links are built from the task's job result
(its ``return_value`` XCom), so a link always points at the run it belongs to. A run that failed
before returning a result has no links (the button stays disabled).

The Spark application link prefers a history server (``[reverse_etl] spark_history_url``: a
finished application's driver UI is gone) and falls back to the UI the job reported: the driver UI of
a spark-submit job, the Connect server's page of the job's session in Spark Connect mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


def job_result(ti_key: TaskInstanceKey) -> dict[str, Any]:
    """The job result the task returned, or ``{}`` when it returned none."""
    from airflow.sdk.execution_time.xcom import XCom

    value = XCom.get_value(ti_key=ti_key, key="return_value")
    return value if isinstance(value, dict) else {}


def spark_application_url(result: dict[str, Any]) -> str:
    """The Spark application's page: on the history server when one is configured, else the UI the
    job reported (``spark.ui_url``); empty when neither is known. A job that ran on a Spark Connect
    server links its own session's page (the server's ``Connect`` tab: the session's statements,
    with their jobs and SQL plans) rather than the whole server application, which every client
    shares."""
    from airflow_reverse_etl import config

    spark = result.get("spark") or {}
    history, app_id, session_id = config.spark_history_url(), spark.get("application_id"), spark.get("session_id")
    if history and app_id:
        page = f"connect/session/?id={session_id}" if session_id else "jobs/"
        return f"{history.rstrip('/')}/history/{app_id}/{page}"
    return spark.get("ui_url") or ""


class SparkApplicationLink(BaseOperatorLink):
    """The Spark application that ran the task's job."""

    name = "Spark application"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return spark_application_url(job_result(ti_key))


class _JobFileLink(BaseOperatorLink):
    """A file of the job's directory ``_system/jobs/<id>/`` in the warehouse."""

    file_name: str

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        job_dir = job_result(ti_key).get("job_dir")
        if not job_dir:
            return ""
        return f"{job_dir}/{self.file_name}" if "://" in job_dir else f"file://{job_dir}/{self.file_name}"


class JobResultLink(_JobFileLink):
    """The job's ``result.json``: counts, versions read and written, where Spark ran."""

    name = "Job result"
    file_name = "result.json"


class JobSpecLink(_JobFileLink):
    """The job's ``spec.json``: exactly what the task asked Spark to do (never secrets)."""

    name = "Job spec"
    file_name = "spec.json"
