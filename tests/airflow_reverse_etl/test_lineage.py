"""OpenLineage facets and Asset outlets of the operators, from a real job result: datasets named by
storage path, the Delta version as the dataset version facet; snapshot Assets connect DAGs."""

from airflow_reverse_etl.lineage import asset_uri, dataset_name
from airflow_reverse_etl.operators.history import SnapshotHistoryOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from spark_jobs.entry import run
from tests_common.jobs import write_parquet


def test_facets_on_complete_name_storage_paths_and_versions(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a")], "id INT, v STRING")
    op = SnapshotOperator(task_id="snap", name="items", primary_key="id", warehouse=warehouse,
                          source={"format": "parquet", "path": src})
    spec, _ = op.build_spec({})
    result = run(spark, {**spec.to_dict(), "job": op.job, "warehouse": warehouse,
                         "logical_date": "2026-06-01T00:00:00+00:00", "run_id": "r"})
    op._result = result  # what execute() keeps from the job it ran

    lineage = op.get_openlineage_facets_on_complete(task_instance=None)
    (source,), (target,) = lineage.inputs, lineage.outputs
    assert (source.namespace, source.name) == ("file", src)
    assert (target.namespace, target.name) == ("file", f"{warehouse}/snapshots/items")
    assert target.facets["version"].datasetVersion == "0"
    assert "version" not in source.facets  # a Parquet path has no version

    assert [a.uri for a in op.outlets] == [f"file://{warehouse}/snapshots/items"]
    history = SnapshotHistoryOperator(task_id="h", table="items", warehouse=warehouse)
    assert [a.uri for a in history.outlets] == [f"file://{warehouse}/history/items"]
    templated = SnapshotOperator(task_id="t", name="{{ params.name }}", primary_key="id", warehouse=warehouse,
                                 source={"format": "parquet", "path": src})
    assert templated.outlets == []  # only known at run time: no Asset rather than a wrong one


def test_dataset_names_follow_openlineage_conventions():
    assert dataset_name("s3a://lake/wh/snapshots/x") == ("s3://lake", "wh/snapshots/x")
    assert dataset_name("hdfs://nn:8020/wh/t") == ("hdfs://nn:8020", "wh/t")
    assert dataset_name("file:///data/wh/t") == ("file", "/data/wh/t")
    assert asset_uri("/data/wh/t") == "file:///data/wh/t"
    assert asset_uri("s3a://lake/wh/t") == "s3://lake/wh/t"


def test_asset_example_dag_is_scheduled_on_the_snapshot_asset(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    from tests_common.paths import REPO

    bag = DagBag(str(REPO / "dags" / "snapshot_asset_history.py"))
    assert not bag.import_errors
    produced = {a.uri for a in bag.dags["products_snapshot"].get_task("snapshot_products").outlets}
    consumed = {a.uri for a in bag.dags["products_history"].timetable.asset_condition.objects}
    assert len(produced) == 1 and produced == consumed


def test_sink_destinations_are_datasets_named_like_openlineage_without_credentials(monkeypatch):
    import json

    from airflow_reverse_etl.operators.sink import SinkOperator

    monkeypatch.setenv("AIRFLOW_CONN_CRM_DB", json.dumps({
        "conn_type": "postgres", "host": "db.internal", "port": 6543, "schema": "crm", "login": "etl",
        "password": "pg-secret"}))
    monkeypatch.setenv("AIRFLOW_CONN_EVENTS", json.dumps({
        "conn_type": "reverse_etl_kafka", "host": "unused", "password": "sasl-secret",
        "extra": {"bootstrap.servers": "b1:9092,b2:9092", "sasl.mechanism": "PLAIN"}}))
    monkeypatch.setenv("AIRFLOW_CONN_API", json.dumps({
        "conn_type": "reverse_etl_http", "host": "api.example.com", "schema": "https", "port": 8443,
        "login": "u", "password": "http-secret"}))
    monkeypatch.setenv("AIRFLOW_CONN_SF", json.dumps({
        "conn_type": "salesforce", "extra": {"consumer_key": "ck", "consumer_secret": "sf-secret",
                                             "instance_url": "https://acme.my.salesforce.com"}}))
    monkeypatch.setenv("AIRFLOW_CONN_HS", json.dumps({"conn_type": "reverse_etl_hubspot", "password": "hs-secret"}))
    monkeypatch.setenv("AIRFLOW_CONN_BZ", json.dumps({"conn_type": "reverse_etl_braze", "password": "bz-secret",
                                                      "host": "https://rest.fra-01.braze.eu"}))
    changes = {"changes": "changes/crm/snapshots/c/v1-v2", "changes_uri": "/wh/changes/crm/snapshots/c/v1-v2",
               "table": "snapshots/c", "consumer": "crm", "primary_key": ["id"], "to_version": 2}

    def sink(destination, conn_id=None):
        return SinkOperator(task_id="sync", changes=changes, destination=destination, destination_conn_id=conn_id)

    cases = {
        ("postgres://db.internal:6543", "crm.sales.contacts"): sink({"type": "postgres", "table": "sales.contacts"},
                                                                    "crm_db"),
        ("postgres://db.internal:6543", "crm.public.contacts"): sink({"type": "postgres", "table": "contacts"},
                                                                     "crm_db"),
        ("kafka://b1:9092", "customers"): sink({"type": "kafka", "topic": "customers"}, "events"),
        ("https://api.example.com:8443", "/v1/contacts"): sink({"type": "http", "endpoint": "v1/contacts"}, "api"),
        ("https://hooks.example.com", "/in"): sink({"type": "http", "url": "https://user:hook-pass@hooks.example.com/in?token=tok-secret"}),
        ("salesforce://acme.my.salesforce.com", "Contact"): sink(
            {"type": "salesforce", "object": "Contact", "external_id_field": "Customer_Id__c"}, "sf"),
        ("hubspot://api.hubapi.com", "companies"): sink(
            {"type": "hubspot", "object_type": "companies", "id_property": "domain"}, "hs"),
        ("braze://rest.fra-01.braze.eu", "users"): sink({"type": "braze"}, "bz"),
    }
    for expected, op in cases.items():
        # a failed run (no result yet) still names what it read and meant to write
        lineage = op.get_openlineage_facets_on_failure(task_instance=None)
        assert [(d.namespace, d.name) for d in lineage.outputs] == [expected]
        assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", changes["changes_uri"])]
        secrets = ("pg-secret", "sasl-secret", "http-secret", "hook-pass", "tok-secret", "sf-secret", "hs-secret",
                   "bz-secret")
        assert not any(secret in repr(lineage) for secret in secrets)


def test_a_sinks_asset_alias_names_the_destination_as_the_sync_job_does():
    """The Airflow side names a destination's Asset alias by the contract's one choice of its target
    (:func:`~spark_jobs.contract.destinations.destination_target`), the one the sync job labels its run
    history rows with: a URL without its user:password."""
    from airflow_reverse_etl.operators.sink import destination_alias
    from spark_jobs.contract.destinations import destination_label

    for destination, conn_id, alias in [
        ({"type": "postgres", "table": "sales.contacts", "database": "crm"}, "crm_db",
         "reverse_etl:sink:postgres:crm.sales.contacts@crm_db"),
        ({"type": "kafka", "topic": "customers"}, None, "reverse_etl:sink:kafka:customers"),
        ({"type": "http", "url": "https://user:hook-pass@hooks.example.com/in"}, None,
         "reverse_etl:sink:http:https://hooks.example.com/in"),
    ]:
        assert destination_alias(destination, conn_id, "sync").name == alias
        assert destination_label(destination).partition(":")[2] in alias


def test_failed_snapshot_still_reports_the_table_it_meant_to_write(warehouse):
    op = SnapshotOperator(task_id="snap", name="items", primary_key="id", warehouse=warehouse,
                          source={"format": "parquet", "path": "/nowhere"})
    lineage = op.get_openlineage_facets_on_failure(task_instance=None)
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("file", f"{warehouse}/snapshots/items")]
    assert lineage.outputs[0].facets == {}  # no version: nothing was written
