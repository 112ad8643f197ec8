"""The wide_orders example DAG: loads cleanly, and one logical date runs end to end through Airflow
(snapshots -> partial update -> left join -> diff -> SQLite) with every Spark job a client of a real
Spark Connect server, and Airflow's OpenLineage listener on: the column lineage of its events leads
from the destination field back to the source file's column. What spark-submit itself adds (argv,
--py-files, a JVM per job) is proven by the demo DAG's tests in both modes; here it would cost seven
cold JVMs for the same DAG logic."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

from tests_common.openlineage import completed_events, run_dag_with_openlineage
from tests_common.paths import REPO

DAG_FILE = REPO / "dags" / "wide_orders.py"


def _load_dag_module():
    spec = importlib.util.spec_from_file_location("wide_orders_under_test", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dag_file_loads_without_import_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    dag = bag.dags["wide_orders"]
    assert {t.task_id for t in dag.tasks} == {
        "extract_sources", "order_detail.snapshot_order_info", "order_detail.snapshot_order_address",
        "order_detail.snapshot_customer", "order_detail.full_join_orders", "order_detail.left_join_customer",
        "order_detail.publish_diff", "order_detail.publish_sink"}


def test_one_logical_date_end_to_end_with_column_lineage(airflow_db, spark_default_on_connect, tmp_path,
                                                          monkeypatch):
    monkeypatch.setenv("ARETL_WIDE_DIR", str(tmp_path / "wide_orders"))
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__WAREHOUSE", str(tmp_path / "warehouse"))
    module = _load_dag_module()

    events_file = tmp_path / "openlineage.jsonl"
    states = run_dag_with_openlineage(DAG_FILE, "wide_orders", "2026-01-01T00:00:00+00:00", events_file)
    assert set(states.values()) == {"success"}, states

    with sqlite3.connect(module.DESTINATION) as conn:
        rows = conn.execute("SELECT order_id, product_type, start_city_name, customer_name, customer_level, "
                            "binlog_time FROM order_detail ORDER BY order_id").fetchall()
    assert rows == [
        ("o1", "taxi", "Beijing", "Ada", "gold", 100),
        ("o2", "bike", "Hangzhou", "Ada", "gold", 100),
        ("o3", "taxi", None, None, None, 100),  # no address and no customer c2 yet
    ]
    _column_lineage_reaches_the_source(module, completed_events(events_file), tmp_path / "warehouse")


def _column_lineage_reaches_the_source(module, events: dict, warehouse: Path) -> None:
    """From the destination field back to the CSV column, one OpenLineage event per hop, as a lineage
    backend would walk it: sink -> diff -> wide table (partial update, left join) -> snapshot -> source."""
    def columns_of(task: str, namespace: str, name: str) -> dict:
        (output,) = [o for o in events[f"wide_orders.order_detail.{task}"]["outputs"]
                     if (o["namespace"], o["name"]) == (namespace, name)]
        return output["facets"]["columnLineage"]["fields"]

    def source_of(fields: dict, field: str) -> tuple[str, str, str]:
        (only,) = fields[field]["inputFields"]
        return only["name"], only["field"], only["transformations"][0]["subtype"]

    sink_out = events["wide_orders.order_detail.publish_sink"]["outputs"]
    (crm,) = [(o["namespace"], o["name"]) for o in sink_out]
    assert crm == ("sqlite", f"{Path(module.DESTINATION).resolve()}.order_detail")
    changes, field, _ = source_of(columns_of("publish_sink", *crm), "start_city_name")
    assert field == "start_city_name" and changes.startswith(f"{warehouse}/changes/app/wide/order_detail")
    wide, field, _ = source_of(columns_of("publish_diff", "file", changes), field)
    assert (wide, field) == (f"{warehouse}/wide/order_detail", "start_city_name")
    wide_fields = columns_of("full_join_orders", "file", wide)
    snapshot, field, kind = source_of(wide_fields, field)
    assert (snapshot, field, kind) == (f"{warehouse}/snapshots/order_address", "start_city_name", "IDENTITY")
    source, field, _ = source_of(columns_of("snapshot_order_address", "file", snapshot), field)
    assert (source, field) == (module.csv_path("order_address"), "start_city_name")
    # a column two sources fill by partial update lists both; a left-joined one says how it is joined
    assert sorted(i["name"] for i in wide_fields["binlog_time"]["inputFields"]) == [
        f"{warehouse}/snapshots/order_address", f"{warehouse}/snapshots/order_info"]
    joined = columns_of("left_join_customer", "file", wide)["customer_name"]
    assert joined["inputFields"][0]["name"] == f"{warehouse}/snapshots/customer"
    assert "reverse index on customer_id" in joined["transformationDescription"]
