"""Packaging and import-time contracts: the provider entry point, DAG files that import cleanly, and
the Airflow side never importing pyspark (nor the Spark side Airflow) at import time."""

import json
import os
import subprocess
import sys
from importlib import import_module
from importlib.metadata import entry_points
from tests_common.paths import REPO



def test_provider_entry_point_lists_importable_modules():
    (ep,) = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_reverse_etl")]
    info = ep.load()()
    assert info["package-name"] == "airflow-reverse-etl"
    modules = [m for section in ("operators", "hooks", "sensors") for group in info.get(section, [])
               for m in group["python-modules"]]
    assert "airflow_reverse_etl.operators.snapshot" in modules
    for module in modules:
        import_module(module)


def test_sides_do_not_import_each_other_at_import_time():
    code = """
import json, pkgutil, importlib, sys
import airflow_reverse_etl
names = [m.name for m in pkgutil.walk_packages(airflow_reverse_etl.__path__, 'airflow_reverse_etl.')]
for name in names:
    importlib.import_module(name)
airflow_side = 'pyspark' in sys.modules
import spark_jobs
spark_names = [m.name for m in pkgutil.walk_packages(spark_jobs.__path__, 'spark_jobs.')]
print(json.dumps({"airflow_side_imported_pyspark": airflow_side, "modules": names + spark_names}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["airflow_side_imported_pyspark"] is False
    # The Spark side must not depend on Airflow: check its sources rather than sys.modules, since
    # the Airflow side imported above already loaded Airflow in that interpreter.
    for path in (REPO / "spark_jobs").rglob("*.py"):
        text = path.read_text()
        assert "import airflow" not in text and "from airflow" not in text, path


def test_dag_files_import_without_errors(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert "reverse_etl_demo" in bag.dag_ids


def test_connection_types_load_in_airflow_with_their_forms_and_hooks(monkeypatch):
    """Airflow's own ProvidersManager reads the destination connection types (form fields, labels) and
    resolves a connection of each type to its hook; the Spark types are the apache-spark provider's."""
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import BaseHook
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    hooks = ProvidersManagerTaskRuntime().hooks
    assert hooks["reverse_etl_http"].hook_class_name == "airflow_reverse_etl.hooks.destination.HttpDestinationHook"
    assert hooks["reverse_etl_kafka"].hook_class_name == "airflow_reverse_etl.hooks.destination.KafkaDestinationHook"
    for kind in ("HubSpot", "Braze"):
        assert hooks[f"reverse_etl_{kind.lower()}"].hook_class_name == \
            f"airflow_reverse_etl.hooks.destination.{kind}DestinationHook"
    assert hooks["spark"].hook_class_name.endswith("SparkSubmitHook")  # what SparkJobHook submits with
    assert hooks["spark_connect"].hook_class_name.endswith("SparkConnectHook")  # its Spark Connect mode

    manager = ProvidersManager()
    assert manager.field_behaviours["reverse_etl_kafka"]["relabeling"]["host"] == "Bootstrap servers"
    assert manager.field_behaviours["reverse_etl_http"]["relabeling"]["password"] == "Password or bearer token"
    widgets = manager.connection_form_widgets
    for field in ("reverse_etl_http__auth_type", "reverse_etl_http__headers",
                  "reverse_etl_kafka__security.protocol", "reverse_etl_kafka__sasl.mechanism"):
        assert f"extra__{field}" in widgets, field

    monkeypatch.setenv("AIRFLOW_CONN_CRM_API", json.dumps({
        "conn_type": "reverse_etl_http", "host": "https://crm.example.com", "password": "s3cr3t-token",
        "extra": {"auth_type": "bearer", "headers": {"X-Api-Key": "k3y-value"}}}))
    monkeypatch.setenv("AIRFLOW_CONN_EVENTS", json.dumps({
        "conn_type": "reverse_etl_kafka", "host": "b1:9092,b2:9092", "login": "svc", "password": "sasl-pass",
        "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}}))
    http_settings, http_secrets = BaseHook.get_connection("crm_api").get_hook().get_conn()
    assert http_settings["connection"]["host"] == "https://crm.example.com"
    assert "s3cr3t-token" in http_secrets.values() and "s3cr3t-token" not in json.dumps(http_settings)
    kafka_settings, kafka_secrets = BaseHook.get_connection("events").get_hook().get_conn()
    assert kafka_settings["connection"]["extra_keys"] == ["sasl.mechanism", "security.protocol"]
    assert json.loads(kafka_secrets["ARETL_SECRET_DESTINATION_EXTRA"])["sasl.mechanism"] == "PLAIN"


def test_kafka_connection_host_may_list_the_brokers():
    from spark_jobs.kafka_clients import brokers

    assert brokers("b1:9092,b2:9092", None) == "b1:9092,b2:9092"
    assert brokers("broker", None) == "broker:9092"
    assert brokers("broker", 19092) == "broker:19092"


def test_extra_links_are_registered_and_on_every_job_operator():
    from airflow.providers_manager import ProvidersManager

    from airflow_reverse_etl.operators.snapshot import SnapshotOperator

    names = {"airflow_reverse_etl.links.SparkApplicationLink", "airflow_reverse_etl.links.JobResultLink",
             "airflow_reverse_etl.links.JobSpecLink"}
    assert names <= set(ProvidersManager().extra_links_class_names)
    assert {link.name for link in SnapshotOperator.operator_extra_links} == {
        "Spark application", "Job result", "Job spec"}


def test_tasks_get_the_openlineage_listener_with_the_repository_on_the_path():
    """Run from the repository root with it on PYTHONPATH (as the tests and their subprocesses do), the
    task SDK registers the OpenLineage listener. Its plugin loader stops at a repeated plugin name, so
    a second copy of our plugin's entry point (a build leftover .egg-info in the root) silently dropped
    the listener and tasks emitted no OpenLineage events (scripts/bootstrap.sh removes it)."""
    code = """
import json
from airflow.sdk.listener import get_listener_manager
print(json.dumps([type(p).__name__ for p in get_listener_manager().pm.get_plugins()]))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "console"})}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env=env)
    listeners = json.loads(out.stdout.strip().splitlines()[-1])
    assert "OpenLineageListener" in listeners, (listeners, out.stderr[-3000:])
