"""The Airflow <-> Spark contract, in plain Python (no Spark, no Airflow): every job spec survives the
JSON round trip, carries its defaults, names the field and the value it refuses, refuses unknown options;
logical dates compare as instants however they are spelt."""

import json
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone

import pytest

from spark_jobs.contract import (
    SPECS,
    BackfillSpec,
    DiffSpec,
    HistorySpec,
    MaintenanceSpec,
    RestoreSpec,
    RetentionSpec,
    SavepointSpec,
    SyncResult,
    SyncSpec,
    SnapshotSpec,
    Warehouse,
    WidenSpec,
    parse_commit_metadata,
    parse_logical_date,
    parse_spec,
    table_rel,
)
from spark_jobs.errors import ConfigError
from spark_jobs.delta.timetravel import recorded_for

IDENTITY = {"warehouse": "/wh", "run_id": "r1", "logical_date": "2026-01-02T00:00:00+00:00",
            "dag_id": "d", "task_id": "t"}
SOURCE = {"format": "parquet", "path": "/src"}
WIDE = {"name": "w", "primary_key": ["k"], "sources": [
    {"name": "s1", "columns": ["a"]}, {"name": "dim", "join": "left", "on": {"a": "id"}, "columns": {"n": "name"}}]}
SPEC_EXAMPLES = [
    SnapshotSpec(**IDENTITY, name="customers", source=SOURCE, primary_key=["id"]),
    BackfillSpec(**IDENTITY, name="customers", source={"format": "csv", "path": "/src"}, primary_key="id",
                 logical_dates=["2026-01-02", "2026-01-01"]),
    DiffSpec(**IDENTITY, table="snapshots/customers", consumer="crm", to_version=3, columns=["name"]),
    SyncSpec(**IDENTITY, changes="changes/crm/x", table="snapshots/customers", consumer="crm", primary_key=["id"],
             to_version=3, counts={"insert": 2, "update": 1, "delete": 0},
             counted_changes="changes/crm/x", counted_version=0,
             destination={"type": "sqlite", "database": "/db", "table": "customers"}, mode="mirror",
             delivery={"batch_size": 10}),
    RestoreSpec(**IDENTITY, table="customers", target_logical_date="2026-01-01"),
    SavepointSpec(**IDENTITY, table="wide/orders", version=4, savepoint_name="month-end"),
    HistorySpec(**IDENTITY, table="customers"),
    MaintenanceSpec(**IDENTITY, table="customers", zorder_by=["id"]),
    RetentionSpec(**IDENTITY, keep_change_sets=1, job_days=3, dry_run=True),
    WidenSpec(**IDENTITY, wide=WIDE, sources=["s1"], versions={"s1": 7}),
]


def test_every_job_has_a_spec_example_and_a_runner():
    from spark_jobs.entry import load_job

    assert sorted(type(s).job for s in SPEC_EXAMPLES) == sorted(SPECS)
    for job, spec in SPECS.items():
        assert spec.runner.startswith("spark_jobs."), job
        assert callable(load_job(job)), job


@pytest.mark.parametrize("spec", SPEC_EXAMPLES, ids=lambda s: s.job)
def test_specs_survive_the_json_round_trip(spec):
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["job"] == spec.job
    assert parse_spec(data) == spec
    assert type(spec).from_dict(data).to_dict() == data


def test_defaults_live_in_the_contract():
    sink = SyncSpec.of(changes="c", table="t", consumer="crm", primary_key="id", to_version=1, mode=None)
    assert (sink.mode, sink.max_delete_fraction, sink.max_reject_fraction, sink.dry_run, sink.commit) == (
        "upsert", 0.5, None, False, True)
    maintenance = MaintenanceSpec.of(table="customers")
    assert (maintenance.table, maintenance.vacuum, maintenance.optimize, maintenance.retain_hours) == (
        "snapshots/customers", True, False, 168.0)  # the operator's defaults: the job had vacuum off
    diff = DiffSpec.from_dict({"job": "diff", "table": "snapshots/x", "consumer": "c", "columns": None})
    assert (diff.columns, diff.primary_key, diff.to_version, diff.full_resync) == ([], [], None, False)
    assert HistorySpec.of(table="customers").rel == "history/customers"
    assert HistorySpec.of(table="customers", name="dim").rel == "history/dim"
    assert SnapshotSpec.of(name="c", source=SOURCE, primary_key="id").primary_key == ["id"]


