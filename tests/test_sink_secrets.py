"""Credentials reach the sink and nothing else: a SinkOperator run through a real spark-submit into
the real Postgres, with the connection's password and a token in its extras, then a search for both
in everything the run left behind — the spark-submit command line the hook logged, the job spec and
result files, the operator's XCom, the task log and every file of every Delta table in the warehouse
(and their rows, read back, since Parquet pages may be compressed)."""

import json
import logging
import uuid
from pathlib import Path

import pendulum
import psycopg2
import pytest

from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.spark_submit


def test_no_secret_is_left_in_argv_spec_xcom_logs_or_tables(spark, warehouse, tmp_path, postgres_server,
                                                             monkeypatch, caplog, capfd):
    from airflow_reverse_etl.operators.sink import SinkOperator

    password = postgres_server.password
    token = f"tok-{uuid.uuid4().hex}"
    table = f"secret_test_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("AIRFLOW_CONN_ARETL_SECRET_TEST", json.dumps({
        "conn_type": "postgres", "host": postgres_server.host, "port": postgres_server.port,
        "login": postgres_server.user, "password": password, "schema": postgres_server.dbname,
        "extra": {"sslmode": "disable", "api_token": token},
    }))
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step([(1, "ann", "oslo"), (2, "bob", "lima")])

    caplog.set_level(logging.DEBUG)
    operator = SinkOperator(task_id="publish", changes=changes, destination={"type": "postgres", "table": table},
                            destination_conn_id="aretl_secret_test", warehouse=warehouse,
                            spark_conn_id="aretl_no_such_spark_conn")
    xcom = operator.execute({"run_id": "secret-run", "logical_date": None,
                             "dag_run": type("DagRun", (), {"run_after": pendulum.now("UTC")})()})
    assert xcom["committed"] and xcom["stats"]["sent"] == 2
    with psycopg2.connect(**postgres_server.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")  # the password did reach the sink
        assert cur.fetchone() == (2,)
        cur.execute(f"DROP TABLE {table}")

    out, err = capfd.readouterr()
    task_log = caplog.text + out + err
    assert "spark-submit" in task_log  # the hook logged the command line it ran
    places = {"task log and argv": task_log, "xcom": json.dumps(xcom, default=str)}
    for path in Path(warehouse).rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_bytes().decode("latin-1")
    assert any("/_system/jobs/" in p and p.endswith("spec.json") for p in places)
    for table_dir in {p.parent for p in Path(warehouse).rglob("_delta_log")}:
        rows = spark.read.format("delta").load(str(table_dir)).toJSON().collect()
        places[f"rows of {table_dir}"] = "\n".join(rows)
    for secret in (password, token):
        leaks = [place for place, text in places.items() if secret in text]
        assert not leaks, f"secret found in {leaks}"
