"""OpenLineage facets and Asset outlets of the operators, from a real job result: datasets named by
storage path, the Delta version as the dataset version facet; snapshot Assets connect DAGs."""

from airflow_reverse_etl.lineage import asset_uri, dataset_name
from airflow_reverse_etl.operators.history import SnapshotHistoryOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from spark_jobs.entry import run
from tests.support.jobs import write_parquet


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

    from tests.support.paths import REPO

    bag = DagBag(str(REPO / "dags" / "snapshot_asset_history.py"))
    assert not bag.import_errors
    produced = {a.uri for a in bag.dags["products_snapshot"].get_task("snapshot_products").outlets}
    consumed = {a.uri for a in bag.dags["products_history"].timetable.asset_condition.objects}
    assert len(produced) == 1 and produced == consumed
