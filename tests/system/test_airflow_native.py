"""What Airflow shows of a reverse-ETL run, from one run of the demo DAG under ``dag.test()`` (jobs
as clients of the shared Spark Connect server): the Asset events of the tables each task wrote carry
the Delta version and the counts as event metadata, the extra links stored for the UI point at the
run's Spark application and job files, the OpenLineage parent job handed to Spark names the task,
and the sink's OpenLineage output is its destination."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pendulum

from tests_common.demo import load_demo

HISTORY = "http://spark-history.example:18080"


def asset_events(run_id: str) -> dict[str, dict]:
    """The Asset events the run's tasks emitted: {asset URI: event metadata}."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetModel.uri, AssetEvent.extra).join(AssetEvent.asset)
                               .where(AssetEvent.source_run_id == run_id)).all()
    return {uri: extra for uri, extra in rows}


def test_demo_run_shows_asset_metadata_links_and_lineage(airflow_db, monkeypatch, tmp_path, spark_connect_server):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_connect_server.airflow_connection())
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__SPARK_HISTORY_URL", HISTORY)
    demo = load_demo(monkeypatch, tmp_path)
    snapshot, sync = demo.dag.get_task("snapshot_customers"), demo.dag.get_task("sync_crm")
    snapshot.openlineage_inject_parent_job_info = True
    contexts = {}
    snapshot.pre_execute = lambda context: contexts.update(snapshot=context)

    run = demo.dag.test(logical_date=pendulum.parse("2026-01-01"))
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert {str(ti.state) for ti in tis.values()} == {"success"}

    warehouse = tmp_path / "warehouse"
    events = asset_events(run.run_id)
    crm = f"sqlite:{Path(demo.CRM_DATABASE).resolve()}.crm_contacts"
    assert events == {
        f"file://{warehouse}/snapshots/customers": {"version": 0, "rows": 5, "inserted": 5, "updated": 0,
                                                    "deleted": 0},
        f"file://{warehouse}/changes/crm/snapshots/customers": {"version": 0, "from_version": None, "insert": 5,
                                                                "update": 0, "delete": 0},
        crm: {"version": 0, "from_version": None, "sent": 5, "inserted": 5, "updated": 0, "deleted": 0,
              "rejected": 0},
    }
    # the diff's change feed is a declared outlet; the sink's destination comes through its alias
    assert [a.uri for a in demo.dag.get_task("diff_customers").outlets] == [
        f"file://{warehouse}/changes/crm/snapshots/customers"]
    assert [a.name for a in sync.outlets] == [f"reverse_etl:sink:sqlite:{demo.CRM_DATABASE}.crm_contacts"]

    # extra links: stored by the worker as XComs, which the UI shows
    result = tis["snapshot_customers"].xcom_pull(task_ids="snapshot_customers")
    links = {key: tis["snapshot_customers"].xcom_pull(task_ids="snapshot_customers", key=key)
             for key in ("_link_SparkApplicationLink", "_link_JobResultLink", "_link_JobSpecLink")}
    app_id, session_id = result["spark"]["application_id"], result["spark"]["session_id"]
    assert app_id and links["_link_SparkApplicationLink"] == (
        f"{HISTORY}/history/{app_id}/connect/session/?id={session_id}")
    # without a history server, the link is the Connect server's own page of the job's session
    with urllib.request.urlopen(result["spark"]["ui_url"], timeout=30) as page:
        assert session_id in page.read().decode()
    assert links["_link_JobResultLink"] == f"file://{result['job_dir']}/result.json"
    assert links["_link_JobSpecLink"] == f"file://{result['job_dir']}/spec.json"
    spec = json.loads(Path(result["job_dir"], "spec.json").read_text())
    assert spec["job"] == "snapshot" and spec["run_id"] == run.run_id
    # the sync plans from the diff's counts, which the operator handed on with the change set version
    sync_result = tis["sync_crm"].xcom_pull(task_ids="sync_crm")
    sync_spec = json.loads(Path(sync_result["job_dir"], "spec.json").read_text())
    assert (sync_spec["counts"], sync_spec["counted_changes"], sync_spec["counted_version"]) == (
        {"insert": 5, "update": 0, "delete": 0}, "changes/crm/snapshots/customers/full-v0", 0)
    assert sync_result["planned"] == {"upsert": 5}

    # OpenLineage parent job, as the apache-spark provider hands it to Spark
    conf = snapshot.job_spark_conf(contexts["snapshot"])
    assert conf["spark.openlineage.parentJobName"] == "reverse_etl_demo.snapshot_customers"
    assert uuid.UUID(conf["spark.openlineage.parentRunId"])
    assert conf["spark.openlineage.rootParentJobName"] == "reverse_etl_demo"

    # the sink's OpenLineage datasets: the change set and the snapshot version read, and the CRM table
    sync._result = tis["sync_crm"].xcom_pull(task_ids="sync_crm")
    lineage = sync.get_openlineage_facets_on_complete(task_instance=None)
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        ("sqlite", f"{Path(demo.CRM_DATABASE).resolve()}.crm_contacts")]
    assert [(d.name, d.facets["version"].datasetVersion) for d in lineage.inputs] == [
        (f"{warehouse}/changes/crm/snapshots/customers/full-v0", "0"), (f"{warehouse}/snapshots/customers", "0")]
