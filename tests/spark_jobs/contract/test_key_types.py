"""The key types of the contract (spark_jobs.contract.key_types): one list the checks and the docs use; a
key column of another type is refused naming the column, its type and why — when the DAG is parsed where
the type is declared (an upsert-kafka source's ``value_schema``), else by the job before it writes
(tests/integration/test_key_type_matrix.py runs every allowed type through every path)."""

from __future__ import annotations

import pytest

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from spark_jobs.contract import SnapshotSpec
from spark_jobs.contract.key_types import KEY_TYPES, check_key_types, ddl_types, is_key_type
from spark_jobs.errors import ConfigError


def test_the_allowed_types_and_the_refused_ones():
    assert all(is_key_type(t) for t in KEY_TYPES if t != "decimal(p,s)")
    assert is_key_type("decimal(38,18)") and is_key_type("decimal(5,0)")
    for refused in ("float", "double", "array<int>", "map<string,int>", "struct<a:int>", "void", "variant",
                    "interval day to second", "string collate UTF8_LCASE", "decimal"):
        assert not is_key_type(refused), refused


def test_a_refusal_names_the_column_its_type_and_why():
    with pytest.raises(ConfigError) as refused:
        check_key_types({"region": "string", "score": "double", "tags": "array<string>"}, ["region", "score", "tags"],
                        "Snapshot s")
    message = str(refused.value)
    assert message.startswith("Snapshot s: key column(s) ['score', 'tags'] have types a key cannot have (score is "
                              "double: floating point is not exact")
    assert "tags is array<string>: no destination keys a row by a value of this type" in message
    assert message.endswith(f"Key columns may be {', '.join(KEY_TYPES)}. Nothing was written.")
    check_key_types({"id": "bigint", "amount": "decimal(12,2)"}, ["id", "amount", "missing"], "fine")


def test_spark_ddl_is_read_in_plain_python():
    ddl = ("id BIGINT, `we,ird`` name` STRUCT<a: INT, b: STRING>, amount DECIMAL(12, 3), d dec, "
           "x double NOT NULL COMMENT 'hi, there', ts TIMESTAMP_LTZ, n Integer, t TIMESTAMP_NTZ, b BINARY")
    assert ddl_types(ddl) == {"id": "bigint", "we,ird` name": "struct<a:int,b:string>", "amount": "decimal(12,3)",
                              "d": "decimal(10,0)", "x": "double", "ts": "timestamp", "n": "int",
                              "t": "timestamp_ntz", "b": "binary"}
    assert ddl_types("not ddl at all (") is None  # left to Spark when the job runs


KAFKA = {"format": "kafka", "topic": "orders", "bootstrap_servers": "broker:9092"}


def test_an_upsert_kafka_key_type_is_refused_when_the_dag_is_parsed():
    from airflow_reverse_etl.operators.snapshot import SnapshotOperator

    source = {**KAFKA, "value_schema": "region STRING, id DOUBLE, name STRING"}
    with pytest.raises(ReverseEtlConfigError, match=r"Snapshot orders: kafka source 'orders': key column\(s\) "
                                                    r"\['id'\] have types a key cannot have \(id is double"):
        SnapshotOperator(task_id="snapshot", name="orders", source=source, primary_key=["region", "id"])
    with pytest.raises(ConfigError, match="id is double"):  # and by the spec the job is given
        SnapshotSpec.of(name="orders", source=source, primary_key=["region", "id"], warehouse="/wh")
    # a templated schema is only known when the task runs; a good one passes
    SnapshotOperator(task_id="templated", name="orders", source={**KAFKA, "value_schema": "{{ var.value.s }}"},
                     primary_key="id")
    SnapshotOperator(task_id="fine", name="orders", source={**KAFKA, "value_schema": "id BIGINT, name STRING"},
                     primary_key="id")
