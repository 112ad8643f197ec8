"""SparkJobHook: the local[*] default when no Spark connection exists, connections when they do,
secrets kept out of argv, and a failing job's own message surfacing through a real spark-submit."""

import json

import pytest

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.hooks.spark_job import SparkJobHook, _LocalDefaultSparkSubmitHook
from spark_jobs.contract import SnapshotSpec


def test_without_a_connection_jobs_run_locally_and_say_so(capfd):
    hook = _LocalDefaultSparkSubmitHook(conn_id="no_such_spark_conn")
    assert hook._connection["master"] == "local[*]"
    assert "running the Spark job on local[*]" in capfd.readouterr().out  # Airflow logs to stdout


def test_a_spark_connection_sets_the_master(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_MY_SPARK", json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                            "port": 7077}))
    hook = _LocalDefaultSparkSubmitHook(conn_id="my_spark")
    assert hook._connection["master"] == "spark://127.0.0.1:7077"


@pytest.mark.spark_submit
def test_a_failing_job_reports_its_own_error_and_keeps_secrets_out_of_argv(warehouse, tmp_path, capfd):
    hook = SparkJobHook(conn_id="no_such_spark_conn", warehouse=warehouse)
    secret = "s3cr3t-value-for-argv-test"
    with pytest.raises(ReverseEtlConfigError) as failure:
        hook.run_job(SnapshotSpec(name="customers", primary_key=["id"], logical_date="2026-01-01",
                                  run_id="r", source={"format": "parquet", "path": str(tmp_path / "missing")}),
                     secrets={"ARETL_SECRET_SOURCE_PASSWORD": secret})
    assert "ConfigError" in str(failure.value) and "does not exist" in str(failure.value)
    command = hook._submit_hook._build_spark_submit_command("entry.py")
    assert "spark_jobs" in " ".join(command) and secret not in " ".join(command)
    log = capfd.readouterr().out
    assert "Spark-Submit cmd" in log and secret not in log
    spec_files = list((tmp_path / "warehouse" / "_system" / "jobs").glob("*/spec.json"))
    assert spec_files and all(secret not in f.read_text() for f in spec_files)
