"""Run a :mod:`spark_jobs` job through spark-submit or Spark Connect and return its JSON result.

spark-submit is the default. When the Spark connection has the type ``spark_connect`` (the
apache-spark provider's :class:`SparkConnectHook` builds its URL), the job runs in the task process as
a client of that Spark Connect server instead (:mod:`.spark_connect_runner`): same spec, same result,
same XCom; spec.json and result.json are written to the job directory all the same, for the record.

For spark-submit, the hook writes the job spec to ``<warehouse>/_system/jobs/<id>/spec.json``, submits
``spark_jobs/entry.py`` with the stock :class:`SparkSubmitHook` (the Spark-side package shipped with
``--py-files``, the Delta jars with ``--jars`` or ``spark.jars.packages``) and reads ``result.json``
back. Spec and result live in the warehouse rather than on stdout so that a driver running anywhere
(client mode on this worker, or a cluster) can hand its result back.

Two deliberate departures from the stock hook:

* With no ``spark_default`` connection, jobs run on ``local[*]`` in the worker and the log says so;
  the stock hook silently falls back to YARN.
* Secrets are handed to the spark-submit process in its environment only. The stock hook's
  ``env_vars`` turn into ``--conf spark.yarn.appMasterEnv.X=<value>`` on YARN/Kubernetes, which puts
  them in argv; this hook never uses ``env_vars``.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import sys
import tempfile
import uuid
import zipfile
from dataclasses import replace
from datetime import datetime, timezone
from functools import cache
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from airflow_reverse_etl import config
from airflow_reverse_etl.exceptions import ReverseEtlConfigError, ReverseEtlInfrastructureError, job_failure
from airflow_reverse_etl.hooks.cluster_driver import (
    ACTIVE, PYTHON_RUNNER, USER_JAR, ClusterDriver, driver_bundle, driver_state, kill_driver, submit_environment,
    wait_for_driver,
)
from airflow_reverse_etl.hooks.spark_connect_runner import SparkConnectRunner, TaskAttempt
from spark_jobs.contract import DATAFRAME_DEBUGGING_OFF, DELTA_CONF, SPARK_PACKAGES, JobSpec, Warehouse
from spark_jobs.session import local_jars  # import-safe: no pyspark


class _LocalDefaultSparkSubmitHook(SparkSubmitHook):
    """SparkSubmitHook that runs on ``local[*]`` when its connection does not exist.

    Only the lookup changes: a missing connection is replaced by a ``spark`` connection whose host is
    ``local[*]``, and the stock ``_resolve_connection()`` reads it like any other."""

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:
        try:
            return super().get_connection(conn_id)
        except AirflowNotFoundException:
            cls.logger().info(
                "No Airflow connection %r: running the Spark job on local[*] in this worker. "
                "Create a 'spark' connection named %r to run on a cluster.", conn_id, conn_id,
            )
            return Connection(conn_id=conn_id, conn_type="spark", host="local[*]")


@cache
def spark_jobs_archive() -> str:
    """Zip the installed ``spark_jobs`` package for ``--py-files`` (cached per content hash), so
    executors anywhere import the same modules as the driver."""
    import spark_jobs

    package_dir = os.path.dirname(spark_jobs.__file__)
    files = sorted(
        os.path.join(root, name)
        for root, _, names in os.walk(package_dir)
        for name in names
        if name.endswith(".py")
    )
    digest = hashlib.sha1()
    for path in files:
        digest.update(path[len(package_dir):].encode())
        with open(path, "rb") as handle:
            digest.update(handle.read())
    target = os.path.join(tempfile.gettempdir(), f"aretl-spark_jobs-{digest.hexdigest()[:12]}.zip")
    if not os.path.exists(target):
        partial = f"{target}.{uuid.uuid4().hex}"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, os.path.join("spark_jobs", os.path.relpath(path, package_dir)))
        os.replace(partial, target)
    return target


def log4j_config() -> str:
    import spark_jobs

    return os.path.join(os.path.dirname(spark_jobs.__file__), "log4j2.properties")


def entry_script() -> str:
    import spark_jobs

    return os.path.join(os.path.dirname(spark_jobs.__file__), "entry.py")


class SparkJobHook(BaseHook):
    """Submit a reverse-ETL Spark job and return its result.

    :param conn_id: the Spark connection (``spark_default``); absent means ``local[*]``.
    :param warehouse: warehouse root; default from ``[reverse_etl] warehouse``.
    :param spark_conf: extra ``--conf`` settings (never secrets: they end up in argv).
    """

    conn_name_attr = "conn_id"
    default_conn_name = "spark_default"
    conn_type = "spark"
    hook_name = "Reverse ETL Spark job"

    def __init__(self, conn_id: str = default_conn_name, warehouse: str | None = None,
                 spark_conf: dict[str, Any] | None = None, **submit_kwargs: Any) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.warehouse = config.warehouse_uri(warehouse)
        self.spark_conf = dict(spark_conf or {})
        self.submit_kwargs = submit_kwargs
        self._submit_hook: SparkSubmitHook | None = None
        self._connect_runner: SparkConnectRunner | None = None
        self._driver: ClusterDriver | None = None

    def _jars_and_conf(self) -> tuple[str | None, dict[str, Any]]:
        conf = {**DELTA_CONF, **DATAFRAME_DEBUGGING_OFF, **self.spark_conf}
        # Quiet JVM logging (WARN) unless the user configures the driver's Java options.
        conf.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j_config()}")
        # Fixed costs of every job (bench scenario 5): Delta replays a table's log in 50 tasks by default,
        # and each job reads several logs several times (history, commit lookups), which costs more than
        # the data on small and medium tables; the web UI and console progress bar only slow a batch job.
        conf.setdefault("spark.databricks.delta.snapshotPartitions", "4")
        conf.setdefault("spark.ui.enabled", "false")
        conf.setdefault("spark.ui.showConsoleProgress", "false")
        try:
            jars = local_jars(config.jars_dir())
        except FileNotFoundError as exc:
            raise ReverseEtlConfigError(f"[reverse_etl] jars_dir: {exc}") from None
        if jars:
            return ",".join(jars), conf
        conf.setdefault("spark.jars.packages", SPARK_PACKAGES)
        return None, conf

    def _job_dir(self, job: str) -> str:
        return Warehouse(self.warehouse).job_dir(job, datetime.now(timezone.utc), uuid.uuid4().hex[:8])

    def run_job(self, spec: JobSpec, secrets: dict[str, str] | None = None,
                name: str | None = None, attempt: TaskAttempt | None = None) -> dict[str, Any]:
        """Run the job of ``spec`` (spark-submit, or Spark Connect for a ``spark_connect`` connection;
        the hook's warehouse unless the spec names one); ``secrets`` (env var -> value) reach the job's
        driver only through its environment. Over Connect, ``attempt`` (the task attempt running the
        job) lets the job stop what the task's killed earlier attempts left running on the server.
        A failed job raises the :mod:`~airflow_reverse_etl.exceptions` class of its error's category,
        with the job's own message (configuration and data errors: no retry)."""
        job = spec.job
        job_dir, spec_json = self._write_spec(spec)
        spec_uri, result_uri = f"{job_dir}/spec.json", f"{job_dir}/result.json"

        connect_url = self._spark_connect_url()
        if connect_url:
            result = self._run_over_connect(connect_url, spec_json, secrets, attempt)
            self._write_json(result_uri, result)
        else:
            result = self._submit(job, spec_uri, result_uri, secrets, name)
        return self.checked_result(job_dir, result)

    def _write_spec(self, spec: JobSpec) -> tuple[str, dict[str, Any]]:
        """Write ``spec`` (in the hook's warehouse unless it names one) to a new job directory:
        (the directory, the spec as written)."""
        if not spec.warehouse:
            spec = replace(spec, warehouse=self.warehouse)
        job_dir = self._job_dir(spec.job)
        spec_json = spec.to_dict()
        self._write_json(f"{job_dir}/spec.json", spec_json)
        return job_dir, spec_json

    @staticmethod
    def checked_result(job_dir: str, result: dict[str, Any]) -> dict[str, Any]:
        """The job's result with its directory, or the typed error of its failure."""
        if result.get("status") != "success":
            raise job_failure(str(result.get("job")), result.get("error") or {})
        result["job_dir"] = job_dir
        return result

    # -- cluster deploy mode on a standalone master (:mod:`.cluster_driver`) -------------------------
    def cluster_deploy_mode(self) -> bool:
        """Whether jobs run in cluster deploy mode on a standalone master: a ``spark://`` connection
        whose ``deploy-mode`` extra (or the hook's ``deploy_mode=``) is ``cluster``."""
        if self._spark_connect_url():
            return False
        probe = _LocalDefaultSparkSubmitHook(conn_id=self.conn_id, **self.submit_kwargs)
        return bool(probe._should_track_driver_status)

    def submit_driver(self, spec: JobSpec, secrets: dict[str, str] | None = None,
                      name: str | None = None) -> ClusterDriver:
        """Submit the job of ``spec`` in cluster deploy mode and return its driver as soon as the
        master accepted it (the job runs on; :meth:`driver_result` takes its result). Jobs that need
        secrets are refused: a cluster-mode driver does not get the task's environment."""
        if secrets:
            raise ReverseEtlConfigError(
                f"The {spec.job} job needs secrets ({', '.join(sorted(secrets))} in its environment), which "
                "reach a Spark driver only in client deploy mode: run it in client mode (the connection's "
                "deploy-mode extra) or over Spark Connect.")
        job_dir, spec_json = self._write_spec(spec)
        jars, conf = self._jars_and_conf()
        self._submit_hook = _LocalDefaultSparkSubmitHook(
            conf=conf, conn_id=self.conn_id, jars=jars, java_class=PYTHON_RUNNER,
            name=name or f"airflow-reverse-etl-{spec.job}", **self.submit_kwargs,
            application_args=[USER_JAR, USER_JAR, "--spec", f"{job_dir}/spec.json",
                              "--result", f"{job_dir}/result.json"],
        )
        rest_url = self._submit_hook._connection["rest_endpoint"]
        if not rest_url:
            raise ReverseEtlConfigError(f"Connection {self.conn_id!r}: cluster deploy mode needs one standalone "
                                        "master with its REST submission server (spark.master.rest.enabled)")
        bundle = driver_bundle(spec_json["warehouse"], spark_jobs_archive())
        try:
            driver_id = self._submit_hook.submit(application=bundle, env=submit_environment())
        except AirflowException as exc:
            raise ReverseEtlInfrastructureError(f"The Spark master did not accept the {spec.job} job: {exc}") from exc
        assert driver_id, "SparkSubmitHook returns the driver id in standalone cluster mode or raises"
        self._driver = ClusterDriver(driver_id=driver_id, job_dir=job_dir, rest_url=rest_url)
        self.log.info("Submitted the %s job as driver %s (cluster deploy mode)", spec.job, driver_id)
        return self._driver

    def driver_state(self, driver: ClusterDriver) -> str:
        return driver_state(driver)

    def wait_for_driver(self, driver: ClusterDriver) -> dict[str, Any]:
        """Poll ``driver`` until it ended; its result (or its failure's typed error)."""
        self._driver = driver
        return self.driver_result(driver, wait_for_driver(driver))

    def driver_result(self, driver: ClusterDriver, state: str | None = None) -> dict[str, Any]:
        """The result ``driver`` wrote (``state``: how it ended, for the error when it wrote none)."""
        result = self._read_result(driver.result_uri)
        if result is None:
            raise ReverseEtlInfrastructureError(f"Spark driver {driver.driver_id} ended ({state or 'state unknown'}) "
                                                f"without a result at {driver.result_uri}")
        return self.checked_result(driver.job_dir, result)

    def _spark_connect_url(self) -> str | None:
        """The Spark Connect URL when the connection has the type ``spark_connect``, else None."""
        try:
            conn = BaseHook.get_connection(self.conn_id)
        except AirflowNotFoundException:
            return None
        if conn.conn_type != SparkConnectHook.conn_type:
            return None
        return SparkConnectHook(conn_id=self.conn_id).get_connection_url()

    def _run_over_connect(self, url: str, spec: dict[str, Any], secrets: dict[str, str] | None,
                          attempt: TaskAttempt | None) -> dict[str, Any]:
        self._connect_runner = SparkConnectRunner(url, self.spark_conf, attempt, config.spark_connect_timeout())
        try:
            return self._connect_runner.run(spec, secrets, spark_jobs_archive())
        finally:
            self._connect_runner = None

    def _submit(self, job: str, spec_uri: str, result_uri: str, secrets: dict[str, str] | None,
                name: str | None) -> dict[str, Any]:
        """spark-submit ``entry.py`` for the spec; return the result it wrote."""
        jars, conf = self._jars_and_conf()
        self._submit_hook = _LocalDefaultSparkSubmitHook(
            conf=conf, conn_id=self.conn_id, py_files=spark_jobs_archive(), jars=jars,
            name=name or f"airflow-reverse-etl-{job}",
            application_args=["--spec", spec_uri, "--result", result_uri], **self.submit_kwargs,
        )
        env = os.environ.copy()
        python_bin = os.path.dirname(sys.executable)
        env["PATH"] = python_bin + os.pathsep + env.get("PATH", "")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.update(secrets or {})
        submit_error: AirflowException | None = None
        try:
            self._submit_hook.submit(application=entry_script(), env=env)
        except AirflowException as exc:
            submit_error = exc
        result = self._read_result(result_uri)
        if result is None:
            raise ReverseEtlInfrastructureError(f"Spark job {job} wrote no result to {result_uri}") from submit_error
        return result

    @staticmethod
    def _write_json(uri: str, document: dict[str, Any]) -> None:
        """Write a spec or result through fsspec: any warehouse URI with an fsspec filesystem works
        (``s3a://`` maps to s3fs, credentials from the usual AWS environment/instance profile)."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(uri)
        fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with fs.open(path, "w") as handle:
            json.dump(document, handle, indent=2, default=str)

    @staticmethod
    def _read_result(uri: str) -> dict[str, Any] | None:
        import fsspec

        fs, path = fsspec.core.url_to_fs(uri)
        if not fs.exists(path):
            return None
        with fs.open(path, "r") as handle:
            result: dict[str, Any] = json.load(handle)  # entry.py writes the result as a JSON object
            return result

    def on_kill(self) -> None:
        if self._connect_runner is not None:
            self._connect_runner.kill()
        if self._driver is not None:
            if driver_state(self._driver) in ACTIVE:
                kill_driver(self._driver)
            return
        if self._submit_hook is not None:
            self._submit_hook.on_kill()