def test_values_are_normalized():
    sink = SyncSpec.of(changes="c", table="t", consumer="crm", primary_key=["id"], to_version="3",
                       dry_run="False", max_reject_fraction="0.25")
    assert (sink.to_version, sink.dry_run, sink.max_reject_fraction) == (3, False, 0.25)


@pytest.mark.parametrize("data, named", [
    ({"job": "sync", "changes": "c", "table": "t", "consumer": "c", "primary_key": ["id"], "to_version": 1,
      "mode": "merge"}, ["mode='merge'", "upsert, insert, update, mirror"]),
    ({"job": "sync", "changes": "c", "table": "t", "consumer": "c", "primary_key": ["id"], "to_version": 1,
      "max_delete_fraction": 1.5}, ["max_delete_fraction=1.5", "between 0 and 1"]),
    ({"job": "sync", "changes": "c", "table": "t", "consumer": "c", "primary_key": [], "to_version": 1},
     ["primary_key=[]", "column name"]),
    ({"job": "sync", "changes": "c", "table": "t", "consumer": "c", "primary_key": ["id"]},
     ["to_version=None", "an integer"]),
    ({"job": "sync", "changes": "c", "table": "t", "consumer": "c", "primary_key": ["id"], "to_version": 1,
      "counts": {"inserts": 1}}, ["counts=", "insert, update, delete", "['inserts']"]),
    ({"job": "snapshot", "name": "a/b", "source": SOURCE, "primary_key": ["id"]}, ["name='a/b'", "holds '/'"]),
    ({"job": "maintenance", "table": "t", "retain_hours": -1}, ["retain_hours=-1", ">= 0"]),
    ({"job": "diff", "table": "t", "consumer": "c", "full_resync": "maybe"}, ["full_resync='maybe'", "true or false"]),
    ({"job": "backfill", "name": "c", "source": SOURCE, "primary_key": ["id"], "logical_dates": []},
     ["logical_dates=[]", "non-empty"]),
    ({"job": "restore", "table": "t"}, ["exactly one of 'version' or 'target_logical_date'"]),
    ({"job": "savepoint", "table": "t", "version": 1, "target_logical_date": "2026-01-01"}, ["exactly one"]),
    ({"job": "widen", "wide": WIDE, "versions": {"s9": 1}}, ["versions given for ['s9']"]),
    ({"job": "widen", "wide": {**WIDE, "aggregations": {"a": "avg"}}}, ["unknown aggregate 'avg'"]),
])
def test_a_bad_value_names_the_field_the_value_and_what_is_allowed(data, named):
    with pytest.raises(ConfigError) as error:
        parse_spec(data)
    assert all(part in str(error.value) for part in named), str(error.value)


def test_unknown_keys_and_jobs_are_refused():
    misspelt = r"unknown option\(s\) \['max_delete_fracton'\] \(did you mean 'max_delete_fraction'\?\)"
    with pytest.raises(ConfigError, match=misspelt):
        parse_spec({"job": "sync", "changes": "c", "table": "t", "consumer": "c", "primary_key": ["id"],
                    "to_version": 1, "max_delete_fracton": 0.1})
    with pytest.raises(ConfigError, match="Unknown job 'sink'"):
        parse_spec({"job": "sink"})
    with pytest.raises(ConfigError, match="cannot run job 'diff'"):
        SyncSpec.from_dict({"job": "diff"})


def test_operator_arguments_are_checked_unless_templated():
    SyncSpec.check_static(mode="{{ params.mode }}", max_delete_fraction=0.9, max_reject_fraction=None)
    with pytest.raises(ConfigError, match="mode='merge'"):
        SyncSpec.check_static(mode="merge", destination={"type": "{{ params.sink }}"})
    SnapshotSpec.check_static(name="{{ params.name }}", primary_key="id")
    BackfillSpec.check_static(logical_dates=object())  # an upstream task's output: known at run time
    with pytest.raises(ConfigError, match="primary_key=\\[\\]"):
        SnapshotSpec.check_static(name="c", primary_key=[])


