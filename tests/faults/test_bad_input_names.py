"""Names that become paths under the warehouse (issue 23 §2): a snapshot, history, wide table,
consumer or savepoint named ``..``, ``.``, with a path separator or a control character is refused
when the DAG is parsed, naming the argument; the same check runs in the job before any Spark work,
so a spec written by hand cannot escape the warehouse either. Quotes, spaces and dots inside a name
keep working."""

from __future__ import annotations

import pytest

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.history import SnapshotHistoryOperator
from airflow_reverse_etl.operators.savepoint import TableSavepointOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from airflow_reverse_etl.operators.widen import WidenTableOperator
from spark_jobs.contract import parse_spec
from spark_jobs.errors import ConfigError

SOURCE = {"format": "parquet", "path": "/data/customers"}
BAD_NAMES = ["..", ".", "../../escaped", "a/b", "a\\b", "tab\there", ""]


def snapshot(name):
    return SnapshotOperator(task_id="t", name=name, source=SOURCE, primary_key="id")


def diff(consumer):
    return DiffOperator(task_id="t", snapshot="customers", consumer=consumer)


def diff_of(snapshot_name):
    return DiffOperator(task_id="t", snapshot=snapshot_name, consumer="crm")


def history(name):
    return SnapshotHistoryOperator(task_id="t", table="customers", name=name)


def savepoint(name):
    return TableSavepointOperator(task_id="t", table="customers", version=1, savepoint_name=name)


def wide(name):
    return WidenTableOperator(task_id="t", wide_table={
        "name": name, "primary_key": ["id"], "sources": [{"name": "a", "table": "snapshots/a", "columns": ["x"]}]})


BUILDERS = {"snapshot name": snapshot, "consumer": diff, "diff's snapshot": diff_of, "history name": history,
            "savepoint name": savepoint, "wide table name": wide}


@pytest.mark.fault("bad input", "names that would escape the warehouse ('..', '/', '\\', control characters)")
@pytest.mark.parametrize("what", BUILDERS)
def test_a_name_that_is_not_a_folder_fails_at_parse_time(what):
    # a diff names its table by its path under the warehouse: 'wide/orders' is one, '..' in it is not
    bad = ["..", "snapshots/..", "../../escaped", "a\\b", "tab\there"] if what == "diff's snapshot" else BAD_NAMES
    for name in bad:
        with pytest.raises(ReverseEtlConfigError) as refused:
            BUILDERS[what](name)
        assert repr(name) in str(refused.value) or "empty" in str(refused.value) or what == "diff's snapshot", \
            (what, name, refused.value)


def test_quotes_spaces_and_inner_dots_stay_names():
    for name in ("o'neil", "my customers", "v1.2", "a..b"):
        for build in BUILDERS.values():
            build(name)


@pytest.mark.parametrize("spec", [
    {"job": "snapshot", "name": "..", "source": SOURCE, "primary_key": ["id"]},
    {"job": "diff", "table": "snapshots/customers", "consumer": "../../escaped"},
    {"job": "diff", "table": "snapshots/../..", "consumer": "crm"},
    {"job": "sync", "changes": "changes/crm/../../../x", "table": "snapshots/customers", "consumer": "crm",
     "primary_key": ["id"], "to_version": 1},
    {"job": "history", "table": "snapshots/customers", "name": "../x"},
    {"job": "maintenance", "table": "../outside"},
])
def test_a_spec_written_by_hand_cannot_escape_either(spec):
    with pytest.raises(ConfigError, match="folder|path under the warehouse|names"):
        parse_spec({"warehouse": "/lake", **spec})
