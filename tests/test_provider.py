"""Packaging and import-time contracts: the provider entry point, DAG files that import cleanly, and
the Airflow side never importing pyspark (nor the Spark side Airflow) at import time."""

import json
import subprocess
import sys
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