def test_a_backfill_is_one_snapshot_per_date_in_date_order():
    spec = BackfillSpec(**IDENTITY, name="c", source=SOURCE, primary_key=["id"],
                        logical_dates=["2026-01-02T00:00:00Z", "2026-01-01T23:00:00-02:00", "2026-01-01"])
    runs = spec.snapshots()
    assert [type(r) for r in runs] == [SnapshotSpec] * 3
    assert [r.logical_date for r in runs] == ["2026-01-01", "2026-01-02T00:00:00Z", "2026-01-01T23:00:00-02:00"]
    assert runs[0].run_id == "r1#2026-01-01" and runs[0].name == "c"


def test_results_keep_their_xcom_keys():
    common = dict(table="snapshots/c", consumer="crm", mode="upsert", destination={"type": "sqlite"},
                  from_version=None, to_version=1, dry_run=False, planned={"upsert": 2}, resent=0, inputs=[],
                  committed=True, stats={"sent": 2}, outputs=[])
    sent = SyncResult(**common, delivery_s=0.5).to_dict()
    assert list(sent) == ["table", "consumer", "mode", "destination", "from_version", "to_version", "dry_run",
                          "planned", "resent", "inputs", "committed", "stats", "delivery_s", "outputs"]
    planned = SyncResult(**{**common, "dry_run": True, "committed": False}, plan={"name": "plans/crm"}).to_dict()
    assert "plan" in planned and "delivery_s" not in planned and "run" not in planned


SAME_INSTANT = ["2026-01-02T00:00:00+00:00", "2026-01-02T00:00:00Z", "2026-01-02T01:00:00+01:00",
                "2026-01-01T19:00:00-05:00", "2026-01-02T00:00:00", "2026-01-02", date(2026, 1, 2),
                datetime(2026, 1, 2, tzinfo=timezone.utc), datetime(2026, 1, 2, 1, tzinfo=timezone(timedelta(hours=1)))]


@pytest.mark.parametrize("spelling", SAME_INSTANT, ids=str)
def test_logical_dates_are_instants_however_spelt(spelling):
    assert parse_logical_date(spelling) == datetime(2026, 1, 2, tzinfo=timezone.utc)
    recorded = {"2026-01-01T00:00:00Z": {"version": 0}, "2026-01-02T00:00:00+00:00": {"version": 1}}
    assert recorded_for(recorded, spelling if isinstance(spelling, str) else spelling.isoformat()) == {"version": 1}


def test_instant_order_is_not_text_order():
    # As text "2026-01-02T00:30:00+01:00" sorts after "2026-01-02T00:00:00+00:00"; as instants it is earlier.
    assert parse_logical_date("2026-01-02T00:30:00+01:00") < parse_logical_date("2026-01-02T00:00:00+00:00")
    assert recorded_for({"2026-01-02T00:00:00+00:00": {}}, "2026-01-02T00:00:01Z") is None


def test_a_logical_date_that_is_not_a_date_is_a_config_error():
    with pytest.raises(ConfigError, match="Logical date 'yesterday' is not an ISO date"):
        parse_logical_date("yesterday")


def test_commit_metadata_is_parsed_one_way():
    assert parse_commit_metadata('{"logical_date": "2026-01-02", "job": "snapshot"}') == {
        "logical_date": "2026-01-02", "job": "snapshot"}
    assert parse_commit_metadata(None) == {} and parse_commit_metadata("") == {}
    assert parse_commit_metadata("written by hand") == {"text": "written by hand"}
    assert parse_commit_metadata("[1, 2]") == {"text": "[1, 2]"}


def test_layout():
    wh = Warehouse("s3a://lake/wh/")
    assert wh.uri("/snapshots/c/") == "s3a://lake/wh/snapshots/c"
    assert wh.changes("crm", "snapshots/c", None, 3) == "s3a://lake/wh/changes/crm/snapshots/c/full-v3"
    assert (table_rel("customers"), table_rel("/wide/orders/")) == ("snapshots/customers", "wide/orders")
    with pytest.raises(ConfigError, match="no warehouse root"):
        _ = SnapshotSpec(name="c", source=SOURCE, primary_key=["id"]).lake


def test_the_contract_imports_neither_pyspark_nor_airflow():
    code = "import sys, spark_jobs.contract; print(sorted(m for m in ('pyspark', 'airflow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
