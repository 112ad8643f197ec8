"""Credentials reach the sink and nothing else: a SinkOperator run into the real Postgres, with the
connection's password and a token in its extras, then a search for both in everything the run left
behind — the spark-submit command line the hook logged, the job spec and result files, the operator's
XCom, the task log, every file of every Delta table in the warehouse (and their rows, read back,
since Parquet pages may be compressed) and the Spark event log of the job (what a Spark history
server would show: every SQL plan, job and task the job ran, with their properties).

Both execution modes: a real spark-submit (secrets in the driver process's environment), and a real
Spark Connect server, where the job's driver side runs in the task process (secrets in its
environment for the job's duration only; the server's log and its event log are searched too: the
test server keeps one, see tests_common/spark_connect.py)."""

import json
import logging
import os
import uuid

import pendulum
import psycopg2
import pytest

from tests_common.pipeline import Pipeline
from tests_common.secrets import assert_nowhere, warehouse_places

@pytest.mark.parametrize("mode", [
    pytest.param("spark_submit", marks=[pytest.mark.spark_submit,
                                        pytest.mark.fault("bad input", "secrets in a connection (spark-submit)")]),
    pytest.param("spark_connect", marks=[pytest.mark.spark_connect,
                                         pytest.mark.fault("bad input", "secrets in a connection (Spark Connect)")]),
])
def test_no_secret_is_left_in_argv_spec_xcom_logs_or_tables(spark, warehouse, tmp_path, postgres_server,
                                                             monkeypatch, caplog, capfd, request, mode):
    from airflow_reverse_etl.operators.sink import SinkOperator

    password = postgres_server.password
    token = f"tok-{uuid.uuid4().hex}"
    table = f"secret_test_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("AIRFLOW_CONN_ARETL_SECRET_TEST", json.dumps({
        "conn_type": "postgres", "host": postgres_server.host, "port": postgres_server.port,
        "login": postgres_server.user, "password": password, "schema": postgres_server.dbname,
        "extra": {"sslmode": "disable", "api_token": token},
    }))
    spark_conn_id, server = "aretl_no_such_spark_conn", None
    # spark-submit: the job's own event log; Connect: the server's (a static setting, fixed at its start)
    event_log_dir, spark_conf = tmp_path / "events", None
    if mode == "spark_submit":
        event_log_dir.mkdir()
        spark_conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file:{event_log_dir}",
                      "spark.eventLog.compress": "false"}
    if mode == "spark_connect":
        server = request.getfixturevalue("spark_connect_server")
        spark_conn_id = "aretl_secret_test_spark"
        event_log_dir = server.event_log_dir
        monkeypatch.setenv("AIRFLOW_CONN_ARETL_SECRET_TEST_SPARK", server.airflow_connection())
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step([(1, "ann", "oslo"), (2, "bob", "lima")])

    caplog.set_level(logging.DEBUG)
    operator = SinkOperator(task_id="publish", changes=changes, destination={"type": "postgres", "table": table},
                            destination_conn_id="aretl_secret_test", warehouse=warehouse,
                            spark_conn_id=spark_conn_id, spark_conf=spark_conf)
    xcom = operator.execute({"run_id": "secret-run", "logical_date": None,
                             "dag_run": type("DagRun", (), {"run_after": pendulum.now("UTC")})()})
    assert xcom["committed"] and xcom["stats"]["sent"] == 2
    with psycopg2.connect(**postgres_server.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")  # the password did reach the sink
        assert cur.fetchone() == (2,)
        cur.execute(f"DROP TABLE {table}")

    out, err = capfd.readouterr()
    task_log = caplog.text + out + err
    places = {"task log and argv": task_log, "xcom": json.dumps(xcom, default=str)}
    if mode == "spark_submit":
        assert "spark-submit" in task_log  # the hook logged the command line it ran
    else:
        assert f"on the Spark Connect server sc://127.0.0.1:{server.port}" in task_log
        places["Spark Connect server log"] = server.log_file.read_text(errors="replace")
        # the job's secret variables (ARETL_SECRET_*) lived in the task's environment for the job only
        places["task process environment after the job"] = json.dumps(
            {name: value for name, value in os.environ.items() if name.startswith("ARETL_SECRET_")})
    event_logs = [path for path in event_log_dir.rglob("*") if path.is_file()]  # rolling logs: a directory each
    assert any(warehouse in path.read_text(errors="replace") for path in event_logs), (
        f"no Spark event log in {event_log_dir} recorded the job (its plans read {warehouse})")
    places.update({str(path): path.read_bytes().decode("latin-1") for path in event_logs})
    places.update(warehouse_places(spark, warehouse))
    assert any("/_system/jobs/" in p and p.endswith("spec.json") for p in places)
    assert_nowhere((password, token), places)
